"""The parameters of synthesis from a release (docs/design.md sections 4.1 and 4.2): :class:`SynthesisParams`,
and the bounds on the synthetic records and partitions one run writes (:func:`check_synthesis_size`,
:func:`synthesis_partitions`). Synthesis is post-processing: none of these costs privacy budget."""

from __future__ import annotations

from dataclasses import dataclass

from spark_dpsynth import _validate as v
from spark_dpsynth.errors import InvalidParameterError

__all__ = [
    "SynthesisParams",
    "SYNTHESIS_MODES",
    "MAX_PARTITIONS",
    "MAX_RECORDS_PER_PARTITION",
    "MAX_SYNTHETIC_RECORDS",
    "RECORDS_PER_PARTITION",
    "check_synthesis_size",
    "synthesis_partitions",
]

MAX_PARTITIONS = 10_000
"""Largest ``SynthesisParams.partitions``: the driver plans every partition and splits the records (of each
cell, for some synthesizers) over them in (cells, partitions) arrays."""
MAX_RECORDS_PER_PARTITION = 2_000_000
"""Most synthetic records one partition (one task) draws: it holds them as an (n, d) array of value codes, then
as Arrow strings, and the ``model`` synthesizer rakes a pool ``pool_size_factor`` times as large in chunks."""
RECORDS_PER_PARTITION = 1_000_000
"""Synthetic records per partition the default number of partitions aims at (:func:`synthesis_partitions`):
half of :data:`MAX_RECORDS_PER_PARTITION`, so that :data:`MAX_SYNTHETIC_RECORDS` fits :data:`MAX_PARTITIONS`."""
MAX_SYNTHETIC_RECORDS = 10**10
"""Largest ``SynthesisParams.target_number_of_records``: more records than this is a job for several runs, each
writing its share (and every run holds at most :data:`MAX_RECORDS_PER_PARTITION` per partition)."""


SYNTHESIS_MODES = ("model", "sds")
"""The synthesizers of :class:`SynthesisParams`: ``"model"`` (the default) and ``"sds"``."""


@dataclass(frozen=True)
class SynthesisParams:
    """Parameters of synthesis from a release (docs/design.md section 4).

    Synthesis reads only the release, so it is post-processing: it costs no privacy budget. Two synthesizers:
    ``mode = "model"`` (the default) estimates the 1-, 2- and 3-way marginals from the noisy release, fits a
    Bayesian network and rakes it to those marginals (:mod:`spark_dpsynth.synthesizers._model`); it emits the
    protected number of records, each complete. ``mode = "sds"`` is SDS's aggregate-seeded sampler (docs/design.md
    section 4.2; :mod:`spark_dpsynth.synthesizers._sds_sampler`), kept for comparison and compatibility.
    """

    mode: str = "model"
    """Which synthesizer of a marginals release: ``"model"`` (fitted model, the default) or ``"sds"`` (SDS's
    aggregate-seeded sampler). An alias kept from the first version: the registry's synthesizer names
    (``[run] synthesizer``) are the general choice, and this field is read only with the default
    ``aggregate_seeded``."""
    target_number_of_records: int | None = None
    """Records to emit, 1..10^10, at most 2000000 per partition; None emits the protected number of records
    ("model") or what the attribute budgets allow ("sds")."""
    aggregate_counts_scale_factor: float | None = None
    """Factor > 0: "sds" multiplies the released counts (budgets and weights) by it before sampling; "model"
    emits that many times the protected number of records (when no target is given)."""
    use_synthetic_counts: bool = False
    """"sds" only: subtract already synthesized counts from the released ones when weighting (docs/design.md section 4.2)."""
    weight_selection_percentile: float = 95.0
    """"sds" only: percentile in [0, 100] of sub-combination counts used as weight beyond R (docs/design.md section 4.2)."""
    pool_size_factor: int = 4
    """"model" only: records a partition draws from the network per record it emits (its raking pool), >= 1."""
    min_pool_size: int = 50_000
    """"model" only: the smallest raking pool of a partition, in records, >= 1 (small partitions rake a pool
    this large so that their output does not depend on their size)."""
    partitions: int | None = None
    """Number of partitions that synthesize in parallel, 1..10000; None uses the session's default parallelism
    (the command line passes :func:`synthesis_partitions` of the records instead, docs/design.md section 1.7)."""
    seed: int | None = None
    """Seed of the utility randomness of synthesis; None draws one at random (recorded nowhere)."""

    def __post_init__(self) -> None:
        if self.mode not in SYNTHESIS_MODES:
            raise InvalidParameterError(f"mode must be one of {list(SYNTHESIS_MODES)}, got {self.mode!r}")
        if self.target_number_of_records is not None:
            v.integer(
                "target_number_of_records", self.target_number_of_records, low=1, high=MAX_SYNTHETIC_RECORDS
            )
        if self.aggregate_counts_scale_factor is not None:
            v.positive("aggregate_counts_scale_factor", self.aggregate_counts_scale_factor)
        w = v.finite("weight_selection_percentile", self.weight_selection_percentile)
        if not 0 <= w <= 100:
            raise InvalidParameterError(
                f"weight_selection_percentile must be in [0, 100], got {self.weight_selection_percentile!r}"
            )
        v.integer("pool_size_factor", self.pool_size_factor, low=1)
        v.integer("min_pool_size", self.min_pool_size, low=1)
        if self.partitions is not None:
            v.integer("partitions", self.partitions, low=1, high=MAX_PARTITIONS)
        if self.seed is not None:
            v.integer("seed", self.seed, low=0)


def check_synthesis_size(records: int, partitions: int, *, what: str = "synthesizing") -> None:
    """Raise unless ``records`` synthetic records over ``partitions`` partitions fit the per-task bound
    :data:`MAX_RECORDS_PER_PARTITION` (public numbers only: called before any data is read, or on a release).

    Raises:
        InvalidParameterError: naming the records, the partitions and the smallest number of partitions that
            would do.
    """
    parts = max(int(partitions), 1)
    if records > MAX_SYNTHETIC_RECORDS:
        raise InvalidParameterError(
            f"{what} {records:.4g} records is more than one run writes (at most {MAX_SYNTHETIC_RECORDS}); "
            "set --target-number-of-records lower"
        )
    if records > parts * MAX_RECORDS_PER_PARTITION:
        need = -(-int(records) // MAX_RECORDS_PER_PARTITION)
        raise InvalidParameterError(
            f"{what} {records:.4g} records over {parts} partitions is more than a task holds (at most "
            f"{MAX_RECORDS_PER_PARTITION} records per partition); set --partitions to at least {need} or "
            "lower --target-number-of-records"
        )


def synthesis_partitions(records: int, parallelism: int, requested: int | None = None) -> int:
    """The number of partitions that synthesize ``records`` records (docs/design.md section 4.3).

    The default follows the records and the cluster: ``max(parallelism, ceil(records / RECORDS_PER_PARTITION))``
    (at most :data:`MAX_PARTITIONS`), so that every task runs and none holds more than
    :data:`RECORDS_PER_PARTITION` records, from a thousand records to :data:`MAX_SYNTHETIC_RECORDS`. A
    requested number is kept (check it with :func:`check_synthesis_size`). ``records`` is public: a target, or
    the protected number of records of a release (a DP figure of its manifest).

    Args:
        records: the records to synthesize, >= 0.
        parallelism: the tasks the session runs at once, >= 1.
        requested: an explicit number of partitions, or None for the default.
    """
    if requested is not None:
        return int(requested)
    need = -(-max(int(records), 0) // RECORDS_PER_PARTITION)
    return max(1, min(MAX_PARTITIONS, max(int(parallelism), need)))
