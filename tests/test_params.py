"""Parameter validation: every bad value is rejected with a message naming the field (before data is read)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from spark_dpsynth.config import parse_config
from spark_dpsynth.errors import ConfigError, InvalidParameterError
from spark_dpsynth.params import Accounting, AggregationParams, BinSpec, DataConfig, SynthesisParams
from spark_dpsynth.privacy.budget import Budget


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"reporting_length": 0}, "reporting_length must be >= 1"),
        ({"reporting_length": 2.5}, "reporting_length must be an integer"),
        ({"percentile": 0}, r"percentile must be in \(0, 100\]"),
        ({"percentile": 100.5}, r"percentile must be in \(0, 100\]"),
        ({"percentile_epsilon_proportion": 0}, r"percentile_epsilon_proportion must be in \(0, 1\)"),
        ({"percentile_epsilon_proportion": 1}, r"percentile_epsilon_proportion must be in \(0, 1\)"),
        ({"number_of_records_epsilon_proportion": 1.5}, "number_of_records_epsilon_proportion must be in"),
        (
            {"percentile_epsilon_proportion": 0.6, "number_of_records_epsilon_proportion": 0.4},
            "must be < 1",
        ),
        ({"accuracy_mode": "fast"}, "accuracy_mode must be one of"),
        ({"accuracy_mode": "custom"}, "sigma_proportions are required"),
        ({"accuracy_mode": "custom", "sigma_proportions": (1, 0, 1)}, "sigma_proportions must be > 0"),
        ({"accuracy_mode": "custom", "sigma_proportions": (1, 1)}, "must have reporting_length = 3 values"),
        ({"sigma_proportions": (1, 1, 1)}, "only allowed with accuracy_mode 'custom'"),
        ({"fabrication_mode": "none"}, "fabrication_mode must be one of"),
        ({"fabrication_mode": "custom_fixed"}, "thresholds are required"),
        ({"fabrication_mode": "custom_fixed", "thresholds": (1,)}, "reporting_length - 1 = 2 values"),
        ({"fabrication_mode": "custom_fixed", "thresholds": (1, -2)}, "fixed thresholds must be >= 0"),
        ({"fabrication_mode": "custom_adaptive", "thresholds": (0.5, 0)}, r"must be in \(0, 1\]"),
        ({"thresholds": (1, 2)}, "thresholds are only allowed"),
    ],
)
def test_aggregation_params_rejected(kwargs: dict, match: str) -> None:
    with pytest.raises(InvalidParameterError, match=match):
        AggregationParams(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"epsilon": 0}, "epsilon must be > 0"),
        ({"epsilon": -1}, "epsilon must be > 0, got -1"),
        ({"epsilon": math.nan}, "epsilon must be finite"),
        ({"epsilon": math.inf}, "epsilon must be finite"),
        ({"epsilon": "1"}, "epsilon must be a number"),
        ({"delta": 0}, r"delta must be in \(0, 1\)"),
        ({"delta": 1}, r"delta must be in \(0, 1\)"),
        ({"delta": -1e-6}, r"delta must be in \(0, 1\)"),
        ({"accounting": "pld"}, r"accounting must be one of \['classic', 'tight_zcdp'\], got 'pld'"),
        ({"seed": -3}, "seed must be >= 0"),
        ({"seed": 1.5}, "seed must be an integer"),
    ],
)
def test_budget_rejected(kwargs: dict, match: str) -> None:
    with pytest.raises(InvalidParameterError, match=match):
        Budget(**kwargs)


def test_budget_is_one_frozen_value() -> None:
    budget = Budget(2.0, 1e-6, "tight_zcdp", seed=4)
    assert budget.accounting is Accounting.TIGHT_ZCDP and budget.test_mode
    assert budget.delta_or(0.1) == 1e-6 and Budget().delta_or(0.1) == 0.1
    assert budget.parameters() == {"epsilon": 2.0, "delta": 1e-6, "accounting": "tight_zcdp", "seed": 4}
    with pytest.raises(dataclasses.FrozenInstanceError):
        budget.epsilon = 3.0  # type: ignore[misc]


def test_reporting_length_checked_against_columns() -> None:
    with pytest.raises(
        InvalidParameterError,
        match=r"reporting_length must be <= the number of attribute columns \(2\), got 3",
    ):
        AggregationParams(reporting_length=3).check_columns(2)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"target_number_of_records": 0}, "target_number_of_records must be >= 1"),
        ({"aggregate_counts_scale_factor": 0}, "aggregate_counts_scale_factor must be > 0"),
        ({"weight_selection_percentile": 101}, r"weight_selection_percentile must be in \[0, 100\]"),
        ({"partitions": 0}, "partitions must be >= 1"),
        ({"mode": "magic"}, "mode must be one of"),
    ],
)
def test_synthesis_params_rejected(kwargs: dict, match: str) -> None:
    with pytest.raises(InvalidParameterError, match=match):
        SynthesisParams(**kwargs)


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: BinSpec(()), "at least one edge"),
        (lambda: BinSpec((3, 2)), "strictly increasing"),
        (lambda: BinSpec((1, math.nan)), "finite"),
        (lambda: BinSpec((1, 2), labels=("a", "b")), "len\\(edges\\) \\+ 1 = 3"),
        (lambda: DataConfig(columns=()), "at least one column"),
        (lambda: DataConfig(columns=("a", "a")), "duplicates"),
        (lambda: DataConfig(columns=("a",), sensitive_zeros=("b",)), "sensitive_zeros names columns"),
        (lambda: DataConfig(columns=("a",), bins={"b": BinSpec((1,))}), "bins names columns"),
    ],
)
def test_data_config_rejected(build, match: str) -> None:  # noqa: ANN001
    with pytest.raises(InvalidParameterError, match=match):
        build()


def test_bin_labels() -> None:
    assert BinSpec((17, 25.5, 35)).interval_labels() == ("<17", "[17, 25.5)", "[25.5, 35)", ">=35")


@pytest.mark.parametrize(
    ("doc", "match"),
    [
        ({"aggregat": {}}, r"unknown key\(s\) \['aggregat'\] in \[top level\]"),
        ({"aggregate": {"epsilon": -1}}, r"\[aggregate\] epsilon must be > 0, got -1"),
        ({"aggregate": {"epsilonn": 1}}, r"unknown key\(s\) \['epsilonn'\] in \[aggregate\]"),
        ({"data": {"bins": {"age": {"edge": [1]}}}}, r"unknown key\(s\) \['edge'\] in \[data.bins.age\]"),
        ({"input": {"format": "xlsx"}}, r"\[input\] format must be one of \['csv', 'parquet', 'delta'\]"),
        ({"evaluate": {"max_marginal_length": 0}}, "max_marginal_length must be an integer >= 1"),
        ({"synthesize": {"mode": "x"}}, r"\[synthesize\] mode must be one of"),
    ],
)
def test_config_errors_name_the_key(doc: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_config(doc)


def test_adult_config_loads() -> None:
    from spark_dpsynth.config import load_config

    config = load_config("conf/adult.toml")
    assert config.data.columns is not None and len(config.data.columns) == 15
    assert set(config.data.bins) == {
        "age",
        "fnlwgt",
        "education_num",
        "capital_gain",
        "capital_loss",
        "hours_per_week",
    }
    assert config.budget.delta == 1e-6


# --------------------------------------------------------------------------------------------- resource bounds


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (
            lambda: SynthesisParams(target_number_of_records=10**12),
            r"target_number_of_records must be <= 10000000000",
        ),
        (lambda: SynthesisParams(partitions=10**6), r"partitions must be <= 10000, got 1000000"),
        (lambda: DataConfig(max_multi_values=10**9), r"max_multi_values must be <= 100000"),
        (lambda: Budget(delta=1e-300), r"delta must be in \[1e-100, 1\), got 1e-300"),
    ],
)
def test_parameters_that_would_exhaust_the_machine_are_refused(build, match: str) -> None:  # noqa: ANN001
    with pytest.raises(InvalidParameterError, match=match):
        build()


def test_synthesis_size_is_bounded_per_partition() -> None:
    from spark_dpsynth.params import MAX_RECORDS_PER_PARTITION, check_synthesis_size

    check_synthesis_size(2 * MAX_RECORDS_PER_PARTITION, 2)
    with pytest.raises(
        InvalidParameterError,
        match=r"synthesizing 4\.2e\+06 records over 2 partitions is more than a task holds \(at most 2000000 "
        r"records per partition\); set --partitions to at least 3 or lower --target-number-of-records",
    ):
        check_synthesis_size(4_200_000, 2)
    with pytest.raises(InvalidParameterError, match=r"more than one run writes"):
        check_synthesis_size(10**11, 10_000)
