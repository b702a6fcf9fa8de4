"""Identifier columns (left out of every measurement, surrogate keys out) and hash buckets (a public domain of
bucket labels): validation, configuration, preparation, the mechanisms and type restoration."""

from __future__ import annotations

import json

import pytest

from spark_dpsynth.config import merge, parse_config
from spark_dpsynth.errors import ConfigError, InvalidParameterError, SchemaError
from spark_dpsynth.params import BinSpec, DataConfig, WorkloadParams, hash_bucket_labels
from spark_dpsynth.privacy.budget import Budget


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"identifiers": "id"}, "identifiers must be a list of column names"),
        ({"identifiers": ("id", "id")}, r"identifiers must be distinct, got duplicates \['id'\]"),
        ({"identifiers": ("id",), "columns": ("id", "a")}, r"\['id'\] .* cannot be in columns"),
        ({"identifiers": ("id",), "bins": {"id": BinSpec(edges=(1,))}}, "cannot be in bins"),
        ({"identifiers": ("id",), "domains": {"id": ("x",)}}, "cannot be in domains"),
        ({"identifiers": ("id",), "categorical": ("id",)}, "cannot be in categorical"),
        ({"identifiers": ("id",), "hash_buckets": {"id": 8}}, "cannot be in hash_buckets"),
        ({"hash_buckets": {"a": 1}}, r"hash_buckets\['a'\] must be >= 2, got 1"),
        ({"hash_buckets": {"a": 10_001}}, r"hash_buckets\['a'\] must be <= 10000, got 10001"),
        ({"hash_buckets": {"a": 8.0}}, r"hash_buckets\['a'\] must be an integer, got 8.0"),
        ({"hash_buckets": ["a"]}, "hash_buckets must map column names to bucket counts"),
        ({"hash_buckets": {"a": 8}, "bins": {"a": BinSpec(edges=(1,))}}, "both hash_buckets and bins"),
        ({"hash_buckets": {"a": 8}, "domains": {"a": ("x",)}}, "both hash_buckets and domains"),
        ({"hash_buckets": {"a": 8}, "categorical": ("a",)}, "both hash_buckets and categorical"),
        ({"hash_buckets": {"a": 8}, "multi_value": {"a": "|"}}, "both hash_buckets and multi_value"),
        ({"hash_buckets": {"u": 8}, "privacy_unit": "u"}, "both hash_buckets and privacy_unit"),
        (
            {"hash_buckets": {"z": 8}, "columns": ("a",)},
            r"hash_buckets names columns not in columns: \['z'\]",
        ),
    ],
)
def test_identifier_and_hash_bucket_validation(kwargs: dict, match: str) -> None:
    with pytest.raises(InvalidParameterError, match=match):
        DataConfig(**kwargs)


def test_bucket_labels_are_public_and_sort_in_bucket_order() -> None:
    labels = hash_bucket_labels(12)
    assert labels[0] == "bucket 00 of 12" and labels[-1] == "bucket 11 of 12"
    assert list(labels) == sorted(labels) and len(set(labels)) == 12
    config = DataConfig(hash_buckets={"a": 12}, domains={"b": ("x",)})
    assert config.public_domains == {"b": ("x",), "a": labels}


def test_config_parses_identifiers_and_hash_buckets() -> None:
    doc = {"data": {"identifiers": ["id"], "hash_buckets": {"a": 16, "b": 4}}}
    data = parse_config(doc).data
    assert data.identifiers == ("id",) and data.hash_buckets == {"a": 16, "b": 4}
    with pytest.raises(ConfigError, match=r"\[data\] hash_buckets\['a'\] must be >= 2, got 0"):
        parse_config({"data": {"hash_buckets": {"a": 0}}})
    with pytest.raises(ConfigError, match=r"\[data\] identifier column\(s\) \['a'\]"):
        parse_config({"data": {"identifiers": ["a"], "hash_buckets": {"a": 4}}})
    # overriding the columns drops the hash buckets of the other columns; identifiers are no columns
    merged = parse_config(merge(doc, {"data.columns": ["b"]})).data
    assert merged.hash_buckets == {"b": 4} and merged.identifiers == ("id",)


def test_cli_has_identifier_and_hash_bucket_options() -> None:
    from spark_dpsynth.cli._options import _overrides, build_parser

    args = build_parser().parse_args(
        ["aggregate", "--identifiers", "id,key", "--hash-buckets", '{"a": 8}', "--input", "x.csv"]
    )
    over = _overrides(args)
    assert over["data.identifiers"] == ["id", "key"] and over["data.hash_buckets"] == {"a": 8}


def test_hash_buckets_prepare_to_public_labels_and_keep_empty_cells_empty(spark) -> None:
    from pyspark.sql import types as T

    from spark_dpsynth.data.prepare import prepare, resolve_columns
    from spark_dpsynth.profile import column_types

    schema = T.StructType([T.StructField("k", T.IntegerType()), T.StructField("s", T.StringType())])
    rows = [(i % 50, f" v{i % 7} ") for i in range(200)] + [(None, "?"), (None, " ")]
    df = spark.createDataFrame(rows, schema)
    config = resolve_columns(df.columns, DataConfig(hash_buckets={"k": 8, "s": 3}, empty_values=("?",)))
    out = prepare(df, config).collect()  # 202 rows
    assert {r["k"] for r in out[:200]} <= set(hash_bucket_labels(8))
    assert {r["s"] for r in out[:200]} <= set(hash_bucket_labels(3))
    assert [(r["k"], r["s"]) for r in out[200:]] == [(None, None), (None, None)]
    # the same value always lands in the same bucket (the trimmed value is hashed; independent of the type)
    by_value: dict[int, set[str]] = {}
    for (value, _), r in zip(rows[:200], out[:200], strict=True):
        by_value.setdefault(value, set()).add(r["k"])
    assert all(len(b) == 1 for b in by_value.values()) and len({min(b) for b in by_value.values()}) > 1
    strings = spark.createDataFrame([(str(i % 50),) for i in range(200)], "k string")
    as_string = prepare(strings, DataConfig(hash_buckets={"k": 8})).collect()
    assert [r["k"] for r in as_string] == [r["k"] for r in out[:200]]
    types = column_types(df.schema, config)
    assert types["k"].scale == "category" and types["k"].type == "string"  # labels come back, not numbers


def _table(spark, n: int = 600):  # noqa: ANN001, ANN202
    rows = [(1000 + i, f"c{(7 * i) % n}", "a" if i % 3 else "b", "x" if i % 4 else "y") for i in range(n)]
    return spark.createDataFrame(rows, "id bigint, code string, p string, q string")


def test_workload_spends_no_discovery_on_hash_buckets_and_writes_labels(spark) -> None:
    from spark_dpsynth.mechanisms.workload import fit_workload
    from spark_dpsynth.params import SynthesisParams
    from spark_dpsynth.synthesizers import pgm
    from spark_dpsynth.synthesizers._types import restore_types

    df = _table(spark).drop("id")
    params = WorkloadParams(selection="mst", reporting_length=2, estimation_iterations=10)
    budget = Budget(epsilon=4.0, delta=1e-6, seed=2)
    lines: list[str] = []
    release = fit_workload(
        df, params, DataConfig(hash_buckets={"code": 16}), progress=lines.append, budget=budget
    )
    m = release.manifest
    disc = m["domain_discovery"]
    assert disc["public_domain_columns"] == ["code"] and disc["columns"] == ["p", "q"]
    assert release.domains[0] == hash_bucket_labels(16)  # all 16 labels, none suppressed
    assert m["column_types"]["code"] == {"type": "string", "nullable": True, "scale": "category"}
    assert m["data"]["hash_buckets"] == {"code": 16}
    assert "code" not in m["high_cardinality"]["columns"]  # the distinct codes are no longer counted
    assert sum("hash buckets" in line and "'code'" in line for line in lines) == 1
    assert '"c1"' not in json.dumps(m.to_json())
    typed = restore_types(pgm.sample(release, SynthesisParams(partitions=2, seed=1), spark), m, seed=1)
    assert {r["code"] for r in typed.select("code").distinct().collect()} <= set(hash_bucket_labels(16))


def test_identifiers_are_left_out_of_every_measurement(spark) -> None:
    from spark_dpsynth.mechanisms.workload import fit_workload

    df = _table(spark)
    params = WorkloadParams(selection="mst", reporting_length=2, estimation_iterations=10)
    budget = Budget(epsilon=4.0, delta=1e-6, seed=2)
    lines: list[str] = []
    with_id = fit_workload(
        df,
        params,
        DataConfig(identifiers=("id",), hash_buckets={"code": 8}),
        progress=lines.append,
        budget=budget,
    ).manifest
    without = fit_workload(
        df.drop("id"), params, DataConfig(hash_buckets={"code": 8}), budget=budget
    ).manifest
    assert with_id["identifier_columns"] == {"id": {"type": "bigint", "nullable": True, "before": "code"}}
    assert with_id["data"]["identifiers"] == ["id"]
    assert "id" not in with_id["column_types"] and "id" not in with_id["domain_discovery"]["columns"]
    assert "identifier_columns" not in without
    for key in ("rho", "epsilon", "delta", "budget", "rounds", "domain_discovery", "column_types"):
        assert with_id[key] == without[key], key  # the same budget and the same measurements
    assert with_id["columns"] == ["code", "p", "q"]  # the measured columns
    assert (
        sum(
            "column 'id' (bigint): identifier: left out of the measurement, synthetic surrogate keys" in x
            for x in lines
        )
        == 1
    )


def test_identifier_types_and_other_mechanisms_are_checked_before_reading(spark) -> None:
    from spark_dpsynth.mechanisms import archetype, class_conditional
    from spark_dpsynth.mechanisms.marginals import dp_aggregate
    from spark_dpsynth.params import AggregationParams

    df = spark.createDataFrame([(1.5, "a")], "x double, p string")
    with pytest.raises(
        InvalidParameterError, match=r"column 'x' has type double; an identifier column must be"
    ):
        dp_aggregate(
            df, AggregationParams(reporting_length=1), DataConfig(identifiers=("x",)), budget=Budget(seed=1)
        )
    with pytest.raises(SchemaError, match=r"unknown identifier column\(s\) \['zz'\]"):
        dp_aggregate(
            df, AggregationParams(reporting_length=1), DataConfig(identifiers=("zz",)), budget=Budget(seed=1)
        )
    with pytest.raises(
        InvalidParameterError, match="class_conditional synthesizer takes no identifier columns"
    ):
        class_conditional.check_data(
            class_conditional.ClassConditionalParams(), DataConfig(identifiers=("x",))
        )
    with pytest.raises(InvalidParameterError, match="archetype synthesizer takes no identifier columns"):
        archetype.check_data(archetype.ArchetypeParams(privacy_unit="u"), DataConfig(identifiers=("x",)))


def test_surrogate_keys_are_distinct_in_the_input_schema_whatever_the_partitions(spark) -> None:
    from spark_dpsynth import registry
    from spark_dpsynth.mechanisms.marginals import dp_aggregate
    from spark_dpsynth.params import AggregationParams, SynthesisParams
    from spark_dpsynth.synthesizers._types import SURROGATE_PREFIX, restore_types

    n = 600
    rows = [(f"r{i}", "a" if i % 3 else "b", i, "x" if i % 4 else "y", 17 + i % 60) for i in range(n)]
    df = spark.createDataFrame(rows, "key string, p string, seq int, q string, age int")
    data = DataConfig(identifiers=("key", "seq"), bins={"age": BinSpec(edges=(30, 50))})
    release = dp_aggregate(
        df, AggregationParams(reporting_length=2), data, budget=Budget(epsilon=4.0, delta=1e-6, seed=4)
    )
    m = release.manifest
    assert release.columns == ("p", "q", "age")
    assert m["identifier_columns"]["key"]["before"] == "p" and m["identifier_columns"]["seq"]["before"] == "q"
    keys = {}
    for parts in (1, 3):
        params = SynthesisParams(partitions=parts, seed=1, target_number_of_records=250)
        synthetic = registry.resolve_synthesizer(m).load_sample()(release, params, spark)
        typed = restore_types(synthetic, m, seed=1)
        assert typed.schema.simpleString() == df.schema.simpleString()  # names, order and types
        assert typed.schema["key"].nullable and typed.schema["seq"].nullable  # as in the input
        out = typed.toPandas()
        assert sorted(out["seq"]) == list(range(1, len(out) + 1))
        assert out["key"].is_unique and out["key"].str.startswith(SURROGATE_PREFIX).all()
        keys[parts] = (sorted(out["seq"]), sorted(out["key"]))
        assert typed.toPandas().equals(out)  # deterministic given the seed
    assert keys[1] == keys[3]  # the same keys whatever the partitioning


def test_the_privacy_unit_can_come_back_as_surrogate_person_keys(spark) -> None:
    from spark_dpsynth import registry
    from spark_dpsynth.mechanisms.marginals import dp_aggregate
    from spark_dpsynth.params import AggregationParams, SynthesisParams
    from spark_dpsynth.synthesizers._types import restore_types

    # 100 persons with 1-3 rows each; a and b are constant per person (the merge checks it)
    rows = [(p, "x" if p % 3 else "y", "k" if p % 2 else "l") for p in range(100) for _ in range(1 + p % 3)]
    df = spark.createDataFrame(rows, "person int, a string, b string")
    data = DataConfig(privacy_unit="person", identifiers=("person",))
    release = dp_aggregate(
        df, AggregationParams(reporting_length=2), data, budget=Budget(epsilon=4.0, delta=1e-6, seed=4)
    )
    m = release.manifest
    assert release.columns == ("a", "b") and m["privacy_unit_column"] == "person"
    assert m["identifier_columns"] == {"person": {"type": "int", "nullable": True, "before": "a"}}
    params = SynthesisParams(partitions=2, seed=1, target_number_of_records=80)
    synthetic = registry.resolve_synthesizer(m).load_sample()(release, params, spark)
    out = restore_types(synthetic, m, seed=1)
    assert out.schema.simpleString() == df.schema.simpleString()
    assert sorted(r["person"] for r in out.collect()) == list(range(1, 81))  # one key per synthetic person


def test_pipeline_writes_surrogate_keys_and_the_evaluation_leaves_them_out(spark, tmp_path, capsys) -> None:
    import pyarrow.parquet as pq

    from spark_dpsynth.cli.main import main

    path = tmp_path / "t.csv"
    lines = ["id,code,p,q"] + [
        f"{1000 + i},c{(7 * i) % 300},{'a' if i % 3 else 'b'},{i % 4}" for i in range(300)
    ]
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    args = ["pipeline", "--input", str(path), "--output", str(out), "--identifiers", "id", "--hash-buckets",
            '{"code": 8}', "--categorical", "q", "--reporting-length", "2", "--synthesizer", "model", "--max-marginal-length", "2",
            "--no-single-csv", "--seed", "1", "--quiet"]  # fmt: skip
    assert main(args) == 0
    assert (
        "identifier columns     id: left out of the measurement by configuration" in capsys.readouterr().out
    )
    table = pq.read_table(out / "synthetic")
    assert table.schema.names == ["id", "code", "p", "q"] and str(table.schema.field("id").type) == "int32"
    ids = table.column("id").to_pylist()
    assert sorted(ids) == list(range(1, len(ids) + 1))
    assert set(table.column("code").to_pylist()) <= set(hash_bucket_labels(8))
    metrics = json.loads((out / "evaluation" / "metrics.json").read_text())
    assert metrics["identifier_columns"] == ["id"] and "id" not in json.dumps(metrics["empty_columns"])
    assert "Identifier columns" in (out / "evaluation" / "report.html").read_text()
