"""SparkSession creation for the jobs and the CLI (never hard-codes a master).

Three kinds of session:

* the active one, when there is one (spark-submit, a Databricks notebook or job, a ``pyspark`` shell);
* a Spark Connect session with ``remote`` (``sc://host:15002``, or ``local[2]`` to start a local Connect server);
* a classic session built here, on ``master`` or Spark's own configuration (``local[*]`` outside spark-submit).

With ``delta=True`` a classic session is built with Delta Lake: the ``delta-spark`` package's
``configure_spark_with_delta_pip`` adds the Delta jars (resolved from Maven, or from the local jar files listed in
``SPARK_DPSYNTH_DELTA_JARS`` on machines without Maven access) and the Delta SQL extension and catalog are set.
An existing or remote session is used as it is: Delta must then be set up where Spark runs (Databricks has it).
"""

from __future__ import annotations

import logging
import os
import sys

from pyspark.sql import SparkSession

from spark_dpsynth.errors import InvalidParameterError, SparkSetupError

log = logging.getLogger(__name__)

__all__ = ["get_session", "delta_builder", "default_parallelism", "is_connect"]

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
) -> SparkSession:
    """Return the active SparkSession or build one.

    Args:
        master: a master URL (``local[2]``, ``spark://host:7077``) overriding Spark's configuration; with
            neither, PySpark's default applies (``local[*]`` outside spark-submit).
        app_name: the application name of a new session.
        remote: a Spark Connect URL (``sc://host:15002``, or ``local[2]`` for a local Connect server); builds a
            Connect session instead of a classic one.
        delta: build a new classic session with Delta Lake (see the module docstring).

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
        return SparkSession.builder.remote(remote).appName(app_name).getOrCreate()
    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    # Local workers must run the interpreter that has this package's dependencies (numpy, pyarrow, ...).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    elif "PYSPARK_SUBMIT_ARGS" not in os.environ and "SPARK_HOME" not in os.environ:
        builder = builder.master(os.environ.get("SPARK_DPSYNTH_MASTER", "local[*]"))
    builder = (
        builder.config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
    )
    if delta:
        builder = delta_builder(builder)
    try:
        return builder.getOrCreate()
    except Exception as err:
        if delta and "JAVA_GATEWAY_EXITED" in str(err):
            raise SparkSetupError(
                "cannot start Spark with Delta Lake: the Delta jars could not be loaded (no access to Maven "
                "Central?); set SPARK_DPSYNTH_DELTA_JARS to local jar files or use spark-submit --packages"
            ) from err
        raise
