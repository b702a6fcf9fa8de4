"""Kernels shared by the synthesizers: partitioned sampling, exact splits, largest-remainder rounding, IPF.

Each is written once and used by every synthesizer (docs/design.md section 4.3):

* :func:`sample_partitions`: the Spark plan of every synthesizer. ``spark.range(P, numPartitions=P)`` then one
  ``mapInArrow`` task per partition, which draws that partition's rows (a caller's ``draw``), puts them in a
  seeded random order and decodes them to strings; no shuffle stage, each partition is one task from the draw to
  the written file.
* :func:`exact_split`: integer totals split over P partitions exactly (c // P each, remainders spread at
  random), so that partitions draw exact shares of a target or of a budget.
* :func:`largest_remainder`: real quotas rounded to integers with a prescribed sum (Hamilton's method).
* :func:`ipf`: iterative proportional fitting (Deming and Stephan 1940) of many tables at once, with a
  tolerance.

Randomness here is utility randomness of post-processing, from NumPy generators seeded by the caller's seed and
a named stream: ``np.random.SeedSequence([seed, part], spawn_key=(stream,))`` for partition ``part``'s draws,
``np.random.SeedSequence(seed, spawn_key=(stream,))`` for a split every partition computes alike. The same
(seed, P) gives the same rows in the same order, whichever executor runs a task and however often it is retried.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from spark_dpsynth.data.session import default_parallelism
from spark_dpsynth.errors import InvalidParameterError

__all__ = [
    "BATCH_ROWS",
    "IPF_ITERATIONS",
    "IPF_LOCK_TOLERANCE",
    "IPF_TOLERANCE",
    "SHUFFLE_STREAM",
    "Rows",
    "exact_split",
    "ipf",
    "largest_remainder",
    "sample_partitions",
]

log = logging.getLogger(__name__)

SHUFFLE_STREAM = 3
"""Spawn key of the per-partition generator of the permutation that puts a partition's rows in random order
(the ``model`` and ``sds`` synthesizers' stream since they were first written: their output depends on it)."""
BATCH_ROWS = 65536
"""Rows per Arrow record batch a task emits."""
IPF_ITERATIONS = 200
"""Most sweeps :func:`ipf` runs on a table."""
IPF_TOLERANCE = 1e-7
"""Relative tolerance (largest margin error as a share of the table's total) at which :func:`ipf` stops."""
IPF_LOCK_TOLERANCE = 1e-3
"""Relative margin error beyond which a fit with fixed cells that has run out of sweeps is taken as locked by
them, and goes on as plain IPF (:func:`ipf`)."""

Rows = np.ndarray | pa.Table | pa.RecordBatch | Mapping[str, Any] | Iterator[np.ndarray]
"""What a ``draw`` function of :func:`sample_partitions` returns for one partition: either an integer array
(n, d) of value codes into ``domains`` (-1 = empty), or the columns themselves as strings (None = empty): a
``pyarrow.Table`` or ``RecordBatch``, a pandas DataFrame, or a mapping column name -> sequence of n values; or,
with ``permute=False``, an iterator of code arrays (the partition's rows block by block, in their final order:
the task holds one block at a time)."""


# --------------------------------------------------------------------------------------------- partitions


def sample_partitions(
    spark: Any,
    draw: Callable[[int, int], Rows],
    *,
    columns: Sequence[str],
    seed: int,
    partitions: int | None = None,
    domains: Sequence[Sequence[str]] | None = None,
    stream: int = SHUFFLE_STREAM,
    label: str = "synthesis",
    permute: bool = True,
) -> Any:
    """The synthetic DataFrame whose partition p holds ``draw(p, P)``'s rows, in a seeded random order.

    The plan is ``spark.range(P, numPartitions=P).mapInArrow(task)``: task p calls ``draw(p, P)``, permutes the
    rows with a generator seeded by ``np.random.SeedSequence([seed, p], spawn_key=(stream,))`` and emits them as
    Arrow batches of at most :data:`BATCH_ROWS` rows. There is no shuffle stage: each partition is one task from
    the draw to the written file. Everything ``draw`` needs (release-sized, and public data) travels in its
    closure, which must be picklable; ``draw`` must depend on nothing but its closure and its arguments (take its
    generators from ``np.random.SeedSequence([seed, part], spawn_key=(STREAM,))`` with a stream of its own, and
    its share of a total from :func:`exact_split`), so that a retried task emits the same rows. The seed stays
    out of the plan (it is in the closure only).

    Args:
        spark: the SparkSession (classic or Spark Connect: only the DataFrame API is used).
        draw: ``draw(part, parts) -> rows`` of partition ``part`` (0 <= part < parts); see :data:`Rows`: an
            integer array (n_p, d) of codes, ``domains[j][code]`` the value of column j, -1 = empty; or the
            columns by name (strings, None = empty).
        columns: the d output column names, in order (distinct).
        seed: the seed of the permutations (and, by convention, of ``draw``'s generators).
        partitions: P >= 1; None: :func:`spark_dpsynth.data.session.default_parallelism` (the output then
            depends on the cluster: set it for reproducible output).
        domains: per column, its values; required when ``draw`` returns codes.
        stream: spawn key of the permutations' generators (default :data:`SHUFFLE_STREAM`).
        label: prefix of the per-partition log line ("<label>: partition p of P emitted n rows", at INFO on the
            executors).
        permute: True: each task permutes its rows as above. False: the rows are emitted in ``draw``'s order
            (``draw`` puts them in random order itself), and ``draw`` may return an iterator of code arrays, each
            decoded and emitted before the next is drawn.

    Returns:
        A DataFrame with exactly ``columns``, in order, each a nullable string, in P partitions. The rows are
        drawn on the executors when the DataFrame is evaluated; nothing is collected to the driver.

    Raises:
        InvalidParameterError: ``partitions`` < 1, ``columns`` has duplicates or does not match ``domains``, or
            P cannot be inferred from the session.
        ValueError: (in the tasks) ``draw`` returned codes without ``domains``, columns other than
            ``columns``, or an iterator of blocks with ``permute`` True.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    columns = [str(c) for c in columns]
    if len(set(columns)) != len(columns):
        raise InvalidParameterError(f"columns must be distinct, got {columns}")
    if domains is not None and len(domains) != len(columns):
        raise InvalidParameterError(f"domains has {len(domains)} entries for {len(columns)} columns")
    parts = int(partitions) if partitions is not None else default_parallelism(spark)
    if parts < 1:
        raise InvalidParameterError(f"partitions must be >= 1, got {partitions!r}")
    internal = [f"c{j}" for j in range(len(columns))]
    task = _partition_task(
        draw,
        columns=tuple(columns),
        domains=None if domains is None else tuple(tuple(d) for d in domains),
        seed=int(seed),
        parts=parts,
        stream=int(stream),
        label=label,
        permute=bool(permute),
    )
    schema = T.StructType([T.StructField(c, T.StringType(), True) for c in internal])
    return (
        spark.range(parts, numPartitions=parts)
        .mapInArrow(task, schema)
        .select(*[F.col(c).alias(name) for c, name in zip(internal, columns, strict=True)])
    )


def _partition_task(
    draw: Callable[[int, int], Rows],
    *,
    columns: tuple[str, ...],
    domains: tuple[tuple[str, ...], ...] | None,
    seed: int,
    parts: int,
    stream: int,
    label: str,
    permute: bool = True,
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function of :func:`sample_partitions`: for each partition id of its input, draw,
    permute and emit that partition's rows (as columns ``c0..c{d-1}``)."""
    names = [f"c{j}" for j in range(len(columns))]

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        dictionaries = None if domains is None else [pa.array(list(dom), type=pa.string()) for dom in domains]
        for batch in batches:
            for part in batch.column(0).to_numpy().tolist():
                rows = draw(int(part), parts)
                if isinstance(rows, Iterator):
                    if permute or dictionaries is None:
                        raise ValueError(
                            "draw returned blocks of codes, which need domains and permute=False"
                        )
                    n = 0
                    for block in rows:
                        n += int(block.shape[0])
                        yield from _decode(block, dictionaries, names)
                    log.info("%s: partition %d of %d emitted %d rows", label, part, parts, n)
                    continue
                if isinstance(rows, np.ndarray):
                    if dictionaries is None:
                        raise ValueError("draw returned value codes, but sample_partitions got no domains")
                    n = int(rows.shape[0])
                else:
                    rows = _as_table(rows, columns)
                    n = rows.num_rows
                log.info("%s: partition %d of %d emitted %d rows", label, part, parts, n)
                order = None
                if permute:
                    shuffle = np.random.default_rng(np.random.SeedSequence([seed, part], spawn_key=(stream,)))
                    order = shuffle.permutation(n)
                if isinstance(rows, np.ndarray):
                    yield from _decode(rows if order is None else rows[order], dictionaries, names)  # type: ignore[arg-type]
                else:
                    if order is not None:
                        rows = rows.take(pa.array(order, type=pa.int64()))
                    yield from rows.rename_columns(names).to_batches(max_chunksize=BATCH_ROWS)

    return run


def _decode(codes: np.ndarray, dictionaries: list[pa.Array], names: list[str]) -> Iterator[pa.RecordBatch]:
    """Value codes (n, d), -1 = empty, as string record batches of at most :data:`BATCH_ROWS` rows."""
    for lo in range(0, codes.shape[0], BATCH_ROWS):
        sub = codes[lo : lo + BATCH_ROWS]
        n = sub.shape[0]
        arrays = []
        for j, dictionary in enumerate(dictionaries):
            col = sub[:, j]
            if len(dictionary) == 0:
                arrays.append(pa.nulls(n, type=pa.string()))
            else:
                arrays.append(dictionary.take(pa.array(col, mask=col < 0)))
        yield pa.RecordBatch.from_arrays(arrays, names=names)


def _as_table(rows: Rows, columns: tuple[str, ...]) -> pa.Table:
    """A partition's rows given by column as an Arrow table of exactly ``columns`` (strings, in order)."""
    if isinstance(rows, pa.RecordBatch):
        rows = pa.Table.from_batches([rows])
    if isinstance(rows, pa.Table):
        table = rows
    elif isinstance(rows, Mapping):
        table = pa.table({c: pa.array(list(rows[c]), type=pa.string()) for c in columns if c in rows})
    elif hasattr(rows, "to_dict") and hasattr(rows, "columns"):  # pandas DataFrame
        table = pa.table({c: pa.array(rows[c].tolist(), type=pa.string()) for c in columns if c in rows})
    else:
        raise ValueError(f"draw must return value codes or columns, got {type(rows).__name__}")
    if set(table.column_names) != set(columns) or table.num_columns != len(columns):
        raise ValueError(f"draw returned columns {table.column_names}, expected {list(columns)}")
    return pa.table([table.column(c).cast(pa.string()) for c in columns], names=list(columns))


# --------------------------------------------------------------------------------------------- integer splits


def exact_split(
    totals: np.ndarray, parts: int, rng: np.random.Generator, part: int | None = None
) -> np.ndarray:
    """Split integer totals over ``parts`` partitions exactly, with no partition systematically favoured.

    Each total c gives c // parts to every partition; its c % parts remaining units go to the first c % parts
    partitions of a uniformly random permutation drawn for that total (docs/design.md section 4.3: exact integer
    split, remainders spread at random). The draws do not depend on ``part``, so every task computes the same
    split from a generator seeded alike.

    Args:
        totals: int64 array (n,) of non-negative totals (attribute budgets, records, persons per cell).
        parts: number of partitions P >= 1.
        rng: generator of the permutations (seeded: the split is reproducible).
        part: return only this partition's row (0 <= part < P); None returns the whole split.

    Returns:
        int64 array (P, n) whose columns sum to ``totals``, or its row ``part`` (n,); every entry is c // P or
        c // P + 1.

    Raises:
        ValueError: ``totals`` is not 1-D or has a negative entry, or ``parts``/``part`` is out of range.
    """
    totals = np.asarray(totals, dtype=np.int64)
    if totals.ndim != 1 or np.any(totals < 0):
        raise ValueError("totals must be a 1-D array of non-negative integers")
    if parts < 1 or (part is not None and not 0 <= part < parts):
        raise ValueError(f"need parts >= 1 and 0 <= part < parts, got parts={parts}, part={part}")
    base, rem = np.divmod(totals, parts)
    out = np.repeat(base[None, :], parts, axis=0) if part is None else base.copy()
    todo = np.flatnonzero(rem)
    step = max(1, (1 << 20) // parts)
    for lo in range(0, todo.size, step):
        cols = todo[lo : lo + step]
        # rank[i, q]: position of partition q in a uniformly random permutation of the partitions
        rank = np.argsort(np.argsort(rng.random((cols.size, parts)), axis=1, kind="stable"), axis=1)
        extra = rank < rem[cols][:, None]
        if part is None:
            rows, which = np.nonzero(extra.T)
            out[rows, cols[which]] += 1
        else:
            out[cols] += extra[:, part]
    return out


def largest_remainder(quotas: np.ndarray, total: int) -> np.ndarray:
    """Round non-negative quotas to integers that sum to ``total`` (the largest-remainder, or Hamilton, method).

    Every entry gets floor(quota); the ``total - sum(floors)`` missing units go one each to the entries with the
    largest fractional parts (ties: the lower index). When float rounding makes the floors sum above ``total``,
    units are taken back from the entries with the smallest fractional parts among those >= 1, so no entry goes
    below 0.

    Args:
        quotas: float array (n,), >= 0, summing to ``total`` up to float rounding (e.g. p x total for a
            probability vector p).
        total: the required sum, an integer >= 0.

    Returns:
        int64 array (n,), >= 0, summing to ``total`` whenever the quotas sum to it up to less than n units.

    Raises:
        ValueError: ``quotas`` is not 1-D.
    """
    quotas = np.asarray(quotas, dtype=np.float64)
    if quotas.ndim != 1:
        raise ValueError(f"quotas must be 1-D, got shape {quotas.shape}")
    base = np.floor(quotas).astype(np.int64)
    missing = int(total - base.sum())
    if missing > 0:
        base[np.argsort(-(quotas - base), kind="stable")[:missing]] += 1
    elif missing < 0:
        order = np.argsort(quotas - base, kind="stable")
        order = order[base[order] > 0]
        base[order[:-missing]] -= 1
    return base


# --------------------------------------------------------------------------------------------- IPF


def ipf(
    tables: list[np.ndarray],
    margins: list[list[tuple[tuple[int, ...], np.ndarray]]],
    *,
    tolerance: float = IPF_TOLERANCE,
    max_iterations: int = IPF_ITERATIONS,
    fixed: Sequence[np.ndarray | None] | None = None,
    unlock: bool = True,
) -> list[np.ndarray]:
    """Iterative proportional fitting (Deming and Stephan 1940) of many tables at once, vectorized, optionally
    keeping some cells fixed.

    Each sweep scales every table by target / current sum along each of its margins in turn (an empty fiber,
    current sum 0, holds only zeros and stays 0). With ``fixed``, a margin cell whose fiber holds fixed cells
    of sum F and free cells of sum U > 0, with target t >= F, scales only its free cells, by (t - F) / U; a
    fiber that cannot meet its target that way (t < F, or no free cell) is scaled whole, as plain IPF does. A
    fixed cell scaled down by one margin is never scaled up by another, which can lock a fit: with ``unlock``,
    a table still off its margins by more than :data:`IPF_LOCK_TOLERANCE` after ``max_iterations`` sweeps goes
    on as plain IPF from where it is, for at most as many sweeps more (one closer than that keeps its fixed
    cells). Every table must have the same number of margins, the m-th on the same axes (e.g. the
    sub-margins of one level of a model, or the row then column margin of 2-D tables). All tables' cells form
    one vector; margin m of every table is one ``bincount`` over it. A table
    stops after the sweep in which it was within ``tolerance`` of each of its margins (relative to its total,
    the sum of its first margin), at most ``max_iterations`` sweeps; converged tables leave the batch once they
    are a quarter of it (until then they run a few sweeps more). A table's result does not depend on the other
    tables of the batch beyond those extra sweeps.

    Args:
        tables: float arrays, non-negative (not modified); the starting tables (seeds) of the fit.
        margins: per table, its (axes, target) pairs: ``axes`` ascending, ``target`` float of the shape of the
            table reduced to ``axes`` (non-negative; all of a table's targets should have the same total).
        tolerance: relative tolerance, > 0 (default :data:`IPF_TOLERANCE`).
        max_iterations: most sweeps, >= 1 (default :data:`IPF_ITERATIONS`).
        fixed: per table, a bool array of its shape (True: the cell is kept unless its fiber cannot meet a
            margin otherwise) or None (every cell free); None: plain IPF.
        unlock: whether a locked fit goes on as plain IPF (False: fixed cells are exact and stay, and a locked
            fit ends off its margins).

    Returns:
        The fitted tables (float64), in order.
    """
    out = [t.astype(np.float64, copy=True) for t in tables]
    masks = [None] * len(out) if fixed is None else list(fixed)
    if not out or not margins[0]:
        return out
    totals = [max(float(m[0][1].sum()), 1e-300) for m in margins]
    active = list(range(len(out)))
    iterations = 0
    # fixed cells can lock a fit (a cell scaled down by one margin is never scaled up by another): tables still
    # off their margins by IPF_LOCK_TOLERANCE after max_iterations sweeps go on as plain IPF from where they
    # are, as many sweeps more
    unfix_at = max_iterations
    if unlock and any(m is not None for m in masks):
        max_iterations *= 2
    while active and iterations < max_iterations:
        if iterations >= unfix_at:
            for i in active:
                masks[i] = None
        # the active tables' cells as one vector; per margin: cell -> margin cell, targets, totals, table starts
        x = np.concatenate([out[i].ravel() for i in active])
        free = (
            None
            if all(masks[i] is None for i in active)
            else np.concatenate(
                [np.ones(out[i].size, dtype=bool) if masks[i] is None else ~masks[i].ravel() for i in active]
            )
        )
        slots = []
        for m in range(len(margins[0])):
            seg_parts, target_parts, total_parts, offset = [], [], [], 0
            for i in active:
                axes, target = margins[i][m]
                shape = out[i].shape
                cells = np.unravel_index(np.arange(out[i].size), shape)
                local = np.ravel_multi_index(tuple(cells[a] for a in axes), tuple(shape[a] for a in axes))
                seg_parts.append(local + offset)
                target_parts.append(np.asarray(target, dtype=np.float64).ravel())
                total_parts.append(np.full(target_parts[-1].size, totals[i]))
                offset += target_parts[-1].size
            starts = np.cumsum([0] + [t.size for t in target_parts[:-1]])
            slots.append(
                (np.concatenate(seg_parts), np.concatenate(target_parts), np.concatenate(total_parts), starts)
            )
        while True:
            worst = np.zeros(len(active))
            for seg, target, total, starts in slots:
                whole = np.bincount(seg, weights=x, minlength=target.size)
                worst = np.maximum(worst, np.maximum.reduceat(np.abs(whole - target) / total, starts))
                # an empty fiber (whole = 0) holds only zeros: its factor does not matter (0 here)
                factor = target / np.where(whole > 0, whole, np.inf)
                if free is None:
                    x *= factor[seg]
                    continue
                loose = np.bincount(seg, weights=np.where(free, x, 0.0), minlength=target.size)
                kept = whole - loose
                # the free cells take what the fixed ones leave, where that is possible
                by_free = (target >= kept) & (loose > 0)
                free_factor = np.where(by_free, (target - kept) / np.where(by_free, loose, 1.0), factor)
                x *= np.where(free, free_factor[seg], np.where(by_free, 1.0, factor)[seg])
            iterations += 1
            done = worst < tolerance
            fixed_phase_over = unlock and free is not None and iterations >= unfix_at
            if fixed_phase_over:
                # a fit that is close stays as it is; a locked one goes on as plain IPF
                done = worst < IPF_LOCK_TOLERANCE
            # leave the converged tables out once they are a quarter of the active ones (or all of them)
            if iterations >= max_iterations or done.sum() * 4 >= len(active) or fixed_phase_over:
                break
        offset = 0
        for i in active:
            out[i] = x[offset : offset + out[i].size].reshape(out[i].shape)
            offset += out[i].size
        active = [i for i, ok in zip(active, done, strict=True) if not ok]
    return out
