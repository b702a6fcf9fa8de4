"""The report's sections on the marginals: SDS's evaluator (by length and count bucket), the total variation
distance of the column marginals with its sampling error (docs/design.md sections 5.1, 5.2 and 5.5), what the
synthetic table is worth in real records, and the yardstick that says how each column is compared.

Every number is formatted from the metrics dict (:func:`spark_dpsynth.evaluation.metrics.evaluate`), so the page
and ``metrics.json`` agree by construction. Privacy: the figures are not private (see
:mod:`spark_dpsynth.evaluation.report`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from spark_dpsynth.evaluation.report_html import (
    REAL_COLOR,
    RELEASE_COLOR,
    SYNTHETIC_COLOR,
    as_float,
    escape,
    format_number,
    html_table,
    png_image,
)

__all__ = ["sds_section", "tvd_section"]


def sds_section(sds: dict[str, Any] | None) -> str:
    if not sds:
        return ""
    sides = [("release", sds["release"], RELEASE_COLOR), ("synthetic", sds["synthetic"], SYNTHETIC_COLOR)]
    out = [
        '<section id="sds"><h2>SDS evaluator: the release and the synthetic data against the true aggregates</h2>'
    ]
    out.append(
        "<p>Preservation = mean of min(count / true count, 1) over the evaluated combinations (true count "
        "&ge; resolution, or present); proportional error = |count - true count| / true count (1 for a "
        "fabricated combination). Buckets are SDS's (0, 10], (10, 20], (20, 40], ... of the true count.</p>"
    )
    lengths = sorted(sds["release"]["by_length"], key=int)
    fig = Figure(figsize=(6.4, 3.2))
    ax = fig.add_subplot()
    x = np.arange(len(lengths))
    for i, (name, side, color) in enumerate(sides):
        values = [as_float(side["by_length"][k]["preservation"]) for k in lengths]
        ax.bar(x + (i - 0.5) * 0.38, values, width=0.38, label=name, color=color)
    ax.set_xticks(x, [f"k={k}" for k in lengths])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("preservation")
    ax.set_title("Preservation by combination length")
    ax.legend()
    out.append(png_image(fig, "preservation by length", "plot-preservation-by-length"))

    buckets = list(sds["release"]["by_count_bucket"])
    fig = Figure(figsize=(6.4, 3.2))
    ax = fig.add_subplot()
    x = np.arange(len(buckets))
    for name, side, color in sides:
        values = [as_float(side["by_count_bucket"][b]["preservation"]) for b in buckets]
        ax.plot(x, values, marker="o", label=name, color=color)
    ax.set_xticks(x, buckets, rotation=45)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("true count bucket (upper bound)")
    ax.set_ylabel("preservation")
    ax.set_title("Preservation by true count")
    ax.legend()
    out.append(png_image(fig, "preservation by count bucket", "plot-preservation-by-count"))

    fig = Figure(figsize=(9.6, 3.2))
    left, right = fig.subplots(1, 2)
    for name, side, color in sides:
        left.plot(
            x,
            [as_float(side["by_count_bucket"][b]["mean_absolute_error"]) for b in buckets],
            "o-",
            color=color,
        )
        right.plot(
            x,
            [as_float(side["by_count_bucket"][b]["mean_proportional_error"]) for b in buckets],
            "o-",
            color=color,
            label=name,
        )
    for ax, label in ((left, "mean absolute error (records)"), (right, "mean proportional error")):
        ax.set_xticks(x, buckets, rotation=45)
        ax.set_xlabel("true count bucket (upper bound)")
        ax.set_ylabel(label)
    left.set_title("Error vs true count")
    right.set_title("Proportional error vs true count")
    right.legend()
    out.append(png_image(fig, "error vs real count", "plot-error-vs-count"))

    for name, side, _ in sides:
        rows = []
        for k in lengths:
            e = side["by_length"][k]
            rows.append(
                [
                    escape(k),
                    format_number(e["true_tuples"], "int"),
                    format_number(e["tuples"], "int"),
                    format_number(e["suppressed_pct"], "pct100"),
                    format_number(e["fabricated_pct"], "pct100"),
                    format_number(e["mean_absolute_error"], "dec2"),
                    format_number(e["preservation"], "pct"),
                    format_number(e["mean_proportional_error"], "dec"),
                    format_number(e["leakage_count"], "int"),
                ]
            )
        out.append(f"<h3>{escape(name)} by length</h3>")
        out.append(
            html_table(
                [
                    "k",
                    "true combinations",
                    "combinations",
                    "suppressed",
                    "fabricated",
                    "mean abs. error",
                    "preservation",
                    "mean prop. error",
                    "leakage",
                ],
                rows,
                "sds",
            )
        )
    rows = []
    for b in buckets:
        r, y = sds["release"]["by_count_bucket"][b], sds["synthetic"]["by_count_bucket"][b]
        rows.append(
            [
                f"({r['lower']}, {escape(b)}]",
                format_number(r["tuples"], "int"),
                format_number(r["preservation"], "pct"),
                format_number(r["mean_proportional_error"], "dec"),
                format_number(y["tuples"], "int"),
                format_number(y["preservation"], "pct"),
                format_number(y["mean_proportional_error"], "dec"),
            ]
        )
    out.append("<h3>By true count bucket</h3>")
    out.append(
        html_table(
            [
                "true count",
                "release: combinations",
                "preservation",
                "mean prop. error",
                "synthetic: combinations",
                "preservation",
                "mean prop. error",
            ],
            rows,
            "sds",
        )
    )
    out.append("</section>")
    return "".join(out)


def tvd_section(metrics: dict[str, Any]) -> str:
    columns = metrics["columns"]
    by_subset = metrics.get("tvd_by_subset", {})
    out = ['<section id="tvd"><h2>Column marginals: total variation distance</h2>']
    from spark_dpsynth.evaluation.sampling import describe_row_sampling, describe_sampling

    notes = (
        (
            "Sampled rows",
            describe_row_sampling(metrics),
            "A table with more rows than the bound (<code>[evaluate] max_rows</code>) is compared on a seeded "
            "uniform sample of its rows (each row kept with probability max_rows / rows, independently of its "
            "values): every distance, share and numeric metric is that of the samples (a TVD from samples is "
            "biased upwards: the sampling error of each length is given below); SDS's evaluator, which compares "
            "exact counts, is skipped.",
        ),
        (
            "Sampled column subsets",
            describe_sampling(metrics),
            "A length with more subsets than the bound (<code>[evaluate] max_subsets</code>) is compared on "
            "that many subsets, drawn uniformly without replacement from the number of columns and the seed "
            "only (never from the data); its mean TVD, NIST score and SDS statistics are over that sample.",
        ),
    )
    for title, lines, text in notes:
        if lines:
            out.append(f"<p><b>{title}.</b> " + "; ".join(escape(line) for line in lines) + f". {text}</p>")
    out += _yardstick_html(metrics)
    if "2" in by_subset:
        d = len(columns)
        grid = np.full((d, d), np.nan)
        two = metrics["tvd"].get("2") or {}
        pairs = (
            [tuple(p) for p in two["subsets"]]
            if two.get("sampled")
            else [(a, b) for a in range(d) for b in range(a + 1, d)]
        )
        for (i, j), value in zip(pairs, by_subset["2"].values(), strict=True):
            grid[i, j] = grid[j, i] = value
        for i, value in enumerate(by_subset.get("1", {}).values()):
            grid[i, i] = value
        size = max(4.0, 0.45 * d + 2.0)
        fig = Figure(figsize=(size + 1.2, size))
        ax = fig.add_subplot()
        image = ax.imshow(grid, cmap="Reds", vmin=0.0, vmax=max(float(np.nanmax(grid)), 1e-9))
        ax.set_xticks(range(d), columns, rotation=90)
        ax.set_yticks(range(d), columns)
        if d <= 16:
            for i in range(d):
                for j in range(d):
                    if not math.isnan(grid[i, j]):
                        ax.text(j, i, f"{grid[i, j]:.2f}", ha="center", va="center", fontsize=6)
        ax.set_title(
            "2-way TVD per column pair (diagonal: 1-way TVD"
            + ("; sampled pairs, blank: not compared)" if two.get("sampled") else ")")
        )
        fig.colorbar(image, ax=ax, shrink=0.8)
        out.append(png_image(fig, "heatmap of 2-way TVD", "plot-tvd-heatmap"))
    worst = metrics.get("one_way_worst") or []
    if worst:
        fig = Figure(figsize=(9.6, 2.8 * math.ceil(len(worst) / 2)))
        axes = fig.subplots(math.ceil(len(worst) / 2), 2, squeeze=False).ravel()
        for ax, entry in zip(axes, worst, strict=False):
            labels = ["(empty)" if v is None else str(v) for v in entry["values"]] + ["(other)"]
            labels = [label if len(label) <= 18 else label[:17] + "\u2026" for label in labels]
            real = [*entry["sensitive"], entry["other"]["sensitive"]]
            synthetic = [*entry["synthetic"], entry["other"]["synthetic"]]
            x = np.arange(len(labels))
            ax.bar(x - 0.2, real, width=0.4, color=REAL_COLOR, label="sensitive")
            ax.bar(x + 0.2, synthetic, width=0.4, color=SYNTHETIC_COLOR, label="synthetic")
            ax.set_xticks(x, labels, rotation=60, ha="right", fontsize=7)
            ax.set_ylabel("share of rows")
            ax.set_title(f"{entry['column']} (1-way TVD {entry['tvd']:.3f})", fontsize=9)
            ax.legend(fontsize=7)
        for ax in axes[len(worst) :]:
            ax.set_visible(False)
        fig.suptitle("Sensitive vs synthetic 1-way distributions of the worst columns")
        fig.tight_layout()
        out.append(png_image(fig, "1-way distributions of the worst columns", "plot-one-way-worst"))
    rows = []
    for length in sorted(metrics["tvd"], key=int):
        t = metrics["tvd"][length]
        rows.append(
            [
                escape(length),
                format_number(t["count"], "int")
                + (f" of {format_number(t['subsets_total'], 'int')}, sampled" if t.get("sampled") else ""),
                format_number(t["mean"], "dec"),
                format_number(t["max"], "dec"),
                escape(t.get("worst", "")),
            ]
        )
    out.append(html_table(["L", "column subsets", "mean TVD", "worst TVD", "worst subset"], rows, "sds"))
    out.append("</section>")
    return "".join(out)


def _real_sample_figure(tvd: dict[str, Any], lengths: list[str]) -> list[str]:
    """What the synthetic table is worth in real records (docs/design.md section 5.5): per length, the expected
    mean TVD of a uniform sample of m sensitive records against the compared ones, as m grows, with the
    synthetic table's mean TVD across it; empty for metrics without ``spread``."""
    from spark_dpsynth.evaluation.catalog import describe_real_sample
    from spark_dpsynth.evaluation.tvd import expected_sample_tvd

    shown = [k for k in lengths if tvd[k].get("spread") and tvd[k].get("sensitive_rows")]
    if not shown:
        return []
    found = [tvd[k]["real_sample_records"] for k in shown if tvd[k].get("real_sample_records")]
    rows = max(tvd[k]["sensitive_rows"] for k in shown)
    top = 10.0 ** math.ceil(math.log10(max([rows, *found]) * 10))
    grid = np.logspace(2, math.log10(top), 200)
    fig = Figure(figsize=(6.4, 3.6))
    ax = fig.add_subplot()
    for i, k in enumerate(shown):
        entry = tvd[k]
        color = f"C{i}"
        second = [entry["synthetic_rows"]] if entry.get("synthetic_rows") else None
        curve = [expected_sample_tvd(m, [entry["spread"]], [entry["sensitive_rows"]], second) for m in grid]
        ax.plot(grid, curve, color=color, label=f"{k}-way: a real sample of m records")
        ax.axhline(
            entry["mean"], color=color, linestyle="--", linewidth=1, label=f"{k}-way: the synthetic table"
        )
        if entry.get("real_sample_records"):
            ax.plot([entry["real_sample_records"]], [entry["mean"]], "o", color=color)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("records m of a uniform sample of the sensitive table")
    ax.set_ylabel("mean TVD to the compared rows")
    ax.set_title("What the synthetic table is worth in real records")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return [
        f"<p><b>Worth in real records.</b> {escape(describe_real_sample({'tvd': tvd}) or '')}: a uniform sample of "
        "that many records of the sensitive table is expected to be as far from the compared rows as the "
        "synthetic table is (the normal approximation of the floor above, rough below a few records per "
        "cell).</p>",
        png_image(
            fig, "expected TVD of a real sample against its size, and the synthetic table's TVD", "plot-worth"
        ),
    ]


def _yardstick_html(metrics: dict[str, Any]) -> list[str]:
    """The yardstick, the sampling error of each length, and the out-of-support values (docs/design.md sections
    5.2 and 5.5); empty for metrics written before they existed."""
    out: list[str] = []
    tvd = metrics.get("tvd") or {}
    lengths = [k for k in sorted(tvd, key=int) if isinstance(tvd[k], dict) and "floor" in tvd[k]]
    if lengths:
        cells = "; ".join(
            f"{k}-way mean TVD {tvd[k]['mean']:.4f}, floor {tvd[k]['floor']:.4f}"
            + (
                f" (measured {tvd[k]['floor_measured']:.4f})"
                if tvd[k].get("floor_measured") is not None
                else ""
            )
            for k in lengths
        )
        out.append(
            f"<p><b>Sampling error.</b> {escape(cells)}. The floor is the TVD two uniform samples of these sizes "
            "of one table would show (expected from the sensitive shares; measured on a second, disjoint sample "
            "of the sensitive table when its rows were sampled): a TVD near its floor is as good as the data "
            "can show.</p>"
        )
    worth = _real_sample_figure(tvd, lengths)
    if worth:
        out += worth
    yard = metrics.get("yardstick")
    if yard:
        rules = "; ".join(f"{c}: {r['why']}" for c, r in yard["columns"].items())
        out.append(
            "<p><b>Yardstick.</b> Columns are compared on the input's own values or on bins that do not come "
            f"from the release: {escape(rules)}.</p>"
        )
    unseen = metrics.get("out_of_support")
    if unseen:
        rows = "".join(
            f"<tr><td>{escape(c)}</td><td>{escape(e['what'])}</td><td>{e['count']:,}</td><td>{e['share']:.2%}</td></tr>"
            for c, e in unseen["by_column"].items()
            if e["count"]
        )
        out.append(
            "<h3>Out-of-support values: synthetic values the sensitive column never holds</h3>"
            f"<p>{unseen['count']:,} synthetic cells ({unseen['share']:.2%}) hold a value that never occurs in the "
            "sensitive column (a column compared on its own values) or lies outside its observed [min, max] "
            "(a binned column). Not private.</p>"
            + (
                f"<table><tr><th>column</th><th>what</th><th>count</th><th>share</th></tr>{rows}</table>"
                if rows
                else ""
            )
        )
    return out
