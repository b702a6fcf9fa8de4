"""Numbers written as text the way a person (or pandas, R, a spreadsheet) writes them: never in scientific notation.

Spark writes a double with Java's ``Double.toString``, which turns to scientific notation below 10^-3 and from
10^7 on (``6.528138041902716E-4``, ``1.23456789E7``): a form input tables almost never use, and one that some
readers take for text. :func:`plain_number_text` writes the same number in plain decimal notation, shortest form
kept (``0.000652813804190272``, ``12345678.9``, ``18.0``), rounded to 18 decimals; a magnitude of 10^20 or more,
NaN and infinities keep Spark's form. :func:`with_plain_numbers` applies it to every float and double column of a
table before a CSV write (the CSV outputs and the synthetic numbers written into text columns).

Only the DataFrame API (Spark Connect as well); no data reaches the driver.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, FloatType

__all__ = ["plain_number_text", "with_plain_numbers"]

_PLAIN = "decimal(38,18)"
"""Up to 20 digits before the point and 18 after: a double's shortest form fits unless it is 10^20 or more."""


def plain_number_text(value: Column) -> Column:
    """The number ``value`` (float or double) as text in plain decimal notation; null stays null.

    The shortest form of the number (``Double.toString``'s digits) read as a decimal of scale 18, written
    without the zeros that scale pads, one ``0`` kept after the point (``18.0``, as Spark writes a whole
    double); NaN, infinities and magnitudes of 10^20 or more keep Spark's own text.
    """
    shortest = value.try_cast("string")
    plain = shortest.try_cast(_PLAIN).cast("string")
    plain = F.regexp_replace(F.regexp_replace(plain, r"(\.\d*?)0+$", "$1"), r"\.$", ".0")
    return F.coalesce(plain, shortest)


def with_plain_numbers(df: DataFrame) -> DataFrame:
    """``df`` with each float and double column written by :func:`plain_number_text` (a string column of the
    same name and position); other columns unchanged. For a CSV write only: the values read back equal."""
    numeric = {f.name for f in df.schema.fields if isinstance(f.dataType, DoubleType | FloatType)}
    if not numeric:
        return df
    return df.select(
        *[
            plain_number_text(F.col(f"`{c}`")).alias(c) if c in numeric else F.col(f"`{c}`")
            for c in df.columns
        ]
    )
