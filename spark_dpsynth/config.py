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
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import enum
import functools
import inspect
import logging
import re
import textwrap
import tomllib
from dataclasses import dataclass, field
from typing import Any

from spark_dpsynth import params as _params
from spark_dpsynth import registry
from spark_dpsynth.data.io import FORMATS, RAGGED_ROWS, check_table_name, csv_encoding
from spark_dpsynth.errors import ConfigError, DPSynthError, InvalidParameterError
from spark_dpsynth.mechanisms.archetype import ArchetypeParams
from spark_dpsynth.mechanisms.class_conditional import ClassConditionalParams
from spark_dpsynth.params import AggregationParams, BinSpec, DataConfig, SynthesisParams, WorkloadParams
from spark_dpsynth.privacy.budget import Budget

__all__ = ["ConfigKey", "JobConfig", "load_config", "load_document", "merge", "parse_config", "schema"]

log = logging.getLogger(__name__)

_INPUT_KEYS = {"path", "table", "format", "delimiter", "encoding", "ragged_rows", "infer_schema", "schema"}
_OUTPUT_KEYS = {"path", "table", "format", "overwrite", "single_csv", "sds_format", "join_multi_value"}
_SPARK_KEYS = {"master", "remote"}
_RUN_KEYS = {"quiet", "debug", "synthesizer", "release"}
LEGACY_SYNTHESIZER = "aggregate_seeded"
"""The old default of ``[run] synthesizer``: the marginals mechanism, then the synthesizer named by
``[synthesize] mode`` (``model`` or ``sds``). Kept as an alias."""
AUTO_SYNTHESIZER = "auto"
"""The default of ``[run] synthesizer``: the ``pgm`` synthesizer and its ``workload`` mechanism (AIM, or MST on
wide tables), or the marginals mechanism and the ``model`` synthesizer when the protected number of records makes
the noise of every subset small (:mod:`spark_dpsynth.mechanisms.choice`); a job that asks for SDS's aggregates
(``[output] sds_format`` or ``[synthesize] mode = "sds"``) runs the marginals mechanism as ``aggregate_seeded``
does (docs/design.md section 4.7)."""
SYNTHESIZERS = (AUTO_SYNTHESIZER, LEGACY_SYNTHESIZER, *registry.SYNTHESIZERS)
_ARCHETYPE_IO_KEYS = ("public_input", "public_table", "public_format", "public_row_filter")
_DATA_KEYS = {
    "columns",
    "empty_values",
    "zeros_are_empty",
    "sensitive_zeros",
    "row_filter",
    "bins",
    "privacy_unit",
    "person_rows",
    "max_rows_per_person",
    "rows_per_person_percentile",
    "rows_per_person_bound",
    "person_columns",
    "time_column",
    "multi_value",
    "max_multi_values",
    "record_limit",
    "domains",
    "categorical",
    "dp_bins",
    "text_numbers",
    "identifiers",
    "hash_buckets",
}
_BIN_KEYS = {"edges", "labels", "passthrough", "lower", "upper", "count"}
_EVALUATE_KEYS = {
    "max_marginal_length",
    "resolution",
    "label",
    "holdout_filter",
    "label_values",
    "tstr_max_rows",
    "numeric_columns",
    "max_subsets",
    "subset_seed",
    "max_rows",
}
_FORMATS = FORMATS
_CONSTRAINTS_KEYS = {"rules", "where"}


@dataclass(frozen=True)
class JobConfig:
    """Everything a job needs besides the Spark session (all parameters validated)."""

    data: DataConfig = field(default_factory=DataConfig)
    budget: Budget = field(default_factory=Budget)
    """The release's budget: ``[aggregate]`` epsilon, delta, accounting and seed (``--epsilon``, ``--delta``,
    ``--accounting``, ``--seed``), validated once here."""
    aggregate: AggregationParams = field(default_factory=AggregationParams)
    synthesize: SynthesisParams = field(default_factory=SynthesisParams)
    input_path: str | None = None
    """Default input when the command line gives none."""
    input_format: str | None = None
    """"csv" or "parquet"; None guesses from the path (".parquet" or a directory of Parquet files)."""
    delimiter: str = ","
    """CSV field delimiter."""
    encoding: str = "utf-8"
    """CSV encoding (spark_dpsynth.data.io.ENCODINGS); a line not valid in it is an error."""
    ragged_rows: str = "error"
    """A CSV record with more or fewer fields than the header: "error" or "pad" (spark_dpsynth.data.io)."""
    infer_schema: bool = True
    """CSV: infer column types from the file (docs/design.md section 2.8)."""
    input_schema: str | None = None
    """CSV: declared schema (Spark DDL), instead of inference."""
    input_table: str | None = None
    """Catalog table ``db.t`` read instead of ``input_path``."""
    output_path: str | None = None
    """Output directory (release, synthetic data, evaluation) when the command line gives none."""
    output_table: str | None = None
    """Catalog table ``db.t`` that receives the synthetic data instead of ``DIR/synthetic``."""
    output_format: str | None = None
    """Format of the synthetic data: "csv", "parquet" or "delta"; None: Parquet (a table: the session default)."""
    overwrite: bool = False
    """Replace existing outputs; False makes an existing output an error before anything runs."""
    single_csv: bool = True
    """Also write ``DIR/synthetic.csv``, the synthetic data as one CSV file (through one task)."""
    sds_format: bool = False
    """Also write the release as SDS's aggregates, ``release/sds_aggregates.tsv`` and ``.json``."""
    join_multi_value: bool = True
    """Write each multi-value column of the synthetic data as one column of delimiter-joined values (SDS's
    join_multi_value_columns); false keeps one binary column per released value."""
    release: str | None = None
    """Release that ``synthesize`` reads: a release directory or an SDS aggregates file (.tsv, .json);
    None: ``DIR/release``."""
    query_sql: str | None = None
    """[query] sql: the count query ``spark-dpsynth query`` answers from the release (docs/usage.md, "Answers
    from the release")."""
    master: str | None = None
    """Spark master URL; None: spark-submit's, else ``local[*]``."""
    remote: str | None = None
    """Spark Connect URL (``sc://host:15002``; ``local[2]`` starts a local Connect server)."""
    quiet: bool = False
    """Log warnings only."""
    debug: bool = False
    """Show full tracebacks on failure (they may show data values)."""
    synthesizer: str = AUTO_SYNTHESIZER
    """A synthesizer of :mod:`spark_dpsynth.registry` (``model``, ``sds``, ``independent``,
    ``class_conditional``, ``archetype``, ``pgm``), which also names the mechanism a pipeline runs;
    ``aggregate_seeded`` is the marginals mechanism with ``[synthesize] mode``; the default ``auto`` is ``pgm``,
    or ``model`` when the data's DP size allows, unless the job asks for SDS's aggregates (:data:`AUTO_SYNTHESIZER`)."""
    row_filter: str | None = None
    """Spark SQL predicate applied to the input before anything else (e.g. ``"split = 'train'"``); public."""
    max_marginal_length: int = 3
    """Longest column combination the evaluation compares (1..3 typical)."""
    resolution: int = 10
    """SDS's reporting resolution r of the evaluation, an integer >= 1: true tuples counted fewer than r times
    are rare (leakage count)."""
    label: str | None = None
    """Column to predict for train-on-synthetic / test-on-real; none skips it."""
    holdout_filter: str | None = None
    """Spark SQL predicate selecting the held-out real rows, applied to the input instead of row_filter, e.g.
    "split = 'test'"; public. None: train-on-synthetic / test-on-real is skipped (the reason is logged)."""
    label_values: dict[str, str] = field(default_factory=dict)
    """Label spelling -> canonical spelling, applied before classification, e.g. {">50K." = ">50K"} (UCI Adult's
    test file ends its labels with a period)."""
    tstr_max_rows: int = 100_000
    """Rows of each table (synthetic, sensitive, held-out) at most handed to the classifiers on the driver."""
    max_subsets: int = 2_000
    """Most L-column subsets the evaluation compares per length L >= 2 (0: all); a length with more, e.g. the
    70,300 3-column subsets of 76 columns, is compared on a seeded sample of that many, and the metrics and
    the report say so."""
    max_rows: int = 1_000_000
    """Most rows of each table the evaluation counts exactly (0: all); a larger table is evaluated on a seeded
    hash sample of about that many rows, SDS's evaluator is skipped, and the metrics and the report say so."""
    subset_seed: int = 0
    """Seed of the public choice of the sampled column subsets (from the column count only, never the data)."""
    numeric_columns: tuple[str, ...] | None = None
    """Columns compared as numbers (KS, Wasserstein-1, correlations), e.g. numbers held as strings in a CSV;
    none: the input's numeric, date and timestamp columns and the columns with [data.bins]."""
    archetype: ArchetypeParams = field(default_factory=ArchetypeParams)
    """[archetype]: column roles and settings of the archetype synthesizer (its budget comes from [aggregate],
    its privacy unit from [data] privacy_unit)."""
    class_conditional: ClassConditionalParams = field(default_factory=ClassConditionalParams)
    """[class_conditional]: settings of the class-conditional mechanism (its budget comes from [aggregate],
    its class column from [evaluate] label)."""
    workload: WorkloadParams = field(default_factory=WorkloadParams)
    """[workload]: settings of the workload mechanism (selection, caps; its budget and reporting length come
    from [aggregate])."""
    public_input: str | None = None
    """[archetype] public_input: the public table of the archetype synthesizer (a path, like [input] path)."""
    public_table: str | None = None
    """[archetype] public_table: the public table as a catalog table db.t instead of public_input."""
    public_format: str | None = None
    """[archetype] public_format: csv, parquet or delta; None: from the path."""
    public_row_filter: str | None = None
    """[archetype] public_row_filter: Spark SQL predicate applied to the public table first."""
    constraints: tuple[str, ...] = ()
    """[constraints] rules: Spark SQL boolean expressions over the output columns that every synthetic row
    satisfies (public knowledge, no budget), written in the release's manifest (docs/design.md section 4.8)."""
    where: str | None = None
    """[constraints] where: a Spark SQL boolean expression; the synthetic rows are drawn from the model
    conditioned on it (``sample(n, where=...)``, ``--where``)."""

    # ------------------------------------------------------------------------------ the registry's view
    document: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """The TOML document (tables of keys) this configuration was parsed from: options given later apply over it
    (:func:`spark_dpsynth.pipeline.job_config`)."""

    def _wants_sds(self) -> bool:
        """The job asks for SDS's aggregates: its release format or its sampler."""
        return self.sds_format or self.synthesize.mode == "sds"

    def synthesizer_name(self) -> str:
        """The registry name of the synthesizer asked for (the aliases resolved: ``aggregate_seeded`` through
        ``[synthesize] mode``, ``auto`` as :data:`AUTO_SYNTHESIZER` says)."""
        if self.synthesizer == AUTO_SYNTHESIZER:
            return self.synthesize.mode if self._wants_sds() else "pgm"
        return self.synthesize.mode if self.synthesizer == LEGACY_SYNTHESIZER else self.synthesizer

    def chooses_mechanism(self) -> bool:
        """True when the mechanism is chosen on the data's DP size (``auto`` without SDS's aggregates: the marginals
        of every subset and the ``model`` synthesizer, or the workload and ``pgm``;
        :mod:`spark_dpsynth.mechanisms.choice`); :meth:`mechanism_name` then names the workload, the fallback."""
        return self.synthesizer == AUTO_SYNTHESIZER and not self._wants_sds()

    def requested_synthesizer(self) -> str | None:
        """The synthesizer named explicitly (None for a default alias: the release then decides)."""
        if self.synthesizer not in (LEGACY_SYNTHESIZER, AUTO_SYNTHESIZER):
            return self.synthesizer
        return "sds" if self.synthesize.mode == "sds" else None

    def mechanism_name(self) -> str:
        """The mechanism a pipeline or ``aggregate`` runs: the first one the synthesizer reads."""
        return registry.synthesizer(self.synthesizer_name()).mechanisms[0]

    def mechanism_params(self, name: str | None = None) -> Any:
        """The parameters of mechanism ``name`` (default :meth:`mechanism_name`): its section's object with
        the fields it inherits (registry ``inherited``) taken from the shared sections.

        Raises:
            ConfigError: the combination is invalid (the message names the section).
        """
        spec = registry.mechanism(name or self.mechanism_name())
        own = getattr(self, spec.section)
        values = {fname: self._value(path) for fname, path in spec.inherited.items()}
        if not values:
            return own
        try:
            return dataclasses.replace(own, **values)
        except (DPSynthError, TypeError) as err:
            raise ConfigError(f"[{spec.section}] {err}") from err

    def _value(self, path: str) -> Any:
        section, key = path.split(".", 1)
        if section in ("aggregate", "data", "synthesize"):
            value = getattr(getattr(self, section), key)
        elif section == "evaluate":
            value = getattr(self, key)
        else:
            raise InvalidParameterError(f"no shared configuration key {path!r}")
        return str(value) if isinstance(value, enum.Enum) else value


def _section_keys(spec: registry.MechanismSpec) -> set[str]:
    """The keys of a mechanism's section: its parameter fields less the inherited ones (plus the public table's
    keys for a mechanism that reads one)."""
    names = {f.name for f in dataclasses.fields(spec.params_class())} - set(spec.inherited)
    return names | (set(_ARCHETYPE_IO_KEYS) if spec.needs_public else set())


def _mechanism_sections(doc: dict[str, Any]) -> dict[str, Any]:
    """The JobConfig fields of the registered mechanisms' own sections (not [aggregate]), validated."""
    out: dict[str, Any] = {}
    for spec in registry.MECHANISMS.values():
        if spec.section == "aggregate":
            continue
        table = dict(_check_keys(spec.section, doc.get(spec.section, {}), _section_keys(spec)))
        if spec.needs_public:
            out.update(_public_table(spec.section, table))
        for key, value in list(table.items()):
            if isinstance(value, dict):
                table[key] = {c: tuple(v) if isinstance(v, list) else v for c, v in value.items()}
        out[spec.section] = _build(spec.params_class(), spec.section, table)
    return out


def _public_table(section: str, table: dict[str, Any]) -> dict[str, Any]:
    """Pop and check the public-table keys of a mechanism section."""
    io = {f"public_{k}": table.pop(f"public_{k}", None) for k in ("input", "table", "format", "row_filter")}
    if io["public_input"] is not None and io["public_table"] is not None:
        raise ConfigError(f"[{section}] give either public_input or public_table, not both")
    if io["public_format"] is not None and io["public_format"] not in _FORMATS:
        raise ConfigError(
            f"[{section}] public_format must be one of {list(_FORMATS)}, got {io['public_format']!r}"
        )
    if io["public_table"] is not None:
        try:
            check_table_name(io["public_table"], "public_table")
        except DPSynthError as err:
            raise ConfigError(f"[{section}] {err}") from err
    return io


def _check_keys(section: str, table: Any, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise ConfigError(f"[{section}] must be a table, got {type(table).__name__}")
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ConfigError(f"unknown key(s) {unknown} in [{section}]; allowed: {sorted(allowed)}")
    return table


_BUDGET_KEYS = tuple(f.name for f in dataclasses.fields(Budget))
"""The ``[aggregate]`` keys of the budget (:class:`~spark_dpsynth.privacy.budget.Budget`)."""


def _aggregate_keys() -> set[str]:
    """The keys of ``[aggregate]``: the budget's and :class:`AggregationParams`'s."""
    return set(_BUDGET_KEYS) | {f.name for f in dataclasses.fields(AggregationParams)}


def _build(cls: type, section: str, table: dict[str, Any]) -> Any:
    names = {f.name for f in dataclasses.fields(cls)}
    _check_keys(section, table, names)
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in table.items()}
    try:
        return cls(**kwargs)
    except DPSynthError as err:
        raise ConfigError(f"[{section}] {err}") from err
    except TypeError as err:
        raise ConfigError(f"[{section}] {err}") from err


def _domains(table: Any) -> dict[str, tuple[str, ...]]:
    """``[data.domains]``: column -> its public values (a non-empty list of strings); the rest of the checks
    (distinct values, no bins, not the privacy unit) are :class:`DataConfig`'s."""
    if not isinstance(table, dict):
        raise ConfigError(f"[data.domains] must be a table of COLUMN = [values], got {type(table).__name__}")
    out = {}
    for col, values in table.items():
        if not isinstance(values, list) or not values or not all(isinstance(x, str) for x in values):
            raise ConfigError(f"[data.domains] {col} must be a non-empty list of strings, got {values!r}")
        out[col] = tuple(values)
    return out


def _evaluate_settings(table: dict[str, Any]) -> dict[str, Any]:
    """The ``[evaluate]`` keys other than max_marginal_length, validated (messages name the key)."""
    out: dict[str, Any] = {}
    for key in ("label", "holdout_filter"):
        value = table.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ConfigError(f"[evaluate] {key} must be a non-empty string, got {value!r}")
        out[key] = value
    for key, default in (("resolution", 10), ("tstr_max_rows", 100_000)):
        value = table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"[evaluate] {key} must be an integer >= 1, got {value!r}")
        out[key] = value
    for key, default, low in (
        ("max_subsets", 2_000, 0),
        ("subset_seed", 0, None),
        ("max_rows", 1_000_000, 0),
    ):
        value = table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or (low is not None and value < low):
            raise ConfigError(
                f"[evaluate] {key} must be an integer{f' >= {low}' if low is not None else ''}, got {value!r}"
            )
        out[key] = value
    numeric = table.get("numeric_columns")
    if numeric is not None and (
        not isinstance(numeric, list | tuple) or not all(isinstance(c, str) and c for c in numeric)
    ):
        raise ConfigError(f"[evaluate] numeric_columns must be a list of column names, got {numeric!r}")
    out["numeric_columns"] = None if numeric is None else tuple(numeric)
    values = table.get("label_values", {})
    if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
        raise ConfigError(f"[evaluate] label_values must be a table of strings, got {values!r}")
    out["label_values"] = dict(values)
    return out


_RENAMED_KEYS = {("archetype", "encoding"): "cluster_encoding"}
"""(section, old key) -> its new name. The old name is still read, with a warning, where it is unambiguous: in its
own section of the file (``[archetype] encoding``; the option ``--encoding`` is ``[input] encoding``)."""


def _renamed_keys(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with the deprecated keys of :data:`_RENAMED_KEYS` under their new names (a warning each).

    Raises:
        ConfigError: a section gives both a key's old and new name.
    """
    out = dict(doc)
    for (section, old), new in _RENAMED_KEYS.items():
        table = out.get(section)
        if not isinstance(table, dict) or old not in table:
            continue
        if new in table:
            raise ConfigError(f"[{section}] give {new} only ({old} is its deprecated name), not both")
        log.warning(
            "[%s] %s is deprecated: call it %s (option --%s)", section, old, new, new.replace("_", "-")
        )
        table = dict(table)
        table[new] = table.pop(old)
        out[section] = table
    return out


def parse_config(doc: dict[str, Any]) -> JobConfig:
    """Validate a parsed TOML document into a :class:`JobConfig`.

    Raises:
        ConfigError: an unknown section or key, or a value outside its range (the message names the key).
    """
    original = copy.deepcopy(doc)
    allowed = {"input", "output", "spark", "run", "data", "aggregate", "synthesize", "evaluate"}
    allowed |= {"constraints"}
    allowed |= {"query"}
    allowed |= {spec.section for spec in registry.MECHANISMS.values()}
    _check_keys("top level", doc, allowed)
    doc = _renamed_keys(doc)
    _check_types(doc)
    inp = _check_keys("input", doc.get("input", {}), _INPUT_KEYS)
    fmt = inp.get("format")
    if fmt is not None and fmt not in _FORMATS:
        raise ConfigError(f"[input] format must be one of {list(_FORMATS)}, got {fmt!r}")
    delimiter = inp.get("delimiter", ",")
    if not isinstance(delimiter, str) or len(delimiter) != 1:
        raise ConfigError(f"[input] delimiter must be one character, got {delimiter!r}")
    if inp.get("path") is not None and inp.get("table") is not None:
        raise ConfigError("[input] give either path or table, not both")
    try:
        encoding = csv_encoding(inp.get("encoding", "utf-8"))
    except DPSynthError as err:
        raise ConfigError(f"[input] {err}") from err
    ragged_rows = inp.get("ragged_rows", "error")
    if ragged_rows not in RAGGED_ROWS:
        raise ConfigError(f"[input] ragged_rows must be one of {list(RAGGED_ROWS)}, got {ragged_rows!r}")
    out = _check_keys("output", doc.get("output", {}), _OUTPUT_KEYS)
    for section, table in (("input", inp), ("output", out)):
        if table.get("table") is not None:
            try:
                check_table_name(table["table"], "table")
            except DPSynthError as err:
                raise ConfigError(f"[{section}] {err}") from err
    spark_section = _check_keys("spark", doc.get("spark", {}), _SPARK_KEYS)
    if spark_section.get("master") is not None and spark_section.get("remote") is not None:
        raise ConfigError("[spark] give either master or remote, not both")
    run = _check_keys("run", doc.get("run", {}), _RUN_KEYS)
    data = dict(_check_keys("data", doc.get("data", {}), _DATA_KEYS))
    row_filter = data.pop("row_filter", None)
    if row_filter is not None and not isinstance(row_filter, str):
        raise ConfigError(f"[data] row_filter must be a string, got {row_filter!r}")
    bins = {}
    raw_bins = data.pop("bins", {})
    if not isinstance(raw_bins, dict):
        raise ConfigError("[data.bins] must be a table of column tables")
    for col, spec in raw_bins.items():
        spec = _check_keys(f"data.bins.{col}", spec, _BIN_KEYS)
        if "edges" not in spec and "count" not in spec:
            raise ConfigError(f"[data.bins.{col}] needs edges, or lower, upper and count")
        spec = {"edges": (), **spec}
        bins[col] = _build(BinSpec, f"data.bins.{col}", spec)
    domains = _domains(data.pop("domains", {}))
    infer_schema = _bool_key("input", "infer_schema", inp.get("infer_schema", True))
    if data.get("text_numbers") is None and not infer_schema and inp.get("schema") is None:
        # every column read as a string by the user's choice: categories, no DP test of numbers written as text
        data["text_numbers"] = False
    data_config = _build(DataConfig, "data", {**data, "bins": bins, "domains": domains})
    evaluate = _check_keys("evaluate", doc.get("evaluate", {}), _EVALUATE_KEYS)
    mml = evaluate.get("max_marginal_length", 3)
    if isinstance(mml, bool) or not isinstance(mml, int) or mml < 1:
        raise ConfigError(f"[evaluate] max_marginal_length must be an integer >= 1, got {mml!r}")
    aggregate = dict(_check_keys("aggregate", doc.get("aggregate", {}), _aggregate_keys()))
    budget = {k: aggregate.pop(k) for k in _BUDGET_KEYS if k in aggregate}
    return JobConfig(
        data=data_config,
        budget=_build(Budget, "aggregate", budget),
        aggregate=_build(AggregationParams, "aggregate", aggregate),
        synthesize=_build(SynthesisParams, "synthesize", doc.get("synthesize", {})),
        input_path=inp.get("path"),
        input_format=fmt,
        delimiter=delimiter,
        encoding=encoding,
        ragged_rows=ragged_rows,
        infer_schema=infer_schema,
        input_schema=_str_key("input", "schema", inp.get("schema")),
        input_table=inp.get("table"),
        output_path=out.get("path"),
        output_table=out.get("table"),
        output_format=out.get("format"),
        overwrite=out.get("overwrite", False),
        single_csv=out.get("single_csv", True),
        sds_format=out.get("sds_format", False),
        join_multi_value=out.get("join_multi_value", True),
        release=run.get("release"),
        query_sql=_check_keys("query", doc.get("query", {}), {"sql"}).get("sql"),
        master=spark_section.get("master"),
        remote=spark_section.get("remote"),
        synthesizer=_synthesizer(run.get("synthesizer", AUTO_SYNTHESIZER)),
        quiet=run.get("quiet", False),
        debug=run.get("debug", False),
        row_filter=row_filter,
        max_marginal_length=mml,
        **_evaluate_settings(evaluate),
        **_constraints(doc.get("constraints", {})),
        **_mechanism_sections(doc),
        document=original,
    )


def _constraints(table: Any) -> dict[str, Any]:
    """The JobConfig fields of ``[constraints]``: its rules (a string or a list of strings) and its condition.

    Raises:
        ConfigError: a value that is not a non-empty string (or list of them).
    """
    from spark_dpsynth.synthesizers.conditions import check_expressions

    table = _check_keys("constraints", table, _CONSTRAINTS_KEYS)
    try:
        rules = check_expressions(table.get("rules"), "[constraints] rules")
        where = check_expressions(table.get("where"), "[constraints] where")
    except DPSynthError as err:
        raise ConfigError(str(err)) from err
    if len(where) > 1 or (table.get("where") is not None and not isinstance(table.get("where"), str)):
        raise ConfigError(f"[constraints] where must be one string, got {table.get('where')!r}")
    return {"constraints": rules, "where": where[0] if where else None}


def _bool_key(section: str, key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"[{section}] {key} must be true or false, got {value!r}")
    return value


def _str_key(section: str, key: str, value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ConfigError(f"[{section}] {key} must be a non-empty string, got {value!r}")
    return value


def _synthesizer(value: Any) -> str:
    if value not in SYNTHESIZERS:
        raise ConfigError(f"[run] synthesizer must be one of {list(SYNTHESIZERS)}, got {value!r}")
    return str(value)


def load_config(path: str) -> JobConfig:
    """Read and validate a TOML configuration file.

    Raises:
        ConfigError: the file cannot be read or parsed, or :func:`parse_config` rejects it.
    """
    return parse_config(load_document(path))


# --------------------------------------------------------------------------------------------- the schema


@dataclass(frozen=True)
class ConfigKey:
    """One key of the configuration file, which is also one command-line option."""

    section: str
    """The TOML table, e.g. ``"aggregate"``."""
    key: str
    """The key in that table, e.g. ``"epsilon"``."""
    kind: str
    """Value type: ``str``, ``int``, ``float``, ``bool``, ``str_list``, ``float_list`` or ``json`` (a table)."""
    help: str
    """One line: meaning, unit, range and default."""
    choices: tuple[str, ...] | None = None
    """The allowed values of a ``str`` key with a fixed set of values."""

    @property
    def name(self) -> str:
        """``section.key``."""
        return f"{self.section}.{self.key}"


_STATIC_KEYS = (
    ConfigKey("input", "path", "str", "the sensitive table: a CSV file (header row, gzip allowed), a Parquet or "
              "Delta directory; local or a URI (s3://, abfss://, dbfs:/)"),
    ConfigKey("input", "table", "str", "the sensitive table as a catalog table db.table (instead of a path)"),
    ConfigKey("input", "format", "str", "input format (default: from the path; a directory with _delta_log is "
              "delta, another directory parquet, a file csv)", FORMATS),
    ConfigKey("input", "delimiter", "str", "CSV field delimiter, one character (default ',')"),
    ConfigKey("input", "encoding", "str", "CSV encoding: utf-8 (default), us-ascii or iso-8859-1 (latin-1); a line "
              "not valid in it is an error naming the file and line"),
    ConfigKey("input", "ragged_rows", "str", "a CSV record with more or fewer fields than the header: error "
              "(default) or pad (empty values added, extra fields dropped)", RAGGED_ROWS),
    ConfigKey("input", "infer_schema", "bool", "CSV: infer the column types from the file with Spark's "
              "inferSchema, treated as public schema metadata (default true; false reads strings)"),
    ConfigKey("input", "schema", "str", "CSV: the declared schema as Spark DDL, e.g. \"age INT, sex STRING\" "
              "(wins over infer_schema; reads no data for the types)"),
    ConfigKey("output", "path", "str", "output directory: release/, synthetic/, synthetic.csv, evaluation/"),
    ConfigKey("output", "table", "str", "write the synthetic data to this catalog table db.table instead of "
              "DIR/synthetic"),
    ConfigKey("output", "format", "str", "format of the synthetic data (default parquet; for a table, the "
              "session's default source)", FORMATS),
    ConfigKey("output", "overwrite", "bool", "replace existing outputs (default false: an existing output is an "
              "error)"),
    ConfigKey("output", "single_csv", "bool", "also write DIR/synthetic.csv, one CSV file (default true)"),
    ConfigKey("output", "sds_format", "bool", "also write the release in SDS's aggregates formats, "
              "release/sds_aggregates.tsv and .json (protected record count only; default false)"),
    ConfigKey("output", "join_multi_value", "bool", "join each multi-value column's values back into one "
              "delimited column of the synthetic data (default true; false: one binary column per value)"),
    ConfigKey("spark", "master", "str", "Spark master URL (default: spark-submit's, else local[*])"),
    ConfigKey("spark", "remote", "str", "Spark Connect URL, e.g. sc://host:15002 (local[2] starts a local "
              "Connect server)"),
    ConfigKey("run", "quiet", "bool", "log warnings only (default false)"),
    ConfigKey("run", "synthesizer", "str", "the method, which also picks the mechanism: "
              + "; ".join(f"{s.name}: {s.summary} (mechanism {s.mechanisms[0]})" for s in registry.SYNTHESIZERS.values())
              + f"; {LEGACY_SYNTHESIZER}: the marginals mechanism, then [synthesize] mode; {AUTO_SYNTHESIZER} "
              "(default): pgm (AIM; MST on more than 25 columns when the budget is small for the width), or model "
              "(every subset of at most R columns) when every column has public values and the protected number "
              "of records makes their noise small "
              "(docs/design.md section 4.7); with --sds-format or --mode sds the marginals mechanism",
              SYNTHESIZERS),
    ConfigKey("run", "debug", "bool", "show full tracebacks on failure, which may show data values (default "
              "false)"),
    ConfigKey("run", "release", "str", "synthesize: the release to read, a release directory or an SDS "
              "aggregates file (.tsv or .json, e.g. from pac-synth or SDS's web app); default DIR/release"),
    ConfigKey("query", "sql", "str", "query: Spark SQL counts over the release's table t, e.g. \"SELECT sex, "
              "count(*) AS n FROM t GROUP BY sex\", answered with standard errors"),
    ConfigKey("data", "row_filter", "str", "Spark SQL predicate on public columns applied to the input first, "
              "e.g. \"split = 'train'\" (default none)"),
)  # fmt: skip


_OPTIONS = {
    "input.path": "--input",
    "input.table": "--input-table",
    "input.format": "--format",
    "output.path": "--output",
    "output.table": "--output-table",
    "output.format": "--output-format",
    "aggregate.seed": "--seed",
    "synthesize.seed": "--seed",
    "data.domains": "--data-domains",
    "constraints.rules": "--constraints",
}
"""The keys whose command-line option is not ``--key-name``."""


def option_for(key: ConfigKey) -> str:
    """The command-line option of a configuration key (``--key-name`` unless renamed)."""
    return _OPTIONS.get(key.name, "--" + key.key.replace("_", "-"))


def keyword_keys() -> dict[str, list[ConfigKey]]:
    """The keys by the keyword of the library's options: the command-line option without ``--``, ``-`` written
    ``_`` (``reporting_length``); ``seed`` is both ``[aggregate] seed`` and ``[synthesize] seed``, as ``--seed``."""
    out: dict[str, list[ConfigKey]] = {}
    for key in schema():
        out.setdefault(option_for(key)[2:].replace("-", "_"), []).append(key)
    return out


def _field_docs(cls: type) -> dict[str, str]:
    """The attribute docstrings of a dataclass (the line under each field), joined to one line."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    docs: dict[str, str] = {}
    for node, nxt in zip(body, body[1:], strict=False):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def _plain(text: str) -> str:
    """A docstring line without reStructuredText markup (for --help)."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", text)
    return text.replace("``", "")


def _kind(annotation: Any) -> tuple[str, tuple[str, ...] | None]:
    """(kind, choices) of a dataclass field from its annotation (a string under postponed evaluation)."""
    text = str(annotation).replace(" | None", "").replace("None | ", "").strip()
    if text in ("float", "int", "bool", "str"):
        return text, None
    if text.startswith("tuple[float") or text.startswith("tuple[int"):
        return "float_list", None
    if text.startswith("tuple[str"):
        return "str_list", None
    if text.startswith(("Mapping", "dict")):
        return "json", None
    cls = getattr(_params, text, None)
    if isinstance(cls, type) and issubclass(cls, enum.Enum):
        return "str", tuple(str(m.value) for m in cls)
    raise TypeError(f"no configuration kind for a field of type {text}")


def _dataclass_keys(section: str, cls: type, names: set[str] | None = None) -> list[ConfigKey]:
    docs = _field_docs(cls)
    keys = []
    for f in dataclasses.fields(cls):
        if names is not None and f.name not in names:
            continue
        kind, choices = _kind(f.type)
        default = f.default if f.default is not dataclasses.MISSING else None
        if isinstance(default, enum.Enum):
            shown = str(default.value)
        elif isinstance(default, bool):
            shown = "true" if default else "false"
        elif default is None or default == ():
            shown = "none"
        else:
            shown = str(default)
        text = _plain(docs.get(f.name, f.name.replace("_", " ")))
        keys.append(ConfigKey(section, f.name, kind, f"{text} (default {shown})", choices))
    return keys


@functools.cache
def schema() -> tuple[ConfigKey, ...]:
    """Every configuration key, in file order: the static ones, then those of the parameter objects.

    The [data], [aggregate] and [synthesize] keys are the fields of :class:`DataConfig`, the
    :class:`~spark_dpsynth.privacy.budget.Budget` and :class:`AggregationParams`, and :class:`SynthesisParams`
    (their docstrings are the help texts); the
    [evaluate] keys are the :class:`JobConfig` fields of that section.
    """
    keys = list(_STATIC_KEYS[:-1])
    keys += _dataclass_keys("data", DataConfig)
    keys.append(_STATIC_KEYS[-1])
    keys += _dataclass_keys("aggregate", Budget)
    keys += _dataclass_keys("aggregate", AggregationParams)
    keys += _dataclass_keys("synthesize", SynthesisParams)
    keys += _dataclass_keys("evaluate", JobConfig, set(_EVALUATE_KEYS))
    keys += _CONSTRAINT_KEYS
    for spec in registry.MECHANISMS.values():
        if spec.section == "aggregate":
            continue
        if spec.needs_public:
            keys += [
                dataclasses.replace(k, section=spec.section, help=f"{spec.name}: {k.help}")
                for k in _PUBLIC_TABLE_KEYS
            ]
        own = _section_keys(spec) - set(_ARCHETYPE_IO_KEYS)
        keys += _dataclass_keys(spec.section, spec.params_class(), own)
    return tuple(keys)


_CONSTRAINT_KEYS = (
    ConfigKey("constraints", "rules", "str_list", "declared rules: Spark SQL boolean expressions over the output "
              "columns that every synthetic row satisfies, e.g. \"NOT (AGEP < 15 AND MSP IS NOT NULL)\"; public "
              "(no budget), written in the release's manifest (default none)"),
    ConfigKey("constraints", "where", "str", "a condition: every synthetic row satisfies this Spark SQL boolean "
              "expression, drawn from the model conditioned on it, e.g. \"SEX = 2 AND AGEP >= 60\" (default none)"),
)  # fmt: skip
"""The keys of ``[constraints]`` (docs/design.md section 4.8, "Conditions and declared rules")."""


_PUBLIC_TABLE_KEYS = [
    ConfigKey("public", "public_input", "str", "the PUBLIC table (same schema as the input): a CSV file, a "
              "Parquet or Delta directory, local or a URI"),
    ConfigKey("public", "public_table", "str", "the public table as a catalog table db.table"),
    ConfigKey("public", "public_format", "str", "format of public_input (default: from the path)", FORMATS),
    ConfigKey("public", "public_row_filter", "str", "Spark SQL predicate applied to the public table first, "
              "e.g. \"pmod(xxhash64(idcode), 10) < 3\" (default none)"),
]  # fmt: skip
"""The keys of a mechanism that reads a public table (in that mechanism's section)."""


_TYPE_WORDS = {
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "str_list": "a list of strings",
    "float_list": "a list of numbers",
    "json": "a table",
}


def _type_ok(kind: str, value: Any) -> bool:
    if kind == "str":
        return isinstance(value, str)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "str_list":
        return isinstance(value, list | tuple) and all(isinstance(x, str) for x in value)
    if kind == "float_list":
        return isinstance(value, list | tuple) and all(
            isinstance(x, int | float) and not isinstance(x, bool) for x in value
        )
    return isinstance(value, dict)


def _check_types(doc: dict[str, Any]) -> None:
    """Check the type and allowed values of every known key (unknown keys are reported by _check_keys)."""
    for key in schema():
        if key.section == "evaluate":  # that section checks its own values in parse_config
            continue
        table = doc.get(key.section)
        if not isinstance(table, dict) or key.key not in table:
            continue
        value = table[key.key]
        if not _type_ok(key.kind, value):
            raise ConfigError(f"[{key.section}] {key.key} must be {_TYPE_WORDS[key.kind]}, got {value!r}")
        if key.choices is not None and value not in key.choices:
            raise ConfigError(f"[{key.section}] {key.key} must be one of {list(key.choices)}, got {value!r}")


def merge(doc: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """A copy of the parsed TOML ``doc`` with ``overrides`` (``"section.key" -> value``) applied.

    Overriding ``input.path`` drops the file's ``input.table`` and the other way round. Overriding
    ``data.columns`` drops the file's ``sensitive_zeros``, ``bins``, ``multi_value``, ``domains`` and
    ``hash_buckets`` entries of other columns.
    """
    if "input.path" in overrides and "input.table" in overrides:
        raise ConfigError("[input] give either path or table, not both")
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in doc.items()}
    for name, value in overrides.items():
        section, key = name.split(".", 1)
        table = out.setdefault(section, {})
        if not isinstance(table, dict):
            raise ConfigError(f"[{section}] must be a table, got {type(table).__name__}")
        table[key] = value
        if section == "input" and key in ("path", "table"):
            table.pop("table" if key == "path" else "path", None)
        if name == "data.columns" and isinstance(value, list | tuple):
            if isinstance(table.get("sensitive_zeros"), list):
                table["sensitive_zeros"] = [c for c in table["sensitive_zeros"] if c in value]
            if isinstance(table.get("bins"), dict):
                table["bins"] = {c: b for c, b in table["bins"].items() if c in value}
            if isinstance(table.get("multi_value"), dict):
                table["multi_value"] = {c: b for c, b in table["multi_value"].items() if c in value}
            if isinstance(table.get("domains"), dict):
                table["domains"] = {c: b for c, b in table["domains"].items() if c in value}
            if isinstance(table.get("hash_buckets"), dict):
                table["hash_buckets"] = {c: b for c, b in table["hash_buckets"].items() if c in value}
    return out


def load_document(path: str) -> dict[str, Any]:
    """Read a TOML file as a dict (no validation; see :func:`parse_config`).

    Raises:
        ConfigError: the file cannot be read or parsed.
    """
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"cannot read config {path}: {err}") from err
