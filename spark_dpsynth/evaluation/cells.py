"""Cell counting on Spark: column-subset plans, the vectorized per-batch cell counter (``mapInArrow``), the
release's cells, and the one-shuffle aggregation of the sensitive, synthetic and release counts
(docs/design.md section 5). Only subset-sized rows reach the driver.

Spark's Python workers unpickle :class:`_BatchCellCounter` and so import this module: it imports numpy, pyarrow
and pyspark only (no scikit-learn, scipy or matplotlib).
"""

from __future__ import annotations

import decimal
import itertools
import math
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_dpsynth.evaluation._common import quote

if TYPE_CHECKING:
    from spark_dpsynth.release.core import Release

BUCKET_FIRST = 10
"""Upper bound of SDS's first count bucket (0, 10]; each next bucket doubles it (SDS's ``INITIAL_BIN``)."""
_ONE_WAY_VALUES = 12
"""Values per column kept for the 1-way distributions of ``one_way_worst``."""
_FLUSH_ROWS = 1 << 20
"""Rows of partial counts a ``mapInArrow`` task accumulates before it yields an Arrow batch."""
_COUNT_ROWS = 1 << 19
"""Input rows a ``mapInArrow`` task gathers (from Spark's Arrow batches of 10,000 rows) before it counts them:
the partial counts it emits, and so the rows shuffled, are per 524,288 input rows, not per batch."""
_DENSE_FACTOR = 4
"""A subset's cells are counted with ``bincount`` (O(rows)) when its largest cell code is below this many times
the rows (or 2^16), else with ``np.unique`` (a sort)."""

# ---------------------------------------------------------------------------------------------------------------
# Column subsets and the vectorized cell counter
# ---------------------------------------------------------------------------------------------------------------


class SubsetPlan:
    """The column subsets a pass counts, their ids, and which of their cells it keeps.

    Subsets are ordered by length, then lexicographically by column index; a subset's id is its position.
    Subsets of length <= ``all_cells_length`` keep every cell (the empty value is a category); longer ones, up
    to ``max_length``, keep only cells without an empty value (the non-empty k-tuples of docs/design.md section 2.2).

    With ``max_subsets`` > 0, a length L >= 2 with more than ``max_subsets`` subsets (C(d, L) > max_subsets)
    keeps ``max_subsets`` of them, drawn uniformly without replacement by :func:`sample_subsets` from the
    column count, L and ``seed`` only (never from the data: the choice is public and the same on every run);
    every 1-column subset is always kept (the row counts and blank shares come from them).
    """

    def __init__(
        self,
        n_columns: int,
        *,
        all_cells_length: int,
        max_length: int,
        max_subsets: int = 0,
        seed: int = 0,
    ) -> None:
        self.n_columns = n_columns
        self.all_cells_length = all_cells_length
        self.max_length = max_length
        self.max_subsets = max_subsets
        self.seed = seed
        self.totals = {k: math.comb(n_columns, k) for k in range(1, max_length + 1)}
        """Length L -> C(d, L), the number of L-column subsets of the table."""
        self.sampled = {k: k >= 2 and 0 < max_subsets < total for k, total in self.totals.items()}
        """Length L -> whether the plan keeps a sample of the L-column subsets rather than all of them."""
        self.subsets: list[tuple[int, ...]] = []
        for k in range(1, max_length + 1):
            if self.sampled[k]:
                self.subsets += sample_subsets(n_columns, k, max_subsets, seed)
            else:
                self.subsets += itertools.combinations(range(n_columns), k)
        self.ids = {s: i for i, s in enumerate(self.subsets)}
        self.value_names = [f"v{j}" for j in range(max_length)]
        self.key_names = ["k", "subset", *self.value_names]

    def of_length(self, k: int) -> list[tuple[int, ...]]:
        """The plan's k-column subsets, in id order (lexicographic)."""
        return [s for s in self.subsets if len(s) == k]

    def children(self) -> dict[tuple[int, ...], list[int]]:
        """Prefix -> the columns c that extend it towards a subset of the plan: (*prefix, c) is a subset of the
        plan or a proper prefix of one. The counter visits only those (every prefix of every subset)."""
        out: dict[tuple[int, ...], set[int]] = {}
        for s in self.subsets:
            for j in range(1, len(s)):
                out.setdefault(s[:j], set()).add(s[j])
        return {prefix: sorted(cs) for prefix, cs in out.items()}

    def ddl(self) -> str:
        values = ", ".join(f"{name} string" for name in self.value_names)
        return f"k int, subset int, {values}, n bigint"


_ENUMERATE_LIMIT = 4
""":func:`sample_subsets` enumerates the C(d, k) subsets when there are at most this many times the sample."""


def sample_subsets(n_columns: int, k: int, size: int, seed: int) -> list[tuple[int, ...]]:
    """``size`` distinct k-column subsets of ``n_columns`` columns, uniform without replacement, sorted.

    A public choice: a function of (n_columns, k, size, seed) only, with numpy's PCG64 generator seeded by
    (seed, n_columns, k). When C(d, k) <= :data:`_ENUMERATE_LIMIT` * size the subsets are enumerated and
    ``Generator.choice`` draws their indices; otherwise random k-subsets (``Generator.choice`` of k distinct
    columns) are drawn until ``size`` distinct ones are found (each draw is new with probability >= 3/4).

    Args:
        n_columns: d >= 1.
        k: the length, 1 <= k <= d.
        size: the number of subsets, 1 <= size; all of them when size >= C(d, k).
        seed: any integer (negative allowed).

    Returns:
        The subsets as sorted tuples of column indices, in lexicographic order.
    """
    total = math.comb(n_columns, k)
    if size >= total:
        return list(itertools.combinations(range(n_columns), k))
    rng = np.random.Generator(np.random.PCG64([seed & 0xFFFFFFFFFFFFFFFF, n_columns, k]))
    if total <= _ENUMERATE_LIMIT * size:
        every = list(itertools.combinations(range(n_columns), k))
        return sorted(every[i] for i in rng.choice(total, size=size, replace=False).tolist())
    chosen: set[tuple[int, ...]] = set()
    while len(chosen) < size:
        chosen.add(tuple(sorted(rng.choice(n_columns, size=k, replace=False).tolist())))
    return sorted(chosen)


def cell_counts(df: DataFrame, plan: SubsetPlan) -> DataFrame:
    """Partial counts of the cells of every subset in ``plan``, one Arrow batch of ``df`` at a time.

    Returns a DataFrame ``k int, subset int, v0..v{max_length-1} string, n bigint``: ``v_j`` is the value of
    the subset's j-th column (null for empty, and null for j >= k), ``n`` the rows of one input batch in that
    cell. The same (subset, cell) appears once per batch; sum ``n`` over the key to get the cell's count.
    """
    names = [f"c{i}" for i in range(plan.n_columns)]
    selected = df.select(*(F.col(quote(c)).alias(a) for c, a in zip(df.columns, names, strict=True)))
    counter = _BatchCellCounter(
        plan.n_columns, plan.all_cells_length, plan.max_length, plan.ids, plan.children()
    )
    return selected.mapInArrow(counter, plan.ddl())


class _BatchCellCounter:
    """The ``mapInArrow`` function: numpy group-by of each Arrow batch over every column subset.

    The task gathers :data:`_COUNT_ROWS` input rows at a time (a chunk: several of Spark's Arrow batches), so
    that it emits partial counts per chunk, not per batch (fewer rows to shuffle). Per chunk, each column is
    dictionary-encoded (null gets its own code); the code of a subset is built from the code of its prefix
    subset and its last column, then compressed to 0..cells-1 by :func:`_group` (``bincount`` when the codes
    are dense, else ``np.unique``), which also gives each cell's count and a row that holds it. Subsets are
    visited depth-first, so memory is O(max_length * chunk rows) whatever the number of subsets; only the
    subsets of the plan and their
    prefixes are visited (``children``), so a sampled plan costs its sample, not C(d, k). Cells are emitted
    with their values taken from the representative rows (one Arrow ``take`` per value position).
    """

    def __init__(
        self,
        n_columns: int,
        all_cells_length: int,
        max_length: int,
        ids: dict[tuple[int, ...], int],
        children: dict[tuple[int, ...], list[int]],
    ) -> None:
        self.n_columns = n_columns
        self.all_cells_length = all_cells_length
        self.max_length = max_length
        self.ids = ids
        self.children = children

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        buffered: list[pa.RecordBatch] = []
        rows = 0
        for batch in batches:
            if batch.num_rows:
                buffered.append(batch)
                rows += batch.num_rows
                if rows >= _COUNT_ROWS:
                    yield from self._count(buffered)
                    buffered, rows = [], 0
        if buffered:
            yield from self._count(buffered)

    def _count(self, batches: list[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = pa.Table.from_batches(batches)
        n = table.num_rows
        arrays = [table.column(i).combine_chunks() for i in range(self.n_columns)]
        codes: list[np.ndarray] = []
        null_codes: list[int] = []
        for a in arrays:
            encoded = pc.dictionary_encode(a)
            size = len(encoded.dictionary)
            codes.append(encoded.indices.fill_null(size).to_numpy(zero_copy_only=False).astype(np.int64))
            null_codes.append(size)
        # large_string: a chunk's values may exceed the 2 GiB of a string array's 32-bit offsets
        flat = pa.concat_arrays([a.cast(pa.large_string()) for a in arrays])
        out = _Emitter(self.max_length, flat)

        def visit(cols: tuple[int, ...], code: np.ndarray) -> Iterator[pa.RecordBatch]:
            k = len(cols)
            subset = self.ids.get(cols)
            extend = self.children.get(cols, ())
            first, counts, inverse = _group(code, bool(extend))
            if subset is not None:
                if k > self.all_cells_length:  # keep the cells whose k values are all non-empty
                    keep = np.ones(first.shape[0], dtype=bool)
                    for c in cols:
                        keep &= codes[c][first] != null_codes[c]
                    first, counts = first[keep], counts[keep]
                out.add(k, subset, cols, first, n, counts)
                if out.rows >= _FLUSH_ROWS:
                    yield out.flush()
            if extend:
                prefix = inverse
                for c in extend:
                    yield from visit((*cols, c), prefix * (null_codes[c] + 1) + codes[c])

        for c in range(self.n_columns):
            yield from visit((c,), codes[c])
        if out.rows:
            yield out.flush()


def _group(code: np.ndarray, with_inverse: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The cells of non-negative integer codes: (a row of each cell, its count, each row's cell index or None).

    Cells are in ascending code order (as ``np.unique``). Dense codes (largest below :data:`_DENSE_FACTOR` times
    the rows, or 2^16) are counted with ``bincount`` in O(rows); others with ``np.unique`` (a sort). The
    representative row of a cell is any of its rows (they hold the same values in the subset's columns).
    """
    n = code.shape[0]
    top = int(code.max()) + 1 if n else 0
    if top <= max(_DENSE_FACTOR * n, 1 << 16):
        every = np.bincount(code, minlength=top)
        cells = np.flatnonzero(every)
        representative = np.empty(top, dtype=np.int64)
        representative[code] = np.arange(n, dtype=np.int64)
        inverse = None
        if with_inverse:
            index = np.zeros(top, dtype=np.int64)
            index[cells] = np.arange(cells.shape[0], dtype=np.int64)
            inverse = index[code]
        return representative[cells], every[cells], inverse
    if with_inverse:
        _, first, inverse, counts = np.unique(
            code, return_index=True, return_inverse=True, return_counts=True
        )
        return first, counts, inverse.reshape(-1).astype(np.int64)
    _, first, counts = np.unique(code, return_index=True, return_counts=True)
    return first, counts, None


class _Emitter:
    """Accumulates (k, subset, representative rows, counts) and builds the output Arrow batches."""

    def __init__(self, max_length: int, flat: pa.Array) -> None:
        self.max_length = max_length
        self.flat = flat
        self._reset()

    def _reset(self) -> None:
        self.rows = 0
        self.ks: list[np.ndarray] = []
        self.subsets: list[np.ndarray] = []
        self.positions: list[list[np.ndarray]] = [[] for _ in range(self.max_length)]
        self.counts: list[np.ndarray] = []

    def add(
        self, k: int, subset: int, cols: Sequence[int], first: np.ndarray, n: int, counts: np.ndarray
    ) -> None:
        m = first.shape[0]
        if m == 0:
            return
        self.rows += m
        self.ks.append(np.full(m, k, dtype=np.int32))
        self.subsets.append(np.full(m, subset, dtype=np.int32))
        for j in range(self.max_length):
            # Position of the value in ``flat`` (column-major concatenation of the batch), or -1 for "none".
            self.positions[j].append(cols[j] * n + first if j < k else np.full(m, -1, dtype=np.int64))
        self.counts.append(counts.astype(np.int64))

    def flush(self) -> pa.RecordBatch:
        arrays: list[pa.Array] = [
            pa.array(np.concatenate(self.ks), type=pa.int32()),
            pa.array(np.concatenate(self.subsets), type=pa.int32()),
        ]
        for j in range(self.max_length):
            pos = np.concatenate(self.positions[j]).astype(np.int64)
            taken = self.flat.take(pa.array(pos, type=pa.int64(), mask=pos < 0))
            arrays.append(taken.cast(pa.string()))
        arrays.append(pa.array(np.concatenate(self.counts), type=pa.int64()))
        names = ["k", "subset", *(f"v{j}" for j in range(self.max_length)), "n"]
        self._reset()
        return pa.RecordBatch.from_arrays(arrays, names=names)


# ---------------------------------------------------------------------------------------------------------------
# Spark-side aggregation
# ---------------------------------------------------------------------------------------------------------------


def release_cells(release: Release, plan: SubsetPlan, like: DataFrame) -> DataFrame:
    """The release's tuples as rows of the cell table: (k, subset, v0.., n_s = 0, n_y = 0, n_r = count, n_b = 0).

    Built column-wise with numpy and handed to Spark as one Arrow table (release-sized: one row per tuple).
    Tuples of a subset that the plan does not hold (a sampled length) are left out.
    """
    ks: list[np.ndarray] = []
    subsets: list[np.ndarray] = []
    values: list[list[np.ndarray]] = [[] for _ in range(plan.max_length)]
    counts: list[np.ndarray] = []
    for k, marginal in sorted(release.marginals.items()):
        if len(marginal) == 0 or k > plan.max_length:
            continue
        unique_cols, inverse = np.unique(marginal.columns, axis=0, return_inverse=True)
        ids = np.array([plan.ids.get(tuple(row), -1) for row in unique_cols.tolist()], dtype=np.int32)
        subset_ids = ids[inverse.reshape(-1)]
        kept = subset_ids >= 0
        columns, codes = marginal.columns[kept], marginal.values[kept]
        m = int(kept.sum())
        if m == 0:
            continue
        ks.append(np.full(m, k, dtype=np.int32))
        subsets.append(subset_ids[kept])
        for j in range(plan.max_length):
            decoded = np.full(m, None, dtype=object)
            if j < k:
                for c in np.unique(columns[:, j]).tolist():
                    rows = columns[:, j] == c
                    decoded[rows] = np.asarray(release.domains[c], dtype=object)[codes[rows, j]]
            values[j].append(decoded)
        counts.append(marginal.counts[kept].astype(np.int64))

    def cat(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
        return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)

    n_rows = sum(len(c) for c in counts)
    table = pa.table(
        {
            "k": pa.array(cat(ks, np.int32), type=pa.int32()),
            "subset": pa.array(cat(subsets, np.int32), type=pa.int32()),
            **{
                name: pa.array(cat(values[j], object), type=pa.string())
                for j, name in enumerate(plan.value_names)
            },
            "n_s": pa.array(np.zeros(n_rows, dtype=np.int64)),
            "n_y": pa.array(np.zeros(n_rows, dtype=np.int64)),
            "n_r": pa.array(cat(counts, np.int64), type=pa.int64()),
            "n_b": pa.array(np.zeros(n_rows, dtype=np.int64)),
        }
    )
    # Release-sized: one row per released tuple (the DP release is already held by the driver).
    return like.sparkSession.createDataFrame(table)


class CellCounts(NamedTuple):
    """What the one Spark job of :func:`evaluate` returns to the driver (subset- and bucket-sized)."""

    per_subset: dict[int, dict[str, Any]]
    """subset id -> the per-subset sums (see :func:`aggregate`)."""
    per_bucket: dict[tuple[int, int], dict[str, Any]]
    """(k, count bucket index j, upper bound 10 * 2**j) -> the same sums over that length's tuples in the bucket."""
    top_values: dict[int, list[tuple[str | None, int, int]]]
    """1-column subset id -> up to :data:`_ONE_WAY_VALUES` (value, sensitive count, synthetic count)."""


def _bucket_index(count: Column) -> Column:
    """SDS's count bucket of a positive ``count``: the smallest j with count <= 10 * 2**j (0 for count <= 10).

    A floating-point log2 gives the candidate; two comparisons with the exact bounds 10 * 2**j (powers of two
    are exact in a double, and cast to bigint) correct it.
    """
    ratio = F.greatest(count.cast("double") / F.lit(float(BUCKET_FIRST)), F.lit(1.0))
    j = F.ceil(F.log2(ratio)).cast("int")

    def bound(exponent: Column) -> Column:
        return (F.lit(float(BUCKET_FIRST)) * F.pow(F.lit(2.0), exponent)).cast("bigint")

    j = F.when(bound(j) < count, j + 1).otherwise(j)
    return F.when((j > 0) & (bound(j - 1) >= count), j - 1).otherwise(j)


def aggregate(union: DataFrame, plan: SubsetPlan, sds_length: int, resolution: int) -> CellCounts:
    """Sum the partial cell counts and reduce them to per-subset and per-bucket sums, in one Spark job.

    ``union`` holds partial counts ``k, subset, v0.., n_s, n_y, n_r, n_b`` (sensitive, synthetic, release, and a
    second sensitive sample disjoint from the first, for the real-vs-real floor of section 5.5). It is
    hash-partitioned on ``subset`` once and summed per cell; the cell sums are persisted (one row per cell of
    every compared subset, on the executors' local disks, released before this returns), so the pass over the
    tables runs once. The per-subset totals (a window over the subset), the per-(subset, count bucket)
    aggregates and the top values of the 1-column subsets then read those partitions without another shuffle.

    Returns:
        :class:`CellCounts`. Per subset (and per (k, bucket)): ``k``; ``rows_s``, ``rows_y`` = the sum of the
        sensitive / synthetic counts over the subset's cells (the number of rows for subsets whose empty
        cells are kept); ``blank_s``, ``blank_y`` = the count of the empty cell of a 1-column subset (0 for
        longer subsets); ``tvd2`` = sum over cells of |n_s rows_y - n_y rows_s| (exact integer; the subset's
        TVD is tvd2 / (2 rows_s rows_y)); ``rows_b``, ``tvd2_b``: the same for the second sensitive sample
        against the first (0 without one); ``spread`` = sum over cells of sqrt(n_s (rows_s - n_s)) / rows_s
        (the expected real-vs-real TVD is proportional to it, section 5.5); ``unseen_y`` = for a 1-column subset,
        the synthetic count of its non-empty cells whose sensitive count is 0; and, for subsets of length <= ``sds_length`` and their non-empty
        cells (tuples): ``s``, ``y``, ``r`` = tuples with a positive sensitive / synthetic / release count,
        ``sy``, ``sr`` = tuples in both, ``sy_err``, ``sr_err`` = sum of |count - sensitive count| over those
        common tuples, ``rare_s`` = tuples with 0 < sensitive count < ``resolution``, and per side X in
        {y, r}: ``leak_X`` = rare tuples with a positive X count; over the evaluated tuples P_X (sensitive
        count >= resolution, or X count > 0): ``p_X`` = |P_X|, ``pres_X`` = sum of min(X/S, 1) (0 if S = 0),
        ``perr_X`` = sum of |X - S| / S (1 if S = 0), ``abserr_X`` = sum of |X - S|, ``cnt_X`` = sum of X,
        ``true_X`` = sum of S. Each tuple's bucket is that of its sensitive count (:func:`_bucket_index`).
    """
    summed = (
        union.repartition(F.col("subset"))
        .groupBy(*plan.key_names)
        .agg(*(F.sum(c).alias(c) for c in ("n_s", "n_y", "n_r", "n_b")))
    )
    # The two branches below (per-bucket aggregates, top values) read the cell sums. Spark reuses a shuffle
    # between branches only when their plans are identical after column pruning, which the union of a
    # sensitive and a synthetic pass did not give: each branch ran the cell counter over both tables again.
    # Persisted, the pass and its shuffle run once.
    cells = summed.persist(StorageLevel.DISK_ONLY)
    try:
        return _reduce_cells(cells, plan, sds_length, resolution)
    finally:
        cells.unpersist()


def _reduce_cells(sums: DataFrame, plan: SubsetPlan, sds_length: int, resolution: int) -> CellCounts:
    """:func:`aggregate`'s reduction of the cell sums ``sums`` (``k, subset, v0.., n_s, n_y, n_r, n_b``, one row
    per cell, hash-partitioned on ``subset``) to the per-subset and per-bucket sums and the top values."""
    k = F.col("k")
    n_s, n_y, n_r, n_b = F.col("n_s"), F.col("n_y"), F.col("n_r"), F.col("n_b")
    per_subset = Window.partitionBy("subset")
    cells = (
        sums.withColumn("rows_s", F.sum(n_s).over(per_subset))
        .withColumn("rows_y", F.sum(n_y).over(per_subset))
        .withColumn("rows_b", F.sum(n_b).over(per_subset))
    )
    dec = T.DecimalType(38, 0)
    diff = F.abs(n_s.cast(dec) * F.col("rows_y").cast(dec) - n_y.cast(dec) * F.col("rows_s").cast(dec))
    diff_b = F.abs(n_s.cast(dec) * F.col("rows_b").cast(dec) - n_b.cast(dec) * F.col("rows_s").cast(dec))
    rows_s = F.col("rows_s").cast("double")
    spread = F.sqrt(n_s.cast("double") * (rows_s - n_s.cast("double"))) / rows_s
    in_tvd = k <= F.lit(plan.all_cells_length)
    blank = (k == F.lit(1)) & F.col("v0").isNull()
    non_empty: Column = k <= F.lit(sds_length)
    for j, name in enumerate(plan.value_names):
        non_empty = non_empty & ((k <= F.lit(j)) | F.col(name).isNotNull())
    in_s, in_y, in_r = non_empty & (n_s > 0), non_empty & (n_y > 0), non_empty & (n_r > 0)
    rare = in_s & (n_s < F.lit(resolution))

    def count_if(cond: Column, name: str) -> Column:
        return F.sum(F.when(cond, F.lit(1)).otherwise(F.lit(0))).cast("bigint").alias(name)

    def sum_if(cond: Column, value: Column, name: str) -> Column:
        return F.coalesce(F.sum(F.when(cond, value)), F.lit(0)).cast("bigint").alias(name)

    def fsum_if(cond: Column, value: Column, name: str) -> Column:
        return F.coalesce(F.sum(F.when(cond, value)), F.lit(0.0)).cast("double").alias(name)

    side_aggs: list[Column] = []
    for side, n_x in (("y", n_y), ("r", n_r)):
        evaluated = non_empty & ((n_s >= F.lit(resolution)) | (n_x > 0))
        true = n_s.cast("double")
        preservation = F.when(n_s > 0, F.least(n_x, n_s).cast("double") / true).otherwise(F.lit(0.0))
        proportional = F.when(n_s > 0, F.abs(n_x - n_s).cast("double") / true).otherwise(F.lit(1.0))
        side_aggs += [
            count_if(rare & (n_x > 0), f"leak_{side}"),
            count_if(evaluated, f"p_{side}"),
            fsum_if(evaluated, preservation, f"pres_{side}"),
            fsum_if(evaluated, proportional, f"perr_{side}"),
            sum_if(evaluated, F.abs(n_x - n_s), f"abserr_{side}"),
            sum_if(evaluated, n_x, f"cnt_{side}"),
            sum_if(evaluated, n_s, f"true_{side}"),
        ]

    agg = (
        cells.withColumn("bucket", F.when(non_empty, _bucket_index(n_s)))
        .groupBy("k", "subset", "bucket")
        .agg(
            F.max("rows_s").cast("bigint").alias("rows_s"),
            F.max("rows_y").cast("bigint").alias("rows_y"),
            F.max("rows_b").cast("bigint").alias("rows_b"),
            sum_if(blank, n_s, "blank_s"),
            sum_if(blank, n_y, "blank_y"),
            F.coalesce(F.sum(F.when(in_tvd, diff)), F.lit(0).cast(dec)).alias("tvd2"),
            F.coalesce(F.sum(F.when(in_tvd, diff_b)), F.lit(0).cast(dec)).alias("tvd2_b"),
            fsum_if(in_tvd & (n_s > 0), spread, "spread"),
            sum_if((k == F.lit(1)) & F.col("v0").isNotNull() & (n_s == 0), n_y, "unseen_y"),
            count_if(in_s, "s"),
            count_if(in_y, "y"),
            count_if(in_r, "r"),
            count_if(in_s & in_y, "sy"),
            count_if(in_s & in_r, "sr"),
            sum_if(in_s & in_y, F.abs(n_y - n_s), "sy_err"),
            sum_if(in_s & in_r, F.abs(n_r - n_s), "sr_err"),
            count_if(rare, "rare_s"),
            *side_aggs,
        )
        .withColumn("kind", F.lit("subset"))
    )
    # The top values of each 1-column subset.
    rank = F.row_number().over(
        Window.partitionBy("subset").orderBy(F.desc(n_s + n_y), F.col("v0").asc_nulls_first())
    )
    top = (
        sums.where((k == F.lit(1)) & ((n_s + n_y) > 0))
        .withColumn("rank", rank)
        .where(F.col("rank") <= F.lit(_ONE_WAY_VALUES))
        .select(F.lit("value").alias("kind"), "k", "subset", "v0", n_s.alias("s"), n_y.alias("y"))
    )
    out = CellCounts({}, {}, {})
    # Subset-sized: one row per (column subset, count bucket), about sum of C(d, L) * log2(n / 10) rows, plus
    # at most _ONE_WAY_VALUES rows per column. Two collects of the persisted sums, not one of their union: the
    # Spark Connect client (4.1) refuses a union whose two sides carry the same Observation of the tables' lineage.
    for row in [*agg.collect(), *top.collect()]:
        d = row.asDict()
        kind, subset, bucket = d.pop("kind"), int(d.pop("subset")), d.pop("bucket", None)
        if kind == "value":
            out.top_values.setdefault(subset, []).append((d["v0"], int(d["s"]), int(d["y"])))
            continue
        d.pop("v0", None)
        values = {key: (int(x) if isinstance(x, decimal.Decimal) else x) for key, x in d.items()}
        _add_into(out.per_subset.setdefault(subset, {}), values)
        if bucket is not None:
            _add_into(out.per_bucket.setdefault((int(values["k"]), int(bucket)), {}), values)
    for values_of_column in out.top_values.values():
        values_of_column.sort(key=lambda t: (-(t[1] + t[2]), t[0] is not None, t[0] or ""))
    return out


def _add_into(total: dict[str, Any], values: dict[str, Any]) -> None:
    """Add ``values`` into ``total`` key by key (``k``, ``rows_s``, ``rows_y``, ``rows_b`` are per subset: kept, not
    added)."""
    for key, value in values.items():
        if value is None:
            continue
        if key in ("k", "rows_s", "rows_y", "rows_b"):
            total[key] = max(total.get(key, 0), value)
        else:
            total[key] = total.get(key, 0) + value
