"""The counting kernels, exact: seed 001's worked examples (sections 2.1 and 2.2) and contribution bounding."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from spark_dpsynth.mechanisms import _counting
from spark_dpsynth.mechanisms._counting import CandidateIndex
from spark_dpsynth.mechanisms.marginals import LocalBackend, _candidates, _Level
from spark_dpsynth.privacy.noise import NoNoise
from tests.seed_examples import SEED_001_COUNTS, SEED_001_ROWS

SEED_21, SEED_21_COUNTS = SEED_001_ROWS, SEED_001_COUNTS
COLUMNS = ("A", "B", "C")


def _full_index(backend: LocalBackend, k: int) -> CandidateIndex:
    """Every k-tuple over the data's values is a candidate (no threshold): exact counting."""
    d = len(backend.values)
    radix = np.array([len(v) for v in backend.values], dtype=np.int64)
    lut = tuple(np.arange(len(v), dtype=np.int32) for v in backend.values)
    tuples = {
        cols: np.array(list(itertools.product(*[range(radix[c]) for c in cols])), dtype=np.int64).reshape(
            -1, k
        )
        for cols in itertools.combinations(range(d), k)
    }
    return CandidateIndex.build(k, d, lut, radix, tuples)


def _decode(backend: LocalBackend, index: CandidateIndex, counts: np.ndarray) -> dict:
    subset, codes = index.decode(index.keys)
    out = {}
    for s, row, n in zip(subset, codes, counts, strict=True):
        if n:
            cols = index.subsets[s]
            out[tuple((COLUMNS[c], backend.values[c][v]) for c, v in zip(cols, row, strict=True))] = int(n)
    return out


def test_seed_001_section_2_1_aggregate_counts() -> None:
    backend = LocalBackend.from_rows(SEED_21, 3)
    got = {}
    for k in (1, 2, 3):
        index = _full_index(backend, k)
        counts = np.zeros(len(index.keys), dtype=np.int64)
        # A sensitivity of C(3,k) bounds nothing: the counts are exact.
        _counting.bounded_counts(
            index, backend.codes, backend.multiplicity, backend.record_hash,
            tuple(_counting.value_hashes(list(v), j) for j, v in enumerate(backend.values)), 3, 7, counts,
        )  # fmt: skip
        got.update(_decode(backend, index, counts))
    assert got == SEED_21_COUNTS


def test_seed_001_section_2_2_sensitivities() -> None:
    rows = [("a1", "b1", "c1"), ("a1", "b2", "c1"), ("a2", None, "c2")]
    backend = LocalBackend.from_rows(rows, 3)
    hist = _counting.tuple_count_histogram(_full_index(backend, 2), backend.codes, backend.multiplicity)
    # Delta_{2,j} = 3, 3, 1.
    assert hist.tolist() == [0, 1, 0, 2]
    # Delta_2 = max = 3: the exact 100th percentile.
    assert NoNoise().quantile(hist, 1.0, 1.0) == 3


def test_apriori_candidates_include_zero_count_tuples() -> None:
    # Seed 001, section 3.1: from the domain a1,a2 / b1,b2 / c1,c2 every pair of surviving attributes is a
    # candidate, e.g. (A=a2, C=c1) with count 0 there.
    level1 = _Level(tuples={(j,): (np.array([[0], [1]]), np.array([5, 5])) for j in range(3)})
    cands = _candidates(level1, 3, 2, np.array([2, 2, 2]))
    assert {k: v.shape[0] for k, v in cands.items()} == {(0, 1): 4, (0, 2): 4, (1, 2): 4}
    # k=3: only triples whose three pairs all survived.
    level2 = _Level(
        tuples={
            (0, 1): (np.array([[0, 0], [1, 1]]), np.array([3, 3])),
            (0, 2): (np.array([[0, 0], [1, 0]]), np.array([3, 3])),
            (1, 2): (np.array([[0, 0]]), np.array([3])),
        }
    )
    cands3 = _candidates(level2, 3, 3, np.array([2, 2, 2]))
    assert cands3[(0, 1, 2)].tolist() == [[0, 0, 0]]


def _bounded(
    rows: list, k: int, sensitivity: int, key: int = 11
) -> tuple[LocalBackend, CandidateIndex, np.ndarray]:
    backend = LocalBackend.from_rows(rows, len(rows[0]))
    index = _full_index(backend, k)
    counts = np.zeros(len(index.keys), dtype=np.int64)
    hashes = tuple(_counting.value_hashes(list(v), j) for j, v in enumerate(backend.values))
    _counting.bounded_counts(
        index, backend.codes, backend.multiplicity, backend.record_hash, hashes, sensitivity, key, counts
    )
    return backend, index, counts


def test_bounding_keeps_exactly_delta_tuples_per_record() -> None:
    rows = [tuple(f"v{j}{i % 3}" for j in range(6)) for i in range(40)]
    for sensitivity in (1, 4, 15):
        _, _, counts = _bounded(rows, 2, sensitivity)
        assert counts.sum() == 40 * min(sensitivity, 15)


def test_bounding_of_identical_records_is_spread_like_independent_choices() -> None:
    """Identical records are one pattern, but each keeps its own random subset (occurrence number in the hash)."""
    rows = [tuple(f"v{j}" for j in range(6))] * 300
    backend, index, counts = _bounded(rows, 2, 3)
    assert counts.sum() == 900
    kept = counts[counts > 0]
    # 15 pairs, 3 kept per record: about 60 each; all 15 used, none near 300.
    assert kept.shape[0] == 15 and kept.max() < 120


def test_bounding_choice_depends_on_key_and_not_on_other_records() -> None:
    rows = [tuple(f"v{j}{i % 2}" for j in range(5)) for i in range(10)]
    extra = [tuple(f"w{j}" for j in range(5))]
    _, index_a, a = _bounded(rows, 3, 2, key=5)
    _, index_b, b = _bounded(rows + extra, 3, 2, key=5)
    da = dict(zip(_decode_keys(index_a), a.tolist(), strict=True))
    db = dict(zip(_decode_keys(index_b), b.tolist(), strict=True))
    # D' = D + one record: counts differ in at most Delta_3 = 2 cells, by at most 1 each.
    diffs = [db.get(t, 0) - da.get(t, 0) for t in set(da) | set(db)]
    assert sum(1 for x in diffs if x) <= 2 and all(0 <= x <= 1 for x in diffs)
    # Another key makes other choices.
    _, _, c = _bounded(rows, 3, 2, key=6)
    assert not np.array_equal(a, c)


def _decode_keys(index: CandidateIndex) -> list:
    # Within one backend, codes are positions in sorted values; compare through values via the index itself.
    subset, codes = index.decode(index.keys)
    return [(int(s), tuple(r)) for s, r in zip(subset, codes.tolist(), strict=True)]


@pytest.mark.parametrize("chunk", [1, 3, 1000])
def test_counts_do_not_depend_on_how_patterns_are_split(chunk: int) -> None:
    """Retries and partitioning see the patterns in other groups and orders: the counts must not change."""
    rows = [tuple(f"v{j}{(i * (j + 1)) % 4}" for j in range(5)) for i in range(200)]
    backend, index, whole = _bounded(rows, 3, 4)
    hashes = tuple(_counting.value_hashes(list(v), j) for j, v in enumerate(backend.values))
    order = np.random.default_rng(0).permutation(backend.codes.shape[0])
    parts = np.zeros_like(whole)
    for start in range(0, order.shape[0], chunk):
        sel = order[start : start + chunk]
        _counting.bounded_counts(
            index,
            backend.codes[sel],
            backend.multiplicity[sel],
            backend.record_hash[sel],
            hashes,
            4,
            11,
            parts,
        )
    assert np.array_equal(whole, parts)


@pytest.mark.parametrize("block", [1, 7, 65536])
def test_unbounded_counts_of_the_histogram_pass_equal_the_bounded_counts_without_bounding(block: int) -> None:
    """The histogram pass orders patterns by multiplicity and the Spark tasks re-block Arrow batches: neither may
    change the histogram or the unbounded counts (equal to the bounded counts when Delta_k bounds no record)."""
    # 60 distinct records (multiplicity 1) and 240 copies of a few others
    rows = [tuple(f"v{j}{(i * (j + 1)) % 3}" if (i + j) % 7 else None for j in range(4)) for i in range(300)]
    rows = [(f"u{i}" if i < 60 else "u", *r) for i, r in enumerate(rows)]
    backend = LocalBackend.from_rows(rows, 5)
    assert (backend.multiplicity > 1).any() and (backend.multiplicity == 1).any()
    index = _full_index(backend, 3)
    hashes = tuple(_counting.value_hashes(list(v), j) for j, v in enumerate(backend.values))
    expected = np.zeros(len(index.keys), dtype=np.int64)
    _counting.bounded_counts(
        index, backend.codes, backend.multiplicity, backend.record_hash, hashes, 10, 5, expected
    )
    expected_hist = _counting.tuple_count_histogram(index, backend.codes, backend.multiplicity)
    counts = np.zeros(len(index.keys), dtype=np.int64)
    hist = np.zeros_like(expected_hist)
    pieces = (
        (backend.codes[i : i + 5], backend.multiplicity[i : i + 5], backend.record_hash[i : i + 5])
        for i in range(0, backend.codes.shape[0], 5)
    )
    seen = 0
    for codes, mult, _ in _counting.rebatch(pieces, block):
        assert codes.shape[0] >= min(block, 5) or seen + codes.shape[0] == backend.codes.shape[0]
        seen += codes.shape[0]
        hist += _counting.tuple_count_histogram(index, codes, mult, counts)
    assert seen == backend.codes.shape[0]
    assert np.array_equal(hist, expected_hist)
    assert np.array_equal(counts, expected)
    assert int(hist.sum()) == len(rows)
