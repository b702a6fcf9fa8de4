"""Quality against the number of records: the synthetic table's mean TVD beside a real sample's (docs/design.md
section 5.5), from the ``metrics.json`` of pipeline runs of one table at several sizes.

Per run: the sensitive table's rows, each length's mean TVD, its floor (the TVD two uniform samples of the
compared sizes of one table would show: measured on two disjoint samples when the evaluation sampled the rows,
else expected) and what the synthetic table is worth in real records (``tvd[L].real_sample_records``). Prints a
markdown table and draws the 3-way (or ``--length``) figure, log-log, to a PNG. Usage::

    python benchmarks/records_figure.py --output benchmarks/results/DIR/records.png \\
        32561=/tmp/out_32k 1000000=/tmp/out_1m 10000000=/tmp/out_10m
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def _load(directory: str) -> dict:
    with open(Path(directory) / "evaluation" / "metrics.json") as f:
        return json.load(f)


def _floor(entry: dict) -> float:
    return entry["floor_measured"] if entry.get("floor_measured") is not None else entry["floor"]


def main(argv: list[str] | None = None) -> int:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="LABEL=OUTPUT_DIR (a pipeline's --output), in order of size")
    parser.add_argument("--output", required=True, help="the PNG to write")
    parser.add_argument("--length", default="3", help="the marginal length of the figure")
    parser.add_argument(
        "--json", help="also write each run's rows, row sampling and tvd entries to this file"
    )
    args = parser.parse_args(argv)
    runs = [(label, _load(path)) for label, path in (item.split("=", 1) for item in args.runs)]
    lengths = sorted(runs[0][1]["tvd"], key=int)
    print("| records | " + " | ".join(f"{k}-way TVD (floor)" for k in lengths) + " | worth in real records |")
    print("|---:|" + "---|" * len(lengths) + "---|")
    for _, m in runs:
        tvd = m["tvd"]
        worth = " / ".join(
            "within sampling error"
            if tvd[k].get("real_sample_records") is None
            else f"{tvd[k]['real_sample_records']:,}"
            for k in lengths
        )
        cells = " | ".join(f"{tvd[k]['mean']:.4f} ({_floor(tvd[k]):.4f})" for k in lengths)
        print(f"| {m['rows']['sensitive']:,} | {cells} | {worth} |")
    if args.json:
        keep = ("rows", "row_sampling", "tvd")
        with open(args.json, "w") as f:
            json.dump({label: {key: m.get(key) for key in keep} for label, m in runs}, f, indent=1)
    k = args.length
    records = [m["rows"]["sensitive"] for _, m in runs]
    fig = Figure(figsize=(11.0, 3.8))
    FigureCanvasAgg(fig)
    ax, right = fig.subplots(1, 2)
    ax.plot(records, [m["tvd"][k]["mean"] for _, m in runs], "o-", label=f"synthetic table, {k}-way mean TVD")
    ax.plot(
        records, [_floor(m["tvd"][k]) for _, m in runs], "s--", label="a real sample of the compared size"
    )
    for (label, m), x in zip(runs, records, strict=True):
        ax.annotate(label, (x, m["tvd"][k]["mean"]), textcoords="offset points", xytext=(4, 6), fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("records in the sensitive table")
    ax.set_ylabel(f"{k}-way mean TVD")
    ax.set_title("Quality against the number of records (compared on at most 1,000,000 rows)", fontsize=9)
    ax.legend(fontsize=8)
    for length in lengths[1:]:
        worth = [
            (x, m["tvd"][length].get("real_sample_records")) for x, (_, m) in zip(records, runs, strict=True)
        ]
        shown = [(x, w) for x, w in worth if w]
        right.plot([x for x, _ in shown], [w for _, w in shown], "o-", label=f"{length}-way")
    right.plot(records, records, ":", color="grey", label="worth its own size")
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel("records in the sensitive table")
    right.set_ylabel("worth in real records")
    right.set_title("What the synthetic table is worth in real records", fontsize=9)
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print(f"figure: {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
