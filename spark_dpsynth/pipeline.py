"""The pipeline, one implementation for the notebook, the command line and spark-submit jobs (docs/design.md
section 1.1)::

    read -> check -> release (DP, the budget is spent) -> synthesize -> restore types -> evaluate -> publish

In a notebook, on a DataFrame::

    import spark_dpsynth as dps

    release = dps.fit(df, epsilon=1.0)             # the DP release: the privacy budget is spent here, once
    synthetic = release.sample()                   # a DataFrame with df's columns and types
    report = dps.evaluate(df, synthetic, release)  # utility figures (they read df: keep them in-house)

:func:`fit` takes the options of the command line as keyword arguments (``reporting_length=3``,
``synthesizer="pgm"``, ``label="income"``: the name of ``--reporting-length`` with underscores) and a TOML file
or table (``config=``), read by :mod:`spark_dpsynth.config`: every mechanism and synthesizer of
:mod:`spark_dpsynth.registry` is reachable by name. :meth:`DPRelease.save` and :func:`load` write and read the
release (and the mechanism's own files beside it).

The command line (:mod:`spark_dpsynth.cli.main`) parses its options into the same
:class:`~spark_dpsynth.config.JobConfig` and runs a :class:`Run`: the same steps, with the outputs staged and
published together (:class:`~spark_dpsynth.data.publish.OutputStage`). Every check that needs no data runs before
Spark reads a row (:func:`check_before_reading`), the checks that need the schema only before any DP draw
(:func:`check_schema`), and a release once drawn is kept whatever fails after it (docs/design.md section 1.7).

One file over 800 lines: the run's steps in order (read, check, release, synthesize, evaluate, publish), shared by
the library, the command line and the jobs.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from spark_dpsynth import registry
from spark_dpsynth.config import JobConfig, keyword_keys, load_document, merge, parse_config
from spark_dpsynth.data.io import (
    is_delta_path,
    is_local,
    local_path,
    read_input,
    read_output,
    table_exists,
    write_frame,
    write_single_csv,
)
from spark_dpsynth.data.publish import OutputStage, recover_before_reading
from spark_dpsynth.errors import InvalidParameterError, OutputExistsError, ReleaseError, SchemaError

if TYPE_CHECKING:
    import pandas
    from pyspark.sql import DataFrame, SparkSession

    from spark_dpsynth._progress import Progress
    from spark_dpsynth.privacy.noise import NoiseSource
    from spark_dpsynth.release.core import Release

log = logging.getLogger("spark_dpsynth.pipeline")

__all__ = [
    "DPRelease",
    "Run",
    "check_before_reading",
    "check_schema",
    "evaluate",
    "evaluate_tables",
    "fit",
    "fit_release",
    "fit_rows",
    "job_config",
    "load",
    "read_table",
    "synthesize",
]

COMMANDS = ("pipeline", "aggregate", "synthesize", "evaluate")
"""The steps a :class:`Run` takes: all of them, or one (its inputs then come from the output directory)."""


def job_config(config: JobConfig | str | dict[str, Any] | None = None, **options: Any) -> JobConfig:
    """The configuration of a notebook run: a TOML file, a TOML document (a dict of tables) or a
    :class:`~spark_dpsynth.config.JobConfig`, with ``options`` applied over it as the command line's are.

    Args:
        config: the base configuration (default: none, every key at its default).
        options: the command line's options by name, ``-`` written ``_`` (``epsilon=1.0``,
            ``reporting_length=3``, ``synthesizer="pgm"``, ``seed=7`` sets both seeds, as ``--seed`` does).

    Raises:
        ConfigError: an unknown option or a wrong type or value (the message names the key).
    """
    if isinstance(config, JobConfig):
        if not options:
            return config
        raise InvalidParameterError("give options with a TOML file or table as config=, not a JobConfig")
    doc = load_document(config) if isinstance(config, str) else dict(config or {})
    by_name = keyword_keys()
    overrides: dict[str, Any] = {}
    for name, value in options.items():
        keys = by_name.get(name)
        if keys is None:
            from spark_dpsynth.errors import ConfigError

            raise ConfigError(
                f"unknown option {name!r} (the options are the command line's: spark-dpsynth --help)"
            )
        for key in keys:
            overrides[key.name] = dict(value) if key.name == "data.multi_value" else value
    return parse_config(merge(doc, overrides))


def check_before_reading(config: JobConfig, command: str = "pipeline", *, table_given: bool = False) -> None:
    """Every check of a run that needs no data, before Spark starts: the input exists (unless ``table_given``,
    a DataFrame), the chosen mechanism's parameters and public table, the option conflicts; warns when the budget
    cannot release anything.

    Raises:
        InvalidParameterError: naming the option to change.
    """
    if command != "synthesize":
        if not table_given:
            _check_input(config)
        _check_mechanism(config)
    _check_plan(config, command)
    if command in ("pipeline", "aggregate"):
        _warn_hopeless_budget(config)


def _check_manifest_file(path: str) -> None:
    """A release directory's manifest checked before Spark starts (the figures it holds alone,
    :func:`~spark_dpsynth.release.integrity.check_manifest`); the release is read and checked whole later.

    Raises:
        ReleaseError: the manifest is unreadable or its figures disagree.
    """
    from spark_dpsynth.release.core import read_manifest_json
    from spark_dpsynth.release.integrity import check_manifest
    from spark_dpsynth.release.manifest import Manifest

    if not os.path.isfile(path):
        return  # an SDS aggregates file: read with its release
    check_manifest(Manifest.from_json(read_manifest_json(path)))


def read_table(spark, config: JobConfig):  # noqa: ANN001, ANN201 - SparkSession -> DataFrame
    """Read the input (a path in CSV, Parquet or Delta, or a catalog table) and apply the row filter."""
    return read_filtered(
        spark,
        config.input_path,
        config.input_table,
        config.input_format,
        config.delimiter,
        config.row_filter,
        encoding=config.encoding,
        ragged_rows=config.ragged_rows,
        infer_schema=config.infer_schema,
        schema=config.input_schema,
    )


def read_filtered(spark, path, table, fmt, delimiter, row_filter, **options):  # noqa: ANN001, ANN003, ANN202
    """A path or a catalog table (the table wins when both are set), with its row filter applied; ``options``
    are :func:`~spark_dpsynth.data.io.read_input`'s CSV options (encoding, ragged_rows, infer_schema, schema)."""
    df = read_input(
        spark,
        path=None if table else path,
        table=table,
        fmt=fmt,
        delimiter=delimiter,
        **options,
    )
    return df.where(row_filter) if row_filter else df


def _check_input(config: JobConfig) -> None:
    if config.input_table:
        return
    path = config.input_path
    if not path:
        raise InvalidParameterError(
            "no input: give --input PATH, --input-table TABLE or [input] path in the config"
        )
    if is_local(path) and not os.path.exists(local_path(path)):
        raise InvalidParameterError(f"input not found: {path}")


def _check_mechanism(config: JobConfig) -> None:
    """The chosen mechanism's own checks, before Spark starts: its parameters with the inherited shared keys,
    the data configuration it takes, and its public table when it reads one."""
    spec = registry.mechanism(config.mechanism_name())
    params = config.mechanism_params(spec.name)
    check = spec.load_check()
    if check is not None:
        check(params, config.data)
    if not spec.needs_public:
        return
    if not (config.public_input or config.public_table):
        raise InvalidParameterError(
            f"the {config.synthesizer_name()} synthesizer needs a public table: --public-input PATH or "
            f"[{spec.section}] public_table"
        )
    path = config.public_input
    if path and is_local(path) and not os.path.exists(local_path(path)):
        raise InvalidParameterError(f"public input not found: {path}")


def _check_plan(config: JobConfig, command: str) -> None:
    """The option conflicts of a run, from the configuration alone (before Spark starts): none of them may be
    found after the budget is spent (docs/design.md section 1.7).

    Raises:
        InvalidParameterError: ``--sds-format`` with a mechanism other than the k-way marginals (the SDS files
            are its k-tuples); ``--release`` on a command that makes its release (it reads none).
    """
    if command not in ("pipeline", "aggregate"):
        return
    if config.release:
        raise InvalidParameterError(
            f"--release ([run] release) names a release to read, for synthesize, evaluate or query; {command} "
            "makes its own in DIR/release (remove the option)"
        )
    mechanism = config.mechanism_name()
    if config.sds_format and mechanism != "marginals":
        raise InvalidParameterError(
            f"--sds-format needs k-way marginals (the model or sds synthesizer), not a {mechanism} release "
            f"(--synthesizer {config.synthesizer_name()})"
        )


def check_schema(config: JobConfig, df, command: str) -> None:  # noqa: ANN001 - DataFrame
    """The checks that need the input's schema only, right after it is read and before any DP draw: the
    attribute columns exist and have types a release can carry (no nested or void column,
    :func:`~spark_dpsynth.data.prepare.check_flat_columns`), and the evaluation's options of a pipeline (its
    label and numeric columns are input columns, ``--holdout-filter`` is a boolean expression over them). Spark
    analyses the expression; no row is read.

    Raises:
        SchemaError: an unknown, nested or void attribute column; a label, numeric or workload group column is
            not an attribute column of the input.
        AnalysisException, ParseException: the holdout filter does not analyse (said in one line by ``main``).
    """
    if command not in ("pipeline", "aggregate"):
        return
    from spark_dpsynth.data.prepare import check_flat_columns, resolve_columns
    from spark_dpsynth.errors import SchemaError
    from spark_dpsynth.evaluation.numeric import typed_sensitive_table

    data = resolve_columns(df.columns, config.data)
    check_flat_columns(df.schema, data)
    columns = list(data.columns or df.columns)
    outside = [c for c in config.workload.group_columns if c not in columns]
    if outside:
        raise SchemaError(f"[workload] group_columns {outside} are not attribute columns of the input")
    if command != "pipeline":
        return
    if config.label is not None and not data.multi_value and config.label not in columns:
        raise SchemaError(
            f"the label column {config.label!r} (--label) is not an attribute column of the input"
        )
    if config.numeric_columns:
        typed_sensitive_table(df, data, columns, config.numeric_columns)
    if config.label and config.holdout_filter:
        _ = df.where(config.holdout_filter).schema  # analysed now (Spark Connect analyses lazily)


def needs_delta(config: JobConfig, command: str) -> bool:
    path = config.input_path if command != "synthesize" and not config.input_table else None
    if path and (config.input_format == "delta" or (config.input_format is None and is_delta_path(path))):
        return True
    return command != "aggregate" and config.output_format == "delta"


def outputs(command: str, config: JobConfig) -> list[str]:
    """The entries of DIR a command writes."""
    names = []
    if command in ("pipeline", "aggregate"):
        names.append("release")
    if command in ("pipeline", "synthesize"):
        if not config.output_table:
            names.append("synthetic")
        if config.single_csv:
            names.append("synthetic.csv")
    if command in ("pipeline", "evaluate"):
        names.append("evaluation")
    return names


_SCOPES = {
    "pipeline": ("release", "synthetic", "synthetic.csv", "evaluation"),
    "aggregate": ("release", "synthetic", "synthetic.csv", "evaluation"),
    "synthesize": ("synthetic", "synthetic.csv", "evaluation"),
    "evaluate": ("evaluation",),
}
"""The entries of DIR a command makes obsolete: its own outputs and those computed from them downstream."""


def stale_outputs(command: str, config: JobConfig) -> list[str]:
    """The entries of DIR in the command's scope that it does not write: removed by an ``--overwrite`` run
    (an earlier run's ``synthetic.csv`` must not sit beside a new release written with ``--no-single-csv``)."""
    written = outputs(command, config)
    return [n for n in _SCOPES[command] if n not in written]


def check_synthesis_plan(spark, config: JobConfig) -> None:  # noqa: ANN001
    """The records a pipeline will synthesize, from public values only, against the bounds (before any data is
    read): a target over the partitions (given, or the default, which follows the target); for the marginals
    mechanism without a target, the protected number of records, whose discrete Laplace noise of scale
    1/epsilon_N alone can exceed what one run writes. The partitions then follow the protected number of records
    (:func:`synthesis_plan`), so no other bound depends on the data."""
    from spark_dpsynth.data.session import default_parallelism
    from spark_dpsynth.params import MAX_SYNTHETIC_RECORDS, check_synthesis_size, synthesis_partitions

    syn = config.synthesize
    if syn.target_number_of_records is not None:
        parts = synthesis_partitions(syn.target_number_of_records, default_parallelism(spark), syn.partitions)
        check_synthesis_size(syn.target_number_of_records, parts)
        return
    if config.mechanism_name() != "marginals":
        return  # the release's own size is planned on the release (synthesis_plan)
    agg = config.aggregate
    epsilon_n = config.budget.epsilon * agg.number_of_records_epsilon_proportion
    scale = 1.0 / epsilon_n
    # With probability 1/50 the noise alone exceeds scale ln(25): about that many records, whatever the data.
    likely = math.ceil(scale * math.log(25.0) * (syn.aggregate_counts_scale_factor or 1.0))
    if likely > MAX_SYNTHETIC_RECORDS:
        raise InvalidParameterError(
            f"at epsilon {config.budget.epsilon:g} the protected number of records has discrete Laplace noise of scale "
            f"{scale:.3g} (epsilon_N = {epsilon_n:.3g}), and without --target-number-of-records the synthesizer "
            f"emits about that many records, up to {likely:.3g}: more than one run writes (at most "
            f"{MAX_SYNTHETIC_RECORDS}); give --target-number-of-records or a larger epsilon"
        )


def _warn_hopeless_budget(config: JobConfig) -> None:
    """Warn (before any data is read) when even the smallest possible threshold rho_1 (Delta_1 = 1, the largest
    delta) keeps every value out of a marginals release unless it is held by more records than a table holds."""
    if config.mechanism_name() != "marginals":
        return
    from spark_dpsynth.mechanisms.budget_split import split_budget
    from spark_dpsynth.params import MAX_SYNTHETIC_RECORDS
    from spark_dpsynth.privacy.accounting import MAX_DERIVED_DELTA, rho_1_threshold_discrete

    delta = config.budget.delta_or(MAX_DERIVED_DELTA)
    split = split_budget(config.aggregate, delta, budget=config.budget)
    rho_1 = rho_1_threshold_discrete(split.sigmas[0], 1, delta)
    if rho_1 > MAX_SYNTHETIC_RECORDS:
        log.warning(
            "at epsilon %g a value is released only when more than %.3g records hold it (rho_1 at Delta_1 = 1): "
            "the release will most likely be empty",
            config.budget.epsilon,
            rho_1,
        )


def synthesis_plan(spark, config: JobConfig, release, *, adapt: bool) -> int:  # noqa: ANN001
    """The partitions that synthesize from ``release``: the records (the target, else its protected number of
    records, a DP figure of the manifest, times the scale factor) over the default partitions, which follow them
    (:func:`~spark_dpsynth.params.synthesis_partitions`), or over ``--partitions``.

    Args:
        adapt: a ``--partitions`` too small for the records is raised to the smallest that holds them, with a
            warning (a pipeline, whose release is drawn already), instead of refused (``synthesize``).

    Raises:
        InvalidParameterError: more records than one run writes, or (``adapt`` False) than the partitions hold.
    """
    from spark_dpsynth.data.session import default_parallelism
    from spark_dpsynth.params import MAX_RECORDS_PER_PARTITION, check_synthesis_size, synthesis_partitions

    syn = config.synthesize
    records = syn.target_number_of_records
    if records is None:
        n = max(int(release.manifest.get("protected_number_of_records") or 0), 0)
        records = math.ceil(n * (syn.aggregate_counts_scale_factor or 1.0))
    parts = synthesis_partitions(records, default_parallelism(spark), syn.partitions)
    need = -(-int(records) // MAX_RECORDS_PER_PARTITION)
    if adapt and syn.partitions is not None and parts < need:
        log.warning(
            "--partitions %d is too few for %d synthetic records (at most %d per partition): using %d",
            parts,
            records,
            MAX_RECORDS_PER_PARTITION,
            need,
        )
        parts = need
    check_synthesis_size(records, parts)
    return parts


def check_synthetic_columns(release, synthetic) -> None:  # noqa: ANN001
    """The synthetic table has every column of the release (names compared as Spark does, case-insensitively),
    checked on its schema before anything runs.

    Raises:
        SchemaError: naming the missing columns.
    """
    if release.manifest.get("multi_value_columns"):
        return  # its joined columns are split back by name (data.prepare.split_multi_value), checked there
    from spark_dpsynth.synthesizers.persons import ROWS_COLUMN

    have = {c.lower() for c in synthetic.columns}
    # an event release's rows_per_person is counted from the key (docs/design.md section 2.10)
    derived = {ROWS_COLUMN} if release.manifest.get("persons") else set()
    missing = [c for c in release.columns if c.lower() not in have and c not in derived]
    if missing:
        raise SchemaError(
            f"the synthetic data lacks the release's column{'s' if len(missing) > 1 else ''} "
            f"{', '.join(missing)}; evaluate the synthetic data of this release (spark-dpsynth synthesize)"
        )


def fit_release(
    df: DataFrame, config: JobConfig, spark: SparkSession, *, progress: Progress | None = None
) -> registry.Fitted:
    """The DP release of ``df``: with a privacy unit that keeps its event rows (``DataConfig.keeps_events``), the
    person-level release of :mod:`spark_dpsynth.mechanisms.persons` around :func:`fit_rows`; else
    :func:`fit_rows` itself (docs/design.md sections 2.10 and 4.7).

    Raises:
        SchemaError: a schema check (privacy unit, person or time column) before any data is read.
    """
    spec = registry.mechanism(config.mechanism_name())
    if config.constraints:  # declared rules: analysed on the schema before any DP draw, kept in the manifest
        from spark_dpsynth.synthesizers.conditions import check_rules

        check_rules(df, config.data.columns, config.constraints)
    if config.data.keeps_events and not spec.keeps_rows:
        from spark_dpsynth.mechanisms.persons import fit_events

        fitted = fit_events(
            df,
            config,
            lambda rows, row_config, noise: fit_rows(rows, row_config, spark, progress=progress, noise=noise),
            progress=progress,
        )
    else:
        fitted = fit_rows(df, config, spark, progress=progress)
    if config.constraints:
        from spark_dpsynth.synthesizers.conditions import with_rules

        return with_rules(fitted, config.constraints)
    return fitted


def fit_rows(
    df: DataFrame,
    config: JobConfig,
    spark: SparkSession,
    *,
    progress: Progress | None = None,
    noise: NoiseSource | None = None,
) -> registry.Fitted:
    """The DP release of ``df`` (its rows after ``row_filter``) by the configured mechanism, or by the default's
    choice between the marginals and the workload (docs/design.md section 4.7): the one step that reads the
    sensitive rows for the release and spends the budget. The checks on the schema (:func:`check_schema`) run
    first by the caller.

    Returns:
        The mechanism's :class:`~spark_dpsynth.registry.Fitted`: the release and the writer of its own files.
    """
    from spark_dpsynth.mechanisms._discovery import release_accountant

    spec = registry.mechanism(config.mechanism_name())

    def read_public() -> DataFrame:
        return read_filtered(
            spark,
            config.public_input,
            config.public_table,
            config.public_format,
            config.delimiter,
            config.public_row_filter,
            encoding=config.encoding,
            ragged_rows=config.ragged_rows,
        )

    params = config.mechanism_params("marginals" if config.chooses_mechanism() else spec.name)
    # The run's one accountant: every share of the budget is spent, and every draw made, through it.
    context = registry.MechanismContext(
        spark=spark,
        read_public=read_public if spec.needs_public else None,
        progress=progress,
        accountant=release_accountant(config.budget, noise),
    )
    if config.chooses_mechanism():
        from spark_dpsynth.mechanisms.choice import fit_auto

        _, fitted = fit_auto(df, params, config.mechanism_params("workload"), config.data, context)
        return fitted
    return spec.load_run()(df, params, config.data, context)


def save_release(
    release: Release, path: str, config: JobConfig, spark: SparkSession, *, overwrite: bool = False
) -> None:
    """Write the release to the directory ``path`` (its model included, atomically) and, with ``sds_format``,
    SDS's aggregates files (a marginals release).

    Raises:
        OutputExistsError: ``path`` exists and ``overwrite`` is False.
    """
    release.save(path, spark, overwrite=overwrite)
    if config.sds_format:  # a marginals release (_check_plan)
        from spark_dpsynth.release.sds_format import write_sds_files

        write_sds_files(release, local_path(path))


def synthesize(
    release: Release,
    config: JobConfig,
    spark: SparkSession,
    *,
    release_dir: str | None = None,
    partitions: int | None = None,
    progress: Progress | None = None,
) -> DataFrame:
    """The synthetic table of ``release`` (post-processing: no privacy cost), in the input's column types.

    Args:
        release: the DP release.
        config: the synthesizer (``run.synthesizer``, else the release's own) and ``[synthesize]``.
        spark: the session that samples.
        release_dir: the saved release's directory (passed on to the synthesizer; the built-in ones read the
            release alone).
        partitions: the partitions that sample (default :func:`synthesis_plan` of the release, adapted).
        progress: receives one short message per stage (e.g. ``print``).

    Returns:
        A DataFrame with the release's columns, each in the input's type (docs/design.md section 2.8); a
        multi-value column joined back into one delimited column unless ``join_multi_value`` is false.
    """
    from spark_dpsynth.synthesizers._types import restore_types

    spec = registry.resolve_synthesizer(release.manifest, config.requested_synthesizer())
    persons = release.manifest.get("persons")
    if persons is not None:
        # An event table (docs/design.md section 2.10): a pool of event rows, from which persons are cut.
        import numpy as np

        from spark_dpsynth.synthesizers.persons import persons_wanted, pool_size, stratum_shares

        rng = np.random.default_rng(config.synthesize.seed)
        wanted = persons_wanted(dict(persons), config.synthesize.target_number_of_records, rng)
        size = pool_size(dict(persons), stratum_shares(release), wanted)
        pool = dataclasses.replace(config.synthesize, target_number_of_records=size)
        config = dataclasses.replace(config, synthesize=pool)
        partitions = max(partitions or 1, synthesis_plan(spark, config, release, adapt=True))
    if partitions is None:
        partitions = synthesis_plan(spark, config, release, adapt=True)
    params = dataclasses.replace(config.synthesize, partitions=partitions)
    rules = tuple(dict.fromkeys([*(release.manifest.get("constraints") or ()), *config.constraints]))
    if config.where or rules:  # docs/design.md section 4.8, "Conditions and declared rules"
        from spark_dpsynth.synthesizers.conditions import sample_conditioned

        return sample_conditioned(
            release,
            spec.name,
            params,
            spark,
            where=config.where,
            rules=rules,
            draw=lambda p: spec.load_sample()(
                release,
                p,
                spark,
                release_dir=local_path(release_dir) if release_dir else None,
                progress=progress,
            ),
            restore=lambda rows, seed: restore_types(rows, release.manifest, seed=seed),
            progress=progress,
        )
    synthetic = spec.load_sample()(
        release,
        params,
        spark,
        release_dir=local_path(release_dir) if release_dir else None,
        progress=progress,
    )
    if config.join_multi_value and release.manifest.get("multi_value_columns"):
        from spark_dpsynth.data.prepare import join_multi_value

        synthetic = join_multi_value(synthetic, release.columns, release.manifest)
    # The input's column types (docs/design.md section 2.8), for every synthesizer: bin labels never reach the output.
    synthetic = restore_types(synthetic, release.manifest, seed=config.synthesize.seed)
    if persons is not None:
        from spark_dpsynth.synthesizers.persons import assemble_persons

        synthetic = assemble_persons(
            synthetic, dict(persons), wanted, seed=config.synthesize.seed, progress=progress
        )
    return synthetic


def write_synthetic(
    synthetic: DataFrame,
    config: JobConfig,
    stage: OutputStage,
    spark: SparkSession,
    *,
    test_mode: bool | None = None,
) -> DataFrame:
    """Stage the synthetic table (``DIR/synthetic`` in ``output.format``, or the catalog table ``output.table``,
    and ``DIR/synthetic.csv`` with ``single_csv``); returns it as read back from where it was written.

    In test mode every output carries a mark saying it is NOT private (docs/outputs.md, "Test-mode marks"):
    ``DIR/synthetic/_TEST-MODE.txt``, ``DIR/synthetic.csv.TEST-MODE.txt`` beside the CSV file, and the table
    property ``spark_dpsynth.test_mode`` of a catalog table.

    Args:
        test_mode: the synthetic data is not private (a seeded run, or a release made in test mode); None: from
            the configuration's seeds (``--seed``).
    """
    from spark_dpsynth.data.publish import MARK_IN_DIRECTORY, MARK_SUFFIX, TEST_MODE_MARK_TEXT

    if test_mode is None:
        test_mode = config.budget.seed is not None or config.synthesize.seed is not None
    fmt = config.output_format or "parquet"
    if config.output_table:
        staged = stage.table(config.output_table, config.output_format)
        writer = synthetic.write.mode("error")
        if config.output_format:
            writer = writer.format(config.output_format)
        writer.saveAsTable(staged)
        if test_mode:
            spark.sql(f"ALTER TABLE {staged} SET TBLPROPERTIES ('spark_dpsynth.test_mode' = 'NOT private')")
        written = spark.read.table(staged)
    else:
        path = stage.path("synthetic")
        write_frame(synthetic, path, fmt)
        if test_mode:
            with open(os.path.join(local_path(path), MARK_IN_DIRECTORY), "w", encoding="utf-8") as f:
                f.write(TEST_MODE_MARK_TEXT)
        written = read_output(spark, path=path, fmt=fmt)
    if config.single_csv:
        write_single_csv(written, stage.path("synthetic.csv"))
        if test_mode:
            with open(stage.path(f"synthetic.csv{MARK_SUFFIX}"), "w", encoding="utf-8") as f:
                f.write(TEST_MODE_MARK_TEXT)
    return written


def evaluate_tables(
    df: DataFrame,
    synthetic: DataFrame,
    release: Release,
    config: JobConfig,
    *,
    unfiltered: Callable[[], DataFrame] | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """The evaluation of a synthetic table against the sensitive one (NOT private: it reads the sensitive rows).

    Args:
        df: the sensitive table as the release read it (after ``row_filter``).
        synthetic: the synthetic table in the input's types (:func:`synthesize`).
        release: the release it was sampled from.
        config: ``[data]`` (the columns) and ``[evaluate]``.
        unfiltered: the input without ``row_filter``, for the held-out rows of ``holdout_filter``.
        progress: receives one short message per metric (e.g. ``print``).

    Returns:
        The metrics (:func:`spark_dpsynth.evaluation.metrics.evaluate`; keys in docs/design.md section 5).

    Raises:
        SchemaError: the synthetic table lacks a column of the release.
        InvalidParameterError: the configured columns differ from the release's.
    """
    from spark_dpsynth.data.prepare import (
        prepare_for_release,
        resolve_columns,
        split_multi_value,
        synthetic_for_release,
    )
    from spark_dpsynth.evaluation.metrics import PRIVACY_KEYS, RowSampling
    from spark_dpsynth.evaluation.metrics import evaluate as evaluate_records
    from spark_dpsynth.evaluation.numeric import typed_sensitive_table

    persons = release.manifest.get("persons")
    if persons is not None:
        # An event table: rows compared with rows, each with its person's number of rows capped at L (design 2.10).
        from spark_dpsynth.mechanisms.persons import OFFSET_TOLERANCE, ROWS_COLUMN, with_rows_column

        unit, cap = persons["privacy_unit_column"], int(persons["max_rows_per_person"])
        df = sensitive_persons = with_rows_column(df, unit, cap)
        synthetic = synthetic_persons = with_rows_column(synthetic, unit, cap)
        config = dataclasses.replace(
            config,
            data=dataclasses.replace(
                config.data, privacy_unit=None, columns=tuple(release.columns), person_columns=None
            ),
        )
        from spark_dpsynth.evaluation.persons import person_metrics

        # the persons first, on the tables as read (the evaluation below samples and caches them)
        person_figures = person_metrics(
            sensitive_persons,
            synthetic_persons,
            unit,
            cap,
            list(persons.get("person_columns") or ()),
            [c for c in release.columns if c != ROWS_COLUMN],
            grid=persons.get("rows_grid"),
            distinct_columns=list(persons.get("distinct_columns") or ()),
            offset_time_column=persons.get("offset_time_column"),
            time_offset_columns=list(persons.get("time_offset_columns") or ()),
            offset_tolerance=OFFSET_TOLERANCE,
            nondecreasing_columns=list(persons.get("nondecreasing_columns") or ()),
            span_columns=list(persons.get("noisy_persons_by_span") or ()),
        )
    check_synthetic_columns(release, synthetic)
    whole_synthetic = synthetic  # the declared rules are counted on every row
    data = resolve_columns(df.columns, config.data)
    # Identifier columns are never compared (left out of the measurement, surrogate keys; design 2.8): the
    # resolved columns exclude them, and the tables below hold the attribute columns only.
    data = dataclasses.replace(data, identifiers=())
    if registry.mechanism(release.manifest.mechanism).keeps_rows:
        # Its synthesizer emits a person's rows, not one merged record: compare rows with rows.
        data = dataclasses.replace(data, privacy_unit=None)
    if not data.multi_value and tuple(data.columns or ()) != tuple(release.columns):
        raise InvalidParameterError(
            f"the columns {list(data.columns or ())} differ from the release's {list(release.columns)}"
        )
    row_sampling = None
    if data.privacy_unit is None and data.record_limit is None:
        # Large tables: sample the rows before they are cleaned and binned, each table read once (design 5.5).
        row_sampling = RowSampling(config.max_rows)
        df = row_sampling.sample(
            "sensitive", df, release.protected_number_of_records, columns=list(data.columns or df.columns)
        )
        synthetic = row_sampling.sample("synthetic", synthetic)
    sensitive = prepare_for_release(df, data, release.columns, release.manifest)
    # The input's own values and types, every compared column: the evaluation's yardstick (design 5.2).
    typed_sensitive, numeric_columns = typed_sensitive_table(
        df, data, release.columns, config.numeric_columns, every_column=True
    )
    floor_sensitive = None
    if row_sampling is not None and row_sampling.floor("sensitive") is not None:
        floor_sensitive, _ = typed_sensitive_table(
            row_sampling.floor("sensitive"), data, release.columns, config.numeric_columns, every_column=True
        )
    typed_synthetic = synthetic
    synthetic = synthetic_for_release(
        split_multi_value(synthetic, release.columns, release.manifest), release.columns, release.manifest
    )
    holdout = None
    if config.label and config.holdout_filter and unfiltered is not None:
        # The held-out real rows: the same input without row_filter, selected by holdout_filter, prepared alike.
        holdout = prepare_for_release(
            unfiltered().where(config.holdout_filter), data, release.columns, release.manifest
        )
    metrics = evaluate_records(
        sensitive,
        synthetic,
        release if release.marginals else None,  # an archetype release has no k-tuples for SDS's evaluator
        max_marginal_length=config.max_marginal_length,
        resolution=config.resolution,
        holdout=holdout,
        label=config.label,
        label_values=config.label_values,
        tstr_max_rows=config.tstr_max_rows,
        max_subsets=config.max_subsets,
        subset_seed=config.subset_seed,
        max_rows=config.max_rows,
        numeric_columns=numeric_columns,
        typed_sensitive=typed_sensitive,
        typed_synthetic=typed_synthetic,
        row_sampling=row_sampling,
        bins={c: spec.edges for c, spec in data.bins.items()},
        floor_sensitive=floor_sensitive,
        progress=progress,
    )
    if not release.marginals:
        metrics["privacy"] = {key: release.manifest.get(key) for key in PRIVACY_KEYS}
    if persons is not None:
        metrics["persons"] = person_figures
    rules = list(dict.fromkeys([*(release.manifest.get("constraints") or ()), *config.constraints]))
    if rules:  # the declared rules and their violations in the synthetic table (docs/outputs.md)
        from spark_dpsynth.synthesizers.conditions import rule_violations

        counted = rule_violations(whole_synthetic, rules)
        metrics["constraints"] = [{"rule": r, "violations": v} for r, v in counted.items()]
    return metrics


def write_evaluation(metrics: dict[str, Any], directory: str) -> str:
    """Write ``directory/metrics.json`` and ``directory/report.html``; returns the metrics' path."""
    from spark_dpsynth.evaluation.metrics import write_metrics
    from spark_dpsynth.evaluation.report import write_report

    path = write_metrics(metrics, directory)
    log.info("metrics written to %s", path)
    log.info("report written to %s", write_report(metrics, directory))
    return path


class Run:
    """One command of the command line or a spark-submit job: ``pipeline`` (every step), ``aggregate``,
    ``synthesize`` or ``evaluate`` (its inputs read from the output directory), with the outputs staged under
    ``output.path`` and published together (docs/design.md section 1.7).

    What a caller reads after a failure: :attr:`stage`, :attr:`step` (the step that failed: ``"aggregation"``,
    ``"synthesis"``, ``"evaluation"``) and :attr:`resume` (once a pipeline's release is published: the command
    that goes on from it without spending budget, ``"synthesize"`` or ``"evaluate"``).

    Args:
        config: the run's configuration.
        command: one of :data:`COMMANDS`.
        between: called between the steps and before publishing (the command line raises a signal received
            while a finalizer ran there).
    """

    def __init__(self, config: JobConfig, command: str, *, between: Callable[[], None] | None = None) -> None:
        if command not in COMMANDS:
            raise InvalidParameterError(f"unknown command {command!r}: one of {', '.join(COMMANDS)}")
        self.config = config
        self.command = command
        self.stage: OutputStage | None = None
        self.step = "run"
        self.resume: str | None = None
        self.release: Release | None = None
        self.metrics: dict[str, Any] | None = None
        self._between = between or (lambda: None)

    @property
    def release_dir(self) -> str:
        """The release a ``synthesize`` or an ``evaluate`` reads (``run.release``, else ``DIR/release``)."""
        out_dir = self.config.output_path or ""
        if self.command in ("synthesize", "evaluate") and self.config.release:
            return self.config.release
        return os.path.join(out_dir, "release")

    def check(self) -> None:
        """The checks before Spark starts (:func:`check_before_reading`), and the outputs of earlier commands
        this one reads, once a dead run's interrupted publish in their directory is rolled forward or back
        (:func:`~spark_dpsynth.data.publish.recover_before_reading`, docs/design.md section 1.7).

        Raises:
            InvalidParameterError: no output directory, a check of :func:`check_before_reading`, or a staging
                directory in the output directory that is not as a run writes it.
            ReleaseError: no release (``synthesize``, ``evaluate``), its manifest's figures disagree
                (:func:`~spark_dpsynth.release.integrity.check_manifest`), no synthetic data (``evaluate``), or a
                dead run's half-published outputs that this user cannot settle.
        """
        config, command = self.config, self.command
        if not config.output_path:
            raise InvalidParameterError("no output: give --output DIR or [output] path in the config")
        check_before_reading(config, command)
        release_dir = self.release_dir
        if command in ("synthesize", "evaluate"):
            # A run that died publishing in DIR is rolled forward or back before anything of it is read:
            # DIR is all-old or all-new to a reader (docs/design.md section 1.7).
            recover_before_reading(os.path.dirname(os.path.abspath(local_path(release_dir))))
            recover_before_reading(config.output_path)
        if command in ("synthesize", "evaluate") and not (
            os.path.isfile(os.path.join(local_path(release_dir), "manifest.json"))
            or os.path.isfile(local_path(release_dir))
        ):
            raise ReleaseError(f"no release at {release_dir}; run `aggregate` first")
        if command in ("synthesize", "evaluate"):
            _check_manifest_file(os.path.join(local_path(release_dir), "manifest.json"))
        syn_dir = os.path.join(config.output_path, "synthetic")
        if command == "evaluate" and not config.output_table and not os.path.isdir(local_path(syn_dir)):
            raise ReleaseError(f"no synthetic data at {syn_dir}; run `spark-dpsynth synthesize` first")

    def execute(self, session: Callable[[bool], SparkSession]) -> None:
        """Run the command: :meth:`check`, claim the outputs, start the session (``session(delta)``, ``delta``
        True when an input or output is a Delta table), then the steps; the outputs are published at the end.

        Raises:
            OutputExistsError: an output exists (without ``overwrite``) or another run writes it.
            DPSynthError, Spark's exceptions: from the steps; a pipeline whose release was drawn has it
                published first (:attr:`resume` says so).
        """
        self.check()
        config, command = self.config, self.command
        out_dir = str(config.output_path)
        # The stage claims the outputs before Spark starts: an existing output (without --overwrite), an output
        # another live run is writing, or a destination that cannot be written stops the run here.
        self.stage = stage = OutputStage(
            None,
            out_dir,
            overwrite=config.overwrite,
            names=outputs(command, config),
            stale=stale_outputs(command, config),
        )
        synthetic = None
        with stage:
            spark = session(needs_delta(config, command))
            stage.use_session(spark)
            table = config.output_table if command in ("pipeline", "synthesize") else None
            if table and not config.overwrite and table_exists(spark, table):
                raise OutputExistsError(f"output table exists: {table}; pass --overwrite to replace it")
            if command == "pipeline":
                check_synthesis_plan(spark, config)
            if command in ("pipeline", "aggregate"):
                self.step = "aggregation"
                df = read_table(spark, config)
                check_schema(config, df, command)
                fitted = fit_release(df, config, spark)
                save_release(fitted.release, stage.path("release"), config, spark)
                self.release = fitted.release
                if command == "pipeline":
                    # The budget is spent: from here on the release is published whatever happens next.
                    stage.keep_staged()
                    self.resume = "synthesize"
                self._between()
            else:
                from spark_dpsynth.release import load_release

                self.release = load_release(self.release_dir, spark)
            if command in ("pipeline", "synthesize"):
                # The release just staged (pipeline) or the one on disk (synthesize).
                self.step = "synthesis"
                source = (
                    os.path.join(stage.staging_dir, "release") if command == "pipeline" else self.release_dir
                )
                parts = synthesis_plan(spark, config, self.release, adapt=command == "pipeline")
                synthetic = write_synthetic(
                    synthesize(self.release, config, spark, release_dir=source, partitions=parts),
                    config,
                    stage,
                    spark,
                    # a test-mode release's synthetic data is not private, whatever this run's seeds
                    test_mode=bool(self.release.manifest.get("test_mode")) or None,
                )
                # An interrupt received while the synthetic data was written (its exception may have been lost in
                # a py4j finalizer) stops the run before that data is kept: the release alone is published.
                self._between()
                if command == "pipeline":
                    stage.keep_staged()
                    self.resume = "evaluate"
            if command in ("pipeline", "evaluate"):
                self.step = "evaluation"
                if synthetic is None:
                    synthetic = read_output(
                        spark,
                        path=None if config.output_table else os.path.join(out_dir, "synthetic"),
                        table=config.output_table,
                        fmt=config.output_format or "parquet",
                    )
                check_synthetic_columns(self.release, synthetic)
                directory = stage.path("evaluation")
                self.metrics = evaluate_tables(
                    read_table(spark, config),
                    synthetic,
                    self.release,
                    config,
                    unfiltered=lambda: read_table(spark, dataclasses.replace(config, row_filter=None)),
                )
                write_evaluation(self.metrics, directory)
            self._between()  # nothing is published after an interrupt, even one whose exception was lost


@dataclasses.dataclass
class DPRelease:
    """A DP release with the configuration to sample and evaluate it: what :func:`fit` and :func:`load` return.

    Attributes:
        release: the release (:class:`~spark_dpsynth.release.core.Release`: its manifest holds epsilon, delta,
            rho and the protected number of records, all DP outputs).
        config: the configuration it was fitted with (its ``[synthesize]`` and ``[evaluate]`` settings apply to
            :meth:`sample` and :func:`evaluate`).
        spark: the session that samples.
        directory: where the release was saved (:meth:`save`) or loaded from (:func:`load`), else None.
    """

    release: Release
    config: JobConfig
    spark: SparkSession
    directory: str | None = None

    @property
    def manifest(self) -> Any:
        """The release's manifest (:class:`~spark_dpsynth.release.manifest.Manifest`)."""
        return self.release.manifest

    def sample(
        self,
        n: int | None = None,
        *,
        where: str | None = None,
        constraints: list[str] | tuple[str, ...] | None = None,
        progress: Progress | None = None,
        **options: Any,
    ) -> DataFrame:
        """A synthetic table (post-processing: no privacy cost), with the input's columns and types.

        Args:
            n: the number of rows (``target_number_of_records``); None: the release's noisy number of records
                n', or with ``where`` the model's estimate of the records that satisfy it.
            where: a Spark SQL boolean expression over the output columns: every row satisfies it, drawn from
                the model conditioned on it (``pgm``: exact on the model's cells; ``model``, ``sds``,
                ``independent``: rejection of rows; docs/design.md section 4.8, "Conditions and declared rules").
            constraints: more rules every row satisfies, besides the release's declared rules (its manifest's
                ``constraints``).
            options: ``[synthesize]`` options over the release's configuration, by the command line's names
                (``target_number_of_records=1000``, ``seed=7`` for a reproducible, NOT private test sample,
                ``synthesizer="independent"`` for another synthesizer of the release).
            progress: receives one short message per stage (e.g. ``print``).

        Raises:
            InvalidParameterError: more records than one run writes.
            ConditionError: ``where`` or a rule names a column the release does not have, is not boolean, or has
                probability zero (the message names it), or the synthesizer samples with neither (before
                sampling).
            ConfigError: an unknown option or a wrong value (the message names it).
        """
        config = self.config
        if n is not None:
            options["target_number_of_records"] = n
        if where is not None:
            options["where"] = where
        if constraints is not None:
            options["constraints"] = list(constraints)
        if options:
            config = job_config(_document(config), **options)
        return synthesize(self.release, config, self.spark, release_dir=self.directory, progress=progress)

    def save(self, path: str, *, overwrite: bool = False) -> str:
        """Write the release to the directory ``path`` (its model included, and SDS's aggregates files with
        ``sds_format``); returns ``path``, which :func:`load` reads.

        Raises:
            OutputExistsError: ``path`` exists and ``overwrite`` is False.
        """
        save_release(self.release, path, self.config, self.spark, overwrite=overwrite)
        self.directory = path
        return path

    def query(self, sql: str, *, view: str = "t", replicates: int | None = None, seed: int = 0) -> DataFrame:
        """Counts answered from the release, with standard errors (post-processing: no privacy cost, the sensitive
        table is not read), e.g. ``release.query("SELECT sex, count(*) AS n FROM t WHERE age >= 60 GROUP BY sex")``.

        Args:
            sql: Spark SQL over the view ``view``: ``count(*)`` output columns, WHERE and GROUP BY over at most
                five of the release's columns.
            view: the name the query reads the release by (no table or view of that name may exist).
            replicates: bootstrap replicates of the standard errors (default 24), >= 2.
            seed: the bootstrap's seed (utility randomness, docs/design.md section 7.3).

        Returns:
            One row per group: the group columns, each count ``n`` (double) and ``n_se``, its standard error, and
            ``measured_together`` (:func:`spark_dpsynth.synthesizers.query.answer`, docs/design.md section 4.8).

        Raises:
            ReleaseError: the release has no measured marginals (not a workload release).
            InvalidParameterError: an unsupported query, naming what is not supported.
        """
        from spark_dpsynth.synthesizers.query import BOOTSTRAP_REPLICATES, answer

        return answer(
            self.release, sql, self.spark, view=view, replicates=replicates or BOOTSTRAP_REPLICATES, seed=seed
        )


def _document(config: JobConfig) -> dict[str, Any]:
    """The TOML document a configuration was parsed from (:attr:`~spark_dpsynth.config.JobConfig.document`)."""
    return dict(config.document)


def fit(
    df: DataFrame | pandas.DataFrame,
    epsilon: float | None = None,
    *,
    config: JobConfig | str | dict[str, Any] | None = None,
    progress: Progress | None = None,
    **options: Any,
) -> DPRelease:
    """The DP release of a DataFrame: the default pipeline's first step, as ``spark-dpsynth aggregate`` runs it.

    Args:
        df: the sensitive table: a Spark DataFrame (classic or Spark Connect), or a pandas DataFrame, converted
            through Arrow in the active session or a new local one (its index is not a column;
            :func:`~spark_dpsynth.data.io.as_spark_frame`); ``row_filter`` applies.
        epsilon: the privacy budget (``--epsilon``; also settable in ``config``).
        config: a TOML file, a TOML document (dict) or a :class:`~spark_dpsynth.config.JobConfig`.
        progress: receives one short message per stage (e.g. ``print``; never a true count).
        options: the command line's options by name (:func:`job_config`), e.g. ``delta=1e-6``,
            ``reporting_length=3``, ``synthesizer="pgm"``, ``label="income"``.

    Returns:
        A :class:`DPRelease`; its manifest is the release's record of what was spent (docs/design.md
        section 1.3).

    Raises:
        TypeError: ``df`` is neither a Spark nor a pandas DataFrame (the message says what to pass).
        ConfigError, InvalidParameterError: before any data is read.
        SchemaError: a configured column is not in ``df``, or an attribute column is nested (struct, array,
            map) or void (before any DP draw).

    Privacy:
        (epsilon, delta)-DP per record (or person with ``privacy_unit``): the mechanism's guarantee
        (docs/design.md sections 3 and 4). Everything this returns is a DP output.
    """
    from spark_dpsynth.data.io import as_spark_frame, check_frame

    check_frame(df, "df")
    if epsilon is not None:
        options["epsilon"] = epsilon
    conf = job_config(config, **options)
    check_before_reading(conf, "aggregate", table_given=True)
    df = as_spark_frame(df, what="df")
    spark = df.sparkSession
    if conf.row_filter:
        df = df.where(conf.row_filter)
    check_schema(conf, df, "pipeline")
    fitted = fit_release(df, conf, spark, progress=progress)
    return DPRelease(fitted.release, conf, spark)


def load(
    path: str,
    spark: SparkSession | None = None,
    *,
    config: JobConfig | str | dict[str, Any] | None = None,
    **options: Any,
) -> DPRelease:
    """A saved release (:meth:`DPRelease.save`, ``spark-dpsynth aggregate``'s ``DIR/release``, or an SDS
    aggregates file), ready to sample.

    Args:
        path: the release directory or SDS file.
        spark: the session (default: the active one).
        config, options: as :func:`fit` (the synthesis and evaluation settings).

    Raises:
        ReleaseError: nothing readable at ``path``, a file of the release is damaged (truncated, another
            release's: the message names it, :meth:`spark_dpsynth.release.core.Release.load`), or the manifest's
            figures disagree.
    """
    from pyspark.sql import SparkSession

    from spark_dpsynth.release import load_release

    spark = spark or SparkSession.getActiveSession()
    if spark is None:
        raise InvalidParameterError("no active Spark session: give spark=")
    conf = job_config(config, **options)
    directory = path if os.path.isdir(local_path(path)) else None
    return DPRelease(load_release(path, spark), conf, spark, directory)


def evaluate(
    df: DataFrame | pandas.DataFrame,
    synthetic: DataFrame | pandas.DataFrame,
    release: DPRelease,
    *,
    progress: Progress | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Utility figures of ``synthetic`` against the sensitive ``df`` (NOT private: they read ``df``; keep them
    in-house), as ``spark-dpsynth evaluate`` writes them to ``metrics.json``.

    Args:
        df: the sensitive table as given to :func:`fit` (``row_filter`` applies); a pandas DataFrame is
            converted through Arrow in the release's session, as :func:`fit` converts it.
        synthetic: :meth:`DPRelease.sample`'s table (or a pandas DataFrame of it).
        release: the release it was sampled from.
        progress: receives one short message per metric (e.g. ``print``).
        options: ``[evaluate]`` options by the command line's names (``label="income"``, ``max_rows=...``).

    Returns:
        The metrics (keys in docs/design.md section 5; ``tvd`` by k-way length, ``numeric``, ``tstr``, ...).

    Raises:
        TypeError: ``df`` or ``synthetic`` is neither a Spark nor a pandas DataFrame (the message says what to
            pass).
        SchemaError: the synthetic table lacks a column of the release.
    """
    from spark_dpsynth.data.io import as_spark_frame, check_frame

    check_frame(df, "df")
    check_frame(synthetic, "synthetic")
    config = release.config
    if options:
        config = job_config(_document(config), **options)
    df = as_spark_frame(df, release.spark, what="df")
    synthetic = as_spark_frame(synthetic, release.spark, what="synthetic")
    filtered = df.where(config.row_filter) if config.row_filter else df
    return evaluate_tables(
        filtered, synthetic, release.release, config, unfiltered=lambda: df, progress=progress
    )
