"""The one prelude of every mechanism (spark_dpsynth.mechanisms.prelude; docs/design.md section 2.8).

The tables are small literal DataFrames made here (not real data).
"""

from __future__ import annotations

import inspect

import pytest

from spark_dpsynth.data.prepare import resolve_columns
from spark_dpsynth.mechanisms import class_conditional, marginals, persons, workload
from spark_dpsynth.mechanisms.prelude import PreparedTable, prepare_table
from spark_dpsynth.params import BinSpec, DataConfig
from spark_dpsynth.privacy.accounting import Accountant
from spark_dpsynth.privacy.budget import Budget
from spark_dpsynth.privacy.noise import noise_source_for


class _Refuse:
    """Shares that refuse every charge: a prelude with nothing to test or profile must not call them."""

    unit = "rho"
    text_numbers_in_rho = True
    domains: dict[str, object] = {}

    def protected_n(self, true_n: int) -> int:
        raise AssertionError("n' drawn")

    def rho(self, protected_n: int) -> float:
        raise AssertionError("rho converted")

    def profile(self, types, need, protected_n):  # noqa: ANN001, ANN201
        raise AssertionError("profile charged")

    def exact_values(self, exact: int, need: int, charged: float, protected_n: int) -> float:
        raise AssertionError("exact values charged")

    def no_exact_values(self) -> None:
        raise AssertionError("exact values considered")


def test_public_bins_and_categories_spend_nothing(spark) -> None:  # noqa: ANN001
    df = spark.createDataFrame([(25, "a"), (37, "b"), (61, "a")], "age int, kind string")
    config = resolve_columns(
        df.columns,
        DataConfig(bins={"age": BinSpec(edges=(30.0, 50.0), lower=0.0, upper=100.0)}, categorical=("kind",)),
    )
    budget = Budget(epsilon=1.0, seed=3)
    acct = Accountant(budget, noise=noise_source_for(budget.seed))
    table = prepare_table(df, config, acct, _Refuse(), stage="test")
    assert isinstance(table, PreparedTable)
    assert table.protected_n is None and table.profiled == 0 and table.charged == 0.0
    assert not acct.ledger().shares
    assert table.column_types["age"]["bins"]["source"] == "config"  # type: ignore[index]
    assert sorted(r["kind"] for r in table.records.collect()) == ["a", "a", "b"]


def test_a_given_protected_n_is_kept(spark) -> None:  # noqa: ANN001
    df = spark.createDataFrame([("a",), ("b",)], "kind string")
    config = resolve_columns(df.columns, DataConfig(categorical=("kind",)))
    acct = Accountant(Budget(epsilon=1.0, seed=3), noise=noise_source_for(3))
    assert prepare_table(df, config, acct, _Refuse(), stage="test", protected_n=7).protected_n == 7


@pytest.mark.parametrize(
    "entry",
    [workload.fit_workload, class_conditional.fit_class_conditional, marginals.dp_aggregate],
)
def test_every_profiling_mechanism_runs_the_prelude(entry) -> None:  # noqa: ANN001
    """The column types, the text test and the DP profile are written once: a mechanism calls the prelude and
    never the profile's steps itself."""
    source = inspect.getsource(entry)
    assert "prepare_table(" in source
    for step in (
        "dp_profiles(",
        "dp_exact_values(",
        "text_numbers_step(",
        "column_types(",
        "apply_profiles(",
    ):
        assert step not in source, step


def test_the_bounding_is_a_step_of_its_own() -> None:
    """Per-person bounding comes before any mechanism reads the rows: fit_events bounds, then fits."""
    source = inspect.getsource(persons.fit_events)
    assert "bound_persons(" in source
    assert "_bounded(" not in source
