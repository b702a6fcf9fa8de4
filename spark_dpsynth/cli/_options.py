"""The command line's options: one subcommand per pipeline step, one option per key of the configuration
(:mod:`spark_dpsynth.config`), parsed into a :class:`~spark_dpsynth.config.JobConfig`."""

from __future__ import annotations

import argparse
import json
from typing import Any

from spark_dpsynth import registry
from spark_dpsynth.config import ConfigKey, JobConfig, load_document, merge, option_for, parse_config, schema
from spark_dpsynth.errors import ConfigError

__all__ = ["COMMANDS", "build_parser", "load_job_config", "option_for"]

_MECHANISM_SECTIONS = tuple(dict.fromkeys(spec.section for spec in registry.MECHANISMS.values()))
COMMANDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "pipeline": (
        "aggregate, synthesize and evaluate",
        (
            "input",
            "output",
            "spark",
            "run",
            "data",
            *_MECHANISM_SECTIONS,
            "synthesize",
            "evaluate",
            "constraints",
        ),
    ),
    "aggregate": (
        "input -> DIR/release (a DP mechanism)",
        ("input", "output", "spark", "run", "data", *_MECHANISM_SECTIONS, "evaluate", "constraints"),
    ),
    "synthesize": (
        "DIR/release -> DIR/synthetic (post-processing, no privacy cost)",
        ("output", "spark", "run", "synthesize", "constraints"),
    ),
    "evaluate": (
        "input + DIR/release + synthetic data -> DIR/evaluation (not private)",
        ("input", "output", "spark", "run", "data", "evaluate"),
    ),
    "query": (
        "DIR/release (or --release) + --sql -> counts with standard errors as CSV (post-processing)",
        ("output", "spark", "run", "query"),
    ),
}
"""Subcommand -> (help, the configuration sections whose keys are its options)."""

_ALIASES = {"data.columns": ("--use-columns",)}
"""More option strings of a key (SDS's names)."""
_METAVARS = {"int": "N", "float": "X", "str_list": "A,B,...", "float_list": "X,Y,...", "json": "JSON"}
_SEED_HELP = (
    "TEST MODE: reproducible output from a non-cryptographic generator; the result is NOT private "
    "([aggregate] seed and [synthesize] seed; default none)"
)


def _str_list(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _float_list(text: str) -> list[float]:
    try:
        return [float(x) for x in _str_list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def _column_delimiter(text: str) -> tuple[str, str]:
    column, sep, delimiter = text.partition(":")
    if not sep or not column or not delimiter:
        raise argparse.ArgumentTypeError(f"expected COLUMN:DELIMITER, e.g. genres:'|', got {text!r}")
    return column, delimiter


def _json_table(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"expected a JSON object: {err}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {type(value).__name__}")
    return value


_TYPES = {
    "int": int,
    "float": float,
    "str": str,
    "str_list": _str_list,
    "float_list": _float_list,
    "json": _json_table,
}


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line, like every other error of the command."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"spark-dpsynth: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The parser: one subcommand per pipeline stage, one option per configuration key of its sections."""
    parser = _Parser(
        prog="spark-dpsynth",
        description="Differentially private marginals (SDS method) and synthetic data on Apache Spark. "
        "Every option is also a key of the TOML config file (--config); the command line wins.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    for command, (text, sections) in COMMANDS.items():
        p = sub.add_parser(command, help=text, description=text, conflict_handler="resolve")
        p.add_argument("--config", metavar="FILE.toml", help="TOML configuration file (see conf/adult.toml)")
        _add_options(p, [k for k in schema() if k.section in sections])
    return parser


def _add_options(p: argparse.ArgumentParser, keys: list[ConfigKey]) -> None:
    by_flag: dict[str, list[ConfigKey]] = {}
    for key in keys:
        by_flag.setdefault(option_for(key), []).append(key)
    groups: dict[str, Any] = {}
    for flag, group in by_flag.items():
        key = group[0]
        section = groups.get(key.section)
        if section is None:
            section = groups[key.section] = p.add_argument_group(f"[{key.section}]")
        kwargs: dict[str, Any] = {
            "dest": flag[2:].replace("-", "_"),
            "default": argparse.SUPPRESS,
            "help": _SEED_HELP if flag == "--seed" else f"{key.help} [{key.name}]".replace("%", "%%"),
        }
        if key.kind == "bool":
            kwargs["action"] = argparse.BooleanOptionalAction
        elif key.name == "constraints.rules":  # an expression may hold commas: one rule per option
            kwargs.update(action="append", type=str, metavar="EXPR")
            kwargs["help"] = f"{key.help}; repeatable, one rule each [{key.name}]"
        elif key.name == "data.multi_value":
            kwargs.update(action="append", type=_column_delimiter, metavar="COLUMN:DELIM")
            kwargs["help"] = f"a multi-value column and the delimiter of its values; repeatable [{key.name}]"
        else:
            kwargs["type"] = _TYPES[key.kind]
            if key.choices:
                kwargs["choices"] = key.choices
            else:
                kwargs["metavar"] = _METAVARS.get(key.kind, key.key.upper())
        section.add_argument(flag, *_ALIASES.get(key.name, ()), **kwargs)


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    """``section.key -> value`` for every option given on the command line."""
    sections = COMMANDS[args.command][1]
    given = vars(args)
    out: dict[str, Any] = {}
    for key in schema():
        if key.section not in sections:
            continue
        dest = option_for(key)[2:].replace("-", "_")
        if dest in given:
            value = given[dest]
            out[key.name] = dict(value) if key.name == "data.multi_value" else value
    return out


def load_job_config(args: argparse.Namespace) -> JobConfig:
    """The config file (if any) with the command-line options applied, validated.

    Raises:
        ConfigError: a key or an option has a wrong type or value (the message names the key or the option).
    """
    doc = load_document(args.config) if getattr(args, "config", None) else {}
    overrides = _overrides(args)
    try:
        return parse_config(merge(doc, overrides))
    except ConfigError as err:
        message = str(err)
        for name in overrides:
            section, key = name.split(".", 1)
            prefix = f"[{section}] {key} "
            if message.startswith(prefix):
                flag = option_for(next(k for k in schema() if k.name == name))
                raise ConfigError(f"argument {flag}: {message[len(f'[{section}] ') :]}") from err
        raise
