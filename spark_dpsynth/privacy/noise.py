"""Sources of privacy noise: exact integer samplers, drawn on the driver, once per release.

* :class:`CryptographicNoise` (production): OpenDP's exact discrete Gaussian and discrete Laplace samplers and
  its noisy-max (exponential mechanism) over the operating system's cryptographic random source
  (Canonne, Kamath, Steinke 2020, "The Discrete Gaussian for Differential Privacy"; no floating-point noise:
  Mironov 2012, Jin et al. 2022; docs/design.md section 7.1).
* :class:`spark_dpsynth.privacy._seeded.SeededNoise` (test mode only): the same distributions from a seeded NumPy
  generator, so that a release can be reproduced in tests. A release made with it is NOT private and its manifest
  says so. Every non-cryptographic generator lives in that one module, outside the privacy code path.
* :class:`NoNoise` (internal, tests of exact worked examples): zero noise, exact percentiles, the best score.

The DP percentile (docs/design.md section 2.2) is the exponential mechanism over the public candidates 0..C(d,k) with the
score of OpenDP's ``make_quantile_score_candidates`` (Smith 2011): for alpha = num/den,
score(c) = |(den - num) #{x < c} - num #{x > c}|, of sensitivity max(num, den - num) under adding or removing one
record. It is computed here from a histogram of per-record values, so records never leave the executors.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

import numpy as np

from spark_dpsynth.privacy._quantile import quantile_scores

__all__ = [
    "NoiseSource",
    "CryptographicNoise",
    "NoNoise",
    "quantile_scores",
    "noise_source_for",
]


class NoiseSource(Protocol):
    """What the aggregation needs from a source of privacy noise."""

    name: str
    test_mode: bool

    def discrete_gaussian(self, scale: float, size: int) -> np.ndarray:
        """int64 array of ``size`` independent discrete Gaussian draws N_Z(0, scale^2)."""
        ...

    def discrete_laplace(self, scale: float, size: int) -> np.ndarray:
        """int64 array of ``size`` independent discrete Laplace draws, P(x) proportional to exp(-|x| / scale)."""
        ...

    def quantile(self, histogram: np.ndarray, alpha: float, epsilon: float) -> int:
        """An epsilon-DP alpha-quantile of values 0..len(histogram)-1 (histogram[v] = number of records with v)."""
        ...

    def exponential(self, scores: np.ndarray, sensitivity: float, rho: float) -> int:
        """The exponential mechanism in its rho-zCDP form: index i with probability proportional to
        exp(sqrt(2 rho) scores[i] / sensitivity) (an epsilon = sqrt(8 rho) exponential mechanism; bounded-range
        analysis, Cesar and Rogers 2021, as AIM uses it)."""
        ...


class CryptographicNoise:
    """Exact samplers of OpenDP over the OS's cryptographic random source (production)."""

    name = "opendp-exact-csprng"
    test_mode = False

    def __init__(self) -> None:
        import opendp.prelude as dp

        dp.enable_features("contrib")
        self._dp = dp

    def discrete_gaussian(self, scale: float, size: int) -> np.ndarray:
        if size == 0:
            return np.zeros(0, dtype=np.int64)
        dp = self._dp
        m = dp.m.make_gaussian(
            dp.vector_domain(dp.atom_domain(T=dp.i64)), dp.l2_distance(T=dp.i64), scale=float(scale)
        )
        return _drawn_in_parts(m, size)

    def discrete_laplace(self, scale: float, size: int) -> np.ndarray:
        if size == 0:
            return np.zeros(0, dtype=np.int64)
        dp = self._dp
        m = dp.m.make_laplace(
            dp.vector_domain(dp.atom_domain(T=dp.i64)), dp.l1_distance(T=dp.i64), scale=float(scale)
        )
        return _drawn_in_parts(m, size)

    def quantile(self, histogram: np.ndarray, alpha: float, epsilon: float) -> int:
        dp = self._dp
        scores, sensitivity = quantile_scores(histogram, alpha)
        space = dp.vector_domain(dp.atom_domain(T=dp.u64)), dp.linf_distance(T=dp.u64)

        def make(scale: float):  # noqa: ANN202 - OpenDP measurement
            return dp.m.make_noisy_max(*space, dp.max_divergence(), scale=scale, negate=True)

        scale = dp.binary_search_param(make, d_in=sensitivity, d_out=float(epsilon))
        return int(make(scale)([int(s) for s in scores]))

    def exponential(self, scores: np.ndarray, sensitivity: float, rho: float) -> int:
        # OpenDP's report-noisy-max with Gumbel noise under zCDP: rho = (sensitivity / scale)^2 / 2, i.e. the
        # exponential mechanism of epsilon = 2 sensitivity / scale with its bounded-range rho = epsilon^2 / 8.
        dp = self._dp
        space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.linf_distance(T=float)
        scale = float(sensitivity) / float(np.sqrt(2.0 * rho))
        m = dp.m.make_noisy_max(*space, dp.zero_concentrated_divergence(), scale=scale)
        assert m.map(float(sensitivity)) <= rho * (1 + 1e-9)
        return int(m([float(x) for x in np.asarray(scores, dtype=np.float64)]))


PARALLEL_DRAWS = 8192
"""Vectors of noise at least twice this long are drawn in parts of about this length on the driver's cores."""


def _drawn_in_parts(measurement, size: int) -> np.ndarray:  # noqa: ANN001 - an OpenDP Measurement
    """``size`` independent draws of ``measurement`` (an OpenDP noise measurement on a vector of i64 zeros).

    OpenDP's exact samplers cost microseconds a draw (rational arithmetic, one cryptographic byte string each),
    and its library calls release the GIL (ctypes): a long vector is drawn in parts on a thread per core. The
    draws are independent and identically distributed, so the parts together are one vector of ``size`` draws
    whatever the number of parts (the DP profile of a wide table draws tens of thousands per column,
    docs/design.md section 2.8).
    """
    workers = min(os.cpu_count() or 1, size // PARALLEL_DRAWS)
    if workers < 2:
        return np.asarray(measurement([0] * size), dtype=np.int64)
    bounds = np.linspace(0, size, workers + 1).astype(int)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="spark-dpsynth-noise") as pool:
        parts = list(pool.map(lambda n: measurement([0] * int(n)), np.diff(bounds)))
    return np.concatenate([np.asarray(p, dtype=np.int64) for p in parts])


class NoNoise:
    """No noise and exact percentiles: for tests that reproduce worked examples exactly. Never private."""

    name = "none (exact, not private)"
    test_mode = True

    def discrete_gaussian(self, scale: float, size: int) -> np.ndarray:
        return np.zeros(size, dtype=np.int64)

    def discrete_laplace(self, scale: float, size: int) -> np.ndarray:
        return np.zeros(size, dtype=np.int64)

    def quantile(self, histogram: np.ndarray, alpha: float, epsilon: float) -> int:
        scores, _ = quantile_scores(histogram, alpha)
        return int(np.argmin(scores))

    def exponential(self, scores: np.ndarray, sensitivity: float, rho: float) -> int:
        return int(np.argmax(np.asarray(scores, dtype=np.float64)))


def noise_source_for(seed: int | None) -> NoiseSource:
    """The production source when ``seed`` is None, else the seeded test-mode source."""
    if seed is None:
        return CryptographicNoise()
    from spark_dpsynth.privacy._seeded import SeededNoise

    return SeededNoise(seed)
