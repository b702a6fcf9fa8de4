"""Reading the sensitive table and writing outputs: CSV, Parquet, Delta Lake files and catalog tables.

Sources (:func:`read_input`):

* a path with a format: ``csv`` (header row, gzip allowed, every column read as a string), ``parquet`` or
  ``delta``; without a format it is guessed from the path (a directory holding ``_delta_log`` is Delta, a name
  ending in ``.parquet`` or another directory is Parquet, anything else CSV);
* a catalog table ``db.t`` (or ``catalog.db.t``), read with ``spark.read.table``.

Outputs are written **atomically**: every output of a run is first written to a staging location next to its
destination (a hidden directory ``DIR/.spark-dpsynth-staging-*`` for files, a table ``db.t__spark_dpsynth_tmp_*``
for a catalog table) and renamed into place only after all of them were computed (:class:`OutputStage`). A failed
run removes its staging location and leaves the previous outputs untouched; a reader never sees a half-written
output. An existing output is replaced only with ``overwrite=True`` (``--overwrite``); otherwise
:class:`~spark_dpsynth.errors.OutputExistsError` is raised before anything is computed.

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
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from spark_dpsynth.errors import InvalidParameterError, OutputExistsError, SparkSetupError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

__all__ = [
    "FORMATS",
    "OutputStage",
    "atomic_path",
    "check_outputs_free",
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
_TMP_TABLE_SUFFIX = "__spark_dpsynth_tmp_"
_STAGING_PREFIX = ".spark-dpsynth-staging-"


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
    infer_schema: bool = False,
    schema: str | None = None,
) -> DataFrame:
    """Read the sensitive table from a path or a catalog table (no data is read until an action runs).

    Args:
        spark: a classic or Spark Connect session.
        path: a file or directory (local or a URI such as ``s3://``, ``abfss://``, ``dbfs:/``).
        table: a catalog table ``db.t`` or ``catalog.db.t``; exactly one of ``path`` and ``table``.
        fmt: ``"csv"``, ``"parquet"`` or ``"delta"``; None guesses from the path (see :func:`guess_format`).
            Ignored for a table (the catalog knows its format).
        delimiter: the CSV field delimiter (one character).
        infer_schema: CSV only: infer the column types with Spark's ``inferSchema`` (a pass over the file; the
            types are then treated as public schema metadata, docs/design.md section 2.8); False reads every
            column as a string.
        schema: CSV only: the declared schema as a Spark DDL string (``"age INT, name STRING"``); it wins over
            ``infer_schema`` and reads no data to find the types.

    Returns:
        The table as a DataFrame; a CSV has the declared or inferred types, else every column as a string.

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
        reader = spark.read
        if schema is not None:
            reader = reader.schema(schema)
        infer = infer_schema and schema is None
        return reader.csv(path, header=True, inferSchema=infer, sep=delimiter, multiLine=False)
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


def _replace(staged: str, final: str) -> None:
    """Move ``staged`` to ``final``, replacing what is there by two renames (never a half-written ``final``)."""
    old = None
    if os.path.lexists(final):
        if os.path.isdir(final) and not os.path.islink(final):
            old = os.path.join(
                os.path.dirname(final), f".{os.path.basename(final)}.old-{uuid.uuid4().hex[:8]}"
            )
            os.replace(final, old)
        # a file is replaced by the single atomic rename below
    os.replace(staged, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


@contextmanager
def atomic_path(path: str, *, overwrite: bool = False) -> Iterator[str]:
    """Yield a temporary path next to the local ``path``; move it to ``path`` when the block succeeds.

    Whatever the block writes at the temporary path (a file or a directory) replaces ``path`` in one rename;
    if the block raises, the temporary path is removed and ``path`` is left as it was.

    Raises:
        OutputExistsError: ``path`` exists and ``overwrite`` is False (raised before the block runs).
    """
    final = os.path.abspath(local_path(path))
    if os.path.lexists(final) and not overwrite:
        raise OutputExistsError(f"output exists: {path}; pass --overwrite (overwrite=True) to replace it")
    parent = os.path.dirname(final)
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".{os.path.basename(final)}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        yield tmp
        if not os.path.lexists(tmp):
            raise SparkSetupError(f"nothing was written for {path}")
        _replace(tmp, final)
    finally:
        if os.path.isdir(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
        elif os.path.lexists(tmp):
            os.remove(tmp)


def check_outputs_free(out_dir: str, names: list[str] | tuple[str, ...], *, overwrite: bool) -> None:
    """Raise if one of ``out_dir/name`` exists and ``overwrite`` is False (a file-system check, no Spark).

    Raises:
        OutputExistsError: naming the existing outputs.
    """
    if overwrite:
        return
    base = local_path(out_dir)
    existing = [os.path.join(out_dir, n) for n in names if os.path.lexists(os.path.join(base, n))]
    if existing:
        raise OutputExistsError(
            f"output exists: {', '.join(existing)}; pass --overwrite to replace "
            + ("it" if len(existing) == 1 else "them")
        )


def table_exists(spark: SparkSession, name: str) -> bool:
    """True when the catalog holds the table ``name`` (a catalog lookup, no data read)."""
    return bool(spark.catalog.tableExists(check_table_name(name)))


def _tmp_table_name(name: str) -> str:
    parts = name.split(".")
    last = parts[-1]
    quoted = last.startswith("`")
    bare = last.strip("`")
    tmp = f"{bare}{_TMP_TABLE_SUFFIX}{uuid.uuid4().hex[:8]}"
    parts[-1] = f"`{tmp}`" if quoted else tmp
    return ".".join(parts)


def write_text_atomically(directory: str, name: str, text: str) -> str:
    """Write ``text`` (UTF-8) to ``directory/name`` through a temporary file in the same directory and a rename,
    so a reader never sees a half-written file; creates the directory (a ``file:`` prefix is accepted).

    Returns:
        The path of the written file.

    Raises:
        OSError: the directory cannot be created or written.
    """
    import tempfile

    directory = directory[len("file:") :] if directory.startswith("file:") else directory
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


class OutputStage:
    """The outputs of one run, staged and then published together (see the module docstring).

    Use as a context manager: on a normal exit every staged output is moved into place (each by a rename);
    on an exception everything staged is removed and no destination changes.

    Args:
        spark: the session (used for catalog tables only).
        out_dir: the local output directory that receives the directory outputs.
        overwrite: replace existing outputs (otherwise :meth:`path` and :meth:`table` raise if one exists).
    """

    def __init__(self, spark: SparkSession | None, out_dir: str, *, overwrite: bool = False) -> None:
        self._spark = spark
        self._out_dir = os.path.abspath(local_path(out_dir))
        self._overwrite = overwrite
        self._staging = os.path.join(self._out_dir, f"{_STAGING_PREFIX}{uuid.uuid4().hex[:8]}")
        self._paths: list[str] = []
        self._tables: list[tuple[str, str, str]] = []  # (staged, final, format)

    @property
    def out_dir(self) -> str:
        """The final output directory."""
        return self._out_dir

    def path(self, name: str) -> str:
        """The staging path for ``out_dir/name`` (a file or a directory the caller writes).

        Raises:
            OutputExistsError: ``out_dir/name`` exists and overwrite is off.
        """
        final = os.path.join(self._out_dir, name)
        if os.path.lexists(final) and not self._overwrite:
            raise OutputExistsError(f"output exists: {final}; pass --overwrite to replace it")
        os.makedirs(self._staging, exist_ok=True)
        self._paths.append(name)
        return os.path.join(self._staging, name)

    def table(self, name: str, fmt: str | None = None) -> str:
        """The staging table for the catalog table ``name``; the caller writes it with ``saveAsTable``.

        Args:
            name: the destination table.
            fmt: the table's format; None means the session's ``spark.sql.sources.default``.

        Raises:
            OutputExistsError: the table exists and overwrite is off.
        """
        assert self._spark is not None, "an OutputStage for tables needs a session"
        check_table_name(name, "output table")
        if not self._overwrite and table_exists(self._spark, name):
            raise OutputExistsError(f"output table exists: {name}; pass --overwrite to replace it")
        fmt = fmt or str(self._spark.conf.get("spark.sql.sources.default", "parquet"))
        staged = _tmp_table_name(name)
        self._tables.append((staged, name, fmt))
        return staged

    @property
    def staging_dir(self) -> str:
        """The hidden directory in ``out_dir`` where this run's directory outputs are written first."""
        return self._staging

    def __enter__(self) -> OutputStage:
        os.makedirs(self._out_dir, exist_ok=True)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:  # noqa: ANN001
        try:
            if exc_type is None:
                self._publish()
        finally:
            self._cleanup()

    def _publish(self) -> None:
        for staged, final, fmt in self._tables:
            self._publish_table(staged, final, fmt)
        for name in self._paths:
            _replace(os.path.join(self._staging, name), os.path.join(self._out_dir, name))
            log.info("output written: %s", os.path.join(self._out_dir, name))

    def _publish_table(self, staged: str, final: str, fmt: str) -> None:
        spark = self._spark
        assert spark is not None
        exists = table_exists(spark, final)
        if exists and not self._overwrite:  # created by someone else while this run was computing
            raise OutputExistsError(f"output table exists: {final}; pass --overwrite to replace it")
        if fmt == "delta":
            # one Delta transaction: atomic, and the table keeps its history, properties and grants
            spark.read.table(staged).write.format("delta").mode("overwrite" if exists else "error").option(
                "overwriteSchema", "true"
            ).saveAsTable(final)
            spark.sql(f"DROP TABLE IF EXISTS {staged}")
        else:
            if exists:
                spark.sql(f"DROP TABLE {final}")
            spark.sql(f"ALTER TABLE {staged} RENAME TO {final}")
        log.info("output table written: %s", final)

    def _cleanup(self) -> None:
        if os.path.isdir(self._staging):
            shutil.rmtree(self._staging, ignore_errors=True)
        if self._spark is not None:
            for staged, _, _ in self._tables:
                try:
                    self._spark.sql(f"DROP TABLE IF EXISTS {staged}")
                except Exception:  # noqa: BLE001 - best effort; the name says what it is
                    log.warning("could not drop the staging table %s", staged)
