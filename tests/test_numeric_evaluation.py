"""Tests of the numeric evaluation (KS, Wasserstein-1, correlations) and of the empty-column listing."""

from __future__ import annotations

import datetime as dt
import re

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from spark_dpsynth.errors import InvalidParameterError, SchemaError
from spark_dpsynth.evaluation.coverage import column_warnings, release_coverage, synthetic_coverage
from spark_dpsynth.evaluation.metrics import evaluate
from spark_dpsynth.evaluation.numeric import (
    ks_wasserstein_from_quantiles,
    numeric_metrics,
    typed_sensitive_table,
)
from spark_dpsynth.evaluation.report import headline_numbers, render_report
from spark_dpsynth.params import BinSpec, DataConfig
from spark_dpsynth.release.core import Release

RNG = np.random.default_rng(20261123)
# 40 and 50 divide the grid size m = 10,000 and are below the accuracy: the quantiles, hence KS and W1, are exact.
AGE_S = RNG.integers(0, 90, 40).astype(float)  # with ties
AGE_Y = RNG.integers(10, 95, 50).astype(float)
INCOME_S = np.round(RNG.lognormal(10, 1, 40), 2)
INCOME_Y = np.round(RNG.lognormal(10.3, 0.8, 50), 2)


def _frames(spark, synthetic_as_strings: bool):
    sensitive = spark.createDataFrame(
        pd.DataFrame({"age": AGE_S.astype(int), "income": INCOME_S, "name": ["x"] * 40})
    ).repartition(3)
    if synthetic_as_strings:
        syn = pd.DataFrame(
            {
                "age": [str(int(a)) for a in AGE_Y],
                "income": [f" {float(x)!r} " for x in INCOME_Y],
                "name": ["y"] * 50,
            }
        )
    else:
        syn = pd.DataFrame({"age": AGE_Y.astype(int), "income": INCOME_Y, "name": ["y"] * 50})
    return sensitive, spark.createDataFrame(syn).repartition(2)


@pytest.mark.parametrize("synthetic_as_strings", [False, True], ids=["typed", "strings"])
def test_ks_and_wasserstein_agree_with_scipy_and_correlation_with_numpy(spark, synthetic_as_strings):
    sensitive, synthetic = _frames(spark, synthetic_as_strings)
    m = numeric_metrics(sensitive, synthetic)
    assert m["columns"] == ["age", "income"]  # "name" is a string column: not numeric by default
    for column, (s, y) in {"age": (AGE_S, AGE_Y), "income": (INCOME_S, INCOME_Y)}.items():
        e = m["by_column"][column]
        assert e["skipped"] is None and e["kind"] == "number"
        assert e["ks"] == pytest.approx(stats.ks_2samp(s, y).statistic, abs=1e-12)
        assert e["wasserstein"] == pytest.approx(stats.wasserstein_distance(s, y), rel=1e-9)
        assert e["wasserstein_normalized"] == pytest.approx(e["wasserstein"] / np.std(s, ddof=1))
        assert e["sensitive"]["castable_share"] == 1.0 and e["synthetic"]["castable_share"] == 1.0
        assert (e["sensitive"]["numbers"], e["synthetic"]["numbers"]) == (40, 50)
        assert e["cdf"]["sensitive"][0] == s.min() and e["cdf"]["synthetic"][-1] == y.max()
        assert e["sensitive"]["mean"] == pytest.approx(s.mean())
    corr = m["correlation"]
    r_s, r_y = np.corrcoef(AGE_S, INCOME_S)[0, 1], np.corrcoef(AGE_Y, INCOME_Y)[0, 1]
    assert corr["sensitive"][0][1] == pytest.approx(r_s) and corr["synthetic"][1][0] == pytest.approx(r_y)
    assert corr["difference"] == [[0.0, pytest.approx(r_y - r_s)], [pytest.approx(r_y - r_s), 0.0]]
    assert corr["max_abs_difference"] == pytest.approx(abs(r_y - r_s)) == corr["mean_abs_difference"]
    assert corr["frobenius_norm"] == pytest.approx(np.sqrt(2) * abs(r_y - r_s))
    assert corr["max_pair"] == ["age", "income"]
    worst_ks = max(m["by_column"], key=lambda c: m["by_column"][c]["ks"])
    assert m["worst"][0] == worst_ks


def test_dates_and_timestamps_on_the_epoch_scale(spark):
    days_s = RNG.integers(0, 400, 40)
    days_y = RNG.integers(100, 500, 50)
    base = dt.date(2020, 1, 1)
    start = dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
    sensitive = spark.createDataFrame(
        [(base + dt.timedelta(days=int(d)), start + dt.timedelta(seconds=int(d) * 3600)) for d in days_s],
        schema="day date, at timestamp",
    )
    # Synthetic columns as strings (before the synthesizers emit typed columns), one value that does not cast.
    synthetic = spark.createDataFrame(
        [(str(base + dt.timedelta(days=int(d))), str(start + dt.timedelta(seconds=int(d) * 3600))[:19])
         for d in days_y] + [("[2020, 2021)", None)],
        schema="day string, at string",
    )  # fmt: skip
    m = numeric_metrics(sensitive, synthetic)
    day, at = m["by_column"]["day"], m["by_column"]["at"]
    assert (day["kind"], at["kind"]) == ("date", "timestamp")
    assert day["ks"] == pytest.approx(stats.ks_2samp(days_s, days_y).statistic, abs=1e-12)
    assert day["wasserstein"] == pytest.approx(stats.wasserstein_distance(days_s, days_y))  # days
    assert at["wasserstein"] == pytest.approx(3600 * stats.wasserstein_distance(days_s, days_y))  # seconds
    assert day["synthetic"]["castable_share"] == pytest.approx(50 / 51)
    assert at["synthetic"]["empty"] == 1 and at["synthetic"]["castable_share"] == 1.0


def test_error_stays_within_the_stated_bound_on_larger_data(spark):
    s = RNG.normal(0, 1, 7919)  # a prime size: the grid does not fall on the data's ranks
    y = RNG.standard_t(4, 6007)
    sensitive = spark.createDataFrame(pd.DataFrame({"x": s}))
    synthetic = spark.createDataFrame(pd.DataFrame({"x": y}))
    m = numeric_metrics(sensitive, synthetic, grid_size=200, accuracy=1000)
    e = m["by_column"]["x"]
    assert m["ks_error_bound"] == pytest.approx(1 / 200 + 2 / 1000)
    assert abs(e["ks"] - stats.ks_2samp(s, y).statistic) <= m["ks_error_bound"]
    assert abs(e["wasserstein"] - stats.wasserstein_distance(s, y)) <= e["wasserstein_error_bound"]


def test_ks_and_wasserstein_from_quantiles_by_hand():
    # F: uniform on {0, 1}; G: the point mass at 1. D = 1/2, W1 = 1/2.
    q_f = np.array([0.0, 0.0, 1.0])
    q_g = np.array([1.0, 1.0, 1.0])
    assert ks_wasserstein_from_quantiles(q_f, q_g) == (0.5, 0.5)
    assert ks_wasserstein_from_quantiles(q_f, q_f) == (0.0, 0.0)
    with pytest.raises(InvalidParameterError):
        ks_wasserstein_from_quantiles(q_f, q_g[:2])


def test_bin_labels_are_not_numbers_and_columns_are_skipped_with_the_reason(spark):
    sensitive = spark.createDataFrame(
        [(20.0, 1.0, None), (35.0, 2.0, None), (None, 3.0, None)], "a double, b double, c double"
    )
    synthetic = spark.createDataFrame(
        [("[20, 30)", "1", "4"), ("[30, 40)", "2.5", "5"), ("", "x", "6")], "a string, b string, c string"
    )  # fmt: skip
    m = numeric_metrics(sensitive, synthetic)
    a, b, c = (m["by_column"][k] for k in "abc")
    assert a["skipped"].startswith("no synthetic value is a number (2 non-empty values, none castable")
    assert a["synthetic"] == {**a["synthetic"], "empty": 1, "numbers": 0, "castable_share": 0.0}
    assert a["ks"] is None and a["cdf"] is None
    assert b["skipped"] is None and b["synthetic"]["castable_share"] == pytest.approx(2 / 3)
    assert c["skipped"] == "every sensitive cell is empty"
    assert m["correlation"] is None  # one compared column
    assert m["worst"] == ["b"]


def test_constant_columns_give_undefined_correlations(spark):
    sensitive = spark.createDataFrame(
        [(1.0, 2.0, 5.0), (2.0, 4.0, 5.0), (3.0, 7.0, 5.0)], "a double, b double, c double"
    )
    m = numeric_metrics(sensitive, sensitive)
    corr = m["correlation"]
    assert corr["columns"] == ["a", "b", "c"]
    assert corr["sensitive"][0][2] is None and corr["difference"][2][1] is None
    assert corr["max_abs_difference"] == 0.0 and corr["frobenius_norm"] == 0.0
    assert m["by_column"]["c"]["wasserstein_normalized"] is None  # std 0


def test_pairwise_complete_correlations_like_pandas(spark):
    pdf = pd.DataFrame(RNG.normal(size=(60, 3)), columns=["a", "b", "c"])
    pdf.loc[::7, "a"] = np.nan
    pdf.loc[::5, "c"] = np.nan
    pdf["b"] = pdf["b"] + pdf["a"].fillna(0)
    df = spark.createDataFrame(pdf).replace(float("nan"), None)
    m = numeric_metrics(df, df.limit(0).unionByName(df))
    expected = pdf.corr().to_numpy()
    assert np.allclose(np.array(m["correlation"]["sensitive"], dtype=float), expected)


def test_the_number_of_spark_jobs_does_not_grow_with_the_columns(spark):
    pdf = pd.DataFrame(RNG.normal(size=(100, 6)), columns=list("abcdef"))
    df = spark.createDataFrame(pdf)
    sc = spark.sparkContext

    def jobs(columns):
        group = f"numeric-{len(columns)}"
        sc.setJobGroup(group, "numeric metrics")
        try:
            numeric_metrics(df, df, columns)
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)
        return len(sc.statusTracker().getJobIdsForGroup(group))

    # One aggregation over both tables: its map stage and the final stage (a job each under adaptive execution).
    assert jobs(["a", "b"]) == jobs(list("abcdef")) <= 2


def test_a_wide_table_is_computed_in_passes_with_the_same_figures(spark, monkeypatch):
    """More columns than one pass takes (the 68 of the EU LFS extract exhausted the driver in one): passes of
    COLUMNS_PER_PASS columns and the vectorized co-moments give the figures of one pass, and numpy's
    correlations (the synthetic side with missing numbers: pairwise deletion)."""
    from spark_dpsynth.evaluation import numeric

    pdf = pd.DataFrame(RNG.normal(size=(40, 7)), columns=list("abcdefg"))
    syn = pdf.sample(frac=1.0, random_state=1) * 1.5 + 1000.0
    syn.iloc[::5, 2] = np.nan
    df, df_y = spark.createDataFrame(pdf), spark.createDataFrame(syn)
    one = numeric_metrics(df, df_y)
    monkeypatch.setattr(numeric, "COLUMNS_PER_PASS", 3)
    passes = numeric_metrics(df, df_y)
    assert passes["by_column"] == one["by_column"] and passes["worst"] == one["worst"]
    corr = passes["correlation"]
    assert np.allclose(corr["sensitive"], pdf.corr().to_numpy())
    assert np.allclose(corr["synthetic"], syn.corr().to_numpy())
    assert np.allclose(corr["difference"], one["correlation"]["difference"])


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"columns": ["nope"]}, SchemaError, r"lacks the numeric column\(s\) \['nope'\]"),
        ({"columns": ["age", "age"]}, SchemaError, "repeat"),
        ({"grid_size": 5}, InvalidParameterError, "grid_size must be >= 10"),
        ({"accuracy": 10}, InvalidParameterError, "accuracy must be >= 100"),
    ],
)
def test_numeric_parameters_are_validated(spark, kwargs, error, match):
    sensitive, synthetic = _frames(spark, True)
    with pytest.raises(error, match=match):
        numeric_metrics(sensitive, synthetic, **kwargs)


def test_typed_sensitive_table_cleans_empty_values_and_merges_persons(spark):
    df = spark.createDataFrame(
        [("p1", "30", 7), ("p1", "N", 7), ("p2", " 0 ", None), ("p3", "45", 0)],
        "id string, age string, w int",
    )
    config = DataConfig(columns=("age", "w"), empty_values=("N",), zeros_are_empty=True, sensitive_zeros=("w",),
                        bins={"age": BinSpec((18, 65))})  # fmt: skip
    table, names = typed_sensitive_table(df, config, ("age", "w"))
    assert names == ("age", "w")  # age: public bins; w: an int column
    assert sorted(table.collect(), key=str) == sorted(
        [("30", 7), (None, 7), (None, None), ("45", 0)], key=str
    )  # "N" and "0" are empty in age (zeros are empty there), 0 stays in w (a sensitive zero)
    unit = DataConfig(columns=("age", "w"), privacy_unit="id", zeros_are_empty=False)
    merged, _ = typed_sensitive_table(df, unit, ("age", "w"), ["w"])
    assert sorted((r.w for r in merged.collect()), key=lambda x: (x is None, x)) == [0, 7, None]
    with pytest.raises(SchemaError, match="not attribute columns"):
        typed_sensitive_table(df, config, ("age", "w"), ["id"])


# --- empty columns ----------------------------------------------------------------------------------------------


def _release(n_protected: int, **manifest_entries) -> Release:
    aggregates = pd.DataFrame(
        [
            (1, ["A"], ["a"], 60),
            (1, ["A"], ["b"], 40),
            (1, ["C"], ["c"], 3),
            (1, ["G_x"], ["1"], 2),
            (2, ["A", "C"], ["a", "c"], 3),
        ],
        columns=["k", "columns", "values", "count"],
    )
    manifest = {
        "columns": ["A", "B", "C", "G_x"],
        "reporting_length": 2,
        "protected_number_of_records": n_protected,
        "data": {"bins": {"C": {"edges": [1.0], "labels": ["<1", ">=1"], "passthrough": []}}},
        "multi_value_columns": {"G_x": {"column": "G", "value": "x", "delimiter": "|"}},
        **manifest_entries,
    }
    return Release.from_pandas(aggregates, manifest)


def test_release_coverage_counts_the_released_empty_cells():
    # C: its released value covers 3% of the records and its released (noisy) empty count 90%: a column empty
    # where its question does not apply is not listed; the workload mechanism's counts are its discovery's
    assert [e["column"] for e in release_coverage(_release(100, empty_counts={"C": 90}))] == ["B"]
    listed = release_coverage(_release(100, domain_discovery={"empty_counts": {"C": 90, "B": -4}}))
    assert [e["column"] for e in listed] == ["B"] and listed[0]["released_share"] == 0.0


def test_release_coverage_lists_columns_that_released_nothing_or_almost_nothing():
    listed = release_coverage(_release(100))
    assert [e["column"] for e in listed] == ["B", "C"]  # G_x is a multi-value column's binary column
    b, c = listed
    assert (b["released_values"], b["released_share"], b["binned"]) == (0, 0.0, False)
    assert (c["released_values"], c["released_share"], c["binned"]) == (1, 0.03, True)
    assert "bin it with public edges ([data.bins.B])" in b["advice"] and "leave it out" in b["advice"]
    assert "fewer, wider public bins ([data.bins.C])" in c["advice"]
    assert [e["column"] for e in release_coverage(_release(100), share=0.02)] == ["B"]
    lines = column_warnings(_release(100))
    assert lines[0].startswith("B: no value released: bin it")
    assert lines[1].startswith("C: 1 value(s) released, covering 3.0% of the protected records: give it")
    with pytest.raises(InvalidParameterError, match="share must be in"):
        release_coverage(_release(100), share=1.5)


def test_synthetic_coverage_compares_with_the_sensitive_empty_share():
    shares = {
        "A": {"sensitive": 0.1, "synthetic": 0.2},
        "B": {"sensitive": 0.0, "synthetic": 1.0},
        "C": {"sensitive": 0.5, "synthetic": 0.96},  # 4% filled vs 50%: below 10% of it
        "D": {"sensitive": 1.0, "synthetic": 1.0},  # empty in the sensitive data too: nothing lost
    }
    listed = synthetic_coverage(shares, binned={"C"})
    assert [(e["column"], e["binned"]) for e in listed] == [("B", False), ("C", True)]


def test_evaluate_lists_empty_columns_and_computes_numeric_metrics(spark):
    sensitive = spark.createDataFrame(
        [(a, b, c, g) for a, b, c, g in zip(["a"] * 60 + ["b"] * 40, [str(i) for i in range(100)],
                                              ["0.5", "2"] * 50, ["1"] * 10 + [None] * 90, strict=True)],
        "A string, B string, C string, G_x string",
    )  # fmt: skip
    synthetic = spark.createDataFrame(
        [(a, None, c, None) for a, c in zip(["a"] * 50 + ["b"] * 50, ["<1", ">=1"] * 50, strict=True)],
        "A string, B string, C string, G_x string",
    )
    m = evaluate(sensitive, synthetic, _release(100), max_marginal_length=1, numeric_columns=["B", "C"])
    assert m["empty_share_by_column"]["B"] == {"sensitive": 0.0, "synthetic": 1.0}
    assert m["empty_share_by_column"]["G_x"] == {"sensitive": 0.9, "synthetic": 1.0}
    entries = {e["column"]: e for e in m["empty_columns"]}
    assert list(entries) == ["B", "C", "G_x"]
    assert entries["B"]["released_values"] == 0 and entries["B"]["synthetic_empty_share"] == 1.0
    assert (
        "synthetic_empty_share" not in entries["C"]
    )  # released a little, and the synthetic column is filled
    assert "released_values" not in entries["G_x"]  # only from the synthetic side
    lines = column_warnings(_release(100), m)
    assert lines[0] == (
        "B: no value released; 100.0% of synthetic cells empty (sensitive 0.0%): bin it with public edges "
        "([data.bins.B]) if it is a number, group its values, hash it into buckets ([data.hash_buckets]), declare "
        "a row key an identifier ([data] identifiers), or leave it out ([data] columns)"
    )
    numeric = m["numeric"]
    assert numeric["columns"] == ["B", "C"]
    assert numeric["by_column"]["B"]["skipped"] == "every synthetic cell is empty"
    assert numeric["by_column"]["C"]["skipped"].startswith("no synthetic value is a number")
    assert numeric["by_column"]["C"]["sensitive"]["castable_share"] == 1.0
    assert (
        evaluate(sensitive, synthetic, max_marginal_length=1)["numeric"] is None
    )  # no typed table, none named


def test_evaluate_checks_numeric_columns_before_reading_data(spark):
    df = spark.createDataFrame([("1",)], "A string")
    with pytest.raises(SchemaError, match=r"lacks the numeric column\(s\) \['Z'\]"):
        evaluate(df, df, numeric_columns=["Z"])


# --- report and command line ------------------------------------------------------------------------------------


def test_report_has_the_numeric_and_empty_column_sections(spark):
    sensitive, synthetic = _frames(spark, True)
    prepared = sensitive.select(*[sensitive[c].cast("string") for c in sensitive.columns])
    m = evaluate(prepared, synthetic.select(*prepared.columns), max_marginal_length=2, typed_sensitive=sensitive,
                 typed_synthetic=synthetic)  # fmt: skip
    m["empty_columns"] = [
        {"column": "name", "sensitive_empty_share": 0.0, "synthetic_empty_share": 1.0, "binned": False,
         "advice": "leave it out ([data] columns)"}
    ]  # fmt: skip
    page = render_report(m)
    assert re.findall(r'<img id="([^"]+)"', page) == [
        "plot-worth",
        "plot-tvd-heatmap",
        "plot-one-way-worst",
        "plot-numeric-cdf",
        "plot-numeric-correlation",
    ]
    numeric = re.search(r'<section id="numeric">.*?</section>', page, re.S).group(0)
    assert "Kolmogorov-Smirnov" in numeric and "percentile_approx, accuracy 10,000" in numeric
    for column in ("age", "income"):
        assert f"<td>{column}</td><td>{m['numeric']['by_column'][column]['ks']:.4f}</td>" in numeric
    assert f"Frobenius norm {m['numeric']['correlation']['frobenius_norm']:.4f}" in numeric
    empty = re.search(r'<section id="empty-columns">.*?</section>', page, re.S).group(0)
    assert (
        "<li>name: 100.0% of synthetic cells empty (sensitive 0.0%): leave it out ([data] columns)</li>"
        in empty
    )
    keys = [key for key, _, _, _ in headline_numbers(m)]
    assert "numeric.correlation.frobenius_norm" in keys and "numeric.correlation.max_abs_difference" in keys


def test_cli_summary_lists_empty_columns_and_worst_numeric_columns():
    from spark_dpsynth.cli._summary import summary as _summary

    release = _release(100, epsilon=1.0, delta=1e-6, rho=0.01, sensitivities={"1": 1, "2": 1})
    text = _summary(release, None, "/tmp/out")  # after `aggregate`: the public, release-based check alone
    lines = [line for line in text.splitlines() if "EMPTY COLUMN" in line]
    assert [line.split()[2] for line in lines] == ["B:", "C:"]
    assert "leave it out ([data] columns)" in lines[0]
