"""TOML configuration: one file holds the data, aggregation, synthesis and evaluation settings.

Layout (every table and key is optional; unknown keys are errors that name the key)::

    [input]            path | table, format ("csv" | "parquet" | "delta"), delimiter, encoding, ragged_rows
    [output]           path, table, format, overwrite, single_csv
    [spark]            master | remote
    [run]              quiet, debug
    [data]             columns, empty_values, zeros_are_empty, sensitive_zeros, row_filter, privacy_unit,
                       multi_value, max_multi_values, record_limit, categorical, dp_bins, text_numbers,
                       identifiers
    [data.bins.COL]    edges, labels, passthrough
    [data.domains]     COL = [values]: the PUBLIC domain (codebook) of a categorical column
    [data.hash_buckets] COL = B: hash a high-cardinality column into B buckets (public labels)
    [aggregate]        the budget (epsilon, delta, accounting, seed: spark_dpsynth.privacy.budget.Budget) and
                       the fields of AggregationParams
    [synthesize]       the fields of SynthesisParams
    [evaluate]         max_marginal_length, ...
    [constraints]      rules (declared rules every synthetic row satisfies, in the manifest), where (a condition)
    [class_conditional] the fields of ClassConditionalParams not taken from [aggregate] (domains, ...)
    [workload]         the fields of WorkloadParams not taken from [aggregate] (selection, caps, ...)
    [archetype]        public_input | public_table, public_format, public_row_filter, and the fields of
                       spark_dpsynth.mechanisms.archetype.ArchetypeParams (column roles; [archetype.fill] COL = [cond])

The mechanism sections and their keys come from :mod:`spark_dpsynth.registry`: each mechanism's parameter class
is its section, less the fields it takes from the shared sections (shares from ``[aggregate]``, its privacy unit
from ``[data]``); :meth:`JobConfig.mechanism_params` puts them together. The budget is no mechanism's parameter:
``[aggregate]`` epsilon, delta, accounting and seed make the run's one :class:`~spark_dpsynth.privacy.budget.Budget`
(:attr:`JobConfig.budget`), which the run's accountant holds.

The schema is :func:`schema`: one :class:`ConfigKey` per key, with its type, allowed values and help. Every key
has a command-line option (``--key-name``, see :mod:`spark_dpsynth.cli.main`) and every option a key; values given on
the command line override the file's. A wrong type or value is a :class:`~spark_dpsynth.errors.ConfigError`
naming the key and the allowed values. See ``conf/*.toml`` for commented examples.

Modules:

* :mod:`.job`: :class:`JobConfig`, a job's validated configuration, and the default methods' names.
* :mod:`.keys`: the keys each section allows and the schema (:func:`schema`, :class:`ConfigKey`), which is also
  the command line's options.
* :mod:`.parse`: :func:`parse_config`, :func:`load_config`, :func:`load_document` and :func:`merge`.

Every public name is importable from ``spark_dpsynth.config`` itself.
"""

from __future__ import annotations

from spark_dpsynth.config.job import AUTO_SYNTHESIZER, LEGACY_SYNTHESIZER, SYNTHESIZERS, JobConfig
from spark_dpsynth.config.keys import ConfigKey, keyword_keys, option_for, schema
from spark_dpsynth.config.parse import load_config, load_document, merge, parse_config

__all__ = [
    "AUTO_SYNTHESIZER",
    "LEGACY_SYNTHESIZER",
    "SYNTHESIZERS",
    "ConfigKey",
    "JobConfig",
    "keyword_keys",
    "load_config",
    "load_document",
    "merge",
    "option_for",
    "parse_config",
    "schema",
]
