"""Counting clique tables: the true marginals of chosen column subsets over a fixed domain (the workload
mechanism, docs/design.md section 4.7), the NumPy kernel and plan of passes; the Spark counter that runs them is
:class:`spark_dpsynth.mechanisms._spark_backend.SparkCliqueCounter`.

The records are encoded once to integer codes over the release's fixed domain (column j: codes
``0 .. size_j - 1``, the last one the empty category; docs/design.md section 4.7) and cached, as distinct
patterns with their multiplicity, the codes of consecutive columns packed into int64 words (:func:`packing`).
A pass counts a batch of cliques whose tables hold at most a configured number of cells: every task builds,
per clique, a dense ``bincount`` of its mixed-radix cell keys (C order), accumulated over its Arrow batches,
then emits only its non-zero cells as ``(key, count)`` pairs, with ``key = offset[clique] + cell``; the pairs
are summed over tasks (on the driver when partitions x cells is small, else by a ``groupBy``). What reaches the
driver is release-sized: at most the pass's cells per task.

Every record adds exactly 1 to exactly one cell of every clique's table (empty values are a category of their
own), so one clique's table has L2 (and L1) sensitivity 1 under adding or removing one record (one person
with a privacy unit, whose rows are merged into one record before counting).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

__all__ = [
    "CliqueCounter",
    "LocalCliqueCounter",
    "clique_cells",
    "count_block",
    "pack",
    "packed_words",
    "packing",
    "passes",
    "unpack",
]

WORD_BITS = 62
"""Bits of a packed int64 word used for codes (the word stays non-negative)."""


def packing(sizes: Sequence[int]) -> tuple[tuple[int, int, int], ...]:
    """Where each column's code lives in the packed words of :func:`pack`: per column ``(word, shift, bits)``,
    ``bits`` the width of codes ``0 .. size - 1`` (at least 1); consecutive columns share a word while their
    widths add up to at most :data:`WORD_BITS`.

    Why: a counting pass reads every record's codes out of Spark's cache into NumPy, and that costs per value
    read, not per bit; 76 columns of 5-bit codes are 7 words, read several times faster than 76 int columns
    (docs/design.md section 4.7, "Counting on Spark")."""
    out = []
    word, used = 0, 0
    for s in sizes:
        bits = max(1, (int(s) - 1).bit_length())
        if used + bits > WORD_BITS:
            word, used = word + 1, 0
        out.append((word, used, bits))
        used += bits
    return tuple(out)


def packed_words(sizes: Sequence[int]) -> int:
    """Number of words of :func:`packing`'s layout."""
    layout = packing(sizes)
    return layout[-1][0] + 1 if layout else 0


def pack(codes: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
    """int64 (P, words) packed codes of int (P, d) ``codes`` over domains of ``sizes`` (layout: :func:`packing`)."""
    layout = packing(sizes)
    words = np.zeros((codes.shape[0], packed_words(sizes)), dtype=np.int64)
    for j, (w, shift, _) in enumerate(layout):
        words[:, w] |= codes[:, j].astype(np.int64) << shift
    return words


def unpack(words: Sequence[np.ndarray], sizes: Sequence[int]) -> np.ndarray:
    """int32 (P, d) codes of the packed ``words`` (one int64 (P,) array per word; :func:`pack`'s inverse)."""
    layout = packing(sizes)
    p = len(words[0]) if len(words) else 0
    codes = np.empty((p, len(layout)), dtype=np.int32)
    for j, (w, shift, bits) in enumerate(layout):
        codes[:, j] = (words[w] >> shift) & ((1 << bits) - 1)
    return codes


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

    The cliques are visited in lexicographic order so that those sharing their first columns (the extensions
    of one clique by every other column, as AIM's rounds ask) reuse the mixed-radix key of that prefix: a
    k-way table then costs one multiply-add and one ``bincount`` per record. Each column is read once per block
    as a contiguous int64 array; a block of records of multiplicity 1 (most records of a wide table) is
    counted without weights.

    Args:
        codes: int (P, d) codes over the fixed domain (0..size_j - 1, the last one the empty category).
        multiplicity: int64 (P,) number of records of each pattern.
        cliques: column subsets (ascending).
        sizes: domain size of every column.
        out: per clique, an int64 array of ``clique_cells`` cells (accumulated in place).
    """
    p = codes.shape[0]
    unit = bool((multiplicity == 1).all())
    weights = None if unit else multiplicity.astype(np.float64)
    exact = float(multiplicity.sum()) < 2**53
    columns: dict[int, np.ndarray] = {}

    def column(c: int) -> np.ndarray:
        if c not in columns:
            columns[c] = np.ascontiguousarray(codes[:, c], dtype=np.int64)
        return columns[c]

    prefix_of: tuple[int, ...] | None = None
    prefix = np.zeros(p, dtype=np.int64)
    key = np.empty(p, dtype=np.int64)
    for i in sorted(range(len(cliques)), key=lambda i: tuple(cliques[i])):
        clique, table = tuple(cliques[i]), out[i]
        if not clique:
            table[0] += int(multiplicity.sum())
            continue
        if clique[:-1] != prefix_of:
            prefix_of = clique[:-1]
            prefix = column(clique[0]).copy() if len(clique) > 1 else np.zeros(p, dtype=np.int64)
            for c in clique[1:-1]:
                prefix *= int(sizes[c])
                prefix += column(c)
        np.multiply(prefix, int(sizes[clique[-1]]), out=key)
        key += column(clique[-1])
        if unit:
            table += np.bincount(key, minlength=table.shape[0])
        elif exact:
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
