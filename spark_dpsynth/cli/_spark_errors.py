"""Spark's errors in our words: what is wrong (which file, which option, which expression), never a data value.

Spark's messages for bad input quote the data: a cast error names the value, a malformed CSV record is printed
whole, a Parquet reader prints a file's last bytes. :func:`explain` recognises these failures by Spark's error
condition and the exception classes in its cause chain (text that names no data) and returns one line of its own
(docs/design.md section 1.6). It reads the exception's text only to find those names and the file path Spark
reports; it returns none of the rest.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from urllib.parse import unquote

__all__ = ["condition_of", "explain"]

_CONDITION = re.compile(r"(?:Exception|Error): \[([A-Z][A-Z0-9_]*(?:\.[A-Z][A-Z0-9_]*)*)\]")
"""A condition right after a Java exception's class name (``SparkException: [FAILED_READ_FILE.NO_HINT]``), where
Spark puts it; a bracketed word elsewhere in a message could be a value."""
_READ_FILE = re.compile(r"Encountered error while reading file (\S+?)\.?\s")
_CAST_TYPES = re.compile(r'of the type "([A-Z][A-Z0-9_(), ]*)" cannot be cast to "([A-Z][A-Z0-9_(), ]*)"')
_CORRUPT_CODEC = (
    "Not in GZIP format",
    "invalid distance",
    "invalid block type",
    "invalid stored block",
    "invalid code lengths",
    "incorrect header check",
    "Unexpected end of",
    "EOFException",
    "ZipException",
    "Corrupt GZIP trailer",
)
_DEBUG = "rerun with --debug to see Spark's message (it may show data values)"
_PARSE_CAUSES = (
    "java.lang.NumberFormatException",
    "org.apache.spark.SparkNumberFormatException",
    "java.time.format.DateTimeParseException",
    "org.apache.spark.SparkDateTimeException",
    "CANNOT_PARSE_TIMESTAMP",
    "CANNOT_PARSE_DECIMAL",
)
"""Exception classes (and conditions) in the cause chain of a CSV record that a declared type cannot parse: a
cast error, where a ragged record's chain has MALFORMED_CSV_RECORD instead."""
_DISK_FULL = "No space left on device"


def condition_of(err: BaseException) -> str | None:
    """Spark's error condition of ``err`` (e.g. ``CAST_INVALID_INPUT``): PySpark's, or for an error from Spark's
    JVM (py4j) the first one its text gives after an exception class; None for any other exception."""
    getter = getattr(err, "getCondition", None)
    if getter is not None:
        try:
            condition = getter()
        except Exception:  # noqa: BLE001 - a PySpark error without a condition
            condition = None
        if condition:
            return str(condition)
    if not type(err).__module__.startswith(("py4j", "pyspark")):
        return None
    found = _CONDITION.search(str(err))
    return found.group(1) if found else None


def _file(text: str) -> str | None:
    found = _READ_FILE.search(text)
    if not found:
        return None
    path = found.group(1)
    if path.startswith("file:"):
        path = unquote(re.sub(r"^file:(//)?", "", path))
    return path


def _fragment(err: BaseException) -> str | None:
    """The expression Spark points at: a fragment of the user's SQL or the name of a DataFrame function."""
    getter = getattr(err, "getQueryContext", None)
    if getter is None:
        return None
    try:
        contexts = getter()
        return str(contexts[0].fragment()) if contexts else None
    except Exception:  # noqa: BLE001 - no query context
        return None


def _where(fragment: str | None, expressions: Mapping[str, str | None]) -> str:
    """`` in `fragment` (--option)`` when the fragment is in one of the user's expressions (their own text, not
    data) or is a bare function name; else an empty string."""
    if not fragment:
        return ""
    for option, text in expressions.items():
        if text and fragment in text:
            return f" in `{fragment}` ({option})"
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", fragment):
        return f" in {fragment}()"
    return ""


def _cast_columns_text(cast_columns: Callable[[], list[str]] | None) -> str:
    """`` of column(s) A, B`` from ``cast_columns()`` (the columns whose values do not parse), or ``""``."""
    if cast_columns is None:
        return ""
    try:
        columns = cast_columns()
    except Exception:  # noqa: BLE001 - best effort: the message is still right without the names
        return ""
    if not columns:
        return ""
    return f" of column{'s' if len(columns) > 1 else ''} {', '.join(columns)}"


def explain(
    err: BaseException,
    expressions: Mapping[str, str | None] | None = None,
    input_path: str | None = None,
    *,
    output_path: str | None = None,
    cast_columns: Callable[[], list[str]] | None = None,
) -> str | None:
    """One line saying what went wrong, in words that contain no data value; None when ``err`` is not known.

    Args:
        err: an exception raised by Spark (classic or Spark Connect).
        expressions: option name -> the Spark SQL text the user gave with it (``--row-filter`` -> ``"age >
            18"``); an expression Spark points at is named with its option.
        input_path: the input, named when Spark does not say which file failed.
        output_path: the output directory, named when a write fails because the disk is full.
        cast_columns: called when a CSV value does not parse as its declared type (``--schema``): the columns
            that hold such a value (names only; see :func:`spark_dpsynth.data.io.uncastable_columns`).

    Returns:
        The line (without the ``spark-dpsynth: error:`` prefix), or None.
    """
    text = str(err)
    condition = condition_of(err)
    file = _file(text)
    the_file = file or input_path or "a file of the input"
    if _DISK_FULL in text:
        where = f" writing {output_path}" if output_path else " writing the output"
        return (
            f"the disk is full ({_DISK_FULL}){where}; free space there (Spark's scratch space too, "
            "spark.local.dir) or give another --output"
        )
    if "CANNOT_READ_FILE_FOOTER" in text or "is not a Parquet file" in text:
        return f"{the_file} is not a Parquet file; give --format csv (or the input's format)"
    if (
        "MALFORMED_RECORD_IN_PARSING" in text
        and "MALFORMED_CSV_RECORD" not in text
        and any(cause in text for cause in _PARSE_CAUSES)
    ):
        return (
            f"{the_file}: a value{_cast_columns_text(cast_columns)} cannot be cast to the type --schema declares "
            "(a cast error); fix the value, or declare the column STRING and cast it with try_cast in --row-filter"
        )
    if "MALFORMED_CSV_RECORD" in text or "MALFORMED_RECORD_IN_PARSING" in text:
        return (
            f"{the_file}: a record has a different number of fields than the header (a ragged row, or a quote "
            "that is not closed); fix the file, or pass --ragged-rows pad to pad short records with empty values "
            "and drop extra fields"
        )
    if "TextParsingException" in text and "ArrayIndexOutOfBoundsException" in text:
        return (
            f"{the_file}: a record has more fields than Spark's CSV reader allows (maxColumns, 20480); check the "
            "delimiter (--delimiter) and the quoting"
        )
    if "CSV header does not conform to the schema" in text or "CSV_HEADER" in text:
        return (
            f"the header of {the_file} differs from the first file's; every CSV file of an input must have the "
            "same header"
        )
    if file is not None and file.lower().endswith(".gz") and any(marker in text for marker in _CORRUPT_CODEC):
        return f"{the_file} cannot be decompressed: it is not valid gzip (truncated or corrupt)"
    where = _where(_fragment(err), expressions or {})
    if condition == "CAST_INVALID_INPUT":
        types = _CAST_TYPES.search(text)
        what = f"from {types.group(1)} to {types.group(2)}" if types else "to the type asked for"
        return f"a value of the data cannot be cast {what}{where}; use try_cast(...) to read such values as empty"
    if where and condition:
        return f"Spark stopped with [{condition}]{where}; {_DEBUG}"
    if file is not None:
        cause = f" ([{condition}])" if condition else ""
        return f"cannot read {file}{cause}; {_DEBUG}"
    return None
