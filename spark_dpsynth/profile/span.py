"""The DP range of a measurement: where its records begin and end (docs/design.md section 2.8).

* :func:`trimmed`: a span cut inwards to the levels of its running noisy sum.
* :func:`inside_spikes`: a span without its empty cells beyond a top or bottom code.
* :func:`far_noise`: where an end's records give way to noise (a CUSUM).
* :func:`gap_to_top_code`: the empty run below a top code (months 1..12 and 99).
* :func:`moved_inside`: the records a block spread beyond the range, drawn inside it.
* :func:`whole_number_range`: a span of whole numbers (a small whole-number range).

Privacy: post-processing of the noisy profile; nothing here reads data or draws noise.
"""

from __future__ import annotations

import math

import numpy as np

from spark_dpsynth.profile.blocks import RunSums
from spark_dpsynth.profile.grid import ProfileGrid
from spark_dpsynth.profile.levels import SIGNAL_FALSE_POSITIVE, noise_level, sum_threshold, tail_threshold

__all__ = [
    "FAR_TAIL",
    "far_noise",
    "gap_to_top_code",
    "inside_spikes",
    "moved_inside",
    "trimmed",
    "whole_number_range",
]


def whole_number_range(
    grid: ProfileGrid, noisy: np.ndarray, span: np.ndarray, open_limit: float
) -> tuple[float, float] | None:
    """[lo, hi] of ``span`` (the cells where the column's records are, trimmed of its thin tails) when its ends
    are whole-number points and its open cells (values that are not whole numbers, or whole numbers beyond 9999)
    hold a noisy count of at most ``open_limit`` records; else None. Post-processing of the noisy profile."""
    if len(span) == 0:
        return None
    first, last = int(span[0]), int(span[-1])
    if first % 2 == 0 or last % 2 == 0:
        return None
    inside = np.arange(first, last + 1)
    opens = inside[(inside % 2 == 0) & grid.possible[inside]]
    if float(noisy[opens].sum()) > open_limit:
        return None
    lo, hi = grid.bounds(first)[0], grid.bounds(last)[1]
    if not (float(lo).is_integer() and float(hi).is_integer()):
        return None
    return lo, hi


RANGE_TAIL = 1.0 / 256.0
"""The share of a measurement's records its DP range may leave out at either end (:func:`trimmed`), at most a
quarter of a bin's: the range then reaches the column's 1st and 99th percentiles (the weights read rare tail
values only where cells or blocks stand out, so the levels land inside the true ones)."""

TAIL_REACH = 2.0
"""How far past the 1/(4 b) level a DP range may reach (:func:`trimmed`), in units of the cells between that level
and the 1/b level."""


def trimmed(signal: np.ndarray, rest: np.ndarray, n_bins: int) -> np.ndarray:
    """``signal``'s first and last cell moved inwards to the t and 1 - t levels of the running noisy sum over
    its span (made non-decreasing), t = min(1/(4 b), :data:`RANGE_TAIL`) for b = ``n_bins``; the records of the
    two tails are drawn inside it (post-processing). Empty when the span holds no mass.

    An end reaches past the 1/(4 b) level by at most :data:`TAIL_REACH` times the cells between that level and
    the 1/b level (the outermost bin's inner part), on either side: a thin tail that stands out reaches its 1st
    and 99th percentiles, while the even spread of a coarse block, whose last cells hold a share as large as its
    first, does not carry the range far past the data (work experience of 83 years where the records end at
    29)."""
    if len(signal) == 0:
        return signal
    first, last = int(signal[0]), int(signal[-1])
    cdf = np.maximum.accumulate(np.cumsum(rest[first : last + 1]))
    if cdf[-1] <= 0:
        return signal[:0]

    def level(q: float) -> int:
        return first + int(np.searchsorted(cdf, q * cdf[-1], side="left"))

    quarter, bin_ = 1.0 / (4 * n_bins), 1.0 / n_bins
    tail = min(quarter, RANGE_TAIL)
    lo, hi = level(tail), level(1.0 - tail)
    if tail < quarter:
        lo_q, hi_q = level(quarter), level(1.0 - quarter)
        lo = max(lo, lo_q - int(TAIL_REACH * max(level(bin_) - lo_q, 1)))
        hi = min(hi, hi_q + int(TAIL_REACH * max(hi_q - level(1.0 - bin_), 1)))
    return signal[(signal >= lo) & (signal <= hi)] if lo <= hi else signal[:0]


def inside_spikes(
    span: np.ndarray,
    present: np.ndarray,
    standing: np.ndarray,
    heavy: float,
    sums: RunSums,
    stood: list[np.ndarray],
    laplace: bool = False,
    values: np.ndarray | None = None,
) -> np.ndarray:
    """``span`` (cells in value order where the profile places the column's records) without its cells beyond
    the outermost value that stands out alone (``standing``) on either side, when that value holds at least
    ``heavy`` records (a spike: a top or bottom code) and the noisy sum of those cells does not stand out of its
    noise (:func:`sum_threshold` at a Bonferroni level :data:`SIGNAL_FALSE_POSITIVE` over the two sides' tests);
    when it does, the cells past where the records beyond the spike give way to noise (:func:`far_noise`). A
    block of magnitude spread evenly (:func:`signal_weights`) ends at the block's edge, not at the data's: NIST's
    poverty ratio, whose largest value 501 holds about a third of its records, was drawn up to 658; at the
    grid's level (over its cells, not the two tests) an age whose years 38..46 hold a tenth of the records was cut
    at 37, one of its common values. A side where a block or half stood out in :func:`signal_weights`
    (``stood``) is never cut: the sum of the cells next to a spike carries the noise of every cell, a measured
    block's does not. ``laplace``: the cells' noise is discrete Laplace; ``values``: the cells that can hold the
    column's values (:func:`~spark_dpsynth.profile.spread.value_cells`, sorted: its whole numbers), or None for
    every cell: the CUSUM reads those only (and every cell beyond them), since the noise of the cells between whole
    numbers would end a thin tail of weeks early. Post-processing of the noisy profile (docs/design.md section
    2.8)."""
    if len(span) == 0 or len(standing) == 0:
        return span
    gaussian = noise_level(SIGNAL_FALSE_POSITIVE / 2.0, False)

    def end(edge: int, beyond: np.ndarray, outer: int) -> int:
        """The span's new end on the side of ``edge`` (``outer``: its end now)."""
        if len(beyond) == 0 or present[edge] < heavy:
            return outer
        # a block or half that stood out on that side of the spike: records are there
        above = beyond[0] > edge
        if any((m[0] > edge) if above else (m[-1] < edge) for m in stood):
            return outer
        # every cell between the spike and the span's end, those the span leaves out as well, from the spike out
        if above:
            run = sums.cells[(sums.cells > edge) & (sums.cells <= beyond[-1])]
        else:
            run = sums.cells[(sums.cells >= beyond[0]) & (sums.cells < edge)]
        value, needed = sums.left(run, present, gaussian)
        if value <= needed:
            return edge
        out = run if above else run[::-1]
        if values is not None and len(values):
            out = out[np.isin(out, values) | (out < values[0]) | (out > values[-1])]
        keep = far_noise(present[out], sums.sigma, laplace)
        return int(out[keep - 1]) if keep else edge

    top, bottom = int(standing[-1]), int(standing[0])
    hi = end(top, span[span > top], int(span[-1]))
    lo = end(bottom, span[span < bottom], int(span[0]))
    return span[(span >= lo) & (span <= hi)]


FAR_TAIL = 0.05
"""The one-sided level at which the values past a CUSUM's most (:func:`far_noise`) stand out together."""


def far_noise(counts: np.ndarray, sigma: float, laplace: bool) -> int:
    """How many values of an end of a range to keep (``counts``: their noisy counts from the outermost anchor
    out): up to the most of the cumulated sum of (count - sigma / 2) from the anchor out, a CUSUM with reference
    value half a noise std (Page, Biometrika 1954), where the records give way to noise; none beyond it when the
    values beyond stand out together at the one-sided level :data:`FAR_TAIL`. Post-processing."""
    walk = np.concatenate([[0.0], np.cumsum(counts - sigma / 2.0)])
    keep = int(np.argmax(walk))
    beyond = float(counts[keep:].sum())
    if beyond > float(tail_threshold(max(len(counts) - keep, 1), sigma, FAR_TAIL, laplace)):
        return len(counts)
    return keep


_GAP_MIN_CELLS = 8
"""The search for where the records below a top code end (:func:`gap_to_top_code`) halves no part of fewer
than twice this many cells: it tests such a part whole, last. Halved down to single cells, a value or two
holding records within the noise of a few cells did not stand out alone (months 10..12 beside 99, each 3.7
noise stds) and was cut with the empty cells above it."""


def gap_to_top_code(
    span: np.ndarray,
    present: np.ndarray,
    standing: np.ndarray,
    heavy: float,
    sums: RunSums,
    stood: list[np.ndarray],
    laplace: bool = False,
    values: np.ndarray | None = None,
) -> np.ndarray:
    """The empty run below a top code: sorted cells between the largest value that stands out alone
    (``standing``) and the next one below it, cut down to where the records below the top code end; empty when
    nothing is cut. Post-processing of the noisy profile (docs/design.md section 2.8).

    Survey tables write "not applicable" as 9, 99, 999 or 9999, above answers that end far below it (the EU
    LFS's months 1..12 and 99, years 1945..2014 and 9999); the thin rest spread evenly between them came back
    as months 13..98 and years up to 2089 that no record holds. The largest standing value is a top code when
    it holds at least ``heavy`` records and the column's records end there (``span``, the cells where the
    profile places them, ends at it: :func:`inside_spikes`). The search goes from it down: the upper half of
    what is left of the run is cut when its noisy sum does not stand out of its noise (:func:`sum_threshold`,
    at a Bonferroni level :data:`SIGNAL_FALSE_POSITIVE` over the search's tests; with ``values``, the
    whole-number points are tested alone as well, and each cell at a level for the run's cells alone), and the
    search goes on in the lower half; when the upper half stands out, inside it (a binary search for where the
    last records lie); the part left when a half would hold fewer than :data:`_GAP_MIN_CELLS` cells is tested
    whole, last. The run starts above the end of every block or half
    that stood out in :func:`signal_weights` (``stood``) and ends inside it: records lie somewhere in such a
    part (the LFS's months since a start, multiples of 12 with about 200 records each up to 528, stand out in
    the half 325..549 and in no smaller part). A bottom code is left alone: the bottom code of a quantity is
    its zero (an amount, hours of overtime), whose thin values above stand out only together, beyond this
    test's power at a small epsilon (a capital loss's few records spread over 1..1,886 would collapse onto the
    values near 1,900).

    Args:
        span: the cells where the profile places the column's records, in value order.
        present: float64 (grid.size,) the noisy counts; standing: the cells that stand out alone, sorted.
        heavy: the records a spike holds at least (1/(2 b) of the non-empty records).
        sums: the run sums of the profile; stood: the runs that stood out in :func:`signal_weights`.
        laplace: the cells' noise is discrete Laplace (a one-cell test's level is its quantile).
        values: the cells that can hold one of the column's values (a real column of whole numbers: its
            whole-number points), or None for every cell.
    """
    if len(standing) < 2 or len(span) == 0:
        return standing[:0]
    a, b = int(standing[-2]), int(standing[-1])
    # records lie somewhere in a block or half that stood out: the search starts above the end of any in the run
    a = max([a] + [int(m[-1]) for m in stood if a < int(m[-1]) < b])
    run = sums.cells[(sums.cells > a) & (sums.cells < b)]
    if present[b] < heavy or len(run) == 0 or int(span[-1]) > b:
        return standing[:0]
    # From the top code down: the upper half of the part where the last records lie is cut when it does not
    # stand out, and the search goes on in the lower half; when it stands out, inside it. The part left when a
    # half would hold fewer than _GAP_MIN_CELLS cells is tested whole, last. A part stands out when its sum
    # does (every cell, read through the measured blocks it holds; and the whole numbers alone: the noise of a
    # real column's other cells swamps a short run of them), or one of its cells does at a level for the run's
    # cells alone (the part's test of signal_weights: hours of 70 and 80 beside thin values up to 78, below a
    # code 99). The sums at a Bonferroni level over the search's tests, the cells over the run's cells (the
    # parts tested do not overlap).
    halvings = max(math.ceil(math.log2(len(run) / _GAP_MIN_CELLS)), 0) + 1
    tail = SIGNAL_FALSE_POSITIVE / (halvings * (1 if values is None else 2))
    gaussian = noise_level(tail, False)
    level = noise_level(tail, laplace)
    cells = run if values is None else values[(values > a) & (values < b)]
    local = sums.sigma * noise_level(SIGNAL_FALSE_POSITIVE / max(len(cells), 1), laplace)

    def stands(part: np.ndarray) -> bool:
        value, needed = sums.left(part, present, gaussian)
        if value > needed:
            return True
        inside = cells[(cells >= part[0]) & (cells <= part[-1])]
        if len(inside) and bool((present[inside] > local).any()):
            return True
        if values is None or len(inside) == 0:
            return False
        return float(present[inside].sum()) > float(sum_threshold(len(inside), sums.sigma, level, gaussian))

    # the last records lie in run[low:high]: a binary search from the top code down
    low, high = 0, len(run)
    while high - low >= 2 * _GAP_MIN_CELLS:
        middle = (low + high) // 2
        if stands(run[middle:high]):
            low = middle
        else:
            high = middle
    if high > low and not stands(run[low:high]):
        high = low
    return run[high:]


def moved_inside(rest: np.ndarray, sizes: np.ndarray, before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """``rest`` with the mass of the cells of ``before`` that ``after`` no longer holds moved onto the cells of
    ``after`` that shared its even spread (the same mass per value as the nearest cut cell, :func:`signal_weights`)
    in proportion to their sizes: the records a block's even spread put beyond the range are drawn inside it, in
    the part of the block they came from; with no such cell, they are dropped. Post-processing."""
    out = rest.copy()
    if len(after) == 0:
        return out
    for cut in (before[before > after[-1]], before[before < after[0]][::-1]):
        if len(cut) == 0:
            continue
        moved = float(out[cut].sum())
        out[cut] = 0.0
        nearest = cut[0]
        if moved <= 0 or sizes[nearest] <= 0:
            continue
        per_value = rest[nearest] / sizes[nearest]
        size = sizes[after]
        with np.errstate(divide="ignore", invalid="ignore"):
            same = (size > 0) & (out[after] > 0) & (np.abs(out[after] / size - per_value) <= 1e-9 * per_value)
        members = after[same]
        if len(members):
            out[members] += moved * sizes[members] / float(sizes[members].sum())
    return out
