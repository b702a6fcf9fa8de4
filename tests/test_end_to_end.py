"""End to end on real data: the spark-submit jobs on NIST MA 2019 (read from ../shared/data, not committed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import ROOT


def _job(name: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_DPSYNTH_MASTER="local[2]")
    return subprocess.run(
        [sys.executable, str(ROOT / "jobs" / f"{name}.py"), *args],
        capture_output=True, text=True, timeout=1200, cwd=ROOT, env=env,
    )  # fmt: skip


@pytest.mark.long
def test_jobs_on_nist_ma2019(shared_data: Path, tmp_path: Path) -> None:
    source = shared_data / "nist_ma2019.csv.gz"
    out = tmp_path / "ma2019"
    common = ["--config", "conf/nist_acs.toml", "--input", str(source), "--output", str(out), "--quiet"]
    common += ["--synthesizer", "model"]  # the all-subsets release: its k-tuples are checked below
    agg = _job("aggregate", *common, "--epsilon", "4", "--reporting-length", "3", "--seed", "11")
    assert agg.returncode == 0, agg.stderr[-2000:]
    syn = _job("synthesize", "--output", str(out), "--seed", "11", "--quiet")
    assert syn.returncode == 0, syn.stderr[-2000:]
    ev = _job("evaluate", *common)
    assert ev.returncode == 0, ev.stderr[-2000:]

    manifest = json.loads((out / "release" / "manifest.json").read_text())
    assert manifest["columns"][0] == "PUMA" and len(manifest["columns"]) == 24
    assert manifest["columns"][-2:] == ["PWGTP", "WGTP"]  # the weights too, numbers written as text
    # Binned columns appear only as their public labels in the release.
    agg_rows = pd.read_parquet(out / "release" / "aggregates")
    ages = {
        v[c.tolist().index("AGEP")]
        for c, v in zip(agg_rows["columns"], agg_rows["values"], strict=True)
        if "AGEP" in c.tolist()
    }
    assert ages <= {"<10", ">=85"} | {
        f"[{a}, {b})"
        for a, b in zip([10, 18, 25, 35, 45, 55, 65, 75], [18, 25, 35, 45, 55, 65, 75, 85], strict=True)
    }
    assert set(manifest["released_tuples"]) == {"1", "2", "3"} and manifest["released_tuples"]["2"] > 100

    synthetic = pd.read_csv(out / "synthetic.csv", dtype=str, keep_default_na=False)
    assert list(synthetic.columns) == manifest["columns"] and len(synthetic) > 1000
    metrics = json.loads((out / "evaluation" / "metrics.json").read_text())
    assert metrics["differentially_private"] is False
    assert metrics["blank_cell_share"]["sensitive"] == 0.0
    release_sds = metrics["sds"]["release"]["by_length"]
    synthetic_sds = metrics["sds"]["synthetic"]["by_length"]
    # 1-tuples are never fabricated (the candidates are the attributes present); longer ones rarely at epsilon 4.
    assert release_sds["1"]["fabricated_tuples"] == 0
    assert release_sds["2"]["fabricated_pct"] < 10 and release_sds["3"]["fabricated_pct"] < 10
    # The default (model) synthesizer: exactly the protected number of records, close 1-/2-way marginals.
    assert metrics["rows"]["synthetic"] == manifest["protected_number_of_records"]
    assert metrics["tvd"]["1"]["mean"] < 0.1 and metrics["tvd"]["2"]["mean"] < 0.2
    assert synthetic_sds["1"]["fabricated_tuples"] == 0  # no value outside the released 1-tuples
