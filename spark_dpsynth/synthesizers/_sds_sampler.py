"""SDS's sequential aggregate-seeded sampler, in NumPy (the kernel each synthesis partition runs).

Faithful to SDS's sampler as docs/design.md section 4.2 states it and, where that is silent, to Microsoft SDS's Rust
implementation (``packages/core/src/processing/generator``: ``synthesizers/aggregate_seeded/mod.rs``,
``synthesizers/traits/consolidate.rs``, ``data_generator.rs``; ``utils/collections.rs::sample_weighted``).

Rules (docs/design.md section 4.2; the numbers in parentheses are the sections of SDS's "Differentially private
aggregation and synthesis", which describes the sampler):

* the 1-tuple counts are attribute budgets; a record grows one attribute at a time, from columns not yet in it,
  among attributes whose budget is > 0; taking an attribute spends one unit of its budget (4.1);
* a candidate is eligible only if every combination of length <= R it forms with the record is released (4.2);
  the release is downward closed, so while record + candidate has length <= R this is one look-up;
* weight = count(record + candidate) while that has length <= R (4.2.1); beyond R, the
  ``weight_selection_percentile`` of the counts of all sub-combinations of length <= R that contain the
  candidate (4.2.2), computed as SDS: statrs' percentile (Hyndman-Fan type 8, numpy's ``median_unbiased``),
  rounded half away from zero (``calc_weight_for_all_combinations``);
* ``use_synthetic_counts``: a count is replaced by count - already synthesized count (4.3). Floor, as SDS's
  ``calc_weight_for_single_combination``: a combination whose remaining count is <= 0 gives weight 0, and
  beyond R a single exhausted sub-combination excludes the candidate for this step. SDS adds a record's
  combinations to the synthetic counts as each attribute is drawn, the method's description once the record is complete; the
  two agree, since every combination a later draw of the same record looks up contains the candidate, which
  is not in the record yet;
* a draw picks a candidate with probability weight / sum of weights (SDS ``sample_weighted``); a record ends
  when no candidate has a positive weight; synthesis ends when no budget is left or, with a target number of
  records, when that many records exist; with a target, budgets and synthetic counts are reset to their
  initial values whenever the budgets run out (SDS ``consolidate_with_target_number_of_records``).

Data layout (prepared once per release by :func:`encode_release`, shipped to every partition): attributes are
numbered by (column, code); every released tuple, plus the empty tuple (id 0), has an integer id; the extension
index is a sorted array of keys ``t * n_attrs + a``, one for each released tuple t + {a}, with the id of
t + {a}. For every candidate still eligible, a record keeps the ids of {candidate} + T for each subset T of the
record of length <= R - 1 (a row of ``acc``): adding attribute x only looks up the new subsets, those that
contain x, and the subsets of the grown record are read off x's row. Look-ups are vectorized over candidates
and subsets, so a draw costs a few dozen NumPy calls whatever the release size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from spark_dpsynth.errors import ReleaseError
from spark_dpsynth.release.core import Release

__all__ = ["EncodedRelease", "encode_release", "scale_counts", "sample_records", "percentile_type8"]

StepTrace = Callable[[np.ndarray, np.ndarray, np.ndarray], None]
"""``on_step(record_attrs, candidate_attrs, weights)``: called before each draw, for tests and debugging."""

_CHUNK_ROWS = 4096


@dataclass(frozen=True)
class EncodedRelease:
    """A release encoded for the sampler: look-up structures built once, shipped to every partition."""

    n_columns: int
    """d, the number of attribute columns."""
    reporting_length: int
    """R, the longest released combination."""
    attr_column: np.ndarray
    """int32 (n_attrs,): column index of each attribute; attributes are numbered by (column, code)."""
    attr_code: np.ndarray
    """int32 (n_attrs,): value code of each attribute (index into ``Release.domains[column]``)."""
    counts: np.ndarray
    """int64 (n_ids,): count of each tuple id (after the scale factor); id 0 is the empty tuple (count 0)."""
    ext_key: np.ndarray
    """int64 (n_ext,), ascending: ``t * max(n_attrs, 1) + a`` for every released t + {a} (t a tuple id, a an
    attribute not in t): the extension index."""
    ext_child: np.ndarray
    """int32 or int64 (n_ext,): the tuple id of t + {a} for each ``ext_key`` (always > 0)."""
    budgets: np.ndarray
    """int64 (n_attrs,): attribute budgets, the (scaled) 1-tuple counts; 0 for a value without a 1-tuple."""

    @property
    def n_attrs(self) -> int:
        return int(self.attr_column.shape[0])

    @property
    def n_ids(self) -> int:
        return int(self.counts.shape[0])


def scale_counts(counts: np.ndarray, factor: float | None) -> np.ndarray:
    """Released counts times ``aggregate_counts_scale_factor``, rounded up (SDS ``scale_aggregates_if_necessary``).

    SDS takes ``ceil(count * factor)``; we first round the product to 9 decimals so that floating-point noise
    (``30 * 0.1 = 3.0000000000000004``) does not add a unit. Counts >= 1 stay >= 1.
    """
    counts = np.asarray(counts, dtype=np.int64)
    if factor is None:
        return counts.copy()
    return np.ceil(np.round(counts.astype(np.float64) * float(factor), 9)).astype(np.int64)


def encode_release(release: Release, aggregate_counts_scale_factor: float | None = None) -> EncodedRelease:
    """Encode ``release`` for :func:`sample_records` (release-sized work, done once on the driver).

    Raises:
        ReleaseError: the release is inconsistent: a column index or value code out of range, columns not
            strictly ascending in a tuple, a count < 1, a duplicated tuple, or a k-tuple with a released
            (k-1)-sub-tuple missing (the release is not downward closed).
    """
    d = len(release.columns)
    r = release.reporting_length
    if len(release.domains) != d:
        raise ReleaseError(f"release has {d} columns but {len(release.domains)} domains")
    if r < 1:
        raise ReleaseError(f"release reporting_length must be >= 1, got {r}")
    sizes = np.array([len(dom) for dom in release.domains], dtype=np.int64)
    offset = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n_attrs = int(offset[-1])
    attr_column = np.repeat(np.arange(d, dtype=np.int32), sizes)
    attr_code = (np.arange(n_attrs, dtype=np.int64) - offset[attr_column]).astype(np.int32)
    base = max(n_attrs, 1)

    level_keys: list[np.ndarray] = [np.zeros(1, dtype=np.int64)]
    level_start: list[int] = [0]
    level_attrs: list[np.ndarray] = [np.zeros((1, 0), dtype=np.int64)]
    level_counts: list[np.ndarray] = [np.zeros(1, dtype=np.int64)]
    next_id = 1

    def lookup(attrs: np.ndarray) -> np.ndarray:
        """Ids of the tuples whose ascending attributes are the rows of ``attrs``; -1 where not released."""
        ids = np.zeros(attrs.shape[0], dtype=np.int64)
        ok = np.ones(attrs.shape[0], dtype=bool)
        for j in range(attrs.shape[1]):
            keys = level_keys[j + 1]
            q = ids * base + attrs[:, j]
            pos = np.minimum(np.searchsorted(keys, q), max(len(keys) - 1, 0))
            found = (keys[pos] == q) if len(keys) else np.zeros(len(q), dtype=bool)
            ok &= found
            ids = np.where(found, level_start[j + 1] + pos, 0)
        return np.where(ok, ids, -1)

    for k in range(1, r + 1):
        marginal = release.marginals.get(k)
        if marginal is None or len(marginal) == 0:
            cols = np.zeros((0, k), dtype=np.int64)
            vals = np.zeros((0, k), dtype=np.int64)
            cnts = np.zeros(0, dtype=np.int64)
        else:
            cols = np.asarray(marginal.columns, dtype=np.int64)
            vals = np.asarray(marginal.values, dtype=np.int64)
            cnts = np.asarray(marginal.counts, dtype=np.int64)
        if cols.shape != (len(cnts), k) or vals.shape != (len(cnts), k):
            raise ReleaseError(f"the {k}-tuples of the release do not have k = {k} columns and values")
        if len(cnts):
            if cols.min() < 0 or cols.max() >= d:
                raise ReleaseError(f"a {k}-tuple of the release has a column index outside 0..{d - 1}")
            if k > 1 and np.any(np.diff(cols, axis=1) <= 0):
                raise ReleaseError(f"a {k}-tuple of the release does not have strictly ascending columns")
            if np.any(vals < 0) or np.any(vals >= sizes[cols]):
                raise ReleaseError(f"a {k}-tuple of the release has a value code outside its column's domain")
            if cnts.min() < 1:
                raise ReleaseError(f"a {k}-tuple of the release has a count < 1")
        attrs = offset[cols] + vals
        prefix = lookup(attrs[:, :-1]) if k > 1 else np.zeros(len(cnts), dtype=np.int64)
        if np.any(prefix < 0):
            raise ReleaseError(
                f"the release is not downward closed: a {k}-tuple has a sub-tuple that is missing"
            )
        keys = prefix * base + attrs[:, -1]
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        if np.any(np.diff(keys) == 0):
            raise ReleaseError(f"the release holds a {k}-tuple twice")
        level_keys.append(keys)
        level_start.append(next_id)
        level_attrs.append(attrs[order])
        level_counts.append(cnts[order])
        next_id += len(keys)
    n_ids = next_id
    if n_ids * base >= 2**62:
        raise ReleaseError(f"release too large to encode ({n_ids} tuples x {n_attrs} attributes)")

    parents: list[np.ndarray] = []
    ext_attrs: list[np.ndarray] = []
    children: list[np.ndarray] = []
    for k in range(1, r + 1):
        attrs = level_attrs[k]
        child_ids = level_start[k] + np.arange(len(attrs), dtype=np.int64)
        for j in range(k):
            parent = lookup(np.delete(attrs, j, axis=1)) if k > 1 else np.zeros(len(attrs), dtype=np.int64)
            if np.any(parent < 0):
                raise ReleaseError(
                    f"the release is not downward closed: a {k}-tuple has a sub-tuple that is missing"
                )
            parents.append(parent)
            ext_attrs.append(attrs[:, j])
            children.append(child_ids)
    parent_all = np.concatenate(parents) if parents else np.zeros(0, dtype=np.int64)
    attr_all = np.concatenate(ext_attrs) if ext_attrs else np.zeros(0, dtype=np.int64)
    child_all = np.concatenate(children) if children else np.zeros(0, dtype=np.int64)
    ext_key = parent_all * base + attr_all
    order = np.argsort(ext_key, kind="stable")

    counts = scale_counts(np.concatenate(level_counts), aggregate_counts_scale_factor)
    counts[0] = 0
    budgets = np.zeros(n_attrs, dtype=np.int64)
    if len(level_attrs[1]):
        budgets[level_attrs[1][:, 0]] = counts[level_start[1] : level_start[1] + len(level_attrs[1])]
    id_dtype = np.int32 if n_ids < 2**31 else np.int64
    return EncodedRelease(
        n_columns=d,
        reporting_length=r,
        attr_column=attr_column,
        attr_code=attr_code,
        counts=counts,
        ext_key=ext_key[order],
        ext_child=child_all[order].astype(id_dtype),
        budgets=budgets,
    )


def percentile_type8(values: np.ndarray, percentile: float) -> np.ndarray:
    """Row-wise percentile of a 2-D array as statrs' ``Data::percentile`` (Hyndman-Fan type 8), SDS's choice.

    With n values sorted v_1 <= ... <= v_n and tau = percentile / 100: h = (n + 1/3) tau + 1/3; the result is
    v_1 if floor(h) <= 0, v_n if floor(h) >= n, else v_floor(h) + (h - floor(h)) (v_floor(h)+1 - v_floor(h)).
    """
    n = values.shape[1]
    tau = float(percentile) / 100.0
    h = (n + 1.0 / 3.0) * tau + 1.0 / 3.0
    hf = int(h)
    if hf <= 0 or tau == 0.0:
        return values.min(axis=1)
    if hf >= n or tau == 1.0:
        return values.max(axis=1)
    part = np.partition(values, (hf - 1, hf), axis=1)
    low = part[:, hf - 1]
    return low + (h - hf) * (part[:, hf] - low)


def sample_records(
    enc: EncodedRelease,
    budgets: np.ndarray,
    rng: np.random.Generator,
    *,
    use_synthetic_counts: bool = False,
    weight_selection_percentile: float = 95.0,
    target_number_of_records: int | None = None,
    synthetic_count_multiplier: int = 1,
    on_step: StepTrace | None = None,
) -> np.ndarray:
    """Synthesize records from the encoded release with the given attribute budgets (docs/design.md section 4.2).

    Args:
        enc: the release, from :func:`encode_release`.
        budgets: int64 (n_attrs,), units of each attribute this run may emit (docs/design.md section 4.2: the 1-tuple
            counts, here this partition's share of them).
        rng: the only source of randomness; the same generator state gives the same records.
        use_synthetic_counts: weigh by released count minus already synthesized count (docs/design.md section 4.2).
        weight_selection_percentile: percentile in [0, 100] of sub-combination counts beyond length R (SDS,
            "Differentially private aggregation and synthesis", section 4.2.2).
        target_number_of_records: emit exactly this many records, resetting budgets and synthetic counts each
            time the budgets run out (SDS); None emits until every budget is spent.
        synthetic_count_multiplier: a partition synthesizing 1/P of the data subtracts P x its own synthetic
            counts from the (whole-release) counts, i.e. compares count / P with its own counts; 1 is SDS.
        on_step: optional trace, called before each draw with (record attributes, candidate attributes,
            weights); weight 0 means not eligible.

    Returns:
        int32 array (n_records, d) of value codes, -1 where a record has no value in a column.
    """
    d = enc.n_columns
    r = enc.reporting_length
    attr_column, attr_code = enc.attr_column, enc.attr_code
    budgets = np.array(budgets, dtype=np.int64, copy=True)
    if budgets.shape != (enc.n_attrs,):
        raise ValueError(f"budgets must have shape ({enc.n_attrs},), got {budgets.shape}")
    if np.any(budgets < 0):
        raise ValueError("budgets must be >= 0")
    if target_number_of_records is not None and target_number_of_records < 0:
        raise ValueError(f"target_number_of_records must be >= 0, got {target_number_of_records}")
    initial_budgets = budgets.copy()
    mult = float(synthetic_count_multiplier)
    q = float(weight_selection_percentile)
    n_base = max(enc.n_attrs, 1)
    # a sentinel larger than any query keeps every searchsorted position in range
    ext_key = np.append(enc.ext_key, np.iinfo(np.int64).max)
    ext_child = np.append(enc.ext_child, 0).astype(enc.ext_child.dtype)
    # weight of each tuple id: its count, minus `mult` x its synthesized count with use_synthetic_counts
    initial_wid = enc.counts.astype(np.float64)
    wid = initial_wid.copy()
    grow_cache = _GrowCache(r)

    chunks: list[np.ndarray] = []
    chunk = np.full((_CHUNK_ROWS, d), -1, dtype=np.int32)
    n_in_chunk = 0
    n_records = 0
    while target_number_of_records is None or n_records < target_number_of_records:
        alive = np.flatnonzero(budgets > 0)
        if alive.size == 0:
            if target_number_of_records is None or not initial_budgets.any():
                break
            # SDS with a target: start over from the initial budgets and forget the synthetic counts
            budgets[:] = initial_budgets
            wid[:] = initial_wid
            alive = np.flatnonzero(budgets > 0)
        record: list[int] = []
        record_subsets: list[np.ndarray] = []
        # new_t: ids (times n_base) of the subsets T of the record (length <= R - 1) not yet looked up;
        # acc[c, j]: id of {alive[c]} + (j-th subset of the record), the columns in creation order
        new_t = np.zeros(1, dtype=np.int64)
        acc = np.zeros((alive.size, 0), dtype=ext_child.dtype)
        block = acc
        while True:
            if new_t.size:
                # one row of queries per subset T: consecutive look-ups stay in T's part of the index
                queries = new_t[:, None] + alive
                pos = ext_key.searchsorted(queries)
                block = np.where(ext_key[pos] == queries, ext_child[pos], 0).T
                eligible = block.all(axis=1)
                if not eligible.all():
                    # 4.2: some combination with the record is not released (this also removes the values of
                    # the columns already in the record: {x, c} with x, c in one column is never released)
                    alive, acc, block = alive[eligible], acc[eligible], block[eligible]
                    if alive.size == 0:
                        break
                acc = np.concatenate([acc, block], axis=1)
            if len(record) < r:
                # 4.2.1: the record itself is the last subset; weight = count(record + candidate)
                weights = wid[block[:, -1]]
                if use_synthetic_counts:
                    np.maximum(weights, 0.0, out=weights)
            else:
                # 4.2.2: percentile of the counts of every sub-combination (length <= R) with the candidate
                vals = wid[acc]
                weights = np.floor(percentile_type8(vals, q) + 0.5)
                if use_synthetic_counts:
                    weights[~(vals > 0).all(axis=1)] = 0.0
            if on_step is not None:
                on_step(np.array(record, dtype=np.int64), alive.copy(), weights.copy())
            cum = np.cumsum(weights)
            total = cum[-1]
            if not total > 0:
                break
            i = int(cum.searchsorted(rng.random() * total, side="right"))
            if i >= cum.size:  # rounding put the draw on the total: take the last positive weight
                i = int(np.flatnonzero(weights)[-1])
            x = int(alive[i])
            record.append(x)
            budgets[x] -= 1
            row = acc[i]
            if use_synthetic_counts:
                record_subsets.append(row)
            new_t = row[grow_cache.grow(len(record) - 1)].astype(np.int64) * n_base
            if r == 1:
                # no subset to extend: drop the values of x's column explicitly
                keep = attr_column[alive] != attr_column[x]
                alive, acc = alive[keep], acc[keep]
                if alive.size == 0:
                    break
        if not record:
            # nothing could be drawn although budget is left: no later record can differ, so stop
            break
        if use_synthetic_counts:
            # every sub-combination (length <= R) of the record, each once
            wid[np.concatenate(record_subsets)] -= mult
        rec = np.asarray(record, dtype=np.int64)
        chunk[n_in_chunk, attr_column[rec]] = attr_code[rec]
        n_in_chunk += 1
        n_records += 1
        if n_in_chunk == _CHUNK_ROWS:
            chunks.append(chunk)
            chunk = np.full((_CHUNK_ROWS, d), -1, dtype=np.int32)
            n_in_chunk = 0
    chunks.append(chunk[:n_in_chunk])
    return np.concatenate(chunks, axis=0)


class _GrowCache:
    """Which subsets of a record get extended by the next attribute (depends only on R and the step).

    The columns of ``acc`` list the subsets T of the record (length <= R - 1) in creation order: step 0 creates
    the empty set; drawing x at step s creates {x} + T for every listed T of length <= R - 2, in list order.
    ``grow(s)`` gives the column indices of those T, so the record itself is always the last new subset.
    """

    def __init__(self, reporting_length: int) -> None:
        self._r = reporting_length
        self._lengths = [np.zeros(1, dtype=np.int64)]
        self._grow: list[np.ndarray] = []

    def grow(self, step: int) -> np.ndarray:
        while len(self._grow) <= step:
            lengths = self._lengths[-1]
            idx = np.flatnonzero(lengths <= self._r - 2)
            self._grow.append(idx)
            self._lengths.append(np.concatenate([lengths, lengths[idx] + 1]))
        return self._grow[step]
