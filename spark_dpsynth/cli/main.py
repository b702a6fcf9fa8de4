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

import contextlib
import os
import signal
import sys
import threading
import time
import traceback

from spark_dpsynth.cli._options import COMMANDS, build_parser, load_job_config
from spark_dpsynth.cli._signals import (
    Terminated,
    check_interrupts,
    install_interrupts,
    interrupted,
    interrupted_by_pending,
)
from spark_dpsynth.cli._summary import summary
from spark_dpsynth.config import JobConfig, option_for
from spark_dpsynth.data.io import local_path
from spark_dpsynth.errors import DPSynthError
from spark_dpsynth.pipeline import Run

__all__ = ["main", "build_parser", "load_job_config", "option_for", "COMMANDS", "EXIT_RELEASE_KEPT"]

EXIT_RELEASE_KEPT = 3
"""Exit status of a ``pipeline`` whose DP release was published but whose synthesis or evaluation failed: the
error line names the stage and the command that resumes from the release without spending budget
(docs/design.md section 1.7)."""


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 2 user error, 1 unexpected failure, 3 a pipeline
    whose release was published but whose synthesis or evaluation failed, 130 after SIGINT, 143 after SIGTERM)."""
    args = build_parser().parse_args(argv)
    debug = bool(getattr(args, "debug", False))
    config = run = None
    in_main = threading.current_thread() is threading.main_thread()
    handlers = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) if in_main else None
    config_file = getattr(args, "config", None)

    def kept() -> str | None:  # once a pipeline's release is published: what is kept and how to resume
        if run is None or run.resume is None or config is None:
            return None
        return resume_hint(config, str(config.output_path), run.resume, config_file)

    def session(delta: bool):  # noqa: ANN202 - SparkSession
        spark = _session(config, delta=delta)
        install_interrupts(spark)
        return spark

    try:
        install_interrupts()
        config = load_job_config(args)
        debug = config.debug
        from spark_dpsynth.data.session import configure_logging

        configure_logging(quiet=config.quiet, debug=debug)
        if args.command == "query":  # answers from a release, no Run (spark_dpsynth.cli._query)
            from spark_dpsynth.cli._query import run_query

            return run_query(config, session)
        run = Run(config, args.command, between=check_interrupts)
        run.check()
        if config.budget.seed is not None or config.synthesize.seed is not None:
            print(
                "spark-dpsynth: WARNING: --seed set: test mode, the output is reproducible and NOT private",
                file=sys.stderr,
            )
        started = time.perf_counter()
        run.execute(session)
        print(summary(run.release, run.metrics, str(config.output_path), run.stage))
        print(f"  wall time              {time.perf_counter() - started:.1f} s")
        return 0
    except KeyboardInterrupt:
        return interrupted("SIGINT", 130, run and run.stage, kept())
    except Terminated:
        return interrupted("SIGTERM", 143, run and run.stage, kept())
    except Exception as err:  # noqa: BLE001 - one line, no data values, unless --debug
        stage = run and run.stage
        pending = interrupted_by_pending(stage, kept())
        if pending is not None:
            return pending
        if kept() is not None and stage is not None and "release" in stage.published:
            # The budget is spent and the release published: the failure of a later step is one line that says
            # how to go on without spending more (docs/design.md section 1.7).
            if debug:
                traceback.print_exc()
            text, status = _describe_failure(err, config)
            reason = f"failed with {text} (--debug shows more)" if status == 1 else f"failed: {text}"
            print(f"spark-dpsynth: error: the {run.step} {reason}; {kept()}", file=sys.stderr)
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


def _session(config: JobConfig, *, delta: bool):  # noqa: ANN202 - SparkSession
    from spark_dpsynth.cli._signals import launched_jvm
    from spark_dpsynth.data.session import get_session

    # Without --debug Spark's log output is withheld (it can quote data values): docs/design.md section 1.6.
    # A local JVM leaves SIGINT and SIGTERM to this process and its stderr goes through it (cli._signals).
    with launched_jvm(debug=config.debug) if not config.remote else contextlib.nullcontext():
        return get_session(master=config.master, remote=config.remote, delta=delta, debug=config.debug)


def resume_hint(config: JobConfig, out_dir: str, command: str, config_file: str | None) -> str:
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
