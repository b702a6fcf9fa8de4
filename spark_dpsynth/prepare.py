"""Prepare stage: a table becomes records of attributes (DESIGN.md section 2, notation).

``prepare(df, config)`` returns one string column per attribute column, in the config's order, where null means
empty. Empty is: null, "", white space only, one of ``config.empty_values`` (compared after trimming), and "0"
when ``config.zeros_are_empty`` and the column is not in ``config.sensitive_zeros``. Numeric columns with a
:class:`~spark_dpsynth.params.BinSpec` are replaced by the label of their public bin; a value that does not
parse as a number is empty. Everything is a Spark built-in expression (no Python UDF).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_dpsynth.errors import SchemaError
from spark_dpsynth.params import BinSpec, DataConfig

__all__ = ["prepare", "resolve_columns", "bin_column", "empty_to_null"]


def resolve_columns(df_columns: list[str] | tuple[str, ...], config: DataConfig) -> DataConfig:
    """Check the config's columns against a schema and fill them in when the config leaves them open.

    Column names are matched exactly. Raises SchemaError naming the unknown columns (schema facts, not data).
    """
    available = list(df_columns)
    columns = config.columns if config.columns is not None else tuple(available)
    missing = [c for c in columns if c not in available]
    if missing:
        raise SchemaError(f"unknown column(s) {missing}; the input has {_describe_columns(available)}")
    for what, names in (("sensitive_zeros", config.sensitive_zeros), ("bins", tuple(config.bins))):
        unknown = [c for c in names if c not in columns]
        if unknown:
            raise SchemaError(f"{what} names column(s) {unknown} that are not attribute columns")
    if not columns:
        raise SchemaError("the input has no columns")
    return config.with_columns(tuple(columns)) if config.columns is None else config


def _describe_columns(names: list[str]) -> str:
    """The input's column names for an error message, or only their number when they do not look like names.

    A file read in the wrong format (Parquet bytes parsed as a CSV header, say) yields "column names" that are
    data; an error must not show them.
    """
    printable = all(n.isprintable() and 0 < len(n) <= 64 for n in names)
    if printable and len(names) <= 200:
        return str(names)
    return f"{len(names)} columns (names not shown: they do not look like column names; is the format right?)"


def empty_to_null(col: Column, empty_values: tuple[str, ...], zero_is_empty: bool) -> Column:
    """Trimmed string value of ``col``, or null when it is empty (see the module docstring)."""
    s = F.trim(col.cast("string"))
    empties = [""] + list(empty_values) + (["0"] if zero_is_empty else [])
    return F.when(s.isNull() | s.isin(*empties), F.lit(None).cast("string")).otherwise(s)


def bin_column(value: Column, spec: BinSpec) -> Column:
    """Label of the public bin holding ``value`` (a trimmed string or null), or null if it is not a number."""
    # try_cast: under ANSI mode a failed cast raises an error that quotes the value; here it is simply empty.
    x = value.try_cast("double")
    labels = spec.interval_labels()
    expr = F.when(x < F.lit(spec.edges[0]), F.lit(labels[0]))
    for i in range(1, len(spec.edges)):
        expr = expr.when(x < F.lit(spec.edges[i]), F.lit(labels[i]))
    expr = expr.when(x >= F.lit(spec.edges[-1]), F.lit(labels[-1]))
    binned = F.when(x.isNull() | F.isnan(x), F.lit(None).cast("string")).otherwise(expr)
    if spec.passthrough:
        binned = F.when(value.isin(*spec.passthrough), value).otherwise(binned)
    return binned


def prepare(df: DataFrame, config: DataConfig) -> DataFrame:
    """Select, clean and bin the attribute columns.

    Args:
        df: the sensitive table, any schema.
        config: which columns, what is empty, public bins.

    Returns:
        A DataFrame with exactly ``config.columns`` (resolved against ``df``), each a nullable string column;
        null means the record has no attribute in that column.

    Raises:
        SchemaError: a configured column is not in ``df`` (checked on the schema, before data is read).
    """
    config = resolve_columns(df.columns, config)
    assert config.columns is not None
    out = []
    for name in config.columns:
        zero_empty = config.zeros_are_empty and name not in config.sensitive_zeros
        value = empty_to_null(F.col(f"`{name}`"), config.empty_values, zero_empty)
        if name in config.bins:
            value = bin_column(value, config.bins[name])
        out.append(value.alias(name))
    return df.select(*out)
