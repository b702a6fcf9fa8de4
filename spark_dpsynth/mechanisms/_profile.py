"""The DP profile of the numeric columns without public bins: the noisy histogram over a public grid from which
each such column is decided a code or a measurement with DP bins (docs/design.md section 2.8).

:func:`dp_profiles` counts, on Spark, the cells of every profiled column on its scale's public grid
(:func:`spark_dpsynth.profile.profile_grid`), draws the noise on every possible cell, and hands the noisy
histogram to :func:`spark_dpsynth.profile.profile_from_noisy` (post-processing). :func:`profile_sigma` is the
noise scale of the Gaussian mechanism (from :func:`profile_units`), :func:`profile_parts` the number of its draws. Used by the marginals,
workload and class-conditional mechanisms, which spend the profile's share of the budget (``column_profile``) in
the release's accountant; the noise is drawn through that share.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping

import numpy as np
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_dpsynth._progress import Progress, report
from spark_dpsynth.errors import InvalidParameterError
from spark_dpsynth.params import TEXT_NUMBERS_EPSILON_PROPORTION, DataConfig
from spark_dpsynth.privacy.accounting import (
    Accountant,
    laplace_threshold_discrete,
    rho_1_threshold_discrete,
)
from spark_dpsynth.profile import (
    BLOCK_NOISE,
    FINE_BLOCK_NOISE,
    ColumnProfile,
    ColumnType,
    block_noise,
    block_tree,
    block_units,
    cell_key,
    cells_of,
    edge_key,
    edge_pieces,
    exact_value_targets,
    profile_from_noisy,
    profile_grid,
    profile_with_edges,
    profile_with_exact_values,
    text_as_number,
    text_kind_counts,
    text_number_candidates,
    with_text_numbers,
)
from spark_dpsynth.profile.codes import DISTINCT_NOISE

__all__ = [
    "EXACT_VALUES_FLOOR",
    "dp_text_numbers",
    "PROFILE_PASS_COLUMNS",
    "dp_exact_values",
    "dp_profiles",
    "profile_parts",
    "profile_sigma",
    "profile_units",
    "spend_exact_values",
    "spend_text_numbers",
    "text_numbers_step",
]

log = logging.getLogger(__name__)

PROFILE_PROGRESS_SECONDS = 30.0
"""While the DP profile's noise is drawn (tens of thousands of exact draws a column), a line at most this often."""

PROFILE_PASS_COLUMNS = 128
"""Columns of one scale profiled per Spark job (:func:`dp_profiles`). The records are exploded into (column,
value) pairs first and the cell key, a large expression, is computed once on the pairs, so the projection holds
one cast per column and one cell key per job (a cell key per column exceeded the JVM's 64 KB method limit at 8
columns in one plan, and a job per 4 columns made a 300-column table cost 75 jobs: docs/design.md section 2.8)."""


def profile_units(types: Mapping[str, ColumnType], columns: tuple[str, ...], blocks: bool = True) -> float:
    """The squared L2 sensitivity of a DP profile of ``columns``, in units of the cells' noise: one record adds
    one to one cell of each column (1 each), possibly one to a real column's count of values that are not whole
    numbers (1 each) and, with ``blocks`` (the zCDP profile), one to each block of the column's
    :func:`~spark_dpsynth.profile.block_tree` that holds its value, whose count gets kappa times the cells'
    noise (1 / kappa^2 each: :func:`~spark_dpsynth.profile.block_units`, at most 4 / 9 + 5 / 36 with kappa =
    :data:`~spark_dpsynth.profile.BLOCK_NOISE` on the 4 searched levels and
    :data:`~spark_dpsynth.profile.FINE_BLOCK_NOISE` on the 5 fine ones), and on the number scales one to its
    count of distinct values, whose noise is :data:`~spark_dpsynth.profile.codes.DISTINCT_NOISE` times the
    cells' (1 / 9 each: the evidence of a sparse code set, docs/design.md section 2.8)."""
    fractional = sum(1 for c in columns if types[c].scale == "real")
    per_column = [1.0 + (block_units(types[c].scale) if blocks else 0.0) for c in columns]
    distinct = DISTINCT_NOISE**-2.0 * len(_distinct_counted(types, columns)) if blocks else 0.0
    return sum(per_column) + fractional + distinct


def profile_sigma(rho: float, units: float) -> float:
    """The cells' noise std of a DP profile at ``rho`` whose squared L2 sensitivity is ``units`` cell-noise units
    (:func:`profile_units`): the Gaussian mechanism with std sigma on the cells and kappa sigma on the blocks is
    units / (2 sigma^2)-zCDP (Bun and Steinke 2016, Proposition 1.6, summed over its queries), so sigma =
    sqrt(units / (2 rho))."""
    return math.sqrt(units / (2.0 * rho))


def profile_parts(types: Mapping[str, ColumnType], columns: tuple[str, ...], blocks: bool = True) -> int:
    """The draws of a DP profile of ``columns``: one histogram per column, on a real column one count of the values
    that are not whole numbers, and with ``blocks`` two vectors of block counts per column (the searched blocks,
    the fine blocks: :func:`~spark_dpsynth.profile.block_noise`), and one count of distinct values per column
    on the number scales."""
    distinct = len(_distinct_counted(types, columns)) if blocks else 0
    return (
        len(columns) * (3 if blocks else 1) + sum(1 for c in columns if types[c].scale == "real") + distinct
    )


def _distinct_counted(types: Mapping[str, ColumnType], columns: tuple[str, ...]) -> tuple[str, ...]:
    """The columns of a zCDP profile whose distinct values are counted: those on the number scales."""
    return tuple(c for c in columns if types[c].scale in ("integer", "real"))


def dp_profiles(
    df: DataFrame,
    types: Mapping[str, ColumnType],
    columns: tuple[str, ...],
    n_bins: int,
    protected_n: int,
    acct: Accountant,
    share: str = "column_profile",
) -> dict[str, ColumnProfile]:
    """The DP profile of each numeric column without public bins: code or measurement, and a measurement's bins.

    Args:
        df: the records (after the row filter, record limit and privacy-unit merge), in :func:`numeric_view`.
        types: the column types (:func:`column_types`).
        columns: the columns to profile (binned scales, no public bins, not declared categorical).
        n_bins: the number of quantile bins of a measurement (``DataConfig.dp_bins``), >= 2.
        protected_n: n', the protected number of records (already drawn).
        acct: the release's accountant, where the caller spent ``share`` for :func:`profile_parts` draws: a
            zCDP share with the Gaussian's sigma (:func:`profile_sigma`; the blocks are measured), or, for a
            mechanism accounted in pure DP (the class-conditional one), a pure share of epsilon for the parts
            without blocks: the noise is then discrete Laplace of scale (columns + real columns) / epsilon (the
            L1 sensitivity), epsilon-DP [DMNS06], and no block is measured.
        share: the name of that share.

    Raises:
        InvalidParameterError: the share pays for another number of draws than :func:`profile_parts`.
        BudgetError: no such share.

    Returns:
        column -> :class:`ColumnProfile`. A *code*: the points (whole numbers in [-9999, 9999], two-digit numbers
        beyond, and on the real scale the two-digit decimals) whose noisy counts stand out of the noise hold at
        least 1 - 1/(2 n_bins) of the column's non-empty records; the mechanism then treats it as a category.
        A *measurement*: its bins (:class:`BinSpec`) with ``lower``/``upper`` the DP range (the lowest and highest
        cells that stand out of the noise, spikes left aside), edges at the 1/n_bins .. (n_bins - 1)/n_bins
        quantiles of the noisy cell counts inside that range, ``points`` the exact values holding at least
        1/(2 n_bins) of the records, and ``integral`` when the noisy count of values that are not whole numbers
        is within the noise (a real column of whole numbers). Dates and timestamps are always measurements.

    Privacy:
        One Spark job per scale and :data:`PROFILE_PASS_COLUMNS` columns: per column, the counts of its
        values' cells on a public grid (:func:`~spark_dpsynth.profile.profile_points`: a point cell per grid
        point, an open cell between two points, one cell for empty values), and on the real scale the count of
        values that are not whole numbers; at most 2 x len(points) + 2 keys per column reach the driver. Every
        possible cell of every column gets noise drawn through ``share``, the cells without records included: discrete Gaussian with
        sigma = :func:`profile_sigma` (rho-zCDP for the whole profile; docs/design.md section 2.8), or discrete
        Laplace (epsilon-DP). Under zCDP the count of every block of
        :func:`~spark_dpsynth.profile.block_tree` (a sum of the true cells, on the driver) gets discrete
        Gaussian noise of std kappa sigma (kappa :data:`~spark_dpsynth.profile.BLOCK_NOISE` on the searched
        blocks, :data:`~spark_dpsynth.profile.FINE_BLOCK_NOISE` on the fine ones): a hierarchical
        histogram (Hay, Rastogi, Miklau, Suciu, "Boosting the accuracy of differentially private histograms
        through consistency", VLDB 2010; Qardaji, Yang, Li, "Understanding hierarchical methods for
        differentially private histograms", VLDB 2013), whose block counts have a noise that does not grow with
        the block's cells. Under zCDP each column on the number scales also has its number of distinct finite
        values counted (one more Spark job per batch, at most one row per column to the driver; a record adds at
        most one distinct value: sensitivity 1) with discrete Gaussian noise of std
        :data:`~spark_dpsynth.profile.codes.DISTINCT_NOISE` sigma, the evidence of a sparse code set
        (:func:`~spark_dpsynth.profile.codes.code_set`). Everything after the noise (the threshold, the shares, the range, the quantiles) is
        post-processing. Nothing true is logged or returned.
    """
    if not columns:
        return {}
    grids = {s: profile_grid(s) for s in {types[c].scale for c in columns}}
    fractional = [c for c in columns if types[c].scale == "real"]
    right = acct.right(share)
    laplace = right.sigma is None
    parts = profile_parts(types, columns, blocks=not laplace)
    if right.parts != parts:
        raise InvalidParameterError(
            f"the share {share!r} pays for {right.parts} draws, the profile makes {parts}"
        )
    if laplace:
        assert right.epsilon is not None
        sigma = (
            parts / right.epsilon * math.sqrt(2.0)
        )  # the std of the Laplace noise, for the thresholds below

        def draw(true: np.ndarray) -> np.ndarray:
            return acct.laplace(share, true, sensitivity=parts)
    else:
        sigma = right.sigma

        def draw(true: np.ndarray, scale: float = 1.0) -> np.ndarray:
            return acct.gaussian(share, true, scale)

    by_column: dict[int, list[tuple[float, bool, bool, int]]] = {}
    distinct_of: dict[int, int] = {}  # private until noised: the number of distinct values per column
    counted = set() if laplace else set(_distinct_counted(types, columns))
    # The records as (column, value) pairs, one scale per job, and the cell key computed once on the pairs: a key
    # per column is a large expression (PROFILE_PASS_COLUMNS).
    for scale in dict.fromkeys(types[c].scale for c in columns):
        of_scale = [(j, c) for j, c in enumerate(columns) if types[c].scale == scale]
        for start in range(0, len(of_scale), PROFILE_PASS_COLUMNS):
            batch = of_scale[start : start + PROFILE_PASS_COLUMNS]
            # a string column of numbers written as text holds values that are no numbers (NIST's "N"), counted
            # with the empty values
            pairs = df.select(
                F.explode(
                    F.array(
                        *[F.struct(F.lit(j).alias("j"), _as_number(c, types).alias("x")) for j, c in batch]
                    )
                ).alias("p")
            ).select("p.j", "p.x")
            x = F.col("x")
            lower, exact = cell_key(x, scale)
            frac = (
                (x != F.floor(x)) & ~F.isnan(x) & (F.abs(x) != F.lit(math.inf))
                if scale == "real"
                else F.lit(False)
            )
            keys = pairs.select(
                "j",
                lower.alias("lower"),
                F.coalesce(exact, F.lit(False)).alias("exact"),
                F.coalesce(frac, F.lit(False)).alias("frac"),
            )
            # At most 2 x (2 len(points) + 2) keys per column: release-sized (the grid is public).
            for r in keys.groupBy("j", "lower", "exact", "frac").count().collect():
                lower_point = float("nan") if r["lower"] is None else float(r["lower"])
                by_column.setdefault(int(r["j"]), []).append(
                    (lower_point, bool(r["exact"]), bool(r["frac"]), int(r["count"]))
                )
            if any(c in counted for _, c in batch):
                # the distinct finite values of each column: at most PROFILE_PASS_COLUMNS rows reach the driver
                finite = x.isNotNull() & ~F.isnan(x) & (F.abs(x) != F.lit(math.inf))
                for r in pairs.where(finite).groupBy("j").agg(F.countDistinct("x").alias("d")).collect():
                    distinct_of[int(r["j"])] = int(r["d"])
    out = {}
    started = last = time.monotonic()
    for j, c in enumerate(columns):
        if time.monotonic() - last >= PROFILE_PROGRESS_SECONDS:  # a wide table draws for minutes
            last = time.monotonic()
            log.info(
                "DP profile: noise drawn for %d of %d columns (%.0f s; %d public cells a column on the %s grid)",
                j,
                len(columns),
                last - started,
                int(grids[types[c].scale].possible.sum()),
                types[c].scale,
            )
        scale = types[c].scale
        grid = grids[scale]
        hist = np.zeros(grid.size, dtype=np.int64)
        frac_count = 0
        entries = by_column.get(j, [])
        if entries:
            lows = np.array([e[0] for e in entries])
            exacts = np.array([e[1] for e in entries])
            cells = cells_of(grid, lows, exacts)
            counts = np.array([e[3] for e in entries], dtype=np.int64)
            np.add.at(hist, cells, counts)
            frac_count = int(sum(e[3] for e in entries if e[2]))
        noisy = np.zeros(grid.size, dtype=np.float64)
        possible = grid.possible.copy()
        possible[grid.null_cell] = True
        noisy[possible] = draw(hist[possible])
        noisy_frac = float(draw(np.array([frac_count]))[0]) if c in fractional else 0.0
        blocks = None
        block_sigma: np.ndarray | float = 0.0
        if not laplace:
            tree, kappa = block_tree(scale), block_noise(scale)
            running = np.r_[0, np.cumsum(hist[np.flatnonzero(grid.possible[: grid.null_cell])])]
            true = running[tree[:, 1]] - running[tree[:, 0]]
            blocks = np.empty(len(tree), dtype=np.float64)
            # the searched blocks, then the fine ones: one draw each, at their own std
            for k in (BLOCK_NOISE, FINE_BLOCK_NOISE):
                blocks[kappa == k] = draw(true[kappa == k], k)
            block_sigma = kappa * sigma
            del running, true
        distinct = None
        if c in counted:
            # one record adds at most one distinct value: sensitivity 1, noise DISTINCT_NOISE times the cells'
            distinct = float(draw(np.array([distinct_of.get(j, 0)]), DISTINCT_NOISE)[0])
        del hist, frac_count, entries
        out[c] = profile_from_noisy(
            c,
            scale,
            grid,
            noisy,
            noisy_frac,
            sigma,
            n_bins,
            protected_n,
            laplace,
            blocks,
            block_sigma,
            distinct=distinct,
            distinct_sigma=DISTINCT_NOISE * sigma,
        )
    del distinct_of
    return out


EXACT_VALUES_FLOOR = 1e-4
"""The DP exact-value step counts on the driver only the values held by at least c = 1 + floor(1e-4 n') records
(at most about 10,000 values per column reach it, whatever the table's size), and raises its threshold by c - 1
so that the step's delta is unchanged (:func:`dp_exact_values`)."""


def _finite(number: Column) -> Column:
    """True where ``number`` (a double, from ``try_cast``) is a finite number: not null, NaN or infinite."""
    return number.isNotNull() & ~F.isnan(number) & (F.abs(number) != F.lit(math.inf))


def _as_number(name: str, types: Mapping[str, ColumnType]) -> Column:
    """Column ``name`` as a double: a string column (numbers written as text) through :func:`text_as_number`,
    null where a value is no number (NIST's "N"; under ANSI mode a failed cast would raise an error quoting
    the value), any other through ``try_cast``."""
    x = F.col(f"`{name}`")
    return text_as_number(x) if types[name].type == "string" else x.try_cast("double")


def spend_exact_values(
    acct: Accountant, delta: float, *, rho: float | None = None, epsilon_proportion: float | None = None
) -> None:
    """Spend the shares of the DP exact-value step (docs/design.md section 2.8) in ``acct``: ``exact_values``,
    one draw of a discrete Gaussian of ``rho`` (its std per unit of L2 sensitivity sqrt(1 / (2 rho))), or, for a
    mechanism accounted in pure DP, of a discrete Laplace of ``epsilon_proportion`` x epsilon (its scale the
    number of columns over that epsilon, the L1 sensitivity); and ``exact_values_threshold``, the ``delta`` of
    its threshold.

    Raises:
        InvalidParameterError: not exactly one of ``rho`` and ``epsilon_proportion``.
        BudgetError: the shares exceed the budget, or are spent already.
    """
    if (rho is None) == (epsilon_proportion is None):
        raise InvalidParameterError("the DP exact values are paid in rho or in a proportion of epsilon")
    mechanism = (
        "counts of the exact values of the DP measurements and of the sub-intervals of their heavy edge cells, "
        "sensitivity: the number of columns, plus one per column with edge cells"
    )
    if rho is not None:
        acct.spend_rho(
            "exact_values",
            rho,
            f"discrete Gaussian ({mechanism}, in L2: its square root)",
            sigma=math.sqrt(1.0 / (2.0 * rho)),
            parts=1,
        )
    else:
        assert epsilon_proportion is not None
        acct.spend_epsilon("exact_values", epsilon_proportion, f"discrete Laplace ({mechanism}, in L1)")
    acct.spend_delta("exact_values_threshold", delta, "threshold on the noisy counts of the exact values")


def dp_exact_values(
    df: DataFrame,
    types: Mapping[str, ColumnType],
    profiles: Mapping[str, ColumnProfile],
    n_bins: int,
    protected_n: int,
    acct: Accountant | None,
) -> dict[str, ColumnProfile]:
    """The DP profiles revised by the exact values of the measurements and by the sub-intervals of their heavy
    edge cells (docs/design.md section 2.8): a measurement whose released exact values hold almost all its
    records is a code (a density of 20 one-decimal values, a five-digit code: values off the profile's grid); a
    frequent exact value off the grid is one more point; a first or last cell of the range that holds many
    records (epoch seconds, whose cells are a tenth of a decade wide) is cut where its records end.

    Args:
        df: the records the profile read (after the row filter, record limit and privacy-unit merge): the
            profiled columns as trimmed text, empty values null.
        types: the column types; profiles: the DP profiles (:func:`dp_profiles`).
        n_bins: ``DataConfig.dp_bins``; protected_n: n'.
        acct: the release's accountant, with the shares of :func:`spend_exact_values` spent (either kind); None when
            :func:`~spark_dpsynth.profile.exact_value_targets` is empty (nothing is counted).

    Returns:
        ``profiles`` with the targets' profiles revised
        (:func:`~spark_dpsynth.profile.profile_with_edges`, then
        :func:`~spark_dpsynth.profile.profile_with_exact_values`).

    Raises:
        BudgetError: the shares are not spent (and there are targets).

    Privacy:
        One Spark job over the m target columns: per column, the count of each distinct non-empty value; the
        values held by at least c = 1 + floor(:data:`EXACT_VALUES_FLOOR` n') records reach the driver (private,
        never logged), in a fixed order (column, value). For the m_e targets with edge pieces
        (:func:`~spark_dpsynth.profile.edge_pieces`, chosen from the profile: public), the same job counts
        every sub-interval of those pieces (public keys, zeros included). A record adds one to one value of each
        column and to at most one sub-interval of each such column: L2 sensitivity sqrt(m + m_e), L1
        sensitivity m + m_e. Noise is drawn once on every count through the share ``exact_values``: discrete
        Gaussian with std sigma sqrt(m + m_e) (a zCDP share), or discrete Laplace of scale (m + m_e) / epsilon
        (a pure share, the class-conditional mechanism). A value is released when its noisy count is
        > rho_1 + c - 1, rho_1 the threshold that a record's m new values (count 1 each) pass with probability
        <= delta under that noise, the share ``exact_values_threshold``
        (:func:`~spark_dpsynth.privacy.accounting.rho_1_threshold_discrete`,
        :func:`~spark_dpsynth.privacy.accounting.laplace_threshold_discrete`): a value held by c records in one
        table and absent from the driver's counts in its neighbour passes with the probability that a new value
        of count 1 passes rho_1 (Gopi, Mahabadi, Yekhanin, "Differentially Private Marginals", 2022, Algorithm 1;
        docs/design.md section 2.5). The sub-intervals' counts are released whole (no threshold: their keys are
        public). The decisions are post-processing of the released counts.
    """
    targets = exact_value_targets(types, profiles)
    if not targets:
        return dict(profiles)
    assert acct is not None
    right = acct.right("exact_values")
    delta = acct.share("exact_values_threshold").delta
    assert delta is not None
    m = len(targets)
    floor = 1 + int(math.floor(EXACT_VALUES_FLOOR * protected_n))
    gaussian = right.sigma is not None

    def unit_std(units: int) -> float:
        """The std of one count at L2 (Gaussian) or L1 (Laplace) sensitivity ``units``."""
        if gaussian:
            assert right.sigma is not None
            return right.sigma * math.sqrt(units)
        assert right.epsilon is not None
        return math.sqrt(2.0) * units / right.epsilon

    def whole(c: str) -> bool:
        # pieces of whole numbers (a real column of whole numbers has real pieces between its grid's points)
        return types[c].scale in ("integer", "date")

    # The edge pieces, cut for the noise of the most columns that may have one (those with a heavy edge piece):
    # the noise drawn below, at the columns that have one, is at most that.
    heavy = sum(1 for c in targets if edge_pieces(profiles[c], whole(c), 1e-12))
    planned = unit_std(m + heavy)
    edges = [
        (j, c, piece) for j, c in enumerate(targets) for piece in edge_pieces(profiles[c], whole(c), planned)
    ]
    m_e = len({c for _, c, _ in edges})
    structs = []
    for j, c in enumerate(targets):
        x = F.col(f"`{c}`")
        number = _as_number(c, types)
        finite = _finite(number)
        trimmed = F.trim(x.cast("string"))
        # the value as the column reads as text (the key of a code's domain); empty, NaN and infinite left out,
        # except that every non-empty value of numbers written as text is counted (its "N" as well)
        text = F.when(trimmed != F.lit(""), trimmed) if types[c].type == "string" else F.when(finite, trimmed)
        structs.append(
            F.struct(
                F.lit(j).alias("j"),
                text.alias("v"),
                F.when(finite, number).otherwise(F.lit(math.nan)).alias("x"),
            )
        )
    for c in dict.fromkeys(c for _, c, _ in edges):
        # the sub-interval of the column's one edge piece that holds the value: edge piece e keyed m + e, its
        # index as v (one struct per column: a record counts in at most one sub-interval of it)
        number = _as_number(c, types)
        pieces = [(m + e, a, b, parts) for e, (_, cc, (a, b, parts)) in enumerate(edges) if cc == c]
        key, index = edge_key(number, pieces, whole(c))
        finite = _finite(number)
        structs.append(
            F.struct(
                F.when(finite, key).alias("j"),
                F.when(finite, index).cast("string").alias("v"),
                F.lit(math.nan).alias("x"),
            )
        )
    counted = (
        df.select(F.explode(F.array(*structs)).alias("p"))
        .select("p.j", "p.v", "p.x")
        .where(F.col("v").isNotNull())
        # x is a function of v: grouping by it as well carries the number Spark reads to the driver
        .groupBy("j", "v", "x")
        .count()
        .where((F.col("count") >= F.lit(floor)) | (F.col("j") >= F.lit(m)))
    )
    # Private: the values held by at least `floor` records and the sub-intervals' counts; the order (column,
    # value) makes the noise independent of Spark's partitioning.
    rows = sorted((int(r["j"]), str(r["v"]), float(r["x"]), int(r["count"])) for r in counted.collect())
    keys = [(j, v, x) for j, v, x, _ in rows if j < m]
    true = np.array([r[3] for r in rows if r[0] < m], dtype=np.int64)
    # every sub-interval, zeros included (public keys)
    offsets = np.cumsum([0] + [parts for _, _, (_, _, parts) in edges])
    sub = np.zeros(int(offsets[-1]), dtype=np.int64)
    for j, v, _, n in rows:
        if j >= m:
            sub[offsets[j - m] + int(v)] = n
    del rows
    units = m + m_e
    counts = np.concatenate([true, sub])
    del true, sub
    if len(counts):
        noisy_all = (
            acct.gaussian("exact_values", counts, math.sqrt(units))
            if gaussian
            else acct.laplace("exact_values", counts, sensitivity=units)
        )
    else:
        noisy_all = counts
    del counts
    noisy, noisy_sub = noisy_all[: len(keys)], noisy_all[len(keys) :].astype(np.float64)
    noise_std = unit_std(units)
    if gaussian:
        assert right.sigma is not None
        # m new values, each with noise of std sigma sqrt(m + m_e)
        threshold = rho_1_threshold_discrete(right.sigma * math.sqrt(units / m), m, 2.0 * delta) + (floor - 1)
    else:
        assert right.epsilon is not None
        threshold = laplace_threshold_discrete(units / right.epsilon, m, delta) + (floor - 1)
    out = dict(profiles)
    for j, c in enumerate(targets):
        refined = {
            (a, b): noisy_sub[offsets[e] : offsets[e + 1]]
            for e, (jj, _, (a, b, _)) in enumerate(edges)
            if jj == j
        }
        profile = profile_with_edges(profiles[c], refined, whole(c), noise_std, laplace=not gaussian)
        kept = [
            (v, x, float(n))
            for (jj, v, x), n in zip(keys, noisy.tolist(), strict=True)
            if jj == j and n > threshold and n > 0
        ]
        values = tuple(v for v, _, _ in kept)
        found = np.array([n for _, _, n in kept])
        numbers = tuple(x for _, x, _ in kept)
        out[c] = profile_with_exact_values(profile, values, found, n_bins, noise_std, numbers)
    return out


def spend_text_numbers(acct: Accountant, columns: int, rho: float | None = None) -> float:
    """Spend the share ``text_numbers`` of the DP test of numbers written as text (:func:`dp_text_numbers`) in
    ``acct``. With ``rho`` (a mechanism accounted in zCDP, after its conversion): a zCDP share of ``rho``, one
    discrete Gaussian draw of std sqrt(1 / (2 rho)) per unit of L2 sensitivity; returns ``rho``. Without:
    :data:`~spark_dpsynth.params.TEXT_NUMBERS_EPSILON_PROPORTION` x epsilon, pure DP, before any conversion to
    zCDP; returns its epsilon. Nothing is spent for no column (returns 0).

    Raises:
        BudgetError: the share exceeds the remaining epsilon or rho, or is spent already.
    """
    if columns <= 0:
        return 0.0
    counts = f"counts of the numbers and the other values of {columns} string column(s)"
    if rho is not None:
        return acct.spend_rho(
            "text_numbers",
            rho,
            f"discrete Gaussian ({counts}, in L2: the square root of the number of columns)",
            sigma=math.sqrt(1.0 / (2.0 * rho)),
        )
    return acct.spend_epsilon(
        "text_numbers",
        TEXT_NUMBERS_EPSILON_PROPORTION,
        f"discrete Laplace ({counts}, in L1: the number of columns)",
    )


def dp_text_numbers(
    df: DataFrame, columns: tuple[str, ...], acct: Accountant, n_bins: int = 16
) -> dict[str, str]:
    """The string columns of ``columns`` that hold numbers written as text, beyond a small code (docs/design.md
    section 2.8): NIST's incomes, numbers and ``N`` (not applicable), read as strings by the CLI's inference.

    Args:
        df: the records (after the row filter, record limit and privacy-unit merge), values trimmed, empty
            values null.
        columns: the candidate string columns (:func:`~spark_dpsynth.profile.text_number_candidates`).
        acct: the release's accountant, with the share ``text_numbers`` spent (:func:`spend_text_numbers`),
            either kind.
        n_bins: ``DataConfig.dp_bins`` (b).

    Returns:
        column -> scale, in ``columns`` order, for the columns whose noisy count of values that read as finite
        numbers (Spark's ``try_cast`` to double) exceeds both the noisy count of their other non-empty values and
        three standard deviations of the noise (sigma sqrt(s) for s columns under a zCDP share, sqrt(2) s /
        epsilon under a pure one), and whose noisy count of
        numbers that are not small whole numbers (|x| <= :data:`~spark_dpsynth.profile.MAX_CODE_RANGE`)
        exceeds three standard deviations and 1/(2 b) of their numbers: the DP profile then decides them as
        numbers, on the ``integer`` scale when their noisy count of numbers that are not whole is at most three
        standard deviations or 0.1% of their numbers (NIST's incomes and poverty ratios: on the real scale the
        open cells between whole numbers doubled the cells whose noise a sum of the profile carries), else on
        the ``real`` scale. A column of small whole numbers and a marker (NIST's ``MSP``: ``N`` and 1..5) stays
        a category, as its values are found by the mechanism's discovery like a code's, and the profile's noise
        is not spread over it.

    Privacy:
        One Spark job (:func:`~spark_dpsynth.profile.text_kind_counts`) reads, per column, four counts: the
        records whose value is a small whole number, another whole number, a finite number that is not whole, or
        another non-empty text. A record added or removed changes one of the four counts of each column by one:
        L2 sensitivity sqrt(s), and the discrete Gaussian of std sigma sqrt(s) on the 4 s counts is
        1 / (2 sigma^2)-zCDP (Canonne, Kamath, Steinke 2020, Theorem 14), sigma that of the share
        ``text_numbers``; or L1 sensitivity s, and the discrete Laplace of scale s / epsilon is epsilon-DP
        [DMNS06; Ghosh, Roughgarden, Sundararajan 2009]. The decision is post-processing; nothing true is logged
        or returned.
    """
    if not columns:
        return {}
    right = acct.right("text_numbers")
    s = len(columns)
    # Private: 4 s counts, noised below and deleted.
    true, _ = text_kind_counts(df, [F.col(f"`{c}`") for c in columns])
    if right.sigma is not None:
        noisy = acct.gaussian("text_numbers", true, math.sqrt(s)).astype(np.float64)
        std = right.sigma * math.sqrt(s)
    else:
        assert right.epsilon is not None
        noisy = acct.laplace("text_numbers", true, sensitivity=s).astype(np.float64)
        std = math.sqrt(2.0) * s / right.epsilon
    del true
    found = {}
    for j, c in enumerate(columns):
        small, whole, fraction, text = noisy[j]
        numbers = small + whole + fraction
        large = whole + fraction
        if numbers > max(text, 3.0 * std) and large > max(3.0 * std, numbers / (2.0 * n_bins)):
            found[c] = "integer" if fraction <= max(3.0 * std, numbers / 1000.0) else "real"
    return found


def text_numbers_step(
    df: DataFrame,
    types: Mapping[str, ColumnType],
    config: DataConfig,
    acct: Accountant,
    progress: Progress | None,
    stage: str,
    domains: Mapping[str, object] = (),
    rho: float | None = None,
) -> dict[str, ColumnType]:
    """The DP test of numbers written as text, as every mechanism runs it before its DP profile (docs/design.md
    section 2.8): the candidates (:func:`~spark_dpsynth.profile.text_number_candidates`, ``domains`` the
    mechanism's own public domains), the share ``text_numbers`` spent in ``acct`` (:func:`spend_text_numbers`:
    ``rho`` for a zCDP share, None for a pure one),
    :func:`dp_text_numbers` on the prepared records, and ``types`` with the columns found on the scale it found
    (:func:`~spark_dpsynth.profile.with_text_numbers`). Nothing is spent or read without a candidate. The
    columns found are a DP output, named in the progress line (``stage``: its prefix)."""
    from spark_dpsynth.data.prepare import prepare

    candidates = text_number_candidates(types, config, domains)
    if not candidates:
        return dict(types)
    spent = spend_text_numbers(acct, len(candidates), rho)
    found = dp_text_numbers(prepare(df, config), candidates, acct, config.dp_bins)
    report(
        progress,
        log,
        f"{stage}: DP test of numbers written as text in {len(candidates)} string column(s) "
        f"({'rho' if rho is not None else 'epsilon'} {spent:.4g}): "
        + (", ".join(f"{c} ({scale})" for c, scale in found.items()) if found else "none"),
    )
    return with_text_numbers(types, found)
