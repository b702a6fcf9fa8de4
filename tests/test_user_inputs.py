"""Inputs as users hold them: a pandas DataFrame in a notebook, nested Parquet columns, and a quiet terminal
(no JVM start-up banner without --debug)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import types as T

import spark_dpsynth as dps
from spark_dpsynth.data.io import as_spark_frame, check_frame
from spark_dpsynth.data.jvm_stderr import LAUNCHER_BANNER, copy_stderr
from spark_dpsynth.data.prepare import check_flat_columns
from spark_dpsynth.errors import SchemaError
from spark_dpsynth.params import DataConfig
from tests.conftest import ROOT
from tests.test_cli import _run_cli

ADULT = str(ROOT / "data" / "adult.csv.gz")
COLUMNS = ["age", "workclass", "education", "sex", "income"]

BANNER = (
    "WARNING: Using incubator modules",
    "Setting default log level",
    "To adjust logging level use sc.setLogLevel",
    "Using Spark's default log4j profile",
)
"""Lines of the JVM's start-up banner: none may reach stderr without --debug."""


@pytest.fixture(scope="module")
def adult_pandas() -> pd.DataFrame:
    return pd.read_csv(ADULT, nrows=800, usecols=COLUMNS)


def _no_release(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
    pytest.fail("the data must not be read (no DP draw)")


# --------------------------------------------------------------------------------------------- pandas


def test_fit_sample_and_evaluate_a_pandas_frame(spark, adult_pandas) -> None:  # noqa: ANN001
    release = dps.fit(adult_pandas, epsilon=4, seed=7, empty_values=["?"])
    # converted in the active session
    assert release.spark.sparkContext.applicationId == spark.sparkContext.applicationId
    synthetic = release.sample(target_number_of_records=300)
    assert synthetic.columns == COLUMNS
    assert dict(synthetic.dtypes)["age"] == "bigint"  # pandas int64 through Arrow
    metrics = dps.evaluate(adult_pandas, synthetic, release)
    assert metrics["tvd"]
    # a synthetic table brought to pandas is accepted too
    again = dps.evaluate(adult_pandas, synthetic.toPandas(), release)
    assert again["tvd"].keys() == metrics["tvd"].keys()


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ([[1, 2]], r"df must be a Spark DataFrame or a pandas DataFrame, got builtins\.list: pass a Spark"),
        ({"a": [1]}, r"got builtins\.dict: pass a Spark DataFrame .* or a pandas DataFrame"),
        (np.zeros((2, 2)), r"got numpy\.ndarray: pass a Spark DataFrame"),
        (pd.Series([1, 2]), r"got pandas\.core\.series\.Series: pass a pandas DataFrame \(df\.to_frame\(\)"),
        (None, r"got builtins\.NoneType"),
    ],
)
def test_anything_else_is_a_type_error_that_says_what_to_pass(value, match, monkeypatch) -> None:  # noqa: ANN001
    from spark_dpsynth import pipeline

    monkeypatch.setattr(pipeline, "fit_release", _no_release)
    with pytest.raises(TypeError, match=match):
        dps.fit(value, epsilon=4)
    with pytest.raises(TypeError, match=match):
        check_frame(value)


def test_evaluate_refuses_other_types_before_reading(spark, adult_pandas) -> None:  # noqa: ANN001
    release = dps.DPRelease(release=None, config=dps.job_config(), spark=spark)  # type: ignore[arg-type]
    with pytest.raises(
        TypeError, match=r"synthetic must be a Spark DataFrame or a pandas DataFrame, got builtins"
    ):
        dps.evaluate(adult_pandas, [1, 2], release)


def test_pandas_columns_arrow_cannot_convert_are_named_without_a_value(spark) -> None:  # noqa: ANN001
    frame = pd.DataFrame({"ok": [1, 2, 3], "mixed": [1, "secret-value", None]})
    with pytest.raises(SchemaError, match=r"column\(s\) \['mixed'\] cannot be converted to Arrow") as info:
        as_spark_frame(frame, spark)
    assert "secret-value" not in str(info.value)
    assert info.value.__cause__ is None and info.value.__suppress_context__


@pytest.mark.parametrize(
    ("columns", "match"),
    [
        (["a", "A"], r"'A' \(column 2\) has the same name as column 1"),
        (["a", ""], r"column 2 has no name"),
        (["a", "b`c"], r"back quote"),
    ],
)
def test_pandas_column_names_are_checked_as_a_header(spark, columns, match) -> None:  # noqa: ANN001
    frame = pd.DataFrame([[1, 2]], columns=columns)
    with pytest.raises(SchemaError, match=match):
        as_spark_frame(frame, spark)


def test_pandas_types_through_arrow_and_a_void_column_refused_before_any_draw(spark, monkeypatch) -> None:  # noqa: ANN001
    frame = pd.DataFrame(
        {
            "n": pd.array([1, None, 3], dtype="Int64"),
            "c": pd.Categorical(["x", "y", None]),
            "t": pd.to_datetime(["2020-01-01", None, "2021-06-01"]),
            "empty": [None, None, None],
        },
        index=[10, 20, 30],  # not a column
    )
    df = as_spark_frame(frame, spark)
    assert df.dtypes == [("n", "bigint"), ("c", "string"), ("t", "timestamp"), ("empty", "void")]
    from spark_dpsynth import pipeline

    monkeypatch.setattr(pipeline, "fit_release", _no_release)
    with pytest.raises(SchemaError, match=r"column\(s\) 'empty' have type void .* --columns"):
        dps.fit(frame, epsilon=4)


def test_a_pandas_frame_without_a_session_gets_a_quiet_local_one(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import pandas as pd
        from pyspark.sql import SparkSession
        from spark_dpsynth.data.io import as_spark_frame

        assert SparkSession.getActiveSession() is None
        df = as_spark_frame(pd.DataFrame({"a": [1, 2], "b": ["x", None]}))
        print(df.dtypes, df.count(), df.sparkSession.conf.get("spark.master"))
        """
    )
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_DPSYNTH_MASTER": "local[1]"}
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=180, cwd=ROOT, env=env
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[('a', 'bigint'), ('b', 'string')] 2 local[1]"
    # the session started in-process prints no JVM banner either (data.jvm_stderr, data.session)
    banner = ("WARNING: Using incubator modules", "Setting default log level", "To adjust logging level")
    assert not [line for line in result.stderr.splitlines() if line.startswith(banner)], result.stderr


# --------------------------------------------------------------------------------------------- nested Parquet


@pytest.fixture(scope="module")
def nested_parquet(spark, tmp_path_factory) -> str:  # noqa: ANN001
    """A common lake schema: two integer columns beside a struct, an array and a map."""
    path = str(tmp_path_factory.mktemp("nested") / "nested.parquet")
    rows = [(i % 50, i % 7, (i % 3, f"k{i % 4}"), [f"t{i % 5}", "x"], {"a": i % 2}) for i in range(400)]
    schema = "a int, b int, s struct<p:int,q:string>, tags array<string>, attrs map<string,int>"
    spark.createDataFrame(rows, schema).write.parquet(path)
    return path


NESTED_MESSAGE = (
    "nested column(s) 's' (struct), 'tags' (array), 'attrs' (map): a release holds flat columns only; choose "
    "the flat columns with --columns a,b ([data] columns), or flatten the nested ones in a view or a DataFrame "
    "first"
)


def test_check_flat_columns_from_the_schema_alone() -> None:
    schema = T.StructType(
        [
            T.StructField("a", T.IntegerType()),
            T.StructField("s", T.StructType([T.StructField("p", T.IntegerType())])),
            T.StructField("tags", T.ArrayType(T.StringType())),
            T.StructField("attrs", T.MapType(T.StringType(), T.IntegerType())),
            T.StructField("void", T.NullType()),
        ]
    )
    with pytest.raises(
        SchemaError, match=r"nested column\(s\) 's' \(struct\), 'tags' \(array\), 'attrs' \(map\)"
    ):
        check_flat_columns(schema, DataConfig(columns=("a", "s", "tags", "attrs", "void")))
    with pytest.raises(SchemaError, match=r"column\(s\) 'void' have type void"):
        check_flat_columns(schema, DataConfig(columns=("a", "void")))
    check_flat_columns(schema, DataConfig(columns=("a",)))  # the flat columns chosen: accepted


def test_fit_refuses_nested_columns_before_any_draw_and_synthesizes_the_flat_ones(
    spark, nested_parquet, monkeypatch
) -> None:  # noqa: ANN001
    from spark_dpsynth import pipeline

    df = spark.read.parquet(nested_parquet)
    with monkeypatch.context() as patched:
        patched.setattr(pipeline, "fit_release", _no_release)
        with pytest.raises(SchemaError, match=r"^" + re.escape(NESTED_MESSAGE)):
            dps.fit(df, epsilon=4)
        with pytest.raises(SchemaError, match=r"nested column\(s\) 'tags' \(array\)"):
            dps.fit(df, epsilon=4, columns=["a", "tags"])
    # the way out the message names: the flat columns, released and synthesized
    release = dps.fit(df, epsilon=4, seed=3, columns=["a", "b"], reporting_length=2)
    synthetic = release.sample(target_number_of_records=200)
    assert synthetic.dtypes == [("a", "int"), ("b", "int")]
    assert synthetic.count() == 200


def test_cli_refuses_nested_parquet_before_spending_and_prints_no_banner(nested_parquet, tmp_path) -> None:  # noqa: ANN001
    out = tmp_path / "out"
    result = _run_cli("aggregate", "--input", nested_parquet, "--format", "parquet", "--output", str(out))
    assert result.returncode == 2, result.stderr
    # one line, ours: no JVM banner before it
    assert result.stderr.splitlines() == [
        "spark-dpsynth: error: "
        + NESTED_MESSAGE
        + " (a struct's fields as columns, s.a AS s_a; an array of strings joined, concat_ws('|', tags) AS tags, "
        "read with --multi-value 'tags:|')"
    ]
    assert not any(line.startswith(BANNER) for line in result.stderr.splitlines())
    written = [p for p in out.rglob("*") if p.is_file()] if out.exists() else []
    assert written == [], "no release, no file"
    # the same refusal in a pipeline, before its release
    result = _run_cli("pipeline", "--input", nested_parquet, "--output", str(out), "--epsilon", "4")
    assert result.returncode == 2
    assert result.stderr.startswith("spark-dpsynth: error: nested column(s) 's' (struct)")
    written = [p for p in out.rglob("*") if p.is_file()] if out.exists() else []
    assert written == [], "no release, no file"


def test_debug_keeps_the_jvm_banner(nested_parquet, tmp_path) -> None:  # noqa: ANN001
    result = _run_cli("aggregate", "--input", nested_parquet, "--output", str(tmp_path / "out"), "--debug")
    assert result.returncode == 2
    assert "WARNING: Using incubator modules" in result.stderr
    assert "Setting default log level" in result.stderr


# --------------------------------------------------------------------------------------------- quiet terminal


def test_the_jvm_stderr_copy_leaves_out_the_launcher_banner(monkeypatch: pytest.MonkeyPatch) -> None:
    # the copy drops everything once a stop signal muted the JVM: an earlier test of this process may have
    monkeypatch.setattr("spark_dpsynth.data.jvm_stderr._MUTED", threading.Event())

    def copied(chunks: list[bytes], banner: tuple[bytes, ...]) -> bytes:
        source_r, source_w = os.pipe()
        target_r, target_w = os.pipe()
        for chunk in chunks:
            os.write(source_w, chunk)
        os.close(source_w)
        copy_stderr(source_r, None, target_w, banner)
        os.close(target_w)
        with os.fdopen(target_r, "rb") as f:
            return f.read()

    line = b"WARNING: Using incubator modules: jdk.incubator.vector\n"
    assert copied([line, b"a Spark error\n"], LAUNCHER_BANNER) == b"a Spark error\n"
    assert copied([line[:9], line[9:] + b"x\n", b"y"], LAUNCHER_BANNER) == b"x\ny"  # split across reads
    assert copied([b"first\n", line], LAUNCHER_BANNER) == b"first\n" + line  # only at the start
    assert copied([line, b"x\n"], ()) == line + b"x\n"  # --debug: everything
    assert copied([b"WARN"], LAUNCHER_BANNER) == b"WARN"  # a partial line at the end is kept
