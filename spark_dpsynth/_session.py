"""SparkSession creation for the jobs and the CLI (never hard-codes a master)."""

from __future__ import annotations

import logging
import os
import sys

from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def get_session(
    master: str | None = None, app_name: str = "spark_dpsynth", remote: str | None = None
) -> SparkSession:
    """Return the active SparkSession or build one.

    ``master`` (e.g. ``local[2]``, ``spark://host:7077``) overrides the usual Spark configuration; with neither,
    PySpark's own default applies (``local[*]`` when run outside spark-submit). ``remote`` builds a Spark
    Connect session instead.
    """
    if remote:
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
    spark = builder.getOrCreate()
    return spark
