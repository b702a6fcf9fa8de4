"""The class-conditional synthesizer (seed 002), fixed: independent noise per bin, full public domain."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from spark_dpsynth.errors import InvalidParameterError, SchemaError
from spark_dpsynth.mechanisms.class_conditional import (
    ClassConditionalParams,
    fit_class_conditional,
    noisy_histogram,
)
from spark_dpsynth.params import BinSpec, DataConfig
from spark_dpsynth.privacy.accounting import Accountant
from spark_dpsynth.privacy.budget import Budget
from spark_dpsynth.privacy.noise import CryptographicNoise, NoNoise
from spark_dpsynth.synthesizers.class_conditional import (
    EMPTY,
    EMPTY_ETA,
    ClassConditionalModel,
    sample_class_conditional,
)

# Seed 002, section 1: the toy table.
TOY = [
    ("blue", "low", "<=50K"),
    ("blue", "low", "<=50K"),
    ("white", "high", ">50K"),
    ("white", "high", ">50K"),
    ("blue", "high", "<=50K"),
    ("white", "low", ">50K"),
]
TOY_DOMAINS = {"job": ("blue", "white"), "education": ("high", "low"), "income": ("<=50K", ">50K")}


@pytest.fixture(scope="module")
def toy(spark):
    return spark.createDataFrame(TOY, "job string, education string, income string")


def _laplace_share(scale: float, parts: int) -> Accountant:
    """An accountant whose share ``h`` pays for ``parts`` discrete Laplace draws of scale ``scale`` at L1
    sensitivity 1 (epsilon 1 / scale each), from the production source."""
    acct = Accountant(Budget(1.0), noise=CryptographicNoise())
    acct.spend_epsilon("h", 1.0 / scale, "discrete Laplace", parts=parts)
    return acct


def test_noise_is_independent_per_bin_across_1000_releases() -> None:
    """The seed's notebook adds one scalar draw to every bin; here no two bins share a draw (1,000 releases)."""
    counts = np.full((6, 2), 10_000, dtype=np.int64)  # far from 0: no clipping, noise = output - count
    acct = _laplace_share(4.0, 1000)
    draws = np.stack([noisy_histogram(counts, acct, "h", 1).ravel() - 10_000 for _ in range(1000)])
    for i in range(draws.shape[1]):
        for j in range(i + 1, draws.shape[1]):
            assert not np.array_equal(draws[:, i], draws[:, j])
            # Independent: |correlation| below 0.2 (std 1/sqrt(1000) = 0.032; false-positive rate ~1e-9).
            assert abs(np.corrcoef(draws[:, i], draws[:, j])[0, 1]) < 0.2
    assert 0.8 * np.sqrt(2) * 4.0 < draws.std() < 1.2 * np.sqrt(2) * 4.0  # discrete Laplace std ~ sqrt(2) b


def test_zero_count_domain_bins_are_released_with_noise() -> None:
    counts = np.zeros((3, 2), dtype=np.int64)
    acct = _laplace_share(2.0, 300)
    outs = np.stack([noisy_histogram(counts, acct, "h", 1) for _ in range(300)])
    assert (
        outs > 0
    ).mean() > 0.2  # a zero bin is positive ~ 1/(2 (1 + ...)) of the time, never silently absent
    assert (outs >= 0).all()


def test_seed_toy_table_post_processing_exact_with_noise_off(spark, toy) -> None:
    params = ClassConditionalParams(label="income", domains=TOY_DOMAINS)
    budget = Budget(epsilon=1.0, seed=0)
    model, release = fit_class_conditional(toy, params, DataConfig(), noise=NoNoise(), budget=budget)
    e = model.domains["job"].index(EMPTY)
    assert model.histograms["job"][:e, :2].tolist() == [[3, 0], [0, 3]]
    assert model.histograms["education"][:2, :2].tolist() == [[1, 2], [2, 1]]  # high, low x <=50K, >50K
    assert model.protected_number_of_records == 6
    assert model.class_totals()[:2].tolist() == [6, 6]
    n_c, targets = model.target_counts(6)
    assert n_c[:2].tolist() == [3, 3]
    assert targets["education"][:2, :2].tolist() == [[1, 2], [2, 1]]
    for partitions in (1, 3):
        rows = [
            tuple(r) for r in sample_class_conditional(model, spark, partitions=partitions, seed=4).collect()
        ]
        assert len(rows) == 6
        assert Counter((r[0], r[2]) for r in rows) == {("blue", "<=50K"): 3, ("white", ">50K"): 3}
        assert Counter((r[1], r[2]) for r in rows) == {
            ("low", "<=50K"): 2, ("high", "<=50K"): 1, ("high", ">50K"): 2, ("low", ">50K"): 1,
        }  # fmt: skip
    # The release has the main path's format: (attribute, label) pairs and 1-tuples, normalized.
    counts = release.counts_by_tuple()
    assert counts[((0, 0), (2, 0))] == 3 and release.reporting_length == 2


def test_empty_bins_within_the_noise_are_dropped_and_real_empties_kept() -> None:
    """The empty value of a column without empty cells, and the empty class, hold only noise: the synthesizer
    drops their bins below b ln(1/eta); a column with many empty cells keeps them (post-processing)."""
    b = 4.0
    t = b * np.log(1.0 / EMPTY_ETA)
    domains = {"a": ("x", "y", EMPTY), "e": ("u", EMPTY), "c": ("p", "q", EMPTY)}
    histograms = {
        # a: no empty cell; its noisy empty bins are below t
        "a": np.array([[500.0, 300.0, 3.0], [400.0, 200.0, 0.0], [7.0, 11.0, 2.0]]),
        # e: 300 empty cells in class p, 100 in class q
        "e": np.array([[600.0, 400.0, 1.0], [300.0, 100.0, 9.0]]),
    }
    model = ClassConditionalModel(
        columns=("a", "e", "c"),
        label="c",
        domains=domains,
        histograms=histograms,
        protected_number_of_records=1400,
        manifest={"laplace_scale": b},
    )
    assert model.empty_threshold() == pytest.approx(t)
    kept = model.kept_histograms()
    assert kept["a"][2].tolist() == [0.0, 0.0, 0.0] and kept["a"][:, 2].tolist() == [0.0, 0.0, 0.0]
    assert kept["e"][1].tolist() == [300.0, 100.0, 0.0]  # real empties kept; the empty class dropped
    assert histograms["a"][2, 0] == 7.0  # the noisy release itself is unchanged
    n_c, counts = model.target_counts(1400)
    assert n_c[2] == 0 and counts["a"][2].sum() == 0 and counts["e"][1].sum() > 350


def test_budget_split_sums_to_epsilon(spark, toy) -> None:
    data = DataConfig(columns=("job", "education", "income"))
    model, _ = fit_class_conditional(toy, ClassConditionalParams(), data, budget=Budget(epsilon=2.0, seed=1))
    m = model.manifest
    # the three string columns went through the DP test of numbers written as text (1% of epsilon)
    assert m["epsilon_text_numbers"] == pytest.approx(0.02)
    total = m["epsilon_n"] + m["epsilon_m"] + m["epsilon_domain"] + m["epsilon_text_numbers"]
    assert total == pytest.approx(2.0, rel=1e-12)
    assert m["epsilon_per_histogram"] * 2 == pytest.approx(m["epsilon_m"])  # two attribute histograms
    assert m["label"] == "income" and m["test_mode"] is True
    public = ClassConditionalParams(domains=TOY_DOMAINS)
    budget = Budget(epsilon=2.0, seed=1)
    model, _ = fit_class_conditional(toy, public, data, budget=budget)
    assert model.manifest["epsilon_domain"] == 0 and model.manifest["delta"] == 0
    assert model.manifest["epsilon_n"] + model.manifest["epsilon_m"] == pytest.approx(2.0, rel=1e-12)


def test_binned_columns_use_their_public_bins(spark) -> None:
    rows = [(str(20 + i % 50), "yes" if i % 3 else "no") for i in range(500)]
    df = spark.createDataFrame(rows, "age string, y string")
    data = DataConfig(bins={"age": BinSpec((30, 40, 50))})
    model, _ = fit_class_conditional(
        df, ClassConditionalParams(domains={"y": ("no", "yes")}), data, budget=Budget(seed=2)
    )
    assert model.domains["age"] == ("<30", "[30, 40)", "[40, 50)", ">=50", EMPTY)
    assert model.manifest["domains_from_release"] == []


def test_integer_codes_stay_codes_and_a_measurement_gets_dp_bins(spark) -> None:
    # the same DP profile as the other mechanisms, in its pure-DP form: a 0..3 code is a category of its values,
    # a wide measurement gets bins inside its DP range, and the budget shares still sum to epsilon
    from spark_dpsynth.synthesizers._types import restore_types

    rng = np.random.default_rng(4)
    rows = [
        (int(rng.integers(0, 4)), int(rng.integers(10_000, 900_000)), int(rng.integers(0, 2)))
        for _ in range(3000)
    ]
    df = spark.createDataFrame(rows, "code int, weight int, y int")
    model, release = fit_class_conditional(
        df, ClassConditionalParams(), DataConfig(), budget=Budget(epsilon=8.0, seed=3)
    )
    m = model.manifest
    assert {c: m["column_meanings"][c]["meaning"] for c in ("code", "weight", "y")} == {
        "code": "code", "weight": "measurement", "y": "code",
    }  # fmt: skip
    assert sorted(model.domains["code"][:-1]) == ["0", "1", "2", "3"]
    assert m["column_types"]["weight"]["bins"]["source"] == "dp_profile"
    total = (
        m["epsilon_n"]
        + m["epsilon_m"]
        + m["epsilon_domain"]
        + m["epsilon_profile"]
        + m["epsilon_exact_values"]
    )
    assert (
        total == pytest.approx(8.0, rel=1e-12) and release.manifest.budget.share("column_profile").epsilon > 0
    )
    # the measurement's exact values were counted (it lies between the grid's points; none holds enough records
    # to matter): the profile's epsilon per column, for one of the three profiled columns
    assert m["epsilon_exact_values"] == pytest.approx(m["epsilon_profile"] / 3)
    synthetic = sample_class_conditional(model, spark, number_of_tuples=500, seed=1)
    out = restore_types(synthetic, m, seed=1).toPandas()
    assert restore_types(synthetic, m, seed=1).schema.simpleString() == df.schema.simpleString()
    assert set(out["code"].dropna()) <= {0, 1, 2, 3} and set(out["y"].dropna()) <= {0, 1}
    weight = out["weight"].dropna()
    bins = m["column_types"]["weight"]["bins"]
    # inside the DP range always; inside the data's own range but for a few draws where the within-bin shape
    # holds the noise of the profile's pure-DP counts above the top (it cannot tell a few records from none)
    assert weight.between(bins["lower"], bins["upper"]).all()
    assert weight.between(10_000, 900_000).mean() >= 0.99


def test_values_off_the_profile_grid_come_back_exactly(spark) -> None:
    # a density of one value per area, one decimal (off the profile's grid): the DP exact values (discrete
    # Laplace, a threshold at the declared delta) make it a code, so every synthetic value is one of the input's
    from spark_dpsynth.synthesizers._types import restore_types

    rng = np.random.default_rng(6)
    values = [357.4, 450.9, 3092.4, 1338.4]
    rows = [(float(rng.choice(values)), int(rng.integers(0, 2))) for _ in range(3000)]
    df = spark.createDataFrame(rows, "density double, y int")
    model, release = fit_class_conditional(
        df, ClassConditionalParams(), DataConfig(), budget=Budget(epsilon=4.0, seed=2)
    )
    m = model.manifest
    assert m["column_meanings"]["density"]["meaning"] == "code"
    assert "exact-value" in m["column_meanings"]["density"]["reason"]
    budget = release.manifest.budget
    assert budget.share("exact_values_threshold").delta == pytest.approx(m["delta"] / 2)
    assert budget.share("domains_threshold").delta == pytest.approx(m["delta"] / 2)
    synthetic = restore_types(
        sample_class_conditional(model, spark, number_of_tuples=1000, seed=1), m, seed=1
    )
    assert set(synthetic.toPandas()["density"].dropna()) <= set(values)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"number_of_tuples": 0}, InvalidParameterError, "number_of_tuples must be >= 1"),
        ({"domain_epsilon_proportion": 1}, InvalidParameterError, "domain_epsilon_proportion"),
        ({"domains": {"job": ()}}, InvalidParameterError, "at least one value"),
    ],
)
def test_parameters_are_validated(kwargs: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        ClassConditionalParams(**kwargs)


def test_unknown_label_is_a_schema_error(toy) -> None:
    with pytest.raises(SchemaError, match="label column 'salary'"):
        fit_class_conditional(toy, ClassConditionalParams(label="salary"), DataConfig())


def test_cli_pipeline_and_synthesize_from_saved_release(spark, tmp_path) -> None:
    """`--synthesizer class_conditional --label COLUMN` end to end, then `synthesize` again from the saved release."""
    import json

    from spark_dpsynth.cli.main import main
    from tests.conftest import ROOT

    out = tmp_path / "out"
    common = ["--config", str(ROOT / "conf" / "adult.toml"), "--input", str(ROOT / "data" / "adult.csv.gz")]
    code = main(
        ["pipeline", *common, "--output", str(out), "--synthesizer", "class_conditional", "--label", "income",
         "--epsilon", "2", "--seed", "3", "--columns", "age,education,sex,hours_per_week,income", "--quiet"]
    )  # fmt: skip
    assert code == 0
    manifest = json.loads((out / "release" / "manifest.json").read_text())
    assert manifest["synthesizer"] == "class_conditional" and manifest["label"] == "income"
    assert (out / "release" / "class_conditional_histograms.json").is_file()
    first = spark.read.parquet(str(out / "synthetic"))
    assert first.count() == manifest["protected_number_of_records"]
    assert first.columns == ["age", "education", "sex", "hours_per_week", "income"]
    first_rows = sorted(map(tuple, first.collect()), key=str)
    metrics = json.loads((out / "evaluation" / "metrics.json").read_text())
    assert metrics["tstr"]["tstr_accuracy"] > 0.7
    code = main(["synthesize", "--output", str(out), "--seed", "3", "--overwrite", "--quiet"])
    assert code == 0
    again = spark.read.parquet(str(out / "synthetic"))
    assert sorted(map(tuple, again.collect()), key=str) == first_rows
