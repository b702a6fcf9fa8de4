"""Shared fixtures: one session-scoped local Spark session (local[2], UI off, few shuffle partitions)."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("SPARK_DPSYNTH_SHARED_DATA", ROOT.parent / "shared" / "data"))
ADULT = ROOT / "data" / "adult.csv.gz"
ADULT_CONFIG = ROOT / "conf" / "adult.toml"


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


# ------------------------------------------------------------------------------ UCI Adult, fitted once a session
# An AIM fit of Adult takes minutes: the tests that only read a fit share one. A test that changes an output copies
# it first.


@pytest.fixture(scope="session")
def adult_release(spark) -> Callable[[float], object]:  # noqa: ANN001
    """``get(epsilon)``: ``dps.fit`` of Adult (read with ``inferSchema``) through conf/adult.toml, test mode, seed
    11, fitted on the first call for each epsilon and shared by the session's tests."""
    import spark_dpsynth as dps

    fitted: dict[float, object] = {}

    def get(epsilon: float) -> object:
        if epsilon not in fitted:
            df = spark.read.csv(str(ADULT), header=True, inferSchema=True)
            fitted[epsilon] = dps.fit(df, config=str(ADULT_CONFIG), epsilon=epsilon, seed=11)
        return fitted[epsilon]

    return get


def quick_start_command(out: Path) -> list[str]:
    """The README quick start's `make run`, from the Makefile, for the in-process CLI (run from ``ROOT``)."""
    recipe = re.search(r"^run:.*\n\t(.+)$", (ROOT / "Makefile").read_text(), re.M).group(1)
    words = shlex.split(recipe.replace("$(OUTPUT)", str(out)).replace("$(EPSILON)", "4"))
    assert words[0] == "$(BIN)/spark-dpsynth"
    return words[1:]


@dataclass(frozen=True)
class CliRun:
    """An in-process run of the command line: its exit status, what it printed and its output folder."""

    out: Path
    status: int
    stdout: str
    stderr: str


@pytest.fixture(scope="session")
def adult_quick_start(spark, tmp_path_factory: pytest.TempPathFactory) -> CliRun:  # noqa: ANN001
    """The README quick start (`make run`'s command at epsilon 4) with ``--seed 7 --quiet``, run once a session
    from the project's folder; its outputs are read-only for the tests (copy ``out`` to change it)."""
    from spark_dpsynth.cli.main import main

    out = tmp_path_factory.mktemp("quick_start") / "out"
    stdout, stderr = io.StringIO(), io.StringIO()
    here = Path.cwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            status = main([*quick_start_command(out), "--seed", "7", "--quiet"])
    finally:
        os.chdir(here)
    return CliRun(out, status, stdout.getvalue(), stderr.getvalue())
