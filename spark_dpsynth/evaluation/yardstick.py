"""The evaluation's yardstick: the cells on which the sensitive and synthetic tables are compared, chosen from the
sensitive input and public configuration only, never from the release (docs/design.md section 5.2).

Per column (``build_yardstick``; the evaluation is not private, so the rule may read the sensitive table):

* ``"values"``: strings, booleans, and numeric, date or timestamp columns with at most
  :data:`CATEGORICAL_MAX_VALUES` distinct values in the sensitive table are compared on the input's own values.
  A synthetic value is first read in the sensitive column's type (a string "4399" in an integer column is the
  integer 4399, a whole double 9.0 in an integer column is 9), then written in one canonical spelling on both
  sides, so a value the sensitive column never holds is a cell of its own: a mismatch, never hidden by a bin.
* ``"bins"``: numeric, date and timestamp columns with more distinct values are compared on bins: the public
  edges of the configuration when the column has some, else the sensitive table's own deciles
  (``percentile_approx`` at the probabilities 0.1 .. 0.9, repeated edges merged). The same edges cut both
  tables; the first and last bins are open, so a synthetic value outside the sensitive range falls in an end
  bin (and is also counted, below). A non-empty synthetic value that is not a number is a cell of its own.

* Numbers written as text: a string column whose non-empty values in the sensitive table are more than half
  finite numbers (:data:`TEXT_NUMBERS_SHARE`; an income column of numbers and ``N``) is measured like a number
  column (``"values"`` up to :data:`CATEGORICAL_MAX_VALUES` distinct numbers, then ``"bins"`` on the deciles of
  its numbers, the rule's ``text`` flag), its other values cells of their own on both sides.

``out_of_support`` (per column, the synthetic side): the synthetic values the sensitive column cannot hold: for
``"values"`` columns, non-empty values that never occur in the sensitive column (from the 1-way cells of the cell
pass: a non-empty cell with a sensitive count of 0); for ``"bins"`` columns, values outside the sensitive
column's observed [min, max] or not numbers at all (observed in the cell pass, :meth:`Yardstick.observe`); for
numbers written as text, its numbers outside that range and its text values that never occur in the sensitive
column.

Computation: one aggregation over the sensitive table, grouped by column over (column, value) pairs, for an
approximate distinct count, ``min`` and ``max`` of every numeric, date and timestamp column; then, for the
columns cut at their deciles only (more than :data:`CATEGORICAL_MAX_VALUES` distinct values, no public bins),
one aggregation per 8 columns for 9 quantiles each (a quantile summary per column of a wide table in one
aggregation runs the driver out of memory, docs/design.md section 5.2); the driver receives about 12 numbers
per column. The compared tables are
then plain projections (strings), counted by the cell pass of :mod:`spark_dpsynth.evaluation.cells`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_dpsynth.errors import SchemaError
from spark_dpsynth.evaluation._common import quote
from spark_dpsynth.evaluation.numeric import COLUMNS_PER_PASS, numeric_kind, on_scale
from spark_dpsynth.profile import text_kind_counts

__all__ = ["CATEGORICAL_MAX_VALUES", "QUANTILE_BINS", "Yardstick", "build_yardstick"]

CATEGORICAL_MAX_VALUES = 100
"""A numeric, date or timestamp column with at most this many distinct values in the sensitive table is compared
on its own values (``approx_count_distinct`` at a relative standard deviation of 1%: HyperLogLog++ over 16,384
registers counts by linear counting there, exact in practice at this size)."""
QUANTILE_BINS = 10
"""Bins of a column compared on the sensitive table's quantiles: its deciles (probabilities 0.1 .. 0.9)."""
QUANTILE_ACCURACY = 10_000
"""``percentile_approx``'s accuracy for those quantiles (rank error at most n / 10,000 rows)."""
_NOT_A_VALUE = "(not a value of the column) "
"""Prefix of a non-empty synthetic value that does not read in the sensitive column's type: a cell of its own,
never equal to a canonical value."""
_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_LONG_BOUND = 9.2e18
"""Doubles of smaller magnitude cast to bigint without overflow."""


def build_yardstick(
    sensitive: DataFrame,
    columns: Sequence[str],
    *,
    numbers: Sequence[str] = (),
    bins: Mapping[str, Sequence[float]] | None = None,
) -> Yardstick:
    """The rule of every column of ``columns``, from the sensitive table (typed or strings) and public bins.

    Args:
        sensitive: the sensitive table (sampled as compared), holding ``columns``, empty cells null.
        columns: the compared columns, in order.
        numbers: string columns to read as numbers (declared numeric, or with public bins).
        bins: public bin edges (strictly increasing, finite) of some columns, from the configuration.

    Returns:
        The :class:`Yardstick`; the sensitive statistics cost one aggregation (none without a numeric, date or
        timestamp column), and one more per 8 columns cut at their deciles.

    Raises:
        SchemaError: a column is missing from ``sensitive``, or of a type that is neither string, boolean,
            numeric, date nor timestamp.
    """
    bins = dict(bins or {})
    types = {f.name: f.dataType for f in sensitive.schema.fields}
    kinds: dict[str, str] = {}
    for c in columns:
        if c not in types:
            raise SchemaError(f"the sensitive table lacks column {c}")
        t = types[c]
        kind = numeric_kind(t)
        if kind is None and isinstance(t, T.StringType) and (c in numbers or c in bins):
            kind = "number"
        if kind is None and not isinstance(t, (T.StringType, T.BooleanType)):
            raise SchemaError(
                f"column {c} ({t.simpleString()}) cannot be compared: not a string, boolean, number, date or timestamp"
            )
        kinds[c] = kind or "category"
    # numbers written as text (an income column holding numbers and "N"): a string column whose non-empty values
    # are mostly finite numbers is measured as a number; its other values are cells of their own
    texts, numbers_of = _text_numbers(
        sensitive, [c for c in columns if kinds[c] == "category" and isinstance(types[c], T.StringType)]
    )
    for c in texts:
        # a few numbers written as text (at most CATEGORICAL_MAX_VALUES distinct texts that are numbers): a
        # code, compared on its own values, without the statistics pass below
        if numbers_of[c] > CATEGORICAL_MAX_VALUES:
            kinds[c] = "number"
    measured = [c for c in columns if kinds[c] != "category"]
    stats: dict[str, dict[str, Any]] = {}
    probabilities = F.lit([i / QUANTILE_BINS for i in range(1, QUANTILE_BINS)])
    values = {c: _finite(on_scale(_text_or_value(sensitive, c), types[c], kinds[c])) for c in measured}
    # The distinct counts, minima and maxima of every measured column in one aggregation, grouped by column over
    # (column, value) pairs: one expression of each, whatever the width (not a job per few columns). The driver
    # receives three numbers per column.
    if measured:
        pairs = sensitive.select(
            F.explode(
                F.array(
                    *[F.struct(F.lit(i).alias("i"), values[c].alias("x")) for i, c in enumerate(measured)]
                )
            ).alias("p")
        ).select("p.i", "p.x")
        by_column = pairs.groupBy("i").agg(
            F.approx_count_distinct("x", 0.01).alias("d"), F.min("x").alias("lo"), F.max("x").alias("hi")
        )
        found = {int(r["i"]): r for r in by_column.collect()}
        for i, c in enumerate(measured):
            r = found.get(i)  # none when the table is empty
            stats[c] = {
                "distinct": int(r["d"]) if r is not None else 0,
                "min": r["lo"] if r is not None else None,
                "max": r["hi"] if r is not None else None,
                "quantiles": [],
            }
    # The deciles only where they cut the bins (more distinct values than CATEGORICAL_MAX_VALUES, no public
    # bins), in passes of COLUMNS_PER_PASS, as the numeric metrics: every numeric column of a wide table in one
    # aggregation runs the driver's JVM out of memory (a quantile summary per column; docs/design.md section 5.2).
    cut = [c for c in measured if stats[c]["distinct"] > CATEGORICAL_MAX_VALUES and c not in bins]
    for start in range(0, len(cut), COLUMNS_PER_PASS):
        batch = list(enumerate(cut))[start : start + COLUMNS_PER_PASS]
        aggs: list[Column] = [
            F.percentile_approx(values[c], probabilities, QUANTILE_ACCURACY).alias(f"q{i}") for i, c in batch
        ]
        # One row: 9 numbers per column.
        row = sensitive.agg(*aggs).collect()[0].asDict()
        for i, c in batch:
            stats[c]["quantiles"] = list(row[f"q{i}"] or [])
    rules: dict[str, dict[str, Any]] = {}
    for c in columns:
        if c in texts and kinds[c] == "number" and stats[c]["distinct"] <= CATEGORICAL_MAX_VALUES:
            kinds[c] = "category"  # distinct texts, fewer numbers ("1" and "01"): a code, on its own values
        if kinds[c] == "category":
            rules[c] = {
                "rule": "values",
                "kind": "category",
                "why": "string or boolean: the input's own values",
            }
            continue
        s = stats[c]
        # public bins first: the resolution the configuration asks for (its synthetic values are drawn inside
        # them, so a column of 30 whole numbers in 5-year bins is compared on those bins, not on its values)
        if s["distinct"] <= CATEGORICAL_MAX_VALUES and c not in bins:
            rules[c] = {
                "rule": "values",
                "kind": kinds[c],
                "distinct": s["distinct"],
                "why": f"{s['distinct']} distinct values (<= {CATEGORICAL_MAX_VALUES}): the input's own values",
            }
            continue
        if c in bins:
            edges = [float(e) for e in bins[c]]
            why = f"{s['distinct']} distinct values: the public bins of the configuration"
        else:
            edges = sorted({float(q) for q in s["quantiles"] if q is not None and math.isfinite(q)})
            why = (
                f"{s['distinct']} distinct values (> {CATEGORICAL_MAX_VALUES}): the sensitive table's "
                f"{QUANTILE_BINS}-quantiles"
            )
        rules[c] = {
            "rule": "bins",
            "kind": kinds[c],
            "distinct": s["distinct"],
            "edges": edges,
            "min": s["min"],
            "max": s["max"],
            "why": why,
        }
        if c in texts:
            # its text values are compared as values: one that the input never holds is out of support
            rules[c]["text"] = True
            rules[c]["why"] = f"numbers written as text, {why}; its other values on their own"
    return Yardstick(tuple(columns), rules, types)


class Yardstick:
    """The compared cells of every column (see the module docstring): ``rules`` (column -> its rule, JSON),
    :meth:`table` (a table as compared strings), :meth:`observe` (the out-of-range counts of the binned
    columns)."""

    def __init__(
        self, columns: tuple[str, ...], rules: dict[str, dict[str, Any]], types: Mapping[str, T.DataType]
    ) -> None:
        self.columns = columns
        self.rules = rules
        self._types = dict(types)
        self._observation: Observation | None = None

    @property
    def binned(self) -> tuple[str, ...]:
        return tuple(c for c in self.columns if self.rules[c]["rule"] == "bins")

    def table(self, df: DataFrame) -> DataFrame:
        """``df``'s columns as the compared strings (null = empty), in ``columns`` order."""
        types = {f.name: f.dataType for f in df.schema.fields}
        missing = [c for c in self.columns if c not in types]
        if missing:
            raise SchemaError(f"the table lacks the compared column(s) {missing}")
        return df.select(*(self._compared(df, c, types[c]).alias(c) for c in self.columns))

    def observe(self, df: DataFrame) -> DataFrame:
        """``df`` (the synthetic table, before :meth:`table`) observing, per binned column, its non-empty values
        outside the sensitive [min, max] or not numbers, in the pass that reads it (:meth:`out_of_range`)."""
        binned = self.binned
        if not binned:
            return df
        types = {f.name: f.dataType for f in df.schema.fields}
        counts = []
        for i, c in enumerate(binned):
            rule = self.rules[c]
            value = _text_or_value(df, c)
            x = _finite(on_scale(value, types[c], rule["kind"]))
            below, above = x < F.lit(float(rule["min"])), x > F.lit(float(rule["max"]))
            if rule.get("text"):
                # numbers written as text: a text value is a cell of its own, out of support when the input never
                # holds it (from the 1-way cells, as is a number below a first edge at the minimum: its bin is
                # empty in the input); here only the numbers beyond the range that no empty bin counts
                first = rule["edges"][0] if rule["edges"] else None
                if first is not None and not float(first) > float(rule["min"]):
                    below = F.lit(False)
                outside = value.isNotNull() & x.isNotNull() & (below | above)
            else:
                outside = value.isNotNull() & (x.isNull() | below | above)
            counts.append(F.sum(outside.cast("long")).alias(f"o{i}"))
        self._observation = Observation("evaluate_out_of_range")
        return df.observe(self._observation, F.count(F.lit(1)).alias("rows"), *counts)

    def out_of_range(self) -> dict[str, int]:
        """Binned column -> its observed out-of-range count (after the pass that read :meth:`observe`'s table)."""
        if self._observation is None:
            return {}
        got = self._observation.get
        return {c: int(got.get(f"o{i}") or 0) for i, c in enumerate(self.binned)}

    def _compared(self, df: DataFrame, c: str, data_type: T.DataType) -> Column:
        rule = self.rules[c]
        value = _text_or_value(df, c)
        if rule["rule"] == "bins":
            x = _finite(on_scale(value, data_type, rule["kind"]))
            label = _bin_label(x, rule["edges"])
            return (
                F.when(value.isNull(), F.lit(None).cast("string"))
                .when(x.isNull(), F.concat(F.lit(_NOT_A_VALUE), value.cast("string")))
                .otherwise(label)
            )
        canonical = self._canonical(value, data_type, self._types[c], rule["kind"])
        return F.when(value.isNull(), F.lit(None).cast("string")).otherwise(
            F.coalesce(canonical, F.concat(F.lit(_NOT_A_VALUE), value.cast("string")))
        )

    @staticmethod
    def _canonical(value: Column, data_type: T.DataType, sensitive_type: T.DataType, kind: str) -> Column:
        """``value`` read in the sensitive column's type and spelled canonically; null when it does not read."""
        if kind == "category":
            if isinstance(sensitive_type, T.BooleanType) and not isinstance(data_type, T.BooleanType):
                return F.lower(value.cast("string")).try_cast("boolean").cast("string")
            return value.cast("string")
        if kind == "date":
            day = value if isinstance(data_type, T.DateType) else value.cast("string").try_cast("date")
            return day.cast("string")
        if kind == "timestamp":
            ts = (
                value
                if isinstance(data_type, T.TimestampType)
                else value.cast("string").try_cast("timestamp")
            )
            return ts.cast("string")
        if isinstance(sensitive_type, _INTEGRAL) and isinstance(data_type, _INTEGRAL):
            return value.cast("bigint").cast("string")
        x = _finite(on_scale(value, data_type, "number"))
        if isinstance(sensitive_type, _INTEGRAL):
            # a whole number in the integer's spelling (9.0 -> "9"), anything else in the double's ("4399.5")
            whole = (x == F.floor(x)) & (F.abs(x) < F.lit(_LONG_BOUND))
            return F.when(whole, x.cast("bigint").cast("string")).otherwise((x + F.lit(0.0)).cast("string"))
        # a real (or a string read as a number): the double's spelling, -0.0 as 0.0
        return (x + F.lit(0.0)).cast("string")


TEXT_NUMBERS_SHARE = 0.5
"""A string column whose finite numbers are more than this share of its non-empty values in the sensitive table
holds numbers written as text (:func:`build_yardstick`)."""


def _text_numbers(sensitive: DataFrame, strings: Sequence[str]) -> tuple[tuple[str, ...], dict[str, int]]:
    """The string columns of ``strings`` whose non-empty values in ``sensitive`` are more than
    :data:`TEXT_NUMBERS_SHARE` finite numbers (:func:`~spark_dpsynth.profile.text_as_number`, as the
    DP test reads them), and for each of them its number of distinct texts that are numbers: one Spark job
    (:func:`~spark_dpsynth.profile.text_kind_counts`), 8 counts per column to the driver; none without a
    string column."""
    if not strings:
        return (), {}
    records, values = text_kind_counts(sensitive, [_text_or_value(sensitive, c) for c in strings])
    numbers, non_empty = records[:, :3].sum(axis=1), records.sum(axis=1)
    found = tuple(
        c for i, c in enumerate(strings) if numbers[i] and numbers[i] > TEXT_NUMBERS_SHARE * non_empty[i]
    )
    distinct = values[:, :3].sum(axis=1)
    return found, {c: int(distinct[strings.index(c)]) for c in found}


def _text_or_value(df: DataFrame, c: str) -> Column:
    """Column ``c`` of ``df``: a string trimmed, "" as null; any other type as it is."""
    col = F.col(quote(c))
    if isinstance(df.schema[c].dataType, T.StringType):
        text = F.trim(col)
        return F.when(text != F.lit(""), text)
    return col


def _finite(x: Column) -> Column:
    """``x`` (a double) when it is a finite number, else null."""
    return F.when(x.isNotNull() & ~F.isnan(x) & (F.abs(x) != F.lit(float("inf"))), x)


def _fmt(x: float) -> str:
    return format(x, ".10g")


def _bin_label(x: Column, edges: Sequence[float]) -> Column:
    """The label of the bin of ``x`` (a finite double, not null): ``<e1``, ``[e_i, e_i+1)``, ``>=e_k``."""
    if not edges:
        return F.lit("all values")
    out = F.when(x < F.lit(edges[0]), F.lit(f"<{_fmt(edges[0])}"))
    for a, b in zip(edges, edges[1:], strict=False):
        out = out.when(x < F.lit(b), F.lit(f"[{_fmt(a)}, {_fmt(b)})"))
    return out.otherwise(F.lit(f">={_fmt(edges[-1])}"))
