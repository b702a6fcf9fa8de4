"""Sources of privacy noise: exact integer samplers, drawn on the driver, once per release.

* :class:`CryptographicNoise` (production): OpenDP's exact discrete Gaussian and discrete Laplace samplers and
  its noisy-max (exponential mechanism) over the operating system's cryptographic random source
  (Canonne, Kamath, Steinke 2020, "The Discrete Gaussian for Differential Privacy"; no floating-point noise:
  Mironov 2012, Jin et al. 2022).
* :class:`SeededNoise` (test mode only): the same distributions from a seeded NumPy generator, so that a
  release can be reproduced in tests. A release made with it is NOT private and its manifest says so.
* :class:`NoNoise` (internal, tests of exact worked examples): zero noise and exact percentiles.

The DP percentile (seed 001, 3.2.1) is the exponential mechanism over the public candidates 0..C(d,k) with the
score of OpenDP's ``make_quantile_score_candidates`` (Smith 2011): for alpha = num/den,
score(c) = |(den - num) #{x < c} - num #{x > c}|, of sensitivity max(num, den - num) under adding or removing one
record. It is computed here from a histogram of per-record values, so records never leave the executors.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Protocol

import numpy as np

__all__ = [
    "NoiseSource",
    "CryptographicNoise",
    "SeededNoise",
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

    def discrete_laplace(self, scale: float) -> int:
        """One discrete Laplace draw, P(x) proportional to exp(-|x| / scale)."""
        ...

    def quantile(self, histogram: np.ndarray, alpha: float, epsilon: float) -> int:
        """An epsilon-DP alpha-quantile of values 0..len(histogram)-1 (histogram[v] = number of records with v)."""
        ...


def _alpha_fraction(alpha: float) -> Fraction:
    return Fraction(alpha).limit_denominator(10_000)


def quantile_scores(histogram: np.ndarray, alpha: float) -> tuple[np.ndarray, int]:
    """Scores of the candidates 0..len(histogram)-1 (lower is better) and their sensitivity.

    score(c) = |(den - num) #{x < c} - num #{x > c}| with alpha = num/den (OpenDP's quantile score, Smith 2011).
    Adding or removing one record changes every score by at most max(num, den - num).
    """
    h = np.asarray(histogram, dtype=np.int64)
    frac = _alpha_fraction(alpha)
    num, den = frac.numerator, frac.denominator
    below = np.concatenate(([0], np.cumsum(h)[:-1]))
    above = h.sum() - below - h
    scores = np.abs((den - num) * below - num * above).astype(np.int64)
    return scores, max(num, den - num)


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
        return np.asarray(m([0] * size), dtype=np.int64)

    def discrete_laplace(self, scale: float) -> int:
        dp = self._dp
        m = dp.m.make_laplace(dp.atom_domain(T=dp.i64), dp.absolute_distance(T=dp.i64), scale=float(scale))
        return int(m(0))

    def quantile(self, histogram: np.ndarray, alpha: float, epsilon: float) -> int:
        dp = self._dp
        scores, sensitivity = quantile_scores(histogram, alpha)
        space = dp.vector_domain(dp.atom_domain(T=dp.u64)), dp.linf_distance(T=dp.u64)

        def make(scale: float):  # noqa: ANN202 - OpenDP measurement
            return dp.m.make_noisy_max(*space, dp.max_divergence(), scale=scale, negate=True)

        scale = dp.binary_search_param(make, d_in=sensitivity, d_out=float(epsilon))
        return int(make(scale)([int(s) for s in scores]))


class SeededNoise:
    """The same distributions from a seeded NumPy generator (test mode: reproducible, NOT private)."""

    name = "numpy-seeded (test mode, not private)"
    test_mode = True

    def __init__(self, seed: int) -> None:
        self._rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x6E6F697365]))

    def _discrete_laplace(self, t: float, size: int) -> np.ndarray:
        p = -math.expm1(-1.0 / t)
        return (self._rng.geometric(p, size) - self._rng.geometric(p, size)).astype(np.int64)

    def discrete_gaussian(self, scale: float, size: int) -> np.ndarray:
        # Canonne, Kamath, Steinke 2020, Algorithm 3: discrete Laplace proposals with t = floor(sigma) + 1,
        # accepted with probability exp(-(|y| - sigma^2/t)^2 / (2 sigma^2)).
        sigma = float(scale)
        t = math.floor(sigma) + 1
        out = np.empty(size, dtype=np.int64)
        filled = 0
        while filled < size:
            want = size - filled
            y = self._discrete_laplace(t, max(16, int(want * 1.5)))
            accept = self._rng.random(y.shape[0]) < np.exp(
                -((np.abs(y) - sigma * sigma / t) ** 2) / (2 * sigma**2)
            )
            got = y[accept][:want]
            out[filled : filled + got.shape[0]] = got
            filled += got.shape[0]
        return out

    def discrete_laplace(self, scale: float) -> int:
        return int(self._discrete_laplace(float(scale), 1)[0])

    def quantile(self, histogram: np.ndarray, alpha: float, epsilon: float) -> int:
        scores, sensitivity = quantile_scores(histogram, alpha)
        # Exponential mechanism as Gumbel-max: P(c) proportional to exp(-epsilon score(c) / (2 sensitivity)).
        utility = -scores.astype(np.float64) * float(epsilon) / (2.0 * sensitivity)
        return int(np.argmax(utility + self._rng.gumbel(size=utility.shape[0])))


class NoNoise:
    """No noise and exact percentiles: for tests that reproduce worked examples exactly. Never private."""

    name = "none (exact, not private)"
    test_mode = True

    def discrete_gaussian(self, scale: float, size: int) -> np.ndarray:
        return np.zeros(size, dtype=np.int64)

    def discrete_laplace(self, scale: float) -> int:
        return 0

    def quantile(self, histogram: np.ndarray, alpha: float, epsilon: float) -> int:
        scores, _ = quantile_scores(histogram, alpha)
        return int(np.argmin(scores))


def noise_source_for(seed: int | None) -> NoiseSource:
    """The production source when ``seed`` is None, else the seeded test-mode source."""
    return CryptographicNoise() if seed is None else SeededNoise(seed)
