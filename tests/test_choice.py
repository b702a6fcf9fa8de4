"""The default method's choice of mechanism (spark_dpsynth.mechanisms.choice): the rule, its feasibility checks, and
one draw of n' shared with the chosen mechanism."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from spark_dpsynth.errors import InvalidParameterError
from spark_dpsynth.mechanisms.choice import (
    MAX_RELATIVE_NOISE,
    MAX_SUBSETS,
    choose,
    fit_auto,
    marginals_feasible,
    subsets,
)
from spark_dpsynth.params import AggregationParams, DataConfig, WorkloadParams
from spark_dpsynth.privacy.accounting import delta_from_protected_n, rho_from_epsilon_delta
from spark_dpsynth.privacy.budget import Budget


def test_subsets_count_every_length_up_to_r() -> None:
    assert subsets(16, 3) == 16 + 120 + 560
    assert subsets(2, 3) == 2 + 1
    assert subsets(22, 3) <= MAX_SUBSETS < subsets(23, 3)


def test_rule_follows_the_relative_noise() -> None:
    params = AggregationParams()
    budget = Budget(epsilon=4.0)
    # UCI Adult's size: the noise of 696 subsets is too large, 10 million records make it small
    small, large = choose(16, params, budget, 48_842), choose(16, params, budget, 10_000_000)
    assert small.mechanism == "workload" and large.mechanism == "marginals"
    delta = delta_from_protected_n(10_000_000)
    rho = rho_from_epsilon_delta(4.0 * (1 - params.number_of_records_epsilon_proportion), delta / 2)
    assert large.relative_noise == pytest.approx(math.sqrt(696 / (2 * rho)) / 10_000_000, rel=1e-12)
    assert large.subsets == 696 and small.relative_noise > MAX_RELATIVE_NOISE >= large.relative_noise
    # the boundary: n' where s / n' crosses the threshold (delta given, so that s does not depend on n')
    given = Budget(epsilon=4.0, delta=1e-6)
    s = choose(16, params, given, 1).relative_noise
    edge = s / MAX_RELATIVE_NOISE
    assert choose(16, params, given, math.ceil(edge)).mechanism == "marginals"
    assert choose(16, params, given, math.floor(edge) - 1).mechanism == "workload"
    # a wide table never measures all its subsets, however many records
    wide = choose(76, params, budget, 10**9)
    assert wide.mechanism == "workload" and "subsets" in wide.reason
    assert json.loads(json.dumps(large.to_json()))["max_relative_noise"] == MAX_RELATIVE_NOISE
    with pytest.raises(InvalidParameterError, match="protected_n"):
        choose(16, params, budget, 0)


def _coded(d: int, size: int, **kwargs) -> DataConfig:  # noqa: ANN003
    """d columns with a public domain (a codebook) of ``size`` values each."""
    names = tuple(f"c{j}" for j in range(d))
    return DataConfig(columns=names, domains={c: tuple(map(str, range(size))) for c in names}, **kwargs)


def test_configurations_the_marginals_do_not_take() -> None:
    from spark_dpsynth.params import BinSpec

    params = AggregationParams()
    assert marginals_feasible(16, params, _coded(16, 5)) is None
    binned = DataConfig(columns=("a", "b", "c"), bins={c: BinSpec(edges=(1, 2)) for c in "abc"})
    assert marginals_feasible(3, params, binned) is None
    assert "multi-value" in marginals_feasible(16, params, DataConfig(multi_value={"tags": ";"}))
    assert "reporting length 4" in marginals_feasible(
        16, AggregationParams(reporting_length=4), _coded(16, 5)
    )
    assert "subsets" in marginals_feasible(30, params, _coded(30, 5))
    assert "reporting_length" in marginals_feasible(2, params, _coded(2, 5))
    # a column whose values are found in the data: their number is known only once released
    found = DataConfig(columns=("c0", "x"), domains={"c0": ("a", "b")})
    assert "'x' has no public values" in marginals_feasible(2, AggregationParams(reporting_length=2), found)
    # the public bound of the candidates: C(16, 3) subsets of 30^3 cells each exceed 2,000,000
    assert "candidate 3-tuples" in marginals_feasible(16, params, _coded(16, 30))


def _context(spark, budget: Budget):  # noqa: ANN001, ANN202 - a registry.MechanismContext
    """The context of a run: its accountant holds ``budget`` (test-mode noise with its seed)."""
    from spark_dpsynth import registry
    from spark_dpsynth.mechanisms._discovery import release_accountant

    return registry.MechanismContext(spark=spark, accountant=release_accountant(budget))


def _table(spark, n: int):  # noqa: ANN001, ANN202
    rng = np.random.default_rng(5)
    a = rng.choice(["x", "y", "z"], n)
    b = np.where(rng.random(n) < 0.8, a, "w")
    c = rng.choice(["p", "q"], n)
    d = np.where(rng.random(n) < 0.7, c, "r")
    return spark.createDataFrame(pd.DataFrame({"a": a, "b": b, "c": c, "d": d}))


@pytest.mark.parametrize(("epsilon", "mechanism"), [(2.0, "workload"), (2000.0, "marginals")])
def test_fit_auto_draws_n_once_and_books_it(spark, epsilon: float, mechanism: str) -> None:  # noqa: ANN001

    df = _table(spark, 1500)
    budget = Budget(epsilon, 1e-6, seed=3)
    aggregation = AggregationParams()
    workload = WorkloadParams(max_rounds=3, estimation_iterations=10)
    data = DataConfig(
        domains={"a": ("x", "y", "z"), "b": ("w", "x", "y", "z"), "c": ("p", "q"), "d": ("p", "q", "r")}
    )
    choice, fitted = fit_auto(df, aggregation, workload, data, _context(spark, budget))
    m = fitted.release.manifest
    assert choice.mechanism == mechanism == m.mechanism
    assert m["mechanism_choice"]["mechanism"] == mechanism
    assert m["mechanism_choice"]["relative_noise"] == pytest.approx(choice.relative_noise)
    # n' is the one the rule read: drawn once, booked once in the chosen mechanism's budget
    n = m.protected_number_of_records
    assert choice.relative_noise == pytest.approx(choose(4, aggregation, budget, n).relative_noise, rel=1e-12)
    assert [s.name for s in m.budget.shares].count("number_of_records") == 1
    assert m.budget.share("number_of_records").epsilon == pytest.approx(
        epsilon * aggregation.number_of_records_epsilon_proportion
    )
    assert m.synthesizers[0] == ("model" if mechanism == "marginals" else "pgm")
    from spark_dpsynth.cli._summary import summary as _summary

    summary = _summary(fitted.release, None, "out")
    assert f"  mechanism (auto)       {mechanism}: {choice.reason}" in summary.splitlines()


def test_fit_auto_without_public_values_keeps_the_workload(spark) -> None:  # noqa: ANN001

    choice, fitted = fit_auto(
        _table(spark, 300),
        AggregationParams(),
        WorkloadParams(max_rounds=2, estimation_iterations=5),
        DataConfig(),
        _context(spark, Budget(2000.0, 1e-6, seed=3)),
    )
    assert choice.mechanism == "workload" == fitted.release.manifest.mechanism
    assert choice.relative_noise is None and "no public values" in choice.reason


def test_fit_auto_refuses_two_budgets(spark) -> None:  # noqa: ANN001
    from spark_dpsynth import registry

    with pytest.raises(InvalidParameterError, match="share the budget: number_of_records_epsilon_proportion"):
        fit_auto(
            _table(spark, 10),
            AggregationParams(number_of_records_epsilon_proportion=0.01),
            WorkloadParams(number_of_records_epsilon_proportion=0.02),
            DataConfig(),
            registry.MechanismContext(spark=spark),
        )


def test_mechanisms_refuse_a_given_n_below_one(spark) -> None:  # noqa: ANN001
    from spark_dpsynth.mechanisms.marginals import dp_aggregate
    from spark_dpsynth.mechanisms.workload import fit_workload

    df = _table(spark, 10)
    with pytest.raises(InvalidParameterError, match="protected_n must be >= 1"):
        dp_aggregate(df, AggregationParams(), budget=Budget(seed=1), protected_n=0)
    with pytest.raises(InvalidParameterError, match="protected_n must be >= 1"):
        fit_workload(df, WorkloadParams(), budget=Budget(seed=1), protected_n=0)


@pytest.mark.long
def test_cli_pipeline_picks_the_marginals_when_the_data_allows(tmp_path) -> None:  # noqa: ANN001
    """The command line's default, end to end: with public values for every column and a budget that makes the
    noise of every subset small, the release is the marginals mechanism's, the synthetic data the model's."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    rng = np.random.default_rng(2)
    n = 2000
    a = rng.choice(["x", "y", "z"], n)
    b = np.where(rng.random(n) < 0.8, a, "w")
    pd.DataFrame({"a": a, "b": b, "c": rng.choice(["p", "q"], n)}).to_csv(tmp_path / "t.csv", index=False)
    (tmp_path / "job.toml").write_text(
        '[data.domains]\na = ["x", "y", "z"]\nb = ["w", "x", "y", "z"]\nc = ["p", "q"]\n'
    )
    out = tmp_path / "out"
    args = ["pipeline", "--config", str(tmp_path / "job.toml"), "--input", str(tmp_path / "t.csv"), "--output",
            str(out), "--epsilon", "5000", "--delta", "1e-6", "--seed", "4"]  # fmt: skip
    result = subprocess.run(
        [sys.executable, "-m", "spark_dpsynth", *args], capture_output=True, text=True, timeout=600, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr[-3000:]
    manifest = json.loads((out / "release" / "manifest.json").read_text())
    assert manifest["mechanism"] == "marginals" and manifest["mechanism_choice"]["mechanism"] == "marginals"
    assert "mechanism (auto)       marginals: every subset of at most 3 columns (7)" in result.stdout
    synthetic = pd.read_csv(out / "synthetic.csv")
    assert list(synthetic.columns) == ["a", "b", "c"] and set(synthetic["a"]) <= {"x", "y", "z"}
