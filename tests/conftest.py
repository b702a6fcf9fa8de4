"""Shared fixtures: one session-scoped local Spark session (local[2], UI off, few shuffle partitions)."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("SPARK_DPSYNTH_SHARED_DATA", ROOT.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory):
    import sys

    from pyspark.sql import SparkSession

    from spark_dpsynth.data.jvm_stderr import piped_jvm_launch
    from spark_dpsynth.data.session import quiet_log4j2_file

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # catalog tables written by tests (tests/test_io.py) go to a temporary warehouse, not the work tree
    warehouse = tmp_path_factory.mktemp("warehouse")

    # as a session of spark_dpsynth's own starts (data.session): no JVM banner, Spark's log output off
    quiet = f"-Dlog4j2.configurationFile={quiet_log4j2_file()}"
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("spark_dpsynth-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "4")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.driver.extraJavaOptions", quiet)
    )
    with piped_jvm_launch():
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data folder not found at {SHARED_DATA}")
    return SHARED_DATA


@contextlib.contextmanager
def small_tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (``mount -o size=``, e.g. ``512k``, ``5m``) mounted at the new directory ``path`` for the
    block; the test is skipped where this process may not mount one (it needs root and CAP_SYS_ADMIN)."""
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, check=False
    )
    if mounted.returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root and CAP_SYS_ADMIN)")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)
