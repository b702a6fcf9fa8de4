"""The DP release: noisy, thresholded, normalized k-way marginals plus a manifest of the privacy parameters.

On disk a release is a directory::

    release/
      aggregates/      Parquet, one row per released k-tuple, schema
                       k: int, columns: array<string> (k column names, in the table's column order),
                       values: array<string> (the k values), count: bigint (noisy, normalized, > 0)
      manifest.json    privacy parameters (epsilon, delta, rho, sigmas, sensitivities, thresholds,
                       protected_number_of_records, columns, ...), see ``spark_dpsynth.mechanisms.marginals``
      SHA256SUMS       the SHA-256 of every other file, written last and checked on load
                       (:func:`spark_dpsynth.release.integrity.check_file_digests`; a release written before
                       it loads with its Parquet, checksum and manifest checks only)
      measurements/    (only when the release has measured marginals) Parquet, one row per cell of every
                       measured marginal, schema marginal: int (index into the manifest's ``measurements``
                       list), cell: bigint (C-order flat index into the marginal's table), value: double (the
                       noisy count); the manifest's ``measurements`` list gives each one's ``columns`` (names)
                       and ``std``, and ``"partial": true`` when only the cells written are measured
                       (docs/design.md section 4.8)
      class_conditional_histograms.json    (the class_conditional mechanism) its noisy histograms
      archetype_model.json, archetype_public/*.parquet   (the archetype mechanism) its noisy histograms and the
                       PUBLIC table's profiles (:class:`ModelFiles`, docs/design.md sections 4.4 and 4.6)

In memory, a :class:`Release` holds the same data encoded for computation: per length k, a :class:`Marginal`
with (m_k, k) arrays of column indices and value codes and an (m_k,) array of counts. Value codes index
``Release.domains[column]``: the values of that column whose 1-tuple was released (passed the threshold rho_1).

A release may also carry *measured marginals* (:class:`~spark_dpsynth.estimation.domain.Measurement`, the one
measurement type of the package, its clique named by columns): full noisy contingency tables over
cliques of columns, every cell included (zero cells too), neither thresholded nor rounded, each with the standard
deviation of its Gaussian noise. Their cells index the *measurement domain* of a column c: codes
``0 .. len(domains[c]) - 1`` are the released values ``domains[c]``, and code ``len(domains[c])`` is the *empty
category* (empty cells, and values that did not pass the 1-tuple threshold), so column c has
``len(domains[c]) + 1`` cells (:meth:`Release.measurement_sizes`). The ``pgm`` synthesizer estimates a graphical
model from them (docs/design.md section 4.8). A measured marginal may be *partial* (``Measurement.mask``):
only some of its cells are measured, e.g. the 1-way value discovery's released counts, which cover the released
values but not the empty category; on disk only its measured cells are written and its manifest entry says
``"partial": true`` (entries without the key are whole tables, as in releases written before).

Privacy: everything in a release is differentially private (docs/design.md section 1.5). It never holds the true number
of records, a true count, a value that did not pass rho_1, record-level data, or the release key.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import numpy as np
import pandas as pd

from spark_dpsynth.errors import InvalidParameterError, ReleaseError
from spark_dpsynth.estimation.domain import Measurement
from spark_dpsynth.release.manifest import Manifest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

__all__ = [
    "MODEL_FILES",
    "ModelFiles",
    "AGGREGATES_SCHEMA",
    "MEASUREMENTS_SCHEMA",
    "Marginal",
    "Release",
    "one_way_means",
    "sorted_marginal",
]

AGGREGATES_SCHEMA = "k int, columns array<string>, values array<string>, count bigint"
"""Spark DDL schema of ``release/aggregates``."""
MEASUREMENTS_SCHEMA = "marginal int, cell long, value double"
"""Spark DDL schema of ``release/measurements`` (present only when the release has measured marginals)."""


@dataclass(frozen=True)
class Marginal:
    """The released k-tuples of one length k, encoded.

    Rows are sorted by (columns, values) lexicographically.
    """

    columns: np.ndarray
    """int16 array (m, k): column indices of each k-tuple, strictly ascending along a row."""
    values: np.ndarray
    """int32 array (m, k): value codes, ``values[i, j]`` indexes ``Release.domains[columns[i, j]]``."""
    counts: np.ndarray
    """int64 array (m,): the noisy, normalized counts, each >= 1."""

    @property
    def k(self) -> int:
        return int(self.columns.shape[1])

    def __len__(self) -> int:
        return int(self.counts.shape[0])


def one_way_means(
    measurements: Iterable[Measurement], columns: Sequence[str]
) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per column with 1-way measured marginals: the inverse-variance mean of its cells and that mean's std,
    cell by cell (post-processing of DP tables).

    Over a column's 1-way tables i (cells y_i, std s_i) that measure a cell: y = sum(y_i / s_i^2) / sum(1 / s_i^2),
    s = sum(1 / s_i^2)^(-1/2). A partial table counts only on the cells it measures; a cell no table measures
    has mean 0 and std infinity (nothing is known of it). Columns without a 1-way table are not listed.

    Args:
        measurements: the measured marginals (cliques of column names).
        columns: the column order; the result is keyed by index into it.
    """
    index = {c: i for i, c in enumerate(columns)}
    weights: dict[int, np.ndarray] = {}
    sums: dict[int, np.ndarray] = {}
    for m in measurements:
        if len(m.clique) == 1:
            c = index[m.clique[0]]
            w = np.full(m.values.shape, 1.0 / (m.std * m.std))
            if m.mask is not None:
                w = np.where(m.mask, w, 0.0)
            weights[c] = weights.get(c, 0.0) + w
            sums[c] = sums.get(c, 0.0) + w * m.values
    out = {}
    for c, w in weights.items():
        seen = w > 0
        mean = np.where(seen, sums[c] / np.where(seen, w, 1.0), 0.0)
        std = np.where(seen, 1.0 / np.sqrt(np.where(seen, w, 1.0)), np.inf)
        out[c] = (mean, std)
    return out


MODEL_FILES: dict[str, tuple[str, str | None]] = {
    "class_conditional": ("class_conditional_histograms.json", None),
    "archetype": ("archetype_model.json", "archetype_public"),
}
"""Mechanism -> (its model's JSON document, the directory of its public tables or None), in the release
directory beside ``manifest.json`` (:class:`ModelFiles`)."""


@dataclass(frozen=True, eq=False)
class ModelFiles:
    """A mechanism's model beyond the k-tuples and the measured marginals, as the release holds it: a JSON
    document of DP outputs (the class-conditional histograms, the archetype histograms) and, for the archetype
    mechanism, tables of the PUBLIC data. :meth:`Release.save` writes them in the release directory and
    :meth:`Release.load` reads them back (:data:`MODEL_FILES` names them); the synthesizer of the mechanism
    turns them into its model."""

    document: dict[str, Any]
    """The JSON document (noisy counts, clipped or clamped; domains; no true count)."""
    tables: dict[str, pd.DataFrame] = dataclasses.field(default_factory=dict)
    """Public tables by name (written as ``NAME.parquet`` in the mechanism's public directory)."""

    def write(self, directory: str, mechanism: str) -> None:
        """Write the document and the tables of ``mechanism``'s model into the release directory."""
        name, public = _model_layout(mechanism)
        with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
            json.dump(self.document, f)
        if self.tables:
            if public is None:
                raise ReleaseError(f"the {mechanism} model has no public tables")
            os.makedirs(os.path.join(directory, public), exist_ok=True)
            for table, frame in self.tables.items():
                frame.to_parquet(os.path.join(directory, public, f"{table}.parquet"), index=False)

    @classmethod
    def read(cls, directory: str, mechanism: str) -> ModelFiles | None:
        """The model files of ``mechanism`` in a release directory; None for a mechanism without a model.

        Raises:
            ReleaseError: the mechanism has a model and its document is missing or unreadable.
        """
        if mechanism not in MODEL_FILES:
            return None
        name, public = MODEL_FILES[mechanism]
        path = os.path.join(directory, name)
        try:
            with open(path, encoding="utf-8") as f:
                document = json.load(f)
        except (OSError, json.JSONDecodeError) as err:
            raise ReleaseError(
                f"the {mechanism} release at {directory!r} has no readable model ({name})"
            ) from err
        tables = {}
        if public is not None and os.path.isdir(os.path.join(directory, public)):
            for entry in sorted(os.listdir(os.path.join(directory, public))):
                if entry.endswith(".parquet"):
                    file = os.path.join(directory, public, entry)
                    try:
                        tables[entry.removesuffix(".parquet")] = pd.read_parquet(file)
                    except (OSError, ValueError) as err:  # pyarrow's errors are both
                        raise _damaged(file, "not a readable Parquet file") from err
        return cls(document=document, tables=tables)


def _model_layout(mechanism: str) -> tuple[str, str | None]:
    if mechanism not in MODEL_FILES:
        raise ReleaseError(f"the {mechanism} mechanism has no model files")
    return MODEL_FILES[mechanism]


def read_manifest_json(path: str) -> Any:
    """The JSON document of a release's ``manifest.json`` at ``path`` (not yet validated).

    Raises:
        ReleaseError: the file cannot be read or is not JSON.
    """
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError) as err:
        raise ReleaseError(f"cannot read {path!r}: {err}") from err


@dataclass(frozen=True)
class Release:
    """A DP release (see the module docstring for the on-disk layout)."""

    columns: tuple[str, ...]
    """The attribute columns of the table, in order (public: from the config or the schema)."""
    domains: tuple[tuple[str, ...], ...]
    """Per column, the released values (sorted); a column can have none."""
    marginals: dict[int, Marginal]
    """k -> released k-tuples, for k = 1..reporting_length (a length can be empty)."""
    manifest: Manifest
    """The privacy parameters and provenance (:class:`~spark_dpsynth.release.manifest.Manifest`, frozen), as
    written to ``manifest.json``; a plain JSON dict given here is validated into one."""
    measurements: tuple[Measurement, ...] = ()
    """The measured marginals (:class:`~spark_dpsynth.estimation.domain.Measurement`: full noisy tables over
    cliques of column names, in the table's column order; module docstring), in the order of the manifest's
    ``measurements`` list; empty for the mechanisms that release thresholded k-tuples only."""
    model_files: ModelFiles | None = dataclasses.field(default=None, compare=False)
    """The mechanism's own model (:class:`ModelFiles`: the class-conditional and archetype mechanisms), saved
    and loaded with the release; None for the others."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "manifest", Manifest.from_json(self.manifest))
        measurements = tuple(self.measurements)
        index = {c: i for i, c in enumerate(self.columns)}
        for m in measurements:
            if not isinstance(m, Measurement):
                raise ReleaseError(f"measurements must be Measurement, got {type(m).__name__}")
            cols = [index.get(c, -1) for c in m.clique]
            if min(cols) < 0 or any(b <= a for a, b in zip(cols, cols[1:], strict=False)):
                raise ReleaseError(
                    f"a measured marginal's clique {list(m.clique)} must name columns of the release in its "
                    "column order"
                )
            expected = tuple(len(self.domains[c]) + 1 for c in cols)
            if m.values.shape != expected:
                raise ReleaseError(
                    f"the measured marginal over {list(m.clique)} has shape "
                    f"{m.values.shape}, its measurement domain is {expected} (released values + empty)"
                )
        object.__setattr__(self, "measurements", measurements)

    def measurement_sizes(self) -> tuple[int, ...]:
        """Per column, the size of its measurement domain: its released values plus the empty category."""
        return tuple(len(d) + 1 for d in self.domains)

    @property
    def reporting_length(self) -> int:
        return self.manifest.reporting_length

    @property
    def protected_number_of_records(self) -> int:
        """n' = n + discrete Laplace noise, clamped to >= 1 (the only record count a release holds)."""
        n = self.manifest.protected_number_of_records
        if n is None:
            raise ReleaseError("release manifest has no protected_number_of_records")
        return n

    def sizes(self) -> dict[int, int]:
        """Number of released k-tuples per length k."""
        return {k: len(m) for k, m in sorted(self.marginals.items())}

    def counts_by_tuple(self) -> dict[tuple[tuple[int, int], ...], int]:
        """Every released tuple as ``((column index, value code), ...)`` (ascending columns) -> count.

        Release-sized; used by the samplers and the evaluator.
        """
        out: dict[tuple[tuple[int, int], ...], int] = {}
        for m in self.marginals.values():
            cols = m.columns.tolist()
            vals = m.values.tolist()
            for c, val, n in zip(cols, vals, m.counts.tolist(), strict=True):
                out[tuple(zip(c, val, strict=True))] = n
        return out

    def to_pandas(self) -> pd.DataFrame:
        """The decoded aggregates: columns k (int), columns (list[str]), values (list[str]), count (int64)."""
        frames = []
        for k, m in sorted(self.marginals.items()):
            if len(m) == 0:
                continue
            names = np.asarray(self.columns, dtype=object)[m.columns]
            vals = np.empty(m.values.shape, dtype=object)
            for j in range(k):
                for c in np.unique(m.columns[:, j]):
                    rows = m.columns[:, j] == c
                    vals[rows, j] = np.asarray(self.domains[c], dtype=object)[m.values[rows, j]]
            frames.append(
                pd.DataFrame(
                    {
                        "k": np.full(len(m), k, dtype=np.int32),
                        "columns": [list(r) for r in names],
                        "values": [list(r) for r in vals],
                        "count": m.counts.astype(np.int64),
                    }
                )
            )
        if not frames:
            return pd.DataFrame(
                {
                    "k": pd.Series(dtype=np.int32),
                    "columns": pd.Series(dtype=object),
                    "values": pd.Series(dtype=object),
                    "count": pd.Series(dtype=np.int64),
                }
            )
        return pd.concat(frames, ignore_index=True)

    @classmethod
    def from_pandas(cls, aggregates: pd.DataFrame, manifest: Mapping[str, Any]) -> Release:
        """Encode decoded aggregates (the :meth:`to_pandas` layout) with their manifest into a Release.

        Raises:
            ReleaseError: a tuple names a column not in the manifest, or a value without its 1-tuple.
        """
        columns = tuple(manifest["columns"])
        index = {c: i for i, c in enumerate(columns)}
        r = int(manifest["reporting_length"])
        ones = aggregates[aggregates["k"] == 1]
        per_col: dict[int, list[str]] = {i: [] for i in range(len(columns))}
        for cs, vs in zip(ones["columns"], ones["values"], strict=True):
            if cs[0] not in index:
                raise ReleaseError(f"release names column {cs[0]!r}, which is not in its manifest")
            per_col[index[cs[0]]].append(str(vs[0]))
        domains = tuple(tuple(sorted(set(per_col[i]))) for i in range(len(columns)))
        codes = [{val: j for j, val in enumerate(d)} for d in domains]
        marginals: dict[int, Marginal] = {}
        for k in range(1, r + 1):
            part = aggregates[aggregates["k"] == k]
            m = len(part)
            col_arr = np.zeros((m, k), dtype=np.int16)
            val_arr = np.zeros((m, k), dtype=np.int32)
            for i, (cs, vs) in enumerate(zip(part["columns"], part["values"], strict=True)):
                try:
                    ci = [index[c] for c in cs]
                    pairs = sorted(
                        zip(ci, (codes[c][str(x)] for c, x in zip(ci, vs, strict=True)), strict=True)
                    )
                except KeyError as err:
                    raise ReleaseError(
                        f"a {k}-tuple of the release has a column or value without its 1-tuple"
                    ) from err
                col_arr[i] = [p[0] for p in pairs]
                val_arr[i] = [p[1] for p in pairs]
            marginals[k] = sorted_marginal(col_arr, val_arr, part["count"].to_numpy(dtype=np.int64))
        return cls(
            columns=columns, domains=domains, marginals=marginals, manifest=Manifest.from_json(manifest)
        )

    def save(self, path: str, spark: SparkSession, *, overwrite: bool = False) -> None:
        """Write ``path/aggregates`` (Parquet), the measurements and model files, ``path/manifest.json``, and last
        ``path/SHA256SUMS``, the SHA-256 of every other file (checked by :meth:`load`).

        The release is first written to a temporary directory next to ``path`` and then renamed into place, so a
        failure never leaves a half-written release behind. Works on a classic or a Spark Connect session;
        ``path`` is a directory on the driver's file system (local, a shared mount, a Databricks volume).

        Args:
            path: the release directory.
            spark: the session that writes the aggregates.
            overwrite: replace an existing release at ``path`` (otherwise it is an error).

        Raises:
            OutputExistsError: ``path`` exists and ``overwrite`` is False.
        """
        from spark_dpsynth.data.publish import atomic_path
        from spark_dpsynth.release.integrity import write_file_digests

        with atomic_path(path, overwrite=overwrite) as tmp:
            os.makedirs(tmp)
            pdf = self.to_pandas()
            df = (
                spark.createDataFrame(pdf, schema=AGGREGATES_SCHEMA)
                if len(pdf)
                else spark.createDataFrame([], schema=AGGREGATES_SCHEMA)
            )
            df.coalesce(1).write.mode("error").parquet(os.path.join(tmp, "aggregates"))
            doc = self.manifest.to_json()
            if self.measurements:
                doc["measurements"] = self._measurements_manifest()
                # the cells index each column's values in this order (bin order for binned columns, the
                # codebook's for public domains), which the aggregates' sorted 1-tuples do not keep
                doc["measurement_domains"] = {
                    c: list(d) for c, d in zip(self.columns, self.domains, strict=True)
                }
                cells = _measurement_cells(self.measurements)
                spark.createDataFrame(cells, schema=MEASUREMENTS_SCHEMA).coalesce(1).write.mode(
                    "error"
                ).parquet(os.path.join(tmp, "measurements"))
            if self.model_files is not None:
                self.model_files.write(tmp, self.manifest.mechanism)
            with open(os.path.join(tmp, "manifest.json"), "w", encoding="utf-8") as f:
                json.dump(doc, f, indent=2, sort_keys=True)
                f.write("\n")
            # every file's SHA-256, checked on load: a file swapped from another release is named
            write_file_digests(tmp)

    def _measurements_manifest(self) -> list[dict[str, Any]]:
        """The manifest's ``measurements`` list for :attr:`measurements`: the mechanism's own list (which may
        hold more keys, e.g. ``rho`` and ``round``) when it matches them, else ``columns`` and ``std`` only.

        Raises:
            ReleaseError: the manifest lists measurements that differ from :attr:`measurements`.
        """
        own = self.manifest.get("measurements")
        made = [
            {
                "columns": list(m.clique),
                "std": m.std,
                **({"partial": True} if m.partial else {}),
            }
            for m in self.measurements
        ]
        if own is None:
            return made
        entries = [dict(e) for e in own]
        if len(entries) != len(made) or any(
            list(e.get("columns", ())) != m["columns"]
            or float(e.get("std", -1.0)) != m["std"]
            or bool(e.get("partial", False)) != bool(m.get("partial", False))
            for e, m in zip(entries, made, strict=False)
        ):
            raise ReleaseError(
                "the manifest's measurements list does not match the release's measured marginals "
                "(same order, columns, std and partial expected)"
            )
        return [{**e, "columns": list(e["columns"])} for e in entries]

    @classmethod
    def load(cls, path: str, spark: SparkSession) -> Release:
        """Read a release directory written by :meth:`save` (an SDS aggregates file too:
        :func:`spark_dpsynth.release.load_release` reads either).

        Raises:
            ReleaseError: the directory, its manifest or its aggregates are missing or unreadable, a file of
                the release is damaged (truncated, or another release's, with its checksum file too: its
                SHA-256 is not the one ``SHA256SUMS`` lists; the message names it), the output
                directory holding it is half published by a run that died and cannot be settled
                (:func:`spark_dpsynth.data.publish.recover_before_reading`),
                ``path`` is a file, or the manifest's privacy figures or counts disagree
                (:func:`spark_dpsynth.release.integrity.check_release`).
        """
        from spark_dpsynth.data.publish import recover_before_reading
        from spark_dpsynth.release.integrity import check_file_digests, check_release

        path = _local(path)
        # a run that died publishing the output directory holding this release is settled first (all-old or
        # all-new, docs/design.md section 1.7)
        recover_before_reading(os.path.dirname(os.path.abspath(path)))
        if os.path.isfile(path):
            raise ReleaseError(
                f"{path!r} is a file, not a release directory; read SDS aggregates files with "
                "spark_dpsynth.release.load_release"
            )
        manifest_path = os.path.join(path, "manifest.json")
        if not os.path.isfile(manifest_path):
            raise ReleaseError(f"no release at {path!r} (manifest.json is missing)")
        manifest = read_manifest_json(manifest_path)
        if not check_file_digests(path):
            log.info(
                "the release at %s has no file digests (an earlier version wrote it): its files are checked by "
                "their Parquet footers, schemas and checksums only",
                path,
            )
        release = cls._read_directory(path, spark, manifest)
        check_release(release)
        # last: what the checks above name (a hand-edited figure) is said first; an edit that keeps every relation,
        # or another release's manifest that passed them, is still refused
        check_file_digests(path, manifest=True)
        return _with_model_files(release, path)

    @classmethod
    def _read_directory(cls, path: str, spark: SparkSession, manifest: Any) -> Release:
        """The release in the directory ``path`` with the manifest object read from it, not yet checked by
        :func:`~spark_dpsynth.release.integrity.check_release` (:meth:`load`)."""
        agg_path = os.path.join(path, "aggregates")
        if not os.path.isdir(agg_path):
            raise ReleaseError(f"release at {path!r} has no aggregates directory")
        # Release-sized: the aggregates are the DP release itself, bounded by the candidate sets.
        pdf = _read_table(spark, agg_path, AGGREGATES_SCHEMA, "aggregates")
        pdf["columns"] = pdf["columns"].map(list)
        pdf["values"] = pdf["values"].map(list)
        release = cls.from_pandas(pdf, manifest)
        if isinstance(manifest, dict) and manifest.get("measurement_domains"):
            release = _in_measurement_order(release, manifest["measurement_domains"])
        listed = manifest.get("measurements") if isinstance(manifest, dict) else None
        meas_path = os.path.join(path, "measurements")
        if not listed:
            if os.path.isdir(meas_path):
                raise ReleaseError(
                    f"release at {path!r} has measurements but its manifest does not list them"
                )
            return release
        if not os.path.isdir(meas_path):
            raise ReleaseError(f"release at {path!r} lists measurements but has no measurements directory")
        # Release-sized: the measured cells are the DP release itself (the mechanism bounds their number).
        cells = _read_table(spark, meas_path, MEASUREMENTS_SCHEMA, "measurements")
        measured = _read_measurements(listed, cells, release)
        return cls(
            columns=release.columns,
            domains=release.domains,
            marginals=release.marginals,
            manifest=release.manifest,
            measurements=measured,
        )


def _with_model_files(release: Release, directory: str) -> Release:
    """The release with its mechanism's model files read from its directory (:class:`ModelFiles`)."""
    files = ModelFiles.read(directory, release.manifest.mechanism)
    return release if files is None else dataclasses.replace(release, model_files=files)


def _in_measurement_order(release: Release, order: Mapping[str, Any]) -> Release:
    """The release with each column's values in the order its measured cells index (the manifest's
    ``measurement_domains``, written by :meth:`Release.save`), the k-tuples' codes renumbered to match.

    Raises:
        ReleaseError: ``measurement_domains`` does not hold exactly the released values of every column.
    """
    domains = []
    perms = []
    for c, dom in zip(release.columns, release.domains, strict=True):
        want = tuple(str(x) for x in order.get(c, ()))
        if sorted(want) != sorted(dom):
            raise ReleaseError(
                f"the manifest's measurement_domains for column {c!r} differ from its released values"
            )
        new = {v: i for i, v in enumerate(want)}
        perms.append(np.array([new[v] for v in dom], dtype=np.int32))
        domains.append(want)
    marginals = {}
    for k, m in release.marginals.items():
        values = m.values.copy()
        for j in range(values.shape[1]):
            for c in np.unique(m.columns[:, j]):
                rows = m.columns[:, j] == c
                values[rows, j] = perms[int(c)][m.values[rows, j]]
        marginals[k] = sorted_marginal(m.columns.copy(), values, m.counts.copy())
    return dataclasses.replace(release, domains=tuple(domains), marginals=marginals)


def sorted_marginal(columns: np.ndarray, values: np.ndarray, counts: np.ndarray) -> Marginal:
    """The :class:`Marginal` of these tuples (``columns`` and ``values``: int arrays of shape (m, k), ``counts``:
    int64 of shape (m,)), its rows sorted by columns then values: the order every release holds its k-tuples in."""
    if len(counts):
        order = np.lexsort(
            tuple(values[:, j] for j in reversed(range(values.shape[1])))
            + tuple(columns[:, j] for j in reversed(range(columns.shape[1])))
        )
        columns, values, counts = columns[order], values[order], counts[order]
    return Marginal(
        columns=columns.astype(np.int16), values=values.astype(np.int32), counts=counts.astype(np.int64)
    )


def _measurement_cells(measurements: tuple[Measurement, ...]) -> pd.DataFrame:
    """Every cell of the measured marginals, in the ``release/measurements`` layout."""
    frames = []
    for i, m in enumerate(measurements):
        cell = np.arange(m.values.size, dtype=np.int64)
        value = m.values.ravel(order="C")
        if m.mask is not None:  # a partial measurement: its measured cells only
            keep = m.mask.ravel(order="C")
            cell, value = cell[keep], value[keep]
        frames.append(
            pd.DataFrame({"marginal": np.full(cell.size, i, dtype=np.int32), "cell": cell, "value": value})
        )
    return pd.concat(frames, ignore_index=True)


def _read_measurements(listed: Any, cells: pd.DataFrame, release: Release) -> tuple[Measurement, ...]:
    """The measured marginals from the manifest's list and the ``measurements`` cells.

    Raises:
        ReleaseError: an entry names an unknown column or lacks ``std``, or a table has missing, duplicate or
            out-of-range cells.
    """
    index = {c: i for i, c in enumerate(release.columns)}
    sizes = release.measurement_sizes()
    by_marginal = {
        int(k): g
        for k, g in cells.groupby("marginal", sort=True)  # type: ignore[call-overload]
    }
    if set(by_marginal) - set(range(len(listed))):
        raise ReleaseError("the measurements directory has cells of a marginal its manifest does not list")
    out = []
    for i, entry in enumerate(listed):
        try:
            cols = [index[str(c)] for c in entry["columns"]]
            std = float(entry["std"])
            partial = bool(entry.get("partial", False))
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise ReleaseError(
                f"the manifest's measurement {i} is malformed or names an unknown column"
            ) from err
        order = np.argsort(cols, kind="stable")
        shape = tuple(sizes[c] for c in cols)
        size = int(np.prod(shape, dtype=np.int64))
        group = by_marginal.get(i)
        cell = np.empty(0, np.int64) if group is None else group["cell"].to_numpy(np.int64)
        if (
            (cell.size != size and not partial)
            or cell.size == 0
            or np.unique(cell).size != cell.size
            or (cell.min() < 0 or cell.max() >= size)
        ):
            raise ReleaseError(
                f"measured marginal {i} does not have exactly one value per "
                f"{'measured cell' if partial else 'cell of its table'}"
            )
        flat = np.zeros(size, dtype=np.float64)
        flat[cell] = group["value"].to_numpy(np.float64)  # type: ignore[index]
        table = flat.reshape(shape).transpose(order)
        mask = None
        if partial:
            measured = np.zeros(size, dtype=bool)
            measured[cell] = True
            mask = measured.reshape(shape).transpose(order)
        try:
            out.append(
                Measurement(tuple(release.columns[cols[j]] for j in order), values=table, std=std, mask=mask)
            )
        except InvalidParameterError as err:
            raise ReleaseError(f"the manifest's measurement {i} is malformed: {err}") from err
    return tuple(out)


_READ_FILE = re.compile(r"Encountered error while reading file (\S+?)\.?\s")
"""Where Spark names the file it failed to read (``FAILED_READ_FILE``)."""
_ARROW_TYPES = {"int": "int32", "long": "int64", "bigint": "int64", "double": "double"}
"""The Arrow type a Spark DDL type of a release table is written as (arrays: ``list`` of the element's)."""


def _damaged(file: str, reason: str) -> ReleaseError:
    return ReleaseError(
        f"the release file {file!r} is damaged or not this release's ({reason}); restore the release "
        "directory as it was written"
    )


def _arrow_kind(arrow_type: Any) -> str:
    import pyarrow as pa

    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return f"array<{_arrow_kind(arrow_type.value_type)}>"
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return "string"
    return str(arrow_type)


def _read_table(spark: SparkSession, directory: str, schema: str, what: str) -> pd.DataFrame:
    """The Parquet table ``directory`` of a release (``aggregates`` or ``measurements``) on the driver.

    Every data file is checked first on the driver (its Parquet footer, and the columns and types of
    ``schema``), so a truncated file or another table's is named before Spark reads any; a file Spark still
    cannot read (e.g. one whose checksum file is another release's) is named from Spark's error. Release-sized:
    the table is the DP release itself, bounded by the mechanism.

    Raises:
        ReleaseError: naming the damaged file (never Spark's message or Java trace).
    """
    import pyarrow.parquet as pq

    wanted = {}
    for field in schema.split(","):
        name, ddl = field.split()
        wanted[name] = f"array<{ddl[6:-1]}>" if ddl.startswith("array<") else _ARROW_TYPES.get(ddl, ddl)
    for entry in sorted(os.listdir(directory)):
        file = os.path.join(directory, entry)
        if entry.startswith((".", "_")) or not os.path.isfile(file):
            continue  # Spark's own files (_SUCCESS, .crc checksums), which it does not read as data
        try:
            found = pq.read_schema(file)
        except (OSError, ValueError):  # pyarrow's errors are both
            raise _damaged(file, "not a readable Parquet file") from None
        kinds = {n: _arrow_kind(found.field(n).type) for n in found.names}
        if any(kinds.get(n) != kind for n, kind in wanted.items()):
            raise _damaged(file, f"its columns are not those of release/{what}")
    try:
        with warnings.catch_warnings():  # PySpark's Arrow warning would repeat Spark's message and Java trace
            warnings.simplefilter("ignore", UserWarning)
            return spark.read.schema(schema).parquet(directory).toPandas()
    except Exception as err:
        if not type(err).__module__.startswith(("py4j", "pyspark")):
            raise
        found_file = _READ_FILE.search(str(err))
        if found_file is None:
            raise ReleaseError(
                f"the release's {what} in {directory!r} cannot be read by Spark (damaged, or another "
                "release's); restore the release directory as it was written"
            ) from None  # Spark's message and Java trace are not repeated
        file = unquote(re.sub(r"^file:(//)?", "", found_file.group(1)))
        raise _damaged(file, "Spark cannot read it") from None


def _local(path: str) -> str:
    return path[len("file:") :] if path.startswith("file:") else path
