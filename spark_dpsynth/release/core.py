"""The DP release: noisy, thresholded, normalized k-way marginals plus a manifest of the privacy parameters.

On disk a release is a directory::

    release/
      aggregates/      Parquet, one row per released k-tuple, schema
                       k: int, columns: array<string> (k column names, in the table's column order),
                       values: array<string> (the k values), count: bigint (noisy, normalized, > 0)
      manifest.json    privacy parameters (epsilon, delta, rho, sigmas, sensitivities, thresholds,
                       protected_number_of_records, columns, ...), see ``spark_dpsynth.mechanisms.marginals``

In memory, a :class:`Release` holds the same data encoded for computation: per length k, a :class:`Marginal`
with (m_k, k) arrays of column indices and value codes and an (m_k,) array of counts. Value codes index
``Release.domains[column]``: the values of that column whose 1-tuple was released (passed the threshold rho_1).

Privacy: everything in a release is differentially private (docs/design.md section 1.5). It never holds the true number
of records, a true count, a value that did not pass rho_1, record-level data, or the release key.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from spark_dpsynth.errors import ReleaseError
from spark_dpsynth.release.manifest import Manifest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["Marginal", "Release", "AGGREGATES_SCHEMA"]

AGGREGATES_SCHEMA = "k int, columns array<string>, values array<string>, count bigint"
"""Spark DDL schema of ``release/aggregates``."""


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

    def __post_init__(self) -> None:
        object.__setattr__(self, "manifest", Manifest.from_json(self.manifest))

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
            marginals[k] = _sorted_marginal(col_arr, val_arr, part["count"].to_numpy(dtype=np.int64))
        return cls(
            columns=columns, domains=domains, marginals=marginals, manifest=Manifest.from_json(manifest)
        )

    def save(self, path: str, spark: SparkSession, *, overwrite: bool = False) -> None:
        """Write ``path/aggregates`` (Parquet) and ``path/manifest.json``.

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

        with atomic_path(path, overwrite=overwrite) as tmp:
            os.makedirs(tmp)
            pdf = self.to_pandas()
            df = (
                spark.createDataFrame(pdf, schema=AGGREGATES_SCHEMA)
                if len(pdf)
                else spark.createDataFrame([], schema=AGGREGATES_SCHEMA)
            )
            df.coalesce(1).write.mode("error").parquet(os.path.join(tmp, "aggregates"))
            with open(os.path.join(tmp, "manifest.json"), "w", encoding="utf-8") as f:
                json.dump(self.manifest.to_json(), f, indent=2, sort_keys=True)
                f.write("\n")

    @classmethod
    def load(cls, path: str, spark: SparkSession) -> Release:
        """Read a release directory written by :meth:`save` (an SDS aggregates file too:
        :func:`spark_dpsynth.release.load_release` reads either).

        Raises:
            ReleaseError: the directory, its manifest or its aggregates are missing or unreadable, or ``path``
                is a file.
        """
        path = _local(path)
        if os.path.isfile(path):
            raise ReleaseError(
                f"{path!r} is a file, not a release directory; read SDS aggregates files with "
                "spark_dpsynth.release.load_release"
            )
        manifest_path = os.path.join(path, "manifest.json")
        if not os.path.isfile(manifest_path):
            raise ReleaseError(f"no release at {path!r} (manifest.json is missing)")
        try:
            with open(manifest_path, encoding="utf-8") as f:
                manifest = json.load(f)
        except (OSError, json.JSONDecodeError) as err:
            raise ReleaseError(f"cannot read {manifest_path!r}: {err}") from err
        agg_path = os.path.join(path, "aggregates")
        if not os.path.isdir(agg_path):
            raise ReleaseError(f"release at {path!r} has no aggregates directory")
        # Release-sized: the aggregates are the DP release itself, bounded by the candidate sets.
        pdf: pd.DataFrame = spark.read.schema(AGGREGATES_SCHEMA).parquet(agg_path).toPandas()  # type: ignore[assignment]
        pdf["columns"] = pdf["columns"].map(list)
        pdf["values"] = pdf["values"].map(list)
        return cls.from_pandas(pdf, manifest)


def _sorted_marginal(columns: np.ndarray, values: np.ndarray, counts: np.ndarray) -> Marginal:
    if len(counts):
        order = np.lexsort(
            tuple(values[:, j] for j in reversed(range(values.shape[1])))
            + tuple(columns[:, j] for j in reversed(range(columns.shape[1])))
        )
        columns, values, counts = columns[order], values[order], counts[order]
    return Marginal(
        columns=columns.astype(np.int16), values=values.astype(np.int32), counts=counts.astype(np.int64)
    )


def _local(path: str) -> str:
    return path[len("file:") :] if path.startswith("file:") else path
