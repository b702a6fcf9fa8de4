"""Numbers written as text: the public side of the DP test that finds the string columns holding numbers
(docs/design.md section 2.8, "numbers written as text").

* :func:`text_number_candidates` names the string columns the test reads (schema and configuration only).
* :func:`text_as_number` reads a text as a number; :func:`text_kind_counts` counts, per column, the records and
  distinct values of each kind of :data:`TEXT_KINDS` (true counts: the test,
  :func:`spark_dpsynth.mechanisms._profile.dp_text_numbers`, noises them; the evaluation's yardstick keeps them
  in-house).
* :func:`with_text_numbers` puts the columns the test found on their numeric scale (post-processing).

Privacy: nothing here draws noise; :func:`text_kind_counts` returns true counts to a caller that noises them or
keeps them from any release.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import numpy as np
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_dpsynth.errors import InvalidParameterError
from spark_dpsynth.params import DataConfig
from spark_dpsynth.profile.columns import ColumnType
from spark_dpsynth.profile.decide import MAX_CODE_RANGE

__all__ = [
    "TEXT_KINDS",
    "text_as_number",
    "text_kind_counts",
    "text_number_candidates",
    "with_text_numbers",
]

_NUMBER_STARTS = tuple("0123456789+-.")
"""The first characters of a text that may read as a finite number (the others never do)."""


def text_as_number(text: Column) -> Column:
    """``text`` as a double (leading and trailing blanks left out), null when it is not a number. ``try_cast``
    only where the first character can start a number: Spark's cast of a text that is no number costs an
    exception each (docs/design.md section 2.8, "numbers written as text")."""
    text = F.trim(text)
    return F.when(F.substring(text, 1, 1).isin(*_NUMBER_STARTS), text.try_cast("double"))


TEXT_KINDS = ("small whole number", "other whole number", "number that is not whole", "other text")
"""The kinds of a non-empty text that :func:`text_kind_counts` counts, in its columns' order. A *small* whole
number has |x| <= :data:`MAX_CODE_RANGE`; a number is a finite double as :func:`text_as_number` reads it."""


def text_kind_counts(df: DataFrame, texts: Sequence[Column]) -> tuple[np.ndarray, np.ndarray]:
    """How many records of ``df`` hold each kind of :data:`TEXT_KINDS` in each of ``texts``, and how many distinct
    values of that kind.

    Args:
        df: the records.
        texts: string expressions over ``df``, null where the record has no value there.

    Returns:
        (records, values): two int64 arrays of shape (len(texts), 4). ``records``: per expression, the records
        whose value is a small whole number, another whole number, a finite number that is not whole, or another
        non-empty text (null values are in none); ``values``: the distinct texts of each kind. True counts: the
        caller noises them or keeps them from any release.

    One Spark job: each expression's distinct values with their number of records (an ``explode`` of
    (index, value) pairs and a ``groupBy``, combined on the map side), then each distinct value read as a number
    once, and the records summed per (index, kind); at most 4 len(texts) rows reach the driver. Reading every
    record's value as a number in one aggregation of 4 len(texts) sums would cast each value once per sum,
    several times slower (docs/design.md section 2.8, "numbers written as text").
    """
    records = np.zeros((len(texts), len(TEXT_KINDS)), dtype=np.int64)
    values = np.zeros_like(records)
    if not texts:
        return records, values
    pairs = df.select(
        F.explode(
            F.array(
                *[F.struct(F.lit(j).alias("j"), t.cast("string").alias("v")) for j, t in enumerate(texts)]
            )
        ).alias("p")
    ).select("p.j", "p.v")
    counted = pairs.where(F.col("v").isNotNull()).groupBy("j", "v").count()
    number = text_as_number(F.col("v"))
    finite = number.isNotNull() & ~F.isnan(number) & (F.abs(number) != F.lit(math.inf))
    whole = finite & (number == F.floor(number))
    small = whole & (F.abs(number) <= F.lit(float(MAX_CODE_RANGE)))
    kind = F.when(small, 0).when(whole, 1).when(finite, 2).otherwise(3)
    by_kind = counted.groupBy("j", kind.alias("k")).agg(
        F.sum("count").alias("n"), F.count(F.lit(1)).alias("v")
    )
    for r in by_kind.collect():
        records[int(r["j"]), int(r["k"])] = int(r["n"])
        values[int(r["j"]), int(r["k"])] = int(r["v"])
    return records, values


def text_number_candidates(
    types: Mapping[str, ColumnType], config: DataConfig, domains: Mapping[str, object] = ()
) -> tuple[str, ...]:
    """The string columns the DP test of numbers written as text reads (docs/design.md section 2.8): every
    ``string`` column counted as a category without a rule of the configuration (not declared categorical, no
    public bins, no public domain or ``domains`` of the mechanism, not multi-value, not hash-bucketed). From
    the schema and the configuration only: public. Empty when ``config.text_numbers`` is False."""
    if config.text_numbers is False:
        return ()
    ruled = (
        set(config.categorical)
        | set(config.bins)
        | set(config.public_domains)
        | set(config.multi_value)
        | set(domains)
    )
    return tuple(
        c for c, t in types.items() if t.type == "string" and t.scale == "category" and c not in ruled
    )


def with_text_numbers(types: Mapping[str, ColumnType], found: Mapping[str, str]) -> dict[str, ColumnType]:
    """``types`` with the string columns that the DP test found to hold numbers written as text (``found``:
    column -> ``integer`` for whole numbers, else ``real``) on that scale: the DP profile then decides them as
    numbers (a code, or a measurement whose text values the DP exact-value step releases as ``passthrough``
    categories; docs/design.md section 2.8). Their type stays ``string``. Post-processing of the test.

    Raises:
        InvalidParameterError: a scale other than ``integer`` and ``real``.
    """
    out = dict(types)
    for c, scale in found.items():
        if scale not in ("integer", "real"):
            raise InvalidParameterError(
                f"numbers written as text are on the integer or real scale, not {scale!r}"
            )
        out[c] = dataclasses.replace(types[c], scale=scale)
    return out
