"""Synthetic-data quality of both synthesizers ("model", the default, and "sds") on real data (issue 4).

For each data set (UCI Adult's train split with ``conf/adult.toml``; NIST's Texas 2019 excerpt with
``conf/nist_acs.toml``, read from ``../shared/data`` and skipped when absent) and each epsilon (1 and 4):

1. one DP release (``dp_aggregate``, in test mode: a fixed seed, so the benchmark is reproducible; such a release
   is NOT private), shared by both modes;
2. per mode, ``synthesize`` on ``--partitions`` partitions, written to Parquet (the synthesis time is the time
   of that write);
3. ``evaluate`` (mean total variation distance of every 1-, 2-, 3-way marginal, blank-cell share, rows) and, for
   Adult, train-on-synthetic / test-on-real accuracy of ``income`` with
   :func:`spark_dpsynth.evaluation.tstr.train_synthetic_test_real` (Adult's ``split = 'test'`` rows are the
   held-out real data; NIST TX has no label for it).

Prints one table and writes the same rows as JSON (``DIR/quality.json``). Usage::

    python benchmarks/quality.py [--output DIR] [--epsilons 1,4] [--modes model,sds,aim,mst]
        [--datasets adult,nist_tx,nist_national]

Modes ``aim`` and ``mst`` run the workload mechanism (docs/design.md section 4.7) with that selection, in test
mode, and sample with the ``pgm`` synthesizer; their ``rel_s`` column is their own release time.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("SPARK_DPSYNTH_SHARED_DATA", ROOT.parent / "shared" / "data"))

DATASETS: dict[str, dict[str, Any]] = {
    "adult": {
        "config": ROOT / "conf" / "adult.toml",
        "input": ROOT / "data" / "adult.csv.gz",
        "label": "income",
        "holdout_filter": "split = 'test'",
    },
    "nist_tx": {
        "config": ROOT / "conf" / "nist_acs.toml",
        "input": SHARED_DATA / "nist_tx2019.csv.gz",
        "label": None,
        "holdout_filter": None,
    },
    "nist_national": {
        "config": ROOT / "conf" / "nist_acs.toml",
        "input": SHARED_DATA / "nist_national2019.csv.gz",
        "label": None,
        "holdout_filter": None,
    },
}
WORKLOAD_MODES = {"aim": "aim", "mst": "mst"}
"""Modes run by the workload mechanism (docs/design.md section 4.7) with this selection, sampled by ``pgm``."""
RELEASE_SEED = 20240501
"""Seed of the test-mode releases (reproducible, not private)."""
SYNTHESIS_SEED = 7
TSTR_MAX_ROWS = 100_000
"""Rows of each table handed to scikit-learn on the driver (Adult has 32,561 + 16,281)."""


def _session():  # noqa: ANN202 - SparkSession
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    return (
        SparkSession.builder.master(os.environ.get("SPARK_MASTER", "local[2]"))
        .appName("spark_dpsynth-bench-quality")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.memory", "4g")
        .getOrCreate()
    )


def run_dataset(
    spark, name: str, epsilons: list[float], modes: list[str], partitions: int, work: str
) -> list:  # noqa: ANN001
    """Benchmark rows (dicts) of one data set: one release per epsilon, every mode on it."""
    from spark_dpsynth import registry
    from spark_dpsynth.cli.config import load_config
    from spark_dpsynth.data.prepare import prepare, resolve_columns
    from spark_dpsynth.evaluation import evaluate, train_synthetic_test_real
    from spark_dpsynth.mechanisms.marginals import dp_aggregate
    from spark_dpsynth.mechanisms.workload import fit_workload
    from spark_dpsynth.synthesizers.marginals import synthesize

    spec = DATASETS[name]
    if not Path(spec["input"]).exists():
        print(f"bench-quality: {name}: {spec['input']} not found, skipped", file=sys.stderr)
        return []
    config = load_config(str(spec["config"]))
    raw = spark.read.csv(str(spec["input"]), header=True, inferSchema=False)
    train = raw.where(config.row_filter) if config.row_filter else raw
    data_config = resolve_columns(train.columns, config.data)
    sensitive = prepare(train, data_config).cache()
    real_train = real_test = None
    if spec["label"]:
        holdout = prepare(raw.where(spec["holdout_filter"]), data_config)
        # bounded by TSTR_MAX_ROWS: the benchmark hands these tables to scikit-learn on the driver
        real_train = sensitive.limit(TSTR_MAX_ROWS).toPandas()
        real_test = holdout.limit(TSTR_MAX_ROWS).toPandas()
    rows = []
    for epsilon in epsilons:
        release = None
        for mode in modes:
            if mode in WORKLOAD_MODES:
                wparams = dataclasses.replace(
                    config.workload,
                    epsilon=epsilon,
                    delta=config.aggregate.delta,
                    reporting_length=config.aggregate.reporting_length,
                    selection=WORKLOAD_MODES[mode],
                    seed=RELEASE_SEED,
                )
                started = time.perf_counter()
                mode_release = fit_workload(train, wparams, data_config)
                aggregate_s = time.perf_counter() - started
            else:
                if release is None:
                    params = dataclasses.replace(config.aggregate, epsilon=epsilon, seed=RELEASE_SEED)
                    started = time.perf_counter()
                    release = dp_aggregate(train, params, data_config)
                    marginals_s = time.perf_counter() - started
                mode_release, aggregate_s = release, marginals_s
            path = os.path.join(work, f"{name}-eps{epsilon:g}-{mode}")
            started = time.perf_counter()
            if mode in WORKLOAD_MODES:
                synthetic_df = registry.synthesizer("pgm").synthesize(
                    mode_release,
                    dataclasses.replace(config.synthesize, seed=SYNTHESIS_SEED, partitions=partitions),
                    spark,
                )
            else:
                synth_params = dataclasses.replace(
                    config.synthesize, mode=mode, seed=SYNTHESIS_SEED, partitions=partitions
                )
                synthetic_df = synthesize(mode_release, synth_params, spark)
            synthetic_df.write.mode("overwrite").parquet(path)
            synthesis_s = time.perf_counter() - started
            synthetic = spark.read.parquet(path)
            started = time.perf_counter()
            metrics = evaluate(sensitive, synthetic, mode_release, max_marginal_length=3)
            evaluation_s = time.perf_counter() - started
            row = {
                "dataset": name,
                "epsilon": epsilon,
                "delta": mode_release.manifest.get("delta"),
                "mode": mode,
                "protected_number_of_records": mode_release.protected_number_of_records,
                "rows": metrics["rows"]["synthetic"],
                "rows_sensitive": metrics["rows"]["sensitive"],
                "blank_cell_share": metrics["blank_cell_share"]["synthetic"],
                "blank_cell_share_sensitive": metrics["blank_cell_share"]["sensitive"],
                "tvd_1": metrics["tvd"]["1"]["mean"],
                "tvd_2": metrics["tvd"]["2"]["mean"],
                "tvd_3": metrics["tvd"]["3"]["mean"],
                "aggregate_seconds": aggregate_s,
                "synthesis_seconds": synthesis_s,
                "evaluation_seconds": evaluation_s,
                "driver_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }
            if spec["label"]:
                # bounded by TSTR_MAX_ROWS (see above)
                syn_pdf = synthetic.limit(TSTR_MAX_ROWS).toPandas()
                tstr = train_synthetic_test_real(syn_pdf, real_train, real_test, spec["label"])
                row.update(
                    {key: tstr[key] for key in ("tstr_accuracy", "tstr_f1", "trtr_accuracy", "trtr_f1")}
                )
            rows.append(row)
            print(_format_row(row), flush=True)
    sensitive.unpersist()
    return rows


HEADER = (
    f"{'dataset':8} {'eps':>4} {'mode':6} {'rows':>7} {'n_prot':>7} {'rows/n':>7} {'blank':>6} {'blank_r':>7} "
    f"{'tvd1':>6} {'tvd2':>6} {'tvd3':>6} {'tstr':>6} {'trtr':>6} {'rel_s':>6} {'syn_s':>6}"
)


def _format_row(row: dict) -> str:
    def num(key: str, fmt: str) -> str:
        value = row.get(key)
        return format(value, fmt) if value is not None else "-"

    ratio = row["rows"] / row["protected_number_of_records"] - 1
    return (
        f"{row['dataset']:8} {row['epsilon']:>4g} {row['mode']:6} {row['rows']:>7} "
        f"{row['protected_number_of_records']:>7} {ratio:>+7.2%} {row['blank_cell_share']:>6.3f} "
        f"{row['blank_cell_share_sensitive']:>7.3f} {row['tvd_1']:>6.3f} {row['tvd_2']:>6.3f} "
        f"{row['tvd_3']:>6.3f} {num('tstr_accuracy', '6.3f'):>6} {num('trtr_accuracy', '6.3f'):>6} "
        f"{row['aggregate_seconds']:>6.1f} {row['synthesis_seconds']:>6.1f}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--output", default=str(ROOT / "output" / "bench-quality"), help="directory of quality.json"
    )
    parser.add_argument("--epsilons", default="1,4", help="comma-separated epsilons")
    parser.add_argument(
        "--modes",
        default="model,sds,aim,mst",
        help="comma-separated: model, sds (marginals mechanism), aim, mst (workload mechanism + pgm)",
    )
    parser.add_argument("--datasets", default="adult,nist_tx", help=f"comma-separated, of {sorted(DATASETS)}")
    parser.add_argument("--partitions", type=int, default=4, help="synthesis partitions")
    args = parser.parse_args(argv)
    epsilons = [float(e) for e in args.epsilons.split(",") if e]
    modes = [m for m in args.modes.split(",") if m]
    names = [d for d in args.datasets.split(",") if d]
    unknown = sorted(set(names) - set(DATASETS))
    if unknown:
        parser.error(f"unknown data set(s) {unknown}; known: {sorted(DATASETS)}")
    os.makedirs(args.output, exist_ok=True)
    spark = _session()
    try:
        spark.sparkContext.setLogLevel("ERROR")
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext: keep its default log level
        pass
    rows: list[dict] = []
    started = time.perf_counter()
    print(HEADER, flush=True)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-quality-") as work:
            for name in names:
                rows += run_dataset(spark, name, epsilons, modes, args.partitions, work)
    finally:
        spark.stop()
    out = os.path.join(args.output, "quality.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"rows": rows, "seconds": time.perf_counter() - started}, f, indent=2)
        f.write("\n")
    print()
    print(HEADER)
    for row in rows:
        print(_format_row(row))
    print(f"\nwritten to {out} ({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
