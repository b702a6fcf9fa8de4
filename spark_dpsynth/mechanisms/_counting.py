"""Vectorized per-batch kernels of the DP-marginals count (docs/design.md section 2.2), pure NumPy.

The executors hold *patterns*: distinct records with their multiplicity. For one length k, a
:class:`CandidateIndex` (release-sized, shipped in the task closure) encodes V_k: for every k-subset s of the
columns, the candidate k-tuples on s as int64 keys ``base[s] + mixed_radix(codes)``, sorted, so that one
``searchsorted`` answers membership for a whole (patterns x subsets) block.

Per record u, W_u is the set of its k-tuples (all k values non-empty) that are in V_k:

* :func:`tuple_count_histogram` histograms |W_u| (for the DP percentile, step 3);
* :func:`bounded_counts` adds each record's tuples to the counts, keeping for a record with |W_u| > Delta_k the
  Delta_k tuples of smallest keyed hash (a uniformly random subset, step 4). The hash depends only on
  (release key, the record's own values, its occurrence number among identical records, the tuple's own values),
  never on other records or on data-dependent codes, so adding a record changes no other record's choice, and a
  retried task makes the same choice.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

__all__ = [
    "CandidateIndex",
    "column_subsets",
    "mix64",
    "value_hashes",
    "tuple_count_histogram",
    "bounded_counts",
]

_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)
_CELLS_PER_CHUNK = 1 << 21
_REBATCH_ROWS = 1 << 16
"""Rows per block handed to the kernels by :func:`rebatch` (a block of 65,536 rows x 64 columns is 16 MiB)."""
_DENSE_SUBSET_CELLS = 1 << 22
"""A subset whose local key range is at most this gets a dense lookup table (int32 cells)."""
_DENSE_TOTAL_CELLS = 1 << 25
"""At most this many dense table cells per index (128 MiB); the largest subsets beyond it search sorted keys."""


def mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer, elementwise on uint64 (a bijective avalanche mixer; wraps modulo 2^64)."""
    x = np.asarray(x, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = x ^ (x >> np.uint64(30))
        x = x * np.uint64(0xBF58476D1CE4E5B9)
        x = x ^ (x >> np.uint64(27))
        x = x * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    return x


def value_hashes(values: list[str] | tuple[str, ...], column: int) -> np.ndarray:
    """uint64 hash of each (column, value string), independent of any encoding (blake2b, 8 bytes)."""
    import hashlib

    out = np.empty(len(values), dtype=np.uint64)
    for i, val in enumerate(values):
        digest = hashlib.blake2b(f"{column}\x1f{val}".encode(), digest_size=8).digest()
        out[i] = np.frombuffer(digest, dtype="<u8")[0]
    return out


def column_subsets(d: int, k: int) -> np.ndarray:
    """int16 array (C(d,k), k): every k-subset of 0..d-1, ascending, in lexicographic order."""
    subsets = list(itertools.combinations(range(d), k))
    return np.asarray(subsets, dtype=np.int16).reshape(len(subsets), k)


@dataclass(frozen=True)
class CandidateIndex:
    """V_k encoded for membership tests (release-sized; pickled into Spark tasks).

    A record's codes are first mapped through ``lut[j]`` (its column's codes to candidate codes 0..radix[j]-1,
    -1 for a value that is in no candidate); the key of its tuple on subset s is
    ``base[s] + sum_i code[s_i] * stride[s, i]``.
    """

    k: int
    subsets: np.ndarray
    """int16 (S, k): the k-subsets of columns, lexicographic."""
    lut: tuple[np.ndarray, ...]
    """Per column, int32 map from record codes to candidate codes (-1: never in a candidate)."""
    strides: np.ndarray
    """int64 (S, k): mixed-radix strides per subset."""
    base: np.ndarray
    """int64 (S,): offset of each subset's key range."""
    keys: np.ndarray
    """int64 (M,): sorted keys of the candidates."""

    @classmethod
    def build(
        cls,
        k: int,
        d: int,
        lut: tuple[np.ndarray, ...],
        radix: np.ndarray,
        tuples_by_subset: dict[tuple[int, ...], np.ndarray],
    ) -> CandidateIndex:
        """Encode the candidate k-tuples.

        Args:
            k: tuple length.
            d: number of columns.
            lut: per column, record code -> candidate code (-1 if none).
            radix: int64 (d,): number of candidate codes per column.
            tuples_by_subset: column subset (ascending) -> int array (m_s, k) of candidate codes.

        Raises:
            OverflowError: the key space does not fit in 63 bits.
        """
        subsets = column_subsets(d, k)
        strides = np.zeros(subsets.shape, dtype=np.int64)
        base = np.zeros(len(subsets), dtype=np.int64)
        total = 0
        for s, cols in enumerate(subsets.tolist()):
            size = 1
            for i in reversed(range(k)):
                strides[s, i] = size
                size *= int(radix[cols[i]])
            base[s] = total
            total += size
        if total >= 2**62:
            raise OverflowError("the candidate key space of this length does not fit in 63 bits")
        pos = {tuple(c): s for s, c in enumerate(subsets.tolist())}
        parts = [np.zeros(0, dtype=np.int64)]
        for cols, tuples in tuples_by_subset.items():
            if len(tuples) == 0:
                continue
            s = pos[tuple(cols)]
            parts.append(base[s] + np.asarray(tuples, dtype=np.int64) @ strides[s])
        keys = np.unique(np.concatenate(parts))
        return cls(k=k, subsets=subsets, lut=tuple(lut), strides=strides, base=base, keys=keys)

    def decode(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Subset index (S-array position) and candidate codes (m, k) of each key."""
        keys = np.asarray(keys, dtype=np.int64)
        s = np.searchsorted(self.base, keys, side="right") - 1
        rem = keys - self.base[s]
        codes = np.zeros((len(keys), self.k), dtype=np.int64)
        for i in range(self.k):
            stride = self.strides[s, i]
            codes[:, i] = rem // stride
            rem = rem - codes[:, i] * stride
        return s, codes

    def __getstate__(self) -> dict:
        # The lookup tables are rebuilt where they are used (an executor): never shipped in a task closure.
        state = dict(self.__dict__)
        state.pop("_lookup", None)
        return state

    @property
    def lookup(self) -> _Lookup:
        """The membership lookup of this index (built on first use, then cached in this object)."""
        found = self.__dict__.get("_lookup")
        if found is None:
            found = _Lookup.build(self)
            object.__setattr__(self, "_lookup", found)
        return found

    def positions(self, codes: np.ndarray) -> np.ndarray:
        """int32 (S, P): for a block of records' codes (P, d), the position in ``keys`` of each record's tuple
        on each subset, or -1 where that tuple is not a candidate (or has an empty value)."""
        return self.lookup.slots(codes) - np.int32(1)

    def _membership(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(candidate position (P, S) int64, valid (P, S) bool) for a block of records' codes (P, d)."""
        pos = self.positions(codes).T
        valid = pos >= 0
        return np.where(valid, pos, 0).astype(np.int64), valid

    @property
    def chunk_rows(self) -> int:
        return max(1, _CELLS_PER_CHUNK // max(1, len(self.subsets)))


@dataclass(frozen=True)
class _Lookup:
    """Membership of V_k by table lookup, built from a :class:`CandidateIndex` where the records are.

    Each column's candidate codes get one more code, ``radix[j]``, for "no candidate value" (an empty value, or a
    value in no candidate); record code -1 (empty) lands on it through ``lut_ext[j][-1]``. On subset s the
    record's tuple has the local key ``sum_i code[s_i] * ext_stride[s, i]`` in 0..prod(radix + 1) - 1; a dense
    subset maps it through ``table[offset[s] + local]`` to the candidate's position in ``keys`` (-1: none), a
    subset whose key range is too large for a table searches its sorted candidate keys instead. Keys of
    subsets visited in lexicographic order share their prefix, so a k-tuple key costs one multiply-add and one
    gather per record.
    """

    lut_ext: tuple[np.ndarray, ...]
    """Per column, int64 map of record codes to candidate codes, with the sentinel radix[j] appended (index -1)."""
    radix_ext: np.ndarray
    """int64 (d,): radix[j] + 1."""
    table: np.ndarray
    """int32: concatenated dense tables of the dense subsets (slot: candidate position + 1, or 0: none)."""
    offset: np.ndarray
    """int64 (S,): start of each subset's table in ``table``; -1 for a sparse subset."""
    size: np.ndarray
    """int64 (S,): prod(radix_ext) of each subset: its local key range."""
    sparse: dict[int, tuple[np.ndarray, np.ndarray]]
    """Sparse subset -> (sorted local keys int64, slots int32) of its candidates (may be empty)."""
    subsets: tuple[tuple[int, ...], ...]
    """The k-subsets of columns, lexicographic (as in the index)."""

    @classmethod
    def build(cls, index: CandidateIndex) -> _Lookup:
        # Candidate codes per column: those the lookup tables map to and those the candidates use.
        radix = np.array([int(lut.max(initial=-1)) + 1 for lut in index.lut], dtype=np.int64)
        subsets = index.subsets.astype(np.int64)
        s_of, codes = index.decode(index.keys)
        for i in range(index.k):
            if len(s_of):
                np.maximum.at(radix, subsets[s_of, i], codes[:, i] + 1)
        lut_ext = []
        for j, lut in enumerate(index.lut):
            ext = np.empty(lut.size + 1, dtype=np.int64)
            ext[:-1] = np.where(lut >= 0, lut, radix[j])
            ext[-1] = radix[j]
            lut_ext.append(ext)
        radix_ext = radix + 1
        sizes = np.prod(radix_ext[subsets], axis=1) if len(subsets) else np.zeros(0, dtype=np.int64)
        offset = np.full(len(subsets), -1, dtype=np.int64)
        total = 0
        for s in np.argsort(sizes, kind="stable").tolist():
            size = int(sizes[s])
            if size <= _DENSE_SUBSET_CELLS and total + size <= _DENSE_TOTAL_CELLS:
                offset[s] = total
                total += size
        table = np.zeros(total, dtype=np.int32)
        sparse: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        if len(index.keys):
            local = np.zeros(len(index.keys), dtype=np.int64)
            for i in range(index.k):
                local = local * radix_ext[subsets[s_of, i]] + codes[:, i]
            position = np.arange(1, len(index.keys) + 1, dtype=np.int32)
            dense = offset[s_of] >= 0
            table[offset[s_of[dense]] + local[dense]] = position[dense]
            for s in np.flatnonzero(offset < 0).tolist():
                rows = s_of == s
                order = np.argsort(local[rows], kind="stable")
                sparse[s] = (local[rows][order], position[rows][order])
        # Memory: at most _DENSE_TOTAL_CELLS table cells plus the candidates (release-sized).
        return cls(
            lut_ext=tuple(lut_ext),
            radix_ext=radix_ext,
            table=table,
            offset=offset,
            size=sizes.astype(np.int64),
            sparse=sparse,
            subsets=tuple(tuple(c) for c in subsets.tolist()),
        )

    def slots(self, codes: np.ndarray) -> np.ndarray:
        """int32 (S, P): per subset and record of the block ``codes`` (P, d), 1 + the position in the index's
        keys of the record's tuple on that subset, or 0 where it is not a candidate (or has an empty value)."""
        p = codes.shape[0]
        mapped = np.empty((codes.shape[1], p), dtype=np.int64)
        for j, ext in enumerate(self.lut_ext):
            np.take(ext, codes[:, j], out=mapped[j])
        subsets = self.subsets
        out = np.empty((len(subsets), p), dtype=np.int32)
        if len(subsets) == 0:
            return out
        k = len(subsets[0])
        # prefix keys of the subsets' first k-1 columns, reused while consecutive subsets share them
        prefix_cols: tuple[int, ...] | None = None
        prefix = np.zeros(p, dtype=np.int64)
        local = np.empty(p, dtype=np.int64)
        for s, cols in enumerate(subsets):
            if k > 1 and cols[:-1] != prefix_cols:
                prefix_cols = cols[:-1]
                prefix = mapped[cols[0]].copy()
                for c in cols[1:-1]:
                    prefix *= self.radix_ext[c]
                    prefix += mapped[c]
            last = cols[-1]
            if k > 1:
                np.multiply(prefix, self.radix_ext[last], out=local)
                local += mapped[last]
            else:
                local[:] = mapped[last]
            start = int(self.offset[s])
            if start >= 0:
                np.take(self.table[start : start + int(self.size[s])], local, out=out[s])
            else:
                keys, pos = self.sparse.get(s, (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32)))
                if len(keys) == 0:
                    out[s] = 0
                    continue
                at = np.minimum(np.searchsorted(keys, local), len(keys) - 1)
                out[s] = np.where(keys[at] == local, pos[at], 0)
        return out


def tuple_count_histogram(
    index: CandidateIndex, codes: np.ndarray, multiplicity: np.ndarray, counts: np.ndarray | None = None
) -> np.ndarray:
    """Histogram of |W_u| over records: int64 array h with h[w] = number of records having w candidate tuples.

    Args:
        index: the candidates V_k.
        codes: int32/int64 (P, d) record codes (-1 = empty) of P distinct records.
        multiplicity: int64 (P,) how many records have each pattern.
        counts: optional int64 (M,) accumulator (aligned with the keys) of the *unbounded* counts, from the same
            lookups: equal to :func:`bounded_counts` for any Delta_k >= the largest |W_u| (h[w] = 0 above it).
    """
    hist = np.zeros(len(index.subsets) + 1, dtype=np.int64)
    step = index.chunk_rows
    lookup = index.lookup
    ones = multiplicity == 1
    if counts is not None and not ones.all() and ones.any():
        # Patterns of multiplicity 1 first, then the others, each group in its own chunks: a chunk's counts are
        # then one plain bincount (multiplicity 1) or one weighted bincount, without copying columns out of the
        # chunk's slots. Sums over patterns: the order changes nothing.
        order = np.argsort(~ones, kind="stable")
        codes, multiplicity = codes[order], multiplicity[order]
        groups = ((0, int(ones.sum())), (int(ones.sum()), codes.shape[0]))
    else:
        groups = ((0, codes.shape[0]),)
    for first, stop in groups:
        for start in range(first, stop, step):
            end = min(start + step, stop)
            slots = lookup.slots(codes[start:end])
            w = np.count_nonzero(slots, axis=0)
            hist += _weighted_bincount(w, multiplicity[start:end], hist.shape[0])
            if counts is not None:
                _add_slots(slots, multiplicity[start:end], counts)
    return hist


def _weighted_bincount(index: np.ndarray, weights: np.ndarray, size: int) -> np.ndarray:
    """int64 (size,): the sum of ``weights`` (int64 >= 0) at each value of ``index``, exact."""
    if index.size == 0:
        return np.zeros(size, dtype=np.int64)
    if int(weights.max()) == 1:
        return np.bincount(index, minlength=size).astype(np.int64, copy=False)
    if int(weights.sum()) < 2**53:
        # float64 sums of integers below 2^53 are exact
        return np.rint(np.bincount(index, weights=weights, minlength=size)).astype(np.int64)
    out = np.zeros(size, dtype=np.int64)
    np.add.at(out, index, weights)
    return out


def _add_slots(slots: np.ndarray, multiplicity: np.ndarray, out: np.ndarray) -> None:
    """Add each pattern's multiplicity to every candidate in its column of ``slots`` (S, P) (0 = none)."""
    m = out.shape[0]
    ones = multiplicity == 1
    if not ones.any() and slots.size:
        if int(multiplicity.sum()) * slots.shape[0] < 2**53:
            # float64 sums of integers below 2^53 are exact; no column of the slots is copied out
            weights = np.broadcast_to(multiplicity.astype(np.float64)[None, :], slots.shape)
            sums = np.bincount(slots.ravel(), weights=weights.ravel(), minlength=m + 1)[1:]
            out += np.rint(sums).astype(np.int64)
        else:
            weights = np.broadcast_to(multiplicity[None, :], slots.shape)
            out += _weighted_bincount(slots.ravel(), weights.ravel(), m + 1)[1:]
        return
    single = slots if ones.all() else slots[:, ones]
    if single.size:
        out += np.bincount(single.ravel(), minlength=m + 1)[1:]
    if not ones.all():
        many = ~ones
        weights = np.broadcast_to(multiplicity[many][None, :], (slots.shape[0], int(many.sum())))
        out += _weighted_bincount(slots[:, many].ravel(), weights.ravel(), m + 1)[1:]


def bounded_counts(
    index: CandidateIndex,
    codes: np.ndarray,
    multiplicity: np.ndarray,
    record_hash: np.ndarray,
    value_hash: tuple[np.ndarray, ...],
    sensitivity: int,
    key: int,
    out: np.ndarray,
) -> None:
    """Add the contribution-bounded counts of a block of patterns to ``out`` (int64 (M,), aligned with keys).

    A record with |W_u| <= Delta_k adds 1 to each of its tuples (a pattern of multiplicity m adds m). A record with
    |W_u| > Delta_k keeps the Delta_k tuples of smallest hash h(key, record, occurrence, tuple) (docs/design.md section 2.2).

    Args:
        index: the candidates V_k.
        codes: (P, d) record codes, -1 = empty.
        multiplicity: int64 (P,).
        record_hash: uint64 (P,) hash of each pattern's values (independent of other records).
        value_hash: per column, uint64 hash of each record code's (column, value string).
        sensitivity: Delta_k >= 1.
        key: 64-bit secret release key (test mode: derived from the seed).
        out: int64 (M,) accumulator.
    """
    step = index.chunk_rows
    key_u = np.uint64(key & 0xFFFFFFFFFFFFFFFF)
    lookup = index.lookup
    for start in range(0, codes.shape[0], step):
        block = codes[start : start + step]
        mult = multiplicity[start : start + step]
        slots = lookup.slots(block)  # (S, P)
        w = np.count_nonzero(slots, axis=0)
        small = w <= sensitivity
        if small.all():
            _add_slots(slots, mult, out)
            continue
        if small.any():
            _add_slots(slots[:, small], mult[small], out)
        big = np.flatnonzero(~small)
        pos_big = slots[:, big].T.astype(np.int64) - 1  # (B, S): candidate position, -1 = none
        valid_big = pos_big >= 0
        # Tuple hashes from the tuple's own values: combine the k (column, value) hashes of each subset.
        vh = np.empty(block.shape, dtype=np.uint64)
        for j, h in enumerate(value_hash):
            col = block[:, j]
            vh[:, j] = np.where(col >= 0, h[np.maximum(col, 0)], np.uint64(0)) if h.size else np.uint64(0)
        vh = vh[big]
        th = np.zeros((big.size, len(index.subsets)), dtype=np.uint64)
        for i in range(index.k):
            th = mix64(th ^ vh[:, index.subsets[:, i]])
        # One row per record (pattern copies expanded), its own occurrence number among identical records.
        counts = mult[big].astype(np.int64)
        rows = np.repeat(np.arange(big.size), counts)
        occurrence = np.arange(rows.size) - np.repeat(np.cumsum(counts) - counts, counts)
        rid = mix64(mix64(record_hash[start + big][rows] ^ key_u) + occurrence.astype(np.uint64))
        h = mix64(th[rows] ^ rid[:, None])
        h[~valid_big[rows]] = _MASK
        keep = np.argpartition(h, sensitivity - 1, axis=1)[:, :sensitivity]
        kept_valid = np.take_along_axis(valid_big[rows], keep, axis=1)
        kept_pos = np.take_along_axis(pos_big[rows], keep, axis=1)
        out += np.bincount(kept_pos[kept_valid], minlength=out.shape[0]).astype(np.int64)


# ----------------------------------------------------------------- executor-side helpers of the Spark backend


def rebatch(
    blocks: Iterator[tuple[np.ndarray, ...]], rows: int = _REBATCH_ROWS
) -> Iterator[tuple[np.ndarray, ...]]:
    """The same rows (aligned arrays: codes, multiplicity, record hash) in blocks of at least ``rows`` rows (the
    last one may be smaller): Arrow batches of a few thousand rows would otherwise leave a small last chunk per
    batch, and the per-subset loop of :meth:`_Lookup.slots` (or the per-clique loop of the counting passes) costs
    the same for a small chunk as for a full one."""
    parts: list[tuple[np.ndarray, ...]] = []
    held = 0
    for block in blocks:
        parts.append(block)
        held += block[0].shape[0]
        if held >= rows:
            yield _concat(parts)
            parts, held = [], 0
    if parts:
        yield _concat(parts)


def _concat(parts: list[tuple[np.ndarray, ...]]) -> tuple[np.ndarray, ...]:
    if len(parts) == 1:
        return parts[0]
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(len(parts[0])))


def batch_arrays(b, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # noqa: ANN001 - arrow batch
    """(codes (P, d) int32, multiplicity (P,) int64, record hash (P,) uint64) of an encoded Arrow batch."""
    codes = np.empty((b.num_rows, d), dtype=np.int32)
    for j in range(d):
        codes[:, j] = b.column(j).to_numpy(zero_copy_only=False)
    mult = b.column(d).to_numpy(zero_copy_only=False).astype(np.int64)
    rh = b.column(d + 1).to_numpy(zero_copy_only=False).astype(np.int64).view(np.uint64)
    return codes, mult, rh
