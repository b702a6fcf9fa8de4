"""Interop with Synthetic Data Showcase (SDS, pac-synth): its aggregates files to and from a release.

Two layouts, both as written by SDS's core (``packages/core/src/processing/aggregator/aggregated_data.rs``):

* TSV (``sds-cli aggregate --aggregates-path``, the web app's aggregates download)::

      selections<TAB>protected_count
      record_count<TAB>n'
      A:a1<TAB>count
      A:a1;B:b1<TAB>count
      ...

  A selection is ``column:value`` attributes joined by ``;``, each attribute in SDS's order (sorted by the
  ``column:value`` string). We write the 1-tuples first, in the release's column order, so that reading the
  file alone recovers the column order.
* JSON (``sds-cli aggregate --aggregates-json``, read by ``sds-cli generate --mode aggregate_seeded
  --aggregates-json``): the serde form of SDS's ``AggregatedData``: ``headers``,
  ``multi_value_column_metadata_map`` (derived header -> ``src_header_name``, ``attribute_name``,
  ``delimiter``), ``number_of_records``, ``protected_number_of_records``, ``aggregates_count`` (combination
  ``"i:value;j:value"`` with header indices -> ``{"count", "contained_in_records"}``),
  ``records_sensitivity_by_len`` and ``reporting_length``. We add ``spark_dpsynth_manifest`` (serde ignores
  unknown fields), so a JSON round trip keeps the manifest.

Privacy: SDS writes the true number of records into ``number_of_records`` and record indices into
``contained_in_records`` and ``records_sensitivity_by_len``. We write only the release: the protected number of
records n' in both record-count fields, empty record lists, no sensitivities. Multi-value columns follow SDS's
naming (``f"{column}_{value}"``, value ``"1"``) and appear only when released (see
:class:`~spark_dpsynth.params.DataConfig`).

A release read from an SDS file made by SDS itself carries no privacy parameters we can check: its manifest says
``"source": "sds"`` and holds what the file gives (columns, reporting length, n'). Synthesis from it works; the
``model`` synthesizer then treats the counts as exact (no noise scale is known).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from spark_dpsynth.errors import ReleaseError
from spark_dpsynth.release.core import Release

__all__ = [
    "SDS_TSV_FILE",
    "SDS_JSON_FILE",
    "to_sds_tsv",
    "to_sds_json",
    "write_sds_files",
    "read_sds",
    "read_sds_tsv",
    "read_sds_json",
]

SDS_TSV_FILE = "sds_aggregates.tsv"
"""Name of the TSV written next to a release's manifest by ``--sds-format``."""
SDS_JSON_FILE = "sds_aggregates.json"
"""Name of the JSON written next to a release's manifest by ``--sds-format``."""

_COMBINATION = ";"
_ATTRIBUTE = ":"


def _check_representable(release: Release) -> None:
    """SDS's formats cannot hold ``;``, ``:`` in a column name, nor ``;``, tab or newline in a value."""
    for c, name in enumerate(release.columns):
        if any(ch in name for ch in (_COMBINATION, _ATTRIBUTE, "\t", "\n", "\r")):
            raise ReleaseError(
                f"column {name!r} cannot be written in SDS's format (its name has ';', ':' or a tab)"
            )
        if any(ch in v for v in release.domains[c] for ch in (_COMBINATION, "\t", "\n", "\r")):
            # the message names the column only: a value may be private until its count is known to be released
            raise ReleaseError(
                f"a released value of column {name!r} contains ';', a tab or a newline, which SDS's format "
                "cannot hold"
            )


def _tuples(release: Release) -> list[tuple[list[tuple[int, str]], int]]:
    """Every released tuple as ([(column index, value), ...] in column order, count), k = 1..R, release order."""
    out = []
    for _, m in sorted(release.marginals.items()):
        for cols, vals, n in zip(m.columns.tolist(), m.values.tolist(), m.counts.tolist(), strict=True):
            out.append(([(c, release.domains[c][v]) for c, v in zip(cols, vals, strict=True)], int(n)))
    return out


def _sds_order(attrs: list[tuple[int, str]], columns: tuple[str, ...]) -> list[tuple[int, str]]:
    """SDS's order of the attributes of a combination: sorted by the ``column:value`` string."""
    return sorted(attrs, key=lambda a: f"{columns[a[0]]}{_ATTRIBUTE}{a[1]}")


def to_sds_tsv(release: Release) -> str:
    """The release as SDS's aggregates TSV (see the module docstring); the record count is n', never n.

    Raises:
        ReleaseError: a column name or released value cannot be written in SDS's format.
    """
    _check_representable(release)
    lines = ["selections\tprotected_count", f"record_count\t{release.protected_number_of_records}"]
    for attrs, n in _tuples(release):
        sel = _COMBINATION.join(
            f"{release.columns[c]}{_ATTRIBUTE}{v}" for c, v in _sds_order(attrs, release.columns)
        )
        lines.append(f"{sel}\t{n}")
    return "\n".join(lines) + "\n"


def to_sds_json(release: Release) -> dict[str, Any]:
    """The release as SDS's ``AggregatedData`` JSON object (see the module docstring), plus our manifest.

    Raises:
        ReleaseError: a column name or released value cannot be written in SDS's format.
    """
    _check_representable(release)
    n = release.protected_number_of_records
    meta = release.manifest.get("multi_value_columns") or {}
    aggregates = {}
    for attrs, count in _tuples(release):
        key = _COMBINATION.join(f"{c}{_ATTRIBUTE}{v}" for c, v in _sds_order(attrs, release.columns))
        aggregates[key] = {"count": count, "contained_in_records": []}
    return {
        "headers": list(release.columns),
        "multi_value_column_metadata_map": {
            name: {"src_header_name": m["column"], "attribute_name": m["value"], "delimiter": m["delimiter"]}
            for name, m in meta.items()
        },
        "number_of_records": n,
        "protected_number_of_records": n,
        "aggregates_count": aggregates,
        "records_sensitivity_by_len": [[] for _ in range(release.reporting_length + 1)],
        "reporting_length": release.reporting_length,
        "spark_dpsynth_manifest": release.manifest,
    }


def write_sds_files(release: Release, directory: str) -> tuple[str, str]:
    """Write ``directory/sds_aggregates.tsv`` and ``directory/sds_aggregates.json``; returns their paths.

    Raises:
        ReleaseError: a column name or released value cannot be written in SDS's format.
    """
    from spark_dpsynth.data.publish import write_text_atomically

    tsv = write_text_atomically(directory, SDS_TSV_FILE, to_sds_tsv(release))
    js = write_text_atomically(
        directory, SDS_JSON_FILE, json.dumps(to_sds_json(release), indent=1, sort_keys=True) + "\n"
    )
    return tsv, js


def read_sds(path: str, manifest: Mapping[str, Any] | None = None) -> Release:
    """Read an SDS aggregates file (``.json``: JSON; anything else: TSV) into a release.

    Args:
        path: the file.
        manifest: the release's manifest when known (our ``manifest.json``); by default the one in the JSON, or
            the ``manifest.json`` beside the file, or a minimal one marked ``"source": "sds"``.

    Raises:
        ReleaseError: the file is missing or not in SDS's layout.
    """
    if not os.path.isfile(path):
        raise ReleaseError(f"no SDS aggregates file at {path!r}")
    if manifest is None:
        beside = os.path.join(os.path.dirname(os.path.abspath(path)), "manifest.json")
        if os.path.isfile(beside):
            with open(beside, encoding="utf-8") as f:
                manifest = json.load(f)
    if path.endswith(".json"):
        return read_sds_json(path, manifest)
    return read_sds_tsv(path, manifest)


def read_sds_tsv(path: str, manifest: Mapping[str, Any] | None = None) -> Release:
    """Read SDS's aggregates TSV (see :func:`read_sds`). Columns come from ``manifest`` or, without one, in the
    order their first 1-tuple appears; the delimiter between selection and count is the header's (tab or ,)."""
    with open(path, encoding="utf-8") as f:
        lines = [line.rstrip("\r\n") for line in f if line.strip()]
    if not lines or not lines[0].startswith("selections"):
        raise ReleaseError(f"{path!r} is not an SDS aggregates file (its first line is not 'selections...')")
    sep = lines[0][len("selections")]
    protected_n = None
    rows: list[tuple[list[tuple[str, str]], int]] = []
    for i, line in enumerate(lines[1:], start=2):
        sel, _, count = line.rpartition(sep)
        try:
            n = int(count)
        except ValueError:
            raise ReleaseError(f"{path!r}, line {i}: the count is not an integer") from None
        if sel == "record_count":
            protected_n = n
            continue
        rows.append((_parse_selection(sel, path, i), n))
    if protected_n is None:
        raise ReleaseError(f"{path!r} has no record_count line")
    columns = _columns(manifest, [a for attrs, _ in rows for a in attrs if len(attrs) == 1])
    return _release(columns, rows, protected_n, manifest, path)


def read_sds_json(path: str, manifest: Mapping[str, Any] | None = None) -> Release:
    """Read SDS's ``AggregatedData`` JSON (see :func:`read_sds`)."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        headers = [str(h) for h in doc["headers"]]
        aggregates = doc["aggregates_count"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ReleaseError(f"{path!r} is not an SDS aggregates JSON file: {type(err).__name__}") from None
    if manifest is None and isinstance(doc.get("spark_dpsynth_manifest"), dict):
        manifest = doc["spark_dpsynth_manifest"]
    protected_n = doc.get("protected_number_of_records")
    if protected_n is None:
        # SDS without DP or k-anonymity: number_of_records is then the true count (the user's file, not ours).
        protected_n = doc.get("number_of_records")
    if protected_n is None:
        raise ReleaseError(f"{path!r} has no (protected_)number_of_records")
    rows = []
    for key, value in aggregates.items():
        attrs = []
        for part in key.split(_COMBINATION):
            idx, sep, val = part.partition(_ATTRIBUTE)
            if not sep or not idx.isdigit() or int(idx) >= len(headers):
                raise ReleaseError(f"{path!r}: a combination key is not 'index:value;...'")
            attrs.append((headers[int(idx)], val))
        count = value["count"] if isinstance(value, dict) else value
        rows.append((attrs, int(count)))
    extra = {"reporting_length": doc.get("reporting_length")}
    mv = doc.get("multi_value_column_metadata_map") or {}
    if mv:
        extra["multi_value_columns"] = {
            name: {"column": m["src_header_name"], "value": m["attribute_name"], "delimiter": m["delimiter"]}
            for name, m in mv.items()
        }
    return _release(tuple(headers), rows, int(protected_n), manifest, path, extra)


def _parse_selection(sel: str, path: str, line: int) -> list[tuple[str, str]]:
    attrs = []
    for part in sel.split(_COMBINATION):
        col, sep, val = part.partition(_ATTRIBUTE)
        if not sep:
            raise ReleaseError(f"{path!r}, line {line}: a selection is not 'column:value;...'")
        attrs.append((col, val))
    return attrs


def _columns(manifest: Mapping[str, Any] | None, singles: list[tuple[str, str]]) -> tuple[str, ...]:
    if manifest is not None and "columns" in manifest:
        return tuple(manifest["columns"])
    seen: dict[str, None] = {}
    for col, _ in singles:
        seen.setdefault(col, None)
    return tuple(seen)


def _release(
    columns: tuple[str, ...],
    rows: list[tuple[list[tuple[str, str]], int]],
    protected_n: int,
    manifest: Mapping[str, Any] | None,
    path: str,
    extra: Mapping[str, Any] | None = None,
) -> Release:
    order = {c: i for i, c in enumerate(columns)}
    unknown = sorted({c for attrs, _ in rows for c, _ in attrs if c not in order})
    if unknown:
        raise ReleaseError(f"{path!r} names column(s) {unknown} that its manifest does not list")
    r_file = max((len(attrs) for attrs, _ in rows), default=1)
    if manifest is not None:
        out = dict(manifest)
        if int(out.get("protected_number_of_records", protected_n)) != protected_n:
            raise ReleaseError(
                f"{path!r}: its record_count differs from the manifest's protected number of records"
            )
    else:
        r = (extra or {}).get("reporting_length") or r_file
        out = {
            "format_version": 1,
            "source": "sds",
            "source_file": os.path.basename(path),
            "test_mode": False,
            "columns": list(columns),
            "privacy_unit": "unknown",
            "reporting_length": int(r),
            "protected_number_of_records": protected_n,
            "note": "read from SDS aggregates: the privacy parameters are not known to spark_dpsynth",
        }
        if extra and extra.get("multi_value_columns"):
            out["multi_value_columns"] = extra["multi_value_columns"]
    out["protected_number_of_records"] = protected_n
    out["columns"] = list(columns)
    # column order within a tuple: ours (ascending column index); Release.from_pandas encodes and sorts.
    frame = pd.DataFrame(
        {
            "k": np.array([len(a) for a, _ in rows], dtype=np.int32),
            "columns": [[c for c, _ in sorted(a, key=lambda x: order[x[0]])] for a, _ in rows],
            "values": [[v for _, v in sorted(a, key=lambda x: order[x[0]])] for a, _ in rows],
            "count": np.array([n for _, n in rows], dtype=np.int64),
        }
    )
    if int(out["reporting_length"]) < r_file:
        raise ReleaseError(
            f"{path!r} holds {r_file}-tuples but its reporting length is {out['reporting_length']}"
        )
    return Release.from_pandas(frame, out)
