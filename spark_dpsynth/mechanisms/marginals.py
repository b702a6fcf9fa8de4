"""DP marginals on Spark: SDS's method (docs/design.md section 2), distributed.

``dp_aggregate(df, params, data_config)`` returns a :class:`~spark_dpsynth.release.core.Release`. The Spark plan:

1. prepare: select, clean and bin the attribute columns (:mod:`spark_dpsynth.data.prepare`);
2. patterns: ``groupBy(all columns).count()``: distinct records with their multiplicity (partial aggregation
   before the shuffle; identical records are counted once per pattern), plus a content hash per pattern; the
   columns with a small public domain are grouped as bit fields of int64 words (:class:`_KeyLayout`);
3. encode: per column, value -> integer code with the (driver-held) dictionary of values, in ``mapInArrow``;
   the encoded patterns are cached and read 2 R times;
4. per k = 1..R: one pass histograms |W_u| (per-record number of candidate k-tuples) for the DP percentile,
   one pass counts the contribution-bounded k-tuples (NumPy in ``mapInArrow``, one int64 array of candidate
   counts per task, summed by ``groupBy``). Only release-sized data reaches the driver: the dictionary of
   values, the histograms (<= C(d,k)+1 cells) and one count per candidate.
5. on the driver: noise on every candidate (exact discrete Gaussian), thresholds, candidates of the next
   length (Apriori), then normalization.

Privacy (docs/design.md section 2.7): (epsilon, delta)-DP with the budget split of :mod:`spark_dpsynth.privacy.accounting`:
the protected number of records is n + discrete Laplace(1/epsilon_N) clamped >= 1; each Delta_k is an
epsilon_Q-DP exponential-mechanism percentile over the public range 0..C(d,k); each count of a length-k
candidate (including zero counts) gets discrete Gaussian noise of std sigma_k sqrt(Delta_k) with L2 sensitivity
sqrt(Delta_k) after bounding each record to Delta_k tuples; 1-tuples are kept above rho_1, which pays delta/2
(Gopi, Mahabadi, Yekhanin, "Differentially Private Marginals", 2022, Algorithm 1 and Theorem 1.1). Noise is drawn
once, on the driver.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import itertools
import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from spark_dpsynth._progress import Progress, report
from spark_dpsynth.errors import InvalidParameterError
from spark_dpsynth.mechanisms import _counting
from spark_dpsynth.mechanisms._counting import CandidateIndex
from spark_dpsynth.mechanisms._discovery import (
    distinct_values,
    draw_protected_n,
    noisy_threshold,
    protected_n_of,
    public_domains,
    release_accountant,
)
from spark_dpsynth.mechanisms._manifest import (
    data_manifest,
    release_key,
    report_high_cardinality,
    report_identifiers,
    versions,
)
from spark_dpsynth.mechanisms._spark_backend import SparkBackend
from spark_dpsynth.mechanisms.budget_split import BudgetSplit, split_budget, thresholds_for
from spark_dpsynth.mechanisms.prelude import prepare_table
from spark_dpsynth.params import AggregationParams, DataConfig
from spark_dpsynth.privacy.accounting import Accountant, delta_from_protected_n
from spark_dpsynth.privacy.budget import Budget
from spark_dpsynth.privacy.noise import NoiseSource
from spark_dpsynth.registry import synthesizers_for
from spark_dpsynth.release.core import Marginal, Release
from spark_dpsynth.release.manifest import FORMAT_VERSION

__all__ = ["dp_aggregate", "aggregate_encoded", "LocalBackend"]

log = logging.getLogger(__name__)


class _Backend(Protocol):
    """Where the records live: Spark (production) or NumPy arrays (tests of the counting-and-noise core)."""

    def dictionary(self) -> list[tuple[str, ...]]: ...

    def histogram(self, index: CandidateIndex) -> np.ndarray: ...

    def counts(
        self, index: CandidateIndex, sensitivity: int, key: int, value_hash: tuple[np.ndarray, ...]
    ) -> np.ndarray: ...


@dataclass
class LocalBackend:
    """Records held as NumPy arrays: the same kernels as the Spark backend, without Spark (tests only)."""

    values: list[tuple[str, ...]]
    """Per column, the sorted distinct values (the dictionary)."""
    codes: np.ndarray
    """int32 (P, d) pattern codes into ``values``, -1 = empty."""
    multiplicity: np.ndarray
    """int64 (P,) number of records of each pattern."""
    record_hash: np.ndarray
    """uint64 (P,) content hash of each pattern."""

    @classmethod
    def from_rows(cls, rows: list[tuple[str | None, ...]] | list[list[str | None]], d: int) -> LocalBackend:
        """Build from rows of values (None = empty); identical rows become one pattern."""
        patterns: dict[tuple[str | None, ...], int] = {}
        for r in rows:
            t = tuple(r)
            if len(t) != d:
                raise InvalidParameterError(f"every row must have {d} values, got {len(t)}")
            patterns[t] = patterns.get(t, 0) + 1
        values = [tuple(sorted({v for p in patterns if (v := p[j]) is not None})) for j in range(d)]
        index = [{val: i for i, val in enumerate(vs)} for vs in values]
        keys = list(patterns)
        codes = np.array(
            [[-1 if (x := p[j]) is None else index[j][x] for j in range(d)] for p in keys], dtype=np.int32
        ).reshape(len(keys), d)
        mult = np.array([patterns[p] for p in keys], dtype=np.int64)
        rh = np.array(
            [
                _counting.value_hashes(["\x1e".join("\x00" if x is None else x for x in p)], -1)[0]
                for p in keys
            ],
            dtype=np.uint64,
        )
        return cls(values=values, codes=codes, multiplicity=mult, record_hash=rh)

    def dictionary(self) -> list[tuple[str, ...]]:
        return self.values

    def histogram(self, index: CandidateIndex) -> np.ndarray:
        return _counting.tuple_count_histogram(index, self.codes, self.multiplicity)

    def counts(
        self, index: CandidateIndex, sensitivity: int, key: int, value_hash: tuple[np.ndarray, ...]
    ) -> np.ndarray:
        out = np.zeros(len(index.keys), dtype=np.int64)
        _counting.bounded_counts(
            index, self.codes, self.multiplicity, self.record_hash, value_hash, sensitivity, key, out
        )
        return out


@dataclass
class _Level:
    """Released k-tuples of one length before normalization: per column subset, codes (m, k) and counts (m,)."""

    tuples: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]]


def aggregate_encoded(
    backend: _Backend,
    columns: tuple[str, ...],
    params: AggregationParams,
    acct: Accountant | None = None,
    progress: Progress | None = None,
    extra_manifest: Mapping[str, object] | None = None,
    *,
    budget: Budget | None = None,
    noise: NoiseSource | None = None,
    private_columns: frozenset[int] = frozenset(),
    max_attributes: int | None = None,
    protected_n: int | None = None,
    split: BudgetSplit | None = None,
    coverage_columns: frozenset[int] | None = None,
) -> Release:
    """The DP-marginals algorithm on encoded records (docs/design.md section 2).

    Args:
        backend: where the records are (Spark or NumPy); it returns only histograms and candidate counts.
        columns: the d attribute column names (public, except those in ``private_columns``).
        params: validated parameters (the shares of the budget, R, percentile, modes).
        acct: the release's accountant, through which every draw is made (default
            :func:`~spark_dpsynth.mechanisms._discovery.release_accountant` of ``budget`` and ``noise``).
        progress: optional callback receiving one short message per stage.
        extra_manifest: more public entries for the manifest (e.g. the data configuration).
        budget: the release's :class:`~spark_dpsynth.privacy.budget.Budget` when no ``acct`` is given.
        noise: the noise source of a new accountant (default production noise, or seeded test noise with the
            budget's seed); ignored with ``acct``.
        private_columns: indices of columns whose existence is private (the binary columns of multi-value
            values, found in the data): one stays in the release only when its attribute passed
            rho_1, and they do not count in the public ranges of the DP percentiles.
        max_attributes: public upper bound of the k=1 percentile range (attributes per record); default the
            number of public columns. Records above it count in its top cell.
        protected_n: the protected number of records when the caller already drew it through ``acct`` (before
            the DP bin edges, docs/design.md section 2.8); None draws it here.
        split: the budget split when the caller already spent it in ``acct`` (with the share of the DP profile
            it drew, section 2.8); None splits here. The empty counts are measured only when its 1-tuple share
            pays for them.
        coverage_columns: indices of the columns whose 1-way coverage is checked after the 1-way release
            (:func:`report_high_cardinality`); None: every public column.

    Returns:
        The release (not yet written). Its columns are ``columns`` without the private ones that released
        nothing.

    Raises:
        InvalidParameterError: the reporting length exceeds the number of public columns (checked only without
            private columns; with them, lengths beyond the released columns are simply empty).
    """
    d = len(columns)
    public_columns = [j for j in range(d) if j not in private_columns]
    if not private_columns:
        params.check_columns(d)
    k1_range = max_attributes if max_attributes is not None else len(public_columns)
    r = params.reporting_length
    acct = release_accountant(budget, noise, acct)
    protected_n = protected_n_of(protected_n, acct)
    key = release_key(acct.budget.seed)
    alpha = params.percentile / 100.0

    dictionary = backend.dictionary()  # private (values present); only rho_1 survivors are ever written
    value_hash = tuple(_counting.value_hashes(list(vals), j) for j, vals in enumerate(dictionary))

    # k = 1: every attribute present is a candidate; its histogram also gives n (never logged or written).
    radix1 = np.array([len(v) for v in dictionary], dtype=np.int64)
    index = CandidateIndex.build(
        1,
        d,
        tuple(np.arange(len(v), dtype=np.int32) for v in dictionary),
        radix1,
        {(j,): np.arange(len(v), dtype=np.int64)[:, None] for j, v in enumerate(dictionary)},
    )
    report(progress, log, "k=1: counting attributes per record")
    hist = backend.histogram(index)
    true_n = int(hist.sum())
    # Empty values are measured (docs/design.md section 2.8) when every column is public: each record then holds
    # exactly d 1-tuples, a value or "empty" per column, so Delta_1 = d is public and needs no percentile.
    measure_empty = not private_columns and (split is None or acct.right("marginals_k1").parts > 1)
    empty_counts: np.ndarray | None = None
    records_for_empty = true_n if measure_empty else 0

    if protected_n is None:
        protected_n = draw_protected_n(true_n, params, acct)
    del true_n
    if split is None:
        delta = acct.budget.delta_or(delta_from_protected_n(protected_n))
        split = split_budget(params, delta, acct=acct, empty_counts=measure_empty)
    sensitivities: dict[int, int] = {}
    thresholds: dict[int, float] = {}
    levels: dict[int, _Level] = {}
    survivors_lut: tuple[np.ndarray, ...] = ()
    domains: list[tuple[str, ...]] = []
    radix = radix1
    kept_columns = list(range(d))
    d_public = len(public_columns)
    high_cardinality: dict[str, object] = {}

    for k in range(1, r + 1):
        t0 = time.perf_counter()
        if k > 1:
            # Planner (docs/design.md section 4.7): stop before counting a length that cannot fit.
            params.check_subsets(d_public, k)
            tuples_by_subset = _candidates(levels[k - 1], d, k, radix)
            index = CandidateIndex.build(k, d, survivors_lut, radix, tuples_by_subset)
            if len(index.keys) > params.max_candidates:
                raise InvalidParameterError(
                    f"length {k} has {len(index.keys):,} candidate {k}-tuples (max_candidates "
                    f"{params.max_candidates:,}): too many to count and noise on the driver; use "
                    f"--synthesizer pgm (DP-selected marginals), or --reporting-length {k - 1}"
                )
            if len(index.keys):
                report(
                    progress,
                    log,
                    f"k={k}: counting candidate {k}-tuples per record ({len(index.keys)} candidates)",
                )
                hist = backend.histogram(index)
            else:
                # No candidate: every record has |W_u| = 0; the histogram is known without reading data.
                hist = np.zeros(len(index.subsets) + 1, dtype=np.int64)
                hist[0] = protected_n  # only its shape matters: every score is then equal
        # Step 3 of docs/design.md section 2.2: Delta_k, an epsilon_Q-DP percentile over the public range 0..C(d,k)
        # (k=1: 0..k1_range; k>1: d counts the public columns and the private ones that released a value, a public
        # number by then).
        top = k1_range if k == 1 else math.comb(d_public, k)
        full = np.zeros(top + 1, dtype=np.int64)
        full[: min(hist.shape[0], top + 1)] = hist[: top + 1]
        full[top] += hist[top + 1 :].sum()
        if k == 1 and measure_empty:
            sensitivity = d
        else:
            sensitivity = max(1, acct.quantile("percentiles", full, alpha))
        sensitivities[k] = sensitivity
        # Steps 4-5 of docs/design.md section 2.2: bounded counts of every candidate; then noise on every one of
        # them, zero counts included (section 2.4).
        report(progress, log, f"k={k}: counting bounded {k}-tuples (sensitivity {sensitivity})")
        if len(index.keys):
            counts = backend.counts(index, sensitivity, key, value_hash)
        else:
            counts = np.zeros(0, dtype=np.int64)
        # Thresholds (docs/design.md section 2.5).
        threshold = thresholds_for(params, split, k, sensitivity)
        thresholds[k] = threshold
        noisy, kept = noisy_threshold(counts, threshold, acct, f"marginals_k{k}", math.sqrt(sensitivity))
        if k == 1 and measure_empty:
            # c(j, empty) = n - sum of column j's value counts (exact: Delta_1 = d bounds no record), noised like
            # every 1-tuple count; the d "empty" candidates are public, so no threshold applies to them.
            column_of = index.subsets[index.decode(index.keys)[0], 0].astype(np.int64)
            values_sum = np.bincount(column_of, weights=counts, minlength=d).astype(np.int64)
            empty_counts = acct.gaussian(
                "marginals_k1", records_for_empty - values_sum, math.sqrt(sensitivity)
            )
            del values_sum, records_for_empty
        del counts
        subset_idx, codes = index.decode(index.keys[kept])
        level = _Level(tuples={})
        kept_counts = noisy[kept]
        for s in np.unique(subset_idx):
            rows = subset_idx == s
            level.tuples[tuple(int(c) for c in index.subsets[s])] = (codes[rows], kept_counts[rows])
        levels[k] = level
        if k == 1:
            # Recode to the released values only: code = index into the sorted released values of the column.
            survivors = [np.zeros(0, dtype=np.int64) for _ in range(d)]
            for (j,), (c, _) in level.tuples.items():
                survivors[j] = np.sort(c[:, 0])
            luts = []
            for j in range(d):
                lut = np.full(len(dictionary[j]), -1, dtype=np.int32)
                lut[survivors[j]] = np.arange(len(survivors[j]), dtype=np.int32)
                luts.append(lut)
            survivors_lut = tuple(luts)
            domains = [tuple(dictionary[j][i] for i in survivors[j].tolist()) for j in range(d)]
            radix = np.array([len(s) for s in survivors], dtype=np.int64)
            kept_columns = [j for j in range(d) if j not in private_columns or len(survivors[j])]
            d_public = len(kept_columns)
            levels[1] = _Level(
                tuples={
                    (j,): (luts[j][c[:, 0]][:, None].astype(np.int64), n)
                    for (j,), (c, n) in level.tuples.items()
                }
            )
            del dictionary
            # Identifier-like columns, from the 1-way release only (post-processing, docs/design.md 2.8).
            checked = public_columns if coverage_columns is None else sorted(coverage_columns)
            covered = {}
            for j in checked:
                _, n_j = levels[1].tuples.get((j,), (None, np.zeros(0, dtype=np.int64)))
                empty_j = max(0, int(empty_counts[j])) if empty_counts is not None else 0
                covered[columns[j]] = (len(n_j), float(np.sum(n_j)) + empty_j)
            high_cardinality = report_high_cardinality(covered, protected_n, progress)
        released = sum(len(n) for _, n in levels[k].tuples.values())
        log.info("k=%d: %d tuples released in %.1f s", k, released, time.perf_counter() - t0)

    marginals = _normalize(levels, r)
    if len(kept_columns) < d:
        marginals = _drop_columns(marginals, kept_columns, d)
    released_columns = tuple(columns[j] for j in kept_columns)
    manifest = _manifest(
        released_columns, params, split, acct, protected_n, sensitivities, thresholds, marginals
    )
    manifest["high_cardinality"] = high_cardinality
    if empty_counts is not None:
        manifest["empty_counts"] = {columns[j]: int(empty_counts[j]) for j in kept_columns}
        manifest["empty_counts_noise_std"] = split.sigmas[0] * math.sqrt(sensitivities[1])
    if extra_manifest:
        manifest.update(extra_manifest)
    return Release(
        columns=released_columns,
        domains=tuple(domains[j] for j in kept_columns),
        marginals=marginals,
        manifest=manifest,
    )


def _drop_columns(marginals: dict[int, Marginal], kept: list[int], d: int) -> dict[int, Marginal]:
    """Renumber column indices to ``kept`` (the dropped columns hold no released tuple); order is preserved."""
    lut = np.full(d, -1, dtype=np.int16)
    lut[kept] = np.arange(len(kept), dtype=np.int16)
    out = {}
    for k, m in marginals.items():
        cols = lut[m.columns]
        assert (cols >= 0).all(), "a dropped column holds released tuples"
        out[k] = Marginal(columns=cols, values=m.values, counts=m.counts)
    return out


def _local_keys(codes: np.ndarray, radix: np.ndarray, cols: tuple[int, ...]) -> np.ndarray:
    key = np.zeros(codes.shape[0], dtype=np.int64)
    for i, c in enumerate(cols):
        key = key * int(radix[c]) + codes[:, i]
    return key


def _candidates(previous: _Level, d: int, k: int, radix: np.ndarray) -> dict[tuple[int, ...], np.ndarray]:
    """V_k: k-tuples over distinct columns all of whose (k-1)-sub-tuples were released (Apriori; docs/design.md
    section 2.2, step 1)."""
    prev_keys = {cols: np.sort(_local_keys(c, radix, cols)) for cols, (c, _) in previous.tuples.items()}
    out: dict[tuple[int, ...], np.ndarray] = {}
    for cols in itertools.combinations(range(d), k):
        prefix, last = cols[:-1], cols[-1]
        if prefix not in previous.tuples or radix[last] == 0:
            continue
        left = previous.tuples[prefix][0]
        m, n_last = left.shape[0], int(radix[last])
        cand = np.concatenate(
            [np.repeat(left, n_last, axis=0), np.tile(np.arange(n_last, dtype=np.int64), m)[:, None]], axis=1
        )
        ok = np.ones(cand.shape[0], dtype=bool)
        for drop in range(k - 1):
            sub_cols = cols[:drop] + cols[drop + 1 :]
            if sub_cols not in prev_keys:
                ok[:] = False
                break
            sub = np.delete(cand, drop, axis=1)
            keys = prev_keys[sub_cols]
            q = _local_keys(sub, radix, sub_cols)
            pos = np.minimum(np.searchsorted(keys, q), len(keys) - 1)
            ok &= keys[pos] == q
        if ok.any():
            out[cols] = cand[ok]
    return out


def _normalize(levels: dict[int, _Level], r: int) -> dict[int, Marginal]:
    """Make every k-tuple's count <= the count of each of its (k-1)-sub-tuples (docs/design.md section 2.6), k = 2..R.

    Vectorized: each released table's tuples as sorted mixed-radix keys, so the counts of a table's sub-tuples are
    one ``searchsorted`` per dropped column (every sub-tuple of a released k-tuple was released: Apriori).
    """
    width = 1 + max((max(cols) for k in levels for cols in levels[k].tuples), default=-1)
    radix = np.ones(width, dtype=np.int64)
    for k in levels:
        for cols, (codes, _) in levels[k].tuples.items():
            if len(codes):
                np.maximum.at(radix, np.asarray(cols, dtype=np.int64), codes.max(axis=0).astype(np.int64) + 1)
    lookup: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}
    marginals: dict[int, Marginal] = {}
    for k in range(1, r + 1):
        cols_rows, vals_rows, count_rows = [], [], []
        for cols, (codes, counts) in sorted(levels[k].tuples.items()):
            counts = counts.astype(np.int64).copy()
            codes = np.asarray(codes, dtype=np.int64)
            if k > 1:
                for drop in range(k):
                    sub_cols = cols[:drop] + cols[drop + 1 :]
                    keys, sub_counts = lookup[sub_cols]
                    q = _local_keys(np.delete(codes, drop, axis=1), radix, sub_cols)
                    pos = np.minimum(np.searchsorted(keys, q), len(keys) - 1)
                    assert (keys[pos] == q).all(), "a released tuple has a sub-tuple that was not released"
                    np.minimum(counts, sub_counts[pos], out=counts)
            key = _local_keys(codes, radix, cols)
            order = np.argsort(key, kind="stable")
            lookup[cols] = (key[order], counts[order])
            cols_rows.append(np.broadcast_to(np.asarray(cols, dtype=np.int16), codes.shape))
            vals_rows.append(codes.astype(np.int32))
            count_rows.append(counts)
        if cols_rows:
            c = np.concatenate(cols_rows)
            v = np.concatenate(vals_rows)
            n = np.concatenate(count_rows)
        else:
            c = np.zeros((0, k), dtype=np.int16)
            v = np.zeros((0, k), dtype=np.int32)
            n = np.zeros(0, dtype=np.int64)
        from spark_dpsynth.release.core import sorted_marginal

        marginals[k] = sorted_marginal(c, v, n)
    return marginals


def _manifest(
    columns: tuple[str, ...],
    params: AggregationParams,
    split: BudgetSplit,
    acct: Accountant,
    protected_n: int,
    sensitivities: dict[int, int],
    thresholds: dict[int, float],
    marginals: dict[int, Marginal],
) -> dict[str, object]:
    r = params.reporting_length
    return {
        "format_version": FORMAT_VERSION,
        "mechanism": "marginals",
        "synthesizers": list(synthesizers_for("marginals")),
        "budget": acct.ledger().to_json(),
        "created_utc": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "test_mode": acct.test_mode,
        "noise_sampler": acct.noise_name,
        "columns": list(columns),
        "privacy_unit": "record",
        "reporting_length": r,
        "epsilon": split.epsilon,
        "delta": split.delta,
        "delta_source": acct.budget.delta_source,
        "rho": split.rho,
        "accounting": acct.accounting.value,
        "epsilon_n": split.epsilon_n,
        "epsilon_m": split.epsilon_m,
        "epsilon_q": split.epsilon_q,
        "percentile": params.percentile,
        "percentile_epsilon_proportion": params.percentile_epsilon_proportion,
        "number_of_records_epsilon_proportion": params.number_of_records_epsilon_proportion,
        "bins_rho": split.bins_rho,
        # kept for the DP exact values with a profile (spent when it finds measurements: the share exact_values)
        "exact_values_rho": split.bins_rho,
        "profile_columns": split.profile_columns,
        "accuracy_mode": params.accuracy_mode.value,
        "fabrication_mode": params.fabrication_mode.value,
        "sigma": split.sigma,
        "sigma_proportions": list(split.sigma_proportions),
        "sigmas": {str(k): split.sigmas[k - 1] for k in range(1, r + 1)},
        "sensitivities": {str(k): sensitivities[k] for k in range(1, r + 1)},
        "noise_std": {str(k): split.sigmas[k - 1] * math.sqrt(sensitivities[k]) for k in range(1, r + 1)},
        "thresholds": {str(k): thresholds[k] for k in range(1, r + 1)},
        "protected_number_of_records": int(protected_n),
        "released_tuples": {str(k): len(m) for k, m in sorted(marginals.items())},
        "parameters": {
            **acct.budget.parameters(),
            "reporting_length": r,
            "percentile": params.percentile,
            "percentile_epsilon_proportion": params.percentile_epsilon_proportion,
            "number_of_records_epsilon_proportion": params.number_of_records_epsilon_proportion,
            "bins_epsilon_proportion": params.bins_epsilon_proportion,
            "accuracy_mode": params.accuracy_mode.value,
            "sigma_proportions": list(params.sigma_proportions) if params.sigma_proportions else None,
            "fabrication_mode": params.fabrication_mode.value,
            "thresholds": list(params.thresholds) if params.thresholds else None,
        },
        "versions": versions(),
    }


@dataclass
class _AggregateShares:
    """The marginals mechanism's share of the prelude (:class:`~spark_dpsynth.mechanisms.prelude.PreludeShares`):
    the text test a pure share of epsilon before the conversion to zCDP; with a profile, n' and then the whole
    budget split (:func:`~spark_dpsynth.mechanisms.budget_split.split_budget`, kept in :attr:`split` for the
    measurement), whose rho B_p pays for the profile and, per column, for the exact values, whose threshold takes
    the quarter of delta the split keeps (spent unused without exact values)."""

    params: AggregationParams
    acct: Accountant
    empty_counts: bool
    unit: str = "rho"
    text_numbers_in_rho: bool = False
    domains: dict[str, object] = field(default_factory=dict)
    split: BudgetSplit | None = None
    """The budget split, made by :meth:`profile` (None without a profile: the measurement makes it)."""

    def protected_n(self, true_n: int) -> int:
        return draw_protected_n(true_n, self.params, self.acct)

    def rho(self, protected_n: int) -> float:
        raise AssertionError("the marginals mechanism tests numbers written as text in epsilon")

    def profile(self, types, need, protected_n):  # noqa: ANN001, ANN201 - see PreludeShares.profile
        from spark_dpsynth.mechanisms._profile import profile_parts, profile_units

        self.split = split_budget(
            self.params,
            self.acct.budget.delta_or(delta_from_protected_n(protected_n)),
            len(need),
            profile_parts=profile_parts(types, need),
            profile_units=profile_units(types, need),
            acct=self.acct,
            empty_counts=self.empty_counts,
        )
        return self.split.bins_rho

    def exact_values(self, exact: int, need: int, charged: float, protected_n: int) -> float:
        from spark_dpsynth.mechanisms._profile import spend_exact_values

        rho_e = charged * exact / need
        spend_exact_values(self.acct, self.acct.remaining_delta(), rho=rho_e)
        return rho_e

    def no_exact_values(self) -> None:
        self.acct.spend_delta(
            "exact_values_threshold", self.acct.remaining_delta(), "unused: no DP measurement off the grid"
        )


def dp_aggregate(
    df,  # noqa: ANN001 - pyspark.sql.DataFrame
    params: AggregationParams | None = None,
    data_config: DataConfig | None = None,
    *,
    budget: Budget | None = None,
    progress: Progress | None = None,
    noise: NoiseSource | None = None,
    acct: Accountant | None = None,
    protected_n: int | None = None,
) -> Release:
    """Compute a DP release of the k-way marginals (k = 1..R) of a Spark DataFrame.

    Args:
        df: the sensitive table (any schema); every row is one record, or with ``data_config.privacy_unit`` the
            rows of one person are one record.
        params: the mechanism's parameters (default :class:`AggregationParams`: R 3, percentile 99).
        data_config: columns, empty values, public bins, privacy unit, multi-value columns, record limit
            (default: every column, values as strings, each row a record).
        budget: the release's :class:`~spark_dpsynth.privacy.budget.Budget` when no ``acct`` is given (default
            epsilon 4, delta derived from n').
        progress: optional callback receiving one short message per stage.
        noise: the noise source of a new accountant (default: production noise, or test-mode noise with the
            budget's seed); ignored with ``acct``.
        acct: the run's :class:`~spark_dpsynth.privacy.accounting.Accountant` (every draw of the release goes
            through it; it holds the budget); default a new one for ``budget``
            (:func:`~spark_dpsynth.mechanisms._discovery.release_accountant`).
        protected_n: n' when the caller has already drawn it through ``acct`` at this release's epsilon_N
            (:func:`spark_dpsynth.mechanisms.choice.fit_auto`), >= 1; None draws it here.

    Returns:
        The :class:`~spark_dpsynth.release.core.Release`: for k = 1..R the released k-tuples of non-empty attributes
        with noisy, thresholded, normalized counts, and a manifest of the privacy parameters. Save it with
        ``release.save(path, spark)``.

    Raises:
        SchemaError: a configured column is not in ``df`` (checked on the schema before any data is read); a
            single-value column differs within one person's rows, or rows have no privacy unit (after one
            Spark job, naming columns only).
        InvalidParameterError: the reporting length exceeds the number of attribute columns; ``protected_n`` < 1
            or without the accountant that drew it.

    Privacy:
        (epsilon, delta)-DP per record, or per person with a privacy unit (see the module docstring; Gopi, Mahabadi,
        Yekhanin, "Differentially Private Marginals", Theorem 1.1; docs/design.md section 2.7). The binary columns
        of multi-value values are released only when their attribute passed rho_1: the release's columns are then
        data-dependent but private.
        Nothing in the release, the logs or an error depends on the true number of records or a true count.
    """
    from pyspark.sql import functions as F

    from spark_dpsynth.data.prepare import check_privacy_units, expand_multi_value, resolve_columns
    from spark_dpsynth.profile import identifiers_manifest

    params = params if params is not None else AggregationParams()
    data_config = data_config if data_config is not None else DataConfig()
    config = resolve_columns(df.columns, data_config)
    assert config.columns is not None
    if not config.multi_value:
        params.check_columns(len(config.columns))
    else:
        # A multi-value column gives at least one attribute column: a lower bound, checked before any read.
        params.check_subsets(len(config.columns))
    started = time.perf_counter()
    report(
        progress, log, f"aggregate: {len(config.columns)} columns, reporting length {params.reporting_length}"
    )
    # Column types and bins (docs/design.md section 2.8): from the schema and the configuration (public), then
    # the DP profile of the numeric columns without public edges (code or measurement, DP bins).
    identifiers = identifiers_manifest(df.schema, config)
    report_identifiers(identifiers, progress)
    acct = release_accountant(budget, noise, acct)
    shares = _AggregateShares(params, acct, empty_counts=not config.multi_value)
    table = prepare_table(
        df,
        config,
        acct,
        shares,
        stage="aggregate",
        progress=progress,
        protected_n=protected_n_of(protected_n, acct),
    )
    config, types, prepared = table.config, table.types, table.records
    assert config.columns is not None
    names: tuple[str, ...] = config.columns
    derived: dict[str, tuple[str, str]] = {}
    cached = None
    if config.merges_rows:
        # Persons (merged rows) and split multi-value cells are read up to three times before the patterns:
        # the privacy-unit check, the values of the multi-value columns, the patterns.
        cached = prepared = prepared.persist()
    try:
        if config.privacy_unit is not None:
            report(
                progress, log, f"aggregate: merging the rows of each privacy unit ({config.privacy_unit!r})"
            )
            check_privacy_units(prepared, config)
        if config.multi_value:
            # Private: every value present, held on the driver like the dictionary; only those whose attribute
            # passes rho_1 are ever written (as derived column names).
            values = {c: distinct_values(prepared, c) for c in config.multi_value}
            prepared, names, derived = expand_multi_value(prepared, config, values)
            del values
        n_single = len(config.columns) - len(config.multi_value)
        private = frozenset(i for i, c in enumerate(names) if c in derived)
        # Positional column names in the Spark plan: derived names hold values that may never be released,
        # and names with dots or backticks are not safe in every DataFrame call.
        positional = tuple(f"_a{j}" for j in range(len(names)))
        prepared = prepared.select(
            *[F.col(f"`{c}`").alias(p) for c, p in zip(names, positional, strict=True)]
        )
        backend = SparkBackend(prepared, positional, public_domains(names, config, derived))
        try:
            release = aggregate_encoded(
                backend,
                names,
                params,
                progress=progress,
                acct=acct,
                extra_manifest={
                    **data_manifest(config, identifiers),
                    "column_types": table.column_types,
                    "column_meanings": table.column_meanings,
                },
                private_columns=private,
                protected_n=table.protected_n,
                split=shares.split,
                coverage_columns=frozenset(
                    j for j, c in enumerate(names) if c in types and _values_found_in_data(c, types, config)
                ),
                max_attributes=n_single + config.max_multi_values * len(config.multi_value)
                if private
                else None,
            )
        finally:
            backend.release_cache()
    finally:
        if cached is not None:
            cached.unpersist()
    if derived:
        multi_value_columns = {
            c: {
                "column": derived[c][0],
                "value": derived[c][1],
                "delimiter": config.multi_value[derived[c][0]],
            }
            for c in release.columns
            if c in derived
        }
        release = dataclasses.replace(
            release, manifest=release.manifest.with_entries(multi_value_columns=multi_value_columns)
        )
    report(
        progress, log, f"aggregate: done in {time.perf_counter() - started:.1f} s, sizes {release.sizes()}"
    )
    return release


def _values_found_in_data(name: str, types: Mapping[str, object], config: DataConfig) -> bool:
    """True for a single-value category column without public values (no bins, no domain): its released values
    are found in the data, so it may be identifier-like (docs/design.md section 2.8)."""
    t = types.get(name)
    return (
        getattr(t, "scale", "category") == "category"
        and name not in config.multi_value
        and name not in config.public_domains
        and name not in config.bins
    )


def check_data(params: AggregationParams, data: DataConfig) -> None:
    """The planner's check before Spark starts (docs/design.md section 4.7): with the columns configured, C(d, R)
    column subsets must fit ``max_column_subsets`` (a multi-value column counts once: a lower bound).

    Raises:
        InvalidParameterError: naming the count and what to change.
    """
    if data.columns is not None:
        params.check_subsets(len(data.columns))


def run(df, params: AggregationParams, data: DataConfig, context):  # noqa: ANN001, ANN201 - DataFrame, MechanismContext -> Fitted
    """The registry's entry point of the marginals mechanism: :func:`dp_aggregate` (see there for the schema,
    the errors and the privacy guarantee); the release is all it writes."""
    from spark_dpsynth.registry import Fitted

    release = dp_aggregate(
        df, params, data, progress=context.progress, acct=context.accountant, protected_n=context.protected_n
    )
    return Fitted(release=release)
