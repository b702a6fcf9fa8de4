"""Test mode: every seeded, NON-cryptographic generator of the privacy code path, in one module.

A release made with these is reproducible and NOT private; its manifest says ``"test_mode": true`` and the CLI
warns (docs/design.md section 7.2). The rest of the private side (``privacy/``, ``data/``, ``release/``,
``mechanisms/``) draws nothing from ``random``/``np.random``; a lint test (tests/test_privacy_lint.py) keeps it so.
"""

from __future__ import annotations

import math

import numpy as np

from spark_dpsynth.privacy._quantile import quantile_scores

__all__ = ["SeededNoise", "derive_key"]


def derive_key(seed: int) -> int:
    """The 64-bit bounding key of a test-mode release, derived from its seed."""
    return int(np.random.SeedSequence([int(seed), 0x6B6579]).generate_state(1, dtype=np.uint64)[0])


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

    def discrete_laplace(self, scale: float, size: int) -> np.ndarray:
        return self._discrete_laplace(float(scale), size)

    def quantile(self, histogram: np.ndarray, alpha: float, epsilon: float) -> int:
        scores, sensitivity = quantile_scores(histogram, alpha)
        # Exponential mechanism as Gumbel-max: P(c) proportional to exp(-epsilon score(c) / (2 sensitivity)).
        utility = -scores.astype(np.float64) * float(epsilon) / (2.0 * sensitivity)
        return int(np.argmax(utility + self._rng.gumbel(size=utility.shape[0])))

    def exponential(self, scores: np.ndarray, sensitivity: float, rho: float) -> int:
        # Gumbel-max: P(i) proportional to exp(sqrt(2 rho) scores[i] / sensitivity) (see NoiseSource.exponential).
        utility = np.asarray(scores, dtype=np.float64) * math.sqrt(2.0 * rho) / float(sensitivity)
        return int(np.argmax(utility + self._rng.gumbel(size=utility.shape[0])))
