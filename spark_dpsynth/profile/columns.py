"""Column types of the input: each attribute column's scale from the schema and the configuration, and its type
after the DP profile (docs/design.md section 2.8).

* :func:`column_types` reads the input's schema (a public fact: Parquet, Delta and catalog tables carry it; for a
  CSV it is inferred or declared, see section 2.8) and the configuration, and gives each attribute column a
  *scale*: ``"integer"``, ``"real"``, ``"date"``, ``"timestamp"`` (discretized for counting) or ``"category"``.
* :func:`numeric_view` turns date and timestamp columns into numbers on their epoch scale (days since
  1970-01-01, seconds since 1970-01-01T00:00:00Z), the scale of their bin edges.
* :func:`profile_targets` names the columns a DP profile decides; :func:`apply_profiles` turns its decisions
  (:class:`~spark_dpsynth.profile.decide.ColumnProfile`) into column types and bins, :func:`meanings_manifest`
  into the manifest's ``column_meanings``.
* :func:`identifiers_manifest` is the manifest's ``identifier_columns`` block: the identifier columns' types and
  places (schema facts), from which type restoration writes surrogate keys.
* :func:`types_manifest` is the manifest's ``column_types`` block, the only input of type restoration
  (:mod:`spark_dpsynth.synthesizers._types`).

Privacy: nothing here reads data or draws noise: the schema, the configuration and DP outputs only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_dpsynth.errors import InvalidParameterError
from spark_dpsynth.params import BinSpec, DataConfig
from spark_dpsynth.profile.decide import ColumnProfile

__all__ = [
    "IDENTIFIER_TYPES",
    "SCALES",
    "ColumnType",
    "apply_profiles",
    "as_number",
    "column_types",
    "identifiers_manifest",
    "meanings_manifest",
    "numeric_view",
    "profile_targets",
    "scale_of",
    "types_manifest",
]

SCALES = ("integer", "real", "date", "timestamp", "category")
"""How a column is counted: the first four are discretized into bins, ``category`` counts each value."""

_INTEGER_TYPES = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_REAL_TYPES = (T.FloatType, T.DoubleType, T.DecimalType)


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


def as_number(col: Column, scale: str) -> Column:
    """A column on ``scale`` as a double: days since 1970-01-01 for a date, seconds since 1970-01-01T00:00:00Z for
    a timestamp, the number itself otherwise."""
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
        n: as_number(F.col(f"`{n}`"), t.scale)
        for n, t in types.items()
        if t.scale in ("date", "timestamp") and n in df.columns
    }
    return df.withColumns(replace) if replace else df


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


def profile_targets(types: Mapping[str, ColumnType], config: DataConfig) -> tuple[str, ...]:
    """The columns a DP profile decides (:func:`~spark_dpsynth.mechanisms._profile.dp_profiles`): numeric, date and timestamp columns without
    public bins, not declared categorical (those are categories already, :func:`column_types`)."""
    return tuple(c for c, t in types.items() if t.binned and c not in config.bins)


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
