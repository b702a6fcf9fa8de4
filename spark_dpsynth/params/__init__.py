"""Parameter objects: frozen, validated in ``__post_init__``, one docstring line per field.

Modules, by what the parameters are for:

* :mod:`.data`: :class:`DataConfig` says how a table becomes records of attributes (prepare stage), with
  :class:`BinSpec` (public bins) and :class:`PersonRows` (what a privacy unit does with a person's rows).
* :mod:`.aggregation`: :class:`AggregationParams` are the privacy parameters of a DP release of marginals
  (docs/design.md section 2), with its presets (:class:`AccuracyMode`, :class:`FabricationMode`) and
  :class:`Accounting`; what every mechanism's parameters share (the pure-DP shares, a preset's check).
* :mod:`.synthesis`: :class:`SynthesisParams` steer synthesis from a release (docs/design.md sections 4.1 and
  4.2), and the bounds on what one run writes.
* :mod:`.workload`: :class:`WorkloadParams` are the parameters of the ``workload`` mechanism (docs/design.md
  section 4.7), with :class:`Selection`.

Every name is importable from ``spark_dpsynth.params`` itself. Every check here runs before any data is read.
Messages name the field, the value and the allowed range.
"""

from __future__ import annotations

from spark_dpsynth.params.aggregation import (
    MIN_DELTA,
    TEXT_NUMBERS_EPSILON_PROPORTION,
    TEXT_NUMBERS_RHO_PROPORTION,
    Accounting,
    AccuracyMode,
    AggregationParams,
    FabricationMode,
)
from spark_dpsynth.params.data import (
    MAX_HASH_BUCKETS,
    MAX_MULTI_VALUES,
    MAX_ROWS_PER_PERSON_BOUND,
    BinSpec,
    DataConfig,
    PersonRows,
    hash_bucket_labels,
)
from spark_dpsynth.params.synthesis import (
    MAX_PARTITIONS,
    MAX_RECORDS_PER_PARTITION,
    MAX_SYNTHETIC_RECORDS,
    RECORDS_PER_PARTITION,
    SYNTHESIS_MODES,
    SynthesisParams,
    check_synthesis_size,
    synthesis_partitions,
)
from spark_dpsynth.params.workload import Selection, WorkloadParams

__all__ = [
    "Accounting",
    "AccuracyMode",
    "FabricationMode",
    "BinSpec",
    "DataConfig",
    "hash_bucket_labels",
    "AggregationParams",
    "SynthesisParams",
    "MIN_DELTA",
    "MAX_HASH_BUCKETS",
    "MAX_MULTI_VALUES",
    "MAX_ROWS_PER_PERSON_BOUND",
    "PersonRows",
    "MAX_PARTITIONS",
    "MAX_RECORDS_PER_PARTITION",
    "MAX_SYNTHETIC_RECORDS",
    "RECORDS_PER_PARTITION",
    "SYNTHESIS_MODES",
    "TEXT_NUMBERS_EPSILON_PROPORTION",
    "TEXT_NUMBERS_RHO_PROPORTION",
    "check_synthesis_size",
    "synthesis_partitions",
    "Selection",
    "WorkloadParams",
]
