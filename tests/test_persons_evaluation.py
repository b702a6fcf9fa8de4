"""Tests of spark_dpsynth.evaluation.persons (person-level metrics of an event table), of the summary lines of a
person-level release and of the report's Persons section, on small hand-made event tables."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pandas as pd
import pytest

from spark_dpsynth.errors import InvalidParameterError, SchemaError
from spark_dpsynth.evaluation.persons import empty_columns_note, person_metrics, row_level_identifier_note
from spark_dpsynth.evaluation.report import render_report
from spark_dpsynth.release.core import Release
from tests.conftest import ROOT

SENSITIVE = [
    # pid, birth, kind, amount
    ("p1", "1950", "a", "10"),
    ("p2", "1960", "a", "11"),
    ("p2", "1960", "b", "12"),
    ("p3", None, "a", "13"),
    ("p3", "1970", "a", "14"),
    ("p3", "1970", "b", "15"),
    ("p3", " ", None, "16"),
    (None, "1999", "z", "17"),  # no person: left out
    ("  ", "1999", "z", "18"),  # a blank key: left out
]
"""Persons p1 (1 row), p2 (2 rows), p3 (4 rows); p3's birth is the least of its non-empty values, "1970"."""
SYNTHETIC = [
    # pid (surrogate key), birth, kind, amount
    (10, "1950", "a", "20"),
    (11, "1960", "b", "21"),
    (12, "1970", "a", "22"),
    (12, "1970", "", "23"),
    (13, None, "b", "24"),
    (13, None, "b", "25"),
]
"""Persons 10, 11 (1 row each), 12, 13 (2 rows each); 13 has no birth (the value "")."""
SCHEMA = "pid {}, birth string, kind string, amount string"


@pytest.fixture(scope="module")
def metrics(spark):
    sensitive = spark.createDataFrame(SENSITIVE, SCHEMA.format("string"))
    synthetic = spark.createDataFrame(SYNTHETIC, SCHEMA.format("bigint"))
    return person_metrics(
        sensitive,
        synthetic,
        "pid",
        2,
        person_columns=["birth"],
        event_columns=["pid", "kind", "amount"],
        grid=[1, 2, 3],
    )


def test_persons_rows_per_person_and_share_above_the_cap(metrics):
    # sensitive rows per person 1, 2, 4 (bins 1 | 2 | 3+ of the grid [1, 2, 3]); synthetic 1, 1, 2, 2
    assert metrics["cap"] == 2
    assert metrics["persons"] == {"sensitive": 3, "synthetic": 4}
    assert metrics["share_above_cap"] == pytest.approx(1 / 3, abs=1e-15)
    assert metrics["mean_rows_per_person"] == pytest.approx(
        {"sensitive": 7 / 3, "synthetic": 6 / 4}, abs=1e-15
    )
    third = pytest.approx(1 / 3, abs=1e-15)
    assert metrics["rows_per_person"] == {
        "bins": [[1, 1], [2, 2], [3, None]],
        "sensitive": [third, third, third],
        "synthetic": [0.5, 0.5, 0.0],
    }
    # (1/2) (|1/3 - 1/2| + |1/3 - 1/2| + 1/3)
    assert metrics["rows_per_person_tvd"] == pytest.approx(1 / 3, abs=1e-15)


def test_rows_per_person_default_to_one_bin_a_number_up_to_the_cap(spark):
    sensitive = spark.createDataFrame(SENSITIVE, SCHEMA.format("string"))
    synthetic = spark.createDataFrame(SYNTHETIC, SCHEMA.format("bigint"))
    out = person_metrics(sensitive, synthetic, "pid", 2)
    assert out["rows_per_person"]["bins"] == [[1, 1], [2, None]]
    assert out["rows_per_person_tvd"] == pytest.approx(1 / 6, abs=1e-15)
    with pytest.raises(InvalidParameterError, match="grid"):
        person_metrics(sensitive, synthetic, "pid", 2, grid=[2, 3])


def test_person_columns_compare_one_value_per_person(metrics):
    # sensitive persons: 1950, 1960, 1970 (1/3 each); synthetic: 1950, 1960, 1970, "" (1/4 each)
    assert metrics["person_columns_tvd"] == {"birth": pytest.approx(0.25, abs=1e-15)}


def test_events_by_category_count_a_persons_rows(metrics):
    # the key is skipped; amount holds 7 + 6 distinct values over the keyed rows: at most 20, so compared;
    # kind: sensitive p1 a, p2 a b, p3 a a b "": a 4, b 2, "" 1 over 3 persons;
    # synthetic a 2, b 3, "" 1 over 4 persons. The sensitive null-key rows' "z" is not there.
    assert list(metrics["events_by_category"]) == ["kind", "amount"]
    kind = metrics["events_by_category"]["kind"]
    assert kind["values"] == {
        "a": [pytest.approx(4 / 3), 0.5],
        "b": [pytest.approx(2 / 3), 0.75],
        "": [pytest.approx(1 / 3), 0.25],
    }
    assert list(kind["values"]) == ["a", "b", ""]  # by decreasing sensitive mean
    # normalised: sensitive (4/7, 2/7, 1/7), synthetic (1/3, 1/2, 1/6)
    assert kind["tvd_of_means"] == pytest.approx(0.5 * (5 / 21 + 3 / 14 + 1 / 42))
    means = kind["values"].values()
    assert sum(s for s, _ in means) == pytest.approx(metrics["mean_rows_per_person"]["sensitive"])
    amount = metrics["events_by_category"]["amount"]
    assert "17" not in amount["values"] and "18" not in amount["values"]
    assert amount["values"]["16"] == [pytest.approx(1 / 3), 0.0] and amount["values"]["25"] == [0.0, 0.25]
    assert amount["tvd_of_means"] == 1.0  # no value in common


def test_repeating_persons_count_the_persons_of_two_rows_whose_rows_repeat_a_value(spark, metrics):
    # sensitive: p2 (a, b) and p3 (a, a, b, "") hold two rows or more, p3 repeats a kind; no amount repeats;
    # synthetic: 12 (a, "") and 13 (b, b)
    assert metrics["repeating_persons"] == {}
    sensitive = spark.createDataFrame(SENSITIVE, SCHEMA.format("string"))
    synthetic = spark.createDataFrame(SYNTHETIC, SCHEMA.format("bigint"))
    metrics = person_metrics(sensitive, synthetic, "pid", 2, distinct_columns=["kind", "amount"])
    assert metrics["repeating_persons"] == {
        "kind": {"sensitive": 0.5, "synthetic": 0.5},
        "amount": {"sensitive": 0.0, "synthetic": 0.0},
    }
    from spark_dpsynth.cli._summary import describe_person_metrics

    assert "repeating a kind 50.0% / 50.0%" in describe_person_metrics(metrics)


def test_offset_and_decreasing_persons_compare_a_column_with_the_time_base(spark):
    # sensitive: a (ages 30, 31, 33 in years 1..3: offsets 29, 29, 30), b (40, 40 in 1, 3: offsets 39, 37),
    # c (one row); synthetic: x (20, 22, 19 in 1..3: offsets 19, 20, 16, and down in year 3), y (age empty in
    # one row)
    schema = "pid string, year int, age double"
    sensitive = spark.createDataFrame(
        [("a", 1, 30.0), ("a", 2, 31.0), ("a", 3, 33.0), ("b", 1, 40.0), ("b", 3, 40.0), ("c", 1, 50.0)],
        schema,
    )
    synthetic = spark.createDataFrame(
        [("x", 1, 20.0), ("x", 2, 22.0), ("x", 3, 19.0), ("y", 1, None), ("y", 5, 61.0)], schema
    )
    metrics = person_metrics(
        sensitive,
        synthetic,
        "pid",
        3,
        offset_time_column="year",
        time_offset_columns=["age"],
        nondecreasing_columns=["age"],
    )
    assert metrics["offset_persons"] == {"age": {"sensitive": 0.5, "synthetic": 0.5}}
    assert metrics["decreasing_persons"] == {"age": {"sensitive": 0.0, "synthetic": 0.5}}
    plain = person_metrics(sensitive, synthetic, "pid", 3)
    assert plain["offset_persons"] == {} and plain["decreasing_persons"] == {}
    from spark_dpsynth.cli._summary import describe_person_metrics

    line = describe_person_metrics(metrics)
    assert "age off its time base 50.0% / 50.0%" in line and "age going down in time 0.0% / 50.0%" in line


def test_null_keys_are_left_out(spark, metrics):
    # the same table without its keyless rows gives the same metrics
    sensitive = spark.createDataFrame(
        [r for r in SENSITIVE if r[0] and r[0].strip()], SCHEMA.format("string")
    )
    synthetic = spark.createDataFrame(SYNTHETIC, SCHEMA.format("bigint"))
    again = person_metrics(
        sensitive, synthetic, "pid", 2, ["birth"], ["pid", "kind", "amount"], grid=[1, 2, 3]
    )
    assert again == metrics


def test_event_columns_with_more_than_20_values_are_skipped_and_at_most_5_are_kept(spark):
    # one person per row; column c20 holds 20 distinct values over both tables, c21 21, c100 100 (screened out
    # by the approximate count); six small columns s1..s6 after them: the first five with at most 20 values kept
    n = 60
    rows = pd.DataFrame(
        {
            "pid": [str(i) for i in range(n)],
            "c20": [str(i % 20) for i in range(n)],
            "c21": [str(i % 21) for i in range(n)],
            "c100": [str(i) for i in range(n)],
            **{f"s{j}": [str(i % 2) for i in range(n)] for j in range(1, 7)},
        }
    )
    sensitive = spark.createDataFrame(rows)
    synthetic = spark.createDataFrame(rows.assign(c100=[str(i + 40) for i in range(n)]))
    columns = ["c20", "c21", "c100", "s1", "s2", "s3", "s4", "s5", "s6"]
    out = person_metrics(sensitive, synthetic, "pid", 1, event_columns=columns)
    assert list(out["events_by_category"]) == ["c20", "s1", "s2", "s3", "s4"]
    assert len(out["events_by_category"]["c20"]["values"]) == 20
    assert all(e["tvd_of_means"] == 0.0 for e in out["events_by_category"].values())
    assert out["rows_per_person"] == {"bins": [[1, None]], "sensitive": [1.0], "synthetic": [1.0]}
    assert (out["share_above_cap"], out["rows_per_person_tvd"], out["person_columns_tvd"]) == (0.0, 0.0, {})


_CONNECT_SCRIPT = """
import json
from pyspark.sql import SparkSession
from spark_dpsynth.evaluation.persons import person_metrics
from tests.test_persons_evaluation import SCHEMA, SENSITIVE, SYNTHETIC

spark = SparkSession.builder.remote("local[2]").getOrCreate()
sensitive = spark.createDataFrame(SENSITIVE, SCHEMA.format("string"))
synthetic = spark.createDataFrame(SYNTHETIC, SCHEMA.format("bigint"))
print(json.dumps(person_metrics(sensitive, synthetic, "pid", 2, ["birth"], ["pid", "kind", "amount"], grid=[1, 2, 3])))
"""


@pytest.mark.connect
def test_person_metrics_on_spark_connect(metrics):
    # a process holds a classic or a Connect session: the Connect run is a subprocess (tests/test_connect.py)
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")}
    env.update(
        PYTHONPATH=str(ROOT),
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_SUBMIT_ARGS="--conf spark.sql.shuffle.partitions=4 --conf spark.ui.enabled=false pyspark-shell",
    )
    result = subprocess.run(
        [sys.executable, "-c", _CONNECT_SCRIPT],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == json.loads(json.dumps(metrics))


@pytest.mark.parametrize(
    ("cap", "kwargs", "error", "match"),
    [
        (0, {}, InvalidParameterError, "cap must be an integer >= 1"),
        (2.5, {}, InvalidParameterError, "cap must be an integer >= 1"),
        (2, {"person_columns": ["nope"]}, SchemaError, r"the sensitive table lacks .* \['nope'\]"),
    ],
)
def test_person_metrics_checks_its_arguments(spark, cap, kwargs, error, match):
    sensitive = spark.createDataFrame(SENSITIVE, SCHEMA.format("string"))
    with pytest.raises(error, match=match):
        person_metrics(sensitive, sensitive, "pid", cap, **kwargs)


# --- the command line's summary and the report ----------------------------------------------------------------

PERSONS_BLOCK = {
    "privacy_unit_column": "idcode",
    "rows_column": "rows_per_person",
    "max_rows_per_person": 13,
    "cap_source": "dp_histogram_percentile",
    "cap_percentile": 0.25,
    "protected_number_of_persons": 4702,
    "person_columns": ["birth_yr", "race"],
    "epsilon": 4.0,
    "delta": 1e-6,
    "event_epsilon_per_row": 0.25,
    "event_delta_per_row": 1e-9,
}


def _release(**entries) -> Release:
    aggregates = pd.DataFrame(
        [(1, ["A"], ["a"], 60), (1, ["A"], ["b"], 40), (1, ["B"], ["x"], 90)],
        columns=["k", "columns", "values", "count"],
    )
    manifest = {
        "columns": ["A", "B"],
        "reporting_length": 1,
        "protected_number_of_records": 100,
        "epsilon": 0.25,
        "delta": 1e-9,
        **entries,
    }
    return Release.from_pandas(aggregates, manifest)


def test_summary_states_the_person_level_guarantee_first(metrics):
    from spark_dpsynth.cli._summary import summary

    release = _release(privacy_unit="person", privacy_unit_column="idcode", persons=PERSONS_BLOCK)
    evaluation = {"rows": {"sensitive": 7, "synthetic": 6}, "tvd": {}, "persons": metrics}
    lines = summary(release, evaluation, "/tmp/out").splitlines()
    assert lines[2] == (
        "  privacy unit           idcode: epsilon 4 per person, delta 1e-06, events measured on at most 13 rows "
        "per person (percentile 0.25 of the DP histogram) at epsilon 0.25, delta 1e-09 per row"
    )
    assert lines[3] == "  protected persons      4702"
    assert not any("privacy spent" in line for line in lines)
    assert (
        "  persons                real 3 / synthetic 4, rows-per-person TVD 0.3333, share above L=2 33.3% "
        "(not private)"
    ) in lines
    assert not any(line.startswith("  note: ") for line in lines)
    given = {**PERSONS_BLOCK, "cap_source": "given", "cap_percentile": None}
    text = summary(_release(privacy_unit="person", persons=given), None, "/tmp/out")
    assert "on at most 13 rows per person (given) at epsilon" in text


def test_summary_notes_identifier_columns_of_a_row_level_release():
    from spark_dpsynth.cli._summary import summary

    identifiers = {"tailnum": {"type": "string", "nullable": True, "before": None}}
    release = _release(privacy_unit="record", identifier_columns=identifiers)
    lines = summary(release, None, "/tmp/out").splitlines()
    note = (
        "the guarantee is per row: a person with many rows is less protected; if 'tailnum' names a person whose "
        "values repeat, run with --privacy-unit tailnum (person-level DP)"
    )
    assert f"  note: {note}" in lines
    assert lines[2].startswith("  privacy spent          epsilon=0.25 delta=1e-09")
    assert row_level_identifier_note(release.manifest) == note


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        ({"identifier_columns": {"a": {}, "b": {}}}, "if one of 'a', 'b' names a person"),
        ({"privacy_unit": "record"}, None),
        ({"columns": ["userId", "rating", "valid"]}, "if 'userId' names a person"),
        ({"columns": ["occ_code", "grid", "paid"]}, None),
        ({"columns": ["Unit ID", "Priority"]}, "run with --privacy-unit 'Unit ID' (person-level DP)"),
        ({"privacy_unit": "person", "identifier_columns": {"a": {}}}, None),
        ({"privacy_unit": "unknown", "identifier_columns": {"a": {}}}, None),
    ],
)
def test_row_level_identifier_note(manifest, expected):
    note = row_level_identifier_note(manifest)
    assert note == expected if expected is None else expected in note


@pytest.mark.parametrize(
    ("cap", "empty", "expected"),
    [
        (4, 20, "20 column(s) released (almost) nothing: the events were measured at epsilon 0.85 per row on at "
         "most 4 row(s) of each of about 255 persons; fewer columns ([data] columns), a larger epsilon, a smaller "
         "--max-rows-per-person (now 4) release more"),
        (1, 3, "3 column(s) released (almost) nothing: the events were measured at epsilon 0.85 per row on at "
         "most 1 row(s) of each of about 255 persons; fewer columns ([data] columns), a larger epsilon release more"),
        (4, 0, None),
    ],
)  # fmt: skip
def test_empty_columns_note_names_the_person_level_levers(cap, empty, expected):
    manifest = {
        "protected_number_of_persons": 255,
        "persons": {"max_rows_per_person": cap, "event_epsilon_per_row": 0.85},
    }
    assert empty_columns_note(manifest, empty) == expected
    assert empty_columns_note({"privacy_unit": "record"}, empty) is None


def test_report_has_a_persons_section_with_its_plot(metrics):
    page = render_report(
        {"rows": {"sensitive": 7, "synthetic": 6}, "tvd": {}, "columns": [], "persons": metrics}
    )
    section = re.search(r'<section id="persons">.*?</section>', page, re.S).group(0)
    assert "<h2>Persons</h2>" in section
    assert re.search(
        r'<img id="plot-persons-rows" alt="[^"]*" src="data:image/png;base64,[A-Za-z0-9+/=]{100,}"', section
    )
    for label, value in (
        ("persons, sensitive / synthetic", "3 / 4"),
        ("L, the most rows of one person the event measurements read", "2"),
        ("sensitive persons with more than L rows (NOT private)", "33.33%"),
        ("TVD of rows per person (public bins)", "0.3333"),
        ("TVD of person column birth", "0.2500"),
        ("TVD of the mean rows per person by value of kind", "0.2381"),
    ):
        assert f"<td>{label}</td><td>{value}</td>" in section
    assert 'id="persons"' not in render_report({"rows": {}, "tvd": {}, "columns": []})


def test_span_tvd_compares_the_persons_spans_on_public_decades(spark):
    # sensitive: a (timestamps 0 s and 30 s apart: class [10, 100)), b (two rows 5 days apart: [1e5, 1e6)),
    # c (one row: no span); synthetic: x (one value twice: span 0), y (30 s apart)
    schema = "pid string, at timestamp"
    day = 86400
    sensitive = spark.createDataFrame(
        [("a", _at(0)), ("a", _at(30)), ("b", _at(0)), ("b", _at(5 * day)), ("c", _at(9))], schema
    )
    synthetic = spark.createDataFrame(
        [("x", _at(7)), ("x", _at(7)), ("y", _at(100)), ("y", _at(130))], schema
    )
    metrics = person_metrics(sensitive, synthetic, "pid", 3, span_columns=["at"])
    assert metrics["span_tvd"] == {"at": 0.5}  # a and y share a class; b and x do not
    assert person_metrics(sensitive, synthetic, "pid", 3)["span_tvd"] == {}
    from spark_dpsynth.cli._summary import describe_person_metrics

    assert "at span TVD 0.5000" in describe_person_metrics(metrics)


def _at(seconds: int):  # noqa: ANN202 - datetime
    import datetime as dt

    return dt.datetime(2020, 1, 1) + dt.timedelta(seconds=seconds)
