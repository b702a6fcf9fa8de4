"""A graphical model over a domain: log-potentials on cliques, belief propagation, projection, sampling.

The model is the exponential family of McKenna, Sheldon and Miklau, "Graphical-model based estimation and
inference for differential privacy" (ICML 2019), section 4: over the cells x of the full domain,

    p(x) = (1 / Z) exp( sum_c theta_c(x_c) ),

one log-potential table theta_c per model clique c, scaled to ``total`` records. Inference runs on a junction
tree of the cliques (:mod:`.junction_tree`): each theta_c is added to a maximal clique that contains it, and
sum-product belief propagation in log space (Koller and Friedman, "Probabilistic Graphical Models", 2009,
section 10.2, algorithm 10.2 "upward-downward") calibrates the tree:

    collect (leaves to root):   delta_{i->p}(s) = logsumexp_{C_i \\ S} ( psi_i + sum_{k child of i} delta_{k->i} )
    distribute (root to leaves): delta_{p->i}(s) = logsumexp_{C_p \\ S} ( beta_p - delta_{i->p} )
    belief:                      beta_i = psi_i + sum of every incoming message,

then every belief is shifted so that it sums to ``total`` in probability space. Beliefs of neighbouring cliques
then agree on their separators, and beta_i is the log of the model's expected counts over C_i.

A marginal over a clique Q contained in a maximal clique is read off its belief. Otherwise the smallest subtree of
the junction tree that covers Q is taken; on it the joint is prod beta_i / prod beta_S (the beliefs over the
subtree's separators; Koller and Friedman section 10.3.1, the clique-tree measure), and variable elimination
with a greedy min-size order (Koller and Friedman section 9.3) sums out the columns not in Q.

Sampling is ancestral along the tree (the root clique's joint, then each clique's new columns given its
separator): :meth:`GraphicalModel.sample` draws records independently; with ``rounded=True`` the draw is
systematic (one uniform per group, Kitagawa 1996), so that every group of records that share a separator value
splits over the new columns' cells with counts within one of their expected counts. This is the idea of
private-pgm's ``synthetic_data``, which rounds expected counts, done with systematic sampling so that it is
vectorized and works per partition (docs/design.md section 4.8).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from spark_dpsynth.errors import InvalidParameterError
from spark_dpsynth.estimation._factor import broadcast_shape, logsumexp, other_axes, union
from spark_dpsynth.estimation.domain import Clique, Domain
from spark_dpsynth.estimation.junction_tree import JunctionTree

if TYPE_CHECKING:
    from spark_dpsynth.estimation.mirror_descent import FitReport

__all__ = ["STRUCTURAL_ZERO", "GraphicalModel", "Structure", "evidence_potential"]

STRUCTURAL_ZERO = -1e9
"""The log-potential of a cell the model must hold no mass in (a structural zero, evidence against a cell):
finite, so that log-space sums and Hugin's divisions stay defined, and far enough below any fitted
log-potential (tens) that its exponential is exactly 0.0 in float64 (docs/design.md section 4.8, "Conditions
and declared rules")."""

_EINSUM_LETTERS = 52
"""The most distinct axes ``numpy.einsum`` accepts in one contraction."""
_TINY = 1e-200
"""Separator counts below this (records) are taken as 0 by :meth:`GraphicalModel.project`: their inverse would
overflow (a subnormal count) and turn the product into NaN; the counts they divide are no larger."""
_MEMO_CELLS = 1 << 23
"""Float cells of elimination messages :meth:`GraphicalModel.project_many` keeps for one batch (64 MiB)."""
_MAX_PATHS = 1 << 14
"""Contraction orders :func:`_contract` keeps (by labels and shapes) before it starts over."""
_PATHS: dict[tuple[Any, ...], list[Any]] = {}
_DIRECT_CELLS = 1 << 13
"""Contractions whose joint index space (the product of every axis' size) has at most this many cells run as
one direct ``numpy.einsum`` loop: planning a pairwise order (``optimize``) costs more than it saves there."""


class Structure:
    """The junction tree of a set of model cliques and where each clique's potential goes (reused by the
    estimator across iterations)."""

    def __init__(self, domain: Domain, cliques: Iterable[Clique], *, max_cells: int | None = None) -> None:
        self.domain = domain
        self.model_cliques: tuple[Clique, ...] = tuple(dict.fromkeys(domain.canonical(c) for c in cliques))
        self.tree = JunctionTree.build(domain, self.model_cliques, max_cells=max_cells)
        tree = self.tree
        self.assign: dict[Clique, int] = {}
        self.expand: dict[Clique, tuple[int, ...]] = {}
        self.reduce: dict[Clique, tuple[int, ...]] = {}
        for c in self.model_cliques:
            node = tree.containing(c)
            assert node is not None  # every model clique is in the triangulated graph
            self.assign[c] = node
            self.expand[c] = broadcast_shape(domain, c, tree.cliques[node])
            self.reduce[c] = other_axes(c, tree.cliques[node])
        self.shapes = [domain.shape(c) for c in tree.cliques]
        self.up_axes: list[tuple[int, ...]] = []
        self.down_axes: list[tuple[int, ...]] = []
        self.in_parent: list[tuple[int, ...]] = []
        self.in_child: list[tuple[int, ...]] = []
        for i, clique in enumerate(tree.cliques):
            p = tree.parent[i]
            sep = tree.separator(i)
            parent = tree.cliques[p] if p >= 0 else ()
            self.up_axes.append(other_axes(sep, clique))
            self.down_axes.append(other_axes(sep, parent))
            self.in_parent.append(broadcast_shape(domain, sep, parent))
            self.in_child.append(broadcast_shape(domain, sep, clique))

    def clique_potentials(self, theta: Mapping[Clique, np.ndarray]) -> list[np.ndarray]:
        """psi_i: the sum of the potentials assigned to each maximal clique, on its axes."""
        psi = [np.zeros(s) for s in self.shapes]
        for c, values in theta.items():
            node = self.assign[c]
            psi[node] += values.reshape(self.expand[c])
        return psi

    def calibrate(self, psi: list[np.ndarray], total: float) -> list[np.ndarray]:
        """Log beliefs (log expected counts) of the maximal cliques, summing to ``total`` (module docstring).

        The downward messages of a clique come from one exponential of its belief, shifted by its maximum m
        (Hugin's division form, Koller and Friedman section 10.3): delta_{p->i} = log sum_{C_p \\ S} exp(beta_p - m)
        + m - delta_{i->p}; a separator value whose slice underflows takes the log-sum-exp of
        beta_p - delta_{i->p} itself.
        """
        tree = self.tree
        beliefs = [p.copy() for p in psi]
        up: dict[int, np.ndarray] = {}
        for i in reversed(tree.preorder[1:]):
            msg = logsumexp(beliefs[i], self.up_axes[i], keepdims=True).reshape(self.in_parent[i])
            up[i] = msg
            beliefs[tree.parent[i]] += msg
        scaled: dict[int, tuple[np.ndarray, float]] = {}
        for i in tree.preorder[1:]:
            p = tree.parent[i]
            if p not in scaled:
                top = float(beliefs[p].max())
                scaled[p] = (np.exp(beliefs[p] - top), top)
            e, top = scaled[p]
            with np.errstate(divide="ignore"):
                marginal = np.log(np.sum(e, axis=self.down_axes[i], keepdims=True))
            if np.isneginf(marginal).any():  # a slice underflowed: the exact log-sum-exp
                msg = logsumexp(beliefs[p] - up[i], self.down_axes[i], keepdims=True)
            else:
                msg = marginal + top - up[i].reshape(marginal.shape)
            beliefs[i] += msg.reshape(self.in_child[i])
        # calibrated: every belief has the same sum Z, read off the root's
        root = tree.preorder[0]
        if root in scaled:
            e, top = scaled[root]
            log_z = float(np.log(e.sum())) + top
        else:
            log_z = float(logsumexp(beliefs[root], tuple(range(beliefs[root].ndim))))
        shift = np.log(total) - log_z
        for b in beliefs:
            b += shift
        return beliefs


class GraphicalModel:
    """A graphical model fitted to measured marginals (module docstring); built by
    :func:`spark_dpsynth.estimation.estimate`, or directly from potentials.

    Attributes:
        domain (Domain): the columns.
        cliques (tuple[Clique, ...]): the maximal cliques of its junction tree, in domain order.
        total (float): the number of records it describes (its marginals sum to it).
        potentials (dict[Clique, np.ndarray]): the log-potential theta_c of every model clique (domain order).
        fit_report (FitReport | None): how :func:`~spark_dpsynth.estimation.estimate` fitted it (None when built
            from potentials).
    """

    fit_report: FitReport | None

    def __init__(
        self,
        domain: Domain,
        potentials: Mapping[Iterable[str], np.ndarray] | None = None,
        total: float = 1.0,
        *,
        cliques: Iterable[Iterable[str]] = (),
        max_cells: int | None = None,
    ) -> None:
        """Build and calibrate the model.

        Args:
            domain: the columns.
            potentials: clique -> log-potential table (shape ``domain.shape(clique)``, axes in the clique's
                order); None: none (the uniform distribution).
            total: the number of records, > 0.
            cliques: more model cliques, with zero potentials.
            max_cells: the largest junction tree allowed (float cells); None: no limit.

        Raises:
            InvalidParameterError: a potential's shape does not match its clique, or ``total`` <= 0.
            ModelSizeError: the junction tree needs more than ``max_cells`` cells.
        """
        theta: dict[Clique, np.ndarray] = {}
        for clique, values in (potentials or {}).items():
            names = tuple(clique)
            arr = np.asarray(values, dtype=np.float64)
            if arr.shape != domain.shape(names):
                raise InvalidParameterError(
                    f"the potential over {list(names)} has shape {arr.shape}, expected {domain.shape(names)}"
                )
            canonical = domain.canonical(names)
            arr = arr.transpose([names.index(n) for n in canonical])
            theta[canonical] = theta[canonical] + arr if canonical in theta else np.ascontiguousarray(arr)
        for c in cliques:
            theta.setdefault(domain.canonical(c), np.zeros(domain.shape(domain.canonical(c))))
        if not (np.isfinite(total) and total > 0):
            raise InvalidParameterError(f"total must be > 0 and finite, got {total!r}")
        structure = Structure(domain, theta, max_cells=max_cells)
        self._init(
            structure, theta, float(total), structure.calibrate(structure.clique_potentials(theta), total)
        )

    @classmethod
    def _from_parts(
        cls, structure: Structure, theta: dict[Clique, np.ndarray], total: float, beliefs: list[np.ndarray]
    ) -> GraphicalModel:
        model = cls.__new__(cls)
        model._init(structure, theta, total, beliefs)
        return model

    def _init(
        self, structure: Structure, theta: dict[Clique, np.ndarray], total: float, beliefs: list[np.ndarray]
    ) -> None:
        self.domain = structure.domain
        self.total = float(total)
        self.potentials = theta
        self._structure = structure
        self._beliefs = beliefs
        self._probs: list[np.ndarray] | None = None
        self._messages: dict[tuple[int, int, frozenset[str]], tuple[Clique, np.ndarray]] | None = None
        self._memo_cells = 0
        self.fit_report = None
        self.tree = structure.tree
        self.cliques = structure.tree.cliques
        self._clique_sets = [frozenset(c) for c in self.cliques]

    def size(self) -> int:
        """The number of float cells of its junction tree."""
        return self.tree.size()

    def belief(self, node: int) -> np.ndarray:
        """The expected counts over maximal clique ``cliques[node]`` (float64, its shape; sums to total)."""
        return self._probabilities()[node].copy()

    # ------------------------------------------------------------------------------------ projection
    def project(self, clique: Iterable[str]) -> np.ndarray:
        """The model's expected counts over ``clique``.

        Args:
            clique: column names (any order; the result's axes follow it).

        Returns:
            float64 array of shape ``domain.shape(clique)``, >= 0, summing to :attr:`total`.

        Raises:
            InvalidParameterError: a name is unknown or repeated.
        """
        names = tuple(clique)
        canonical = self.domain.canonical(names)
        node = self.tree.containing(canonical)
        if node is not None:
            counts = self._probabilities()[node].sum(axis=other_axes(canonical, self.cliques[node]))
        else:
            counts = self._eliminate(canonical)
        counts = np.asarray(counts, dtype=np.float64).reshape(self.domain.shape(canonical))
        s = counts.sum()
        if s > 0:
            counts *= self.total / s
        if canonical != names:
            counts = counts.transpose([canonical.index(n) for n in names])
        return counts

    def project_many(self, cliques: Iterable[Iterable[str]]) -> list[np.ndarray]:
        """:meth:`project` of each clique, sharing the work between them: the elimination messages (module
        docstring) are kept for the batch, up to ``_MEMO_CELLS`` float cells, and reused by the later cliques.

        A message from node i towards its neighbour u that carries the query columns Q_i met on i's side is
        the model's conditional table p(Q_i | S_iu) (S_iu their separator), whichever covering subtree it was
        computed on (the clique-tree measure of any connected subtree is the model's marginal over its
        columns): it depends only on (i, u, Q_i), the key of the cache, so the candidates that share a column
        share its messages (docs/design.md section 4.7, "Scoring the candidates in one batch").

        Args:
            cliques: column-name tuples, as :meth:`project` takes.

        Returns:
            One array per clique, as :meth:`project` returns.

        Raises:
            InvalidParameterError: a name is unknown or repeated.
        """
        self._messages, self._memo_cells = {}, 0
        try:
            return [self.project(c) for c in cliques]
        finally:
            # emptied in place, not only dropped: its tables are freed now whatever else still refers to it
            self._messages.clear()
            self._messages, self._memo_cells = None, 0

    def _covering_subtree(self, query: Clique) -> list[int]:
        """The nodes of a small connected subtree whose cliques cover ``query``: greedy cover by the cliques with
        the most uncovered columns, joined by their tree paths."""
        tree = self.tree
        left = set(query)
        terminals: list[int] = []
        sets = self._clique_sets
        while left:
            best = max(range(len(sets)), key=lambda i: (len(left & sets[i]), -i))
            terminals.append(best)
            left -= sets[best]

        def path_to_root(i: int) -> list[int]:
            out = [i]
            while tree.parent[out[-1]] >= 0:
                out.append(tree.parent[out[-1]])
            return out

        anchor = path_to_root(terminals[0])
        on_anchor = set(anchor)
        nodes: set[int] = set()
        for t in terminals:
            path = path_to_root(t)
            common = next(n for n in path if n in on_anchor)
            nodes.update(path[: path.index(common) + 1])
            nodes.update(anchor[: anchor.index(common) + 1])
        return sorted(nodes)

    def _probabilities(self) -> list[np.ndarray]:
        """The expected counts of every maximal clique (cached)."""
        if self._probs is None:
            self._probs = [np.exp(b) for b in self._beliefs]
        return self._probs

    def _eliminate(self, query: Clique) -> np.ndarray:
        """Counts over ``query`` (domain order) by variable elimination on the covering subtree.

        For any node r of the subtree, its joint is beta_r prod_{i != r} beta_i / beta_{S_i}, S_i the separator of
        i with its neighbour towards r (module docstring). Elimination runs towards r: each node sums its belief
        down to its separators and query columns, multiplies it with its neighbours' messages and sums out every
        column that is neither in its separator towards r nor in the query. A message holds a separator plus the
        query columns met below it, so r is chosen to minimize the work, sum over nodes of the cells of the
        clique times the query columns carried into it.
        """
        tree = self.tree
        nodes = self._covering_subtree(query)
        inside = set(nodes)
        adjacent: dict[int, list[int]] = {i: [] for i in nodes}
        for i in nodes:
            p = tree.parent[i]
            if p in inside:
                adjacent[i].append(p)
                adjacent[p].append(i)
        wanted = set(query)
        sets = {i: set(self.cliques[i]) for i in nodes}
        size_of = dict(zip(self.domain.names, self.domain.sizes, strict=True))

        def orient(root: int) -> tuple[list[int], dict[int, int]]:
            order, towards = [root], {root: -1}
            for i in order:
                for j in adjacent[i]:
                    if j not in towards:
                        towards[j] = i
                        order.append(j)
            return order, towards

        def work(root: int) -> float:
            order, towards = orient(root)
            carried: dict[int, set[str]] = {}
            total = 0.0
            for i in reversed(order):
                below = (
                    set().union(*(carried[j] for j in adjacent[i] if towards.get(j) == i))
                    if adjacent[i]
                    else set()
                )
                total += math.prod(size_of[n] for n in sets[i] | below)
                carried[i] = below | (wanted & sets[i])
            return total

        root = min(nodes, key=lambda r: (work(r), r)) if len(nodes) > 1 else nodes[0]
        order, towards = orient(root)
        probs = self._probabilities()
        memo = self._messages
        kids_of: dict[int, list[int]] = {i: [] for i in order}
        for i in order[1:]:
            kids_of[towards[i]].append(i)
        carried: dict[int, frozenset[str]] = {}
        for i in reversed(order):
            carried[i] = frozenset(wanted & sets[i]).union(*(carried[j] for j in kids_of[i]))

        def reduction(i: int, cols: Clique) -> np.ndarray:
            """Clique i's counts summed down to ``cols`` (in the clique's order), kept for the batch."""
            clique = self.cliques[i]
            if len(cols) == len(clique):
                return probs[i]
            key = (i, -2, frozenset(cols))
            if memo is not None and key in memo:
                return memo[key][1]
            table = probs[i].sum(axis=other_axes(cols, clique))
            if memo is not None and self._memo_cells + table.size <= _MEMO_CELLS:
                memo[key] = (cols, table)
                self._memo_cells += table.size
            return table

        # The messages towards the root, depth first (each child's subtree before the next child, the parent
        # last), from an explicit stack: a recursive closure would be a reference cycle holding the batch's
        # memo until the cyclic garbage collector runs, which a driver that has imported pyspark and pandas
        # does rarely (one memo of up to _MEMO_CELLS per AIM round piled up: docs/design.md section 4.7).
        done: dict[int, tuple[Clique, np.ndarray]] = {}
        started: dict[int, tuple[Clique, list[tuple[Clique, np.ndarray]]]] = {}
        stack = [root]
        while stack:
            i = stack.pop()
            up = towards[i]
            key = (i, up, carried[i])
            if i not in started:
                if up >= 0 and memo is not None and key in memo:
                    done[i] = memo[key]
                    continue
                clique = self.cliques[i]
                sep = tuple(n for n in clique if n in sets[up]) if up >= 0 else ()
                needed = set(sep) | (wanted & sets[i])
                for j in kids_of[i]:
                    needed.update(n for n in clique if n in sets[j])
                reduced = tuple(n for n in clique if n in needed)
                counts = reduction(i, reduced)
                factors: list[tuple[Clique, np.ndarray]] = [(reduced, counts)]
                if up >= 0:
                    sep_counts = reduction(i, sep)
                    inverse = np.divide(
                        1.0, sep_counts, out=np.zeros_like(sep_counts), where=sep_counts > _TINY
                    )
                    factors.append((sep, inverse))
                started[i] = (sep, factors)
                stack.append(i)  # back once its children's messages are done
                stack.extend(reversed(kids_of[i]))
                continue
            sep, factors = started.pop(i)
            factors.extend(done.pop(j) for j in kids_of[i])
            scope = union(self.domain, [c for c, _ in factors])
            keep = set(sep) | (wanted & set(scope))
            out = tuple(n for n in scope if n in keep)
            result = (out, _contract(factors, out))
            if up >= 0 and memo is not None and self._memo_cells + result[1].size <= _MEMO_CELLS:
                memo[key] = result
                self._memo_cells += result[1].size
            done[i] = result
        scope, table = done[root]
        assert set(scope) == wanted
        return table

    # ------------------------------------------------------------------------------------ evidence
    def condition(self, evidence: Mapping[Iterable[str], np.ndarray]) -> GraphicalModel:
        """The model conditioned on evidence: p(x | x_C in A_C for every C), scaled to the same :attr:`total`.

        Each evidence table adds the log-potential of :func:`evidence_potential` (0 on its allowed cells, a
        structural zero elsewhere) to the model's potentials over its clique, and the junction tree of the
        cliques, the evidence's included, is rebuilt and calibrated: exact conditioning of the exponential
        family (Koller and Friedman, "Probabilistic Graphical Models", 2009, section 4.2.3, factor reduction
        by evidence); sampling the result samples the condition's records only (docs/design.md section
        4.8, "Conditions and declared rules").

        Args:
            evidence: clique (column names) -> bool array of shape ``domain.shape(clique)``, True on the cells
                a record may hold.

        Returns:
            A new model; this one is unchanged.

        Raises:
            InvalidParameterError: an array does not have its clique's shape, or the evidence has probability
                zero under the model (:meth:`probability`).
        """
        items = [evidence_potential(self.domain, c, a) for c, a in evidence.items()]
        if not items:
            return self
        theta = {c: v.copy() for c, v in self.potentials.items()}
        for clique, log_mask in items:
            theta[clique] = theta[clique] + log_mask if clique in theta else log_mask
        model = GraphicalModel(self.domain, theta, self.total)
        for clique, log_mask in items:
            # When the evidence has probability zero, the normalization moves the mass onto the excluded cells:
            # every allowed set must hold the whole mass of the conditioned model.
            counts = model.project(clique)
            kept = float(np.sum(counts[log_mask == 0.0]))
            if not (kept > 0.0 and float(np.sum(counts)) - kept <= 1e-6 * model.total):
                raise InvalidParameterError(
                    f"the evidence over {list(clique)} has probability zero under the model"
                )
        return model

    def probability(self, clique: Iterable[str], allowed: np.ndarray) -> float:
        """The model's probability of the cells ``allowed`` over ``clique``: sum of :meth:`project` over them /
        :attr:`total`, in [0, 1].

        Raises:
            InvalidParameterError: a name is unknown, or ``allowed`` does not have the clique's shape.
        """
        names = tuple(clique)
        mask = np.asarray(allowed, dtype=bool)
        if mask.shape != self.domain.shape(names):
            raise InvalidParameterError(
                f"the evidence over {list(names)} has shape {mask.shape}, expected {self.domain.shape(names)}"
            )
        counts = self.project(names)
        return float(min(1.0, max(0.0, float(counts[mask].sum()) / self.total)))

    # ------------------------------------------------------------------------------------ sampling
    def sample(self, n: int, rng: np.random.Generator, *, rounded: bool = False) -> np.ndarray:
        """Draw ``n`` records by ancestral sampling along the junction tree (module docstring).

        Args:
            n: number of records, >= 0.
            rng: the generator of every draw.
            rounded: False: records independent and identically distributed; True: systematic draws, so that
                the root clique's cells get counts within one of n x their probability, and every group of
                records that share a separator value splits over the next clique's new cells with counts within
                one of their expected counts (the idea of private-pgm's ``synthetic_data``; the rows are then in
                no particular order, shuffle them before use).

        Returns:
            int64 array (n, len(domain)): value codes, columns in domain order.

        Raises:
            InvalidParameterError: ``n`` < 0.
        """
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
            raise InvalidParameterError(f"n must be an integer >= 0, got {n!r}")
        n = int(n)
        out = np.zeros((n, len(self.domain)), dtype=np.int64)
        done: set[str] = set()
        for node in self.tree.preorder:
            clique = self.cliques[node]
            sep = tuple(c for c in clique if c in done)
            new = tuple(c for c in clique if c not in done)
            if not new:
                continue
            counts = self._probabilities()[node]
            order = [clique.index(c) for c in sep + new]
            table = counts.transpose(order).reshape(self.domain.cells(sep), self.domain.cells(new))
            if sep:
                rows = np.ravel_multi_index(
                    tuple(out[:, self.domain.index(c)] for c in sep), self.domain.shape(sep)
                ).astype(np.int64)
            else:
                rows = np.zeros(n, dtype=np.int64)
            cells = _draw_rows(table, rows, rng, rounded)
            codes = np.unravel_index(cells, self.domain.shape(new))
            for c, col in zip(new, codes, strict=True):
                out[:, self.domain.index(c)] = col
            done.update(new)
        return out


def evidence_potential(
    domain: Domain, clique: Iterable[str], allowed: np.ndarray
) -> tuple[Clique, np.ndarray]:
    """The log-potential of evidence ``allowed`` over ``clique``: 0 on the allowed cells, :data:`STRUCTURAL_ZERO`
    on the others, in the domain's order of the clique.

    Args:
        domain: the columns.
        clique: column names (any order; ``allowed``'s axes follow it).
        allowed: bool array of shape ``domain.shape(clique)``.

    Returns:
        (the clique in domain order, float64 log-potential over it).

    Raises:
        InvalidParameterError: ``allowed`` does not have the clique's shape.
    """
    names = tuple(clique)
    mask = np.asarray(allowed, dtype=bool)
    if mask.shape != domain.shape(names):
        raise InvalidParameterError(
            f"the evidence over {list(names)} has shape {mask.shape}, expected {domain.shape(names)}"
        )
    canonical = domain.canonical(names)
    mask = mask.transpose([names.index(n) for n in canonical])
    return canonical, np.where(mask, 0.0, STRUCTURAL_ZERO)


def _contract(factors: list[tuple[Clique, np.ndarray]], out: Clique) -> np.ndarray:
    """sum over the columns not in ``out`` of the product of ``factors`` (numpy einsum), axes in ``out``'s order."""
    names = list(dict.fromkeys(n for c, _ in factors for n in c))
    if len(names) > _EINSUM_LETTERS:
        raise InvalidParameterError(f"a product over {len(names)} columns is too wide to contract")
    label = {n: j for j, n in enumerate(names)}
    args: list[Any] = []
    sizes: dict[str, int] = {}
    for c, f in factors:
        args += [f, [label[n] for n in c]]
        sizes.update(zip(c, f.shape, strict=True))
    direct = int(np.prod(list(sizes.values()), dtype=np.float64)) <= _DIRECT_CELLS
    result = [label[n] for n in out]
    if direct:
        return np.asarray(np.einsum(*args, result, optimize=False))
    # the greedy pairwise order depends only on the labels and shapes: planned once per signature
    signature = (
        tuple((tuple(a), f.shape) for f, a in zip(args[::2], args[1::2], strict=True)),
        tuple(result),
    )
    path = _PATHS.get(signature)
    if path is None:
        if len(_PATHS) >= _MAX_PATHS:
            _PATHS.clear()
        path = _PATHS[signature] = np.einsum_path(*args, result, optimize="greedy")[0]
    return np.asarray(np.einsum(*args, result, optimize=path))


def _draw_rows(table: np.ndarray, rows: np.ndarray, rng: np.random.Generator, rounded: bool) -> np.ndarray:
    """For each record, a column of ``table`` (rows x cells, non-negative weights) drawn from its row.

    Independent draws (``rounded`` False): one search over the concatenated cumulative distributions of all rows,
    each shifted by its row number: record r's uniform u in [0, 1) is looked up as row(r) + u. Systematic draws
    (``rounded`` True): the m records of a row, in a uniformly random order, get the quantiles (k + U) / m,
    k = 0..m-1, one uniform U per row; cell j then receives the records k with c_{j-1} <= (k + U) / m < c_j
    (c the row's cumulative distribution), a count ceil(m c_j - U) - ceil(m c_{j-1} - U) computed per cell
    without searching, and the records get their cells by one ``repeat`` in the sorted order. Rows of zero
    weight are uniform.
    """
    n = rows.shape[0]
    k = table.shape[1]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if k == 1:
        return np.zeros(n, dtype=np.int64)
    weights = np.maximum(table, 0.0)
    sums = weights.sum(axis=1, keepdims=True)
    weights = np.where(sums > 0, weights / np.where(sums > 0, sums, 1.0), 1.0 / k)
    cum = np.cumsum(weights, axis=1)
    cum[:, -1] = 1.0
    # only the rows that hold records: keeps the tables small when the separator is large
    if table.shape[0] <= max(4 * n, 1 << 16):
        present = np.bincount(rows, minlength=table.shape[0])
        used = np.flatnonzero(present)
        lookup = np.zeros(table.shape[0], dtype=np.int64)
        lookup[used] = np.arange(used.shape[0])
        local = lookup[rows]
    else:
        used, local = np.unique(rows, return_inverse=True)
        local = local.reshape(-1)
    groups = used.shape[0]
    if rounded:
        # records grouped by row, in a uniformly random order within each group (a stable radix sort of a random
        # permutation when the group number fits 16 bits)
        perm = rng.permutation(n)
        key = local[perm].astype(np.uint16) if groups <= 1 << 16 else local[perm]
        order = perm[np.argsort(key, kind="stable")]
        m = np.bincount(local, minlength=groups).astype(np.float64)[:, None]
        offset = rng.random(size=(groups, 1))
        below = np.clip(np.ceil(m * cum[used] - offset), 0.0, m)
        below[:, -1] = m[:, 0]
        counts = np.diff(below, axis=1, prepend=0.0).astype(np.int64).ravel()
        out = np.empty(n, dtype=np.int64)
        out[order] = np.repeat(np.tile(np.arange(k, dtype=np.int64), groups), counts)
        return out
    flat = (cum[used] + np.arange(groups)[:, None]).ravel()
    u = rng.random(size=(n,))
    found = np.searchsorted(flat, local + u, side="right")
    return np.clip(found - local * k, 0, k - 1).astype(np.int64)
