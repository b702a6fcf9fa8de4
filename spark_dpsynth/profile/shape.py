"""The within-bin shape of a measurement: the pieces of its DP range with the noisy mass the profile read there,
from which type restoration draws a binned value (docs/design.md section 2.8, "Types out").

Privacy: post-processing of the noisy profile; nothing here reads data or draws noise.
"""

from __future__ import annotations

import bisect
import math

import numpy as np

from spark_dpsynth.profile.grid import ProfileGrid

__all__ = ["within_bin_shape"]

_SHAPE_PIECES = 512
"""At most this many pieces in a measurement's within-bin shape (:func:`within_bin_shape`): beyond it,
neighbouring pieces of one bin are merged (a date column's thousands of days, an amount's thousands of whole
numbers)."""


def within_bin_shape(
    grid: ProfileGrid,
    weights: np.ndarray,
    first: int,
    last: int,
    lo: float,
    hi: float,
    edges: list[float],
    open_steps: tuple[float, ...] = (),
) -> tuple[tuple[float, ...], ...]:
    """The pieces (a, b, weight) of a measurement's range [lo, hi] with the noisy mass the profile read there
    (``weights``: per cell, >= 0 where it stands out, docs/design.md section 2.8): one piece per cell of
    ``first`` .. ``last`` with a positive weight (a point cell: a = b = the point; an open cell: its values, the
    whole numbers strictly between its points on the integer and date scales), neighbouring pieces of equal
    weight in one bin (``edges``) merged (a block whose mass was spread evenly): touching ones into one
    interval, points at a regular gap into a piece (a, b, weight, step) of the values a, a + step, ..., b (a
    lattice, :func:`_lattice`); an open cell holding more than one whole number, of a column whose whole numbers
    lie on lattices (``open_steps``, :func:`~spark_dpsynth.profile.spread.open_lattice`, finest first), a piece
    on the coarsest of them with a value inside the cell, never merged; when more than :data:`_SHAPE_PIECES`
    remain, neighbouring pieces of one bin merged into groups of equal size (on their step when they share
    one). Post-processing of the noisy profile."""
    whole = grid.scale in ("integer", "date")
    # [a, b, weight, weight of one cell, step (0: every value of [a, b]), on an open cell's lattice]
    pieces: list[list[float]] = []
    for c in range(first, last + 1):
        w = float(weights[c])
        if not (grid.possible[c] and w > 0 and math.isfinite(w)):
            continue
        a, b = grid.bounds(c)
        on_lattice = _open_piece(a, b, lo, hi, open_steps) if a != b and grid.sizes[c] > 1.0 else None
        if on_lattice is not None:
            pieces.append([*on_lattice[:2], w, w, on_lattice[2], 1.0])
            continue
        if a != b and whole:  # the whole numbers strictly between two points
            a, b = a + 1.0, b - 1.0
        a, b = max(a, lo), min(b, hi)
        if not (math.isfinite(a) and math.isfinite(b) and a <= b):
            continue
        previous = pieces[-1] if pieces else None
        # a piece is drawn in the bin its first value lies in: it never reaches into the next bin
        if (
            previous is not None
            and not previous[5]
            and abs(previous[3] - w) <= 1e-9 * max(w, 1.0)
            and bisect.bisect_right(edges, a) == bisect.bisect_right(edges, previous[0])
        ):
            gap = a - previous[1]
            contiguous = previous[4] == 0 and (gap == 0 or (whole and gap == 1.0))
            # equal points at a regular gap: the values of a lattice (_lattice), a, a + step, ..., b
            stepped = (
                a == b
                and gap > (1.0 if whole else 0.0)
                and (
                    (previous[0] == previous[1] and previous[4] == 0) or abs(previous[4] - gap) <= 1e-9 * gap
                )
            )
            if contiguous or stepped:
                previous[1] = b
                previous[2] += w
                if stepped:
                    previous[4] = gap
                continue
        pieces.append([a, b, w, w, 0.0, 0.0])
    if len(pieces) > _SHAPE_PIECES:
        starts = np.array([p[0] for p in pieces])
        bin_of = np.searchsorted(np.asarray(edges, dtype=np.float64), starts, side="right")
        group = math.ceil(len(pieces) / _SHAPE_PIECES)
        merged: list[list[float]] = []
        for k in np.unique(bin_of):
            members = [pieces[i] for i in np.flatnonzero(bin_of == k)]
            for i in range(0, len(members), group):
                run = members[i : i + group]
                steps = {p[4] for p in run}
                step = steps.pop() if len(steps) == 1 else 0.0
                merged.append([run[0][0], run[-1][1], sum(p[2] for p in run), 0.0, step, 0.0])
        pieces = merged
    return tuple(
        (float(p[0]), float(p[1]), float(f"{p[2]:.6g}"), *((float(p[4]),) if p[4] > 0 else ()))
        for p in pieces
    )


def _open_piece(
    a: float, b: float, lo: float, hi: float, steps: tuple[float, ...]
) -> tuple[float, float, float] | None:
    """(first, last, step) of the multiples of the coarsest of ``steps`` strictly inside the open cell (a, b) and
    within [lo, hi] (step 0 for a single one), or None when none of the steps has a multiple there."""
    if not (math.isfinite(a) and math.isfinite(b)):
        return None
    for g in reversed(steps):
        first = max(math.floor(a / g) + 1.0, math.ceil(lo / g)) * g
        last = min(math.ceil(b / g) - 1.0, math.floor(hi / g)) * g
        if first <= last:
            return first, last, (g if last > first else 0.0)
    return None
