"""The ``model`` synthesizer: marginals estimated from the noisy release, a Bayesian network, raking.

Synthesis in ``mode = "model"`` (docs/design.md section 4.1) reads only the release and works in two stages.

**Fit (on the driver, release-sized).** :func:`fit_release_model`

1. *Measurements.* For every column subset S of size k <= min(R, 3), the release is a set of noisy counts over
   the cells of S whose values are all released (the "core" of S's marginal). A released cell is a Gaussian
   measurement y = x + N(0, s_k^2), s_k = ``manifest.marginals.lengths[k].noise_std`` (docs/design.md section 2.4). A
   *candidate* that is not released (all its (k-1)-sub-tuples released: Apriori, docs/design.md section 2.2)
   is *censored*: its noisy count was <= rho_k = max(``manifest.marginals.lengths[k].threshold``, 0) (docs/design.md
   section 2.5), which is evidence of a small count, not of zero. A cell that was not even a candidate has no
   measurement of its own. Fabricated cells
   (true count 0, noise above rho_k) are released cells like any other: the shrinkage below discounts them.
   The final normalization of the release (a count clipped to its parents') is ignored.
2. *Number of records, empty and suppressed values.* Empty values are not attributes, and a value suppressed by
   rho_1 is not released either, so the released values of a column hold n less its empty cells and its
   suppressed values: the "rest" r_c = n - (sum of column c's 1-tuple counts). n is estimated by
   inverse-variance weighting of the protected number of records (discrete Laplace, variance
   2 e^-eps_N / (1 - e^-eps_N)^2) and the 1-tuple sums of the columns that show no rest (plus each column's
   noisy empty count e_c where the release measures them: manifest ``empty_counts``, docs/design.md section
   2.8). A column gets a "rest" category only when its rest exceeds what one suppressed value could hold
   (rho_1) by ``z = 3`` standard errors; otherwise its rest is spread over its released values. The rest
   category is estimated, fitted and sampled like any value, so that the joint tables stay consistent with
   one another (a rest made of suppressed values lives in the cells of the other columns where those values
   do, e.g. NIST's ``INDP`` and ``INDP_CAT``); only on output is a rest cell decoded: empty with probability
   min(1, e_c / r_c) when the release measures e_c > ``z`` s_1 (else 0: no empty cell where the release
   gives no evidence of one), otherwise a released value drawn from the column's estimated 1-way shares
   (a suppressed value is not mistaken for an empty one). A release without ``empty_counts`` (older releases,
   multi-value columns) decodes every rest cell as empty.
3. *Marginals, bottom-up, by empirical Bayes* (Robbins 1956; Efron and Morris 1973; the censored update is the
   truncated-normal mean, Johnson, Kotz and Balakrishnan, "Continuous Univariate Distributions" 1, ch. 13).
   Each k-way table is estimated with a Gaussian prior N(q, tau^2) per cell, q the lower-order prediction
   (k = 2: the product of the 1-way estimates; k = 3: the maximum-entropy table with the three estimated 2-way
   marginals, by iterative proportional fitting, Deming and Stephan 1940), tau^2 = kappa q with kappa estimated
   per table by moments, E[(y - q)^2] = tau^2 + s_k^2. Posterior means: a released cell gets
   q + tau^2 / (tau^2 + s_k^2) (y - q); a censored cell gets E[x | x + e <= rho_k] = q - tau^2 / sd
   phi(a) / Phi(a), sd = sqrt(tau^2 + s_k^2), a = (rho_k - q) / sd; a cell without measurement keeps q. A
   second pass pools the higher-order measurements into the lower ones: the sum of a (k+1)-way table over a
   column that has no deficit is another measurement of the k-way core (censored cells imputed from the first
   pass; variance = number of released cells x s_(k+1)^2), combined with the prior by precision weighting
   before the direct measurement. The table is then fitted to its (k-1)-way margins by IPF with its core
   kept (Deming and Stephan 1940; :func:`spark_dpsynth.synthesizers._kernels.ipf` with ``fixed``): the cells
   with an empty value, which no tuple measures, take what each margin leaves after the core, so a value's
   1-way count less its (k-1)-way counts with every released value of the other column says how many of its
   records are empty there (UCI Adult's workclass and occupation are empty in the same records). A margin
   below its core's sum scales its whole fiber; a fit that this locks continues as plain IPF (noisy releases
   only: without noise, ``noise_std`` 0 or absent, the core is exact and never moves, so such a release
   gives back its exact marginals). Why the core is kept: plain IPF for every cell would spread each margin's
   deficit over the measured cells too and put the empty cells where the 1-way tables alone put them, farther
   from the data's own tables (docs/design.md section 4.1, step 3).
4. *Structure.* A Bayesian network whose nodes have at most two parents (PrivBayes, Zhang et al. 2017),
   built greedily: start from the pair of largest estimated mutual information, then repeatedly add the column
   and parent set (of the placed columns) of largest estimated mutual information I(column; parents). Each
   conditional table is read off the estimated (<= 3)-way table of the family.

**Sample (on the executors, per partition).** :func:`sample_records` draws a pool of ``pool_factor`` x n
records (at least ``min_pool``) from the network (ancestral sampling), rakes their weights (IPF on record
weights, Deming and Stephan 1940; "raking", Deville and Sarndal 1992) to every estimated 2-way marginal, to
the network's 3-way family marginals and to the other estimated 3-way marginals that differ from the
maximum-entropy table of their 2-way margins by more than their noise (:func:`_informative_triples`: on a
large table, where the release measures them precisely), a 3-way table's factor never below
:data:`_RAKE_FLOOR` (a lower bound on the calibration factor, Deville and Sarndal 1992: an empty cell of one 3-way table
down-weights its records instead of removing them), sweep after sweep until the distance to the targets
stalls (:data:`RAKE_STALL`, at most 10 sweeps), and keeps n records by systematic resampling
(Kitagawa 1996). As the pool grows, the output distribution tends to the I-projection (maximum entropy
relative to the network; Csiszar 1975) of the network onto the estimated marginals, whatever the partition:
partitions differ only by sampling noise.

Privacy: everything here reads the release only (post-processing, docs/design.md sections 1.1 and 4.1).

One file over 800 lines: the model synthesizer's fit and its raking share the fitted model's arrays.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
from scipy import special

from spark_dpsynth.errors import ReleaseError
from spark_dpsynth.privacy.accounting import discrete_laplace_variance
from spark_dpsynth.release.core import Release
from spark_dpsynth.synthesizers._kernels import ipf

__all__ = ["ReleaseModel", "fit_release_model", "sample_records", "estimate_marginals", "MarginalEstimates"]

Subset = tuple[int, ...]

_MAX_LENGTH = 3
"""Longest released combinations the model reads (and longest family of the network)."""
_EMPTY_Z = 3.0
"""Standard errors by which a column's deficit must exceed rho_1 to become an "empty" category."""
_MAX_TABLE_CELLS = 1 << 21
"""A 3-way table with more cells than this is not estimated (its measurements are not used); see the report."""
_BATCH_CELLS = 1 << 22
"""Cells of the tables fitted together by one batched IPF (:func:`spark_dpsynth.synthesizers._kernels.ipf`):
32 MiB of float64."""
_TAU2_FLOOR = 1e-9
_CHUNK_ROWS = 1 << 16
"""Records emitted per pool (a partition with more records samples several independent pools)."""
_BLOCK_ROWS = 1 << 15
"""Records per vectorized block of ancestral sampling (bounds the (block, categories) temporaries)."""


# ---------------------------------------------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------------------------------------------

_NONE, _CENSORED, _RELEASED = 0, 1, 2


def _measurements(release: Release, max_k: int) -> dict[Subset, tuple[np.ndarray, np.ndarray]]:
    """Per column subset S (|S| <= max_k): dense (noisy count, status) arrays over S's core cells.

    Returns:
        S -> (y, status): float64 and int8 arrays of shape (m_c for c in S), m_c = number of released values of
        column c; status 2 = released (y = the released count), 1 = censored candidate, 0 = no measurement.
        Subsets whose core has more than ``_MAX_TABLE_CELLS`` cells are left out.

    Raises:
        ReleaseError: a tuple has an out-of-range column or value code, or non-ascending columns.
    """
    d = len(release.columns)
    sizes = np.array([len(dom) for dom in release.domains], dtype=np.int64)
    out: dict[Subset, tuple[np.ndarray, np.ndarray]] = {}
    for k in range(1, max_k + 1):
        for subset in itertools.combinations(range(d), k):
            shape = tuple(int(sizes[c]) for c in subset)
            if math.prod(shape) <= _MAX_TABLE_CELLS:
                out[subset] = (np.zeros(shape), np.zeros(shape, dtype=np.int8))
        marginal = release.marginals.get(k)
        if marginal is not None and len(marginal):
            cols = np.asarray(marginal.columns, dtype=np.int64)
            vals = np.asarray(marginal.values, dtype=np.int64)
            counts = np.asarray(marginal.counts, dtype=np.float64)
            if cols.min() < 0 or cols.max() >= d or (k > 1 and np.any(np.diff(cols, axis=1) <= 0)):
                raise ReleaseError(f"a {k}-tuple of the release has a bad column index or column order")
            if np.any(vals < 0) or np.any(vals >= sizes[cols]):
                raise ReleaseError(f"a {k}-tuple of the release has a value code outside its column's domain")
            key = np.zeros(len(cols), dtype=np.int64)
            for j in range(k):
                key = key * d + cols[:, j]
            for group in np.unique(key):
                rows = key == group
                subset = tuple(int(c) for c in cols[np.flatnonzero(rows)[0]])
                if subset not in out:
                    continue
                y, status = out[subset]
                idx = tuple(vals[rows, j] for j in range(k))
                y[idx] = counts[rows]
                status[idx] = _RELEASED
        for subset in itertools.combinations(range(d), k):
            if subset not in out:
                continue
            status = out[subset][1]
            candidate = np.ones(status.shape, dtype=bool)
            for drop in range(k if k > 1 else 0):
                parent = subset[:drop] + subset[drop + 1 :]
                if parent not in out:
                    candidate[:] = False
                    break
                candidate &= np.expand_dims(out[parent][1] == _RELEASED, drop)
            status[(status == _NONE) & candidate] = _CENSORED
    return out


# ---------------------------------------------------------------------------------------------------------------
# Estimation
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MarginalEstimates:
    """Estimated marginals of the table the release was made from (probabilities; release-sized)."""

    number_of_records: float
    """Estimated n (records), see the module docstring, step 2."""
    has_empty: np.ndarray
    """bool (d,): the column has an "empty" category (code ``released_sizes[c]``)."""
    released_sizes: np.ndarray
    """int64 (d,): m_c, the number of released values of each column (codes 0..m_c-1)."""
    tables: dict[Subset, np.ndarray]
    """S -> float64 array of shape (m_c + has_empty_c for c in S), non-negative, summing to 1, for every S of
    size 1 and 2 and every estimated S of size 3 (ascending column indices)."""
    empty_share: np.ndarray | None = None
    """float (d,): the probability that a cell of a column's "rest" category is written empty (the others get
    a released value), module docstring step 2; None: every rest cell is empty."""
    noise_std: tuple[float, ...] = ()
    """s_1, s_2, s_3: the standard deviation of one noisy count of a k-tuple (records; 0: exact), from the
    manifest's marginals block; empty when it does not state them (a workload release, an SDS aggregates file:
    its noise is not known)."""
    maxent: dict[Subset, np.ndarray] = field(default_factory=dict)
    """S -> the maximum-entropy table (probabilities) with the three estimated 2-way margins of every estimated
    S of size 3: the prior of its estimate in the second pass (module docstring, step 3)."""

    @property
    def sizes(self) -> np.ndarray:
        """int64 (d,): categories per column, released values plus the empty category where there is one."""
        return self.released_sizes + self.has_empty.astype(np.int64)


def _positive(value: float | None) -> float:
    """A noise parameter of the manifest, or 0 where it is missing, not finite or not positive (no noise known:
    the count is taken as exact)."""
    if value is None or not math.isfinite(value) or value <= 0:
        return 0.0
    return float(value)


def _truncated_mean(q: np.ndarray, tau2: np.ndarray, s2: float, threshold: float) -> np.ndarray:
    """E[x | x ~ N(q, tau2), x + e <= threshold, e ~ N(0, s2)] (the mean of a censored normal; see the module).

    E[x | y <= t] = q - tau2 / sd * phi(a) / Phi(a), with y = x + e ~ N(q, sd^2), sd^2 = tau2 + s2,
    a = (t - q) / sd (the inverse Mills ratio of the truncated normal).
    """
    sd = np.sqrt(tau2 + s2)
    a = (threshold - q) / sd
    mills = np.exp(-0.5 * a * a - 0.5 * math.log(2 * math.pi) - special.log_ndtr(a))
    return q - tau2 / sd * mills


class _Estimator:
    """The bottom-up empirical Bayes estimation of the module docstring, steps 2-3 (driver, release-sized)."""

    def __init__(self, release: Release) -> None:
        block = release.manifest.marginals
        lengths = block.lengths if block is not None else {}
        self.noise_known = block is not None and all(
            k in lengths and lengths[k].noise_std is not None
            for k in range(1, min(release.reporting_length, _MAX_LENGTH) + 1)
        )
        self.d = len(release.columns)
        self.r = min(release.reporting_length, _MAX_LENGTH)
        self.meas = _measurements(release, self.r)
        self.m = np.array([len(dom) for dom in release.domains], dtype=np.int64)
        self.s = {
            k: _positive(lengths[k].noise_std if k in lengths else None) for k in range(1, _MAX_LENGTH + 1)
        }
        self.thr = {
            k: _positive(lengths[k].threshold if k in lengths else None) for k in range(1, _MAX_LENGTH + 1)
        }
        measured = release.manifest.get("empty_counts")
        self.empty: np.ndarray | None = None
        if measured:
            self.empty = np.array([float(measured.get(c, 0)) for c in release.columns], dtype=np.float64)
        eps_n = _positive(block.epsilon_n if block is not None else None)
        self._number_of_records(float(release.protected_number_of_records), discrete_laplace_variance(eps_n))
        self.tables: dict[Subset, np.ndarray] = {}
        self.previous: dict[Subset, np.ndarray] = {}
        self.maxent: dict[Subset, np.ndarray] = {}

    # step 2 ---------------------------------------------------------------------------------------------------
    def _number_of_records(self, protected_n: float, var_protected: float) -> None:
        d, s1 = self.d, self.s[1]
        values = np.array([self.meas[(c,)][0].sum() for c in range(d)])
        sums, var_sums = values, self.m * s1 * s1
        if self.empty is not None:
            # measured empty counts (docs/design.md section 2.8): values + empty measure n, less suppressed values
            sums, var_sums = values + self.empty, var_sums + s1 * s1
        n, var_n = protected_n, var_protected
        if var_protected > 0:
            for _ in range(10):
                full = (sums > n - _EMPTY_Z * np.sqrt(var_sums + var_n)) & (var_sums > 0) & (self.m > 0)
                weights = np.concatenate([[1.0 / var_protected], 1.0 / var_sums[full]])
                measured = np.concatenate([[protected_n], sums[full]])
                n = float((weights * measured).sum() / weights.sum())
                var_n = 1.0 / float(weights.sum())
        self.n = max(n, 1.0)
        # the rest of each column (empty cells and suppressed values), measured by its released values only
        self.deficit = self.n - values
        sd = np.sqrt(self.m * s1 * s1 + var_n)
        limit = np.maximum(self.thr[1] + _EMPTY_Z * sd, 0.5)
        self.has_empty = (self.deficit > limit) | (self.m == 0)
        if self.empty is not None:
            # a measured empty count that stands out of the noise gives the column a rest even when its
            # deficit alone would not
            self.has_empty |= self.empty > _EMPTY_Z * s1
        self.size = self.m + self.has_empty.astype(np.int64)
        # columns whose released values hold (nearly) every record: sums over them measure the other columns
        self.complete = [c for c in range(d) if not self.has_empty[c] and self.m[c] > 0]

    def empty_share(self) -> np.ndarray:
        """Per column, the probability that a cell of its rest category is empty (module docstring, step 2):
        1 without measured empty counts or without released values, else min(1, e_c / r_c) where e_c stands
        out of the noise (0 otherwise); r_c is the rest's estimated share of n."""
        share = np.ones(self.d)
        if self.empty is None:
            return share
        s1 = self.s[1]
        for c in range(self.d):
            if not self.has_empty[c] or self.m[c] == 0:
                continue
            rest = float(self.tables[(c,)][-1]) * self.n
            e = float(self.empty[c])
            share[c] = min(1.0, e / rest) if e > _EMPTY_Z * s1 and rest > 0 else 0.0
        return share

    def _core(self, subset: Subset) -> tuple[slice, ...]:
        return tuple(slice(0, int(self.m[c])) for c in subset)

    def _finish_one(self, c: int, core: np.ndarray) -> None:
        core = np.maximum(core, 0.0)
        table = np.concatenate([core, [max(self.n - core.sum(), 0.0)]]) if self.has_empty[c] else core
        total = table.sum()
        self.tables[(c,)] = table / total if total > 0 else np.full(table.shape, 1.0 / table.size)

    def one_way(self, pooled: bool) -> None:
        for c in range(self.d):
            y = self.meas[(c,)][0].copy()
            if pooled and self.s[1] > 0:
                precision = np.full(y.shape, 1.0 / self.s[1] ** 2)
                weighted = y * precision
                for g, v in self._pooled((c,)):
                    weighted += g / v
                    precision += 1.0 / v
                y = weighted / precision
            self._finish_one(c, y)

    def _pooled(self, subset: Subset) -> list[tuple[np.ndarray, np.ndarray]]:
        """Measurements of ``subset``'s core from the (k+1)-way tables: sums over a column without a deficit."""
        k = len(subset) + 1
        out: list[tuple[np.ndarray, np.ndarray]] = []
        if k > self.r or self.s[k] <= 0:
            return out
        s = self.s[k]
        for c in self.complete:
            if c in subset:
                continue
            sup = tuple(sorted(subset + (c,)))
            if sup not in self.meas or sup not in self.previous:
                continue
            y, status = self.meas[sup]
            prior = self.previous[sup][self._core(sup)] * self.n
            imputed = np.where(status == _RELEASED, y, prior)
            axis = sup.index(c)
            scale = self.n / max(self.n - max(float(self.deficit[c]), 0.0), 1.0)
            g = imputed.sum(axis=axis) * scale
            v = (status == _RELEASED).sum(axis=axis) * (s * scale) ** 2 + 1.0
            out.append((g, v))
        return out

    def _posterior(
        self, subset: Subset, prior: np.ndarray, pooled: list[tuple[np.ndarray, np.ndarray]]
    ) -> np.ndarray:
        """Posterior means of the core cells of ``subset`` (module docstring, step 3)."""
        k = len(subset)
        if subset not in self.meas or k > self.r:
            return prior
        y, status = self.meas[subset]
        s, thr = self.s[k], self.thr[k]
        released, censored = status == _RELEASED, status == _CENSORED
        q = np.maximum(prior, 0.0)
        sel = released & (q > 0)
        denominator = float(q[sel].sum())
        if denominator > 0:
            kappa = (float(((y[sel] - q[sel]) ** 2).sum()) - s * s * int(sel.sum())) / denominator
        else:
            kappa = 0.0
        tau2 = max(kappa, 1e-6) * q + _TAU2_FLOOR
        mean, var = q, tau2
        for g, v in pooled:
            precision = 1.0 / var + 1.0 / v
            mean = (mean / var + g / v) / precision
            var = 1.0 / precision
        post = mean.copy()
        post[released] = mean[released] + var[released] / (var[released] + s * s) * (
            y[released] - mean[released]
        )
        post[censored] = _truncated_mean(mean[censored], var[censored], s * s, thr)
        return np.maximum(post, 0.0)

    def level(self, k: int, pooled: bool) -> None:
        """Fit every k-way table (k >= 2) from the (k-1)-way tables and the k-way measurements.

        Per subset: a prior (the outer product of the 1-way tables for k = 2; for k = 3 the IPF fit of a uniform
        table to the 2-way tables), the posterior of the core cells, then IPF to the (k-1)-way tables that
        keeps the core cells (the cells with an empty value take what the margins leave). The IPF steps of all
        subsets of the level run together (:func:`spark_dpsynth.synthesizers._kernels.ipf`), in chunks of at most
        ``_BATCH_CELLS`` cells.
        """
        chunk: list[tuple[Subset, tuple[int, ...]]] = []
        cells = 0
        for subset in itertools.combinations(range(self.d), k):
            shape = tuple(int(self.size[c]) for c in subset)
            if math.prod(shape) > _MAX_TABLE_CELLS:
                continue
            if chunk and cells + math.prod(shape) > _BATCH_CELLS:
                self._fit_tables(chunk, pooled)
                chunk, cells = [], 0
            chunk.append((subset, shape))
            cells += math.prod(shape)
        if chunk:
            self._fit_tables(chunk, pooled)

    def _fit_tables(self, chunk: list[tuple[Subset, tuple[int, ...]]], pooled: bool) -> None:
        n = self.n
        k = len(chunk[0][0])
        margins = [
            [
                (axes, n * self.tables[tuple(subset[i] for i in axes)])
                for axes in itertools.combinations(range(k), k - 1)
            ]
            for subset, _ in chunk
        ]
        if k == 2:
            priors = [
                n * np.multiply.outer(self.tables[(subset[0],)], self.tables[(subset[1],)])
                for subset, _ in chunk
            ]
        else:
            priors = ipf([np.full(shape, n / math.prod(shape)) for _, shape in chunk], margins)
            if pooled:  # fitted to the final 2-way tables
                for (subset, _), prior in zip(chunk, priors, strict=True):
                    total = float(prior.sum())
                    self.maxent[subset] = prior / total if total > 0 else prior
        tables = []
        for (subset, _), prior in zip(chunk, priors, strict=True):
            core = self._core(subset)
            table = prior.copy()
            table[core] = self._posterior(subset, prior[core], self._pooled(subset) if pooled else [])
            tables.append(table)
        # the core cells (the posterior means of the measurements) are kept; the cells with a rest value take
        # what the margins leave (module docstring, step 3)
        cores: list[np.ndarray | None] = []
        for subset, shape in chunk:
            core = None
            if subset in self.meas and k <= self.r:
                core = np.zeros(shape, dtype=bool)
                core[self._core(subset)] = True
            cores.append(core)
        # measured without noise, the core is exact and never moves
        fitted = ipf(tables, margins, fixed=cores, unlock=not (k <= self.r and self.s[k] == 0))
        for (subset, shape), table in zip(chunk, fitted, strict=True):
            total = table.sum()
            self.tables[subset] = table / total if total > 0 else np.full(shape, 1.0 / table.size)

    def run(self) -> MarginalEstimates:
        top = min(self.d, _MAX_LENGTH)
        self.one_way(pooled=False)
        for k in range(2, top + 1):
            self.level(k, pooled=False)
        # second pass: pool the higher-order measurements into the lower-order tables
        self.previous = dict(self.tables)
        self.one_way(pooled=True)
        for k in range(2, top + 1):
            self.level(k, pooled=True)
        return MarginalEstimates(
            number_of_records=self.n,
            has_empty=self.has_empty.copy(),
            released_sizes=self.m.copy(),
            tables=dict(self.tables),
            empty_share=self.empty_share(),
            noise_std=tuple(self.s[k] for k in range(1, _MAX_LENGTH + 1)) if self.noise_known else (),
            maxent=dict(self.maxent),
        )


def estimate_marginals(release: Release) -> MarginalEstimates:
    """Estimate the 1-, 2- and 3-way marginals (empty value included) from a release (module docstring, 1-3).

    Args:
        release: a DP release; its manifest's marginals block (per k ``noise_std`` and ``threshold``; ``epsilon_n``) is used
            when present (a release without them is taken as noise-free).

    Returns:
        The estimates; tables over the columns' released values plus, where the column has one, the empty
        category.

    Raises:
        ReleaseError: the release is inconsistent (codes or columns out of range).
    """
    return _Estimator(release).run()


# ---------------------------------------------------------------------------------------------------------------
# Model: Bayesian network + raking targets
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReleaseModel:
    """What every partition needs to synthesize: a Bayesian network and the raking targets (release-sized)."""

    sizes: np.ndarray
    """int64 (d,): categories per column (released values, then the empty category where ``has_empty``)."""
    has_empty: np.ndarray
    """bool (d,): code ``sizes[c] - 1`` of column c is "empty" (decoded to null)."""
    order: tuple[int, ...]
    """The columns in sampling order (each column's parents come before it)."""
    parents: tuple[tuple[int, ...], ...]
    """Per column (by column index), its parents (0, 1 or 2 column indices), in the order of ``conditionals``."""
    conditionals: tuple[np.ndarray, ...]
    """Per column c: float64 array (sizes of parents..., sizes[c]), rows summing to 1: P(c | parents)."""
    targets: tuple[tuple[Subset, np.ndarray], ...]
    """Raking targets (column subset, probability table over ``sizes`` of the subset), applied in this order."""
    number_of_records: float
    """The estimated number of records of the sensitive table (information only)."""
    empty_share: np.ndarray | None = None
    """float (d,): the probability that a sampled "rest" cell is written empty; the other rest cells get a
    released value drawn from ``fill`` (module docstring, step 2). None: every rest cell is empty."""
    fill: tuple[np.ndarray, ...] = ()
    """Per column, the cumulative distribution (float64, m_c values, last 1) of the released values a
    non-empty rest cell is drawn from: the column's estimated 1-way shares without the rest."""


def _mutual_information(table: np.ndarray, child_axis: int) -> float:
    """I(child; rest) in nats of a joint probability table (Cover and Thomas, eq. 2.28)."""
    p = table / max(float(table.sum()), 1e-300)
    rest_axes = tuple(i for i in range(p.ndim) if i != child_axis)
    pc = p.sum(axis=rest_axes, keepdims=True)
    pr = p.sum(axis=child_axis, keepdims=True)
    denom = pc * pr
    mask = (p > 0) & (denom > 0)
    return float((p[mask] * np.log(p[mask] / denom[mask])).sum())


def _structure(est: MarginalEstimates, d: int) -> tuple[list[int], dict[int, tuple[int, ...]]]:
    """Greedy Bayesian network of in-degree <= 2 (module docstring, step 4). Deterministic (ties: lowest index)."""
    if d == 1:
        return [0], {0: ()}
    score: dict[tuple[int, tuple[int, ...]], float] = {}
    for subset, table in est.tables.items():
        if len(subset) < 2:
            continue
        for i, child in enumerate(subset):
            score[(child, subset[:i] + subset[i + 1 :])] = _mutual_information(table, i)
    pairs = [s for s in itertools.combinations(range(d), 2) if (s[1], (s[0],)) in score]
    first = max(pairs, key=lambda s: score[(s[1], (s[0],))]) if pairs else (0, 1)
    order = [first[0], first[1]]
    parents: dict[int, tuple[int, ...]] = {first[0]: (), first[1]: (first[0],) if pairs else ()}
    while len(order) < d:
        placed = sorted(order)
        options: list[tuple[int, ...]] = list(itertools.combinations(placed, 2)) + [(p,) for p in placed]
        best: tuple[float, int, tuple[int, ...]] | None = None
        for v in range(d):
            if v in parents:
                continue
            for pa in options:
                value = score.get((v, pa))
                if value is not None and (best is None or value > best[0]):
                    best = (value, v, pa)
        if best is None:  # no estimated table links the rest to the placed columns: add one as a root
            v = min(set(range(d)) - set(parents))
            best = (0.0, v, ())
        _, v, pa = best
        order.append(v)
        parents[v] = pa
    return order, parents


def _conditional(est: MarginalEstimates, child: int, pa: tuple[int, ...]) -> np.ndarray:
    """P(child | parents) from the family's estimated table; a parent cell with no mass gets P(child)."""
    marginal = est.tables[(child,)]
    if not pa:
        return marginal.copy()
    subset = tuple(sorted(pa + (child,)))
    table = np.transpose(est.tables[subset], [subset.index(p) for p in pa] + [subset.index(child)])
    total = table.sum(axis=-1, keepdims=True)
    cond = np.where(total > 0, table / np.where(total > 0, total, 1.0), marginal)
    return cond / cond.sum(axis=-1, keepdims=True)


def fit_release_model(release: Release) -> ReleaseModel:
    """Fit the model the ``model`` synthesizer samples from (module docstring, fit steps 1-4).

    Args:
        release: the DP release (d columns, reporting length R).

    Returns:
        The model: network, conditionals and raking targets, all release-sized.

    Raises:
        ReleaseError: the release is inconsistent (codes or columns out of range) or has no column.

    Privacy:
        Post-processing of the release only.
    """
    d = len(release.columns)
    if d == 0:
        raise ReleaseError("the release has no column")
    est = estimate_marginals(release)
    order, parents = _structure(est, d)
    families = sorted({tuple(sorted(parents[v] + (v,))) for v in order if len(parents[v]) == 2})
    # the other informative 3-way tables first: each sweep ends on the 2-way tables and the families, which the
    # 3-way tables raked last would pull away from their targets (docs/design.md section 4.1)
    targets: list[tuple[Subset, np.ndarray]] = [
        (s, est.tables[s]) for s in _informative_triples(est, set(families))
    ]
    targets += [(s, t) for s, t in sorted(est.tables.items()) if len(s) == 2]
    targets += [(s, est.tables[s]) for s in families]
    if d == 1:
        targets = []
    return ReleaseModel(
        sizes=est.sizes.copy(),
        has_empty=est.has_empty.copy(),
        order=tuple(order),
        parents=tuple(parents[c] for c in range(d)),
        conditionals=tuple(_conditional(est, c, parents[c]) for c in range(d)),
        targets=tuple(targets),
        number_of_records=est.number_of_records,
        empty_share=None if est.empty_share is None else est.empty_share.copy(),
        fill=tuple(_fill(est.tables[(c,)][: int(est.released_sizes[c])]) for c in range(d)),
    )


_MAX_EXTRA_TARGETS = 200
"""Most 3-way tables beyond the network's families raked to (:func:`_informative_triples`): each costs 2 bytes
per pool record (200 x 262,144 records: 105 MB per pool) and a ``bincount`` per sweep."""
_MIN_INFORMATION = 1e-3
"""A 3-way table is raked to only when it differs from the maximum-entropy table of its 2-way margins by more
than this total variation distance (on a release without noise, where every deviation is above the noise)."""


RAKE_STALL = 0.05
"""Raking stops after the sweep that brought the summed distance to the targets down by less than this share
(:func:`_rake`): the later sweeps bring the drawn records no closer to the data and cost as much as the first
(docs/design.md section 4.1)."""
_RAKE_FLOOR = 0.5
"""The smallest factor a 3-way raking target applies to a record in one step (:func:`_rake`). Raked to a 3-way
table's empty cells with factor 0, a pool record is gone for good, though the 2-way tables still need it: the
pool loses the rare values of every margin (docs/design.md section 4.1)."""


def _informative_triples(est: MarginalEstimates, families: set[Subset]) -> list[Subset]:
    """The estimated 3-way tables, other than the network's families, that say more than their 2-way margins
    and more than their noise: those whose TVD to the maximum-entropy table with their three estimated 2-way
    margins (IPF, Deming and Stephan 1940) exceeds the expected TVD of their noise, cells x s_3 sqrt(2 / pi) /
    (2 n) (the mean absolute Gaussian error of every cell, in shares), and :data:`_MIN_INFORMATION`; the
    largest excess first, at most :data:`_MAX_EXTRA_TARGETS` (docs/design.md section 4.1). None when the
    release does not state the noise of every length (a workload release, an SDS aggregates file). The
    maximum-entropy tables are the estimator's own priors (``MarginalEstimates.maxent``), not fitted again.

    Raking to them as well as to the 2-way tables and the families carries the higher-order structure that
    the release measures precisely on a large table (the network keeps one family per column); on a small one
    their noise exceeds what they add and none is kept. Post-processing of the release's estimates."""
    triples = [s for s in est.tables if len(s) == 3 and s not in families and s in est.maxent]
    if not triples or est.number_of_records <= 0 or len(est.noise_std) < 3:
        return []
    s3 = est.noise_std[2]
    n = est.number_of_records
    excess = []
    for s in triples:
        table = est.tables[s]
        information = 0.5 * float(np.abs(table - est.maxent[s]).sum())
        noise = table.size * s3 * math.sqrt(2.0 / math.pi) / (2.0 * n)
        if information > max(noise, _MIN_INFORMATION):
            excess.append((information - noise, s))
    excess.sort(key=lambda e: (-e[0], e[1]))
    return [s for _, s in excess[:_MAX_EXTRA_TARGETS]]


def _fill(shares: np.ndarray) -> np.ndarray:
    """The cumulative distribution of a column's released values (uniform when their shares are all 0)."""
    if shares.size == 0:
        return shares.astype(np.float64)
    total = float(shares.sum())
    p = shares / total if total > 0 else np.full(shares.size, 1.0 / shares.size)
    cum = np.cumsum(p)
    cum[-1] = 1.0
    return cum


# ---------------------------------------------------------------------------------------------------------------
# Sampling (executors)
# ---------------------------------------------------------------------------------------------------------------


def _ancestral(model: ReleaseModel, n: int, rng: np.random.Generator) -> np.ndarray:
    """n records from the network, int32 (n, d) codes over ``model.sizes``; vectorized per column."""
    d = len(model.sizes)
    out = np.zeros((n, d), dtype=np.int32)
    # cumulative conditionals, once per call (the same sums as per record: cumsum runs along the last axis)
    cumulative = [np.cumsum(cond, axis=-1) for cond in model.conditionals]
    for lo in range(0, n, _BLOCK_ROWS):
        block = out[lo : lo + _BLOCK_ROWS]
        rows = block.shape[0]
        for c in model.order:
            cond: np.ndarray = cumulative[c]
            pa = model.parents[c]
            cum = (
                cond[tuple(block[:, p] for p in pa)] if pa else np.broadcast_to(cond, (rows, cond.shape[-1]))
            )
            u = rng.random((rows, 1)) * cum[:, -1:]
            block[:, c] = np.minimum((cum <= u).sum(axis=1), cond.shape[-1] - 1)
    return out


def _target_keys(model: ReleaseModel, pool: np.ndarray) -> list[np.ndarray]:
    """The cell of every pool record in every raking target, once per pool (the smallest unsigned dtype).

    Memory: one array of pool rows per target, 2 bytes per record when the target has at most 2^16 cells
    (118 targets x 262,144 pool records = 62 MB for Adult's 15 columns), computed with the same integer
    arithmetic as the cell of a record in its target table (row-major code).
    """
    columns = np.ascontiguousarray(pool.T)  # (d, n): each column contiguous
    keys = []
    for subset, table in model.targets:
        key = np.zeros(pool.shape[0], dtype=np.int64)
        for c in subset:
            key *= int(model.sizes[c])
            key += columns[c]
        dtype = np.uint16 if table.size <= 1 << 16 else (np.uint32 if table.size <= 1 << 32 else np.int64)
        keys.append(key.astype(dtype))
    return keys


def _rake(
    model: ReleaseModel, pool: np.ndarray, sweeps: int, multiplicity: np.ndarray | None = None
) -> np.ndarray:
    """Weights (summing to 1) of the pool's records after ``sweeps`` rounds of raking to ``model.targets``.

    ``multiplicity``: the number of pool records each row of ``pool`` stands for (the weights then start at
    multiplicity / total, and each row's weight is that of all its copies); None: every row is one record.

    Each record's cell in each target is computed once (:func:`_target_keys`), not once per sweep; each step
    is then a ``bincount`` of the weights by cell, a gather of the cells' ratios and an in-place product (the
    same floating-point operations, in the same order, as recomputing the cells: the same weights).

    The sweeps stop early when the raking stalls: when the summed distance of the pool's tables to their
    targets, each read just before its step, fell by less than :data:`RAKE_STALL` over the last sweep (the
    estimated tables are noisy and the 3-way factors bounded, so the targets are not exactly consistent and the
    distance levels off above zero rather than vanishing).

    A 3-way target's ratio is at least :data:`_RAKE_FLOOR` (a lower bound on the calibration factor, as in the
    bounded distance functions of Deville and Sarndal 1992): a record in a cell that one 3-way table holds empty
    is down-weighted, not removed, so that the other tables can still draw on it (module docstring, "Sample").
    """
    if multiplicity is None:
        start = np.full(pool.shape[0], 1.0 / pool.shape[0])
    else:
        start = multiplicity / float(multiplicity.sum())
    if sweeps <= 0 or not model.targets:
        return start
    keys = _target_keys(model, pool)
    w = start.copy()
    factor = np.empty_like(w)
    previous = math.inf
    for _ in range(sweeps):
        gap = 0.0
        for (subset, table), key in zip(model.targets, keys, strict=True):
            target = table.ravel()
            current = np.bincount(key, weights=w, minlength=target.size)
            gap += float(np.abs(current - target).sum())
            ratio = np.divide(target, current, out=np.zeros_like(current), where=current > 0)
            if len(subset) == 3:
                np.maximum(ratio, _RAKE_FLOOR, out=ratio)
            np.take(ratio, key, out=factor)
            w *= factor
            total = w.sum()
            if not total > 0:  # no pool record fits the targets: fall back to the network
                return start
            w /= total
        if gap > previous * (1.0 - RAKE_STALL):
            break
        previous = gap
    return w


def _rake_pool(model: ReleaseModel, pool: np.ndarray, sweeps: int) -> np.ndarray:
    """:func:`_rake` of the pool, done on its distinct records when they are at most half of it.

    Raking gives identical records identical weights (a record's weight is a product of its cells' ratios), so
    the distinct records are raked with their multiplicities and each copy gets 1/multiplicity of its record's
    weight: the same weights, in far fewer operations when the columns have few values (1.4M records of
    6 columns).
    """
    sizes = model.sizes.astype(np.int64)
    if pool.shape[0] > 1 and float(np.log2(np.maximum(sizes, 1)).sum()) < 62:
        key = np.zeros(pool.shape[0], dtype=np.int64)
        for c in range(pool.shape[1]):
            key = key * sizes[c] + pool[:, c]
        distinct, first, inverse, counts = np.unique(
            key, return_index=True, return_inverse=True, return_counts=True
        )
        if 2 * distinct.size <= pool.shape[0]:
            weights = _rake(model, pool[first], sweeps, counts)
            return (weights / counts)[inverse.reshape(-1)]
    return _rake(model, pool, sweeps)


def _systematic(weights: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of n draws by systematic resampling (Kitagawa 1996): one uniform offset, n evenly spaced points."""
    cum = np.cumsum(weights)
    cum /= cum[-1]
    points = (rng.random() + np.arange(n)) / n
    return np.minimum(np.searchsorted(cum, points, side="right"), weights.size - 1)


def sample_records(
    model: ReleaseModel,
    n: int,
    rng: np.random.Generator,
    *,
    pool_factor: int = 4,
    min_pool: int = 50_000,
    raking_sweeps: int = 10,
) -> np.ndarray:
    """n synthetic records: network pool, raking, systematic resampling (module docstring, "Sample").

    Args:
        model: from :func:`fit_release_model`.
        n: records to emit (>= 0).
        rng: the only source of randomness (same state, same records).
        pool_factor: pool size per emitted record (>= 1).
        min_pool: smallest pool (records), so that small partitions rake a large enough pool.
        raking_sweeps: the most rounds of raking over all targets (fewer when it stalls: :data:`RAKE_STALL`).

    Returns:
        int32 array (n, d) of value codes, -1 where the record is empty in that column. Records are drawn in
        chunks of at most 2^16, each from its own pool.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    d = len(model.sizes)
    empty_code = np.where(model.has_empty, model.sizes - 1, -2)
    chunks = []
    left = n
    while left > 0:
        m = min(left, _CHUNK_ROWS)
        pool = _ancestral(model, max(pool_factor * m, min_pool, m), rng)
        weights = _rake_pool(model, pool, raking_sweeps)
        chunks.append(pool[_systematic(weights, m, rng)])
        left -= m
    # pool records are i.i.d., so the resampled rows (in pool order) are already in random order
    out = np.concatenate(chunks, axis=0) if chunks else np.zeros((0, d), dtype=np.int32)
    _decode_rest(model, out, empty_code, rng)
    return out


def _decode_rest(
    model: ReleaseModel, out: np.ndarray, empty_code: np.ndarray, rng: np.random.Generator
) -> None:
    """Decode the rest cells of ``out`` in place (module docstring, step 2): -1 (empty) with probability
    ``empty_share[c]``, else a released value drawn from the network's conditional P(c | parents) of the
    record without the rest category (the 1-way shares ``fill[c]`` where that holds no released value)."""
    codes = out.copy()  # the parents' codes as sampled, before any column is decoded
    for c in np.flatnonzero(model.has_empty):
        rows = np.flatnonzero(codes[:, c] == empty_code[c])
        m = int(model.sizes[c]) - 1
        share = 1.0 if model.empty_share is None else float(model.empty_share[c])
        if rows.size == 0:
            continue
        if share >= 1.0 or m <= 0:
            out[rows, c] = -1
            continue
        empty = rng.random(rows.size) < share
        u = rng.random(rows.size)
        values = np.empty(rows.size, dtype=np.int64)
        pa = model.parents[c]
        for lo in range(0, rows.size, _BLOCK_ROWS):
            block = rows[lo : lo + _BLOCK_ROWS]
            ub = u[lo : lo + _BLOCK_ROWS]
            fallback = np.minimum(np.searchsorted(model.fill[c], ub, side="right"), m - 1)
            if pa:
                cond = model.conditionals[c][tuple(codes[block, p] for p in pa)][:, :m]
                cum = np.cumsum(cond, axis=1)
                mass = cum[:, -1]
                drawn = np.minimum((cum <= (ub * mass)[:, None]).sum(axis=1), m - 1)
                values[lo : lo + block.size] = np.where(mass > 0, drawn, fallback)
            else:
                values[lo : lo + block.size] = fallback
        out[rows, c] = np.where(empty, -1, values).astype(out.dtype)
