"""What the DP profile decides a numeric column is: a code or a measurement with DP bins inside its DP range and
its frequent exact values as points (docs/design.md section 2.8).

:func:`profile_from_noisy` reads a column's noisy histogram over its scale's grid and returns its
:class:`ColumnProfile`. The noisy histogram itself is drawn by the mechanisms
(:func:`spark_dpsynth.mechanisms._profile.dp_profiles`).

Privacy: post-processing of the noisy profile; nothing here reads data or draws noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from spark_dpsynth.params import BinSpec
from spark_dpsynth.profile.blocks import RunSums, block_level
from spark_dpsynth.profile.codes import code_set
from spark_dpsynth.profile.grid import ProfileGrid, cells_of
from spark_dpsynth.profile.levels import SIGNAL_FALSE_POSITIVE, noise_level, noise_tail, tail_threshold
from spark_dpsynth.profile.shape import within_bin_shape
from spark_dpsynth.profile.span import (
    FAR_TAIL,
    far_noise,
    gap_to_top_code,
    inside_spikes,
    moved_inside,
    trimmed,
    whole_number_range,
)
from spark_dpsynth.profile.spread import (
    open_lattice,
    point_cells,
    run_lattice,
    signal_weights,
    spread_evenly,
    value_cells,
)

__all__ = ["MAX_CODE_RANGE", "MEANINGS", "ColumnProfile", "profile_from_noisy"]

MEANINGS = ("code", "measurement")
"""What a DP profile decides a numeric column is: a ``code`` (few exact values carry its records: counted as a
category, its values found by the mechanism's discovery like any string's) or a ``measurement`` (binned inside
its DP range, with its frequent exact values as points)."""


_WHOLE_FALSE_POSITIVE = 1e-5
"""Chance that a real column of whole numbers is read as one holding other numbers (its noisy count of non-whole
values above the (1 - this) quantile of its noise): stricter than :data:`SIGNAL_FALSE_POSITIVE`, as that error puts every
synthetic value of the column off its lattice, where the opposite rounds the few non-whole values within the
noise (docs/design.md section 2.8)."""


@dataclass(frozen=True)
class ColumnProfile:
    """What the DP profile of one numeric column decided (docs/design.md section 2.8); DP outputs only."""

    name: str
    meaning: str
    """One of :data:`MEANINGS`."""
    bins: BinSpec | None
    """A measurement's bins: edges inside its DP range, ``lower``/``upper`` = the range, its spikes as
    ``points``; None for a code."""
    point_share: float
    """The noisy share of the non-empty records at points that stand out of the noise (post-processing)."""
    reason: str
    """One line: why this meaning (from the noisy shares, rounded; no count)."""
    non_empty: float = 0.0
    """The noisy number of the column's non-empty records (n' less the noisy count of its empty cells, >= 1):
    what the shares above are shares of (post-processing; never written)."""
    off_grid: bool = False
    """A measurement whose records between the grid's points (in its open cells) hold at least 1/(2 b) of them
    (b = ``dp_bins``): one value or many there, the profile cannot tell; its exact values are counted
    (:func:`exact_value_targets`). Post-processing of the noisy profile."""
    values: tuple[str, ...] | None = None
    """A code found by the DP exact values (:func:`profile_with_exact_values`): its released values, as the
    column's values read as text; they are its domain. None otherwise (a code's values are then found by the
    mechanism's discovery)."""

    def to_json(self) -> dict[str, object]:
        return {"meaning": self.meaning, "point_share": round(self.point_share, 3), "reason": self.reason}


def _noise_only(
    signal: np.ndarray, spikes: np.ndarray, noisy: np.ndarray, sigma: float, laplace: bool
) -> np.ndarray:
    """bool (len(signal),): the values of a small range (``signal``, its cells beyond the exact values ``spikes``)
    that hold noise only. A value is *anchored* when it is an exact value or stands out alone at the level
    :data:`_QUIET_TAIL` Bonferroni-corrected over the range. Of the others that lie between two anchors, those the
    Benjamini-Hochberg procedure at false discovery rate :data:`_QUIET_TAIL` finds above their noise are kept
    (Benjamini and Hochberg, JRSS B 1995, section 3; a month of 150 records among 90 empty ones); the rest are
    noise only when their noisy sum does not stand out at the one-sided level :data:`_QUIET_TAIL` and, with that
    bound, holds per value at most :data:`_QUIET_SHARE` of the median of the anchors beside them: the years a
    panel skipped between its survey years. Beyond the outermost anchors, the values past where the records give
    way to noise (:func:`~spark_dpsynth.profile.span.far_noise`) are noise only when they are at least as many as
    the values from the first anchor to the last: a block's even spread that reached decades before a panel's first
    year. A thin tail of ages beyond its anchors, a thin run between anchors not far above it, and rare values that
    stand out together (a country code's) keep their counts. Post-processing of the noisy profile (docs/design.md
    section 2.8)."""
    counts = noisy[signal]
    local = sigma * noise_level(_QUIET_TAIL / max(len(signal), 1), laplace)
    anchors = np.union1d(signal[counts > local], spikes)
    out = np.zeros(len(signal), dtype=bool)
    if len(anchors) == 0:
        return out
    held = np.union1d(signal, spikes)
    anchored = int(np.count_nonzero((held >= anchors[0]) & (held <= anchors[-1])))
    for end in (np.flatnonzero(signal < anchors[0])[::-1], np.flatnonzero(signal > anchors[-1])):
        far = end[far_noise(counts[end], sigma, laplace) :]
        if len(far) >= max(anchored, 1):
            out[far] = True
    if len(anchors) < 2:
        return out
    inside = np.flatnonzero((counts <= local) & (signal > anchors[0]) & (signal < anchors[-1]))
    if len(inside) == 0:
        return out
    p = noise_tail(counts[inside] / sigma, laplace)
    order = np.argsort(p, kind="stable")
    passed = np.flatnonzero(p[order] <= _QUIET_TAIL * np.arange(1, len(p) + 1) / len(p))
    dropped = inside[order[int(passed[-1]) + 1 :]] if len(passed) else inside
    if len(dropped) == 0:
        return out
    total = float(counts[dropped].sum())
    bound = float(tail_threshold(len(dropped), sigma, _QUIET_TAIL, laplace))
    above = np.searchsorted(anchors, signal[dropped])
    neighbours = float(np.median(noisy[np.union1d(anchors[above], anchors[above - 1])]))
    if total <= bound and (total + bound) / len(dropped) <= _QUIET_SHARE * neighbours:
        out[dropped] = True
    return out


_QUIET_SHARE = 0.25
"""The values of a small range dropped as noise only (:func:`_noise_only`) hold, per value, at most this share of
the median of their neighbouring anchors (their noisy sum plus its bound at :data:`_QUIET_TAIL`): the test of a
lattice's values off it (``spread._LATTICE_OFF_SHARE``)."""


_QUIET_TAIL = FAR_TAIL
"""The levels of :func:`_noise_only`: its anchors' (Bonferroni over the range), its false discovery rate and the
one-sided level its dropped values' noisy sum must not pass (those of its ends' CUSUM, :func:`far_noise`)."""


MAX_CODE_RANGE = 100
"""A column of whole numbers whose DP range holds at most this many integers is a code (a category), whatever
share its single values hold: codes 0..41 of a country, ages, weekly hours (docs/design.md section 2.8)."""


def profile_from_noisy(
    name: str,
    scale: str,
    grid: ProfileGrid,
    noisy: np.ndarray,
    noisy_frac: float,
    sigma: float,
    n_bins: int,
    protected_n: int,
    laplace: bool = False,
    blocks: np.ndarray | None = None,
    block_sigma: np.ndarray | float = 0.0,
    distinct: float | None = None,
    distinct_sigma: float = 0.0,
) -> ColumnProfile:
    """Decide one column from its noisy profile: a code or a measurement (docs/design.md section 2.8).

    Post-processing only: the noisy histogram is drawn by :func:`spark_dpsynth.mechanisms._profile.dp_profiles`.

    Args:
        name: the column's name; scale: its scale (:data:`SCALES`, not ``category``).
        grid: the scale's :class:`ProfileGrid` (:func:`profile_grid`).
        noisy: float64 (grid.size,) noisy count of every cell (0 on the impossible cells).
        noisy_frac: the noisy count of values that are not whole numbers (real scale; else 0).
        sigma: the noise's standard deviation per cell, in records.
        n_bins: the number of quantile bins of a measurement (``DataConfig.dp_bins``).
        protected_n: n', the protected number of records.
        laplace: the cells' noise is Laplace (its tail sets the threshold), else Gaussian.
        blocks: float64 (B,) noisy count of every block of :func:`block_tree` (its order), or None when the
            profile did not measure them (a block's records are then the sum of its cells' noisy counts).
        block_sigma: the blocks' noise std, in records: float64 (B,) (kappa sigma, :func:`block_noise`), or one
            value for every block.
        distinct: the noisy number of the column's distinct values (a number scale under zCDP), or None when
            the profile did not count them; distinct_sigma: its noise std, in values.

    Raises:
        InvalidParameterError: ``blocks`` (or an array ``block_sigma``) is not one value per block of the scale's
            tree.

    Returns:
        The :class:`ColumnProfile` (see :func:`spark_dpsynth.mechanisms._profile.dp_profiles` for what a code
        and a measurement hold).
    """

    cells = np.flatnonzero(grid.possible[: grid.null_cell])
    tail = SIGNAL_FALSE_POSITIVE / max(len(cells), 1)
    level = noise_level(tail, laplace)
    gaussian = noise_level(tail, False)  # a sum of many cells' noise, Laplace or not, is close to Gaussian
    block_gaussian = block_level(grid)
    threshold = sigma * level
    non_empty = max(float(protected_n) - max(float(noisy[grid.null_cell]), 0.0), 1.0)
    point_ids = np.arange(1, grid.null_cell, 2)
    standing = point_ids[noisy[point_ids] > threshold]
    share = float(noisy[standing].sum()) / non_empty
    half_bin = 1.0 / (2 * n_bins)
    numeric = scale in ("integer", "real")
    # the records beyond the values that stand out, and the noise of that difference
    rest_mass = non_empty - float(noisy[standing].sum())
    rest_noise = sigma * math.sqrt(len(standing) + 1.0) * 3.0
    code = ColumnProfile(
        name,
        "code",
        None,
        min(share, 1.0),
        f"DP code: {len(standing)} exact values stand out of the noise and hold about {min(share, 1.0):.0%} "
        "of its records",
        non_empty,
    )
    if numeric and len(standing) and rest_mass <= max(rest_noise, non_empty / 1000.0):
        return code
    present = noisy.copy()
    present[grid.null_cell] = 0.0
    integral = scale == "real" and noisy_frac <= max(
        sigma * noise_level(_WHOLE_FALSE_POSITIVE, laplace), non_empty / 1000.0
    )
    values = value_cells(grid, integral)
    # a real column of fractions: its records may lie on the grid's points only (ratings in halves), read as a
    # lattice of them where the open cells between hold nothing that stands out (docs/design.md section 2.8)
    fractions = scale == "real" and not integral
    lattice = point_cells(grid) if fractions else values
    sums = RunSums(grid, cells, present, sigma, level, blocks, block_sigma)
    # a sparse code set (an industry code: few values far apart, its rare ones within the noise) is a code: binned,
    # its rest was spread over whole numbers the column never holds (docs/design.md section 2.8, "code sets")
    sparse = code_set(
        grid,
        present,
        standing,
        values,
        sums,
        block_gaussian,
        laplace,
        non_empty,
        n_bins,
        distinct,
        distinct_sigma,
    )
    if numeric and sparse is not None:
        return ColumnProfile(name, "code", None, min(share, 1.0), sparse, non_empty)
    weights, stood = signal_weights(
        grid, present, cells, threshold, sums, gaussian, block_gaussian, laplace, lattice, fractions
    )
    span = trimmed(cells[weights[cells] > 0], weights, n_bins)
    span = inside_spikes(span, present, standing, half_bin * non_empty, sums, stood, laplace, values)
    # a column of fractions: the lattice of its points read from all its records, those that stand out alone too
    # (3, 4 and 5 of ratings in halves), for the parts of it whose rest alone is too thin to tell
    step = 0.0
    if fractions and len(span):
        reach = np.arange(span[0], span[-1] + 1)
        read = run_lattice(grid, reach, present[reach], sigma, laplace, lattice, True)
        step = read[1] if read is not None else 0.0
    whole = whole_number_range(grid, present, span, half_bin * non_empty)
    small_range = numeric and whole is not None and 2 <= whole[1] - whole[0] + 1 <= MAX_CODE_RANGE
    # the empty run before a top code (99 above months 1..12): no record is drawn there
    whole_points = None
    if integral:
        # the point cells (1 + 2 i, the point p_i itself) at whole numbers
        at = grid.points[np.maximum(cells - 1, 0) // 2]
        whole_points = cells[(cells % 2 == 1) & (at == np.floor(at))]
    gaps = gap_to_top_code(span, present, standing, half_bin * non_empty, sums, stood, laplace, whole_points)
    # a few values hold almost every record and the rest is more than noise (an amount that is mostly 0 and a
    # few round sums): every value that stands out is a point, and the rest is binned, not lost
    few = numeric and not small_range and share >= 1.0 - half_bin
    if few and len(standing) < 2:
        return code
    if small_range or few:
        # Whole numbers in a small range whose rare values do not stand out alone (a country code's tail,
        # weekly hours of 1 or 99): every value that stands out is a point, the rest is drawn among the whole
        # numbers of the range, so it is neither lost nor piled onto the frequent values.
        spikes = standing
    elif scale in ("integer", "real"):
        # A measurement: spikes as points, the rest binned inside its DP range.
        spikes = standing[noisy[standing] >= half_bin * non_empty]
    else:
        spikes = standing[:0]
    placed_note = ""
    # the counts without the exact values (a spike at 0 is a multiple of every lattice step)
    without_spikes = present.copy()
    without_spikes[spikes] = 0.0
    rest = without_spikes.copy()
    rest[~grid.possible] = 0.0
    if small_range:
        assert whole is not None
        signal = cells[(cells >= cells_of(grid, np.array([whole[0]]), np.array([True]))[0])]
        signal = signal[signal <= cells_of(grid, np.array([whole[1]]), np.array([True]))[0]]
        if whole_points is not None:
            # a real column of whole numbers: its values are the range's whole numbers, not the real grid's
            # points and intervals between them (2.1, 2.2), which hold only noise
            signal = signal[np.isin(signal, whole_points)]
        elif fractions:
            # a real column of fractions whose range's open cells hold nothing (whole_number_range): its records
            # lie on the range's points, on their lattice when they have one (ratings 3.0, 3.5, .., 5.0), not on
            # every real number between (a rating of 3.26)
            on = run_lattice(grid, signal, present[signal], sigma, laplace, lattice, True, step)
            if on is not None and len(on[0]):
                signal = on[0]
        # the range's records beyond its exact values: without the values (they are points) and the empty
        # run before a top code, the range ends where they end
        signal = signal[~np.isin(signal, gaps) & ~np.isin(signal, spikes)]
        signal = signal[~_noise_only(signal, spikes, noisy, sigma, laplace)]
        kept = np.zeros(len(rest), dtype=bool)
        kept[signal] = True
        rest[~kept] = 0.0
    else:
        # cells that stand out alone, and blocks of magnitude that stand out together (a thin tail of amounts):
        # the rest's mass is read from them only, so that the noise of thousands of empty cells does not
        # swamp it (Adult's capital_gain beyond 0: about 8% of the records over 7,000 whole numbers)
        rest, stood = signal_weights(
            grid, rest, cells, threshold, sums, gaussian, block_gaussian, laplace, lattice, fractions, step
        )
        signal = trimmed(cells[rest[cells] > 0], rest, n_bins)
        inside = inside_spikes(signal, present, standing, half_bin * non_empty, sums, stood, laplace, values)
        rest = moved_inside(rest, grid.sizes, signal, inside)
        signal = inside[~np.isin(inside, gaps)]
        rest[gaps] = 0.0
        if few and len(signal) < 2:
            # the rest is too thin to place: spread evenly between the smallest and largest standing values,
            # where nothing stands out (Adult's capital_loss: 0 and three sums near 1,900 hold 97%, the other
            # 3% lie among 90 values); collapsed onto the standing values it moved the column's mean
            span = cells[(cells > standing[0]) & (cells < standing[-1])]
            span = span[~np.isin(span, standing) & ~np.isin(span, gaps)]
            spread = spread_evenly(
                grid, span, max(rest_mass, 0.0), present[span], sigma, laplace, lattice, points=fractions
            )
            if len(span) and (spread > 0).any():
                rest = np.zeros_like(rest)
                rest[span] = spread
                signal = span[spread > 0]
        unplaced = non_empty - float(noisy[spikes].sum())
        if len(signal) < 2 and len(spikes) and unplaced > max(rest_noise, half_bin * non_empty):
            # the records beyond the spikes are more than noise, but no range of them stands out (spread thinly
            # over hundreds of values: a poverty ratio whose values 0..500, beside its top code 501, hold about a
            # third of the records): when the values between 0 and the standing values
            # stand out together, the rest is spread evenly there rather than lost onto the spikes; a code whose
            # rare values lie thinly over thousands of numbers (an industry code) does not pass that test and
            # stays a code (docs/design.md section 2.8)
            zero = int(cells_of(grid, np.array([0.0]), np.array([True]))[0])
            a, b = min(zero, int(standing[0])), max(zero, int(standing[-1]))
            run = cells[(cells >= a) & (cells <= b)]
            span = run[~np.isin(run, spikes) & ~np.isin(run, gaps)]
            value, needed = sums.left(run, without_spikes, block_gaussian)
            spread = spread_evenly(
                grid, span, unplaced, present[span], sigma, laplace, lattice, points=fractions
            )
            if (spread > 0).sum() >= 2 and value > needed:
                rest = np.zeros_like(rest)
                rest[span] = spread
                signal = span[spread > 0]
                placed_note = (
                    ", the rest spread evenly between 0 and its exact values (no range of it stands out)"
                )
    if len(signal) == 0:
        # nothing beyond the spikes stands out: the column is its spikes (a code), the rest is noise
        return ColumnProfile(
            name,
            "code",
            None,
            min(share, 1.0),
            f"DP code: beyond {len(standing)} exact values no range of values stands out of the noise",
            non_empty,
        )
    first, last = int(signal[0]), int(signal[-1])
    # the rest's mass in open cells (between grid points): values the profile cannot tell apart, one or many
    open_cells = np.arange(first + first % 2, last + 1, 2)
    off_grid = (
        numeric and not small_range and float(rest[open_cells].clip(min=0.0).sum()) >= half_bin * non_empty
    )
    lo = grid.bounds(first)[0]
    hi = grid.bounds(last)[1]
    if not math.isfinite(lo):  # the cell below the grid: start at the first point
        lo = float(grid.points[0])
    if not math.isfinite(hi):
        hi = float(grid.points[-1])
    if not lo < hi:
        # the records beyond the points lie at one value that does not stand out alone: nothing to bin
        return code
    # the running sum of the noisy counts (unbiased, its noise grows as a random walk), made non-decreasing
    cdf = np.maximum.accumulate(np.cumsum(rest[first : last + 1]))
    edges: set[float] = set()
    if cdf[-1] > 0:
        for i in range(1, n_bins):
            at = int(np.searchsorted(cdf, cdf[-1] * i / n_bins, side="left"))
            c_lo, c_hi = grid.bounds(first + at)
            # the lower end of an open cell, the point itself for a point cell; whole numbers on integer scales
            edges.add(c_lo if math.isfinite(c_lo) else lo)
    edges = {e for e in edges if lo < e < hi}
    if scale in ("integer", "date"):
        edges = {float(math.ceil(e)) for e in edges}
        edges = {e for e in edges if lo < e < hi}
    if not edges:
        edges = {float(math.ceil((lo + hi) / 2.0)) if scale in ("integer", "date") else (lo + hi) / 2.0}
        edges = {e for e in edges if lo < e < hi} or {hi}
    points = tuple(float(grid.points[(c - 1) // 2]) for c in spikes)
    # a whole-number column's lattices read from its unit cells, for its open cells beyond 9,999 (incomes in
    # hundreds)
    open_steps = open_lattice(grid, np.arange(first, last + 1), without_spikes, sigma, laplace, values)
    shape = within_bin_shape(grid, rest, first, last, lo, hi, sorted(edges), open_steps)
    spec = BinSpec(
        edges=tuple(sorted(edges)),
        lower=lo,
        upper=max(hi, max(edges)),
        points=points,
        integral=integral,
        shape=shape,
    )
    spike_note = f", {len(points)} exact value(s) kept" if points else ""
    small_note = f" of {int(hi - lo + 1)} whole numbers" if small_range else ""
    return ColumnProfile(
        name,
        "measurement",
        spec,
        min(share, 1.0),
        f"DP measurement: {len(spec.edges) + 1} bins inside its DP range{small_note}{spike_note}"
        + (", whole numbers" if integral else "")
        + placed_note,
        non_empty,
        off_grid=off_grid,
    )
