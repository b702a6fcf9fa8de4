"""Synthetic-data quality of our modes beside the peers MST and AIM (private-pgm) on real data (issues 4, 16).

For each data set (UCI Adult's train split with ``conf/adult.toml``; NIST's national and Texas 2019 excerpts with
``conf/nist_acs.toml``, national without ``INDP``, ``PINCP``, ``DENSITY`` (19 columns, as in the issue's table); the EU LFS France sample, 76 columns without the weight ``COEFF``, every column
categorical; the last three read from ``../shared/data`` and skipped when absent) and each epsilon (per data set:
Adult 0.3, 1, 4; NIST national 1, 4; LFS 1, 4; ``--epsilons`` overrides), every mode:

* ``model``, ``sds``: one DP release (``dp_aggregate``) shared by both, then ``synthesize`` with that mode;
* ``aim``, ``mst``, ``auto``: the workload mechanism (docs/design.md section 4.7) with that selection, sampled by
  ``pgm`` (``auto`` is the default: AIM or MST, the row's ``selection`` says which);
* ``peer_mst``, ``peer_aim``: MST / AIM of private-pgm, run by smartnoise-synth from their own environment
  (``.venv-peers``, ``make bench-peers-env``) in a subprocess, on the same prepared table exported once to Parquet
  (``benchmarks/peers.py``), at the same epsilon and delta; a peer past its time limit is a ``timeout`` row.

Our releases are made in test mode (a fixed seed, reproducible, NOT private); the peers' noise is their own.
Every synthetic table, ours and the peers', is scored by the same code: ``evaluate`` (mean total variation
distance of the 1-, 2-, 3-way marginals: all of them, or ``--tvd-subsets`` seeded random ones per length on
wide tables; rows) and, for Adult, train-on-synthetic / test-on-real accuracy of ``income``
(:func:`spark_dpsynth.evaluation.tstr.train_synthetic_test_real`, Adult's ``split = 'test'`` rows held out).

Time and memory: ``wall_s`` is, for ours, the release plus the synthesis (written to Parquet) in this process's
warm Spark session; ``cpu_s`` the CPU seconds of the process tree over that time (less sensitive than the wall
time to other jobs on a shared machine; a Python worker that ends between two samples loses its last 0.1 s);
for a peer, its whole subprocess (interpreter start, imports, reading the table, fit, sample,
writing). ``peak_mb``: the peak RSS of the process tree sampled every 0.1 s over that time: for ours this Python
driver plus its JVM (whose heap, once grown, is not returned: a later mode's figure carries the largest earlier
one), for a peer its own subprocess tree.

Prints each row as it is done, then a markdown table, and writes every row as JSON (``DIR/quality.json``)::

    python benchmarks/quality.py [--output DIR] [--datasets adult,nist_national,lfs] [--epsilons 1,4]
        [--modes model,sds,aim,mst] [--peers mst,aim | --skip-peers] [--peer-timeout S] [--peer-aim-timeout S]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale_measure import TreeSampler, load_average, run_measured  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("SPARK_DPSYNTH_SHARED_DATA", ROOT.parent / "shared" / "data"))
PEERS_PYTHON = ROOT / ".venv-peers" / "bin" / "python"

DATASETS: dict[str, dict[str, Any]] = {
    "adult": {
        "config": ROOT / "conf" / "adult.toml",
        "input": ROOT / "data" / "adult.csv.gz",
        "label": "income",
        "holdout_filter": "split = 'test'",
        "epsilons": [0.3, 1.0, 4.0],
    },
    "nist_tx": {
        "config": ROOT / "conf" / "nist_acs.toml",
        "input": SHARED_DATA / "nist_tx2019.csv.gz",
        "label": None,
        "holdout_filter": None,
        "epsilons": [1.0, 4.0],
    },
    "nist_national": {
        "config": ROOT / "conf" / "nist_acs.toml",
        "input": SHARED_DATA / "nist_national2019.csv.gz",
        "drop": ("INDP", "PINCP", "DENSITY"),
        "label": None,
        "holdout_filter": None,
        "epsilons": [1.0, 4.0],
    },
    "lfs": {
        "config": ROOT / "benchmarks" / "lfs.toml",
        "input": SHARED_DATA / "eurostat_lfs_fr_sample50k.csv.gz",
        "label": None,
        "holdout_filter": None,
        "epsilons": [1.0, 4.0],
        "tvd_subsets": 2000,
    },
}
WORKLOAD_MODES = {"auto": "auto", "aim": "aim", "mst": "mst"}
"""Modes run by the workload mechanism (docs/design.md section 4.7) with this selection, sampled by ``pgm``
(``auto``: the default's choice, AIM or MST; the row's ``selection`` says which ran)."""
PEER_MODES = {"peer_mst": "mst", "peer_aim": "aim"}
"""Modes run by ``benchmarks/peers.py`` in the peer environment: smartnoise-synth's synthesizer of that name."""
RELEASE_SEED = 20240501
"""Seed of the test-mode releases (reproducible, not private)."""
SYNTHESIS_SEED = 7
WORKLOAD_OVERRIDES: dict[str, Any] = {}
"""``--workload KEY=VALUE`` settings applied to the aim/mst modes' WorkloadParams."""
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
        # as the CLI's sessions (data.session.SQL_DEFAULTS)
        .config("spark.sql.codegen.hugeMethodLimit", "8000")
        .getOrCreate()
    )


def _subset_kwargs(spec: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """``evaluate``'s ``max_subsets`` for the data set: ``--tvd-subsets``, else the data set's own bound, else
    ``max_subsets = 0`` (every column subset compared)."""
    return {"max_subsets": int(args.tvd_subsets or spec.get("tvd_subsets") or 0)}


def _score(spark, sensitive, synthetic, release, spec, real, subset_kwargs) -> dict[str, Any]:  # noqa: ANN001
    """The metrics of one synthetic table (the same code for our modes and the peers')."""
    from spark_dpsynth.evaluation import evaluate, train_synthetic_test_real

    started = time.perf_counter()
    metrics = evaluate(sensitive, synthetic, release, max_marginal_length=3, **subset_kwargs)
    out = {
        "rows": metrics["rows"]["synthetic"],
        "rows_sensitive": metrics["rows"]["sensitive"],
        "blank_cell_share": metrics["blank_cell_share"]["synthetic"],
        "blank_cell_share_sensitive": metrics["blank_cell_share"]["sensitive"],
        "tvd_1": metrics["tvd"]["1"]["mean"],
        "tvd_2": metrics["tvd"]["2"]["mean"],
        "tvd_3": metrics["tvd"]["3"]["mean"],
        # per length: subsets compared, of how many (a sampled length on a wide table), sampled or not
        "tvd_subsets": {
            k: {
                "compared": v.get("count"),
                "total": v.get("subsets_total", v.get("count")),
                "sampled": v.get("sampled"),
            }
            for k, v in metrics["tvd"].items()
        },
    }
    if spec["label"]:
        real_train, real_test = real
        # bounded by TSTR_MAX_ROWS: the benchmark hands these tables to scikit-learn on the driver
        syn_pdf = synthetic.limit(TSTR_MAX_ROWS).toPandas()
        tstr = train_synthetic_test_real(syn_pdf, real_train, real_test, spec["label"])
        out.update({key: tstr[key] for key in ("tstr_accuracy", "tstr_f1", "trtr_accuracy", "trtr_f1")})
    out["evaluation_seconds"] = time.perf_counter() - started
    return out


def _workload_overrides(pairs: list[str]) -> dict[str, Any]:
    """``--workload KEY=VALUE`` pairs as WorkloadParams fields, each value parsed as its field's default's type.

    Raises:
        ValueError: not KEY=VALUE, an unknown field, or a value of the wrong type.
    """
    from spark_dpsynth.params import WorkloadParams

    defaults = WorkloadParams()
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not hasattr(defaults, key):
            raise ValueError(f"--workload {pair!r}: expected KEY=VALUE with KEY a [workload] setting")
        current = getattr(defaults, key)
        if isinstance(current, bool):
            out[key] = value.lower() in ("1", "true", "yes")
        elif isinstance(current, int | float) or current is None:
            out[key] = float(value) if "." in value or "e" in value.lower() else int(value)
        else:
            out[key] = type(current)(value)
    return out


def _run_ours(spark, mode, config, train, data_config, epsilon, partitions, work, cache, name):  # noqa: ANN001
    """One of our modes: (release, synthetic DataFrame, figures). ``cache`` holds the marginals release shared
    by ``model`` and ``sds`` per epsilon (its time is charged to both)."""
    from spark_dpsynth import registry
    from spark_dpsynth.mechanisms.marginals import dp_aggregate
    from spark_dpsynth.mechanisms.workload import fit_workload
    from spark_dpsynth.synthesizers.marginals import synthesize

    before = TreeSampler(os.getpid())
    before.sample()
    with TreeSampler(os.getpid()) as sampler:
        if mode in WORKLOAD_MODES:
            wparams = dataclasses.replace(
                config.workload,
                epsilon=epsilon,
                delta=config.aggregate.delta,
                reporting_length=config.aggregate.reporting_length,
                selection=WORKLOAD_MODES[mode],
                seed=RELEASE_SEED,
            )
            wparams = dataclasses.replace(wparams, **WORKLOAD_OVERRIDES)
            started = time.perf_counter()
            release = fit_workload(train, wparams, data_config)
            release_s = time.perf_counter() - started
        else:
            if epsilon not in cache:
                params = dataclasses.replace(config.aggregate, epsilon=epsilon, seed=RELEASE_SEED)
                started = time.perf_counter()
                cache[epsilon] = (dp_aggregate(train, params, data_config), time.perf_counter() - started)
            release, release_s = cache[epsilon]
        path = os.path.join(work, f"{name}-eps{epsilon:g}-{mode}")
        started = time.perf_counter()
        if mode in WORKLOAD_MODES:
            synthetic_df = registry.synthesizer("pgm").synthesize(
                release,
                dataclasses.replace(config.synthesize, seed=SYNTHESIS_SEED, partitions=partitions),
                spark,
            )
        else:
            synth_params = dataclasses.replace(
                config.synthesize, mode=mode, seed=SYNTHESIS_SEED, partitions=partitions
            )
            synthetic_df = synthesize(release, synth_params, spark)
        synthetic_df.write.mode("overwrite").parquet(path)
        synthesis_s = time.perf_counter() - started
    figures = {
        "status": "ok",
        "protected_number_of_records": release.protected_number_of_records,
        "selection": release.manifest.get("selection"),
        "release_seconds": release_s,
        "synthesis_seconds": synthesis_s,
        "wall_seconds": release_s + synthesis_s,
        "peak_rss_mb": sampler.peak["total"] / 1024,
        "cpu_seconds": sampler.cpu_seconds - before.cpu_seconds,
        "peak_rss_mb_jvm": sampler.peak["jvm"] / 1024,
        "peak_rss_mb_python": sampler.peak["root"] / 1024,
    }
    return release, spark.read.parquet(path), figures


def _run_peer(spark, mode, prepared, columns, epsilon, delta, work, name, args):  # noqa: ANN001
    """One peer: (synthetic DataFrame or None, figures); ``status`` is ok, timeout, failed or not run."""
    python = Path(args.peers_python)
    if not python.exists():
        return None, {"status": f"not run ({python} missing: make bench-peers-env)"}
    peer = PEER_MODES[mode]
    stem = os.path.join(work, f"{name}-eps{epsilon:g}-{mode}")
    command = [
        str(python), str(ROOT / "benchmarks" / "peers.py"), "--synthesizer", peer,
        "--input", prepared, "--output", stem + ".parquet", "--result", stem + ".json",
        "--epsilon", repr(epsilon), "--delta", repr(delta), "--seed", str(SYNTHESIS_SEED),
        "--sampling", args.peer_sampling, "--aim-degree", str(args.peer_aim_degree),
        "--aim-max-model-size", str(args.peer_aim_max_model_size),
    ]  # fmt: skip
    timeout = args.peer_aim_timeout if peer == "aim" else args.peer_timeout
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    measured = run_measured(
        command, env, timeout, Path(args.output) / "logs" / f"{name}-eps{epsilon:g}-{mode}.log"
    )
    figures: dict[str, Any] = {
        "wall_seconds": measured["wall_seconds"],
        "peak_rss_mb": measured["sampled_peak_rss_mb"]["total"],
        "cpu_seconds": measured["cpu_seconds"],
        "log": measured["log"],
        "protected_number_of_records": None,
    }
    if measured["returncode"] != 0:
        timed_out = measured["wall_seconds"] >= timeout
        figures["status"] = (
            f"timeout ({timeout:.0f} s)" if timed_out else f"failed (exit {measured['returncode']})"
        )
        return None, figures
    with open(stem + ".json", encoding="utf-8") as f:
        figures.update({f"peer_{key}": value for key, value in json.load(f).items()})
    figures["status"] = "ok"
    return spark.read.parquet(stem + ".parquet").select(*columns), figures


def run_dataset(spark, name, epsilons, modes, args, work, rows, on_row) -> None:  # noqa: ANN001
    """Append to ``rows`` the benchmark rows (dicts) of one data set, every mode at every epsilon, calling
    ``on_row()`` after each."""
    from spark_dpsynth.cli.config import load_config
    from spark_dpsynth.data.prepare import prepare, resolve_columns

    spec = DATASETS[name]
    if not Path(spec["input"]).exists():
        print(f"bench-quality: {name}: {spec['input']} not found, skipped", file=sys.stderr)
        return
    subset_kwargs = _subset_kwargs(spec, args)
    config = load_config(str(spec["config"]))
    if spec.get("drop"):
        kept = tuple(c for c in config.data.columns if c not in spec["drop"])
        data = config.data
        config = dataclasses.replace(
            config,
            data=dataclasses.replace(
                data,
                columns=kept,
                bins={c: b for c, b in data.bins.items() if c in kept},
                domains={c: v for c, v in data.domains.items() if c in kept},
            ),
        )
    config = dataclasses.replace(config, aggregate=dataclasses.replace(config.aggregate, delta=args.delta))
    raw = spark.read.csv(str(spec["input"]), header=True, inferSchema=False)
    train = raw.where(config.row_filter) if config.row_filter else raw
    data_config = resolve_columns(train.columns, config.data)
    sensitive = prepare(train, data_config).cache()
    real = None
    if spec["label"]:
        holdout = prepare(raw.where(spec["holdout_filter"]), data_config)
        # bounded by TSTR_MAX_ROWS: the benchmark hands these tables to scikit-learn on the driver
        real = (sensitive.limit(TSTR_MAX_ROWS).toPandas(), holdout.limit(TSTR_MAX_ROWS).toPandas())
    prepared = None
    if any(mode in PEER_MODES for mode in modes):
        # the peers read the very table our modes see: the prepared (binned, string) columns
        prepared = os.path.join(work, f"{name}-prepared.parquet")
        sensitive.coalesce(1).write.mode("overwrite").parquet(prepared)
    cache: dict[float, Any] = {}
    for epsilon in epsilons or spec["epsilons"]:
        delta = config.aggregate.delta
        for mode in modes:
            row: dict[str, Any] = {"dataset": name, "epsilon": epsilon, "delta": delta, "mode": mode}
            try:
                if mode in PEER_MODES:
                    release = None
                    synthetic, figures = _run_peer(
                        spark, mode, prepared, sensitive.columns, epsilon, delta, work, name, args
                    )
                else:
                    release, synthetic, figures = _run_ours(
                        spark, mode, config, train, data_config, epsilon, args.partitions, work, cache, name
                    )
                    row["delta"] = release.manifest.get("delta")
                row.update(figures)
                if synthetic is not None:
                    row.update(_score(spark, sensitive, synthetic, release, spec, real, subset_kwargs))
            except Exception as error:  # noqa: BLE001 - one failed mode is a row, the run goes on
                row.update({"status": f"failed ({type(error).__name__}: {str(error).splitlines()[0][:200]})"})
            rows.append(row)
            on_row()
            print(_format_row(row), flush=True)
    sensitive.unpersist()


COLUMNS = [
    ("dataset", "dataset", "s"),
    ("eps", "epsilon", "g"),
    ("mode", "mode", "s"),
    ("selection", "selection", "s"),
    ("status", "status", "s"),
    ("rows", "rows", ",d"),
    ("1-way TVD", "tvd_1", ".3f"),
    ("2-way TVD", "tvd_2", ".3f"),
    ("3-way TVD", "tvd_3", ".3f"),
    ("TSTR acc.", "tstr_accuracy", ".3f"),
    ("TRTR acc.", "trtr_accuracy", ".3f"),
    ("wall s", "wall_seconds", ".0f"),
    ("CPU s", "cpu_seconds", ".0f"),
    ("peak MB", "peak_rss_mb", ",.0f"),
    ("eval s", "evaluation_seconds", ".0f"),
]


def _cells(row: dict) -> list[str]:
    out = []
    for _, key, fmt in COLUMNS:
        value = row.get(key)
        out.append("-" if value is None else format(value, fmt))
    return out


def _format_row(row: dict) -> str:
    return " | ".join(_cells(row))


def markdown(rows: list[dict]) -> str:
    """The rows as a markdown table."""
    head = "| " + " | ".join(title for title, _, _ in COLUMNS) + " |"
    rule = "|" + "|".join("---" if fmt == "s" else "---:" for _, _, fmt in COLUMNS) + "|"
    return "\n".join([head, rule] + ["| " + " | ".join(_cells(row)) + " |" for row in rows])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--output", default=str(ROOT / "output" / "bench-quality"), help="directory of quality.json and logs"
    )
    parser.add_argument("--epsilons", default="", help="comma-separated epsilons (default: each data set's)")
    parser.add_argument(
        "--modes",
        default="model,sds,aim,mst",
        help="comma-separated, our modes: model, sds (marginals mechanism), aim, mst (workload mechanism + pgm); "
        "peer_mst, peer_aim may be listed here too",
    )
    parser.add_argument("--peers", default="mst,aim", help="comma-separated peers to add: mst, aim")
    parser.add_argument("--skip-peers", action="store_true", help="run no peer")
    parser.add_argument("--peers-python", default=str(PEERS_PYTHON), help="python of the peer environment")
    parser.add_argument("--peer-timeout", type=float, default=3600.0, help="peer MST's time limit (s)")
    parser.add_argument("--peer-aim-timeout", type=float, default=1800.0, help="peer AIM's time limit (s)")
    parser.add_argument(
        "--peer-sampling",
        choices=("sample", "round"),
        default="sample",
        help="peers' record sampling (peers.py)",
    )
    parser.add_argument(
        "--peer-aim-degree", type=int, default=3, help="peer AIM's workload: all k-way marginals"
    )
    parser.add_argument(
        "--peer-aim-max-model-size", type=float, default=80.0, help="peer AIM's model cap (MB)"
    )
    parser.add_argument(
        "--datasets", default="adult,nist_national,lfs", help=f"comma-separated, of {sorted(DATASETS)}"
    )
    parser.add_argument("--delta", type=float, default=1e-6, help="delta of every mode, ours and the peers'")
    parser.add_argument("--partitions", type=int, default=4, help="synthesis partitions")
    parser.add_argument(
        "--workload",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a [workload] setting of the aim/mst modes (repeatable), e.g. domain_rho_proportion=0.3",
    )
    parser.add_argument(
        "--tvd-subsets",
        type=int,
        default=0,
        help="random column subsets per length for the TVD (0: the data set's)",
    )
    args = parser.parse_args(argv)
    try:
        args.workload = _workload_overrides(args.workload)
    except ValueError as exc:
        parser.error(str(exc))
    WORKLOAD_OVERRIDES.update(args.workload)
    epsilons = [float(e) for e in args.epsilons.split(",") if e] or None
    modes = [m for m in args.modes.split(",") if m]
    if not args.skip_peers:
        modes += [f"peer_{p}" for p in args.peers.split(",") if p and f"peer_{p}" not in modes]
    else:
        modes = [m for m in modes if m not in PEER_MODES]
    known = {"model", "sds", *WORKLOAD_MODES, *PEER_MODES}
    if set(modes) - known:
        parser.error(f"unknown mode(s) {sorted(set(modes) - known)}; known: {sorted(known)}")
    names = [d for d in args.datasets.split(",") if d]
    unknown = sorted(set(names) - set(DATASETS))
    if unknown:
        parser.error(f"unknown data set(s) {unknown}; known: {sorted(DATASETS)}")
    os.makedirs(args.output, exist_ok=True)
    load_before = load_average()
    spark = _session()
    try:
        spark.sparkContext.setLogLevel("ERROR")
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext: keep its default log level
        pass
    rows: list[dict] = []
    started = time.perf_counter()
    print(" | ".join(title for title, _, _ in COLUMNS), flush=True)
    out = os.path.join(args.output, "quality.json")

    def write() -> None:
        with open(out, "w", encoding="utf-8") as f:
            json.dump(
                {
                    "command": sys.argv,
                    "rows": rows,
                    "seconds": time.perf_counter() - started,
                    "load_before": load_before,
                    "load_after": load_average(),
                    "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                },
                f,
                indent=2,
            )
            f.write("\n")

    try:
        # the synthetic tables stay in DIR/work (a peer's run may take an hour: its output is kept to re-score)
        work = os.path.join(args.output, "work")
        os.makedirs(work, exist_ok=True)
        for name in names:
            run_dataset(spark, name, epsilons, modes, args, work, rows, write)
    finally:
        spark.stop()
    write()
    print()
    print(markdown(rows))
    print(f"\nload average {load_before} before, {load_average()} after; written to {out}")
    print(f"({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
