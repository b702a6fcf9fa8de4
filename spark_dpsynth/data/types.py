"""Column types of the input: which columns are numbers, dates or timestamps, and their DP bins (docs/design.md
section 2.8).

* :func:`column_types` reads the input's schema (a public fact: Parquet, Delta and catalog tables carry it; for a
  CSV it is inferred or declared, see section 2.8) and the configuration, and gives each attribute column a
  *scale*: ``"integer"``, ``"real"``, ``"date"``, ``"timestamp"`` (discretized for counting) or ``"category"``.
* :func:`numeric_view` turns date and timestamp columns into numbers on their epoch scale (days since
  1970-01-01, seconds since 1970-01-01T00:00:00Z), the scale of their bin edges.
* The DP profile's public side: the grid of each scale (:func:`profile_points`, :func:`profile_grid`), the cell
  of a value (:func:`cell_key` on Spark, :func:`cells_of` on the driver), and :func:`profile_from_noisy`, which
  decides from a column's *noisy* histogram over that grid what it is (a code, or a measurement with DP bins
  inside its DP range and its frequent exact values as points). The noisy histogram itself is drawn by the
  mechanisms (:func:`spark_dpsynth.mechanisms._profile.dp_profiles`); :func:`apply_profiles` turns the decisions
  into column types and bins, :func:`meanings_manifest` into the manifest's ``column_meanings``.
* :func:`identifiers_manifest` is the manifest's ``identifier_columns`` block: the identifier columns' types and
  places (schema facts), from which type restoration writes surrogate keys.
* :func:`types_manifest` is the manifest's ``column_types`` block, the only input of type restoration
  (:mod:`spark_dpsynth.synthesizers._types`).

Privacy: nothing here draws noise. The functions read the schema, the configuration, public grids or already
noisy counts: post-processing of the DP profile (docs/design.md sections 2.3 and 2.8).
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_dpsynth.errors import InvalidParameterError
from spark_dpsynth.params import BinSpec, DataConfig

__all__ = [
    "BLOCK_LEVELS",
    "BLOCK_NOISE",
    "FINE_BLOCK_NOISE",
    "SCALES",
    "ColumnType",
    "MEANINGS",
    "ColumnProfile",
    "apply_profiles",
    "block_noise",
    "block_tree",
    "block_units",
    "candidate_grid",
    "EDGE_MIN_SHARE",
    "EDGE_PIECES",
    "edge_key",
    "edge_pieces",
    "exact_value_targets",
    "profile_with_edges",
    "profile_with_exact_values",
    "text_as_number",
    "column_types",
    "identifiers_manifest",
    "meanings_manifest",
    "numeric_view",
    "ProfileGrid",
    "cell_key",
    "cells_of",
    "profile_from_noisy",
    "profile_grid",
    "profile_points",
    "profile_targets",
    "scale_of",
    "text_number_candidates",
    "with_text_numbers",
    "types_manifest",
]

log = logging.getLogger(__name__)

SCALES = ("integer", "real", "date", "timestamp", "category")
"""How a column is counted: the first four are discretized into bins, ``category`` counts each value."""

_INTEGER_TYPES = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_REAL_TYPES = (T.FloatType, T.DoubleType, T.DecimalType)
_DATE_MIN, _DATE_MAX = -25567, 47482
"""The public range of the date grid, in days since 1970-01-01: 1900-01-01 .. 2100-01-01."""
_MANTISSAS = np.arange(10, 100, dtype=np.float64)
"""Two significant digits: the grid of numbers holds m x 10^(e-1) for m = 10..99 (1.0, 1.1, .., 9.9 x 10^e)."""
_DECADES = {"integer": (2, 18), "real": (-3, 15)}
"""Decades e (inclusive) of the two-digit positive grid points per scale: reals from 0.001 up to 9.9e15;
integers 1, 2, .., 99 and then from 100 up to 9.9e18 (so that every integer grid point is an integer). The same
points with a minus sign, and 0, complete the grid."""
_UNIT_POINTS = {"integer": 99, "real": 0}
"""Positive grid points 1, 2, .., 99 before the two-digit decades (integer scale only)."""


@dataclass(frozen=True)
class ColumnType:
    """One attribute column's type in the input and how it is counted."""

    name: str
    """Column name."""
    type: str
    """Spark SQL type (``simpleString``: ``int``, ``bigint``, ``double``, ``decimal(10,2)``, ``date``,
    ``timestamp``, ``string``, ...)."""
    nullable: bool
    """Nullability in the input schema."""
    scale: str
    """One of :data:`SCALES`."""

    @property
    def binned(self) -> bool:
        """True when the column is discretized for counting."""
        return self.scale != "category"


def scale_of(dtype: T.DataType) -> str:
    """The scale of a Spark type (:data:`SCALES`) before any configuration: ``integer`` (tinyint .. bigint),
    ``real`` (float, double, decimal), ``date``, ``timestamp`` (with or without time zone), else ``category``
    (strings, booleans, anything else). The evaluation's numeric columns use it too."""
    if isinstance(dtype, _INTEGER_TYPES):
        return "integer"
    if isinstance(dtype, _REAL_TYPES):
        return "real"
    if isinstance(dtype, T.DateType):
        return "date"
    if isinstance(dtype, T.TimestampType | T.TimestampNTZType):
        return "timestamp"
    return "category"


def column_types(schema: T.StructType, config: DataConfig) -> dict[str, ColumnType]:
    """The type and scale of every attribute column (``config.columns`` resolved), from the schema only.

    A numeric, date or timestamp column is binned unless it is in ``config.categorical``; a column with public
    bins (``config.bins``) is binned whatever its type (a string column of numbers: scale ``integer`` when every
    edge and bound is an integer, else ``real``). Multi-value columns and columns with a public domain
    (``config.domains``, whose values are strings of the codebook) are categories, and so are hash-bucketed
    columns (``config.hash_buckets``), whose type becomes ``string`` (their bucket labels).
    """
    assert config.columns is not None
    fields = {f.name: f for f in schema.fields}
    out = {}
    for name in config.columns:
        f = fields[name]
        scale = scale_of(f.dataType)
        if name in config.categorical or name in config.multi_value or name in config.public_domains:
            scale = "category"
        elif name in config.bins and scale == "category":
            b = config.bins[name]
            bounds = [*b.edges, *(x for x in (b.lower, b.upper) if x is not None)]
            scale = "integer" if all(float(x).is_integer() for x in bounds) else "real"
        # a multi-value column comes back as its joined values ("4.0|3.5"), a string whatever its input type
        # a hash-bucketed column comes back as its bucket labels ("bucket 07 of 64"): the release knows no value
        labels_only = name in config.multi_value or name in config.hash_buckets
        type_name = "string" if labels_only else f.dataType.simpleString()
        out[name] = ColumnType(name=name, type=type_name, nullable=f.nullable, scale=scale)
    return out


def _numeric(col: Column, scale: str) -> Column:
    if scale == "date":
        return F.unix_date(col.cast("date")).cast("double")
    if scale == "timestamp":
        return (F.unix_micros(col.cast("timestamp")) / F.lit(1_000_000.0)).cast("double")
    return col.cast("double")


def numeric_view(df: DataFrame, types: Mapping[str, ColumnType]) -> DataFrame:
    """``df`` with each date and timestamp column of ``types`` replaced by its epoch number (double).

    Dates become days since 1970-01-01, timestamps seconds since 1970-01-01T00:00:00Z: the scale of their bin
    edges. Other columns are unchanged (same order).
    """
    replace = {
        n: _numeric(F.col(f"`{n}`"), t.scale)
        for n, t in types.items()
        if t.scale in ("date", "timestamp") and n in df.columns
    }
    return df.withColumns(replace) if replace else df


_NUMBER_STARTS = tuple("0123456789+-.")
"""The first characters of a text that may read as a finite number (the others never do)."""


def text_as_number(text: Column) -> Column:
    """``text`` as a double (leading and trailing blanks left out), null when it is not a number. ``try_cast``
    only where the first character can start a number: Spark's cast of a text that is no number costs an
    exception each (docs/design.md section 2.8, "numbers written as text")."""
    text = F.trim(text)
    return F.when(F.substring(text, 1, 1).isin(*_NUMBER_STARTS), text.try_cast("double"))


TEXT_KINDS = ("small whole number", "other whole number", "number that is not whole", "other text")
"""The kinds of a non-empty text that :func:`text_kind_counts` counts, in its columns' order. A *small* whole
number has |x| <= :data:`MAX_CODE_RANGE`; a number is a finite double as :func:`text_as_number` reads it."""


def text_kind_counts(df: DataFrame, texts: Sequence[Column]) -> tuple[np.ndarray, np.ndarray]:
    """How many records of ``df`` hold each kind of :data:`TEXT_KINDS` in each of ``texts``, and how many distinct
    values of that kind.

    Args:
        df: the records.
        texts: string expressions over ``df``, null where the record has no value there.

    Returns:
        (records, values): two int64 arrays of shape (len(texts), 4). ``records``: per expression, the records
        whose value is a small whole number, another whole number, a finite number that is not whole, or another
        non-empty text (null values are in none); ``values``: the distinct texts of each kind. True counts: the
        caller noises them or keeps them from any release.

    One Spark job: each expression's distinct values with their number of records (an ``explode`` of
    (index, value) pairs and a ``groupBy``, combined on the map side), then each distinct value read as a number
    once, and the records summed per (index, kind); at most 4 len(texts) rows reach the driver. Reading every
    record's value as a number in one aggregation of 4 len(texts) sums would cast each value once per sum,
    several times slower (docs/design.md section 2.8, "numbers written as text").
    """
    records = np.zeros((len(texts), len(TEXT_KINDS)), dtype=np.int64)
    values = np.zeros_like(records)
    if not texts:
        return records, values
    pairs = df.select(
        F.explode(
            F.array(
                *[F.struct(F.lit(j).alias("j"), t.cast("string").alias("v")) for j, t in enumerate(texts)]
            )
        ).alias("p")
    ).select("p.j", "p.v")
    counted = pairs.where(F.col("v").isNotNull()).groupBy("j", "v").count()
    number = text_as_number(F.col("v"))
    finite = number.isNotNull() & ~F.isnan(number) & (F.abs(number) != F.lit(math.inf))
    whole = finite & (number == F.floor(number))
    small = whole & (F.abs(number) <= F.lit(float(MAX_CODE_RANGE)))
    kind = F.when(small, 0).when(whole, 1).when(finite, 2).otherwise(3)
    by_kind = counted.groupBy("j", kind.alias("k")).agg(
        F.sum("count").alias("n"), F.count(F.lit(1)).alias("v")
    )
    for r in by_kind.collect():
        records[int(r["j"]), int(r["k"])] = int(r["n"])
        values[int(r["j"]), int(r["k"])] = int(r["v"])
    return records, values


def candidate_grid(scale: str) -> np.ndarray:
    """The public, sorted candidate bin edges of a scale (float64, no duplicates); independent of any data.

    ``integer`` and ``real``: 0 and +-m x 10^(e-1) for m = 10..99 and the decades of :data:`_DECADES`: two
    significant digits over the whole range of the type, so that the grid needs no bounds from the data (the
    range of an int64 is too wide for a linear grid, and a bound from the data would leak). ``date`` and
    ``timestamp``: every day from 1900-01-01 to 2100-01-01 (in days, or in seconds for timestamps).
    """
    if scale in ("date", "timestamp"):
        days = np.arange(_DATE_MIN, _DATE_MAX + 1, dtype=np.float64)
        return days * 86400.0 if scale == "timestamp" else days
    low, high = _DECADES[scale]
    units = np.arange(1, _UNIT_POINTS[scale] + 1, dtype=np.float64)
    positive = np.concatenate([units] + [_MANTISSAS * 10.0 ** (e - 1) for e in range(low, high + 1)])
    positive = np.array([float(f"{x:.12g}") for x in positive])
    return np.concatenate([-positive[::-1], [0.0], positive])


def types_manifest(
    types: Mapping[str, ColumnType], bins: Mapping[str, BinSpec], sources: Mapping[str, str]
) -> dict[str, object]:
    """The manifest's ``column_types`` block: per attribute column, in order, its type, nullability, scale and,
    when binned, its bins (edges, labels, public bounds, ``source``: ``"config"`` or ``"dp_profile"``)."""
    out: dict[str, object] = {}
    for name, t in types.items():
        entry: dict[str, object] = {"type": t.type, "nullable": t.nullable, "scale": t.scale}
        if t.binned and name in bins:
            b = bins[name]
            entry["bins"] = {
                "edges": list(b.edges),
                "labels": list(b.interval_labels()),
                "lower": b.lower,
                "upper": b.upper,
                "passthrough": list(b.passthrough),
                "points": list(b.points),
                "point_labels": list(b.point_labels()),
                "integral": b.integral,
                "shape": [list(x) for x in b.shape],
                "source": sources.get(name, "config"),
            }
        out[name] = entry
    return out


IDENTIFIER_TYPES = ("tinyint", "smallint", "int", "bigint", "string")
"""The input types an identifier column may have: its surrogate keys are the numbers 1..N or strings."""


def identifiers_manifest(schema: T.StructType, config: DataConfig) -> dict[str, dict[str, object]]:
    """The manifest's ``identifier_columns`` block: per identifier column (``config.identifiers``, in input
    order) its type, nullability and ``before``: the first attribute column (``config.columns``, resolved) that
    follows it in the input, or None (it goes last). Schema facts only (docs/design.md section 2.8).

    Raises:
        InvalidParameterError: an identifier column whose type is not one of :data:`IDENTIFIER_TYPES` (its
            surrogate keys are integers or strings; a number, date or timestamp column that is no row key can be
            binned, a high-cardinality one hashed into buckets). Checked on the schema, before data is read.
    """
    assert config.columns is not None
    if not config.identifiers:
        return {}
    fields = list(schema.fields)
    names = [f.name for f in fields]
    attributes = set(config.columns)
    out: dict[str, dict[str, object]] = {}
    for i, f in enumerate(fields):
        if f.name not in config.identifiers:
            continue
        type_name = f.dataType.simpleString()
        if type_name not in IDENTIFIER_TYPES:
            raise InvalidParameterError(
                f"identifiers: column {f.name!r} has type {type_name}; an identifier column must be an integer or "
                f"string column ({', '.join(IDENTIFIER_TYPES)}), whose surrogate keys are 1..N or strings. A "
                "column of another type can be binned ([data.bins]) or hashed into buckets ([data.hash_buckets])"
            )
        before = next((n for n in names[i + 1 :] if n in attributes), None)
        out[f.name] = {"type": type_name, "nullable": f.nullable, "before": before}
    return out


# ---------------------------------------------------------------------------------------------------------------
# The DP profile of a numeric column: code or measurement, its range, its bins and its spikes (section 2.8)
# ---------------------------------------------------------------------------------------------------------------

MEANINGS = ("code", "measurement")
"""What a DP profile decides a numeric column is: a ``code`` (few exact values carry its records: counted as a
category, its values found by the mechanism's discovery like any string's) or a ``measurement`` (binned inside
its DP range, with its frequent exact values as points)."""

_UNIT_TOP = 9999
"""Whole numbers -9999 .. 9999 are points of the integer and real profile grids: a code column's values, and
years."""
_PROFILE_DECADES = {"integer": (4, 18), "real": (-3, 15)}
"""Decades e of the two-significant-digit points m x 10^(e-1) (m = 10..99) of the profile grids: integers from
10,000 (the whole numbers below are points already) to 9.9e18, reals from 0.001 to 9.9e15."""
_SIGNAL_FALSE_POSITIVE = 0.001
"""Chance that any cell without records of one column stands out of the noise (a Bonferroni bound over the
column's cells): the level of the profile's signal threshold."""
_WHOLE_FALSE_POSITIVE = 1e-5
"""Chance that a real column of whole numbers is read as one holding other numbers (its noisy count of non-whole
values above the (1 - this) quantile of its noise): stricter than :data:`_SIGNAL_FALSE_POSITIVE`, as that error puts every
synthetic value of the column off its lattice, where the opposite rounds the few non-whole values within the
noise (docs/design.md section 2.8)."""


def profile_points(scale: str) -> np.ndarray:
    """The public, sorted points of a scale's profile grid (float64, distinct); independent of any data.

    ``integer``: every whole number in [-9999, 9999], then +-m x 10^(e-1) for m = 10..99 from 10,000 to 9.9e18.
    ``real``: 0, +-m x 10^(e-1) for m = 10..99 from 0.001 to 9.9e15, and every whole number in [-9999, 9999].
    ``date``: every day from 1900-01-01 to 2100-01-01 (days since 1970-01-01); ``timestamp``: the start of each
    of those days, in seconds.
    """
    if scale in ("date", "timestamp"):
        return candidate_grid(scale)
    low, high = _PROFILE_DECADES[scale]
    two_digit = np.concatenate([_MANTISSAS * 10.0 ** (e - 1) for e in range(low, high + 1)])
    two_digit = np.array([float(f"{x:.12g}") for x in two_digit])
    units = np.arange(1, _UNIT_TOP + 1, dtype=np.float64)
    positive = np.unique(np.concatenate([units, two_digit]))
    return np.concatenate([-positive[::-1], [0.0], positive])


@dataclass(frozen=True)
class ProfileGrid:
    """The cells of one scale's profile grid, in value order.

    Cell 0 holds the values below the first point; cell 1 + 2i the point p_i exactly; cell 2 + 2i the open
    interval (p_i, p_(i+1)) (the last one: above the last point); cell ``size - 1`` the empty values (null,
    NaN, infinite). ``possible`` is False for the open cells that no value of the scale can fall in (between two
    consecutive whole numbers on the integer and date scales): they hold no record whatever the data, get no
    noise and are left out of every threshold."""

    points: np.ndarray
    possible: np.ndarray
    sizes: np.ndarray
    """Per cell, how many values it holds when values are spread evenly: on the integer and date scales its
    whole numbers (1 for a point cell), in seconds on the timestamp scale, its width on the real scale (0 for a
    point cell); 1 for the two cells beyond the points, 0 for the empty values. What a block's mass is spread
    by (:func:`_signal_weights`)."""
    scale: str = "real"

    def block_keys(self, cells: np.ndarray) -> np.ndarray:
        """The block of each cell: on the number scales its magnitude (the decade of |x| on its side of 0, or
        0); on the date scales 32 consecutive days (docs/design.md section 2.8)."""
        if self.scale in ("date", "timestamp"):
            return (cells // 64).astype(np.float64)
        p = self.points
        anchor = np.where(cells == 0, p[0], p[np.maximum((cells - 1) // 2, 0)])
        magnitude = np.floor(np.log10(np.maximum(np.abs(anchor), 1e-300)))
        return np.where(anchor == 0, 0.0, np.sign(anchor) * (magnitude + 400.0))

    @property
    def size(self) -> int:
        return 2 * len(self.points) + 2

    @property
    def null_cell(self) -> int:
        return self.size - 1

    def bounds(self, cell: int) -> tuple[float, float]:
        """[lo, hi] of a cell's values (the points themselves for a point cell; the open ends otherwise)."""
        p = self.points
        if cell == 0:
            return -math.inf, float(p[0])
        i, point = divmod(cell - 1, 2)
        if point == 0:
            return float(p[i]), float(p[i])
        return float(p[i]), float(p[i + 1]) if i + 1 < len(p) else math.inf


def profile_grid(scale: str) -> ProfileGrid:
    """The :class:`ProfileGrid` of a scale (``integer``, ``real``, ``date`` or ``timestamp``): its points
    (:func:`profile_points`), which cells can hold a value, and their sizes; public, independent of any data."""
    points = profile_points(scale)
    possible = np.ones(2 * len(points) + 2, dtype=bool)
    if scale in ("integer", "date"):
        gaps = np.diff(points)
        # open cell (p_i, p_(i+1)) holds a whole number only when the points are more than 1 apart
        possible[2 : 2 * len(points) : 2] = gaps > 1.0
    if scale == "timestamp":
        possible[1 : 2 * len(points) + 1 : 2] = True
    sizes = np.ones(2 * len(points) + 2, dtype=np.float64)
    gaps = np.diff(points)
    if scale == "real":
        sizes[1 : 2 * len(points) + 1 : 2] = 0.0
        sizes[2 : 2 * len(points) : 2] = gaps
    else:  # whole numbers (days, seconds) strictly between two points
        sizes[2 : 2 * len(points) : 2] = np.maximum(gaps - 1.0, 0.0)
    sizes[-1] = 0.0
    sizes[~possible] = 0.0
    return ProfileGrid(points=points, possible=possible, scale=scale, sizes=sizes)


def cell_key(x: Column, scale: str) -> tuple[Column, Column]:
    """(the largest profile point <= x or the point x itself, whether x equals it) as Spark expressions, built-in
    arithmetic only; the driver turns the pair into a cell (:func:`cells_of`). Null for an empty value."""
    missing = x.isNull() | F.isnan(x) | (F.abs(x) == F.lit(math.inf))
    if scale in ("date", "timestamp"):
        unit = 86400.0 if scale == "timestamp" else 1.0
        day = F.floor(F.least(F.greatest(x, F.lit(-1e13)), F.lit(1e13)) / F.lit(unit)) * F.lit(unit)
        return (
            F.when(missing, F.lit(None)).otherwise(day.cast("double")),
            F.when(missing, F.lit(None)).otherwise(x == day),
        )
    low, _ = _PROFILE_DECADES[scale]
    a = F.abs(x)
    e = F.floor(F.log10(F.greatest(a, F.lit(1e-300))))
    scale_e = F.pow(F.lit(10.0), e - F.lit(1))
    down = F.least(F.greatest(F.floor(a / scale_e + F.lit(1e-9)), F.lit(10.0)), F.lit(99.0)) * scale_e
    up_m = F.ceil(a / scale_e - F.lit(1e-9))
    up = F.when(up_m >= F.lit(100.0), F.pow(F.lit(10.0), e + F.lit(1))).otherwise(
        F.greatest(up_m, F.lit(10.0)) * scale_e
    )
    smallest = 10.0 ** (low - 1) * 10.0 if scale == "real" else 1.0
    whole = x == F.floor(x)
    small = a <= F.lit(float(_UNIT_TOP))
    # positive x: the largest point <= x (the two-digit one, or the whole number below x when x < 1000)
    pos = F.when(a < F.lit(smallest), F.lit(0.0)).otherwise(down)
    pos = F.when(a < F.lit(_UNIT_TOP + 1.0), F.greatest(pos, F.floor(a))).otherwise(pos)
    # negative x: minus the smallest point >= |x|
    neg = F.when(a <= F.lit(smallest), F.lit(smallest)).otherwise(up)
    neg = F.when(small, F.least(neg, F.ceil(a))).otherwise(neg)
    lower = F.when(whole & small, x).when(x >= F.lit(0.0), pos).otherwise(-neg)
    exact = F.abs(x - lower) <= F.abs(x) * F.lit(1e-12)
    return (
        F.when(missing, F.lit(None)).otherwise(lower.cast("double")),
        F.when(missing, F.lit(None)).otherwise(exact),
    )


def cells_of(grid: ProfileGrid, lower: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """The cell index of each (lower point, exact) key of :func:`cell_key` (lower NaN: the empty cell)."""
    p = grid.points
    out = np.full(len(lower), grid.null_cell, dtype=np.int64)
    ok = ~np.isnan(lower)
    tol = 1e-9 * np.maximum(np.abs(lower[ok]), 1.0)
    i = np.searchsorted(p, lower[ok] + tol, side="right") - 1
    at_point = (i >= 0) & (np.abs(p[np.maximum(i, 0)] - lower[ok]) <= tol) & exact[ok]
    cell = np.where(i < 0, 0, np.where(at_point, 1 + 2 * i, 2 + 2 * i))
    out[ok] = cell
    return out


@dataclass(frozen=True)
class ColumnProfile:
    """What the DP profile of one numeric column decided (docs/design.md section 2.8); DP outputs only."""

    name: str
    meaning: str
    """One of :data:`MEANINGS`."""
    bins: BinSpec | None
    """A measurement's bins: edges inside its DP range, ``lower``/``upper`` = the range, its spikes as
    ``points``; None for a code."""
    point_share: float
    """The noisy share of the non-empty records at points that stand out of the noise (post-processing)."""
    reason: str
    """One line: why this meaning (from the noisy shares, rounded; no count)."""
    non_empty: float = 0.0
    """The noisy number of the column's non-empty records (n' less the noisy count of its empty cells, >= 1):
    what the shares above are shares of (post-processing; never written)."""
    off_grid: bool = False
    """A measurement whose records between the grid's points (in its open cells) hold at least 1/(2 b) of them
    (b = ``dp_bins``): one value or many there, the profile cannot tell; its exact values are counted
    (:func:`exact_value_targets`). Post-processing of the noisy profile."""
    values: tuple[str, ...] | None = None
    """A code found by the DP exact values (:func:`profile_with_exact_values`): its released values, as the
    column's values read as text; they are its domain. None otherwise (a code's values are then found by the
    mechanism's discovery)."""

    def to_json(self) -> dict[str, object]:
        return {"meaning": self.meaning, "point_share": round(self.point_share, 3), "reason": self.reason}


MAX_CODE_RANGE = 100
"""A column of whole numbers whose DP range holds at most this many integers is a code (a category), whatever
share its single values hold: codes 0..41 of a country, ages, weekly hours (docs/design.md section 2.8)."""


def _whole_number_range(
    grid: ProfileGrid, noisy: np.ndarray, span: np.ndarray, open_limit: float
) -> tuple[float, float] | None:
    """[lo, hi] of ``span`` (the cells where the column's records are, trimmed of its thin tails) when its ends
    are whole-number points and its open cells (values that are not whole numbers, or whole numbers beyond 9999)
    hold a noisy count of at most ``open_limit`` records; else None. Post-processing of the noisy profile."""
    if len(span) == 0:
        return None
    first, last = int(span[0]), int(span[-1])
    if first % 2 == 0 or last % 2 == 0:
        return None
    inside = np.arange(first, last + 1)
    opens = inside[(inside % 2 == 0) & grid.possible[inside]]
    if float(noisy[opens].sum()) > open_limit:
        return None
    lo, hi = grid.bounds(first)[0], grid.bounds(last)[1]
    if not (float(lo).is_integer() and float(hi).is_integer()):
        return None
    return lo, hi


def _noise_level(tail: float, laplace: bool) -> float:
    """The (1 - ``tail``) quantile of a unit-std noise: discrete Laplace (``laplace``, its continuous form of std
    1: scale 1 / sqrt(2)) or Gaussian; a count stands out above its std times this."""
    from scipy.stats import laplace as laplace_dist
    from scipy.stats import norm

    return float(laplace_dist.isf(tail) / math.sqrt(2.0)) if laplace else float(norm.isf(tail))


_LATTICE_STEPS = (2, 3, 4, 5, 6, 10, 12, 20, 24, 25, 50, 60, 100, 1000)
"""The steps g of the lattices (the multiples of g) that a run of whole numbers is tested for where the profile
spreads its records evenly (:func:`_lattice`): pairs, quarters, fives and tens, dozens (months counted in whole
years), scores, hundreds (an occupation's major groups 0, 100, ..., 900), thousands. Public."""
_LATTICE_OFF_TAIL = 0.05
"""One-sided level at which the values off a lattice must not stand out of their noise together for the lattice
to be taken (:func:`_lattice`): no more than a 5% test can see off it."""
_LATTICE_OFF_SHARE = 0.25
"""A value off a lattice holds at most this share of what a value on it holds (the off values' mean noisy count
plus its noise at :data:`_LATTICE_OFF_TAIL`, against the on values' mean) for the lattice to be taken
(:func:`_lattice`): weekly hours heaped at 10, 15, ..., 30 with a third as many records on each value between
can pass the first test alone under a large noise, and would come back as multiples of 5 only (docs/design.md
section 2.8)."""


def _whole_members(
    grid: ProfileGrid, members: np.ndarray, values: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray] | None:
    """(the members that hold one whole number each, those numbers), or None when a lattice cannot be read from
    ``members``: no ``values`` (:func:`value_cells`), none of them among the members, or a member that holds
    whole numbers the profile does not tell apart (an open cell wider than one, beyond 9,999)."""
    if values is None or len(members) == 0:
        return None
    held = np.isin(members, values)
    if not held.any() or bool((grid.sizes[members[~held]] > 1.0).any()):
        return None
    return members[held], grid.points[(members[held] - 1) // 2]


def _lattice(cells: np.ndarray, at: np.ndarray, counts: np.ndarray, sigma: float, laplace: bool) -> int:
    """The step g of the coarsest lattice of whole numbers, the multiples of g (:data:`_LATTICE_STEPS`), that
    carries the records of a run's whole numbers, or 1: they may then lie on any of its values. Post-processing
    of the noisy profile (docs/design.md section 2.8).

    Survey tables store durations in months that are whole years beyond the first three (the EU LFS's months since
    a start: 0..35, then 36, 48, ..., 528) and occupations as major groups (0, 100, ..., 900): a run of such values
    spread evenly over its whole numbers came back as 437 months and occupation 523, which no record holds. The
    steps are tested from the finest up, each on the lattice found so far (g0, first 1): g, a multiple of g0, is
    taken when the noisy sum of the run's multiples of g0 that are not multiples of g does not stand out of its
    noise at the one-sided level :data:`_LATTICE_OFF_TAIL`, their mean plus that noise is at most
    :data:`_LATTICE_OFF_SHARE` of the multiples' mean, and the multiples of g hold more per value than the
    others by more than the noise of that difference (:func:`_sum_threshold`, at a Bonferroni level
    :data:`_SIGNAL_FALSE_POSITIVE` over the steps): a run spread evenly over its values, or too thin to tell,
    keeps them all.

    Args:
        cells, at: the run's cells that hold one whole number each and those numbers (:func:`_whole_members`).
        counts: float64 (len(cells),) their noisy counts.
        sigma: the noise std of one cell, in records; laplace: the cells' noise is discrete Laplace.
    """
    if len(cells) < 4:
        return 1
    tail = _SIGNAL_FALSE_POSITIVE / len(_LATTICE_STEPS)
    strict, strict_gaussian = _noise_level(tail, laplace), _noise_level(tail, False)
    loose, loose_gaussian = _noise_level(_LATTICE_OFF_TAIL, laplace), _noise_level(_LATTICE_OFF_TAIL, False)
    step = 1
    on = np.ones(len(cells), dtype=bool)
    for g in _LATTICE_STEPS:
        if g % step:
            continue
        multiple = on & (np.mod(at, g) == 0)
        off = on & ~multiple
        n_on, n_off = int(multiple.sum()), int(off.sum())
        if n_on == 0 or n_off == 0:
            continue
        s_on, s_off = float(counts[multiple].sum()), float(counts[off].sum())
        bound = float(_sum_threshold(n_off, sigma, loose, loose_gaussian))
        off_quiet = s_off <= bound and (s_off + bound) / n_off <= _LATTICE_OFF_SHARE * s_on / n_on
        # the multiples' sum less what an even spread over the lattice found so far would give them
        excess = s_on - s_off * n_on / n_off
        if off_quiet and excess > float(
            _sum_threshold(n_on + n_on**2 / n_off, sigma, strict, strict_gaussian)
        ):
            step, on = g, multiple
    return step


def _run_lattice(
    grid: ProfileGrid,
    members: np.ndarray,
    counts: np.ndarray,
    sigma: float,
    laplace: bool,
    values: np.ndarray | None,
) -> int:
    """:func:`_lattice` of a run of cells (``counts``: float64 (len(members),) their noisy counts), or 1 when no
    lattice can be read from it (:func:`_whole_members`)."""
    whole = _whole_members(grid, members, values)
    if whole is None:
        return 1
    cells, at = whole
    return _lattice(cells, at, counts[np.isin(members, cells)], sigma, laplace)


def _spread_evenly(
    grid: ProfileGrid,
    members: np.ndarray,
    amount: float,
    counts: np.ndarray,
    sigma: float,
    laplace: bool,
    values: np.ndarray | None,
    step: int = 1,
) -> np.ndarray:
    """float64 (len(members),) ``amount`` spread evenly over the values of ``members``: over their lattice when
    the run has one (:func:`_lattice`; ``step``, the lattice of the block the run lies in, when the run's own is
    1 or divides it), each of its values the same; else each cell's share in proportion to its ``sizes`` (an
    open cell of 999 whole numbers takes 999 times a point's; all alike when no member has a size). ``counts``:
    the members' noisy counts. Post-processing."""
    out = np.zeros(len(members))
    if len(members) == 0:
        return out
    whole = _whole_members(grid, members, values)
    if whole is not None:
        cells, at = whole
        own = _lattice(cells, at, counts[np.isin(members, cells)], sigma, laplace)
        # the block's lattice where the run's own is finer (a few values of it were too few to tell 12 from 4)
        g = step if step % own == 0 else own
        on = cells[np.mod(at, g) == 0] if g > 1 else cells[:0]
        if len(on):
            out[np.isin(members, on)] = amount / len(on)
            return out
    size = grid.sizes[members]
    total = float(size.sum())
    return amount * size / total if total > 0 else np.full(len(members), amount / len(members))


def value_cells(grid: ProfileGrid, integral: bool) -> np.ndarray | None:
    """The cells of ``grid`` that each hold one whole number of at most 9,999 in magnitude (the point cells of the
    integer scale there; of the real scale, its whole-number points, when ``integral``: a real column of whole
    numbers), sorted; None on the other scales and for a real column that is not integral. What
    :func:`_lattice` reads. Public: from the grid alone."""
    if not (grid.scale == "integer" or (grid.scale == "real" and integral)):
        return None
    p = grid.points
    whole = (p == np.floor(p)) & (np.abs(p) <= _UNIT_TOP)
    return 1 + 2 * np.flatnonzero(whole)


def _signal_weights(
    grid: ProfileGrid,
    rest: np.ndarray,
    cells: np.ndarray,
    threshold: float,
    sums: _Sums,
    gaussian: float,
    block_gaussian: float,
    laplace: bool = False,
    values: np.ndarray | None = None,
) -> tuple[np.ndarray, list[np.ndarray]]:
    """The noisy counts of the cells that stand out alone, plus, in each block of magnitude whose summed noisy
    count stands out (:func:`_standing_blocks`), the rest of that sum spread evenly over the block's values
    (:func:`_spread_evenly`: over the lattice its whole numbers lie on, when ``values`` are given and it has one;
    else each cell's share in proportion to its ``sizes``), within the parts of the block that stand out when it is
    halved, and halved again, while the amount is large enough to tell the halves apart, or the halves are measured
    blocks (searched or fine, :func:`block_tree`) (both halves standing out: the amount split by their noisy sums;
    one: the other keeps its own noisy sum, a measured one less one std of its noise; neither, when they are fine
    blocks and one holds more than :data:`_FINE_SPLIT` stds: the amount split by their positive sums); where an
    amount is finally spread over a part, the part's cells that stand out at a Bonferroni level over the part alone
    take it first when they hold at least :data:`_LOCAL_SHARE` of it; zero elsewhere. ``laplace``: the cells' noise
    is discrete Laplace (the part's level is its quantile); ``values``: the cells that hold the column's whole
    numbers (:func:`value_cells`). Also returns the runs of cells that stood out (blocks and halves), in the order
    found (post-processing)."""
    weights = np.zeros_like(rest)
    alone = cells[rest[cells] > threshold]
    weights[alone] = rest[alone]

    step = 1  # the lattice of the standing block being spread (_lattice): a part too small to tell keeps it

    def even(members: np.ndarray, amount: float) -> None:
        # the lattice is read from every record of the part, those of the values taken out alone too
        weights[members] += _spread_evenly(
            grid, members, amount, rest[members], sums.sigma, laplace, values, step
        )

    def place(members: np.ndarray, amount: float) -> None:
        # the cells of the part that stand out of their noise at a level for this part's cells alone (a
        # Bonferroni level over len(members), not the grid's: the part's records are known to lie here) take
        # the amount first, up to their noisy counts; what is left is spread evenly (the years 2011..2013 each
        # held too few records to stand out among the grid's cells, and their records were spread up to 2120)
        if len(members) > 1 and amount > 0:
            current = rest[members] - weights[members]
            local = sums.sigma * _noise_level(_SIGNAL_FALSE_POSITIVE / len(members), laplace)
            up = current > local
            held = float(current[up].sum())
            if up.any() and held >= _LOCAL_SHARE * amount:
                taken = min(held, amount)
                weights[members[up]] += current[up] * taken / held
                amount -= taken
        if amount > 0:
            even(members, amount)

    def spread(members: np.ndarray, amount: float) -> None:
        # While the amount is at least twice what the members' sum must pass to stand out (so that even halves
        # would each stand out), halve the members: a half that stands out gets its share and is halved in
        # turn, a half that does not gets its own noisy excess (if positive) evenly; the amount is spread evenly
        # over the values of the parts that are left (a thin tail of amounts between 10,000 and 900,000 is not
        # spread up to 999,999). Halves whose records the profile measured as blocks are always tested: their
        # noise does not add up over their cells, and a half that does not stand out keeps its own excess.
        while len(members) >= 2:
            current = rest - weights
            # measured halves are blocks of the tree, tested at the blocks' level (:func:`_block_level`)
            measured = sums.halves_measured(members)
            if not measured and amount <= 2.0 * sums.left(members, current, gaussian)[1]:
                break
            halves = (members[: len(members) // 2], members[len(members) // 2 :])
            level = block_gaussian if measured else gaussian
            left = [sums.left(h, current, level) for h in halves]
            excess = [e for e, _ in left]
            stands = [e > needed for e, needed in left]
            stood.extend(h for h, up in zip(halves, stands, strict=True) if up)
            if all(stands):
                total = excess[0] + excess[1]
                spread(halves[0], amount * excess[0] / total)
                members, amount = halves[1], amount * excess[1] / total
            elif any(stands):
                i = 1 - stands.index(True)
                other = halves[i]
                # a measured half keeps its excess beyond one std of its noise (shrunk: a half without records
                # keeps its positive noise otherwise, spread evenly over it, and the range ran past the data)
                shrink = left[i][1] / level if measured else 0.0
                kept = min(max(excess[i] - shrink, 0.0), amount)
                if kept > 0:
                    place(other, kept)
                members, amount = halves[stands.index(True)], amount - kept
            elif measured and sums.fine(halves[0]) and any(e > _FINE_SPLIT * n / level for e, n in left):
                # neither fine half stands out, but one holds more than _FINE_SPLIT stds of its noise (a
                # block's rest beyond the values that stood out alone carries the noise of every value taken
                # out): the amount goes to the halves in proportion to their positive counts, each placed
                # further in turn (spread evenly over 1984..2124, the rest of the years 1984..2013 was drawn up
                # to 2120); when neither does, evenly over both (a thin tail, as person weights of 100..661)
                kept = [max(e, 0.0) for e, _ in left]
                total = kept[0] + kept[1]
                if kept[0] > 0:
                    spread(halves[0], amount * kept[0] / total)
                if kept[1] <= 0:
                    return
                members, amount = halves[1], amount * kept[1] / total
            else:
                break
        place(members, amount)

    stood: list[np.ndarray] = []
    for members in _standing_blocks(grid, rest, cells, sums, block_gaussian):
        stood.append(members)
        amount = sums.left(members, rest - weights, block_gaussian)[0]
        if amount > 0:
            step = _run_lattice(grid, members, rest[members], sums.sigma, laplace, values)
            spread(members, amount)
    return weights, stood


def _trimmed(signal: np.ndarray, rest: np.ndarray, tail: float) -> np.ndarray:
    """``signal``'s first and last cell moved inwards to the ``tail`` and 1 - ``tail`` levels of the running
    noisy sum over its span (made non-decreasing): a range that errs inside the data, never beyond it; the
    records of the two tails are drawn inside it (post-processing). Empty when the span holds no mass."""
    if len(signal) == 0:
        return signal
    first, last = int(signal[0]), int(signal[-1])
    cdf = np.maximum.accumulate(np.cumsum(rest[first : last + 1]))
    if cdf[-1] <= 0:
        return signal[:0]
    lo = first + int(np.searchsorted(cdf, tail * cdf[-1], side="left"))
    hi = first + int(np.searchsorted(cdf, (1.0 - tail) * cdf[-1], side="left"))
    return signal[(signal >= lo) & (signal <= hi)] if lo <= hi else signal[:0]


def _inside_spikes(
    span: np.ndarray,
    present: np.ndarray,
    standing: np.ndarray,
    heavy: float,
    sums: _Sums,
    gaussian: float,
    stood: list[np.ndarray],
) -> np.ndarray:
    """``span`` (cells in value order where the profile places the column's records) without its cells beyond
    the outermost value that stands out alone (``standing``) on either side, when that value holds at least
    ``heavy`` records (a spike: a top or bottom code) and the noisy sum of those cells does not stand out of its
    noise (:func:`_sum_threshold`; docs/design.md section 2.8). A block of magnitude spread evenly
    (:func:`_signal_weights`) ends at the block's edge, not at the data's: NIST's poverty ratio, whose largest
    value 501 holds about a third of its records, was drawn up to 658. A side where a block or half stood out
    in :func:`_signal_weights` (``stood``) is never empty: the sum of the cells next to a spike
    carries the noise of every cell, a measured block's does not. Post-processing of the noisy profile."""
    if len(span) == 0 or len(standing) == 0:
        return span

    def empty_beyond(edge: int, beyond: np.ndarray) -> bool:
        if len(beyond) == 0 or present[edge] < heavy:
            return False
        # a block or half that stood out on that side of the spike: records are there
        above = beyond[0] > edge
        if any((m[0] > edge) if above else (m[-1] < edge) for m in stood):
            return False
        # every cell between the spike and the span's end, those the span leaves out as well
        if above:
            run = sums.cells[(sums.cells > edge) & (sums.cells <= beyond[-1])]
        else:
            run = sums.cells[(sums.cells >= beyond[0]) & (sums.cells < edge)]
        value, needed = sums.left(run, present, gaussian)
        return value <= needed

    top, bottom = int(standing[-1]), int(standing[0])
    hi = top if empty_beyond(top, span[span > top]) else span[-1]
    lo = bottom if empty_beyond(bottom, span[span < bottom]) else span[0]
    return span[(span >= lo) & (span <= hi)]


_GAP_MIN_CELLS = 8
"""The search for where the records below a top code end (:func:`_gap_to_top_code`) halves no part of fewer
than twice this many cells: it tests such a part whole, last. Halved down to single cells, a value or two
holding records within the noise of a few cells did not stand out alone (months 10..12 beside 99, each 3.7
noise stds) and was cut with the empty cells above it."""


def _gap_to_top_code(
    span: np.ndarray,
    present: np.ndarray,
    standing: np.ndarray,
    heavy: float,
    sums: _Sums,
    stood: list[np.ndarray],
    laplace: bool = False,
    values: np.ndarray | None = None,
) -> np.ndarray:
    """The empty run below a top code: sorted cells between the largest value that stands out alone
    (``standing``) and the next one below it, cut down to where the records below the top code end; empty when
    nothing is cut. Post-processing of the noisy profile (docs/design.md section 2.8).

    Survey tables write "not applicable" as 9, 99, 999 or 9999, above answers that end far below it (the EU
    LFS's months 1..12 and 99, years 1945..2014 and 9999); the thin rest spread evenly between them came back
    as months 13..98 and years up to 2089 that no record holds. The largest standing value is a top code when
    it holds at least ``heavy`` records and the column's records end there (``span``, the cells where the
    profile places them, ends at it: :func:`_inside_spikes`). The search goes from it down: the upper half of
    what is left of the run is cut when its noisy sum does not stand out of its noise (:func:`_sum_threshold`,
    at a Bonferroni level :data:`_SIGNAL_FALSE_POSITIVE` over the search's tests; with ``values``, the
    whole-number points are tested alone as well, and each cell at a level for the run's cells alone), and the
    search goes on in the lower half; when the upper half stands out, inside it (a binary search for where the
    last records lie); the part left when a half would hold fewer than :data:`_GAP_MIN_CELLS` cells is tested
    whole, last. The run starts above the end of every block or half
    that stood out in :func:`_signal_weights` (``stood``) and ends inside it: records lie somewhere in such a
    part (the LFS's months since a start, multiples of 12 with about 200 records each up to 528, stand out in
    the half 325..549 and in no smaller part). A bottom code is left alone: the bottom code of a quantity is
    its zero (an amount, hours of overtime), whose thin values above stand out only together, beyond this
    test's power at a small epsilon (a capital loss's few records spread over 1..1,886 would collapse onto the
    values near 1,900).

    Args:
        span: the cells where the profile places the column's records, in value order.
        present: float64 (grid.size,) the noisy counts; standing: the cells that stand out alone, sorted.
        heavy: the records a spike holds at least (1/(2 b) of the non-empty records).
        sums: the run sums of the profile; stood: the runs that stood out in :func:`_signal_weights`.
        laplace: the cells' noise is discrete Laplace (a one-cell test's level is its quantile).
        values: the cells that can hold one of the column's values (a real column of whole numbers: its
            whole-number points), or None for every cell.
    """
    if len(standing) < 2 or len(span) == 0:
        return standing[:0]
    a, b = int(standing[-2]), int(standing[-1])
    # records lie somewhere in a block or half that stood out: the search starts above the end of any in the run
    a = max([a] + [int(m[-1]) for m in stood if a < int(m[-1]) < b])
    run = sums.cells[(sums.cells > a) & (sums.cells < b)]
    if present[b] < heavy or len(run) == 0 or int(span[-1]) > b:
        return standing[:0]
    # From the top code down: the upper half of the part where the last records lie is cut when it does not
    # stand out, and the search goes on in the lower half; when it stands out, inside it. The part left when a
    # half would hold fewer than _GAP_MIN_CELLS cells is tested whole, last. A part stands out when its sum
    # does (every cell, read through the measured blocks it holds; and the whole numbers alone: the noise of a
    # real column's other cells swamps a short run of them), or one of its cells does at a level for the run's
    # cells alone (the part's test of _signal_weights: hours of 70 and 80 beside thin values up to 78, below a
    # code 99). The sums at a Bonferroni level over the search's tests, the cells over the run's cells (the
    # parts tested do not overlap).
    halvings = max(math.ceil(math.log2(len(run) / _GAP_MIN_CELLS)), 0) + 1
    tail = _SIGNAL_FALSE_POSITIVE / (halvings * (1 if values is None else 2))
    gaussian = _noise_level(tail, False)
    level = _noise_level(tail, laplace)
    cells = run if values is None else values[(values > a) & (values < b)]
    local = sums.sigma * _noise_level(_SIGNAL_FALSE_POSITIVE / max(len(cells), 1), laplace)

    def stands(part: np.ndarray) -> bool:
        value, needed = sums.left(part, present, gaussian)
        if value > needed:
            return True
        inside = cells[(cells >= part[0]) & (cells <= part[-1])]
        if len(inside) and bool((present[inside] > local).any()):
            return True
        if values is None or len(inside) == 0:
            return False
        return float(present[inside].sum()) > float(_sum_threshold(len(inside), sums.sigma, level, gaussian))

    # the last records lie in run[low:high]: a binary search from the top code down
    low, high = 0, len(run)
    while high - low >= 2 * _GAP_MIN_CELLS:
        middle = (low + high) // 2
        if stands(run[middle:high]):
            low = middle
        else:
            high = middle
    if high > low and not stands(run[low:high]):
        high = low
    return run[high:]


def _moved_inside(rest: np.ndarray, sizes: np.ndarray, before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """``rest`` with the mass of the cells of ``before`` that ``after`` no longer holds moved onto the cells of
    ``after`` that shared its even spread (the same mass per value as the nearest cut cell, :func:`_signal_weights`)
    in proportion to their sizes: the records a block's even spread put beyond the range are drawn inside it, in
    the part of the block they came from; with no such cell, they are dropped. Post-processing."""
    out = rest.copy()
    if len(after) == 0:
        return out
    for cut in (before[before > after[-1]], before[before < after[0]][::-1]):
        if len(cut) == 0:
            continue
        moved = float(out[cut].sum())
        out[cut] = 0.0
        nearest = cut[0]
        if moved <= 0 or sizes[nearest] <= 0:
            continue
        per_value = rest[nearest] / sizes[nearest]
        size = sizes[after]
        with np.errstate(divide="ignore", invalid="ignore"):
            same = (size > 0) & (out[after] > 0) & (np.abs(out[after] / size - per_value) <= 1e-9 * per_value)
        members = after[same]
        if len(members):
            out[members] += moved * sizes[members] / float(sizes[members].sum())
    return out


def _sum_threshold(
    cells: np.ndarray | float, sigma: float, level: float, gaussian: float
) -> np.ndarray | float:
    """The level a sum of the noisy counts of ``cells`` cells must pass to stand out of its noise: sigma
    sqrt(cells) x ``gaussian`` (the Gaussian quantile of the profile's false-positive rate per cell, equal to
    ``level`` when the noise is Gaussian), and never below one cell's threshold sigma x ``level`` (Laplace
    noise's heavier tail matters for a sum of few cells; a sum of many is close to Gaussian, by the central
    limit theorem)."""
    return sigma * np.maximum(np.sqrt(cells) * gaussian, level)


_BLOCK_DEPTH = 3
"""A block of magnitude whose noisy sum does not stand out is halved, and its halves again, down to this many
times (to an eighth of a decade): a tail spread thinly over a decade is found in the part of it where it lies
(person weights or poverty ratios spread over hundreds of values can stand out in no decade; docs/design.md
section 2.8)."""


def _block_level(grid: ProfileGrid) -> float:
    """The Gaussian quantile a block's noisy sum must pass, in units of its noise std (:func:`_sum_threshold`):
    Phi^-1(1 - 0.001 / B), B the number of blocks :func:`_standing_blocks` may test on ``grid`` (each block of
    magnitude and its halves down to :data:`_BLOCK_DEPTH`), so that the chance that any block without records
    stands out is at most 0.1% (a Bonferroni bound over the blocks; the cells have their own). The fine blocks
    are not searched, only read inside a block that stood out (:func:`_signal_weights`). Public."""
    from scipy.stats import norm

    cells = np.flatnonzero(grid.possible[: grid.null_cell])
    blocks = len(np.unique(grid.block_keys(cells))) * (2 ** (_BLOCK_DEPTH + 1) - 1)
    return float(norm.isf(_SIGNAL_FALSE_POSITIVE / max(blocks, 1)))


BLOCK_LEVELS = _BLOCK_DEPTH + 1
"""The levels of the block tree that :func:`_standing_blocks` searches (the blocks of magnitude and their halves
down to :data:`_BLOCK_DEPTH` halvings): a value lies in at most this many of them."""

BLOCK_NOISE = 3.0
"""The std of a searched block's measured count in units of a cell's (kappa): the profile measures every block of
the first :data:`BLOCK_LEVELS` levels of :func:`block_tree` with kappa times the cells' noise, so that they cost
BLOCK_LEVELS / kappa^2 of what the cells cost (docs/design.md section 2.8)."""

_FINE_DEPTH = 8
"""A block below :data:`_BLOCK_DEPTH` halvings that still holds at least :data:`_FINE_MIN_CELLS` cells is halved
again, down to this many halvings (a 256th of a decade: 35 whole numbers of 1,000..9,999): the fine blocks, which
place the records of a block that stood out (years 1950..2018 are one eighth of the decade 1,000..9,999, 1,125
whole numbers, where no single year stands out; docs/design.md section 2.8)."""

_FINE_MIN_CELLS = 64
"""The fewest cells a block must hold to be halved into fine blocks (smaller runs are read from their cells)."""

FINE_BLOCK_NOISE = 6.0
"""The std of a fine block's measured count in units of a cell's: a value lies in at most
:data:`_FINE_DEPTH` - :data:`_BLOCK_DEPTH` fine blocks, which cost at most 5 / 36 of what the cells cost."""


_LOCAL_SHARE = 0.5
"""An amount placed in a part of a block (:func:`_signal_weights`) goes first to the part's cells that stand out
of their noise at a Bonferroni level over the part's cells alone when those cells hold at least this share of
it (a few years among 111 whole numbers); else it is spread evenly (the ages 70..90 of a thin tail, each within
the noise: a few of them standing out by their noise would take it all)."""
_FINE_SPLIT = 2.0
"""When neither fine half of a block stands out but one holds more than this many stds of its noise, the block's
amount is split between them by their positive counts instead of spread evenly over both (:func:`_signal_weights`):
the rest of a block beyond the values that stood out alone carries the noise of every value taken out, and spread
evenly over the fine block 1984..2124, the years 1984..2013 were drawn up to 2120 (docs/design.md section 2.8)."""


@functools.lru_cache(maxsize=8)
def _block_tree_levels(scale: str) -> tuple[np.ndarray, np.ndarray]:
    """(:func:`block_tree`'s blocks, int64 (B, 2); each block's halvings from its block of magnitude, int64 (B,))."""
    grid = profile_grid(scale)
    cells = np.flatnonzero(grid.possible[: grid.null_cell])
    keys = grid.block_keys(cells)
    bounds = np.flatnonzero(np.diff(keys)) + 1
    out: list[tuple[int, int]] = []
    depths: list[int] = []
    for a0, b0 in zip(np.r_[0, bounds], np.r_[bounds, len(cells)], strict=True):
        todo = [(int(a0), int(b0), 0)]
        while todo:
            a, b, depth = todo.pop(0)
            out.append((a, b))
            depths.append(depth)
            halved = depth < _BLOCK_DEPTH or (depth < _FINE_DEPTH and b - a >= _FINE_MIN_CELLS)
            if halved and b - a >= 2:
                h = a + (b - a) // 2
                todo += [(a, h, depth + 1), (h, b, depth + 1)]
    return np.array(out, dtype=np.int64), np.array(depths, dtype=np.int64)


def block_tree(scale: str) -> np.ndarray:
    """The blocks of a scale's profile grid (public, independent of any data), int64 (B, 2): each row the
    [start, stop) positions of a block in the grid's possible cells below the empty cell (value order): every
    block of magnitude (:meth:`ProfileGrid.block_keys`) and its halves by cells, and theirs, down to
    :data:`_BLOCK_DEPTH` halvings, then the fine blocks: the halves of a block of at least
    :data:`_FINE_MIN_CELLS` cells, down to :data:`_FINE_DEPTH` halvings; blocks of magnitude in value order,
    each followed by its halves level by level. A value lies in at most :data:`BLOCK_LEVELS` blocks of the first
    levels and :data:`_FINE_DEPTH` - :data:`_BLOCK_DEPTH` fine blocks."""
    return _block_tree_levels(scale)[0]


def block_noise(scale: str) -> np.ndarray:
    """float64 (B,): the noise std of each block of :func:`block_tree` in units of a cell's: :data:`BLOCK_NOISE`
    for the blocks of the first :data:`BLOCK_LEVELS` levels, :data:`FINE_BLOCK_NOISE` for the fine blocks."""
    depths = _block_tree_levels(scale)[1]
    return np.where(depths <= _BLOCK_DEPTH, BLOCK_NOISE, FINE_BLOCK_NOISE)


@functools.lru_cache(maxsize=8)
def block_units(scale: str) -> float:
    """The squared L2 sensitivity of the block counts of one column on ``scale``, in units of the cells' noise:
    the largest, over the grid's values, of the sum of 1 / kappa^2 over the blocks that hold it (kappa of each
    block: :func:`block_noise`); at most BLOCK_LEVELS / 9 + 5 / 36 (public)."""
    grid = profile_grid(scale)
    cells = np.flatnonzero(grid.possible[: grid.null_cell])
    tree = block_tree(scale)
    weight = np.zeros(len(cells) + 1, dtype=np.float64)
    np.add.at(weight, tree[:, 0], block_noise(scale) ** -2.0)
    np.add.at(weight, tree[:, 1], -(block_noise(scale) ** -2.0))
    return float(np.cumsum(weight)[:-1].max())


@functools.lru_cache(maxsize=8)
def _tree_index(
    scale: str,
) -> tuple[dict[tuple[int, int], int], dict[int, list[tuple[int, int]]], np.ndarray]:
    """The blocks of :func:`block_tree` by (start, stop), by start (largest first), and their sorted starts."""
    index = {(int(a), int(b)): i for i, (a, b) in enumerate(block_tree(scale))}
    by_start: dict[int, list[tuple[int, int]]] = {}
    for (a, b), i in index.items():
        by_start.setdefault(a, []).append((b, i))
    for runs in by_start.values():
        runs.sort(reverse=True)  # the largest block first
    return index, by_start, np.array(sorted(by_start), dtype=np.int64)


class _Sums:
    """How many of a run of cells' records are left, and the level that must pass to stand out of its noise. With
    the blocks of :func:`block_tree` measured, a run of consecutive cells is cut into the largest measured blocks
    it holds and single cells (the canonical cover of a range in a hierarchical histogram): each block's own noisy
    count (noise kappa sigma, plus that of the cells already taken out of it) and each cell's; else (and for
    cells that are not consecutive) the sum of the cells' noisy counts (:func:`_sum_threshold`). Post-processing
    of the noisy profile."""

    def __init__(
        self,
        grid: ProfileGrid,
        cells: np.ndarray,
        present: np.ndarray,
        sigma: float,
        level: float,
        blocks: np.ndarray | None = None,
        block_sigma: np.ndarray | float = 0.0,
    ) -> None:
        self.cells, self.present, self.sigma, self.level = cells, present, sigma, level
        self.blocks = blocks
        self.index: dict[tuple[int, int], int] = {}
        self.depths = np.zeros(0, dtype=np.int64)
        if blocks is not None:
            self.index, self.by_start, self.starts = _tree_index(grid.scale)
            self.depths = _block_tree_levels(grid.scale)[1]
            if len(blocks) != len(self.index):
                raise InvalidParameterError(
                    f"{len(blocks)} block counts for the {len(self.index)} blocks of the grid"
                )
            if np.ndim(block_sigma) and np.shape(block_sigma) != (len(blocks),):
                raise InvalidParameterError(
                    f"{np.size(block_sigma)} block noise stds for the {len(blocks)} blocks of the grid"
                )
        # one std per block (a single value: the same for every block)
        self.block_sigma = np.broadcast_to(np.asarray(block_sigma, dtype=np.float64), (len(self.index),))

    def _node(self, members: np.ndarray) -> int | None:
        if not self.index or len(members) == 0:
            return None
        a = int(np.searchsorted(self.cells, members[0]))
        return self.index.get((a, a + len(members)))

    def fine(self, members: np.ndarray) -> bool:
        """True when ``members`` is a fine block of :func:`block_tree` (below :data:`_BLOCK_DEPTH` halvings)."""
        node = self._node(members)
        return node is not None and bool(self.depths[node] > _BLOCK_DEPTH)

    def halves_measured(self, members: np.ndarray) -> bool:
        """True when both halves of ``members`` (by cells) are measured blocks."""
        half = len(members) // 2
        return half >= 1 and self._node(members[:half]) is not None and self._node(members[half:]) is not None

    def left(self, members: np.ndarray, current: np.ndarray, gaussian: float) -> tuple[float, float]:
        """(the noisy count of the records of ``members`` still in ``current``, the level it must pass at the
        Gaussian quantile ``gaussian``); ``current`` is the noisy cells less what was taken out of them."""
        a = int(np.searchsorted(self.cells, members[0])) if self.index and len(members) else 0
        b = a + len(members)
        consecutive = bool(self.index) and len(members) > 0 and b <= len(self.cells)
        if consecutive and self.cells[b - 1] == members[-1]:
            assert self.blocks is not None
            covered = self._cover(a, b, current)
            if covered is not None:
                return covered[0], covered[1] * gaussian
        return float(current[members].sum()), float(
            _sum_threshold(len(members), self.sigma, self.level, gaussian)
        )

    def _cover(self, a: int, b: int, current: np.ndarray) -> tuple[float, float] | None:
        """(value, noise std) of the cells at positions [a, b) read as the largest measured blocks it holds and
        single cells; None when it holds no measured block."""
        assert self.blocks is not None
        value, variance, used, p = 0.0, 0.0, False, a
        while p < b:
            node = next(((stop, i) for stop, i in self.by_start.get(p, ()) if stop <= b), None)
            if node is not None:
                stop, i = node
                run = self.cells[p:stop]
                taken = self.present[run] - current[run]
                value += float(self.blocks[i]) - float(taken.sum())
                variance += float(self.block_sigma[i]) ** 2 + self.sigma**2 * np.count_nonzero(taken)
                used = True
            else:
                k = int(np.searchsorted(self.starts, p, side="right"))
                stop = min(int(self.starts[k]) if k < len(self.starts) else b, b)
                run = self.cells[p:stop]
                value += float(current[run].sum())
                variance += self.sigma**2 * len(run)
            p = stop
        return (value, math.sqrt(variance)) if used else None


def _standing_blocks(
    grid: ProfileGrid, rest: np.ndarray, cells: np.ndarray, sums: _Sums, gaussian: float
) -> list[np.ndarray]:
    """The blocks whose records stand out of their noise (``sums``, at ``gaussian``, the blocks' level
    :func:`_block_level`), as arrays of cells in value order, the blocks in value order: each block of magnitude
    (each decade of |x| on each side of 0, and 0; 32 days on the date scales) that stands out, and of one that
    does not, its halves (by cells) that stand out, and of a half that does not, its halves, down to
    :data:`_BLOCK_DEPTH` halvings (the blocks of :func:`block_tree`). The blocks do not overlap;
    post-processing."""
    keys = grid.block_keys(cells)
    found: list[np.ndarray] = []
    for k in np.unique(keys):
        todo = [(cells[keys == k], 0)]
        while todo:
            members, depth = todo.pop()
            value, needed = sums.left(members, rest, gaussian)
            if value > needed:
                found.append(members)
            elif depth < _BLOCK_DEPTH and len(members) >= 2:
                half = len(members) // 2
                todo += [(members[:half], depth + 1), (members[half:], depth + 1)]
    found.sort(key=lambda m: int(m[0]))
    return found


def profile_from_noisy(
    name: str,
    scale: str,
    grid: ProfileGrid,
    noisy: np.ndarray,
    noisy_frac: float,
    sigma: float,
    n_bins: int,
    protected_n: int,
    laplace: bool = False,
    blocks: np.ndarray | None = None,
    block_sigma: np.ndarray | float = 0.0,
) -> ColumnProfile:
    """Decide one column from its noisy profile: a code or a measurement (docs/design.md section 2.8).

    Post-processing only: the noisy histogram is drawn by :func:`spark_dpsynth.mechanisms._profile.dp_profiles`.

    Args:
        name: the column's name; scale: its scale (:data:`SCALES`, not ``category``).
        grid: the scale's :class:`ProfileGrid` (:func:`profile_grid`).
        noisy: float64 (grid.size,) noisy count of every cell (0 on the impossible cells).
        noisy_frac: the noisy count of values that are not whole numbers (real scale; else 0).
        sigma: the noise's standard deviation per cell, in records.
        n_bins: the number of quantile bins of a measurement (``DataConfig.dp_bins``).
        protected_n: n', the protected number of records.
        laplace: the cells' noise is Laplace (its tail sets the threshold), else Gaussian.
        blocks: float64 (B,) noisy count of every block of :func:`block_tree` (its order), or None when the
            profile did not measure them (a block's records are then the sum of its cells' noisy counts).
        block_sigma: the blocks' noise std, in records: float64 (B,) (kappa sigma, :func:`block_noise`), or one
            value for every block.

    Raises:
        InvalidParameterError: ``blocks`` (or an array ``block_sigma``) is not one value per block of the scale's
            tree.

    Returns:
        The :class:`ColumnProfile` (see :func:`spark_dpsynth.mechanisms._profile.dp_profiles` for what a code
        and a measurement hold).
    """

    cells = np.flatnonzero(grid.possible[: grid.null_cell])
    tail = _SIGNAL_FALSE_POSITIVE / max(len(cells), 1)
    level = _noise_level(tail, laplace)
    gaussian = _noise_level(tail, False)  # a sum of many cells' noise, Laplace or not, is close to Gaussian
    block_gaussian = _block_level(grid)
    threshold = sigma * level
    non_empty = max(float(protected_n) - max(float(noisy[grid.null_cell]), 0.0), 1.0)
    point_cells = np.arange(1, grid.null_cell, 2)
    standing = point_cells[noisy[point_cells] > threshold]
    share = float(noisy[standing].sum()) / non_empty
    half_bin = 1.0 / (2 * n_bins)
    numeric = scale in ("integer", "real")
    # the records beyond the values that stand out, and the noise of that difference
    rest_mass = non_empty - float(noisy[standing].sum())
    rest_noise = sigma * math.sqrt(len(standing) + 1.0) * 3.0
    code = ColumnProfile(
        name,
        "code",
        None,
        min(share, 1.0),
        f"DP code: {len(standing)} exact values stand out of the noise and hold about {min(share, 1.0):.0%} "
        "of its records",
        non_empty,
    )
    if numeric and len(standing) and rest_mass <= max(rest_noise, non_empty / 1000.0):
        return code
    present = noisy.copy()
    present[grid.null_cell] = 0.0
    integral = scale == "real" and noisy_frac <= max(
        sigma * _noise_level(_WHOLE_FALSE_POSITIVE, laplace), non_empty / 1000.0
    )
    values = value_cells(grid, integral)
    sums = _Sums(grid, cells, present, sigma, level, blocks, block_sigma)
    weights, stood = _signal_weights(
        grid, present, cells, threshold, sums, gaussian, block_gaussian, laplace, values
    )
    span = _trimmed(cells[weights[cells] > 0], weights, 1.0 / (4 * n_bins))
    span = _inside_spikes(span, present, standing, half_bin * non_empty, sums, gaussian, stood)
    whole = _whole_number_range(grid, present, span, half_bin * non_empty)
    small_range = numeric and whole is not None and 2 <= whole[1] - whole[0] + 1 <= MAX_CODE_RANGE
    # the empty run before a top code (99 above months 1..12): no record is drawn there
    whole_points = None
    if integral:
        # the point cells (1 + 2 i, the point p_i itself) at whole numbers
        at = grid.points[np.maximum(cells - 1, 0) // 2]
        whole_points = cells[(cells % 2 == 1) & (at == np.floor(at))]
    gaps = _gap_to_top_code(span, present, standing, half_bin * non_empty, sums, stood, laplace, whole_points)
    # a few values hold almost every record and the rest is more than noise (an amount that is mostly 0 and a
    # few round sums): every value that stands out is a point, and the rest is binned, not lost
    few = numeric and not small_range and share >= 1.0 - half_bin
    if few and len(standing) < 2:
        return code
    if small_range or few:
        # Whole numbers in a small range whose rare values do not stand out alone (a country code's tail,
        # weekly hours of 1 or 99): every value that stands out is a point, the rest is drawn among the whole
        # numbers of the range, so it is neither lost nor piled onto the frequent values.
        spikes = standing
    elif scale in ("integer", "real"):
        # A measurement: spikes as points, the rest binned inside its DP range.
        spikes = standing[noisy[standing] >= half_bin * non_empty]
    else:
        spikes = standing[:0]
    placed_note = ""
    rest = noisy.copy()
    rest[spikes] = 0.0
    rest[grid.null_cell] = 0.0
    rest[~grid.possible] = 0.0
    if small_range:
        assert whole is not None
        signal = cells[(cells >= cells_of(grid, np.array([whole[0]]), np.array([True]))[0])]
        signal = signal[signal <= cells_of(grid, np.array([whole[1]]), np.array([True]))[0]]
        if whole_points is not None:
            # a real column of whole numbers: its values are the range's whole numbers, not the real grid's
            # points and intervals between them (2.1, 2.2), which hold only noise
            signal = signal[np.isin(signal, whole_points)]
        # the range's records beyond its exact values: without the values (they are points) and the empty
        # run before a top code, the range ends where they end
        signal = signal[~np.isin(signal, gaps) & ~np.isin(signal, spikes)]
        kept = np.zeros(len(rest), dtype=bool)
        kept[signal] = True
        rest[~kept] = 0.0
    else:
        # cells that stand out alone, and blocks of magnitude that stand out together (a thin tail of amounts):
        # the rest's mass is read from them only, so that the noise of thousands of empty cells does not
        # swamp it (Adult's capital_gain beyond 0: about 8% of the records over 7,000 whole numbers)
        rest, stood = _signal_weights(
            grid, rest, cells, threshold, sums, gaussian, block_gaussian, laplace, values
        )
        signal = _trimmed(cells[rest[cells] > 0], rest, 1.0 / (4 * n_bins))
        inside = _inside_spikes(signal, present, standing, half_bin * non_empty, sums, gaussian, stood)
        rest = _moved_inside(rest, grid.sizes, signal, inside)
        signal = inside[~np.isin(inside, gaps)]
        rest[gaps] = 0.0
        if few and len(signal) < 2:
            # the rest is too thin to place: spread evenly between the smallest and largest standing values,
            # where nothing stands out (Adult's capital_loss: 0 and three sums near 1,900 hold 97%, the other
            # 3% lie among 90 values); collapsed onto the standing values it moved the column's mean
            span = cells[(cells > standing[0]) & (cells < standing[-1])]
            span = span[~np.isin(span, standing) & ~np.isin(span, gaps)]
            spread = _spread_evenly(grid, span, max(rest_mass, 0.0), present[span], sigma, laplace, values)
            if len(span) and (spread > 0).any():
                rest = np.zeros_like(rest)
                rest[span] = spread
                signal = span[spread > 0]
        unplaced = non_empty - float(noisy[spikes].sum())
        if len(signal) < 2 and len(spikes) and unplaced > max(rest_noise, half_bin * non_empty):
            # the records beyond the spikes are more than noise, but no range of them stands out (spread thinly
            # over hundreds of values: a poverty ratio whose values 0..500, beside its top code 501, hold about a
            # third of the records): when the values between 0 and the standing values
            # stand out together, the rest is spread evenly there rather than lost onto the spikes; a code whose
            # rare values lie thinly over thousands of numbers (an industry code) does not pass that test and
            # stays a code (docs/design.md section 2.8)
            zero = int(cells_of(grid, np.array([0.0]), np.array([True]))[0])
            a, b = min(zero, int(standing[0])), max(zero, int(standing[-1]))
            run = cells[(cells >= a) & (cells <= b)]
            span = run[~np.isin(run, spikes) & ~np.isin(run, gaps)]
            without_spikes = present.copy()
            without_spikes[spikes] = 0.0
            value, needed = sums.left(run, without_spikes, block_gaussian)
            spread = _spread_evenly(grid, span, unplaced, present[span], sigma, laplace, values)
            if (spread > 0).sum() >= 2 and value > needed:
                rest = np.zeros_like(rest)
                rest[span] = spread
                signal = span[spread > 0]
                placed_note = (
                    ", the rest spread evenly between 0 and its exact values (no range of it stands out)"
                )
    if len(signal) == 0:
        # nothing beyond the spikes stands out: the column is its spikes (a code), the rest is noise
        return ColumnProfile(
            name,
            "code",
            None,
            min(share, 1.0),
            f"DP code: beyond {len(standing)} exact values no range of values stands out of the noise",
            non_empty,
        )
    first, last = int(signal[0]), int(signal[-1])
    # the rest's mass in open cells (between grid points): values the profile cannot tell apart, one or many
    open_cells = np.arange(first + first % 2, last + 1, 2)
    off_grid = (
        numeric and not small_range and float(rest[open_cells].clip(min=0.0).sum()) >= half_bin * non_empty
    )
    lo = grid.bounds(first)[0]
    hi = grid.bounds(last)[1]
    if not math.isfinite(lo):  # the cell below the grid: start at the first point
        lo = float(grid.points[0])
    if not math.isfinite(hi):
        hi = float(grid.points[-1])
    if not lo < hi:
        # the records beyond the points lie at one value that does not stand out alone: nothing to bin
        return code
    # the running sum of the noisy counts (unbiased, its noise grows as a random walk), made non-decreasing
    cdf = np.maximum.accumulate(np.cumsum(rest[first : last + 1]))
    edges: set[float] = set()
    if cdf[-1] > 0:
        for i in range(1, n_bins):
            at = int(np.searchsorted(cdf, cdf[-1] * i / n_bins, side="left"))
            c_lo, c_hi = grid.bounds(first + at)
            # the lower end of an open cell, the point itself for a point cell; whole numbers on integer scales
            edges.add(c_lo if math.isfinite(c_lo) else lo)
    edges = {e for e in edges if lo < e < hi}
    if scale in ("integer", "date"):
        edges = {float(math.ceil(e)) for e in edges}
        edges = {e for e in edges if lo < e < hi}
    if not edges:
        edges = {float(math.ceil((lo + hi) / 2.0)) if scale in ("integer", "date") else (lo + hi) / 2.0}
        edges = {e for e in edges if lo < e < hi} or {hi}
    points = tuple(float(grid.points[(c - 1) // 2]) for c in spikes)
    shape = _within_bin_shape(grid, rest, first, last, lo, hi, sorted(edges))
    spec = BinSpec(
        edges=tuple(sorted(edges)),
        lower=lo,
        upper=max(hi, max(edges)),
        points=points,
        integral=integral,
        shape=shape,
    )
    spike_note = f", {len(points)} exact value(s) kept" if points else ""
    small_note = f" of {int(hi - lo + 1)} whole numbers" if small_range else ""
    return ColumnProfile(
        name,
        "measurement",
        spec,
        min(share, 1.0),
        f"DP measurement: {len(spec.edges) + 1} bins inside its DP range{small_note}{spike_note}"
        + (", whole numbers" if integral else "")
        + placed_note,
        non_empty,
        off_grid=off_grid,
    )


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


def edge_pieces(
    profile: ColumnProfile, whole: bool, noise_std: float
) -> tuple[tuple[float, float, int], ...]:
    """The edge pieces of a measurement that the DP exact-value step counts in sub-intervals (docs/design.md
    section 2.8): its within-bin shape's first and last interval pieces (a < b; one when they are the same)
    that hold at least :data:`EDGE_MIN_SHARE` of its non-empty records and are wide enough to cut, each as
    ``(a, b, parts)``: ``parts`` equal sub-intervals (:func:`edge_key`), as many as hold
    :data:`EDGE_STDS` x ``noise_std`` records each on average, at most :data:`EDGE_PIECES` and at most the
    piece's whole numbers (``whole``: the integer and date scales, whose pieces are whole numbers), at least 2.
    Empty for a code, or when no edge piece qualifies. Post-processing of the noisy profile."""
    spec = profile.bins
    if profile.meaning != "measurement" or spec is None or noise_std <= 0:
        return ()
    intervals = [piece for piece in spec.shape if piece[0] < piece[1]]
    if not intervals:
        return ()
    chosen = [intervals[0]] if intervals[0] == intervals[-1] else [intervals[0], intervals[-1]]
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
    intervals = [i for i, piece in enumerate(spec.shape) if piece[0] < piece[1]]
    first, last = (intervals[0], intervals[-1]) if intervals else (-1, -1)
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
        level = _noise_level(_SIGNAL_FALSE_POSITIVE / parts, laplace)
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


_SHAPE_PIECES = 512
"""At most this many pieces in a measurement's within-bin shape (:func:`_within_bin_shape`): beyond it,
neighbouring pieces of one bin are merged (a date column's thousands of days, an amount's thousands of whole
numbers)."""


def _within_bin_shape(
    grid: ProfileGrid,
    weights: np.ndarray,
    first: int,
    last: int,
    lo: float,
    hi: float,
    edges: list[float],
) -> tuple[tuple[float, ...], ...]:
    """The pieces (a, b, weight) of a measurement's range [lo, hi] with the noisy mass the profile read there
    (``weights``: per cell, >= 0 where it stands out, docs/design.md section 2.8): one piece per cell of
    ``first`` .. ``last`` with a positive weight (a point cell: a = b = the point; an open cell: its values, the
    whole numbers strictly between its points on the integer and date scales), neighbouring pieces of equal
    weight in one bin (``edges``) merged (a block whose mass was spread evenly): touching ones into one
    interval, points at a regular gap into a piece (a, b, weight, step) of the values a, a + step, ..., b (a
    lattice, :func:`_lattice`); when more than :data:`_SHAPE_PIECES` remain, neighbouring pieces of one bin
    merged into groups of equal size. Post-processing of the noisy profile."""
    whole = grid.scale in ("integer", "date")
    pieces: list[list[float]] = []  # [a, b, weight, weight of one cell, step (0: every value of [a, b])]
    for c in range(first, last + 1):
        w = float(weights[c])
        if not (grid.possible[c] and w > 0 and math.isfinite(w)):
            continue
        a, b = grid.bounds(c)
        if a != b and whole:  # the whole numbers strictly between two points
            a, b = a + 1.0, b - 1.0
        a, b = max(a, lo), min(b, hi)
        if not (math.isfinite(a) and math.isfinite(b) and a <= b):
            continue
        previous = pieces[-1] if pieces else None
        # a piece is drawn in the bin its first value lies in: it never reaches into the next bin
        if (
            previous is not None
            and abs(previous[3] - w) <= 1e-9 * max(w, 1.0)
            and bisect.bisect_right(edges, a) == bisect.bisect_right(edges, previous[0])
        ):
            gap = a - previous[1]
            contiguous = previous[4] == 0 and (gap == 0 or (whole and gap == 1.0))
            # equal points at a regular gap: the values of a lattice (_lattice), a, a + step, ..., b
            stepped = (
                a == b
                and gap > (1.0 if whole else 0.0)
                and (
                    (previous[0] == previous[1] and previous[4] == 0) or abs(previous[4] - gap) <= 1e-9 * gap
                )
            )
            if contiguous or stepped:
                previous[1] = b
                previous[2] += w
                if stepped:
                    previous[4] = gap
                continue
        pieces.append([a, b, w, w, 0.0])
    if len(pieces) > _SHAPE_PIECES:
        starts = np.array([p[0] for p in pieces])
        bin_of = np.searchsorted(np.asarray(edges, dtype=np.float64), starts, side="right")
        group = math.ceil(len(pieces) / _SHAPE_PIECES)
        merged: list[list[float]] = []
        for k in np.unique(bin_of):
            members = [pieces[i] for i in np.flatnonzero(bin_of == k)]
            for i in range(0, len(members), group):
                run = members[i : i + group]
                merged.append([run[0][0], run[-1][1], sum(p[2] for p in run), 0.0, 0.0])
        pieces = merged
    return tuple(
        (float(p[0]), float(p[1]), float(f"{p[2]:.6g}"), *((float(p[4]),) if p[4] > 0 else ()))
        for p in pieces
    )


def profile_targets(types: Mapping[str, ColumnType], config: DataConfig) -> tuple[str, ...]:
    """The columns a DP profile decides (:func:`~spark_dpsynth.mechanisms._profile.dp_profiles`): numeric, date and timestamp columns without
    public bins, not declared categorical (those are categories already, :func:`column_types`)."""
    return tuple(c for c, t in types.items() if t.binned and c not in config.bins)


def text_number_candidates(
    types: Mapping[str, ColumnType], config: DataConfig, domains: Mapping[str, object] = ()
) -> tuple[str, ...]:
    """The string columns the DP test of numbers written as text reads (docs/design.md section 2.8): every
    ``string`` column counted as a category without a rule of the configuration (not declared categorical, no
    public bins, no public domain or ``domains`` of the mechanism, not multi-value, not hash-bucketed). From
    the schema and the configuration only: public. Empty when ``config.text_numbers`` is False."""
    if config.text_numbers is False:
        return ()
    ruled = (
        set(config.categorical)
        | set(config.bins)
        | set(config.public_domains)
        | set(config.multi_value)
        | set(domains)
    )
    return tuple(
        c for c, t in types.items() if t.type == "string" and t.scale == "category" and c not in ruled
    )


def with_text_numbers(types: Mapping[str, ColumnType], found: Mapping[str, str]) -> dict[str, ColumnType]:
    """``types`` with the string columns that the DP test found to hold numbers written as text (``found``:
    column -> ``integer`` for whole numbers, else ``real``) on that scale: the DP profile then decides them as
    numbers (a code, or a measurement whose text values the DP exact-value step releases as ``passthrough``
    categories; docs/design.md section 2.8). Their type stays ``string``. Post-processing of the test.

    Raises:
        InvalidParameterError: a scale other than ``integer`` and ``real``.
    """
    out = dict(types)
    for c, scale in found.items():
        if scale not in ("integer", "real"):
            raise InvalidParameterError(
                f"numbers written as text are on the integer or real scale, not {scale!r}"
            )
        out[c] = dataclasses.replace(types[c], scale=scale)
    return out


def apply_profiles(
    types: Mapping[str, ColumnType], config: DataConfig, profiles: Mapping[str, ColumnProfile]
) -> tuple[dict[str, ColumnType], DataConfig]:
    """The column types and configuration after the DP profiles (post-processing, docs/design.md section 2.8):
    a code becomes a category (scale ``category``, its input type kept, so its values come back exactly and
    typed), a measurement gets its DP bins in ``config.bins``; a code released by the DP exact-value step gets its
    released values as its domain in ``config.domains`` (counted like a codebook's, no second discovery)."""
    out = dict(types)
    bins = dict(config.bins)
    domains = dict(config.domains)
    for name, p in profiles.items():
        if p.meaning == "code":
            out[name] = dataclasses.replace(types[name], scale="category")
            if p.values is not None:
                domains[name] = p.values
        else:
            assert p.bins is not None
            bins[name] = p.bins
    return out, dataclasses.replace(config, bins=bins, domains=domains)


def meanings_manifest(
    types: Mapping[str, ColumnType], config: DataConfig, profiles: Mapping[str, ColumnProfile]
) -> dict[str, dict[str, object]]:
    """Per attribute column, the meaning chosen and why (the manifest's ``column_meanings``; docs/design.md
    section 2.8): ``source`` is ``config`` (public bins, a public domain, hash buckets, declared categorical),
    ``schema`` (a string, boolean or other non-numeric column: a category) or ``dp_profile``."""
    out: dict[str, dict[str, object]] = {}
    for name, t in types.items():
        if name in profiles:
            out[name] = {"source": "dp_profile", **profiles[name].to_json()}
        elif name in config.bins:
            out[name] = {"source": "config", "meaning": "measurement", "reason": "public bins"}
        elif name in config.public_domains:
            out[name] = {"source": "config", "meaning": "code", "reason": "public domain"}
        elif name in config.categorical:
            out[name] = {"source": "config", "meaning": "code", "reason": "declared categorical"}
        else:
            out[name] = {"source": "schema", "meaning": "code", "reason": f"{t.type} column: a category"}
    return out
