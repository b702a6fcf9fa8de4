"""Counting clique tables on Spark: the true marginals of chosen column subsets over a fixed domain.

The records are encoded once to integer codes over the release's fixed domain (column j: codes
``0 .. size_j - 1``, the last one the empty category; docs/design.md section 4.7) and cached, as distinct
patterns with their multiplicity. A pass counts a batch of cliques whose tables hold at most a configured
number of cells: every task builds, per clique, a dense ``bincount`` of its mixed-radix cell keys (C order),
accumulated over its Arrow batches, then emits only its non-zero cells as ``(key, count)`` pairs, with
``key = offset[clique] + cell``; the pairs are summed over tasks (on the driver when partitions x cells is
small, else by a ``groupBy``). What reaches the driver is release-sized: at most the pass's cells per task.

Every record adds exactly 1 to exactly one cell of every clique's table (empty values are a category of their
own), so one clique's table has L2 (and L1) sensitivity 1 under adding or removing one record (one person
with a privacy unit, whose rows are merged into one record before counting).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

__all__ = [
    "CliqueCounter",
    "LocalCliqueCounter",
    "SparkCliqueCounter",
    "clique_cells",
    "count_block",
    "encode_fixed_domain",
    "passes",
]

_DIRECT_SUM_PAIRS = 1 << 24
"""Partitions x cells of a pass up to which task results are summed on the driver (at most 256 MB)."""


def clique_cells(sizes: Sequence[int], clique: Sequence[int]) -> int:
    """Number of cells of a clique's table: the product of its columns' domain sizes."""
    out = 1
    for c in clique:
        out *= int(sizes[c])
    return out


def passes(cliques: Sequence[tuple[int, ...]], sizes: Sequence[int], max_cells: int) -> list[list[int]]:
    """Split cliques (by position) into consecutive batches of at most ``max_cells`` cells each (a clique larger
    than ``max_cells`` is a batch of its own; the caller prunes those first)."""
    out: list[list[int]] = []
    cur: list[int] = []
    total = 0
    for i, c in enumerate(cliques):
        n = clique_cells(sizes, c)
        if cur and total + n > max_cells:
            out.append(cur)
            cur, total = [], 0
        cur.append(i)
        total += n
    if cur:
        out.append(cur)
    return out


def count_block(
    codes: np.ndarray,
    multiplicity: np.ndarray,
    cliques: Sequence[tuple[int, ...]],
    sizes: Sequence[int],
    out: list[np.ndarray],
) -> None:
    """Add one block of records to the dense tables ``out`` (one int64 flat C-order table per clique).

    Args:
        codes: int (P, d) codes over the fixed domain (0..size_j - 1, the last one the empty category).
        multiplicity: int64 (P,) number of records of each pattern.
        cliques: column subsets (ascending).
        sizes: domain size of every column.
        out: per clique, an int64 array of ``clique_cells`` cells (accumulated in place).
    """
    weights = multiplicity.astype(np.float64)
    exact = float(multiplicity.sum()) < 2**53
    for clique, table in zip(cliques, out, strict=True):
        key = np.zeros(codes.shape[0], dtype=np.int64)
        for c in clique:
            key = key * int(sizes[c]) + codes[:, c]
        if exact:
            table += np.rint(np.bincount(key, weights=weights, minlength=table.shape[0])).astype(np.int64)
        else:
            np.add.at(table, key, multiplicity)


class CliqueCounter(Protocol):
    """Where the encoded records live; returns true clique tables (private: never written or logged)."""

    sizes: tuple[int, ...]

    def tables(self, cliques: Sequence[tuple[int, ...]], max_cells: int) -> list[np.ndarray]:
        """The true table of every clique, shape ``tuple(sizes[c] for c in clique)``, int64, in passes of at
        most ``max_cells`` cells."""
        ...


@dataclass
class LocalCliqueCounter:
    """Records as NumPy arrays (tests and small data): the same kernel as the Spark counter."""

    codes: np.ndarray
    """int (n, d) codes over the fixed domain."""
    sizes: tuple[int, ...]
    """Domain size of every column."""
    multiplicity: np.ndarray | None = None
    """int64 (n,) or None (every row one record)."""

    def tables(self, cliques: Sequence[tuple[int, ...]], max_cells: int) -> list[np.ndarray]:
        mult = self.multiplicity if self.multiplicity is not None else np.ones(len(self.codes), np.int64)
        out = [np.zeros(clique_cells(self.sizes, c), dtype=np.int64) for c in cliques]
        count_block(self.codes, mult, cliques, self.sizes, out)
        return [t.reshape([self.sizes[c] for c in q]) for q, t in zip(cliques, out, strict=True)]


class SparkCliqueCounter:
    """Encoded patterns in a cached Spark DataFrame (``c0 .. c{d-1} int, n long``); passes in ``mapInArrow``.

    Args:
        encoded: the cached DataFrame of patterns over the fixed domain (the caller persists and unpersists it).
        sizes: domain size of every column.
        partitions: its number of partitions (the number of per-task results of a pass).
    """

    def __init__(self, encoded, sizes: tuple[int, ...], partitions: int) -> None:  # noqa: ANN001 - DataFrame
        self._encoded = encoded
        self.sizes = tuple(int(s) for s in sizes)
        self._partitions = max(1, int(partitions))
        self.passes = 0
        """Spark passes run so far (for the manifest's work record)."""

    def tables(self, cliques: Sequence[tuple[int, ...]], max_cells: int) -> list[np.ndarray]:
        out: list[np.ndarray] = [np.zeros(0)] * len(cliques)
        for batch in passes(cliques, self.sizes, max_cells):
            flat = self._pass([cliques[i] for i in batch])
            for i, t in zip(batch, flat, strict=True):
                out[i] = t.reshape([self.sizes[c] for c in cliques[i]])
        return out

    def _pass(self, cliques: list[tuple[int, ...]]) -> list[np.ndarray]:
        import pyarrow as pa
        from pyspark.sql import functions as F

        sizes = self.sizes
        d = len(sizes)
        cells = [clique_cells(sizes, c) for c in cliques]
        offsets = np.concatenate(([0], np.cumsum(cells)))
        total = int(offsets[-1])
        batch_cliques = list(cliques)  # release-sized: the pass's column subsets only

        def task(batches: Iterator[pa.RecordBatch]) -> tuple[np.ndarray, np.ndarray]:
            tables = [np.zeros(n, dtype=np.int64) for n in cells]
            for b in batches:
                codes = np.empty((b.num_rows, d), dtype=np.int32)
                for j in range(d):
                    codes[:, j] = b.column(j).to_numpy(zero_copy_only=False)
                mult = b.column(d).to_numpy(zero_copy_only=False).astype(np.int64)
                count_block(codes, mult, batch_cliques, sizes, tables)
            keys = [np.zeros(0, dtype=np.int64)]
            vals = [np.zeros(0, dtype=np.int64)]
            for off, t in zip(offsets[:-1].tolist(), tables, strict=True):
                nz = np.flatnonzero(t)
                keys.append(nz + off)
                vals.append(t[nz])
            return np.concatenate(keys), np.concatenate(vals)

        if self._partitions * total <= _DIRECT_SUM_PAIRS:

            def packed(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
                k, n = task(batches)
                yield pa.RecordBatch.from_arrays(
                    [pa.array([k.tobytes()], pa.binary()), pa.array([n.tobytes()], pa.binary())], ["i", "n"]
                )

            # One row per task, each at most `total` pairs (release-sized: the pass's cells).
            rows = self._encoded.mapInArrow(packed, "i binary, n binary").collect()
        else:

            def pairs(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
                k, n = task(batches)
                yield pa.RecordBatch.from_arrays(
                    [pa.array(k, pa.int64()), pa.array(n, pa.int64())], ["i", "n"]
                )

            def pack(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
                for b in batches:
                    i = b.column(0).to_numpy(zero_copy_only=False).astype(np.int64)
                    n = b.column(1).to_numpy(zero_copy_only=False).astype(np.int64)
                    yield pa.RecordBatch.from_arrays(
                        [pa.array([i.tobytes()]), pa.array([n.tobytes()])], ["i", "n"]
                    )

            summed = self._encoded.mapInArrow(pairs, "i long, n long").groupBy("i").agg(F.sum("n").alias("n"))
            # At most `total` (key, count) rows, packed into a few binary rows.
            rows = summed.mapInArrow(pack, "i binary, n binary").collect()
        self.passes += 1
        flat = np.zeros(total, dtype=np.int64)
        for r in rows:
            np.add.at(flat, np.frombuffer(r["i"], np.int64), np.frombuffer(r["n"], np.int64))
        return [flat[offsets[i] : offsets[i + 1]] for i in range(len(cliques))]


def encode_fixed_domain(encoded, luts: Sequence[np.ndarray], sizes: Sequence[int]):  # noqa: ANN001, ANN201 - DataFrame
    """Recode the marginals backend's patterns (``c_j`` dictionary codes, -1 empty; ``n``; ``h``) to codes over
    the fixed domain with per-column lookup tables (dictionary code -> fixed code; unreleased values and empty
    cells -> the empty category ``sizes[j] - 1``). Returns ``c0 .. c{d-1} int, n long`` (not yet cached).

    The lookup tables hold one int per value of the dictionary (release-sized, like the dictionary that the
    encoding step already ships to the tasks)."""
    import pyarrow as pa

    d = len(sizes)
    tables = [
        np.append(np.where(np.asarray(lut) < 0, s - 1, lut).astype(np.int32), np.int32(s - 1))
        for lut, s in zip(luts, sizes, strict=True)
    ]

    def recode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            arrays = []
            for j in range(d):
                c = b.column(j).to_numpy(zero_copy_only=False).astype(np.int64)
                # -1 (empty) indexes the last entry: the empty category
                arrays.append(pa.array(tables[j][c], pa.int32()))
            arrays.append(b.column(d).cast(pa.int64()))
            yield pa.RecordBatch.from_arrays(arrays, names=[f"c{j}" for j in range(d)] + ["n"])

    schema = ", ".join(f"c{j} int" for j in range(d)) + ", n long"
    return encoded.mapInArrow(recode, schema)
