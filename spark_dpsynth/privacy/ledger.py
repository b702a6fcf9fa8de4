"""The ledger's record: what a release's budget was and how it was split into named shares.

:class:`~spark_dpsynth.privacy.accounting.Accountant` writes it (``Accountant.ledger()``); the release manifest
holds it as its ``budget`` block (:class:`spark_dpsynth.release.manifest.Manifest`, docs/design.md sections 1.3
and 2.3) and reads it back with :meth:`Ledger.from_json`. Units: epsilon and delta of (epsilon, delta)-DP, rho of
zCDP (Bun & Steinke 2016). The privacy package holds it so that the release imports the ledger, never the
other way round.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["BudgetShare", "Ledger"]


@dataclass(frozen=True)
class BudgetShare:
    """One DP step's share of a release's budget (JSON: an entry of ``budget.shares``)."""

    name: str
    """What the share pays for, e.g. ``"number_of_records"``, ``"percentiles"``, ``"marginals_k2"``."""
    mechanism: str
    """The DP mechanism of that step, e.g. ``"discrete Laplace"``, ``"discrete Gaussian"``."""
    epsilon: float | None = None
    """Pure or approximate DP epsilon of the step, when it is accounted in (epsilon, delta)."""
    delta: float | None = None
    """delta of the step, when it has one."""
    rho: float | None = None
    """zCDP rho of the step, when it is accounted in zCDP."""

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "mechanism": self.mechanism,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "rho": self.rho,
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> BudgetShare:
        return cls(
            name=str(doc["name"]),
            mechanism=str(doc.get("mechanism", "")),
            epsilon=_opt_float(doc.get("epsilon")),
            delta=_opt_float(doc.get("delta")),
            rho=_opt_float(doc.get("rho")),
        )


@dataclass(frozen=True)
class Ledger:
    """The budget of a release and how it was split (filled by :class:`spark_dpsynth.privacy.accounting.Accountant`; JSON key ``budget`` of the
    release manifest, :class:`spark_dpsynth.release.manifest.Manifest`).

    The release is (epsilon, delta)-DP; when ``rho`` is set, the zCDP part of it is rho-zCDP and the sum of the
    shares' rho equals ``rho`` (up to rounding).
    """

    epsilon: float
    """Total epsilon, > 0."""
    delta: float | None
    """Total delta in (0, 1), or None for a pure-DP release."""
    rho: float | None = None
    """zCDP budget of the zCDP-accounted steps, or None."""
    accounting: str | None = None
    """How rho follows from epsilon and delta: ``"classic"`` or ``"tight_zcdp"`` (None: no conversion)."""
    delta_source: str | None = None
    """``"given"`` or ``"derived from the protected number of records"``."""
    shares: tuple[BudgetShare, ...] = ()
    """Every DP step and what it spent."""

    def to_json(self) -> dict[str, Any]:
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "rho": self.rho,
            "accounting": self.accounting,
            "delta_source": self.delta_source,
            "shares": [s.to_json() for s in self.shares],
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Ledger:
        return cls(
            epsilon=float(doc["epsilon"]),
            delta=_opt_float(doc.get("delta")),
            rho=_opt_float(doc.get("rho")),
            accounting=doc.get("accounting"),
            delta_source=doc.get("delta_source"),
            shares=tuple(BudgetShare.from_json(s) for s in doc.get("shares") or ()),
        )

    def share(self, name: str) -> BudgetShare:
        """The share called ``name``.

        Raises:
            KeyError: no share has that name.
        """
        for s in self.shares:
            if s.name == name:
                return s
        raise KeyError(name)


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)
