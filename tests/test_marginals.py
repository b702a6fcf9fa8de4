"""DP marginals on Spark: exact with noise off, reproducible in test mode, invariant to partitioning."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from pyspark.sql import functions as F

from spark_dpsynth.data.prepare import prepare
from spark_dpsynth.mechanisms._spark_backend import SparkBackend
from spark_dpsynth.mechanisms.marginals import LocalBackend, aggregate_encoded, dp_aggregate
from spark_dpsynth.params import AggregationParams, BinSpec, DataConfig
from spark_dpsynth.privacy.budget import Budget
from spark_dpsynth.privacy.noise import NoNoise
from spark_dpsynth.release.core import Release
from tests.seed_examples import SEED_001_COUNTS as SEED_21_COUNTS
from tests.seed_examples import SEED_001_ROWS as SEED_21

EXACT = AggregationParams(
    reporting_length=3, percentile=100, fabrication_mode="custom_fixed", thresholds=(0, 0)
)
BUDGET = Budget(epsilon=1e6, delta=0.5)


@pytest.fixture(scope="module")
def seed_table(spark):
    # Seed 001's section 2.1 table, every row 50 times: with noise off and thresholds at ~1, counts are 50x.
    return spark.createDataFrame(SEED_21 * 50, "A string, B string, C string")


def _as_dict(release: Release) -> dict:
    pdf = release.to_pandas()
    return {
        tuple(zip(c, v, strict=True)): int(n)
        for c, v, n in zip(pdf["columns"], pdf["values"], pdf["count"], strict=True)
    }


def test_exact_counts_with_noise_off_match_seed_001(seed_table) -> None:
    backend = SparkBackend(prepare(seed_table, DataConfig(columns=("A", "B", "C"))), ("A", "B", "C"))
    try:
        release = aggregate_encoded(backend, ("A", "B", "C"), EXACT, noise=NoNoise(), budget=BUDGET)
    finally:
        backend.release_cache()
    assert _as_dict(release) == {t: 50 * n for t, n in SEED_21_COUNTS.items()}
    assert release.manifest["sensitivities"] == {"1": 3, "2": 3, "3": 1}
    assert release.protected_number_of_records == 250


def test_test_mode_is_reproducible_and_independent_of_partitioning(spark, seed_table) -> None:
    params = AggregationParams(reporting_length=3)
    budget = Budget(epsilon=2.0, delta=1e-6, seed=42)
    config = DataConfig(columns=("A", "B", "C"))
    a = dp_aggregate(seed_table.repartition(1), params, config, budget=budget)
    b = dp_aggregate(seed_table.repartition(7), params, config, budget=budget)
    assert _as_dict(a) == _as_dict(b)
    assert a.manifest["test_mode"] is True
    assert a.manifest["sensitivities"] == b.manifest["sensitivities"]
    assert a.protected_number_of_records == b.protected_number_of_records


def test_release_is_normalized_and_downward_closed(spark) -> None:
    rng = np.random.default_rng(3)
    rows = [tuple(f"x{rng.integers(0, 3 + j)}" for j in range(5)) for _ in range(3000)]
    df = spark.createDataFrame(rows, ", ".join(f"c{j} string" for j in range(5)))
    release = dp_aggregate(
        df, AggregationParams(reporting_length=3), budget=Budget(epsilon=1.0, delta=1e-6, seed=1)
    )
    counts = release.counts_by_tuple()
    assert counts, "release is empty"
    for tup, n in counts.items():
        assert n >= 1
        for drop in range(len(tup)):
            if len(tup) > 1:
                parent = tup[:drop] + tup[drop + 1 :]
                assert parent in counts and counts[parent] >= n


def test_release_round_trip_and_manifest(spark, tmp_path) -> None:
    rows = [("a", "x", "1"), ("b", "y", "2"), ("a", "y", None)] * 400
    df = spark.createDataFrame(rows, "p string, q string, r string")
    release = dp_aggregate(df, AggregationParams(reporting_length=2), budget=Budget(epsilon=3.0, seed=5))
    path = str(tmp_path / "release")
    release.save(path, spark)
    loaded = Release.load(path, spark)
    assert _as_dict(loaded) == _as_dict(release)
    assert loaded.domains == release.domains
    manifest = json.loads((tmp_path / "release" / "manifest.json").read_text())
    for key in (
        "epsilon", "delta", "rho", "epsilon_n", "epsilon_q", "reporting_length", "percentile", "sigmas",
        "sensitivities", "thresholds", "protected_number_of_records", "columns", "parameters", "noise_sampler",
        "versions", "test_mode",
    ):  # fmt: skip
        assert key in manifest, key
    # delta was derived from the protected n, never from the true n (1200): at most 1e-3 and from n'.
    assert manifest["delta"] == pytest.approx(
        min(
            1e-3,
            1 / (manifest["protected_number_of_records"] * np.log(manifest["protected_number_of_records"])),
        )
    )
    written = (tmp_path / "release" / "manifest.json").read_text()
    assert "1200" not in written.replace(str(manifest["protected_number_of_records"]), "")


def test_binning_and_empty_values(spark) -> None:
    df = spark.createDataFrame(
        [("17", "?"), ("25", " x "), ("abc", ""), ("90", None), (None, "0")], "age string, w string"
    )
    config = DataConfig(columns=("age", "w"), empty_values=("?",), bins={"age": BinSpec((18, 30, 60))})
    got = [tuple(r) for r in prepare(df, config).collect()]
    assert got == [("<18", None), ("[18, 30)", "x"), (None, None), (">=60", None), (None, "0")]
    zeros = DataConfig(columns=("age", "w"), zeros_are_empty=True, sensitive_zeros=("age",))
    df0 = spark.createDataFrame([("0", "0")], "age string, w string")
    assert [tuple(r) for r in prepare(df0, zeros).collect()] == [("0", None)]


def test_binned_columns_are_cast_once_and_keep_their_order(spark) -> None:
    # select_attributes trims, then cleans and casts each binned column, then bins: the result must be the
    # same as binning each value on its own, whatever the mix of binned, plain and passthrough columns
    from spark_dpsynth.data.prepare import select_attributes

    df = spark.createDataFrame(
        [
            ("N", "5", "a", "p1"),
            ("NaN", " 70 ", "?", "p2"),
            ("12.5", "x", "b", "p3"),
            (None, "30", " ", "p4"),
        ],
        "hours string, age string, w string, id string",
    )
    config = DataConfig(
        columns=("hours", "w", "age"),
        empty_values=("?",),
        bins={"hours": BinSpec((10, 20), passthrough=("N",)), "age": BinSpec((18, 65))},
    )
    got = [tuple(r) for r in select_attributes(df, config, (("unit", F.col("id")),)).collect()]
    assert got == [
        ("p1", "N", "a", "<18"),
        ("p2", None, None, ">=65"),
        ("p3", "[10, 20)", "b", None),
        ("p4", None, None, "[18, 65)"),
    ]
    assert select_attributes(df, config).columns == ["hours", "w", "age"]
    assert prepare(df, config).collect() == select_attributes(df, config).collect()


def test_production_noise_is_not_test_mode(spark, seed_table) -> None:
    release = dp_aggregate(
        seed_table, AggregationParams(reporting_length=2), DataConfig(), budget=Budget(epsilon=1.0)
    )
    assert release.manifest["test_mode"] is False
    assert release.manifest["noise_sampler"] == "opendp-exact-csprng"


@pytest.mark.parametrize(
    "rows",
    [
        [],
        [("a", None)],
        [("a", None), ("b", None)],
        [(None, None)] * 5,
        [("a", "x")] * 3 + [(None, "y")],
    ],
    ids=["no-record", "one-record", "two-records", "all-empty", "one-empty-column-value"],
)
def test_degenerate_data_gives_a_valid_release(rows: list) -> None:
    from spark_dpsynth.mechanisms.marginals import LocalBackend

    params = AggregationParams(reporting_length=2)
    budget = Budget(epsilon=1.0, seed=3)
    release = aggregate_encoded(LocalBackend.from_rows(rows, 2), ("x", "y"), params, budget=budget)
    assert release.protected_number_of_records >= 1
    assert set(release.marginals) == {1, 2}
    # Far below the thresholds: nothing this small is released.
    assert release.sizes() == {1: 0, 2: 0}


def test_all_empty_column_on_spark(spark) -> None:
    df = spark.createDataFrame([("a", None)] * 300 + [("b", None)] * 300, "x string, y string")
    release = dp_aggregate(df, AggregationParams(reporting_length=2), budget=Budget(epsilon=2.0, seed=1))
    assert release.domains[1] == () and set(release.domains[0]) == {"a", "b"}
    assert release.sizes()[2] == 0


def test_schema_error_never_shows_data_read_as_a_header() -> None:
    from spark_dpsynth.data.prepare import resolve_columns
    from spark_dpsynth.errors import SchemaError

    with pytest.raises(SchemaError, match=r"the input has \['a', 'b'\]"):
        resolve_columns(["a", "b"], DataConfig(columns=("c",)))
    garbage = ["PAR1\x15\x04\x15secret-value\x06", "\x18\x02"]
    with pytest.raises(SchemaError) as err:
        resolve_columns(garbage, DataConfig(columns=("c",)))
    assert "secret-value" not in str(err.value) and "2 columns (names not shown" in str(err.value)


def _packed_table(spark):
    # 24 columns: bins with a passthrough code, codebook domains (one of them 5 bits wide), free strings; the
    # packed ones need two 62-bit key words. Rows repeat so that patterns have multiplicities.
    rng = np.random.default_rng(7)
    n = 600
    cols = {}
    for j in range(8):
        cols[f"h{j}"] = [("N" if x < 3 else str(x)) for x in rng.integers(0, 40, n)]
    for j in range(8):
        cols[f"c{j}"] = [("zz" if x == 20 else f"v{x:02d}") for x in rng.integers(0, 21, n)]
    for j in range(8):
        cols[f"s{j}"] = [(None if x == 0 else f"w{x}") for x in rng.integers(0, 4, n)]
    names = list(cols)
    rows = [tuple(cols[c][i] for c in names) for i in range(n)] * 3
    df = spark.createDataFrame(rows, ", ".join(f"{c} string" for c in names))
    config = DataConfig(
        columns=tuple(names),
        bins={f"h{j}": BinSpec((10, 20, 30), passthrough=("N",)) for j in range(8)},
        domains={f"c{j}": tuple(f"v{x:02d}" for x in range(24)) for j in range(8)},
    )
    return df, config


def test_packed_grouping_key_gives_the_string_keys_release(spark, monkeypatch) -> None:
    # Columns with a small public domain are grouped as bit fields of long words (design 2.2): the patterns,
    # their multiplicities and content hashes, hence the test-mode release, are those of string keys.
    from spark_dpsynth.mechanisms import _spark_backend
    from spark_dpsynth.mechanisms._discovery import public_domains
    from spark_dpsynth.mechanisms._spark_backend import KeyLayout

    df, config = _packed_table(spark)
    layout = KeyLayout.plan(len(config.columns), public_domains(config.columns, config, {}))
    assert sorted(layout.fields) == list(range(16)) and layout.words == 2
    params = AggregationParams(reporting_length=3, percentile=90)
    budget = Budget(epsilon=2.0, delta=1e-6, seed=11)
    packed = dp_aggregate(df.repartition(3), params, config, budget=budget)
    monkeypatch.setattr(_spark_backend, "PACKED_DOMAIN_MAX", 0)
    strings = dp_aggregate(df, params, config, budget=budget)
    assert _as_dict(packed) == _as_dict(strings) and len(_as_dict(packed)) > 1000
    assert packed.domains == strings.domains
    assert "zz" not in {v for dom in packed.domains for v in dom}  # outside the codebook: empty
    same = ("sensitivities", "thresholds", "protected_number_of_records", "empty_counts")
    assert {k: packed.manifest[k] for k in same} == {k: strings.manifest[k] for k in same}
    assert packed.manifest["sensitivities"]["3"] < 24 * 23 * 22 // 6  # bounding ran (uses the content hash)


def test_packed_backend_counts_exactly(spark) -> None:
    from spark_dpsynth.mechanisms._discovery import public_domains

    df, config = _packed_table(spark)
    names = config.columns
    public = public_domains(names, config, {})
    prepared = prepare(df, config)
    rows = [tuple(r) for r in prepared.collect()]
    exact = dataclasses.replace(EXACT, reporting_length=2, thresholds=(0,))
    got = []
    for backend in (
        SparkBackend(prepared, names, public),
        LocalBackend.from_rows(rows, len(names)),
    ):
        try:
            got.append(_as_dict(aggregate_encoded(backend, names, exact, noise=NoNoise(), budget=BUDGET)))
        finally:
            if isinstance(backend, SparkBackend):
                backend.release_cache()
    assert got[0] == got[1]
