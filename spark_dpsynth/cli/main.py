"""The ``spark-dpsynth`` command line: ``pipeline``, ``aggregate``, ``synthesize``, ``evaluate``.

Outputs under ``--output DIR``::

    DIR/release/            the DP release (aggregates Parquet + manifest.json), see spark_dpsynth.release.core
    DIR/synthetic/          synthetic records (Parquet, or --output-format csv|delta), one nullable string
                            column per attribute column; or the catalog table --output-table db.t instead
    DIR/synthetic.csv       the same as one CSV file with a header (empty = empty field; --no-single-csv skips it)
    DIR/evaluation/metrics.json   utility metrics against the sensitive data (NOT private)

Every option is also a configuration key (``--reporting-length`` is ``[aggregate] reporting_length``, see
:func:`spark_dpsynth.config.schema`); options given on the command line override the config file. The outputs of
a run are staged and published all together or not at all (:class:`spark_dpsynth.data.publish.OutputStage`): a
failed or interrupted run changes no output, an existing output is replaced only with ``--overwrite`` (which also
removes the outputs of the command's scope that the run does not write, e.g. an earlier ``synthetic.csv`` with
``--no-single-csv``), and of two runs writing the same outputs at once the second stops before reading any data.
Write access to every destination, the resource bounds of the parameters and the option conflicts are checked
before any data is read, and what needs the input's schema only before any DP draw; the synthesis partitions
follow the protected number of records. A ``pipeline`` keeps its release once drawn: when synthesis or the
evaluation fails, the release (and the synthetic data) are published, one line names the stage and the command
that resumes without spending budget, and the exit status is 3 (docs/design.md section 1.7). Ctrl-C (SIGINT) and
SIGTERM print one line, remove the run's staging (a pipeline's drawn release is kept) and exit with 130 and 143.

Every parameter is validated before Spark starts or any data is read; a user error prints one line
(``spark-dpsynth: error: ...``) and exits with status 2. A Spark failure caused by the input (a file in another
format, a ragged or overlong CSV record, a corrupt gzip file, a value a filter cannot cast) is said in our words,
naming the file, option or expression but no data value (:mod:`spark_dpsynth.cli._spark_errors`), also with
status 2. An unexpected failure prints its exception class and Spark's error condition only (its message could
quote data values) and exits with status 1. Spark's and PySpark's own log output is withheld
(:func:`spark_dpsynth.data.session.configure_logging`, docs/design.md section 1.6); ``--debug`` shows it and the
full traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import math
import os
import shutil
import signal
import sys
import threading
import time
import traceback
from typing import Any

from spark_dpsynth import registry
from spark_dpsynth.config import ConfigKey, JobConfig, load_document, merge, parse_config, schema
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
from spark_dpsynth.data.publish import OutputStage
from spark_dpsynth.errors import (
    ConfigError,
    DPSynthError,
    InvalidParameterError,
    OutputExistsError,
    ReleaseError,
    SchemaError,
)
from spark_dpsynth.synthesizers._types import restore_types

log = logging.getLogger("spark_dpsynth.cli.main")

__all__ = ["main", "build_parser", "option_for", "COMMANDS", "EXIT_RELEASE_KEPT"]

EXIT_RELEASE_KEPT = 3
"""Exit status of a ``pipeline`` whose DP release was published but whose synthesis or evaluation failed: the
error line names the stage and the command that resumes from the release without spending budget
(docs/design.md section 1.7)."""

_MECHANISM_SECTIONS = tuple(dict.fromkeys(spec.section for spec in registry.MECHANISMS.values()))
COMMANDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "pipeline": (
        "aggregate, synthesize and evaluate",
        ("input", "output", "spark", "run", "data", *_MECHANISM_SECTIONS, "synthesize", "evaluate"),
    ),
    "aggregate": (
        "input -> DIR/release (a DP mechanism)",
        ("input", "output", "spark", "run", "data", *_MECHANISM_SECTIONS, "evaluate"),
    ),
    "synthesize": (
        "DIR/release -> DIR/synthetic (post-processing, no privacy cost)",
        ("output", "spark", "run", "synthesize"),
    ),
    "evaluate": (
        "input + DIR/release + synthetic data -> DIR/evaluation (not private)",
        ("input", "output", "spark", "run", "data", "evaluate"),
    ),
}
"""Subcommand -> (help, the configuration sections whose keys are its options)."""

_FLAGS = {
    "input.path": "--input",
    "input.table": "--input-table",
    "input.format": "--format",
    "output.path": "--output",
    "output.table": "--output-table",
    "output.format": "--output-format",
    "aggregate.seed": "--seed",
    "synthesize.seed": "--seed",
    "data.domains": "--data-domains",
}
_ALIASES = {"data.columns": ("--use-columns",)}
"""More option strings of a key (SDS's names)."""
_METAVARS = {"int": "N", "float": "X", "str_list": "A,B,...", "float_list": "X,Y,...", "json": "JSON"}
_SEED_HELP = (
    "TEST MODE: reproducible output from a non-cryptographic generator; the result is NOT private "
    "([aggregate] seed and [synthesize] seed; default none)"
)


def option_for(key: ConfigKey) -> str:
    """The command-line option of a configuration key (``--key-name`` unless renamed)."""
    return _FLAGS.get(key.name, "--" + key.key.replace("_", "-"))


def _str_list(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _float_list(text: str) -> list[float]:
    try:
        return [float(x) for x in _str_list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def _column_delimiter(text: str) -> tuple[str, str]:
    column, sep, delimiter = text.partition(":")
    if not sep or not column or not delimiter:
        raise argparse.ArgumentTypeError(f"expected COLUMN:DELIMITER, e.g. genres:'|', got {text!r}")
    return column, delimiter


def _json_table(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"expected a JSON object: {err}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {type(value).__name__}")
    return value


_TYPES = {
    "int": int,
    "float": float,
    "str": str,
    "str_list": _str_list,
    "float_list": _float_list,
    "json": _json_table,
}


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line, like every other error of the command."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"spark-dpsynth: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The parser: one subcommand per pipeline stage, one option per configuration key of its sections."""
    parser = _Parser(
        prog="spark-dpsynth",
        description="Differentially private marginals (SDS method) and synthetic data on Apache Spark. "
        "Every option is also a key of the TOML config file (--config); the command line wins.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    for command, (text, sections) in COMMANDS.items():
        p = sub.add_parser(command, help=text, description=text, conflict_handler="resolve")
        p.add_argument("--config", metavar="FILE.toml", help="TOML configuration file (see conf/adult.toml)")
        _add_options(p, [k for k in schema() if k.section in sections])
    return parser


def _add_options(p: argparse.ArgumentParser, keys: list[ConfigKey]) -> None:
    by_flag: dict[str, list[ConfigKey]] = {}
    for key in keys:
        by_flag.setdefault(option_for(key), []).append(key)
    groups: dict[str, Any] = {}
    for flag, group in by_flag.items():
        key = group[0]
        section = groups.get(key.section)
        if section is None:
            section = groups[key.section] = p.add_argument_group(f"[{key.section}]")
        kwargs: dict[str, Any] = {
            "dest": flag[2:].replace("-", "_"),
            "default": argparse.SUPPRESS,
            "help": _SEED_HELP if flag == "--seed" else f"{key.help} [{key.name}]",
        }
        if key.kind == "bool":
            kwargs["action"] = argparse.BooleanOptionalAction
        elif key.name == "data.multi_value":
            kwargs.update(action="append", type=_column_delimiter, metavar="COLUMN:DELIM")
            kwargs["help"] = f"a multi-value column and the delimiter of its values; repeatable [{key.name}]"
        else:
            kwargs["type"] = _TYPES[key.kind]
            if key.choices:
                kwargs["choices"] = key.choices
            else:
                kwargs["metavar"] = _METAVARS.get(key.kind, key.key.upper())
        section.add_argument(flag, *_ALIASES.get(key.name, ()), **kwargs)


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    """``section.key -> value`` for every option given on the command line."""
    sections = COMMANDS[args.command][1]
    given = vars(args)
    out: dict[str, Any] = {}
    for key in schema():
        if key.section not in sections:
            continue
        dest = option_for(key)[2:].replace("-", "_")
        if dest in given:
            value = given[dest]
            out[key.name] = dict(value) if key.name == "data.multi_value" else value
    return out


def load_job_config(args: argparse.Namespace) -> JobConfig:
    """The config file (if any) with the command-line options applied, validated.

    Raises:
        ConfigError: a key or an option has a wrong type or value (the message names the key or the option).
    """
    doc = load_document(args.config) if getattr(args, "config", None) else {}
    overrides = _overrides(args)
    try:
        return parse_config(merge(doc, overrides))
    except ConfigError as err:
        message = str(err)
        for name in overrides:
            section, key = name.split(".", 1)
            prefix = f"[{section}] {key} "
            if message.startswith(prefix):
                flag = option_for(next(k for k in schema() if k.name == name))
                raise ConfigError(f"argument {flag}: {message[len(f'[{section}] ') :]}") from err
        raise


def read_table(spark, config: JobConfig):  # noqa: ANN001, ANN201 - SparkSession -> DataFrame
    """Read the input (a path in CSV, Parquet or Delta, or a catalog table) and apply the row filter."""
    return _read_filtered(
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


def _read_filtered(spark, path, table, fmt, delimiter, row_filter, **options):  # noqa: ANN001, ANN003, ANN202
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
            are its k-tuples).
    """
    if command not in ("pipeline", "aggregate"):
        return
    mechanism = config.mechanism_name()
    if config.sds_format and mechanism != "marginals":
        raise InvalidParameterError(
            f"--sds-format needs k-way marginals (the model or sds synthesizer), not a {mechanism} release "
            f"(--synthesizer {config.synthesizer_name()})"
        )


def _check_schema(config: JobConfig, df, command: str) -> None:  # noqa: ANN001 - DataFrame
    """The checks that need the input's schema only, right after it is read and before any DP draw: the
    evaluation's options of a pipeline (its label and numeric columns are input columns, ``--holdout-filter`` is
    a boolean expression over them). Spark analyses the expression; no row is read.

    Raises:
        SchemaError: a label or numeric column is not an attribute column of the input.
        AnalysisException, ParseException: the holdout filter does not analyse (said in one line by ``main``).
    """
    if command != "pipeline":
        return
    from spark_dpsynth.data.prepare import resolve_columns
    from spark_dpsynth.errors import SchemaError
    from spark_dpsynth.evaluation.numeric import typed_sensitive_table

    data = resolve_columns(df.columns, config.data)
    columns = list(data.columns or df.columns)
    if config.label is not None and not data.multi_value and config.label not in columns:
        raise SchemaError(
            f"the label column {config.label!r} (--label) is not an attribute column of the input"
        )
    if config.numeric_columns:
        typed_sensitive_table(df, data, columns, config.numeric_columns)
    if config.label and config.holdout_filter:
        _ = df.where(config.holdout_filter).schema  # analysed now (Spark Connect analyses lazily)


def _needs_delta(config: JobConfig, command: str) -> bool:
    path = config.input_path if command != "synthesize" and not config.input_table else None
    if path and (config.input_format == "delta" or (config.input_format is None and is_delta_path(path))):
        return True
    return command != "aggregate" and config.output_format == "delta"


def _outputs(command: str, config: JobConfig) -> list[str]:
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


def _stale_outputs(command: str, config: JobConfig) -> list[str]:
    """The entries of DIR in the command's scope that it does not write: removed by an ``--overwrite`` run
    (an earlier run's ``synthetic.csv`` must not sit beside a new release written with ``--no-single-csv``)."""
    written = _outputs(command, config)
    return [n for n in _SCOPES[command] if n not in written]


def _check_synthesis_plan(spark, config: JobConfig) -> None:  # noqa: ANN001
    """The records a pipeline will synthesize, from public values only, against the bounds (before any data is
    read): a target over the partitions (given, or the default, which follows the target); for the marginals
    mechanism without a target, the protected number of records, whose discrete Laplace noise of scale
    1/epsilon_N alone can exceed what one run writes. The partitions then follow the protected number of records
    (:func:`_synthesis_plan`), so no other bound depends on the data."""
    from spark_dpsynth.data.session import default_parallelism
    from spark_dpsynth.params import MAX_SYNTHETIC_RECORDS, check_synthesis_size, synthesis_partitions

    syn = config.synthesize
    if syn.target_number_of_records is not None:
        parts = synthesis_partitions(syn.target_number_of_records, default_parallelism(spark), syn.partitions)
        check_synthesis_size(syn.target_number_of_records, parts)
        return
    if config.mechanism_name() != "marginals":
        return  # the release's own size is planned on the release (_synthesis_plan)
    agg = config.aggregate
    epsilon_n = agg.epsilon * agg.number_of_records_epsilon_proportion
    scale = 1.0 / epsilon_n
    # With probability 1/50 the noise alone exceeds scale ln(25): about that many records, whatever the data.
    likely = math.ceil(scale * math.log(25.0) * (syn.aggregate_counts_scale_factor or 1.0))
    if likely > MAX_SYNTHETIC_RECORDS:
        raise InvalidParameterError(
            f"at epsilon {agg.epsilon:g} the protected number of records has discrete Laplace noise of scale "
            f"{scale:.3g} (epsilon_N = {epsilon_n:.3g}), and without --target-number-of-records the synthesizer "
            f"emits about that many records, up to {likely:.3g}: more than one run writes (at most "
            f"{MAX_SYNTHETIC_RECORDS}); give --target-number-of-records or a larger epsilon"
        )


def _warn_hopeless_budget(config: JobConfig) -> None:
    """Warn (before any data is read) when even the smallest possible threshold rho_1 (Delta_1 = 1, the largest
    delta) keeps every value out of a marginals release unless it is held by more records than a table holds."""
    if config.mechanism_name() != "marginals":
        return
    from spark_dpsynth.params import MAX_SYNTHETIC_RECORDS
    from spark_dpsynth.privacy.accounting import MAX_DERIVED_DELTA, rho_1_threshold_discrete, split_budget

    agg = config.aggregate
    delta = agg.delta if agg.delta is not None else MAX_DERIVED_DELTA
    split = split_budget(agg, delta)
    rho_1 = rho_1_threshold_discrete(split.sigmas[0], 1, delta)
    if rho_1 > MAX_SYNTHETIC_RECORDS:
        log.warning(
            "at epsilon %g a value is released only when more than %.3g records hold it (rho_1 at Delta_1 = 1): "
            "the release will most likely be empty",
            agg.epsilon,
            rho_1,
        )


def _synthesis_plan(spark, config: JobConfig, release, *, adapt: bool) -> int:  # noqa: ANN001
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


class _Terminated(BaseException):
    """Raised in the main thread by the SIGTERM handler (a BaseException, like KeyboardInterrupt)."""


_PENDING: list[type[BaseException]] = []
"""The interrupts received (KeyboardInterrupt, _Terminated), in order. A signal handler's exception is lost when
the signal lands while Python runs a finalizer or a weak-reference callback (py4j releases its Java objects in
those: Python prints "Exception ignored in" and goes on), so the job checks this list between its steps and
before it publishes (:func:`_check_interrupts`)."""


def _check_interrupts() -> None:
    """Raise the first interrupt received whose exception was lost (see :data:`_PENDING`)."""
    if _PENDING:
        raise _PENDING[0]


def _interrupted_by_pending(stage: OutputStage | None, kept: str | None = None) -> int | None:
    """The exit status of an interrupt received before a failure, else None: a signal that stops the job also
    breaks what runs under it (the JVM's connection, a cancelled Spark job, the staging cleanup), and the error
    that follows is its consequence, reported as the interrupt (130 or 143), not as a failure of its own."""
    if not _PENDING:
        return None
    if _PENDING[0] is KeyboardInterrupt:
        return _interrupted("SIGINT", 130, stage, kept)
    return _interrupted("SIGTERM", 143, stage, kept)


def _install_interrupts(spark=None) -> None:  # noqa: ANN001
    """SIGINT raises KeyboardInterrupt and SIGTERM :class:`_Terminated` in the main thread; with a session,
    its running Spark jobs are cancelled first (so that no task still writes into the staging directory)."""
    if threading.current_thread() is not threading.main_thread():
        return
    _PENDING.clear()
    from spark_dpsynth.cli._signals import mute_jvm
    from spark_dpsynth.data.session import is_connect

    connect = spark is not None and is_connect(spark)

    def cancel() -> None:
        if spark is None:
            return
        try:
            if connect:
                spark.interruptAll()
            else:
                spark.sparkContext.cancelAllJobs()
                _wait_for_cancelled_tasks(spark)
        except Exception:  # noqa: BLE001 - best effort: the process exits next
            pass

    def on_sigint(signum, frame) -> None:  # noqa: ANN001
        _PENDING.append(KeyboardInterrupt)
        mute_jvm()
        cancel()
        raise KeyboardInterrupt

    def on_sigterm(signum, frame) -> None:  # noqa: ANN001
        _PENDING.append(_Terminated)
        mute_jvm()
        cancel()
        raise _Terminated

    signal.signal(signal.SIGINT, on_sigint)
    signal.signal(signal.SIGTERM, on_sigterm)


_CANCEL_WAIT_SECONDS = 10.0
"""How long an interrupt waits for the cancelled tasks to stop before the staging is removed."""


def _wait_for_cancelled_tasks(spark) -> None:  # noqa: ANN001 - classic SparkSession
    """Wait (at most :data:`_CANCEL_WAIT_SECONDS`) until no task runs: a cancelled job's tasks stop at their next
    record, and one still writing into the staging directory after it was removed would leave a directory behind
    (the JVM outlives the interrupt now that it ignores SIGINT and SIGTERM, :mod:`spark_dpsynth.cli._signals`)."""
    tracker = spark.sparkContext._jsc.sc().statusTracker()
    deadline = time.monotonic() + _CANCEL_WAIT_SECONDS
    while time.monotonic() < deadline:
        if sum(info.numRunningTasks() for info in tracker.getExecutorInfos()) == 0:
            return
        time.sleep(0.1)


def _interrupted(name: str, status: int, stage: OutputStage | None, kept: str | None = None) -> int:
    """One line for an interrupt; further interrupts are ignored while the process ends, and so is the JVM's
    stderr (its cancelled tasks' stack traces, :mod:`spark_dpsynth.cli._signals`). Nothing published, or only a
    pipeline's release: the JVM this process started is ended first (a cancelled write may still commit into the
    removed staging directory) and what it left of the staging is removed. ``kept``: a pipeline's outputs kept
    after its release was drawn and how to resume (:func:`_resume_hint`)."""
    from spark_dpsynth.cli._signals import mute_jvm, stop_jvm

    mute_jvm()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    published = bool(stage and (stage.published or stage.published_tables))
    # A staging the stage keeps on purpose holds the journal of a rollback that a later run finishes. After a
    # pipeline's release was published (``kept``), the staging holds only the outputs not yet published.
    unpublished = not published or kept is not None
    if stage is not None and unpublished and not getattr(stage, "_keep_staging", False) and stop_jvm():
        shutil.rmtree(local_path(stage.staging_dir), ignore_errors=True)
    done = "the outputs were already published" if published else "no output was changed"
    if published and kept is not None:
        done = kept
    print(f"spark-dpsynth: interrupted by {name}; {done}", file=sys.stderr)
    return status


def _session(config: JobConfig, *, delta: bool):  # noqa: ANN202 - SparkSession
    from spark_dpsynth.cli._signals import launched_jvm
    from spark_dpsynth.data.session import get_session

    # Without --debug Spark's log output is withheld (it can quote data values): docs/design.md section 1.6.
    # A local JVM leaves SIGINT and SIGTERM to this process and its stderr goes through it (cli._signals).
    with launched_jvm() if not config.remote else contextlib.nullcontext():
        return get_session(master=config.master, remote=config.remote, delta=delta, debug=config.debug)


def _resume_hint(config: JobConfig, out_dir: str, command: str, config_file: str | None) -> str:
    """What a failed pipeline keeps and the command that goes on from it without spending budget: after the
    release, ``synthesize`` (then ``evaluate``); after the synthetic data, ``evaluate``."""
    import shlex

    out = os.path.abspath(local_path(out_dir))
    common = ["--config", config_file] if config_file else []
    if command == "synthesize":
        what = f"the release is kept in {out}/release (no budget is spent to go on)"
        resume = ["spark-dpsynth", "synthesize", *common, "--output", out]
    else:
        what = f"the release and the synthetic data are kept in {out} (no budget is spent to go on)"
        source = (
            ["--input-table", config.input_table]
            if config.input_table
            else ["--input", str(config.input_path)]
        )
        resume = ["spark-dpsynth", "evaluate", *common, *source]
        if config.output_table:
            resume += ["--output-table", config.output_table]
        resume += ["--output", out]
    then = " and then `evaluate`" if command == "synthesize" else ""
    return f"{what}; resume with `{shlex.join(resume)}`{then}, with the same options"


def _expressions(config: JobConfig | None) -> dict[str, str | None]:
    """The Spark SQL texts the user gave, by option (an error pointing into one names the option)."""
    if config is None:
        return {}
    return {
        "--row-filter": config.row_filter,
        "--holdout-filter": config.holdout_filter,
        "--public-row-filter": config.public_row_filter,
    }


def _cast_columns(config: JobConfig | None):  # noqa: ANN202 - Callable[[], list[str]] | None
    """For a CSV input with declared types (--schema): a function that finds the columns whose values do not
    parse as their type (names only, :func:`spark_dpsynth.data.io.uncastable_columns`), else None."""
    if config is None or not config.input_schema or not config.input_path or config.input_table:
        return None

    def find() -> list[str]:
        from pyspark.sql import SparkSession

        from spark_dpsynth.data.io import uncastable_columns

        spark = SparkSession.getActiveSession()
        if spark is None:
            return []
        return uncastable_columns(
            spark,
            config.input_path,
            config.input_schema,
            delimiter=config.delimiter,
            encoding=config.encoding,
        )

    return find


def _check_synthetic_columns(release, synthetic) -> None:  # noqa: ANN001
    """The synthetic table has every column of the release (names compared as Spark does, case-insensitively),
    checked on its schema before anything runs.

    Raises:
        SchemaError: naming the missing columns.
    """
    if release.manifest.get("multi_value_columns"):
        return  # its joined columns are split back by name (data.prepare.split_multi_value), checked there
    have = {c.lower() for c in synthetic.columns}
    missing = [c for c in release.columns if c.lower() not in have]
    if missing:
        raise SchemaError(
            f"the synthetic data lacks the release's column{'s' if len(missing) > 1 else ''} "
            f"{', '.join(missing)}; evaluate the synthetic data of this release (spark-dpsynth synthesize)"
        )


def _run_aggregate(spark, config: JobConfig, stage: OutputStage, command: str = "aggregate"):  # noqa: ANN001, ANN202
    """Run the chosen mechanism (registry) on the input and stage its release (and its own files); the checks
    that need the schema only (:func:`_check_schema`) run first."""
    spec = registry.mechanism(config.mechanism_name())
    df = read_table(spark, config)
    _check_schema(config, df, command)

    def read_public():  # noqa: ANN202 - DataFrame
        return _read_filtered(
            spark,
            config.public_input,
            config.public_table,
            config.public_format,
            config.delimiter,
            config.public_row_filter,
            encoding=config.encoding,
            ragged_rows=config.ragged_rows,
        )

    context = registry.MechanismContext(spark=spark, read_public=read_public if spec.needs_public else None)
    if config.chooses_mechanism():
        from spark_dpsynth.mechanisms.choice import fit_auto

        aggregation, workload = config.mechanism_params("marginals"), config.mechanism_params("workload")
        _, fitted = fit_auto(df, aggregation, workload, config.data, context)
    else:
        fitted = spec.load_run()(df, config.mechanism_params(spec.name), config.data, context)
    release = fitted.release
    path = stage.path("release")
    release.save(path, spark)
    if fitted.write_extras is not None:
        fitted.write_extras(local_path(path))
    if config.sds_format:  # a marginals release (_check_plan)
        from spark_dpsynth.release.sds_format import write_sds_files

        write_sds_files(release, local_path(path))
    return release


def _run_synthesize(  # noqa: ANN201
    spark,  # noqa: ANN001
    config: JobConfig,
    stage: OutputStage,
    release,  # noqa: ANN001
    release_dir: str,
    *,
    adapt: bool = False,
):
    """Synthesize, write the synthetic data (staged) and return it as read back from where it was written.
    ``adapt``: see :func:`_synthesis_plan`."""
    spec = registry.resolve_synthesizer(release.manifest, config.requested_synthesizer())
    params = dataclasses.replace(
        config.synthesize, partitions=_synthesis_plan(spark, config, release, adapt=adapt)
    )
    synthetic = spec.load_sample()(release, params, spark, release_dir=local_path(release_dir))
    if config.join_multi_value and release.manifest.get("multi_value_columns"):
        from spark_dpsynth.data.prepare import join_multi_value

        synthetic = join_multi_value(synthetic, release.columns, release.manifest)
    # The input's column types (docs/design.md section 2.8), for every synthesizer: bin labels never reach the output.
    synthetic = restore_types(synthetic, release.manifest, seed=config.synthesize.seed)
    fmt = config.output_format or "parquet"
    if config.output_table:
        staged = stage.table(config.output_table, config.output_format)
        writer = synthetic.write.mode("error")
        if config.output_format:
            writer = writer.format(config.output_format)
        writer.saveAsTable(staged)
        written = spark.read.table(staged)
    else:
        path = stage.path("synthetic")
        write_frame(synthetic, path, fmt)
        written = read_output(spark, path=path, fmt=fmt)
    if config.single_csv:
        write_single_csv(written, stage.path("synthetic.csv"))
    return written


def _run_evaluate(spark, config: JobConfig, out_dir: str, release=None, synthetic=None):  # noqa: ANN001, ANN202
    from spark_dpsynth.data.prepare import (
        prepare_for_release,
        resolve_columns,
        split_multi_value,
        synthetic_for_release,
    )
    from spark_dpsynth.evaluation.metrics import RowSampling, evaluate, write_metrics
    from spark_dpsynth.evaluation.numeric import typed_sensitive_table
    from spark_dpsynth.evaluation.report import write_report
    from spark_dpsynth.release.core import Release

    if release is None:
        release = Release.load(os.path.join(out_dir, "release"), spark)
    if synthetic is None:
        syn_path = os.path.join(out_dir, "synthetic")
        if not os.path.isdir(syn_path):
            raise ReleaseError(f"no synthetic data at {syn_path}; run `spark-dpsynth synthesize` first")
        synthetic = spark.read.parquet(syn_path)
    _check_synthetic_columns(release, synthetic)
    df = read_table(spark, config)
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
    if config.label and config.holdout_filter:
        # The held-out real rows: the same input without row_filter, selected by holdout_filter, prepared alike.
        unfiltered = read_table(spark, dataclasses.replace(config, row_filter=None))
        holdout = prepare_for_release(
            unfiltered.where(config.holdout_filter), data, release.columns, release.manifest
        )
    metrics = evaluate(
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
    )
    if not release.marginals:
        from spark_dpsynth.evaluation.metrics import PRIVACY_KEYS

        metrics["privacy"] = {key: release.manifest.get(key) for key in PRIVACY_KEYS}
    path = write_metrics(metrics, os.path.join(out_dir, "evaluation"))
    log.info("metrics written to %s", path)
    report = write_report(metrics, os.path.join(out_dir, "evaluation"))
    log.info("report written to %s", report)
    return metrics, path


def describe_meanings(meanings: dict) -> str:  # type: ignore[type-arg]
    """One line of the manifest's ``column_meanings`` (docs/design.md section 2.8): how many columns are codes
    and measurements, and which numeric columns the DP profile decided (names only; DP outputs)."""
    codes = [c for c, e in meanings.items() if e.get("meaning") == "code"]
    measures = [c for c, e in meanings.items() if e.get("meaning") == "measurement"]
    profiled = {c for c, e in meanings.items() if e.get("source") == "dp_profile"}

    def names(cols: list[str]) -> str:
        shown = [c for c in cols if c in profiled]
        if not shown:
            return ""
        more = f", +{len(shown) - 8}" if len(shown) > 8 else ""
        return " (DP profile: " + ", ".join(shown[:8]) + more + ")"

    return f"{len(codes)} codes{names(codes)}, {len(measures)} measurements{names(measures)}"


def _summary(release, metrics: dict | None, out_dir: str, stage: OutputStage | None = None) -> str:  # noqa: ANN001
    m = release.manifest
    lines = [
        "",
        "spark_dpsynth summary" + ("  [TEST MODE: NOT PRIVATE]" if m.get("test_mode") else ""),
        f"  privacy spent          epsilon={m['epsilon']:g} delta={m['delta']:.3g}"
        + (f" (rho={m['rho']:.4g})" if "rho" in m else f" ({m.get('synthesizer', 'release')})"),
        f"  protected n            {m['protected_number_of_records']}",
        "  released tuples        " + ", ".join(f"k={k}: {n}" for k, n in release.sizes().items()),
        "  sensitivities          "
        + ", ".join(f"k={k}: {v}" for k, v in (m.get("sensitivities") or {}).items()),
    ]
    if release.manifest.mechanism == "workload":
        lines[5:6] = [
            f"  measured marginals     {len(release.measurements)} in {len(m['rounds'])} rounds "
            f"({m['selection']} selection)"
        ]
    if release.manifest.mechanism == "archetype":
        lines[3:6] = [
            f"  privacy unit           {m.get('privacy_unit_column') or m['privacy_unit']}",
            f"  protected persons      {m['protected_number_of_persons']} (records {m['protected_number_of_records']})",
            "  person histograms      "
            + ", ".join(f"{h}: {d['bins']} bins, sigma {d['sigma']:.3g}" for h, d in m["histograms"].items()),
        ]
    choice = m.get("mechanism_choice")
    if choice:
        lines.insert(3, f"  mechanism (auto)       {choice['mechanism']}: {choice['reason']}")
    meanings = m.get("column_meanings") or {}
    if meanings:
        lines.append(f"  column meanings        {describe_meanings(meanings)}")
    if metrics is not None:
        tvd = metrics.get("tvd") or {}
        lengths = [k for k in sorted(tvd, key=int) if isinstance(tvd[k], dict)]
        lines.append("  mean TVD (1/2/3-way)   " + " / ".join(f"{tvd[k]['mean']:.4f}" for k in lengths))
        if lengths and tvd[lengths[0]].get("floor") is not None:
            measured = all(tvd[k].get("floor_measured") is not None for k in lengths)
            lines.append(
                "  sampling error (floor) "
                + " / ".join(f"{tvd[k]['floor_measured' if measured else 'floor']:.4f}" for k in lengths)
                + (
                    " (TVD of two disjoint uniform samples of the sensitive table)"
                    if measured
                    else " (expected TVD of two uniform samples of these sizes of one table)"
                )
            )
        from spark_dpsynth.evaluation.metrics import describe_out_of_support

        lines += [f"  out-of-support values  {line}" for line in describe_out_of_support(metrics)]
        from spark_dpsynth.evaluation.metrics import describe_row_sampling, describe_sampling

        lines += [f"  subsets compared       {line}" for line in describe_sampling(metrics)]
        lines += [f"  rows compared          {line}" for line in describe_row_sampling(metrics)]
        lines.append(f"  synthetic rows         {metrics['rows']['synthetic']}")
        blank = metrics.get("blank_cell_share") or {}
        if blank.get("synthetic") is not None and blank.get("sensitive") is not None:
            lines.append(
                f"  blank-cell share       synthetic {blank['synthetic']:.4f} / sensitive {blank['sensitive']:.4f}"
            )
        if metrics.get("nist_k_marginal_score") is not None:
            lines.append(f"  NIST k-marginal score  {metrics['nist_k_marginal_score']:.1f} / 1000 (k = 3)")
        sds = (metrics.get("sds") or {}).get("synthetic", {}).get("summary")
        if sds:
            lines.append(
                f"  synthetic vs true      preservation {sds['preservation'] or 0:.4f}, leakage count "
                f"{sds['leakage_count']} (resolution {metrics.get('resolution')})"
            )
        tstr = metrics.get("tstr")
        if tstr and tstr.get("failed"):
            pass  # listed under FAILED METRIC below
        elif tstr and not tstr.get("skipped"):
            lines.append(
                f"  TSTR ({tstr['label']})".ljust(25)
                + f"accuracy {tstr['tstr_accuracy']:.4f} (train on real {tstr['trtr_accuracy']:.4f}), "
                f"F1 {tstr['tstr_f1']:.4f} (train on real {tstr['trtr_f1']:.4f})"
            )
        elif tstr:
            lines.append(f"  TSTR ({tstr['label']})".ljust(25) + f"skipped: {tstr['skipped']}")
        numeric = metrics.get("numeric")
        if numeric and numeric.get("worst"):
            lines.append(
                "  worst numeric columns  "
                + ", ".join(f"{c} KS {numeric['by_column'][c]['ks']:.3f}" for c in numeric["worst"])
            )
        for name, reason in (metrics.get("failed_metrics") or {}).items():
            lines.append(f"  FAILED METRIC          {name}: {reason} (the other metrics are written)")
        report = os.path.join(os.path.abspath(out_dir), "evaluation", "report.html")
        lines.append(f"  report (NOT private)   {report}")
    identifiers = list(m.get("identifier_columns") or {})
    if identifiers:
        lines.append(
            f"  identifier columns     {', '.join(identifiers)}: left out of the measurement by configuration, "
            "synthetic surrogate keys"
        )
    from spark_dpsynth.evaluation.coverage import column_warnings

    lines += [f"  EMPTY COLUMN           {line}" for line in column_warnings(release, metrics)]
    entries = (
        stage.published if stage is not None else ["release", "synthetic", "synthetic.csv", "evaluation"]
    )
    shown = [f"{os.path.abspath(out_dir)}/{{{','.join(entries)}}}"] if entries else []
    tables = [f"table {t}" for t in stage.published_tables] if stage is not None else []
    lines.append("  outputs                " + ", ".join([*shown, *tables]))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 2 user error, 1 unexpected failure, 3 a pipeline
    whose release was published but whose synthesis or evaluation failed, 130 after SIGINT, 143 after SIGTERM)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    debug = bool(getattr(args, "debug", False))
    config = None
    in_main = threading.current_thread() is threading.main_thread()
    handlers = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) if in_main else None
    stage: OutputStage | None = None
    step = "run"
    kept: str | None = None  # once a pipeline's release is staged: what is kept and how to resume
    try:
        _install_interrupts()
        config = load_job_config(args)
        debug = config.debug
        from spark_dpsynth.data.session import configure_logging

        configure_logging(quiet=config.quiet, debug=debug)
        command = args.command
        out_dir = config.output_path
        if not out_dir:
            raise InvalidParameterError("no output: give --output DIR or [output] path in the config")
        if command != "synthesize":
            _check_input(config)
            _check_mechanism(config)
        _check_plan(config, command)
        if command in ("pipeline", "aggregate"):
            _warn_hopeless_budget(config)
        release_dir = os.path.join(out_dir, "release")
        if command == "synthesize" and config.release:
            release_dir = config.release
        if command in ("synthesize", "evaluate") and not (
            os.path.isfile(os.path.join(local_path(release_dir), "manifest.json"))
            or os.path.isfile(local_path(release_dir))
        ):
            raise ReleaseError(f"no release at {release_dir}; run `aggregate` first")
        syn_dir = os.path.join(out_dir, "synthetic")
        if command == "evaluate" and not config.output_table and not os.path.isdir(local_path(syn_dir)):
            raise ReleaseError(f"no synthetic data at {syn_dir}; run `spark-dpsynth synthesize` first")
        if config.aggregate.seed is not None or config.synthesize.seed is not None:
            print(
                "spark-dpsynth: WARNING: --seed set: test mode, the output is reproducible and NOT private",
                file=sys.stderr,
            )
        started = time.perf_counter()
        release = metrics = synthetic = None
        # The stage claims the outputs before Spark starts: an existing output (without --overwrite), an output
        # another live run is writing, or a destination that cannot be written stops the run here.
        stage = OutputStage(
            None,
            out_dir,
            overwrite=config.overwrite,
            names=_outputs(command, config),
            stale=_stale_outputs(command, config),
        )
        with stage:
            spark = _session(config, delta=_needs_delta(config, command))
            _install_interrupts(spark)
            stage.use_session(spark)
            table = config.output_table if command in ("pipeline", "synthesize") else None
            if table and not config.overwrite and table_exists(spark, table):
                raise OutputExistsError(f"output table exists: {table}; pass --overwrite to replace it")
            if command == "pipeline":
                _check_synthesis_plan(spark, config)
            if command in ("pipeline", "aggregate"):
                step = "aggregation"
                release = _run_aggregate(spark, config, stage, command)
                if command == "pipeline":
                    # The budget is spent: from here on the release is published whatever happens next.
                    stage.keep_staged()
                    kept = _resume_hint(config, out_dir, "synthesize", getattr(args, "config", None))
                _check_interrupts()
            else:
                from spark_dpsynth.release import load_release

                release = load_release(release_dir, spark)
            if command in ("pipeline", "synthesize"):
                # The release just staged (pipeline) or the one on disk (synthesize).
                step = "synthesis"
                source = os.path.join(stage.staging_dir, "release") if command == "pipeline" else release_dir
                synthetic = _run_synthesize(
                    spark, config, stage, release, source, adapt=command == "pipeline"
                )
                if command == "pipeline":
                    stage.keep_staged()
                    kept = _resume_hint(config, out_dir, "evaluate", getattr(args, "config", None))
                _check_interrupts()
            if command in ("pipeline", "evaluate"):
                step = "evaluation"
                if synthetic is None:
                    synthetic = read_output(
                        spark,
                        path=None if config.output_table else syn_dir,
                        table=config.output_table,
                        fmt=config.output_format or "parquet",
                    )
                stage.path("evaluation")
                metrics, _ = _run_evaluate(spark, config, stage.staging_dir, release, synthetic=synthetic)
            _check_interrupts()  # nothing is published after an interrupt, even one whose exception was lost
        print(_summary(release, metrics, out_dir, stage))
        print(f"  wall time              {time.perf_counter() - started:.1f} s")
        return 0
    except KeyboardInterrupt:
        return _interrupted("SIGINT", 130, stage, kept)
    except _Terminated:
        return _interrupted("SIGTERM", 143, stage, kept)
    except Exception as err:  # noqa: BLE001 - one line, no data values, unless --debug
        pending = _interrupted_by_pending(stage, kept)
        if pending is not None:
            return pending
        if kept is not None and stage is not None and "release" in stage.published:
            # The budget is spent and the release published: the failure of a later stage is one line that says
            # how to go on without spending more (docs/design.md section 1.7).
            if debug:
                traceback.print_exc()
            text, status = _describe_failure(err, config)
            reason = f"failed with {text} (--debug shows more)" if status == 1 else f"failed: {text}"
            print(f"spark-dpsynth: error: the {step} {reason}; {kept}", file=sys.stderr)
            return EXIT_RELEASE_KEPT
        if debug and not isinstance(err, DPSynthError):
            raise
        text, status = _describe_failure(err, config)
        if status == 1:
            text = f"failed with {text}; rerun with --debug for details (may show data values)"
        print(f"spark-dpsynth: {text}" if status == 1 else f"spark-dpsynth: error: {text}", file=sys.stderr)
        return status
    finally:
        if handlers is not None:
            signal.signal(signal.SIGINT, handlers[0])
            signal.signal(signal.SIGTERM, handlers[1])


def _describe_failure(err: Exception, config: JobConfig | None) -> tuple[str, int]:
    """A failure in one line with no data value, and its exit status: (the reason, 2) for a user error or an
    input Spark refuses (said in our words), (the whole line, 1) for an unexpected failure."""
    if isinstance(err, DPSynthError):
        return str(err), 2
    from spark_dpsynth.cli._spark_errors import condition_of, explain

    explained = explain(
        err,
        _expressions(config),
        config.input_path if config is not None else None,
        output_path=config.output_path if config is not None else None,
        cast_columns=_cast_columns(config),
    )
    if explained is not None:
        return explained, 2
    name = type(err).__name__
    if name in ("AnalysisException", "ParseException", "IllegalArgumentException"):
        # Schema-level Spark errors (unknown column in a filter, unreadable path) name no data values.
        first = next((line.strip() for line in str(err).splitlines() if line.strip()), name)
        return first[:300], 2
    if isinstance(err, OSError) and err.filename:
        # A file-system error names a path of ours and its reason, never a data value.
        return f"cannot access {err.filename}: {err.strerror or name}", 2
    condition = condition_of(err)
    return name + (f" [{condition}]" if condition else ""), 1


if __name__ == "__main__":
    sys.exit(main())
