"""Tests of spark_dpsynth.evaluation: exact metrics on hand-computed tables, validation, and one real-data run."""

from __future__ import annotations

import json
import logging
from functools import reduce
from pathlib import Path

import pandas as pd
import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from spark_dpsynth.errors import InvalidParameterError, SchemaError
from spark_dpsynth.evaluation import METRICS_FILE, evaluate, true_aggregates, write_metrics
from spark_dpsynth.release import AGGREGATES_SCHEMA, Release

# The cell counter runs numpy/pyarrow in Python workers: they must use this interpreter (the venv), not the
# first python3 on PATH. conftest.py does not set it, so do it before the session fixture starts Spark.
from tests.seed_examples import SEED_001_AGGREGATES, SEED_001_ROWS

ROOT = Path(__file__).resolve().parent.parent

SEED_ROWS, SEED_AGGREGATES = SEED_001_ROWS, SEED_001_AGGREGATES


def table(spark, rows, columns=("A", "B", "C")) -> DataFrame:
    """A prepared table of string columns (``columns`` are DDL names); one partition, so one task per pass."""
    schema = ", ".join(f"{c} string" for c in columns)
    return spark.createDataFrame(rows, schema=schema).coalesce(1)


def make_release(rows, columns, reporting_length: int) -> Release:
    pdf = pd.DataFrame(rows, columns=["k", "columns", "values", "count"])
    manifest = {
        "columns": list(columns),
        "reporting_length": reporting_length,
        "protected_number_of_records": 1,
    }
    return Release.from_pandas(pdf, manifest)


def sds_entry(true, tuples, common, suppressed_pct, fabricated_pct, mae):
    return {
        "true_tuples": true,
        "tuples": tuples,
        "common_tuples": common,
        "suppressed_tuples": true - common,
        "fabricated_tuples": tuples - common,
        "suppressed_pct": suppressed_pct,
        "fabricated_pct": fabricated_pct,
        "mean_absolute_error": mae,
    }


# --- true aggregates -------------------------------------------------------------------------------------------


def test_true_aggregates_of_seed_001_example(spark):
    actual = true_aggregates(table(spark, SEED_ROWS), 3)
    expected = spark.createDataFrame(SEED_AGGREGATES, schema=AGGREGATES_SCHEMA)
    assert actual.schema.simpleString() == expected.schema.simpleString()
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_true_aggregates_lengths_stop_at_reporting_length_and_at_the_number_of_columns(spark):
    df = table(spark, SEED_ROWS)

    def rows(reporting_length):
        # Tiny: at most the 17 seed tuples.
        return sorted(
            (r.k, r.columns, r.values, r["count"]) for r in true_aggregates(df, reporting_length).collect()
        )

    assert rows(2) == sorted(r for r in SEED_AGGREGATES if r[0] <= 2)
    assert rows(7) == sorted(SEED_AGGREGATES)


# --- TVD, rows, blank cells ------------------------------------------------------------------------------------

# Sensitive (4 rows) and synthetic (5 rows) over columns X, Y. By hand, with p = count / 4 and q = count / 5:
#   X:   a .50/.40, b .25/.20, empty .25/.20, c 0/.20           -> 0.5 (.10 + .05 + .05 + .20) = 0.20
#   Y:   x .50/.60, empty .25/.40, y .25/0                       -> 0.5 (.10 + .15 + .25)       = 0.25
#   X|Y: (a,x) .25/.40, (a,-) .25/0, (b,x) .25/0, (-,y) .25/0,
#        (b,-) 0/.20, (c,x) 0/.20, (-,-) 0/.20                   -> 0.5 (.15 + .75 + .60)       = 0.75
# The synthetic table has no (a, empty) cell and the sensitive one no (empty, empty) cell: both still count.
TVD_SENSITIVE = [("a", "x"), ("a", None), ("b", "x"), (None, "y")]
TVD_SYNTHETIC = [("a", "x"), ("a", "x"), ("b", None), ("c", "x"), (None, None)]


def test_tvd_rows_and_blank_cells_by_hand(spark, caplog):
    sensitive = table(spark, TVD_SENSITIVE, ("X", "Y"))
    synthetic = table(spark, TVD_SYNTHETIC, ("X", "Y"))
    messages: list[str] = []
    with caplog.at_level(logging.INFO, logger="spark_dpsynth.evaluation"):
        m = evaluate(sensitive, synthetic, max_marginal_length=3, progress=messages.append)

    # Stages are reported through the callback and logged with their durations.
    assert messages and "done in" in messages[-1]
    logged = [r.getMessage() for r in caplog.records if r.name == "spark_dpsynth.evaluation"]
    assert any("started" in line for line in logged) and any("done in" in line for line in logged)

    assert m["rows"] == {"sensitive": 4, "synthetic": 5}
    assert m["record_expansion"] == pytest.approx(0.25)
    assert m["blank_cell_share"] == {"sensitive": pytest.approx(2 / 8), "synthetic": pytest.approx(3 / 10)}
    assert m["max_marginal_length"] == 2  # capped at the number of columns
    assert m["tvd_by_subset"] == {
        "1": {"X": pytest.approx(0.20), "Y": pytest.approx(0.25)},
        "2": {"X|Y": pytest.approx(0.75)},
    }
    assert m["tvd"] == {
        "1": {"mean": pytest.approx(0.225), "max": pytest.approx(0.25), "count": 2},
        "2": {"mean": pytest.approx(0.75), "max": pytest.approx(0.75), "count": 1},
    }
    assert m["sds"] is None
    assert m["differentially_private"] is False
    assert m["columns"] == ["X", "Y"]
    json.dumps(m, allow_nan=False)  # JSON-serialisable as is


def test_tvd_of_single_cell_tables_is_exact(spark):
    # p = (1/3, 2/3), q = (1, 0): 0.5 (2/3 + 2/3) = 2/3, computed from integers and rounded once.
    # The column name needs quoting in Spark (a dot and a backtick).
    sensitive = table(spark, [("u",), ("v",), ("v",)], ("`x.y```",))
    synthetic = table(spark, [("u",)], ("`x.y```",))
    m = evaluate(sensitive, synthetic, max_marginal_length=1)
    assert m["tvd_by_subset"] == {"1": {"x.y`": 2 / 3}}
    assert m["record_expansion"] == pytest.approx(-2 / 3)


def test_identical_tables_have_zero_tvd_and_no_sds_error(spark):
    df = table(spark, SEED_ROWS)
    release = make_release(SEED_AGGREGATES, ("A", "B", "C"), 3)  # the true aggregates, exactly
    m = evaluate(df, df, release, max_marginal_length=3)

    assert m["record_expansion"] == 0.0
    assert m["blank_cell_share"]["sensitive"] == m["blank_cell_share"]["synthetic"] == pytest.approx(2 / 15)
    assert {L: (s["mean"], s["max"], s["count"]) for L, s in m["tvd"].items()} == {
        "1": (0.0, 0.0, 3),
        "2": (0.0, 0.0, 3),
        "3": (0.0, 0.0, 1),
    }
    assert all(v == 0.0 for per in m["tvd_by_subset"].values() for v in per.values())
    expected = {"1": sds_entry(6, 6, 6, 0.0, 0.0, 0.0), "2": sds_entry(8, 8, 8, 0.0, 0.0, 0.0)}
    expected["3"] = sds_entry(3, 3, 3, 0.0, 0.0, 0.0)
    assert m["sds"] == {
        "reporting_length": 3,
        "release": {"by_length": expected},
        "synthetic": {"by_length": expected},
    }


# --- SDS evaluator ---------------------------------------------------------------------------------------------


def test_release_with_suppressed_and_fabricated_tuples_by_hand(spark):
    # The seed table, R = 2. k = 1: A=a1 +1, C=c1 -2, A=a3 fabricated -> 0 % suppressed, 1/6 fabricated,
    # MAE 3/6. k = 2: (a1,b1) suppressed, (a1,c2) fabricated, errors 3 + 2 + 1 + 1 over the 7 common tuples.
    df = table(spark, SEED_ROWS)
    release = make_release(
        [
            (1, ["A"], ["a1"], 4),
            (1, ["A"], ["a2"], 2),
            (1, ["A"], ["a3"], 1),
            (1, ["B"], ["b1"], 1),
            (1, ["B"], ["b2"], 3),
            (1, ["C"], ["c1"], 1),
            (1, ["C"], ["c2"], 1),
            (2, ["A", "B"], ["a1", "b2"], 5),
            (2, ["A", "B"], ["a2", "b2"], 1),
            (2, ["A", "C"], ["a1", "c1"], 4),
            (2, ["A", "C"], ["a2", "c1"], 2),
            (2, ["A", "C"], ["a2", "c2"], 1),
            (2, ["A", "C"], ["a1", "c2"], 1),
            (2, ["B", "C"], ["b1", "c1"], 1),
            (2, ["B", "C"], ["b2", "c1"], 1),
        ],
        ("A", "B", "C"),
        2,
    )
    m = evaluate(df, df, release, max_marginal_length=1)

    assert m["sds"]["reporting_length"] == 2
    assert m["sds"]["release"]["by_length"] == {
        "1": sds_entry(6, 7, 6, 0.0, pytest.approx(100 / 6), pytest.approx(0.5)),
        "2": sds_entry(8, 8, 7, pytest.approx(12.5), pytest.approx(12.5), pytest.approx(1.0)),
    }
    assert m["sds"]["synthetic"]["by_length"] == {
        "1": sds_entry(6, 6, 6, 0.0, 0.0, 0.0),
        "2": sds_entry(8, 8, 8, 0.0, 0.0, 0.0),
    }
    assert list(m["tvd"]) == ["1"]  # the TVD lengths do not follow R


def test_synthetic_aggregates_against_true_aggregates_by_hand(spark):
    # S: X=a 2, X=b 1, Y=x 2 | (a,x) 1, (b,x) 1.   Synthetic: X=a 2, X=c 1, Y=x 3 | (a,x) 2, (c,x) 1.
    # k=1: X=b suppressed, X=c fabricated, errors 0 (X=a) and 1 (Y=x). k=2: (b,x) suppressed, (c,x) fabricated,
    # error 1 on (a,x). R = 3 > d = 2: length 3 has no tuples, so its percentages are undefined (None).
    sensitive = table(spark, [("a", "x"), ("a", None), ("b", "x")], ("X", "Y"))
    synthetic = table(spark, [("a", "x"), ("c", "x"), ("a", "x")], ("X", "Y"))
    release = make_release(  # the true aggregates of ``sensitive``, exactly
        [
            (1, ["X"], ["a"], 2),
            (1, ["X"], ["b"], 1),
            (1, ["Y"], ["x"], 2),
            (2, ["X", "Y"], ["a", "x"], 1),
            (2, ["X", "Y"], ["b", "x"], 1),
        ],
        ("X", "Y"),
        3,
    )
    m = evaluate(sensitive, synthetic, release)

    third = pytest.approx(100 / 3)
    none = {
        "true_tuples": 0,
        "tuples": 0,
        "common_tuples": 0,
        "suppressed_tuples": 0,
        "fabricated_tuples": 0,
        "suppressed_pct": None,
        "fabricated_pct": None,
        "mean_absolute_error": None,
    }
    assert m["sds"]["synthetic"]["by_length"] == {
        "1": sds_entry(3, 3, 2, third, third, pytest.approx(0.5)),
        "2": sds_entry(2, 2, 1, pytest.approx(50.0), pytest.approx(50.0), pytest.approx(1.0)),
        "3": none,
    }
    assert m["sds"]["release"]["by_length"] == {
        "1": sds_entry(3, 3, 3, 0.0, 0.0, 0.0),
        "2": sds_entry(2, 2, 2, 0.0, 0.0, 0.0),
        "3": none,
    }
    json.dumps(m, allow_nan=False)


def test_metrics_do_not_depend_on_partitions_or_arrow_batches(spark):
    sensitive = table(spark, TVD_SENSITIVE * 3, ("X", "Y"))
    synthetic = table(spark, TVD_SYNTHETIC * 2, ("X", "Y"))
    release = make_release(
        [(1, ["X"], ["a"], 5), (1, ["Y"], ["x"], 2), (1, ["Y"], ["z"], 1), (2, ["X", "Y"], ["a", "z"], 1)],
        ("X", "Y"),
        2,
    )
    reference = evaluate(sensitive.coalesce(1), synthetic.coalesce(1), release)
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    previous = spark.conf.get(key)
    spark.conf.set(key, "2")
    try:
        split = evaluate(sensitive.repartition(3), synthetic.repartition(4), release)
    finally:
        spark.conf.set(key, previous)
    assert split == reference


# --- validation ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("synthetic_ddl", "match"),
    [
        ("A string, B string", r"missing \['C'\]"),
        ("A string, B string, C string, D string", r"unexpected \['D'\]"),
        ("A string, C string, B string", "same order"),
        ("A string, B string, C int", r"string columns.*C \(int\)"),
    ],
)
def test_synthetic_columns_must_match(spark, synthetic_ddl, match):
    sensitive = table(spark, SEED_ROWS)
    synthetic = spark.createDataFrame([], schema=synthetic_ddl)
    with pytest.raises(SchemaError, match=match):
        evaluate(sensitive, synthetic)


def test_tables_must_be_prepared_string_tables(spark):
    repeated = spark.createDataFrame([("a", "b")], schema="A string, B string").toDF("A", "A")
    with pytest.raises(SchemaError, match="repeats"):
        evaluate(repeated, repeated)
    with pytest.raises(SchemaError, match="string columns"):
        true_aggregates(spark.createDataFrame([(1,)], schema="A int"), 2)


def test_release_columns_must_match(spark):
    df = table(spark, SEED_ROWS)
    release = make_release([(1, ["A"], ["a1"], 3)], ("A", "B"), 1)
    with pytest.raises(SchemaError, match="the release"):
        evaluate(df, df, release)


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (0, "max_marginal_length must be >= 1, got 0"),
        (-2, "max_marginal_length must be >= 1, got -2"),
        (2.0, "max_marginal_length must be an integer, got 2.0"),
        (True, "max_marginal_length must be an integer, got True"),
    ],
)
def test_max_marginal_length_must_be_a_positive_integer(spark, value, match):
    df = table(spark, SEED_ROWS)
    with pytest.raises(InvalidParameterError, match=match):
        evaluate(df, df, max_marginal_length=value)


@pytest.mark.parametrize("value", [0, -1, 1.5, None])
def test_reporting_length_must_be_a_positive_integer(spark, value):
    with pytest.raises(InvalidParameterError, match="reporting_length"):
        true_aggregates(table(spark, SEED_ROWS), value)


def test_progress_must_be_callable_and_tables_non_empty(spark):
    df = table(spark, SEED_ROWS)
    with pytest.raises(InvalidParameterError, match="progress must be a callable"):
        evaluate(df, df, progress="yes")
    empty = spark.createDataFrame([], schema="A string, B string, C string")
    with pytest.raises(InvalidParameterError, match="synthetic table has no rows"):
        evaluate(df, empty)


# --- write_metrics ---------------------------------------------------------------------------------------------


def test_write_metrics_round_trips_and_creates_the_directory(tmp_path):
    metrics = {"rows": {"sensitive": 4, "synthetic": 5}, "tvd": {"1": {"mean": 0.2, "max": 0.25, "count": 2}}}
    directory = tmp_path / "out" / "evaluation"
    path = write_metrics(metrics, str(directory))
    assert path == str(directory / METRICS_FILE)
    assert json.loads(Path(path).read_text(encoding="utf-8")) == metrics
    assert sorted(p.name for p in directory.iterdir()) == [METRICS_FILE]  # no temporary file left behind


def test_write_metrics_refuses_values_json_cannot_hold(tmp_path):
    with pytest.raises(InvalidParameterError, match="JSON"):
        write_metrics({"tvd": float("nan")}, str(tmp_path))
    with pytest.raises(InvalidParameterError, match="must be a dict"):
        write_metrics([1, 2], str(tmp_path))


# --- real data -------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_adult_against_its_column_sorted_copy(spark):
    """UCI Adult (embedded copy) against a copy whose columns were sorted independently.

    Sorting each column on its own keeps every 1-way marginal exactly and breaks the joint distribution, so
    1-way TVD and the SDS errors of length 1 must be 0 while 2-way TVD is not.
    """
    path = ROOT / "data" / "adult.csv.gz"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    columns = ["workclass", "education", "marital_status", "occupation", "sex", "income"]
    sensitive = spark.read.csv(str(path), header=True).select(*columns)
    parts = [
        sensitive.select(c, F.row_number().over(Window.orderBy(F.col(c).asc_nulls_first())).alias("_row"))
        for c in columns
    ]
    shuffled = reduce(lambda a, b: a.join(b, "_row"), parts).select(*columns)
    release = make_release([], columns, 1)  # an empty release: everything suppressed
    m = evaluate(sensitive, shuffled, release, max_marginal_length=2)

    assert m["rows"] == {"sensitive": 48842, "synthetic": 48842}
    assert m["record_expansion"] == 0.0
    assert m["tvd"]["1"] == {"mean": 0.0, "max": 0.0, "count": 6}
    assert m["tvd"]["2"]["count"] == 15 and m["tvd"]["2"]["max"] > 0.1
    one = m["sds"]["synthetic"]["by_length"]["1"]
    assert (one["suppressed_pct"], one["fabricated_pct"], one["mean_absolute_error"]) == (0.0, 0.0, 0.0)
    released = m["sds"]["release"]["by_length"]["1"]
    assert (released["tuples"], released["suppressed_pct"], released["mean_absolute_error"]) == (
        0,
        100.0,
        None,
    )
