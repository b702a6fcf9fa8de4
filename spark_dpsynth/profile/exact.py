"""The post-processing of the DP exact-value step (docs/design.md section 2.8, "exact values off the grid" and
"heavy edge cells").

* :func:`exact_value_targets`: the measurements whose exact values the step counts.
* :func:`profile_with_exact_values`: a measurement revised by its released exact values (a code, or more points).
* :func:`edge_pieces`, :func:`edge_key`: the heavy first and last pieces of a measurement's range, counted in
  sub-intervals by the same step; :func:`profile_with_edges`: the range cut where their records end.

The step itself (the counts and their noise) is :func:`spark_dpsynth.mechanisms._profile.dp_exact_values`.

Privacy: post-processing of the step's noisy counts and of the profile; nothing here reads data or draws noise.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import numpy as np
from pyspark.sql import Column
from pyspark.sql import functions as F

from spark_dpsynth.profile.columns import ColumnType
from spark_dpsynth.profile.decide import ColumnProfile
from spark_dpsynth.profile.levels import SIGNAL_FALSE_POSITIVE, noise_level

__all__ = [
    "EDGE_MIN_SHARE",
    "EDGE_PIECES",
    "EDGE_STDS",
    "edge_key",
    "edge_pieces",
    "exact_value_targets",
    "profile_with_edges",
    "profile_with_exact_values",
]


def exact_value_targets(
    types: Mapping[str, ColumnType], profiles: Mapping[str, ColumnProfile]
) -> tuple[str, ...]:
    """The columns whose exact values the DP exact-value step counts (docs/design.md section 2.8): the integer
    and real columns the DP profile made measurements with at least 1/(2 b) of their records off its grid
    (``ColumnProfile.off_grid``: a density of 357.4, a five-digit code, or a real measurement; a column whose
    values are all grid points, such as whole numbers up to 9999, has been counted exactly already), and every
    measurement of numbers written as text (a ``string`` column on a numeric scale, :func:`with_text_numbers`),
    whose text values (NIST's ``N``, not applicable) only this step can release. Post-processing of the
    profile: public once it is released."""
    return tuple(
        c
        for c, p in profiles.items()
        if p.meaning == "measurement"
        and types[c].scale in ("integer", "real")
        and (p.off_grid or types[c].type == "string")
    )


def profile_with_exact_values(
    profile: ColumnProfile,
    values: tuple[str, ...],
    noisy: np.ndarray,
    n_bins: int,
    noise_std: float,
    numbers: tuple[float, ...] | None = None,
) -> ColumnProfile:
    """A measurement's profile revised by its released exact values (docs/design.md section 2.8).

    Post-processing only: ``values`` and ``noisy`` are the output of the DP exact-value step
    (:func:`spark_dpsynth.mechanisms._profile.dp_exact_values`).

    Args:
        profile: the column's measurement profile (:func:`profile_from_noisy`).
        values: the released exact values (their text, as the column reads as text), distinct.
        noisy: float64 (len(values),) their noisy counts, each above the step's threshold.
        n_bins: the number of quantile bins of a measurement (``DataConfig.dp_bins``).
        noise_std: the standard deviation of one noisy count, in records.
        numbers: each value read as a number (Spark's ``try_cast`` to double), NaN for a text value that is not
            a finite number (a ``string`` column's ``N``); default: ``float`` of each value.

    Returns:
        A *code* whose ``values`` are the released values when the records beyond them are within the noise of
        their count (at most 3 noise_std sqrt(values + 1), or 0.1% of the column's non-empty records: the rule
        of a code of the profile; a density that takes one value per area, a five-digit industry code); else the
        measurement with every released value holding at least 1/(2 n_bins) of the records as one more point
        (its mass taken out of the within-bin shape piece that held it), the rest binned as before (an amount
        that is mostly a few values keeps its rest); else ``profile`` unchanged. The text values (not numbers) of
        a measurement of numbers written as text are its ``passthrough`` categories; the records beyond the
        released values are counted among the numbers only (the profile's non-empty records are its numbers).
    """
    if profile.meaning != "measurement" or profile.bins is None or not len(values):
        return profile
    noisy = np.asarray(noisy, dtype=np.float64)
    parsed = np.array([float(v) for v in values] if numbers is None else list(numbers), dtype=np.float64)
    is_number = np.isfinite(parsed)
    texts = tuple(sorted(v for v, ok in zip(values, is_number, strict=True) if not ok))
    non_empty = max(profile.non_empty, 1.0)
    counted = float(noisy[is_number].sum())
    share = counted / non_empty
    half_bin = 1.0 / (2 * n_bins)
    rest = non_empty - counted
    if is_number.any() and rest <= max(
        3.0 * noise_std * math.sqrt(int(is_number.sum()) + 1.0), non_empty / 1000.0
    ):
        # numbers first, in value order, then the text values
        order = sorted(np.flatnonzero(is_number).tolist(), key=lambda i: parsed[i])
        return dataclasses.replace(
            profile,
            meaning="code",
            bins=None,
            point_share=min(share, 1.0),
            values=tuple(values[i] for i in order) + texts,
            reason=f"DP code: {len(values)} exact values released by the DP exact-value step hold about "
            f"{min(share, 1.0):.0%} of its records",
        )
    spec = profile.bins
    known = set(spec.points)
    new = [
        (float(x), float(c))
        for x, c, ok in zip(parsed, noisy, is_number, strict=True)
        if ok and c >= half_bin * non_empty and float(x) not in known
    ]
    if texts:
        spec = dataclasses.replace(spec, passthrough=tuple(sorted(set(spec.passthrough) | set(texts))))
        profile = dataclasses.replace(
            profile,
            bins=spec,
            reason=f"{profile.reason}, {len(texts)} text value(s) kept as categories",
        )
    if not new:
        return profile
    shape = [list(piece) for piece in spec.shape]
    for x, c in new:
        for piece in shape:
            if piece[0] <= x <= piece[1]:
                piece[2] = max(piece[2] - c, 0.0)
                break
    spec = dataclasses.replace(
        spec,
        points=tuple(sorted(known | {x for x, _ in new})),
        # no piece left: the profile saw nothing beyond these values, drawn evenly inside the bins
        shape=tuple(tuple(piece) for piece in shape if piece[2] > 0),
        lower=min(spec.lower, min(x for x, _ in new)),
        upper=max(spec.upper, max(x for x, _ in new)),
    )
    return dataclasses.replace(
        profile,
        bins=spec,
        point_share=min(profile.point_share + sum(c for _, c in new) / non_empty, 1.0),
        reason=f"{profile.reason}, {len(new)} exact value(s) off the grid kept",
    )


EDGE_MIN_SHARE = 0.01
"""A measurement's first or last interval piece of its within-bin shape that holds at least this share of its
non-empty records is refined by the DP exact-value step (:func:`edge_pieces`): on the profile's grid such a
piece is a whole cell (a tenth of a decade above 10,000: epoch seconds 1,400,000,000..1,499,999,999), and its
records drawn evenly over it would run far past the column's largest value."""
EDGE_PIECES = 100
"""At most this many equal sub-intervals of an edge piece (:func:`edge_pieces`)."""
EDGE_STDS = 8.0
"""An edge piece is cut into sub-intervals that each hold, on average, at least this many noise stds of the
step's counts (at most :data:`EDGE_PIECES`, at least 2: a piece too light for two is not refined)."""


def _piece_values(a: float, b: float, whole: bool) -> float:
    """The number of whole numbers of [a, b] (``whole``, and a and b whole numbers), else its width."""
    return b - a + 1.0 if _whole_piece(a, b, whole) else b - a


def _whole_piece(a: float, b: float, whole: bool) -> bool:
    """True when the piece [a, b] holds whole numbers: on a whole-number scale with whole bounds (a real column
    of whole numbers has pieces between its grid's points, cut where its range is: 1.1 .. 5.5)."""
    return whole and float(a).is_integer() and float(b).is_integer()


def _edge_indices(shape: Sequence[Sequence[float]]) -> tuple[int, int]:
    """(index of the shape's first piece, of its last) when each is an interval (a < b), else -1: the pieces at
    the range's two edges. An interval after single values (whole numbers 7..50 that stood out alone, then 51..52
    pooled) lies inside the range: cutting it would move the range's end past those values."""
    if not shape:
        return -1, -1
    last = len(shape) - 1
    return (0 if shape[0][0] < shape[0][1] else -1), (last if shape[last][0] < shape[last][1] else -1)


def edge_pieces(
    profile: ColumnProfile, whole: bool, noise_std: float
) -> tuple[tuple[float, float, int], ...]:
    """The edge pieces of a measurement that the DP exact-value step counts in sub-intervals (docs/design.md
    section 2.8): its within-bin shape's first and last pieces, when they are intervals (a < b; one when they
    are the same; an interval after single values is inside the range, not at its edge, :func:`_edge_indices`)
    that hold at least :data:`EDGE_MIN_SHARE` of its non-empty records and are wide enough to cut, each as
    ``(a, b, parts)``: ``parts`` equal sub-intervals (:func:`edge_key`), as many as hold
    :data:`EDGE_STDS` x ``noise_std`` records each on average, at most :data:`EDGE_PIECES` and at most the
    piece's whole numbers (``whole``: the integer and date scales, whose pieces are whole numbers), at least 2.
    Empty for a code, or when no edge piece qualifies. Post-processing of the noisy profile."""
    spec = profile.bins
    if profile.meaning != "measurement" or spec is None or noise_std <= 0:
        return ()
    first, last = _edge_indices(spec.shape)
    chosen = [spec.shape[k] for k in sorted({first, last} - {-1})]
    out = []
    for a, b, w, *step in chosen:
        # a lattice's piece (a step) holds only values that stood out together: nothing to cut
        if step or w < EDGE_MIN_SHARE * profile.non_empty:
            continue
        room = _piece_values(a, b, True) if _whole_piece(a, b, whole) else EDGE_PIECES
        parts = int(min(EDGE_PIECES, room, w // (EDGE_STDS * noise_std)))
        if parts >= 2:
            out.append((float(a), float(b), parts))
    return tuple(out)


def edge_key(
    x: Column, pieces: Sequence[tuple[int, float, float, int]], whole: bool
) -> tuple[Column, Column]:
    """(key, sub-interval) of the one edge piece of a column that holds ``x`` (a double), both null when none
    does: ``pieces`` are (key, a, b, parts) of :func:`edge_pieces`, and sub-interval i of [a, b] holds the
    values x with floor((x - a) parts / v) = i, v the piece's whole numbers (``whole``) or its width. Pieces
    may touch (a real column's first piece ends where its last begins): a value on the shared bound goes to
    the first, so that a record adds one to at most one sub-interval of the column (its L2 sensitivity 1)."""
    key: Column | None = None
    index: Column | None = None
    for k, a, b, parts in pieces:
        size = _piece_values(a, b, whole)
        i = F.floor((x - F.lit(a)) * F.lit(float(parts)) / F.lit(size))
        i = F.least(F.greatest(i, F.lit(0)), F.lit(parts - 1)).cast("int")
        inside = (x >= F.lit(a)) & (x <= F.lit(b))
        key = F.when(inside, F.lit(k)) if key is None else key.when(inside, F.lit(k))
        index = F.when(inside, i) if index is None else index.when(inside, i)
    if key is None or index is None:
        return F.lit(None).cast("int"), F.lit(None).cast("int")
    return key, index


def _sub_interval(a: float, b: float, parts: int, i: int, whole: bool) -> tuple[float, float]:
    """The values of sub-interval i of [a, b] (:func:`edge_key`): whole numbers [lo, hi], or [lo, hi] of
    the width."""
    size = _piece_values(a, b, whole)
    if _whole_piece(a, b, whole):
        lo = a + math.ceil(i * size / parts)
        hi = a + math.ceil((i + 1) * size / parts) - 1.0
        return float(lo), float(hi)
    return a + i * size / parts, a + (i + 1) * size / parts if i + 1 < parts else b


def profile_with_edges(
    profile: ColumnProfile,
    refined: Mapping[tuple[float, float], np.ndarray],
    whole: bool,
    noise_std: float,
    laplace: bool = False,
) -> ColumnProfile:
    """A measurement's edge pieces replaced by their sub-intervals' noisy counts (docs/design.md section 2.8).

    Post-processing only: ``refined`` maps each piece ``(a, b)`` of :func:`edge_pieces` to the noisy counts of
    its sub-intervals (float64, (parts,)), the output of the DP exact-value step
    (:func:`spark_dpsynth.mechanisms._profile.dp_exact_values`), each count's noise of std ``noise_std``
    (discrete Laplace when ``laplace``, else discrete Gaussian).

    A sub-interval stands out when its noisy count exceeds ``noise_std`` times the (1 - 0.001 / parts) quantile
    of the unit noise (a Bonferroni level over the piece's sub-intervals). On the range's lower edge (the
    first interval piece) the sub-intervals below the first that stands out are dropped, on its upper edge (the
    last) those above the last; the piece's weight is then split over the sub-intervals left in proportion
    to their positive noisy counts, and the range's ``lower`` / ``upper`` move to the first and last value
    left. A piece none of whose sub-intervals stands out is kept as it was.
    """
    spec = profile.bins
    if profile.meaning != "measurement" or spec is None or not refined:
        return profile
    first, last = _edge_indices(spec.shape)
    shape: list[tuple[float, ...]] = []
    lower, upper = spec.lower, spec.upper
    changed = 0
    for k, piece in enumerate(spec.shape):
        a, b, w = piece[:3]
        noisy = refined.get((a, b))  # never a lattice's piece (:func:`edge_pieces`)
        if noisy is None or k not in (first, last):
            shape.append(piece)
            continue
        noisy = np.asarray(noisy, dtype=np.float64)
        parts = len(noisy)
        level = noise_level(SIGNAL_FALSE_POSITIVE / parts, laplace)
        standing = np.flatnonzero(noisy > noise_std * level)
        if not len(standing):
            shape.append(piece)
            continue
        lo_i = int(standing[0]) if k == first else 0
        hi_i = int(standing[-1]) if k == last else parts - 1
        kept = np.clip(noisy[lo_i : hi_i + 1], 0.0, None)
        pieces = [
            (*_sub_interval(a, b, parts, lo_i + i, whole), float(f"{w * c / kept.sum():.6g}"))
            for i, c in enumerate(kept)
            if c > 0
        ]
        shape.extend(p for p in pieces if p[0] <= p[1])
        if k == first:
            lower = min(pieces[0][0], spec.edges[0])
        if k == last:
            upper = max(pieces[-1][1], spec.edges[-1])
        changed += 1
    if not changed:
        return profile
    spec = dataclasses.replace(spec, shape=tuple(shape), lower=lower, upper=upper)
    return dataclasses.replace(
        profile, bins=spec, reason=f"{profile.reason}, {changed} edge cell(s) cut in sub-intervals"
    )
