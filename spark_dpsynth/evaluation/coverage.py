"""Columns that released nothing or almost nothing: one line per column, saying what to do.

A column whose values are all rarer than the release's threshold rho_1 (an unbinned number, an identifier, a
free-text column) releases no 1-tuple, and every synthetic record is empty there; nothing else in the outputs
says so. Two checks find such columns (docs/design.md section 5.4):

* :func:`release_coverage` reads only the release (public, DP: post-processing): per column, the number of
  released values (1-tuples) and the sum of their noisy counts as a share of the protected number of records
  n'. A column with no released value, or whose released values cover less than ``share`` (default
  :data:`EMPTY_COLUMN_SHARE`) of n', is listed. It runs after ``aggregate`` too. The derived binary columns of a
  multi-value column are left out (each exists only because its value passed the threshold, and a rare genre
  covers few records by nature).
* :func:`synthetic_coverage` compares the share of empty cells per column of the synthetic table with that of
  the sensitive table (NOT private: part of the evaluation): a column whose share of non-empty cells fell
  below ``share`` times the sensitive one is listed.

:func:`column_warnings` turns both into the lines the command line's summary and the report print.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from spark_dpsynth import _validate as v

if TYPE_CHECKING:
    from spark_dpsynth.release.core import Release

__all__ = [
    "release_coverage",
    "synthetic_coverage",
    "merge_coverage",
    "column_warnings",
    "describe",
    "EMPTY_COLUMN_SHARE",
]

EMPTY_COLUMN_SHARE = 0.5
"""A column is listed when its released values cover less than this share of the protected number of records,
or when its synthetic share of non-empty cells is less than this share of its sensitive one."""


def release_coverage(release: Release, share: float = EMPTY_COLUMN_SHARE) -> list[dict[str, Any]]:
    """Columns of a release that released no value, or values covering with the column's empty cells less than
    ``share`` of n'.

    Args:
        release: a release with 1-tuples (marginals or class-conditional); a release without 1-tuples
            (archetype: its synthesizer draws values from a public table) gives an empty list.
        share: a number in (0, 1).

    Returns:
        One dict per listed column, in release order: ``{"column", "released_values"`` (the number of
        released 1-tuples of the column), ``"released_share"`` (the sum of their noisy counts and of the
        column's released noisy count of empty cells, ``empty_counts`` or ``domain_discovery.empty_counts``, over
        n', in [0, inf); None without n'), ``"binned"`` (the column has public bins in the manifest),
        ``"advice"}``.

    Raises:
        InvalidParameterError: ``share`` is not in (0, 1).

    Privacy:
        Post-processing of the release only: as private as the release.
    """
    share = v.open_unit("share", share)
    ones = release.marginals.get(1)
    if ones is None:
        return []
    manifest = release.manifest
    derived = set((manifest.get("multi_value_columns") or {}).keys())
    bins = set(((manifest.get("data") or {}).get("bins") or {}).keys())
    n_protected = manifest.get("protected_number_of_records")
    # the released noisy counts of each column's empty cells (a column empty where the question does not apply):
    # the marginals mechanism's, or the workload mechanism's domain discovery's
    empty = manifest.get("empty_counts") or (manifest.get("domain_discovery") or {}).get("empty_counts") or {}
    counts = np.bincount(
        ones.columns[:, 0].astype(np.int64), weights=ones.counts, minlength=len(release.columns)
    )
    values = np.bincount(ones.columns[:, 0].astype(np.int64), minlength=len(release.columns))
    out = []
    for i, column in enumerate(release.columns):
        if column in derived:
            continue
        covered = (
            (float(counts[i]) + max(0, int(empty.get(column, 0)))) / n_protected if n_protected else None
        )
        if values[i] > 0 and (covered is None or covered >= share):
            continue
        out.append(
            {
                "column": column,
                "released_values": int(values[i]),
                "released_share": covered,
                "binned": column in bins,
                "advice": _advice(column, column in bins),
            }
        )
    return out


def synthetic_coverage(
    empty_share_by_column: Mapping[str, Mapping[str, float]],
    share: float = EMPTY_COLUMN_SHARE,
    binned: frozenset[str] | set[str] = frozenset(),
) -> list[dict[str, Any]]:
    """Columns whose synthetic cells are (almost) all empty where the sensitive ones are not.

    Args:
        empty_share_by_column: column -> ``{"sensitive": e_s, "synthetic": e_y}``, shares of empty cells in
            [0, 1] (``metrics["empty_share_by_column"]``).
        share: a number in (0, 1): a column is listed when 1 - e_y < ``share`` (1 - e_s).
        binned: the columns with public bins (for the advice).

    Returns:
        One dict per listed column, in the mapping's order: ``{"column", "sensitive_empty_share",
        "synthetic_empty_share", "binned", "advice"}``.

    Privacy:
        None: the sensitive shares are exact (evaluation only, not private).
    """
    share = v.open_unit("share", share)
    out = []
    for column, shares in empty_share_by_column.items():
        filled_s, filled_y = 1.0 - shares["sensitive"], 1.0 - shares["synthetic"]
        if filled_s > 0 and filled_y < share * filled_s:
            out.append(
                {
                    "column": column,
                    "sensitive_empty_share": shares["sensitive"],
                    "synthetic_empty_share": shares["synthetic"],
                    "binned": column in binned,
                    "advice": _advice(column, column in binned),
                }
            )
    return out


def column_warnings(release: Release | None, metrics: Mapping[str, Any] | None = None) -> list[str]:
    """One line per column that released nothing or almost nothing, naming it and what to do.

    With ``metrics`` (an evaluation), its ``empty_columns`` (release-based and synthetic-based); else the
    release-based check alone (:func:`release_coverage`), which is public.
    """
    if metrics is not None and metrics.get("empty_columns") is not None:
        entries = metrics["empty_columns"]
    elif release is not None:
        entries = release_coverage(release)
    else:
        return []
    return [describe(e) for e in entries]


def merge_coverage(
    from_release: list[dict[str, Any]], from_synthetic: list[dict[str, Any]], columns: tuple[str, ...]
) -> list[dict[str, Any]]:
    """One entry per listed column (table order), the release-based and synthetic-based keys together."""
    merged: dict[str, dict[str, Any]] = {}
    for entry in [*from_release, *from_synthetic]:
        merged.setdefault(entry["column"], {}).update(entry)
    return [merged[c] for c in columns if c in merged]


def describe(entry: Mapping[str, Any]) -> str:
    """The summary line of one listed column."""
    facts = []
    if "released_values" in entry:
        if entry["released_values"] == 0:
            facts.append("no value released")
        else:
            covered = entry["released_share"]
            facts.append(
                f"{entry['released_values']} value(s) released"
                + (f", covering {100 * covered:.1f}% of the protected records" if covered is not None else "")
            )
    if "synthetic_empty_share" in entry:
        facts.append(
            f"{100 * entry['synthetic_empty_share']:.1f}% of synthetic cells empty "
            f"(sensitive {100 * entry['sensitive_empty_share']:.1f}%)"
        )
    return f"{entry['column']}: {'; '.join(facts)}: {entry['advice']}"


def _advice(column: str, binned: bool) -> str:
    if binned:
        return f"give it fewer, wider public bins ([data.bins.{column}]) or leave it out ([data] columns)"
    return (
        f"bin it with public edges ([data.bins.{column}]) if it is a number, group its values, hash it into "
        "buckets ([data.hash_buckets]), declare a row key an identifier ([data] identifiers), or leave it out "
        "([data] columns)"
    )
