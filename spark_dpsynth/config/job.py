"""A job's configuration, validated: :class:`JobConfig` (every section's parameter objects and the run's
settings) and the names of the default methods (:data:`AUTO_SYNTHESIZER`, :data:`LEGACY_SYNTHESIZER`).

It is made by :func:`spark_dpsynth.config.parse.parse_config` from a TOML document; see :mod:`spark_dpsynth.config`
for the file's layout.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any

from spark_dpsynth import registry
from spark_dpsynth.errors import ConfigError, DPSynthError, InvalidParameterError
from spark_dpsynth.mechanisms.archetype import ArchetypeParams
from spark_dpsynth.mechanisms.class_conditional import ClassConditionalParams
from spark_dpsynth.params import AggregationParams, DataConfig, SynthesisParams, WorkloadParams
from spark_dpsynth.privacy.budget import Budget

__all__ = ["AUTO_SYNTHESIZER", "LEGACY_SYNTHESIZER", "SYNTHESIZERS", "JobConfig"]

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
