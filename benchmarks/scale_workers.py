"""The scale benchmark's workers, each run in its own subprocess (``scale.py --worker KIND``): our aggregation and
synthesis, pac-synth's, and the preparation of its input."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import time
from typing import Any

from scale_data import (
    DATASETS,
    RELEASE_SEED,
    SYNTHESIS_SEED,
    DatasetSpec,
    budget_of,
    data_config,
    workload_params,
)
from scale_measure import T_START, descendants, package_version, proc_table, status_kb

# ------------------------------------------------------------------------------------------------ the workers


def _spark_session(  # noqa: ANN202
    master: str | None, driver_memory: str, event_log: str | None, split_bytes: int = 2 << 20
):
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("spark_dpsynth-bench-scale")
    if master:
        builder = builder.master(master).config("spark.driver.memory", driver_memory)
    builder = (
        builder.config("spark.ui.showConsoleProgress", "false")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "8")
        # read the small benchmark files in splits of <= 2 MB (split_bytes): every core gets an even share of the
        # input (with Spark's default, the open cost of 4 MB makes a 8 MB file two splits of 6 MB and 2 MB)
        .config("spark.sql.files.maxPartitionBytes", str(split_bytes))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        # as the sessions spark_dpsynth builds (data.session): generated methods up to HotSpot's JIT limit
        .config("spark.sql.codegen.hugeMethodLimit", "8000")
    )
    if event_log:
        os.makedirs(event_log, exist_ok=True)
        builder = builder.config("spark.eventLog.enabled", "true").config("spark.eventLog.dir", event_log)
    return builder.getOrCreate()


def _own_jvm_hwm_mb() -> float:
    """Peak RSS of the JVM(s) this Python process started (the local driver JVM), MB."""
    return sum(status_kb(pid, "VmHWM") for pid, comm in descendants(os.getpid()) if comm == "java") / 1024


def _parent_jvm_hwm_mb() -> float:
    """Peak RSS of the parent JVM (spark-submit's driver JVM started this Python process), MB."""
    ppid = os.getppid()
    table = proc_table()
    return status_kb(ppid, "VmHWM") / 1024 if table.get(ppid, (0, ""))[1] == "java" else 0.0


def _release_frame(release):  # noqa: ANN001, ANN202 - Release -> (pandas aggregates, comparable manifest)
    manifest = {k: v for k, v in release.manifest.items() if k not in ("created_utc", "versions")}
    return release.to_pandas(), manifest


def worker_ours(args: argparse.Namespace) -> dict[str, Any]:
    """One run of our pipeline in this process: dp_aggregate, then synthesize (model and sds modes)."""
    t0 = time.perf_counter()
    spec = DATASETS[args.dataset]
    spark = _spark_session(args.master, args.driver_memory, args.event_log_dir)
    spark.sparkContext.setLogLevel("ERROR")
    session_s = time.perf_counter() - t0
    from spark_dpsynth.data.session import default_parallelism as parallelism
    from spark_dpsynth.mechanisms.marginals import dp_aggregate
    from spark_dpsynth.params import SynthesisParams
    from spark_dpsynth.synthesizers.marginals import synthesize

    data, params = data_config(spec)
    params = dataclasses.replace(params, reporting_length=args.reporting_length)
    budget = budget_of(spec, args.epsilon, RELEASE_SEED)
    conf = spark.sparkContext.getConf()
    result: dict[str, Any] = {
        "master": spark.sparkContext.master,
        "default_parallelism": parallelism(spark),
        "driver_memory": conf.get("spark.driver.memory", "1g (default)"),
        "executor_memory": conf.get("spark.executor.memory", "1g (default)")
        if not spark.sparkContext.master.startswith("local")
        else "in the driver JVM (local mode)",
        "session_seconds": session_s,
    }
    df = spark.read.parquet(args.input)
    profiler = None
    if args.profile_out:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    started = time.perf_counter()
    release = dp_aggregate(df, params, data, budget=budget)
    result["aggregate_seconds"] = time.perf_counter() - started
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(args.profile_out)
    result["cold_aggregate_seconds"] = time.perf_counter() - T_START
    # --repeat: the same aggregation again in this session (JIT-compiled JVM, Python workers running)
    warm = []
    for _ in range(args.repeat - 1):
        started = time.perf_counter()
        dp_aggregate(spark.read.parquet(args.input), params, data)
        warm.append(time.perf_counter() - started)
    if warm:
        result["warm_aggregate_seconds"] = min(warm)
    result["python_rss_after_aggregate_mb"] = status_kb(os.getpid(), "VmHWM") / 1024
    result["released_tuples"] = release.sizes()
    result["sensitivities"] = release.manifest["sensitivities"]
    result["delta"] = release.manifest["delta"]
    result["protected_number_of_records"] = release.protected_number_of_records
    if args.release_out:
        frame, manifest = _release_frame(release)
        os.makedirs(args.release_out, exist_ok=True)
        frame.to_parquet(os.path.join(args.release_out, "aggregates.parquet"))
        with open(os.path.join(args.release_out, "manifest.json"), "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=2, sort_keys=True, default=str)
    result["synthesis"] = {}
    _write_result(args.result, result)  # the aggregation's figures survive a synthesis that times out
    for mode in args.synthesis_modes:
        if mode == "sds" and args.sds_max_rows and spec.rows > args.sds_max_rows and not args.quick:
            result["synthesis"][mode] = {"not_run": f"not run (> {args.sds_max_rows:,} rows)"}
            continue
        out = os.path.join(args.scratch, f"synthetic-{mode}")
        synth = SynthesisParams(mode=mode, seed=SYNTHESIS_SEED, partitions=parallelism(spark))
        started = time.perf_counter()
        synthesize(release, synth, spark).write.mode("overwrite").parquet(out)
        seconds = time.perf_counter() - started
        rows = spark.read.parquet(out).count()
        result["synthesis"][mode] = {"seconds": seconds, "rows": rows, "rows_per_second": rows / seconds}
        shutil.rmtree(out, ignore_errors=True)
        _write_result(args.result, result)
    result["python_hwm_mb"] = status_kb(os.getpid(), "VmHWM") / 1024
    result["jvm_hwm_mb"] = _own_jvm_hwm_mb() or _parent_jvm_hwm_mb()
    spark.stop()
    return result


def _write_result(path: str, result: dict[str, Any]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2, default=str)
    os.replace(tmp, path)


def worker_pacsynth(args: argparse.Namespace) -> dict[str, Any]:
    """One run of pac-synth in this process (the benchmark environment): Dataset + fit, then sample."""
    import pacsynth
    import pandas as pd

    t0 = time.perf_counter()
    if args.pacsynth_threads:
        pacsynth.set_number_of_threads(args.pacsynth_threads)
    df = pd.read_parquet(args.input).fillna("")
    load_s = time.perf_counter() - t0
    spec = DATASETS[args.dataset]
    accuracy, fabrication, delta = spec_modes(spec)
    builder = (
        pacsynth.DpAggregateSeededParametersBuilder()
        .epsilon(args.epsilon)
        .reporting_length(args.reporting_length)
        .percentile_percentage(99)
        .percentile_epsilon_proportion(0.01)
        .number_of_records_epsilon_proportion(0.005)
        .accuracy_mode(getattr(pacsynth.AccuracyMode, accuracy)())
        .fabrication_mode(getattr(pacsynth.FabricationMode, fabrication)())
    )
    if delta is not None:
        builder = builder.delta(delta)
    synthesizer = pacsynth.DpAggregateSeededSynthesizer(builder.build())
    started = time.perf_counter()
    # Every column keeps "0" as a value, as our configurations do; empty cells ("") are not attributes.
    dataset = pacsynth.Dataset.from_data_frame(df, sensitive_zeros=list(df.columns))
    del df
    synthesizer.fit(dataset)
    aggregate_s = time.perf_counter() - started
    cold_s = time.perf_counter() - T_START
    hwm_after_fit = status_kb(os.getpid(), "VmHWM") / 1024
    aggregates = synthesizer.get_dp_aggregates(";")
    sizes: dict[int, int] = {}
    for combination in aggregates:
        k = combination.count(";") + 1
        sizes[k] = sizes.get(k, 0) + 1
    del aggregates
    n_protected = synthesizer.get_dp_number_of_records()
    target = min(n_protected, args.pacsynth_sample_rows)
    started = time.perf_counter()
    rows = synthesizer.sample(target)
    sample_s = time.perf_counter() - started
    return {
        "pacsynth_version": package_version("pac-synth"),
        "threads": args.pacsynth_threads or os.cpu_count(),
        "load_seconds": load_s,
        "aggregate_seconds": aggregate_s,
        "cold_aggregate_seconds": cold_s,
        "python_rss_after_aggregate_mb": hwm_after_fit,
        "released_tuples": dict(sorted(sizes.items())),
        "protected_number_of_records": n_protected,
        "synthesis": {
            "sds": {"seconds": sample_s, "rows": len(rows) - 1, "rows_per_second": (len(rows) - 1) / sample_s}
        },
        "python_hwm_mb": status_kb(os.getpid(), "VmHWM") / 1024,
    }


def spec_modes(spec: DatasetSpec) -> tuple[str, str, float | None]:
    """pac-synth's accuracy mode, fabrication mode (method names) and delta for a data set's parameters."""
    import tomllib

    aggregate = {}
    if spec.config is not None:
        with open(spec.config, "rb") as f:
            aggregate = tomllib.load(f).get("aggregate", {})
    accuracy = {
        "prioritize_long": "prioritize_long_combinations",
        "prioritize_short": "prioritize_short_combinations",
        "balanced": "balanced",
    }[aggregate.get("accuracy_mode", "prioritize_long")]
    fabrication = aggregate.get("fabrication_mode", "balanced")
    if fabrication not in ("uncontrolled", "progressive", "balanced", "minimize"):
        raise ValueError(f"no pac-synth equivalent of fabrication_mode {fabrication!r}")
    return accuracy, fabrication, aggregate.get("delta")


def worker_prepare(args: argparse.Namespace) -> dict[str, Any]:
    """Write the prepared records of a data set (our ``prepare``: cleaned, binned; empty = null) for pac-synth."""
    spark = _spark_session("local[2]", args.driver_memory, None)
    spark.sparkContext.setLogLevel("ERROR")
    from spark_dpsynth.data.prepare import prepare, resolve_columns

    spec = DATASETS[args.dataset]
    data, _ = data_config(spec)
    df = spark.read.parquet(args.input)
    prepared = prepare(df, resolve_columns(df.columns, data))
    tmp = args.prepared_out + ".tmp"
    prepared.coalesce(1).write.mode("overwrite").parquet(tmp)
    os.replace(tmp, args.prepared_out)
    spark.stop()
    return {}


# ------------------------------------------------------------------------------------ the end-to-end series


class _Stages:
    """Wall and CPU seconds and peak RSS (MB) of each stage, from a 0.2 s sampler of the processes of the job:
    in local mode this Python driver's tree (the driver JVM and its Python workers:
    :class:`scale_measure.TreeSampler`); on a standalone cluster whose workers run on this machine also the driver
    JVM (this process's parent, started by spark-submit) and the application's executor JVMs with their Python
    workers (:class:`scale_measure.ClusterSampler`)."""

    def __init__(self, spark) -> None:  # noqa: ANN001 - a SparkSession
        from scale_measure import ClusterSampler, TreeSampler

        sc = spark.sparkContext
        self.cluster = not sc.master.startswith("local")
        sampler = ClusterSampler(os.getpid(), sc.applicationId, 0.2) if self.cluster else None
        self.sampler = (sampler or TreeSampler(os.getpid(), interval=0.2)).__enter__()
        self.stages: dict[str, dict[str, Any]] = {}

    def run(self, name: str, fn):  # noqa: ANN001, ANN202 - any callable, its result
        self.sampler.sample()
        cpu0 = self.sampler.cpu_by_kind
        self.sampler.peak = dict.fromkeys(self.sampler.peak, 0)
        started = time.perf_counter()
        out = fn()
        wall = time.perf_counter() - started
        self.sampler.sample()
        peak = {k: v / 1024 for k, v in self.sampler.peak.items()}
        cpu = {k: v - cpu0.get(k, 0.0) for k, v in self.sampler.cpu_by_kind.items()}
        self.stages[name] = {
            "seconds": wall,
            "cpu_seconds": sum(cpu.values()),
            "peak_rss_mb": {"python_driver": peak["root"], "jvm": peak["jvm"], "workers": peak["workers"]},
        }
        if self.cluster:
            self.stages[name]["peak_rss_mb"]["executor_jvms"] = peak["executor_jvms"]
            self.stages[name]["cpu_seconds_by_process"] = {
                {"root": "python_driver"}.get(k, k): v for k, v in cpu.items()
            }
        print(f"stage {name}: {wall:.1f} s, CPU {self.stages[name]['cpu_seconds']:.1f} s", flush=True)
        return out

    def executor_hwm_mb(self) -> list[float]:
        """Peak RSS (``VmHWM``) of each executor JVM of the application now running, MB (empty in local mode)."""
        from scale_measure import executor_pids

        if not self.cluster:
            return []
        return [status_kb(pid, "VmHWM") / 1024 for pid in executor_pids(self.sampler.app_id)]

    def close(self) -> None:
        self.sampler.__exit__(None, None, None)


def worker_stages(args: argparse.Namespace) -> dict[str, Any]:
    """The whole job on one data set, stage by stage, as the ``pipeline`` command runs it.

    ``--series-pipeline default`` (the CLI's default): the workload mechanism (``[workload] selection = "auto"``:
    AIM up to 25 columns, and beyond while the budget suffices, else MST) and the ``pgm`` synthesizer, with the stages aggregation, synthesis fit (the
    graphical model, on the driver), synthesis and write (the draw runs inside the Parquet write, one task per
    partition from the draw to the file; the input's types restored as the CLI does). ``model``: the marginals
    mechanism and the ``model`` synthesizer (aggregation, synthesis and write). Then, for both, the write alone
    (the written table read and written again) and the evaluation of the written synthetic table against the
    sensitive table (as the ``pipeline`` command: rows sampled before they are prepared, ``RowSampling``,
    prepared tables, numeric columns from the typed input, default ``max_rows`` and ``max_subsets``; no train-on-synthetic, whose cost is bounded by ``tstr_max_rows`` whatever
    the size)."""
    t0 = time.perf_counter()
    spec = DATASETS[args.dataset]
    spark = _spark_session(args.master, args.driver_memory, args.event_log_dir, int(args.split_mb * 2**20))
    spark.sparkContext.setLogLevel("ERROR")
    from spark_dpsynth.data.prepare import prepare_for_release, resolve_columns, synthetic_for_release
    from spark_dpsynth.data.session import default_parallelism as parallelism
    from spark_dpsynth.evaluation.metrics import RowSampling, evaluate
    from spark_dpsynth.evaluation.numeric import typed_sensitive_table
    from spark_dpsynth.params import SynthesisParams

    data, params = data_config(spec)
    import logging

    # the evaluation's own stage durations (cell pass, numeric metrics) and the synthesizer's fit in this run's log
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("spark_dpsynth.evaluation").setLevel(logging.INFO)
    logging.getLogger("spark_dpsynth.synthesizers").setLevel(logging.INFO)
    stages = _Stages(spark)
    pipeline = getattr(args, "series_pipeline", "default")
    conf = spark.sparkContext.getConf()
    result: dict[str, Any] = {
        "master": spark.sparkContext.master,
        "pipeline": pipeline,
        "default_parallelism": parallelism(spark),
        "split_mb": args.split_mb,
        "executor_memory": conf.get("spark.executor.memory", "1g (default)")
        if stages.cluster
        else "in the driver JVM (local mode)",
        "session_seconds": time.perf_counter() - t0,
    }
    out = os.path.join(args.scratch, "synthetic")
    copy = os.path.join(args.scratch, "synthetic-copy")
    if pipeline == "default":
        from spark_dpsynth.mechanisms.workload import fit_workload
        from spark_dpsynth.synthesizers import pgm
        from spark_dpsynth.synthesizers._types import restore_types

        wparams = dataclasses.replace(workload_params(spec), reporting_length=args.reporting_length)
        budget = budget_of(spec, args.epsilon, RELEASE_SEED)
        release = stages.run(
            "aggregation", lambda: fit_workload(spark.read.parquet(args.input), wparams, data, budget=budget)
        )
        rounds = release.manifest.get("rounds") or []
        result["selection"] = release.manifest.get("selection")
        result["rounds"] = len(rounds)
        result["measurements"] = len(release.measurements)
    else:
        from spark_dpsynth.mechanisms.marginals import dp_aggregate
        from spark_dpsynth.synthesizers.marginals import synthesize

        mparams = dataclasses.replace(params, reporting_length=args.reporting_length)
        budget = budget_of(spec, args.epsilon, RELEASE_SEED)
        release = stages.run(
            "aggregation", lambda: dp_aggregate(spark.read.parquet(args.input), mparams, data, budget=budget)
        )
        result["released_tuples"] = release.sizes()
    result["protected_number_of_records"] = release.protected_number_of_records
    if args.release_out:
        release.save(args.release_out, spark)  # not timed: for profiling the synthesis on its own
    _write_result(args.result, {**result, "stages": stages.stages})
    if pipeline == "default":
        synth = SynthesisParams(seed=SYNTHESIS_SEED, partitions=parallelism(spark))
        frame = stages.run(
            "synthesis_fit",
            lambda: restore_types(pgm.sample(release, synth, spark), release.manifest, seed=SYNTHESIS_SEED),
        )
        stages.run("synthesis_and_write", lambda: frame.write.mode("overwrite").parquet(out))
    else:
        synth = SynthesisParams(mode="model", seed=SYNTHESIS_SEED, partitions=parallelism(spark))
        stages.run(
            "synthesis_and_write",
            lambda: synthesize(release, synth, spark).write.mode("overwrite").parquet(out),
        )
    result["synthetic_rows"] = spark.read.parquet(out).count()
    stages.run("write_alone", lambda: spark.read.parquet(out).write.mode("overwrite").parquet(copy))
    shutil.rmtree(copy, ignore_errors=True)
    _write_result(args.result, {**result, "stages": stages.stages})

    def evaluation() -> dict[str, Any]:
        df = spark.read.parquet(args.input)
        resolved = resolve_columns(df.columns, data)
        # as the CLI: rows sampled before they are prepared, each table read once (design 5.5)
        sampling = RowSampling()
        columns = list(resolved.columns or df.columns)
        df = sampling.sample("sensitive", df, release.protected_number_of_records, columns=columns)
        written = sampling.sample("synthetic", spark.read.parquet(out))
        sensitive = prepare_for_release(df, resolved, release.columns, release.manifest)
        typed, numeric = typed_sensitive_table(df, resolved, release.columns, None)
        synthetic = synthetic_for_release(written, release.columns, release.manifest)
        return evaluate(
            sensitive,
            synthetic,
            release if release.marginals else None,
            numeric_columns=numeric,
            typed_sensitive=typed,
            typed_synthetic=written,
            row_sampling=sampling,
        )

    metrics = stages.run("evaluation", evaluation)
    result["evaluation"] = {
        "tvd_mean": {k: t["mean"] for k, t in metrics["tvd"].items()},
        "rows": metrics["rows"],
        "row_sampling": {side: metrics["row_sampling"][side] for side in ("sensitive", "synthetic")},
        "sds": metrics["sds"] is not None,
        "numeric_columns": len((metrics.get("numeric") or {}).get("columns") or []),
    }
    shutil.rmtree(out, ignore_errors=True)
    result["executor_hwm_mb"] = stages.executor_hwm_mb()
    stages.close()
    result["stages"] = stages.stages
    result["python_hwm_mb"] = status_kb(os.getpid(), "VmHWM") / 1024
    result["jvm_hwm_mb"] = _own_jvm_hwm_mb() or _parent_jvm_hwm_mb()
    result["cold_total_seconds"] = time.perf_counter() - T_START
    spark.stop()
    return result
