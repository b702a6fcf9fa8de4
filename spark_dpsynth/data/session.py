"""SparkSession creation for the jobs and the CLI (never hard-codes a master).

Three kinds of session:

* the active one, when there is one (spark-submit, a Databricks notebook or job, a ``pyspark`` shell);
* a Spark Connect session with ``remote`` (``sc://host:15002``, or ``local[2]`` to start a local Connect server);
* a classic session built here, on ``master`` or Spark's own configuration (``local[*]`` outside spark-submit).

With ``delta=True`` a classic session is built with Delta Lake: the ``delta-spark`` package's
``configure_spark_with_delta_pip`` adds the Delta jars (resolved from Maven, or from the local jar files listed in
``SPARK_DPSYNTH_DELTA_JARS`` on machines without Maven access) and the Delta SQL extension and catalog are set.
An existing or remote session is used as it is: Delta must then be set up where Spark runs (Databricks has it).

**What reaches the terminal** (docs/design.md section 1.6). Spark's and PySpark's own log messages can quote data
values (a cast error names the value, a malformed CSV record is printed whole, a Parquet reader prints a file's
last bytes, PySpark logs every SQL error with its query context as a JSON line). Unless ``debug`` is given:

* a session built here starts its JVM with a log4j2 configuration that turns Spark's log output off
  (:data:`QUIET_LOG4J2`, given as ``-Dlog4j2.configurationFile`` in ``spark.driver.extraJavaOptions`` and
  ``spark.executor.extraJavaOptions``; in ``local`` mode the executors run in the driver's JVM), Spark's
  start-up banner ("Setting default log level ...") included, and a classic session that exists already is set
  to log level ``OFF`` (:func:`gate_spark_logs`); the Java launcher's own warning ("Using incubator modules",
  from the ``--add-modules`` Spark starts every JVM with) is left out of the JVM's stderr, which a session
  started here writes through this process (:mod:`spark_dpsynth.data.jvm_stderr`);
* :func:`configure_logging` lets only this package's own loggers reach the log handlers, disables PySpark's
  query-context loggers (which write to stderr themselves) and routes Python warnings through the same gate.

Not covered: a Spark Connect server that is not started here logs as its operator configured it, and the
executors of a cluster log to their own files (configure their log4j2 there, e.g. with the file this module
writes, see :func:`quiet_log4j2_file`).

**Generated code the JIT compiles** (:data:`SQL_DEFAULTS`, docs/design.md section 2.8). A session built here,
classic or Connect, sets ``spark.sql.codegen.hugeMethodLimit`` to 8000, HotSpot's limit on the bytecode size of a
method it compiles (Spark's default, 65535, lets whole-stage code generation emit methods the JVM then only
interprets; Spark's configuration reference recommends 8000 on HotSpot). A stage whose generated method is larger
runs with Spark's per-expression code instead, which the JIT compiles: the type restoration of synthetic data
(many columns of literal-map lookups) costs a fifth of the CPU. Same results either way. An active session is used
as it is: set the key in its configuration (``--conf`` of spark-submit, a Databricks cluster's Spark config).
"""

from __future__ import annotations

import logging
import os
import sys

from pyspark.sql import SparkSession

from spark_dpsynth.data.jvm_stderr import piped_jvm_launch
from spark_dpsynth.errors import InvalidParameterError, SparkSetupError

log = logging.getLogger(__name__)

__all__ = [
    "QUIET_LOG4J2",
    "SQL_DEFAULTS",
    "configure_logging",
    "default_parallelism",
    "delta_builder",
    "gate_spark_logs",
    "get_session",
    "is_connect",
    "quiet_log4j2_file",
]

SQL_DEFAULTS = {"spark.sql.codegen.hugeMethodLimit": "8000"}
"""SQL settings of every session built here (module docstring): the largest generated method whole-stage code
generation may emit, HotSpot's 8000 bytes of bytecode, above which the JVM does not compile it."""

QUIET_LOG4J2 = """\
# spark_dpsynth: Spark's own log output is withheld, because its messages can quote data values
# (cast errors, malformed records, file bytes). Run with --debug to see it.
# The appender is there because Spark replaces a configuration without one by its own defaults.
status = error
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n
rootLogger.level = off
rootLogger.appenderRef.console.ref = console
# PySpark's gateway logs as a shell does: Spark prints "Setting default log level to ..." unless its logger
# has a level of its own equal to the root's.
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = off
"""
"""The log4j2 configuration (properties format) a session built without ``debug`` starts with: no output,
and no start-up banner (Spark's ``Logging.initializeLogging`` prints "Setting default log level" for a shell
or PySpark gateway whose logger has no level of its own)."""

_OWN_LOGGERS = ("spark_dpsynth", "__main__")
"""Loggers whose records pass the gate: this package's (and a job script's), which never log data values."""

_PYSPARK_SELF_HANDLED = (
    "SQLQueryContextLogger",
    "DataFrameQueryContextLogger",
    "pyspark.sql.connect.logging",
)
"""PySpark loggers with their own stderr handler (not through the root logger): disabled unless debug."""

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"


def is_connect(spark: object) -> bool:
    """True for a Spark Connect session (no SparkContext, no JVM on the client)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def default_parallelism(spark: object) -> int:
    """The number of tasks a job of this session runs at once: how many partitions to split work into.

    A classic session answers ``sparkContext.defaultParallelism`` (the executors' total cores, or
    ``spark.default.parallelism`` when set). Spark Connect has no SparkContext on the client: there the answer
    is the session's ``spark.sql.shuffle.partitions``. Used by every mechanism and synthesizer that chooses a
    number of partitions itself.

    Args:
        spark: a SparkSession, classic or Spark Connect.

    Returns:
        An integer >= 1.

    Raises:
        InvalidParameterError: neither gives an integer >= 1 (e.g. ``spark.sql.shuffle.partitions = "auto"`` on
            a Connect session): the message says to set ``spark.sql.shuffle.partitions`` to a positive integer
            or to pass the number of partitions explicitly (``SynthesisParams.partitions``).
    """
    try:
        parts = int(spark.sparkContext.defaultParallelism)  # type: ignore[attr-defined]
    except (AttributeError, NotImplementedError):  # Spark Connect: no SparkContext
        pass
    else:
        if parts >= 1:
            return parts
    value = spark.conf.get("spark.sql.shuffle.partitions")  # type: ignore[attr-defined]
    try:
        parts = int(value) if value is not None else 0
    except (TypeError, ValueError):
        parts = 0
    if parts < 1:
        raise InvalidParameterError(
            f"the session's parallelism cannot be inferred (no SparkContext, and spark.sql.shuffle.partitions = "
            f"{value!r} is not an integer >= 1): set spark.sql.shuffle.partitions to a positive integer, or pass "
            "the number of partitions explicitly (SynthesisParams.partitions)"
        )
    return parts


def quiet_log4j2_file() -> str:
    """Write :data:`QUIET_LOG4J2` to a file in the temporary directory (once; atomically) and return its path.

    Give it to a Spark JVM you start yourself: ``--driver-java-options -Dlog4j2.configurationFile=PATH``.
    """
    import hashlib
    import tempfile

    digest = hashlib.sha256(QUIET_LOG4J2.encode()).hexdigest()[:12]
    path = os.path.join(tempfile.gettempdir(), f"spark_dpsynth-log4j2-quiet-{digest}.properties")
    if not os.path.isfile(path):
        fd, tmp = tempfile.mkstemp(prefix=".spark_dpsynth-log4j2-", dir=os.path.dirname(path))
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(QUIET_LOG4J2)
        os.replace(tmp, path)
    return path


def _quiet_java_options() -> str:
    path = quiet_log4j2_file()
    return f'-Dlog4j2.configurationFile="{path}"' if " " in path else f"-Dlog4j2.configurationFile={path}"


def gate_spark_logs(spark: object, *, debug: bool = False) -> None:
    """Turn the log output of a classic session's driver JVM off unless ``debug`` (a no-op on Spark Connect,
    whose server logs as its operator configured it).

    Used for a session this package did not start (spark-submit, a notebook), after its startup messages.
    """
    if debug or is_connect(spark):
        return
    try:
        spark.sparkContext.setLogLevel("OFF")  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - a session without a SparkContext: nothing to gate here
        log.debug("no SparkContext to set the log level of")


class _OwnRecordsOnly(logging.Filter):
    """Let through the records of this package's loggers only (others may quote data values)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.name.startswith(_OWN_LOGGERS)


def configure_logging(*, quiet: bool = False, debug: bool = False) -> None:
    """Log to stderr: this package's messages at INFO (WARNING with ``quiet``); nothing from other loggers.

    Without ``debug``, only this package's loggers reach the handler (a filter on the root logger's handlers),
    PySpark's query-context loggers (which print each SQL error, with the data value it quotes, as a JSON line)
    and the Spark Connect client's logger are disabled, and Python warnings go through the same gate. With
    ``debug`` every logger's records are shown, as Python and PySpark configure them.
    """
    logging.basicConfig(
        level=logging.WARNING if quiet else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    from pyspark.logger import PySparkLogger

    for name in _PYSPARK_SELF_HANDLED:
        PySparkLogger.getLogger(name).disabled = not debug
    root = logging.getLogger()
    for handler in root.handlers:
        for f in [f for f in handler.filters if isinstance(f, _OwnRecordsOnly)]:
            handler.removeFilter(f)
        if not debug:
            handler.addFilter(_OwnRecordsOnly())
    logging.captureWarnings(not debug)


def delta_builder(builder: SparkSession.Builder) -> SparkSession.Builder:
    """``builder`` configured for Delta Lake (jars, SQL extension, catalog).

    The jars come from ``SPARK_DPSYNTH_DELTA_JARS`` (comma-separated local jar files) when set, otherwise from
    Maven through ``delta.configure_spark_with_delta_pip`` (artifact ``io.delta:delta-spark_4.1_2.13`` in the
    installed delta-spark version).

    Raises:
        SparkSetupError: delta-spark is not installed and no local jars are given.
    """
    builder = builder.config("spark.sql.extensions", DELTA_EXTENSION).config(
        "spark.sql.catalog.spark_catalog", DELTA_CATALOG
    )
    jars = os.environ.get("SPARK_DPSYNTH_DELTA_JARS")
    if jars:
        return builder.config("spark.jars", jars)
    try:
        from delta import configure_spark_with_delta_pip
    except ImportError as err:
        raise SparkSetupError(
            "Delta Lake needs the delta-spark package: pip install 'spark_dpsynth[delta]'"
        ) from err
    return configure_spark_with_delta_pip(builder)


def get_session(
    master: str | None = None,
    app_name: str = "spark_dpsynth",
    remote: str | None = None,
    *,
    delta: bool = False,
    debug: bool = False,
) -> SparkSession:
    """Return the active SparkSession or build one.

    Args:
        master: a master URL (``local[2]``, ``spark://host:7077``) overriding Spark's configuration; with
            neither, PySpark's default applies (``local[*]`` outside spark-submit).
        app_name: the application name of a new session.
        remote: a Spark Connect URL (``sc://host:15002``, or ``local[2]`` for a local Connect server); builds a
            Connect session instead of a classic one.
        delta: build a new classic session with Delta Lake (see the module docstring).
        debug: let Spark log as it is configured to (its messages can quote data values); without it a
            session started here logs nothing from the JVM and an existing classic one is set to ``OFF``.

    Returns:
        The session.

    Raises:
        SparkSetupError: both ``master`` and ``remote``, or Delta asked for and its jars cannot be loaded.
    """
    if master and remote:
        raise SparkSetupError("give either a master (--master) or a Spark Connect URL (--remote), not both")
    if remote:
        # the local Connect server's Python workers must run this interpreter (numpy, pyarrow, this package)
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = _with_sql_defaults(SparkSession.builder.remote(remote).appName(app_name))
        if remote.startswith("local") and not debug:  # a local Connect server starts its JVM with these
            builder = _quiet_builder(builder)
        return builder.getOrCreate()
    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        gate_spark_logs(active, debug=debug)
        return active
    # Local workers must run the interpreter that has this package's dependencies (numpy, pyarrow, ...).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    elif "PYSPARK_SUBMIT_ARGS" not in os.environ and "SPARK_HOME" not in os.environ:
        builder = builder.master(os.environ.get("SPARK_DPSYNTH_MASTER", "local[*]"))
    builder = _with_sql_defaults(
        builder.config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
    )
    if delta:
        builder = delta_builder(builder)
    if not debug:
        builder = _quiet_builder(builder)
    try:
        with piped_jvm_launch(debug=debug):  # without the Java launcher's banner (data.jvm_stderr)
            spark = builder.getOrCreate()
    except Exception as err:
        if delta and "JAVA_GATEWAY_EXITED" in str(err):
            raise SparkSetupError(
                "cannot start Spark with Delta Lake: the Delta jars could not be loaded (no access to Maven "
                "Central?); set SPARK_DPSYNTH_DELTA_JARS to local jar files or use spark-submit --packages"
            ) from err
        raise
    gate_spark_logs(spark, debug=debug)  # a JVM started before (spark-submit) has its own configuration
    return spark


def _with_sql_defaults(builder: SparkSession.Builder) -> SparkSession.Builder:
    for key, value in SQL_DEFAULTS.items():
        builder = builder.config(key, value)
    return builder


def _quiet_builder(builder: SparkSession.Builder) -> SparkSession.Builder:
    options = _quiet_java_options()
    return builder.config("spark.driver.extraJavaOptions", options).config(
        "spark.executor.extraJavaOptions", options
    )
