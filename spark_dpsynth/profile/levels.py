"""When a noisy count of the DP profile stands out of its noise: the false-positive level of the profile's
threshold, the quantile of a unit noise (:func:`noise_level`) and its tail (:func:`noise_tail`), and the level a sum
of cells must pass (:func:`sum_threshold`, :func:`tail_threshold`) (docs/design.md section 2.8).

Privacy: public constants and functions of the noise's distribution; post-processing.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["SIGNAL_FALSE_POSITIVE", "noise_level", "noise_tail", "sum_threshold", "tail_threshold"]

SIGNAL_FALSE_POSITIVE = 0.001
"""Chance that any cell without records of one column stands out of the noise (a Bonferroni bound over the
column's cells): the level of the profile's signal threshold."""


def noise_level(tail: float, laplace: bool) -> float:
    """The (1 - ``tail``) quantile of a unit-std noise: discrete Laplace (``laplace``, its continuous form of std
    1: scale 1 / sqrt(2)) or Gaussian; a count stands out above its std times this."""
    from scipy.stats import laplace as laplace_dist
    from scipy.stats import norm

    return float(laplace_dist.isf(tail) / math.sqrt(2.0)) if laplace else float(norm.isf(tail))


def noise_tail(z: np.ndarray, laplace: bool) -> np.ndarray:
    """The chance that a unit-std noise (as :func:`noise_level`'s) exceeds ``z``: its inverse, per value (float64,
    the shape of ``z``): a count's p-value when it is ``z`` stds above 0."""
    from scipy.stats import laplace as laplace_dist
    from scipy.stats import norm

    return laplace_dist.sf(np.asarray(z) * math.sqrt(2.0)) if laplace else norm.sf(z)


def sum_threshold(
    cells: np.ndarray | float, sigma: float, level: float, gaussian: float
) -> np.ndarray | float:
    """The level a sum of the noisy counts of ``cells`` cells must pass to stand out of its noise: sigma
    sqrt(cells) x ``gaussian`` (the Gaussian quantile of the profile's false-positive rate per cell, equal to
    ``level`` when the noise is Gaussian), and never below one cell's threshold sigma x ``level`` (Laplace
    noise's heavier tail matters for a sum of few cells; a sum of many is close to Gaussian, by the central
    limit theorem)."""
    return sigma * np.maximum(np.sqrt(cells) * gaussian, level)


def tail_threshold(cells: np.ndarray | float, sigma: float, tail: float, laplace: bool) -> np.ndarray | float:
    """:func:`sum_threshold` at the one-sided level ``tail`` (its quantiles of the cells' noise and of a Gaussian)."""
    return sum_threshold(cells, sigma, noise_level(tail, laplace), noise_level(tail, False))
