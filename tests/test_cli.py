"""The command line: one-line errors before any data is read, and the pipeline end to end on real data."""

from __future__ import annotations

import csv
import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from spark_dpsynth.cli import main
from tests.conftest import ROOT

ADULT = str(ROOT / "data" / "adult.csv.gz")


def _run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "spark_dpsynth", *args], capture_output=True, text=True, timeout=120, cwd=ROOT
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--epsilon", "0"], "epsilon must be > 0, got 0.0"),
        (["--epsilon", "-1"], "epsilon must be > 0, got -1.0"),
        (["--delta", "1.5"], r"delta must be in (0, 1), got 1.5"),
        (["--reporting-length", "0"], "reporting_length must be >= 1, got 0"),
        (["--config", "conf/missing.toml"], "config file not found: conf/missing.toml"),
    ],
)
def test_parameter_errors_are_one_line_before_spark_starts(
    args: list[str], message: str, tmp_path: Path
) -> None:
    result = _run_cli("pipeline", "--input", ADULT, "--output", str(tmp_path), *args)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [f"spark-dpsynth: error: {message}"]
    assert not list(tmp_path.iterdir()), "nothing is written on a parameter error"


def test_missing_input(tmp_path: Path) -> None:
    result = _run_cli("aggregate", "--input", str(tmp_path / "nope.csv"), "--output", str(tmp_path / "o"))
    assert result.returncode == 2
    assert result.stderr.strip() == f"spark-dpsynth: error: input not found: {tmp_path / 'nope.csv'}"


def test_unreadable_config(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[aggregate\nepsilon = 1\n")
    result = _run_cli("pipeline", "--input", ADULT, "--output", str(tmp_path / "o"), "--config", str(bad))
    assert result.returncode == 2
    assert result.stderr.startswith("spark-dpsynth: error: cannot read config")
    assert len(result.stderr.strip().splitlines()) == 1


def test_synthesize_without_release(tmp_path: Path) -> None:
    result = _run_cli("synthesize", "--output", str(tmp_path))
    assert result.returncode == 2
    assert "no release at" in result.stderr


def test_help_lists_every_subcommand() -> None:
    result = _run_cli("--help")
    assert result.returncode == 0
    for command in ("pipeline", "aggregate", "synthesize", "evaluate"):
        assert command in result.stdout


def test_schema_errors_name_the_column(spark, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    code = main(
        ["aggregate", "--input", ADULT, "--output", str(tmp_path), "--columns", "age,salary", "--quiet"]
    )
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown column(s) ['salary']" in err[0]
    code = main(
        [
            "aggregate",
            "--input",
            ADULT,
            "--output",
            str(tmp_path),
            "--columns",
            "age,sex",
            "--reporting-length",
            "3",
            "--quiet",
        ]
    )
    assert code == 2
    assert "reporting_length must be <= the number of attribute columns (2), got 3" in capsys.readouterr().err


def test_pipeline_end_to_end_on_adult(spark, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "out"
    code = main(
        ["pipeline", "--config", "conf/adult.toml", "--input", ADULT, "--output", str(out), "--epsilon", "4",
         "--seed", "7", "--quiet"]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "TEST MODE" in captured.err + captured.out
    manifest = json.loads((out / "release" / "manifest.json").read_text())
    assert manifest["test_mode"] is True and manifest["epsilon"] == 4.0 and manifest["delta"] == 1e-6
    assert manifest["released_tuples"]["1"] > 50 and manifest["released_tuples"]["3"] > 1000
    with open(out / "synthetic.csv", newline="") as f:
        rows = list(csv.reader(f))
    header = rows[0]
    assert header == manifest["columns"]
    assert len(rows) > 1000
    # Binned columns hold their public bin labels; no raw numbers leak through.
    ages = {r[0] for r in rows[1:] if r[0]}
    assert ages <= {"<20", ">=70"} | {f"[{a}, {a + 5})" for a in range(20, 70, 5)}
    metrics = json.loads((out / "evaluation" / "metrics.json").read_text())
    for length in ("1", "2", "3"):
        assert 0 <= metrics["tvd"][length]["mean"] <= 1
    assert "protected n" in captured.out and "mean TVD" in captured.out


def test_jobs_call_the_cli() -> None:
    for job in ("pipeline", "aggregate", "synthesize", "evaluate"):
        text = (ROOT / "jobs" / f"{job}.py").read_text()
        assert f'main(["{job}", *sys.argv[1:]])' in text


def test_embedded_adult_data_is_intact() -> None:
    with gzip.open(ADULT, "rt") as f:
        header = f.readline().strip().split(",")
    assert header[0] == "age" and header[-1] == "split"
