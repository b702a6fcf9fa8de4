"""Column types of the input: which columns are numbers, dates or timestamps, and their DP bins (docs/design.md
section 2.8).

* :func:`column_types` reads the input's schema (a public fact: Parquet, Delta and catalog tables carry it; for a
  CSV it is inferred or declared, see section 2.8) and the configuration, and gives each attribute column a
  *scale*: ``"integer"``, ``"real"``, ``"date"``, ``"timestamp"`` (discretized for counting) or ``"category"``.
* :func:`numeric_view` turns date and timestamp columns into numbers on their epoch scale (days since
  1970-01-01, seconds since 1970-01-01T00:00:00Z), the scale of their bin edges.
* :func:`dp_bins` places the bin edges of the discretized columns without public bins: DP quantiles chosen by the
  exponential mechanism over a public grid of candidate edges (:func:`candidate_grid`), from a histogram of the
  column over that grid computed on Spark (never the raw values on the driver).
* :func:`identifiers_manifest` is the manifest's ``identifier_columns`` block: the identifier columns' types and
  places (schema facts), from which type restoration writes surrogate keys.
* :func:`types_manifest` is the manifest's ``column_types`` block, the only input of type restoration
  (:mod:`spark_dpsynth.synthesizers._types`).

Privacy: :func:`dp_bins` is the only function here that reads data; each quantile is an epsilon_B-DP
exponential mechanism (McSherry and Talwar 2007) with OpenDP's quantile score (Smith 2011), charged to the
budget share ``bin_edges`` (docs/design.md sections 2.3 and 2.8).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_dpsynth.errors import InvalidParameterError
from spark_dpsynth.params import BinSpec, DataConfig
from spark_dpsynth.privacy.noise import NoiseSource

__all__ = [
    "SCALES",
    "ColumnType",
    "bin_quantile_levels",
    "candidate_grid",
    "column_types",
    "identifiers_manifest",
    "dp_bins",
    "numeric_view",
    "scale_of",
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


def _grid_cell(x: Column, scale: str, size: int) -> Column:
    """The cell of the grid holding x: the number of grid points <= x (0 .. size), as a Spark expression.

    Cell c is [g_(c-1), g_c); cell 0 is below the grid and cell ``size`` at or above its last point. Built-in
    arithmetic only: the decade and the two leading digits of |x|.
    """
    if scale in ("date", "timestamp"):
        missing = x.isNull() | F.isnan(x)
        x = F.least(F.greatest(x, F.lit(-1e13)), F.lit(1e13))  # far outside the grid; floor stays in a long
        day = F.floor(x / F.lit(86400.0)) if scale == "timestamp" else F.floor(x)
        cell = F.least(F.greatest(day - F.lit(_DATE_MIN) + F.lit(1), F.lit(0)), F.lit(size))
        # least/greatest skip nulls: a null or NaN must stay out of every cell, not fall in one
        return F.when(missing, F.lit(None)).otherwise(cell).cast("int")
    low, high = _DECADES[scale]
    units = _UNIT_POINTS[scale]
    k = units + (high - low + 1) * 90  # positive grid points

    def at_most(y: Column) -> tuple[Column, Column]:
        """Positive grid points <= y (y >= 0), and whether y is one of them."""
        e = F.floor(F.log10(y))
        m = F.floor(y / F.pow(F.lit(10.0), e - F.lit(1)) + F.lit(1e-9))
        m = F.least(F.greatest(m, F.lit(10.0)), F.lit(99.0))
        count = F.lit(units) + (e - F.lit(low)) * F.lit(90) + (m - F.lit(10)) + F.lit(1)
        start = 10.0**low
        below = F.floor(y) if units else F.lit(0)
        count = F.when(y < F.lit(start), below).otherwise(F.least(count, F.lit(k)))
        exact = (
            (y >= F.lit(start))
            & (e <= F.lit(high))
            & (F.abs(y - m * F.pow(F.lit(10.0), e - F.lit(1))) <= F.abs(y) * 1e-12)
        )
        if units:
            exact = exact | ((y >= F.lit(1.0)) & (y < F.lit(start)) & (y == F.floor(y)))
        return count, exact

    pos, _ = at_most(x)
    neg_count, neg_exact = at_most(-x)
    # x >= 0: the k negative points and 0 are <= x; x < 0: the negative points -g_j with g_j >= |x|.
    nonneg = F.lit(k + 1) + pos
    negative = F.lit(k) - (neg_count - F.when(neg_exact, F.lit(1)).otherwise(F.lit(0)))
    # least/greatest skip nulls: a null or NaN must stay out of every cell, not fall in one
    missing = x.isNull() | F.isnan(x)
    return F.when(missing, F.lit(None)).when(x >= 0, nonneg).otherwise(negative).cast("int")


def bin_quantile_levels(n_bins: int) -> tuple[float, ...]:
    """The quantile levels that place the edges of one DP-binned column: 1/(2n), 1/n .. (n-1)/n, 1 - 1/(2n).

    The outer levels split the first and last of the n bins in two, so that the open bins ``<e0`` and ``>=e_m``
    hold about 1/(2n) of the records each. Levels closer to 0 or 1 are not used: the exponential mechanism
    over a grid that spans the whole range of the type picks a far-away cell with a probability that grows
    with the number of cells beyond the data, and a level alpha near 1 leaves only (1 - alpha) n records of
    score to tell them apart (docs/design.md section 2.8).
    """
    tail = 1.0 / (2 * n_bins)
    return (tail, *(i / n_bins for i in range(1, n_bins)), 1.0 - tail)


def dp_bins(
    df: DataFrame,
    types: Mapping[str, ColumnType],
    columns: tuple[str, ...],
    n_bins: int,
    epsilon_b: float,
    noise: NoiseSource,
) -> dict[str, BinSpec]:
    """DP bin edges of ``columns`` (binned columns without public bins), each from its own grid histogram.

    Args:
        df: the records (after the row filter, record limit and privacy-unit merge), in :func:`numeric_view`.
        types: the column types (:func:`column_types`).
        columns: the columns to bin.
        n_bins: the number of inner quantile bins (``DataConfig.dp_bins``).
        epsilon_b: the pure-DP epsilon of each quantile (``BudgetSplit.epsilon_b``).
        noise: the release's noise source.

    Returns:
        column -> :class:`BinSpec` with edges = the grid points chosen by the quantiles of
        :func:`bin_quantile_levels` (sorted, distinct). A cell chosen by two or more quantiles holds a large share
        of the records (a spike such as 0): its upper edge is added so that it is a bin of its own. On integer
        scales the edges are integers.

    Privacy:
        One Spark job: per column, the histogram of its values over the public grid cells (at most
        len(grid) + 1 cells per column reach the driver). Each quantile is the exponential mechanism over the
        cells with OpenDP's quantile score, sensitivity max(num, den - num) (docs/design.md section 2.2, step 3),
        epsilon_b-DP; a record changes one cell of each column by one. len(levels) x len(columns) quantiles in
        all, accounted in zCDP by :func:`~spark_dpsynth.privacy.accounting.split_budget`. Values that are null
        or not numbers count in no cell.
    """
    if not columns:
        return {}
    grids = {c: candidate_grid(types[c].scale) for c in columns}
    cells = [
        F.struct(
            F.lit(j).alias("j"),
            _grid_cell(F.col(f"`{c}`").cast("double"), types[c].scale, len(grids[c])).alias("c"),
        )
        for j, c in enumerate(columns)
    ]
    exploded = (
        df.select(F.explode(F.array(*cells)).alias("x")).select("x.j", "x.c").where(F.col("c").isNotNull())
    )
    # At most sum over columns of (len(grid) + 1) rows: release-sized.
    rows = exploded.groupBy("j", "c").count().collect()
    hists = {c: np.zeros(len(grids[c]) + 1, dtype=np.int64) for c in columns}
    for r in rows:
        hists[columns[int(r["j"])]][int(r["c"])] = int(r["count"])
    del rows
    levels = bin_quantile_levels(n_bins)
    out = {}
    for c in columns:
        grid, hist = grids[c], hists[c]
        chosen = [noise.quantile(hist, alpha, epsilon_b) for alpha in levels]
        out[c] = _edges_from_cells(grid, chosen, types[c].scale)
    return out


def _edges_from_cells(grid: np.ndarray, chosen: list[int], scale: str) -> BinSpec:
    """Bin edges from the chosen grid cells (cell c = [g_(c-1), g_c)): each cell's lower edge, plus the upper
    edge of a cell chosen more than once and of the last level's cell."""
    size = len(grid)

    def lower(c: int) -> float:
        return float(grid[max(c - 1, 0)])

    def upper(c: int) -> float:
        return float(grid[min(c, size - 1)])

    inner = chosen[1:-1]
    edges = {lower(c) for c in inner}
    edges |= {upper(c) for c in set(inner) if inner.count(c) > 1}
    # The outer levels (1/(2b), 1 - 1/(2b)) can land far outside the data: a spike at the end of the range (many
    # zeros at the 5% level) leaves little score between the right cell and the cells beyond the data. Their
    # edges are kept within one inner span of the inner edges; this reads DP outputs only (post-processing).
    span = max(edges) - min(edges)
    edges.add(max(lower(chosen[0]), min(edges) - span))
    edges.add(min(upper(chosen[-1]), max(edges) + span))
    values = sorted(edges)
    if scale in ("integer", "date"):
        values = sorted({float(math.ceil(x)) for x in values})
    return BinSpec(edges=tuple(values))


def types_manifest(
    types: Mapping[str, ColumnType], bins: Mapping[str, BinSpec], sources: Mapping[str, str]
) -> dict[str, object]:
    """The manifest's ``column_types`` block: per attribute column, in order, its type, nullability, scale and,
    when binned, its bins (edges, labels, public bounds, ``source``: ``"config"`` or ``"dp_quantiles"``)."""
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
