"""Issue 3: statistical privacy tests on the counting-and-noise core (items 1, 2, 3, 4, 6, 9).

Many repetitions run on the core (``_counting`` kernels, ``noisy_threshold``, the noise sources) with small data,
not through a Spark job per repetition; tests/test_privacy_spark.py shows the job runs this same core.
Each stochastic assertion states its false-positive rate.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import beta, chisquare

from spark_dpsynth.mechanisms import _counting
from spark_dpsynth.mechanisms._counting import CandidateIndex
from spark_dpsynth.mechanisms._discovery import noisy_threshold as threshold_through
from spark_dpsynth.mechanisms.budget_split import split_budget, thresholds_for
from spark_dpsynth.mechanisms.marginals import LocalBackend, aggregate_encoded
from spark_dpsynth.params import AggregationParams
from spark_dpsynth.privacy._seeded import SeededNoise
from spark_dpsynth.privacy.accounting import Accountant, rho_1_threshold
from spark_dpsynth.privacy.budget import Budget
from spark_dpsynth.privacy.noise import CryptographicNoise, NoiseSource, NoNoise


def noisy_threshold(
    counts: np.ndarray,
    scale: float,
    threshold: float,
    noise: NoiseSource,
) -> tuple[np.ndarray, np.ndarray]:
    """The mechanisms' noise-and-threshold step at noise std ``scale``: one share of a fresh accountant whose
    discrete Gaussian has that std (L2 sensitivity 1), drawn from ``noise``."""
    acct = Accountant(Budget(1.0), noise=noise)
    acct.set_rho(1.0 / (2.0 * scale * scale))
    acct.spend_rho("counts", 1.0 / (2.0 * scale * scale), "discrete Gaussian", sigma=scale)
    return threshold_through(counts, threshold, acct, "counts", 1.0)


ALPHA = 1e-6  # false-positive rate of each chi-square / Clopper-Pearson check


# ------------------------------------------------------------------ 1. noise distributions (chi-square)


def _chi_square_p(draws: np.ndarray, log_pmf, width: int) -> float:  # noqa: ANN001
    """p-value of a chi-square goodness-of-fit test over the integers -width..width (tails merged)."""
    support = np.arange(-50 * width, 50 * width + 1)
    logp = log_pmf(support)
    pmf = np.exp(logp - logp.max())
    pmf /= pmf.sum()
    inner = np.arange(-width, width + 1)
    expected = (
        np.concatenate(
            (
                [pmf[support < -width].sum()],
                pmf[(support >= -width) & (support <= width)],
                [pmf[support > width].sum()],
            )
        )
        * draws.shape[0]
    )
    observed = np.concatenate(
        (
            [np.sum(draws < -width)],
            np.bincount(np.clip(draws, -width, width) + width, minlength=inner.shape[0]),
            [0],
        )
    ).astype(float)
    observed[1] -= np.sum(draws < -width)  # clip put the low tail into -width
    observed[-2] -= np.sum(draws > width)
    observed[-1] = np.sum(draws > width)
    keep = expected >= 5
    obs, exp = observed[keep], expected[keep]
    return float(chisquare(obs, exp * obs.sum() / exp.sum()).pvalue)


def _gaussian(sigma: float):  # noqa: ANN202
    return lambda x: -(x.astype(float) ** 2) / (2 * sigma**2)


def _laplace(scale: float):  # noqa: ANN202
    return lambda x: -np.abs(x.astype(float)) / scale


@pytest.mark.parametrize("sigma", [2.5, 11.3])
def test_noise_distribution_discrete_gaussian_chi_square(sigma: float) -> None:
    """1e5 production draws fit N_Z(0, sigma^2) (p > 1e-6) and reject 0.7x and 1.3x the scale (p < 1e-6)."""
    draws = CryptographicNoise().discrete_gaussian(sigma, 100_000)
    width = int(math.ceil(4 * sigma))
    assert _chi_square_p(draws, _gaussian(sigma), width) > ALPHA
    assert _chi_square_p(draws, _gaussian(0.7 * sigma), width) < ALPHA
    assert _chi_square_p(draws, _gaussian(1.3 * sigma), width) < ALPHA


def test_long_noise_vectors_are_drawn_in_parts_of_the_asked_total(monkeypatch: pytest.MonkeyPatch) -> None:
    """A long vector is drawn in parts on threads (one per core), together exactly the size asked, in order."""
    from spark_dpsynth.privacy import noise

    calls: list[int] = []

    def measurement(zeros: list[int]) -> list[int]:
        calls.append(len(zeros))
        return [len(calls)] * len(zeros)  # which part a draw came from

    monkeypatch.setattr(noise.os, "cpu_count", lambda: 4)
    out = noise._drawn_in_parts(measurement, 5 * noise.PARALLEL_DRAWS)
    assert out.dtype == np.int64 and out.shape == (5 * noise.PARALLEL_DRAWS,)
    assert len(calls) == 4 and sum(calls) == out.shape[0]
    assert sorted(np.unique(out).tolist()) == [1, 2, 3, 4]
    calls.clear()
    assert noise._drawn_in_parts(measurement, noise.PARALLEL_DRAWS).shape == (noise.PARALLEL_DRAWS,)
    assert calls == [noise.PARALLEL_DRAWS], "a short vector is one call"


@pytest.mark.parametrize("scale", [3.0, 20.0])
def test_noise_distribution_discrete_laplace_chi_square(scale: float) -> None:
    """1e5 production draws (the protected n's noise) fit the discrete Laplace and reject 0.7x and 1.3x."""
    draws = CryptographicNoise().discrete_laplace(scale, 100_000)
    width = int(math.ceil(5 * scale))
    assert _chi_square_p(draws, _laplace(scale), width) > ALPHA
    assert _chi_square_p(draws, _laplace(0.7 * scale), width) < ALPHA
    assert _chi_square_p(draws, _laplace(1.3 * scale), width) < ALPHA


def test_test_mode_sampler_has_the_same_distribution() -> None:
    draws = SeededNoise(5).discrete_gaussian(4.2, 100_000)
    assert _chi_square_p(draws, _gaussian(4.2), 17) > ALPHA
    assert _chi_square_p(draws, _gaussian(0.7 * 4.2), 17) < ALPHA


# ------------------------------------------------------------------ helpers: counts of D and D' on the core


def _backend(rows: list) -> LocalBackend:
    return LocalBackend.from_rows(rows, len(rows[0]))


def _counts_on(
    rows: list, index: CandidateIndex, values: list, sensitivity: int, key: int = 99
) -> np.ndarray:
    """Bounded counts of ``rows`` encoded with ``values`` (a dictionary covering D and D')."""
    d = len(values)
    lookup = [{v: i for i, v in enumerate(vals)} for vals in values]
    patterns: dict = {}
    for r in rows:
        patterns[tuple(r)] = patterns.get(tuple(r), 0) + 1
    keys = list(patterns)
    codes = np.array(
        [[-1 if p[j] is None else lookup[j][p[j]] for j in range(d)] for p in keys], dtype=np.int32
    )
    mult = np.array([patterns[p] for p in keys], dtype=np.int64)
    rh = np.array([_counting.value_hashes(["|".join(map(str, p))], -1)[0] for p in keys], dtype=np.uint64)
    hashes = tuple(_counting.value_hashes(list(v), j) for j, v in enumerate(values))
    out = np.zeros(len(index.keys), dtype=np.int64)
    _counting.bounded_counts(index, codes, mult, rh, hashes, sensitivity, key, out)
    return out


def _full_index(values: list, k: int) -> CandidateIndex:
    d = len(values)
    radix = np.array([len(v) for v in values], dtype=np.int64)
    tuples = {
        cols: np.array(list(itertools.product(*[range(radix[c]) for c in cols])), dtype=np.int64).reshape(
            -1, k
        )
        for cols in itertools.combinations(range(d), k)
    }
    return CandidateIndex.build(k, d, tuple(np.arange(len(v), dtype=np.int32) for v in values), radix, tuples)


def _dataset(n: int = 400, d: int = 4, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)  # the data set only
    return [tuple(f"v{j}_{rng.integers(0, 3)}" for j in range(d)) for _ in range(n)]


# ------------------------------------------------------------------ 2. neighbouring datasets (delta-hat)


def _delta_hat(p: np.ndarray, q: np.ndarray, epsilon: float) -> float:
    """sum over outputs of max(0, P_D(o) - e^eps P_D'(o)), both directions."""
    return max(
        float(np.maximum(0, p - math.exp(epsilon) * q).sum()),
        float(np.maximum(0, q - math.exp(epsilon) * p).sum()),
    )


def _histogram(stat: np.ndarray, edges: np.ndarray) -> np.ndarray:
    return np.histogram(stat, bins=edges)[0] / stat.shape[0]


@pytest.mark.slow
def test_neighbouring_datasets_delta_hat() -> None:
    """D vs D' = D + one worst-case record (every attribute non-empty), 1e6 releases of the 1-way marginal.

    The output is projected on the sum of the record's d noisy cells (the most powerful statistic for a shift
    of the Gaussian part; any projection of a DP output is DP). delta-hat stays below delta + 0.002 with the
    real noise and exceeds it when the noise is halved. Noise: the test-mode sampler (same distribution as the
    production one, see test_test_mode_sampler_has_the_same_distribution), for 1e6 repetitions in seconds.
    """
    epsilon, delta, d = 1.0, 1e-3, 4
    params = AggregationParams(reporting_length=1)
    budget = Budget(epsilon=epsilon, delta=delta)
    split = split_budget(params, delta, budget=budget)
    rows = _dataset(d=d)
    worst = ("v0_0", "v1_1", "v2_2", "v3_0")
    values = [sorted({r[j] for r in rows}) for j in range(d)]
    index = _full_index(values, 1)
    sensitivity = d  # every record has d non-empty attributes: the percentile's answer
    c_d = _counts_on(rows, index, values, sensitivity)
    c_d2 = _counts_on([*rows, worst], index, values, sensitivity)
    cells = np.flatnonzero(c_d2 - c_d)
    assert cells.shape[0] == d
    threshold = thresholds_for(params, split, 1, sensitivity)
    repetitions = 1_000_000

    def statistic(counts: np.ndarray, scale: float, seed: int) -> np.ndarray:
        tiled = np.tile(counts[cells], repetitions)
        noisy, kept = noisy_threshold(tiled, scale, threshold, SeededNoise(seed))
        return np.where(kept, noisy, 0).reshape(repetitions, d).sum(axis=1)

    scale = split.sigmas[0] * math.sqrt(sensitivity)
    a, b = statistic(c_d, scale, 1), statistic(c_d2, scale, 2)
    edges = np.arange(min(a.min(), b.min()) - 0.5, max(a.max(), b.max()) + 8, 8)
    honest = _delta_hat(_histogram(a, edges), _histogram(b, edges), epsilon)
    print(f"delta-hat honest={honest:.2e}")
    assert honest < delta + 0.002, honest
    a, b = statistic(c_d, scale / 2, 3), statistic(c_d2, scale / 2, 4)
    edges = np.arange(min(a.min(), b.min()) - 0.5, max(a.max(), b.max()) + 4, 4)
    halved = _delta_hat(_histogram(a, edges), _histogram(b, edges), epsilon)
    print(f"delta-hat halved={halved:.2e}")
    assert halved > delta + 0.002, halved


def test_new_attributes_pass_rho_1_with_probability_at_most_delta_half() -> None:
    """A record whose d values are all new: in D they are not candidates, in D' each has count 1. The
    probability that any of them is released is <= delta/2 (seed 001, 3.3), and rho_1 is the smallest integer
    threshold that keeps this promise: one less leaks more than delta/2. 1e6 repetitions, Clopper-Pearson
    bounds at confidence 1 - 1e-6. (The seed's continuous formula fails the first check with discrete noise.)"""
    epsilon, delta, d = 1.0, 1e-2, 4  # a large delta makes the event frequent enough to measure
    params = AggregationParams(reporting_length=1)
    budget = Budget(epsilon=epsilon, delta=delta)
    split = split_budget(params, delta, budget=budget)
    threshold = thresholds_for(params, split, 1, d)
    scale = split.sigmas[0] * math.sqrt(d)
    repetitions = 1_000_000

    def leak_bounds(t: float, seed: int) -> tuple[float, float]:
        _, kept = noisy_threshold(np.ones(d * repetitions, dtype=np.int64), scale, t, SeededNoise(seed))
        hits = int(kept.reshape(repetitions, d).any(axis=1).sum())
        low = beta.ppf(ALPHA, hits, repetitions - hits + 1) if hits else 0.0
        return low, beta.ppf(1 - ALPHA, hits + 1, repetitions - hits)

    low, _ = leak_bounds(threshold, 8)
    assert low <= delta / 2
    low_one_less, _ = leak_bounds(threshold - 1, 9)
    assert low_one_less > delta / 2
    continuous, _ = leak_bounds(rho_1_threshold(split.sigmas[0], d, delta), 10)
    assert continuous > delta / 2  # the finding: the continuous formula over-spends with discrete noise


# ------------------------------------------------------------------ 3. empirical epsilon lower bounds


def _epsilon_lower_bound(hits_d: int, hits_d2: int, n: int, delta: float = 0.0) -> float:
    """ln((P_D'(S)_low - delta) / P_D(S)_high) with Clopper-Pearson bounds at confidence 1 - 1e-6 each."""
    low = beta.ppf(ALPHA, hits_d2, n - hits_d2 + 1) if hits_d2 else 0.0
    high = beta.ppf(1 - ALPHA, hits_d + 1, n - hits_d)
    return math.log(max(low - delta, 1e-300) / high)


@pytest.mark.parametrize("wrong", [None, 0.7])
def test_empirical_epsilon_of_protected_n(wrong: float | None) -> None:
    """n vs n+1 through the production discrete Laplace of the protected n: the Clopper-Pearson lower bound on
    epsilon_N is <= the claimed epsilon_N, and > it when the scale is 0.7x (the test can fail)."""
    params = AggregationParams(number_of_records_epsilon_proportion=0.5, percentile_epsilon_proportion=0.01)
    epsilon_n = params.number_of_records_epsilon_proportion * 2.0
    scale = (1.0 / epsilon_n) * (wrong or 1.0)
    n, draws = 1000, 200_000
    noise = CryptographicNoise()
    out_d = n + noise.discrete_laplace(scale, draws)
    out_d2 = n + 1 + noise.discrete_laplace(scale, draws)
    hits = lambda out: int(np.sum(out >= n + 1))  # noqa: E731 - the event S = {n' >= n + 1}
    bound = _epsilon_lower_bound(hits(out_d), hits(out_d2), draws)
    if wrong is None:
        assert bound <= epsilon_n
        assert bound > 0.9 * epsilon_n  # the bound is informative
    else:
        assert bound > epsilon_n


def test_empirical_epsilon_of_one_marginal_cell() -> None:
    """One 1-way cell, count c vs c+1 (R=1, Delta_1 = 1): Clopper-Pearson lower bound <= the claimed epsilon."""
    params = AggregationParams(reporting_length=1)
    budget = Budget(epsilon=1.0, delta=1e-5)
    split = split_budget(params, 1e-5, budget=budget)
    scale = split.sigmas[0]
    threshold = thresholds_for(params, split, 1, 1)
    draws = 400_000
    c = 200
    noisy_d, kept_d = noisy_threshold(
        np.full(draws, c, dtype=np.int64), scale, threshold, CryptographicNoise()
    )
    noisy_d2, kept_d2 = noisy_threshold(
        np.full(draws, c + 1, dtype=np.int64), scale, threshold, CryptographicNoise()
    )
    for cut in (c + 1.5 * scale, c + 2.5 * scale):
        bound = _epsilon_lower_bound(
            int(np.sum(kept_d & (noisy_d > cut))), int(np.sum(kept_d2 & (noisy_d2 > cut))), draws, 1e-5
        )
        assert bound <= budget.epsilon


# ------------------------------------------------------------------ 4. sensitivity of the bounded counts


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("sensitivity", [1, 2, 5, 10])
def test_sensitivity_of_bounded_counts(k: int, sensitivity: int) -> None:
    """Same key (same randomness): D vs D' = D + a worst-case record changes the k-way count vector in at most
    Delta_k cells, each by exactly +1."""
    d = 5
    rows = _dataset(n=300, d=d, seed=k)
    worst = tuple(f"v{j}_{j % 3}" for j in range(d))
    values = [sorted({r[j] for r in rows} | {worst[j]}) for j in range(d)]
    index = _full_index(values, k)
    diff = _counts_on([*rows, worst], index, values, sensitivity) - _counts_on(
        rows, index, values, sensitivity
    )
    assert np.all((diff == 0) | (diff == 1))
    assert int(diff.sum()) == min(sensitivity, math.comb(d, k))


# ------------------------------------------------------------------ 6. a unique value is never released


def test_unique_value_never_released_in_200_releases() -> None:
    """A value held by exactly one record appears in 0 of 200 production releases at epsilon 1 (delta 1e-6)."""
    rows = _dataset(n=2000, d=4, seed=3)
    rows[17] = ("UNIQUE", *rows[17][1:])
    backend = _backend(rows)
    params = AggregationParams(reporting_length=2)
    budget = Budget(epsilon=1.0, delta=1e-6)
    noise = CryptographicNoise()
    appearances = 0
    for _ in range(200):
        release = aggregate_encoded(backend, ("a", "b", "c", "d"), params, noise=noise, budget=budget)
        appearances += "UNIQUE" in release.domains[0]
        assert release.sizes()[1] > 0
    assert appearances == 0


# ------------------------------------------------------------------ 9. integer safety


class _ConstantNoise(NoNoise):
    def discrete_gaussian(self, scale: float, size: int) -> np.ndarray:
        return np.full(size, -3, dtype=np.int64)


def test_counts_above_2_to_31_pass_through_noise_exactly() -> None:
    big = 3 * 2**31 + 7
    backend = LocalBackend(
        values=[("x", "y"), ("p",)],
        codes=np.array([[0, 0], [1, -1]], dtype=np.int32),
        multiplicity=np.array([big, 2**33], dtype=np.int64),
        record_hash=np.array([1, 2], dtype=np.uint64),
    )
    params = AggregationParams(reporting_length=2, percentile=100)
    budget = Budget(epsilon=1.0, delta=1e-6)
    release = aggregate_encoded(backend, ("c0", "c1"), params, noise=_ConstantNoise(), budget=budget)
    counts = release.counts_by_tuple()
    assert counts[((0, 0),)] == big - 3
    assert counts[((0, 1),)] == 2**33 - 3
    assert counts[((1, 0),)] == big - 3
    assert counts[((0, 0), (1, 0))] == big - 3
    assert all(isinstance(v, int) for v in counts.values())
    assert release.protected_number_of_records == big + 2**33
