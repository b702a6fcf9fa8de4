"""Tests of aggregate-seeded synthesis: the NumPy kernel (exact, against a brute-force reference of seed 001
section 4) and the Spark entry point ``synthesize`` (schema, determinism, budgets, target, validation)."""

from __future__ import annotations

import itertools
import logging
import os
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.testing import assertDataFrameEqual

from spark_dpsynth.data.session import default_parallelism
from spark_dpsynth.errors import InvalidParameterError, ReleaseError
from spark_dpsynth.params import SynthesisParams
from spark_dpsynth.release.core import Marginal, Release
from spark_dpsynth.synthesizers import marginals as synthesis_module
from spark_dpsynth.synthesizers._kernels import exact_split
from spark_dpsynth.synthesizers._sds_sampler import (
    encode_release,
    percentile_type8,
    sample_records,
    scale_counts,
)
from spark_dpsynth.synthesizers.marginals import _synthesize_partition, synthesize
from tests.seed_examples import SEED_001_COUNTS, SEED_001_ROWS

os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")  # silences pyspark.pandas, imported by pyspark.testing

ABC_RECORDS, ABC_COUNTS = SEED_001_ROWS, SEED_001_COUNTS


def release_from_records(
    records: list[tuple], columns: list[str], reporting_length: int, threshold: int = 1
) -> Release:
    """Exact (noise-free) k-way counts of ``records`` for k <= R, keeping counts >= threshold.

    Counts are monotone, so the kept tuples are downward closed, as a normalized release is.
    """
    rows = []
    for k in range(1, reporting_length + 1):
        counter: Counter = Counter()
        for rec in records:
            present = [(c, v) for c, v in zip(columns, rec, strict=True) if v is not None]
            counter.update(itertools.combinations(present, k))
        for combo, n in sorted(counter.items()):
            if n >= threshold:
                rows.append((k, [c for c, _ in combo], [v for _, v in combo], n))
    pdf = pd.DataFrame(rows, columns=["k", "columns", "values", "count"])
    manifest = {
        "columns": columns,
        "reporting_length": reporting_length,
        "protected_number_of_records": len(records),
    }
    return Release.from_pandas(pdf, manifest)


def correlated_records(n: int, d: int, values: int, seed: int) -> list[tuple]:
    """Records with dependent columns and some empty cells, so a thresholded release has gaps."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        z = int(rng.integers(values))
        rec = []
        for j in range(d):
            if rng.random() < 0.15:
                rec.append(None)
            elif rng.random() < 0.8:
                rec.append(f"v{(z + j) % values}")
            else:
                rec.append(f"v{int(rng.integers(values))}")
        out.append(tuple(rec))
    return out


def named_counts(release: Release) -> dict[tuple[tuple[str, str], ...], int]:
    return {
        tuple((release.columns[c], release.domains[c][v]) for c, v in key): n
        for key, n in release.counts_by_tuple().items()
    }


def attr_tuples(release: Release) -> tuple[np.ndarray, dict[tuple[int, ...], int]]:
    """Attribute ids (by column, code, as the encoding numbers them) and counts keyed by sorted id tuples."""
    offset = np.concatenate([[0], np.cumsum([len(d) for d in release.domains])])
    counts = {tuple(int(offset[c] + v) for c, v in key): n for key, n in release.counts_by_tuple().items()}
    return offset, counts


def record_tuples(row: np.ndarray, max_len: int) -> list[tuple[tuple[int, int], ...]]:
    """The (column, code) sub-combinations of length 1..max_len of an encoded record."""
    present = [(j, int(c)) for j, c in enumerate(row) if c >= 0]
    return [t for k in range(1, max_len + 1) for t in itertools.combinations(present, k)]


ABC_RELEASE = release_from_records(ABC_RECORDS, ["A", "B", "C"], 3)
GAPPY = {
    r: release_from_records(correlated_records(300, 5, 4, seed=7), list("PQRST"), r, 5) for r in (1, 2, 3)
}


def test_helper_reproduces_seed_counts():
    assert named_counts(ABC_RELEASE) == ABC_COUNTS


def test_gappy_release_has_gaps():
    rel = GAPPY[2]
    n_values = sum(len(d) for d in rel.domains)
    pairs = sum(len(a) * len(b) for a, b in itertools.combinations(rel.domains, 2))
    assert n_values == 20 and 0 < len(rel.marginals[2]) < pairs


# ---------------------------------------------------------------------------------------------------------------
# kernel: encoding


def test_encoding_indexes_every_released_tuple():
    rel = GAPPY[3]
    enc = encode_release(rel)
    offset, counts = attr_tuples(rel)
    base = enc.n_attrs
    assert enc.n_ids == 1 + len(counts)
    for tup, n in counts.items():
        tid = 0
        for a in tup:  # walk the extension index from the empty tuple
            pos = int(np.searchsorted(enc.ext_key, tid * base + a))
            assert enc.ext_key[pos] == tid * base + a
            tid = int(enc.ext_child[pos])
        assert enc.counts[tid] == n
    # every released (k+1)-tuple is reachable from each of its k-sub-tuples: k + 1 index entries
    assert len(enc.ext_key) == sum(len(t) for t in counts)
    np.testing.assert_array_equal(enc.budgets, [counts[(a,)] for a in range(enc.n_attrs)])


def _raw_release(marginals: dict[int, tuple[list, list, list]], r: int = 2) -> Release:
    return Release(
        columns=("A", "B"),
        domains=(("a1", "a2"), ("b1",)),
        marginals={
            k: Marginal(
                columns=np.array(c, dtype=np.int16).reshape(-1, k),
                values=np.array(v, dtype=np.int32).reshape(-1, k),
                counts=np.array(n, dtype=np.int64),
            )
            for k, (c, v, n) in marginals.items()
        },
        manifest={"columns": ["A", "B"], "reporting_length": r, "protected_number_of_records": 3},
    )


ONES = ([[0], [0], [1]], [[0], [1], [0]], [2, 1, 2])


@pytest.mark.parametrize(
    ("marginals", "match"),
    [
        ({1: ([[0], [1]], [[1], [0]], [1, 2]), 2: ([[0, 1]], [[0, 0]], [1])}, "not downward closed"),
        ({1: ONES, 2: ([[0, 1]], [[0, 0]], [0])}, "count < 1"),
        ({1: ONES, 2: ([[0, 1], [0, 1]], [[0, 0], [0, 0]], [1, 1])}, "twice"),
        ({1: ONES, 2: ([[1, 0]], [[0, 0]], [1])}, "strictly ascending"),
        ({1: ([[0], [0], [2]], [[0], [1], [0]], [2, 1, 2]), 2: ([], [], [])}, "column index"),
        ({1: ([[0], [0], [1]], [[0], [2], [0]], [2, 1, 2]), 2: ([], [], [])}, "value code"),
    ],
)
def test_encoding_rejects_inconsistent_releases(marginals, match):
    with pytest.raises(ReleaseError, match=match):
        encode_release(_raw_release(marginals))


def test_scale_counts_rounds_up_without_float_noise():
    np.testing.assert_array_equal(scale_counts(np.array([30, 3, 1, 7]), 0.1), [3, 1, 1, 1])
    np.testing.assert_array_equal(scale_counts(np.array([3, 5]), 2.5), [8, 13])
    np.testing.assert_array_equal(scale_counts(np.array([3, 5]), None), [3, 5])


def test_percentile_matches_statrs_type8():
    # statrs' own test vectors for Data::quantile (the percentile SDS calls)
    data = np.array([[-1.0, 5.0, 0.0, -3.0, 10.0, -0.5, 4.0, 0.2, 1.0, 6.0]])
    expected = {
        0.0: -3.0,
        1.0: 10.0,
        0.5: 0.6,
        0.2: -0.8,
        0.7: 137 / 30,
        0.01: -3.0,
        0.99: 10.0,
        0.52: 287 / 375,
        0.325: -37 / 240,
    }
    for tau, value in expected.items():
        assert percentile_type8(data, tau * 100)[0] == pytest.approx(value, abs=1e-12)
    rng = np.random.default_rng(0)
    for n in (1, 2, 3, 7, 40):
        vals = rng.integers(1, 30, size=(5, n)).astype(float)
        for q in (0, 10, 50, 95, 100):
            np.testing.assert_allclose(
                percentile_type8(vals, q), np.percentile(vals, q, axis=1, method="median_unbiased")
            )


# ---------------------------------------------------------------------------------------------------------------
# kernel: the sampling rules


def reference_weights(
    record: list[int],
    budgets: np.ndarray,
    synth: Counter,
    counts: dict[tuple[int, ...], int],
    attr_column: np.ndarray,
    r: int,
    percentile: float,
    use_synthetic_counts: bool,
    multiplier: int,
) -> dict[int, float]:
    """Seed 001 section 4.2/4.3, brute force: candidate attribute -> positive weight."""

    def value(t: tuple[int, ...]) -> float:
        return counts[t] - (multiplier * synth[t] if use_synthetic_counts else 0)

    used_cols = {int(attr_column[a]) for a in record}
    out = {}
    for a in range(len(budgets)):
        if budgets[a] <= 0 or int(attr_column[a]) in used_cols:
            continue
        subs = [
            tuple(sorted((*t, a)))
            for k in range(0, min(len(record), r - 1) + 1)
            for t in itertools.combinations(record, k)
        ]
        if any(s not in counts for s in subs):
            continue
        if len(record) + 1 <= r:
            w = max(value(tuple(sorted((*record, a)))), 0.0)
        else:
            vals = np.array([[value(s) for s in subs]])
            # statrs' percentile, then Rust's f64::round (half away from zero), as SDS
            w = float(np.percentile(vals, percentile, axis=1, method="median_unbiased")[0])
            w = float(np.sign(w) * np.floor(abs(w) + 0.5))
            if use_synthetic_counts and (vals <= 0).any():
                w = 0.0
        if w > 0:
            out[a] = w
    return out


@pytest.mark.parametrize("r", [1, 2, 3])
@pytest.mark.parametrize(
    ("use_synthetic_counts", "multiplier", "percentile"),
    [(False, 1, 95.0), (False, 1, 0.0), (True, 1, 95.0), (True, 3, 50.0), (True, 2, 100.0)],
)
def test_every_step_matches_the_reference(r, use_synthetic_counts, multiplier, percentile):
    rel = GAPPY[r]
    enc = encode_release(rel)
    _, counts = attr_tuples(rel)
    steps: list[tuple[list[int], dict[int, float]]] = []

    def on_step(record, candidates, weights):
        steps.append(
            (record.tolist(), {int(a): float(w) for a, w in zip(candidates, weights, strict=True) if w > 0})
        )

    out = sample_records(
        enc,
        enc.budgets,
        np.random.default_rng(11),
        use_synthetic_counts=use_synthetic_counts,
        weight_selection_percentile=percentile,
        synthetic_count_multiplier=multiplier,
        on_step=on_step,
    )
    offset = np.concatenate([[0], np.cumsum([len(d) for d in rel.domains])])
    budgets = enc.budgets.copy()
    synth: Counter = Counter()
    row = -1
    beyond_r = 0
    for record, got in steps:
        if not record:  # a new record starts: the previous one is complete
            if row >= 0:
                done = sorted(int(offset[j] + c) for j, c in enumerate(out[row]) if c >= 0)
                synth.update(t for k in range(1, r + 1) for t in itertools.combinations(done, k))
            row += 1
        left = budgets.copy()
        spent = Counter(int(offset[j] + c) for rec in out[:row] for j, c in enumerate(rec) if c >= 0)
        spent.update(record)
        for a, n in spent.items():
            left[a] -= n
        want = reference_weights(
            record, left, synth, counts, enc.attr_column, r, percentile, use_synthetic_counts, multiplier
        )
        assert set(got) == set(want), (record, got, want)
        for a, w in want.items():
            assert got[a] == pytest.approx(w, rel=1e-12)
        beyond_r += len(record) + 1 > r and bool(want)
    # the last record start may draw nothing (budget left, but every remaining count used up): that stops the run
    assert row == len(out) - 1 or (row == len(out) and not steps[-1][1])
    assert beyond_r > 0  # the percentile rule (4.2.2) was exercised


@pytest.mark.parametrize("r", [1, 2, 3])
@pytest.mark.parametrize("use_synthetic_counts", [False, True])
def test_never_emits_unreleased_combinations_and_spends_budgets_exactly(r, use_synthetic_counts):
    rel = GAPPY[r]
    enc = encode_release(rel)
    released = rel.counts_by_tuple()
    for seed in range(4):
        out = sample_records(
            enc, enc.budgets, np.random.default_rng(seed), use_synthetic_counts=use_synthetic_counts
        )
        assert out.dtype == np.int32 and out.shape[1] == 5
        assert ((out >= 0).sum(axis=1) >= 1).all()
        for row in out:
            for t in record_tuples(row, r):
                assert t in released, t
        spent = Counter((j, int(c)) for row in out for j, c in enumerate(row) if c >= 0)
        assert spent == Counter({key[0]: n for key, n in released.items() if len(key) == 1})


def test_same_generator_same_records_and_partial_budgets_respected():
    enc = encode_release(ABC_RELEASE)
    budgets = np.array([1, 0, 1, 2, 0, 1])  # a1, a2, b1, b2, c1, c2
    a = sample_records(enc, budgets, np.random.default_rng(5))
    b = sample_records(enc, budgets, np.random.default_rng(5))
    np.testing.assert_array_equal(a, b)
    spent = np.zeros(6, dtype=int)
    for row in a:
        for j, c in enumerate(row):
            if c >= 0:
                spent[2 * j + c] += 1
    np.testing.assert_array_equal(spent, budgets)


@pytest.mark.parametrize("target", [1, 3, 40])
@pytest.mark.parametrize("use_synthetic_counts", [False, True])
def test_target_number_of_records_is_exact(target, use_synthetic_counts):
    rel = GAPPY[3]
    enc = encode_release(rel)
    released = rel.counts_by_tuple()
    out = sample_records(
        enc,
        enc.budgets // 20,
        np.random.default_rng(2),
        use_synthetic_counts=use_synthetic_counts,
        target_number_of_records=target,
    )
    assert out.shape == (target, 5)
    for row in out:
        assert all(t in released for t in record_tuples(row, 3))


def test_stops_when_nothing_can_be_drawn():
    # budgets beyond the released counts: with synthetic counts (P = 1) every 1-tuple is eventually exhausted
    enc = encode_release(ABC_RELEASE)
    out = sample_records(enc, enc.budgets * 5, np.random.default_rng(0), use_synthetic_counts=True)
    assert 0 < len(out) < int(enc.budgets.sum() * 5)
    assert sample_records(enc, np.zeros(6, dtype=np.int64), np.random.default_rng(0)).shape == (0, 3)
    assert sample_records(
        enc, np.zeros(6, dtype=np.int64), np.random.default_rng(0), target_number_of_records=3
    ).shape == (0, 3)


@pytest.mark.parametrize(
    ("budgets", "kwargs", "match"),
    [
        (np.ones(5), {}, "shape"),
        (-np.ones(6), {}, ">= 0"),
        (np.ones(6), {"target_number_of_records": -1}, ">= 0"),
    ],
)
def test_sampler_rejects_bad_arguments(budgets, kwargs, match):
    with pytest.raises(ValueError, match=match):
        sample_records(encode_release(ABC_RELEASE), budgets, np.random.default_rng(0), **kwargs)


# ---------------------------------------------------------------------------------------------------------------
# budget split


def test_exact_split_sums_exactly_and_rows_agree():
    totals = np.array([0, 1, 2, 3, 7, 8, 100, 12345], dtype=np.int64)
    for parts in (1, 3, 8):
        split = exact_split(totals, parts, np.random.default_rng(4))
        assert split.shape == (parts, len(totals))
        np.testing.assert_array_equal(split.sum(axis=0), totals)
        assert ((split == totals // parts) | (split == totals // parts + 1)).all()
        for p in range(parts):
            np.testing.assert_array_equal(exact_split(totals, parts, np.random.default_rng(4), p), split[p])
        np.testing.assert_array_equal(split, exact_split(totals, parts, np.random.default_rng(4)))


def _chi_square_of_extra_units(split: np.ndarray, totals: np.ndarray, parts: int) -> float:
    extra = (split - totals // parts).sum(axis=1)
    expected = (totals % parts).sum() / parts
    return float(((extra - expected) ** 2 / expected).sum())


def test_exact_split_favours_no_partition():
    # 3000 totals with remainder 1 or 3 over 4 partitions: each partition should get 1/4 of the 6000 extra
    # units. Draws are without replacement within a total, so the statistic is stochastically smaller than a
    # chi-square with 3 degrees of freedom: P(> 30) <= 1.4e-6 bounds the false-positive rate.
    parts = 4
    totals = np.tile(np.array([1, 5, 3, 11], dtype=np.int64), 750)
    split = exact_split(totals, parts, np.random.default_rng(2024))
    assert _chi_square_of_extra_units(split, totals, parts) < 30
    # the statistic rejects a split that hands remainders to the first partitions (a systematic favourite)
    biased = np.repeat((totals // parts)[None, :], parts, axis=0)
    biased += np.arange(parts)[:, None] < (totals % parts)[None, :]
    np.testing.assert_array_equal(biased.sum(axis=0), totals)
    assert _chi_square_of_extra_units(biased, totals, parts) > 30


def test_exact_split_rejects_bad_arguments():
    with pytest.raises(ValueError, match="non-negative"):
        exact_split(np.array([-1]), 2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="parts"):
        exact_split(np.array([1]), 2, np.random.default_rng(0), part=2)


# ---------------------------------------------------------------------------------------------------------------
# Spark


def decoded_rows(release: Release, codes: np.ndarray) -> list[tuple]:
    return [tuple(release.domains[j][c] if c >= 0 else None for j, c in enumerate(row)) for row in codes]


def string_schema(release: Release) -> T.StructType:
    return T.StructType([T.StructField(c, T.StringType(), True) for c in release.columns])


def totals_by_attribute(df, release: Release) -> Counter:
    """(column, value) -> number of synthetic records holding it, in one Spark aggregation."""
    cells = F.explode(
        F.array(*[F.struct(F.lit(c).alias("column"), F.col(c).alias("value")) for c in release.columns])
    )
    agg = df.select(cells.alias("cell")).where("cell.value IS NOT NULL").groupBy("cell").count()
    # bounded by the number of released values
    return Counter({(row["cell"]["column"], row["cell"]["value"]): row["count"] for row in agg.collect()})


def test_synthesize_schema_nulls_and_released_combinations(spark):
    df = synthesize(ABC_RELEASE, SynthesisParams(mode="sds", seed=1, partitions=2), spark)
    assert df.schema == string_schema(ABC_RELEASE)
    rows = df.collect()  # tiny: at most 13 records
    assert any(v is None for row in rows for v in row)
    for row in rows:
        present = [(c, v) for c, v in zip(ABC_RELEASE.columns, row, strict=True) if v is not None]
        assert present
        for k in (1, 2, 3):
            for t in itertools.combinations(present, k):
                assert t in ABC_COUNTS
    # no target: every budget unit is spent exactly, however it was split over the partitions
    assert totals_by_attribute(df, ABC_RELEASE) == Counter(
        {key[0]: n for key, n in ABC_COUNTS.items() if len(key) == 1}
    )


def test_synthesize_depends_only_on_release_and_params(spark):
    rel = GAPPY[2]
    params = SynthesisParams(mode="sds", seed=99, partitions=3, use_synthetic_counts=True)
    first = synthesize(rel, params, spark)
    first_rows = first.collect()  # release-sized test data
    previous = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "7")
    try:
        assertDataFrameEqual(synthesize(rel, params, spark), first_rows, checkRowOrder=True)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", previous)
    # the rows are exactly the kernel's, partition by partition
    enc = encode_release(rel)
    expected = []
    for part in range(3):
        codes = _synthesize_partition(
            enc,
            seed=99,
            parts=3,
            part=part,
            target=None,
            use_synthetic_counts=True,
            weight_selection_percentile=95.0,
        )
        expected += decoded_rows(rel, codes)
    assertDataFrameEqual(spark.createDataFrame(expected, string_schema(rel)), first_rows)
    other = synthesize(
        rel, SynthesisParams(mode="sds", seed=100, partitions=3, use_synthetic_counts=True), spark
    )
    assert other.collect() != first_rows


@pytest.mark.parametrize("target", [7, 25])
def test_synthesize_target_number_of_records(spark, target):
    # 25 > the 13 budget units of the release and 6 partitions > most budgets: shares without any budget
    # cycle through the whole release's budgets
    params = SynthesisParams(
        mode="sds", seed=3, partitions=6, target_number_of_records=target, use_synthetic_counts=True
    )
    df = synthesize(ABC_RELEASE, params, spark)
    assert df.count() == target


def test_partition_without_budget_still_meets_its_target():
    # 13 budget units over 40 partitions: at least 27 shares are empty; 25 of the 40 shares of the target are 1
    enc = encode_release(ABC_RELEASE)
    released = ABC_RELEASE.counts_by_tuple()
    split_rng = np.random.default_rng(np.random.SeedSequence(8, spawn_key=(synthesis_module._BUDGET_STREAM,)))
    shares = exact_split(enc.budgets, 40, split_rng)
    target_rng = np.random.default_rng(
        np.random.SeedSequence(8, spawn_key=(synthesis_module._TARGET_STREAM,))
    )
    targets = exact_split(np.array([25]), 40, target_rng)[:, 0]
    empty = [p for p in range(40) if not shares[p].any() and targets[p] == 1]
    assert empty
    total = 0
    for part in range(40):
        codes = _synthesize_partition(
            enc,
            seed=8,
            parts=40,
            part=part,
            target=25,
            use_synthetic_counts=True,
            weight_selection_percentile=95.0,
        )
        assert codes.shape == (targets[part], 3)
        assert all(t in released for row in codes for t in record_tuples(row, 3))
        total += codes.shape[0]
    assert total == 25


def test_aggregate_counts_scale_factor_scales_the_output(spark):
    rel = GAPPY[3]
    ones = {key[0]: n for key, n in rel.counts_by_tuple().items() if len(key) == 1}
    for factor in (0.5, 2.0):
        df = synthesize(
            rel,
            SynthesisParams(mode="sds", seed=5, partitions=2, aggregate_counts_scale_factor=factor),
            spark,
        )
        want = Counter(
            {
                (rel.columns[c], rel.domains[c][v]): int(scale_counts(np.array([n]), factor)[0])
                for (c, v), n in ones.items()
            }
        )
        assert totals_by_attribute(df, rel) == want


def test_unseeded_synthesis_draws_a_seed(spark, monkeypatch):
    monkeypatch.setattr(synthesis_module.secrets, "randbits", lambda bits: 12345)
    drawn = synthesize(ABC_RELEASE, SynthesisParams(partitions=2), spark)
    fixed = synthesize(ABC_RELEASE, SynthesisParams(partitions=2, seed=12345), spark)
    assertDataFrameEqual(drawn, fixed, checkRowOrder=True)


def test_progress_and_logging(spark, caplog):
    messages: list[str] = []
    with caplog.at_level(logging.INFO, logger="spark_dpsynth.synthesizers.marginals"):
        synthesize(ABC_RELEASE, SynthesisParams(mode="sds", seed=1), spark, progress=messages.append)
    assert messages[0].startswith("synthesis: start") and messages[-1].startswith("synthesis: end")
    assert any("13 attribute budget units" in m for m in messages)
    assert [
        r.getMessage() for r in caplog.records if r.name == "spark_dpsynth.synthesizers.marginals"
    ] == messages


class _ConnectLikeSession:
    """What Spark Connect offers here: no SparkContext, a conf."""

    def __init__(self, shuffle_partitions: str) -> None:
        self.conf = {"spark.sql.shuffle.partitions": shuffle_partitions}

    @property
    def sparkContext(self):  # noqa: N802 (PySpark's name)
        raise AttributeError("sparkContext is not supported on Spark Connect")

    def range(self, *args):
        raise AssertionError("not reached")


def test_default_parallelism(spark):
    assert default_parallelism(spark) == 4  # conftest: spark.default.parallelism = 4
    assert default_parallelism(_ConnectLikeSession("3")) == 3
    for value in ("auto", "0", None):
        with pytest.raises(InvalidParameterError, match="set spark.sql.shuffle.partitions .*partitions"):
            default_parallelism(_ConnectLikeSession(value))


def _release_with(**changes) -> Release:
    fields = {
        "columns": ABC_RELEASE.columns,
        "domains": ABC_RELEASE.domains,
        "marginals": ABC_RELEASE.marginals,
        "manifest": ABC_RELEASE.manifest,
    }
    fields.update(changes)
    return Release(**fields)


EMPTY_MARGINALS = {
    k: Marginal(np.zeros((0, k), np.int16), np.zeros((0, k), np.int32), np.zeros(0, np.int64))
    for k in (1, 2, 3)
}


@pytest.mark.parametrize(
    ("release", "params", "spark_arg", "progress", "error", "match"),
    [
        ("not a release", SynthesisParams(), True, None, InvalidParameterError, "release must be a Release"),
        (ABC_RELEASE, {"seed": 1}, True, None, InvalidParameterError, "params must be a SynthesisParams"),
        (ABC_RELEASE, SynthesisParams(), None, None, InvalidParameterError, "spark must be a SparkSession"),
        (ABC_RELEASE, SynthesisParams(), True, "print", InvalidParameterError, "progress must be callable"),
        (_release_with(columns=("A", "A", "C")), SynthesisParams(), True, None, ReleaseError, "duplicate"),
        (
            _release_with(manifest={"columns": ["A", "B", "C"]}),
            SynthesisParams(),
            True,
            None,
            ReleaseError,
            "reporting_length",
        ),
        (
            _release_with(manifest={**ABC_RELEASE.manifest, "reporting_length": 2}),
            SynthesisParams(),
            True,
            None,
            ReleaseError,
            "outside 1..reporting_length",
        ),
        (
            _release_with(domains=((), (), ()), marginals=EMPTY_MARGINALS),
            SynthesisParams(),
            True,
            None,
            ReleaseError,
            "no released 1-tuple",
        ),
        (
            _release_with(
                marginals={
                    **ABC_RELEASE.marginals,
                    2: Marginal(
                        np.array([[0, 1]], np.int16), np.array([[1, 0]], np.int32), np.array([1], np.int64)
                    ),
                }
            ),
            SynthesisParams(),
            True,
            None,
            ReleaseError,
            "not downward closed",
        ),
    ],
)
def test_synthesize_validation(spark, release, params, spark_arg, progress, error, match):
    with pytest.raises(error, match=match):
        synthesize(release, params, spark if spark_arg else None, progress)
