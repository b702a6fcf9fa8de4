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
        {"dataset": "adult", "epsilon": 1.0, "mode": "model", "status": "ok", "rows": 32561, "ys_tvd_1": 0.01,
         "ys_tvd_2": 0.03, "ys_tvd_3": 0.07, "ys_outside_share": 0.1234, "ys_columns_outside_over_1pct": 2,
         "ys_type_differences_count": 0, "tstr_accuracy": 0.85, "wall_seconds": 61.2, "peak_rss_mb": 1500.0},
        {"dataset": "adult", "epsilon": 1.0, "mode": "peer_aim", "status": "timeout (60 s)", "wall_seconds": 60.0},
    ]  # fmt: skip
    lines = quality.markdown(rows).splitlines()
    assert len(lines) == 4 and lines[0].startswith("| dataset | eps | mode | selection | status | rows |")
    assert (
        "| adult | 1 | model | - | ok | 32,561 | 0.010 | 0.030 | 0.070 | 12.34 | 2 | 0 | - | - | - | - | 0.850 | 61 |"
        in lines[2]
    )
    assert lines[3].startswith("| adult | 1 | peer_aim | - | timeout (60 s) | - | - | - | - |")


def test_lfs_configuration_is_the_76_columns_without_the_weight(quality) -> None:
    from spark_dpsynth.config import load_config

    config = load_config(str(quality.DATASETS["lfs"]["config"]))
    assert len(config.data.columns) == 76 and "COEFF" not in config.data.columns
    assert config.budget.delta == 1e-6 and not config.data.bins
    # the public codebook of the columns coded as numbers: hours 00-98 and 99 "not applicable", in the file's
    # decimal form
    assert config.data.domains["HWUSUAL"] == tuple(f"{h}.0" for h in range(100))
    assert set(config.data.domains) <= set(config.data.columns) and "COURLEN" not in config.data.domains
    source = quality.DATASETS["lfs"]["input"]
    if os.path.exists(source):
        with gzip.open(source, "rt", encoding="utf-8") as f:
            header = f.readline().strip().split(",")
        assert list(config.data.columns) == [c for c in header if c != "COEFF"]


# ---------------------------------------------------------------------------- the outside yardstick (pandas)


@pytest.fixture(scope="module")
def ys(quality):  # noqa: ARG001 - quality puts benchmarks/ on sys.path
    import yardstick

    return yardstick


def test_tvd_on_the_inputs_own_values_counts_a_new_value_in_full(ys) -> None:
    import pandas as pd

    table = pd.DataFrame({"a": [0, 0, 1, 1], "b": ["x", "y", "x", "y"]})
    # a: one 0 becomes 1 (p = .5/.5, q = .25/.75: TVD .25); b: one "y" becomes "z", never in the input
    synthetic = pd.DataFrame({"a": [0, 1, 1, 1], "b": ["x", "z", "x", "y"]})
    tvd = ys.mean_tvd(table, synthetic)
    assert tvd["1"]["by_column"] == {"a": 0.25, "b": 0.25}
    assert tvd["1"]["mean"] == 0.25 and tvd["1"]["compared"] == 1 * 2
    # (a, b): input (0,x) (0,y) (1,x) (1,y), synthetic (0,x) (1,z) (1,x) (1,y): .25 of the mass moved
    assert tvd["2"]["mean"] == pytest.approx(0.25) and tvd["2"]["total"] == 1
    assert "3" not in tvd
    # the same values as floats or strings of the input's type compare equal: no distance
    same = pd.DataFrame({"a": [0.0, 0.0, 1.0, 1.0], "b": ["x", "y", "x", "y"]})
    assert ys.mean_tvd(table, same)["2"]["mean"] == 0.0


def test_tvd_of_a_measurement_on_the_inputs_deciles(ys) -> None:
    import numpy as np
    import pandas as pd

    table = pd.DataFrame({"m": np.arange(1000, dtype="int64")})
    assert ys.column_kinds(table) == {"m": "numeric"}
    assert list(ys.decile_edges(table["m"])) == pytest.approx([99.9 * i for i in range(1, 10)])
    # every synthetic value in the input's lowest decile: .9 of the mass is in the wrong bins
    low = pd.DataFrame({"m": np.zeros(500, dtype="int64")})
    assert ys.mean_tvd(table, low, lengths=(1,))["1"]["mean"] == pytest.approx(0.9)
    # shifted inside the bins (the same deciles): no distance on this yardstick
    shifted = pd.DataFrame({"m": np.arange(1000) + 0.05})
    assert ys.mean_tvd(table, shifted, lengths=(1,))["1"]["mean"] == pytest.approx(0.0)
    # at most 100 distinct numbers: compared on the values themselves
    codes = pd.DataFrame({"m": np.arange(1000) % 100})
    assert ys.column_kinds(codes) == {"m": "categorical"}


def test_outside_shares_values_never_held_and_out_of_range(ys) -> None:
    import numpy as np
    import pandas as pd

    table = pd.DataFrame({"code": [0, 1, 2, 1], "text": ["a", "b", None, "a"], "m": np.linspace(10, 20, 4)})
    kinds = {"code": "categorical", "text": "categorical", "m": "numeric"}
    synthetic = pd.DataFrame(
        {
            "code": [0, 4399, 2, None],  # 4399 never occurs; empty never occurs either
            "text": ["a", "c", None, "b"],  # "c" never occurs; empty does (the input has one)
            "m": [9.0, 15.0, 20.0, 2.1e9],  # 9 below the minimum 10, 2.1e9 above the maximum 20
        }
    )
    shares = ys.outside_shares(table, synthetic, kinds)
    assert shares["by_column"] == {"code": 0.5, "text": 0.25, "m": 0.5}
    assert shares["table"] == pytest.approx(5 / 12)
    assert ys.outside_shares(table, table, kinds)["table"] == 0.0


def test_type_differences_and_wasserstein_over_std(ys) -> None:
    import pandas as pd

    assert ys.type_differences({"a": "bigint", "b": "string"}, {"a": "int", "b": "string"}) == {
        "a": ["bigint", "int"]
    }
    assert ys.type_differences({"a": "double"}, {}) == {"a": ["double", None]}
    table = pd.DataFrame({"x": [0.0, 2.0, 4.0, 6.0], "s": ["a", "b", "c", "d"]})
    # every value moved up by 1: Wasserstein distance 1, std of the input sqrt(5)
    moved = pd.DataFrame({"x": [1.0, 3.0, 5.0, 7.0], "s": ["a", "b", "c", "d"]})
    assert ys.wasserstein_over_std(table, moved) == {"x": pytest.approx(1 / 5**0.5)}
    figures = ys.yardstick(table, moved, {"x": "double", "s": "string"}, {"x": "double", "s": "string"})
    assert figures["ys_type_differences_count"] == 0
    assert figures["ys_wasserstein_over_std_max_column"] == "x"
    # x has 4 distinct values (a categorical column on this yardstick): none of 1, 3, 5, 7 occurs in the input
    assert figures["ys_outside_share"] == pytest.approx(4 / 8)


def test_subsets_are_sampled_with_a_fixed_seed_beyond_the_bound(ys) -> None:
    columns = [f"c{i}" for i in range(20)]
    chosen, total = ys.choose_subsets(columns, 3, 100, seed=0)
    assert total == 1140 and len(chosen) == 100 == len(set(chosen))
    assert chosen == ys.choose_subsets(columns, 3, 100, seed=0)[0]
    assert ys.choose_subsets(columns, 2, 1000, seed=0)[0][0] == ("c0", "c1")


def test_recode_to_integers_sorted_codes_and_public_bins(ys) -> None:
    import pandas as pd

    table = pd.DataFrame(
        {"s": ["b", "a", "c", "a"], "n": ["10", "9", "100", ""], "age": ["17", "39", "70", "90"]}
    )
    codes = ys.recode_to_integers(table.replace("", None), {"age": (20.0, 40.0, 70.0)})
    assert codes["s"].tolist() == [1, 0, 2, 0]
    # numbers sorted by value, not as text; an empty cell stays empty
    assert codes["n"].tolist()[:3] == [1, 0, 2] and pd.isna(codes["n"].iloc[3])
    # bins <20, [20,40), [40,70), >=70 -> 0, 1, 3, 3, then recoded to 0..k-1 over the values present
    assert codes["age"].tolist() == [0, 1, 2, 2]


def test_the_cli_command_of_a_mode(quality) -> None:
    argv = quality._cli_command("pipeline", ["--input", "t.csv"], "out", 4.0, "model")
    assert argv[:7] == ["pipeline", "--input", "t.csv", "--output", "out", "--epsilon", "4.0"]
    assert argv[7:] == ["--seed", str(quality.RELEASE_SEED), "--overwrite", "--synthesizer", "model"]
    assert "--synthesizer" not in quality._cli_command("pipeline", [], "out", 1.0, "auto")
    synth = quality._cli_command("synthesize", ["--input", "t.csv"], "out", 1.0, "mst", delta=1e-6)
    assert synth == ["synthesize", "--output", "out", "--seed", str(quality.RELEASE_SEED), "--overwrite",
                     "--synthesizer", "pgm"]  # fmt: skip


def test_workload_overrides_reach_the_cli_as_its_options(quality, monkeypatch) -> None:
    """--workload KEY=VALUE: numbers as --key value, a switch as --key or --no-key, which is how the CLI
    parses it."""
    from spark_dpsynth.cli._options import build_parser

    overrides = quality._workload_overrides(
        ["aim_join_columns=false", "max_rounds=40", "discovery_measurements=1"]
    )
    assert overrides == {"aim_join_columns": False, "max_rounds": 40, "discovery_measurements": True}
    monkeypatch.setattr(quality, "WORKLOAD_OVERRIDES", overrides)
    argv = quality._cli_command("pipeline", ["--input", "t.csv"], "out", 4.0, "aim")
    assert argv[-4:] == ["--no-aim-join-columns", "--max-rounds", "40", "--discovery-measurements"]
    args = build_parser().parse_args(argv)
    assert (args.aim_join_columns, args.max_rounds, args.discovery_measurements) == (False, 40, True)
    with pytest.raises(ValueError, match="KEY=VALUE"):
        quality._workload_overrides(["no_such_setting=1"])


def test_a_configuration_without_dropped_columns_loads_as_the_original(quality, tmp_path: Path) -> None:
    from spark_dpsynth.config import load_config

    source = quality.DATASETS["nist_national"]["config"]
    drop = quality.DATASETS["nist_national"]["drop"]
    written = quality._config_without(source, drop, str(tmp_path / "nist.toml"))
    original, copy = load_config(str(source)), load_config(written)
    assert copy.data.columns == tuple(c for c in original.data.columns if c not in drop)
    assert set(copy.data.bins) == set(original.data.bins) - set(drop)
    assert copy.data.bins["AGEP"] == original.data.bins["AGEP"]
    assert copy.aggregate == original.aggregate and copy.data.empty_values == original.data.empty_values
    # the adult configuration's inline tables and lists come back unchanged
    adult = quality.ROOT / "conf" / "adult.toml"
    again = load_config(quality._config_without(adult, (), str(tmp_path / "adult.toml")))
    assert again == load_config(str(adult))
