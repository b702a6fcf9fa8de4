"""What the workload mechanism's two selections (:mod:`._aim`, :mod:`._mst`) share: the candidate cliques, the
true tables of candidates, the connected components of the columns under measured cliques, and the measurement
of a clique with its bookkeeping (docs/design.md section 4.7).

A measurement is a clique's full table plus discrete Gaussian noise on every cell (Canonne, Kamath, Steinke 2020):
a table has L2 sensitivity 1 (every record adds 1 to exactly one cell), so noise of std sigma costs
rho = 1/(2 sigma^2) in zCDP, spent in the accountant and drawn through it in one call (:func:`measure`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spark_dpsynth.estimation.domain import Measurement
from spark_dpsynth.mechanisms._cliques import CliqueCounter
from spark_dpsynth.privacy.accounting import Accountant

__all__ = ["Components", "State", "TrueTables", "all_cliques", "measure"]


def all_cliques(d: int, r: int) -> Iterable[tuple[int, ...]]:
    """Every clique (column subset, ascending) of 1 to ``r`` of ``d`` columns, by size then in lexicographic order."""
    for k in range(1, r + 1):
        yield from itertools.combinations(range(d), k)


class Components:
    """The connected components of d columns under edges that join the columns of each clique (union-find
    with path halving)."""

    def __init__(self, d: int, cliques: Iterable[tuple[int, ...]] = ()) -> None:
        self._parent = list(range(d))
        for c in cliques:
            self.join(c)

    def root(self, x: int) -> int:
        """The representative of column x's component (equal for two columns iff they are connected)."""
        parent = self._parent
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def join(self, clique: tuple[int, ...]) -> None:
        """Connect the columns of ``clique``."""
        for x in clique[1:]:
            self._parent[self.root(x)] = self.root(clique[0])

    def count(self) -> int:
        """The number of components."""
        return len({self.root(j) for j in range(len(self._parent))})


@dataclass
class State:
    """What the selection has released so far (all DP): measurements, rounds, the estimate."""

    measurements: list[Measurement] = field(default_factory=list)
    entries: list[dict[str, Any]] = field(default_factory=list)
    rounds: list[dict[str, Any]] = field(default_factory=list)


class TrueTables:
    """True clique tables of candidates (private, never written): cached on the driver up to a cell budget,
    the rest recounted per request in bounded Spark passes."""

    def __init__(self, counter: CliqueCounter, max_cached_cells: int, max_cells_per_pass: int) -> None:
        self._counter = counter
        self._cache: dict[tuple[int, ...], np.ndarray] = {}
        self._cached = 0
        self._budget = max_cached_cells
        self._per_pass = max_cells_per_pass

    def get(self, cliques: Sequence[tuple[int, ...]]) -> dict[tuple[int, ...], np.ndarray]:
        """The true table of every clique of ``cliques`` (int64, one axis per column of the clique), from the cache
        or counted in passes of at most ``max_cells_per_pass`` cells; private: never logged or written."""
        missing = [c for c in dict.fromkeys(cliques) if c not in self._cache]
        out = {c: self._cache[c] for c in cliques if c in self._cache}
        if missing:
            for c, t in zip(missing, self._counter.tables(missing, self._per_pass), strict=True):
                out[c] = t
                if self._cached + t.size <= self._budget:
                    self._cache[c] = t
                    self._cached += t.size
        return out


def measure(
    state: State,
    acct: Accountant,
    table: np.ndarray,
    clique: tuple[int, ...],
    sigma: float,
    names: Sequence[str],
    round_no: int,
    label: str,
) -> Measurement:
    """Measure a clique: spend rho = 1/(2 sigma^2) in ``acct`` under ``label`` (zCDP of the discrete Gaussian
    mechanism at L2 sensitivity 1; Canonne, Kamath, Steinke 2020, Theorem 14) and, through that share, add
    independent discrete Gaussian noise N_Z(0, sigma^2) to every cell of the table (zero cells included); the
    measurement is added to ``state`` with its manifest entry ``{"columns", "std", "rho", "round"}``.

    Args:
        state: the selection's state (measurements and manifest entries so far).
        acct: the release's accountant.
        table: the clique's true table, int64, one axis per column of ``clique``.
        clique: its columns (ascending indices into ``names``).
        sigma: the noise std, in records.
        names: the release's column names.
        round_no: the round, for the manifest.
        label: the budget share's name.

    Returns:
        The :class:`~spark_dpsynth.estimation.domain.Measurement` over the clique's names (float64 noisy
        cells, ``std`` sigma).
    """
    rho = 1.0 / (2.0 * sigma * sigma)
    acct.spend_rho(label, rho, "discrete Gaussian (full clique table, L2 sensitivity 1)", sigma=sigma)
    noisy = acct.gaussian(label, table.astype(np.int64).ravel())
    m = Measurement(tuple(names[c] for c in clique), noisy.reshape(table.shape).astype(np.float64), sigma)
    state.measurements.append(m)
    state.entries.append({"columns": list(m.clique), "std": m.std, "rho": rho, "round": round_no})
    return m
