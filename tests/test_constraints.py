"""Declared rules (docs/design.md section 4.8, "Conditions and declared rules"): public Spark SQL rules every
synthetic row satisfies, recorded in the manifest, fitted as structural zeros by pgm, rejected by the others."""

from __future__ import annotations

import json
import re
import tomllib

import numpy as np
import pandas as pd
import pytest

from spark_dpsynth.config import parse_config
from spark_dpsynth.errors import ConditionError, ConfigError, InvalidParameterError
from spark_dpsynth.estimation import Domain, GraphicalModel, Measurement, estimate
from spark_dpsynth.synthesizers.conditions import check_rules, rule_violations
from tests.conftest import ROOT
from tests.test_conditional_sampling import JOINT_AB, conditioned, small_release

# ------------------------------------------------------------------------------------------ configuration


def test_the_constraints_section_fills_the_job_config() -> None:
    config = parse_config(
        {"constraints": {"rules": ["NOT (a < 3 AND b = 'x')", "c IS NOT NULL"], "where": "a > 1"}}
    )
    assert config.constraints == ("NOT (a < 3 AND b = 'x')", "c IS NOT NULL")
    assert config.where == "a > 1"
    assert parse_config({}).constraints == () and parse_config({}).where is None


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"rules": "a > 1"}, r"\[constraints\] rules must be a list of strings"),
        ({"rules": ["  "]}, "non-empty"),
        ({"where": 3}, r"\[constraints\] where must be a string"),
        ({"rule": ["a > 1"]}, r"unknown key\(s\) \['rule'\] in \[constraints\]"),
    ],
)
def test_wrong_constraints_name_the_key(table: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config({"constraints": table})


def test_the_command_line_takes_one_rule_per_option() -> None:
    from spark_dpsynth.cli._options import build_parser, load_job_config

    args = build_parser().parse_args(
        ["synthesize", "--output", "out", "--constraints", "NOT (AGEP < 15 AND MSP IN ('1', '2'))",
         "--constraints", "EDU IS NOT NULL", "--where", "SEX = 2 AND AGEP >= 60"]
    )  # fmt: skip
    config = load_job_config(args)
    assert config.constraints == ("NOT (AGEP < 15 AND MSP IN ('1', '2'))", "EDU IS NOT NULL")
    assert config.where == "SEX = 2 AND AGEP >= 60"


# ------------------------------------------------------------------------------------------ estimation


def test_structural_zeros_hold_no_mass_and_the_rest_follows_the_measurements() -> None:
    domain = Domain(("a", "b"), (2, 3))
    table = np.array([[40.0, 30.0, 30.0], [10.0, 50.0, 40.0]])
    allowed = np.ones((2, 3), dtype=bool)
    allowed[0, 2] = False
    model = estimate(
        domain,
        [Measurement(("a", "b"), table, 1.0)],
        iterations=2_000,
        structural_zeros={("a", "b"): allowed},
    )
    fitted = model.project(("a", "b"))
    assert fitted[0, 2] == 0.0
    # the least-squares fit with N records and the zero cell: the zero cell's 30 measured records are spread
    # evenly over the five other cells (+6 each), the Gaussian likelihood's projection [MSM19, section 3]
    expected = table + 6.0
    expected[0, 2] = 0.0
    np.testing.assert_allclose(fitted, expected * model.total / expected.sum(), atol=0.05)
    drawn = model.sample(20_000, np.random.default_rng(0))
    assert not (~allowed[drawn[:, 0], drawn[:, 1]]).any()


def test_conditioning_is_exact_and_refuses_probability_zero() -> None:
    domain = Domain(("a", "b", "c"), (3, 4, 2))
    rng = np.random.default_rng(0)
    potentials = {("a", "b"): rng.normal(size=(3, 4)), ("b", "c"): rng.normal(size=(4, 2))}
    model = GraphicalModel(domain, potentials, total=100.0)
    joint = np.exp(potentials[("a", "b")][:, :, None] + potentials[("b", "c")][None, :, :])
    allowed = np.ones((3, 2), dtype=bool)
    allowed[0, 1] = allowed[2, 0] = False  # over (a, c): a clique the model does not have
    conditioned_model = model.condition({("a", "c"): allowed})
    expected = joint * allowed[:, None, :]
    np.testing.assert_allclose(
        conditioned_model.project(("a", "b", "c")), expected / expected.sum() * 100, atol=1e-9
    )
    assert model.probability(("a", "c"), allowed) == pytest.approx(expected.sum() / joint.sum())
    with pytest.raises(InvalidParameterError, match="probability zero"):
        model.condition({("a",): np.zeros(3, dtype=bool)})


# ------------------------------------------------------------------------------------------ the pgm synthesizer


def test_pgm_rules_leave_no_violation(spark) -> None:  # noqa: ANN001
    rules = ["NOT (A = 'a' AND B = 'x')", "NOT (A = 'b' AND B = 'z')"]  # 300 and 150 of the 1,000 records
    rows = conditioned(spark, small_release(), None, 4_000, rules=rules).toPandas()
    assert len(rows) == 4_000
    assert not ((rows["A"] == "a") & (rows["B"] == "x")).any()
    assert not ((rows["A"] == "b") & (rows["B"] == "z")).any()
    # the rules' mass goes where the measurements put it: with one 2-way table, the least-squares fit spreads the
    # zero cells' measured records evenly over the other 10 cells [MSM19, section 3]
    measured = JOINT_AB + 0.5
    expected = measured + (measured[0, 0] + measured[1, 2]) / 10
    expected[0, 0] = expected[1, 2] = 0.0
    shares = rows.fillna("<empty>").groupby("A").size() / len(rows)
    for i, a in enumerate(["a", "b", "<empty>"]):
        assert shares[a] == pytest.approx(expected[i].sum() / expected.sum(), abs=0.01), a


def test_rules_are_checked_on_the_schema(spark) -> None:  # noqa: ANN001
    df = spark.createDataFrame([(1, "x")], "a INT, b STRING")
    check_rules(df, ("a", "b"), ["NOT (a < 3 AND b = 'x')"])
    with pytest.raises(ConditionError, match="'c > 1' cannot be evaluated"):
        check_rules(df, ("a", "b"), ["c > 1"])
    with pytest.raises(ConditionError, match="'a > 1' cannot be evaluated"):
        check_rules(df, ("b",), ["a > 1"])  # a column of the input that the release does not have
    two = spark.createDataFrame([(1, "x"), (5, "x"), (2, None)], "a INT, b STRING")
    # a rule is broken where it is false, as a SQL CHECK constraint: (5, x) breaks it, (2, null) is unknown
    assert rule_violations(two, ["a < 3 AND b = 'x'"]) == {"a < 3 AND b = 'x'": 1}


# ------------------------------------------------------------------------------------------ NIST's rules


def test_the_nist_configuration_declares_sdnist_s_rules(spark, shared_data) -> None:  # noqa: ANN001
    config = tomllib.loads((ROOT / "conf" / "nist_acs.toml").read_text())
    rules = config["constraints"]["rules"]
    assert len(rules) == 25  # 17 on the age, 1 on the industry, 7 on the household
    parsed = parse_config(config)
    assert parsed.constraints == tuple(rules)
    df = spark.read.csv(str(shared_data / "nist_national2019.csv.gz"), header=True, inferSchema=False)
    check_rules(df, parsed.data.columns, rules)  # every column a rule names is in the data and the config
    assert set(rule_violations(df, rules).values()) == {0}  # the real records satisfy them


def test_the_demographic_configuration_keeps_every_rule_on_its_columns() -> None:
    """conf/nist_acs_demographic.toml: the rules of conf/nist_acs.toml that read only its ten columns, all of them,
    with the same codes."""
    full = tomllib.loads((ROOT / "conf" / "nist_acs.toml").read_text())
    ten = tomllib.loads((ROOT / "conf" / "nist_acs_demographic.toml").read_text())
    columns = set(ten["data"]["columns"])
    everywhere = set(full["data"]["columns"])

    def reads(rule: str) -> set[str]:
        return {c for c in everywhere if re.search(rf"\b{c}\b", rule)}

    assert all(reads(rule) <= columns for rule in ten["constraints"]["rules"])
    assert ten["constraints"]["rules"] == [r for r in full["constraints"]["rules"] if reads(r) <= columns]
    assert ten["data"]["domains"] == {c: v for c, v in full["data"]["domains"].items() if c in columns}
    assert ten["data"]["bins"]["AGEP"] == full["data"]["bins"]["AGEP"]
    assert parse_config(ten).constraints == tuple(ten["constraints"]["rules"])


# ------------------------------------------------------------------------------------------ UCI Adult


@pytest.mark.slow
def test_adult_rules_for_every_synthesizer(spark, tmp_path) -> None:  # noqa: ANN001
    """A declared rule on Adult: in the manifest (and after a save), zero violations for pgm, model, sds and
    independent, and the evaluation counts it."""
    import spark_dpsynth as dps

    adult = spark.read.csv(str(ROOT / "data" / "adult.csv.gz"), header=True, inferSchema=True)
    columns = ["age", "marital_status", "relationship", "sex", "income"]
    rules = [
        "NOT (age < 25 AND marital_status = 'Married-civ-spouse')",  # on the bins' edges: exact on the cells
        "NOT (age < 23 AND relationship = 'Husband')",  # cuts the bin [20, 25): rows rejected
    ]
    for synthesizer, samplers in (("pgm", ("pgm",)), ("model", ("model", "sds", "independent"))):
        release = dps.fit(
            adult, config=str(ROOT / "conf" / "adult.toml"), epsilon=4.0, synthesizer=synthesizer, seed=3,
            columns=columns, constraints=rules,
        )  # fmt: skip
        assert list(release.manifest["constraints"]) == rules
        path = release.save(str(tmp_path / synthesizer))
        saved = json.loads((tmp_path / synthesizer / "manifest.json").read_text())
        assert saved["constraints"] == rules
        loaded = dps.load(path, spark, config=str(ROOT / "conf" / "adult.toml"), columns=columns)
        for name in samplers:
            rows = loaded.sample(3_000, synthesizer=name, seed=4)
            assert rows.count() == 3_000, name
            assert set(rule_violations(rows, rules).values()) == {0}, name
        metrics = dps.evaluate(adult, rows, loaded)
        assert metrics["constraints"] == [{"rule": r, "violations": 0} for r in rules]


# ------------------------------------------------------------------------------------------ a rule that cuts a bin

# The joint of (A, N) over the measurement domain: A in {a, b, empty}, N's bins [0, 10), [10, 20) and empty.
JOINT_AN = np.array([[200.0, 300.0, 0.0], [300.0, 200.0, 0.0], [0.0, 0.0, 0.0]])
N_TYPE = {
    "scale": "integer",
    "type": "int",
    "nullable": True,
    "bins": {"edges": [10.0], "labels": ["<10", ">=10"], "lower": 0.0, "upper": 19.0, "integral": False,
             "passthrough": [], "point_labels": [], "points": [], "shape": [], "source": "config"},
}  # fmt: skip


def binned_release(n_type: dict | None = None):  # noqa: ANN201
    """A release of A and a number N in two public bins, measured without noise worth the name (std 1)."""
    import pandas as pd

    from spark_dpsynth.estimation.domain import Measurement
    from spark_dpsynth.release import Release

    aggregates = pd.DataFrame(
        {"k": [1] * 4, "columns": [["A"], ["A"], ["N"], ["N"]], "values": [["a"], ["b"], ["<10"], [">=10"]],
         "count": [500, 500, 500, 500]}
    )  # fmt: skip
    manifest = {
        "columns": ["A", "N"], "mechanism": "workload", "synthesizers": ["pgm"], "reporting_length": 1,
        "protected_number_of_records": 1000, "epsilon": 1.0, "delta": 1e-6, "test_mode": True, "rounds": [],
        "selection": "aim",
        "column_types": {"A": {"scale": "category", "type": "string", "nullable": True}, "N": n_type or N_TYPE},
    }  # fmt: skip
    base = Release.from_pandas(aggregates, manifest)
    return Release(
        base.columns, base.domains, base.marginals, base.manifest,
        measurements=(Measurement(("A", "N"), JOINT_AN + 0.5, 1.0),),
    )  # fmt: skip


def test_a_rule_that_cuts_a_bin_draws_the_value_again_not_the_row(spark) -> None:  # noqa: ANN001
    """The measured records of the cell (a, [0, 10)) satisfy the rule, so the cell keeps its mass (rejecting
    whole rows would take half of it away) and its values are drawn where the rule allows them; the rows of b
    fill the values a cannot take, so the bin's values stay even, as the measurements leave them."""
    from spark_dpsynth import registry
    from spark_dpsynth.params import SynthesisParams
    from spark_dpsynth.synthesizers._types import restore_types
    from spark_dpsynth.synthesizers.conditions import sample_conditioned

    release = binned_release()
    rule = "NOT (N < 5 AND A = 'a')"
    spec = registry.synthesizer("pgm")
    rows = sample_conditioned(
        release, "pgm", SynthesisParams(target_number_of_records=4_000, seed=3, partitions=2), spark,
        where=None, rules=[rule], draw=lambda p: spec.load_sample()(release, p, spark),
        restore=lambda r, seed: restore_types(r, release.manifest, seed=seed),
    ).toPandas()  # fmt: skip
    assert len(rows) == 4_000
    assert not ((rows["A"] == "a") & (rows["N"] < 5)).any()
    cell = (rows["A"] == "a") & (rows["N"] < 10)
    assert cell.mean() == pytest.approx(0.2, abs=0.015)  # not 0.1, as whole rows rejected would give
    assert set(rows.loc[cell, "N"]) == {5, 6, 7, 8, 9}
    low = rows.loc[rows["N"] < 10, "N"].value_counts() / 2_000  # the bin's 2,000 rows
    assert low.min() > 0.1 - 0.025 and low.max() < 0.1 + 0.025  # even: 1 / 10 each
    assert rows.loc[(rows["A"] == "b") & (rows["N"] < 10), "N"].min() == 0


def test_a_rule_that_cuts_a_bin_of_reals_draws_the_value_again_until_it_holds(spark) -> None:  # noqa: ANN001
    """Reals (and bins with a within-bin shape) are drawn again until the rules hold, all the draws in one
    projection: the cell (a, [0, 10)) keeps its mass and its values land where the rule allows them, drawn as
    the bin draws them (uniform on [5, 10) here, its within-bin shape's pieces cut to it below)."""
    from spark_dpsynth import registry
    from spark_dpsynth.params import SynthesisParams
    from spark_dpsynth.synthesizers._types import restore_types
    from spark_dpsynth.synthesizers.conditions import sample_conditioned

    def sample(n_type: dict) -> pd.DataFrame:
        release = binned_release(n_type)
        spec = registry.synthesizer("pgm")
        return sample_conditioned(
            release, "pgm", SynthesisParams(target_number_of_records=4_000, seed=5, partitions=2), spark,
            where=None, rules=["NOT (N < 5 AND A = 'a')"], draw=lambda p: spec.load_sample()(release, p, spark),
            restore=lambda r, seed: restore_types(r, release.manifest, seed=seed),
        ).toPandas()  # fmt: skip

    real = {**N_TYPE, "scale": "real", "type": "double"}
    rows = sample(real)
    assert len(rows) == 4_000
    cell = (rows["A"] == "a") & (rows["N"] < 10)
    assert not ((rows["A"] == "a") & (rows["N"] < 5)).any()
    assert cell.mean() == pytest.approx(0.2, abs=0.015)  # not 0.1, as whole rows rejected would give
    a = rows.loc[cell, "N"]
    assert a.min() >= 5 and a.max() < 10 and a.nunique() > 700  # drawn again, not a few values repeated
    assert np.histogram(a, bins=5, range=(5, 10))[0].min() > 0.8 * len(a) / 5  # uniform on [5, 10)
    # a within-bin shape: two pieces of the bin [0, 10), [2, 4) and [6, 9), alike; under the rule, a's rows
    # take the second alone
    shaped = {**real, "bins": {**real["bins"], "shape": [[2.0, 4.0, 100.0], [6.0, 9.0, 100.0]]}}
    rows = sample(shaped)
    a = rows.loc[(rows["A"] == "a") & (rows["N"] < 10), "N"]
    assert ((a >= 6) & (a <= 9)).all() and len(a) / len(rows) == pytest.approx(0.2, abs=0.015)
    b = rows.loc[(rows["A"] == "b") & (rows["N"] < 10), "N"]
    assert ((b >= 2) & (b <= 4)).mean() == pytest.approx(0.5, abs=0.06)  # untouched by the rule
