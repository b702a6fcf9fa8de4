"""The privacy parameters of a DP release of k-way marginals (docs/design.md section 2): the presets of the
sigma proportions (:class:`AccuracyMode`) and of the thresholds (:class:`FabricationMode`), how rho follows from
epsilon (:class:`Accounting`), the marginals mechanism's :class:`AggregationParams`, and what every mechanism's
parameters share: the pure-DP shares taken before the rest of epsilon (:func:`check_pure_shares`) and the check of
a preset's name (:func:`enum_value`)."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from spark_dpsynth import _validate as v
from spark_dpsynth.errors import InvalidParameterError

__all__ = [
    "AccuracyMode",
    "FabricationMode",
    "Accounting",
    "AggregationParams",
    "MIN_DELTA",
    "TEXT_NUMBERS_EPSILON_PROPORTION",
    "TEXT_NUMBERS_RHO_PROPORTION",
    "check_pure_shares",
    "enum_value",
]

MIN_DELTA = 1e-100
"""Smallest ``AggregationParams.delta``: below it the quantities derived from delta (ln(2/delta), the threshold
rho_1's tail delta/2, Phi^-1 of it) leave the floating-point range (NaN near 1e-308) or the 40-standard-deviation
window of the discrete Gaussian tail; no meaningful guarantee needs a smaller delta."""


class AccuracyMode(enum.StrEnum):
    """How the marginal budget is split over lengths k = 1..R through sigma proportions p_k (docs/design.md section 2.3)."""

    PRIORITIZE_LONG = "prioritize_long"
    """p_k = 1/k: smaller noise on longer combinations (the default)."""
    PRIORITIZE_SHORT = "prioritize_short"
    """p_k = 1/(R-k+1): smaller noise on shorter combinations."""
    BALANCED = "balanced"
    """p_k = 1: the same sigma for every length."""
    CUSTOM = "custom"
    """p_k given in ``AggregationParams.sigma_proportions``."""


class FabricationMode(enum.StrEnum):
    """How the thresholds rho_k of lengths k >= 2 are set (docs/design.md section 2.5)."""

    UNCONTROLLED = "uncontrolled"
    """Adaptive, eta_k = 1 for every k (threshold 0: the most fabrication)."""
    PROGRESSIVE = "progressive"
    """Adaptive, eta_k = 0.1 + 0.9 (k-2)/(R-2): strict on pairs, lax on the longest combinations."""
    BALANCED = "balanced"
    """Adaptive, eta_2 = 0.55 and eta_k = 1 for k > 2 (the default)."""
    MINIMIZE = "minimize"
    """Adaptive, eta_k = 0.01 for every k (the least fabrication, the most suppression)."""
    CUSTOM_FIXED = "custom_fixed"
    """Fixed thresholds t_2..t_R from ``AggregationParams.thresholds``."""
    CUSTOM_ADAPTIVE = "custom_adaptive"
    """Adaptive, eta_2..eta_R from ``AggregationParams.thresholds``, each in (0, 1]."""


class Accounting(enum.StrEnum):
    """How rho is derived from (epsilon_M, delta/2) (docs/design.md section 2.3)."""

    CLASSIC = "classic"
    """rho = (sqrt(epsilon_M + ln(2/delta)) - sqrt(ln(2/delta)))^2: the classic conversion (Bun & Steinke 2016,
    Proposition 1.3), as SDS (docs/design.md section 2.3). The marginals mechanism's default."""
    TIGHT_ZCDP = "tight_zcdp"
    """The largest rho whose exact zCDP -> (epsilon, delta) conversion (Canonne, Kamath, Steinke 2020,
    Proposition 12, computed by OpenDP) gives epsilon_M at delta/2: same guarantee, larger rho, smaller sigma. The
    default of the other mechanisms."""


TEXT_NUMBERS_EPSILON_PROPORTION = 0.01
"""The share of epsilon of the DP test of numbers written as text (docs/design.md section 2.8) in its pure-DP
form (discrete Laplace), spent by the marginals and class-conditional mechanisms when the table has string columns
without a rule of the configuration: four noisy counts per such column."""

TEXT_NUMBERS_RHO_PROPORTION = 0.01
"""The share of rho of the same test in its zCDP form (discrete Gaussian, L2 sensitivity sqrt(s) for s columns),
spent by the workload mechanism (the default) once epsilon is converted to rho (docs/design.md section 2.8)."""


def check_pure_shares(npp: float, *others: tuple[str, float]) -> None:
    """The pure-DP shares taken before the rest of epsilon: N_p, the test of numbers written as text
    (:data:`TEXT_NUMBERS_EPSILON_PROPORTION`) and ``others`` (name, proportion) must leave some epsilon."""
    total = npp + TEXT_NUMBERS_EPSILON_PROPORTION + sum(p for _, p in others)
    if total >= 1:
        named = " + ".join(
            [
                "number_of_records_epsilon_proportion",
                "the test of numbers written as text",
                *(n for n, _ in others),
            ]
        )
        raise InvalidParameterError(f"{named} must be < 1, got {total:g}")


@dataclass(frozen=True)
class AggregationParams:
    """Privacy parameters of a DP release of k-way marginals (docs/design.md section 2).

    The release's (epsilon, delta), accounting and test-mode seed are its
    :class:`~spark_dpsynth.privacy.budget.Budget`, held by the run's accountant; these are the mechanism's shares
    of it. Split: epsilon = epsilon_N + epsilon_M with epsilon_N = ``number_of_records_epsilon_proportion`` * epsilon;
    rho = (sqrt(epsilon_M + ln(2/delta)) - sqrt(ln(2/delta)))^2; a share ``percentile_epsilon_proportion`` of rho
    pays for the R DP percentiles, the rest for the Gaussian noise on the counts. See :mod:`spark_dpsynth.privacy.accounting`.
    """

    reporting_length: int = 3
    """R, the longest combination released, 1 <= R <= number of attribute columns."""
    percentile: float = 99.0
    """Q, the percentile of per-record k-tuple counts used as sensitivity Delta_k, in (0, 100]."""
    percentile_epsilon_proportion: float = 0.01
    """Q_p, the share of rho spent on the R DP percentiles, in (0, 1)."""
    number_of_records_epsilon_proportion: float = 0.005
    """N_p, the share of epsilon spent on the protected number of records, in (0, 1)."""
    bins_epsilon_proportion: float = 0.075
    """B_p, the share of rho spent on the DP profile (code or measurement, range, bin edges), in (0, 1); spent
    only when a numeric, date or timestamp column has no public bins (docs/design.md section 2.8)."""
    accuracy_mode: AccuracyMode = AccuracyMode.PRIORITIZE_LONG
    """Preset of sigma proportions p_k (see :class:`AccuracyMode`)."""
    sigma_proportions: tuple[float, ...] | None = None
    """p_1..p_R, each > 0, required with AccuracyMode.CUSTOM and forbidden otherwise."""
    fabrication_mode: FabricationMode = FabricationMode.BALANCED
    """Preset of thresholds for k >= 2 (see :class:`FabricationMode`)."""
    thresholds: tuple[float, ...] | None = None
    """t_2..t_R (fixed, >= 0) or eta_2..eta_R (adaptive, in (0, 1]); R-1 values, custom modes only."""
    max_column_subsets: int = 20_000
    """Planner: the largest C(d, k) (column subsets of one length, >= 1) the job counts; each record is looked
    up in every subset, so the work grows as records x C(d, k). Beyond it the job stops before reading data."""
    max_candidates: int = 2_000_000
    """Planner: the most candidate k-tuples of one length (>= 1) the job counts and noises on the driver;
    beyond it the job stops before counting that length."""

    def __post_init__(self) -> None:
        v.integer("reporting_length", self.reporting_length, low=1)
        v.integer("max_column_subsets", self.max_column_subsets, low=1)
        v.integer("max_candidates", self.max_candidates, low=1)
        q = v.finite("percentile", self.percentile)
        if not 0 < q <= 100:
            raise InvalidParameterError(f"percentile must be in (0, 100], got {self.percentile!r}")
        qp = v.open_unit("percentile_epsilon_proportion", self.percentile_epsilon_proportion)
        npp = v.open_unit("number_of_records_epsilon_proportion", self.number_of_records_epsilon_proportion)
        bp = v.open_unit("bins_epsilon_proportion", self.bins_epsilon_proportion)
        if qp + 2 * bp >= 1:
            raise InvalidParameterError(
                "percentile_epsilon_proportion + 2 x bins_epsilon_proportion (the DP profile and the DP exact "
                f"values) must be < 1, got {qp} + 2 x {bp} = {qp + 2 * bp}"
            )
        check_pure_shares(npp)
        if qp + npp >= 1:
            raise InvalidParameterError(
                "percentile_epsilon_proportion + number_of_records_epsilon_proportion must be < 1, "
                f"got {qp} + {npp} = {qp + npp}"
            )
        object.__setattr__(
            self, "accuracy_mode", enum_value(AccuracyMode, "accuracy_mode", self.accuracy_mode)
        )
        object.__setattr__(
            self, "fabrication_mode", enum_value(FabricationMode, "fabrication_mode", self.fabrication_mode)
        )
        r = self.reporting_length
        if self.accuracy_mode is AccuracyMode.CUSTOM:
            if self.sigma_proportions is None:
                raise InvalidParameterError("sigma_proportions are required with accuracy_mode 'custom'")
            props = tuple(v.positive("sigma_proportions", p) for p in self.sigma_proportions)
            if len(props) != r:
                raise InvalidParameterError(
                    f"sigma_proportions must have reporting_length = {r} values, got {len(props)}"
                )
            object.__setattr__(self, "sigma_proportions", props)
        elif self.sigma_proportions is not None:
            raise InvalidParameterError(
                f"sigma_proportions are only allowed with accuracy_mode 'custom', got '{self.accuracy_mode.value}'"
            )
        custom = (FabricationMode.CUSTOM_FIXED, FabricationMode.CUSTOM_ADAPTIVE)
        if self.fabrication_mode in custom:
            if self.thresholds is None:
                raise InvalidParameterError(
                    f"thresholds are required with fabrication_mode '{self.fabrication_mode.value}'"
                )
            ts = tuple(v.finite("thresholds", t) for t in self.thresholds)
            if len(ts) != r - 1:
                raise InvalidParameterError(
                    f"thresholds must have reporting_length - 1 = {r - 1} values (k = 2..R), got {len(ts)}"
                )
            if self.fabrication_mode is FabricationMode.CUSTOM_FIXED and any(t < 0 for t in ts):
                raise InvalidParameterError(f"fixed thresholds must be >= 0, got {list(ts)}")
            if self.fabrication_mode is FabricationMode.CUSTOM_ADAPTIVE and any(not 0 < t <= 1 for t in ts):
                raise InvalidParameterError(f"adaptive thresholds (eta) must be in (0, 1], got {list(ts)}")
            object.__setattr__(self, "thresholds", ts)
        elif self.thresholds is not None:
            raise InvalidParameterError(
                "thresholds are only allowed with fabrication_mode 'custom_fixed' or 'custom_adaptive', "
                f"got '{self.fabrication_mode.value}'"
            )

    def sigma_proportions_for(self) -> tuple[float, ...]:
        """p_1..p_R of the accuracy mode (docs/design.md section 2.3)."""
        r = self.reporting_length
        if self.accuracy_mode is AccuracyMode.CUSTOM:
            assert self.sigma_proportions is not None
            return self.sigma_proportions
        if self.accuracy_mode is AccuracyMode.PRIORITIZE_LONG:
            return tuple(1.0 / k for k in range(1, r + 1))
        if self.accuracy_mode is AccuracyMode.PRIORITIZE_SHORT:
            return tuple(1.0 / (r - k + 1) for k in range(1, r + 1))
        return tuple(1.0 for _ in range(r))

    def check_columns(self, n_columns: int) -> None:
        """Raise if the reporting length exceeds the number of attribute columns (a schema fact, not data), or
        if the longest length has more column subsets than the planner allows (:meth:`check_subsets`)."""
        if self.reporting_length > n_columns:
            raise InvalidParameterError(
                f"reporting_length must be <= the number of attribute columns ({n_columns}), "
                f"got {self.reporting_length}"
            )
        self.check_subsets(n_columns)

    def check_subsets(self, n_columns: int, k: int | None = None) -> None:
        """The planner's first check, from public values only: C(d, k) column subsets of length k (default R)
        must not exceed ``max_column_subsets`` (the counting work is records x C(d, k), and the noise of every
        k-tuple grows with Delta_k <= C(d, k)).

        Raises:
            InvalidParameterError: naming the count and what to change.
        """

        k = self.reporting_length if k is None else k
        subsets = math.comb(n_columns, k)
        if subsets > self.max_column_subsets:
            raise InvalidParameterError(
                f"reporting length {k} over {n_columns} columns means {subsets:,} column subsets per record "
                f"(max_column_subsets {self.max_column_subsets:,}): the counting work and the noise grow as "
                "C(d, k); use --synthesizer pgm --selection mst (DP-selected marginals, the wide-table preset), "
                f"or --reporting-length {k - 1}, "
                "or fewer columns"
            )


def enum_value(cls: type[enum.Enum], name: str, value: object) -> enum.Enum:
    """``value`` as a member of ``cls`` (a member, or a member's value).

    Raises:
        InvalidParameterError: ``value`` is neither; the message names ``name`` and the allowed values.
    """
    if isinstance(value, cls):
        return value
    try:
        return cls(value)
    except ValueError:
        allowed = [m.value for m in cls]
        raise InvalidParameterError(f"{name} must be one of {allowed}, got {value!r}") from None
