"""The scale benchmark's report: the markdown tables of the results and the targets they are judged against."""

from __future__ import annotations

from typing import Any

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
    if results.get("series"):
        lines += ["", *series_table(results["series"])]
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
    for run in results.get("series") or []:
        if run.get("cluster"):
            out.append(
                {
                    "target": f"{run['dataset']}: the series on the standalone cluster gives the local-mode "
                    "release (test mode)",
                    "measured": f"same release: {run.get('same_release_as_local')}"
                    + (
                        f" (differ: {', '.join(run['release_differs'])})"
                        if run.get("release_differs")
                        else ""
                    ),
                    "met": bool(run.get("same_release_as_local")),
                }
            )
            continue
        stages = run.get("stages") or {}
        if run["dataset"] != "adult_10m" or run.get("failed") or "evaluation" not in stages:
            continue
        agg, ev = stages["aggregation"]["seconds"], stages["evaluation"]["seconds"]
        syn = _synthesis_seconds(stages)
        driver = (run.get("python_hwm_mb") or 0) + (run.get("jvm_hwm_mb") or 0)
        out += [
            {"target": "adult_10m: aggregation <= 120 s", "measured": f"{agg:.0f} s", "met": agg <= 120},
            {
                "target": "adult_10m: synthesis of 10M rows <= 120 s (written to Parquet)",
                "measured": f"{syn:.0f} s",
                "met": syn <= 120,
            },
            {
                "target": "adult_10m: evaluation <= the aggregation's time",
                "measured": f"{ev:.0f} s vs {agg:.0f} s",
                "met": ev <= agg,
            },
            {
                "target": "adult_10m: driver JVM + Python peak RSS <= 3 GB",
                "measured": f"{driver:.0f} MB",
                "met": driver <= 3072,
            },
        ]
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


def _synthesis_seconds(stages: dict[str, Any], key: str = "seconds") -> float | None:
    """The synthesis's seconds: the fit on the driver (``pgm``) plus the draw inside the write."""
    if "synthesis_and_write" not in stages:
        return None
    return sum(stages[k][key] for k in ("synthesis_fit", "synthesis_and_write") if k in stages)


def series_table(series: list[dict[str, Any]]) -> list[str]:
    """The end-to-end series (``--series``) as markdown lines: per data set, each stage's wall and CPU seconds
    and the peaks of the driver's processes."""
    lines = [
        "End to end, stage by stage (R = 3, epsilon 4, synthesis of the protected number of records to Parquet; "
        "pipeline default = workload mechanism + pgm (fit = the graphical model on the driver), model = "
        "marginals mechanism + model; evaluation as the pipeline's, without train-on-synthetic; s = wall "
        "seconds, CPU = the process tree's CPU seconds in the stage)",
        "",
        "| data set | pipeline | rows | aggregation s (CPU) | rec x 3-tuples/s | synthesis fit s (CPU) "
        "| draw + write s (CPU) | synthesis rows/s | write alone s | evaluation s (CPU) "
        "| rows compared (sens / syn) | process s | Python driver MB | driver JVM MB | workers MB (peak) "
        "| load before / after |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|",
    ]
    for run in series:
        stages = run.get("stages") or {}
        pipeline = run.get("pipeline", "model") + (", standalone" if run.get("cluster") else "")
        if run.get("failed") and not stages:
            lines.append(f"| {run['dataset']} | {pipeline} | {run['rows']:,} | failed |" + " |" * 13)
            continue

        def cell(name: str, stages: dict[str, Any] = stages) -> str:
            stage = stages.get(name)
            return f"{stage['seconds']:.1f} ({stage['cpu_seconds']:.0f})" if stage else "-"

        agg = stages.get("aggregation", {}).get("seconds")
        syn = _synthesis_seconds(stages)
        rows_s = (run.get("synthetic_rows") or 0) / syn if syn else None
        sampling = (run.get("evaluation") or {}).get("row_sampling") or {}
        compared = " / ".join(
            f"{sampling[side]['rows_compared']:,}" for side in ("sensitive", "synthetic") if side in sampling
        )
        workers = max((s["peak_rss_mb"]["workers"] for s in stages.values()), default=0)
        lines.append(
            f"| {run['dataset']} | {pipeline} | {run['rows']:,} | {cell('aggregation')} "
            f"| {_num(run['record_tuples'] / agg if agg else None, ',.0f')} | {cell('synthesis_fit')} "
            f"| {cell('synthesis_and_write')} | {_num(rows_s, ',.0f')} | {cell('write_alone')} "
            f"| {cell('evaluation')} | {compared or '-'} "
            f"| {_num(run.get('wall_seconds'), '.0f')} | {_num(run.get('python_hwm_mb'), '.0f')} "
            f"| {_num(run.get('jvm_hwm_mb'), '.0f')} | {workers:.0f} "
            f"| {run.get('load_before', '-')} / {run.get('load_after', '-')} |"
        )
    clusters = [run for run in series if run.get("cluster")]
    if clusters:
        lines += ["", *cluster_series_table(clusters)]
    return lines


_STAGES = ("aggregation", "synthesis_fit", "synthesis_and_write", "write_alone", "evaluation")


def cluster_series_table(runs: list[dict[str, Any]]) -> list[str]:
    """The series runs on the standalone cluster (``--series-on cluster``) as markdown lines: the cluster, the
    executors' share of each stage's CPU seconds, their peak RSS, and the release compared with local mode."""
    lines = [
        "On the standalone cluster (spark-submit to a master and one-core workers on 127.0.0.1; each stage's CPU "
        "and peaks above include the executor JVMs and their Python workers, the driver JVM is spark-submit's; "
        "the master's and workers' daemons are not counted)",
        "",
        "| data set | workers x 1 core | default parallelism | executor memory | executors' CPU s: aggregation "
        "/ fit / draw + write / write alone / evaluation | executor JVMs MB (peak of the sum) "
        "| executor JVM MB (VmHWM each) | same release as local[2] |",
        "|---|---:|---:|---|---|---:|---|---|",
    ]
    for run in runs:
        stages = run.get("stages") or {}

        def executors(name: str, stages: dict[str, Any] = stages) -> str:
            cpu = (stages.get(name) or {}).get("cpu_seconds_by_process")
            return f"{cpu['executor_jvms'] + cpu['workers']:.0f}" if cpu else "-"

        peak = max((s["peak_rss_mb"].get("executor_jvms", 0) for s in stages.values()), default=0)
        same = run.get("same_release_as_local")
        if run.get("release_differs"):
            same = f"{same} (differ: {', '.join(run['release_differs'])})"
        lines.append(
            f"| {run['dataset']}{' (failed)' if run.get('failed') else ''} | {run.get('workers', '-')} "
            f"| {run.get('default_parallelism', '-')} | {run.get('executor_memory', '-')} "
            f"| {' / '.join(executors(n) for n in _STAGES)} | {peak:.0f} "
            f"| {', '.join(f'{m:.0f}' for m in run.get('executor_hwm_mb') or []) or '-'} | {same} |"
        )
    return lines
