"""Configuration: the schema, validation errors that name the key and the allowed values, the examples in conf/."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from spark_dpsynth.config import JobConfig, load_config, merge, parse_config, schema
from spark_dpsynth.errors import ConfigError
from spark_dpsynth.params import AggregationParams, DataConfig, SynthesisParams
from tests.conftest import ROOT


def test_schema_holds_every_field_of_the_parameter_objects() -> None:
    keys = {k.name for k in schema()}
    for section, cls in (
        ("aggregate", AggregationParams),
        ("synthesize", SynthesisParams),
        ("data", DataConfig),
    ):
        for f in dataclasses.fields(cls):
            assert f"{section}.{f.name}" in keys
    assert {"input.path", "input.table", "output.table", "output.overwrite", "spark.remote"} <= keys
    assert len(keys) == len(schema()), "no key twice"


def test_schema_help_gives_meaning_and_default() -> None:
    for key in schema():
        assert key.help and "``" not in key.help and ":class:" not in key.help, key.name
        if key.section in ("aggregate", "synthesize"):
            assert "(default " in key.help, key.name
    epsilon = next(k for k in schema() if k.name == "aggregate.epsilon")
    assert epsilon.kind == "float" and "(default 4.0)" in epsilon.help
    mode = next(k for k in schema() if k.name == "aggregate.accuracy_mode")
    assert mode.choices == ("prioritize_long", "prioritize_short", "balanced", "custom")


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"outputs": {}}, "unknown key(s) ['outputs'] in [top level]; allowed: "),
        (
            {"output": {"dir": "x"}},
            "unknown key(s) ['dir'] in [output]; allowed: ['format', 'join_multi_value', 'overwrite', 'path', ",
        ),
        (
            {"input": {"format": "orc"}},
            "[input] format must be one of ['csv', 'parquet', 'delta'], got 'orc'",
        ),
        (
            {"output": {"format": "xlsx"}},
            "[output] format must be one of ['csv', 'parquet', 'delta'], got 'xlsx'",
        ),
        ({"output": {"overwrite": "yes"}}, "[output] overwrite must be true or false, got 'yes'"),
        ({"input": {"path": 3}}, "[input] path must be a string, got 3"),
        ({"input": {"path": "a.csv", "table": "db.t"}}, "[input] give either path or table, not both"),
        ({"input": {"table": "db.t; drop"}}, "[input] table must be a table name like db.table"),
        ({"output": {"table": "a.b.c.d"}}, "[output] table must be a table name like db.table"),
        (
            {"spark": {"master": "local[1]", "remote": "sc://h"}},
            "[spark] give either master or remote, not both",
        ),
        ({"run": {"quiet": 1}}, "[run] quiet must be true or false, got 1"),
        ({"data": {"columns": "age"}}, "[data] columns must be a list of strings, got 'age'"),
        ({"data": {"bins": [1, 2]}}, "[data] bins must be a table, got [1, 2]"),
        ({"aggregate": {"epsilon": "4"}}, "[aggregate] epsilon must be a number, got '4'"),
        ({"aggregate": {"epsilon": 0}}, "[aggregate] epsilon must be > 0, got 0"),
        (
            {"aggregate": {"reporting_length": 2.5}},
            "[aggregate] reporting_length must be an integer, got 2.5",
        ),
        (
            {"aggregate": {"accuracy_mode": "long"}},
            "[aggregate] accuracy_mode must be one of ['prioritize_long', 'prioritize_short', 'balanced', "
            "'custom'], got 'long'",
        ),
        ({"aggregate": {"thresholds": ["a"]}}, "[aggregate] thresholds must be a list of numbers, got ['a']"),
        (
            {"synthesize": {"use_synthetic_counts": "no"}},
            "[synthesize] use_synthetic_counts must be true or false",
        ),
        ({"synthesize": {"partitions": 0}}, "[synthesize] partitions must be >= 1, got 0"),
    ],
)
def test_errors_name_the_key_and_the_allowed_values(doc: dict, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(doc)
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


def test_new_sections_fill_the_job_config() -> None:
    config = parse_config(
        {
            "input": {"table": "db.people"},
            "output": {"path": "out", "table": "db.synthetic", "format": "delta", "overwrite": True},
            "spark": {"remote": "sc://localhost:15002"},
            "run": {"quiet": True},
        }
    )
    assert config == dataclasses.replace(
        JobConfig(),
        input_table="db.people",
        output_path="out",
        output_table="db.synthetic",
        output_format="delta",
        overwrite=True,
        remote="sc://localhost:15002",
        quiet=True,
    )


def test_merge_lets_the_command_line_win() -> None:
    doc = {
        "input": {"table": "db.t"},
        "data": {"columns": ["a", "b"], "sensitive_zeros": ["a", "b"], "bins": {"a": {"edges": [1]}}},
        "aggregate": {"epsilon": 1.0},
    }
    merged = merge(doc, {"input.path": "x.csv", "data.columns": ["b"], "aggregate.epsilon": 2.0})
    assert merged["input"] == {"path": "x.csv"}
    assert merged["data"] == {"columns": ["b"], "sensitive_zeros": ["b"], "bins": {}}
    assert merged["aggregate"] == {"epsilon": 2.0}
    assert doc["aggregate"] == {"epsilon": 1.0}, "the document itself is not changed"
    config = parse_config(merged)
    assert config.input_path == "x.csv" and config.input_table is None and config.budget.epsilon == 2.0


@pytest.mark.parametrize("path", sorted((ROOT / "conf").glob("*.toml")), ids=lambda p: p.name)
def test_every_example_config_loads_and_is_commented(path: Path) -> None:
    config = load_config(str(path))
    assert isinstance(config, JobConfig)
    text = path.read_text()
    assert text.lstrip().startswith("#"), "an example starts with a comment saying what it is for"
    assert sum(line.lstrip().startswith("#") for line in text.splitlines()) >= 5


def test_the_examples_cover_tables_delta_and_connect() -> None:
    sections = {}
    for path in (ROOT / "conf").glob("*.toml"):
        config = load_config(str(path))
        sections[path.name] = config
    assert any(c.input_table and c.output_table for c in sections.values())
    assert any(c.output_format == "delta" for c in sections.values())
    assert any(c.remote for c in sections.values())


def test_the_default_synthesizer_is_pgm_unless_the_job_asks_for_sds_aggregates() -> None:
    """`auto` (the default): the workload mechanism and pgm; SDS's formats or sampler: the marginals mechanism."""
    config = parse_config({})
    assert config.synthesizer == "auto"
    assert (config.synthesizer_name(), config.mechanism_name(), config.requested_synthesizer()) == (
        "pgm",
        "workload",
        None,  # `synthesize` lets the release decide
    )
    sds_format = parse_config({"output": {"sds_format": True}})
    assert (sds_format.synthesizer_name(), sds_format.mechanism_name()) == ("model", "marginals")
    sds_mode = parse_config({"synthesize": {"mode": "sds"}})
    assert (sds_mode.synthesizer_name(), sds_mode.requested_synthesizer()) == ("sds", "sds")
    legacy = parse_config({"run": {"synthesizer": "aggregate_seeded"}})
    assert (legacy.synthesizer_name(), legacy.mechanism_name()) == ("model", "marginals")
    explicit = parse_config({"run": {"synthesizer": "model"}})
    assert (explicit.mechanism_name(), explicit.requested_synthesizer()) == ("marginals", "model")


def test_the_test_of_numbers_written_as_text_is_off_when_every_column_is_read_as_a_string() -> None:
    # inferred types (the default): the DP test runs on the string columns; every column a string by the
    # user's choice: categories, no test; a declared schema or an explicit key wins
    assert parse_config({}).data.text_numbers is None
    assert parse_config({"input": {"infer_schema": False}}).data.text_numbers is False
    declared = {"input": {"infer_schema": False, "schema": "a STRING, b INT"}}
    assert parse_config(declared).data.text_numbers is None
    explicit = {"input": {"infer_schema": False}, "data": {"text_numbers": True}}
    assert parse_config(explicit).data.text_numbers is True
    with pytest.raises(ConfigError, match="text_numbers"):
        parse_config({"data": {"text_numbers": "yes"}})
