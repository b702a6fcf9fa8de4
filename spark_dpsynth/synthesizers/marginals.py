"""Synthesis on Spark: synthetic records drawn from a DP release only (docs/design.md section 4).

``synthesize(release, params, spark)`` returns a DataFrame of synthetic records, with one of two synthesizers:

* ``mode = "model"`` (the default; docs/design.md section 4.1): the driver fits a model to the release (release-sized work,
  :func:`spark_dpsynth.synthesizers._model.fit_release_model`: marginals estimated from the noisy, thresholded
  counts, a Bayesian network, raking targets); each partition draws its exact share of the number of records
  from that model (:func:`spark_dpsynth.synthesizers._model.sample_records`);
* ``mode = "sds"``: SDS's aggregate-seeded sampler (docs/design.md section 4.2), each partition on its exact share of
  the attribute budgets (:mod:`spark_dpsynth.synthesizers._sds_sampler`).

The Spark plan:

1. on the driver (release-sized): check and encode the release (:func:`spark_dpsynth.synthesizers._sds_sampler.encode_release`),
   and in "model" mode fit the model; no record is made there;
2. :func:`spark_dpsynth.synthesizers._kernels.sample_partitions` (``spark.range(P, numPartitions=P)
   .mapInArrow(...)``): task p takes its exact share of the records ("model", or "sds" with a target) or of
   the attribute budgets ("sds"), synthesizes with a generator seeded from (seed, p), and decodes value codes
   to strings; the encoded release or the model travels in the closure;
3. in the same task, the partition's rows are put in a random order (a permutation drawn from a generator
   seeded from (seed, p)): no shuffle stage, each partition is one task from the draw to the written file.
   Every partition draws from the same model (or the same release), so any one of them is a sample of it.

Privacy: synthesis reads the release and nothing else, so the synthetic data are DP by post-processing
(docs/design.md sections 1.1 and 4): they cost no privacy budget beyond the release's. The seed drives utility randomness
only; it is never logged.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import secrets
from collections.abc import Callable

import numpy as np
from pyspark.sql import DataFrame, SparkSession

from spark_dpsynth._progress import Progress, report
from spark_dpsynth.data.session import default_parallelism
from spark_dpsynth.errors import InvalidParameterError, ReleaseError
from spark_dpsynth.params import SYNTHESIS_MODES, SynthesisParams
from spark_dpsynth.release.core import Release
from spark_dpsynth.synthesizers import _model as _release_model
from spark_dpsynth.synthesizers._kernels import SHUFFLE_STREAM, exact_split, sample_partitions
from spark_dpsynth.synthesizers._model import ReleaseModel, fit_release_model
from spark_dpsynth.synthesizers._sds_sampler import EncodedRelease, encode_release, sample_records

__all__ = ["synthesize", "sample_model", "sample_sds"]

log = logging.getLogger(__name__)

_BUDGET_STREAM = 1
"""Spawn key of the generator that spreads budget remainders (the partitions use SeedSequence([seed, p]))."""
_TARGET_STREAM = 2
"""Spawn key of the generator that spreads the remainder of the target number of records."""
_SHUFFLE_STREAM = SHUFFLE_STREAM
"""Spawn key of the per-partition generator of the permutation that puts a partition's rows in random order
(:func:`spark_dpsynth.synthesizers._kernels.sample_partitions`' default)."""
_MODEL_STREAM = 4
"""Spawn key of the per-partition generator of "model" mode's records."""


def synthesize(
    release: Release,
    params: SynthesisParams,
    spark: SparkSession,
    progress: Progress | None = None,
) -> DataFrame:
    """Synthesize records from a DP release, partitioned over Spark.

    ``params.mode = "model"`` (the default): the driver estimates the 1-, 2- and 3-way marginals of the
    sensitive table from the release, treating released counts as Gaussian measurements with the manifest's
    ``noise_std`` and unreleased candidates as censored below the manifest's ``thresholds``, fits a Bayesian
    network of in-degree <= 2 to them, and each partition draws its share of the records from the network and
    rakes them to the estimated marginals (:mod:`spark_dpsynth.synthesizers._model` gives the formulas and their
    sources). The output has the protected number of records (or ``target_number_of_records``), each with one
    value per column; a column is empty (null) only where the release shows a deficit of values in it.

    ``params.mode = "sds"``: the rules of docs/design.md section 4.2, implemented in
    :mod:`spark_dpsynth.synthesizers._sds_sampler`; the numbers in parentheses are the sections of SDS's
    "Differentially private aggregation and synthesis". Attribute budgets are the 1-tuple counts (4.1); a record
    grows one attribute at a time from columns not yet in it, and a candidate is eligible only if every
    combination of length <= R it forms with the record is released (4.2); its weight is count(record +
    candidate) up to length R (4.2.1), beyond R the ``weight_selection_percentile`` of the counts of its
    sub-combinations (4.2.2); ``use_synthetic_counts`` subtracts what was already synthesized (4.3).
    Distribution (docs/design.md section 4.3):
    each of P partitions runs that sequential sampler on its exact share of the budgets, with its own seeded
    generator.

    Args:
        release: the DP release; d = ``len(release.columns)`` attribute columns, reporting length R.
        params: the synthesis parameters:

            * ``mode``: ``"model"`` or ``"sds"`` (above);
            * ``target_number_of_records`` (records, or None): split exactly over the partitions; "model" emits
              exactly that many, None meaning the protected number of records (times
              ``aggregate_counts_scale_factor`` when set, rounded); "sds" emits exactly that many, each
              partition starting its budgets (and synthetic counts) over whenever they run out (SDS), None
              emitting until every budget unit is spent;
            * ``aggregate_counts_scale_factor`` (> 0, or None): see above for "model"; for "sds" every released
              count becomes ceil(count x factor) before sampling, budgets and weights alike (SDS);
            * "sds" only: ``use_synthetic_counts`` (partition p weighs a combination by count - P x its own
              synthesized count; a remainder <= 0 gives weight 0) and ``weight_selection_percentile`` in
              [0, 100];
            * "model" only: ``pool_size_factor`` and ``min_pool_size`` (a partition emitting n_p records rakes a
              pool of max(pool_size_factor x n_p, min_pool_size) network records);
            * ``partitions`` P, or None for the session's default parallelism (then the output depends on the
              cluster: set it for reproducible output);
            * ``seed``: same (release, params) -> same rows in the same order; None draws a seed with
              ``secrets.randbits(63)`` and records it nowhere.
        spark: the session; only the DataFrame API is used, so Spark Connect works.
        progress: optional callback receiving short progress messages.

    Returns:
        A DataFrame with exactly the columns ``release.columns``, in order, each a nullable string: the released
        value, or null where the record has no value in that column; P partitions, partition p holding the
        records drawn by task p in a random order (deterministic given the seed). "model": exactly the number
        of records above. "sds" with no target: data dependent (each row spends at least one budget unit, so at
        most the total budget); with a target, exactly that many. The rows are drawn on the executors when the
        DataFrame is evaluated; nothing is collected to the driver.

    Raises:
        InvalidParameterError: ``release``, ``params``, ``spark`` or ``progress`` has the wrong type, or the
            number of partitions cannot be inferred from the session.
        ReleaseError: the release is unusable: duplicate column names, no reporting length, tuples longer
            than R, inconsistent codes or counts, not downward closed, or no released 1-tuple at all.

    Privacy:
        Post-processing of the (epsilon, delta)-DP release (Gopi, Mahabadi, Yekhanin, "Differentially Private
        Marginals", Theorem 1.1; docs/design.md section 2.7): the function reads nothing but the release (counts and manifest), so the output has the
        release's guarantee.
    """
    _check_arguments(release, params, spark, progress)
    _check_release_shape(release)

    def notify(message: str) -> None:
        report(progress, log, message)

    seed = params.seed if params.seed is not None else secrets.randbits(63)
    parts = params.partitions if params.partitions is not None else default_parallelism(spark)
    notify(
        f"synthesis: start, mode {params.mode}, {len(release.columns)} columns, reporting length "
        f"{release.reporting_length}, {parts} partitions"
    )
    enc = encode_release(release, params.aggregate_counts_scale_factor if params.mode == "sds" else None)
    total_budget = int(enc.budgets.sum())
    if total_budget == 0:
        raise ReleaseError("the release has no released 1-tuple: there is no attribute to synthesize from")
    target = params.target_number_of_records
    draw: Callable[[int], np.ndarray]
    if params.mode == "model":
        if target is None:
            factor = params.aggregate_counts_scale_factor or 1.0
            target = max(1, round(release.protected_number_of_records * factor))
        model = fit_release_model(release)
        notify(
            f"synthesis: model fitted ({int(model.has_empty.sum())} columns with empty or suppressed values, "
            f"{len(model.targets)} raking targets), {target} records"
        )
        draw = functools.partial(
            _model_partition,
            model,
            seed=seed,
            parts=parts,
            target=target,
            pool_size_factor=params.pool_size_factor,
            min_pool_size=params.min_pool_size,
        )
    else:
        notify(
            f"synthesis: {enc.n_ids - 1} released tuples, {total_budget} attribute budget units, "
            + (f"target {target} records" if target is not None else f"at most {total_budget} records")
        )
        draw = functools.partial(
            _synthesize_partition,
            enc,
            seed=seed,
            parts=parts,
            target=target,
            use_synthetic_counts=params.use_synthetic_counts,
            weight_selection_percentile=params.weight_selection_percentile,
        )

    # the seed stays out of the plan: the permutation is drawn in the tasks from seeded generators
    out = sample_partitions(
        spark,
        lambda part, _parts: draw(part),
        columns=release.columns,
        seed=seed,
        partitions=parts,
        domains=release.domains,
        stream=_SHUFFLE_STREAM,
    )
    notify("synthesis: end, plan ready (records are drawn on the executors when the DataFrame is evaluated)")
    return out


def _model_partition(
    model: ReleaseModel,
    part: int,
    *,
    seed: int,
    parts: int,
    target: int,
    pool_size_factor: int,
    min_pool_size: int,
) -> np.ndarray:
    """One partition's records in "model" mode: int32 codes (n_p, d), -1 = empty.

    n_p is the partition's row of the exact split of ``target`` (the same split as "sds" mode's target); the
    records come from a generator seeded from (seed, part), so they do not depend on which task runs them.
    """
    n_part = _target_share(target, parts, seed, part)
    rng = np.random.default_rng(np.random.SeedSequence([seed, part], spawn_key=(_MODEL_STREAM,)))
    return _release_model.sample_records(
        model, n_part, rng, pool_factor=pool_size_factor, min_pool=min_pool_size
    )


def _target_share(target: int, parts: int, seed: int, part: int) -> int:
    """This partition's share of ``target`` records: its row of the exact split (the same in both modes)."""
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(_TARGET_STREAM,)))
    return int(exact_split(np.array([target], dtype=np.int64), parts, rng, part)[0])


def _synthesize_partition(
    enc: EncodedRelease,
    part: int,
    *,
    seed: int,
    parts: int,
    target: int | None,
    use_synthetic_counts: bool,
    weight_selection_percentile: float,
) -> np.ndarray:
    """One partition's records: int32 codes (n, d), -1 = empty (see :func:`synthesize` for the rules)."""
    budgets = exact_split(
        enc.budgets,
        parts,
        np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(_BUDGET_STREAM,))),
        part,
    )
    multiplier = parts
    part_target = None
    if target is not None:
        part_target = _target_share(target, parts, seed, part)
        if part_target > 0 and not budgets.any():
            # a tiny release split over many partitions can leave this share without any budget unit; to
            # still emit its share of the target, it cycles through the whole release's budgets (as SDS)
            budgets, multiplier = enc.budgets, 1
    rng = np.random.default_rng(np.random.SeedSequence([seed, part]))
    return sample_records(
        enc,
        budgets,
        rng,
        use_synthetic_counts=use_synthetic_counts,
        weight_selection_percentile=weight_selection_percentile,
        target_number_of_records=part_target,
        synthetic_count_multiplier=multiplier,
    )


def _check_arguments(release: object, params: object, spark: object, progress: object) -> None:
    if not isinstance(release, Release):
        raise InvalidParameterError(f"release must be a Release, got {type(release).__name__}")
    if not isinstance(params, SynthesisParams):
        raise InvalidParameterError(f"params must be a SynthesisParams, got {type(params).__name__}")
    if params.mode not in SYNTHESIS_MODES:
        raise InvalidParameterError(f"mode must be one of {list(SYNTHESIS_MODES)}, got {params.mode!r}")
    if spark is None or not callable(getattr(spark, "range", None)):
        raise InvalidParameterError(f"spark must be a SparkSession, got {type(spark).__name__}")
    if progress is not None and not callable(progress):
        raise InvalidParameterError(f"progress must be callable or None, got {type(progress).__name__}")


def _check_release_shape(release: Release) -> None:
    """The checks :func:`encode_release` does not make (names and lengths), before any encoding."""
    columns = list(release.columns)
    duplicates = sorted({c for c in columns if columns.count(c) > 1})
    if duplicates:
        raise ReleaseError(f"release has duplicate column names {duplicates}")
    try:
        r = release.reporting_length
    except (KeyError, TypeError, ValueError) as err:
        raise ReleaseError("release manifest has no valid reporting_length") from err
    longer = sorted(k for k, m in release.marginals.items() if (k < 1 or k > r) and len(m))
    if longer:
        raise ReleaseError(f"release holds tuples of lengths {longer}, outside 1..reporting_length = {r}")


def sample_model(
    release: Release,
    params: SynthesisParams,
    spark: SparkSession,
    *,
    release_dir: str | None = None,
    progress: Progress | None = None,
) -> DataFrame:
    """The registry's ``model`` synthesizer: :func:`synthesize` with ``mode = "model"`` (``release_dir`` is
    not needed: a marginals release is all it reads)."""
    return synthesize(release, dataclasses.replace(params, mode="model"), spark, progress)


def sample_sds(
    release: Release,
    params: SynthesisParams,
    spark: SparkSession,
    *,
    release_dir: str | None = None,
    progress: Progress | None = None,
) -> DataFrame:
    """The registry's ``sds`` synthesizer: :func:`synthesize` with ``mode = "sds"``."""
    return synthesize(release, dataclasses.replace(params, mode="sds"), spark, progress)
