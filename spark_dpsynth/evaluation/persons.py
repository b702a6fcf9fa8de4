"""Persons: how the synthetic persons of an event release compare with the sensitive ones (NOT private).

An event table holds many rows per person, the person named by a key column (the privacy unit). A person-level
release measures at most L rows of every person (``manifest["persons"]["max_rows_per_person"]``) and its
synthetic table holds synthetic persons, each with its rows under one surrogate key (docs/design.md section
2.10). :func:`person_metrics` compares the two tables person by person:

* the number of persons and the share of sensitive persons with more than L rows (what the cap cuts off);
* the distribution of the persons' numbers of rows over public bins and its total variation distance;
* per person column (a value per person: birth year, home region), the distribution of the persons' values and
  its total variation distance;
* per event column with few values, the mean number of rows per person holding each value.

The total variation distance (TVD) of two distributions p and q over the same values is half their L1 distance,
TVD(p, q) = (1/2) sum_v |p(v) - q(v)|, in [0, 1] [LPW09, Proposition 4.2]; it is computed exactly from integer
counts where the counts are integers (one rounding).

:func:`row_level_identifier_note` is the public side: from a release manifest alone, a sentence for a row-level
release whose table has identifier columns (a person with many rows is less protected than one with one row).

Privacy: :func:`person_metrics` reads the sensitive table without noise; its figures are not differentially
private (as the rest of :mod:`spark_dpsynth.evaluation`): they are for the data owner.

Reference: [LPW09] D. A. Levin, Y. Peres, E. L. Wilmer, "Markov Chains and Mixing Times", AMS, 2009.
"""

from __future__ import annotations

import bisect
import re
import shlex
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from spark_dpsynth.data.trends import SPAN_EDGES, decreases, offset_spread, span_class, time_base
from spark_dpsynth.errors import InvalidParameterError, SchemaError
from spark_dpsynth.evaluation._common import quote
from spark_dpsynth.profile.columns import as_number, scale_of

__all__ = [
    "person_metrics",
    "row_level_identifier_note",
    "empty_columns_note",
    "MAX_EVENT_VALUES",
    "MAX_EVENT_COLUMNS",
]

MAX_EVENT_VALUES = 20
"""An event column is compared in ``events_by_category`` when both tables together hold at most this many
distinct values in it (the empty value counted)."""
MAX_EVENT_COLUMNS = 5
"""At most this many event columns are compared in ``events_by_category``: the first ones, in the order given,
among the first 2 x this many candidates."""
_SCREEN_FACTOR = 2
"""An event column whose approximate distinct count (HyperLogLog++) is above ``MAX_EVENT_VALUES`` times this is
not counted exactly: a margin far above the estimator's error at these sizes."""

_ID_NAME = re.compile(r"(?i:^id($|[_ .-]|code|num|no)|[_ .-]id$|(^|[_ .-])key$)|[a-z0-9](Id|ID)$")
"""A column name that reads as a key: ``id``, ``idcode``, ``customer_id``, ``userId``, ``Unit ID``, ``key``."""

_SIDE, _ROWS, _WEIGHT = "__side", "__rows", "__weight"
_SENSITIVE, _SYNTHETIC = 0, 1


def person_metrics(
    sensitive: DataFrame,
    synthetic: DataFrame,
    unit: str,
    cap: int,
    person_columns: Sequence[str] = (),
    event_columns: Sequence[str] = (),
    grid: Sequence[int] | None = None,
    distinct_columns: Sequence[str] = (),
    offset_time_column: str | None = None,
    time_offset_columns: Sequence[str] = (),
    offset_tolerance: float = 1.0,
    nondecreasing_columns: Sequence[str] = (),
    span_columns: Sequence[str] = (),
) -> dict[str, Any]:
    """Compare the persons of a synthetic event table with those of the sensitive one.

    Rows whose key (``unit``) is null or blank are left out of both tables (a sensitive row without a person;
    a synthetic row always has one). Values are compared as strings (``cast("string")``); an empty cell (null, or
    only white space) is the value ``""``. Computed on Spark with the DataFrame API (it runs on Spark Connect):
    a person's number of rows is a ``groupBy`` of the key, the histograms are ``groupBy`` counts of the persons;
    the driver receives at most 2 (L + 1) histogram rows, one row per person column and at most
    :data:`MAX_EVENT_VALUES` rows per event column screened, never a row of either table.

    Args:
        sensitive: the sensitive event table, one row per event, any column types, with the column ``unit``.
        synthetic: the synthetic event table with the column ``unit`` (its surrogate keys: a synthetic person's
            rows share one) and the same ``person_columns`` and ``event_columns``.
        unit: the person key column (the privacy unit).
        cap: L >= 1, the release's cap on the rows of one person (``max_rows_per_person``).
        person_columns: columns with one value per person; a person's value is the least (as strings) of its
            non-empty values, ``""`` when it has none.
        event_columns: candidate columns for ``events_by_category``, in order (``unit`` is skipped).
        grid: increasing lower edges of the bins of rows per person, from 1 (the release's public
            ``rows_grid``); None: one bin per number 1..L - 1 and a last bin of L and more.
        distinct_columns: columns the release found no person repeats (its ``distinct_columns``).
        offset_time_column: the release's time base t (``offset_time_column``); None: no ``offset_persons``.
        time_offset_columns: number columns the release found moving with t (``time_offset_columns``).
        offset_tolerance: the spread of a person's offsets c - t allowed to such a column (the release's
            ``OFFSET_TOLERANCE``).
        nondecreasing_columns: number columns the release found never going down as t goes up
            (``nondecreasing_columns``); compared only with ``offset_time_column``.
        span_columns: number, date or timestamp columns whose persons' spans the release counted
            (``noisy_persons_by_span``).

    Returns:
        A JSON-able dict (shares in [0, 1], rows and persons as counts; None where a table has no person):

        * ``cap``: L.
        * ``persons``: ``{"sensitive": int, "synthetic": int}``, the numbers of persons (distinct keys).
        * ``share_above_cap``: the share of sensitive persons with more than L rows.
        * ``mean_rows_per_person``: ``{"sensitive": float, "synthetic": float}``, the mean rows per person.
        * ``rows_per_person``: ``{"bins": [[lo, hi], ...], "sensitive": [share], "synthetic": [share]}``, the
          share of each table's persons whose number of rows falls in each bin of ``grid`` (``hi`` None: the
          last bin, lo rows and more).
        * ``rows_per_person_tvd``: the TVD of those two distributions.
        * ``person_columns_tvd``: ``{column: TVD}``, per person column the TVD of the distributions of the
          persons' values in the two tables.
        * ``events_by_category``: ``{column: {"tvd_of_means": float, "values": {value: [sensitive mean,
          synthetic mean]}}}`` for the first :data:`MAX_EVENT_COLUMNS` event columns whose two tables hold at
          most :data:`MAX_EVENT_VALUES` distinct values: per value, the mean number of rows per person that hold
          it (the means of a column sum to the mean rows per person). ``tvd_of_means`` is the TVD of the two
          mean vectors each divided by its sum. Values are sorted by decreasing sensitive mean; Spark-summed
          means are rounded to 10 significant digits.
        * ``repeating_persons``: ``{column: {"sensitive": share, "synthetic": share}}`` per distinct column, the
          share of each table's persons of two rows or more whose rows hold one of its values twice (None
          without such persons).
        * ``offset_persons``: ``{column: {"sensitive": share, "synthetic": share}}`` per time-offset column, the
          share of each table's persons of two rows or more whose offsets c - t (rows where both are set) spread
          by more than ``offset_tolerance``.
        * ``decreasing_persons``: ``{column: {"sensitive": share, "synthetic": share}}`` per never-decreasing
          column, the share of each table's persons of two rows or more whose value goes down as t goes up.
        * ``span_tvd``: ``{column: TVD}`` per span column, the TVD of the distributions of each table's persons
          of two valued rows or more over the decade classes of their span (greatest minus least value, in days
          for a date, seconds for a timestamp; ``data.trends.SPAN_EDGES``): a rating's timestamps within a
          person's activity period (None without such persons).

    Raises:
        InvalidParameterError: ``cap`` is not an integer >= 1, or ``grid`` is not increasing from 1.
        SchemaError: ``unit``, a person column or an event column is missing from a table. Checked on the
            schemas, before any data is read.

    Privacy:
        None: the figures read the sensitive table without noise (exact counts of persons and rows); they are
        NOT differentially private and are for the data owner, like the sensitive table itself.
    """
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
        raise InvalidParameterError(f"cap must be an integer >= 1 (max_rows_per_person), got {cap!r}")
    lows = [int(x) for x in grid] if grid is not None else list(range(1, cap + 1))
    if not lows or lows[0] != 1 or any(b <= a for a, b in zip(lows, lows[1:], strict=False)):
        raise InvalidParameterError(f"grid must be increasing lower edges starting at 1, got {grid!r}")
    person_columns = [c for c in person_columns if c != unit]
    event_columns = [c for c in event_columns if c != unit and c not in person_columns]
    for name, df in (("sensitive", sensitive), ("synthetic", synthetic)):
        missing = [
            c
            for c in (
                unit,
                *person_columns,
                *event_columns,
                *distinct_columns,
                *time_offset_columns,
                *nondecreasing_columns,
                *span_columns,
            )
            if c not in df.columns
        ]
        if offset_time_column is not None and offset_time_column not in df.columns:
            missing.append(offset_time_column)
        if missing:
            raise SchemaError(f"the {name} table lacks the person metrics' column(s) {missing}")

    sides = [_keyed(sensitive, unit), _keyed(synthetic, unit)]
    histogram = _rows_histogram(sides, unit)
    persons = {side: sum(count for count, _ in histogram[side].values()) for side in (_SENSITIVE, _SYNTHETIC)}
    n_s, n_y = persons[_SENSITIVE], persons[_SYNTHETIC]

    def binned(side: int) -> list[int]:
        out = [0] * len(lows)
        for rows_, (count, _) in histogram[side].items():
            out[bisect.bisect_right(lows, rows_) - 1] += count
        return out

    binned_s, binned_y = binned(_SENSITIVE), binned(_SYNTHETIC)
    types = {f.name: f.dataType.simpleString() for f in sensitive.schema.fields}
    base = None if offset_time_column is None else time_base(offset_time_column, types[offset_time_column])
    rows = {side: sum(total for _, total in histogram[side].values()) for side in (_SENSITIVE, _SYNTHETIC)}
    above = sum(count for r, (count, _) in histogram[_SENSITIVE].items() if r > cap)
    uppers = [*(b - 1 for b in lows[1:]), None]
    return {
        "cap": cap,
        "persons": {"sensitive": n_s, "synthetic": n_y},
        "share_above_cap": _ratio(above, n_s),
        "mean_rows_per_person": {
            "sensitive": _ratio(rows[_SENSITIVE], n_s),
            "synthetic": _ratio(rows[_SYNTHETIC], n_y),
        },
        "rows_per_person": {
            "bins": [[lo, hi] for lo, hi in zip(lows, uppers, strict=True)],
            "sensitive": [_ratio(c, n_s) for c in binned_s],
            "synthetic": [_ratio(c, n_y) for c in binned_y],
        },
        "rows_per_person_tvd": _exact_tvd(zip(binned_s, binned_y, strict=True), n_s, n_y),
        "person_columns_tvd": _person_columns_tvd(sides, unit, person_columns, n_s, n_y),
        "events_by_category": _events_by_category(sides, unit, event_columns, n_s, n_y),
        "repeating_persons": _persons_share(
            sides,
            unit,
            [c for c in distinct_columns if c != unit],
            lambda c: F.size(F.collect_set(_text(c))) < F.count(F.lit(1)),
        ),
        "offset_persons": {}
        if offset_time_column is None
        else _persons_share(
            sides,
            unit,
            list(time_offset_columns),
            lambda c: offset_spread(c, base) > offset_tolerance,
        ),
        "decreasing_persons": {}
        if offset_time_column is None
        else _persons_share(sides, unit, list(nondecreasing_columns), lambda c: decreases(c, base)),
        "span_tvd": _span_tvd(sides, unit, [c for c in span_columns if c != unit]),
    }


def _span_tvd(sides: list[DataFrame], unit: str, columns: Sequence[str]) -> dict[str, float | None]:
    """Per column, the TVD of the two tables' persons over the classes of their span (``span_tvd`` of
    :func:`person_metrics`): one aggregation per table, one driver row each."""
    out: dict[str, float | None] = {}
    if not columns:
        return out
    classes = len(SPAN_EDGES) + 2
    counts = []
    for df in sides:
        x = {c: as_number(F.col(quote(c)), scale_of(df.schema[c].dataType)) for c in columns}
        per_person = df.groupBy(F.col(quote(unit)).alias("__key")).agg(
            *[span_class(x[c]).alias(f"s{i}") for i, c in enumerate(columns)]
        )
        counts.append(
            per_person.agg(
                *[
                    F.sum((F.col(f"s{i}") == F.lit(k)).cast("long")).alias(f"s{i}_{k}")
                    for i in range(len(columns))
                    for k in range(classes)
                ]
            ).collect()[0]
        )
    for i, c in enumerate(columns):
        s, y = ([int(row[f"s{i}_{k}"] or 0) for k in range(classes)] for row in counts)
        out[c] = _exact_tvd(zip(s, y, strict=True), sum(s), sum(y))
    return out


def row_level_identifier_note(manifest: Mapping[str, Any]) -> str | None:
    """A sentence for a row-level release of a table with identifier columns, or None.

    When the release's privacy unit is the record (``manifest["privacy_unit"] == "record"``, the default of a
    manifest without the key) and the manifest lists identifier columns (its ``identifier_columns`` block,
    :func:`spark_dpsynth.profile.identifiers_manifest`) or attribute columns named like a key (``id``,
    ``idcode``, ``customer_id``, ``userId``, ``Unit ID``, ``key``), such a column may name a person with many rows, who
    is less protected than the guarantee per row suggests: the sentence says so and how to run at person level.
    None for a person-level release (or one whose unit is unknown, read from SDS files) or without identifier
    columns. From the manifest alone (public).
    """
    if manifest.get("privacy_unit", "record") != "record" or manifest.get("persons"):
        return None
    named = [c for c in manifest.get("columns") or () if _ID_NAME.search(str(c))]
    names = list(dict.fromkeys([*(manifest.get("identifier_columns") or {}), *named]))
    if not names:
        return None
    if len(names) == 1:
        which, column = f"'{names[0]}' names", shlex.quote(names[0])
    else:
        which, column = "one of " + ", ".join(f"'{n}'" for n in names) + " names", "COLUMN"
    return (
        f"the guarantee is per row: a person with many rows is less protected; if {which} a person whose values "
        f"repeat, run with --privacy-unit {column} (person-level DP)"
    )


def empty_columns_note(manifest: Mapping[str, Any], empty_columns: int) -> str | None:
    """A sentence for a person-level release with ``empty_columns`` columns that released (almost) nothing, or
    None (no such column, or a row-level release).

    Such a release measured its events at epsilon_e / L per row on at most L rows of each of about P' persons
    (docs/design.md section 2.10): with few persons a column's values rarely pass the thresholds, whatever its
    binning, so the sentence names the person-level levers (fewer columns, a larger epsilon, a smaller L) with
    the release's figures. From the manifest alone (public: P' and L are DP outputs).
    """
    block = manifest.get("persons")
    if not block or empty_columns <= 0:
        return None
    cap = int(block["max_rows_per_person"])
    persons = manifest.get("protected_number_of_persons")
    about = f"about {int(persons):,} persons" if persons else "the persons"
    smaller = f", a smaller --max-rows-per-person (now {cap})" if cap > 1 else ""
    return (
        f"{empty_columns} column(s) released (almost) nothing: the events were measured at epsilon "
        f"{float(block['event_epsilon_per_row']):.3g} per row on at most {cap} row(s) of each of {about}; "
        f"fewer columns ([data] columns), a larger epsilon{smaller} release more"
    )


# ---------------------------------------------------------------------------------------------------------------
# Spark plans
# ---------------------------------------------------------------------------------------------------------------


def _text(name: str) -> Column:
    """A column as a string, an empty cell (null or white space only) as ``""``."""
    value = F.col(quote(name)).cast("string")
    return F.when(value.isNull() | (F.trim(value) == ""), F.lit("")).otherwise(value)


def _keyed(df: DataFrame, unit: str) -> DataFrame:
    """The rows of ``df`` whose key is neither null nor blank."""
    key = F.col(quote(unit))
    return df.where(key.isNotNull() & (F.trim(key.cast("string")) != ""))


def _persons(keyed: DataFrame, unit: str, person_columns: Sequence[str], side: int) -> DataFrame:
    """One row per person: ``__side``, ``__rows`` and ``p0``, ``p1``, ... (its person columns' values)."""
    values = [
        F.coalesce(F.min(F.when(_text(c) != "", _text(c))), F.lit("")).alias(f"p{i}")
        for i, c in enumerate(person_columns)
    ]
    return (
        keyed.groupBy(F.col(quote(unit)).alias("__key"))
        .agg(F.count(F.lit(1)).alias(_ROWS), *values)
        .select(F.lit(side).alias(_SIDE), _ROWS, *[f"p{i}" for i in range(len(person_columns))])
    )


def _stacked_persons(sides: list[DataFrame], unit: str, person_columns: Sequence[str]) -> DataFrame:
    # the keys are dropped before the union: the synthetic surrogate keys may have another type
    sensitive, synthetic = (_persons(df, unit, person_columns, side) for side, df in enumerate(sides))
    return sensitive.unionByName(synthetic)


def _rows_histogram(sides: list[DataFrame], unit: str) -> dict[int, dict[int, tuple[int, int]]]:
    """side -> rows -> (persons with that many rows, their rows), from one aggregation (one driver row per
    distinct number of rows: fewer than sqrt(2 x rows))."""
    grouped = _stacked_persons(sides, unit, ()).groupBy(_SIDE, F.col(_ROWS).alias("bucket"))
    out: dict[int, dict[int, tuple[int, int]]] = {_SENSITIVE: {}, _SYNTHETIC: {}}
    for r in grouped.agg(F.count(F.lit(1)).alias("persons"), F.sum(_ROWS).alias("rows")).collect():
        out[r[_SIDE]][int(r["bucket"])] = (int(r["persons"]), int(r["rows"]))
    return out


def _person_columns_tvd(
    sides: list[DataFrame], unit: str, person_columns: Sequence[str], n_s: int, n_y: int
) -> dict[str, float | None]:
    """Per person column, TVD = sum_v |s_v n_y - y_v n_s| / (2 n_s n_y), s_v and y_v the persons with value v:
    an exact integer numerator summed on Spark (64-bit: exact below 2^31 persons per table), one rounding."""
    if not person_columns:
        return {}
    if not n_s or not n_y:
        return dict.fromkeys(person_columns)
    pairs = [F.struct(F.lit(i).alias("c"), F.col(f"p{i}").alias("v")) for i in range(len(person_columns))]
    long = _stacked_persons(sides, unit, person_columns).select(_SIDE, F.explode(F.array(*pairs)).alias("cv"))
    counts = long.groupBy(F.col("cv.c").alias("c"), F.col("cv.v").alias("v")).agg(
        *[F.sum(F.when(F.col(_SIDE) == side, 1).otherwise(0)).alias(f"n{side}") for side in (0, 1)]
    )
    difference = F.abs(F.col("n0") * F.lit(n_y) - F.col("n1") * F.lit(n_s))
    # one row per person column
    numerators = {
        r["c"]: int(r["d"]) for r in counts.groupBy("c").agg(F.sum(difference).alias("d")).collect()
    }
    return {c: float(Fraction(numerators.get(i, 0), 2 * n_s * n_y)) for i, c in enumerate(person_columns)}


def _persons_share(
    sides: list[DataFrame],
    unit: str,
    columns: Sequence[str],
    holds: Any,  # noqa: ANN401 - str -> Column
) -> dict[str, dict[str, float | None]]:
    """Per column, the share of each table's persons of two rows or more for whom ``holds(column)`` (an aggregate
    over a person's rows: ``repeating_persons``, ``offset_persons``, ``decreasing_persons`` of
    :func:`person_metrics`): one aggregation per table, one driver row each."""
    out: dict[str, dict[str, float | None]] = {c: {} for c in columns}
    if not columns:
        return out
    for side, df in enumerate(sides):
        per_person = df.groupBy(F.col(quote(unit)).alias("__key")).agg(
            F.count(F.lit(1)).alias(_ROWS),
            *[F.coalesce(holds(c), F.lit(False)).cast("long").alias(f"r{i}") for i, c in enumerate(columns)],
        )
        row = (
            per_person.where(F.col(_ROWS) >= 2)
            .agg(F.count(F.lit(1)).alias("n"), *[F.sum(f"r{i}").alias(f"r{i}") for i in range(len(columns))])
            .collect()[0]
        )
        name = "sensitive" if side == _SENSITIVE else "synthetic"
        for i, c in enumerate(columns):
            out[c][name] = _ratio(int(row[f"r{i}"] or 0), int(row["n"]))
    return out


def _events_by_category(
    sides: list[DataFrame], unit: str, event_columns: Sequence[str], n_s: int, n_y: int
) -> dict[str, dict[str, Any]]:
    """``events_by_category`` of :func:`person_metrics`: a screen by approximate distinct counts (one pass), then
    the value counts of the screened columns (one pass), cut on Spark to the columns with at most
    :data:`MAX_EVENT_VALUES` values. Only the first 2 x :data:`MAX_EVENT_COLUMNS` candidates are screened."""
    # the first candidates only: one aggregation over many HyperLogLog sketches generates code too large for a
    # small driver heap (seen on 32 columns at 1 GB)
    event_columns = list(event_columns)[: _SCREEN_FACTOR * MAX_EVENT_COLUMNS]
    if not event_columns or not n_s or not n_y:
        return {}
    events = [
        df.select(
            F.lit(side).alias(_SIDE),
            F.lit(1.0).alias(_WEIGHT),
            *[_text(c).alias(f"e{i}") for i, c in enumerate(event_columns)],
        )
        for side, df in enumerate(sides)
    ]
    stacked = events[0].unionByName(events[1])
    # one row of len(event_columns) estimates (HyperLogLog++, relative standard deviation 1%)
    estimates = stacked.agg(
        *[F.approx_count_distinct(f"e{i}", 0.01).alias(f"e{i}") for i in range(len(event_columns))]
    ).first()
    assert estimates is not None
    screened = [
        i for i in range(len(event_columns)) if estimates[f"e{i}"] <= MAX_EVENT_VALUES * _SCREEN_FACTOR
    ]
    if not screened:
        return {}
    pairs = [F.struct(F.lit(i).alias("c"), F.col(f"e{i}").alias("v")) for i in screened]
    long = stacked.select(_SIDE, _WEIGHT, F.explode(F.array(*pairs)).alias("cv"))
    sums = long.groupBy(F.col("cv.c").alias("c"), F.col("cv.v").alias("v")).agg(
        *[
            F.sum(F.when(F.col(_SIDE) == side, F.col(_WEIGHT)).otherwise(0.0)).alias(f"w{side}")
            for side in (0, 1)
        ]
    )
    distinct = F.count(F.lit(1)).over(Window.partitionBy("c"))
    kept = sums.withColumn("values", distinct).where(F.col("values") <= MAX_EVENT_VALUES)
    by_column: dict[int, dict[str, list[float]]] = {}
    # at most MAX_EVENT_VALUES rows per screened column
    for r in kept.select("c", "v", "w0", "w1").collect():
        by_column.setdefault(r["c"], {})[r["v"]] = [_round(r["w0"] / n_s), _round(r["w1"] / n_y)]
    out: dict[str, dict[str, Any]] = {}
    for i in sorted(by_column)[:MAX_EVENT_COLUMNS]:
        values = dict(sorted(by_column[i].items(), key=lambda item: (-item[1][0], item[0])))
        out[event_columns[i]] = {"tvd_of_means": _tvd_of_means(list(values.values())), "values": values}
    return out


# ---------------------------------------------------------------------------------------------------------------
# Arithmetic on the driver
# ---------------------------------------------------------------------------------------------------------------


def _ratio(numerator: int, denominator: int) -> float | None:
    return float(Fraction(numerator, denominator)) if denominator else None


def _round(value: float) -> float:
    """A sum computed on Spark, rounded so that its order (the tables' partitioning) does not show."""
    return float(f"{value:.10g}")


def _exact_tvd(pairs: Any, n_s: int, n_y: int) -> float | None:
    """TVD of two count vectors over the same values with totals n_s and n_y: sum |s n_y - y n_s| / (2 n_s n_y)."""
    if not n_s or not n_y:
        return None
    return float(Fraction(sum(abs(s * n_y - y * n_s) for s, y in pairs), 2 * n_s * n_y))


def _tvd_of_means(means: list[list[float]]) -> float | None:
    """TVD of two mean vectors, each divided by its sum; None when a side sums to 0."""
    total_s, total_y = sum(s for s, _ in means), sum(y for _, y in means)
    if total_s <= 0 or total_y <= 0:
        return None
    return _round(0.5 * sum(abs(s / total_s - y / total_y) for s, y in means))
