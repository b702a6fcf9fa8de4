"""What the marginals and workload releases record and report besides their statistics: the shared manifest
entries and the progress lines about the columns.

* :func:`release_key`: the in-memory key of the contribution-bounding hash (docs/design.md section 2.2);
* :func:`versions` and :func:`data_manifest`: the manifest's ``versions`` and public data configuration
  (docs/design.md section 5);
* ``report_*``: one progress line per column, before counting (:func:`report_columns`,
  :func:`report_identifiers`, :func:`report_profiles`) or after the 1-way release
  (:func:`report_high_cardinality`), docs/design.md section 2.8. They read the schema, the configuration or
  released (noisy) statistics only, never a true count.

Post-processing and bookkeeping only: nothing here reads the sensitive rows or draws noise.
"""

from __future__ import annotations

import logging
import platform
import secrets
from collections.abc import Mapping

from spark_dpsynth._progress import Progress, report
from spark_dpsynth.params import BinSpec, DataConfig

__all__ = [
    "HIGH_CARDINALITY_SHARE",
    "data_manifest",
    "release_key",
    "report_columns",
    "report_high_cardinality",
    "report_identifiers",
    "report_profiles",
    "versions",
]

log = logging.getLogger(__name__)


def release_key(seed: int | None) -> int:
    """The 64-bit key of the bounding hash: from ``secrets`` (production) or derived from the test seed.

    It lives only in memory: never written, logged or put in the Spark configuration.
    """
    if seed is None:
        return secrets.randbits(64)
    from spark_dpsynth.privacy._seeded import derive_key

    return derive_key(seed)


def versions() -> dict[str, str]:
    """The manifest's ``versions``: Python's and those of this package, pyspark, opendp, numpy and scipy
    (``"unknown"`` when not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for pkg in ("spark_dpsynth", "pyspark", "opendp", "numpy", "scipy"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "unknown"
    return out


def data_manifest(
    config: DataConfig, identifiers: Mapping[str, Mapping[str, object]] | None = None
) -> dict[str, object]:
    """The public data configuration of a release: the manifest's ``data`` entry, its privacy unit and, with
    identifier columns, the ``identifier_columns`` block (:func:`~spark_dpsynth.profile.identifiers_manifest`:
    their types and places, which type restoration fills with surrogate keys)."""
    extra: dict[str, object] = {"identifier_columns": dict(identifiers)} if identifiers else {}
    return {
        **extra,
        "privacy_unit": "person" if config.privacy_unit is not None else "record",
        "privacy_unit_column": config.privacy_unit,
        "data": {
            "empty_values": list(config.empty_values),
            "zeros_are_empty": config.zeros_are_empty,
            "sensitive_zeros": list(config.sensitive_zeros),
            "bins": {
                c: {
                    "edges": list(b.edges),
                    "labels": list(b.interval_labels()),
                    "passthrough": list(b.passthrough),
                    "points": list(b.points),
                }
                for c, b in config.bins.items()
            },
            "privacy_unit": config.privacy_unit,
            "multi_value": dict(config.multi_value),
            "max_multi_values": config.max_multi_values,
            "record_limit": config.record_limit,
            "domains": {c: list(vals) for c, vals in config.domains.items()},
            "identifiers": list(config.identifiers),
            "hash_buckets": dict(config.hash_buckets),
        },
    }


def report_columns(types: Mapping[str, object], config: DataConfig, progress: Progress | None = None) -> None:
    """One line per attribute column, before counting: how it is counted (docs/design.md section 2.8).

    Public information only (the schema and the configuration): a distinct count is private, so an
    identifier-like or free-text column cannot be recognised here from its values. A category column keeps its
    frequent values (those that pass the threshold rho_1); one whose released values cover little of the records
    is reported after the 1-way release (:func:`report_high_cardinality`), and the report after the run names
    every column that released nothing.
    """
    for name, t in types.items():
        scale = getattr(t, "scale", "category")
        kind = getattr(t, "type", "?")
        if name in config.multi_value:
            choice = "multi-value: one binary column per frequent value"
        elif scale != "category" and name in config.bins:
            choice = f"{scale}: public bins from the configuration ({len(config.bins[name].edges) + 1} bins)"
            choice += _open_bins_note(name, config.bins[name], scale)
        elif scale != "category":
            choice = (
                f"{scale}: its DP profile decides: a code (few exact values hold its records: counted as a "
                f"category, values kept exactly) or a measurement (up to {config.dp_bins} bins inside its DP "
                "range, frequent exact values kept)"
            )
        elif name in config.domains:
            choice = (
                f"public domain from the configuration ({len(config.domains[name])} values; any other value is "
                "empty)"
            )
        elif name in config.hash_buckets:
            choice = (
                f"hash buckets: each value replaced by its bucket, a public domain of {config.hash_buckets[name]} "
                "labels; the synthetic column holds bucket labels, never values"
            )
        elif name in config.categorical:
            choice = "declared categorical: keeps its frequent values, each released only above rho_1"
        elif kind == "string":
            choice = (
                "category: keeps its frequent values (a value is released only above rho_1), unless a DP test "
                "finds numbers written as text (then its DP profile decides, as for a number)"
            )
        else:
            choice = "category: keeps its frequent values (a value is released only above rho_1)"
        report(progress, log, f"column {name!r} ({kind}): {choice}")


def _open_bins_note(name: str, spec: BinSpec, scale: str) -> str:
    """How the open bins of public edges without public bounds are drawn (docs/design.md section 2.8): "" when
    both bounds are given; from the configuration only."""
    from spark_dpsynth.synthesizers._types import open_bounds

    if spec.lower is not None and spec.upper is not None:
        return ""

    def fmt(x: float) -> str:
        return f"{x:.12g}"

    lo, hi = open_bounds(spec.edges, spec.lower, spec.upper, scale)
    labels = spec.interval_labels()
    drawn = []
    if spec.lower is None:
        drawn.append(f"{labels[0]!r} in [{fmt(lo)}, {fmt(spec.edges[0])})")
    if spec.upper is None:
        drawn.append(f"{labels[-1]!r} in [{fmt(spec.edges[-1])}, {fmt(hi)})")
    missing = " and ".join(b for b, x in (("lower", spec.lower), ("upper", spec.upper)) if x is None)
    plural = "s" if len(drawn) > 1 else ""
    cut = ", never across 0" if scale in ("integer", "real") else ""
    return (
        f"; no public {missing} bound{plural}: synthetic values of {' and '.join(drawn)} are drawn uniformly "
        f"(the neighbouring bin's width{cut}); set {missing} in [data.bins.{name}] to the column's "
        "public range to bound them"
    )


def report_identifiers(
    identifiers: Mapping[str, Mapping[str, object]], progress: Progress | None = None
) -> None:
    """One line per identifier column, before counting (docs/design.md section 2.8): the choice made for it.

    Args:
        identifiers: the manifest's ``identifier_columns`` block
            (:func:`~spark_dpsynth.profile.identifiers_manifest`): schema facts only.
        progress: the progress callback.
    """
    for name, entry in identifiers.items():
        report(
            progress,
            log,
            f"column {name!r} ({entry['type']}): identifier: left out of the measurement, synthetic surrogate keys",
        )


def report_profiles(profiles: Mapping[str, object], progress: Progress | None = None) -> None:
    """One line per profiled column: the meaning its DP profile chose and why (DP outputs only, docs/design.md
    section 2.8)."""
    for name, p in profiles.items():
        report(progress, log, f"column {name!r}: {getattr(p, 'reason', '')}")


HIGH_CARDINALITY_SHARE = 0.5
"""A category column whose released 1-way values (and measured empty cells) cover less than this share of the
protected number of records is reported as identifier-like or high-cardinality (docs/design.md section 2.8)."""


def report_high_cardinality(
    covered: Mapping[str, tuple[int, float]],
    protected_n: int,
    progress: Progress | None = None,
) -> dict[str, object]:
    """Report the category columns whose released values cover little of the records; the manifest entry.

    Post-processing of the 1-way release (docs/design.md section 2.8): run after the 1-way release and before
    the k-tuples are counted, by both the marginals and the workload mechanism. One progress line per flagged
    column names it, the covered share (noisy, rounded), what is done with it and what to do instead.

    Args:
        covered: column name -> (number of released values, sum of their noisy 1-way counts plus the column's
            noisy empty count where the release measures it); released values only, never a true count.
        protected_n: the protected number of records n' (noisy).
        progress: the progress callback.

    Returns:
        The manifest's ``high_cardinality`` entry: ``share_below`` (:data:`HIGH_CARDINALITY_SHARE`) and
        ``columns``, column -> {``released_values``, ``covered_share``} (noisy, rounded to 3 decimals) for the
        flagged columns, in the order of ``covered``.
    """
    flagged: dict[str, dict[str, object]] = {}
    for name, (n_values, total) in covered.items():
        share = max(0.0, float(total)) / max(1, int(protected_n))
        if share >= HIGH_CARDINALITY_SHARE:
            continue
        flagged[name] = {"released_values": int(n_values), "covered_share": round(min(share, 1.0), 3)}
        if n_values:
            found = (
                f"its {n_values} released value(s) cover about {min(share, 1.0):.0%} of the records (noisy); it "
                "keeps them, and its synthetic cells hold only these values (or are empty)"
            )
        else:
            found = "no value passed the threshold rho_1, so its synthetic cells are empty"
        report(
            progress,
            log,
            f"column {name!r}: identifier-like or high-cardinality: {found}. Instead: declare a row key an "
            "identifier ([data] identifiers: left out of the measurement, synthetic surrogate keys), hash it into "
            "buckets ([data.hash_buckets]), bin a column of numbers ([data.bins]), list its public values "
            "([data.domains]), or leave it out of [data] columns",
        )
    return {"share_below": HIGH_CARDINALITY_SHARE, "columns": flagged}
