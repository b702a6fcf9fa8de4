"""The quality benchmark's peer handling, LFS configuration and table printer (no Spark, no peer environment)."""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import os
import stat
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT


@pytest.fixture(scope="module")
def quality():
    spec = importlib.util.spec_from_file_location("bench_quality", ROOT / "benchmarks" / "quality.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_quality"] = module
    spec.loader.exec_module(module)
    return module


def _peer_args(tmp_path: Path, python: Path, timeout: float) -> argparse.Namespace:
    return argparse.Namespace(
        peers_python=str(python),
        peer_timeout=timeout,
        peer_aim_timeout=timeout,
        peer_aim_degree=3,
        peer_sampling="sample",
        peer_aim_max_model_size=80.0,
        output=str(tmp_path / "out"),
    )


def _fake_python(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "python"
    path.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_a_peer_past_its_time_limit_is_a_timeout_row(quality, tmp_path: Path) -> None:
    python = _fake_python(tmp_path, "sleep 30")
    args = _peer_args(tmp_path, python, timeout=1.0)
    synthetic, figures = quality._run_peer(
        None, "peer_aim", "in.parquet", ["a"], 1.0, 1e-6, str(tmp_path), "t", args
    )
    assert synthetic is None
    assert figures["status"] == "timeout (1 s)"
    assert 1.0 <= figures["wall_seconds"] < 20


def test_a_failed_or_missing_peer_is_a_row_that_says_so(quality, tmp_path: Path) -> None:
    args = _peer_args(tmp_path, _fake_python(tmp_path, "exit 3"), timeout=30.0)
    synthetic, figures = quality._run_peer(
        None, "peer_mst", "in.parquet", ["a"], 1.0, 1e-6, str(tmp_path), "t", args
    )
    assert synthetic is None and figures["status"] == "failed (exit 3)"
    args = _peer_args(tmp_path, tmp_path / "absent" / "python", timeout=30.0)
    synthetic, figures = quality._run_peer(
        None, "peer_mst", "in.parquet", ["a"], 1.0, 1e-6, str(tmp_path), "t", args
    )
    assert synthetic is None and figures["status"].startswith("not run (")


def test_markdown_prints_missing_figures_as_dashes(quality) -> None:
    rows = [
        {"dataset": "adult", "epsilon": 1.0, "mode": "model", "status": "ok", "rows": 32561, "tvd_1": 0.01,
         "tvd_2": 0.03, "tvd_3": 0.07, "tstr_accuracy": 0.85, "wall_seconds": 61.2, "peak_rss_mb": 1500.0},
        {"dataset": "adult", "epsilon": 1.0, "mode": "peer_aim", "status": "timeout (60 s)", "wall_seconds": 60.0},
    ]  # fmt: skip
    lines = quality.markdown(rows).splitlines()
    assert len(lines) == 4 and lines[0].startswith("| dataset | eps | mode | selection | status | rows |")
    assert "| adult | 1 | model | - | ok | 32,561 | 0.010 | 0.030 | 0.070 | 0.850 | - | 61 |" in lines[2]
    assert lines[3].startswith("| adult | 1 | peer_aim | - | timeout (60 s) | - | - | - | - |")


def test_lfs_configuration_is_the_76_columns_without_the_weight(quality) -> None:
    from spark_dpsynth.cli.config import load_config

    config = load_config(str(quality.DATASETS["lfs"]["config"]))
    assert len(config.data.columns) == 76 and "COEFF" not in config.data.columns
    assert config.aggregate.delta == 1e-6 and not config.data.bins
    # the public codebook of the columns coded as numbers: hours 00-98 and 99 "not applicable", in the file's
    # decimal form
    assert config.data.domains["HWUSUAL"] == tuple(f"{h}.0" for h in range(100))
    assert set(config.data.domains) <= set(config.data.columns) and "COURLEN" not in config.data.domains
    source = quality.DATASETS["lfs"]["input"]
    if os.path.exists(source):
        with gzip.open(source, "rt", encoding="utf-8") as f:
            header = f.readline().strip().split(",")
        assert list(config.data.columns) == [c for c in header if c != "COEFF"]
