"""The blocks of the DP profile: a hierarchical histogram over each scale's grid (docs/design.md section 2.8).

* :func:`block_tree`, :func:`block_noise`, :func:`block_units`: the blocks the profile measures, their noise in
  units of a cell's and the squared L2 sensitivity they add (public; the mechanism draws their counts).
* :class:`RunSums` reads the records of a run of cells from the largest measured blocks it holds and single
  cells; :func:`standing_blocks` finds the blocks whose records stand out, at :func:`block_level`.

References: Hay, Rastogi, Miklau, Suciu, "Boosting the accuracy of differentially private histograms through
consistency", VLDB 2010; Qardaji, Yang, Li, "Understanding hierarchical methods for differentially private
histograms", VLDB 2013.

Privacy: the tree is public; everything else reads only noisy counts (post-processing).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from spark_dpsynth.errors import InvalidParameterError
from spark_dpsynth.profile.grid import ProfileGrid, profile_grid
from spark_dpsynth.profile.levels import SIGNAL_FALSE_POSITIVE, sum_threshold

__all__ = [
    "BLOCK_LEVELS",
    "BLOCK_NOISE",
    "FINE_BLOCK_NOISE",
    "RunSums",
    "block_level",
    "block_noise",
    "block_tree",
    "block_units",
    "standing_blocks",
]

_BLOCK_DEPTH = 3
"""A block of magnitude whose noisy sum does not stand out is halved, and its halves again, down to this many
times (to an eighth of a decade): a tail spread thinly over a decade is found in the part of it where it lies
(person weights or poverty ratios spread over hundreds of values can stand out in no decade; docs/design.md
section 2.8)."""


def block_level(grid: ProfileGrid) -> float:
    """The Gaussian quantile a block's noisy sum must pass, in units of its noise std (:func:`sum_threshold`):
    Phi^-1(1 - 0.001 / B), B the number of blocks :func:`standing_blocks` may test on ``grid`` (each block of
    magnitude and its halves down to :data:`_BLOCK_DEPTH`), so that the chance that any block without records
    stands out is at most 0.1% (a Bonferroni bound over the blocks; the cells have their own). The fine blocks
    are not searched, only read inside a block that stood out (:func:`signal_weights`). Public."""
    from scipy.stats import norm

    cells = np.flatnonzero(grid.possible[: grid.null_cell])
    blocks = len(np.unique(grid.block_keys(cells))) * (2 ** (_BLOCK_DEPTH + 1) - 1)
    return float(norm.isf(SIGNAL_FALSE_POSITIVE / max(blocks, 1)))


BLOCK_LEVELS = _BLOCK_DEPTH + 1
"""The levels of the block tree that :func:`standing_blocks` searches (the blocks of magnitude and their halves
down to :data:`_BLOCK_DEPTH` halvings): a value lies in at most this many of them."""

BLOCK_NOISE = 3.0
"""The std of a searched block's measured count in units of a cell's (kappa): the profile measures every block of
the first :data:`BLOCK_LEVELS` levels of :func:`block_tree` with kappa times the cells' noise, so that they cost
BLOCK_LEVELS / kappa^2 of what the cells cost (docs/design.md section 2.8)."""

_FINE_DEPTH = 8
"""A block below :data:`_BLOCK_DEPTH` halvings that still holds at least :data:`_FINE_MIN_CELLS` cells is halved
again, down to this many halvings (a 256th of a decade: 35 whole numbers of 1,000..9,999): the fine blocks, which
place the records of a block that stood out (years 1950..2018 are one eighth of the decade 1,000..9,999, 1,125
whole numbers, where no single year stands out; docs/design.md section 2.8)."""

_FINE_MIN_CELLS = 64
"""The fewest cells a block must hold to be halved into fine blocks (smaller runs are read from their cells)."""

FINE_BLOCK_NOISE = 6.0
"""The std of a fine block's measured count in units of a cell's: a value lies in at most
:data:`_FINE_DEPTH` - :data:`_BLOCK_DEPTH` fine blocks, which cost at most 5 / 36 of what the cells cost."""


@functools.lru_cache(maxsize=8)
def _block_tree_levels(scale: str) -> tuple[np.ndarray, np.ndarray]:
    """(:func:`block_tree`'s blocks, int64 (B, 2); each block's halvings from its block of magnitude, int64 (B,))."""
    grid = profile_grid(scale)
    cells = np.flatnonzero(grid.possible[: grid.null_cell])
    keys = grid.block_keys(cells)
    bounds = np.flatnonzero(np.diff(keys)) + 1
    out: list[tuple[int, int]] = []
    depths: list[int] = []
    for a0, b0 in zip(np.r_[0, bounds], np.r_[bounds, len(cells)], strict=True):
        todo = [(int(a0), int(b0), 0)]
        while todo:
            a, b, depth = todo.pop(0)
            out.append((a, b))
            depths.append(depth)
            halved = depth < _BLOCK_DEPTH or (depth < _FINE_DEPTH and b - a >= _FINE_MIN_CELLS)
            if halved and b - a >= 2:
                h = a + (b - a) // 2
                todo += [(a, h, depth + 1), (h, b, depth + 1)]
    return np.array(out, dtype=np.int64), np.array(depths, dtype=np.int64)


def block_tree(scale: str) -> np.ndarray:
    """The blocks of a scale's profile grid (public, independent of any data), int64 (B, 2): each row the
    [start, stop) positions of a block in the grid's possible cells below the empty cell (value order): every
    block of magnitude (:meth:`ProfileGrid.block_keys`) and its halves by cells, and theirs, down to
    :data:`_BLOCK_DEPTH` halvings, then the fine blocks: the halves of a block of at least
    :data:`_FINE_MIN_CELLS` cells, down to :data:`_FINE_DEPTH` halvings; blocks of magnitude in value order,
    each followed by its halves level by level. A value lies in at most :data:`BLOCK_LEVELS` blocks of the first
    levels and :data:`_FINE_DEPTH` - :data:`_BLOCK_DEPTH` fine blocks."""
    return _block_tree_levels(scale)[0]


def block_noise(scale: str) -> np.ndarray:
    """float64 (B,): the noise std of each block of :func:`block_tree` in units of a cell's: :data:`BLOCK_NOISE`
    for the blocks of the first :data:`BLOCK_LEVELS` levels, :data:`FINE_BLOCK_NOISE` for the fine blocks."""
    depths = _block_tree_levels(scale)[1]
    return np.where(depths <= _BLOCK_DEPTH, BLOCK_NOISE, FINE_BLOCK_NOISE)


@functools.lru_cache(maxsize=8)
def block_units(scale: str) -> float:
    """The squared L2 sensitivity of the block counts of one column on ``scale``, in units of the cells' noise:
    the largest, over the grid's values, of the sum of 1 / kappa^2 over the blocks that hold it (kappa of each
    block: :func:`block_noise`); at most BLOCK_LEVELS / 9 + 5 / 36 (public)."""
    grid = profile_grid(scale)
    cells = np.flatnonzero(grid.possible[: grid.null_cell])
    tree = block_tree(scale)
    weight = np.zeros(len(cells) + 1, dtype=np.float64)
    np.add.at(weight, tree[:, 0], block_noise(scale) ** -2.0)
    np.add.at(weight, tree[:, 1], -(block_noise(scale) ** -2.0))
    return float(np.cumsum(weight)[:-1].max())


@functools.lru_cache(maxsize=8)
def _tree_index(
    scale: str,
) -> tuple[dict[tuple[int, int], int], dict[int, list[tuple[int, int]]], np.ndarray]:
    """The blocks of :func:`block_tree` by (start, stop), by start (largest first), and their sorted starts."""
    index = {(int(a), int(b)): i for i, (a, b) in enumerate(block_tree(scale))}
    by_start: dict[int, list[tuple[int, int]]] = {}
    for (a, b), i in index.items():
        by_start.setdefault(a, []).append((b, i))
    for runs in by_start.values():
        runs.sort(reverse=True)  # the largest block first
    return index, by_start, np.array(sorted(by_start), dtype=np.int64)


class RunSums:
    """How many of a run of cells' records are left, and the level that must pass to stand out of its noise. With
    the blocks of :func:`block_tree` measured, a run of consecutive cells is cut into the largest measured blocks
    it holds and single cells (the canonical cover of a range in a hierarchical histogram): each block's own noisy
    count (noise kappa sigma, plus that of the cells already taken out of it) and each cell's; else (and for
    cells that are not consecutive) the sum of the cells' noisy counts (:func:`sum_threshold`). Post-processing
    of the noisy profile."""

    def __init__(
        self,
        grid: ProfileGrid,
        cells: np.ndarray,
        present: np.ndarray,
        sigma: float,
        level: float,
        blocks: np.ndarray | None = None,
        block_sigma: np.ndarray | float = 0.0,
    ) -> None:
        self.cells, self.present, self.sigma, self.level = cells, present, sigma, level
        self.blocks = blocks
        self.index: dict[tuple[int, int], int] = {}
        if blocks is not None:
            self.index, self.by_start, self.starts = _tree_index(grid.scale)
            if len(blocks) != len(self.index):
                raise InvalidParameterError(
                    f"{len(blocks)} block counts for the {len(self.index)} blocks of the grid"
                )
            if np.ndim(block_sigma) and np.shape(block_sigma) != (len(blocks),):
                raise InvalidParameterError(
                    f"{np.size(block_sigma)} block noise stds for the {len(blocks)} blocks of the grid"
                )
        # one std per block (a single value: the same for every block)
        self.block_sigma = np.broadcast_to(np.asarray(block_sigma, dtype=np.float64), (len(self.index),))

    def _node(self, members: np.ndarray) -> int | None:
        if not self.index or len(members) == 0:
            return None
        a = int(np.searchsorted(self.cells, members[0]))
        return self.index.get((a, a + len(members)))

    def halves_measured(self, members: np.ndarray) -> bool:
        """True when both halves of ``members`` (by cells) are measured blocks."""
        half = len(members) // 2
        return half >= 1 and self._node(members[:half]) is not None and self._node(members[half:]) is not None

    def left(self, members: np.ndarray, current: np.ndarray, gaussian: float) -> tuple[float, float]:
        """(the noisy count of the records of ``members`` still in ``current``, the level it must pass at the
        Gaussian quantile ``gaussian``); ``current`` is the noisy cells less what was taken out of them."""
        a = int(np.searchsorted(self.cells, members[0])) if self.index and len(members) else 0
        b = a + len(members)
        consecutive = bool(self.index) and len(members) > 0 and b <= len(self.cells)
        if consecutive and self.cells[b - 1] == members[-1]:
            assert self.blocks is not None
            covered = self._cover(a, b, current)
            if covered is not None:
                return covered[0], covered[1] * gaussian
        return float(current[members].sum()), float(
            sum_threshold(len(members), self.sigma, self.level, gaussian)
        )

    def _cover(self, a: int, b: int, current: np.ndarray) -> tuple[float, float] | None:
        """(value, noise std) of the cells at positions [a, b) read as the largest measured blocks it holds and
        single cells; None when it holds no measured block."""
        assert self.blocks is not None
        value, variance, used, p = 0.0, 0.0, False, a
        while p < b:
            node = next(((stop, i) for stop, i in self.by_start.get(p, ()) if stop <= b), None)
            if node is not None:
                stop, i = node
                run = self.cells[p:stop]
                taken = self.present[run] - current[run]
                value += float(self.blocks[i]) - float(taken.sum())
                variance += float(self.block_sigma[i]) ** 2 + self.sigma**2 * np.count_nonzero(taken)
                used = True
            else:
                k = int(np.searchsorted(self.starts, p, side="right"))
                stop = min(int(self.starts[k]) if k < len(self.starts) else b, b)
                run = self.cells[p:stop]
                value += float(current[run].sum())
                variance += self.sigma**2 * len(run)
            p = stop
        return (value, math.sqrt(variance)) if used else None


def standing_blocks(
    grid: ProfileGrid, rest: np.ndarray, cells: np.ndarray, sums: RunSums, gaussian: float
) -> list[np.ndarray]:
    """The blocks whose records stand out of their noise (``sums``, at ``gaussian``, the blocks' level
    :func:`block_level`), as arrays of cells in value order, the blocks in value order: each block of magnitude
    (each decade of |x| on each side of 0, and 0; 4,096 days on the date scales) that stands out, and of one that
    does not, its halves (by cells) that stand out, and of a half that does not, its halves, down to
    :data:`_BLOCK_DEPTH` halvings (the blocks of :func:`block_tree`). The blocks do not overlap;
    post-processing."""
    keys = grid.block_keys(cells)
    found: list[np.ndarray] = []
    for k in np.unique(keys):
        todo = [(cells[keys == k], 0)]
        while todo:
            members, depth = todo.pop()
            value, needed = sums.left(members, rest, gaussian)
            if value > needed:
                found.append(members)
            elif depth < _BLOCK_DEPTH and len(members) >= 2:
                half = len(members) // 2
                todo += [(members[:half], depth + 1), (members[half:], depth + 1)]
    found.sort(key=lambda m: int(m[0]))
    return found
