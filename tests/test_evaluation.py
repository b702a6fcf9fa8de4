"""Tests of spark_dpsynth.evaluation: exact metrics on hand-computed tables, validation, and one real-data run."""

from __future__ import annotations

import json
import logging
from functools import reduce
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from spark_dpsynth.config import load_config
from spark_dpsynth.errors import ConfigError, InvalidParameterError, SchemaError
from spark_dpsynth.evaluation.catalog import METRICS
from spark_dpsynth.evaluation.metrics import (
    METRICS_FILE,
    TSTR_MAX_ROWS,
    evaluate,
    true_aggregates,
    write_metrics,
)
from spark_dpsynth.evaluation.report import render_report
from spark_dpsynth.evaluation.tstr import train_synthetic_test_real
from spark_dpsynth.release.core import AGGREGATES_SCHEMA, Release

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


LEGACY_SDS_KEYS = (
    "true_tuples",
    "tuples",
    "common_tuples",
    "suppressed_tuples",
    "fabricated_tuples",
    "suppressed_pct",
    "fabricated_pct",
    "mean_absolute_error",
)


def legacy(by_length):
    """The metrics_version 1 keys of each length of a ``by_length`` dict (the keys these tests were written for)."""
    return {k: {key: entry[key] for key in LEGACY_SDS_KEYS} for k, entry in by_length.items()}


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
    with caplog.at_level(logging.INFO, logger="spark_dpsynth.evaluation.metrics"):
        m = evaluate(sensitive, synthetic, max_marginal_length=3, progress=messages.append)

    # Stages are reported through the callback and logged with their durations.
    assert messages and "done in" in messages[-1]
    logged = [r.getMessage() for r in caplog.records if r.name == "spark_dpsynth.evaluation.metrics"]
    assert any("started" in line for line in logged) and any("done in" in line for line in logged)

    # the dict is the table of metrics, entry by entry, in order
    assert list(m) == [key for spec in METRICS for key in spec.outputs]
    assert m["rows"] == {"sensitive": 4, "synthetic": 5}
    assert m["record_expansion"] == pytest.approx(0.25)
    assert m["blank_cell_share"] == {"sensitive": pytest.approx(2 / 8), "synthetic": pytest.approx(3 / 10)}
    assert m["max_marginal_length"] == 2  # capped at the number of columns
    assert m["tvd_by_subset"] == {
        "1": {"X": pytest.approx(0.20), "Y": pytest.approx(0.25)},
        "2": {"X|Y": pytest.approx(0.75)},
    }
    headline = {k: {f: m["tvd"][k][f] for f in ("mean", "max", "count", "worst")} for k in m["tvd"]}
    assert headline == {
        "1": {"mean": pytest.approx(0.225), "max": pytest.approx(0.25), "count": 2, "worst": "Y"},
        "2": {"mean": pytest.approx(0.75), "max": pytest.approx(0.75), "count": 1, "worst": "X|Y"},
    }
    # the sampling floor beside each mean (no second sensitive sample: the tables are not sampled)
    assert all(m["tvd"][k]["floor"] > 0 and m["tvd"][k]["floor_measured"] is None for k in m["tvd"])
    assert m["k_marginal_score"] is None  # fewer than 3 columns
    assert m["nist_k_marginal_score"] is None and m["nist_k_marginal"] is None  # no PUMA, no group named
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
    assert m["sds"]["reporting_length"] == 3
    for side in ("release", "synthetic"):
        assert legacy(m["sds"][side]["by_length"]) == expected
        assert {k: e["preservation"] for k, e in m["sds"][side]["by_length"].items()} == {
            "1": 1.0,
            "2": 1.0,
            "3": 1.0,
        }
        assert m["sds"][side]["summary"]["mean_proportional_error"] == 0.0
    assert m["k_marginal_score"] == 1000.0


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
    assert legacy(m["sds"]["release"]["by_length"]) == {
        "1": sds_entry(6, 7, 6, 0.0, pytest.approx(100 / 6), pytest.approx(0.5)),
        "2": sds_entry(8, 8, 7, pytest.approx(12.5), pytest.approx(12.5), pytest.approx(1.0)),
    }
    assert legacy(m["sds"]["synthetic"]["by_length"]) == {
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
    assert legacy(m["sds"]["synthetic"]["by_length"]) == {
        "1": sds_entry(3, 3, 2, third, third, pytest.approx(0.5)),
        "2": sds_entry(2, 2, 1, pytest.approx(50.0), pytest.approx(50.0), pytest.approx(1.0)),
        "3": none,
    }
    assert legacy(m["sds"]["release"]["by_length"]) == {
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


# --- SDS evaluator: preservation, proportional error, leakage, buckets (exact, by hand) ---------------------------

# Seed 001's worked example (true counts: A=a1 3, A=a2 2, B=b1 1, B=b2 3, C=c1 3, C=c2 1; (a1,b1) 1, (a1,b2) 2,
# (a1,c1) 2, (a2,b2) 1, (a2,c1) 1, (a2,c2) 1, (b1,c1) 1, (b2,c1) 2) against a release with noise (R = 2).
SEED_RELEASE = [
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
]


def test_sds_preservation_leakage_and_buckets_on_seed_001_example(spark):
    # Resolution r = 2. Rare true tuples (count < 2): k=1 b1, c2; k=2 (a1,b1), (a2,b2), (a2,c1), (a2,c2), (b1,c1).
    # Release: the rare ones present are b1, c2 | (a2,b2), (a2,c1), (a2,c2), (b1,c1): leakage 2 | 4.
    # Evaluated tuples P = true count >= 2, or released. k=1: a1 a2 a3 b1 b2 c1 c2 (7; a3 fabricated).
    #   preservation min(Y/S, 1): 1, 1, 0, 1, 1, 1/3, 1 -> 16/3; proportional error: 1/3, 0, 1, 0, 0, 2/3, 0 -> 2;
    #   |Y - S|: 1, 0, 1, 0, 0, 2, 0 -> 4; S: 3+2+0+1+3+3+1 = 13; Y: 4+2+1+1+3+1+1 = 13.
    # k=2: all 8 released (a1,b1 is rare and suppressed: not evaluated). Preservation 1, 1, 1, 1, 1, 0 (a1,c2),
    #   1, 1/2 -> 13/2; proportional error 3/2, 0, 1, 1, 0, 1, 0, 1/2 -> 5; |Y - S|: 3+0+2+1+0+1+0+1 = 8;
    #   S: 2+1+2+1+1+0+1+2 = 10; Y: 5+1+4+2+1+1+1+1 = 16.
    # Every true count is <= 10: one bucket "10" with the 15 tuples.
    df = table(spark, SEED_ROWS)
    release = make_release(SEED_RELEASE, ("A", "B", "C"), 2)
    m = evaluate(df, df, release, max_marginal_length=1, resolution=2)
    assert m["resolution"] == 2

    r = m["sds"]["release"]
    one, two = r["by_length"]["1"], r["by_length"]["2"]
    assert (one["rare_true_tuples"], one["leakage_count"], one["leakage_pct"]) == (
        2,
        2,
        pytest.approx(100 / 3),
    )
    assert (two["rare_true_tuples"], two["leakage_count"], two["leakage_pct"]) == (5, 4, 50.0)
    assert (one["evaluated_tuples"], two["evaluated_tuples"]) == (7, 8)
    assert one["preservation"] == pytest.approx(16 / 21, rel=1e-12)
    assert one["mean_proportional_error"] == pytest.approx(2 / 7, rel=1e-12)
    assert one["mean_count"] == pytest.approx(13 / 7, rel=1e-12)
    assert two["preservation"] == pytest.approx(13 / 16, rel=1e-12)
    assert two["mean_proportional_error"] == pytest.approx(5 / 8, rel=1e-12)
    assert two["mean_count"] == 2.0
    assert r["by_count_bucket"] == {
        "10": {
            "lower": 0,
            "tuples": 15,
            "preservation": pytest.approx(71 / 90, rel=1e-12),
            "mean_proportional_error": pytest.approx(7 / 15, rel=1e-12),
            "mean_absolute_error": pytest.approx(12 / 15, rel=1e-12),
            "mean_true_count": pytest.approx(23 / 15, rel=1e-12),
            "mean_count": pytest.approx(29 / 15, rel=1e-12),
        }
    }
    # All lengths: |S| = 14, |S and Y| = 13 (a1,b1 suppressed), |Y| = 15; errors over S and Y: 3 + 7 = 10.
    assert r["summary"] == {
        "suppressed_pct": pytest.approx(100 / 14),
        "fabricated_pct": pytest.approx(200 / 14),
        "mean_absolute_error": pytest.approx(10 / 13),
        "leakage_count": 6,
        "preservation": pytest.approx(71 / 90, rel=1e-12),
        "mean_proportional_error": pytest.approx(7 / 15, rel=1e-12),
    }

    # The synthetic table is the sensitive one: everything preserved, and every rare tuple "leaks".
    y = m["sds"]["synthetic"]
    assert {
        k: (e["leakage_count"], e["evaluated_tuples"], e["preservation"]) for k, e in y["by_length"].items()
    } == {
        "1": (2, 6, 1.0),
        "2": (5, 8, 1.0),
    }
    assert y["summary"]["leakage_count"] == 7 and y["summary"]["mean_proportional_error"] == 0.0


def test_sds_count_buckets_by_true_count_by_hand(spark):
    # One column, R = 1, resolution 10 (SDS's default). True: a 25, b 11, c 1 (rare).
    # Release: a 20, b 11, d 2 (fabricated). Synthetic: a 30, c 1, d 5.
    # Buckets of the TRUE count: a -> (20, 40], b -> (10, 20], c and d (true 0) -> (0, 10].
    # Release P = {a, b, d}: a pres .8, err .2, |.| 5; b 1, 0, 0; d 0, 1, 2. c: rare and not released: no leak.
    # Synthetic P = {a, b, c, d}: a pres 1, err .2, |.| 5; b (suppressed) 0, 1, 11; c 1, 0, 0 (leaks); d 0, 1, 5.
    sensitive = table(spark, [("a",)] * 25 + [("b",)] * 11 + [("c",)], ("X",))
    synthetic = table(spark, [("a",)] * 30 + [("c",)] + [("d",)] * 5, ("X",))
    release = make_release([(1, ["X"], ["a"], 20), (1, ["X"], ["b"], 11), (1, ["X"], ["d"], 2)], ("X",), 1)
    m = evaluate(sensitive, synthetic, release)

    def bucket(lower, tuples, pres, perr, mae, true, count):
        keys = ("lower", "tuples", "preservation", "mean_proportional_error", "mean_absolute_error")
        values = (lower, tuples, pres, perr, mae)
        out = {key: pytest.approx(value) for key, value in zip(keys, values, strict=True)}
        out.update(mean_true_count=pytest.approx(true), mean_count=pytest.approx(count))
        return out

    assert m["sds"]["release"]["by_count_bucket"] == {
        "10": bucket(0, 1, 0.0, 1.0, 2.0, 0.0, 2.0),
        "20": bucket(10, 1, 1.0, 0.0, 0.0, 11.0, 11.0),
        "40": bucket(20, 1, 0.8, 0.2, 5.0, 25.0, 20.0),
    }
    assert m["sds"]["synthetic"]["by_count_bucket"] == {
        "10": bucket(0, 2, 0.5, 0.5, 2.5, 0.5, 3.0),
        "20": bucket(10, 1, 0.0, 1.0, 11.0, 11.0, 0.0),
        "40": bucket(20, 1, 1.0, 0.2, 5.0, 25.0, 30.0),
    }
    release_summary, synthetic_summary = m["sds"]["release"]["summary"], m["sds"]["synthetic"]["summary"]
    assert (release_summary["preservation"], release_summary["leakage_count"]) == (pytest.approx(0.6), 0)
    assert release_summary["mean_proportional_error"] == pytest.approx((1.0 + 0.0 + 0.2) / 3)
    assert (synthetic_summary["preservation"], synthetic_summary["leakage_count"]) == (0.5, 1)
    assert synthetic_summary["mean_proportional_error"] == pytest.approx((0.5 + 1.0 + 0.2) / 3)
    # The 1-way distribution of the (only, so worst) column: values by sensitive + synthetic count.
    assert m["one_way_worst"] == [
        {
            "column": "X",
            "tvd": pytest.approx(m["tvd"]["1"]["max"]),
            "values": ["a", "b", "d", "c"],
            "sensitive": pytest.approx([25 / 37, 11 / 37, 0.0, 1 / 37]),
            "synthetic": pytest.approx([30 / 36, 0.0, 5 / 36, 1 / 36]),
            "other": {"sensitive": 0.0, "synthetic": 0.0},
        }
    ]


def test_count_bucket_bounds_are_exact(spark):
    from spark_dpsynth.evaluation.cells import _bucket_index

    counts = [1, 9, 10, 11, 20, 21, 40, 41, 80, 81, 10 * 2**30, 10 * 2**30 + 1, 10 * 2**40 - 1]
    expected = [0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 30, 31, 40]
    df = spark.createDataFrame([(c,) for c in counts], "n bigint")
    got = [r.j for r in df.select("n", _bucket_index(F.col("n")).alias("j")).orderBy("n").collect()]
    assert got == expected


def test_k_marginal_score_by_hand(spark):
    # 3-way cells: (a,x,1) .5 / 1, (b,y,2) .5 / 0 -> TVD .5 -> score 1000 (1 - .5) = 500.
    sensitive = table(spark, [("a", "x", "1"), ("b", "y", "2")], ("X", "Y", "Z"))
    synthetic = table(spark, [("a", "x", "1"), ("a", "x", "1")], ("X", "Y", "Z"))
    m = evaluate(sensitive, synthetic, max_marginal_length=3)
    # the floor: (1/2) sqrt(2/pi) sqrt(1/2 + 1/2) (sqrt(.5 x .5) + sqrt(.5 x .5)) = 1 / sqrt(2 pi)
    floor = pytest.approx(1 / np.sqrt(2 * np.pi))
    assert m["tvd"]["3"] == {
        "mean": 0.5,
        "max": 0.5,
        "count": 1,
        "worst": "X|Y|Z",
        "floor": floor,
        "floor_measured": None,
        # sum over cells sqrt(p (1 - p)) = 1; the floor of one real record, sqrt(1 + 1/2) / sqrt(2 pi) = .489,
        # is below .5: even one real record would be as close
        "spread": 1.0,
        "sensitive_rows": 2,
        "synthetic_rows": None,
        "real_sample_records": 1,
    }
    assert m["k_marginal_score"] == 500.0
    assert m["nist_k_marginal_score"] is None  # not NIST's formula: no group column
    assert evaluate(sensitive, synthetic, max_marginal_length=2)["k_marginal_score"] is None


def test_privacy_parameters_are_copied_from_the_manifest(spark):
    df = table(spark, SEED_ROWS)
    manifest = {"columns": ["A", "B", "C"], "reporting_length": 1, "protected_number_of_records": 6}
    manifest.update(
        epsilon=4.0, delta=1e-6, rho=0.24, sigmas={"1": 5.4}, sensitivities={"1": 3}, test_mode=True
    )
    release = Release.from_pandas(
        pd.DataFrame([(1, ["A"], ["a1"], 3)], columns=["k", "columns", "values", "count"]), manifest
    )
    privacy = evaluate(df, df, release, max_marginal_length=1)["privacy"]
    assert (privacy["epsilon"], privacy["delta"], privacy["rho"], privacy["protected_number_of_records"]) == (
        4.0,
        1e-6,
        0.24,
        6,
    )
    assert privacy["sigmas"] == {"1": 5.4} and privacy["sensitivities"] == {"1": 3} and privacy["test_mode"]
    assert privacy["thresholds"] is None  # absent from this manifest
    assert evaluate(df, df, max_marginal_length=1)["privacy"] is None


# --- train on synthetic, test on real --------------------------------------------------------------------------


def rule_table(n, *, flip=False, seed=0):
    """n rows: x in {p, q, empty}, z noise in {u, v}; label "yes" iff x is empty or p (negated with ``flip``)."""
    rng = np.random.default_rng(seed)
    x = rng.choice(np.array(["p", "q", None], dtype=object), size=n, p=[0.2, 0.6, 0.2])
    z = rng.choice(np.array(["u", "v"], dtype=object), size=n)
    yes = np.array([v is None or v == "p" for v in x]) != flip
    return pd.DataFrame({"x": x, "z": z, "label": np.where(yes, "yes", "no").astype(object)})


def test_tstr_learns_a_rule_and_an_empty_category():
    train, test = rule_table(400, seed=1), rule_table(300, seed=2)
    result = train_synthetic_test_real(rule_table(400, seed=3), train, test, "label")
    # "yes" (about 40 %) is the minority class of real_train: the positive class of F1.
    assert result["positive_class"] == "yes" and result["majority_class"] == "no"
    assert (result["tstr_accuracy"], result["tstr_f1"], result["trtr_accuracy"], result["trtr_f1"]) == (
        1.0,
        1.0,
        1.0,
        1.0,
    )
    assert result["majority_accuracy"] == pytest.approx(float(np.mean(test["label"] == "no")))
    assert result["rows"] == {"synthetic": 400, "real_train": 400, "real_test": 300}
    json.dumps(result, allow_nan=False)

    # Synthetic data with the rule inverted: every test row is predicted wrong.
    inverted = train_synthetic_test_real(rule_table(400, flip=True, seed=3), train, test, "label")
    assert (inverted["tstr_accuracy"], inverted["tstr_f1"], inverted["trtr_accuracy"]) == (0.0, 0.0, 1.0)


def test_tstr_with_one_synthetic_class_and_empty_labels():
    train, test = rule_table(200, seed=1), rule_table(100, seed=2)
    synthetic = train.assign(label="no")
    synthetic.loc[:9, "label"] = None  # rows without a label are dropped
    result = train_synthetic_test_real(synthetic, train, test, "label")
    assert result["rows"]["synthetic"] == 190
    assert result["tstr_accuracy"] == pytest.approx(float(np.mean(test["label"] == "no")))
    assert result["tstr_f1"] == 0.0  # never predicts the positive class
    no_label = train_synthetic_test_real(train.assign(label=None), train, test, "label")
    assert (no_label["tstr_accuracy"], no_label["tstr_f1"], no_label["rows"]["synthetic"]) == (None, None, 0)


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        (
            lambda s, tr, te: (s.drop(columns="label"), tr, te),
            SchemaError,
            "label column 'label' is not in the synthetic",
        ),
        (
            lambda s, tr, te: (s, tr, te.drop(columns="z")),
            SchemaError,
            r"real_test table lacks the column\(s\) \['z'\]",
        ),
        (lambda s, tr, te: (s, tr, te.assign(label=None)), InvalidParameterError, "real_test has no row"),
        (lambda s, tr, te: (s, tr[["label"]], te), InvalidParameterError, "no feature column"),
    ],
)
def test_tstr_validation(change, error, match):
    frames = change(rule_table(20), rule_table(20), rule_table(20))
    with pytest.raises(error, match=match):
        train_synthetic_test_real(*frames, "label")


def spark_rule_table(spark, n, *, seed, label_suffix=""):
    pdf = rule_table(n, seed=seed)
    pdf["label"] = pdf["label"] + label_suffix
    return spark.createDataFrame(pdf, schema="x string, z string, label string").coalesce(1)


def test_evaluate_runs_tstr_on_a_holdout_and_maps_label_spellings(spark, caplog):
    sensitive = spark_rule_table(spark, 300, seed=1)
    synthetic = spark_rule_table(spark, 300, seed=3)
    holdout = spark_rule_table(spark, 200, seed=2, label_suffix=".")  # "yes." / "no." as in UCI's adult.test
    messages: list[str] = []
    m = evaluate(
        sensitive,
        synthetic,
        max_marginal_length=1,
        holdout=holdout,
        label="label",
        label_values={"yes.": "yes", "no.": "no"},
        progress=messages.append,
    )
    tstr = m["tstr"]
    assert tstr["skipped"] is None and tstr["label"] == "label" and tstr["max_rows"] == TSTR_MAX_ROWS
    assert (tstr["tstr_accuracy"], tstr["trtr_accuracy"], tstr["tstr_f1"]) == (1.0, 1.0, 1.0)
    assert tstr["rows"] == {"synthetic": 300, "real_train": 300, "real_test": 200}
    assert any("train-on-synthetic" in line and "done in" in line for line in messages)

    # Without the mapping the held-out classes are other strings: nothing is predicted right.
    unmapped = evaluate(sensitive, synthetic, max_marginal_length=1, holdout=holdout, label="label")["tstr"]
    assert unmapped["tstr_accuracy"] == 0.0

    # At most tstr_max_rows rows of each table reach the driver.
    bounded = evaluate(
        sensitive, synthetic, max_marginal_length=1, holdout=holdout, label="label", tstr_max_rows=50
    )
    assert bounded["tstr"]["rows"] == {"synthetic": 50, "real_train": 50, "real_test": 50}

    # No held-out table: skipped, with the reason logged and recorded.
    with caplog.at_level(logging.WARNING, logger="spark_dpsynth.evaluation.tstr"):
        skipped = evaluate(sensitive, synthetic, max_marginal_length=1, label="label")["tstr"]
    assert skipped["label"] == "label" and "held-out" in skipped["skipped"]
    assert any(
        "skipped" in r.getMessage() for r in caplog.records if r.name == "spark_dpsynth.evaluation.tstr"
    )
    assert evaluate(sensitive, synthetic, max_marginal_length=1)["tstr"] is None


def test_bounded_sample_does_not_depend_on_partitions(spark):
    from spark_dpsynth.evaluation.tstr import _bounded_sample

    # 500 rows with at most 6 distinct values: many ties of the hash, which only ever tie identical rows.
    reference = spark_rule_table(spark, 500, seed=4)
    one = _bounded_sample(reference, 120, 7)
    three = _bounded_sample(reference.repartition(3), 120, 7)
    assert len(one) == 120

    def canonical(frame):
        return frame.sort_values(["x", "z", "label"], na_position="first").reset_index(drop=True)

    pd.testing.assert_frame_equal(canonical(one), canonical(three))
    assert len(_bounded_sample(reference, 10_000, 7)) == 500


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"label": "nope"}, SchemaError, "label column 'nope' is not one of the columns"),
        ({"label": "x", "label_values": {"a": 1}}, InvalidParameterError, "label_values must be a mapping"),
        ({"resolution": 0}, InvalidParameterError, "resolution must be >= 1, got 0"),
        ({"tstr_max_rows": 0}, InvalidParameterError, "tstr_max_rows must be >= 1, got 0"),
        ({"seed": 1.5}, InvalidParameterError, "seed must be an integer"),
    ],
)
def test_evaluate_tstr_parameters_are_validated(spark, kwargs, error, match):
    df = spark_rule_table(spark, 10, seed=0)
    with pytest.raises(error, match=match):
        evaluate(df, df, **kwargs)


def test_holdout_columns_must_match(spark):
    df = spark_rule_table(spark, 10, seed=0)
    with pytest.raises(SchemaError, match="the held-out table"):
        evaluate(df, df, holdout=df.select("z", "x", "label"), label="label")


# --- the [evaluate] configuration ------------------------------------------------------------------------------


def test_evaluate_config_keys():
    from spark_dpsynth.config import parse_config

    config = parse_config(
        {
            "evaluate": {
                "label": "income",
                "holdout_filter": "split = 'test'",
                "label_values": {">50K.": ">50K"},
                "resolution": 5,
                "tstr_max_rows": 1000,
            }
        }
    )
    assert (config.label, config.holdout_filter, config.label_values) == (
        "income",
        "split = 'test'",
        {">50K.": ">50K"},
    )
    assert (config.resolution, config.tstr_max_rows) == (5, 1000)
    default = parse_config({})
    assert (default.label, default.holdout_filter, default.label_values, default.resolution) == (
        None,
        None,
        {},
        10,
    )
    adult = load_config(str(ROOT / "conf" / "adult.toml"))
    assert (adult.label, adult.holdout_filter, adult.resolution) == ("income", "split = 'test'", 10)


@pytest.mark.parametrize(
    ("table_", "match"),
    [
        ({"label": ""}, r"\[evaluate\] label must be a non-empty string"),
        ({"holdout_filter": 3}, r"\[evaluate\] holdout_filter must be a non-empty string"),
        ({"resolution": 0}, r"\[evaluate\] resolution must be an integer >= 1, got 0"),
        ({"tstr_max_rows": True}, r"\[evaluate\] tstr_max_rows must be an integer >= 1"),
        ({"label_values": {"a": 1}}, r"\[evaluate\] label_values must be a table of strings"),
        ({"labels": "x"}, r"unknown key\(s\) \['labels'\] in \[evaluate\]"),
    ],
)
def test_evaluate_config_errors_name_the_key(table_, match):
    from spark_dpsynth.config import parse_config

    with pytest.raises(ConfigError, match=match):
        parse_config({"evaluate": table_})


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
    # An empty table (a header-only input, a filter that keeps nothing) defines no distance: the evaluation says
    # so and the run goes on (docs/design.md sections 1.7 and 5.6).
    metrics = evaluate(df, empty)
    assert metrics["rows"] == {"sensitive": len(SEED_ROWS), "synthetic": 0}
    assert metrics["failed_metrics"] == {
        "distances": "the synthetic table has no rows: no distance is defined"
    }
    assert metrics["tvd"] == {} and metrics["record_expansion"] is None
    assert "no distance is defined" in render_report(metrics)
    both = evaluate(empty, empty)["failed_metrics"]["distances"]
    assert both == "the sensitive and the synthetic tables have no rows: no distance is defined"


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
    assert {k: m["tvd"]["1"][k] for k in ("mean", "max", "count")} == {"mean": 0.0, "max": 0.0, "count": 6}
    assert m["tvd"]["2"]["count"] == 15 and m["tvd"]["2"]["max"] > 0.1
    one = m["sds"]["synthetic"]["by_length"]["1"]
    assert (one["suppressed_pct"], one["fabricated_pct"], one["mean_absolute_error"]) == (0.0, 0.0, 0.0)
    released = m["sds"]["release"]["by_length"]["1"]
    assert (released["tuples"], released["suppressed_pct"], released["mean_absolute_error"]) == (
        0,
        100.0,
        None,
    )


class _SparkFailure(Exception):
    """A Spark error as PySpark raises it: a condition, and a message that quotes a value."""

    def getCondition(self) -> str:  # noqa: N802 - PySpark's name
        return "TASK_WRITE_FAILED"


def test_a_failed_metric_is_reported_and_the_others_are_written(spark, tmp_path, monkeypatch):
    """The numeric metrics and TSTR fail (injected): each is {"failed": reason} with a reason that holds no
    data value, listed in failed_metrics and in the report, and the marginal distances are all there."""
    df = table(spark, SEED_ROWS)

    def broken(*args, **kwargs):
        raise _SparkFailure("value 'MARKER-SECRET' cannot be written")

    monkeypatch.setattr("spark_dpsynth.evaluation.catalog.numeric_metrics", broken)
    monkeypatch.setattr("spark_dpsynth.evaluation.catalog.tstr_metrics", broken)
    metrics = evaluate(df, df, numeric_columns=("A",), label="C")
    reason = "_SparkFailure [TASK_WRITE_FAILED]"
    assert metrics["numeric"] == {"failed": reason} and metrics["tstr"] == {"failed": reason}
    assert metrics["failed_metrics"] == {"numeric": reason, "tstr": reason}
    assert list(metrics) == [key for spec in METRICS for key in spec.outputs]
    assert metrics["tvd"]["1"]["mean"] == 0.0 and metrics["rows"]["synthetic"] == len(SEED_ROWS)
    path = write_metrics(metrics, str(tmp_path / "evaluation"))
    text = Path(path).read_text() + render_report(metrics)
    assert "MARKER" not in text and "TASK_WRITE_FAILED" in text
