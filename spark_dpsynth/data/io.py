"""Reading the sensitive table and writing outputs: CSV, Parquet, Delta Lake files and catalog tables.

Sources (:func:`read_input`):

* a path with a format: ``csv`` (header row, gzip allowed, every column read as a string), ``parquet`` or
  ``delta``; without a format it is guessed from the path (a directory holding ``_delta_log`` is Delta, a name
  ending in ``.parquet`` is Parquet; a local directory is Parquet when its data files start with Parquet's magic
  bytes and CSV when none does; anything else CSV);
* a catalog table ``db.t`` (or ``catalog.db.t``), read with ``spark.read.table``;
* in a notebook, a pandas DataFrame, converted through Arrow (:func:`as_spark_frame`).

CSV is read as RFC 4180 writes it (:data:`CSV_READ_OPTIONS`): fields quoted with ``"``, a quote inside a quoted
field doubled (``""``), delimiters and line breaks inside quoted fields kept. The file's encoding is declared
(``encoding``, default UTF-8) and checked before anything else reads the data: a line that is not valid in it is
an error naming the file and the line number, never the bytes. The header is checked too: a column without a
name, a name given twice (compared as Spark compares names) or a name Spark SQL cannot quote (a back quote, a
control character) is an error naming the column; every other name (spaces, dots, other characters) is kept
exactly. A record with more or fewer fields than the header is an error (``ragged_rows="error"``) or padded with
empty values and cut (``ragged_rows="pad"``); the error never shows the record. CSV outputs are written the same
way (:data:`CSV_WRITE_OPTIONS`), so pandas and Spark read them back with their default options; their float and
double columns in plain decimal notation, never scientific (:mod:`spark_dpsynth.data.number_text`).

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

from spark_dpsynth.data.number_text import with_plain_numbers
from spark_dpsynth.errors import InvalidParameterError, SchemaError, SparkSetupError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

__all__ = [
    "CSV_READ_OPTIONS",
    "CSV_WRITE_OPTIONS",
    "ENCODINGS",
    "FORMATS",
    "RAGGED_ROWS",
    "as_spark_frame",
    "check_column_names",
    "check_frame",
    "check_table_name",
    "csv_encoding",
    "guess_format",
    "is_delta_path",
    "local_path",
    "read_input",
    "uncastable_columns",
    "read_output",
    "table_exists",
    "write_frame",
    "write_single_csv",
]

FORMATS = ("csv", "parquet", "delta")
"""The file formats read and written."""

ENCODINGS = ("utf-8", "us-ascii", "iso-8859-1")
"""The CSV encodings read (the ASCII-compatible ones Spark's CSV reader accepts); aliases in :func:`csv_encoding`."""

_ENCODING_ALIASES = {
    "utf-8": "utf-8",
    "utf8": "utf-8",
    "us-ascii": "us-ascii",
    "ascii": "us-ascii",
    "iso-8859-1": "iso-8859-1",
    "iso8859-1": "iso-8859-1",
    "latin-1": "iso-8859-1",
    "latin1": "iso-8859-1",
}

RAGGED_ROWS = ("error", "pad")
"""What to do with a CSV record whose number of fields differs from the header's: stop with an error naming the
file, or pad a short record with empty values and drop the extra fields of a long one."""

CSV_READ_OPTIONS: dict[str, object] = {
    "header": True,
    "inferSchema": False,
    "multiLine": True,
    "quote": '"',
    "escape": '"',
    "ignoreLeadingWhiteSpace": False,
    "ignoreTrailingWhiteSpace": False,
    "enforceSchema": False,
}
"""Spark CSV reader options for RFC 4180 files: ``""`` inside a quoted field is one quote (Spark's default escape
is a backslash), quoted fields may span lines (``multiLine``: each file is parsed by one task, from its start),
every file's header is checked against the first one's (``enforceSchema`` off)."""

CSV_WRITE_OPTIONS: dict[str, object] = {
    "header": True,
    "emptyValue": "",
    "quote": '"',
    "escape": '"',
    "ignoreLeadingWhiteSpace": False,
    "ignoreTrailingWhiteSpace": False,
    "encoding": "UTF-8",
    "lineSep": "\n",
}
"""Spark CSV writer options for RFC 4180 output readable with pandas' and Spark's defaults: a quote inside a
value is doubled (Spark's default writes ``\\"``), values keep their leading and trailing spaces (Spark's writer
trims them by default), UTF-8, ``\\n`` line ends."""

_PARQUET_MAGIC = b"PAR1"
_GZIP_MAGIC = b"\x1f\x8b"

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
        if not os.path.isdir(local_path(path)):
            return "csv"
        files = _data_files(path)
        parquet = [f for f in files if _magic(f) == _PARQUET_MAGIC]
        if len(parquet) == len(files):
            return "parquet"
        if not parquet:
            return "csv"
        other = next(f for f in files if _magic(f) != _PARQUET_MAGIC)
        raise InvalidParameterError(
            f"{path} holds Parquet files ({parquet[0]}) and other files ({other}); give --format, or keep one "
            "format per directory"
        )
    raise InvalidParameterError(f"cannot tell the format of {path}; give --format one of {list(FORMATS)}")


def _data_files(path: str) -> list[str]:
    """The data files Spark reads at the local ``path``: the file itself, or the files under the directory
    whose names do not start with ``_`` or ``.`` (Spark skips those), in sorted order.

    Raises:
        InvalidParameterError: a directory without data files.
    """
    base = local_path(path)
    if not os.path.isdir(base):
        return [base]
    files = []
    for root, dirs, names in os.walk(base):
        dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
        files.extend(os.path.join(root, n) for n in sorted(names) if not n.startswith(("_", ".")))
    if not files:
        raise InvalidParameterError(
            f"no data files in {path} (the directory is empty or holds hidden files only)"
        )
    return files


def _magic(file: str) -> bytes:
    """The first four bytes of a local file (the file's magic number, if it has one)."""
    with open(file, "rb") as f:
        return f.read(4)


def csv_encoding(name: str) -> str:
    """The canonical name (one of :data:`ENCODINGS`) of a CSV encoding name or alias (case-insensitive).

    Raises:
        InvalidParameterError: an encoding that is not read.
    """
    key = name.strip().lower().replace("_", "-") if isinstance(name, str) else name
    if key not in _ENCODING_ALIASES:
        raise InvalidParameterError(
            f"encoding must be one of {list(ENCODINGS)} (or latin-1, ascii, utf8), got {name!r}; convert other "
            "encodings (UTF-16, Windows code pages) to UTF-8 first, e.g. with iconv"
        )
    return _ENCODING_ALIASES[key]


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
    encoding: str = "utf-8",
    ragged_rows: str = "error",
    infer_schema: bool = False,
    schema: str | None = None,
) -> DataFrame:
    """Read the sensitive table from a path or a catalog table.

    A CSV input is checked when it is read (see the module docstring): one Spark job checks its encoding, and
    a second reads its header; the records themselves are read when an action runs.

    Args:
        spark: a classic or Spark Connect session.
        path: a file or directory (local or a URI such as ``s3://``, ``abfss://``, ``dbfs:/``).
        table: a catalog table ``db.t`` or ``catalog.db.t``; exactly one of ``path`` and ``table``.
        fmt: ``"csv"``, ``"parquet"`` or ``"delta"``; None guesses from the path (see :func:`guess_format`).
            Ignored for a table (the catalog knows its format).
        delimiter: the CSV field delimiter (one character).
        encoding: the CSV encoding, one of :data:`ENCODINGS` or an alias (:func:`csv_encoding`).
        ragged_rows: one of :data:`RAGGED_ROWS`.
        infer_schema: CSV only: infer the column types with Spark's ``inferSchema`` (a pass over the file; the
            types are then treated as public schema metadata, docs/design.md section 2.8); False reads every
            column as a string.
        schema: CSV only: the declared schema as a Spark DDL string (``"age INT, name STRING"``); it wins over
            ``infer_schema`` and reads no data to find the types.

    Returns:
        The table as a DataFrame; a CSV has the declared or inferred types, else every column as a
        string, named exactly as in its header.

    Raises:
        InvalidParameterError: neither or both of ``path`` and ``table``, a bad table name, format, encoding or
            ``ragged_rows``, a local path that does not exist, a local directory without data files, a local
            file whose bytes are not in the format (Parquet read as CSV, or the other way round), or a CSV line
            that is not valid in ``encoding`` (naming the file and, for a local file, the line).
        SchemaError: a CSV header with a column without a name, a name given twice or a name with a back
            quote or a control character.
        SparkSetupError: the data is Delta and the session has no Delta Lake.
    """
    if (path is None) == (table is None):
        raise InvalidParameterError("give exactly one input: a path (--input) or a table (--input-table)")
    _check_format(fmt)
    encoding = csv_encoding(encoding)
    if ragged_rows not in RAGGED_ROWS:
        raise InvalidParameterError(f"ragged_rows must be one of {list(RAGGED_ROWS)}, got {ragged_rows!r}")
    if table is not None:
        return spark.read.table(check_table_name(table, "input table"))
    assert path is not None
    if is_local(path) and not os.path.exists(local_path(path)):
        raise InvalidParameterError(f"input not found: {path}")
    fmt = fmt or guess_format(path)
    if is_local(path) and fmt in ("csv", "parquet"):
        _check_local_files(path, fmt)
    if fmt == "csv":
        return _read_csv(
            spark,
            path,
            delimiter=delimiter,
            encoding=encoding,
            ragged_rows=ragged_rows,
            infer_schema=infer_schema,
            schema=schema,
        )
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


def _check_local_files(path: str, fmt: str) -> None:
    """Refuse local data files whose first bytes say they are not ``fmt`` (Spark would misread them: Parquet
    bytes parsed as CSV text, or CSV text read as Parquet, whose error quotes the file's last bytes)."""
    for file in _data_files(path):
        magic = _magic(file)
        if fmt == "csv" and magic == _PARQUET_MAGIC:
            raise InvalidParameterError(f"{file} is a Parquet file, not CSV; give --format parquet")
        if fmt == "csv" and magic[:2] == _GZIP_MAGIC and not file.lower().endswith(".gz"):
            raise InvalidParameterError(
                f"{file} is gzip-compressed but its name does not end in .gz (Spark picks the codec by the "
                "name); rename it to end in .gz"
            )
        if fmt == "parquet" and magic != _PARQUET_MAGIC:
            raise InvalidParameterError(f"{file} is not a Parquet file; give --format csv if it is CSV")


def _read_csv(
    spark: SparkSession,
    path: str,
    *,
    delimiter: str,
    encoding: str,
    ragged_rows: str,
    infer_schema: bool = False,
    schema: str | None = None,
) -> DataFrame:
    """An RFC 4180 CSV (see the module docstring), after its encoding and its header were checked; its types
    declared (``schema``, Spark DDL), inferred (``infer_schema``) or every column a string."""
    from pyspark.sql import types as T

    _check_encoding(spark, path, encoding)
    options = {
        **CSV_READ_OPTIONS,
        "sep": delimiter,
        "encoding": encoding,
        "mode": "FAILFAST" if ragged_rows == "error" else "PERMISSIVE",
    }
    # The header row alone (one row, the column names: schema facts, not data), read as a record so that
    # Spark's renaming of empty and duplicate names (_c2, A0, A1) does not hide them.
    first = spark.read.options(**{**options, "header": False}).csv(path).limit(1).collect()  # <= 1 row
    if not first:
        raise InvalidParameterError(f"{path} has no header row (the CSV file is empty)")
    names = list(first[0])
    case_sensitive = str(spark.conf.get("spark.sql.caseSensitive", "false")).lower() == "true"
    check_column_names(names, where=f"the header of {path}", case_sensitive=case_sensitive)
    if schema is not None:
        return spark.read.options(**options).schema(schema).csv(path)
    if infer_schema:
        return spark.read.options(**{**options, "inferSchema": True}).csv(path)
    strings = T.StructType([T.StructField(n, T.StringType(), True) for n in names])
    return spark.read.options(**options).schema(strings).csv(path)


def uncastable_columns(
    spark: SparkSession, path: str, schema: str, *, delimiter: str = ",", encoding: str = "utf-8"
) -> list[str]:
    """The columns of a CSV input that hold a value their declared type (``schema``, Spark DDL) cannot parse: one
    pass over the file read as strings, after a read with ``schema`` failed on such a value.

    Only the column names are returned (schema facts): never a value, a row or how many rows fail. A value
    counts when it is not empty and ``try_cast`` to the declared type gives null; Spark's CSV parser accepts
    a little less or more than a cast in a few corner cases, so the list can miss a column (then the caller's
    message names none).
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    declared = T._parse_datatype_string(schema)
    if not isinstance(declared, T.StructType):
        return []
    options = {**CSV_READ_OPTIONS, "sep": delimiter, "encoding": csv_encoding(encoding), "mode": "PERMISSIVE"}
    header = spark.read.options(**{**options, "header": False}).csv(path).limit(1).collect()  # the header row
    if not header:
        return []
    names = list(header[0])
    strings = T.StructType([T.StructField(str(n), T.StringType(), True) for n in names])
    raw = spark.read.options(**options).schema(strings).csv(path)
    checked = [
        (field.name, field.dataType)
        for field in declared.fields
        if not isinstance(field.dataType, T.StringType) and field.name in names
    ]
    if not checked:
        return []
    flags = [
        F.max((F.trim(F.col(f"`{name}`")) != "") & F.col(f"`{name}`").try_cast(dtype).isNull()).alias(f"c{i}")
        for i, (name, dtype) in enumerate(checked)
    ]
    row = raw.select(*flags).collect()[0]  # one row of booleans, one per column
    return [name for i, (name, _) in enumerate(checked) if row[f"c{i}"]]


def _shown(name: str | None, position: int) -> str:
    """A column for an error message: its name when it looks like one, else only its position (a file read in
    the wrong format yields "names" that are data)."""
    if name is not None and name.isprintable() and 0 < len(name) <= 64:
        return f"{name!r} (column {position})"
    return f"column {position}"


def check_column_names(names: list[str | None], *, where: str, case_sensitive: bool = False) -> None:
    """Refuse column names the pipeline cannot carry exactly.

    Names with spaces, dots and other printable characters are kept as they are (every column is addressed
    back-quoted); these are refused: no name (empty or only spaces), a name given twice (compared without case
    unless ``case_sensitive``, as Spark compares them), a name with a back quote or a control character.

    Raises:
        SchemaError: naming the first such column (by position only when the "name" does not look like one).
    """
    seen: dict[str, int] = {}
    for position, name in enumerate(names, start=1):
        if name is None or not name.strip():
            raise SchemaError(f"{where}: column {position} has no name; give every column a name")
        if "`" in name:
            raise SchemaError(
                f"{where}: the column name {_shown(name, position)} has a back quote (`); rename it"
            )
        if not name.isprintable():
            raise SchemaError(
                f"{where}: {_shown(None, position)} has a name with a control character; rename it"
            )
        key = name if case_sensitive else name.lower()
        if key in seen:
            raise SchemaError(
                f"{where}: {_shown(name, position)} has the same name as column {seen[key]}"
                + ("" if case_sensitive else " (Spark compares names without case)")
                + "; give every column its own name"
            )
        seen[key] = position


def _check_encoding(spark: SparkSession, path: str, encoding: str) -> None:
    """Raise if a line of the CSV at ``path`` is not valid in ``encoding`` (Spark would read its bytes as
    replacement characters, silently).

    One Spark job over the raw lines (the text source: the bytes of each line, unchecked); it brings back at most
    one file name. For a local file the line number is then found by reading that file on the driver up to the
    first invalid line. ISO-8859-1 maps every byte to a character: nothing to check.

    Raises:
        InvalidParameterError: naming the file and, for a local file, the line; never the bytes.
    """
    from pyspark.sql import functions as F

    if encoding == "iso-8859-1":
        return
    value = F.col("value")
    bad = ~F.is_valid_utf8(value)
    if encoding == "us-ascii":
        bad = bad | (F.octet_length(value) != F.length(value))
    lines = spark.read.text(path)
    hit = lines.where(bad).select(F.col("_metadata.file_path").alias("file")).limit(1).collect()  # <= 1 row
    if not hit:
        return
    from urllib.parse import unquote

    file = str(hit[0]["file"])
    where = file
    if is_local(file):
        where = file = unquote(local_path(file.replace("file://", "file:", 1)))
        line = _first_invalid_line(file, encoding)
        if line is not None:
            where = f"{file}, line {line}"
    raise InvalidParameterError(
        f"{where}: not valid {encoding}; give the file's encoding with --encoding (one of {list(ENCODINGS)}) "
        "or convert the file to UTF-8"
    )


def _first_invalid_line(file: str, encoding: str) -> int | None:
    """The 1-based number of the first line of the local ``file`` (gzip by its name) not valid in ``encoding``,
    or None when none is (or the file cannot be read)."""
    import codecs
    import gzip

    opener = gzip.open if file.lower().endswith(".gz") else open
    decoder = codecs.getincrementaldecoder("ascii" if encoding == "us-ascii" else encoding)()
    line = 1
    try:
        with opener(file, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                try:
                    decoder.decode(chunk)
                except UnicodeDecodeError as err:
                    return line + chunk.count(b"\n", 0, err.start)
                line += chunk.count(b"\n")
    except (OSError, EOFError):
        return None
    return None


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
        return spark.read.options(**CSV_READ_OPTIONS).csv(path)
    return read_input(spark, path=path, fmt=fmt)


# --------------------------------------------------------------------------------------------- notebook frames


def _is_spark_frame(df: object) -> bool:
    from pyspark.sql import DataFrame

    return isinstance(df, DataFrame)  # classic and Spark Connect DataFrames both derive from it


def _is_pandas_frame(df: object) -> bool:
    if not type(df).__module__.startswith("pandas."):  # pandas is imported only for a pandas object
        return False
    import pandas as pd

    return isinstance(df, pd.DataFrame)


def check_frame(df: object, what: str = "df") -> None:
    """Refuse anything but a Spark DataFrame (classic or Spark Connect) or a pandas DataFrame, before any other
    check.

    Raises:
        TypeError: naming what was given and what to pass instead.
    """
    if _is_spark_frame(df) or _is_pandas_frame(df):
        return
    kind = type(df)
    given = f"{kind.__module__}.{kind.__qualname__}"
    if kind.__module__.startswith("pyspark.pandas"):
        hint = f"pass {what}.to_spark() (a pandas-on-Spark DataFrame)"
    elif kind.__module__.startswith("pandas."):
        hint = f"pass a pandas DataFrame ({what}.to_frame() for a Series)"
    elif hasattr(df, "to_pandas"):
        hint = f"pass {what}.to_pandas(), or a Spark DataFrame"
    else:
        hint = "pass a Spark DataFrame (spark.read..., spark.table(...)) or a pandas DataFrame"
    raise TypeError(f"{what} must be a Spark DataFrame or a pandas DataFrame, got {given}: {hint}")


def as_spark_frame(df: object, spark: SparkSession | None = None, *, what: str = "df") -> DataFrame:
    """``df`` as a Spark DataFrame: a Spark DataFrame as it is, a pandas DataFrame converted through Arrow
    (``spark.createDataFrame`` of a ``pyarrow.Table``, whatever the session's Arrow setting).

    The pandas index is not a column (``reset_index()`` keeps it as one); column names become strings and are
    checked as a CSV header's are (:func:`check_column_names`). Types follow Arrow: ``Int64`` and ``int64`` are
    ``bigint``, a categorical is a ``string``, a datetime a ``timestamp``, a column holding only None is ``void``
    (refused later by the schema checks, with the way out).

    Args:
        df: a Spark DataFrame (classic or Spark Connect) or a pandas DataFrame.
        spark: the session of the converted frame (default: the active session, else a new local one,
            :func:`spark_dpsynth.data.session.get_session`).
        what: the argument's name, for the errors.

    Raises:
        TypeError: ``df`` is neither (:func:`check_frame`).
        SchemaError: a column name the pipeline cannot carry, or columns Arrow cannot convert (named; never a
            value: an object column mixing Python types, say).
    """
    check_frame(df, what)
    if _is_spark_frame(df):
        return df  # type: ignore[return-value]
    import pandas as pd
    import pyarrow as pa

    assert isinstance(df, pd.DataFrame)
    where = f"the pandas DataFrame {what}"
    check_column_names([str(c) for c in df.columns], where=where)
    try:
        table = pa.Table.from_pandas(df, preserve_index=False)
    except (pa.ArrowException, ValueError, TypeError):
        bad = [str(c) for c in df.columns if not _arrow_converts(df[c])]
        named = str(bad) if bad else "some columns"
        # Arrow's message quotes the value it could not convert: not chained (docs/design.md section 1.6).
        raise SchemaError(
            f"{where}: column(s) {named} cannot be converted to Arrow (an object column mixing Python types?); "
            "give each column one type (astype)"
        ) from None
    if spark is None:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
        if spark is None:
            from spark_dpsynth.data.session import get_session

            spark = get_session()
    return spark.createDataFrame(table)


def _arrow_converts(series: object) -> bool:
    import pyarrow as pa

    try:
        pa.Array.from_pandas(series)
    except (pa.ArrowException, ValueError, TypeError):
        return False
    return True


# --------------------------------------------------------------------------------------------- writing


def write_frame(df: DataFrame, path: str, fmt: str, *, mode: str = "error") -> None:
    """Write ``df`` as a directory in ``fmt`` (CSV: :data:`CSV_WRITE_OPTIONS`; an empty field is an empty value).

    Raises:
        InvalidParameterError: a bad format.
        SparkSetupError: ``fmt`` is Delta and the session has no Delta Lake.
    """
    _check_format(fmt)
    if fmt == "csv":
        df = with_plain_numbers(df)
    writer = df.write.mode(mode)
    try:
        if fmt == "csv":
            writer.options(**CSV_WRITE_OPTIONS).csv(path)
        else:
            writer.format(fmt).save(path)
    except Exception as err:
        if fmt == "delta" and _delta_unavailable(err):
            raise _delta_error() from err
        raise


def write_single_csv(df: DataFrame, path: str) -> None:
    """Write ``df`` as one CSV file with a header at the local ``path`` (through one Spark task).

    Meant for release-sized or laptop-sized synthetic data; on a cluster prefer a table or a Parquet directory.
    The file is RFC 4180 (:data:`CSV_WRITE_OPTIONS`): pandas' ``read_csv`` and Spark's CSV reader with
    ``multiLine`` read every value back as written (a value with a line break needs ``multiLine`` in Spark).
    """
    target = local_path(path)
    parts = target + ".parts"
    if os.path.exists(parts):
        shutil.rmtree(parts)
    try:
        with_plain_numbers(df).coalesce(1).write.mode("error").options(**CSV_WRITE_OPTIONS).csv(parts)
        files = sorted(f for f in os.listdir(parts) if f.startswith("part-"))
        if len(files) != 1:
            raise SparkSetupError(f"expected one CSV part file in {parts}, found {len(files)}")
        os.replace(os.path.join(parts, files[0]), target)
    finally:
        shutil.rmtree(parts, ignore_errors=True)


def table_exists(spark: SparkSession, name: str) -> bool:
    """True when the catalog holds the table ``name`` (a catalog lookup, no data read)."""
    return bool(spark.catalog.tableExists(check_table_name(name)))
