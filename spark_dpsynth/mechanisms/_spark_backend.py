"""The Spark side of counting: the sensitive records as cached, encoded patterns, and the passes that count them.

Two counters over one cache of *patterns* (distinct records with their multiplicity, docs/design.md
section 2.2):

* :class:`SparkBackend`: the marginals mechanism's backend (also the workload mechanism's discovery): the
  patterns grouped on Spark (small public domains packed as bit fields, :class:`KeyLayout`), the dictionary of
  values, then per length k the histogram of candidate tuples per record and the contribution-bounded counts,
  with the NumPy kernels of :mod:`._counting`;
* :class:`SparkCliqueCounter`: the workload mechanism's true clique tables over a fixed domain, with the kernel
  of :mod:`._cliques` (docs/design.md section 4.7); made from the backend's patterns by
  :meth:`SparkBackend.clique_counter`.

Both run their kernels in ``mapInArrow`` tasks and gather the per-task sparse counts with :func:`sum_over_tasks`:
only release-sized data (dictionaries, histograms, one count per candidate or cell) reaches the driver. What they
return is true (private): the mechanisms add the noise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from spark_dpsynth.data.session import default_parallelism
from spark_dpsynth.mechanisms import _counting
from spark_dpsynth.mechanisms._cliques import (
    clique_cells,
    count_block,
    pack,
    packed_words,
    packing,
    passes,
    unpack,
)
from spark_dpsynth.mechanisms._counting import CandidateIndex

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "DIRECT_SUM_PAIRS",
    "KeyLayout",
    "SparkBackend",
    "SparkCliqueCounter",
    "collect_pairs",
    "encode_fixed_domain",
    "sum_over_tasks",
]

PACKED_DOMAIN_MAX = 255
"""A public domain of at most this many values is grouped as a bit field of a long key (``KeyLayout``)."""

DIRECT_SUM_PAIRS = 1 << 24
"""Partitions x per-task result size up to which task results are summed on the driver (at most 256 MB)."""


@dataclass(frozen=True)
class KeyLayout:
    """How the patterns' grouping key holds the columns with a small public domain (docs/design.md section 2.2).

    Column j of ``fields`` is code 0 (empty) or i + 1 (its public value i), in ``bits`` bits at ``shift`` of the
    int64 key word ``word``. :func:`~spark_dpsynth.data.prepare.prepare` leaves no other value in such a column
    (a value outside a public domain or a bin is empty). The other columns keep their strings.
    """

    fields: dict[int, tuple[int, int, int, tuple[str, ...]]]
    """column -> (word, shift, bits, public domain)."""
    words: int

    @classmethod
    def plan(cls, d: int, public: Mapping[int, tuple[str, ...]]) -> KeyLayout:
        """The layout of ``d`` columns: the columns of ``public`` (index -> public domain) with 1 to
        :data:`PACKED_DOMAIN_MAX` values, in column order, as many per word as fit (:func:`~._cliques.packing`)."""
        packed = [j for j in range(d) if 0 < len(public.get(j) or ()) <= PACKED_DOMAIN_MAX]
        # codes 0 (empty) .. len(domain): a domain of len(domain) + 1 codes
        sizes = [len(public[j]) + 1 for j in packed]
        fields = {j: (*at, tuple(public[j])) for j, at in zip(packed, packing(sizes), strict=True)}
        return cls(fields=fields, words=packed_words(sizes))

    def _domain(self, j: int):  # noqa: ANN202 - pyspark Column (array<string> literal)
        from pyspark.sql import functions as F

        return F.array(*[F.lit(v) for v in self.fields[j][3]])

    def code(self, j: int, value):  # noqa: ANN001, ANN201 - pyspark Column -> Column
        """The field's code of a prepared value (a string or null), as a long column: 0 for null.

        ``value`` appears twice, so that Spark keeps this projection apart from the binning one that computes
        it: merged, their generated method outgrows the JIT's limit and runs interpreted (docs/design.md
        section 2.2, "Preparation in three projections").
        """
        from pyspark.sql import functions as F

        return (
            F.when(value.isNull(), F.lit(0)).otherwise(F.array_position(self._domain(j), value)).cast("long")
        )

    def field(self, j: int):  # noqa: ANN201 - pyspark Column (int)
        """Column j's code read back from its key word."""
        from pyspark.sql import functions as F

        word, shift, bits, _ = self.fields[j]
        return F.shiftright(F.col(f"__k{word}"), shift).bitwiseAND(F.lit((1 << bits) - 1)).cast("int")

    def value(self, j: int):  # noqa: ANN201 - pyspark Column (string or null)
        """Column j's prepared value read back from its key word (null: empty)."""
        from pyspark.sql import functions as F

        code = self.field(j)
        return F.when(code > 0, F.element_at(self._domain(j), code))


class SparkBackend:
    """Encoded patterns in a cached Spark DataFrame; kernels run in ``mapInArrow``.

    Spark stages: the patterns (``groupBy`` of the records: partial aggregation, shuffle, cached; the columns of
    ``public`` with at most 255 values grouped as bit fields of long words, :class:`KeyLayout`); the dictionary
    (``collect_set`` over the cached patterns); then one Python stage per histogram pass, the first one also
    encoding the patterns to integer codes (cached; the key patterns are then dropped). A pass sums one
    partial result per task on the driver (or, when partitions x result size is large, in a ``groupBy``). Each
    histogram pass also accumulates the unbounded candidate counts from the same lookups: when no record has more
    candidate tuples than Delta_k (the usual case at percentile 99), they are the bounded counts and the counting
    pass is skipped (the result is the same either way).
    """

    def __init__(  # noqa: ANN001 - pyspark DataFrame
        self, prepared, columns: tuple[str, ...], public: Mapping[int, tuple[str, ...]] | None = None
    ) -> None:
        from pyspark.sql import functions as F

        self._columns = columns
        d = len(columns)
        names = [f"`{c}`" for c in columns]
        # Columns with a small public domain are grouped as bit fields of int64 words, the others as strings: a
        # hash aggregation on a few longs instead of d strings, and a cache of longs (docs/design.md section 2.2).
        self._layout = layout = KeyLayout.plan(d, public or {})
        strings = [names[j] for j in range(d) if j not in layout.fields]
        coded = prepared.select(
            *[layout.code(j, F.col(names[j])).alias(f"__c{j}") for j in layout.fields], *strings
        )
        words = [F.lit(0).cast("long")] * layout.words
        for j, (w, shift, _, _) in layout.fields.items():
            words[w] = words[w].bitwiseOR(F.shiftleft(F.col(f"__c{j}"), shift))
        keys = [f"__k{w}" for w in range(layout.words)] + strings
        selected = coded.select(*[w.alias(f"__k{i}") for i, w in enumerate(words)], *strings)
        # The content hash of each pattern is of its values (strings), whatever the grouping key.
        values = [layout.value(j) if j in layout.fields else F.col(names[j]) for j in range(d)]
        tagged = [F.coalesce(F.concat(F.lit(f"{j}="), v), F.lit(f"{j}!")) for j, v in enumerate(values)]
        # Distinct records with their multiplicity (partial aggregation before the shuffle) and a content hash,
        # in as many partitions as the session runs tasks at once: the mapInArrow kernels stream Arrow batches,
        # so partition size does not bound memory, while every extra partition costs a Python task.
        self._partitions = default_parallelism(prepared.sparkSession)
        self._patterns = (
            selected.groupBy(*[F.col(k) for k in keys])
            .agg(F.count(F.lit(1)).alias("__n"))
            .withColumn("__h", F.xxhash64(*tagged))
            .coalesce(self._partitions)
            .persist()
        )
        self._encoded = None
        self._encoded_ready = False
        # (index, histogram, unbounded counts) of the last histogram pass: release-sized, never logged
        self._unbounded: tuple[CandidateIndex, np.ndarray, np.ndarray] | None = None

    def dictionary(self) -> list[tuple[str, ...]]:
        """Per column, its sorted distinct values (private: the k = 1 candidates, never written); also encodes
        the patterns to integer codes for the passes that follow."""
        from pyspark.sql import functions as F

        d = len(self._columns)
        fields = self._layout.fields
        # One row of d arrays, bounded by the number of distinct attributes (column, value): the k=1 candidates
        # (a packed column's codes: at most its public domain's size + 1).
        row = self._patterns.agg(
            *[
                F.collect_set(self._layout.field(j) if j in fields else F.col(f"`{c}`")).alias(f"v{j}")
                for j, c in enumerate(self._columns)
            ]
        ).collect()[0]
        values = []
        for j in range(d):
            if j not in fields:
                values.append(tuple(sorted(row[f"v{j}"])))
                continue
            domain = fields[j][3]
            values.append(tuple(sorted(domain[c - 1] for c in row[f"v{j}"] if c > 0)))
        self._encode(values)
        return values

    def _encode(self, values: list[tuple[str, ...]]) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        d = len(self._columns)
        fields = self._layout.fields
        words = self._layout.words
        dictionaries = [pa.array(list(v), type=pa.string()) for v in values]
        names = list(self._columns)
        # A packed column's field code -> its dictionary code (-1: empty), per column.
        luts: dict[int, np.ndarray] = {}
        for j, (_, _, bits, domain) in fields.items():
            rank = {v: i for i, v in enumerate(values[j])}
            lut = np.full(1 << bits, -1, dtype=np.int32)
            lut[1 : len(domain) + 1] = [rank.get(v, -1) for v in domain]
            luts[j] = lut

        def encode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for b in batches:
                key = [
                    b.column(f"__k{w}").to_numpy(zero_copy_only=False).astype(np.int64) for w in range(words)
                ]
                arrays = []
                for j in range(d):
                    if j in fields:
                        w, shift, bits, _ = fields[j]
                        arrays.append(pa.array(luts[j][(key[w] >> shift) & ((1 << bits) - 1)]))
                    else:
                        idx = pc.index_in(b.column(names[j]).cast(pa.string()), value_set=dictionaries[j])
                        arrays.append(pc.fill_null(idx, -1).cast(pa.int32()))
                arrays.append(b.column("__n").cast(pa.int64()))
                arrays.append(b.column("__h").cast(pa.int64()))
                yield pa.RecordBatch.from_arrays(arrays, names=[f"c{j}" for j in range(d)] + ["n", "h"])

        schema = ", ".join(f"c{j} int" for j in range(d)) + ", n long, h long"
        self._encoded = self._patterns.mapInArrow(encode, schema).persist()

    def _sum_over_tasks(
        self,
        task: Callable[[Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]], tuple[np.ndarray, np.ndarray]],
        width: int,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Run ``task`` on the blocks (codes, multiplicity, record hash) of every partition of the encoded patterns
        and sum its sparse (int64 keys, int64 counts) over tasks (:func:`sum_over_tasks`, ``width`` bounding the
        distinct keys of one task). The first pass also drops the cached string patterns."""

        assert self._encoded is not None
        d = len(self._columns)

        def arrays(batches: Iterator[pa.RecordBatch]) -> tuple[np.ndarray, np.ndarray]:
            return task(_counting.rebatch(_counting.batch_arrays(b, d) for b in batches))

        keys, counts = sum_over_tasks(self._encoded, arrays, width, self._partitions)
        if not self._encoded_ready:
            # the encoded patterns are cached now: the string patterns are no longer needed
            self._encoded_ready = True
            self._patterns.unpersist()
        return keys, counts

    def histogram(self, index: CandidateIndex) -> np.ndarray:
        """int64 (len(index.subsets) + 1,): the number of records with w candidate tuples, w = 0.. (for the DP
        percentile of Delta_k, docs/design.md section 2.2); keeps the unbounded counts of the same pass."""
        size = len(index.subsets) + 1
        m = len(index.keys)

        def hist(
            blocks: Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]],
        ) -> tuple[np.ndarray, np.ndarray]:
            total = np.zeros(size, dtype=np.int64)
            counts = np.zeros(m, dtype=np.int64)
            for codes, mult, _ in blocks:
                total += _counting.tuple_count_histogram(index, codes, mult, counts)
            # histogram cell w as key -(w + 1), candidate i as key i
            nz, cz = np.flatnonzero(total), np.flatnonzero(counts)
            return np.concatenate([-nz - 1, cz]), np.concatenate([total[nz], counts[cz]])

        keys, values = self._sum_over_tasks(hist, size + m)
        cells = keys < 0
        out = np.zeros(size, dtype=np.int64)
        np.add.at(out, -keys[cells] - 1, values[cells])
        counts = np.zeros(m, dtype=np.int64)
        np.add.at(counts, keys[~cells], values[~cells])
        self._unbounded = (index, out, counts)
        return out

    def counts(
        self, index: CandidateIndex, sensitivity: int, key: int, value_hash: tuple[np.ndarray, ...]
    ) -> np.ndarray:
        """int64 (len(index.keys),): every candidate's count with each record bounded to ``sensitivity`` tuples
        (keyed by ``key``, :func:`~spark_dpsynth.mechanisms._counting.bounded_counts`); true counts."""
        cached, self._unbounded = self._unbounded, None
        if cached is not None and cached[0] is index and not cached[1][sensitivity + 1 :].any():
            # No record has more than Delta_k candidate tuples: bounding keeps every tuple.
            return cached[2]
        del cached
        m = len(index.keys)

        def count(
            blocks: Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]],
        ) -> tuple[np.ndarray, np.ndarray]:
            out = np.zeros(m, dtype=np.int64)
            for codes, mult, rh in blocks:
                _counting.bounded_counts(index, codes, mult, rh, value_hash, sensitivity, key, out)
            nz = np.flatnonzero(out)
            return nz, out[nz]

        keys, values = self._sum_over_tasks(count, m)
        out = np.zeros(m, dtype=np.int64)
        np.add.at(out, keys, values)
        return out

    @property
    def partitions(self) -> int:
        """Partitions of the cached patterns: tasks per pass, and per-task results summed by a pass."""
        return self._partitions

    def clique_counter(
        self, columns: Sequence[int], luts: Sequence[np.ndarray], sizes: Sequence[int]
    ) -> SparkCliqueCounter:
        """Hand the records over to clique counting over a fixed domain (the workload mechanism, docs/design.md
        section 4.7), then drop this backend's caches.

        Args:
            columns: the kept columns (indices into this backend's columns), ascending.
            luts: per kept column, dictionary code -> fixed-domain code (-1: the empty category), release-sized.
            sizes: per kept column, its fixed domain's size (released values + the empty category).

        Returns:
            A :class:`SparkCliqueCounter` over the recoded patterns, cached and materialized; the caller releases
            it (:meth:`SparkCliqueCounter.release_cache`).

        Call it after :meth:`dictionary` (which encodes the patterns).
        """
        assert self._encoded is not None  # the dictionary-encoded patterns, made by dictionary()
        dict_cols = self._encoded.select(*[f"c{j}" for j in columns], "n")
        encoded = encode_fixed_domain(dict_cols, luts, sizes).persist()
        encoded.count()  # materialize the cache before the dictionary-encoded patterns are dropped (not logged)
        counter = SparkCliqueCounter(encoded, tuple(sizes), self._partitions)
        self.release_cache()
        return counter

    def release_cache(self) -> None:
        """Drop the cached patterns (string and encoded)."""
        self._unbounded = None
        if self._encoded is not None:
            self._encoded.unpersist()
        self._patterns.unpersist()


class SparkCliqueCounter:
    """Encoded patterns in a cached Spark DataFrame (``w0 .. w{k-1} long, n long``: the codes packed as
    :func:`~._cliques.pack` lays them out); passes in ``mapInArrow``.

    Args:
        encoded: the cached DataFrame of patterns over the fixed domain (persisted by the caller; :meth:`release_cache` drops it).
        sizes: domain size of every column.
        partitions: its number of partitions (the number of per-task results of a pass).
    """

    def __init__(self, encoded, sizes: tuple[int, ...], partitions: int) -> None:  # noqa: ANN001 - DataFrame
        self._encoded = encoded
        self.sizes = tuple(int(s) for s in sizes)
        self._partitions = max(1, int(partitions))
        self.passes = 0
        """Spark passes run so far (for the manifest's work record)."""

    @property
    def encoded(self):  # noqa: ANN201 - pyspark DataFrame
        """The cached patterns over the fixed domain (``w0 .. w{k-1} long, n long``, packed codes:
        :func:`~._cliques.unpack`): private rows."""
        return self._encoded

    def release_cache(self) -> None:
        """Drop the cached patterns."""
        self._encoded.unpersist()

    def tables(self, cliques: Sequence[tuple[int, ...]], max_cells: int) -> list[np.ndarray]:
        out: list[np.ndarray] = [np.zeros(0)] * len(cliques)
        for batch in passes(cliques, self.sizes, max_cells):
            flat = self._pass([cliques[i] for i in batch])
            for i, t in zip(batch, flat, strict=True):
                out[i] = t.reshape([self.sizes[c] for c in cliques[i]])
        return out

    def _pass(self, cliques: list[tuple[int, ...]]) -> list[np.ndarray]:

        sizes = self.sizes
        words = packed_words(sizes)
        cells = [clique_cells(sizes, c) for c in cliques]
        offsets = np.concatenate(([0], np.cumsum(cells)))
        total = int(offsets[-1])
        batch_cliques = list(cliques)  # release-sized: the pass's column subsets only

        def task(batches: Iterator[pa.RecordBatch]) -> tuple[np.ndarray, np.ndarray]:
            tables = [np.zeros(n, dtype=np.int64) for n in cells]

            def arrays() -> Iterator[tuple[np.ndarray, np.ndarray]]:
                for b in batches:
                    packed = [b.column(w).to_numpy(zero_copy_only=False) for w in range(words)]
                    yield (
                        unpack(packed, sizes),
                        b.column(words).to_numpy(zero_copy_only=False).astype(np.int64),
                    )

            # blocks of at least 65,536 rows: the per-clique work of a block is a few vector operations
            for codes, mult in _counting.rebatch(arrays()):
                count_block(codes, mult, batch_cliques, sizes, tables)
            keys = [np.zeros(0, dtype=np.int64)]
            vals = [np.zeros(0, dtype=np.int64)]
            for off, t in zip(offsets[:-1].tolist(), tables, strict=True):
                nz = np.flatnonzero(t)
                keys.append(nz + off)
                vals.append(t[nz])
            return np.concatenate(keys), np.concatenate(vals)

        keys, counts = sum_over_tasks(self._encoded, task, total, self._partitions)
        self.passes += 1
        flat = np.zeros(total, dtype=np.int64)
        np.add.at(flat, keys, counts)
        return [flat[offsets[i] : offsets[i + 1]] for i in range(len(cliques))]


def encode_fixed_domain(encoded, luts: Sequence[np.ndarray], sizes: Sequence[int]):  # noqa: ANN001, ANN201 - DataFrame
    """Recode the marginals backend's patterns (``c_j`` dictionary codes, -1 empty; ``n``; ``h``) to codes over
    the fixed domain with per-column lookup tables (dictionary code -> fixed code; unreleased values and empty
    cells -> the empty category ``sizes[j] - 1``), packed into words (:func:`~._cliques.packing`). Returns
    ``w0 .. w{k-1} long, n long`` (not yet cached).

    The lookup tables hold one int per value of the dictionary (release-sized, like the dictionary that the
    encoding step already ships to the tasks)."""
    import pyarrow as pa

    d = len(sizes)
    sizes = tuple(int(s) for s in sizes)
    tables = [
        np.append(np.where(np.asarray(lut) < 0, s - 1, lut).astype(np.int32), np.int32(s - 1))
        for lut, s in zip(luts, sizes, strict=True)
    ]
    words = packed_words(sizes)

    def recode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            codes = np.empty((b.num_rows, d), dtype=np.int32)
            for j in range(d):
                # -1 (empty) indexes the last entry: the empty category
                codes[:, j] = tables[j][b.column(j).to_numpy(zero_copy_only=False).astype(np.int64)]
            packed = pack(codes, sizes)
            arrays = [pa.array(packed[:, w], pa.int64()) for w in range(words)]
            arrays.append(b.column(d).cast(pa.int64()))
            yield pa.RecordBatch.from_arrays(arrays, names=[f"w{w}" for w in range(words)] + ["n"])

    schema = "".join(f"w{w} long, " for w in range(words)) + "n long"
    return encoded.mapInArrow(recode, schema)


def sum_over_tasks(
    df,  # noqa: ANN001 - pyspark DataFrame
    task: Callable[[Iterator[pa.RecordBatch]], tuple[np.ndarray, np.ndarray]],
    width: int,
    partitions: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Run ``task`` on every partition of ``df`` and gather its sparse (int64 keys, int64 counts) on the driver.

    ``task`` maps one partition's Arrow batches to at most ``width`` distinct keys with their counts. With
    ``partitions`` x ``width`` up to :data:`DIRECT_SUM_PAIRS`, each task's arrays come to the driver packed in one
    binary row (one Spark stage); otherwise a ``groupBy`` sums them first (:func:`collect_pairs`). Either way the
    driver receives release-sized data: at most ``partitions`` x ``width`` pairs, or ``width`` pairs.

    Returns:
        (keys, counts), two int64 arrays of the same length; a key may repeat (sum them with ``np.add.at``).
    """
    import pyarrow as pa
    from pyspark.sql import functions as F

    if partitions * width <= DIRECT_SUM_PAIRS:

        def packed(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            keys, counts = task(batches)
            yield pa.RecordBatch.from_arrays(
                [pa.array([keys.tobytes()], pa.binary()), pa.array([counts.tobytes()], pa.binary())],
                ["i", "n"],
            )

        # One row per task, each at most `width` pairs (release-sized).
        rows = df.mapInArrow(packed, "i binary, n binary").collect()
        keys = np.concatenate([np.zeros(0, dtype=np.int64)] + [np.frombuffer(r["i"], np.int64) for r in rows])
        counts = np.concatenate(
            [np.zeros(0, dtype=np.int64)] + [np.frombuffer(r["n"], np.int64) for r in rows]
        )
        return keys, counts

    def pairs(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        keys, counts = task(batches)
        yield pa.RecordBatch.from_arrays(
            [pa.array(keys, pa.int64()), pa.array(counts, pa.int64())], ["i", "n"]
        )

    agg = df.mapInArrow(pairs, "i long, n long").groupBy("i").agg(F.sum("n").alias("n"))
    return collect_pairs(agg)  # at most `width` rows


def collect_pairs(agg) -> tuple[np.ndarray, np.ndarray]:  # noqa: ANN001 - pyspark DataFrame of (i long, n long)
    """The (i, n) rows of a small aggregate as two int64 arrays, packed into one binary row per Arrow batch."""
    import pyarrow as pa

    def pack(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            i = b.column(0).to_numpy(zero_copy_only=False).astype(np.int64)
            n = b.column(1).to_numpy(zero_copy_only=False).astype(np.int64)
            yield pa.RecordBatch.from_arrays([pa.array([i.tobytes()]), pa.array([n.tobytes()])], ["i", "n"])

    # The caller bounds the rows (release-sized); a few binary rows reach the driver.
    rows = agg.mapInArrow(pack, "i binary, n binary").collect()
    keys = np.concatenate(
        [np.zeros(0, dtype=np.int64)] + [np.frombuffer(r["i"], dtype=np.int64) for r in rows]
    )
    values = np.concatenate(
        [np.zeros(0, dtype=np.int64)] + [np.frombuffer(r["n"], dtype=np.int64) for r in rows]
    )
    return keys, values
