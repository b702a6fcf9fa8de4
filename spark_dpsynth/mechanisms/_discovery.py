"""The DP steps the marginals and workload mechanisms share before their own counting: the protected number of
records, the noisy threshold of released counts, and which column values are public or must be discovered.

* :func:`draw_protected_n`: the one draw of n' (docs/design.md section 2.4), also made once by the default
  method's choice (:func:`spark_dpsynth.mechanisms.choice.fit_auto`) and handed on;
* :func:`noisy_threshold`: discrete Gaussian noise on every candidate count, then the threshold rho_k
  (docs/design.md sections 2.4 and 2.5; Gopi, Mahabadi, Yekhanin, "Differentially Private Marginals", 2022,
  Algorithm 1): the step that releases (discovers) the values of a column without public values;
* :func:`public_domains`: the columns whose values are public (bins, codebooks; docs/design.md section 2.9);
* :func:`distinct_values`: the values of a multi-value column (private, on the driver only).
"""

from __future__ import annotations

import numpy as np

from spark_dpsynth.params import AggregationParams, DataConfig
from spark_dpsynth.privacy.noise import NoiseSource

__all__ = ["distinct_values", "draw_protected_n", "noisy_threshold", "public_domains"]


def draw_protected_n(true_n: int, params: AggregationParams, noise: NoiseSource) -> int:
    """n' = max(1, n + L), L ~ discrete Laplace(1 / epsilon_N) (docs/design.md section 2.4).

    Args:
        true_n: the true number of records (private: used only here, never logged).
        params: the budget; epsilon_N = ``number_of_records_epsilon_proportion`` x ``epsilon``.
        noise: the release's noise source (one draw).

    Returns:
        n', the protected number of records, >= 1. Drawn once per release: the default method's choice draws it
        and hands it to the mechanism it runs (``protected_n``), which books it and does not draw it again.
    """
    scale_n = 1.0 / (params.number_of_records_epsilon_proportion * params.epsilon)
    return max(1, true_n + int(noise.discrete_laplace(scale_n, 1)[0]))


def noisy_threshold(
    counts: np.ndarray, scale: float, threshold: float, noise: NoiseSource
) -> tuple[np.ndarray, np.ndarray]:
    """Noise on every candidate count of one length, then keep what passes the threshold (docs/design.md
    sections 2.4 and 2.5).

    Args:
        counts: int64 (M,) bounded counts of every candidate (zero counts included).
        scale: noise std sigma_k sqrt(Delta_k) of the discrete Gaussian.
        threshold: rho_k; a noisy count is kept when it is > rho_k and > 0.
        noise: the noise source (one fresh draw per candidate).

    Returns:
        (noisy int64 (M,), kept bool (M,)). Integer arithmetic throughout: exact for any count.
    """
    noisy = np.asarray(counts, dtype=np.int64) + noise.discrete_gaussian(scale, counts.shape[0])
    return noisy, (noisy > threshold) & (noisy > 0)


def public_domains(
    names: tuple[str, ...], config: DataConfig, derived: dict[str, tuple[str, str]]
) -> dict[int, tuple[str, ...]]:
    """Columns whose values are public: binned columns (their labels and passthrough codes) and columns with a
    public domain (``config.domains``, a codebook, in its order; docs/design.md section 2.9). Their values cost
    no discovery budget and their tables cover the whole domain, absent values as zero cells."""
    out = {}
    for j, c in enumerate(names):
        if c in derived:
            continue
        if c in config.bins:
            spec = config.bins[c]
            out[j] = spec.domain()
        elif c in config.public_domains:  # a codebook, or hash-bucket labels
            out[j] = tuple(config.public_domains[c])
    return out


def distinct_values(prepared, column: str) -> tuple[str, ...]:  # noqa: ANN001 - pyspark DataFrame
    """The distinct values of a multi-value (array) column, sorted: private, bounded by the column's domain."""
    from pyspark.sql import functions as F

    rows = prepared.select(F.explode(F.col(f"`{column}`")).alias("v")).distinct().collect()
    return tuple(sorted(str(r["v"]) for r in rows))
