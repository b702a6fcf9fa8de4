"""The scale benchmark's data builders, measurement helpers and table printer on tiny inputs (no Spark, no timing)."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import types
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import ROOT


@pytest.fixture(scope="module")
def scale():
    spec = importlib.util.spec_from_file_location("bench_scale", ROOT / "benchmarks" / "scale.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_scale"] = module
    spec.loader.exec_module(module)  # puts benchmarks/ on sys.path for its own modules
    # the entry point and the modules it is split into, as one namespace
    names: dict = {}
    for part in ("scale_data", "scale_measure", "scale_workers", "scale_report"):
        names.update(vars(importlib.import_module(part)))
    names.update(vars(module))
    return types.SimpleNamespace(**names)


def _tiny() -> pd.DataFrame:
    return pd.DataFrame({"a": [str(i % 7) for i in range(40)], "b": [f"v{i % 3}" for i in range(40)]})


def test_swap_cells_keeps_each_column_multiset(scale) -> None:
    df = _tiny()
    out = scale.swap_cells(df, 0.5, np.random.default_rng(1))
    assert out.shape == df.shape
    for c in df.columns:
        assert Counter(out[c]) == Counter(df[c])
    assert not out.equals(df)


def test_replicate_is_seeded_and_keeps_the_first_copy(scale) -> None:
    df = _tiny()
    a = scale.replicate(df, 100, 0.1, seed=3, perturb_first=False)
    b = scale.replicate(df, 100, 0.1, seed=3, perturb_first=False)
    assert len(a) == 100 and a.equals(b)
    assert a.iloc[: len(df)].equals(df)
    c = scale.replicate(df, 100, 0.1, seed=4, perturb_first=True)
    assert len(c) == 100 and not c.equals(a)


def test_nist_configuration_has_19_columns_and_their_bins(scale) -> None:
    data, params = scale.data_config(scale.DATASETS["nist_tx"])
    assert data.columns == scale.NIST_COLUMNS and len(data.columns) == 19
    assert set(data.bins) <= set(data.columns) and "AGEP" in data.bins
    assert params.reporting_length == 3
    accuracy, fabrication, delta = scale.spec_modes(scale.DATASETS["adult_1m"])
    assert (accuracy, fabrication, delta) == ("prioritize_long_combinations", "balanced", 1e-6)


def test_ensure_raw_writes_a_cached_parquet_file(scale, tmp_path: Path) -> None:
    spec = scale.DatasetSpec("tiny", None, None, 40, 10, lambda rows: _tiny().iloc[:rows])
    path = scale.ensure_raw(tmp_path, spec, 10)
    assert path.exists() and pd.read_parquet(path).shape == (10, 2)
    assert scale.ensure_raw(tmp_path, spec, 10) == path


def test_tree_sampler_measures_this_process(scale) -> None:
    sampler = scale.TreeSampler(os.getpid())
    sampler.sample()
    assert sampler.peak["root"] > 0 and sampler.cpu_seconds > 0


def test_same_release_compares_saved_releases(scale, tmp_path: Path) -> None:
    frame = pd.DataFrame(
        {"k": [1, 2], "columns": [["a"], ["a", "b"]], "values": [["x"], ["x", "y"]], "count": [5, 3]}
    )
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        frame.to_parquet(tmp_path / name / "aggregates.parquet")
        (tmp_path / name / "manifest.json").write_text(json.dumps({"epsilon": 4.0}))
    assert scale.same_release(str(tmp_path / "one"), str(tmp_path / "two"))
    frame.assign(count=[5, 4]).to_parquet(tmp_path / "two" / "aggregates.parquet")
    assert not scale.same_release(str(tmp_path / "one"), str(tmp_path / "two"))


def test_results_table_and_targets(scale) -> None:
    ours = {
        "master": "local[2]", "aggregate_seconds": 2.0, "cold_aggregate_seconds": 9.0, "python_hwm_mb": 300.0,
        "jvm_hwm_mb": 900.0, "sampled_peak_rss_mb": {"total": 1500.0}, "cpu_seconds": 20.0,
        "driver_memory": "2g", "executor_memory": "in the driver JVM (local mode)",
        "released_tuples": {"1": 10, "2": 50, "3": 90},
        "synthesis": {"model": {"seconds": 1.0, "rows": 1000, "rows_per_second": 1000.0}},
    }  # fmt: skip
    pac = {
        "aggregate_seconds": 3.0, "cold_aggregate_seconds": 4.0, "python_hwm_mb": 700.0, "cpu_seconds": 6.0,
        "threads": 2, "released_tuples": {"1": 10, "2": 51, "3": 92},
        "synthesis": {"sds": {"seconds": 10.0, "rows": 100, "rows_per_second": 10.0}},
    }  # fmt: skip
    results = {
        "settings": {"reporting_length": 3, "epsilon": 4.0, "pacsynth_sample_rows": 100},
        "machine": {"cores": 2, "memory_gb": 24, "load_before": "0.1", "load_after": "0.2", "python": "3.11",
                    "pyspark": "4.1.1", "pacsynth": "0.0.8"},
        "datasets": [
            {"dataset": "nist_tx27k", "rows": 1000, "columns": 19, "record_tuples": 969_000, "ours": ours,
             "pacsynth": pac},
            {"dataset": "adult_1m", "rows": 1000, "columns": 15, "record_tuples": 455_000, "ours": ours,
             "pacsynth": {"not_run": "not run (est. 39 GB)"}},
        ],
    }  # fmt: skip
    scaling_run = {"aggregate_seconds": 10.0, "cold_aggregate_seconds": 15.0, "cpu_seconds": 30.0}
    results["scaling"] = {
        "dataset": "adult_1m",
        "runs": [
            {**scaling_run, "master": "local[1]", "speedup": 1.0, "warm_aggregate_seconds": 8.0,
             "warm_speedup": 1.0, "same_release": True},
            {**scaling_run, "master": "local[2]", "aggregate_seconds": 8.0, "speedup": 1.25,
             "warm_aggregate_seconds": 4.0, "warm_speedup": 2.0, "same_release": True},
        ],
    }  # fmt: skip
    results["targets"] = scale.evaluate_targets(results)
    met = {t["target"].split(" ")[0]: t["met"] for t in results["targets"]}
    assert met["nist_tx27k"] is True and met["adult_1m"] is True and met["synthesis"] is True
    # the target is judged on the first (cold) run; the warm figure is shown beside it
    assert met["local[1]"] is False
    assert "1.25x (first run), 2.00x (warm" in str(results["targets"])
    table = scale.results_table(results)
    assert "| nist_tx27k | 1,000 x 19 | spark_dpsynth local[2] | 2.0 |" in table
    assert "not run (est. 39 GB)" in table and "1.50x" in table and "100x" in table
    assert "| local[2] | 8.0 | 15.0 | 30 | 1.25x | 4.0 | 2.00x | True |" in table


def test_series_table_and_10m_targets(scale) -> None:
    def stage(seconds: float, cpu: float) -> dict:
        return {"seconds": seconds, "cpu_seconds": cpu,
                "peak_rss_mb": {"python_driver": 300.0, "jvm": 1500.0, "workers": 400.0}}  # fmt: skip

    run = {
        "dataset": "adult_10m", "rows": 10_000_000, "columns": 15, "record_tuples": 4_550_000_000,
        "load_before": "2.0", "load_after": "2.5", "wall_seconds": 400.0, "python_hwm_mb": 320.0,
        "jvm_hwm_mb": 1900.0, "synthetic_rows": 10_000_000,
        "stages": {"aggregation": stage(100.0, 190.0), "synthesis_and_write": stage(125.0, 240.0),
                   "write_alone": stage(20.0, 30.0), "evaluation": stage(80.0, 150.0)},
        "evaluation": {"row_sampling": {"sensitive": {"rows_compared": 1_000_123},
                                        "synthetic": {"rows_compared": 999_877}}},
    }  # fmt: skip
    lines = scale.series_table([run, {"dataset": "adult_3m", "rows": 3_000_000, "failed": True}])
    assert (
        "| adult_10m | model | 10,000,000 | 100.0 (190) | 45,500,000 | - | 125.0 (240) | 80,000 | 20.0 (30) "
        "| 80.0 (150) | 1,000,123 / 999,877 | 400 | 320 | 1900 | 400 | 2.0 / 2.5 |" in lines
    )
    assert "| adult_3m | model | 3,000,000 | failed |" + " |" * 13 in lines
    targets = scale.evaluate_targets({"datasets": [], "series": [run]})
    assert [t["met"] for t in targets] == [True, False, True, True]
    assert targets[1]["measured"] == "125 s" and targets[3]["measured"] == "2220 MB"
    # the default pipeline (pgm): the synthesis is the fit on the driver plus the draw inside the write
    pgm = {**run, "pipeline": "default", "stages": {**run["stages"], "synthesis_fit": stage(10.0, 12.0),
                                                    "synthesis_and_write": stage(90.0, 170.0)}}  # fmt: skip
    lines = scale.series_table([pgm])
    assert (
        "| adult_10m | default | 10,000,000 | 100.0 (190) | 45,500,000 | 10.0 (12) | 90.0 (170) | 100,000 |"
        in (lines[-1])
    )
    targets = scale.evaluate_targets({"datasets": [], "series": [pgm]})
    assert targets[1]["measured"] == "100 s" and targets[1]["met"] is True


def test_cluster_sampler_without_executors_samples_this_process(scale) -> None:
    assert scale.executor_pids("app-no-such-application") == []
    sampler = scale.ClusterSampler(os.getpid(), "app-no-such-application")
    sampler.sample()
    assert sampler.peak["root"] > 0 and sampler.peak["executor_jvms"] == 0
    assert set(sampler.cpu_by_kind) == {"root", "jvm", "executor_jvms", "workers"}


def test_release_digests_ignore_row_order_and_time_stamps(scale, tmp_path: Path) -> None:
    aggregates = pd.DataFrame(
        {"k": [1, 2], "columns": [["a"], ["a", "b"]], "values": [["x"], ["x", "y"]], "count": [5, 3]}
    )
    cells = pd.DataFrame({"marginal": [0, 0, 1], "cell": [0, 1, 0], "value": [1.5, -0.25, 3.0]})
    for name, order, created in (("local", [0, 1, 2], "2026-01-01"), ("cluster", [2, 0, 1], "2026-01-02")):
        for part, frame in (("aggregates", aggregates), ("measurements", cells)):
            (tmp_path / name / part).mkdir(parents=True)
            rows = frame.iloc[[i for i in order if i < len(frame)]]
            rows.to_parquet(tmp_path / name / part / "part-00000.parquet")
        manifest = {"epsilon": 4.0, "created_utc": created, "versions": {"pyspark": name}}
        (tmp_path / name / "manifest.json").write_text(json.dumps(manifest))
    local = scale.release_digests(tmp_path / "local")
    assert local == scale.release_digests(tmp_path / "cluster")
    cells.assign(value=[1.5, -0.25, 3.0000001]).to_parquet(
        tmp_path / "cluster" / "measurements" / "part-00000.parquet"
    )
    cluster = scale.release_digests(tmp_path / "cluster")
    assert [p for p in local if local[p] != cluster[p]] == ["measurements"]


def test_cluster_series_table_and_target(scale) -> None:
    def stage(seconds: float, executors: float) -> dict:
        return {"seconds": seconds, "cpu_seconds": executors + 5.0,
                "peak_rss_mb": {"python_driver": 300.0, "jvm": 500.0, "workers": 400.0, "executor_jvms": 1200.0},
                "cpu_seconds_by_process": {"python_driver": 4.0, "jvm": 1.0, "executor_jvms": executors - 1.0,
                                           "workers": 1.0}}  # fmt: skip

    run = {
        "dataset": "adult_1m", "rows": 1_000_000, "columns": 15, "record_tuples": 455_000_000, "cluster": True,
        "pipeline": "default", "workers": 2, "default_parallelism": 2, "executor_memory": "1g",
        "wall_seconds": 300.0, "python_hwm_mb": 320.0, "jvm_hwm_mb": 600.0, "synthetic_rows": 1_000_000,
        "executor_hwm_mb": [700.0, 650.0], "same_release_as_local": False, "release_differs": ["measurements"],
        "stages": {name: stage(10.0, 20.0) for name in
                   ("aggregation", "synthesis_fit", "synthesis_and_write", "write_alone", "evaluation")},
    }  # fmt: skip
    lines = scale.series_table([run])
    assert any(
        line.startswith("| adult_1m | default, standalone | 1,000,000 | 10.0 (25) |") for line in lines
    )
    assert (
        "| adult_1m | 2 | 2 | 1g | 20 / 20 / 20 / 20 / 20 | 1200 | 700, 650 | False (differ: measurements) |"
        in lines
    )
    (target,) = scale.evaluate_targets({"datasets": [], "series": [run]})
    assert target["met"] is False and "differ: measurements" in target["measured"]
