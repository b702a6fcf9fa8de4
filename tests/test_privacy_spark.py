"""Issue 3 on Spark (items 7, 8, 10): retried tasks, partitioning, and no private value in any output."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from spark_dpsynth.mechanisms.marginals import dp_aggregate
from spark_dpsynth.params import AggregationParams
from spark_dpsynth.privacy.budget import Budget
from tests.conftest import ROOT

# Injected into every Python worker through PYTHONPATH: the first attempt of each task that counts fails.
SITECUSTOMIZE = """
import os
from pyspark import TaskContext
import spark_dpsynth.mechanisms._counting as counting

_marker_dir = os.environ["DPSYNTH_FAIL_DIR"]


def _failing(real):
    def wrapper(*args, **kwargs):
        ctx = TaskContext.get()
        if ctx is not None and ctx.attemptNumber() == 0:
            open(os.path.join(_marker_dir, f"{ctx.stageId()}-{ctx.partitionId()}"), "w").close()
            raise RuntimeError("injected failure of a first task attempt")
        return real(*args, **kwargs)
    return wrapper


counting.bounded_counts = _failing(counting.bounded_counts)
counting.tuple_count_histogram = _failing(counting.tuple_count_histogram)
"""

JOB = """
import json, sys
from pyspark.sql import SparkSession
from spark_dpsynth.mechanisms.marginals import dp_aggregate
from spark_dpsynth.params import AggregationParams
from spark_dpsynth.privacy.budget import Budget
spark = (SparkSession.builder.master(sys.argv[1]).config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "4").getOrCreate())
rows = [(f"a{i % 7}", f"b{(i * 3) % 5}", f"c{(i * 11) % 4}", None if i % 9 == 0 else f"d{i % 3}") for i in range(3000)]
df = spark.createDataFrame(rows, "a string, b string, c string, d string").repartition(3)
release = dp_aggregate(df, AggregationParams(reporting_length=3), budget=Budget(epsilon=2.0, delta=1e-6, seed=123))
pdf = release.to_pandas()
print(json.dumps({"rows": [[int(k), list(c), list(v), int(n)] for k, c, v, n in pdf.itertuples(index=False)],
                  "sensitivities": release.manifest["sensitivities"],
                  "protected_n": release.protected_number_of_records}))
"""


def _run_job(tmp_path: Path, master: str, inject: bool) -> dict:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    if inject:
        hook = tmp_path / "inject"
        hook.mkdir()
        (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
        (tmp_path / "failures").mkdir()
        env["PYTHONPATH"] = os.pathsep.join([str(hook), str(ROOT), env.get("PYTHONPATH", "")])
        env["DPSYNTH_FAIL_DIR"] = str(tmp_path / "failures")
    result = subprocess.run(
        [sys.executable, "-c", JOB, master], capture_output=True, text=True, timeout=600, env=env, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_retry_injection_gives_the_clean_release(tmp_path: Path) -> None:
    """Item 7: with spark.task.maxFailures = 4 (local[2,4]) and the first attempt of every counting task made to
    fail, the release equals the clean run's (test mode): a retried task keeps the same tuples, and no second
    noise draw is visible (noise is drawn once, on the driver, after the counts are complete)."""
    clean = _run_job(tmp_path, "local[2]", inject=False)
    retried = _run_job(tmp_path, "local[2,4]", inject=True)
    failures = list((tmp_path / "failures").iterdir())
    assert len(failures) >= 6, "the injection did not make tasks fail"  # 2 passes per k, R = 3
    assert retried == clean


def test_invariance_under_partitioning_and_repeated_actions(spark) -> None:
    """Item 8: repartition(1) vs repartition(16), and two actions on the same plan, give identical releases."""
    rows = [(f"x{i % 5}", f"y{(i * 7) % 6}", None if i % 4 == 0 else f"z{i % 3}") for i in range(4000)]
    df = spark.createDataFrame(rows, "x string, y string, z string")
    params = AggregationParams(reporting_length=3)
    budget = Budget(epsilon=1.0, delta=1e-6, seed=77)
    releases = [
        dp_aggregate(df.repartition(1), params, budget=budget),
        dp_aggregate(df.repartition(16), params, budget=budget),
        dp_aggregate(df, params, budget=budget),
        dp_aggregate(df, params, budget=budget),  # the same plan a second time
    ]
    decoded = [
        sorted((k, tuple(c), tuple(v), n) for k, c, v, n in r.to_pandas().itertuples(index=False))
        for r in releases
    ]
    assert decoded[0] and all(other == decoded[0] for other in decoded[1:])
    assert len({json.dumps(r.manifest["sensitivities"]) for r in releases}) == 1
    assert len({r.protected_number_of_records for r in releases}) == 1


@pytest.mark.slow
def test_no_private_value_in_outputs_on_ma2019(spark, shared_data: Path, tmp_path: Path) -> None:
    """Item 10: the release directory, the logs and error messages contain neither the true n nor true counts.

    Test mode with a seed for which the protected n differs from n (so that its digits may be searched for);
    released counts equal true counts only as often as the noise is exactly 0.
    """
    from spark_dpsynth.data.prepare import prepare
    from spark_dpsynth.evaluation.metrics import true_aggregates

    source = shared_data / "nist_ma2019.csv.gz"
    out = tmp_path / "out"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_DPSYNTH_MASTER="local[2]")
    result = subprocess.run(
        [sys.executable, "-m", "spark_dpsynth", "aggregate", "--config", "conf/nist_acs.toml", "--input",
         str(source), "--output", str(out), "--seed", "4", "--epsilon", "1", "--synthesizer", "model"],
        capture_output=True, text=True, timeout=900, cwd=ROOT, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    true_n = len(pd.read_csv(source, dtype=str))
    manifest_text = (out / "release" / "manifest.json").read_text()
    manifest = json.loads(manifest_text)
    assert manifest["protected_number_of_records"] != true_n
    logs = result.stdout + result.stderr
    for text in (manifest_text, logs):
        assert not re.search(rf"\b{true_n}\b", text)

    from spark_dpsynth.config import load_config

    config = load_config("conf/nist_acs.toml")
    sensitive = prepare(spark.read.csv(str(source), header=True), config.data)
    truth = true_aggregates(sensitive, 3).toPandas()
    key = lambda c, v: (tuple(c), tuple(v))  # noqa: E731
    true_counts = {
        key(c, v): n for c, v, n in zip(truth["columns"], truth["values"], truth["count"], strict=True)
    }
    released = pd.read_parquet(out / "release" / "aggregates")
    assert len(released) > 100
    same = sum(
        true_counts.get(key(c, v)) == n
        for c, v, n in zip(released["columns"], released["values"], released["count"], strict=True)
    )
    assert same / len(released) < 0.05  # P(noise = 0) is about 1/(2.5 sigma_k sqrt(Delta_k)) < 2% here
    # No released value is one that did not pass rho_1: every value of a k-tuple is a released 1-tuple.
    ones = {(c[0], v[0]) for c, v in zip(released["columns"], released["values"], strict=True) if len(c) == 1}
    for c, v in zip(released["columns"], released["values"], strict=True):
        assert all((ci, vi) in ones for ci, vi in zip(c, v, strict=True))
    # Error messages: a wrong column and a wrong filter name no data values.
    bad = subprocess.run(
        [sys.executable, "-m", "spark_dpsynth", "aggregate", "--input", str(source), "--output", str(tmp_path / "x"),
         "--columns", "PUMA,NOPE"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env=env,
    )  # fmt: skip
    errors = [line for line in bad.stderr.splitlines() if line.startswith("spark-dpsynth: error:")]
    assert bad.returncode == 2 and len(errors) == 1 and "Traceback" not in bad.stderr
    assert "unknown column(s) ['NOPE']" in errors[0]
    assert "25-00" not in bad.stderr  # no PUMA value


def test_cli_warns_in_test_mode(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import sys
        from spark_dpsynth.cli import main as cli
        cli._session = lambda args: (_ for _ in ()).throw(SystemExit(0))
        sys.exit(cli.main(["aggregate", "--input", sys.argv[1], "--output", sys.argv[2], "--seed", "1"]))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(ROOT / "data" / "adult.csv.gz"), str(tmp_path)],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert "test mode" in result.stderr and "NOT private" in result.stderr


def test_unique_value_absent_from_releases_and_synthetic_data_through_the_job(spark) -> None:
    """Item 6 through the full job (the 200 repetitions run on the core in test_privacy_statistical): a value
    held by one record is in neither the release nor the synthetic data, at epsilon 1 with production noise."""
    from spark_dpsynth.params import SynthesisParams
    from spark_dpsynth.synthesizers.marginals import synthesize

    rows = [(f"a{i % 4}", f"b{(i * 5) % 3}", f"c{i % 2}") for i in range(2000)]
    rows[11] = ("UNIQUE", rows[11][1], rows[11][2])
    df = spark.createDataFrame(rows, "a string, b string, c string")
    for _ in range(3):
        release = dp_aggregate(
            df, AggregationParams(reporting_length=2), budget=Budget(epsilon=1.0, delta=1e-6)
        )
        assert "UNIQUE" not in release.domains[0] and release.domains[0]
        synthetic = synthesize(release, SynthesisParams(seed=1), spark)
        assert synthetic.where("a = 'UNIQUE'").count() == 0
        assert synthetic.count() > 0


def test_release_key_is_never_written_or_logged(spark, tmp_path: Path, monkeypatch, caplog) -> None:
    """The bounding key comes from secrets and lives only in memory: not in the manifest, the aggregates,
    the logs or the Spark configuration."""
    import logging
    import secrets

    key = 0x5EC12E7_0DDBA11
    monkeypatch.setattr(secrets, "randbits", lambda bits: key)
    rows = [(f"a{i % 4}", f"b{i % 3}") for i in range(600)]
    df = spark.createDataFrame(rows, "a string, b string")
    with caplog.at_level(logging.DEBUG, logger="spark_dpsynth"):
        release = dp_aggregate(df, AggregationParams(reporting_length=2), budget=Budget(epsilon=2.0))
    release.save(str(tmp_path / "release"), spark)
    needles = {
        str(key),
        hex(key),
        hex(key)[2:],
        key.to_bytes(8, "little").hex(),
        key.to_bytes(8, "big").hex(),
    }
    blobs = [p.read_bytes() for p in (tmp_path / "release").rglob("*") if p.is_file()]
    texts = [
        caplog.text,
        json.dumps(release.manifest),
        json.dumps(dict(spark.sparkContext.getConf().getAll())),
    ]
    for needle in needles:
        assert all(needle not in t for t in texts)
        assert all(needle.encode() not in b for b in blobs)
    assert all(key.to_bytes(8, "little") not in b and key.to_bytes(8, "big") not in b for b in blobs)
