"""Tests of the evaluation's yardstick (own values, sensitive deciles, out-of-support values) and of its uniform
row sample with the real-vs-real floor (docs/design.md sections 5.2 and 5.5)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from spark_dpsynth.evaluation.metrics import RowSampling, evaluate


def strings(df):
    return df.select(*(df[c].cast("string").alias(c) for c in df.columns))


def tvd(p: pd.DataFrame, q: pd.DataFrame, cols: list[str]) -> float:
    a = p.value_counts(cols, normalize=True, dropna=False)
    b = q.value_counts(cols, normalize=True, dropna=False)
    return float(0.5 * a.sub(b, fill_value=0).abs().sum())


def test_codes_are_compared_on_their_own_values_and_unseen_codes_count(spark):
    # An integer code column: a synthetic 4399 (never in the sensitive column) is a mismatch, and counted.
    sens = pd.DataFrame({"code": [0, 0, 1, 1, 1, 2, 2, 2, 2, 2], "s": list("aabbbbbbba")})
    syn = pd.DataFrame({"code": [0, 4399, 1, 1, 2, 2, 2, 2, 4399, 9], "s": list("aabbbcbbba")})
    s_df, y_df = spark.createDataFrame(sens), spark.createDataFrame(syn)
    m = evaluate(strings(s_df), strings(y_df), typed_sensitive=s_df, typed_synthetic=y_df, numeric_columns=[])
    assert m["yardstick"]["columns"]["code"]["rule"] == "values"
    assert m["tvd_by_subset"]["1"]["code"] == pytest.approx(tvd(sens, syn, ["code"]), abs=1e-12) == 0.3
    assert m["tvd_by_subset"]["2"]["code|s"] == pytest.approx(tvd(sens, syn, ["code", "s"]), abs=1e-12)
    out = m["out_of_support"]["by_column"]
    assert (out["code"]["count"], out["code"]["share"]) == (3, 0.3)
    assert (out["s"]["count"], out["s"]["share"]) == (1, 0.1)
    assert m["out_of_support"]["count"] == 4 and m["out_of_support"]["columns"] == ["code", "s"]


def test_synthetic_values_are_read_in_the_input_type(spark):
    # A whole double 2.0 in an integer column is the code 2; 2.5 and a bin label are values that never occur.
    s_df = spark.createDataFrame([(0,), (1,), (2,), (2,)], "code int")
    y_df = spark.createDataFrame([("2.0",), ("2",), ("2.5",), ("[0, 3)",)], "code string")
    m = evaluate(strings(s_df), strings(y_df), typed_sensitive=s_df, typed_synthetic=y_df, numeric_columns=[])
    # sensitive 0: .25, 1: .25, 2: .5; synthetic 2: .5, two unseen values: .25 each
    assert m["tvd"]["1"]["mean"] == pytest.approx(0.5)
    assert m["out_of_support"]["by_column"]["code"]["count"] == 2


def test_numbers_are_binned_on_the_sensitive_deciles_and_out_of_range_counts(spark):
    rng = np.random.default_rng(3)
    sens = pd.DataFrame({"x": np.arange(1000, dtype=float)})  # 1,000 distinct values: deciles 99, 199, ...
    y = rng.uniform(0, 999, 1000)
    y[:50] = -5.0  # below the sensitive minimum: the first bin, and counted
    y[50:80] = 1e12  # above the maximum: the last bin, and counted
    syn = pd.DataFrame({"x": y})
    s_df, y_df = spark.createDataFrame(sens), spark.createDataFrame(syn)
    m = evaluate(strings(s_df), strings(y_df), typed_sensitive=s_df, typed_synthetic=y_df, numeric_columns=[])
    rule = m["yardstick"]["columns"]["x"]
    assert rule["rule"] == "bins" and rule["edges"] == [
        99.0,
        199.0,
        299.0,
        399.0,
        499.0,
        599.0,
        699.0,
        799.0,
        899.0,
    ]
    edges = np.array(rule["edges"])
    p = pd.Series(np.searchsorted(edges, sens["x"], side="right")).value_counts(normalize=True)
    q = pd.Series(np.searchsorted(edges, y, side="right")).value_counts(normalize=True)
    assert m["tvd"]["1"]["mean"] == pytest.approx(0.5 * p.sub(q, fill_value=0).abs().sum(), abs=1e-12)
    assert m["out_of_support"]["by_column"]["x"]["count"] == 80


def test_numbers_written_as_text_are_binned_and_their_text_values_compared(spark):
    # an income as text: 1,000 numbers and 250 "N"; the synthetic has numbers out of range, an "N" share of its
    # own and a text the input never holds: binned on the deciles of the numbers, "N" a cell of its own, the
    # out-of-range numbers and the unseen text counted; the same rule as the benchmark's outside yardstick
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from yardstick import mean_tvd, outside_shares

    rng = np.random.default_rng(5)
    sens = pd.DataFrame({"income": [f"{float(v):.1f}" for v in range(1000)] + ["N"] * 250})
    y = [f"{float(v):.1f}" for v in rng.uniform(0, 999, 1000).round()] + ["N"] * 200
    y[:40] = ["-5.0"] * 20 + ["1e12"] * 20  # numbers outside the range
    y[40:50] = ["n/a"] * 10  # a text the input never holds
    syn = pd.DataFrame({"income": y})
    # a code written as text (nine numbers): compared on its own values, as a category
    sens["code"] = [str(v % 9 + 1) for v in range(len(sens))]
    syn["code"] = [str(v % 7 + 1) for v in range(len(syn))]
    s_df, y_df = spark.createDataFrame(sens), spark.createDataFrame(syn)
    m = evaluate(s_df, y_df, typed_sensitive=s_df, typed_synthetic=y_df, numeric_columns=[])
    rule = m["yardstick"]["columns"]["income"]
    assert rule["rule"] == "bins" and rule["text"] and len(rule["edges"]) == 9
    assert m["yardstick"]["columns"]["code"] == {
        "rule": "values",
        "kind": "category",
        "why": "string or boolean: the input's own values",
    }
    assert m["out_of_support"]["by_column"]["income"]["count"] == 50
    outside = outside_shares(sens, syn)["by_column"]["income"]
    assert outside * len(syn) == pytest.approx(50)
    assert m["tvd"]["1"]["mean"] == pytest.approx(mean_tvd(sens, syn, lengths=(1,))["1"]["mean"], abs=0.01)


def test_public_bins_are_used_and_a_release_does_not_change_the_figures(spark):
    from spark_dpsynth.release.core import Release

    rng = np.random.default_rng(5)
    sens = pd.DataFrame({"x": rng.normal(50, 10, 300), "c": rng.choice(["a", "b"], 300)})
    syn = pd.DataFrame({"x": rng.normal(55, 10, 300), "c": rng.choice(["a", "b"], 300)})
    s_df, y_df = spark.createDataFrame(sens), spark.createDataFrame(syn)
    public = {"x": [40.0, 60.0]}
    base = evaluate(strings(s_df), strings(y_df), typed_sensitive=s_df, typed_synthetic=y_df, bins=public)
    assert base["yardstick"]["columns"]["x"]["edges"] == [40.0, 60.0]
    cut = lambda v: np.searchsorted([40.0, 60.0], v, side="right")  # noqa: E731
    expected = tvd(pd.DataFrame({"x": cut(sens["x"])}), pd.DataFrame({"x": cut(syn["x"])}), ["x"])
    assert base["tvd_by_subset"]["1"]["x"] == pytest.approx(expected, abs=1e-12)
    # The prepared tables on a release's bins (here: coarse labels) feed SDS's evaluator only, never the TVDs.
    binned = lambda df: df.assign(x=np.where(df["x"] < 50, "[0, 50)", "[50, 100)"))  # noqa: E731
    s_prep, y_prep = spark.createDataFrame(binned(sens)), spark.createDataFrame(binned(syn))
    one_way = [
        (1, [c], [v], int(n)) for c in ("x", "c") for (v,), n in binned(sens)[[c]].value_counts().items()
    ]
    manifest = {"columns": ["x", "c"], "reporting_length": 1, "protected_number_of_records": 1}
    release = Release.from_pandas(
        pd.DataFrame(one_way, columns=["k", "columns", "values", "count"]), manifest
    )
    with_release = evaluate(
        s_prep, y_prep, release, typed_sensitive=s_df, typed_synthetic=y_df, bins=public, numeric_columns=[]
    )
    for key in ("tvd", "tvd_by_subset", "out_of_support", "yardstick", "one_way_worst"):
        assert with_release[key] == base[key]
    assert with_release["sds"]["synthetic"]["by_length"]["1"]["true_tuples"] == 4


def test_the_row_sample_is_uniform_on_repeated_records(spark):
    # 4,000 copies of one record and 4,000 distinct ones: a hash of the values keeps all copies or none; a
    # uniform sample keeps about the rate of each. Rate 0.25: 1,000 copies expected, sd about 27; tolerance 150.
    rows = [("same", 0)] * 4000 + [("other", i) for i in range(4000)]
    df = spark.createDataFrame(rows, "v string, i int").repartition(3)
    sampling = RowSampling(2000, seed=11)
    sample = sampling.sample("sensitive", df, 8000)
    copies = sample.where("v = 'same'").count()
    assert abs(copies - 1000) < 150
    assert abs(sample.count() - 2000) < 200
    floor = sampling.floor("sensitive")
    assert floor is not None and abs(floor.where("v = 'same'").count() - 1000) < 150
    # disjoint from the compared sample: no distinct record in both
    both = sample.where("v = 'other'").join(floor.where("v = 'other'"), "i").count()
    assert both == 0
    again = RowSampling(2000, seed=11).sample("sensitive", df, 8000)
    assert sorted(map(tuple, again.collect())) == sorted(map(tuple, sample.collect()))
    other_seed = RowSampling(2000, seed=12).sample("sensitive", df, 8000)
    assert sorted(map(tuple, other_seed.collect())) != sorted(map(tuple, sample.collect()))
    sampling.unpersist()


def test_sampled_evaluation_states_the_floor_beside_each_length(spark):
    rng = np.random.default_rng(2)
    # repeated records: 40 distinct records, each 100 times
    base = pd.DataFrame(rng.integers(0, 3, size=(40, 3)), columns=list("ABC"))
    sens = pd.concat([base] * 100, ignore_index=True)
    s_df = spark.createDataFrame(sens).repartition(2)
    m = evaluate(
        strings(s_df), strings(s_df), typed_sensitive=s_df, typed_synthetic=s_df, max_rows=800, seed=4
    )
    for k in ("1", "2", "3"):
        t = m["tvd"][k]
        assert t["floor_measured"] is not None and t["floor"] > 0
        # a table against itself, both sampled independently: the TVD is about the floor, not 0
        assert 0 < t["mean"] < 4 * t["floor"] and t["floor_measured"] < 4 * t["floor"]
    assert m["out_of_support"]["count"] == 0 and m["row_sampling"]["sensitive"]["sampled"]


def test_floor_matches_the_expected_tvd_of_two_samples(spark):
    # Two independent samples of one 4-cell distribution: the analytic floor is their mean TVD.
    rng = np.random.default_rng(9)
    p = np.array([0.4, 0.3, 0.2, 0.1])
    tvds = [
        0.5 * np.abs(rng.multinomial(500, p) / 500 - rng.multinomial(500, p) / 500).sum() for _ in range(4000)
    ]
    s_df = spark.createDataFrame(pd.DataFrame({"a": np.repeat(np.arange(4), (p * 500).astype(int))}))
    m = evaluate(strings(s_df), strings(s_df), typed_sensitive=s_df, typed_synthetic=s_df)
    assert m["tvd"]["1"]["mean"] == 0 and m["tvd"]["1"]["floor"] == pytest.approx(np.mean(tvds), rel=0.05)


def test_real_sample_records_inverts_the_expected_tvd():
    from spark_dpsynth.evaluation.tvd import expected_sample_tvd, real_sample_records

    spreads, rows = [1.2, 3.5, 0.4], [10_000, 10_000, 9_000]
    for m in (3, 250, 41_700, 2_000_000):
        assert real_sample_records(expected_sample_tvd(m, spreads, rows), spreads, rows) == m
    assert real_sample_records(expected_sample_tvd(math.inf, spreads, rows), spreads, rows) is None
    assert real_sample_records(0.99, spreads, rows) == 1
    assert real_sample_records(0.2, [0.0], [5]) is None  # a single cell: no sampling error at all
    # a sampled synthetic table: its sample's own error is not held against it
    sampled = [1_000_000] * 3
    assert (
        real_sample_records(expected_sample_tvd(65_000, spreads, rows, sampled), spreads, rows, sampled)
        == 65_000
    )
    assert real_sample_records(expected_sample_tvd(65_000, spreads, rows), spreads, rows, sampled) > 65_000


def test_summary_line_says_what_the_synthetic_table_is_worth():
    from spark_dpsynth.evaluation.metrics import describe_real_sample

    tvd = {
        "1": {"mean": 0.001, "real_sample_records": None},
        "2": {"mean": 0.02, "real_sample_records": 43_100},
    }
    assert describe_real_sample({"tvd": tvd}) == "1-way within sampling error / 2-way 43,100 records"
    assert (
        describe_real_sample({"tvd": {"1": {"mean": 0.1, "floor": 0.01}}}) is None
    )  # metrics of older versions


def test_synthetic_data_drawn_like_a_real_sample_is_worth_about_its_size(spark):
    # The "synthetic" table is 500 independent draws from the shares of a 40,000-row table: what it is worth
    # in real records is about 500 (8 columns of 10 values: the mean TVD's own spread is about 7%).
    rng = np.random.default_rng(4)
    p = rng.dirichlet(np.ones(10))
    sens = pd.DataFrame(
        {f"c{j}": np.repeat(np.arange(10), np.round(p * 40_000).astype(int))[:40_000] for j in range(8)}
    )
    syn = pd.DataFrame({f"c{j}": rng.choice(10, size=500, p=p) for j in range(8)})
    s_df, y_df = spark.createDataFrame(sens), spark.createDataFrame(syn)
    m = evaluate(
        strings(s_df),
        strings(y_df),
        typed_sensitive=s_df,
        typed_synthetic=y_df,
        numeric_columns=[],
        max_marginal_length=1,
    )
    assert 350 <= m["tvd"]["1"]["real_sample_records"] <= 700


@pytest.mark.parametrize("k", [1, 2])
def test_mean_tvd_matches_pandas_on_own_values(spark, k):
    rng = np.random.default_rng(k)
    sens = pd.DataFrame(rng.integers(0, 4, size=(200, 3)), columns=list("ABC"))
    syn = pd.DataFrame(rng.integers(0, 5, size=(150, 3)), columns=list("ABC"))
    s_df, y_df = spark.createDataFrame(sens), spark.createDataFrame(syn)
    m = evaluate(strings(s_df), strings(y_df), typed_sensitive=s_df, typed_synthetic=y_df, numeric_columns=[])
    expected = np.mean([tvd(sens, syn, list(s)) for s in itertools.combinations("ABC", k)])
    assert m["tvd"][str(k)]["mean"] == pytest.approx(expected, abs=1e-12)


def test_report_shows_out_of_support_values_and_the_floor(spark):
    from spark_dpsynth.evaluation.report import render_report

    s_df = spark.createDataFrame([(0,), (1,), (1,), (0,)], "income int")
    y_df = spark.createDataFrame([(0,), (4399,), (1,), (0,)], "income int")
    m = evaluate(strings(s_df), strings(y_df), typed_sensitive=s_df, typed_synthetic=y_df, numeric_columns=[])
    page = render_report(m)
    assert (
        "Out-of-support values" in page
        and "<td>income</td><td>never in the sensitive column</td><td>1</td>" in page
    )
    assert "Sampling error." in page and f"floor {m['tvd']['1']['floor']:.4f}" in page
    assert "Worth in real records." in page and 'id="plot-worth"' in page
