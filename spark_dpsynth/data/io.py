"""Reading the sensitive table and writing outputs: CSV, Parquet, Delta Lake files and catalog tables.

Sources (:func:`read_input`):

* a path with a format: ``csv`` (header row, gzip allowed, every column read as a string), ``parquet`` or
  ``delta``; without a format it is guessed from the path (a directory holding ``_delta_log`` is Delta, a name
  ending in ``.parquet`` or another directory is Parquet, anything else CSV);
* a catalog table ``db.t`` (or ``catalog.db.t``), read with ``spark.read.table``.

The outputs of a run are staged and published all together or not at all by
:class:`spark_dpsynth.data.publish.OutputStage` (claims, locks, rollback and the recovery of dead runs' staging
directories; docs/design.md section 1.7); :func:`write_frame` and :func:`write_single_csv` write into its staging
paths.

Directory outputs must be on a file system the driver can rename in: a local disk, a shared mount (NFS), or on
Databricks a Unity Catalog volume (``/Volumes/...``). Data on object stores goes to a catalog table
(``--output-table``); a Delta table is then replaced in one Delta transaction (its history is kept).

Everything here uses the DataFrame API and the driver's file system only, so it also runs on Spark Connect.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from typing import TYPE_CHECKING

from spark_dpsynth.errors import InvalidParameterError, SparkSetupError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

__all__ = [
    "FORMATS",
    "check_table_name",
    "guess_format",
    "is_delta_path",
    "local_path",
    "read_input",
    "read_output",
    "table_exists",
    "write_frame",
    "write_single_csv",
]

FORMATS = ("csv", "parquet", "delta")
"""The file formats read and written."""

_PART = r"(?:[A-Za-z_][A-Za-z0-9_]*|`[^`]+`)"
_TABLE_NAME = re.compile(rf"^{_PART}(?:\.{_PART}){{0,2}}$")


# --------------------------------------------------------------------------------------------- paths and formats


def is_local(path: str) -> bool:
    """True for a path on the driver's file system (no URI scheme, or ``file:``)."""
    return "://" not in path or path.startswith("file:")


def local_path(path: str) -> str:
    """``path`` without a ``file:`` / ``file://`` prefix."""
    if path.startswith("file://"):
        return path[len("file://") :]
    return path[len("file:") :] if path.startswith("file:") else path


def is_delta_path(path: str) -> bool:
    """True when ``path`` is a local directory holding a Delta transaction log (``_delta_log``)."""
    return is_local(path) and os.path.isdir(os.path.join(local_path(path), "_delta_log"))


def guess_format(path: str) -> str:
    """The format of the data at ``path``: ``"delta"``, ``"parquet"`` or ``"csv"``.

    Raises:
        InvalidParameterError: a remote directory-like path whose format cannot be told from its name.
    """
    lower = path.rstrip("/").lower()
    if is_delta_path(path):
        return "delta"
    if lower.endswith(".parquet"):
        return "parquet"
    if lower.endswith((".csv", ".csv.gz", ".tsv", ".txt", ".gz")):
        return "csv"
    if is_local(path):
        return "parquet" if os.path.isdir(local_path(path)) else "csv"
    raise InvalidParameterError(f"cannot tell the format of {path}; give --format one of {list(FORMATS)}")


def check_table_name(name: str, what: str = "table") -> str:
    """Return ``name`` if it is a table identifier ``t``, ``db.t`` or ``catalog.db.t``, else raise.

    Raises:
        InvalidParameterError: ``name`` is not such an identifier.
    """
    if not isinstance(name, str) or not _TABLE_NAME.match(name):
        raise InvalidParameterError(
            f"{what} must be a table name like db.table or catalog.db.table, got {name!r}"
        )
    return name


def _check_format(fmt: str | None) -> None:
    if fmt is not None and fmt not in FORMATS:
        raise InvalidParameterError(f"format must be one of {list(FORMATS)}, got {fmt!r}")


def _delta_unavailable(err: BaseException) -> bool:
    text = str(err)
    return ("DATA_SOURCE_NOT_FOUND" in text or "ClassNotFoundException" in text) and "delta" in text.lower()


def _delta_error() -> SparkSetupError:
    return SparkSetupError(
        "Delta Lake is not available in this Spark session: install delta-spark (pip install "
        "'spark_dpsynth[delta]') and let the job start Spark, or start Spark with the Delta jars "
        "(spark-submit --packages io.delta:delta-spark_4.1_2.13:<version>)"
    )


# --------------------------------------------------------------------------------------------- reading


def read_input(
    spark: SparkSession,
    *,
    path: str | None = None,
    table: str | None = None,
    fmt: str | None = None,
    delimiter: str = ",",
) -> DataFrame:
    """Read the sensitive table from a path or a catalog table (no data is read until an action runs).

    Args:
        spark: a classic or Spark Connect session.
        path: a file or directory (local or a URI such as ``s3://``, ``abfss://``, ``dbfs:/``).
        table: a catalog table ``db.t`` or ``catalog.db.t``; exactly one of ``path`` and ``table``.
        fmt: ``"csv"``, ``"parquet"`` or ``"delta"``; None guesses from the path (see :func:`guess_format`).
            Ignored for a table (the catalog knows its format).
        delimiter: the CSV field delimiter (one character).

    Returns:
        The table as a DataFrame; a CSV has every column as a string.

    Raises:
        InvalidParameterError: neither or both of ``path`` and ``table``, a bad table name or format, or a
            local path that does not exist.
        SparkSetupError: the data is Delta and the session has no Delta Lake.
    """
    if (path is None) == (table is None):
        raise InvalidParameterError("give exactly one input: a path (--input) or a table (--input-table)")
    _check_format(fmt)
    if table is not None:
        return spark.read.table(check_table_name(table, "input table"))
    assert path is not None
    if is_local(path) and not os.path.exists(local_path(path)):
        raise InvalidParameterError(f"input not found: {path}")
    fmt = fmt or guess_format(path)
    if fmt == "csv":
        return spark.read.csv(path, header=True, inferSchema=False, sep=delimiter, multiLine=False)
    if fmt == "parquet":
        return spark.read.parquet(path)
    try:
        df = spark.read.format("delta").load(path)
        df.schema  # noqa: B018 - resolves the source now (a schema lookup, no data): fails here without Delta
    except Exception as err:
        if _delta_unavailable(err):
            raise _delta_error() from err
        raise
    return df


def read_output(
    spark: SparkSession, *, path: str | None = None, table: str | None = None, fmt: str
) -> DataFrame:
    """Read back an output written by :func:`write_frame` (a directory in ``fmt``) or a catalog table.

    Raises:
        InvalidParameterError: a bad format or table name.
        SparkSetupError: the output is Delta and the session has no Delta Lake.
    """
    _check_format(fmt)
    if table is not None:
        return spark.read.table(check_table_name(table, "output table"))
    assert path is not None
    if fmt == "csv":
        return spark.read.csv(path, header=True, inferSchema=False)
    return read_input(spark, path=path, fmt=fmt)


# --------------------------------------------------------------------------------------------- writing


def write_frame(df: DataFrame, path: str, fmt: str, *, mode: str = "error") -> None:
    """Write ``df`` as a directory in ``fmt`` (CSV with a header; an empty field is an empty value).

    Raises:
        InvalidParameterError: a bad format.
        SparkSetupError: ``fmt`` is Delta and the session has no Delta Lake.
    """
    _check_format(fmt)
    writer = df.write.mode(mode)
    try:
        if fmt == "csv":
            writer.csv(path, header=True, emptyValue="")
        else:
            writer.format(fmt).save(path)
    except Exception as err:
        if fmt == "delta" and _delta_unavailable(err):
            raise _delta_error() from err
        raise


def write_single_csv(df: DataFrame, path: str) -> None:
    """Write ``df`` as one CSV file with a header at the local ``path`` (through one Spark task).

    Meant for release-sized or laptop-sized synthetic data; on a cluster prefer a table or a Parquet directory.
    """
    target = local_path(path)
    parts = target + ".parts"
    if os.path.exists(parts):
        shutil.rmtree(parts)
    try:
        df.coalesce(1).write.mode("error").csv(parts, header=True, emptyValue="")
        files = sorted(f for f in os.listdir(parts) if f.startswith("part-"))
        if len(files) != 1:
            raise SparkSetupError(f"expected one CSV part file in {parts}, found {len(files)}")
        os.replace(os.path.join(parts, files[0]), target)
    finally:
        shutil.rmtree(parts, ignore_errors=True)


def table_exists(spark: SparkSession, name: str) -> bool:
    """True when the catalog holds the table ``name`` (a catalog lookup, no data read)."""
    return bool(spark.catalog.tableExists(check_table_name(name)))
