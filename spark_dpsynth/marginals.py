"""DP marginals on Spark: SDS's method (seed 001, section 3; DESIGN.md section 2), distributed.

``dp_aggregate(df, params, data_config)`` returns a :class:`~spark_dpsynth.release.Release`. The Spark plan:

1. prepare: select, clean and bin the attribute columns (:mod:`spark_dpsynth.prepare`);
2. patterns: ``groupBy(all columns).count()``: distinct records with their multiplicity (partial aggregation
   before the shuffle; identical records are counted once per pattern), plus a content hash per pattern;
3. encode: per column, value -> integer code with the (driver-held) dictionary of values, in ``mapInArrow``;
   the encoded patterns are cached and read 2 R times;
4. per k = 1..R: one pass histograms |W_u| (per-record number of candidate k-tuples) for the DP percentile,
   one pass counts the contribution-bounded k-tuples (NumPy in ``mapInArrow``, one int64 array of candidate
   counts per task, summed by ``groupBy``). Only release-sized data reaches the driver: the dictionary of
   values, the histograms (<= C(d,k)+1 cells) and one count per candidate.
5. on the driver: noise on every candidate (exact discrete Gaussian), thresholds, candidates of the next
   length (Apriori), then normalization.

Privacy (DESIGN.md section 2): (epsilon, delta)-DP with the budget split of :mod:`spark_dpsynth.budget`:
the protected number of records is n + discrete Laplace(1/epsilon_N) clamped >= 1; each Delta_k is an
epsilon_Q-DP exponential-mechanism percentile over the public range 0..C(d,k); each count of a length-k
candidate (including zero counts) gets discrete Gaussian noise of std sigma_k sqrt(Delta_k) with L2 sensitivity
sqrt(Delta_k) after bounding each record to Delta_k tuples; 1-tuples are kept above rho_1, which pays delta/2
(Gopi, Mahabadi, Yekhanin, "Differentially Private Marginals"). Noise is drawn once, on the driver.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import logging
import math
import platform
import secrets
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from spark_dpsynth import _counting
from spark_dpsynth._counting import CandidateIndex
from spark_dpsynth._noise import NoiseSource, noise_source_for
from spark_dpsynth.budget import BudgetSplit, delta_from_protected_n, split_budget, thresholds_for
from spark_dpsynth.errors import InvalidParameterError
from spark_dpsynth.params import AggregationParams, DataConfig
from spark_dpsynth.release import Marginal, Release

__all__ = ["dp_aggregate", "aggregate_encoded", "noisy_threshold", "LocalBackend"]

log = logging.getLogger(__name__)

Progress = Callable[[str], None]


class _Backend(Protocol):
    """Where the records live: Spark (production) or NumPy arrays (tests of the counting-and-noise core)."""

    def dictionary(self) -> list[tuple[str, ...]]: ...

    def histogram(self, index: CandidateIndex) -> np.ndarray: ...

    def counts(
        self, index: CandidateIndex, sensitivity: int, key: int, value_hash: tuple[np.ndarray, ...]
    ) -> np.ndarray: ...


@dataclass
class LocalBackend:
    """Records held as NumPy arrays: the same kernels as the Spark backend, without Spark (tests only)."""

    values: list[tuple[str, ...]]
    """Per column, the sorted distinct values (the dictionary)."""
    codes: np.ndarray
    """int32 (P, d) pattern codes into ``values``, -1 = empty."""
    multiplicity: np.ndarray
    """int64 (P,) number of records of each pattern."""
    record_hash: np.ndarray
    """uint64 (P,) content hash of each pattern."""

    @classmethod
    def from_rows(cls, rows: list[tuple[str | None, ...]] | list[list[str | None]], d: int) -> LocalBackend:
        """Build from rows of values (None = empty); identical rows become one pattern."""
        patterns: dict[tuple[str | None, ...], int] = {}
        for r in rows:
            t = tuple(r)
            if len(t) != d:
                raise InvalidParameterError(f"every row must have {d} values, got {len(t)}")
            patterns[t] = patterns.get(t, 0) + 1
        values = [tuple(sorted({v for p in patterns if (v := p[j]) is not None})) for j in range(d)]
        index = [{val: i for i, val in enumerate(vs)} for vs in values]
        keys = list(patterns)
        codes = np.array(
            [[-1 if (x := p[j]) is None else index[j][x] for j in range(d)] for p in keys], dtype=np.int32
        ).reshape(len(keys), d)
        mult = np.array([patterns[p] for p in keys], dtype=np.int64)
        rh = np.array(
            [
                _counting.value_hashes(["\x1e".join("\x00" if x is None else x for x in p)], -1)[0]
                for p in keys
            ],
            dtype=np.uint64,
        )
        return cls(values=values, codes=codes, multiplicity=mult, record_hash=rh)

    def dictionary(self) -> list[tuple[str, ...]]:
        return self.values

    def histogram(self, index: CandidateIndex) -> np.ndarray:
        return _counting.tuple_count_histogram(index, self.codes, self.multiplicity)

    def counts(
        self, index: CandidateIndex, sensitivity: int, key: int, value_hash: tuple[np.ndarray, ...]
    ) -> np.ndarray:
        out = np.zeros(len(index.keys), dtype=np.int64)
        _counting.bounded_counts(
            index, self.codes, self.multiplicity, self.record_hash, value_hash, sensitivity, key, out
        )
        return out


def _release_key(seed: int | None) -> int:
    """The 64-bit key of the bounding hash: from ``secrets`` (production) or derived from the test seed.

    It lives only in memory: never written, logged or put in the Spark configuration.
    """
    if seed is None:
        return secrets.randbits(64)
    from spark_dpsynth._seeded import derive_key

    return derive_key(seed)


@dataclass
class _Level:
    """Released k-tuples of one length before normalization: per column subset, codes (m, k) and counts (m,)."""

    tuples: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]]


def _stage(progress: Progress | None, message: str) -> None:
    log.info(message)
    if progress is not None:
        progress(message)


def aggregate_encoded(
    backend: _Backend,
    columns: tuple[str, ...],
    params: AggregationParams,
    noise: NoiseSource | None = None,
    progress: Progress | None = None,
    extra_manifest: Mapping[str, object] | None = None,
) -> Release:
    """The DP-marginals algorithm on encoded records (DESIGN.md section 2, steps 1-6, then normalization).

    Args:
        backend: where the records are (Spark or NumPy); it returns only histograms and candidate counts.
        columns: the d attribute column names (public).
        params: validated privacy parameters.
        noise: the noise source; default production noise, or seeded test noise when ``params.seed`` is set.
        progress: optional callback receiving one short message per stage.
        extra_manifest: more public entries for the manifest (e.g. the data configuration).

    Returns:
        The release (not yet written).

    Raises:
        InvalidParameterError: the reporting length exceeds the number of columns.
    """
    d = len(columns)
    params.check_columns(d)
    r = params.reporting_length
    noise = noise if noise is not None else noise_source_for(params.seed)
    key = _release_key(params.seed)
    alpha = params.percentile / 100.0

    dictionary = backend.dictionary()  # private (values present); only rho_1 survivors are ever written
    value_hash = tuple(_counting.value_hashes(list(vals), j) for j, vals in enumerate(dictionary))

    # k = 1: every attribute present is a candidate; its histogram also gives n (never logged or written).
    radix1 = np.array([len(v) for v in dictionary], dtype=np.int64)
    index = CandidateIndex.build(
        1,
        d,
        tuple(np.arange(len(v), dtype=np.int32) for v in dictionary),
        radix1,
        {(j,): np.arange(len(v), dtype=np.int64)[:, None] for j, v in enumerate(dictionary)},
    )
    _stage(progress, "k=1: counting attributes per record")
    hist = backend.histogram(index)
    true_n = int(hist.sum())

    scale_n = 1.0 / (params.number_of_records_epsilon_proportion * params.epsilon)
    protected_n = max(1, true_n + int(noise.discrete_laplace(scale_n, 1)[0]))
    del true_n
    delta = params.delta if params.delta is not None else delta_from_protected_n(protected_n)
    split = split_budget(params, delta)
    sensitivities: dict[int, int] = {}
    thresholds: dict[int, float] = {}
    levels: dict[int, _Level] = {}
    survivors_lut: tuple[np.ndarray, ...] = ()
    domains: list[tuple[str, ...]] = []
    radix = radix1

    for k in range(1, r + 1):
        t0 = time.perf_counter()
        if k > 1:
            tuples_by_subset = _candidates(levels[k - 1], d, k, radix)
            index = CandidateIndex.build(k, d, survivors_lut, radix, tuples_by_subset)
            if len(index.keys):
                _stage(
                    progress,
                    f"k={k}: counting candidate {k}-tuples per record ({len(index.keys)} candidates)",
                )
                hist = backend.histogram(index)
            else:
                # No candidate: every record has |W_u| = 0; the histogram is known without reading data.
                hist = np.zeros(len(index.subsets) + 1, dtype=np.int64)
                hist[0] = protected_n  # only its shape matters: every score is then equal
        # Step 3: Delta_k, an epsilon_Q-DP percentile over the public range 0..C(d,k).
        full = np.zeros(math.comb(d, k) + 1, dtype=np.int64)
        full[: hist.shape[0]] = hist[: full.shape[0]]
        sensitivity = max(1, noise.quantile(full, alpha, split.epsilon_q))
        sensitivities[k] = sensitivity
        # Steps 4-5: bounded counts of every candidate, then noise on every one of them (zero counts included).
        _stage(progress, f"k={k}: counting bounded {k}-tuples (sensitivity {sensitivity})")
        if len(index.keys):
            counts = backend.counts(index, sensitivity, key, value_hash)
        else:
            counts = np.zeros(0, dtype=np.int64)
        scale = split.sigmas[k - 1] * math.sqrt(sensitivity)
        # Step 6: thresholds.
        threshold = thresholds_for(params, split, k, sensitivity)
        thresholds[k] = threshold
        noisy, kept = noisy_threshold(counts, scale, threshold, noise)
        del counts
        subset_idx, codes = index.decode(index.keys[kept])
        level = _Level(tuples={})
        kept_counts = noisy[kept]
        for s in np.unique(subset_idx):
            rows = subset_idx == s
            level.tuples[tuple(int(c) for c in index.subsets[s])] = (codes[rows], kept_counts[rows])
        levels[k] = level
        if k == 1:
            # Recode to the released values only: code = index into the sorted released values of the column.
            survivors = [np.zeros(0, dtype=np.int64) for _ in range(d)]
            for (j,), (c, _) in level.tuples.items():
                survivors[j] = np.sort(c[:, 0])
            luts = []
            for j in range(d):
                lut = np.full(len(dictionary[j]), -1, dtype=np.int32)
                lut[survivors[j]] = np.arange(len(survivors[j]), dtype=np.int32)
                luts.append(lut)
            survivors_lut = tuple(luts)
            domains = [tuple(dictionary[j][i] for i in survivors[j].tolist()) for j in range(d)]
            radix = np.array([len(s) for s in survivors], dtype=np.int64)
            levels[1] = _Level(
                tuples={
                    (j,): (luts[j][c[:, 0]][:, None].astype(np.int64), n)
                    for (j,), (c, n) in level.tuples.items()
                }
            )
            del dictionary
        released = sum(len(n) for _, n in levels[k].tuples.values())
        log.info("k=%d: %d tuples released in %.1f s", k, released, time.perf_counter() - t0)

    marginals = _normalize(levels, r)
    manifest = _manifest(columns, params, split, noise, protected_n, sensitivities, thresholds, marginals)
    if extra_manifest:
        manifest.update(extra_manifest)
    return Release(columns=tuple(columns), domains=tuple(domains), marginals=marginals, manifest=manifest)


def noisy_threshold(
    counts: np.ndarray, scale: float, threshold: float, noise: NoiseSource
) -> tuple[np.ndarray, np.ndarray]:
    """Steps 5-6 for one length: noise on every candidate count, then keep what passes the threshold.

    Args:
        counts: int64 (M,) bounded counts of every candidate (zero counts included).
        scale: noise std sigma_k sqrt(Delta_k) of the discrete Gaussian.
        threshold: rho_k; a noisy count is kept when it is > rho_k and > 0.
        noise: the noise source (one fresh draw per candidate).

    Returns:
        (noisy int64 (M,), kept bool (M,)). Integer arithmetic throughout: exact for any count.
    """
    noisy = np.asarray(counts, dtype=np.int64) + noise.discrete_gaussian(scale, counts.shape[0])
    return noisy, (noisy > threshold) & (noisy > 0)


def _local_keys(codes: np.ndarray, radix: np.ndarray, cols: tuple[int, ...]) -> np.ndarray:
    key = np.zeros(codes.shape[0], dtype=np.int64)
    for i, c in enumerate(cols):
        key = key * int(radix[c]) + codes[:, i]
    return key


def _candidates(previous: _Level, d: int, k: int, radix: np.ndarray) -> dict[tuple[int, ...], np.ndarray]:
    """V_k: k-tuples over distinct columns all of whose (k-1)-sub-tuples were released (Apriori, step 1)."""
    prev_keys = {cols: np.sort(_local_keys(c, radix, cols)) for cols, (c, _) in previous.tuples.items()}
    out: dict[tuple[int, ...], np.ndarray] = {}
    for cols in itertools.combinations(range(d), k):
        prefix, last = cols[:-1], cols[-1]
        if prefix not in previous.tuples or radix[last] == 0:
            continue
        left = previous.tuples[prefix][0]
        m, n_last = left.shape[0], int(radix[last])
        cand = np.concatenate(
            [np.repeat(left, n_last, axis=0), np.tile(np.arange(n_last, dtype=np.int64), m)[:, None]], axis=1
        )
        ok = np.ones(cand.shape[0], dtype=bool)
        for drop in range(k - 1):
            sub_cols = cols[:drop] + cols[drop + 1 :]
            if sub_cols not in prev_keys:
                ok[:] = False
                break
            sub = np.delete(cand, drop, axis=1)
            keys = prev_keys[sub_cols]
            q = _local_keys(sub, radix, sub_cols)
            pos = np.minimum(np.searchsorted(keys, q), len(keys) - 1)
            ok &= keys[pos] == q
        if ok.any():
            out[cols] = cand[ok]
    return out


def _normalize(levels: dict[int, _Level], r: int) -> dict[int, Marginal]:
    """Make every k-tuple's count <= the count of each of its (k-1)-sub-tuples (seed 001, 3.4), k = 2..R."""
    lookup: dict[tuple[int, ...], dict[tuple[int, ...], int]] = {}
    marginals: dict[int, Marginal] = {}
    for k in range(1, r + 1):
        cols_rows, vals_rows, count_rows = [], [], []
        for cols, (codes, counts) in sorted(levels[k].tuples.items()):
            counts = counts.astype(np.int64).copy()
            if k > 1:
                for drop in range(k):
                    sub_cols = cols[:drop] + cols[drop + 1 :]
                    table = lookup[sub_cols]
                    sub = np.delete(codes, drop, axis=1)
                    parent = np.fromiter(
                        (table[tuple(row)] for row in sub.tolist()), dtype=np.int64, count=len(sub)
                    )
                    np.minimum(counts, parent, out=counts)
            lookup[cols] = {
                tuple(row): int(n) for row, n in zip(codes.tolist(), counts.tolist(), strict=True)
            }
            cols_rows.append(np.broadcast_to(np.asarray(cols, dtype=np.int16), codes.shape))
            vals_rows.append(codes.astype(np.int32))
            count_rows.append(counts)
        if cols_rows:
            c = np.concatenate(cols_rows)
            v = np.concatenate(vals_rows)
            n = np.concatenate(count_rows)
        else:
            c = np.zeros((0, k), dtype=np.int16)
            v = np.zeros((0, k), dtype=np.int32)
            n = np.zeros(0, dtype=np.int64)
        from spark_dpsynth.release import _sorted_marginal

        marginals[k] = _sorted_marginal(c, v, n)
    return marginals


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for pkg in ("spark_dpsynth", "pyspark", "opendp", "numpy", "scipy"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "unknown"
    return out


def _manifest(
    columns: tuple[str, ...],
    params: AggregationParams,
    split: BudgetSplit,
    noise: NoiseSource,
    protected_n: int,
    sensitivities: dict[int, int],
    thresholds: dict[int, float],
    marginals: dict[int, Marginal],
) -> dict[str, object]:
    r = params.reporting_length
    return {
        "format_version": 1,
        "created_utc": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "test_mode": bool(noise.test_mode),
        "noise_sampler": noise.name,
        "columns": list(columns),
        "privacy_unit": "record",
        "reporting_length": r,
        "epsilon": split.epsilon,
        "delta": split.delta,
        "delta_source": "given"
        if params.delta is not None
        else "derived from the protected number of records",
        "rho": split.rho,
        "accounting": params.accounting.value,
        "epsilon_n": split.epsilon_n,
        "epsilon_m": split.epsilon_m,
        "epsilon_q": split.epsilon_q,
        "percentile": params.percentile,
        "percentile_epsilon_proportion": params.percentile_epsilon_proportion,
        "number_of_records_epsilon_proportion": params.number_of_records_epsilon_proportion,
        "accuracy_mode": params.accuracy_mode.value,
        "fabrication_mode": params.fabrication_mode.value,
        "sigma": split.sigma,
        "sigma_proportions": list(split.sigma_proportions),
        "sigmas": {str(k): split.sigmas[k - 1] for k in range(1, r + 1)},
        "sensitivities": {str(k): sensitivities[k] for k in range(1, r + 1)},
        "noise_std": {str(k): split.sigmas[k - 1] * math.sqrt(sensitivities[k]) for k in range(1, r + 1)},
        "thresholds": {str(k): thresholds[k] for k in range(1, r + 1)},
        "protected_number_of_records": int(protected_n),
        "released_tuples": {str(k): len(m) for k, m in sorted(marginals.items())},
        "parameters": {
            "epsilon": params.epsilon,
            "delta": params.delta,
            "reporting_length": r,
            "percentile": params.percentile,
            "percentile_epsilon_proportion": params.percentile_epsilon_proportion,
            "number_of_records_epsilon_proportion": params.number_of_records_epsilon_proportion,
            "accounting": params.accounting.value,
            "accuracy_mode": params.accuracy_mode.value,
            "sigma_proportions": list(params.sigma_proportions) if params.sigma_proportions else None,
            "fabrication_mode": params.fabrication_mode.value,
            "thresholds": list(params.thresholds) if params.thresholds else None,
            "seed": params.seed,
        },
        "versions": _versions(),
    }


# --------------------------------------------------------------------------------------------- Spark backend


def parallelism(spark) -> int:  # noqa: ANN001 - SparkSession (classic or Connect)
    """Number of tasks that run at once: the default parallelism, or the shuffle partitions on Spark Connect."""
    try:
        return max(1, int(spark.sparkContext.defaultParallelism))
    except Exception:  # Spark Connect has no SparkContext
        return max(1, int(spark.conf.get("spark.sql.shuffle.partitions", "8")))


def _batch_arrays(b, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # noqa: ANN001 - arrow batch
    """(codes (P, d) int32, multiplicity (P,) int64, record hash (P,) uint64) of an encoded Arrow batch."""
    codes = np.empty((b.num_rows, d), dtype=np.int32)
    for j in range(d):
        codes[:, j] = b.column(j).to_numpy(zero_copy_only=False)
    mult = b.column(d).to_numpy(zero_copy_only=False).astype(np.int64)
    rh = b.column(d + 1).to_numpy(zero_copy_only=False).astype(np.int64).view(np.uint64)
    return codes, mult, rh


class _SparkBackend:
    """Encoded patterns in a cached Spark DataFrame; kernels run in ``mapInArrow``."""

    def __init__(self, prepared, columns: tuple[str, ...]) -> None:  # noqa: ANN001 - pyspark DataFrame
        from pyspark.sql import functions as F

        self._columns = columns
        names = [f"`{c}`" for c in columns]
        tagged = [F.coalesce(F.concat(F.lit(f"{j}="), F.col(n)), F.lit(f"{j}!")) for j, n in enumerate(names)]
        # Distinct records with their multiplicity (partial aggregation before the shuffle) and a content hash,
        # in as many partitions as the session runs tasks at once: the mapInArrow kernels stream Arrow batches,
        # so partition size does not bound memory, while every extra partition costs a Python task.
        self._patterns = (
            prepared.groupBy(*[F.col(n) for n in names])
            .agg(F.count(F.lit(1)).alias("__n"))
            .withColumn("__h", F.xxhash64(*tagged))
            .coalesce(parallelism(prepared.sparkSession))
            .persist()
        )
        self._encoded = None

    def dictionary(self) -> list[tuple[str, ...]]:
        from pyspark.sql import functions as F

        d = len(self._columns)
        pairs = F.explode(
            F.array(
                *[
                    F.struct(F.lit(j).alias("c"), F.col(f"`{c}`").alias("v"))
                    for j, c in enumerate(self._columns)
                ]
            )
        )
        distinct = (
            self._patterns.select(pairs.alias("a"))
            .select("a.c", "a.v")
            .where(F.col("v").isNotNull())
            .distinct()
        )
        # Bounded by the number of distinct attributes (column, value) of the table: the k=1 candidates.
        rows = distinct.collect()
        per: list[list[str]] = [[] for _ in range(d)]
        for row in rows:
            per[int(row["c"])].append(row["v"])
        values = [tuple(sorted(v)) for v in per]
        self._encode(values)
        return values

    def _encode(self, values: list[tuple[str, ...]]) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        d = len(self._columns)
        dictionaries = [pa.array(list(v), type=pa.string()) for v in values]
        names = list(self._columns)

        def encode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for b in batches:
                arrays = []
                for j in range(d):
                    idx = pc.index_in(b.column(names[j]).cast(pa.string()), value_set=dictionaries[j])
                    arrays.append(pc.fill_null(idx, -1).cast(pa.int32()))
                arrays.append(b.column("__n").cast(pa.int64()))
                arrays.append(b.column("__h").cast(pa.int64()))
                yield pa.RecordBatch.from_arrays(arrays, names=[f"c{j}" for j in range(d)] + ["n", "h"])

        schema = ", ".join(f"c{j} int" for j in range(d)) + ", n long, h long"
        self._encoded = self._patterns.mapInArrow(encode, schema).persist()

    def histogram(self, index: CandidateIndex) -> np.ndarray:
        import pyarrow as pa
        from pyspark.sql import functions as F

        d = len(self._columns)
        size = len(index.subsets) + 1

        def hist(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            total = np.zeros(size, dtype=np.int64)
            for b in batches:
                codes, mult, _ = _batch_arrays(b, d)
                total += _counting.tuple_count_histogram(index, codes, mult)
            nz = np.flatnonzero(total)
            yield pa.RecordBatch.from_arrays(
                [pa.array(nz, pa.int64()), pa.array(total[nz], pa.int64())], ["w", "n"]
            )

        assert self._encoded is not None
        agg = self._encoded.mapInArrow(hist, "w long, n long").groupBy("w").agg(F.sum("n").alias("n"))
        # At most C(d,k) + 1 rows: the histogram of per-record tuple counts.
        out = np.zeros(size, dtype=np.int64)
        for row in agg.collect():
            out[int(row["w"])] = int(row["n"])
        return out

    def counts(
        self, index: CandidateIndex, sensitivity: int, key: int, value_hash: tuple[np.ndarray, ...]
    ) -> np.ndarray:
        import pyarrow as pa
        from pyspark.sql import functions as F

        d = len(self._columns)
        m = len(index.keys)

        def count(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            out = np.zeros(m, dtype=np.int64)
            for b in batches:
                codes, mult, rh = _batch_arrays(b, d)
                _counting.bounded_counts(index, codes, mult, rh, value_hash, sensitivity, key, out)
            nz = np.flatnonzero(out)
            yield pa.RecordBatch.from_arrays(
                [pa.array(nz, pa.int64()), pa.array(out[nz], pa.int64())], ["i", "n"]
            )

        assert self._encoded is not None
        agg = self._encoded.mapInArrow(count, "i long, n long").groupBy("i").agg(F.sum("n").alias("n"))
        # At most one row per candidate k-tuple (release-sized).
        pdf = agg.toPandas()
        out = np.zeros(m, dtype=np.int64)
        out[pdf["i"].to_numpy(dtype=np.int64)] = pdf["n"].to_numpy(dtype=np.int64)
        return out

    def release_cache(self) -> None:
        if self._encoded is not None:
            self._encoded.unpersist()
        self._patterns.unpersist()


def dp_aggregate(
    df,  # noqa: ANN001 - pyspark.sql.DataFrame
    params: AggregationParams | None = None,
    data_config: DataConfig | None = None,
    *,
    progress: Progress | None = None,
) -> Release:
    """Compute a DP release of the k-way marginals (k = 1..R) of a Spark DataFrame.

    Args:
        df: the sensitive table (any schema); every row is one record (the privacy unit).
        params: privacy parameters (default :class:`AggregationParams`: epsilon 4, R 3, percentile 99).
        data_config: columns, empty values and public bins (default: every column, values as strings).
        progress: optional callback receiving one short message per stage.

    Returns:
        The :class:`~spark_dpsynth.release.Release`: for k = 1..R the released k-tuples of non-empty attributes
        with noisy, thresholded, normalized counts, and a manifest of the privacy parameters. Save it with
        ``release.save(path, spark)``.

    Raises:
        SchemaError: a configured column is not in ``df`` (checked on the schema before any data is read).
        InvalidParameterError: the reporting length exceeds the number of attribute columns.

    Privacy:
        (epsilon, delta)-DP per record (see the module docstring; seed 001, section 3; DESIGN.md section 2).
        Nothing in the release, the logs or an error depends on the true number of records or a true count.
    """
    from spark_dpsynth.prepare import prepare, resolve_columns

    params = params if params is not None else AggregationParams()
    data_config = data_config if data_config is not None else DataConfig()
    config = resolve_columns(df.columns, data_config)
    assert config.columns is not None
    params.check_columns(len(config.columns))
    started = time.perf_counter()
    _stage(progress, f"aggregate: {len(config.columns)} columns, reporting length {params.reporting_length}")
    backend = _SparkBackend(prepare(df, config), config.columns)
    extra = {
        "data": {
            "empty_values": list(config.empty_values),
            "zeros_are_empty": config.zeros_are_empty,
            "sensitive_zeros": list(config.sensitive_zeros),
            "bins": {
                c: {
                    "edges": list(b.edges),
                    "labels": list(b.interval_labels()),
                    "passthrough": list(b.passthrough),
                }
                for c, b in config.bins.items()
            },
        }
    }
    try:
        release = aggregate_encoded(backend, config.columns, params, progress=progress, extra_manifest=extra)
    finally:
        backend.release_cache()
    _stage(progress, f"aggregate: done in {time.perf_counter() - started:.1f} s, sizes {release.sizes()}")
    return release
