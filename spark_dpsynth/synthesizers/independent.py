"""The independent-columns synthesizer: every column drawn on its own from the released 1-way marginal.

A baseline, and the smallest complete example of a synthesizer (docs/design.md section 4.5): one module with a
``sample`` function, and one entry in :data:`spark_dpsynth.registry.SYNTHESIZERS`.

Model: for column j with released values v (noisy 1-way counts c_v >= 1) and the protected number of records
n', P(v) is proportional to c_v and P(empty) to max(0, n' - sum_v c_v), the records that hold no released value
in the column. Columns are independent, so every k-way marginal of the output is the product of its 1-way
marginals: the error of this baseline on k >= 2 measures how much the other synthesizers learn from the
released combinations.

Privacy: post-processing of the release (it reads the manifest's n' and the 1-tuple counts, nothing else).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable

import numpy as np
from pyspark.sql import DataFrame, SparkSession

from spark_dpsynth.errors import InvalidParameterError, ReleaseError
from spark_dpsynth.params import SynthesisParams
from spark_dpsynth.release.core import Release
from spark_dpsynth.synthesizers._kernels import exact_split, sample_partitions

__all__ = ["column_distributions", "sample"]

log = logging.getLogger(__name__)

_ROWS_STREAM = 0x726F7773
"""Seed stream of the partitions' shares of the rows."""
_DRAW_STREAM = 0x64726177
"""Seed stream of the values a partition draws."""


def column_distributions(release: Release) -> list[np.ndarray]:
    """Per column, float64 (|released values| + 1,): P(value) for each released value, in the order of
    ``release.domains[j]``, then P(empty) last.

    Raises:
        ReleaseError: the release has no 1-way marginal.
    """
    ones = release.marginals.get(1)
    if ones is None or len(ones) == 0:
        raise ReleaseError("the release has no released 1-tuple: there is no attribute to synthesize from")
    n = float(release.protected_number_of_records)
    out = []
    for j, domain in enumerate(release.domains):
        weights = np.zeros(len(domain) + 1, dtype=np.float64)
        rows = ones.columns[:, 0] == j
        np.add.at(weights, ones.values[rows, 0], ones.counts[rows].astype(np.float64))
        weights[-1] = max(0.0, n - weights[:-1].sum())
        total = weights.sum()
        out.append(weights / total if total > 0 else np.eye(1, len(domain) + 1, len(domain))[0])
    return out


def sample(
    release: Release,
    params: SynthesisParams,
    spark: SparkSession,
    *,
    release_dir: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> DataFrame:
    """Draw records whose columns are independent, each from its released 1-way marginal.

    Args:
        release: a marginals release (k = 1 is all it reads).
        params: ``target_number_of_records`` (default the protected number of records n', times
            ``aggregate_counts_scale_factor`` when set), ``partitions`` P (default the session's parallelism)
            and ``seed`` (None: drawn from ``secrets``); the other fields are ignored.
        spark: the session (DataFrame API only: Spark Connect works).
        release_dir: unused (a marginals release is all it reads).
        progress: optional callback receiving short progress messages.

    Returns:
        DataFrame with the columns ``release.columns``, nullable strings (null = empty), exactly the target
        number of rows; partition p holds the rows drawn by task p.

    Raises:
        InvalidParameterError: ``params`` is not a SynthesisParams.
        ReleaseError: the release has no 1-way marginal.
    """
    if not isinstance(params, SynthesisParams):
        raise InvalidParameterError(f"params must be a SynthesisParams, got {type(params).__name__}")
    probabilities = column_distributions(release)
    target = params.target_number_of_records
    if target is None:
        target = max(
            1, round(release.protected_number_of_records * (params.aggregate_counts_scale_factor or 1.0))
        )
    seed = params.seed if params.seed is not None else secrets.randbits(63)
    cumulative = [np.cumsum(p) for p in probabilities]

    def draw(part: int, parts: int) -> np.ndarray:
        """The partition's rows as int32 codes (n_p, d), -1 = empty."""
        share_rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(_ROWS_STREAM,)))
        n_part = int(exact_split(np.array([target], dtype=np.int64), parts, share_rng, part)[0])
        rng = np.random.default_rng(np.random.SeedSequence([seed, part], spawn_key=(_DRAW_STREAM,)))
        codes = np.empty((n_part, len(cumulative)), dtype=np.int32)
        for j, cum in enumerate(cumulative):
            drawn = np.minimum(np.searchsorted(cum, rng.random(n_part), side="right"), cum.shape[0] - 1)
            codes[:, j] = np.where(drawn == cum.shape[0] - 1, -1, drawn)
        return codes

    message = f"independent: {target} records from {len(release.columns)} released 1-way marginals"
    log.info(message)
    if progress is not None:
        progress(message)
    return sample_partitions(
        spark,
        draw,
        columns=release.columns,
        domains=release.domains,
        seed=seed,
        partitions=params.partitions,
        label="independent",
    )
