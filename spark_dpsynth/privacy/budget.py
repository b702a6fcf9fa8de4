"""The privacy budget of a release: one frozen value, made once from the command line, the TOML file or
``dps.fit``, validated once, and held by the run's :class:`~spark_dpsynth.privacy.accounting.Accountant`
(docs/design.md section 2.3).

Parameter classes hold only what is theirs (shares of the budget as proportions, caps, presets); what the whole
release may spend is here. After OpenDP's single privacy-loss value and PipelineDP's ``BudgetAccountant``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from spark_dpsynth import _validate as v
from spark_dpsynth.errors import InvalidParameterError
from spark_dpsynth.params import MIN_DELTA, Accounting

__all__ = ["Budget"]


@dataclass(frozen=True)
class Budget:
    """The (epsilon, delta) a release may spend, how its zCDP part converts, and test mode.

    Every mechanism spends it through shares of one :class:`~spark_dpsynth.privacy.accounting.Accountant`; the
    release is (epsilon, delta)-DP per record, or per person with a privacy unit (docs/design.md sections 1.4
    and 2.7).

    Raises:
        InvalidParameterError: a field outside its range (the message names the field and the value).
    """

    epsilon: float = 4.0
    """Total privacy budget epsilon of the release, > 0 (finite)."""
    delta: float | None = None
    """delta in [1e-100, 1); None derives it from the protected number of records n' as 1/(n' ln n'), <= 1e-3."""
    accounting: Accounting | None = None
    """How rho follows from epsilon and delta: ``classic`` or ``tight_zcdp`` (see :class:`Accounting`); unset, the
    mechanism's own: ``classic`` for the marginals mechanism (as SDS), ``tight_zcdp`` for the others
    (docs/design.md section 2.3)."""
    seed: int | None = None
    """Test mode: a seed makes every draw reproducible with a NON-cryptographic generator; the release is then
    not private and its manifest says ``"test_mode": true``. None (the default) draws privacy noise from the
    operating system's cryptographic source."""

    def __post_init__(self) -> None:
        epsilon = v.positive("epsilon", self.epsilon)
        if not math.isfinite(epsilon):
            raise InvalidParameterError(f"epsilon must be finite, got {self.epsilon!r}")
        object.__setattr__(self, "epsilon", epsilon)
        if self.delta is not None:
            delta = v.open_unit("delta", self.delta)
            if delta < MIN_DELTA:
                raise InvalidParameterError(f"delta must be in [{MIN_DELTA:g}, 1), got {self.delta!r}")
            object.__setattr__(self, "delta", delta)
        if self.accounting is not None and not isinstance(self.accounting, Accounting):
            try:
                object.__setattr__(self, "accounting", Accounting(self.accounting))
            except ValueError:
                allowed = [m.value for m in Accounting]
                raise InvalidParameterError(
                    f"accounting must be one of {allowed}, got {self.accounting!r}"
                ) from None
        if self.seed is not None:
            v.integer("seed", self.seed, low=0)

    @property
    def test_mode(self) -> bool:
        """True when a seed makes the release reproducible (and therefore not private)."""
        return self.seed is not None

    def delta_or(self, derived: float) -> float:
        """The delta in force: the given one, else ``derived`` (from the protected number of records)."""
        return self.delta if self.delta is not None else derived

    @property
    def delta_source(self) -> str:
        """``"given"`` or how delta is derived (the manifest's ``delta_source``)."""
        return "given" if self.delta is not None else "derived from the protected number of records"

    def parameters(self) -> dict[str, object]:
        """The budget as the manifest's ``parameters`` write it (epsilon, delta, accounting, seed)."""
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "accounting": self.accounting.value if self.accounting is not None else None,
            "seed": self.seed,
        }
