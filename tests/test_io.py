"""I/O: formats, Parquet/CSV/table round trips, atomic outputs on injected failures, Delta Lake."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from spark_dpsynth.data.io import (
    check_table_name,
    guess_format,
    read_input,
    read_output,
    table_exists,
    write_frame,
    write_single_csv,
)
from spark_dpsynth.data.publish import OutputStage, atomic_path, check_outputs_free
from spark_dpsynth.errors import InvalidParameterError, OutputExistsError, SparkSetupError
from spark_dpsynth.privacy.budget import Budget
from tests.conftest import ROOT

ADULT = str(ROOT / "data" / "adult.csv.gz")


@pytest.fixture
def people(spark):
    return spark.createDataFrame(
        [("a", "x", None), ("b", None, "1"), ("c", "z", "2"), ("d", "x", "")],
        "name string, colour string, code string",
    )


def _leftovers(directory: Path) -> list[str]:
    """Hidden staging or temporary entries a write may have left behind."""
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


# --------------------------------------------------------------------------------------------- formats and names


@pytest.mark.parametrize(
    ("name", "make", "expected"),
    [
        ("t.csv", "file", "csv"),
        ("t.csv.gz", "file", "csv"),
        ("data", "file", "csv"),
        ("t.parquet", "dir", "parquet"),
        ("plain_dir", "parquet_dir", "parquet"),
        ("csv_dir", "csv_dir", "csv"),
        ("events", "delta", "delta"),
    ],
)
def test_guess_format(tmp_path: Path, name: str, make: str, expected: str) -> None:
    path = tmp_path / name
    if make == "file":
        path.write_text("a\n1\n")
    else:
        path.mkdir()
        if make == "delta":
            (path / "_delta_log").mkdir()
        if make == "parquet_dir":
            (path / "part-0.parquet").write_bytes(b"PAR1 Parquet bytes PAR1")
            (path / "_SUCCESS").write_bytes(b"")
        if make == "csv_dir":
            (path / "part-0").write_text("a\n1\n")
    assert guess_format(str(path)) == expected


def test_guess_format_refuses_an_empty_or_mixed_directory(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / ".hidden").write_text("x")
    with pytest.raises(InvalidParameterError, match="no data files in .*empty"):
        guess_format(str(tmp_path / "empty"))
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    (mixed / "a.parquet").write_bytes(b"PAR1xxxxPAR1")
    (mixed / "b.csv").write_text("a\n1\n")
    with pytest.raises(InvalidParameterError, match="holds Parquet files .* and other files .*b.csv"):
        guess_format(str(mixed))


def test_guess_format_of_a_remote_directory_needs_a_format() -> None:
    assert guess_format("s3://bucket/t.parquet") == "parquet"
    with pytest.raises(
        InvalidParameterError, match=r"cannot tell the format of s3://bucket/t; give --format"
    ):
        guess_format("s3://bucket/t")


@pytest.mark.parametrize("name", ["t", "db.t", "cat.db.t", "db.`my table`", "_x.y_1"])
def test_valid_table_names(name: str) -> None:
    assert check_table_name(name) == name


@pytest.mark.parametrize("name", ["", "db.", "a.b.c.d", "db.t; DROP TABLE x", "1db.t", "db t"])
def test_invalid_table_names(name: str) -> None:
    with pytest.raises(InvalidParameterError, match="must be a table name like db.table"):
        check_table_name(name)


def test_read_input_needs_exactly_one_source(spark) -> None:
    with pytest.raises(InvalidParameterError, match="give exactly one input"):
        read_input(spark)
    with pytest.raises(InvalidParameterError, match="give exactly one input"):
        read_input(spark, path=ADULT, table="db.t")
    with pytest.raises(InvalidParameterError, match="format must be one of"):
        read_input(spark, path=ADULT, fmt="orc")
    with pytest.raises(InvalidParameterError, match="input not found"):
        read_input(spark, path=str(ROOT / "nope.csv"))


def test_csv_input_is_all_strings(spark) -> None:
    df = read_input(spark, path=ADULT)
    assert df.columns[0] == "age" and df.columns[-1] == "split"
    assert {t for _, t in df.dtypes} == {"string"}


# --------------------------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_file_round_trip(spark, people, tmp_path: Path, fmt: str) -> None:
    path = str(tmp_path / "out")
    write_frame(people, path, fmt)
    back = read_output(spark, path=path, fmt=fmt)
    # CSV writes an empty value as an empty field and reads it back as null (empty = no value)
    expected = people if fmt == "parquet" else people.withColumn("code", F.expr("nullif(code, '')"))
    assert_df_equality(back, expected, ignore_row_order=True, ignore_nullable=True)


def test_parquet_input_round_trip(spark, people, tmp_path: Path) -> None:
    path = str(tmp_path / "people.parquet")
    write_frame(people, path, "parquet")
    assert_df_equality(read_input(spark, path=path), people, ignore_row_order=True, ignore_nullable=True)


def test_write_refuses_an_existing_directory(spark, people, tmp_path: Path) -> None:
    path = str(tmp_path / "out")
    write_frame(people, path, "parquet")
    with pytest.raises(Exception, match="already exists"):
        write_frame(people, path, "parquet")


def test_single_csv_file(spark, people, tmp_path: Path) -> None:
    path = tmp_path / "people.csv"
    write_single_csv(people, str(path))
    lines = path.read_text().splitlines()
    assert lines[0] == "name,colour,code" and len(lines) == 5
    assert sorted(lines[1:]) == ["a,x,", "b,,1", "c,z,2", "d,x,"]
    assert _leftovers(tmp_path) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["people.csv"]


def test_csv_outputs_write_numbers_in_plain_notation_and_read_back_equal(spark, tmp_path: Path) -> None:
    values = [6.528138041902716e-4, 18.0, 12345678.9, -0.00012, 0.0, None, 2.675, 1.5e25, float("nan")]
    df = spark.createDataFrame(
        [(i, v, 0.1 if v else None) for i, v in enumerate(values)], "i int, x double, f float"
    )
    single = tmp_path / "one.csv"
    write_single_csv(df, str(single))
    write_frame(df, str(tmp_path / "dir"), "csv")
    texts = [line.split(",")[1] for line in single.read_text().splitlines()[1:]]
    assert texts == [
        "0.000652813804190272",
        "18.0",
        "12345678.9",
        "-0.00012",
        "0.0",
        "",
        "2.675",
        "1.5E25",
        "NaN",
    ]
    assert {line.split(",")[2] for line in single.read_text().splitlines()[1:]} == {"0.1", ""}
    for back in (
        spark.read.csv(str(single), header=True, schema="i int, x double, f float"),
        spark.read.csv(str(tmp_path / "dir"), header=True, schema="i int, x double, f float"),
    ):
        got = {r["i"]: r["x"] for r in back.collect()}
        for i, v in enumerate(values):
            assert (got[i] is None and v is None) or got[i] == pytest.approx(v, rel=1e-15, nan_ok=True)


def test_catalog_table_round_trip_and_overwrite(spark, people, tmp_path: Path) -> None:
    spark.sql("CREATE DATABASE IF NOT EXISTS io_test")
    name = "io_test.people"
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    with OutputStage(spark, str(tmp_path), overwrite=False) as stage:
        staged = stage.table(name, "parquet")
        people.write.format("parquet").saveAsTable(staged)
        assert not table_exists(spark, name), "the table appears only when the stage is published"
    assert_df_equality(read_input(spark, table=name), people, ignore_row_order=True, ignore_nullable=True)

    smaller = people.where("name < 'c'")
    with pytest.raises(OutputExistsError, match=f"output table exists: {name}; pass --overwrite"):
        with OutputStage(spark, str(tmp_path), overwrite=False) as stage:
            stage.table(name, "parquet")
    with OutputStage(spark, str(tmp_path), overwrite=True) as stage:
        smaller.write.format("parquet").saveAsTable(stage.table(name, "parquet"))
    assert_df_equality(read_input(spark, table=name), smaller, ignore_row_order=True, ignore_nullable=True)
    tables = [t.name for t in spark.catalog.listTables("io_test")]
    assert tables == ["people"], "no staging table is left behind"


# --------------------------------------------------------------------------------------------- atomic outputs


def _failing(spark):
    """A DataFrame whose computation fails in one task, after other tasks wrote their part files."""
    return spark.range(0, 2000, numPartitions=4).select(
        F.when(F.col("id") == 1999, F.raise_error(F.lit("injected failure")))
        .otherwise(F.col("id"))
        .alias("id")
    )


def test_failed_overwrite_keeps_the_previous_directory_output(spark, tmp_path: Path) -> None:
    old = spark.range(5)
    with OutputStage(spark, str(tmp_path)) as stage:
        write_frame(old, stage.path("synthetic"), "parquet")
        (Path(stage.path("evaluation"))).mkdir()
        (Path(stage.staging_dir) / "evaluation" / "metrics.json").write_text("{}")
    before = sorted(p.name for p in (tmp_path / "synthetic").iterdir())

    with pytest.raises(Exception, match="injected failure"):
        with OutputStage(spark, str(tmp_path), overwrite=True) as stage:
            Path(stage.path("evaluation")).mkdir()
            (Path(stage.staging_dir) / "evaluation" / "metrics.json").write_text('{"new": 1}')
            write_frame(_failing(spark), stage.path("synthetic"), "parquet")

    assert sorted(p.name for p in (tmp_path / "synthetic").iterdir()) == before
    assert_df_equality(
        read_output(spark, path=str(tmp_path / "synthetic"), fmt="parquet"),
        old,
        ignore_row_order=True,
        ignore_nullable=True,
    )
    assert json.loads((tmp_path / "evaluation" / "metrics.json").read_text()) == {}, (
        "nothing is half-replaced"
    )
    assert _leftovers(tmp_path) == []


def test_failed_table_write_keeps_the_previous_table(spark, tmp_path: Path) -> None:
    spark.sql("CREATE DATABASE IF NOT EXISTS io_test")
    name = "io_test.kept"
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.range(3).write.saveAsTable(name)
    with pytest.raises(Exception, match="injected failure"):
        with OutputStage(spark, str(tmp_path), overwrite=True) as stage:
            _failing(spark).write.format("parquet").saveAsTable(stage.table(name, "parquet"))
    assert_df_equality(
        read_input(spark, table=name), spark.range(3), ignore_row_order=True, ignore_nullable=True
    )
    assert [t.name for t in spark.catalog.listTables("io_test") if "tmp" in t.name] == []


def test_atomic_path_refuses_an_existing_output(tmp_path: Path) -> None:
    target = tmp_path / "release"
    target.mkdir()
    with pytest.raises(OutputExistsError) as info:
        with atomic_path(str(target)):
            pytest.fail("the block must not run")
    assert str(info.value) == f"output exists: {target}; pass --overwrite (overwrite=True) to replace it"
    with pytest.raises(OutputExistsError, match=r"output exists: .*release, .*x.csv; pass --overwrite"):
        (tmp_path / "x.csv").write_text("a\n")
        check_outputs_free(str(tmp_path), ["release", "x.csv", "other"], overwrite=False)
    check_outputs_free(str(tmp_path), ["release"], overwrite=True)


def test_release_save_is_atomic(spark, tmp_path: Path) -> None:
    from spark_dpsynth.release.core import Release

    release = _small_release(spark)
    path = tmp_path / "release"
    release.save(str(path), spark)
    manifest = (path / "manifest.json").read_text()
    with pytest.raises(OutputExistsError, match="output exists"):
        release.save(str(path), spark)
    # injected failure after the aggregates were written: a manifest JSON cannot hold
    broken = Release(
        release.columns, release.domains, release.marginals, {**release.manifest, "bad": object()}
    )
    with pytest.raises(TypeError):
        broken.save(str(path), spark, overwrite=True)
    assert (path / "manifest.json").read_text() == manifest
    assert _leftovers(tmp_path) == []
    loaded = Release.load(str(path), spark)
    assert loaded.sizes() == release.sizes() and loaded.manifest == release.manifest


def _small_release(spark):
    from spark_dpsynth import AggregationParams, dp_aggregate

    df = spark.createDataFrame([("a", "x"), ("a", "y"), ("b", "x")] * 30, "c1 string, c2 string")
    return dp_aggregate(
        df, AggregationParams(reporting_length=2), budget=Budget(epsilon=8.0, delta=1e-6, seed=5)
    )


# --------------------------------------------------------------------------------------------- Delta Lake


def test_delta_builder_configures_jars_extension_and_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib.metadata import version

    from pyspark.sql import SparkSession

    from spark_dpsynth.data.session import DELTA_CATALOG, DELTA_EXTENSION, delta_builder

    monkeypatch.delenv("SPARK_DPSYNTH_DELTA_JARS", raising=False)
    options = delta_builder(SparkSession.Builder())._options
    assert options["spark.sql.extensions"] == DELTA_EXTENSION
    assert options["spark.sql.catalog.spark_catalog"] == DELTA_CATALOG
    assert options["spark.jars.packages"] == f"io.delta:delta-spark_4.1_2.13:{version('delta-spark')}"
    monkeypatch.setenv("SPARK_DPSYNTH_DELTA_JARS", "/jars/delta-spark.jar,/jars/delta-storage.jar")
    options = delta_builder(SparkSession.Builder())._options
    assert options["spark.jars"] == "/jars/delta-spark.jar,/jars/delta-storage.jar"


def test_delta_without_delta_in_the_session_is_one_clear_error(spark, people, tmp_path: Path) -> None:
    table = tmp_path / "events"
    (table / "_delta_log").mkdir(parents=True)
    with pytest.raises(SparkSetupError, match="Delta Lake is not available in this Spark session") as info:
        read_input(spark, path=str(table))
    assert "\n" not in str(info.value)
    with pytest.raises(SparkSetupError, match="Delta Lake is not available"):
        write_frame(people, str(tmp_path / "out"), "delta")


def test_cli_starts_spark_with_delta_when_delta_is_used() -> None:
    from spark_dpsynth.config import JobConfig
    from spark_dpsynth.pipeline import needs_delta as _needs_delta

    assert _needs_delta(JobConfig(input_path="x", input_format="delta"), "aggregate")
    assert _needs_delta(JobConfig(input_path=ADULT, output_format="delta"), "pipeline")
    assert not _needs_delta(JobConfig(input_path=ADULT, output_format="delta"), "aggregate")
    assert not _needs_delta(JobConfig(input_path=ADULT), "pipeline")
    assert not _needs_delta(JobConfig(input_table="db.t", input_format="delta"), "synthesize")


_DELTA_SCRIPT = textwrap.dedent(
    """
    import sys
    from spark_dpsynth.data.session import get_session
    from spark_dpsynth.errors import SparkSetupError
    from spark_dpsynth.data.io import read_input, read_output, write_frame
    from spark_dpsynth.data.publish import OutputStage
    try:
        spark = get_session(master="local[1]", delta=True)
    except SparkSetupError as err:
        print("DELTA_UNAVAILABLE", err)
        sys.exit(0)
    out = sys.argv[1]
    df = spark.createDataFrame([("a", "x"), ("b", None)], "name string, colour string")
    with OutputStage(spark, out) as stage:
        write_frame(df, stage.path("synthetic"), "delta")
    back = read_input(spark, path=out + "/synthetic")  # format from _delta_log
    assert sorted(map(tuple, back.collect())) == [("a", "x"), ("b", None)]
    with OutputStage(spark, out, overwrite=True) as stage:
        write_frame(df.limit(1), stage.path("synthetic"), "delta")
    assert read_output(spark, path=out + "/synthetic", fmt="delta").count() == 1
    spark.sql("CREATE DATABASE IF NOT EXISTS d")
    with OutputStage(spark, out) as stage:
        df.write.format("delta").saveAsTable(stage.table("d.t", "delta"))
    with OutputStage(spark, out, overwrite=True) as stage:
        df.limit(1).write.format("delta").saveAsTable(stage.table("d.t", "delta"))
    assert read_input(spark, table="d.t").count() == 1
    print("DELTA_OK")
    """
)


@pytest.mark.delta
def test_delta_round_trip(tmp_path: Path) -> None:
    """Delta files and a Delta table, written atomically and read back, in a session started with Delta.

    The session resolves the Delta jars from Maven (or SPARK_DPSYNTH_DELTA_JARS); where neither is reachable
    the test is skipped with the one-line reason the command line would print.
    """
    script = tmp_path / "delta_round_trip.py"
    script.write_text(_DELTA_SCRIPT)
    result = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    if "DELTA_UNAVAILABLE" in result.stdout:
        reason = result.stdout.split("DELTA_UNAVAILABLE", 1)[1].strip()
        assert reason.startswith("cannot start Spark with Delta Lake")
        pytest.skip(f"Delta Lake jars unavailable here: {reason}")
    assert "DELTA_OK" in result.stdout
