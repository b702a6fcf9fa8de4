"""How a person's values of a number column go with a time base, as Spark aggregates over the person's rows.

A person-level release tests two rules of an event table's number columns against a time base t (a panel's year,
or the calendar year of a date or timestamp: :func:`time_base`; docs/design.md section 2.10, step 6), and its
evaluation compares them in the real and the synthetic tables; both read them here:

* :func:`offset_spread`: the spread of the person's offsets c - t (a panel's age keeps age - year within one).
* :func:`decreases`: whether the person's value of c ever goes down as t goes up (work experience never does).
* :func:`varies`: whether the person's c takes two values on rows with t set (those who could go down).

A third rule needs no base: a person's values of a time-like column (a rating's timestamp) lie in a window of the
column's range, the person's activity period; :func:`span_class` places the width of that window on the public
decade grid :data:`SPAN_EDGES`.

Each is an aggregate expression (``groupBy(person).agg(...)``) built from Spark built-ins only (higher-order
functions, no Python UDF: it runs on Spark Connect); rows where c or t is empty are left out.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

__all__ = [
    "SPAN_EDGES",
    "TIME_TYPES",
    "offset_spread",
    "decreases",
    "varies",
    "span_class",
    "span_bounds",
    "time_base",
]

TIME_TYPES = ("date", "timestamp", "timestamp_ntz")
"""The Spark types (``simpleString``) of a date or timestamp column, whose time base is its calendar year."""

SPAN_EDGES = tuple(10.0**e for e in range(-3, 19))
"""The public decade edges of a person's span (its greatest minus least value, in the column's unit: days for a
date, seconds for a timestamp): class 0 holds a span of 0, class 1 (0, 10^-3), class i in 2..22
[10^(i-5), 10^(i-4)), class 23 10^18 and more. Independent of any data."""


def span_class(value: Column) -> Column:
    """The class on :data:`SPAN_EDGES` of the greatest minus the least of a person's non-empty ``value`` (a double
    expression) as an aggregate (int; null when fewer than two of its rows hold a value)."""
    span = F.max(value) - F.min(value)
    decade = F.floor(F.log10(F.greatest(span, F.lit(SPAN_EDGES[0])))) - F.lit(-3.0)
    last = len(SPAN_EDGES)
    return (
        F.when(F.count(value) < 2, F.lit(None))
        .when(span <= 0, F.lit(0))
        .when(span < SPAN_EDGES[0], F.lit(1))
        .otherwise(F.least(decade + F.lit(2.0), F.lit(float(last + 1))))
        .cast("int")
    )


def span_bounds(i: int) -> tuple[float, float]:
    """The [low, high) span of class ``i`` of :data:`SPAN_EDGES` (class 0: (0, 0); the last: high 10 x low)."""
    if i == 0:
        return 0.0, 0.0
    if i == 1:
        return 0.0, SPAN_EDGES[0]
    low = SPAN_EDGES[i - 2]
    return low, SPAN_EDGES[i - 1] if i - 1 < len(SPAN_EDGES) else 10.0 * low


def _number(name: str) -> Column:
    return F.col(f"`{name}`").cast("double")


def time_base(name: str, type_name: str) -> Column:
    """The value of the time base ``name`` of Spark type ``type_name`` (``simpleString``) as a double: the calendar
    year of a date or timestamp (a person's age moves with it, by at most one within a year), else the number."""
    column = F.col(f"`{name}`")
    return F.year(column).cast("double") if type_name in TIME_TYPES else column.cast("double")


def offset_spread(column: str, base: Column) -> Column:
    """The greatest minus the least of a person's offsets ``column`` - ``base`` (the base's value,
    :func:`time_base`; double; null without a row where both are set)."""
    offset = _number(column) - base
    return F.max(offset) - F.min(offset)


def decreases(column: str, base: Column) -> Column:
    """True when a person's ``column``, its rows ordered by ``base`` (the base's value, :func:`time_base`; ties by
    the value), is ever lower than on the row before (boolean; False with fewer than two rows where both are
    set)."""
    both = _number(column).isNotNull() & base.isNotNull()
    pairs = F.collect_list(F.when(both, F.struct(base.alias("t"), _number(column).alias("v"))))
    values = F.transform(F.array_sort(pairs), lambda pair: pair["v"])
    start = F.struct(F.lit(float("-inf")).alias("last"), F.lit(False).alias("down"))
    return F.aggregate(
        values,
        start,
        lambda seen, v: F.struct(v.alias("last"), (seen["down"] | (v < seen["last"])).alias("down")),
        lambda seen: seen["down"],
    )


def varies(column: str, base: Column) -> Column:
    """True when a person's ``column`` takes two values on its rows where ``base`` (the base's value) is set
    (boolean; null without such a row)."""
    value = F.when(base.isNotNull(), _number(column))
    return F.min(value) < F.max(value)
