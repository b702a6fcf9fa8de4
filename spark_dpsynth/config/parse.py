"""Reading a configuration: a TOML document into a validated :class:`~spark_dpsynth.config.job.JobConfig`
(:func:`parse_config`, :func:`load_config`), the file itself (:func:`load_document`) and the command line's
values applied over it (:func:`merge`).

A wrong key, type or value is a :class:`~spark_dpsynth.errors.ConfigError` naming the key and the allowed values;
see :mod:`spark_dpsynth.config` for the file's layout.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import tomllib
from typing import Any

from spark_dpsynth import registry
from spark_dpsynth.config.job import AUTO_SYNTHESIZER, SYNTHESIZERS, JobConfig
from spark_dpsynth.config.keys import (
    BIN_KEYS,
    CONSTRAINTS_KEYS,
    DATA_KEYS,
    EVALUATE_KEYS,
    INPUT_KEYS,
    OUTPUT_KEYS,
    RUN_KEYS,
    SPARK_KEYS,
    check_types,
    section_keys,
)
from spark_dpsynth.data.io import FORMATS, RAGGED_ROWS, check_table_name, csv_encoding
from spark_dpsynth.errors import ConfigError, DPSynthError
from spark_dpsynth.params import AggregationParams, BinSpec, DataConfig, SynthesisParams
from spark_dpsynth.privacy.budget import Budget

__all__ = ["load_config", "load_document", "merge", "parse_config"]

log = logging.getLogger("spark_dpsynth.config")

_FORMATS = FORMATS


def _mechanism_sections(doc: dict[str, Any]) -> dict[str, Any]:
    """The JobConfig fields of the registered mechanisms' own sections (not [aggregate]), validated."""
    out: dict[str, Any] = {}
    for spec in registry.MECHANISMS.values():
        if spec.section == "aggregate":
            continue
        table = dict(_check_keys(spec.section, doc.get(spec.section, {}), section_keys(spec)))
        if spec.needs_public:
            out.update(_public_table(spec.section, table))
        for key, value in list(table.items()):
            if isinstance(value, dict):
                table[key] = {c: tuple(v) if isinstance(v, list) else v for c, v in value.items()}
        out[spec.section] = _build(spec.params_class(), spec.section, table)
    return out


def _public_table(section: str, table: dict[str, Any]) -> dict[str, Any]:
    """Pop and check the public-table keys of a mechanism section."""
    io = {f"public_{k}": table.pop(f"public_{k}", None) for k in ("input", "table", "format", "row_filter")}
    if io["public_input"] is not None and io["public_table"] is not None:
        raise ConfigError(f"[{section}] give either public_input or public_table, not both")
    if io["public_format"] is not None and io["public_format"] not in _FORMATS:
        raise ConfigError(
            f"[{section}] public_format must be one of {list(_FORMATS)}, got {io['public_format']!r}"
        )
    if io["public_table"] is not None:
        try:
            check_table_name(io["public_table"], "public_table")
        except DPSynthError as err:
            raise ConfigError(f"[{section}] {err}") from err
    return io


def _check_keys(section: str, table: Any, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise ConfigError(f"[{section}] must be a table, got {type(table).__name__}")
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ConfigError(f"unknown key(s) {unknown} in [{section}]; allowed: {sorted(allowed)}")
    return table


_BUDGET_KEYS = tuple(f.name for f in dataclasses.fields(Budget))
"""The ``[aggregate]`` keys of the budget (:class:`~spark_dpsynth.privacy.budget.Budget`)."""


def _aggregate_keys() -> set[str]:
    """The keys of ``[aggregate]``: the budget's and :class:`AggregationParams`'s."""
    return set(_BUDGET_KEYS) | {f.name for f in dataclasses.fields(AggregationParams)}


def _build(cls: type, section: str, table: dict[str, Any]) -> Any:
    names = {f.name for f in dataclasses.fields(cls)}
    _check_keys(section, table, names)
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in table.items()}
    try:
        return cls(**kwargs)
    except DPSynthError as err:
        raise ConfigError(f"[{section}] {err}") from err
    except TypeError as err:
        raise ConfigError(f"[{section}] {err}") from err


def _domains(table: Any) -> dict[str, tuple[str, ...]]:
    """``[data.domains]``: column -> its public values (a non-empty list of strings); the rest of the checks
    (distinct values, no bins, not the privacy unit) are :class:`DataConfig`'s."""
    if not isinstance(table, dict):
        raise ConfigError(f"[data.domains] must be a table of COLUMN = [values], got {type(table).__name__}")
    out = {}
    for col, values in table.items():
        if not isinstance(values, list) or not values or not all(isinstance(x, str) for x in values):
            raise ConfigError(f"[data.domains] {col} must be a non-empty list of strings, got {values!r}")
        out[col] = tuple(values)
    return out


def _evaluate_settings(table: dict[str, Any]) -> dict[str, Any]:
    """The ``[evaluate]`` keys other than max_marginal_length, validated (messages name the key)."""
    out: dict[str, Any] = {}
    for key in ("label", "holdout_filter"):
        value = table.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ConfigError(f"[evaluate] {key} must be a non-empty string, got {value!r}")
        out[key] = value
    for key, default in (("resolution", 10), ("tstr_max_rows", 100_000)):
        value = table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"[evaluate] {key} must be an integer >= 1, got {value!r}")
        out[key] = value
    for key, default, low in (
        ("max_subsets", 2_000, 0),
        ("subset_seed", 0, None),
        ("max_rows", 1_000_000, 0),
    ):
        value = table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or (low is not None and value < low):
            raise ConfigError(
                f"[evaluate] {key} must be an integer{f' >= {low}' if low is not None else ''}, got {value!r}"
            )
        out[key] = value
    numeric = table.get("numeric_columns")
    if numeric is not None and (
        not isinstance(numeric, list | tuple) or not all(isinstance(c, str) and c for c in numeric)
    ):
        raise ConfigError(f"[evaluate] numeric_columns must be a list of column names, got {numeric!r}")
    out["numeric_columns"] = None if numeric is None else tuple(numeric)
    values = table.get("label_values", {})
    if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
        raise ConfigError(f"[evaluate] label_values must be a table of strings, got {values!r}")
    out["label_values"] = dict(values)
    return out


_RENAMED_KEYS = {("archetype", "encoding"): "cluster_encoding"}
"""(section, old key) -> its new name. The old name is still read, with a warning, where it is unambiguous: in its
own section of the file (``[archetype] encoding``; the option ``--encoding`` is ``[input] encoding``)."""


def _renamed_keys(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with the deprecated keys of :data:`_RENAMED_KEYS` under their new names (a warning each).

    Raises:
        ConfigError: a section gives both a key's old and new name.
    """
    out = dict(doc)
    for (section, old), new in _RENAMED_KEYS.items():
        table = out.get(section)
        if not isinstance(table, dict) or old not in table:
            continue
        if new in table:
            raise ConfigError(f"[{section}] give {new} only ({old} is its deprecated name), not both")
        log.warning(
            "[%s] %s is deprecated: call it %s (option --%s)", section, old, new, new.replace("_", "-")
        )
        table = dict(table)
        table[new] = table.pop(old)
        out[section] = table
    return out


def parse_config(doc: dict[str, Any]) -> JobConfig:
    """Validate a parsed TOML document into a :class:`JobConfig`.

    Raises:
        ConfigError: an unknown section or key, or a value outside its range (the message names the key).
    """
    original = copy.deepcopy(doc)
    allowed = {"input", "output", "spark", "run", "data", "aggregate", "synthesize", "evaluate"}
    allowed |= {"constraints"}
    allowed |= {"query"}
    allowed |= {spec.section for spec in registry.MECHANISMS.values()}
    _check_keys("top level", doc, allowed)
    doc = _renamed_keys(doc)
    check_types(doc)
    inp = _check_keys("input", doc.get("input", {}), INPUT_KEYS)
    fmt = inp.get("format")
    if fmt is not None and fmt not in _FORMATS:
        raise ConfigError(f"[input] format must be one of {list(_FORMATS)}, got {fmt!r}")
    delimiter = inp.get("delimiter", ",")
    if not isinstance(delimiter, str) or len(delimiter) != 1:
        raise ConfigError(f"[input] delimiter must be one character, got {delimiter!r}")
    if inp.get("path") is not None and inp.get("table") is not None:
        raise ConfigError("[input] give either path or table, not both")
    try:
        encoding = csv_encoding(inp.get("encoding", "utf-8"))
    except DPSynthError as err:
        raise ConfigError(f"[input] {err}") from err
    ragged_rows = inp.get("ragged_rows", "error")
    if ragged_rows not in RAGGED_ROWS:
        raise ConfigError(f"[input] ragged_rows must be one of {list(RAGGED_ROWS)}, got {ragged_rows!r}")
    out = _check_keys("output", doc.get("output", {}), OUTPUT_KEYS)
    for section, table in (("input", inp), ("output", out)):
        if table.get("table") is not None:
            try:
                check_table_name(table["table"], "table")
            except DPSynthError as err:
                raise ConfigError(f"[{section}] {err}") from err
    spark_section = _check_keys("spark", doc.get("spark", {}), SPARK_KEYS)
    if spark_section.get("master") is not None and spark_section.get("remote") is not None:
        raise ConfigError("[spark] give either master or remote, not both")
    run = _check_keys("run", doc.get("run", {}), RUN_KEYS)
    data = dict(_check_keys("data", doc.get("data", {}), DATA_KEYS))
    row_filter = data.pop("row_filter", None)
    if row_filter is not None and not isinstance(row_filter, str):
        raise ConfigError(f"[data] row_filter must be a string, got {row_filter!r}")
    bins = {}
    raw_bins = data.pop("bins", {})
    if not isinstance(raw_bins, dict):
        raise ConfigError("[data.bins] must be a table of column tables")
    for col, spec in raw_bins.items():
        spec = _check_keys(f"data.bins.{col}", spec, BIN_KEYS)
        if "edges" not in spec and "count" not in spec:
            raise ConfigError(f"[data.bins.{col}] needs edges, or lower, upper and count")
        spec = {"edges": (), **spec}
        bins[col] = _build(BinSpec, f"data.bins.{col}", spec)
    domains = _domains(data.pop("domains", {}))
    infer_schema = _bool_key("input", "infer_schema", inp.get("infer_schema", True))
    if data.get("text_numbers") is None and not infer_schema and inp.get("schema") is None:
        # every column read as a string by the user's choice: categories, no DP test of numbers written as text
        data["text_numbers"] = False
    data_config = _build(DataConfig, "data", {**data, "bins": bins, "domains": domains})
    evaluate = _check_keys("evaluate", doc.get("evaluate", {}), EVALUATE_KEYS)
    mml = evaluate.get("max_marginal_length", 3)
    if isinstance(mml, bool) or not isinstance(mml, int) or mml < 1:
        raise ConfigError(f"[evaluate] max_marginal_length must be an integer >= 1, got {mml!r}")
    aggregate = dict(_check_keys("aggregate", doc.get("aggregate", {}), _aggregate_keys()))
    budget = {k: aggregate.pop(k) for k in _BUDGET_KEYS if k in aggregate}
    return JobConfig(
        data=data_config,
        budget=_build(Budget, "aggregate", budget),
        aggregate=_build(AggregationParams, "aggregate", aggregate),
        synthesize=_build(SynthesisParams, "synthesize", doc.get("synthesize", {})),
        input_path=inp.get("path"),
        input_format=fmt,
        delimiter=delimiter,
        encoding=encoding,
        ragged_rows=ragged_rows,
        infer_schema=infer_schema,
        input_schema=_str_key("input", "schema", inp.get("schema")),
        input_table=inp.get("table"),
        output_path=out.get("path"),
        output_table=out.get("table"),
        output_format=out.get("format"),
        overwrite=out.get("overwrite", False),
        single_csv=out.get("single_csv", True),
        sds_format=out.get("sds_format", False),
        join_multi_value=out.get("join_multi_value", True),
        release=run.get("release"),
        query_sql=_check_keys("query", doc.get("query", {}), {"sql"}).get("sql"),
        master=spark_section.get("master"),
        remote=spark_section.get("remote"),
        synthesizer=_synthesizer(run.get("synthesizer", AUTO_SYNTHESIZER)),
        quiet=run.get("quiet", False),
        debug=run.get("debug", False),
        row_filter=row_filter,
        max_marginal_length=mml,
        **_evaluate_settings(evaluate),
        **_constraints(doc.get("constraints", {})),
        **_mechanism_sections(doc),
        document=original,
    )


def _constraints(table: Any) -> dict[str, Any]:
    """The JobConfig fields of ``[constraints]``: its rules (a string or a list of strings) and its condition.

    Raises:
        ConfigError: a value that is not a non-empty string (or list of them).
    """
    from spark_dpsynth.synthesizers.conditions import check_expressions

    table = _check_keys("constraints", table, CONSTRAINTS_KEYS)
    try:
        rules = check_expressions(table.get("rules"), "[constraints] rules")
        where = check_expressions(table.get("where"), "[constraints] where")
    except DPSynthError as err:
        raise ConfigError(str(err)) from err
    if len(where) > 1 or (table.get("where") is not None and not isinstance(table.get("where"), str)):
        raise ConfigError(f"[constraints] where must be one string, got {table.get('where')!r}")
    return {"constraints": rules, "where": where[0] if where else None}


def _bool_key(section: str, key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"[{section}] {key} must be true or false, got {value!r}")
    return value


def _str_key(section: str, key: str, value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ConfigError(f"[{section}] {key} must be a non-empty string, got {value!r}")
    return value


def _synthesizer(value: Any) -> str:
    if value not in SYNTHESIZERS:
        raise ConfigError(f"[run] synthesizer must be one of {list(SYNTHESIZERS)}, got {value!r}")
    return str(value)


def load_config(path: str) -> JobConfig:
    """Read and validate a TOML configuration file.

    Raises:
        ConfigError: the file cannot be read or parsed, or :func:`parse_config` rejects it.
    """
    return parse_config(load_document(path))


def merge(doc: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """A copy of the parsed TOML ``doc`` with ``overrides`` (``"section.key" -> value``) applied.

    Overriding ``input.path`` drops the file's ``input.table`` and the other way round. Overriding
    ``data.columns`` drops the file's ``sensitive_zeros``, ``bins``, ``multi_value``, ``domains`` and
    ``hash_buckets`` entries of other columns.
    """
    if "input.path" in overrides and "input.table" in overrides:
        raise ConfigError("[input] give either path or table, not both")
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in doc.items()}
    for name, value in overrides.items():
        section, key = name.split(".", 1)
        table = out.setdefault(section, {})
        if not isinstance(table, dict):
            raise ConfigError(f"[{section}] must be a table, got {type(table).__name__}")
        table[key] = value
        if section == "input" and key in ("path", "table"):
            table.pop("table" if key == "path" else "path", None)
        if name == "data.columns" and isinstance(value, list | tuple):
            if isinstance(table.get("sensitive_zeros"), list):
                table["sensitive_zeros"] = [c for c in table["sensitive_zeros"] if c in value]
            if isinstance(table.get("bins"), dict):
                table["bins"] = {c: b for c, b in table["bins"].items() if c in value}
            if isinstance(table.get("multi_value"), dict):
                table["multi_value"] = {c: b for c, b in table["multi_value"].items() if c in value}
            if isinstance(table.get("domains"), dict):
                table["domains"] = {c: b for c, b in table["domains"].items() if c in value}
            if isinstance(table.get("hash_buckets"), dict):
                table["hash_buckets"] = {c: b for c, b in table["hash_buckets"].items() if c in value}
    return out


def load_document(path: str) -> dict[str, Any]:
    """Read a TOML file as a dict (no validation; see :func:`parse_config`).

    Raises:
        ConfigError: the file cannot be read or parsed.
    """
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"cannot read config {path}: {err}") from err
