"""The command line under faults and misuse: options that reach the right key, signals at every stage, and Spark's
failures in our words (docs/design.md sections 1.6 and 7). No message may carry a data value.

The signal tests run the real pipeline on UCI Adult in a process group of its own and send the signal to the
whole group (what Ctrl-C, ``timeout`` and a scheduler send) once the progress line of a stage shows; they are in
the ``slow`` tier.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from spark_dpsynth.cli._spark_errors import condition_of, explain
from spark_dpsynth.cli.main import build_parser, load_job_config, main
from spark_dpsynth.config import load_document, parse_config
from spark_dpsynth.data.io import uncastable_columns
from spark_dpsynth.errors import ConfigError
from tests.conftest import ROOT, small_tmpfs

ADULT = str(ROOT / "data" / "adult.csv.gz")


# --------------------------------------------------------------------------------------------- --encoding


@pytest.mark.parametrize("command", ["pipeline", "aggregate", "evaluate"])
@pytest.mark.parametrize(("given", "canonical"), [("latin-1", "iso-8859-1"), ("utf-8", "utf-8")])
def test_encoding_is_the_csv_encoding_on_every_command_that_reads_a_table(
    command: str, given: str, canonical: str
) -> None:
    args = build_parser().parse_args([command, "--input", ADULT, "--output", "o", "--encoding", given])
    config = load_job_config(args)
    assert config.encoding == canonical
    assert config.archetype.cluster_encoding == "onehot"


def test_release_is_read_by_evaluate_and_refused_where_a_run_makes_its_own(tmp_path: Path) -> None:
    from spark_dpsynth.errors import InvalidParameterError
    from spark_dpsynth.pipeline import Run

    given = str(tmp_path / "elsewhere" / "release")
    for command, more in (("synthesize", []), ("evaluate", ["--input", ADULT])):
        args = build_parser().parse_args([command, *more, "--output", "o", "--release", given])
        assert Run(load_job_config(args), command).release_dir == given
    for command in ("pipeline", "aggregate"):
        args = build_parser().parse_args([command, "--input", ADULT, "--output", "o", "--release", given])
        with pytest.raises(
            InvalidParameterError, match=f"--release .* {command} makes its own in DIR/release"
        ):
            Run(load_job_config(args), command).check()


def test_cluster_encoding_is_the_archetype_option() -> None:
    args = build_parser().parse_args(
        [
            "pipeline",
            "--input",
            ADULT,
            "--output",
            "o",
            "--encoding",
            "latin-1",
            "--cluster-encoding",
            "ordinal",
        ]
    )
    config = load_job_config(args)
    assert config.encoding == "iso-8859-1" and config.archetype.cluster_encoding == "ordinal"


def test_the_old_archetype_key_is_read_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    conf = tmp_path / "c.toml"
    conf.write_text('[input]\nencoding = "latin-1"\n[archetype]\nencoding = "ordinal"\n')
    with caplog.at_level(logging.WARNING, logger="spark_dpsynth.config"):
        config = parse_config(load_document(str(conf)))
    assert config.encoding == "iso-8859-1" and config.archetype.cluster_encoding == "ordinal"
    assert [r.getMessage() for r in caplog.records] == [
        "[archetype] encoding is deprecated: call it cluster_encoding (option --cluster-encoding)"
    ]


def test_the_old_and_the_new_archetype_key_together_are_refused(tmp_path: Path) -> None:
    conf = tmp_path / "c.toml"
    conf.write_text('[archetype]\nencoding = "ordinal"\ncluster_encoding = "onehot"\n')
    with pytest.raises(ConfigError, match=r"^\[archetype\] give cluster_encoding only \(encoding is its"):
        parse_config(load_document(str(conf)))
    conf.write_text('[archetype]\nencoding = "hash"\n')
    with pytest.raises(
        ConfigError, match=r"cluster_encoding must be one of \['onehot', 'ordinal'\], got 'hash'"
    ):
        parse_config(load_document(str(conf)))


# --------------------------------------------------------------------------------------------- signals

_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (INFO|WARNING) spark_dpsynth\.")
_JVM_START = (
    "WARNING: Using incubator modules",
    "Setting default log level to",
    "To adjust logging level use",
)
"""The lines a JVM prints when it starts, before any stage (PySpark's and the JDK's, no data)."""


def _run_until(marker: str, signum: int, *, group: bool, out: Path) -> tuple[int, list[str], bool]:
    """Run the pipeline on Adult, send ``signum`` (to the process group or the process) a moment after a progress
    line containing ``marker``; returns the exit status, the stderr lines that are not progress or JVM start-up
    lines, and whether the signal was sent."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "spark_dpsynth", "pipeline", "--input", ADULT, "--output", str(out),
         "--use-columns", "age,workclass,education,sex,race,income", "--epsilon", "1"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    lines: list[str] = []
    sent = threading.Event()

    def watch() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line.rstrip("\n"))
            if not sent.is_set() and marker in line:
                time.sleep(0.5)
                (os.killpg if group else os.kill)(proc.pid, signum)
                sent.set()

    reader = threading.Thread(target=watch)
    reader.start()
    try:
        proc.wait(timeout=900)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        reader.join()
    rest = [x for x in lines if not _LOG_LINE.match(x) and not x.startswith(_JVM_START)]
    return proc.returncode, rest, sent.is_set()


# Each signal, each stage and each way of sending is in CI's `make test-slow`; the two other combinations of the
# aggregation stage in `make test-long` (a pipeline run each).
@pytest.mark.slow
@pytest.mark.parametrize(
    ("marker", "signum", "group", "status", "kept"),
    [
        pytest.param("workload: discovering", signal.SIGINT, True, 130, (), marks=pytest.mark.long),
        pytest.param("workload: discovering", signal.SIGTERM, True, 143, (), marks=pytest.mark.long),
        ("workload: discovering", signal.SIGTERM, False, 143, ()),
        ("pgm: sampling", signal.SIGTERM, True, 143, ("release",)),
        ("cell counts and metrics", signal.SIGINT, True, 130, ("release", "synthetic")),
    ],
    ids=[
        "aggregation-SIGINT-group", "aggregation-SIGTERM-group", "aggregation-SIGTERM-process",
        "synthesis-SIGTERM-group", "evaluation-SIGINT-group",
    ],
)  # fmt: skip
def test_a_signal_at_any_stage_exits_with_one_line(
    marker: str, signum: int, group: bool, status: int, kept: tuple[str, ...], tmp_path: Path
) -> None:
    # Before the release nothing is written; once the release is drawn it is kept (and the synthetic data once
    # written), and the one line says how to go on without spending budget. Both signals go through one handler
    # (spark_dpsynth.cli._signals): both are sent before the release, one at each stage after it.
    out = tmp_path / "o"
    code, rest, sent = _run_until(marker, signum, group=group, out=out)
    assert sent, f"the run ended before a progress line said {marker!r}"
    name = signal.Signals(signum).name
    assert code == status
    assert len(rest) == 1, "\n".join(rest[:20])
    assert not any("Exception" in x or "at org.apache" in x or "Traceback" in x for x in rest)
    if not kept:
        assert rest == [f"spark-dpsynth: interrupted by {name}; no output was changed"]
        assert not out.exists() or list(out.iterdir()) == [], "no output, and no staging left behind"
        return
    what = (
        "the release is kept in" if kept == ("release",) else "the release and the synthetic data are kept in"
    )
    assert rest[0].startswith(f"spark-dpsynth: interrupted by {name}; {what} {out}"), rest[0]
    assert "no budget is spent to go on" in rest[0] and "resume with `spark-dpsynth" in rest[0]
    assert set(kept) <= {p.name for p in out.iterdir()} and "evaluation" not in {
        p.name for p in out.iterdir()
    }
    assert not any(p.name.startswith(".spark-dpsynth-staging") for p in out.iterdir()), (
        "no staging left behind"
    )


# --------------------------------------------------------------------------------------------- messages

_CAST_TEXT = (
    ": org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error while reading file "
    "file:///d/t.csv.  SQLSTATE: KD001\n"
    "Caused by: org.apache.spark.SparkException: [MALFORMED_RECORD_IN_PARSING.WITHOUT_SUGGESTION] Malformed "
    "records are detected in record parsing: [null,MARKER].\n"
    'Caused by: java.lang.NumberFormatException: For input string: "MARKER"'
)
_RAGGED_TEXT = _CAST_TEXT.replace(
    'java.lang.NumberFormatException: For input string: "MARKER"',
    "org.apache.spark.SparkRuntimeException: [MALFORMED_CSV_RECORD] Malformed CSV record: MARKER",
)
_DISK_TEXT = (
    ": org.apache.spark.SparkException: [TASK_WRITE_FAILED] Task failed while writing rows to "
    "file:/o/.spark-dpsynth-staging-1/synthetic.\nCaused by: java.io.IOException: No space left on device"
)
_JavaError = type("Py4JJavaError", (Exception,), {"__module__": "py4j.protocol"})


def test_a_cast_error_is_called_a_cast_error_and_names_the_column_not_the_value() -> None:
    line = explain(_JavaError(_CAST_TEXT), cast_columns=lambda: ["AGEP"])
    assert line == (
        "/d/t.csv: a value of column AGEP cannot be cast to the type --schema declares (a cast error); fix the "
        "value, or declare the column STRING and cast it with try_cast in --row-filter"
    )
    unnamed = explain(_JavaError(_CAST_TEXT), cast_columns=lambda: [])
    assert unnamed is not None and unnamed.startswith("/d/t.csv: a value cannot be cast to the type --schema")
    ragged = explain(_JavaError(_RAGGED_TEXT), cast_columns=lambda: ["AGEP"])
    assert ragged is not None and "different number of fields" in ragged and "cast" not in ragged
    for text in (line, ragged):
        assert "MARKER" not in text


def test_a_full_disk_says_so_and_names_the_output() -> None:
    line = explain(_JavaError(_DISK_TEXT), output_path="/o")
    assert line == (
        "the disk is full (No space left on device) writing /o; free space there (Spark's scratch space too, "
        "spark.local.dir) or give another --output"
    )
    assert condition_of(_JavaError(_DISK_TEXT)) == "TASK_WRITE_FAILED", "what the message replaces"


def _csv_with_one_bad_cell(path: Path, marker: str) -> None:
    rows = ["AGEP,SEX,INCOME"] + [f"{20 + i % 60},{'MF'[i % 2]},{i * 10}" for i in range(300)]
    rows[150] = f"{marker},F,100"
    path.write_text("\n".join(rows) + "\n")


def test_uncastable_columns_names_the_columns_only(spark, tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    _csv_with_one_bad_cell(path, "CASTMARKER")
    found = uncastable_columns(spark, str(path), "AGEP INT, SEX STRING, INCOME BIGINT")
    assert found == ["AGEP"]
    assert uncastable_columns(spark, str(path), "AGEP STRING, SEX STRING, INCOME BIGINT") == []


def test_aggregate_with_a_schema_reports_the_cast_error(
    spark, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    path = tmp_path / "t.csv"
    _csv_with_one_bad_cell(path, "CASTMARKER")
    code = main(
        ["aggregate", "--input", str(path), "--schema", "AGEP INT, SEX STRING, INCOME BIGINT",
         "--output", str(tmp_path / "o"), "--quiet"]
    )  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err == [
        f"spark-dpsynth: error: {path}: a value of column AGEP cannot be cast to the type --schema declares (a "
        "cast error); fix the value, or declare the column STRING and cast it with try_cast in --row-filter"
    ]
    assert not (tmp_path / "o" / "release").exists()


def test_evaluate_names_the_missing_synthetic_columns_before_running(
    spark, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from spark_dpsynth.release.core import Release

    out = tmp_path / "o"
    columns = ["age", "sex", "race", "income"]
    release = Release.from_pandas(
        pd.DataFrame({"k": [1], "columns": [["sex"]], "values": [["Male"]], "count": [10]}),
        {"columns": columns, "reporting_length": 1, "protected_number_of_records": 10, "test_mode": True},
    )
    release.save(str(out / "release"), spark)
    spark.createDataFrame([("30", "Male")], "age string, sex string").write.parquet(str(out / "synthetic"))
    (tmp_path / "in.csv").write_text("age,sex,race,income\n30,Male,White,<=50K\n")
    code = main(["evaluate", "--input", str(tmp_path / "in.csv"), "--output", str(out), "--quiet"])
    assert code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "spark-dpsynth: error: the synthetic data lacks the release's columns race, income; evaluate the "
        "synthetic data of this release (spark-dpsynth synthesize)"
    ]
    assert not (out / "evaluation").exists()


@pytest.fixture
def small_disk(tmp_path: Path):  # noqa: ANN201 - Iterator[Path]
    """A 512 KiB tmpfs at ``tmp_path/disk`` (skipped where this process may not mount one)."""
    with small_tmpfs(tmp_path / "disk", "512k") as disk:
        yield disk


@pytest.mark.slow
@pytest.mark.long  # CI's `make test-slow` has the same line in test_publish.py's full disk during the synthesis
def test_a_full_disk_is_one_line_naming_the_output(small_disk: Path) -> None:
    out = small_disk / "o"
    result = subprocess.run(
        [sys.executable, "-m", "spark_dpsynth", "pipeline", "--input", ADULT, "--output", str(out), "--quiet",
         "--use-columns", "age,workclass,education,sex,race,income", "--synthesizer", "independent",
         "--target-number-of-records", "200000"],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    # the release fits and is kept (exit 3); the synthetic data does not, and the one line says both
    assert result.returncode == 3, result.stderr[-2000:]
    rest = [x for x in result.stderr.splitlines() if not x.startswith(_JVM_START)]
    assert len(rest) == 1, "\n".join(rest[:20])
    assert rest[0].startswith(
        f"spark-dpsynth: error: the synthesis failed: the disk is full (No space left on device) writing {out}; "
        "free space there "
        "(Spark's scratch space too, spark.local.dir) or give another --output"
    ), rest[0]
    assert f"the release is kept in {out}/release (no budget is spent to go on)" in rest[0]
    assert [p.name for p in out.iterdir() if not p.name.startswith(".")] == ["release"], "only the release"
