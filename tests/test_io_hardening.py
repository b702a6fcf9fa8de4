"""Input as the world writes it, and nothing private in any error: RFC 4180 CSV, encodings, column names, ragged
rows, files in the wrong format, Spark's errors in our words, and the gate on Spark's and PySpark's log output
(docs/design.md section 1.6).

The CLI tests plant a unique marker value in each bad input and fail if it appears anywhere outside
``evaluation/`` (stderr, stdout, the release, the synthetic data, the manifest). Several cases share one process
(the JVM starts once); the default tier runs a representative few, the ``slow`` tier all of them.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from spark_dpsynth.cli._spark_errors import condition_of, explain
from spark_dpsynth.data.io import (
    CSV_READ_OPTIONS,
    check_column_names,
    csv_encoding,
    read_input,
    read_output,
    write_frame,
    write_single_csv,
)
from spark_dpsynth.data.session import QUIET_LOG4J2, configure_logging, quiet_log4j2_file
from spark_dpsynth.errors import InvalidParameterError, SchemaError
from tests.conftest import ROOT

HEADER = ["AGEP", "SEX", "CITY"]
TRICKY = [
    "Smith, John",
    'Smith, John "JJ"',
    "line one\nline two",
    "crlf\r\nvalue",
    "  leading and trailing  ",
    "back\\slash",
    '"',
    "José, Zoë ünïcode",
    'a,b,"c"\n,',
]
"""Values a CSV writer must quote: delimiters, quotes, line breaks, outer spaces, backslashes, non-ASCII."""


def _base_rows(n: int = 60) -> list[list[str]]:
    return [[str(20 + i % 50), "MF"[i % 2], "ABC"[i % 3]] for i in range(n)]


def _write_csv(path: Path, rows: list[list[str]], header: list[str] = HEADER) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([header, *rows])
    return path


# --------------------------------------------------------------------------------------------- no Spark


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (
            ["A", "a", "B"],
            r"'a' \(column 2\) has the same name as column 1 \(Spark compares names without case\)",
        ),
        (["A", "", "B"], "column 2 has no name"),
        (["A", None], "column 2 has no name"),
        (["A", "  "], "column 2 has no name"),
        (["A`x", "B"], r"the column name 'A`x' \(column 1\) has a back quote"),
        (["A", "B\nC"], "column 2 has a name with a control character"),
        (["A", "x" * 100, "x" * 100], r"column 3 has the same name as column 2"),
    ],
)
def test_column_names_refused_with_one_line(names: list[str | None], message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        check_column_names(names, where="the header of t.csv")


def test_column_names_kept_exactly() -> None:
    check_column_names(
        [" lead", "trail ", "a.b", "with space", "ünï", "A", "a"], where="h", case_sensitive=True
    )


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("UTF-8", "utf-8"),
        ("utf8", "utf-8"),
        ("latin-1", "iso-8859-1"),
        ("Latin1", "iso-8859-1"),
        ("ascii", "us-ascii"),
    ],
)
def test_encoding_aliases(name: str, canonical: str) -> None:
    assert csv_encoding(name) == canonical


@pytest.mark.parametrize("name", ["utf-16", "cp1252", "", "klingon"])
def test_unsupported_encodings_are_refused(name: str) -> None:
    with pytest.raises(InvalidParameterError, match="encoding must be one of"):
        csv_encoding(name)


def test_wrong_format_files_are_refused_before_spark(tmp_path: Path) -> None:
    parquet = tmp_path / "t.csv"
    parquet.write_bytes(b"PAR1 MARKER-PQ-1 PAR1")
    with pytest.raises(
        InvalidParameterError, match=r"t.csv is a Parquet file, not CSV; give --format parquet"
    ):
        read_input(None, path=str(parquet))  # type: ignore[arg-type] - refused before Spark is used
    hidden_gzip = tmp_path / "data.csv"
    hidden_gzip.write_bytes(gzip.compress(b"a\nMARKER-GZ-1\n"))
    with pytest.raises(InvalidParameterError, match="gzip-compressed but its name does not end in .gz"):
        read_input(None, path=str(hidden_gzip))  # type: ignore[arg-type]
    csv_dir = tmp_path / "csvs"
    csv_dir.mkdir()
    (csv_dir / "part1").write_text("a\nMARKER-CSV-1\n")
    with pytest.raises(InvalidParameterError, match="is not a Parquet file; give --format csv"):
        read_input(None, path=str(csv_dir), fmt="parquet")  # type: ignore[arg-type]
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidParameterError, match="no data files in"):
        read_input(None, path=str(tmp_path / "empty"), fmt="csv")  # type: ignore[arg-type]


# Spark's own texts for the failures (shortened), each with a data value that must not come out.
_SPARK_TEXTS = {
    "footer": (
        "An error occurred while calling o83.parquet.\n: org.apache.spark.SparkException: Job aborted\nCaused by: "
        "org.apache.spark.SparkException: [FAILED_READ_FILE.CANNOT_READ_FILE_FOOTER] Encountered error while "
        "reading file file:/d/csvdir/part1.csv. Could not read footer.\nCaused by: java.lang.RuntimeException: "
        "file:/d/csvdir/part1.csv is not a Parquet file. Expected magic number at tail, but found "
        "[90, 81, 55, 10] MARKER",
        "/d/csvdir/part1.csv is not a Parquet file; give --format csv",
    ),
    "ragged": (
        ": org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error while reading file "
        "file:///d/ragged.csv.  SQLSTATE: KD001\nCaused by: org.apache.spark.SparkException: "
        "[MALFORMED_RECORD_IN_PARSING.WITHOUT_SUGGESTION] Malformed records are detected in record parsing: "
        "[empty row].\nCaused by: org.apache.spark.SparkRuntimeException: [MALFORMED_CSV_RECORD] Malformed CSV "
        "record: 50,MARKER SQLSTATE: KD000",
        "/d/ragged.csv: a record has a different number of fields than the header",
    ),
    "wide": (
        ": org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error while reading file "
        "file:///d/wide.csv.  SQLSTATE: KD001\nCaused by: com.univocity.parsers.common.TextParsingException: "
        "java.lang.ArrayIndexOutOfBoundsException - Index 20480 out of bounds for length 20480\nParsed content: "
        "MARKER,MARKER,MARKER",
        "/d/wide.csv: a record has more fields than Spark's CSV reader allows",
    ),
    "gzip": (
        ": org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error while reading file "
        "file:/d/t%20x.csv.gz.  SQLSTATE: KD001\nCaused by: java.io.IOException: invalid distance too far back "
        "MARKER",
        "/d/t x.csv.gz cannot be decompressed: it is not valid gzip",
    ),
    "header": (
        ": org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error while reading file "
        "file:/d/dir/b.csv.  SQLSTATE: KD001\nCaused by: java.lang.IllegalArgumentException: CSV header does not "
        "conform to the schema.\n Header: MARKER",
        "the header of /d/dir/b.csv differs from the first file's",
    ),
    "other read": (
        ": org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error while reading file "
        "file:/d/t.csv.  SQLSTATE: KD001\nCaused by: java.lang.IllegalStateException: MARKER",
        "cannot read /d/t.csv ([FAILED_READ_FILE.NO_HINT]); rerun with --debug",
    ),
}


_JavaError = type("Py4JJavaError", (Exception,), {"__module__": "py4j.protocol"})
"""A stand-in for py4j's error: the text of a JVM exception."""


@pytest.mark.parametrize("case", sorted(_SPARK_TEXTS))
def test_spark_errors_in_our_words(case: str) -> None:
    text, expected = _SPARK_TEXTS[case]
    line = explain(_JavaError(text))
    assert line is not None and line.startswith(expected), line
    assert "MARKER" not in line and "90, 81" not in line


class _CastError(Exception):
    """A stand-in with PySpark's error API (condition and query context)."""

    class _Context:
        def fragment(self) -> str:
            return "cast(AGEP as int)"

    def getCondition(self) -> str:  # noqa: N802 - PySpark's name
        return "CAST_INVALID_INPUT"

    def getQueryContext(self) -> list:  # noqa: N802 - PySpark's name
        return [self._Context()]


def test_cast_errors_name_the_option_and_types_not_the_value() -> None:
    err = _CastError(
        '[CAST_INVALID_INPUT] The value \'AGE-MARKER-9\' of the type "STRING" cannot be cast to "INT" because '
        "it is malformed.\n== SQL (line 1, position 1) ==\ncast(AGEP as int) >= 18"
    )
    line = explain(err, {"--row-filter": "cast(AGEP as int) >= 18", "--holdout-filter": None})
    assert line == (
        "a value of the data cannot be cast from STRING to INT in `cast(AGEP as int)` (--row-filter); use "
        "try_cast(...) to read such values as empty"
    )
    assert condition_of(err) == "CAST_INVALID_INPUT"
    assert explain(RuntimeError("something else")) is None
    # a bracketed word in an exception that is not Spark's is not taken for a condition (it could be a value)
    assert condition_of(RuntimeError("ValueError: [MARKER]")) is None
    assert condition_of(_JavaError(": org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] x")) == (
        "FAILED_READ_FILE.NO_HINT"
    )


def test_log_gate_lets_only_our_loggers_through() -> None:
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    stream = io.StringIO()
    root.handlers = [logging.StreamHandler(stream)]
    try:
        configure_logging(debug=False)
        logging.getLogger("spark_dpsynth.test").warning("our line")
        logging.getLogger("py4j.java_gateway").error("MARKER-PY4J")
        logging.getLogger("pyspark.sql").error("MARKER-PYSPARK")
        from pyspark.logger import PySparkLogger

        assert PySparkLogger.getLogger("SQLQueryContextLogger").disabled
        configure_logging(debug=True)
        logging.getLogger("py4j.java_gateway").error("debug shows it")
        assert not PySparkLogger.getLogger("SQLQueryContextLogger").disabled
    finally:
        configure_logging(debug=True)
        root.handlers, _ = saved
        root.setLevel(saved[1])
        logging.captureWarnings(False)
    out = stream.getvalue()
    assert "our line" in out and "debug shows it" in out
    assert "MARKER" not in out


def test_quiet_log4j2_file() -> None:
    path = quiet_log4j2_file()
    assert Path(path).read_text(encoding="utf-8") == QUIET_LOG4J2
    assert "rootLogger.level = off" in QUIET_LOG4J2 and "appender.console.type = Console" in QUIET_LOG4J2
    from spark_dpsynth.data.session import _quiet_java_options

    options = _quiet_java_options()
    assert options.startswith("-Dlog4j2.configurationFile=") and path in options


# --------------------------------------------------------------------------------------------- with Spark


@pytest.fixture
def tricky(spark):
    rows = [(str(i), v) for i, v in enumerate(TRICKY)] + [("99", None)]
    return spark.createDataFrame(rows, "id string, value string")


def test_synthetic_csv_round_trips_through_pandas_and_spark(spark, tricky, tmp_path: Path) -> None:
    path = tmp_path / "synthetic.csv"
    write_single_csv(tricky, str(path))
    text = path.read_text(encoding="utf-8")
    assert '"Smith, John ""JJ"""' in text and '\\"' not in text
    back = pd.read_csv(path, dtype=str, keep_default_na=False)
    assert dict(zip(back["id"], back["value"], strict=True)) == {
        **{str(i): v for i, v in enumerate(TRICKY)},
        "99": "",
    }
    again = {r["id"]: r["value"] for r in read_input(spark, path=str(path)).collect()}  # test-sized
    assert again == {**{str(i): v for i, v in enumerate(TRICKY)}, "99": None}
    plain = spark.read.csv(str(path), header=True, multiLine=True, escape='"').collect()  # test-sized
    assert {r["id"]: r["value"] for r in plain}["1"] == 'Smith, John "JJ"'


def test_csv_directory_output_round_trips(spark, tricky, tmp_path: Path) -> None:
    path = str(tmp_path / "synthetic")
    write_frame(tricky, path, "csv")
    back = {r["id"]: r["value"] for r in read_output(spark, path=path, fmt="csv").collect()}  # test-sized
    assert back == {**{str(i): v for i, v in enumerate(TRICKY)}, "99": None}
    assert CSV_READ_OPTIONS["multiLine"] is True


def test_rfc4180_input_with_exact_column_names(spark, tmp_path: Path) -> None:
    path = _write_csv(
        tmp_path / "quoted.csv",
        [["1", 'Smith, John "JJ"', "a\nb"], ["2", "  x  ", ""]],
        header=[" lead", "a.b", "with space"],
    )
    df = read_input(spark, path=str(path))
    assert df.columns == [" lead", "a.b", "with space"]
    rows = sorted(tuple(r) for r in df.collect())  # test-sized
    assert rows == [("1", 'Smith, John "JJ"', "a\nb"), ("2", "  x  ", None)]


def test_encoding_is_declared_and_checked(spark, tmp_path: Path) -> None:
    rows = _base_rows(5)
    body = "\n".join(",".join(r) for r in [HEADER, *rows]) + "\n42,M,Jos\xe9\n"
    path = tmp_path / "latin1.csv"
    path.write_bytes(body.encode("latin-1"))
    with pytest.raises(
        InvalidParameterError, match=r"latin1.csv, line 7: not valid utf-8; give the file's enc"
    ):
        read_input(spark, path=str(path))
    df = read_input(spark, path=str(path), encoding="latin-1")
    assert "José" in {r["CITY"] for r in df.collect()}  # test-sized
    gz = tmp_path / "latin1.csv.gz"
    gz.write_bytes(gzip.compress(body.encode("latin-1")))
    with pytest.raises(InvalidParameterError, match=r"latin1.csv.gz, line 7: not valid utf-8"):
        read_input(spark, path=str(gz))
    utf8 = tmp_path / "utf8.csv"
    utf8.write_text(body, encoding="utf-8")
    with pytest.raises(InvalidParameterError, match=r"utf8.csv, line 7: not valid us-ascii"):
        read_input(spark, path=str(utf8), encoding="ascii")


def test_duplicate_header_names_are_refused(spark, tmp_path: Path) -> None:
    path = _write_csv(tmp_path / "dup.csv", _base_rows(3), header=["A", "B", "A"])
    with pytest.raises(SchemaError, match=r"dup.csv: 'A' \(column 3\) has the same name as column 1"):
        read_input(spark, path=str(path))


def test_ragged_rows_error_or_pad(spark, tmp_path: Path) -> None:
    path = tmp_path / "ragged.csv"
    path.write_text("AGEP,SEX,CITY\n30,M,A\n50,M\n51,F,A,MARKER-EXTRA\n", encoding="utf-8")
    with pytest.raises(Exception) as info:  # noqa: PT011 - Spark's own exception type, classic or Connect
        read_input(spark, path=str(path)).collect()  # test-sized
    line = explain(info.value)
    assert line is not None and "ragged.csv: a record has a different number of fields" in line
    padded = sorted(tuple(r) for r in read_input(spark, path=str(path), ragged_rows="pad").collect())
    assert padded == [("30", "M", "A"), ("50", "M", None), ("51", "F", "A")]


def test_corrupt_gzip_and_cast_errors_in_our_words(spark, tmp_path: Path) -> None:
    good = _write_csv(tmp_path / "base.csv", _base_rows(200))
    corrupt = tmp_path / "corrupt.csv.gz"
    corrupt.write_bytes(gzip.compress(good.read_bytes())[:100] + b"MARKER")
    with pytest.raises(Exception) as info:  # noqa: PT011
        read_input(spark, path=str(corrupt)).collect()  # test-sized
    assert (
        explain(info.value)
        == f"{corrupt} cannot be decompressed: it is not valid gzip (truncated or corrupt)"
    )
    bad = _write_csv(tmp_path / "cast.csv", [*_base_rows(3), ["AGE-MARKER-9", "M", "A"]])
    row_filter = "cast(AGEP as int) >= 18"
    with pytest.raises(Exception) as info:  # noqa: PT011
        read_input(spark, path=str(bad)).where(row_filter).count()
    if "ANSI" in str(info.value) or condition_of(info.value) == "CAST_INVALID_INPUT":
        line = explain(info.value, {"--row-filter": row_filter})
        assert line is not None and line.startswith("a value of the data cannot be cast from STRING to INT")
        assert "MARKER" not in line


# --------------------------------------------------------------------------------------------- the CLI, markers

_DRIVER = """
import json, sys
from spark_dpsynth.cli.main import main
for name, args in json.loads(sys.argv[1]):
    rc = main(args)
    sys.stdout.flush()
    print(f"=== {name} rc={rc}", file=sys.stderr, flush=True)
"""


def _cases(tmp: Path, which: set[str]) -> dict[str, tuple[list[str], str, int]]:
    """name -> (arguments, the expected error line's start or "" for a run that succeeds, exit status)."""
    cases: dict[str, tuple[list[str], str, int]] = {}
    base = _base_rows(400)

    def add(name: str, args: list[str], expected: str, rc: int) -> None:
        if name in which:
            cases[name] = (args, expected, rc)

    cast = _write_csv(tmp / "cast.csv", [*base, ["MARKER-CAST-9", "M", "A"]])
    add(
        "cast",
        ["--input", str(cast), "--row-filter", "cast(AGEP as int) >= 18"],
        "a value of the data cannot be cast from STRING to INT in `cast(AGEP as int)` (--row-filter)",
        2,
    )
    ragged = tmp / "ragged.csv"
    ragged.write_text(
        "\n".join(",".join(r) for r in [HEADER, *base]) + "\n50,MARKER-RAGGED\n", encoding="utf-8"
    )
    add("ragged", ["--input", str(ragged)], f"{ragged}: a record has a different number of fields", 2)
    latin = tmp / "latin1.csv"
    latin.write_bytes(
        ("\n".join(",".join(r) for r in [HEADER, *base]) + "\n42,M,MARKER-J\xe9\n").encode("latin-1")
    )
    add("latin1", ["--input", str(latin)], f"{latin}, line {len(base) + 2}: not valid utf-8", 2)
    csvdir = tmp / "csvdir"
    csvdir.mkdir()
    _write_csv(csvdir / "part1.csv", [*base, ["33", "M", "MARKER-ZQ7"]])
    add(
        "csvdir-as-parquet",
        ["--input", str(csvdir), "--format", "parquet"],
        f"{csvdir / 'part1.csv'} is not a Parquet file",
        2,
    )
    add("csvdir", ["--input", str(csvdir)], "", 0)
    wide = tmp / "wide.csv"
    wide.write_text(
        "\n".join(",".join(r) for r in [HEADER, *base]) + "\n" + ",".join(["MARKER-WIDE"] * 20500) + "\n",
        encoding="utf-8",
    )
    add("wide", ["--input", str(wide)], f"{wide}: a record has more fields than Spark's CSV reader allows", 2)
    corrupt = tmp / "corrupt.csv.gz"
    corrupt.write_bytes(gzip.compress((tmp / "cast.csv").read_bytes())[:100] + b"MARKER-GZ")
    add("gzip", ["--input", str(corrupt)], f"{corrupt} cannot be decompressed", 2)
    pq = tmp / "pq.csv"
    pq.write_bytes(b"PAR1MARKER-PQPAR1")
    add("parquet-as-csv", ["--input", str(pq)], f"{pq} is a Parquet file, not CSV", 2)
    (tmp / "empty").mkdir()
    add("empty-dir", ["--input", str(tmp / "empty")], "no data files in", 2)
    dup = _write_csv(tmp / "dup.csv", [[*r, "MARKER-DUP"] for r in base], header=[*HEADER, "SEX"])
    add("duplicate-name", ["--input", str(dup)], "the header of", 2)
    quoted = _write_csv(
        tmp / "quoted.csv",
        [*base, ["40", "M", 'MARKER "Q", with\nnewline']],
        header=["AGEP", " SEX", "CITY.name"],
    )
    add("quoted", ["--input", str(quoted)], "", 0)
    add("ragged-pad", ["--input", str(ragged), "--ragged-rows", "pad"], "", 0)
    # A holdout filter whose cast fails on a value (known only from the data): the release and the synthetic data
    # are written, TSTR is a failed metric whose reason names no value (docs/design.md section 5.6).
    holdout = _write_csv(tmp / "holdout.csv", [*base, ["41", "M", "MARKER-HOLD"]])
    add(
        "holdout-cast",
        ["--input", str(holdout), "--label", "SEX", "--holdout-filter", "cast(CITY as int) = 1"],
        "",
        0,
    )
    return cases


_MODEL = ("--quiet", "--synthesizer", "model")
"""The all-subsets release: these cases check the readers and the messages, not the mechanism."""


def _run_marker_cases(tmp_path: Path, which: set[str], command: str = "aggregate") -> None:
    cases = _cases(tmp_path, which)
    assert set(cases) == which
    runs = [
        (name, [command, *args, "--output", str(tmp_path / f"out-{name}"), "--epsilon", "4", *_MODEL])
        for name, (args, _, _) in cases.items()
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", _DRIVER, json.dumps(runs)],
        capture_output=True,
        text=True,
        timeout=1800,
        cwd=tmp_path,
        env=env,
    )
    assert "MARKER" not in proc.stdout, proc.stdout
    assert "MARKER" not in proc.stderr, proc.stderr
    blocks = proc.stderr.split("=== ")
    for name, (_, expected, rc) in cases.items():
        block = next((b for b in blocks[1:] if b.startswith(f"{name} rc=")), None)
        assert block is not None, proc.stderr[-3000:]
        assert block.startswith(f"{name} rc={rc}"), (name, proc.stderr[-3000:])
        if expected:
            previous = blocks[blocks.index(block) - 1].strip().splitlines()
            assert previous and previous[-1].startswith(f"spark-dpsynth: error: {expected}"), (
                name,
                previous[-3:],
            )
        for root, _, files in os.walk(tmp_path / f"out-{name}"):
            if "evaluation" in Path(root).parts:
                continue
            for f in files:
                data = (Path(root) / f).read_bytes()
                assert b"MARKER" not in data, (name, root, f)


def test_no_private_value_in_stderr_or_outputs(tmp_path: Path) -> None:
    """The default tier: a cast error in a row filter (Spark's and PySpark's error logs), a ragged record (Spark
    prints it whole) and a Latin-1 byte (read as a replacement character)."""
    _run_marker_cases(tmp_path, {"cast", "ragged", "latin1"})


@pytest.mark.slow
def test_no_private_value_in_any_case(tmp_path: Path) -> None:
    _run_marker_cases(
        tmp_path,
        {
            "csvdir-as-parquet",
            "csvdir",
            "wide",
            "gzip",
            "parquet-as-csv",
            "empty-dir",
            "duplicate-name",
            "ragged-pad",
        },
    )


@pytest.mark.slow
def test_a_holdout_filter_failing_on_a_value_is_a_failed_metric_not_a_lost_release(tmp_path: Path) -> None:
    _run_marker_cases(tmp_path, {"holdout-cast"}, command="pipeline")
    out = tmp_path / "out-holdout-cast"
    assert sorted(p.name for p in out.iterdir()) == ["evaluation", "release", "synthetic", "synthetic.csv"]
    metrics = json.loads((out / "evaluation" / "metrics.json").read_text())
    assert (
        set(metrics["failed_metrics"]) == {"tstr"}
        and "CAST_INVALID_INPUT" in metrics["failed_metrics"]["tstr"]
    )
    assert metrics["tvd"]["1"]["mean"] >= 0 and "MARKER" not in json.dumps(metrics["failed_metrics"])


@pytest.mark.slow
def test_no_private_value_in_a_pipeline_over_quoted_csv(tmp_path: Path) -> None:
    # a directory of CSV files is read as one file is: its case runs to the release (test_no_private_value_in_any_case)
    _run_marker_cases(tmp_path, {"quoted"}, command="pipeline")
    synthetic = pd.read_csv(tmp_path / "out-quoted" / "synthetic.csv", dtype=str, keep_default_na=False)
    assert len(synthetic.columns) == 3
    header = (tmp_path / "out-quoted" / "synthetic.csv").read_text(encoding="utf-8").splitlines()[0]
    assert header == "AGEP, SEX,CITY.name"
