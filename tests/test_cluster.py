"""A real cluster: a standalone master and two workers on 127.0.0.1, and `spark-submit jobs/pipeline.py`.

The cluster is started from the installed PySpark (``$SPARK_HOME/bin/spark-class``; the pip package ships no
``sbin/start-master.sh``), the package is shipped to the executors with ``--py-files`` of a zip, as the README
says, and every process the test started is stopped at the end, also when it fails.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.standalone import cluster_env, package_zip, spark_home, standalone_cluster
from tests.conftest import ROOT

pytestmark = pytest.mark.cluster

ADULT = str(ROOT / "data" / "adult.csv.gz")


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "PYSPARK_SUBMIT_ARGS")}
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    return cluster_env(env, tmp / "cluster-logs")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """(master URL, log directory) of a master and two 1-core workers bound to 127.0.0.1."""
    with standalone_cluster(tmp_path, _env(tmp_path), workers=2, worker_memory="1g") as url:
        yield url, tmp_path / "cluster-logs"


@pytest.mark.long
def test_spark_submit_pipeline_on_a_standalone_cluster(cluster, tmp_path: Path) -> None:
    url, logs = cluster
    out = tmp_path / "out"
    command = [
        str(spark_home() / "bin" / "spark-submit"), "--master", url,
        "--py-files", str(package_zip(tmp_path)),
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
    # the default (auto): the workload mechanism, AIM on 5 columns, its 2-way tables measured on the executors
    assert manifest["mechanism"] == "workload" and manifest["released_tuples"]["1"] > 20
    assert any(len(m["columns"]) == 2 for m in manifest["measurements"])
    with open(out / "synthetic.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == manifest["columns"] and len(rows) > 10_000
    metrics = json.loads((out / "evaluation" / "metrics.json").read_text())
    assert metrics["rows"]["synthetic"] == len(rows) - 1 and 0 <= metrics["tvd"]["2"]["mean"] < 0.5

    # the job ran on the cluster: the master registered it and both workers launched an executor for it
    master_log = (logs / "master.log").read_text(errors="replace")
    assert "Registering app spark_dpsynth" in master_log
    for i in range(2):
        assert list((tmp_path / f"cluster-work{i}").glob("app-*/*/stderr")), f"worker {i} ran no executor"
