"""A real cluster: a standalone master and two workers on 127.0.0.1, and `spark-submit jobs/pipeline.py`.

The cluster is started from the installed PySpark (``$SPARK_HOME/bin/spark-class``; the pip package ships no
``sbin/start-master.sh``), the package is shipped to the executors with ``--py-files`` of a zip, as the README
says, and every process the test started is stopped at the end, also when it fails.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import socket
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.cluster

ADULT = str(ROOT / "data" / "adult.csv.gz")


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(log: Path, text: str, count: int, timeout: float, procs: list[subprocess.Popen]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and log.read_text(errors="replace").count(text) >= count:
            return
        dead = [p.args for p in procs if p.poll() is not None]
        if dead:
            raise RuntimeError(f"a cluster process exited: {dead}; see {log}")
        time.sleep(0.5)
    raise TimeoutError(f"{text!r} x{count} not in {log} after {timeout} s")


def _stop(procs: list[subprocess.Popen]) -> None:
    """Stop the processes this test started (each is its own process group), workers first."""
    for p in reversed(procs):
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in reversed(procs):
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "PYSPARK_SUBMIT_ARGS")}
    env.update(
        SPARK_HOME=str(_spark_home()),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOG_DIR=str(tmp / "logs"),
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
    )
    return env


@pytest.fixture
def standalone_cluster(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """(master URL, log directory) of a master and two 1-core workers bound to 127.0.0.1."""
    spark_class = str(_spark_home() / "bin" / "spark-class")
    logs = tmp_path / "logs"
    logs.mkdir()
    env = _env(tmp_path)
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen] = []
    try:
        master_log = logs / "master.log"
        with open(master_log, "wb") as out:
            procs.append(
                subprocess.Popen(
                    [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                     "--port", str(port), "--webui-port", str(_free_port())],
                    stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                )
            )  # fmt: skip
        _wait_for(master_log, "I have been elected leader", 1, 120, procs)
        for i in range(2):
            with open(logs / f"worker{i}.log", "wb") as out:
                procs.append(
                    subprocess.Popen(
                        [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                         "--cores", "1", "--memory", "1g", "--webui-port", str(_free_port()),
                         "--work-dir", str(tmp_path / f"work{i}"), url],
                        stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                    )
                )  # fmt: skip
        _wait_for(master_log, "Registering worker 127.0.0.1", 2, 120, procs)
        yield url, logs
    finally:
        _stop(procs)


def _package_zip(tmp_path: Path) -> Path:
    """spark_dpsynth as a zip for --py-files (what the README tells users to ship)."""
    path = tmp_path / "spark_dpsynth.zip"
    with zipfile.ZipFile(path, "w") as z:
        for f in sorted((ROOT / "spark_dpsynth").glob("*.py")) + [ROOT / "spark_dpsynth" / "py.typed"]:
            z.write(f, f"spark_dpsynth/{f.name}")
    return path


def test_spark_submit_pipeline_on_a_standalone_cluster(standalone_cluster, tmp_path: Path) -> None:
    url, logs = standalone_cluster
    out = tmp_path / "out"
    command = [
        str(_spark_home() / "bin" / "spark-submit"), "--master", url,
        "--py-files", str(_package_zip(tmp_path)),
        "--conf", "spark.ui.enabled=false", "--conf", "spark.executor.memory=768m",
        "--conf", "spark.sql.shuffle.partitions=4",
        str(ROOT / "jobs" / "pipeline.py"),
        "--input", ADULT, "--output", str(out), "--row-filter", "split = 'train'",
        "--columns", "age,workclass,education,sex,income", "--empty-values", "?",
        "--bins", '{"age": {"edges": [20, 30, 40, 50, 60, 70]}}',
        "--epsilon", "2", "--delta", "1e-6", "--reporting-length", "2", "--max-marginal-length", "2",
        "--partitions", "2", "--seed", "13", "--quiet",
    ]  # fmt: skip
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=900, cwd=tmp_path, env=_env(tmp_path)
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "spark_dpsynth summary" in result.stdout

    manifest = json.loads((out / "release" / "manifest.json").read_text())
    assert manifest["columns"] == ["age", "workclass", "education", "sex", "income"]
    assert manifest["released_tuples"]["1"] > 20 and manifest["released_tuples"]["2"] > 50
    with open(out / "synthetic.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == manifest["columns"] and len(rows) > 10_000
    metrics = json.loads((out / "evaluation" / "metrics.json").read_text())
    assert metrics["rows"]["synthetic"] == len(rows) - 1 and 0 <= metrics["tvd"]["2"]["mean"] < 0.5

    # the job ran on the cluster: the master registered it and both workers launched an executor for it
    master_log = (logs / "master.log").read_text(errors="replace")
    assert "Registering app spark_dpsynth" in master_log
    for i in range(2):
        assert list((tmp_path / f"work{i}").glob("app-*/*/stderr")), f"worker {i} ran no executor"
