"""NIST's k-marginal score, as NIST's SDNist 2.4 computes it (docs/design.md section 5.2).

SDNist (NIST CRC's deidentified-data report tool, ``sdnist.metrics.kmarginal.KMarginal`` on the data binned by
``sdnist.report.dataset.Dataset``) scores a synthetic table against its target table as follows:

* The pair columns are every column but ``PUMA`` and ``INDP`` (:data:`SDNIST_LEFT_OUT`); the pairs are every
  unordered pair of them (one column alone: its 1-way marginal).
* Values are binned first (:func:`nist_k_marginal`): ``AGEP``, ``POVPIP``, ``PINCP``, ``PWGTP``, ``WGTP``
  (:data:`SDNIST_PERCENTILE_COLUMNS`) into 20 percentile-rank bins of the target table
  (``sdnist.report.dataset.binning.percentile_rank_target``: bin = min(floor(20 r / n), 19) for a value of
  average rank r among the n non-empty values, truncated to integers; ``POVPIP``'s top code 501 is ranked
  like any value: SDNist 2.4 means to leave it out but looks for the string "501" after its validation has
  read the values as integers), the synthetic values cut at the largest target value of each bin
  (``percentile_rank_synthetic``); ``DENSITY`` into SDNist's 14 logarithmic bins (``bin_density``); every other
  column on its codes. The empty value (``N`` in NIST's files, or null) is a category of its own.
* With group columns G (SDNist's ``group_features``, ``["PUMA"]`` for NIST's ACS excerpts), each pair's
  marginal is taken over G + pair, so a cell is (group, value, value). For each pair, with t and s the cell's
  shares of the target (n rows) and synthetic (n_syn rows) tables, d = sum over cells |t - s| in [0, 2]; the
  score is (2 - mean over pairs of d) * 500 = 1000 (1 - mean TVD), in [0, 1000]. Within each group g, with
  n_g its target rows, d_g = min(sum over the cells of g of |t - s|, n_g / n) * n / n_g in [0, 1], and the
  group's score is 1000 (1 - mean over pairs of d_g) (SDNist's "k-marginal score in each PUMA").

SDNist prints int() of the score; this module returns the float. It does not copy SDNist's validation step
(``sdnist.report.dataset.validate``), which drops from the evaluation a column whose synthetic values are not
codes of NIST's data dictionary: here every column is compared.

Computation: on Spark, DataFrame API only. One aggregation per table for the percentile bins (value counts of
the percentile columns, a running sum over the distinct values of each column, the largest value of each
bin: at most 22 rows per column reach the driver), one count per table, then one pass over the two tables
stacked: each row exploded to one cell per pair, summed per cell, reduced to one row per (pair, group) with
exact integer sums (so the result does not depend on the partitioning); the driver receives those rows only
(pairs x groups, e.g. 231 x 20 for NIST's national excerpt).

Privacy: not private. The figures are computed from the sensitive table without noise (see
:mod:`spark_dpsynth.evaluation.metrics`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import combinations
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_dpsynth.errors import InvalidParameterError, SchemaError
from spark_dpsynth.evaluation._common import quote

__all__ = [
    "SDNIST_GROUP_COLUMNS",
    "SDNIST_LEFT_OUT",
    "SDNIST_PERCENTILE_COLUMNS",
    "SDNIST_PERCENTILE_BINS",
    "SDNIST_DENSITY_MAX",
    "sdnist_density_edges",
    "nist_group_columns",
    "nist_k_marginal",
]

SDNIST_GROUP_COLUMNS = ("PUMA",)
"""SDNist's k-marginal group columns for NIST's ACS excerpts (``group_features`` of SDNist's report config)."""
SDNIST_LEFT_OUT = ("PUMA", "INDP")
"""Columns SDNist's ``KMarginal`` never puts in a pair (whatever the group columns)."""
SDNIST_PERCENTILE_COLUMNS = ("AGEP", "POVPIP", "PINCP", "PWGTP", "WGTP")
"""Columns SDNist cuts into percentile-rank bins of the target table (``Dataset``'s ``numeric_features``)."""
SDNIST_PERCENTILE_BINS = 20
"""Percentile-rank bins of those columns (``binning.percentile_rank_target``: int(20 x), x the rank share)."""
SDNIST_DENSITY_MAX = 52864.7
"""The largest ``DENSITY`` (people per square mile) of NIST's data dictionary for the ACS excerpts (public)."""

_EMPTY = (
    "-1"  # SDNist's code of the empty value "N" (sdnist.report.dataset.transform, binning.add_bin_for_NA)
)
_SEP = "\u241f"  # joins a multi-column group's values in a key (the unit separator symbol)


def sdnist_density_edges() -> list[float]:
    """SDNist's ``DENSITY`` bin edges (``binning.bin_density``): 0, 150, then 13 edges of a 20-bin logarithmic
    grid from 10 to :data:`SDNIST_DENSITY_MAX` + 500 (its 9th edge on); bins are right-closed, values below 0
    count as 0 and above the top as the top - 100. Returns the 15 edges (14 bins), in people per square mile."""
    import numpy as np

    top = SDNIST_DENSITY_MAX + 500
    grid = np.logspace(start=math.log(10, 10), stop=math.log(top, 10), num=SDNIST_PERCENTILE_BINS + 1)
    return [0.0, 150.0] + [float(x) for x in grid[8:]]


def _columns_of(name: str, named: Sequence[str], columns: Sequence[str]) -> tuple[str, ...]:
    """``named`` as a tuple of columns of the tables.

    Raises:
        InvalidParameterError: ``named`` is a string, not a sequence.
        SchemaError: a named column is not a column of the tables.
    """
    if isinstance(named, str):
        raise InvalidParameterError(f"{name} must be a sequence of column names, got a string")
    out = tuple(named)
    missing = [c for c in out if c not in columns]
    if missing:
        raise SchemaError(f"{name} {missing} are not columns of the tables")
    return out


def nist_group_columns(columns: Sequence[str], named: Sequence[str] | None) -> tuple[str, ...] | None:
    """The group columns of NIST's score for a table: ``named`` when given (checked against ``columns``), else
    :data:`SDNIST_GROUP_COLUMNS` when the table has them all, else None (no NIST figure: SDNist's grouped
    formula needs its group column; docs/design.md section 5.2).

    Raises:
        SchemaError: a named group column is not a column of the table, or repeats.
    """
    if named is None:
        return SDNIST_GROUP_COLUMNS if all(c in columns for c in SDNIST_GROUP_COLUMNS) else None
    named = _columns_of("nist_group_columns", named, columns)
    if len(set(named)) != len(named):
        raise SchemaError(f"nist_group_columns repeat a column: {list(named)}")
    return named


def nist_k_marginal(
    sensitive: DataFrame,
    synthetic: DataFrame,
    group_columns: Sequence[str] = SDNIST_GROUP_COLUMNS,
    *,
    percentile_columns: Sequence[str] | None = None,
) -> dict[str, Any] | None:
    """NIST's k-marginal score of ``synthetic`` against ``sensitive``, by SDNist 2.4's formula (module docstring).

    Args:
        sensitive: the target table (SDNist's "target data"), n rows; columns of any type, null = empty. The
            input's own values (e.g. the typed table of the evaluation), not bin labels.
        synthetic: the synthetic table, n_syn rows, holding every column of ``sensitive`` (others are ignored,
            as SDNist compares the common columns). A value is read as a number where it reads as one (SDNist
            reads codes with ``pandas.to_numeric``: "3", 3 and 3.0 are one code).
        group_columns: SDNist's group columns (default ``("PUMA",)``); empty: SDNist's formula without
            groups (its score is then over the 2-way marginals of the pairs alone).
        percentile_columns: the columns cut into SDNist's percentile-rank bins; None:
            :data:`SDNIST_PERCENTILE_COLUMNS` that the table has. A table other than NIST's excerpts may add
            its own numeric columns here (SDNist itself bins only its named columns).

    Returns:
        None when no pair column is left (every column is a group column or in :data:`SDNIST_LEFT_OUT`) or a
        table has no rows; else a dict: ``score`` (float in [0, 1000], SDNist's headline k-marginal score
        before int()), ``group_columns`` (list), ``columns`` (the pair columns, sorted as SDNist sorts them),
        ``pairs`` (int, their number of pairs), ``binning`` (column -> ``"percentile"``, ``"density"`` or
        ``"codes"``) and ``score_by_group`` (group key -> score in [0, 1000] for every group of the target
        table, the values of a multi-column group joined by U+241F; empty without group columns).

    Raises:
        SchemaError: a column of ``sensitive`` is missing from ``synthetic``, a group or percentile column is not
            a column of the tables.
        InvalidParameterError: ``group_columns`` or ``percentile_columns`` is a string, not a sequence.

    Privacy:
        None: computed from the sensitive table without noise; not differentially private.
    """
    columns = tuple(sensitive.columns)
    missing = [c for c in columns if c not in synthetic.columns]
    if missing:
        raise SchemaError(f"the synthetic table lacks column(s) {missing} of the sensitive table")
    groups = nist_group_columns(columns, group_columns)
    assert groups is not None
    if percentile_columns is None:
        ranked = tuple(c for c in SDNIST_PERCENTILE_COLUMNS if c in columns)
    else:
        ranked = _columns_of("percentile_columns", percentile_columns, columns)
    pair_columns = sorted(set(columns) - set(SDNIST_LEFT_OUT) - set(groups))
    if not pair_columns:
        return None
    pairs = (
        [(pair_columns[0],)] if len(pair_columns) == 1 else [tuple(p) for p in combinations(pair_columns, 2)]
    )
    binning = {
        c: "percentile" if c in ranked else "density" if c == "DENSITY" else "codes"
        for c in (*groups, *pair_columns)
    }
    used = list(binning)
    s_numbers = sensitive.select(*(_number(sensitive, c).alias(c) for c in ranked))
    edges = _percentile_edges(s_numbers, ranked)
    s_coded = _read(sensitive, used).select(
        *(_coded(i, binning[c], edges.get(c), "target").alias(c) for i, c in enumerate(used))
    )
    y_coded = _read(synthetic, used).select(
        *(_coded(i, binning[c], edges.get(c), "synthetic").alias(c) for i, c in enumerate(used))
    )
    # Persisted (on the executors): the coded tables are read once by the counts, once by the pair pass, and
    # the pair pass's plan stays small (the coded expressions are not inlined in each of its pairs).
    s_coded, y_coded = s_coded.persist(), y_coded.persist()
    try:
        n, n_syn = s_coded.count(), y_coded.count()
        if n == 0 or n_syn == 0:
            return None
        rows = _pair_group_sums(s_coded, y_coded, groups, pairs, n, n_syn)
    finally:
        s_coded.unpersist()
        y_coded.unpersist()
    return _scores(rows, groups, pair_columns, pairs, binning, n, n_syn)


def _number(df: DataFrame, c: str) -> Column:
    """Column ``c`` as a double (a string trimmed and read as a number; null when it does not read)."""
    col = F.col(quote(c))
    if isinstance(df.schema[c].dataType, T.NumericType):
        x = col.cast("double")
    else:
        x = F.trim(col.cast("string")).try_cast("double")
    return F.when(x.isNotNull() & ~F.isnan(x) & (F.abs(x) != F.lit(float("inf"))), x)


def _read(df: DataFrame, used: list[str]) -> DataFrame:
    """``df``'s columns ``used`` read once (a projection of its own, which Spark keeps apart from the coding):
    per column i, ``t{i}`` its text (trimmed; null for null) and ``x{i}`` its number (:func:`_number`)."""
    return df.select(
        *(F.trim(F.col(quote(c)).cast("string")).alias(f"t{i}") for i, c in enumerate(used)),
        *(_number(df, c).alias(f"x{i}") for i, c in enumerate(used)),
    )


def _whole(x: Column) -> Column:
    """A number (double) truncated to an integer as pandas' astype(int) does, spelled as a bigint."""
    return x.cast("bigint").cast("string")


def _percentile_edges(numbers: DataFrame, ranked: tuple[str, ...]) -> dict[str, list[tuple[int, int]]]:
    """Per percentile column, its target bins in order: (bin, largest target value of the bin, truncated).

    One aggregation: the (column, value) counts of the non-empty values, a
    running count per column over its sorted distinct values (a window partitioned by column), the bin of each
    value by its average rank. At most :data:`SDNIST_PERCENTILE_BINS` rows per column reach the driver."""
    if not ranked:
        return {}
    long = numbers.select(
        F.explode(
            F.array(
                *(
                    F.struct(F.lit(c).alias("column"), F.col(quote(c)).cast("bigint").alias("v"))
                    for c in ranked
                )
            )
        ).alias("cell")
    ).select("cell.column", "cell.v")
    counts = long.where(F.col("v").isNotNull()).groupBy("column", "v").agg(F.count(F.lit(1)).alias("e"))
    by_value = Window.partitionBy("column").orderBy("v")
    whole = Window.partitionBy("column")
    below = F.coalesce(
        F.sum("e").over(by_value.rowsBetween(Window.unboundedPreceding, Window.currentRow - 1)), F.lit(0)
    )
    # pandas' rank(pct=True), method "average": ((L + 1) + (L + E)) / 2 / n, L values below, E equal, n in all
    share = ((F.lit(2) * below + F.col("e") + F.lit(1)).cast("double") / F.lit(2.0)) / F.sum("e").over(
        whole
    ).cast("double")
    ranked_bin = F.least(
        F.floor(F.lit(float(SDNIST_PERCENTILE_BINS)) * share), F.lit(SDNIST_PERCENTILE_BINS - 1)
    )
    bins = ranked_bin
    per_bin = (
        counts.select("column", "v", bins.cast("int").alias("bin"))
        .groupBy("column", "bin")
        .agg(F.max("v").alias("top"))
    )
    # bounded: at most SDNIST_PERCENTILE_BINS rows per percentile column
    got: dict[str, list[tuple[int, int]]] = {c: [] for c in ranked}
    for row in per_bin.collect():
        got[row["column"]].append((int(row["bin"]), int(row["top"])))
    return {c: sorted(v) for c, v in got.items()}


def _coded(i: int, rule: str, edges: list[tuple[int, int]] | None, side: str) -> Column:
    """Column i of a :func:`_read` table as SDNist's code (a string): the empty value (null, blank or ``N``)
    ``-1``; a percentile column its bin (the target by its ranks, the synthetic table cut at the target's bin
    tops, as SDNist cuts it); ``DENSITY`` its logarithmic bin; any other column its value read as a number
    where it reads as one (3, "3" and 3.0 are the code 3), else its text."""
    text, x = F.col(f"t{i}"), F.col(f"x{i}")
    empty = text.isNull() | (text == F.lit("")) | (text == F.lit("N"))
    # a value that does not read as a number: SDNist fails on it; here a cell of its own
    other = F.concat(F.lit("?"), text)
    if rule == "percentile":
        assert edges is not None
        v = x.cast("bigint")
        label = _target_bin(v, edges) if side == "target" else _synthetic_bin(v, edges)
        return F.when(empty, F.lit(_EMPTY)).when(x.isNull(), other).otherwise(label)
    if rule == "density":
        return F.when(empty, F.lit(_EMPTY)).when(x.isNull(), other).otherwise(_density_bin(x))
    whole = x.isNotNull() & (x == F.floor(x)) & (F.abs(x) < F.lit(9.2e18))
    return (
        F.when(empty, F.lit(_EMPTY))
        .when(whole, _whole(x))
        .when(x.isNotNull(), (x + F.lit(0.0)).cast("string"))
        .otherwise(text)
    )


def _target_bin(v: Column, edges: list[tuple[int, int]]) -> Column:
    """The target's bin of ``v``: its rank's bin, i.e. the first bin whose largest value is >= ``v`` (the bins
    are consecutive runs of the sorted values)."""
    out = None
    for b, top in edges:
        cond = v <= F.lit(top)
        out = F.when(cond, F.lit(str(b))) if out is None else out.when(cond, F.lit(str(b)))
    if out is None:
        return _whole(v.cast("double"))
    return out.otherwise(_whole(v.cast("double")))


def _synthetic_bin(v: Column, edges: list[tuple[int, int]]) -> Column:
    """SDNist's ``percentile_rank_synthetic``, branch for branch: over the target's bins in order, bin 0 takes the values <= its top, a middle bin b the values in (top of the bin before, top
    of b], the last bin the values above the top before it; a value no branch takes keeps its own value (with
    no bin 0, the values <= 0)."""
    labels = [b for b, _ in edges]
    tops = dict(edges)
    last = max(labels) if labels else 0
    out = None
    high = 0
    for b in labels:
        if b == 0:
            high = tops[b]
            cond = v <= F.lit(high)
        elif b != last:
            low, high = high, tops[b]
            cond = (v > F.lit(low)) & (v <= F.lit(high))
        else:
            cond = v > F.lit(high)
        out = F.when(cond, F.lit(str(b))) if out is None else out.when(cond, F.lit(str(b)))
    if out is None:
        return _whole(v.cast("double"))
    return out.otherwise(_whole(v.cast("double")))


def _density_bin(x: Column) -> Column:
    """SDNist's ``bin_density``: values below 0 count as 0, above the top as the top - 100, then the bin
    (right-closed) of :func:`sdnist_density_edges` (0 itself in the first bin, which pandas' cut leaves out)."""
    edges = sdnist_density_edges()
    top = SDNIST_DENSITY_MAX + 500
    y = F.when(x < F.lit(0.0), F.lit(0.0)).when(x > F.lit(top), F.lit(top - 100)).otherwise(x)
    out = None
    for i, upper in enumerate(edges[1:]):
        cond = y <= F.lit(upper)
        out = F.when(cond, F.lit(str(i))) if out is None else out.when(cond, F.lit(str(i)))
    assert out is not None
    return out.otherwise(F.lit(str(len(edges) - 2)))


def _pair_group_sums(
    s_coded: DataFrame,
    y_coded: DataFrame,
    groups: tuple[str, ...],
    pairs: list[tuple[str, ...]],
    n: int,
    n_syn: int,
) -> list[Any]:
    """Per (pair, group): the target rows ``t`` and the sum over the group's cells of |t n_syn - s n| (an exact
    integer). The two coded tables stacked, each row exploded to one cell per pair, summed per cell. Returns at
    most len(pairs) x (groups in either table) rows (collected: release-sized, e.g. 231 x 20)."""

    def cells(df: DataFrame, side: int) -> DataFrame:
        group_key = (F.concat_ws(_SEP, *(F.col(quote(g)) for g in groups)) if groups else F.lit("")).alias(
            "g"
        )
        per_pair = [
            F.struct(
                F.lit(i).alias("pair"),
                F.concat_ws(_SEP, *(F.col(quote(c)) for c in pair)).alias("cell"),
            )
            for i, pair in enumerate(pairs)
        ]
        return df.select(
            group_key, F.explode(F.array(*per_pair)).alias("p"), F.lit(side).alias("side")
        ).select("g", "p.pair", "p.cell", "side")

    stacked = cells(s_coded, 0).unionByName(cells(y_coded, 1))
    per_cell = stacked.groupBy("pair", "g", "cell").agg(
        F.sum((F.col("side") == 0).cast("long")).alias("t"), F.sum(F.col("side").cast("long")).alias("s")
    )
    diff = F.abs(F.col("t") * F.lit(n_syn) - F.col("s") * F.lit(n))
    per_group = per_cell.groupBy("pair", "g").agg(F.sum("t").alias("t"), F.sum(diff).alias("d"))
    # bounded: one row per (pair, group), pairs x groups rows
    return per_group.collect()


def _scores(
    rows: list[Any],
    groups: tuple[str, ...],
    pair_columns: list[str],
    pairs: list[tuple[str, ...]],
    binning: dict[str, str],
    n: int,
    n_syn: int,
) -> dict[str, Any]:
    """SDNist's headline score and per-group scores from the per-(pair, group) sums (module docstring)."""
    scale = n * n_syn
    total = [0] * len(pairs)
    by_group: dict[str, list[int]] = {}
    group_rows: dict[str, int] = {}
    for row in rows:
        i, g, t, d = int(row["pair"]), row["g"], int(row["t"]), int(row["d"])
        total[i] += d
        by_group.setdefault(g, [0] * len(pairs))[i] = d
        if t:
            group_rows[g] = t  # every pair counts each target row once: the same t for every pair
    mean = sum(x / scale for x in total) / len(pairs)
    score = (2.0 - mean) * 500.0
    score_by_group: dict[str, float] = {}
    if groups:
        for g, n_g in sorted(group_rows.items()):
            # min(sum |t - s| over g's cells, n_g / n) * n / n_g, with |t - s| = d / (n n_syn)
            parts = [min(d / scale, n_g / n) * n / n_g for d in by_group[g]]
            score_by_group[g] = (1.0 - sum(parts) / len(pairs)) * 1000.0
    return {
        "score": score,
        "group_columns": list(groups),
        "columns": pair_columns,
        "pairs": len(pairs),
        "binning": binning,
        "score_by_group": score_by_group,
    }
