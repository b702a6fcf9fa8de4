"""Test-mode marks: a synthetic table made with a seed (NOT private) says so where it is written, and an earlier
mark never stays beside a newer output (docs/outputs.md, "Test-mode marks")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import spark_dpsynth as dps
from spark_dpsynth.data.publish import MARK_IN_DIRECTORY, MARK_SUFFIX, TEST_MODE_MARK_TEXT, OutputStage
from spark_dpsynth.errors import OutputExistsError
from spark_dpsynth.pipeline import write_synthetic

NAMES = ("synthetic", "synthetic.csv")
CSV_MARK = f"synthetic.csv{MARK_SUFFIX}"


def _write(spark, out: Path, *, overwrite: bool = False, **options) -> OutputStage:  # noqa: ANN001, ANN003
    config = dps.job_config(**options)
    df = spark.createDataFrame([("a", 1), ("b", None)], "x string, n int")
    with OutputStage(spark, str(out), overwrite=overwrite, names=NAMES) as stage:
        written = write_synthetic(df, config, stage, spark)
        assert sorted(written.collect()) == sorted(df.collect()), "the mark is not read as data"
    return stage


def test_a_seeded_synthetic_table_carries_the_mark_in_its_directory_and_beside_its_csv(
    spark,
    tmp_path: Path,  # noqa: ANN001
) -> None:
    stage = _write(spark, tmp_path, seed=3)
    assert stage.published == ["synthetic", "synthetic.csv", CSV_MARK]
    for mark in (tmp_path / "synthetic" / MARK_IN_DIRECTORY, tmp_path / CSV_MARK):
        assert mark.read_text() == TEST_MODE_MARK_TEXT
        assert TEST_MODE_MARK_TEXT.startswith("TEST MODE: NOT PRIVATE.")
    assert spark.read.parquet(str(tmp_path / "synthetic")).count() == 2, "Spark's reader skips the mark"


def test_a_private_run_has_no_mark_and_removes_an_earlier_one(spark, tmp_path: Path) -> None:  # noqa: ANN001
    _write(spark, tmp_path, seed=3)
    with pytest.raises(OutputExistsError, match="output exists"):
        _write(spark, tmp_path)
    _write(spark, tmp_path, overwrite=True)
    assert sorted(os.listdir(tmp_path)) == ["synthetic", "synthetic.csv"], (
        "the test-mode mark went with its CSV"
    )
    assert not (tmp_path / "synthetic" / MARK_IN_DIRECTORY).exists()


def test_an_earlier_mark_alone_is_an_existing_output(tmp_path: Path) -> None:
    (tmp_path / CSV_MARK).write_text(TEST_MODE_MARK_TEXT)
    with pytest.raises(OutputExistsError, match=rf"output exists: .*{CSV_MARK}; pass --overwrite"):
        with OutputStage(None, str(tmp_path), names=NAMES):
            pytest.fail("the block must not run")
    with OutputStage(None, str(tmp_path), overwrite=True, names=NAMES) as stage:
        Path(stage.path("synthetic.csv")).write_text("x\n1\n")
    assert sorted(os.listdir(tmp_path)) == ["synthetic.csv"]


def test_explicit_test_mode_marks_a_table_sampled_from_a_test_mode_release(spark, tmp_path: Path) -> None:  # noqa: ANN001
    config = dps.job_config()
    df = spark.createDataFrame([("a",)], "x string")
    with OutputStage(spark, str(tmp_path), names=NAMES) as stage:
        write_synthetic(df, config, stage, spark, test_mode=True)
    assert (tmp_path / CSV_MARK).is_file() and (tmp_path / "synthetic" / MARK_IN_DIRECTORY).is_file()


def test_a_seeded_catalog_table_carries_a_table_property(spark, tmp_path: Path) -> None:  # noqa: ANN001
    config = dps.job_config(seed=3, output_table="default.marked_synthetic", single_csv=False)
    df = spark.createDataFrame([("a",)], "x string")
    try:
        with OutputStage(spark, str(tmp_path), names=()) as stage:
            write_synthetic(df, config, stage, spark)
        properties = {r[0]: r[1] for r in spark.sql("SHOW TBLPROPERTIES default.marked_synthetic").collect()}
        assert properties["spark_dpsynth.test_mode"] == "NOT private"
    finally:
        spark.sql("DROP TABLE IF EXISTS default.marked_synthetic")
