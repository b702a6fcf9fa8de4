"""Privacy accounting (seed 001, 3.2.2 and 3.3), checked against closed forms and OpenDP's conversion."""

from __future__ import annotations

import math

import numpy as np
import opendp.prelude as dp
import pytest
from scipy.stats import norm

from spark_dpsynth.mechanisms.budget_split import fabrication_etas, split_budget, thresholds_for
from spark_dpsynth.params import AccuracyMode, AggregationParams, FabricationMode
from spark_dpsynth.privacy.accounting import (
    MAX_DERIVED_DELTA,
    adaptive_threshold,
    delta_from_protected_n,
    epsilon_from_rho_delta,
    rho_1_threshold,
    rho_from_epsilon_delta,
)
from spark_dpsynth.privacy.budget import Budget

dp.enable_features("contrib")


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 4.0, 10.0])
@pytest.mark.parametrize("delta", [1e-9, 1e-6, 1e-3])
@pytest.mark.parametrize("r", [1, 2, 3, 5])
def test_split_spends_exactly_rho(epsilon: float, delta: float, r: int) -> None:
    split = split_budget(AggregationParams(reporting_length=r), delta, budget=Budget(epsilon=epsilon))
    assert split.epsilon_n + split.epsilon_m == pytest.approx(epsilon, rel=1e-12)
    assert split.zcdp_spent() == pytest.approx(split.rho, rel=1e-12)
    # Every k uses the full epsilon_Q: R epsilon_Q^2 / 2 = rho Q_p.
    assert r * split.epsilon_q**2 / 2 == pytest.approx(split.rho * 0.01, rel=1e-12)
    # The classic conversion of rho at delta/2 gives back epsilon_M exactly (the square is there).
    assert epsilon_from_rho_delta(split.rho, delta / 2) == pytest.approx(split.epsilon_m, rel=1e-12)


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 4.0])
@pytest.mark.parametrize("delta", [1e-8, 1e-6])
def test_rho_is_within_opendp_zcdp_to_approx_dp(epsilon: float, delta: float) -> None:
    """OpenDP's (tighter) zCDP -> (epsilon, delta) conversion of a rho-zCDP Gaussian spends <= epsilon_M at delta/2."""
    split = split_budget(AggregationParams(), delta, budget=Budget(epsilon=epsilon))
    gaussian = dp.m.make_gaussian(
        dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=1 / math.sqrt(2 * split.rho)
    )
    assert gaussian.map(1.0) == pytest.approx(split.rho, rel=1e-9)
    profile = dp.c.make_zCDP_to_approxDP(gaussian).map(1.0)
    assert profile.epsilon(delta / 2) <= split.epsilon_m + 1e-9


def test_sigma_proportions_presets() -> None:
    base = {"reporting_length": 4}
    long = AggregationParams(**base).sigma_proportions_for()
    assert long == pytest.approx((1, 1 / 2, 1 / 3, 1 / 4))
    short = AggregationParams(**base, accuracy_mode=AccuracyMode.PRIORITIZE_SHORT).sigma_proportions_for()
    assert short == pytest.approx((1 / 4, 1 / 3, 1 / 2, 1))
    assert AggregationParams(**base, accuracy_mode="balanced").sigma_proportions_for() == (1, 1, 1, 1)
    split = split_budget(AggregationParams(**base), 1e-6, budget=Budget(1.0))
    assert [s / split.sigma for s in split.sigmas] == pytest.approx(long)


def test_delta_from_protected_n() -> None:
    assert delta_from_protected_n(1) == MAX_DERIVED_DELTA
    assert delta_from_protected_n(2) == MAX_DERIVED_DELTA
    assert delta_from_protected_n(10) == MAX_DERIVED_DELTA  # 1/(10 ln 10) > 1e-3
    n = 32_561
    assert delta_from_protected_n(n) == pytest.approx(1 / (n * math.log(n)), rel=1e-12)
    assert delta_from_protected_n(10**6) < delta_from_protected_n(10**5)


def test_rho_1_threshold_formula() -> None:
    sigma_1, d1, delta = 5.4, 14, 1e-6
    expected = 1 + sigma_1 * math.sqrt(d1) * norm.ppf((1 - delta / 2) ** (1 / d1))
    assert rho_1_threshold(sigma_1, d1, delta) == pytest.approx(expected, rel=1e-6)
    # The survival form stays finite and accurate for tiny delta.
    assert np.isfinite(rho_1_threshold(sigma_1, d1, 1e-15))


def test_adaptive_thresholds_and_presets() -> None:
    assert adaptive_threshold(2.0, 4, 1.0) == 0.0
    assert adaptive_threshold(2.0, 4, 0.1) == pytest.approx(2 * 2 * norm.ppf(0.95))
    assert fabrication_etas(FabricationMode.BALANCED, 4) == {2: 0.55, 3: 1.0, 4: 1.0}
    assert fabrication_etas(FabricationMode.PROGRESSIVE, 4) == pytest.approx({2: 0.1, 3: 0.55, 4: 1.0})
    assert fabrication_etas(FabricationMode.PROGRESSIVE, 2) == {2: 0.1}
    assert fabrication_etas(FabricationMode.MINIMIZE, 3) == {2: 0.01, 3: 0.01}
    assert fabrication_etas(FabricationMode.UNCONTROLLED, 3) == {2: 1.0, 3: 1.0}
    fixed = AggregationParams(reporting_length=3, fabrication_mode="custom_fixed", thresholds=(10, 20))
    split = split_budget(fixed, 1e-6)
    assert thresholds_for(fixed, split, 2, 50) == 10
    assert thresholds_for(fixed, split, 3, 50) == 20
    adaptive = AggregationParams(
        reporting_length=3, fabrication_mode="custom_adaptive", thresholds=(0.5, 1.0)
    )
    split = split_budget(adaptive, 1e-6)
    assert thresholds_for(adaptive, split, 2, 9) == pytest.approx(split.sigmas[1] * 3 * norm.ppf(0.75))


def test_rho_from_epsilon_delta_inverts_classic_conversion() -> None:
    for eps in (0.01, 0.3, 2.0, 50.0):
        for delta in (1e-12, 1e-5, 0.5):
            assert epsilon_from_rho_delta(rho_from_epsilon_delta(eps, delta), delta) == pytest.approx(
                eps, rel=1e-10
            )


def test_budget_report_states_the_identity() -> None:
    split = split_budget(AggregationParams(reporting_length=3), 1e-6, budget=Budget(epsilon=4.0))
    text = split.describe()
    assert "rho = 0.240905" in text and "sigma_3 = " in text
    assert f"= {split.zcdp_spent():.6g} = rho" in text


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 4.0, 10.0])
@pytest.mark.parametrize("delta", [1e-9, 1e-6])
def test_rho_of_converts_to_epsilon_delta(epsilon: float, delta: float) -> None:
    from spark_dpsynth.privacy.accounting import opendp_epsilon_of_rho, rho_of

    rho = rho_of(epsilon, delta)
    assert rho + 2 * math.sqrt(rho * math.log(1 / delta)) == pytest.approx(epsilon, rel=1e-12)
    assert opendp_epsilon_of_rho(rho, delta) <= epsilon  # the exact conversion is tighter
    tight = rho_of(epsilon, delta, "tight_zcdp")
    assert tight > rho
    assert opendp_epsilon_of_rho(tight, delta) == pytest.approx(epsilon, rel=1e-6)
