"""How a person's values of a number column go with a time base, as Spark aggregates over the person's rows.

A person-level release tests two rules of an event table's number columns against a whole-number time base t (a
panel's year; docs/design.md section 2.10, step 6), and its evaluation compares them in the real and the
synthetic tables; both read them here:

* :func:`offset_spread`: the spread of the person's offsets c - t (a panel's age keeps age - year within one).
* :func:`decreases`: whether the person's value of c ever goes down as t goes up (work experience never does).
* :func:`varies`: whether the person's c takes two values on rows with t set (those who could go down).

Each is an aggregate expression (``groupBy(person).agg(...)``) built from Spark built-ins only (higher-order
functions, no Python UDF: it runs on Spark Connect); rows where c or t is empty are left out.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

__all__ = ["offset_spread", "decreases", "varies"]


def _number(name: str) -> Column:
    return F.col(f"`{name}`").cast("double")


def offset_spread(column: str, base: str) -> Column:
    """The greatest minus the least of a person's offsets ``column`` - ``base`` (double; null without a row where
    both are set)."""
    offset = _number(column) - _number(base)
    return F.max(offset) - F.min(offset)


def decreases(column: str, base: str) -> Column:
    """True when a person's ``column``, its rows ordered by ``base`` (ties by the value), is ever lower than on
    the row before (boolean; False with fewer than two rows where both are set)."""
    both = _number(column).isNotNull() & _number(base).isNotNull()
    pairs = F.collect_list(F.when(both, F.struct(_number(base).alias("t"), _number(column).alias("v"))))
    values = F.transform(F.array_sort(pairs), lambda pair: pair["v"])
    start = F.struct(F.lit(float("-inf")).alias("last"), F.lit(False).alias("down"))
    return F.aggregate(
        values,
        start,
        lambda seen, v: F.struct(v.alias("last"), (seen["down"] | (v < seen["last"])).alias("down")),
        lambda seen: seen["down"],
    )


def varies(column: str, base: str) -> Column:
    """True when a person's ``column`` takes two values on its rows where ``base`` is set (boolean; null without
    such a row)."""
    value = F.when(_number(base).isNotNull(), _number(column))
    return F.min(value) < F.max(value)
