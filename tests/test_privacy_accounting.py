"""Issue 3, item 5: the accounting against OpenDP (zCDP -> approximate DP; the thresholded Gaussian)."""

from __future__ import annotations

import math

import numpy as np
import opendp.prelude as dp
import pytest

from spark_dpsynth.errors import BudgetError, InvalidParameterError
from spark_dpsynth.mechanisms._discovery import draw_protected_n, release_accountant
from spark_dpsynth.mechanisms.budget_split import split_budget
from spark_dpsynth.params import Accounting, AggregationParams
from spark_dpsynth.privacy.accounting import (
    Accountant,
    discrete_gaussian_tail,
    opendp_epsilon_of_rho,
    rho_1_threshold,
    rho_1_threshold_discrete,
)
from spark_dpsynth.privacy.budget import Budget

dp.enable_features("contrib")

GRID = np.random.default_rng(20261121)  # the grid of parameters only; no privacy noise here
CASES = [
    (float(10 ** GRID.uniform(-1.3, 1.2)), float(10 ** GRID.uniform(-10, -3)), int(GRID.integers(1, 5)))
    for _ in range(12)
]


@pytest.mark.parametrize(("epsilon", "delta", "r"), CASES)
def test_tight_accounting_matches_opendp_conversion(epsilon: float, delta: float, r: int) -> None:
    """With accounting="tight_zcdp", OpenDP's exact conversion of rho at delta/2 gives epsilon_M to 1e-9."""
    split = split_budget(
        AggregationParams(reporting_length=r), delta, budget=Budget(epsilon=epsilon, accounting="tight_zcdp")
    )
    assert opendp_epsilon_of_rho(split.rho, delta / 2) == pytest.approx(split.epsilon_m, rel=1e-9)
    assert split.zcdp_spent() == pytest.approx(split.rho, rel=1e-12)
    classic = split_budget(AggregationParams(reporting_length=r), delta, budget=Budget(epsilon=epsilon))
    # The classic conversion is looser: OpenDP says it spends less than epsilon_M, and the tight rho is larger.
    assert opendp_epsilon_of_rho(classic.rho, delta / 2) <= classic.epsilon_m * (1 + 1e-12)
    assert split.rho > classic.rho and split.sigma < classic.sigma


@pytest.mark.parametrize(("epsilon", "expected_gain"), [(1.0, 0.148), (4.0, 0.094)])
def test_tight_accounting_sigma_gain(epsilon: float, expected_gain: float) -> None:
    """How much smaller sigma gets with the exact conversion (delta 1e-6): ~14.8% at eps 1, ~9.4% at eps 4."""
    classic = split_budget(AggregationParams(), 1e-6, budget=Budget(epsilon=epsilon, delta=1e-6))
    tight = split_budget(
        AggregationParams(), 1e-6, budget=Budget(epsilon=epsilon, delta=1e-6, accounting="tight_zcdp")
    )
    assert 1 - tight.sigma / classic.sigma == pytest.approx(expected_gain, abs=0.002)


@pytest.mark.parametrize(
    ("sigma_1", "sensitivity_1", "delta"),
    [(5.4, 14, 1e-6), (20.7, 15, 1e-6), (3.0, 5, 1e-3), (1.2, 40, 1e-9)],
)
def test_rho_1_threshold_matches_opendp_thresholded_gaussian(
    sigma_1: float, sensitivity_1: int, delta: float
) -> None:
    """OpenDP's privacy map of a Gaussian-thresholded sparse histogram, at our rho_1, charges delta/2 and rho_1.

    d_in: a record adds at most Delta_1 keys (l0), each by 1 (linf), so l2 = sqrt(Delta_1).
    """
    scale = sigma_1 * math.sqrt(sensitivity_1)
    threshold = rho_1_threshold(sigma_1, sensitivity_1, delta)
    measurement = dp.m.make_gaussian_threshold(
        dp.map_domain(dp.atom_domain(T=dp.String), dp.atom_domain(T=float, nan=False)),
        dp.l02inf_distance(dp.absolute_distance(T=float)),
        scale=scale,
        threshold=threshold,
    )
    rho, opendp_delta = measurement.map((sensitivity_1, math.sqrt(sensitivity_1), 1.0))
    assert opendp_delta == pytest.approx(delta / 2, rel=1e-4)
    assert rho == pytest.approx(1 / (2 * sigma_1**2), rel=1e-9)


@pytest.mark.parametrize(
    ("sigma_1", "sensitivity_1", "delta"),
    [(5.4, 14, 1e-6), (20.7, 15, 1e-6), (3.0, 5, 1e-3), (1.2, 40, 1e-9)],
)
def test_discrete_rho_1_threshold_is_exact_and_within_opendp_integer_analysis(
    sigma_1: float, sensitivity_1: int, delta: float
) -> None:
    """The threshold used with discrete noise: its exact leak is <= delta/2 and one less is > delta/2; OpenDP's
    own analysis of the integer-domain (discrete Gaussian) thresholded histogram also charges <= delta/2 there."""
    scale = sigma_1 * math.sqrt(sensitivity_1)
    m = rho_1_threshold_discrete(sigma_1, sensitivity_1, delta)
    assert m == int(m)

    def leak(t: float) -> float:
        return 1 - (1 - discrete_gaussian_tail(scale, int(t))) ** sensitivity_1

    assert leak(m) <= delta / 2 < leak(m - 1)
    measurement = dp.m.make_gaussian_threshold(
        dp.map_domain(dp.atom_domain(T=dp.String), dp.atom_domain(T=dp.i64)),
        dp.l02inf_distance(dp.absolute_distance(T=dp.i64)),
        scale=scale,
        threshold=int(m) + 1,  # OpenDP keeps |x| >= threshold; we keep x > m
    )
    _, opendp_delta = measurement.map((sensitivity_1, sensitivity_1, 1))
    assert opendp_delta <= delta / 2 * 1.5  # OpenDP's bound is conservative but of the same size


def test_discrete_gaussian_tail_matches_sampler_scale() -> None:
    assert discrete_gaussian_tail(3.0, 0) == pytest.approx(
        0.5 + 0.5 * (1 - discrete_gaussian_tail(3.0, 1) * 2), rel=1e-12
    )
    assert discrete_gaussian_tail(3.0, 100) < 1e-200


# --------------------------------------------------------------------------------------------- tiny epsilon


def _summed_tail(scale: float, m: int) -> float:
    """The exact tail as first written: a sum over +-40 standard deviations (an array of 80 scale floats)."""
    import numpy as np

    half = int(math.ceil(40.0 * scale)) + 2
    z = np.arange(-half, half + 1, dtype=np.float64)
    weights = np.exp(-(z * z) / (2.0 * scale * scale))
    return float(weights[z >= m].sum() / weights.sum())


@pytest.mark.parametrize("scale", [0.3, 1.0, 7.5, 40.0, 333.3, 2500.0, 10_000.0])
def test_discrete_gaussian_tail_is_the_exact_sum_at_normal_scales(scale: float) -> None:
    for m in (0, 1, 2, int(scale), int(3 * scale) + 1, int(8 * scale) + 1):
        assert discrete_gaussian_tail(scale, m) == _summed_tail(scale, m)


@pytest.mark.parametrize("scale", [10_001.0, 25_000.0])
def test_discrete_gaussian_tail_beyond_the_exact_range_is_a_tight_upper_bound(scale: float) -> None:
    for x in (0.5, 1.0, 3.0, 5.0, 8.0):
        m = int(x * scale)
        exact = _summed_tail(scale, m)
        bound = discrete_gaussian_tail(scale, m)
        assert exact <= bound <= exact * (1 + 2 * (x + 1) / scale)


def test_rho_1_from_the_bound_is_the_exact_threshold_or_one_more(monkeypatch: pytest.MonkeyPatch) -> None:
    """Thresholds from the closed-form bound (forced at scales where the sum is still affordable) are never
    below the exact ones and at most one count above."""
    from spark_dpsynth.privacy import accounting

    cases = [(2_000.0, 1, 1e-6), (3_500.0, 4, 1e-9), (5_000.0, 16, 1e-5), (8_000.0, 2, 1e-12)]
    exact = [rho_1_threshold_discrete(s, d, delta) for s, d, delta in cases]
    monkeypatch.setattr(accounting, "EXACT_TAIL_MAX_SCALE", 0.0)
    bounded = [rho_1_threshold_discrete(s, d, delta) for s, d, delta in cases]
    assert all(0 <= b - e <= 1 for b, e in zip(bounded, exact, strict=True)), (exact, bounded)


def test_tiny_epsilon_thresholds_take_constant_memory() -> None:
    import tracemalloc

    from spark_dpsynth.mechanisms.budget_split import split_budget, thresholds_for
    from spark_dpsynth.params import AggregationParams

    tracemalloc.start()
    try:
        for epsilon in (1e-9, 1e-6):
            params = AggregationParams()
            budget = Budget(epsilon=epsilon, delta=1e-6)
            split = split_budget(params, 1e-6, budget=budget)
            rho_1 = thresholds_for(params, split, 1, 16)
            assert rho_1 > 4 * split.sigmas[0] * 4  # about 5 standard deviations of the 1-tuple noise
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5_000_000, f"{peak} bytes"


# ------------------------------------------------------------------------------ the ledger: draws go through shares


class _Recorder:
    """A noise source that records each draw's scale (or epsilon, rho) and returns zeros / the first index."""

    name = "recorder (test)"
    test_mode = True

    def __init__(self) -> None:
        self.calls: list[tuple[str, float]] = []

    def discrete_gaussian(self, scale: float, size: int) -> np.ndarray:
        self.calls.append(("gaussian", scale))
        return np.zeros(size, dtype=np.int64)

    def discrete_laplace(self, scale: float, size: int) -> np.ndarray:
        self.calls.append(("laplace", scale))
        return np.zeros(size, dtype=np.int64)

    def quantile(self, histogram: np.ndarray, alpha: float, epsilon: float) -> int:
        self.calls.append(("quantile", epsilon))
        return 0

    def exponential(self, scores: np.ndarray, sensitivity: float, rho: float) -> int:
        self.calls.append(("exponential", rho))
        return 0


def test_a_draw_is_made_at_the_scale_its_share_paid_for() -> None:
    source = _Recorder()
    acct = Accountant(Budget(2.0, 1e-6), noise=source)
    acct.spend_epsilon("n", 0.25, "discrete Laplace")
    assert acct.laplace("n", [10]).tolist() == [10]
    acct.convert_to_rho(1.5, 1e-6, Accounting.CLASSIC)
    acct.spend_rho("counts", 0.02, "discrete Gaussian", sigma=5.0)
    acct.spend_rho("percentiles", 0.01, "exponential mechanism", epsilon=0.1, parts=2)
    acct.spend_rho("choice", 0.004, "exponential mechanism", parts=2)
    acct.gaussian("counts", np.array([[1, 2], [3, 4]]), math.sqrt(3))
    acct.quantile("percentiles", np.array([1, 2, 3]), 0.9)
    acct.exponential("choice", np.array([1.0, 0.0]), 1.0)
    assert source.calls == [
        ("laplace", 1.0 / 0.5),  # sensitivity 1 / epsilon of the share (0.25 x 2)
        ("gaussian", 5.0 * math.sqrt(3)),  # sigma x L2 sensitivity
        ("quantile", 0.1),
        ("exponential", 0.002),  # rho / parts
    ]
    assert acct.test_mode and acct.noise_name == "recorder (test)"


def test_no_draw_happens_outside_a_share_or_beyond_its_parts() -> None:
    acct = Accountant(Budget(2.0, 1e-6), noise=_Recorder())
    with pytest.raises(BudgetError, match="spend it before drawing"):
        acct.gaussian("counts", [1])
    acct.convert_to_rho(2.0, 1e-6, Accounting.CLASSIC)
    acct.spend_rho("counts", 0.02, "discrete Gaussian", sigma=5.0)
    acct.gaussian("counts", [1])
    with pytest.raises(BudgetError, match="all made"):
        acct.gaussian("counts", [1])
    with pytest.raises(BudgetError, match="another|needs its epsilon"):
        acct.quantile("counts", np.array([1]), 0.5)
    with pytest.raises(BudgetError, match="does not pay for noise of std"):
        acct.spend_rho("too_little", 0.001, "discrete Gaussian", sigma=1.0)  # 1/(2 sigma^2) = 0.5 > 0.001


def test_a_rejected_choice_uses_no_part_of_its_share() -> None:
    acct = Accountant(Budget(1.0), noise=_Recorder())
    acct.set_rho(1.0)
    acct.spend_rho("choice", 0.5, "exponential mechanism")
    assert acct.exponential("choice", np.array([3.0, 1.0]), 1.0, accept=lambda i: False) is None
    assert acct.exponential("choice", np.array([3.0, 1.0]), 1.0, accept=lambda i: i == 1) == 1
    with pytest.raises(BudgetError):
        acct.exponential("choice", np.array([3.0, 1.0]), 1.0)


def test_the_run_accountant_holds_the_one_budget() -> None:
    budget = Budget(epsilon=2.0, seed=1)
    acct = release_accountant(budget)
    assert acct.test_mode and acct.delta is None and acct.budget is budget
    assert release_accountant(acct=acct) is acct
    assert release_accountant(budget, acct=acct) is acct
    with pytest.raises(InvalidParameterError, match="give one budget"):
        release_accountant(Budget(epsilon=1.0), acct=acct)


def test_split_budget_spends_into_the_run_accountant_once() -> None:
    """n' drawn first (its share spent by the draw), then the split: the same figures as a split alone, the
    1-tuple share paying for the empty counts' second draw."""
    params = AggregationParams()
    budget = Budget(epsilon=2.0, delta=1e-6)
    acct = release_accountant(budget, _Recorder())
    assert draw_protected_n(500, params, acct) == 500
    split = split_budget(params, 1e-6, acct=acct, empty_counts=True)
    alone = split_budget(params, 1e-6, budget=budget)
    assert split.sigmas == alone.sigmas and split.epsilon_n == alone.epsilon_n
    assert (
        acct.right("marginals_k1").parts == 2 and acct.right("percentiles").parts == params.reporting_length
    )
    with pytest.raises(BudgetError):
        split_budget(params, 1e-6, acct=acct)  # spent once


@pytest.mark.parametrize(("scale", "new_values", "delta"), [(5.0, 3, 1e-6), (0.7, 1, 1e-3), (40.0, 12, 1e-9)])
def test_laplace_threshold_bounds_the_chance_that_a_new_value_passes(scale, new_values, delta) -> None:
    # the exact tail of the discrete Laplace, summed: at the threshold a record's new values (count 1) pass with
    # probability <= delta, one below it they would not
    from spark_dpsynth.privacy.accounting import laplace_threshold_discrete

    m = int(laplace_threshold_discrete(scale, new_values, delta))
    z = np.arange(-int(60 * scale) - 50, int(60 * scale) + 51)
    p = np.exp(-np.abs(z) / scale)
    p /= p.sum()

    def leak(t: int) -> float:
        return 1.0 - (1.0 - p[z >= t].sum()) ** new_values

    assert leak(m) <= delta
    assert m == 1 or leak(m - 1) > delta
