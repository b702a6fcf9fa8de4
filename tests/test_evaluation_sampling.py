"""Tests of the bounded evaluation of wide tables: seeded, public samples of the column subsets per length."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from spark_dpsynth.errors import ConfigError, InvalidParameterError
from spark_dpsynth.evaluation.cells import SubsetPlan, sample_subsets
from spark_dpsynth.evaluation.metrics import MAX_SUBSETS, describe_sampling, evaluate
from spark_dpsynth.evaluation.report import headline_numbers, render_report
from spark_dpsynth.release.core import Release

COLUMNS = tuple("ABCDEFG")


def frame(seed: int, n: int = 120) -> pd.DataFrame:
    """A 7-column table of small categorical values, about 10% empty (None)."""
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 3, size=(n, len(COLUMNS))).astype(str).astype(object)
    values[rng.random(values.shape) < 0.1] = None
    return pd.DataFrame(values, columns=list(COLUMNS))


def spark_table(spark, pdf: pd.DataFrame, partitions: int = 1):
    schema = ", ".join(f"{c} string" for c in pdf.columns)
    rows = [tuple(r) for r in pdf.itertuples(index=False)]
    return spark.createDataFrame(rows, schema=schema).repartition(partitions)


@pytest.mark.parametrize(("d", "k", "size"), [(7, 3, 10), (76, 3, 2000), (30, 2, 400), (200, 3, 50)])
def test_sample_subsets_is_seeded_distinct_sorted_and_public(d, k, size):
    first = sample_subsets(d, k, size, seed=5)
    assert first == sample_subsets(d, k, size, seed=5)
    assert first != sample_subsets(d, k, size, seed=6)
    assert len(first) == size == len(set(first))
    assert first == sorted(first)
    assert all(len(s) == k and list(s) == sorted(set(s)) and 0 <= s[0] and s[-1] < d for s in first)


def test_sample_subsets_covers_all_when_the_bound_is_not_below_the_count():
    assert sample_subsets(5, 2, 10, seed=1) == list(itertools.combinations(range(5), 2))
    assert sample_subsets(5, 2, 99, seed=1) == list(itertools.combinations(range(5), 2))


def test_sample_subsets_draws_every_subset_about_equally():
    # C(6, 2) = 15 subsets, 5 per draw: each has probability 1/3 per seed.
    hits = dict.fromkeys(itertools.combinations(range(6), 2), 0)
    for seed in range(600):
        for s in sample_subsets(6, 2, 5, seed):
            hits[s] += 1
    assert min(hits.values()) > 150 and max(hits.values()) < 250  # expectation 200, sd about 11.5


def test_plan_keeps_every_one_column_subset_and_only_needed_prefixes():
    plan = SubsetPlan(76, all_cells_length=3, max_length=3, max_subsets=2000, seed=0)
    assert plan.sampled == {1: False, 2: True, 3: True}
    assert plan.totals == {1: 76, 2: 2850, 3: 70300}
    assert [len(plan.of_length(k)) for k in (1, 2, 3)] == [76, 2000, 2000]
    children = plan.children()
    for s in plan.of_length(3):
        assert s[2] in children[s[:2]] and s[1] in children[s[:1]]
    prefixes = {p for p in children if len(p) == 2}
    assert prefixes == {s[:2] for s in plan.of_length(3)}
    full = SubsetPlan(7, all_cells_length=3, max_length=3, max_subsets=0)
    assert not any(full.sampled.values())
    assert len(full.subsets) == 7 + 21 + 35


def release_of(pdf: pd.DataFrame, reporting_length: int) -> Release:
    """The exact (noise-free) aggregates of ``pdf`` as a release, for SDS's evaluator."""
    rows = []
    for k in range(1, reporting_length + 1):
        for cols in itertools.combinations(COLUMNS, k):
            counts = pdf[list(cols)].dropna().value_counts()
            rows += [(k, list(cols), list(v), int(n)) for v, n in counts.items()]
    manifest = {
        "columns": list(COLUMNS),
        "reporting_length": reporting_length,
        "protected_number_of_records": 1,
    }
    return Release.from_pandas(pd.DataFrame(rows, columns=["k", "columns", "values", "count"]), manifest)


def test_sampled_evaluation_states_the_sample_and_matches_the_full_one(spark):
    sens_pdf, syn_pdf = frame(1), frame(2, n=90)
    sensitive, synthetic = spark_table(spark, sens_pdf), spark_table(spark, syn_pdf)
    release = release_of(sens_pdf.iloc[:100], 2)
    full = evaluate(sensitive, synthetic, release, max_subsets=0)
    sampled = evaluate(sensitive, synthetic, release, max_subsets=10, subset_seed=3)

    assert full["subset_sampling"]["sampled"] == {"1": False, "2": False, "3": False}
    assert sampled["subset_sampling"]["sampled"] == {"1": False, "2": True, "3": True}
    assert sampled["subset_sampling"]["compared"] == {"1": 7, "2": 10, "3": 10}
    assert sampled["subset_sampling"]["total"] == {"1": 7, "2": 21, "3": 35}
    for length, total in (("2", 21), ("3", 35)):
        t = sampled["tvd"][length]
        assert (t["count"], t["subsets_total"], t["sampled"]) == (10, total, True)
        chosen = [tuple(s) for s in t["subsets"]]
        assert chosen == sample_subsets(7, int(length), 10, seed=3)
        # Each sampled subset's TVD is the full evaluation's, and the mean is over the sample.
        names = ["|".join(COLUMNS[c] for c in s) for s in chosen]
        assert list(sampled["tvd_by_subset"][length]) == names
        assert sampled["tvd_by_subset"][length] == {n: full["tvd_by_subset"][length][n] for n in names}
        assert t["mean"] == pytest.approx(
            np.mean([full["tvd_by_subset"][length][n] for n in names]), abs=1e-15
        )
    assert sampled["tvd"]["1"] == full["tvd"]["1"] and "sampled" not in full["tvd"]["3"]
    assert sampled["k_marginal_score"] == pytest.approx(1000 * (1 - sampled["tvd"]["3"]["mean"]))
    # Row counts, blank shares and 1-way results never depend on the sample.
    for key in ("rows", "blank_cell_share", "empty_share_by_column", "one_way_worst"):
        assert sampled[key] == full[key]
    # SDS's evaluator of length 2 is over the sampled pairs: the true tuples of those pairs only.
    pairs = [tuple(s) for s in sampled["tvd"]["2"]["subsets"]]
    true_pairs = sum(len(sens_pdf[[COLUMNS[a], COLUMNS[b]]].dropna().drop_duplicates()) for a, b in pairs)
    assert sampled["sds"]["synthetic"]["by_length"]["2"]["true_tuples"] == true_pairs
    assert full["sds"]["synthetic"]["by_length"]["2"]["true_tuples"] > true_pairs
    assert sampled["sds"]["release"]["by_length"]["1"] == full["sds"]["release"]["by_length"]["1"]

    lines = describe_sampling(sampled)
    assert lines == [
        "2-way: mean over 10 of 21 2-column subsets, sampled (seed 3)",
        "3-way: mean over 10 of 35 3-column subsets, sampled (seed 3)",
    ]
    assert describe_sampling(full) == []
    page = render_report(sampled)
    assert "Sampled column subsets" in page and "mean over 10 of 35 3-column subsets, sampled" in page
    assert "10 of 35, sampled" in page
    labels = [label for _, label, _, _ in headline_numbers(sampled)]
    assert "mean 3-way TVD (over 10 of 35 subsets, sampled)" in labels
    assert "Sampled column subsets" not in render_report(full)


def test_sampled_evaluation_does_not_depend_on_partitions(spark):
    sens_pdf, syn_pdf = frame(4), frame(5, n=150)
    reference = evaluate(spark_table(spark, sens_pdf, 1), spark_table(spark, syn_pdf, 1), max_subsets=8)
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    previous = spark.conf.get(key)
    spark.conf.set(key, "7")
    try:
        split = evaluate(spark_table(spark, sens_pdf, 3), spark_table(spark, syn_pdf, 4), max_subsets=8)
    finally:
        spark.conf.set(key, previous)
    assert split == reference
    assert reference["tvd"]["3"]["sampled"] and reference["tvd"]["3"]["count"] == 8


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_subsets": -1}, "max_subsets must be >= 0, got -1"),
        ({"max_subsets": 2.5}, "max_subsets must be an integer"),
        ({"subset_seed": "1"}, "subset_seed must be an integer"),
    ],
)
def test_sampling_parameters_are_validated(spark, kwargs, match):
    t = spark_table(spark, frame(1, n=5))
    with pytest.raises(InvalidParameterError, match=match):
        evaluate(t, t, **kwargs)


def test_sampling_config_keys_and_cli_options():
    from spark_dpsynth.cli.main import build_parser, load_job_config
    from spark_dpsynth.config import parse_config

    default = parse_config({})
    assert (default.max_subsets, default.subset_seed) == (MAX_SUBSETS, 0) == (2000, 0)
    config = parse_config({"evaluate": {"max_subsets": 500, "subset_seed": -7}})
    assert (config.max_subsets, config.subset_seed) == (500, -7)
    for table, match in (
        ({"max_subsets": -1}, r"\[evaluate\] max_subsets must be an integer >= 0, got -1"),
        ({"max_subsets": True}, r"\[evaluate\] max_subsets must be an integer"),
        ({"subset_seed": 1.5}, r"\[evaluate\] subset_seed must be an integer, got 1.5"),
    ):
        with pytest.raises(ConfigError, match=match):
            parse_config({"evaluate": table})
    for command in ("pipeline", "evaluate"):
        args = build_parser().parse_args([command, "--max-subsets", "300", "--subset-seed", "9"])
        config = load_job_config(args)
        assert (config.max_subsets, config.subset_seed) == (300, 9)


# ------------------------------------------------------------------------------------- sampled rows (max_rows)


def test_row_sampling_states_the_sample_and_keeps_the_table_sizes(spark):
    from spark_dpsynth.evaluation.metrics import MAX_ROWS, describe_row_sampling

    assert MAX_ROWS == 1_000_000
    sens_pdf, syn_pdf = frame(7, n=2000), frame(8, n=1500)
    sensitive, synthetic = spark_table(spark, sens_pdf, 2), spark_table(spark, syn_pdf, 3)
    release = release_of(sens_pdf.iloc[:100], 2)
    full = evaluate(sensitive, synthetic, release, max_marginal_length=2)
    assert full["row_sampling"]["sampled"] is False and full["row_sampling"]["sds_skipped"] is None
    assert full["sds"] is not None and describe_row_sampling(full) == []
    sampled = evaluate(sensitive, synthetic, release, max_marginal_length=2, max_rows=500, seed=3)
    rows = sampled["row_sampling"]
    # The release's n' (100 records here) is below the bound: the sensitive table is compared whole.
    assert rows["sensitive"] == {
        "sampled": False, "rate": 1.0, "rows": 2000, "rows_compared": 2000, "cdf_error_95": 0.0
    }  # fmt: skip
    syn = rows["synthetic"]
    assert syn["sampled"] and syn["rate"] == pytest.approx(500 / 1500) and syn["rows"] == 1500
    assert 350 < syn["rows_compared"] < 650  # Bernoulli(1/3) of 1,500 rows: sd about 18
    assert syn["cdf_error_95"] == pytest.approx(np.sqrt(np.log(40) / (2 * syn["rows_compared"])))
    # Sizes are the tables' (observed in the same pass); SDS's evaluator is skipped and says why.
    assert sampled["rows"] == {"sensitive": 2000, "synthetic": 1500}
    assert sampled["sds"] is None and "exact tuple counts" in rows["sds_skipped"]
    assert abs(sampled["tvd"]["1"]["mean"] - full["tvd"]["1"]["mean"]) < 0.05
    assert describe_row_sampling(sampled) == [
        f"synthetic table: {syn['rows_compared']:,} of 1,500 rows compared (a seeded uniform sample, max_rows 500)"
    ]
    assert "Sampled rows" in render_report(sampled) and "Sampled rows" not in render_report(full)
    # Without a release the sensitive table is counted, and sampled too. The uniform sample is drawn per input
    # partition (rand): the same rows on a re-run of the same partitioning (design 5.5).
    again = evaluate(spark_table(spark, sens_pdf, 2), spark_table(spark, syn_pdf, 3), max_rows=500, seed=3)
    assert again == evaluate(
        spark_table(spark, sens_pdf, 2), spark_table(spark, syn_pdf, 3), max_rows=500, seed=3
    )
    assert again["row_sampling"]["sensitive"]["sampled"] and again["rows"]["sensitive"] == 2000
    with pytest.raises(InvalidParameterError, match="max_rows must be >= 0, got -1"):
        evaluate(sensitive, synthetic, max_rows=-1)


def test_row_sampling_config_key():
    from spark_dpsynth.config import parse_config

    assert parse_config({}).max_rows == 1_000_000
    assert parse_config({"evaluate": {"max_rows": 0}}).max_rows == 0
    with pytest.raises(ConfigError, match=r"\[evaluate\] max_rows must be an integer >= 0, got -5"):
        parse_config({"evaluate": {"max_rows": -5}})


def test_rows_sampled_before_preparing_are_read_once_and_match_the_numeric_rows(spark):
    """``RowSampling.sample`` on the raw tables (the CLI's path): the same rows on a re-run with the same
    partitioning, the cell counts and the numeric metrics of the same rows, the sizes exact, and nothing changes
    under the bound."""
    from pyspark.sql import functions as F

    from spark_dpsynth.evaluation.metrics import RowSampling

    def raw(pdf: pd.DataFrame, partitions: int):
        # a raw table: the attributes, a numeric column (as the input holds it) and a column not evaluated
        table = spark_table(spark, pdf, partitions)
        return table.withColumn(
            "x", F.length(F.coalesce(F.col("A"), F.lit(""))) + F.hash("B") % 7
        ).withColumn("unused", F.lit("u"))

    def run(partitions: tuple[int, int], max_rows: int, pre: bool):
        sens, syn = raw(frame(7, n=2000), partitions[0]), raw(frame(8, n=1500), partitions[1])
        sampling = None
        if pre:
            sampling = RowSampling(max_rows, seed=3)
            sens = sampling.sample("sensitive", sens, 1800, columns=[*COLUMNS, "x"])
            syn = sampling.sample("synthetic", syn)
        typed_s, typed_y = sens.select("x"), syn.select("x")
        metrics = evaluate(
            sens.select(*COLUMNS),
            syn.select(*COLUMNS),
            max_marginal_length=2,
            max_rows=max_rows,
            seed=3,
            numeric_columns=["x"],
            typed_sensitive=typed_s,
            typed_synthetic=typed_y,
            row_sampling=sampling,
        )
        metrics["numeric"].pop("seconds")  # wall time
        return metrics

    # Under the bound: the figures are those of the tables prepared and compared whole.
    assert run((2, 3), 0, pre=True) == run((2, 3), 0, pre=False)
    first, split = run((4, 2), 500, pre=True), run((4, 2), 500, pre=True)
    # The same rows on a re-run (the numeric moments up to the order of floating-point sums).
    numeric, numeric_split = first.pop("numeric"), split.pop("numeric")
    assert first == split
    for side in ("sensitive", "synthetic"):
        a, b = numeric["by_column"]["x"][side], numeric_split["by_column"]["x"][side]
        assert a["rows"] == b["rows"] and a["min"] == b["min"] and a["max"] == b["max"]
        assert a["mean"] == pytest.approx(b["mean"], rel=1e-12) and a["std"] == pytest.approx(
            b["std"], rel=1e-12
        )
    assert numeric["by_column"]["x"]["ks"] == numeric_split["by_column"]["x"]["ks"]
    rows = first["row_sampling"]
    assert rows["sampled"] and "before preparing" in rows["method"]
    # The sensitive rate comes from the given size (1,800, a release's n'); the sizes are observed exactly.
    assert rows["sensitive"]["rate"] == pytest.approx(500 / 1800) and rows["synthetic"][
        "rate"
    ] == pytest.approx(1 / 3)
    assert first["rows"] == {"sensitive": 2000, "synthetic": 1500}
    assert 400 < rows["sensitive"]["rows_compared"] < 720 and 400 < rows["synthetic"]["rows_compared"] < 620
    # The numeric metrics counted the very rows the cells counted.
    stats = numeric["by_column"]["x"]
    assert stats["sensitive"]["rows"] == rows["sensitive"]["rows_compared"]
    assert stats["synthetic"]["rows"] == rows["synthetic"]["rows_compared"]
    sampling = RowSampling(10, seed=0)
    with pytest.raises(InvalidParameterError, match="side must be"):
        sampling.sample("holdout", spark_table(spark, frame(1), 1))
    with pytest.raises(InvalidParameterError, match="max_rows must be >= 0"):
        RowSampling(-1)
    with pytest.raises(InvalidParameterError, match="row_sampling must be a RowSampling"):
        evaluate(spark_table(spark, frame(1), 1), spark_table(spark, frame(2), 1), row_sampling=object())
