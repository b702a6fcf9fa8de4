"""Prepare stage: a table becomes records of attributes (docs/design.md section 2.1).

``prepare(df, config)`` returns one column per attribute column, in the config's order. A single-value column
is a string, null meaning empty. Empty is: null, "", white space only, one of ``config.empty_values`` (compared
after trimming), and "0" when ``config.zeros_are_empty`` and the column is not in ``config.sensitive_zeros``.
Numeric columns with a :class:`~spark_dpsynth.params.BinSpec` are replaced by the label of their public bin; a
value that does not parse as a number is empty. A column with a public domain (``config.domains``, a codebook)
keeps only the values of its domain: any other value is empty, so no value outside the codebook reaches a
release (docs/design.md section 2.9). A column of ``config.hash_buckets`` is replaced by the label of its hash
bucket (:func:`hash_bucket`), a value of a public domain. Identifier columns (``config.identifiers``) are not
attributes: :func:`resolve_columns` leaves them out. A multi-value column is an ``array<string>`` of its distinct
non-empty values, sorted. With a privacy unit, the rows of one person are merged first (see
:func:`merge_privacy_units`). Everything is a Spark built-in expression (no Python UDF).

:func:`expand_multi_value` turns the arrays into SDS's binary attribute columns ``f"{column}_{value}"``.
"""

from __future__ import annotations

import dataclasses
import math
import re

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_dpsynth.errors import SchemaError
from spark_dpsynth.params import BinSpec, DataConfig, hash_bucket_labels

__all__ = [
    "prepare",
    "resolve_columns",
    "check_flat_columns",
    "bin_column",
    "hash_bucket",
    "in_domain",
    "select_attributes",
    "empty_to_null",
    "merge_privacy_units",
    "check_privacy_units",
    "expand_multi_value",
    "derived_column_name",
    "release_multi_values",
    "prepare_for_release",
    "join_multi_value",
    "split_multi_value",
    "release_config",
    "synthetic_for_release",
    "CONFLICTS",
]

CONFLICTS = "__conflicts"
"""Column of :func:`merge_privacy_units`: indices of the single-value columns whose values differ within the
person's rows (an empty array when none)."""


def resolve_columns(df_columns: list[str] | tuple[str, ...], config: DataConfig) -> DataConfig:
    """Check the config's columns against a schema and fill them in when the config leaves them open.

    Column names are matched exactly. Raises SchemaError naming the unknown columns (schema facts, not data).
    """
    available = list(df_columns)
    unit = config.privacy_unit
    if unit is not None and unit not in available:
        raise SchemaError(
            f"unknown privacy unit column {unit!r}; the input has {_describe_columns(available)}"
        )
    unknown_ids = [c for c in config.identifiers if c not in available]
    if unknown_ids:
        raise SchemaError(
            f"unknown identifier column(s) {unknown_ids}; the input has {_describe_columns(available)}"
        )
    if config.columns is not None:
        columns = config.columns
    else:
        # identifier columns are no attributes: left out of every measurement (docs/design.md section 2.8)
        columns = tuple(c for c in available if c != unit and c not in config.identifiers)
    missing = [c for c in columns if c not in available]
    if missing:
        raise SchemaError(f"unknown column(s) {missing}; the input has {_describe_columns(available)}")
    roles = (
        ("sensitive_zeros", config.sensitive_zeros),
        ("bins", tuple(config.bins)),
        ("multi_value", tuple(config.multi_value)),
        ("domains", tuple(config.domains)),
        ("hash_buckets", tuple(config.hash_buckets)),
    )
    for what, names in roles:
        unknown = [c for c in names if c not in columns]
        if unknown:
            raise SchemaError(f"{what} names column(s) {unknown} that are not attribute columns")
    if not columns:
        raise SchemaError("the input has no columns")
    return config.with_columns(tuple(columns)) if config.columns is None else config


_NESTED_TYPES = {"struct": T.StructType, "array": T.ArrayType, "map": T.MapType}
"""The nested Spark types, by the name an error gives them: a release holds one flat value per column."""


def check_flat_columns(schema: T.StructType, config: DataConfig) -> None:
    """Refuse attribute columns whose type no release can carry, from the schema alone (no row is read).

    A release measures one flat value per column and the synthesizers restore each column's input type from
    text (docs/design.md section 2.1): a nested column (``struct``, ``array``, ``map``) would be released as the
    text of whole structures and could not be restored, and a ``void`` column (Spark's type for a column with no
    type, e.g. a pandas column holding only None) has no values to release.

    Args:
        schema: the input's schema.
        config: the data configuration, ``config.columns`` resolved (:func:`resolve_columns`).

    Raises:
        SchemaError: naming every such column with its type, and the ways out: ``[data] columns`` for the flat
            columns, or flattening in a view or a DataFrame (a struct's fields as columns, an array of strings
            joined into a multi-value column).
    """
    assert config.columns is not None
    types = {f.name: f.dataType for f in schema.fields}
    nested, void, flat = [], [], []
    for name in config.columns:
        dtype = types.get(name)
        kind = next((k for k, t in _NESTED_TYPES.items() if isinstance(dtype, t)), None)
        if kind is not None:
            nested.append(f"{name!r} ({kind})")
        elif isinstance(dtype, T.NullType):
            void.append(repr(name))
        else:
            flat.append(name)
    if nested:
        plain = 0 < len(flat) <= 10 and all(re.fullmatch(r"[A-Za-z0-9_.-]+", c) for c in flat)
        choose = f"--columns {','.join(flat)}" if plain else "--columns"
        raise SchemaError(
            f"nested column(s) {', '.join(nested)}: a release holds flat columns only; choose the flat columns "
            f"with {choose} ([data] columns), or flatten the nested ones in a view or a DataFrame first (a "
            "struct's fields as columns, s.a AS s_a; an array of strings joined, concat_ws('|', tags) AS tags, "
            "read with --multi-value 'tags:|')"
        )
    if void:
        raise SchemaError(
            f"column(s) {', '.join(void)} have type void (no type: e.g. a pandas column holding only None); give "
            "them a type (cast in a view or a DataFrame, pandas astype) or leave them out with --columns "
            "([data] columns)"
        )


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


def in_domain(value: Column, domain: tuple[str, ...]) -> Column:
    """``value`` (a trimmed string or null) when it is one of the public ``domain``'s values, else null.

    The domain is public (a codebook, docs/design.md section 2.9): a value outside it is empty, as if the cell
    were blank, so it can never be released.
    """
    return F.when(value.isin(*domain), value).otherwise(F.lit(None).cast("string"))


def numeric_domain_value(value: Column, domain: list[str] | tuple[str, ...]) -> Column:
    """The codebook entry whose number equals ``value`` (a trimmed string of a numeric column), or null.

    A numeric column's values are numbers whatever their spelling: the double 9.0 is the codebook's ``"9"``, the
    integer 1 its ``"01"``. Entries that are not numbers never match; of two entries with the same number the
    first is kept. Public (the codebook), built-in functions only.
    """
    keys: dict[float, str] = {}
    for v in domain:
        try:
            x = float(v)
        except ValueError:
            continue
        if math.isfinite(x):
            keys.setdefault(x, v)
    if not keys:
        return F.lit(None).cast("string")
    lookup = F.create_map(*[c for k, v in keys.items() for c in (F.lit(k), F.lit(v))])
    number = value.try_cast("double")
    return F.when(number.isNotNull(), F.element_at(lookup, number)).otherwise(F.lit(None).cast("string"))


def hash_bucket(value: Column, buckets: int) -> Column:
    """The label of the hash bucket of ``value`` (a trimmed, non-null string) among ``buckets`` buckets.

    Bucket ``pmod(xxhash64(value), B)`` (Spark's built-in 64-bit xxHash with its fixed seed 42: a public function
    of the value alone, the same on every executor and for every partitioning), labelled as
    :func:`~spark_dpsynth.params.hash_bucket_labels`. The labels are a public domain (docs/design.md sections
    2.8 and 2.9).
    """
    width = len(hash_bucket_labels(buckets)[-1].split(" ")[1])
    bucket = F.pmod(F.xxhash64(value), F.lit(buckets)).cast("string")
    return F.concat(F.lit("bucket "), F.lpad(bucket, width, "0"), F.lit(f" of {buckets}"))


def bin_column(value: Column, spec: BinSpec, number: Column | None = None) -> Column:
    """Label of the public bin holding ``value`` (a trimmed string or null), or null if it is not a number.

    ``number``: ``value`` already cast to double (a column computed in an earlier ``select``). The label compares
    the number with every edge, and Spark does not share a ``try_cast`` between those comparisons: with
    ``number`` given the cast runs once per value (:func:`select_attributes` does this), without it once per
    edge.
    """
    # try_cast: under ANSI mode a failed cast raises an error that quotes the value; here it is simply empty.
    x = number if number is not None else value.try_cast("double")
    labels = spec.interval_labels()
    expr = F.when(x < F.lit(spec.edges[0]), F.lit(labels[0]))
    for i in range(1, len(spec.edges)):
        expr = expr.when(x < F.lit(spec.edges[i]), F.lit(labels[i]))
    expr = expr.when(x >= F.lit(spec.edges[-1]), F.lit(labels[-1]))
    binned = F.when(x.isNull() | F.isnan(x), F.lit(None).cast("string")).otherwise(expr)
    for point, label in zip(spec.points, spec.point_labels(), strict=True):
        binned = F.when(x == F.lit(float(point)), F.lit(label)).otherwise(binned)
    if spec.passthrough:
        binned = F.when(value.isin(*spec.passthrough), value).otherwise(binned)
    return binned


def select_attributes(
    df: DataFrame, config: DataConfig, extra: tuple[tuple[str, Column], ...] = ()
) -> DataFrame:
    """``df`` reduced to the cleaned and binned single-value columns and the split multi-value columns.

    Three ``select`` steps, each value trimmed once and each binned value parsed once: the first trims every
    column; the second cleans it (empty values become null, as :func:`empty_to_null`; a column with a public
    domain keeps its domain's non-empty values, as :func:`in_domain`, in one membership test) and casts each
    binned column to double; the third maps the numbers to their bin labels (:func:`bin_column`). Spark keeps the
    steps apart because each step's columns are used several times by the next, and the generated code of each
    step stays small enough for the JVM to compile it: written as one (the trimmed value repeated in every test),
    the generated method of a table of a dozen columns outgrows the JIT's size limit and runs interpreted, several
    times slower (docs/design.md section 2.2, performance).

    Args:
        df: the table; ``config.columns`` must be resolved (:func:`resolve_columns`).
        config: the data configuration.
        extra: (name, column) pairs put in front of the attributes (e.g. the privacy unit).

    Returns:
        The ``extra`` columns, then ``config.columns`` in order: nullable strings (single-value) and
        ``array<string>`` (multi-value).
    """
    assert config.columns is not None
    numeric = {f.name for f in df.schema.fields if isinstance(f.dataType, T.NumericType)}
    first = [column.alias(name) for name, column in extra]
    second = [F.col(f"`{name}`") for name, _ in extra]
    third = [F.col(f"`{name}`") for name, _ in extra]
    for j, name in enumerate(config.columns):
        zero_empty = config.zeros_are_empty and name not in config.sensitive_zeros
        raw = F.col(f"`{name}`")
        if name in config.multi_value:
            first.append(
                _split_values(raw, config.multi_value[name], config.empty_values, zero_empty).alias(name)
            )
            second.append(F.col(f"`{name}`"))
            third.append(F.col(f"`{name}`"))
            continue
        first.append(F.trim(raw.cast("string")).alias(name))
        trimmed = F.col(f"`{name}`")
        empties = [""] + list(config.empty_values) + (["0"] if zero_empty else [])
        null = F.lit(None).cast("string")
        if name in config.domains and name in numeric:
            # a numeric column's codebook is matched on numbers: 9.0 read as a double is the code "9", and a
            # week 1 is the codebook's "01" (docs/design.md section 2.9)
            value = numeric_domain_value(trimmed, [v for v in config.domains[name] if v not in empties])
        elif name in config.domains:
            # empty_to_null then in_domain: a value is kept when it is in the domain and not an empty value
            keep = [v for v in config.domains[name] if v not in empties]
            value = F.when(trimmed.isin(*keep), trimmed).otherwise(null) if keep else null
        elif name in config.hash_buckets:
            nonempty = trimmed.isNotNull() & ~trimmed.isin(*empties)
            value = F.when(nonempty, hash_bucket(trimmed, config.hash_buckets[name])).otherwise(null)
        else:
            value = F.when(trimmed.isNull() | trimmed.isin(*empties), null).otherwise(trimmed)
        second.append(value.alias(name))
        if name in config.bins:
            number = f"__dpsynth_number_{j}"
            second.append(value.try_cast("double").alias(number))
            third.append(bin_column(F.col(f"`{name}`"), config.bins[name], F.col(number)).alias(name))
        else:
            third.append(F.col(f"`{name}`"))
    return df.select(*first).select(*second).select(*third)


def prepare(df: DataFrame, config: DataConfig) -> DataFrame:
    """Select, clean and bin the attribute columns; split multi-value cells; merge each person's rows.

    Args:
        df: the sensitive table, any schema.
        config: which columns, what is empty, public bins, multi-value columns, privacy unit, record limit.

    Returns:
        A DataFrame with exactly ``config.columns`` (resolved against ``df``): a nullable string per single-value
        column (null: the record has no attribute there) and an ``array<string>`` per multi-value column (its
        distinct values, sorted; empty: none). With a privacy unit: one row per person and a last column
        :data:`CONFLICTS` (see :func:`merge_privacy_units`); call :func:`check_privacy_units` before counting.

    Raises:
        SchemaError: a configured column is not in ``df`` (checked on the schema, before data is read).
    """
    config = resolve_columns(df.columns, config)
    assert config.columns is not None
    if config.record_limit is not None:
        df = df.limit(config.record_limit)
    if config.privacy_unit is None:
        return select_attributes(df, config)
    unit = F.col(f"`{config.privacy_unit}`").cast("string")
    return merge_privacy_units(select_attributes(df, config, (("__unit", unit),)), config)


def _split_values(raw: Column, delimiter: str, empty_values: tuple[str, ...], zero_is_empty: bool) -> Column:
    """The distinct non-empty values of a multi-value cell, sorted (an empty array when there are none)."""
    # split's pattern is a regex: quote the delimiter; limit -1 keeps trailing empty pieces (dropped below).
    parts = F.split(F.coalesce(raw.cast("string"), F.lit("")), _regex_quote(delimiter), -1)
    empties = [""] + list(empty_values) + (["0"] if zero_is_empty else [])
    kept = F.filter(F.transform(parts, lambda x: F.trim(x)), lambda x: ~x.isin(*empties))
    return F.array_sort(F.array_distinct(kept))


def _regex_quote(text: str) -> str:
    return "".join("\\" + ch if not ch.isalnum() else ch for ch in text)


def merge_privacy_units(prepared: DataFrame, config: DataConfig) -> DataFrame:
    """One record per person: the rows of ``prepared`` grouped by its ``__unit`` column (SDS's subject_id join).

    A single-value column takes the person's non-empty value (empty when every row is empty); when its non-empty
    values differ, the column's index goes into :data:`CONFLICTS`. A multi-value column takes the union of the
    person's values. The unit column is dropped: it is never an attribute.

    Returns:
        ``config.columns`` as in :func:`prepare`, then :data:`CONFLICTS` (``array<int>``).
    """
    assert config.columns is not None
    aggs = []
    flags = []
    for j, name in enumerate(config.columns):
        col = F.col(f"`{name}`")
        if name in config.multi_value:
            aggs.append(F.array_sort(F.array_distinct(F.flatten(F.collect_list(col)))).alias(name))
        else:
            aggs.append(F.min(col).alias(name))
            aggs.append(F.max(col).alias(f"__max{j}"))
            flags.append(j)
    merged = prepared.groupBy("__unit").agg(*aggs)
    checks = [F.when(F.col("__unit").isNull(), F.lit(-1))]
    checks += [F.when(F.col(f"`{config.columns[j]}`") != F.col(f"__max{j}"), F.lit(j)) for j in flags]
    conflicts = F.array_compact(F.array(*checks))
    return merged.select(
        *[F.col(f"`{c}`") for c in config.columns], conflicts.cast("array<int>").alias(CONFLICTS)
    )


def check_privacy_units(prepared: DataFrame, config: DataConfig) -> None:
    """Raise when a person's rows hold different values in a single-value column (one Spark job).

    Raises:
        SchemaError: naming the columns (never a value or a person) and how to fix it.
    """
    assert config.columns is not None
    rows = prepared.select(F.explode(CONFLICTS).alias("j")).distinct().collect()
    found = {int(r["j"]) for r in rows}
    if -1 in found:
        raise SchemaError(
            f"some rows have an empty privacy unit ({config.privacy_unit!r}); every row must name its person "
            "(filter them out with row_filter, or give each its own id)"
        )
    bad = sorted(config.columns[j] for j in found)
    if bad:
        raise SchemaError(
            f"column(s) {bad} have different values within the rows of one privacy unit "
            f"({config.privacy_unit!r}); declare them multi-value (multi_value / --multi-value COLUMN:DELIM) "
            "or leave them out of the attribute columns"
        )


def derived_column_name(column: str, value: str) -> str:
    """SDS's name of the binary attribute column of ``value`` in multi-value ``column``: ``f"{column}_{value}"``."""
    return f"{column}_{value}"


def expand_multi_value(
    prepared: DataFrame, config: DataConfig, values: dict[str, tuple[str, ...]]
) -> tuple[DataFrame, tuple[str, ...], dict[str, tuple[str, str]]]:
    """Replace each multi-value array column by one binary attribute column per value (value "1" or null).

    Args:
        prepared: the output of :func:`prepare`.
        config: its resolved config.
        values: multi-value column -> the values that get a column, in order (from the data on the private
            path, where unreleased ones are dropped later; from a release's manifest elsewhere).

    Returns:
        (DataFrame with the attribute columns, their names in order, derived name -> (column, value)). A
        multi-value column's derived columns take its place in the column order.

    Raises:
        SchemaError: a derived name equals another column's name (the message names the multi-value column
            only, never a value).
    """
    assert config.columns is not None
    out: list[Column] = []
    names: list[str] = []
    derived: dict[str, tuple[str, str]] = {}
    for name in config.columns:
        if name not in config.multi_value:
            out.append(F.col(f"`{name}`"))
            names.append(name)
            continue
        for value in values.get(name, ()):
            new = derived_column_name(name, value)
            if new in derived or new in config.columns:
                raise SchemaError(
                    f"a value of multi-value column {name!r} gives a derived column name that another column "
                    "already has; rename the column"
                )
            derived[new] = (name, value)
            out.append(F.when(F.array_contains(F.col(f"`{name}`"), F.lit(value)), F.lit("1")).alias(new))
            names.append(new)
    return prepared.select(*out), tuple(names), derived


def release_multi_values(manifest: dict) -> dict[str, tuple[str, ...]]:  # type: ignore[type-arg]
    """Multi-value column -> its released values, in the release's column order (from the manifest)."""
    out: dict[str, list[str]] = {}
    for meta in (manifest.get("multi_value_columns") or {}).values():
        out.setdefault(str(meta["column"]), []).append(str(meta["value"]))
    return {c: tuple(v) for c, v in out.items()}


def prepare_for_release(
    df: DataFrame, config: DataConfig, release_columns: tuple[str, ...], manifest: dict
) -> DataFrame:  # type: ignore[type-arg]
    """The sensitive table as records in a release's columns (for evaluation; not private).

    :func:`prepare`, then the multi-value columns expanded to the release's derived columns only.

    Raises:
        SchemaError: the configured columns do not give the release's columns.
    """
    config = release_config(resolve_columns(df.columns, config), manifest)
    df = _release_numeric_view(df, manifest)
    prepared = prepare(df, config)
    _, names, _ = expand_multi_value(prepared.limit(0), config, release_multi_values(manifest))
    missing = [c for c in release_columns if c not in names]
    if missing:
        raise SchemaError(f"the release's column(s) {missing} do not follow from the configured columns")
    expanded, _, _ = expand_multi_value(prepared, config, release_multi_values(manifest))
    return expanded.select(*[F.col(f"`{c}`") for c in release_columns])


def _manifest_bins(manifest: dict) -> dict[str, BinSpec]:  # type: ignore[type-arg]
    """The bins of every binned column of a release (manifest ``column_types``), as :class:`BinSpec`."""
    out = {}
    for name, t in (manifest.get("column_types") or {}).items():
        b = t.get("bins")
        if b and t.get("scale") != "category":
            out[str(name)] = BinSpec(
                edges=tuple(b["edges"]),
                labels=tuple(b["labels"]),
                passthrough=tuple(b.get("passthrough") or ()),
                lower=b.get("lower"),
                upper=b.get("upper"),
                points=tuple(b.get("points") or ()),
                integral=bool(b.get("integral", False)),
                shape=tuple(tuple(x) for x in b.get("shape") or ()),
            )
    return out


def release_config(config: DataConfig, manifest: dict) -> DataConfig:  # type: ignore[type-arg]
    """``config`` with the release's bins (public and DP, from the manifest's ``column_types``): the
    configuration that prepares a table exactly as the release counted it (for evaluation; not private)."""
    bins = _manifest_bins(manifest)
    if not bins:
        return config
    categorical = tuple(c for c in config.categorical if c not in bins)
    return dataclasses.replace(config, bins={**config.bins, **bins}, categorical=categorical)


def _release_numeric_view(df: DataFrame, manifest: dict) -> DataFrame:  # type: ignore[type-arg]
    """Date and timestamp columns binned by the release as epoch numbers (:func:`~spark_dpsynth.profile.numeric_view`)."""
    from spark_dpsynth.profile import ColumnType, numeric_view

    types = {
        str(n): ColumnType(
            name=str(n), type=str(t["type"]), nullable=bool(t["nullable"]), scale=str(t["scale"])
        )
        for n, t in (manifest.get("column_types") or {}).items()
        if t.get("bins")
    }
    return numeric_view(df, types)


def synthetic_for_release(
    synthetic: DataFrame, release_columns: tuple[str, ...], manifest: dict
) -> DataFrame:  # type: ignore[type-arg]
    """Typed synthetic records (:func:`~spark_dpsynth.synthesizers._types.restore_types`) back in the release's
    values: a binned column as the label of its bin, any other column as its value written as a string.

    Synthetic records already in the release's values (string columns, bin labels) are returned unchanged.
    """
    bins = _manifest_bins(manifest)
    types = manifest.get("column_types") or {}
    if not types:
        return synthetic.select(*[F.col(f"`{c}`") for c in release_columns])
    view = _release_numeric_view(synthetic, manifest)
    # Two selects, as select_attributes: each binned value is trimmed and parsed once (the first), then compared
    # with its labels and edges (the second); written as one, Spark repeats the trim and the cast per edge.
    parsed = []
    for j, name in enumerate(release_columns):
        col = F.col(f"`{name}`")
        if name in bins:
            value = F.trim(col.cast("string"))
            parsed += [value.alias(f"__v{j}"), value.try_cast("double").alias(f"__x{j}")]
        else:
            parsed.append(empty_to_null(col, (), False).alias(f"__v{j}"))
    out = []
    for j, name in enumerate(release_columns):
        value = F.col(f"__v{j}")
        if name in bins:
            # a label stays (synthetic data not yet restored); a number (typed, or read back from CSV) is binned
            labels = (*bins[name].interval_labels(), *bins[name].point_labels())
            binned = bin_column(value, bins[name], number=F.col(f"__x{j}"))
            out.append(F.when(value.isin(*labels), value).otherwise(binned).alias(name))
        else:
            out.append(value.alias(name))
    return view.select(*parsed).select(*out)


def join_multi_value(synthetic: DataFrame, release_columns: tuple[str, ...], manifest: dict) -> DataFrame:  # type: ignore[type-arg]
    """Synthetic records with each multi-value column's binary columns joined back into one column.

    The joined column holds the values whose binary column is "1", in the release's order, separated by the
    column's delimiter (null when none), at the place of its first binary column (SDS's
    ``join_multi_value_columns``). Columns of other kinds are unchanged. Post-processing of public data.
    """
    meta = manifest.get("multi_value_columns") or {}
    out: list[Column] = []
    done: set[str] = set()
    for name in release_columns:
        if name not in meta:
            out.append(F.col(f"`{name}`"))
            continue
        source = str(meta[name]["column"])
        if source in done:
            continue
        done.add(source)
        parts = [
            F.when(F.col(f"`{c}`") == "1", F.lit(str(m["value"])))
            for c in release_columns
            if (m := meta.get(c)) is not None and str(m["column"]) == source
        ]
        joined = F.concat_ws(str(meta[name]["delimiter"]), *parts)
        out.append(F.when(joined == "", F.lit(None).cast("string")).otherwise(joined).alias(source))
    return synthetic.select(*out)


def split_multi_value(synthetic: DataFrame, release_columns: tuple[str, ...], manifest: dict) -> DataFrame:  # type: ignore[type-arg]
    """The inverse of :func:`join_multi_value`: synthetic records in the release's columns.

    A table already in the release's columns is returned unchanged.
    """
    if all(c in synthetic.columns for c in release_columns):
        return synthetic.select(*[F.col(f"`{c}`") for c in release_columns])
    meta = manifest.get("multi_value_columns") or {}
    out = []
    for name in release_columns:
        m = meta.get(name)
        if m is None:
            out.append(F.col(f"`{name}`"))
            continue
        values = F.split(
            F.coalesce(F.col(f"`{m['column']}`"), F.lit("")), _regex_quote(str(m["delimiter"])), -1
        )
        out.append(F.when(F.array_contains(values, F.lit(str(m["value"]))), F.lit("1")).alias(name))
    return synthetic.select(*out)
