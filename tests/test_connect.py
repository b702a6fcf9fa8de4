"""Spark Connect: the command line and the Databricks notebook, end to end, under a local Spark Connect server.

PySpark 4 starts a local Connect server for ``remote("local[2]")``. A process holds either a classic session or a
Connect one, so each run is a subprocess (the classic ``spark`` fixture lives in the pytest process).
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

ADULT = str(ROOT / "data" / "adult.csv.gz")

pytestmark = pytest.mark.connect


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")}
    env.update(
        PYTHONPATH=str(ROOT),
        PYSPARK_PYTHON=sys.executable,
        # the local Connect server's static configuration (a small machine: few shuffle partitions, no UI)
        PYSPARK_SUBMIT_ARGS="--conf spark.sql.shuffle.partitions=4 --conf spark.ui.enabled=false "
        "--conf spark.driver.memory=2g pyspark-shell",
        **extra,
    )
    return env


def test_cli_pipeline_on_spark_connect(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["pipeline", "--remote", "local[2]", "--input", ADULT, "--output", str(out),
            "--row-filter", "split = 'train'", "--columns", "age,workclass,education,sex,income",
            "--empty-values", "?", "--bins", '{"age": {"edges": [20, 30, 40, 50, 60, 70]}}',
            "--epsilon", "2", "--delta", "1e-6", "--reporting-length", "2", "--max-marginal-length", "2",
            "--partitions", "2", "--output-table", "default.adult_synthetic", "--seed", "11", "--quiet",
            "--synthesizer", "model"]  # fmt: skip
    result = subprocess.run(
        [sys.executable, "-m", "spark_dpsynth", *args],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,
        env=_env(),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "spark_dpsynth summary" in result.stdout and "protected n" in result.stdout
    manifest = json.loads((out / "release" / "manifest.json").read_text())
    assert manifest["columns"] == ["age", "workclass", "education", "sex", "income"]
    assert manifest["test_mode"] is True and manifest["released_tuples"]["2"] > 50
    with open(out / "synthetic.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == manifest["columns"] and len(rows) > 10_000
    metrics = json.loads((out / "evaluation" / "metrics.json").read_text())
    assert 0 <= metrics["tvd"]["2"]["mean"] < 0.5 and metrics["rows"]["synthetic"] == len(rows) - 1
    # the synthetic data went to the catalog table (in the Connect server's warehouse), not to out/synthetic
    assert not (out / "synthetic").exists()
    assert (tmp_path / "spark-warehouse" / "adult_synthetic").is_dir()
    assert sorted(p.name for p in out.iterdir()) == [
        "evaluation", "release", "synthetic.csv", "synthetic.csv.TEST-MODE.txt"
    ]  # fmt: skip


@pytest.mark.long
def test_databricks_notebook_runs_as_a_script_on_spark_connect(tmp_path: Path) -> None:
    """The notebook, as Databricks serverless would run it (a Spark Connect session), with its parameters."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "databricks_pipeline.py")],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,
        env=_env(
            SPARK_REMOTE="local[2]",
            DPSYNTH_INPUT_PATH=ADULT,
            DPSYNTH_OUTPUT_DIR=str(tmp_path / "dpsynth"),
            DPSYNTH_SYNTHETIC_TABLE="default.adult_synthetic",
            DPSYNTH_EPSILON="2.0",
            DPSYNTH_SEED="5",
        ),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "synthetic rows" in result.stdout and "mean TVD" in result.stdout
    manifest = json.loads((tmp_path / "dpsynth" / "release" / "manifest.json").read_text())
    assert manifest["epsilon"] == 2.0 and len(manifest["columns"]) == 8
    metrics = json.loads((tmp_path / "dpsynth" / "evaluation" / "metrics.json").read_text())
    assert metrics["rows"]["synthetic"] > 10_000
    assert (tmp_path / "spark-warehouse" / "adult_synthetic").is_dir()
