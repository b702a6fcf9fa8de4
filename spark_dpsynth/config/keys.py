"""The configuration's keys: which keys each section allows, and the schema, one :class:`ConfigKey` per key with its
type, allowed values and help (:func:`schema`), which is also the command line's options (:func:`option_for`,
:func:`keyword_keys`) and the check of every value's type (:func:`check_types`).

The keys of the parameter objects' sections are their dataclass fields, documented by the line under each field;
see :mod:`spark_dpsynth.config` for the file's layout.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import functools
import inspect
import re
import textwrap
from dataclasses import dataclass
from typing import Any

from spark_dpsynth import params as _params
from spark_dpsynth import registry
from spark_dpsynth.config.job import AUTO_SYNTHESIZER, LEGACY_SYNTHESIZER, SYNTHESIZERS, JobConfig
from spark_dpsynth.data.io import FORMATS, RAGGED_ROWS
from spark_dpsynth.errors import ConfigError
from spark_dpsynth.params import AggregationParams, DataConfig, SynthesisParams
from spark_dpsynth.privacy.budget import Budget

__all__ = [
    "BIN_KEYS",
    "CONSTRAINTS_KEYS",
    "DATA_KEYS",
    "EVALUATE_KEYS",
    "INPUT_KEYS",
    "OUTPUT_KEYS",
    "PUBLIC_TABLE_IO_KEYS",
    "RUN_KEYS",
    "SPARK_KEYS",
    "ConfigKey",
    "check_types",
    "keyword_keys",
    "option_for",
    "schema",
    "section_keys",
]

INPUT_KEYS = {"path", "table", "format", "delimiter", "encoding", "ragged_rows", "infer_schema", "schema"}
OUTPUT_KEYS = {"path", "table", "format", "overwrite", "single_csv", "sds_format", "join_multi_value"}
SPARK_KEYS = {"master", "remote"}
RUN_KEYS = {"quiet", "debug", "synthesizer", "release"}
PUBLIC_TABLE_IO_KEYS = ("public_input", "public_table", "public_format", "public_row_filter")
DATA_KEYS = {
    "columns",
    "empty_values",
    "zeros_are_empty",
    "sensitive_zeros",
    "row_filter",
    "bins",
    "privacy_unit",
    "person_rows",
    "max_rows_per_person",
    "rows_per_person_percentile",
    "rows_per_person_bound",
    "person_columns",
    "span_columns",
    "time_column",
    "multi_value",
    "max_multi_values",
    "record_limit",
    "domains",
    "categorical",
    "dp_bins",
    "text_numbers",
    "identifiers",
    "hash_buckets",
}
BIN_KEYS = {"edges", "labels", "passthrough", "lower", "upper", "count"}
EVALUATE_KEYS = {
    "max_marginal_length",
    "resolution",
    "label",
    "holdout_filter",
    "label_values",
    "tstr_max_rows",
    "numeric_columns",
    "max_subsets",
    "subset_seed",
    "max_rows",
}
CONSTRAINTS_KEYS = {"rules", "where"}
"""The keys each section of the file allows (the sections of the parameter objects: their fields)."""


def section_keys(spec: registry.MechanismSpec) -> set[str]:
    """The keys of a mechanism's section: its parameter fields less the inherited ones (plus the public table's
    keys for a mechanism that reads one)."""
    names = {f.name for f in dataclasses.fields(spec.params_class())} - set(spec.inherited)
    return names | (set(PUBLIC_TABLE_IO_KEYS) if spec.needs_public else set())


@dataclass(frozen=True)
class ConfigKey:
    """One key of the configuration file, which is also one command-line option."""

    section: str
    """The TOML table, e.g. ``"aggregate"``."""
    key: str
    """The key in that table, e.g. ``"epsilon"``."""
    kind: str
    """Value type: ``str``, ``int``, ``float``, ``bool``, ``str_list``, ``float_list`` or ``json`` (a table)."""
    help: str
    """One line: meaning, unit, range and default."""
    choices: tuple[str, ...] | None = None
    """The allowed values of a ``str`` key with a fixed set of values."""

    @property
    def name(self) -> str:
        """``section.key``."""
        return f"{self.section}.{self.key}"


_STATIC_KEYS = (
    ConfigKey("input", "path", "str", "the sensitive table: a CSV file (header row, gzip allowed), a Parquet or "
              "Delta directory; local or a URI (s3://, abfss://, dbfs:/)"),
    ConfigKey("input", "table", "str", "the sensitive table as a catalog table db.table (instead of a path)"),
    ConfigKey("input", "format", "str", "input format (default: from the path; a directory with _delta_log is "
              "delta, another directory parquet, a file csv)", FORMATS),
    ConfigKey("input", "delimiter", "str", "CSV field delimiter, one character (default ',')"),
    ConfigKey("input", "encoding", "str", "CSV encoding: utf-8 (default), us-ascii or iso-8859-1 (latin-1); a line "
              "not valid in it is an error naming the file and line"),
    ConfigKey("input", "ragged_rows", "str", "a CSV record with more or fewer fields than the header: error "
              "(default) or pad (empty values added, extra fields dropped)", RAGGED_ROWS),
    ConfigKey("input", "infer_schema", "bool", "CSV: infer the column types from the file with Spark's "
              "inferSchema, treated as public schema metadata (default true; false reads strings)"),
    ConfigKey("input", "schema", "str", "CSV: the declared schema as Spark DDL, e.g. \"age INT, sex STRING\" "
              "(wins over infer_schema; reads no data for the types)"),
    ConfigKey("output", "path", "str", "output directory: release/, synthetic/, synthetic.csv, evaluation/"),
    ConfigKey("output", "table", "str", "write the synthetic data to this catalog table db.table instead of "
              "DIR/synthetic"),
    ConfigKey("output", "format", "str", "format of the synthetic data (default parquet; for a table, the "
              "session's default source)", FORMATS),
    ConfigKey("output", "overwrite", "bool", "replace existing outputs (default false: an existing output is an "
              "error)"),
    ConfigKey("output", "single_csv", "bool", "also write DIR/synthetic.csv, one CSV file (default true)"),
    ConfigKey("output", "sds_format", "bool", "also write the release in SDS's aggregates formats, "
              "release/sds_aggregates.tsv and .json (protected record count only; default false)"),
    ConfigKey("output", "join_multi_value", "bool", "join each multi-value column's values back into one "
              "delimited column of the synthetic data (default true; false: one binary column per value)"),
    ConfigKey("spark", "master", "str", "Spark master URL (default: spark-submit's, else local[*])"),
    ConfigKey("spark", "remote", "str", "Spark Connect URL, e.g. sc://host:15002 (local[2] starts a local "
              "Connect server)"),
    ConfigKey("run", "quiet", "bool", "log warnings only (default false)"),
    ConfigKey("run", "synthesizer", "str", "the method, which also picks the mechanism: "
              + "; ".join(f"{s.name}: {s.summary} (mechanism {s.mechanisms[0]})" for s in registry.SYNTHESIZERS.values())
              + f"; {LEGACY_SYNTHESIZER}: the marginals mechanism, then [synthesize] mode; {AUTO_SYNTHESIZER} "
              "(default): pgm (AIM; MST on more than 25 columns when the budget is small for the width), or model "
              "(every subset of at most R columns) when every column has public values and the protected number "
              "of records makes their noise small "
              "(docs/design.md section 4.7); with --sds-format or --mode sds the marginals mechanism",
              SYNTHESIZERS),
    ConfigKey("run", "debug", "bool", "show full tracebacks on failure, which may show data values (default "
              "false)"),
    ConfigKey("run", "release", "str", "synthesize, evaluate: the release to read, a release directory or an "
              "SDS aggregates file (.tsv or .json, e.g. from pac-synth or SDS's web app); default DIR/release"),
    ConfigKey("query", "sql", "str", "query: Spark SQL counts over the release's table t, e.g. \"SELECT sex, "
              "count(*) AS n FROM t GROUP BY sex\", answered with standard errors"),
    ConfigKey("data", "row_filter", "str", "Spark SQL predicate on public columns applied to the input first, "
              "e.g. \"split = 'train'\" (default none)"),
)  # fmt: skip


_OPTIONS = {
    "input.path": "--input",
    "input.table": "--input-table",
    "input.format": "--format",
    "output.path": "--output",
    "output.table": "--output-table",
    "output.format": "--output-format",
    "aggregate.seed": "--seed",
    "synthesize.seed": "--seed",
    "data.domains": "--data-domains",
    "constraints.rules": "--constraints",
}
"""The keys whose command-line option is not ``--key-name``."""


def option_for(key: ConfigKey) -> str:
    """The command-line option of a configuration key (``--key-name`` unless renamed)."""
    return _OPTIONS.get(key.name, "--" + key.key.replace("_", "-"))


def keyword_keys() -> dict[str, list[ConfigKey]]:
    """The keys by the keyword of the library's options: the command-line option without ``--``, ``-`` written
    ``_`` (``reporting_length``); ``seed`` is both ``[aggregate] seed`` and ``[synthesize] seed``, as ``--seed``."""
    out: dict[str, list[ConfigKey]] = {}
    for key in schema():
        out.setdefault(option_for(key)[2:].replace("-", "_"), []).append(key)
    return out


def _field_docs(cls: type) -> dict[str, str]:
    """The attribute docstrings of a dataclass (the line under each field), joined to one line."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    docs: dict[str, str] = {}
    for node, nxt in zip(body, body[1:], strict=False):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def _plain(text: str) -> str:
    """A docstring line without reStructuredText markup (for --help)."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", text)
    return text.replace("``", "")


def _kind(annotation: Any) -> tuple[str, tuple[str, ...] | None]:
    """(kind, choices) of a dataclass field from its annotation (a string under postponed evaluation)."""
    text = str(annotation).replace(" | None", "").replace("None | ", "").strip()
    if text in ("float", "int", "bool", "str"):
        return text, None
    if text.startswith("tuple[float") or text.startswith("tuple[int"):
        return "float_list", None
    if text.startswith("tuple[str"):
        return "str_list", None
    if text.startswith(("Mapping", "dict")):
        return "json", None
    cls = getattr(_params, text, None)
    if isinstance(cls, type) and issubclass(cls, enum.Enum):
        return "str", tuple(str(m.value) for m in cls)
    raise TypeError(f"no configuration kind for a field of type {text}")


def _dataclass_keys(section: str, cls: type, names: set[str] | None = None) -> list[ConfigKey]:
    docs = _field_docs(cls)
    keys = []
    for f in dataclasses.fields(cls):
        if names is not None and f.name not in names:
            continue
        kind, choices = _kind(f.type)
        default = f.default if f.default is not dataclasses.MISSING else None
        if isinstance(default, enum.Enum):
            shown = str(default.value)
        elif isinstance(default, bool):
            shown = "true" if default else "false"
        elif default is None or default == ():
            shown = "none"
        else:
            shown = str(default)
        text = _plain(docs.get(f.name, f.name.replace("_", " ")))
        keys.append(ConfigKey(section, f.name, kind, f"{text} (default {shown})", choices))
    return keys


@functools.cache
def schema() -> tuple[ConfigKey, ...]:
    """Every configuration key, in file order: the static ones, then those of the parameter objects.

    The [data], [aggregate] and [synthesize] keys are the fields of :class:`DataConfig`, the
    :class:`~spark_dpsynth.privacy.budget.Budget` and :class:`AggregationParams`, and :class:`SynthesisParams`
    (their docstrings are the help texts); the
    [evaluate] keys are the :class:`JobConfig` fields of that section.
    """
    keys = list(_STATIC_KEYS[:-1])
    keys += _dataclass_keys("data", DataConfig)
    keys.append(_STATIC_KEYS[-1])
    keys += _dataclass_keys("aggregate", Budget)
    keys += _dataclass_keys("aggregate", AggregationParams)
    keys += _dataclass_keys("synthesize", SynthesisParams)
    keys += _dataclass_keys("evaluate", JobConfig, set(EVALUATE_KEYS))
    keys += _CONSTRAINT_KEYS
    for spec in registry.MECHANISMS.values():
        if spec.section == "aggregate":
            continue
        if spec.needs_public:
            keys += [
                dataclasses.replace(k, section=spec.section, help=f"{spec.name}: {k.help}")
                for k in _PUBLIC_TABLE_KEYS
            ]
        own = section_keys(spec) - set(PUBLIC_TABLE_IO_KEYS)
        keys += _dataclass_keys(spec.section, spec.params_class(), own)
    return tuple(keys)


_CONSTRAINT_KEYS = (
    ConfigKey("constraints", "rules", "str_list", "declared rules: Spark SQL boolean expressions over the output "
              "columns that every synthetic row satisfies, e.g. \"NOT (AGEP < 15 AND MSP IS NOT NULL)\"; public "
              "(no budget), written in the release's manifest (default none)"),
    ConfigKey("constraints", "where", "str", "a condition: every synthetic row satisfies this Spark SQL boolean "
              "expression, drawn from the model conditioned on it, e.g. \"SEX = 2 AND AGEP >= 60\" (default none)"),
)  # fmt: skip
"""The keys of ``[constraints]`` (docs/design.md section 4.8, "Conditions and declared rules")."""


_PUBLIC_TABLE_KEYS = [
    ConfigKey("public", "public_input", "str", "the PUBLIC table (same schema as the input): a CSV file, a "
              "Parquet or Delta directory, local or a URI"),
    ConfigKey("public", "public_table", "str", "the public table as a catalog table db.table"),
    ConfigKey("public", "public_format", "str", "format of public_input (default: from the path)", FORMATS),
    ConfigKey("public", "public_row_filter", "str", "Spark SQL predicate applied to the public table first, "
              "e.g. \"pmod(xxhash64(idcode), 10) < 3\" (default none)"),
]  # fmt: skip
"""The keys of a mechanism that reads a public table (in that mechanism's section)."""


_TYPE_WORDS = {
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "str_list": "a list of strings",
    "float_list": "a list of numbers",
    "json": "a table",
}


def _type_ok(kind: str, value: Any) -> bool:
    if kind == "str":
        return isinstance(value, str)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "str_list":
        return isinstance(value, list | tuple) and all(isinstance(x, str) for x in value)
    if kind == "float_list":
        return isinstance(value, list | tuple) and all(
            isinstance(x, int | float) and not isinstance(x, bool) for x in value
        )
    return isinstance(value, dict)


def check_types(doc: dict[str, Any]) -> None:
    """Check the type and allowed values of every known key (unknown keys are reported by _check_keys)."""
    for key in schema():
        if key.section == "evaluate":  # that section checks its own values in parse_config
            continue
        table = doc.get(key.section)
        if not isinstance(table, dict) or key.key not in table:
            continue
        value = table[key.key]
        if not _type_ok(key.kind, value):
            raise ConfigError(f"[{key.section}] {key.key} must be {_TYPE_WORDS[key.kind]}, got {value!r}")
        if key.choices is not None and value not in key.choices:
            raise ConfigError(f"[{key.section}] {key.key} must be one of {list(key.choices)}, got {value!r}")
