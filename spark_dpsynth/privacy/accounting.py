"""Privacy accounting of a release: the ledger and the conversions and thresholds every mechanism shares.

* :class:`Accountant`: one budget split into named shares and the only door to the noise; its record is the
  :class:`~spark_dpsynth.privacy.ledger.Ledger` of the release manifest (docs/design.md section 2.3).
* Conversions (docs/design.md section 2.3): rho = (sqrt(epsilon + ln(1/delta')) - sqrt(ln(1/delta')))^2, the zCDP
  budget whose classic conversion (Bun & Steinke 2016, Prop. 1.3: rho-zCDP => (rho + 2 sqrt(rho ln(1/delta')),
  delta')-DP) gives (epsilon, delta')-DP, delta' the share of delta the conversion spends (:func:`rho_of`); the
  exact conversion of ``tight_zcdp`` (Canonne, Kamath, Steinke 2020, Prop. 12); delta from the protected number
  of records (:func:`delta_from_protected_n`).
* Thresholds (docs/design.md section 2.5): rho_1 = 1 + sigma_1 sqrt(Delta_1) Phi^-1((1 - delta/2)^(1/Delta_1)) for
  continuous noise; with the discrete Gaussian its exact integer analogue (:func:`rho_1_threshold_discrete`);
  adaptive rho_k = sigma_k sqrt(Delta_k) Phi^-1(1 - eta_k/2) for k >= 2 (with the length's own Delta_k,
  docs/design.md section 6.1); the pure-DP form under discrete Laplace noise (:func:`laplace_threshold_discrete`).

The marginals mechanism's split of a budget into epsilon_N, rho, epsilon_Q and sigma_k is
:mod:`spark_dpsynth.mechanisms.budget_split`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
from scipy.stats import norm

from spark_dpsynth import _validate as v
from spark_dpsynth.errors import BudgetError, InvalidParameterError
from spark_dpsynth.params import Accounting
from spark_dpsynth.privacy.budget import Budget
from spark_dpsynth.privacy.ledger import BudgetShare, Ledger

if TYPE_CHECKING:
    from spark_dpsynth.privacy.noise import NoiseSource

__all__ = [
    "MAX_DERIVED_DELTA",
    "Accountant",
    "DrawRight",
    "rho_of",
    "rho_from_epsilon_delta",
    "rho_tight_from_epsilon_delta",
    "opendp_epsilon_of_rho",
    "epsilon_from_rho_delta",
    "spend_number_of_records",
    "profile_mechanism",
    "delta_from_protected_n",
    "rho_1_threshold",
    "rho_1_threshold_discrete",
    "discrete_gaussian_tail",
    "EXACT_TAIL_MAX_SCALE",
    "adaptive_threshold",
    "laplace_threshold_discrete",
    "discrete_laplace_variance",
]

MAX_DERIVED_DELTA = 1e-3
"""A delta derived from the protected number of records is never larger than this."""


@dataclass(frozen=True)
class DrawRight:
    """What a share of the budget lets a mechanism draw (:class:`Accountant`): the noise is drawn at the share's
    own scale, at most ``parts`` times."""

    name: str
    """The share's name."""
    parts: int
    """How many draws the share pays for, >= 1: pieces of one statistic whose sensitivity the share accounts
    for (the value counts and the empty counts of one histogram), or statistics it accounts for together (the
    columns of the DP profile), or the R percentiles of one share."""
    epsilon: float | None = None
    """The pure-DP epsilon of each draw (discrete Laplace of scale sensitivity / epsilon; a DP percentile)."""
    rho: float | None = None
    """The zCDP rho of the share (an exponential mechanism draws at rho / parts)."""
    sigma: float | None = None
    """The discrete Gaussian's std per unit of L2 sensitivity (a draw at L2 sensitivity s has std sigma s)."""


class Accountant:
    """One privacy budget, split into named shares, and the only door to the release's noise.

    A mechanism asks for each DP step's share here (after PipelineDP's budget accountant and Tumult's budget
    types): pure-DP shares of epsilon (:meth:`spend_epsilon`), the conversion of the rest of epsilon to a zCDP
    budget rho (:meth:`convert_to_rho`), shares of rho (:meth:`spend_rho`, :meth:`split_rho`) and of delta
    (:meth:`spend_delta`). Noise is drawn only through a share (:meth:`laplace`, :meth:`gaussian`,
    :meth:`quantile`, :meth:`exponential`), at the scale the share paid for and at most as often as it paid for
    (:class:`DrawRight`), from the one noise source the accountant holds: no draw happens outside the ledger.
    :meth:`ledger` is the record of every share that goes into the release manifest
    (:class:`~spark_dpsynth.privacy.ledger.Ledger`). Composition: pure shares add up in epsilon (basic
    composition); zCDP shares add up in rho (Bun & Steinke 2016, Lemma 1.7) and the total rho is converted once
    (Prop. 1.3, or Canonne, Kamath, Steinke 2020 Prop. 12 with ``tight_zcdp``); docs/design.md section 2.3.

    One accountant is made at the start of a run
    (:func:`spark_dpsynth.mechanisms._discovery.release_accountant`) and passed down to every mechanism of the
    release (the default's choice draws n' through it, then the chosen mechanism spends the rest).

    Args:
        budget: the release's :class:`~spark_dpsynth.privacy.budget.Budget` (validated when it was made): its
            epsilon, its delta (None: declared later, when derived from the protected number of records,
            :meth:`declare_delta`) and its accounting.
        noise: the release's :class:`~spark_dpsynth.privacy.noise.NoiseSource`; None: an accountant that only
            computes a budget (a draw raises).

    Raises:
        TypeError: ``budget`` is not a :class:`~spark_dpsynth.privacy.budget.Budget`.
        BudgetError: the shares asked for exceed the budget (more than epsilon in pure shares, more than rho
            in zCDP shares, more than delta in delta shares); a draw from a share that was not spent, that pays
            for another kind of noise, or whose parts are used up.
    """

    def __init__(self, budget: Budget, *, noise: NoiseSource | None = None) -> None:
        if not isinstance(budget, Budget):
            raise TypeError(f"an Accountant holds a privacy.budget.Budget, got {type(budget).__name__}")
        self.budget = budget
        """The release's budget, as given (its delta None when the delta in force is derived)."""
        self.epsilon = budget.epsilon
        self.delta = budget.delta
        self.accounting: Accounting | None = budget.accounting
        """The accounting in force: the budget's, else the converting mechanism's (:meth:`resolve_accounting`)."""
        self.delta_source = "given"
        self.rho: float | None = None
        self._shares: list[BudgetShare] = []
        self._rights: dict[str, DrawRight] = {}
        self._used: dict[str, int] = {}
        self._noise = noise

    # ------------------------------------------------------------------------------------------ the noise source

    def _source(self) -> NoiseSource:
        if self._noise is None:
            raise BudgetError("this accountant has no noise source: it only computes a budget")
        return self._noise

    @property
    def noise_name(self) -> str:
        """The noise sampler's name (manifest ``noise_sampler``)."""
        return self._source().name

    @property
    def test_mode(self) -> bool:
        """True when the noise is seeded or off: such a release is NOT private (manifest ``test_mode``).

        Raises:
            BudgetError: the accountant has no noise source."""
        return bool(self._source().test_mode)

    def sub_budget(self, epsilon: float, delta: float | None = None) -> Accountant:
        """An accountant for a mechanism run inside this one on a share already spent here (its ``epsilon``, and
        its ``delta``, None: derived by that mechanism), drawing from the same noise source and with the same
        accounting and seed (e.g. the class-conditional synthesizer's DP domains)."""
        return Accountant(replace(self.budget, epsilon=epsilon, delta=delta), noise=self._source())

    # ----------------------------------------------------------------------------------------------- the shares

    def _check(self, name: str) -> None:
        if self.spent(name):
            raise BudgetError(f"the budget share {name!r} was already spent")

    def _grant(self, right: DrawRight) -> None:
        if right.parts < 1:
            raise InvalidParameterError(f"the share {right.name!r} must pay for >= 1 draw, got {right.parts}")
        self._rights[right.name] = right
        self._used[right.name] = 0

    def spend_epsilon(self, name: str, proportion: float, mechanism: str, *, parts: int = 1) -> float:
        """A pure-DP share ``proportion`` x epsilon (proportion in (0, 1)); returns its epsilon. It pays for
        ``parts`` draws at that epsilon (:meth:`laplace`, :meth:`quantile`)."""
        self._check(name)
        share = v.open_unit(f"{name} proportion", proportion) * self.epsilon
        if sum(s.epsilon or 0.0 for s in self._shares if s.rho is None) + share > self.epsilon * (1 + 1e-12):
            raise BudgetError(f"the share {name!r} exceeds the remaining epsilon")
        self._shares.append(BudgetShare(name=name, mechanism=mechanism, epsilon=share))
        self._grant(DrawRight(name, parts, epsilon=share))
        return share

    def spend_rest_of_epsilon(self, name: str, mechanism: str, *, parts: int = 0) -> float:
        """A pure-DP share of everything not yet spent in pure shares; returns its epsilon. It pays for
        ``parts`` draws at that epsilon; with none (the default) it is the epsilon :meth:`convert_to_rho` turns
        into rho."""
        self._check(name)
        rest = self.remaining_epsilon()
        if rest <= 0:
            raise BudgetError(f"no epsilon is left for the share {name!r}")
        self._shares.append(BudgetShare(name=name, mechanism=mechanism, epsilon=rest))
        if parts:
            self._grant(DrawRight(name, parts, epsilon=rest))
        return rest

    def declare_delta(self, delta: float, source: str) -> None:
        """Set the total delta of a budget created without one, once it is known (e.g. derived from a protected
        number of records by a sub-mechanism)."""
        if self.delta is not None:
            raise BudgetError("the budget's delta is already set")
        self.delta = v.open_unit("delta", delta)
        self.delta_source = source

    def remaining_epsilon(self) -> float:
        """epsilon less the pure-DP shares spent so far (epsilon - e_1 - e_2 ...)."""
        out = self.epsilon
        for s in self._shares:
            if s.rho is None and s.epsilon is not None:
                out -= s.epsilon
        return out

    def resolve_accounting(self, default: Accounting) -> Accounting:
        """The accounting in force: the budget's when it names one, else ``default``, the converting mechanism's
        own (``classic`` for the marginals mechanism, ``tight_zcdp`` for the others; docs/design.md section
        2.3), which the ledger then records."""
        if self.accounting is None:
            self.accounting = Accounting(default)
        return self.accounting

    def convert_to_rho(self, epsilon: float, delta: float, default: Accounting) -> float:
        """The largest rho whose rho-zCDP implies (``epsilon``, ``delta``)-DP under the accounting in force
        (:meth:`resolve_accounting` with the mechanism's ``default``; :func:`rho_of`); it becomes the budget's
        rho. ``delta`` is the share of the budget's delta the conversion spends (the caller records it: half of
        delta where the other half pays for a threshold)."""
        if self.rho is not None:
            raise BudgetError("the budget's rho is already set")
        self.rho = rho_of(epsilon, delta, self.resolve_accounting(default))
        return self.rho

    def spend_rho(
        self,
        name: str,
        rho: float,
        mechanism: str,
        *,
        epsilon: float | None = None,
        sigma: float | None = None,
        parts: int = 1,
    ) -> float:
        """Record a zCDP share ``rho`` of the budget's rho; returns ``rho``. It pays for ``parts`` draws:
        discrete Gaussian ones of std ``sigma`` per unit of L2 sensitivity (1/(2 sigma^2) <= rho: Canonne,
        Kamath, Steinke 2020, Theorem 14), DP percentiles of pure epsilon ``epsilon`` each (epsilon^2/2-zCDP),
        or else exponential mechanisms of rho / parts each."""
        self._check(name)
        if self.rho is None:
            raise BudgetError("convert_to_rho (or set_rho) must come before zCDP shares")
        spent = sum(s.rho or 0.0 for s in self._shares)
        if spent + rho > self.rho * (1 + 1e-9):
            raise BudgetError(f"the share {name!r} (rho {rho:.6g}) exceeds the remaining rho")
        if sigma is not None and 1.0 / (2.0 * sigma * sigma) > rho * (1 + 1e-9):
            raise BudgetError(f"the share {name!r} (rho {rho:.6g}) does not pay for noise of std {sigma:.6g}")
        self._shares.append(BudgetShare(name=name, mechanism=mechanism, rho=float(rho), epsilon=epsilon))
        self._grant(DrawRight(name, parts, epsilon=epsilon, rho=float(rho), sigma=sigma))
        return float(rho)

    def set_rho(self, rho: float) -> None:
        """Set the budget's rho directly (a mechanism whose conversion differs, e.g. at a full delta)."""
        self.rho = v.positive("rho", rho)

    def split_rho(self, weights: dict[str, float], mechanism: str) -> dict[str, float]:
        """Split the budget's rho by ``weights`` (each > 0, summing to 1): share i is rho x w_i."""
        total = sum(weights.values())
        if not weights or any(w <= 0 for w in weights.values()) or abs(total - 1.0) > 1e-12:
            raise InvalidParameterError(f"rho weights must be > 0 and sum to 1, got {weights}")
        if self.rho is None:
            raise BudgetError("convert_to_rho (or set_rho) must come before zCDP shares")
        return {name: self.spend_rho(name, self.rho * w, mechanism) for name, w in weights.items()}

    def spend_delta(self, name: str, delta: float, mechanism: str) -> float:
        """Record a share of delta (e.g. the probability that a threshold lets a rare value through)."""
        self._check(name)
        if self.delta is None:
            raise BudgetError("a pure-DP budget has no delta to spend")
        spent = sum(s.delta or 0.0 for s in self._shares)
        if spent + delta > self.delta * (1 + 1e-12):
            raise BudgetError(f"the share {name!r} exceeds the remaining delta")
        self._shares.append(BudgetShare(name=name, mechanism=mechanism, delta=float(delta)))
        return float(delta)

    def remaining_delta(self) -> float:
        """The delta not yet spent (0 for a pure-DP budget)."""
        if self.delta is None:
            return 0.0
        return max(self.delta - sum(s.delta or 0.0 for s in self._shares), 0.0)

    def spent(self, name: str) -> bool:
        """True when the share ``name`` is in the ledger."""
        return any(s.name == name for s in self._shares)

    def share(self, name: str) -> BudgetShare:
        """The share ``name`` as written in the manifest.

        Raises:
            BudgetError: no such share.
        """
        for s in self._shares:
            if s.name == name:
                return s
        raise BudgetError(f"no share {name!r} was spent")

    def right(self, name: str) -> DrawRight:
        """What the share ``name`` pays for.

        Raises:
            BudgetError: no such share pays for a draw.
        """
        if name not in self._rights:
            raise BudgetError(f"no share {name!r} pays for noise: spend it before drawing")
        return self._rights[name]

    # ------------------------------------------------------------------------------------------------ the draws

    def _take(self, name: str, need: str) -> DrawRight:
        right = self.right(name)
        if getattr(right, need) is None:
            raise BudgetError(f"the share {name!r} does not pay for a draw that needs its {need}")
        if self._used[name] >= right.parts:
            raise BudgetError(f"the share {name!r} paid for {right.parts} draw(s), all made")
        self._used[name] += 1
        return right

    def laplace(self, name: str, values: object, sensitivity: float = 1.0) -> np.ndarray:
        """``values`` (integers) plus independent discrete Laplace noise of scale ``sensitivity`` / epsilon of
        the share ``name`` (the epsilon-DP geometric mechanism at L1 sensitivity ``sensitivity``; Ghosh,
        Roughgarden, Sundararajan 2009). Returns an int64 array of the shape of ``values``."""
        right = self._take(name, "epsilon")
        true = np.asarray(values, dtype=np.int64)
        assert right.epsilon is not None
        return true + self._source().discrete_laplace(sensitivity / right.epsilon, true.size).reshape(
            true.shape
        )

    def gaussian(self, name: str, values: object, l2_sensitivity: float = 1.0) -> np.ndarray:
        """``values`` (integers) plus independent discrete Gaussian noise N_Z(0, (sigma l2_sensitivity)^2), sigma
        that of the share ``name`` (Canonne, Kamath, Steinke 2020). Returns an int64 array of the shape of
        ``values``."""
        right = self._take(name, "sigma")
        true = np.asarray(values, dtype=np.int64)
        assert right.sigma is not None
        scale = right.sigma * l2_sensitivity
        return true + self._source().discrete_gaussian(scale, true.size).reshape(true.shape)

    def quantile(self, name: str, histogram: np.ndarray, alpha: float) -> int:
        """An epsilon-DP ``alpha``-quantile of the values 0..len(histogram)-1 (histogram[v] = number of records
        with v; OpenDP's quantile score, Smith 2011), epsilon that of each draw of the share ``name``."""
        right = self._take(name, "epsilon")
        assert right.epsilon is not None
        return self._source().quantile(histogram, alpha, right.epsilon)

    def exponential(
        self,
        name: str,
        scores: np.ndarray,
        sensitivity: float,
        *,
        accept: Callable[[int], bool] | None = None,
    ) -> int | None:
        """The exponential mechanism in its zCDP form at rho / parts of the share ``name``: index i with
        probability proportional to exp(sqrt(2 rho) scores[i] / sensitivity) (bounded range, Cesar and Rogers
        2021, as AIM uses it).

        With ``accept`` (a public test of an index): the exponential mechanism over the accepted indices, by
        rejection (draw over the remaining indices; while the draw is not accepted, drop it and draw again). The
        first accepted draw has exactly the distribution of the mechanism over the accepted set, so it costs one
        choice; rejected draws are discarded. None when no index is accepted: that outcome depends on ``accept``
        only, so it uses no part of the share.
        """
        right = self._take(name, "rho")
        assert right.rho is not None
        rho = right.rho / right.parts
        scores = np.asarray(scores, dtype=np.float64)
        if accept is None:
            return self._source().exponential(scores, sensitivity, rho)
        options = list(range(len(scores)))
        while options:
            k = self._source().exponential(scores[options], sensitivity, rho)
            if accept(options[k]):
                return options[k]
            options.pop(k)
        self._used[name] -= 1
        return None

    def ledger(self) -> Ledger:
        """The budget and every share so far, for the release manifest."""
        return Ledger(
            epsilon=self.epsilon,
            delta=self.delta,
            rho=self.rho,
            accounting=self.accounting.value
            if self.rho is not None and self.accounting is not None
            else None,
            delta_source=self.delta_source if self.delta is not None else None,
            shares=tuple(self._shares),
        )


def rho_of(epsilon: float, delta: float, accounting: Accounting | str = Accounting.CLASSIC) -> float:
    """The largest rho whose rho-zCDP implies (``epsilon``, ``delta``)-DP: the one conversion of the package,
    ``delta`` the share of a release's delta it spends (docs/design.md section 2.3).

    ``classic``: :func:`rho_from_epsilon_delta`; ``tight_zcdp``: :func:`rho_tight_from_epsilon_delta`.

    Raises:
        InvalidParameterError: epsilon <= 0, delta outside (0, 1), or an unknown accounting.
    """
    if Accounting(accounting) is Accounting.TIGHT_ZCDP:
        return rho_tight_from_epsilon_delta(epsilon, delta)
    return rho_from_epsilon_delta(epsilon, delta)


def rho_from_epsilon_delta(epsilon: float, delta: float) -> float:
    """rho = (sqrt(epsilon + ln(1/delta)) - sqrt(ln(1/delta)))^2 (docs/design.md section 2.3).

    It is the largest rho with rho + 2 sqrt(rho ln(1/delta)) <= epsilon, i.e. rho-zCDP implies (epsilon, delta)-DP
    by the classic conversion (Bun & Steinke 2016, Prop. 1.3). A mechanism that keeps half of its delta for a
    threshold converts at delta/2: ln(2/delta).
    """
    v.positive("epsilon", epsilon)
    v.open_unit("delta", delta)
    ln = math.log(1.0 / delta)
    return (math.sqrt(epsilon + ln) - math.sqrt(ln)) ** 2


def opendp_epsilon_of_rho(rho: float, delta: float) -> float:
    """epsilon of rho-zCDP at ``delta`` by OpenDP's exact conversion (Canonne, Kamath, Steinke 2020, Prop. 12).

    Computed on a Gaussian measurement of sensitivity 1 and scale 1/sqrt(2 rho), which is exactly rho-zCDP.
    """
    import opendp.prelude as dp

    dp.enable_features("contrib")
    gaussian = dp.m.make_gaussian(
        dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=1.0 / math.sqrt(2.0 * rho)
    )
    return float(dp.c.make_zCDP_to_approxDP(gaussian).map(1.0).epsilon(delta))


def rho_tight_from_epsilon_delta(epsilon: float, delta: float) -> float:
    """The largest rho whose exact conversion gives (epsilon, delta)-DP (the ``tight_zcdp`` accounting).

    Solves opendp_epsilon_of_rho(rho, delta) = epsilon by Brent's method; the root lies between the classic rho
    (whose exact epsilon is smaller) and epsilon (epsilon >= rho for any delta < 1).
    """
    from scipy.optimize import brentq

    low = rho_from_epsilon_delta(epsilon, delta)
    high = float(epsilon)
    if opendp_epsilon_of_rho(high, delta) <= epsilon:
        return high
    return float(
        brentq(lambda r: opendp_epsilon_of_rho(r, delta) - epsilon, low, high, xtol=1e-15, rtol=1e-13)
    )


def epsilon_from_rho_delta(rho: float, delta: float) -> float:
    """The classic conversion epsilon = rho + 2 sqrt(rho ln(1/delta)), the inverse of :func:`rho_from_epsilon_delta`."""
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def spend_number_of_records(acct: Accountant, proportion: float) -> float:
    """Spend the share ``number_of_records`` (N_p x epsilon, docs/design.md section 2.4) that pays for the one draw
    of n'; returns its epsilon."""
    return acct.spend_epsilon("number_of_records", proportion, "discrete Laplace (count of records)")


def profile_mechanism(columns: int) -> str:
    """The budget line of the DP profile of ``columns`` numeric columns (docs/design.md section 2.8)."""
    return (
        f"discrete Gaussian on the cells and blocks of a public grid (DP profile of {columns} numeric column(s): "
        "code or measurement, range, bins)"
    )


def delta_from_protected_n(protected_n: int) -> float:
    """delta = 1 / (n' ln n') from the *protected* number of records n' (never the true n), at most 1e-3.

    n' is clamped up so that the result never exceeds :data:`MAX_DERIVED_DELTA` (this also covers n' <= 2,
    where 1/(n' ln n') is undefined or larger than 1).
    """
    n = max(int(protected_n), 1)
    if n < 3:
        return MAX_DERIVED_DELTA
    return min(MAX_DERIVED_DELTA, 1.0 / (n * math.log(n)))


def rho_1_threshold(sigma_1: float, sensitivity_1: int, delta: float) -> float:
    """rho_1 = 1 + sigma_1 sqrt(Delta_1) Phi^-1((1 - delta/2)^(1/Delta_1)) (docs/design.md section 2.5).

    A 1-tuple held by at most Delta_1 attributes of one record passes it with probability <= delta/2, which is
    the delta/2 the threshold pays for (Gopi, Mahabadi, Yekhanin, "Differentially Private Marginals", Algorithm 1
    and section 1.2).
    """
    d1 = max(int(sensitivity_1), 1)
    # Phi^-1(q) with q = (1 - delta/2)^(1/Delta_1), through the upper tail 1 - q, computed without cancellation.
    tail = -math.expm1(math.log1p(-delta / 2.0) / d1)
    return 1.0 + sigma_1 * math.sqrt(d1) * float(norm.isf(tail))


EXACT_TAIL_MAX_SCALE = 10_000.0
"""Largest scale whose discrete Gaussian tail is summed term by term (an array of 80 x scale floats, 6.4 MB at
most); beyond it the tail is bounded in closed form (:func:`discrete_gaussian_tail`)."""


def discrete_gaussian_tail(scale: float, m: int) -> float:
    """P(Z >= m) for Z ~ N_Z(0, scale^2), the discrete Gaussian (Canonne, Kamath, Steinke 2020).

    For scale <= :data:`EXACT_TAIL_MAX_SCALE`: summed exactly over the integers within 40 standard deviations
    (the mass beyond is below 1e-300). For a larger scale (a tiny epsilon), in constant time and memory, an
    upper bound that is tight to a relative 1/scale: with f(z) = exp(-z^2 / (2 scale^2)), the normalizer
    sum_z f(z) >= scale sqrt(2 pi) (Poisson summation: scale sqrt(2 pi) (1 + 2 sum_k exp(-2 pi^2 scale^2 k^2)),
    every term >= 0), and for m >= 0, f decreasing on [m, inf): sum_{z >= m} f(z) <= f(m) + integral_m^inf f.
    So P(Z >= m) <= Phi-bar(m / scale) + phi(m / scale) / scale, which makes a threshold from it only safer.
    """
    if scale <= EXACT_TAIL_MAX_SCALE:
        half = int(math.ceil(40.0 * scale)) + 2
        z = np.arange(-half, half + 1, dtype=np.float64)
        weights = np.exp(-(z * z) / (2.0 * scale * scale))
        return float(weights[z >= m].sum() / weights.sum())
    if m <= 0:
        return 1.0  # the trivial upper bound (the thresholds only ask for m >= 1)
    x = m / scale
    return float(min(1.0, norm.sf(x) + norm.pdf(x) / scale))


def rho_1_threshold_discrete(sigma_1: float, sensitivity_1: int, delta: float) -> float:
    """rho_1 for *discrete* Gaussian noise: the smallest integer m such that a record's at most Delta_1 new
    1-tuples (count 1 each) pass ``noisy > m`` with probability <= delta/2.

    A new 1-tuple's noisy count is 1 + Z, Z ~ N_Z(0, (sigma_1 sqrt(Delta_1))^2); it passes iff Z >= m, so m is
    the smallest integer with 1 - (1 - P(Z >= m))^Delta_1 <= delta/2. The continuous formula
    (:func:`rho_1_threshold`) assumes continuous noise: with the discrete Gaussian its leak can exceed delta/2
    (e.g. 0.00564 instead of 0.005 at epsilon 1, delta 1e-2, Delta_1 = 4), which the exact tail avoids.
    Released counts are integers, so an integer threshold loses nothing.
    """
    d1 = max(int(sensitivity_1), 1)
    scale = sigma_1 * math.sqrt(d1)
    target = delta / 2.0 * (1.0 - 1e-9)  # margin for the float summation

    def leak(m: int) -> float:
        return -math.expm1(d1 * math.log1p(-discrete_gaussian_tail(scale, m)))

    m = max(1, int(math.floor(rho_1_threshold(sigma_1, d1, delta))) - 2)
    while leak(m) > target:
        m += 1
    while m > 1 and leak(m - 1) <= target:
        m -= 1
    return float(m)


def discrete_laplace_variance(epsilon: float) -> float:
    """The variance of discrete Laplace noise of scale 1 / ``epsilon`` (P(x) proportional to exp(-epsilon |x|)):
    2 e^-epsilon / (1 - e^-epsilon)^2, in squared units of the count (Canonne, Kamath, Steinke 2020, section 2.2;
    the noise of n', docs/design.md section 2.4); 0 when epsilon is not > 0 (no variance known)."""
    if not epsilon > 0:
        return 0.0
    q = math.exp(-float(epsilon))
    return 2.0 * q / (1.0 - q) ** 2


def laplace_threshold_discrete(scale: float, new_values: int, delta: float) -> float:
    """The smallest integer m >= 1 such that a record's at most ``new_values`` new values (count 1 each) pass
    ``noisy > m`` with probability <= ``delta`` under discrete Laplace noise of ``scale`` (pmf proportional to
    exp(-|z| / scale)): a new value passes iff Z >= m, P(Z >= m) = exp(-m / scale) / (1 + exp(-1 / scale)) for
    m >= 1, and 1 - (1 - P(Z >= m))^new_values <= delta (the pure-DP form of the threshold of
    :func:`rho_1_threshold_discrete`; Wilson et al., "Differentially Private SQL with Bounded User
    Contribution", 2020, section 3)."""
    k = max(int(new_values), 1)
    per_value = -math.expm1(math.log1p(-delta) / k)  # the tail each value may have
    # exp(-m / scale) <= per_value (1 + exp(-1 / scale))
    m = max(1, math.ceil(-scale * (math.log(per_value) + math.log1p(math.exp(-1.0 / scale)))))

    def leak(t: int) -> float:
        return -math.expm1(k * math.log1p(-math.exp(-t / scale) / (1.0 + math.exp(-1.0 / scale))))

    while leak(m) > delta * (1.0 - 1e-9):
        m += 1
    while m > 1 and leak(m - 1) <= delta * (1.0 - 1e-9):
        m -= 1
    return float(m)


def adaptive_threshold(sigma_k: float, sensitivity_k: int, eta: float) -> float:
    """rho_k = sigma_k sqrt(Delta_k) Phi^-1(1 - eta_k / 2), 0 < eta_k <= 1 (SDS, "Differentially private aggregation
    and synthesis", section 3.3.2, with Delta_k where SDS writes Delta_1; docs/design.md sections 2.5 and 6.1)."""
    if not 0 < eta <= 1:
        raise InvalidParameterError(f"eta must be in (0, 1], got {eta!r}")
    return sigma_k * math.sqrt(max(int(sensitivity_k), 1)) * float(norm.isf(eta / 2.0))
