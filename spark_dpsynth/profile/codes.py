"""Sparse code sets: a whole-number column whose records lie on few values far apart (an industry, occupation or
diagnosis code), told from a measurement by the DP profile alone (docs/design.md section 2.8, "code sets").

Binned as a measurement, such a column's rare codes were spread evenly over the whole numbers between its
frequent ones, and the synthetic column held codes the input never holds. :func:`code_set` reads the noisy
counts of the column's whole numbers and the blocks that hold them, and tells when the values that stand out
alone, plus the effective number of values of the rest, are few against the whole numbers of the span they lie
in: the column is then a code, a category whose values the mechanism's discovery releases (its rare values,
below the discovery's threshold, are one rest category that decodes to released values only).

Privacy: post-processing of the noisy profile (no budget; nothing here reads data or draws noise).
"""

from __future__ import annotations

import math

import numpy as np

from spark_dpsynth.profile.blocks import RunSums, standing_blocks
from spark_dpsynth.profile.grid import ProfileGrid
from spark_dpsynth.profile.levels import SIGNAL_FALSE_POSITIVE, noise_level

SMALL_RANGE = 100
"""``MAX_CODE_RANGE`` of :mod:`spark_dpsynth.profile.decide` (not imported: that module imports this one)."""

__all__ = [
    "CODE_SET_SPARSITY",
    "DISTINCT_CODE_SET_SPARSITY",
    "DISTINCT_NOISE",
    "MAX_CODE_SET_VALUES",
    "MIN_CODE_REPEATS",
    "code_set",
    "effective_values",
]

DISTINCT_NOISE = 3.0
"""The std of a column's noisy number of distinct values in units of a cell's noise (the zCDP profile counts it on
the number scales, docs/design.md section 2.8): one record adds at most one distinct value, so the count costs
1 / 9 of what a column's cells cost."""
DISTINCT_CODE_SET_SPARSITY = 8.0
"""A whole-number column is a code set when the upper confidence bound of its noisy number of distinct values is
at most 1/8 of the whole numbers of its span."""

CODE_SET_SPARSITY = 16.0
"""A whole-number column is a code set when its values (the values that stand out alone plus the effective number
of the rest's, :func:`effective_values`) are at most 1/16 of the whole numbers of the span they lie in."""
MAX_CODE_SET_VALUES = 20
"""A whole-number column whose values number at most this many, and at most half the whole numbers of their
span, is a code set as well: a column of a few values never comes back with values it does not hold."""

MIN_CODE_REPEATS = 3.0
"""The records beyond the standing values must number at least this many per value they lie on (the rest over the
smaller of its two bounds, :func:`code_set`): a code's rare values repeat, a thin sample of a measurement (125
amounts over 1..4,000) holds about one record per value and stays a number."""


def effective_values(counts: np.ndarray, rest: float, sigma: float, laplace: bool) -> float:
    """An upper confidence bound on the effective number of values (the inverse Simpson index, rest^2 / sum x^2,
    Hill's number of order 2) over which ``rest`` records lie, from the noisy counts of the values they may lie
    on. Post-processing of the noisy profile (docs/design.md section 2.8, "code sets").

    S = sum(y^2 - sigma^2) is unbiased for sum x^2 (y = x + Z, E Z^2 = sigma^2); its variance is
    4 sigma^2 sum x^2 + c k sigma^4 for k counts (c = 2 for Gaussian noise, 5 for Laplace, whose fourth moment is
    6 sigma^4). The bound is rest^2 / (S - z sd(S)), z the (1 - :data:`SIGNAL_FALSE_POSITIVE`) Gaussian quantile:
    a rest spread thinly over many values has a sum of squares within the noise (an infinite bound), a rest on
    a few values one that stands out.

    Args:
        counts: float64 (k,) the noisy counts of the single values the rest may lie on, each of noise std sigma.
        rest: the noisy number of records there (>= 0; 0 gives 0).
        sigma: the noise std of one count, in records; laplace: the noise is (discrete) Laplace.

    Returns:
        The bound, >= 1 when finite (``math.inf`` when the sum of squares does not stand out of its noise).
    """
    if rest <= 0:
        return 0.0
    y = np.asarray(counts, dtype=np.float64)
    k = len(y)
    squares = float((y * y).sum()) - k * sigma**2
    fourth = 5.0 if laplace else 2.0
    sd = math.sqrt(4.0 * sigma**2 * max(squares, 0.0) + fourth * k * sigma**4)
    low = squares - noise_level(SIGNAL_FALSE_POSITIVE, False) * sd
    if low <= 0:
        return math.inf
    return max(rest**2 / low, 1.0)


def code_set(
    grid: ProfileGrid,
    noisy: np.ndarray,
    standing: np.ndarray,
    values: np.ndarray | None,
    sums: RunSums,
    gaussian: float,
    laplace: bool,
    non_empty: float,
    n_bins: int,
    distinct: float | None = None,
    distinct_sigma: float = 0.0,
) -> str | None:
    """One line of reason when a whole-number column is a sparse code set, else None (docs/design.md section 2.8,
    "code sets"). Post-processing of the noisy profile.

    The span is the whole numbers from the smallest to the largest value that stands out alone (``standing``,
    at least 2) or lies in a block that stands out (:func:`~spark_dpsynth.profile.blocks.standing_blocks`); its
    records are read from the measured blocks (``sums``), and they must hold all but
    1/(2 ``n_bins``) of the non-empty records beyond the noise of that count (else the column has records
    elsewhere: beyond 9,999, or not whole). The rest (the span's records beyond the standing values; none when
    it does not stand out of its noise) lies on
    :func:`effective_values` values at most, from the noisy counts of the span's other whole numbers. With K
    the standing values plus that bound, D the upper confidence bound of the noisy number of distinct values
    (``distinct`` + z ``distinct_sigma``, z the (1 - :data:`SIGNAL_FALSE_POSITIVE`) Gaussian quantile; infinite
    without it) and W the span's whole numbers, the column is a code set when K <= W /
    :data:`CODE_SET_SPARSITY`, or D <= W / :data:`DISTINCT_CODE_SET_SPARSITY`, or min(K, D) <=
    :data:`MAX_CODE_SET_VALUES`; always with W > ``MAX_CODE_RANGE`` (a small range keeps its whole numbers,
    section 2.8) and the rest holding at least :data:`MIN_CODE_REPEATS` records per value beyond the standing
    ones (min(K, D) - standing values).

    Args:
        grid: the scale's profile grid.
        noisy: float64 (grid.size,) the noisy counts, the empty cell left out (0).
        standing: the point cells that stand out alone, sorted.
        values: the cells that hold one whole number each (:func:`~spark_dpsynth.profile.spread.value_cells`),
            or None: the column is not one of whole numbers (never a code set).
        sums: the run sums of the profile; gaussian: the blocks' level (:func:`~spark_dpsynth.profile.blocks.
            block_level`).
        laplace: the cells' noise is Laplace; non_empty: the noisy number of non-empty records (>= 1).
        n_bins: ``DataConfig.dp_bins``.
        distinct: the column's noisy number of distinct values, or None when the profile did not count it;
            distinct_sigma: its noise std, in values.
    """
    if values is None or len(standing) < 2:
        return None
    if not np.isin(standing, values).all():
        return None
    ends = [int(standing[0]), int(standing[-1])]
    ends += [int(m[i]) for m in standing_blocks(grid, noisy, sums.cells, sums, gaussian) for i in (0, -1)]
    span = values[(values >= min(ends)) & (values <= max(ends))]
    lo, hi = int(span[0]), int(span[-1])
    run = sums.cells[(sums.cells >= lo) & (sums.cells <= hi)]
    inside, needed = sums.left(run, noisy, gaussian)
    if inside + needed < (1.0 - 1.0 / (2 * n_bins)) * non_empty:
        return None
    others = span[~np.isin(span, standing)]
    rest = inside - float(noisy[standing].sum())
    rest = rest if rest > needed else 0.0
    found = len(standing) + effective_values(noisy[others], rest, sums.sigma, laplace)
    counted = math.inf
    if distinct is not None:
        counted = (
            max(distinct, float(len(standing))) + noise_level(SIGNAL_FALSE_POSITIVE, False) * distinct_sigma
        )
    whole = len(span)
    few = min(found, counted)
    repeats = rest / max(few - len(standing), 1.0) if rest > 0 else math.inf
    if (
        whole > SMALL_RANGE
        and repeats >= MIN_CODE_REPEATS
        and (
            found <= whole / CODE_SET_SPARSITY
            or counted <= whole / DISTINCT_CODE_SET_SPARSITY
            or few <= MAX_CODE_SET_VALUES
        )
    ):
        low, high = grid.points[(lo - 1) // 2], grid.points[(hi - 1) // 2]
        return (
            f"DP code set: at most about {math.ceil(few)} values of the {whole} whole numbers from {low:g} to "
            f"{high:g}, {len(standing)} of them standing out of the noise"
        )
    return None
