"""Type restoration: synthetic columns back in the input's types (docs/design.md section 2.8).

Every synthesizer emits one value per column as the release knows it: a string, and for a binned column the
label of its bin. :func:`restore_types` is the one function that turns that into the input's schema, driven
only by the manifest's ``column_types`` block (written by the mechanism; absent in older releases, which are
then returned unchanged):

* a **binned** column (scale ``integer``, ``real``, ``date`` or ``timestamp``) gets a value drawn uniformly
  inside its bin [lo, hi): reals uniformly, integers (and dates, in days) uniformly among the integers of
  [lo, hi), timestamps uniformly in seconds. The open bins use the configuration's public bounds
  (``lower``/``upper``) when given. Otherwise (:func:`open_bounds`) the bin ``<e0`` is drawn in an interval as
  wide as its neighbour, [e0 - (e1 - e0), e0), and ``>=e_m`` in [e_m, e_m + (e_m - e_(m-1))) (width 1 when
  there is one edge), but on the number scales never across 0 when every edge lies on one side of it: with e0 > 0 the bin ``<e0``
  is [max(0, e0 - (e1 - e0)), e0), with e_m < 0 the bin ``>=e_m`` is [e_m, min(0, e_m + (e_m - e_(m-1)))).
  Edges that are all positive say, as far as public information goes, that the column is a quantity (an
  amount, a count, an age, a weight); a value of the other sign would be invented, and the width of the
  neighbour alone drew Adult's ``capital_gain`` of 0 (the bin ``<1`` of edges 1, 2000, ..) in [-1998, 1).
  Edges only, never the data (docs/design.md section 2.8). A DP profile always gives its DP range as
  ``lower``/``upper``, so a measurement's values stay inside it; a real column marked ``integral`` draws whole
  numbers. A point label (``"=0"``) comes back as its value exactly. A ``passthrough`` code stays as it is,
  cast to the column's type (a string column keeps NIST's ``"N"``); any other label that is not a bin becomes
  null. Bin labels never reach the output;
* a **category** column is cast to its input type (``"39"`` back to the integer 39; a string stays);
* the columns keep the synthetic table's order, which is the input's (the release's column order);
* the **identifier columns** of the manifest's ``identifier_columns`` (left out of every measurement) are
  inserted at their input places, filled with fresh surrogate keys 1..N (:func:`with_surrogate_keys`).

Within-bin shape: a DP profile's bins carry the pieces of the column's range where its noisy counts stood out
(``shape``: (a, b, weight), post-processing of the profile, docs/design.md section 2.8); a value of such a bin
falls in one of the bin's pieces with probability proportional to its weight (a Walker alias table per bin,
one lookup per value), then uniformly in the piece (among its values a, a + step, ..., b for a lattice's
piece (a, b, weight, step): months counted in whole years come back as multiples of 12): the 7,688 of an
amount, the heaped 15,024 above 10,000 come back where the data holds them instead of anywhere in a bin as
wide as [7,688, 15,000). A bin without pieces (public bins, or nothing stood out in it) is drawn uniformly,
the maximum-entropy choice given only the bin's count: no shape is invented where none is measured. The draws
are utility randomness of post-processing, from Spark's ``rand`` seeded by the caller's seed and the column's
position: the same seed and partitioning give the same values.

Usage, for any synthesizer (one line on its output)::

    synthetic = restore_types(synthetic, release.manifest, seed=seed)

Spark writes every Parquet column as nullable; the manifest records each column's input nullability, and a
column that is not nullable has no empty cells in the release (docs/design.md section 2.8), so the synthesizer
writes none.

Privacy: reads the release's manifest only (post-processing, docs/design.md section 1.1).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_dpsynth.data.number_text import plain_number_text

__all__ = [
    "SURROGATE_PREFIX",
    "bin_intervals",
    "has_column_types",
    "open_bounds",
    "restore_types",
    "restore_value",
    "with_surrogate_keys",
]

_TYPE_SEED_STREAM = 0x7E5
"""Added to the caller's seed so that type restoration draws apart from the synthesizer's own streams."""
_PIECE_STREAM = 1 << 20
"""Added to a column's seed for the stream that picks a piece of its within-bin shape."""
_BIN_COLUMN = "__dpsynth_bin_"
"""Prefix of the temporary bin-number columns of :func:`restore_types` (dropped before it returns)."""
_UNIFORM_COLUMN = "__dpsynth_uniform_"
"""Prefix of the temporary columns of the uniforms the binned values are drawn with (dropped before it
returns)."""


_INTEGER_RANGES = {
    "tinyint": (-(2**7), 2**7 - 1),
    "smallint": (-(2**15), 2**15 - 1),
    "int": (-(2**31), 2**31 - 1),
    "bigint": (-(2**63), 2**63 - 1024),
}
"""The range of each integer type (bigint's top kept inside the doubles below 2^63): drawn values are clamped."""


SURROGATE_PREFIX = "syn-"
"""Prefix of the surrogate keys of a string identifier column: ``"syn-"`` and the row's number, zero-padded to
the width of the number of synthetic rows (``"syn-0042"`` among 1,000 rows)."""
_ROW_ID_COLUMN = "__dpsynth_row_id"


_NUMBER_SCALES = ("integer", "real")
"""The scales on which 0 bounds an open bin whose edges all lie on the other side of it (module docstring)."""


def has_column_types(manifest: Mapping[str, Any]) -> bool:
    """True when the release records its input's column types (releases made before them do not)."""
    return bool(manifest.get("column_types"))


def open_bounds(
    edges: Sequence[float], lower: float | None = None, upper: float | None = None, scale: str = "real"
) -> tuple[float, float]:
    """The interval ends of the two open bins of one column: (lo of ``<e0``, hi of ``>=e_m``).

    Args:
        edges: the bin edges e0 < .. < e_m (at least one).
        lower: the public lower bound, or None.
        upper: the public upper bound, or None.
        scale: the column's scale (``integer``, ``real``, ``date``, ``timestamp``): 0 is a natural bound of
            numbers only (on the date scales it is 1970-01-01, nothing special).

    Returns:
        ``lower``/``upper`` when given; otherwise the neighbour's width beyond the outer edge (1 with a single
        edge), cut at 0 when the edges are all on the other side of 0 (module docstring, docs/design.md
        section 2.8). From the edges and bounds only (public), never from data.
    """
    e = [float(x) for x in edges]
    first_width = e[1] - e[0] if len(e) > 1 else 1.0
    last_width = e[-1] - e[-2] if len(e) > 1 else 1.0
    if lower is not None:
        lo = float(lower)
    else:
        lo = e[0] - first_width
        if e[0] > 0 and scale in _NUMBER_SCALES:
            lo = max(0.0, lo)
    if upper is not None:
        hi = float(upper)
    else:
        hi = e[-1] + last_width
        if e[-1] < 0 and scale in _NUMBER_SCALES:
            hi = min(0.0, hi)
    return lo, hi


def bin_intervals(bins: Mapping[str, Any], scale: str = "real") -> dict[str, tuple[float, float]]:
    """label -> [lo, hi) of every bin of one column's ``column_types`` bins entry on ``scale``, open bins closed
    by :func:`open_bounds` (finite floats, lo < hi)."""
    edges = [float(e) for e in bins["edges"]]
    labels = [str(x) for x in bins["labels"]]
    lo, hi = open_bounds(edges, bins.get("lower"), bins.get("upper"), scale)
    bounds = [lo, *edges, hi]
    return {labels[i]: (bounds[i], bounds[i + 1]) for i in range(len(labels))}


def _draw(
    bin_no: Column, intervals: dict[str, tuple[float, float]], scale: str, u: Column, closed: bool
) -> Column:
    """A value drawn in bin number ``bin_no`` (1-based, in ``intervals``' order; see the module docstring), as a
    double; null when ``bin_no`` is null. ``closed``: a public upper bound closes the last bin (its integers include
    the bound)."""
    lo = F.element_at(F.array(*[F.lit(float(lo)) for lo, _ in intervals.values()]), bin_no)
    hi = F.element_at(F.array(*[F.lit(float(hi)) for _, hi in intervals.values()]), bin_no)
    if scale in ("integer", "date"):
        first = F.ceil(lo)
        # integers of [lo, hi): ceil(lo) .. ceil(hi) - 1; the last bin with a public upper bound includes it
        stop = F.ceil(hi) + (
            F.when((bin_no == F.lit(len(intervals))) & (F.floor(hi) == hi), F.lit(1)).otherwise(F.lit(0))
            if closed
            else F.lit(0)
        )
        count = F.greatest(stop - first, F.lit(1))
        return (first + F.floor(u * count)).cast("double")
    return lo + u * (hi - lo)


def _alias_table(weights: Sequence[float]) -> tuple[list[float], list[int]]:
    """Walker's alias table of ``weights`` (> 0), built by Vose's method (Vose 1991, "A linear algorithm for
    generating random numbers with a given distribution", IEEE TSE 17(9)): slot i keeps itself with probability
    ``prob[i]``, else gives ``alias[i]``; a slot chosen uniformly then gives i with probability weights[i] / sum."""
    n = len(weights)
    total = float(sum(weights))
    scaled = [float(w) * n / total for w in weights]
    prob, alias = [1.0] * n, list(range(n))
    small = [i for i, p in enumerate(scaled) if p < 1.0]
    large = [i for i, p in enumerate(scaled) if p >= 1.0]
    while small and large:
        s, g = small.pop(), large.pop()
        prob[s], alias[s] = scaled[s], g
        scaled[g] -= 1.0 - scaled[s]
        (small if scaled[g] < 1.0 else large).append(g)
    return prob, alias


def _shaped_draw(
    bin_no: Column,
    intervals: dict[str, tuple[float, float]],
    shape: Sequence[Sequence[float]],
    scale: str,
    u: Column,
    v: Column,
    closed: bool = False,
) -> Column | None:
    """A value drawn by the within-bin shape (``bins.shape``, module docstring) of bin number ``bin_no``: a piece
    of the bin chosen by its weight (an alias table per bin: one slot from ``u``, and the fraction of ``u``
    left over decides between the slot and its alias), then uniformly in the piece with ``v``, cut to the bin
    (on the integer scales its whole numbers, as :func:`_draw`'s: ``closed``, a public upper bound closes the
    last bin); null for a bin without pieces. None when the column has no shape."""
    if not shape:
        return None
    bounds = list(intervals.values())
    starts = [float(lo) for lo, _ in bounds]
    lows, highs, steps, probs, aliases, offsets, counts = [], [], [], [], [], [], []
    for k, (b_lo, b_hi) in enumerate(bounds):
        last = k == len(bounds) - 1
        if scale in ("integer", "date"):
            # the bin's whole numbers: ceil(lo) .. ceil(hi) - 1, the last bin's public upper bound included
            b_hi = b_hi if closed and last and math.floor(b_hi) == b_hi else math.ceil(b_hi) - 1.0
        inside = [
            _clipped(piece, b_lo, b_hi)
            for piece in shape
            if (float(piece[0]) >= starts[k] or k == 0) and (last or float(piece[0]) < starts[k + 1])
        ]
        inside = [piece for piece in inside if piece is not None]
        offsets.append(len(lows))
        counts.append(len(inside))
        if inside:
            prob, alias = _alias_table([w for _, _, w, _ in inside])
            lows += [a for a, _, _, _ in inside]
            highs += [b for _, b, _, _ in inside]
            steps += [step for _, _, _, step in inside]
            probs += prob
            aliases += [offsets[-1] + i + 1 for i in alias]  # 1-based, into the column's arrays
    if not lows:
        return None

    def array(values: Sequence[float], kind: str) -> Column:
        return F.array(*[F.lit(x).cast(kind) for x in values])

    count = F.element_at(array(counts, "int"), bin_no)
    slot_u = u * count.cast("double")
    slot = F.floor(slot_u).cast("int")
    index = F.element_at(array(offsets, "int"), bin_no) + F.least(slot, count - F.lit(1)) + F.lit(1)
    keep = (slot_u - slot.cast("double")) < F.element_at(array(probs, "double"), index)
    piece = F.when(keep, index).otherwise(F.element_at(array(aliases, "int"), index))
    a = F.element_at(array(lows, "double"), piece)
    b = F.element_at(array(highs, "double"), piece)
    if scale in ("integer", "date"):
        first = F.ceil(a)
        size = F.greatest(F.floor(b) - first + F.lit(1), F.lit(1))
        value = (first + F.floor(v * size)).cast("double")
    else:
        value = a + v * (b - a)
    if any(steps):
        # a lattice's piece: one of a, a + step, ..., b, each alike
        step = F.element_at(array(steps, "double"), piece)
        on = F.round((b - a) / step) + F.lit(1.0)
        value = F.when(step > F.lit(0.0), a + step * F.least(F.floor(v * on), on - F.lit(1.0))).otherwise(
            value
        )
    return F.when(count > F.lit(0), value)


def _clipped(piece: Sequence[float], lo: float, hi: float) -> tuple[float, float, float, float] | None:
    """(a, b, weight, step) of a within-bin shape's piece cut to its bin [lo, hi] (step 0: every value of
    [a, b]; a lattice's piece keeps only its values a + i step inside), or None when none is left."""
    a, b, w = (float(x) for x in piece[:3])
    step = float(piece[3]) if len(piece) > 3 else 0.0
    if step <= 0:
        return (max(a, lo), min(b, hi), w, 0.0) if max(a, lo) <= min(b, hi) else None
    first = a + math.ceil((lo - a) / step - 1e-9) * step if a < lo else a
    last = a + math.floor((min(b, hi) - a) / step + 1e-9) * step
    if first > last:
        return None
    return first, last, w, (step if last > first else 0.0)


def restore_value(value: Column, scale: str, type_name: str) -> Column:
    """The drawn number (double) on ``scale`` cast to the input type."""
    if scale == "date":
        return F.date_from_unix_date(value.cast("int"))
    if scale == "timestamp":
        ts = F.timestamp_micros(F.round(value * F.lit(1_000_000.0)).cast("long"))
        return ts.cast(type_name)
    if type_name in _INTEGER_RANGES:
        low, high = _INTEGER_RANGES[type_name]
        return F.least(F.greatest(F.round(value), F.lit(float(low))), F.lit(float(high))).cast(type_name)
    if scale == "integer" and type_name == "string":
        # a string column binned on integer edges (e.g. NIST's AGEP read without inference): "81", not "81.0"
        return F.round(value).cast("bigint").cast("string")
    if scale == "real" and type_name == "string":
        # numbers written as text: a whole number as "81" (as NIST writes it), the others in plain decimal notation
        whole = (value == F.floor(value)) & (F.abs(value) < F.lit(1e15))
        return F.when(whole, value.cast("bigint").cast("string")).otherwise(plain_number_text(value))
    return value.try_cast(type_name)


def bin_number(label: Column, t: Mapping[str, Any]) -> Column:
    """The 1-based number of a binned number column's bin label among the bins of ``t["bins"]`` (null for a
    point, a passthrough label or an empty cell)."""
    intervals = bin_intervals(t["bins"], str(t["scale"]))
    numbers = F.create_map(*[x for i, lab in enumerate(intervals) for x in (F.lit(lab), F.lit(i + 1))])
    return F.element_at(numbers, label.cast("string"))


def binned_value(
    label: Column, bin_no: Column, t: Mapping[str, Any], u: Column, piece: Column | None = None
) -> Column:
    """A binned number column's value in its output type for its bin label (module docstring): drawn in the bin
    ``bin_no`` (:func:`bin_number` of ``label``) with the uniform ``u`` (and ``piece``, the uniform that picks
    the within-bin shape's piece, when the bins carry one); an exact point or a passthrough label as itself,
    an empty cell empty. Inside a higher-order function's lambda, uniforms drawn there give one value per
    element (the redraws of :mod:`spark_dpsynth.synthesizers.conditions`)."""
    scale, type_name = str(t["scale"]), str(t["type"])
    bins = t["bins"]
    intervals = bin_intervals(bins, scale)
    closed = bins.get("upper") is not None
    label = label.cast("string")
    # a real column of whole numbers draws whole numbers (bins "integral", docs/design.md section 2.8)
    draw_scale = "integer" if scale == "real" and bins.get("integral") else scale
    drawn = _draw(bin_no, intervals, draw_scale, u, closed)
    shaped = None
    if piece is not None:
        shaped = _shaped_draw(bin_no, intervals, bins.get("shape") or (), draw_scale, piece, u, closed)
    if shaped is not None:
        drawn = F.coalesce(shaped, drawn)
    # an empty cell stays empty (least/greatest below would turn a null into a bound)
    value = F.when(label.isNull(), F.lit(None)).otherwise(restore_value(drawn, scale, type_name))
    # an exact point (a spike kept as its own category) comes back as itself
    for point, point_label in zip(bins.get("points") or (), bins.get("point_labels") or (), strict=True):
        value = F.when(
            label == F.lit(str(point_label)), restore_value(F.lit(float(point)), scale, type_name)
        ).otherwise(value)
    passthrough = [str(x) for x in bins.get("passthrough") or ()]
    if passthrough:
        value = F.when(label.isin(*passthrough), label.try_cast(type_name)).otherwise(value)
    return value


def restore_types(synthetic: DataFrame, manifest: Mapping[str, Any], *, seed: int | None = None) -> DataFrame:
    """The synthetic table with every column in its input type (module docstring).

    Args:
        synthetic: one column per release column (strings, bin labels for binned columns); other columns (e.g.
            a joined multi-value column) pass through unchanged.
        manifest: the release's manifest; its ``column_types`` block drives everything.
        seed: seed of the within-bin draws (None: Spark's random seed).

    Returns:
        The same columns in the same order, typed as ``column_types[c]["type"]``, with the identifier columns of
        the manifest's ``identifier_columns`` inserted at their input places (:func:`with_surrogate_keys`).
        Unchanged when the manifest has no ``column_types``.
    """
    types = manifest.get("column_types") or {}
    if not types:
        return synthetic
    typed = _restore_columns(synthetic, types, seed)
    identifiers = manifest.get("identifier_columns") or {}
    return with_surrogate_keys(typed, identifiers, manifest.get("multi_value_columns") or {})


def _restore_columns(synthetic: DataFrame, types: Mapping[str, Any], seed: int | None) -> DataFrame:
    """:func:`restore_types` without the identifier columns."""
    # Two selects (docs/design.md section 2.8): the first looks each binned label up once (its bin number, then an
    # array index) and draws its uniform; the second computes the value. In one select, every use of a bin's
    # bounds repeated the string lookup (four per value).
    looked_up: list[Column] = []
    out = []
    base = None if seed is None else int(seed) + _TYPE_SEED_STREAM
    for j, name in enumerate(synthetic.columns):
        col = F.col(f"`{name}`")
        t = types.get(name)
        if t is None:
            out.append(col)
            continue
        scale, type_name = str(t["scale"]), str(t["type"])
        bins = t.get("bins")
        if bins and scale != "category":
            bin_col, u_col = f"{_BIN_COLUMN}{j}", f"{_UNIFORM_COLUMN}{j}"
            looked_up += [
                bin_number(col, t).alias(bin_col),
                F.rand(None if base is None else base + j).alias(u_col),
            ]
            piece = None
            if bins.get("shape"):
                # a second stream for the piece of the within-bin shape, apart from every column's first
                piece = F.col(f"{u_col}p")
                looked_up.append(
                    F.rand(None if base is None else base + _PIECE_STREAM + j).alias(f"{u_col}p")
                )
            out.append(binned_value(col, F.col(bin_col), t, F.col(u_col), piece).alias(name))
        elif type_name == "string":
            out.append(col)
        else:
            # a category column of another type: its values are the input's values written as strings
            out.append(col.cast("string").try_cast(type_name).alias(name))
    if not looked_up:
        return synthetic.select(*out)
    return synthetic.select(*[F.col(f"`{c}`") for c in synthetic.columns], *looked_up).select(*out)


def with_surrogate_keys(
    synthetic: DataFrame, identifiers: Mapping[str, Any], multi_value_columns: Mapping[str, Any] | None = None
) -> DataFrame:
    """The synthetic table with each identifier column inserted, filled with fresh surrogate keys.

    Identifier columns are left out of every measurement (docs/design.md section 2.8); their keys depend on
    nothing in the data. Row r (1-based) of the synthetic table, counted partition by partition in the
    partitions' order and row by row within one, gets the key r: the integer r for an integer column, the string
    :data:`SURROGATE_PREFIX` + r zero-padded to the width of N for a string column. The keys are 1..N, distinct,
    deterministic given the synthetic table (the synthesizers' output is deterministic given their seed), and
    the same set whatever the number of partitions.

    Cost: N per partition is needed first, so the synthetic table's plan runs once more to count its rows per
    partition (P numbers reach the driver); only with identifier columns.

    Args:
        synthetic: the typed synthetic table (:func:`restore_types`), in the release's columns or with the
            multi-value columns joined.
        identifiers: the manifest's ``identifier_columns``: name -> {``type``, ``nullable``, ``before``}, where
            ``before`` is the attribute column it precedes in the input (None: last).
        multi_value_columns: the manifest's ``multi_value_columns``: an identifier placed before a multi-value
            column goes before its first binary column when the values are not joined.

    Returns:
        The columns of ``synthetic`` with the identifiers inserted (the input's schema, when ``synthetic`` holds
        every attribute column). Unchanged when there are no identifiers.

    Raises:
        InvalidParameterError: the synthetic table has more rows than the identifier's integer type can number.
    """
    from spark_dpsynth.errors import InvalidParameterError

    if not identifiers:
        return synthetic
    part = F.spark_partition_id()
    # One row per non-empty partition: at most P rows (the synthetic table's partitions) reach the driver.
    rows = synthetic.select(part.alias("p")).groupBy("p").count().collect()
    counts = {int(r["p"]): int(r["count"]) for r in rows}
    total = sum(counts.values())
    parts = max(counts, default=-1) + 1
    offsets, running = [], 0
    for p in range(parts):
        offsets.append(running)
        running += counts.get(p, 0)
    for name, entry in identifiers.items():
        _, high = _INTEGER_RANGES.get(str(entry["type"]), (0, 2**63 - 1))
        if total > high:
            raise InvalidParameterError(
                f"identifier column {name!r} ({entry['type']}) cannot number {total} synthetic rows (at most "
                f"{high}); declare it as a wider integer type or a string"
            )
    # monotonically_increasing_id is (partition << 33) + the row's index in its partition
    in_part = F.monotonically_increasing_id() - F.shiftleft(part.cast("long"), 33)
    offset = (
        F.element_at(F.array(*[F.lit(o) for o in offsets] or [F.lit(0)]), part + F.lit(1))
        if parts
        else F.lit(0)
    )
    numbered = synthetic.select("*", (offset.cast("long") + in_part + F.lit(1)).alias(_ROW_ID_COLUMN))
    row_id = F.col(_ROW_ID_COLUMN)
    width = len(str(max(total, 1)))
    keys: dict[str, Column] = {}
    for name, entry in identifiers.items():
        type_name = str(entry["type"])
        if type_name == "string":
            key = F.concat(F.lit(SURROGATE_PREFIX), F.lpad(row_id.cast("string"), width, "0"))
        else:
            key = row_id.cast(type_name)
        # never null; nullable in the schema when the input's column is (a `when` without `otherwise`)
        keys[name] = (F.when(row_id > F.lit(0), key) if entry.get("nullable", True) else key).alias(name)
    meta = multi_value_columns or {}
    columns = list(synthetic.columns)
    placed: dict[int, list[str]] = {}
    for name, entry in identifiers.items():
        before = entry.get("before")
        at = len(columns)
        if before is not None:
            matches = [
                i
                for i, c in enumerate(columns)
                if c == before or str((meta.get(c) or {}).get("column")) == before
            ]
            at = matches[0] if matches else len(columns)
        placed.setdefault(at, []).append(name)
    out: list[Column] = []
    for i in range(len(columns) + 1):
        out += [keys[n] for n in placed.get(i, [])]
        if i < len(columns):
            out.append(F.col(f"`{columns[i]}`"))
    return numbered.select(*out)
