"""Evaluate stage: compare a synthetic table (and a DP release) with the sensitive table.

``evaluate(sensitive, synthetic, release)`` returns plain, JSON-serialisable metrics (DESIGN.md section 4), and
``write_metrics`` writes them to ``metrics.json``. The metrics are:

* ``rows``, ``record_expansion`` (n_syn / n - 1) and ``blank_cell_share`` of both tables;
* ``tvd`` and ``tvd_by_subset``: the total variation distance between the sensitive and the synthetic L-way
  column marginals, for every column subset of length L = 1..``max_marginal_length``, the empty value counted
  as a category of its own (DESIGN.md section 4, "Plus");
* ``sds``: Microsoft SDS's evaluator (DESIGN.md section 4): suppressed %, fabricated % and mean absolute error
  per length k = 1..R of the release's aggregates and of the synthetic table's aggregates, both measured against
  the true aggregates of the sensitive table (:func:`true_aggregates`).

Privacy: the evaluation reads the sensitive data and adds no noise. Its outputs (true counts of tuples, true
number of records, exact distances) are NOT differentially private and must not be published or shared as if
they were part of the DP release; they are for the data owner who already holds the sensitive table. Logs and
progress messages name stages and durations only, never a count.

Computation: everything record-level runs in Spark, in one Spark job. Each table is read once: a vectorized
``mapInArrow`` pass (numpy over Arrow batches, no row-at-a-time UDF) emits, per batch, the partial count of every
cell of every column subset. The sensitive, synthetic and release counts are stacked with ``unionByName`` (no
join on nullable keys), shuffled once by column subset, summed per cell, and reduced to one row per column subset
(per-subset totals come from a window over the subset, in the same partitions). The driver receives only those
rows (sum of C(d, L) of them) and, when a release is given, holds the release, which it hands to Spark as one
small Arrow table. DataFrame API only (no RDD, no SparkContext, no JVM access), so it also runs on Spark Connect.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from fractions import Fraction
from functools import reduce
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_dpsynth import _validate as v
from spark_dpsynth.errors import InvalidParameterError, SchemaError

if TYPE_CHECKING:
    from spark_dpsynth.release import Release

__all__ = ["evaluate", "write_metrics", "true_aggregates", "METRICS_FILE", "METRICS_VERSION"]

log = logging.getLogger(__name__)

METRICS_FILE = "metrics.json"
"""File name :func:`write_metrics` writes in its directory."""
METRICS_VERSION = 1
"""Version of the layout of the dict :func:`evaluate` returns; bumped when a key changes meaning or goes away."""

_SUBSET_SEPARATOR = "|"
_FLUSH_ROWS = 1 << 20
"""Rows of partial counts a ``mapInArrow`` task accumulates before it yields an Arrow batch."""


# ---------------------------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------------------------


def evaluate(
    sensitive: DataFrame,
    synthetic: DataFrame,
    release: Release | None = None,
    *,
    max_marginal_length: int = 3,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    r"""Compare the synthetic table, and optionally the release, with the sensitive table.

    Args:
        sensitive: the *prepared* sensitive table (:func:`spark_dpsynth.prepare.prepare`): n rows, d nullable
            string columns, null = empty (no attribute).
        synthetic: the synthetic table, n_syn rows with exactly the same columns in the same order.
        release: the DP release the synthetic table was derived from; when given, SDS's evaluator runs for
            lengths k = 1..``release.reporting_length`` on the release and on the synthetic table. Its
            ``columns`` must be the tables' columns, in the same order.
        max_marginal_length: the longest column subsets whose marginals the TVD compares (an integer >= 1;
            capped at d). With d columns there are sum over L of C(d, L) subsets, and the cost of the pass
            over each table grows with that number times the number of rows.
        progress: called with a short message when a stage starts and ends (e.g. to drive a progress bar).

    Returns:
        A JSON-serialisable dict with these keys (lengths are decimal strings ``"1"``, ``"2"``, ...; a value
        that is undefined, e.g. a percentage of an empty set, is ``None``):

        * ``metrics_version`` (int): :data:`METRICS_VERSION`.
        * ``differentially_private`` (bool): always ``False`` (see Privacy).
        * ``columns`` (list[str]): the attribute columns, in order.
        * ``max_marginal_length`` (int): min(``max_marginal_length``, d), the longest subsets in ``tvd``.
        * ``rows``: ``{"sensitive": n, "synthetic": n_syn}``.
        * ``record_expansion`` (float): n_syn / n - 1 (SDS's evaluator; DESIGN.md section 4).
        * ``blank_cell_share``: ``{"sensitive": s, "synthetic": s_syn}``, the share in [0, 1] of null cells
          among the n * d (resp. n_syn * d) cells (DESIGN.md section 4, "Plus").
        * ``tvd``: per length L, ``{"mean": m, "max": x, "count": C(d, L)}`` over the L-column subsets of the
          total variation distance 0.5 * sum over cells |p - q| in [0, 1], p (q) = the cell's count in the
          sensitive (synthetic) table / n (n_syn), the empty value being a category of its own.
        * ``tvd_by_subset``: per length L, ``{"colA|colB": tvd, ...}`` for every L-column subset, columns
          joined by ``"|"`` in table order (keys are listed in the order of ``itertools.combinations``, so a
          reader can rebuild the subsets from ``columns`` even when a name contains ``"|"``).
        * ``sds``: ``None`` without a release, else ``{"reporting_length": R, "release": {"by_length": ...},
          "synthetic": {"by_length": ...}}``, where ``by_length`` maps k = 1..R to a dict with, for S = the
          true k-tuples of the sensitive table (:func:`true_aggregates`) and Y = the release's k-tuples (resp.
          the synthetic table's true k-tuples, computed like S): ``true_tuples`` = |S|, ``tuples`` =
          |Y|, ``common_tuples`` = |S and Y|, ``suppressed_tuples`` = |S \ Y|,
          ``fabricated_tuples`` = |Y \ S|, ``suppressed_pct`` = 100 |S \ Y| / |S|,
          ``fabricated_pct`` = 100 |Y \ S| / |S|, and ``mean_absolute_error`` = mean over S and Y
          of |count_Y - count_S| (in records). These are SDS's evaluator metrics (DESIGN.md section 4).

    Raises:
        SchemaError: the two tables' columns differ (names or order), a column is not a string column, a
            column name repeats, there are no columns, or the release's columns are not the tables' columns.
        InvalidParameterError: ``max_marginal_length`` is not an integer >= 1, ``progress`` is not callable, or
            a table has no rows (the distributions are undefined).

    Privacy:
        None: the result is computed from the sensitive data without noise. It is not differentially private
        and must not be shared as if it were (see the module docstring).
    """
    started = time.perf_counter()
    columns = _check_table("sensitive", sensitive)
    syn_columns = _check_table("synthetic", synthetic)
    if syn_columns != columns:
        raise SchemaError(_mismatch("synthetic", syn_columns, columns))
    length = v.integer("max_marginal_length", max_marginal_length, low=1)
    if progress is not None and not callable(progress):
        raise InvalidParameterError(f"progress must be a callable or None, got {type(progress).__name__}")
    if release is not None and tuple(release.columns) != columns:
        raise SchemaError(_mismatch("the release", tuple(release.columns), columns))

    d = len(columns)
    tvd_length = min(length, d)
    reporting_length = release.reporting_length if release is not None else 0
    sds_length = min(reporting_length, d)
    plan = _SubsetPlan(d, all_cells_length=tvd_length, max_length=max(tvd_length, sds_length))

    parts = [
        _cell_counts(sensitive, plan).select(
            *plan.key_names, _as_long("n", "n_s"), _zero("n_y"), _zero("n_r")
        ),
        _cell_counts(synthetic, plan).select(
            *plan.key_names, _zero("n_s"), _as_long("n", "n_y"), _zero("n_r")
        ),
    ]
    if release is not None:
        with _stage("release tuples to a Spark DataFrame", progress):
            parts.append(_release_cells(release, plan, sensitive))
    stage = f"cell counts and metrics of {len(plan.subsets)} column subsets (one pass over each table)"
    with _stage(stage, progress):
        per_subset = _per_subset(reduce(DataFrame.unionByName, parts), plan, sds_length)
    # Every row is in exactly one cell of a 1-column subset (no row at all: no cell, no entry).
    first = per_subset.get(plan.ids[(0,)], {"rows_s": 0, "rows_y": 0})
    n, n_syn = first["rows_s"], first["rows_y"]
    for name, rows in (("sensitive", n), ("synthetic", n_syn)):
        if rows == 0:
            raise InvalidParameterError(f"the {name} table has no rows; the evaluation needs at least one")
    blank_s = sum(row["blank_s"] for row in per_subset.values())
    blank_y = sum(row["blank_y"] for row in per_subset.values())

    metrics: dict[str, Any] = {
        "metrics_version": METRICS_VERSION,
        "differentially_private": False,
        "columns": list(columns),
        "max_marginal_length": tvd_length,
        "rows": {"sensitive": n, "synthetic": n_syn},
        "record_expansion": (n_syn - n) / n,
        "blank_cell_share": {
            "sensitive": blank_s / (n * d),
            "synthetic": blank_y / (n_syn * d),
        },
    }
    metrics.update(_tvd_metrics(per_subset, plan, columns))
    metrics["sds"] = None
    if release is not None:
        metrics["sds"] = {
            "reporting_length": reporting_length,
            "release": {"by_length": _sds_by_length(per_subset, reporting_length, "r")},
            "synthetic": {"by_length": _sds_by_length(per_subset, reporting_length, "y")},
        }
    log.info("evaluation done in %.2f s", time.perf_counter() - started)
    return metrics


def write_metrics(metrics: dict[str, Any], directory: str) -> str:
    """Write ``metrics`` as ``directory/metrics.json`` (UTF-8, indented), creating the directory.

    The file is written to a temporary name in the same directory and then renamed, so a reader never sees a
    half-written file.

    Args:
        metrics: the dict returned by :func:`evaluate` (any JSON-serialisable dict).
        directory: a local directory on the driver (a ``file:`` prefix is accepted).

    Returns:
        The path of the written file.

    Raises:
        InvalidParameterError: ``metrics`` is not a dict or holds a value JSON cannot represent (NaN included).
        OSError: the directory cannot be created or written.

    Privacy:
        The metrics are not differentially private (see :func:`evaluate`); store them with the sensitive data.
    """
    if not isinstance(metrics, dict):
        raise InvalidParameterError(f"metrics must be a dict, got {type(metrics).__name__}")
    try:
        text = json.dumps(metrics, indent=2, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise InvalidParameterError(f"metrics cannot be written as JSON: {err}") from err
    directory = directory[len("file:") :] if directory.startswith("file:") else directory
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, METRICS_FILE)
    fd, tmp = tempfile.mkstemp(prefix=".metrics-", suffix=".json", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.write("\n")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


def true_aggregates(df: DataFrame, reporting_length: int) -> DataFrame:
    """The true aggregates A_R of a prepared table: every non-empty k-tuple and its exact count, k = 1..R.

    A k-tuple is k attributes (column, non-null value) from k distinct columns; its count is the number of
    records holding all k attributes (seed 001, section 2.1). No noise, no contribution bounding: this is the
    set S that SDS's evaluator compares a release with (DESIGN.md section 4).

    Args:
        df: a prepared table, d nullable string columns, null = empty.
        reporting_length: R, the longest tuples (an integer >= 1; lengths above d have no tuples).

    Returns:
        A DataFrame with the schema of a release's aggregates (:data:`spark_dpsynth.release.AGGREGATES_SCHEMA`):
        ``k int`` (1..min(R, d)), ``columns array<string>`` (k column names in table order),
        ``values array<string>`` (the k non-null values), ``count bigint`` (>= 1); one row per k-tuple present
        in ``df``. Row order is unspecified.

    Raises:
        SchemaError: a column is not a string column, a name repeats, or there are no columns.
        InvalidParameterError: ``reporting_length`` is not an integer >= 1.

    Privacy:
        None: the counts are exact. The result is sensitive data and must never be released.
    """
    columns = _check_table("df", df)
    r = v.integer("reporting_length", reporting_length, low=1)
    plan = _SubsetPlan(len(columns), all_cells_length=0, max_length=min(r, len(columns)))
    counts = _cell_counts(df, plan).groupBy(*plan.key_names).agg(F.sum("n").alias("count"))
    # Subset-sized (sum of C(d, k) rows): the column names of each subset id, joined as a broadcast table.
    names = df.sparkSession.createDataFrame(
        [(i, [columns[c] for c in subset]) for i, subset in enumerate(plan.subsets)],
        schema="subset int, columns array<string>",
    )
    values = F.slice(F.array(*(F.col(c) for c in plan.value_names)), F.lit(1), F.col("k"))
    return counts.join(F.broadcast(names), on="subset").select(
        F.col("k").cast("int").alias("k"),
        F.col("columns"),
        values.alias("values"),
        F.col("count").cast("bigint").alias("count"),
    )


# ---------------------------------------------------------------------------------------------------------------
# Column subsets and the vectorized cell counter
# ---------------------------------------------------------------------------------------------------------------


class _SubsetPlan:
    """The column subsets a pass counts, their ids, and which of their cells it keeps.

    Subsets are ordered by length, then lexicographically by column index; a subset's id is its position.
    Subsets of length <= ``all_cells_length`` keep every cell (the empty value is a category); longer ones, up
    to ``max_length``, keep only cells without an empty value (the non-empty k-tuples of seed 001).
    """

    def __init__(self, n_columns: int, *, all_cells_length: int, max_length: int) -> None:
        self.n_columns = n_columns
        self.all_cells_length = all_cells_length
        self.max_length = max_length
        self.subsets: list[tuple[int, ...]] = [
            s for k in range(1, max_length + 1) for s in itertools.combinations(range(n_columns), k)
        ]
        self.ids = {s: i for i, s in enumerate(self.subsets)}
        self.value_names = [f"v{j}" for j in range(max_length)]
        self.key_names = ["k", "subset", *self.value_names]

    def ddl(self) -> str:
        values = ", ".join(f"{name} string" for name in self.value_names)
        return f"k int, subset int, {values}, n bigint"


def _cell_counts(df: DataFrame, plan: _SubsetPlan) -> DataFrame:
    """Partial counts of the cells of every subset in ``plan``, one Arrow batch of ``df`` at a time.

    Returns a DataFrame ``k int, subset int, v0..v{max_length-1} string, n bigint``: ``v_j`` is the value of
    the subset's j-th column (null for empty, and null for j >= k), ``n`` the rows of one input batch in that
    cell. The same (subset, cell) appears once per batch; sum ``n`` over the key to get the cell's count.
    """
    names = [f"c{i}" for i in range(plan.n_columns)]
    selected = df.select(*(F.col(_quote(c)).alias(a) for c, a in zip(df.columns, names, strict=True)))
    counter = _BatchCellCounter(plan.n_columns, plan.all_cells_length, plan.max_length, plan.ids)
    return selected.mapInArrow(counter, plan.ddl())


class _BatchCellCounter:
    """The ``mapInArrow`` function: numpy group-by of each Arrow batch over every column subset.

    Per batch, each column is dictionary-encoded (null gets its own code); the code of a subset is built from
    the code of its prefix subset and its last column, then compressed to 0..cells-1 by ``np.unique``, which
    also gives each cell's count and a row that holds it. Subsets are visited depth-first, so memory is
    O(max_length * batch rows) whatever the number of subsets. Cells are emitted with their values taken
    from the representative rows (one Arrow ``take`` per value position).
    """

    def __init__(
        self, n_columns: int, all_cells_length: int, max_length: int, ids: dict[tuple[int, ...], int]
    ) -> None:
        self.n_columns = n_columns
        self.all_cells_length = all_cells_length
        self.max_length = max_length
        self.ids = ids

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            if batch.num_rows:
                yield from self._count(batch)

    def _count(self, batch: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
        n = batch.num_rows
        arrays = [batch.column(i) for i in range(self.n_columns)]
        codes: list[np.ndarray] = []
        null_codes: list[int] = []
        for a in arrays:
            encoded = pc.dictionary_encode(a)
            size = len(encoded.dictionary)
            codes.append(encoded.indices.fill_null(size).to_numpy(zero_copy_only=False).astype(np.int64))
            null_codes.append(size)
        flat = pa.concat_arrays(arrays)
        out = _Emitter(self.max_length, flat)

        def visit(cols: tuple[int, ...], code: np.ndarray) -> Iterator[pa.RecordBatch]:
            k = len(cols)
            extend = k < self.max_length and cols[-1] < self.n_columns - 1
            if extend:
                _, first, inverse, counts = np.unique(
                    code, return_index=True, return_inverse=True, return_counts=True
                )
            else:
                _, first, counts = np.unique(code, return_index=True, return_counts=True)
            if k > self.all_cells_length:  # keep the cells whose k values are all non-empty
                keep = np.ones(first.shape[0], dtype=bool)
                for c in cols:
                    keep &= codes[c][first] != null_codes[c]
                first, counts = first[keep], counts[keep]
            out.add(k, self.ids[cols], cols, first, n, counts)
            if out.rows >= _FLUSH_ROWS:
                yield out.flush()
            if extend:
                prefix = inverse.reshape(-1).astype(np.int64)
                for c in range(cols[-1] + 1, self.n_columns):
                    yield from visit((*cols, c), prefix * (null_codes[c] + 1) + codes[c])

        for c in range(self.n_columns):
            yield from visit((c,), codes[c])
        if out.rows:
            yield out.flush()


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
            arrays.append(self.flat.take(pa.array(pos, type=pa.int64(), mask=pos < 0)))
        arrays.append(pa.array(np.concatenate(self.counts), type=pa.int64()))
        names = ["k", "subset", *(f"v{j}" for j in range(self.max_length)), "n"]
        self._reset()
        return pa.RecordBatch.from_arrays(arrays, names=names)


# ---------------------------------------------------------------------------------------------------------------
# Spark-side aggregation
# ---------------------------------------------------------------------------------------------------------------


def _release_cells(release: Release, plan: _SubsetPlan, like: DataFrame) -> DataFrame:
    """The release's tuples as rows of the cell table: (k, subset, v0.., n_s = 0, n_y = 0, n_r = count).

    Built column-wise with numpy and handed to Spark as one Arrow table (release-sized: one row per tuple).
    """
    ks: list[np.ndarray] = []
    subsets: list[np.ndarray] = []
    values: list[list[np.ndarray]] = [[] for _ in range(plan.max_length)]
    counts: list[np.ndarray] = []
    for k, marginal in sorted(release.marginals.items()):
        m = len(marginal)
        if m == 0 or k > plan.max_length:
            continue
        unique_cols, inverse = np.unique(marginal.columns, axis=0, return_inverse=True)
        ids = np.array([plan.ids[tuple(row)] for row in unique_cols.tolist()], dtype=np.int32)
        ks.append(np.full(m, k, dtype=np.int32))
        subsets.append(ids[inverse.reshape(-1)])
        for j in range(plan.max_length):
            decoded = np.full(m, None, dtype=object)
            if j < k:
                for c in np.unique(marginal.columns[:, j]).tolist():
                    rows = marginal.columns[:, j] == c
                    decoded[rows] = np.asarray(release.domains[c], dtype=object)[marginal.values[rows, j]]
            values[j].append(decoded)
        counts.append(marginal.counts.astype(np.int64))

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
        }
    )
    # Release-sized: one row per released tuple (the DP release is already held by the driver).
    return like.sparkSession.createDataFrame(table)


def _per_subset(union: DataFrame, plan: _SubsetPlan, sds_length: int) -> dict[int, dict[str, int]]:
    """Sum the partial cell counts and reduce them to one row per column subset, in one Spark job.

    ``union`` holds partial counts ``k, subset, v0.., n_s, n_y, n_r`` (sensitive, synthetic, release). It is
    hash-partitioned on ``subset`` once; the cell sums, the per-subset totals (a window over the subset) and
    the per-subset aggregates then all run in those partitions without another shuffle.

    Returns:
        subset id -> {``k``; ``rows_s``, ``rows_y`` = the sum of the sensitive / synthetic counts over the
        subset's cells (the number of rows for subsets whose empty cells are kept); ``blank_s``, ``blank_y`` =
        the count of the empty cell of a 1-column subset (0 for longer subsets); ``tvd2`` = sum over cells of
        |n_s rows_y - n_y rows_s| (exact integer; the subset's TVD is tvd2 / (2 rows_s rows_y)); and, for
        subsets of length <= ``sds_length`` and their non-empty cells: ``s``, ``y``, ``r`` = cells with a
        positive sensitive / synthetic / release count, ``sy``, ``sr`` = cells in both, ``sy_err``,
        ``sr_err`` = sum of |count - sensitive count| over those common cells}.
    """
    k = F.col("k")
    n_s, n_y, n_r = F.col("n_s"), F.col("n_y"), F.col("n_r")
    cells = (
        union.repartition(F.col("subset"))
        .groupBy(*plan.key_names)
        .agg(*(F.sum(c).alias(c) for c in ("n_s", "n_y", "n_r")))
    )
    per_subset = Window.partitionBy("subset")
    cells = cells.withColumn("rows_s", F.sum(n_s).over(per_subset)).withColumn(
        "rows_y", F.sum(n_y).over(per_subset)
    )
    dec = T.DecimalType(38, 0)
    diff = F.abs(n_s.cast(dec) * F.col("rows_y").cast(dec) - n_y.cast(dec) * F.col("rows_s").cast(dec))
    in_tvd = k <= F.lit(plan.all_cells_length)
    blank = (k == F.lit(1)) & F.col("v0").isNull()
    non_empty: Column = k <= F.lit(sds_length)
    for j, name in enumerate(plan.value_names):
        non_empty = non_empty & ((k <= F.lit(j)) | F.col(name).isNotNull())
    in_s, in_y, in_r = non_empty & (n_s > 0), non_empty & (n_y > 0), non_empty & (n_r > 0)

    def count_if(cond: Column, name: str) -> Column:
        return F.sum(F.when(cond, F.lit(1)).otherwise(F.lit(0))).cast("bigint").alias(name)

    def sum_if(cond: Column, value: Column, name: str) -> Column:
        return F.coalesce(F.sum(F.when(cond, value)), F.lit(0)).cast("bigint").alias(name)

    agg = cells.groupBy("k", "subset").agg(
        F.max("rows_s").cast("bigint").alias("rows_s"),
        F.max("rows_y").cast("bigint").alias("rows_y"),
        sum_if(blank, n_s, "blank_s"),
        sum_if(blank, n_y, "blank_y"),
        F.coalesce(F.sum(F.when(in_tvd, diff)), F.lit(0).cast(dec)).alias("tvd2"),
        count_if(in_s, "s"),
        count_if(in_y, "y"),
        count_if(in_r, "r"),
        count_if(in_s & in_y, "sy"),
        count_if(in_s & in_r, "sr"),
        sum_if(in_s & in_y, F.abs(n_y - n_s), "sy_err"),
        sum_if(in_s & in_r, F.abs(n_r - n_s), "sr_err"),
    )
    # Subset-sized: one row per column subset (sum of C(d, L) rows).
    out: dict[int, dict[str, int]] = {}
    for row in agg.collect():
        d = row.asDict()
        out[int(d.pop("subset"))] = {key: int(value) for key, value in d.items()}
    return out


# ---------------------------------------------------------------------------------------------------------------
# Driver-side summaries (subset-sized)
# ---------------------------------------------------------------------------------------------------------------


def _tvd_metrics(
    per_subset: dict[int, dict[str, int]], plan: _SubsetPlan, columns: tuple[str, ...]
) -> dict[str, Any]:
    """``tvd`` and ``tvd_by_subset`` of :func:`evaluate`, each TVD = tvd2 / (2 n n_syn) rounded once."""
    tvd: dict[str, Any] = {}
    by_subset: dict[str, dict[str, float]] = {}
    for length in range(1, plan.all_cells_length + 1):
        values: dict[str, float] = {}
        for subset in itertools.combinations(range(plan.n_columns), length):
            row = per_subset[plan.ids[subset]]
            name = _SUBSET_SEPARATOR.join(columns[c] for c in subset)
            values[name] = float(Fraction(row["tvd2"], 2 * row["rows_s"] * row["rows_y"]))
        tvd[str(length)] = {
            "mean": float(np.mean(list(values.values()))),
            "max": float(max(values.values())),
            "count": len(values),
        }
        by_subset[str(length)] = values
    return {"tvd": tvd, "tvd_by_subset": by_subset}


def _sds_by_length(per_subset: dict[int, dict[str, int]], reporting_length: int, side: str) -> dict[str, Any]:
    """SDS's evaluator per length k (DESIGN.md section 4) for ``side`` "r" (release) or "y" (synthetic)."""
    out: dict[str, Any] = {}
    for length in range(1, reporting_length + 1):
        rows = [r for r in per_subset.values() if r["k"] == length]
        s = sum(r["s"] for r in rows)
        y = sum(r[side] for r in rows)
        common = sum(r["s" + side] for r in rows)
        error = sum(r["s" + side + "_err"] for r in rows)
        out[str(length)] = {
            "true_tuples": s,
            "tuples": y,
            "common_tuples": common,
            "suppressed_tuples": s - common,
            "fabricated_tuples": y - common,
            "suppressed_pct": 100.0 * (s - common) / s if s else None,
            "fabricated_pct": 100.0 * (y - common) / s if s else None,
            "mean_absolute_error": error / common if common else None,
        }
    return out


# ---------------------------------------------------------------------------------------------------------------
# Validation, logging
# ---------------------------------------------------------------------------------------------------------------


def _check_table(name: str, df: DataFrame) -> tuple[str, ...]:
    """The columns of a prepared table, after checking them on the schema (no data is read)."""
    fields = df.schema.fields
    columns = tuple(f.name for f in fields)
    if not columns:
        raise SchemaError(f"the {name} table has no columns")
    repeated = sorted({c for c in columns if columns.count(c) > 1})
    if repeated:
        raise SchemaError(f"the {name} table repeats column name(s) {repeated}")
    wrong = [
        f"{f.name} ({f.dataType.simpleString()})" for f in fields if not isinstance(f.dataType, T.StringType)
    ]
    if wrong:
        raise SchemaError(
            f"the {name} table must have string columns (a prepared table, null = empty); got {wrong}"
        )
    return columns


def _mismatch(what: str, got: tuple[str, ...], expected: tuple[str, ...]) -> str:
    missing = [c for c in expected if c not in got]
    extra = [c for c in got if c not in expected]
    if missing or extra:
        return f"{what} must have the sensitive table's columns; missing {missing}, unexpected {extra}"
    return (
        f"{what} must have the sensitive table's columns in the same order {list(expected)}, got {list(got)}"
    )


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _as_long(column: str, name: str) -> Column:
    return F.col(column).cast("bigint").alias(name)


def _zero(name: str) -> Column:
    return F.lit(0).cast("bigint").alias(name)


@contextmanager
def _stage(name: str, progress: Callable[[str], None] | None) -> Iterator[None]:
    """Log (and report through ``progress``) the start and end of a stage with its duration."""
    log.info("%s: started", name)
    if progress is not None:
        progress(f"{name}...")
    started = time.perf_counter()
    try:
        yield
    except BaseException:
        log.info("%s: failed after %.2f s", name, time.perf_counter() - started)
        raise
    seconds = time.perf_counter() - started
    log.info("%s: done in %.2f s", name, seconds)
    if progress is not None:
        progress(f"{name}: done in {seconds:.1f} s")
