"""Vectorized per-batch kernels of the DP-marginals count (DESIGN.md section 2, steps 2-4), pure NumPy.

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

    def _membership(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(candidate position (P, S) int64, valid (P, S) bool) for a block of records' codes (P, d)."""
        mapped = np.empty(codes.shape, dtype=np.int64)
        for j, lut in enumerate(self.lut):
            col = codes[:, j]
            # A column without any value (all empty) has an empty lookup table: no attribute there.
            mapped[:, j] = np.where(col >= 0, lut[np.maximum(col, 0)], -1) if lut.size else -1
        sub = mapped[:, self.subsets]  # (P, S, k)
        ok = (sub >= 0).all(axis=2)
        key = self.base[None, :] + (np.maximum(sub, 0) * self.strides[None, :, :]).sum(axis=2)
        if len(self.keys) == 0:
            return np.zeros(key.shape, dtype=np.int64), np.zeros(key.shape, dtype=bool)
        pos = np.searchsorted(self.keys, key)
        np.minimum(pos, len(self.keys) - 1, out=pos)
        valid = ok & (self.keys[pos] == key)
        return pos, valid

    @property
    def chunk_rows(self) -> int:
        return max(1, _CELLS_PER_CHUNK // max(1, len(self.subsets)))


def tuple_count_histogram(index: CandidateIndex, codes: np.ndarray, multiplicity: np.ndarray) -> np.ndarray:
    """Histogram of |W_u| over records: int64 array h with h[w] = number of records having w candidate tuples.

    Args:
        index: the candidates V_k.
        codes: int32/int64 (P, d) record codes (-1 = empty) of P distinct records.
        multiplicity: int64 (P,) how many records have each pattern.
    """
    hist = np.zeros(len(index.subsets) + 1, dtype=np.int64)
    step = index.chunk_rows
    for start in range(0, codes.shape[0], step):
        _, valid = index._membership(codes[start : start + step])
        w = valid.sum(axis=1)
        np.add.at(hist, w, multiplicity[start : start + step])  # int64 throughout: exact for any count
    return hist


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
    |W_u| > Delta_k keeps the Delta_k tuples of smallest hash h(key, record, occurrence, tuple) (seed 001, 3.2.1).

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
    for start in range(0, codes.shape[0], step):
        block = codes[start : start + step]
        mult = multiplicity[start : start + step]
        pos, valid = index._membership(block)
        w = valid.sum(axis=1)
        small = w <= sensitivity
        if small.any():
            reps = np.broadcast_to(mult[:, None], valid.shape)
            sel = valid & small[:, None]
            np.add.at(out, pos[sel], reps[sel])  # int64 throughout: exact for any count
        big = np.flatnonzero(~small)
        if big.size == 0:
            continue
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
        h[~valid[big][rows]] = _MASK
        keep = np.argpartition(h, sensitivity - 1, axis=1)[:, :sensitivity]
        kept_valid = np.take_along_axis(valid[big][rows], keep, axis=1)
        kept_pos = np.take_along_axis(pos[big][rows], keep, axis=1)
        out += np.bincount(kept_pos[kept_valid], minlength=out.shape[0]).astype(np.int64)
