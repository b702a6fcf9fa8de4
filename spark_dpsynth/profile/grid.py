"""The public grids of the DP profile: the candidate bin edges of a scale (:func:`candidate_grid`), the points of
its profile grid (:func:`profile_points`) and their cells (:class:`ProfileGrid`, :func:`profile_grid`), and the
cell of a value (:func:`cell_key` on Spark, :func:`cells_of` on the driver) (docs/design.md section 2.8).

Privacy: public; every grid depends only on the scale, never on the data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from pyspark.sql import Column
from pyspark.sql import functions as F

__all__ = [
    "DATE_BLOCK_DAYS",
    "UNIT_TOP",
    "ProfileGrid",
    "candidate_grid",
    "cell_key",
    "cells_of",
    "profile_grid",
    "profile_points",
]

_DATE_MIN, _DATE_MAX = -25567, 47482
"""The public range of the date grid, in days since 1970-01-01: 1900-01-01 .. 2100-01-01."""
DATE_BLOCK_DAYS = 4096
"""The days of a block of magnitude on the date scales (about 11 years; two cells a day: the day and the times
within it), the dates' counterpart of a decade: a column spread over years stands out as a whole even when no
month of it does (a person-level event table measures each row with little budget); halved as a decade is, its
finest blocks are 32 cells (32 days; 16 on the timestamp scale, two cells a day) (docs/design.md section 2.8)."""
_MANTISSAS = np.arange(10, 100, dtype=np.float64)
"""Two significant digits: the grid of numbers holds m x 10^(e-1) for m = 10..99 (1.0, 1.1, .., 9.9 x 10^e)."""
_DECADES = {"integer": (2, 18), "real": (-3, 15)}
"""Decades e (inclusive) of the two-digit positive grid points per scale: reals from 0.001 up to 9.9e15;
integers 1, 2, .., 99 and then from 100 up to 9.9e18 (so that every integer grid point is an integer). The same
points with a minus sign, and 0, complete the grid."""
_UNIT_POINTS = {"integer": 99, "real": 0}
"""Positive grid points 1, 2, .., 99 before the two-digit decades (integer scale only)."""


def candidate_grid(scale: str) -> np.ndarray:
    """The public, sorted candidate bin edges of a scale (float64, no duplicates); independent of any data.

    ``integer`` and ``real``: 0 and +-m x 10^(e-1) for m = 10..99 and the decades of :data:`_DECADES`: two
    significant digits over the whole range of the type, so that the grid needs no bounds from the data (the
    range of an int64 is too wide for a linear grid, and a bound from the data would leak). ``date`` and
    ``timestamp``: every day from 1900-01-01 to 2100-01-01 (in days, or in seconds for timestamps).
    """
    if scale in ("date", "timestamp"):
        days = np.arange(_DATE_MIN, _DATE_MAX + 1, dtype=np.float64)
        return days * 86400.0 if scale == "timestamp" else days
    low, high = _DECADES[scale]
    units = np.arange(1, _UNIT_POINTS[scale] + 1, dtype=np.float64)
    positive = np.concatenate([units] + [_MANTISSAS * 10.0 ** (e - 1) for e in range(low, high + 1)])
    positive = np.array([float(f"{x:.12g}") for x in positive])
    return np.concatenate([-positive[::-1], [0.0], positive])


UNIT_TOP = 9999
"""Whole numbers -9999 .. 9999 are points of the integer and real profile grids: a code column's values, and
years."""
_PROFILE_DECADES = {"integer": (4, 18), "real": (-3, 15)}
"""Decades e of the two-significant-digit points m x 10^(e-1) (m = 10..99) of the profile grids: integers from
10,000 (the whole numbers below are points already) to 9.9e18, reals from 0.001 to 9.9e15."""


def profile_points(scale: str) -> np.ndarray:
    """The public, sorted points of a scale's profile grid (float64, distinct); independent of any data.

    ``integer``: every whole number in [-9999, 9999], then +-m x 10^(e-1) for m = 10..99 from 10,000 to 9.9e18.
    ``real``: 0, +-m x 10^(e-1) for m = 10..99 from 0.001 to 9.9e15, and every whole number in [-9999, 9999].
    ``date``: every day from 1900-01-01 to 2100-01-01 (days since 1970-01-01); ``timestamp``: the start of each
    of those days, in seconds.
    """
    if scale in ("date", "timestamp"):
        return candidate_grid(scale)
    low, high = _PROFILE_DECADES[scale]
    two_digit = np.concatenate([_MANTISSAS * 10.0 ** (e - 1) for e in range(low, high + 1)])
    two_digit = np.array([float(f"{x:.12g}") for x in two_digit])
    units = np.arange(1, UNIT_TOP + 1, dtype=np.float64)
    positive = np.unique(np.concatenate([units, two_digit]))
    return np.concatenate([-positive[::-1], [0.0], positive])


@dataclass(frozen=True)
class ProfileGrid:
    """The cells of one scale's profile grid, in value order.

    Cell 0 holds the values below the first point; cell 1 + 2i the point p_i exactly; cell 2 + 2i the open
    interval (p_i, p_(i+1)) (the last one: above the last point); cell ``size - 1`` the empty values (null,
    NaN, infinite). ``possible`` is False for the open cells that no value of the scale can fall in (between two
    consecutive whole numbers on the integer and date scales): they hold no record whatever the data, get no
    noise and are left out of every threshold."""

    points: np.ndarray
    possible: np.ndarray
    sizes: np.ndarray
    """Per cell, how many values it holds when values are spread evenly: on the integer and date scales its
    whole numbers (1 for a point cell), in seconds on the timestamp scale, its width on the real scale (0 for a
    point cell); 1 for the two cells beyond the points, 0 for the empty values. What a block's mass is spread
    by (:func:`signal_weights`)."""
    scale: str = "real"

    def block_keys(self, cells: np.ndarray) -> np.ndarray:
        """The block of each cell: on the number scales its magnitude (the decade of |x| on its side of 0, or
        0); on the date scales :data:`DATE_BLOCK_DAYS` consecutive days from the grid's first (docs/design.md
        section 2.8)."""
        if self.scale in ("date", "timestamp"):
            return (cells // (2 * DATE_BLOCK_DAYS)).astype(np.float64)
        p = self.points
        anchor = np.where(cells == 0, p[0], p[np.maximum((cells - 1) // 2, 0)])
        magnitude = np.floor(np.log10(np.maximum(np.abs(anchor), 1e-300)))
        return np.where(anchor == 0, 0.0, np.sign(anchor) * (magnitude + 400.0))

    @property
    def size(self) -> int:
        return 2 * len(self.points) + 2

    @property
    def null_cell(self) -> int:
        return self.size - 1

    def bounds(self, cell: int) -> tuple[float, float]:
        """[lo, hi] of a cell's values (the points themselves for a point cell; the open ends otherwise)."""
        p = self.points
        if cell == 0:
            return -math.inf, float(p[0])
        i, point = divmod(cell - 1, 2)
        if point == 0:
            return float(p[i]), float(p[i])
        return float(p[i]), float(p[i + 1]) if i + 1 < len(p) else math.inf


def profile_grid(scale: str) -> ProfileGrid:
    """The :class:`ProfileGrid` of a scale (``integer``, ``real``, ``date`` or ``timestamp``): its points
    (:func:`profile_points`), which cells can hold a value, and their sizes; public, independent of any data."""
    points = profile_points(scale)
    possible = np.ones(2 * len(points) + 2, dtype=bool)
    if scale in ("integer", "date"):
        gaps = np.diff(points)
        # open cell (p_i, p_(i+1)) holds a whole number only when the points are more than 1 apart
        possible[2 : 2 * len(points) : 2] = gaps > 1.0
    if scale == "timestamp":
        possible[1 : 2 * len(points) + 1 : 2] = True
    sizes = np.ones(2 * len(points) + 2, dtype=np.float64)
    gaps = np.diff(points)
    if scale == "real":
        sizes[1 : 2 * len(points) + 1 : 2] = 0.0
        sizes[2 : 2 * len(points) : 2] = gaps
    else:  # whole numbers (days, seconds) strictly between two points
        sizes[2 : 2 * len(points) : 2] = np.maximum(gaps - 1.0, 0.0)
    sizes[-1] = 0.0
    sizes[~possible] = 0.0
    return ProfileGrid(points=points, possible=possible, scale=scale, sizes=sizes)


def cell_key(x: Column, scale: str) -> tuple[Column, Column]:
    """(the largest profile point <= x or the point x itself, whether x equals it) as Spark expressions, built-in
    arithmetic only; the driver turns the pair into a cell (:func:`cells_of`). Null for an empty value."""
    missing = x.isNull() | F.isnan(x) | (F.abs(x) == F.lit(math.inf))
    if scale in ("date", "timestamp"):
        unit = 86400.0 if scale == "timestamp" else 1.0
        day = F.floor(F.least(F.greatest(x, F.lit(-1e13)), F.lit(1e13)) / F.lit(unit)) * F.lit(unit)
        return (
            F.when(missing, F.lit(None)).otherwise(day.cast("double")),
            F.when(missing, F.lit(None)).otherwise(x == day),
        )
    low, _ = _PROFILE_DECADES[scale]
    a = F.abs(x)
    e = F.floor(F.log10(F.greatest(a, F.lit(1e-300))))
    scale_e = F.pow(F.lit(10.0), e - F.lit(1))
    down = F.least(F.greatest(F.floor(a / scale_e + F.lit(1e-9)), F.lit(10.0)), F.lit(99.0)) * scale_e
    up_m = F.ceil(a / scale_e - F.lit(1e-9))
    up = F.when(up_m >= F.lit(100.0), F.pow(F.lit(10.0), e + F.lit(1))).otherwise(
        F.greatest(up_m, F.lit(10.0)) * scale_e
    )
    smallest = 10.0 ** (low - 1) * 10.0 if scale == "real" else 1.0
    whole = x == F.floor(x)
    small = a <= F.lit(float(UNIT_TOP))
    # positive x: the largest point <= x (the two-digit one, or the whole number below x when x < 1000)
    pos = F.when(a < F.lit(smallest), F.lit(0.0)).otherwise(down)
    pos = F.when(a < F.lit(UNIT_TOP + 1.0), F.greatest(pos, F.floor(a))).otherwise(pos)
    # negative x: minus the smallest point >= |x|
    neg = F.when(a <= F.lit(smallest), F.lit(smallest)).otherwise(up)
    neg = F.when(small, F.least(neg, F.ceil(a))).otherwise(neg)
    lower = F.when(whole & small, x).when(x >= F.lit(0.0), pos).otherwise(-neg)
    exact = F.abs(x - lower) <= F.abs(x) * F.lit(1e-12)
    return (
        F.when(missing, F.lit(None)).otherwise(lower.cast("double")),
        F.when(missing, F.lit(None)).otherwise(exact),
    )


def cells_of(grid: ProfileGrid, lower: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """The cell index of each (lower point, exact) key of :func:`cell_key` (lower NaN: the empty cell)."""
    p = grid.points
    out = np.full(len(lower), grid.null_cell, dtype=np.int64)
    ok = ~np.isnan(lower)
    tol = 1e-9 * np.maximum(np.abs(lower[ok]), 1.0)
    i = np.searchsorted(p, lower[ok] + tol, side="right") - 1
    at_point = (i >= 0) & (np.abs(p[np.maximum(i, 0)] - lower[ok]) <= tol) & exact[ok]
    cell = np.where(i < 0, 0, np.where(at_point, 1 + 2 * i, 2 + 2 * i))
    out[ok] = cell
    return out
