"""Public domains (codebooks) of categorical columns: validation, preparation, types, config, workload."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from spark_dpsynth.config import merge, parse_config
from spark_dpsynth.errors import ConfigError, InvalidParameterError
from spark_dpsynth.params import BinSpec, DataConfig
from spark_dpsynth.privacy.budget import Budget


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"domains": {"a": ()}}, r"domains\['a'\] must hold at least one value"),
        ({"domains": {"a": "xy"}}, r"domains\['a'\] must be a list of strings"),
        ({"domains": {"a": ("x", 1)}}, r"domains\['a'\] must hold strings"),
        ({"domains": {"a": ("x", " x")}}, r"domains\['a'\] values must be distinct, got duplicates \['x'\]"),
        ({"domains": {"a": ("x", " ")}}, r"domains\['a'\] holds value\(s\) \[''\]"),
        ({"domains": {"a": ("x", "?")}, "empty_values": ("?",)}, r"treats as empty"),
        ({"domains": {"a": ("0", "1")}, "zeros_are_empty": True}, r"treats as empty"),
        ({"domains": {"a": ("x",)}, "bins": {"a": BinSpec(edges=(1,))}}, "both a public domain and bins"),
        ({"domains": {"a": ("x",)}, "multi_value": {"a": "|"}}, "both a public domain and multi_value"),
        ({"domains": {"u": ("x",)}, "privacy_unit": "u"}, "remove it from domains"),
        ({"domains": {"z": ("x",)}, "columns": ("a", "b")}, r"domains names columns not in columns: \['z'\]"),
        ({"domains": ["a"]}, "domains must map column names"),
    ],
)
def test_domains_validation(kwargs: dict, match: str) -> None:
    with pytest.raises(InvalidParameterError, match=match):
        DataConfig(**kwargs)


def test_domains_are_trimmed_tuples_and_zero_can_be_a_sensitive_value() -> None:
    config = DataConfig(domains={"a": [" x", "y "]})
    assert config.domains == {"a": ("x", "y")}
    kept = DataConfig(domains={"a": ("0", "1")}, zeros_are_empty=True, sensitive_zeros=("a",))
    assert kept.domains["a"] == ("0", "1")


def test_config_parses_data_domains() -> None:
    doc = {"data": {"columns": ["a", "b"], "domains": {"a": ["x", "y"]}}}
    assert parse_config(doc).data.domains == {"a": ("x", "y")}
    with pytest.raises(ConfigError, match=r"\[data.domains\] a must be a non-empty list of strings"):
        parse_config({"data": {"domains": {"a": "x"}}})
    with pytest.raises(ConfigError, match=r"\[data\] domains must be a table"):
        parse_config({"data": {"domains": ["a"]}})
    with pytest.raises(ConfigError, match=r"\[data\] domains\['a'\] values must be distinct"):
        parse_config({"data": {"domains": {"a": ["x", "x"]}}})
    # overriding the columns drops the domains of the other columns
    assert parse_config(merge(doc, {"data.columns": ["b"]})).data.domains == {}


def test_adult_config_domains_come_from_the_codebook() -> None:
    from spark_dpsynth.config import load_config

    config = load_config("conf/adult.toml").data
    assert len(config.domains["native_country"]) == 41
    assert "Holand-Netherlands" in config.domains["native_country"]
    assert config.domains["education"][:3] == ("Bachelors", "Some-college", "11th")
    assert all(v == v.strip() for vals in config.domains.values() for v in vals)


def test_out_of_domain_values_are_empty_and_typed_as_categories(spark) -> None:
    from pyspark.sql import types as T

    from spark_dpsynth.data.prepare import prepare
    from spark_dpsynth.profile import column_types

    schema = T.StructType([T.StructField("a", T.StringType()), T.StructField("n", T.IntegerType())])
    df = spark.createDataFrame([(" x ", 1), ("v", 2), (None, 3), ("y", 7)], schema)
    config = DataConfig(domains={"a": ("x", "y", "z"), "n": ("1", "2", "3")})
    rows = prepare(df, config).collect()  # 4 rows
    assert [(r["a"], r["n"]) for r in rows] == [("x", "1"), (None, "2"), (None, "3"), ("y", None)]
    types = column_types(df.schema, config.with_columns(("a", "n")))
    assert types["n"].scale == "category" and not types["n"].binned  # a codebook column is never binned


def test_workload_spends_no_discovery_budget_on_public_domains(spark) -> None:
    from spark_dpsynth.mechanisms.workload import fit_workload
    from spark_dpsynth.params import WorkloadParams
    from spark_dpsynth.privacy.noise import NoNoise

    # a: public domain x, y, z, w; "v" is outside it and z, w never occur. b and c are discovered.
    a = ["x"] * 90 + ["y"] * 60 + ["v"] * 30 + [None] * 20
    df = spark.createDataFrame(pd.DataFrame({"a": a, "b": ["p", "q"] * 100, "c": ["r"] * 150 + ["s"] * 50}))
    data = DataConfig(domains={"a": ("x", "y", "z", "w")})
    params = WorkloadParams(selection="mst", reporting_length=2, estimation_iterations=5)
    budget = Budget(epsilon=2.0, delta=1e-6, seed=1)
    release = fit_workload(df, params, data, noise=NoNoise(), budget=budget)
    m = release.manifest
    disc = m["domain_discovery"]
    assert disc["public_domain_columns"] == ["a"] and disc["columns"] == ["b", "c"]
    assert disc["sensitivity"] == 2  # Delta_1 counts only the discovered columns
    assert m["data"]["domains"] == {"a": ["x", "y", "z", "w"]}
    assert release.domains[0] == ("x", "y", "z", "w")
    one_way = next(x for x in release.measurements if x.clique == ("a",))
    # the whole public domain plus the empty cell; absent values are zero cells; "v" and null are empty
    assert one_way.values.tolist() == [90.0, 60.0, 0.0, 0.0, 50.0]
    assert '"v"' not in json.dumps(m.to_json())


def test_class_conditional_takes_the_data_config_domains() -> None:
    from spark_dpsynth.mechanisms.class_conditional import ClassConditionalParams, _public_domains

    data = DataConfig(domains={"job": ("blue", "white"), "income": ("<=50K", ">50K")})
    params = ClassConditionalParams(label="income", domains={"income": (">50K", "<=50K")})
    domains = _public_domains(("job", "education", "income"), data, params)
    # its own [class_conditional] domains win; education has no public domain and is discovered
    assert domains == {"job": ("blue", "white"), "income": (">50K", "<=50K")}


def test_command_line_data_domains_and_the_class_conditional_domains_are_apart() -> None:
    from spark_dpsynth.cli.main import build_parser, load_job_config

    args = build_parser().parse_args(
        ["pipeline", "--input", "x.csv", "--data-domains", '{"sex": ["Female", "Male"]}', "--label", "sex"]
    )
    config = load_job_config(args)
    assert config.data.domains == {"sex": ("Female", "Male")}
    assert config.mechanism_params("class_conditional").domains == {}  # --domains stays class_conditional's


def test_a_numeric_columns_codebook_is_matched_on_numbers(spark) -> None:
    from spark_dpsynth.data.prepare import prepare

    # codes read as doubles (9.0) or integers match the codebook's spelling ("09", "9"); other values are empty
    df = spark.createDataFrame([(1.0, 9), (9.0, 1), (None, 3), (2.5, 99)], "a double, b int")
    config = DataConfig(domains={"a": ("01", "09", "2.5", "x"), "b": ("1", "9", "99")})
    got = [tuple(r) for r in prepare(df, config).collect()]
    assert got == [("01", "9"), ("09", "1"), (None, None), ("2.5", "99")]
