"""The marginals mechanism's budget split: how epsilon (and delta) become epsilon_N, rho, epsilon_Q and sigma_k.

All formulas are those of docs/design.md section 2.3: Gopi, Mahabadi, Yekhanin, "Differentially Private Marginals"
(2022), Theorem 1.1, split as in SDS's "Differentially private aggregation and synthesis", section 3.2.2 (rho with
the square):

* epsilon = epsilon_N + epsilon_M, epsilon_N = N_p * epsilon.
* rho = (sqrt(epsilon_M + ln(2/delta)) - sqrt(ln(2/delta)))^2, the zCDP budget whose classic conversion
  (Bun & Steinke 2016, Prop. 1.3: rho-zCDP => (rho + 2 sqrt(rho ln(1/delta')), delta')-DP) gives
  (epsilon_M, delta/2)-DP; the other delta/2 pays for the threshold rho_1 of the 1-tuples.
* epsilon_Q = sqrt(2 rho Q_p / R): each of the R DP percentiles is epsilon_Q-DP, i.e. epsilon_Q^2/2-zCDP, so
  together they spend R epsilon_Q^2 / 2 = rho Q_p.
* sigma = sqrt(sum_k p_k^-2 / (2 rho (1 - Q_p))), sigma_k = p_k sigma: the Gaussian counts of length k with
  sensitivity Delta_k and noise std sigma_k sqrt(Delta_k) spend 1/(2 sigma_k^2), summing to rho (1 - Q_p).

Thresholds of the marginals (docs/design.md section 2.5): rho_1 by the exact discrete analogue
(:func:`~spark_dpsynth.privacy.accounting.rho_1_threshold_discrete`), rho_k for k >= 2 adaptive at eta_k of a
fabrication preset (:func:`fabrication_etas`) or fixed t_k (:func:`thresholds_for`).

Every share is spent into the run's :class:`~spark_dpsynth.privacy.accounting.Accountant`, the ledger.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from spark_dpsynth import _validate as v
from spark_dpsynth.errors import BudgetError, InvalidParameterError
from spark_dpsynth.params import Accounting, AggregationParams, FabricationMode
from spark_dpsynth.privacy.accounting import (
    Accountant,
    adaptive_threshold,
    profile_mechanism,
    rho_1_threshold_discrete,
    spend_number_of_records,
)
from spark_dpsynth.privacy.budget import Budget

__all__ = ["ACCOUNTING", "BudgetSplit", "split_budget", "fabrication_etas", "thresholds_for"]

ACCOUNTING = Accounting.CLASSIC
"""The marginals mechanism's accounting when the budget names none: SDS's classic conversion (docs/design.md
section 2.3), so that its sigmas are SDS's."""


@dataclass(frozen=True)
class BudgetSplit:
    """The privacy parameters of one release (docs/design.md section 2.3). Units: epsilon/delta of (epsilon, delta)-DP,
    rho of zCDP; sigmas are multipliers of sqrt(Delta_k) (noise std of a length-k count is sigma_k sqrt(Delta_k))."""

    epsilon: float
    """Total epsilon, > 0."""
    delta: float
    """Total delta, in (0, 1)."""
    epsilon_n: float
    """Epsilon of the protected number of records (discrete Laplace, scale 1/epsilon_n)."""
    epsilon_m: float
    """Epsilon of the marginals, epsilon - epsilon_n."""
    rho: float
    """zCDP budget of the marginals and percentiles."""
    percentile_epsilon_proportion: float
    """Q_p, the share of rho spent on percentiles."""
    epsilon_q: float
    """Pure-DP epsilon of *each* of the R percentile selections."""
    sigma: float
    """Base noise multiplier; sigma_k = p_k sigma."""
    sigma_proportions: tuple[float, ...]
    """p_1..p_R."""
    sigmas: tuple[float, ...]
    """sigma_1..sigma_R."""
    budget: Budget | None = None
    """The accountant's record of every share (manifest ``budget``)."""
    bins_rho: float = 0.0
    """zCDP budget of the DP profile of the numeric columns, rho B_p (0 when no column is profiled)."""
    profile_columns: int = 0
    """The number of numeric columns the DP profile covers (docs/design.md section 2.8)."""
    rho_1_delta: float | None = None
    """The delta of the threshold rho_1: delta/2, or delta/4 with a DP profile (the DP exact values keep a
    quarter); None reads delta/2."""

    @property
    def reporting_length(self) -> int:
        return len(self.sigmas)

    def zcdp_spent(self) -> float:
        """R epsilon_Q^2 / 2 + the profile's rho B_p + the rho B_p kept for the DP exact values + sum_k
        1/(2 sigma_k^2): equals ``rho`` (up to rounding)."""
        r = self.reporting_length
        return r * self.epsilon_q**2 / 2 + 2 * self.bins_rho + sum(1 / (2 * s * s) for s in self.sigmas)

    def describe(self) -> str:
        """A plain-text report of the split and the zCDP identity it satisfies (for the CLI and notebooks)."""
        r = self.reporting_length
        lines = [
            f"epsilon = {self.epsilon:g} = epsilon_N {self.epsilon_n:.6g} + epsilon_M {self.epsilon_m:.6g}",
            f"delta = {self.delta:.3g} (delta/2 for the marginals' zCDP conversion, "
            + (
                "delta/4 for the threshold rho_1, delta/4 for the DP exact values' threshold)"
                if self.bins_rho
                else "delta/2 for the threshold rho_1)"
            ),
            f"rho = {self.rho:.6g} (zCDP)",
            f"epsilon_Q = {self.epsilon_q:.6g} per percentile (pure DP), {r} percentiles",
            f"sigma = {self.sigma:.6g}; "
            + ", ".join(f"sigma_{k} = {s:.6g}" for k, s in enumerate(self.sigmas, start=1)),
            (
                f"identity: R epsilon_Q^2 / 2 + 2 rho B_p (the DP profile, and the DP exact values at most) "
                f"+ sum_k 1 / (2 sigma_k^2) = {self.zcdp_spent():.6g} = rho"
                if self.bins_rho
                else f"identity: R epsilon_Q^2 / 2 + sum_k 1 / (2 sigma_k^2) = {self.zcdp_spent():.6g} = rho"
            ),
        ]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d.pop("budget", None)
        d["sigma_proportions"] = list(self.sigma_proportions)
        d["sigmas"] = list(self.sigmas)
        return d


def split_budget(
    params: AggregationParams,
    delta: float,
    profile_columns: int = 0,
    *,
    profile_parts: int | None = None,
    profile_units: float | None = None,
    acct: Accountant | None = None,
    budget: Budget | None = None,
    empty_counts: bool = False,
) -> BudgetSplit:
    """Split (epsilon, delta) into the parameters of every mechanism of a release (docs/design.md section 2.3).

    Args:
        params: validated aggregation parameters (R, Q_p, N_p, B_p, sigma proportions).
        delta: the delta in force: the budget's, or one derived from the protected number of records.
        profile_columns: the number of numeric columns whose DP profile (code or measurement, range, bins;
            docs/design.md section 2.8) the caller draws, >= 0. With any, the share ``column_profile`` = rho B_p
            pays for it (one Gaussian mechanism, rho-zCDP) and the counts get rho (1 - Q_p - B_p). Without,
            nothing is spent on it (the split is that of section 2.3).
        profile_parts: the profile's draws (one per column, one more per real column's count of fractional
            values, one more per column's block counts); default ``profile_columns``.
        profile_units: the profile's squared L2 sensitivity in units of its cells' noise
            (``mechanisms._profile.profile_units``); default ``profile_parts``. Its cells' noise std is
            sqrt(units / (2 rho B_p)).
        acct: the release's accountant, into which the shares are spent (its ``number_of_records`` share, when
            already spent, is the one of n'; its delta is declared here when it has none); default a new one
            of ``budget``, for the figures alone.
        budget: the budget of that new accountant (default :class:`~spark_dpsynth.privacy.budget.Budget`); with
            ``acct``, it must be ``acct``'s.
        empty_counts: the 1-tuple share also pays for the noisy empty counts (a second draw of the same
            histogram, docs/design.md section 2.8).

    Raises:
        InvalidParameterError: delta is not in (0, 1); ``budget`` is not ``acct``'s.
        BudgetError: ``acct`` has a different delta or has already spent these shares.
    """
    v.open_unit("delta", delta)
    if acct is not None and budget is not None and budget != acct.budget:
        raise InvalidParameterError("split_budget: give the run's accountant or a budget, not two budgets")
    if acct is None:
        acct = Accountant(budget if budget is not None else Budget())
    if acct.delta is None:
        acct.declare_delta(delta, acct.budget.delta_source)
    elif acct.delta != delta:
        raise BudgetError(f"the release's delta is {acct.delta!r}, the split's {delta!r}")
    eps = acct.epsilon
    if acct.spent("number_of_records"):
        eps_n = acct.share("number_of_records").epsilon or 0.0
    else:
        eps_n = spend_number_of_records(acct, params.number_of_records_epsilon_proportion)
    eps_m = acct.remaining_epsilon()
    rho = acct.convert_to_rho(eps_m, delta / 2.0, ACCOUNTING)
    acct.spend_delta("zcdp_conversion", delta / 2.0, "rho-zCDP -> (epsilon_M, delta/2)-DP")
    # with a DP profile, a quarter of delta is kept for the threshold of the DP exact values (docs/design.md 2.8)
    rho_1_delta = acct.spend_delta(
        "threshold_rho_1",
        delta / (4.0 if profile_columns > 0 else 2.0),
        "threshold on the noisy 1-tuple counts",
    )
    r = params.reporting_length
    qp = params.percentile_epsilon_proportion
    eps_q = math.sqrt(2.0 * rho * qp / r)
    acct.spend_rho(
        "percentiles",
        rho * qp,
        f"exponential mechanism (DP percentile of per-record k-tuples), {r} times",
        epsilon=eps_q,
        parts=r,
    )
    bp = params.bins_epsilon_proportion if profile_columns > 0 else 0.0
    if profile_columns > 0:
        parts = profile_parts if profile_parts is not None else profile_columns
        units = profile_units if profile_units is not None else float(parts)
        acct.spend_rho(
            "column_profile",
            rho * bp,
            profile_mechanism(profile_columns),
            sigma=math.sqrt(units / (2.0 * (rho * bp))),
            parts=parts,
        )
    props = params.sigma_proportions_for()
    # 2 bp with a profile: as much again is kept for the DP exact values (spend_exact_values, when the profile
    # finds measurements; unspent otherwise)
    sigma = math.sqrt(sum(1.0 / (p * p) for p in props) / (2.0 * rho * (1.0 - qp - 2.0 * bp)))
    sigmas = tuple(p * sigma for p in props)
    for k, s_k in enumerate(sigmas, start=1):
        acct.spend_rho(
            f"marginals_k{k}",
            1.0 / (2.0 * s_k * s_k),
            "discrete Gaussian (k-tuple counts)",
            sigma=s_k,
            parts=2 if k == 1 and empty_counts else 1,
        )
    return BudgetSplit(
        epsilon=eps,
        delta=float(delta),
        epsilon_n=eps_n,
        epsilon_m=eps_m,
        rho=rho,
        percentile_epsilon_proportion=qp,
        epsilon_q=eps_q,
        sigma=sigma,
        sigma_proportions=tuple(props),
        sigmas=sigmas,
        budget=acct.ledger(),
        bins_rho=rho * bp,
        profile_columns=profile_columns,
        rho_1_delta=rho_1_delta,
    )


def fabrication_etas(mode: FabricationMode, reporting_length: int) -> dict[int, float]:
    """eta_k for k = 2..R of an adaptive fabrication preset (docs/design.md section 2.5)."""
    r = reporting_length
    ks = range(2, r + 1)
    if mode is FabricationMode.UNCONTROLLED:
        return {k: 1.0 for k in ks}
    if mode is FabricationMode.PROGRESSIVE:
        return {k: (0.1 + 0.9 * (k - 2) / (r - 2)) if r > 2 else 0.1 for k in ks}
    if mode is FabricationMode.BALANCED:
        return {k: 0.55 if k == 2 else 1.0 for k in ks}
    if mode is FabricationMode.MINIMIZE:
        return {k: 0.01 for k in ks}
    raise InvalidParameterError(f"fabrication_mode {mode.value!r} is not an adaptive preset")


def thresholds_for(params: AggregationParams, split: BudgetSplit, k: int, sensitivity_k: int) -> float:
    """The threshold rho_k applied to noisy counts of length k (a count must be > rho_k and > 0 to be kept)."""
    if k == 1:
        delta_1 = split.rho_1_delta if split.rho_1_delta is not None else split.delta / 2.0
        return rho_1_threshold_discrete(split.sigmas[0], sensitivity_k, 2.0 * delta_1)
    mode = params.fabrication_mode
    if mode is FabricationMode.CUSTOM_FIXED:
        assert params.thresholds is not None
        return float(params.thresholds[k - 2])
    if mode is FabricationMode.CUSTOM_ADAPTIVE:
        assert params.thresholds is not None
        eta = float(params.thresholds[k - 2])
    else:
        eta = fabrication_etas(mode, params.reporting_length)[k]
    return adaptive_threshold(split.sigmas[k - 1], sensitivity_k, eta)
