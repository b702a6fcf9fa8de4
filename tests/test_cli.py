"""The command line: options = config keys, one-line errors before any data is read, the quick start end to end."""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from spark_dpsynth.cli.main import (
    COMMANDS,
    EXIT_RELEASE_KEPT,
    build_parser,
    load_job_config,
    main,
    option_for,
)
from spark_dpsynth.config import schema
from tests.conftest import ROOT, CliRun

ADULT = str(ROOT / "data" / "adult.csv.gz")


def _run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "spark_dpsynth", *args], capture_output=True, text=True, timeout=120, cwd=ROOT
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--epsilon", "0"], "argument --epsilon: epsilon must be > 0, got 0.0"),
        (["--epsilon", "-1"], "argument --epsilon: epsilon must be > 0, got -1.0"),
        (["--delta", "1.5"], r"argument --delta: delta must be in (0, 1), got 1.5"),
        (["--reporting-length", "0"], "argument --reporting-length: reporting_length must be >= 1, got 0"),
        (["--config", "conf/missing.toml"], "config file not found: conf/missing.toml"),
        (
            ["--epsilon", "x"],
            "argument --epsilon: invalid float value: 'x' (see spark-dpsynth pipeline --help)",
        ),
        (
            ["--format", "orc"],
            "argument --format: invalid choice: 'orc' (choose from 'csv', 'parquet', 'delta') "
            "(see spark-dpsynth pipeline --help)",
        ),
        (
            ["--bins", "[1]"],
            "argument --bins: expected a JSON object, got list (see spark-dpsynth pipeline --help)",
        ),
        (["--master", "local[1]", "--remote", "sc://h"], "[spark] give either master or remote, not both"),
        (
            ["--output-table", "a.b.c.d"],
            "argument --output-table: table must be a table name like db.table or catalog.db.table, got 'a.b.c.d'",
        ),
        (["--input-table", "db.t"], "[input] give either path or table, not both"),
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


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_option_has_help_and_a_config_key_and_back() -> None:
    by_flag = {}
    for key in schema():
        by_flag.setdefault(option_for(key), set()).add(key.name)
    for command, p in _subparsers().items():
        sections = COMMANDS[command][1]
        flags = set()
        for action in p._actions:
            long = [o for o in action.option_strings if o.startswith("--") and not o.startswith("--no-")]
            if not long or long[0] in ("--help", "--config"):
                continue
            assert action.help, f"{command} {long[0]} has no help"
            flags.add(long[0])
            assert long[0] in by_flag, f"{command} {long[0]} has no config key"
        expected = {option_for(k) for k in schema() if k.section in sections}
        assert flags == expected, command
    assert by_flag["--seed"] == {"aggregate.seed", "synthesize.seed"}
    assert by_flag["--input-table"] == {"input.table"} and by_flag["--remote"] == {"spark.remote"}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_help_of_every_subcommand(command: str, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--output", "--overwrite", "--remote", "--output-table", "--config"):
        assert flag in out
    if command not in ("synthesize", "query"):
        assert "--input-table" in out and "--format {csv,parquet,delta}" in out


def test_command_line_overrides_the_config_file(tmp_path: Path) -> None:
    conf = tmp_path / "c.toml"
    conf.write_text('[input]\ntable = "db.t"\n[aggregate]\nepsilon = 1.0\n[output]\npath = "o"\n')
    args = build_parser().parse_args(
        ["aggregate", "--config", str(conf), "--input", "x.csv", "--epsilon", "2", "--no-single-csv",
         "--empty-values", "?,N", "--bins", '{"age": {"edges": [20, 30]}}', "--fabrication-mode", "custom_adaptive", "--thresholds", "0.5,0.2"]
    )  # fmt: skip
    config = load_job_config(args)
    assert config.input_path == "x.csv" and config.input_table is None
    assert config.budget.epsilon == 2.0 and config.output_path == "o" and config.single_csv is False
    assert config.data.empty_values == ("?", "N") and config.data.bins["age"].edges == (20.0, 30.0)


def test_an_empty_list_option_is_an_empty_list_not_the_default() -> None:
    def spans(*options: str) -> tuple[str, ...] | None:
        args = ["pipeline", "--input", "x.csv", "--output", "o", "--privacy-unit", "u", *options]
        return load_job_config(build_parser().parse_args(args)).data.span_columns

    # --span-columns "" turns the persons' span test off; without the option a DP test's default holds
    assert (
        spans() is None
        and spans("--span-columns", "") == ()
        and spans("--span-columns", "day, x") == ("day", "x")
    )


def test_existing_outputs_are_not_replaced_without_overwrite(tmp_path: Path) -> None:
    (tmp_path / "release").mkdir()
    (tmp_path / "synthetic.csv").write_text("a\n")
    result = _run_cli("pipeline", "--input", ADULT, "--output", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"spark-dpsynth: error: output exists: {tmp_path / 'release'}, {tmp_path / 'synthetic.csv'}; "
        "pass --overwrite to replace them"
    )
    assert (tmp_path / "synthetic.csv").read_text() == "a\n"


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
            "--synthesizer",
            "sds",
            "--quiet",
        ]
    )
    assert code == 2  # SDS's k-tuples up to R need R columns; the workload measures a narrower table whole
    assert "reporting_length must be <= the number of attribute columns (2), got 3" in capsys.readouterr().err


def test_quick_start_pipeline_end_to_end_on_adult(
    adult_quick_start: CliRun, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    readme = (ROOT / "README.md").read_text()
    assert "make run" in readme[readme.index("## Quick start") : readme.index("## Command line")]
    run = adult_quick_start
    assert run.status == 0, run.stderr
    assert "TEST MODE" in run.stderr + run.stdout
    out = tmp_path / "out"
    shutil.copytree(run.out, out)  # the session's run is shared: the rerun below changes a copy
    manifest = json.loads((out / "release" / "manifest.json").read_text())
    assert manifest["test_mode"] is True and manifest["epsilon"] == 4.0 and manifest["delta"] == 1e-6
    # the default (auto): the workload mechanism, AIM on Adult's 15 columns, some 3-way tables measured
    assert manifest["mechanism"] == "workload" and manifest["selection"] == "aim"
    assert manifest["released_tuples"]["1"] > 50
    assert any(len(m["columns"]) == 3 for m in manifest["measurements"])
    with open(out / "synthetic.csv", newline="") as f:
        rows = list(csv.reader(f))
    header = rows[0]
    assert header == manifest["columns"]
    assert len(rows) > 1000
    # Binned columns come back as numbers drawn inside their public bins (the open bins closed by the public
    # bounds of conf/adult.toml: <20 in [17, 20), >=70 in [70, 90]); no bin label reaches the synthetic data.
    ages = {r[0] for r in rows[1:] if r[0]}
    assert all(a.isdigit() and 17 <= int(a) <= 90 for a in ages)
    assert pq_schema_types(out / "synthetic")["age"] == "int"
    metrics = json.loads((out / "evaluation" / "metrics.json").read_text())
    for length in ("1", "2", "3"):
        assert 0 <= metrics["tvd"][length]["mean"] <= 1
    assert "protected n" in run.stdout and "mean TVD" in run.stdout
    # a seeded run's outputs are marked NOT private (docs/outputs.md, "Test-mode marks")
    assert sorted(p.name for p in out.iterdir()) == [
        "evaluation", "release", "synthetic", "synthetic.csv", "synthetic.csv.TEST-MODE.txt"
    ]  # fmt: skip
    assert (out / "synthetic" / "_TEST-MODE.txt").is_file()

    # A rerun with --overwrite whose evaluation fails (injected) keeps its release and synthetic data (the budget
    # is spent), removes the evaluation of the earlier release, and says in one line how to resume.
    def broken(*args, **kwargs):
        raise RuntimeError("injected failure")

    monkeypatch.setattr("spark_dpsynth.evaluation.metrics.evaluate", broken)
    rerun = ["--input", ADULT, "--output", str(out), "--columns", "age,sex"]
    code = main(["pipeline", *rerun, "--reporting-length", "1", "--seed", "1", "--overwrite", "--quiet"])
    assert code == EXIT_RELEASE_KEPT == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        "spark-dpsynth: error: the evaluation failed with RuntimeError (--debug shows more); the release and the "
        f"synthetic data are kept in {out} (no budget is spent to go on); resume with `spark-dpsynth evaluate "
        f"--input {ADULT} --output {out}`, with the same options"
    )
    assert sorted(p.name for p in out.iterdir()) == [
        "release", "synthetic", "synthetic.csv", "synthetic.csv.TEST-MODE.txt"
    ]  # fmt: skip
    manifest = json.loads((out / "release" / "manifest.json").read_text())
    assert manifest["columns"] == ["age", "sex"] and manifest["reporting_length"] == 1
    monkeypatch.undo()
    monkeypatch.chdir(ROOT)
    assert main(["evaluate", *rerun, "--max-marginal-length", "1", "--quiet"]) == 0
    assert json.loads((out / "evaluation" / "metrics.json").read_text())["columns"] == ["age", "sex"]


def pq_schema_types(path: Path) -> dict[str, str]:
    """Column name -> Arrow type name of a Parquet directory (int32 written as ``int``)."""
    import pyarrow.parquet as pq

    schema = pq.read_schema(next(path.glob("*.parquet")))
    return {f.name: "int" if str(f.type) == "int32" else str(f.type) for f in schema}


def test_jobs_call_the_cli() -> None:
    for job in ("pipeline", "aggregate", "synthesize", "evaluate"):
        text = (ROOT / "jobs" / f"{job}.py").read_text()
        assert f'main(["{job}", *sys.argv[1:]])' in text


def test_embedded_adult_data_is_intact() -> None:
    with gzip.open(ADULT, "rt") as f:
        header = f.readline().strip().split(",")
    assert header[0] == "age" and header[-1] == "split"


def test_catalog_tables_in_and_out(spark, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """aggregate from --input-table, synthesize to --output-table, evaluate reading that table back."""
    spark.sql("CREATE DATABASE IF NOT EXISTS cli_test")
    for name in ("cli_test.adult", "cli_test.synthetic"):
        spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.read.csv(ADULT, header=True).where("split = 'train'").write.saveAsTable("cli_test.adult")
    out = str(tmp_path / "out")
    common = ["--output", out, "--seed", "3", "--quiet"]
    data = ["--input-table", "cli_test.adult", "--columns", "age,sex,income", "--empty-values", "?"]
    assert main(["aggregate", *data, "--reporting-length", "2", *common]) == 0
    tables = ["--output-table", "cli_test.synthetic", "--no-single-csv"]
    assert main(["synthesize", *tables, "--partitions", "2", *common]) == 0
    capsys.readouterr()
    assert main(["synthesize", *tables, *common]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "spark-dpsynth: error: output table exists: cli_test.synthetic; pass --overwrite to replace it"
    )
    assert main(["evaluate", *data, *tables, "--max-marginal-length", "2", "--output", out, "--quiet"]) == 0
    synthetic = spark.read.table("cli_test.synthetic")
    assert synthetic.columns == ["age", "sex", "income"]
    metrics = json.loads((tmp_path / "out" / "evaluation" / "metrics.json").read_text())
    assert metrics["rows"]["synthetic"] == synthetic.count()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["evaluation", "release"]
    assert [t.name for t in spark.catalog.listTables("cli_test") if "tmp" in t.name] == []


# --------------------------------------------------------------------- budget is never spent for nothing


def _no_dp_draw(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if a mechanism runs (every DP draw of a pipeline is in one)."""

    def drawn(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        pytest.fail("a DP mechanism ran: the check came after the budget was spent")

    for name in ("marginals", "workload"):
        monkeypatch.setattr(f"spark_dpsynth.mechanisms.{name}.run", drawn)


def test_option_conflicts_are_refused_before_spark_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spark_dpsynth.cli import main as cli

    def no_spark(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        pytest.fail("Spark must not start")

    monkeypatch.setattr(cli, "_session", no_spark)
    out = tmp_path / "out"
    for command in ("pipeline", "aggregate"):
        code = main([command, "--input", ADULT, "--output", str(out), "--sds-format", "--synthesizer", "pgm"])
        assert code == 2
        assert capsys.readouterr().err.strip().splitlines() == [
            "spark-dpsynth: error: --sds-format needs k-way marginals (the model or sds synthesizer), not a "
            "workload release (--synthesizer pgm)"
        ]
    assert not out.exists() or not list(out.iterdir())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--label", "salary"],
            "the label column 'salary' (--label) is not an attribute column of the input",
        ),
        (["--label", "sex", "--holdout-filter", "split = "], "[PARSE_SYNTAX_ERROR]"),
        (["--label", "sex", "--holdout-filter", "splitt = 'test'"], "[UNRESOLVED_COLUMN"),
        (["--label", "sex", "--holdout-filter", "age + 1"], "[DATATYPE_MISMATCH"),
        (["--numeric-columns", "sex,nope"], "numeric column(s) ['nope'] are not attribute columns"),
    ],
)
def test_evaluation_options_are_checked_on_the_schema_before_any_dp_draw(
    spark,
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    message: str,
) -> None:
    _no_dp_draw(monkeypatch)
    out = tmp_path / "out"
    code = main(
        ["pipeline", "--input", ADULT, "--output", str(out), "--columns", "age,sex", *args, "--quiet"]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("spark-dpsynth: error: ") and message in err[0], err
    assert not list(out.iterdir()), "nothing is published"


def _synthesis_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise RuntimeError("injected synthesis failure")

    monkeypatch.setattr("spark_dpsynth.synthesizers.marginals.sample_model", broken)


@pytest.mark.slow
def test_a_failed_synthesis_keeps_the_release_and_synthesize_resumes_without_budget(
    spark, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spark_dpsynth.release import load_release

    out = tmp_path / "out"
    common = ["--output", str(out), "--synthesizer", "model", "--seed", "3", "--quiet"]
    _synthesis_fails(monkeypatch)
    code = main(
        ["pipeline", "--input", ADULT, "--columns", "age,sex,race", "--reporting-length", "2", *common]
    )
    captured = capsys.readouterr()
    assert code == EXIT_RELEASE_KEPT
    err = captured.err.strip().splitlines()
    assert err[-1] == (
        "spark-dpsynth: error: the synthesis failed with RuntimeError (--debug shows more); the release is kept "
        f"in {out}/release (no budget is spent to go on); resume with `spark-dpsynth synthesize --output {out}` "
        "and then `evaluate`, with the same options"
    )
    assert "injected" not in captured.err
    assert sorted(p.name for p in out.iterdir()) == ["release"], "the release alone, no staging left"
    manifest_text = (out / "release" / "manifest.json").read_text()
    release = load_release(str(out / "release"), spark)
    assert release.columns == ("age", "sex", "race") or list(release.columns) == ["age", "sex", "race"]
    monkeypatch.undo()
    assert main(["synthesize", *common]) == 0
    summary = capsys.readouterr().out
    manifest = json.loads(manifest_text)
    assert f"privacy spent          epsilon={manifest['epsilon']:g}" in summary
    assert (out / "release" / "manifest.json").read_text() == manifest_text, "no budget spent, no new release"
    assert sorted(p.name for p in out.iterdir()) == [
        "release", "synthetic", "synthetic.csv", "synthetic.csv.TEST-MODE.txt"
    ]  # fmt: skip
    with open(out / "synthetic.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["age", "sex", "race"] and len(rows) > 1000


@pytest.mark.slow
def test_an_interrupt_after_the_release_keeps_it_and_exits_130(
    spark, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise KeyboardInterrupt

    monkeypatch.setattr("spark_dpsynth.synthesizers.marginals.sample_model", interrupted)
    out = tmp_path / "out"
    code = main(["pipeline", "--input", ADULT, "--output", str(out), "--columns", "age,sex", "--reporting-length",
                 "1", "--synthesizer", "model", "--quiet"])  # fmt: skip
    assert code == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"spark-dpsynth: interrupted by SIGINT; the release is kept in {out}/release (no budget is spent to go "
        f"on); resume with `spark-dpsynth synthesize --output {out}` and then `evaluate`, with the same options"
    )
    assert sorted(p.name for p in out.iterdir()) == ["release"]
    assert json.loads((out / "release" / "manifest.json").read_text())["columns"] == ["age", "sex"]


@pytest.mark.slow
def test_a_sigterm_lost_during_the_synthesis_keeps_the_release_alone(
    spark, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SIGTERM whose exception was lost in a finalizer while the synthetic data was drawn: the run stops before
    that data is kept, and only the release is published."""
    from spark_dpsynth.cli import _signals
    from spark_dpsynth.synthesizers import marginals

    drawn = marginals.sample_model

    def drawn_while_a_sigterm_is_lost(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        _signals.PENDING.append(_signals.Terminated)
        return drawn(*args, **kwargs)

    monkeypatch.setattr(marginals, "sample_model", drawn_while_a_sigterm_is_lost)
    out = tmp_path / "out"
    code = main(["pipeline", "--input", ADULT, "--output", str(out), "--columns", "age,sex", "--reporting-length",
                 "1", "--synthesizer", "model", "--quiet"])  # fmt: skip
    assert code == 143
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(f"spark-dpsynth: interrupted by SIGTERM; the release is kept in {out}/release"), (
        last
    )
    assert sorted(p.name for p in out.iterdir()) == ["release"]


def test_the_synthesis_partitions_follow_the_protected_number_of_records(
    spark, caplog: pytest.LogCaptureFixture
) -> None:
    """n' = 10^7 (a DP figure of the manifest) at the session's parallelism 4: the default plans 10 partitions
    instead of refusing after the budget is spent; --partitions 2 is raised in a pipeline, refused by
    ``synthesize``; the bound of one run is still a bound."""
    from spark_dpsynth.errors import InvalidParameterError
    from spark_dpsynth.params import MAX_PARTITIONS, synthesis_partitions
    from spark_dpsynth.pipeline import synthesis_plan as _synthesis_plan
    from spark_dpsynth.release.manifest import Manifest

    class _Release:
        def __init__(self, n: int) -> None:
            self.manifest = Manifest.from_json(
                {"columns": ["a"], "reporting_length": 1, "protected_number_of_records": n}
            )

    def plan(n: int, *options: str, adapt: bool = True) -> int:
        config = load_job_config(build_parser().parse_args(["synthesize", "--output", "o", *options]))
        return _synthesis_plan(spark, config, _Release(n), adapt=adapt)

    assert plan(1000) == 4 and plan(4_000_000) == 4 and plan(10**7) == 10
    assert plan(10**7, "--aggregate-counts-scale-factor", "3") == 30
    assert plan(10**7, "--target-number-of-records", "1000") == 4
    with caplog.at_level("WARNING", logger="spark_dpsynth.cli.main"):
        assert plan(10**7, "--partitions", "2") == 5
    assert "--partitions 2 is too few for 10000000 synthetic records" in caplog.text
    with pytest.raises(InvalidParameterError, match="set --partitions to at least 5"):
        plan(10**7, "--partitions", "2", adapt=False)
    with pytest.raises(InvalidParameterError, match="more than one run writes"):
        plan(10**7, "--aggregate-counts-scale-factor", "2000")
    assert synthesis_partitions(10**9, 8) == 1000 and synthesis_partitions(10**10, 8) == MAX_PARTITIONS
    assert synthesis_partitions(10, 8, requested=3) == 3 and synthesis_partitions(0, 8) == 8


@pytest.mark.slow
def test_a_header_only_input_gives_a_valid_release_and_the_run_completes(
    spark, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Whether the table is empty is private: it decides nothing in the DP part (the release is drawn as for any
    table and synthesized from); only the evaluation, not private, says that no distance is defined."""
    from spark_dpsynth.release import load_release

    with gzip.open(ADULT, "rt") as f:
        header = f.readline()
    empty = tmp_path / "header_only.csv"
    empty.write_text(header)
    out = tmp_path / "out"
    code = main(
        ["pipeline", "--input", str(empty), "--output", str(out), "--columns", "age,sex,race", "--quiet"]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert sorted(p.name for p in out.iterdir()) == ["evaluation", "release", "synthetic", "synthetic.csv"]
    release = load_release(str(out / "release"), spark)
    assert release.manifest["protected_number_of_records"] >= 0 and release.manifest["epsilon"] == 4.0
    metrics = json.loads((out / "evaluation" / "metrics.json").read_text())
    assert metrics["failed_metrics"] == {
        "distances": "the sensitive table has no rows: no distance is defined"
    }
    assert "FAILED METRIC          distances" in captured.out
