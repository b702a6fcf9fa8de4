"""Junction trees: triangulation by greedy elimination, maximal cliques, and a tree over them.

The graph of a set of cliques has one node per column of the domain and an edge between two columns that share a
clique. A junction tree of it (Koller and Friedman, "Probabilistic Graphical Models", 2009, sections 9.4 and
10.4) is built in three steps:

1. *Triangulation by variable elimination* (Koller and Friedman section 9.4.3.2): repeatedly eliminate the column
   of smallest cost, connect its remaining neighbours, and record the clique {column} + neighbours. Two greedy
   costs are tried, *min-size* (the number of cells of the clique it creates, "min-weight") and *min-fill* (the
   number of edges it adds, ties broken by size); the order whose cliques hold fewer cells in total is kept.
2. *Maximal cliques*: the recorded cliques that are not contained in another (Koller and Friedman theorem 9.6:
   they are the maximal cliques of the triangulated graph).
3. *The tree*: a maximum-weight spanning tree over the maximal cliques, weighted by the size of their
   intersections (Koller and Friedman section 10.4.1), which has the running intersection property. Columns
   that share no clique make separate components, joined by edges with an empty separator.

The model's size is :func:`junction_tree_size`: the number of float cells its maximal cliques hold, the memory
and time of one pass of belief propagation (AIM's model-size cap: McKenna, Mullins, Sheldon and Miklau, "AIM: An
Adaptive and Iterative Mechanism for Differentially Private Synthetic Data", VLDB 2022, section 4).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from dataclasses import dataclass

from spark_dpsynth.errors import ModelSizeError
from spark_dpsynth.estimation.domain import Clique, Domain

__all__ = ["JunctionTree", "elimination_order", "junction_tree_size", "maximal_cliques"]

_RULES = ("min_size", "min_fill")


def _adjacency(domain: Domain, cliques: Iterable[Iterable[str]]) -> list[set[int]]:
    adj: list[set[int]] = [set() for _ in domain.names]
    for clique in cliques:
        idx = [domain.index(n) for n in clique]
        for i in idx:
            adj[i].update(idx)
    for i, nbrs in enumerate(adj):
        nbrs.discard(i)
    return adj


def _eliminate(domain: Domain, adj: list[set[int]], rule: str) -> tuple[list[int], list[frozenset[int]]]:
    """Greedy elimination: the order and the clique each step creates (node indices)."""
    adj = [set(a) for a in adj]
    logsize = [math.log(s) for s in domain.sizes]
    alive = set(range(len(adj)))

    def score(v: int) -> tuple[float, float, int]:
        size = logsize[v] + sum(logsize[u] for u in adj[v])
        if rule == "min_size":
            return (round(size, 9), 0.0, v)
        nbrs = adj[v]
        degree = len(nbrs)
        present = sum(len(adj[u] & nbrs) for u in nbrs) // 2  # edges already among the neighbours
        return (float(degree * (degree - 1) // 2 - present), round(size, 9), v)

    scores = {v: score(v) for v in alive}
    order: list[int] = []
    created: list[frozenset[int]] = []
    while alive:
        v = min(alive, key=scores.__getitem__)
        nbrs = adj[v]
        created.append(frozenset(nbrs | {v}))
        order.append(v)
        alive.discard(v)
        for u in nbrs:
            adj[u].discard(v)
            adj[u].update(w for w in nbrs if w != u)
        del scores[v]
        touched = set(nbrs)
        if rule == "min_fill":  # a neighbour's neighbours may lose fill edges
            for u in nbrs:
                touched.update(adj[u])
        for u in touched:
            scores[u] = score(u)
        adj[v] = set()
    return order, created


def _maximal(created: list[frozenset[int]]) -> list[frozenset[int]]:
    kept: list[frozenset[int]] = []
    for c in sorted(set(created), key=len, reverse=True):
        if not any(c <= k for k in kept):
            kept.append(c)
    return kept


def _cells(domain: Domain, clique: frozenset[int]) -> int:
    return math.prod(domain.sizes[i] for i in clique)


def _best_triangulation(
    domain: Domain, cliques: Iterable[Iterable[str]]
) -> tuple[list[int], list[frozenset[int]]]:
    adj = _adjacency(domain, cliques)
    edges = frozenset((i, j) for i, nbrs in enumerate(adj) for j in nbrs if i < j)
    order, maximal = _triangulate(domain, edges)
    return list(order), list(maximal)


@functools.lru_cache(maxsize=4096)
def _triangulate(
    domain: Domain, edges: frozenset[tuple[int, int]]
) -> tuple[tuple[int, ...], tuple[frozenset[int], ...]]:
    """The better of the two greedy triangulations of a graph (cached: a selection loop asks for the same graph
    again and again, e.g. for every candidate already covered by the model's edges)."""
    adj: list[set[int]] = [set() for _ in domain.names]
    for i, j in edges:
        adj[i].add(j)
        adj[j].add(i)
    best: tuple[int, list[int], list[frozenset[int]]] | None = None
    for rule in _RULES:
        order, created = _eliminate(domain, adj, rule)
        maximal = _maximal(created)
        total = sum(_cells(domain, c) for c in maximal)
        if best is None or total < best[0]:
            best = (total, order, maximal)
    assert best is not None
    return tuple(best[1]), tuple(best[2])


def elimination_order(domain: Domain, cliques: Iterable[Iterable[str]]) -> list[str]:
    """The greedy elimination order of the graph of ``cliques`` (module docstring, step 1): column names."""
    order, _ = _best_triangulation(domain, [tuple(c) for c in cliques])
    return [domain.names[i] for i in order]


def maximal_cliques(domain: Domain, cliques: Iterable[Iterable[str]]) -> list[Clique]:
    """The maximal cliques of the triangulated graph of ``cliques`` (every column is in one), in domain order,
    largest first."""
    _, maximal = _best_triangulation(domain, [tuple(c) for c in cliques])
    return [tuple(domain.names[i] for i in sorted(c)) for c in maximal]


def junction_tree_size(domain: Domain, cliques: Iterable[Iterable[str]]) -> int:
    """The number of float cells the junction tree of ``cliques`` needs: the sum over the maximal cliques of the
    triangulated graph of the product of their columns' sizes (an exact integer).

    Raises:
        InvalidParameterError: a clique names a column not in ``domain``.
    """
    _, maximal = _best_triangulation(domain, [tuple(c) for c in cliques])
    return sum(_cells(domain, c) for c in maximal)


@dataclass(frozen=True)
class JunctionTree:
    """A junction tree over the maximal cliques of a triangulated graph (module docstring).

    Built by :meth:`build`. Node 0 is the root; ``parent[i]`` is the parent of node i (-1 for the root) and
    ``preorder`` lists the nodes with every parent before its children.
    """

    domain: Domain
    cliques: tuple[Clique, ...]
    """The maximal cliques, each in domain order."""
    parent: tuple[int, ...]
    """Parent node of each node; -1 for the root (node 0)."""
    preorder: tuple[int, ...]
    """Every node, parents before children (a breadth-first order from the root)."""

    @classmethod
    def build(
        cls, domain: Domain, cliques: Iterable[Iterable[str]], *, max_cells: int | None = None
    ) -> JunctionTree:
        """The junction tree of the graph of ``cliques`` over ``domain`` (every column of the domain is in it).

        Args:
            domain: the columns.
            cliques: cliques of column names (any order within a clique).
            max_cells: the largest :func:`junction_tree_size` allowed; None: no limit.

        Raises:
            ModelSizeError: the tree needs more than ``max_cells`` cells.
            InvalidParameterError: a clique names a column not in ``domain``.
        """
        cliques = [tuple(c) for c in cliques]
        _, maximal = _best_triangulation(domain, cliques)
        size = sum(_cells(domain, c) for c in maximal)
        if max_cells is not None and size > max_cells:
            raise ModelSizeError(
                f"the graphical model of these {len(cliques)} cliques needs {size} cells, more than the limit "
                f"of {max_cells}: measure fewer or smaller cliques, or raise the limit"
            )
        # root: the largest clique; a deterministic order for everything else
        nodes = sorted(maximal, key=lambda c: (-_cells(domain, c), sorted(c)))
        m = len(nodes)
        cells = [_cells(domain, c) for c in nodes]
        # among maximum-weight trees, prefer edges between small cliques: every neighbour of a clique costs one
        # pass over it per propagation, so large cliques should be leaves
        edges = sorted(
            ((len(nodes[i] & nodes[j]), i, j) for i in range(m) for j in range(i + 1, m)),
            key=lambda e: (-e[0], cells[e[1]] + cells[e[2]], e[1], e[2]),
        )
        root_of = list(range(m))

        def find(i: int) -> int:
            while root_of[i] != i:
                root_of[i] = root_of[root_of[i]]
                i = root_of[i]
            return i

        nbrs: list[list[int]] = [[] for _ in range(m)]
        for _, i, j in edges:  # Kruskal: maximum-weight spanning tree
            ri, rj = find(i), find(j)
            if ri != rj:
                root_of[ri] = rj
                nbrs[i].append(j)
                nbrs[j].append(i)
        parent = [-1] * m
        order = [0]
        seen = {0}
        for i in order:
            for j in sorted(nbrs[i]):
                if j not in seen:
                    seen.add(j)
                    parent[j] = i
                    order.append(j)
        return cls(
            domain=domain,
            cliques=tuple(tuple(domain.names[i] for i in sorted(c)) for c in nodes),
            parent=tuple(parent),
            preorder=tuple(order),
        )

    def separator(self, node: int) -> Clique:
        """The columns node ``node`` shares with its parent, in domain order (empty for the root)."""
        p = self.parent[node]
        if p < 0:
            return ()
        shared = set(self.cliques[p])
        return tuple(n for n in self.cliques[node] if n in shared)

    def size(self) -> int:
        """The number of float cells of the maximal cliques (:func:`junction_tree_size`)."""
        return sum(self.domain.cells(c) for c in self.cliques)

    def containing(self, clique: Iterable[str]) -> int | None:
        """The smallest node whose clique contains every column of ``clique``, or None."""
        wanted = set(clique)
        best: int | None = None
        for i, c in enumerate(self.cliques):
            if wanted <= set(c) and (
                best is None or self.domain.cells(c) < self.domain.cells(self.cliques[best])
            ):
                best = i
        return best
