"""TOML configuration: one file holds the data, aggregation, synthesis and evaluation settings.

Layout (every table and key is optional; unknown keys are errors that name the key)::

    [input]            path, format ("csv" | "parquet"), delimiter
    [data]             columns, empty_values, zeros_are_empty, sensitive_zeros, row_filter
    [data.bins.COL]    edges, labels
    [aggregate]        the fields of AggregationParams
    [synthesize]       the fields of SynthesisParams
    [evaluate]         max_marginal_length

See ``conf/adult.toml`` for a commented example.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from typing import Any

from spark_dpsynth.errors import ConfigError, DPSynthError
from spark_dpsynth.params import AggregationParams, BinSpec, DataConfig, SynthesisParams

__all__ = ["JobConfig", "load_config", "parse_config"]

_INPUT_KEYS = {"path", "format", "delimiter"}
_DATA_KEYS = {"columns", "empty_values", "zeros_are_empty", "sensitive_zeros", "row_filter", "bins"}
_BIN_KEYS = {"edges", "labels", "passthrough"}
_EVALUATE_KEYS = {"max_marginal_length"}
_FORMATS = ("csv", "parquet")


@dataclass(frozen=True)
class JobConfig:
    """Everything a job needs besides the Spark session (all parameters validated)."""

    data: DataConfig = field(default_factory=DataConfig)
    aggregate: AggregationParams = field(default_factory=AggregationParams)
    synthesize: SynthesisParams = field(default_factory=SynthesisParams)
    input_path: str | None = None
    """Default input when the command line gives none."""
    input_format: str | None = None
    """"csv" or "parquet"; None guesses from the path (".parquet" or a directory of Parquet files)."""
    delimiter: str = ","
    """CSV field delimiter."""
    row_filter: str | None = None
    """Spark SQL predicate applied to the input before anything else (e.g. ``"split = 'train'"``); public."""
    max_marginal_length: int = 3
    """Longest column combination the evaluation compares (1..3 typical)."""


def _check_keys(section: str, table: Any, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise ConfigError(f"[{section}] must be a table, got {type(table).__name__}")
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ConfigError(f"unknown key(s) {unknown} in [{section}]; allowed: {sorted(allowed)}")
    return table


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


def parse_config(doc: dict[str, Any]) -> JobConfig:
    """Validate a parsed TOML document into a :class:`JobConfig`.

    Raises:
        ConfigError: an unknown section or key, or a value outside its range (the message names the key).
    """
    allowed = {"input", "data", "aggregate", "synthesize", "evaluate"}
    _check_keys("top level", doc, allowed)
    inp = _check_keys("input", doc.get("input", {}), _INPUT_KEYS)
    fmt = inp.get("format")
    if fmt is not None and fmt not in _FORMATS:
        raise ConfigError(f"[input] format must be one of {list(_FORMATS)}, got {fmt!r}")
    delimiter = inp.get("delimiter", ",")
    if not isinstance(delimiter, str) or len(delimiter) != 1:
        raise ConfigError(f"[input] delimiter must be one character, got {delimiter!r}")
    data = dict(_check_keys("data", doc.get("data", {}), _DATA_KEYS))
    row_filter = data.pop("row_filter", None)
    if row_filter is not None and not isinstance(row_filter, str):
        raise ConfigError(f"[data] row_filter must be a string, got {row_filter!r}")
    bins = {}
    raw_bins = data.pop("bins", {})
    if not isinstance(raw_bins, dict):
        raise ConfigError("[data.bins] must be a table of column tables")
    for col, spec in raw_bins.items():
        spec = _check_keys(f"data.bins.{col}", spec, _BIN_KEYS)
        if "edges" not in spec:
            raise ConfigError(f"[data.bins.{col}] needs edges")
        bins[col] = _build(BinSpec, f"data.bins.{col}", spec)
    data_config = _build(DataConfig, "data", {**data, "bins": bins})
    evaluate = _check_keys("evaluate", doc.get("evaluate", {}), _EVALUATE_KEYS)
    mml = evaluate.get("max_marginal_length", 3)
    if isinstance(mml, bool) or not isinstance(mml, int) or mml < 1:
        raise ConfigError(f"[evaluate] max_marginal_length must be an integer >= 1, got {mml!r}")
    return JobConfig(
        data=data_config,
        aggregate=_build(AggregationParams, "aggregate", doc.get("aggregate", {})),
        synthesize=_build(SynthesisParams, "synthesize", doc.get("synthesize", {})),
        input_path=inp.get("path"),
        input_format=fmt,
        delimiter=delimiter,
        row_filter=row_filter,
        max_marginal_length=mml,
    )


def load_config(path: str) -> JobConfig:
    """Read and validate a TOML configuration file.

    Raises:
        ConfigError: the file cannot be read or parsed, or :func:`parse_config` rejects it.
    """
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"cannot read config {path}: {err}") from err
    return parse_config(doc)
