"""The release manifest: a frozen, typed record of what a release holds and what it cost.

On disk the manifest is ``release/manifest.json``, one JSON object. In memory it is a :class:`Manifest`, built
once from that object (:meth:`Manifest.from_json`) and never changed afterwards: its blocks are read by
attribute, and it is also a read-only ``Mapping`` over the JSON object, so ``manifest["epsilon"]`` keeps
working for code and notebooks written against the JSON.

Blocks (docs/design.md section 1.3):

* the common block, every release: ``format_version``, ``mechanism`` (the registry name of the mechanism that
  made it, :mod:`spark_dpsynth.registry`), ``synthesizers`` (the registry names that can sample it),
  ``test_mode``, ``noise_sampler``, ``columns``, ``privacy_unit`` (``"record"``, ``"person"`` or, for SDS
  files, ``"unknown"``) and ``privacy_unit_column``, ``protected_number_of_records`` (the only record count a
  release holds: DP), ``parameters`` (the mechanism's parameters as given), ``versions``, ``created_utc``;
* :class:`Ledger` (:mod:`spark_dpsynth.privacy.ledger`, re-exported here): the total (epsilon, delta), rho
  when the mechanism accounts in zCDP, and the named shares of every DP step (JSON key ``budget``);
* :class:`MarginalsBlock`, the marginals mechanism only: the reporting length R and, per length k, sigma_k,
  the sensitivity Delta_k, the noise std sigma_k sqrt(Delta_k), the threshold rho_k and the number of released
  k-tuples (flat JSON keys ``sigmas``, ``sensitivities``, ``noise_std``, ``thresholds``, ``released_tuples``);
* the mechanism's own entries (e.g. the class-conditional Laplace scale, the archetype histograms' sigma), read
  from the manifest as the JSON object it also is.

Releases written before the ``mechanism``/``budget`` keys existed load unchanged: the mechanism is inferred
(``synthesizer`` key, SDS source, else the marginals mechanism) and the budget read from the flat keys.

Privacy: a manifest holds only public parameters and DP outputs (never a true count or the true number of
records); :meth:`Manifest.from_json` does not check that, the mechanisms that build it do.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import FrozenInstanceError, dataclass
from types import MappingProxyType
from typing import Any

from spark_dpsynth.errors import ReleaseError
from spark_dpsynth.privacy.ledger import BudgetShare, Ledger

__all__ = [
    "FORMAT_VERSION",
    "MECHANISMS",
    "Ledger",
    "BudgetShare",
    "LengthParams",
    "MarginalsBlock",
    "Manifest",
    "discovery_noise_std",
    "freeze",
]

FORMAT_VERSION = 1
"""Version of the manifest layout written by this package (readers accept it and every earlier one)."""

MECHANISMS = ("marginals", "class_conditional", "archetype", "workload")
"""The mechanism names a manifest may carry (the registry's; kept here so the release does not import it)."""


class _FrozenDict(dict):  # type: ignore[type-arg]
    """A dict that refuses every change (JSON-serializable, equal to a plain dict with the same items)."""

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("a release manifest is read-only; build a new one instead")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse  # type: ignore[assignment]

    def __hash__(self) -> int:  # type: ignore[override]
        return id(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return {k: copy.deepcopy(v, memo) for k, v in self.items()}

    def __reduce__(self) -> tuple[Any, ...]:
        return (_FrozenDict, (dict(self),))


class _FrozenList(list):  # type: ignore[type-arg]
    """A list that refuses every change (JSON-serializable, equal to a plain list with the same items)."""

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("a release manifest is read-only; build a new one instead")

    __setitem__ = __delitem__ = append = extend = insert = pop = remove = clear = sort = reverse = _refuse  # type: ignore[assignment]
    __iadd__ = __imul__ = _refuse  # type: ignore[assignment]

    def __hash__(self) -> int:  # type: ignore[override]
        return id(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return [copy.deepcopy(v, memo) for v in self]

    def __reduce__(self) -> tuple[Any, ...]:
        return (_FrozenList, (list(self),))


def freeze(value: Any) -> Any:
    """A deep read-only copy of a JSON-like value (dicts and lists frozen, tuples become frozen lists)."""
    if isinstance(value, Mapping):
        return _FrozenDict((str(k), freeze(v)) for k, v in value.items())
    if isinstance(value, list | tuple):
        return _FrozenList(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """A plain, mutable deep copy of a (possibly frozen) JSON-like value."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(v) for v in value]
    return value


@dataclass(frozen=True)
class LengthParams:
    """The marginals mechanism's parameters for one length k."""

    sigma: float | None
    """sigma_k, the noise multiplier: the noise std of a count is sigma_k sqrt(Delta_k)."""
    sensitivity: int | None
    """Delta_k, the number of k-tuples one record may contribute (a DP percentile)."""
    noise_std: float | None
    """sigma_k sqrt(Delta_k), the standard deviation of the discrete Gaussian noise on a count."""
    threshold: float | None
    """rho_k: a noisy count is released when it is > rho_k and > 0."""
    released_tuples: int | None
    """How many k-tuples were released (None: not recorded, e.g. SDS files).

    Every entry is None when the release does not record it (SDS files carry counts, not noise parameters)."""


@dataclass(frozen=True)
class MarginalsBlock:
    """The marginals mechanism's block (SDS, "Differentially private aggregation and synthesis", section 3;
    docs/design.md sections 1.3 and 2)."""

    reporting_length: int
    """R, the longest released combination."""
    lengths: Mapping[int, LengthParams]
    """k -> its parameters, k = 1..R."""
    epsilon_n: float | None = None
    """epsilon of the protected number of records (discrete Laplace)."""
    epsilon_m: float | None = None
    """epsilon of the marginals and percentiles, converted to rho."""
    epsilon_q: float | None = None
    """pure-DP epsilon of each of the R percentile selections."""
    sigma: float | None = None
    """The base noise multiplier; sigma_k = p_k sigma."""
    percentile: float | None = None
    """Q, the percentile of per-record k-tuple counts used as Delta_k."""


_FIELDS = (
    "mechanism",
    "columns",
    "test_mode",
    "protected_number_of_records",
    "privacy_unit",
    "privacy_unit_column",
    "budget",
    "marginals",
    "synthesizers",
    "noise_sampler",
    "source",
    "format_version",
    "parameters",
    "versions",
    "created_utc",
)


class Manifest(_FrozenDict):
    """A release's manifest (see the module docstring): the JSON object itself, read-only, with its blocks as
    typed attributes. Build it with :meth:`from_json`; it is a ``dict`` that refuses every change, so
    ``json.dumps(manifest)`` and ``manifest["epsilon"]`` work as on the JSON.

    Attributes:
        mechanism (str): registry name of the mechanism that made the release (one of :data:`MECHANISMS`).
        columns (tuple[str, ...]): the release's attribute columns, in order.
        test_mode (bool): True when noise came from a seeded, non-cryptographic generator: NOT private.
        protected_number_of_records (int | None): n', the DP number of records (>= 1); None only in a
            hand-built manifest without it.
        privacy_unit (str): ``"record"``, ``"person"``, or ``"unknown"`` (a release read from SDS files).
        privacy_unit_column (str | None): the column that names a person, or None.
        budget (Ledger | None): the budget and its split; None for a release read from SDS files.
        marginals (MarginalsBlock | None): the marginals block, or None (other mechanisms).
        synthesizers (tuple[str, ...]): registry names of the synthesizers that can sample the release (empty:
            its mechanism's, see :func:`spark_dpsynth.registry.resolve_synthesizer`).
        noise_sampler (str | None): name of the noise source (``"opendp-exact-csprng"`` in production).
        source (str): ``"spark_dpsynth"``, or ``"sds"`` for a release read from SDS's aggregates files.
        format_version (int): the layout version (:data:`FORMAT_VERSION`).
        parameters (Mapping[str, Any]): the mechanism's parameters as given (frozen).
        versions (Mapping[str, str]): package versions of the run that made the release.
        created_utc (str | None): creation time, ISO 8601 UTC.
    """

    mechanism: str
    columns: tuple[str, ...]
    test_mode: bool
    protected_number_of_records: int | None
    privacy_unit: str
    privacy_unit_column: str | None
    budget: Ledger | None
    marginals: MarginalsBlock | None
    synthesizers: tuple[str, ...]
    noise_sampler: str | None
    source: str
    format_version: int
    parameters: Mapping[str, Any]
    versions: Mapping[str, str]
    created_utc: str | None

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}: a release manifest is read-only")

    __delattr__ = __setattr__  # type: ignore[assignment]

    # ----------------------------------------------------------------------------------- construction
    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Manifest:
        """Validate a manifest JSON object (as written by this package, any earlier version, or built from SDS
        files) into a frozen :class:`Manifest` (a manifest is returned as it is).

        Raises:
            ReleaseError: ``columns`` is missing, ``protected_number_of_records`` is not an integer, a
                marginals entry is malformed, or ``mechanism`` is not a string.
        """
        if isinstance(doc, Manifest):
            return doc
        if not isinstance(doc, Mapping):
            raise ReleaseError(f"a release manifest must be a JSON object, got {type(doc).__name__}")
        frozen = freeze(doc)
        try:
            columns = tuple(str(c) for c in frozen["columns"])
            n = frozen.get("protected_number_of_records")
            protected_n = None if n is None else int(n)
        except (KeyError, TypeError, ValueError) as err:
            raise ReleaseError(f"release manifest lacks a valid {err}") from err
        mechanism = _mechanism_of(frozen)
        budget = None
        if isinstance(frozen.get("budget"), Mapping):
            budget = Ledger.from_json(frozen["budget"])
        elif frozen.get("epsilon") is not None:
            budget = Ledger(
                epsilon=float(frozen["epsilon"]),
                delta=_opt_float(frozen.get("delta")),
                rho=_opt_float(frozen.get("rho")),
                accounting=frozen.get("accounting"),
                delta_source=frozen.get("delta_source"),
            )
        fields = {
            "mechanism": mechanism,
            "columns": columns,
            "test_mode": bool(frozen.get("test_mode", False)),
            "protected_number_of_records": protected_n,
            "privacy_unit": str(frozen.get("privacy_unit", "record")),
            "privacy_unit_column": frozen.get("privacy_unit_column"),
            "budget": budget,
            "marginals": _marginals_block(frozen) if mechanism == "marginals" else None,
            "synthesizers": tuple(str(x) for x in frozen.get("synthesizers") or ()),
            "noise_sampler": frozen.get("noise_sampler"),
            "source": str(frozen.get("source", "spark_dpsynth")),
            "format_version": int(frozen.get("format_version", FORMAT_VERSION)),
            "parameters": frozen.get("parameters") or _FrozenDict(),
            "versions": frozen.get("versions") or _FrozenDict(),
            "created_utc": frozen.get("created_utc"),
        }
        out = cls(frozen)
        for name in _FIELDS:
            object.__setattr__(out, name, fields[name])
        return out

    def to_json(self) -> dict[str, Any]:
        """A plain, mutable deep copy of the JSON object (what ``manifest.json`` holds)."""
        return thaw(self)

    @property
    def document(self) -> Mapping[str, Any]:
        """The JSON object (this manifest itself, read-only)."""
        return self

    def with_entries(self, **entries: Any) -> Manifest:
        """A new manifest with ``entries`` added or replaced (this one is unchanged)."""
        doc = self.to_json()
        doc.update(entries)
        return Manifest.from_json(doc)

    @property
    def reporting_length(self) -> int:
        """R: the marginals block's, else the ``reporting_length`` entry.

        Raises:
            ReleaseError: the manifest has no valid reporting length.
        """
        if self.marginals is not None:
            return self.marginals.reporting_length
        try:
            return int(self["reporting_length"])
        except (KeyError, TypeError, ValueError) as err:
            raise ReleaseError("release manifest has no valid reporting_length") from err

    def __reduce__(self) -> tuple[Any, ...]:
        return (Manifest.from_json, (thaw(self),))

    def __copy__(self) -> Manifest:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Manifest:  # type: ignore[override]
        return self


def discovery_noise_std(discovery: Mapping[str, Any], column: str, key: str = "noise_std") -> float:
    """The noise std of a discovered column's released counts, from the manifest's ``domain_discovery`` block:
    its ``settled`` group's ``noise_std`` when the DP profile settled the column, else the block's ``key``
    (``noise_std``; ``empty_counts_noise_std`` for the empty counts, the same draws' std). docs/design.md
    section 4.7, "Settled columns"."""
    settled = discovery.get("settled") or {}
    if column in (settled.get("columns") or ()):
        return float(settled["noise_std"])
    return float(discovery[key])


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _mechanism_of(doc: Mapping[str, Any]) -> str:
    name = doc.get("mechanism")
    if name in MECHANISMS:
        return str(name)
    legacy = doc.get("synthesizer")  # releases written before the "mechanism" entry
    if legacy in ("class_conditional", "archetype"):
        return str(legacy)
    if name is not None and not isinstance(name, str):
        raise ReleaseError(f"release manifest names an unknown mechanism {name!r}")
    return "marginals"


def _marginals_block(doc: Mapping[str, Any]) -> MarginalsBlock | None:
    if "reporting_length" not in doc:
        return None
    try:
        r = int(doc["reporting_length"])
    except (TypeError, ValueError) as err:
        raise ReleaseError("release manifest has no valid reporting_length") from err
    lengths = {}
    for k in range(1, r + 1):
        entries = {
            name: (doc.get(key) or {}).get(str(k)) if isinstance(doc.get(key), Mapping) else None
            for name, key in (
                ("sigma", "sigmas"),
                ("sensitivity", "sensitivities"),
                ("noise_std", "noise_std"),
                ("threshold", "thresholds"),
                ("released_tuples", "released_tuples"),
            )
        }
        try:
            lengths[k] = LengthParams(
                sigma=_opt_float(entries["sigma"]),
                sensitivity=None if entries["sensitivity"] is None else int(entries["sensitivity"]),
                noise_std=_opt_float(entries["noise_std"]),
                threshold=_opt_float(entries["threshold"]),
                released_tuples=None
                if entries["released_tuples"] is None
                else int(entries["released_tuples"]),
            )
        except (TypeError, ValueError) as err:
            raise ReleaseError(
                f"release manifest has a malformed marginals entry for length {k}: {err}"
            ) from err
    return MarginalsBlock(
        reporting_length=r,
        lengths=MappingProxyType(lengths),
        epsilon_n=_opt_float(doc.get("epsilon_n")),
        epsilon_m=_opt_float(doc.get("epsilon_m")),
        epsilon_q=_opt_float(doc.get("epsilon_q")),
        sigma=_opt_float(doc.get("sigma")),
        percentile=_opt_float(doc.get("percentile")),
    )
