"""Report stage: one self-contained HTML page from the evaluation metrics (NOT private).

``write_report(metrics, directory)`` writes ``directory/report.html`` from the dict :func:`spark_dpsynth.evaluation.metrics.
evaluate` returns (the content of ``metrics.json``): a banner saying the page compares against the sensitive data
and is not private, the privacy parameters of the release (copied from its manifest into ``metrics["privacy"]``),
the headline numbers (:func:`headline_numbers`), the persons of an event release (``metrics["persons"]``:
rows per person, person columns), the columns that released nothing or almost nothing, SDS's
evaluator tables, the numeric columns' distances (KS, Wasserstein-1, overlaid CDFs of the worst columns,
sensitive / synthetic / difference correlation heatmaps; docs/design.md section 5.4), and plots drawn with matplotlib's Agg
renderer (no display, no global pyplot state) and embedded as base64 PNG ``data:`` URIs, so the page has no
external resource and can be mailed or archived as one file.

Every number on the page is formatted from ``metrics`` by this module, so the page and ``metrics.json`` agree by
construction; each headline cell also carries the exact value in ``data-value`` (JSON) and its metrics key in
``data-key``. A small inline script writes, once the page has loaded, the ``naturalWidth`` of every image into
the element ``#image-check`` (a check that every image decoded; used by the headless-browser test).

Privacy: the page shows true counts' statistics, exact distances and values of the sensitive table (the most
frequent values of the worst columns). It is for the data owner, like the sensitive data itself.
"""

from __future__ import annotations

import html
import json
import logging
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from spark_dpsynth.errors import InvalidParameterError
from spark_dpsynth.evaluation.report_html import (
    REAL_COLOR,
    SYNTHETIC_COLOR,
    as_float,
    escape,
    format_number,
    general,
    html_table,
    png_image,
)
from spark_dpsynth.evaluation.report_marginals import sds_section, tvd_section

__all__ = ["write_report", "render_report", "headline_numbers", "REPORT_FILE"]

log = logging.getLogger(__name__)

REPORT_FILE = "report.html"
"""File name :func:`write_report` writes in its directory."""


# ---------------------------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------------------------


def write_report(
    metrics: dict[str, Any],
    directory: str,
    *,
    title: str = "spark_dpsynth evaluation report",
    progress: Callable[[str], None] | None = None,
) -> str:
    """Write ``directory/report.html``, the evaluation report (atomically: a temporary file, then a rename).

    Args:
        metrics: the dict :func:`spark_dpsynth.evaluation.metrics.evaluate` returns (``metrics.json``).
        directory: a local directory on the driver (a ``file:`` prefix is accepted); created if missing.
        title: the page title.
        progress: called with a short message when rendering starts and ends.

    Returns:
        The path of the written file.

    Raises:
        InvalidParameterError: ``metrics`` is not a dict or lacks a key every evaluation has (``rows``,
            ``tvd``, ``columns``).
        OSError: the directory cannot be created or written.

    Privacy:
        None: the report is computed from the non-private metrics (see the module docstring).
    """
    started = time.perf_counter()
    log.info("report: started")
    if progress is not None:
        progress("report...")
    text = render_report(metrics, title=title)
    from spark_dpsynth.data.publish import write_text_atomically

    path = write_text_atomically(directory, REPORT_FILE, text)
    seconds = time.perf_counter() - started
    log.info("report: done in %.2f s", seconds)
    if progress is not None:
        progress(f"report: done in {seconds:.1f} s")
    return path


def render_report(metrics: dict[str, Any], *, title: str = "spark_dpsynth evaluation report") -> str:
    """The report as one HTML string (see the module docstring; :func:`write_report` writes it).

    Raises:
        InvalidParameterError: ``metrics`` is not a dict or lacks ``rows``, ``tvd`` or ``columns``.
    """
    _check_metrics(metrics)
    sections = [
        _banner(metrics),
        _privacy_section(metrics.get("privacy")),
        _headline_section(metrics),
        _persons_section(metrics.get("persons")),
        _empty_columns_section(metrics.get("empty_columns")),
        _identifiers_section(metrics.get("identifier_columns")),
        _constraints_section(metrics.get("constraints")),
        _failed_section(metrics.get("failed_metrics")),
        sds_section(metrics.get("sds")),
        tvd_section(metrics),
        _numeric_section(metrics.get("numeric")),
        _tstr_section(metrics.get("tstr")),
    ]
    body = "\n".join(s for s in sections if s)
    return _PAGE.format(title=html.escape(title), style=_STYLE, body=body, script=_SCRIPT)


def headline_numbers(metrics: dict[str, Any]) -> list[tuple[str, str, Any, str]]:
    """The headline numbers of the report: (metrics key, label, exact value, text shown on the page).

    The key is a dotted path into ``metrics`` (e.g. ``"tvd.2.mean"``, ``"sds.synthetic.summary.preservation"``);
    the value is ``metrics`` at that path; the text is the value as the page prints it. Undefined values
    (``None``) and absent parts (no release: no SDS numbers; no label: no TSTR) are left out.

    Raises:
        InvalidParameterError: ``metrics`` is not a dict or lacks ``rows``, ``tvd`` or ``columns``.
    """
    _check_metrics(metrics)
    rows: list[tuple[str, str, Any, str]] = []

    def add(key: str, label: str, kind: str) -> None:
        value = _lookup(metrics, key)
        if value is not None:
            rows.append((key, label, value, format_number(value, kind)))

    add("rows.sensitive", "sensitive rows", "int")
    add("rows.synthetic", "synthetic rows", "int")
    add("record_expansion", "record expansion (n_syn / n - 1)", "pct")
    add("blank_cell_share.sensitive", "blank-cell share, sensitive", "pct")
    add("blank_cell_share.synthetic", "blank-cell share, synthetic", "pct")
    for length in sorted(metrics["tvd"], key=int):
        t = metrics["tvd"][length]
        over = (
            f" (over {t['count']:,} of {t['subsets_total']:,} subsets, sampled)"
            if isinstance(t, dict) and t.get("sampled")
            else ""
        )
        add(f"tvd.{length}.mean", f"mean {length}-way TVD{over}", "dec")
        add(f"tvd.{length}.max", f"worst {length}-way TVD ({metrics['tvd'][length].get('worst', '')})", "dec")
    three = metrics["tvd"].get("3")
    add(
        "k_marginal_score",
        "3-way k-marginal score (1000 (1 - mean 3-way TVD)"
        + (", sampled subsets)" if isinstance(three, dict) and three.get("sampled") else ")"),
        "score",
    )
    nist = metrics.get("nist_k_marginal")
    if isinstance(nist, dict) and "failed" not in nist:
        groups = "-".join(nist.get("group_columns") or []) or "no group"
        add(
            "nist_k_marginal_score",
            f"NIST k-marginal score (SDNist 2.4's formula, {groups} x 2-way, of 1000)",
            "score",
        )
    if metrics.get("sds"):
        for side in ("release", "synthetic"):
            prefix = f"sds.{side}.summary"
            add(f"{prefix}.preservation", f"{side}: preservation", "pct")
            add(f"{prefix}.suppressed_pct", f"{side}: suppressed combinations", "pct100")
            add(f"{prefix}.fabricated_pct", f"{side}: fabricated combinations", "pct100")
            add(f"{prefix}.mean_absolute_error", f"{side}: mean absolute error (records)", "dec2")
            add(f"{prefix}.mean_proportional_error", f"{side}: mean proportional error", "dec")
            add(f"{prefix}.leakage_count", f"{side}: leakage count (rare combinations present)", "int")
    add("numeric.correlation.max_abs_difference", "numeric columns: largest correlation difference", "dec")
    add(
        "numeric.correlation.frobenius_norm",
        "numeric columns: Frobenius norm of the correlation difference",
        "dec",
    )
    tstr = metrics.get("tstr")
    if tstr and not tstr.get("skipped") and not tstr.get("failed"):
        add("tstr.tstr_accuracy", f"TSTR accuracy ({tstr['label']})", "pct")
        add("tstr.trtr_accuracy", f"TRTR accuracy ({tstr['label']})", "pct")
        add("tstr.tstr_f1", f"TSTR F1 of {tstr['positive_class']}", "dec")
        add("tstr.trtr_f1", f"TRTR F1 of {tstr['positive_class']}", "dec")
        add("tstr.majority_accuracy", "majority-class accuracy (baseline)", "pct")
    return rows


# ---------------------------------------------------------------------------------------------------------------
# Formatting
# ---------------------------------------------------------------------------------------------------------------


def _check_metrics(metrics: Any) -> None:
    if not isinstance(metrics, dict):
        raise InvalidParameterError(f"metrics must be a dict, got {type(metrics).__name__}")
    missing = [k for k in ("rows", "tvd", "columns") if k not in metrics]
    if missing:
        raise InvalidParameterError(f"metrics lacks {missing}; pass the dict evaluate() returns")


def _lookup(metrics: dict[str, Any], key: str) -> Any:
    value: Any = metrics
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


# ---------------------------------------------------------------------------------------------------------------
# Sections
# ---------------------------------------------------------------------------------------------------------------


def _banner(metrics: dict[str, Any]) -> str:
    test_mode = (metrics.get("privacy") or {}).get("test_mode")
    extra = (
        "<p><strong>The release was made in TEST MODE (seeded noise): it is not private either.</strong></p>"
        if test_mode
        else ""
    )
    return (
        '<div class="banner" id="not-private-banner"><strong>NOT PRIVATE.</strong> This report compares the '
        "synthetic data and the DP release with the <strong>sensitive data</strong>. Its numbers, tables and "
        "plots are computed from the sensitive data without noise: it is <strong>not differentially private"
        "</strong>. Keep it with the sensitive data; share the release and the synthetic data, not this page."
        f"{extra}</div>"
    )


def _privacy_section(privacy: dict[str, Any] | None) -> str:
    if not privacy:
        return '<section id="privacy"><h2>Privacy parameters</h2><p>No release was evaluated.</p></section>'

    def num(value: Any, digits: int = 4) -> str:
        if value is None:
            return "n/a"
        if isinstance(value, float):
            return f"{value:.{digits}g}"
        return escape(value)

    summary = [
        ("epsilon", num(privacy.get("epsilon"))),
        ("delta", num(privacy.get("delta"))),
        ("rho (zCDP)", num(privacy.get("rho"))),
        ("protected number of records", num(privacy.get("protected_number_of_records"))),
        ("reporting length R", num(privacy.get("reporting_length"))),
        ("accounting", num(privacy.get("accounting"))),
        ("accuracy mode", num(privacy.get("accuracy_mode"))),
        ("fabrication mode", num(privacy.get("fabrication_mode"))),
        ("noise sampler", num(privacy.get("noise_sampler"))),
    ]
    per_k = []
    lengths = sorted(
        {
            k
            for key in ("sigmas", "sensitivities", "noise_std", "thresholds")
            for k in (privacy.get(key) or {})
        },
        key=int,
    )
    for k in lengths:
        per_k.append(
            [
                escape(k),
                num((privacy.get("sigmas") or {}).get(k)),
                num((privacy.get("sensitivities") or {}).get(k)),
                num((privacy.get("noise_std") or {}).get(k)),
                num((privacy.get("thresholds") or {}).get(k)),
            ]
        )
    out = ['<section id="privacy"><h2>Privacy parameters (from the release manifest)</h2>']
    out.append(html_table(["parameter", "value"], [[escape(a), b] for a, b in summary], "params"))
    if per_k:
        out.append(
            html_table(
                [
                    "k",
                    "sigma_k",
                    "Delta_k (sensitivity)",
                    "noise std sigma_k sqrt(Delta_k)",
                    "threshold rho_k",
                ],
                per_k,
                "params",
            )
        )
    out.append("</section>")
    return "".join(out)


def _headline_section(metrics: dict[str, Any]) -> str:
    rows = []
    for key, label, value, text in headline_numbers(metrics):
        exact = escape(json.dumps(value))
        rows.append(
            f'<tr><td>{escape(label)}</td><td class="num" data-key="{escape(key)}" data-value="{exact}">{escape(text)}</td></tr>'
        )
    return (
        '<section id="headline"><h2>Headline numbers</h2>'
        '<table class="headline"><thead><tr><th>metric</th><th>value</th></tr></thead><tbody>'
        + "".join(rows)
        + "</tbody></table></section>"
    )


def _persons_section(persons: dict[str, Any] | None) -> str:
    """Persons of an event release (:func:`spark_dpsynth.evaluation.persons.person_metrics`): the headline
    figures and the rows per person, real vs synthetic."""
    if not persons:
        return ""
    cap, counts, shares = persons["cap"], persons["persons"], persons["rows_per_person"]
    means = " / ".join(
        format_number(persons["mean_rows_per_person"][k], "dec2") for k in ("sensitive", "synthetic")
    )
    rows = [
        (
            "persons, sensitive / synthetic",
            " / ".join(format_number(counts[k], "int") for k in ("sensitive", "synthetic")),
        ),
        ("L, the most rows of one person the event measurements read", format_number(cap, "int")),
        (
            "sensitive persons with more than L rows (NOT private)",
            format_number(persons["share_above_cap"], "pct"),
        ),
        ("mean rows per person: sensitive / synthetic", means),
        ("TVD of rows per person (public bins)", format_number(persons["rows_per_person_tvd"], "dec")),
    ]
    rows += [
        (f"TVD of person column {c}", format_number(v, "dec"))
        for c, v in persons["person_columns_tvd"].items()
    ]
    rows += [
        (f"TVD of the mean rows per person by value of {c}", format_number(e["tvd_of_means"], "dec"))
        for c, e in persons["events_by_category"].items()
    ]
    labels = [str(lo) if hi == lo else f"{lo}+" if hi is None else f"{lo}-{hi}" for lo, hi in shares["bins"]]
    # the bins past the last one either table fills are left off the plot
    filled = [
        i for i, pair in enumerate(zip(shares["sensitive"], shares["synthetic"], strict=True)) if any(pair)
    ]
    shown = (filled[-1] + 1) if filled else len(labels)
    labels = labels[:shown]
    shares = {k: shares[k][:shown] for k in ("sensitive", "synthetic")}
    x = np.arange(len(labels))
    fig = Figure(figsize=(min(max(6.4, 0.3 * len(labels) + 2.0), 12.0), 3.2))
    ax = fig.add_subplot()
    ax.bar(
        x - 0.2, [as_float(v) for v in shares["sensitive"]], width=0.4, color=REAL_COLOR, label="sensitive"
    )
    ax.bar(
        x + 0.2,
        [as_float(v) for v in shares["synthetic"]],
        width=0.4,
        color=SYNTHETIC_COLOR,
        label="synthetic",
    )
    step = max(1, math.ceil(len(labels) / 30))
    ax.set_xticks(x[::step], labels[::step], rotation=45 if len(labels) > 12 else 0)
    ax.set_xlabel("rows per person (public bins)")
    ax.set_ylabel("share of persons")
    ax.set_title(f"Rows per person (TVD {format_number(persons['rows_per_person_tvd'], 'dec')})")
    ax.legend()
    fig.tight_layout()
    return (
        '<section id="persons"><h2>Persons</h2><p>An event table: many rows per person. The event measurements '
        "read at most L rows of each person (person-level DP); the synthetic persons' numbers of rows come from a "
        "noisy histogram of the persons' numbers of rows, and their rows from the event model. TVD: half the L1 "
        "distance of two distributions. Computed from the sensitive persons without noise: NOT private.</p>"
        + html_table(["metric", "value"], [[escape(a), escape(b)] for a, b in rows], "headline")
        + png_image(fig, "rows per person, sensitive vs synthetic", "plot-persons-rows")
        + "</section>"
    )


def _empty_columns_section(entries: list[dict[str, Any]] | None) -> str:
    if not entries:
        return ""
    from spark_dpsynth.evaluation.coverage import describe

    items = "".join(f"<li>{escape(describe(e))}</li>" for e in entries)
    return (
        '<section id="empty-columns"><h2>Columns that released nothing or almost nothing</h2>'
        "<p>Released values and their share of the protected number of records come from the release (public); "
        "the empty shares compare the synthetic cells with the sensitive ones (not private).</p>"
        f"<ul>{items}</ul></section>"
    )


def _identifiers_section(names: list[str] | None) -> str:
    if not names:
        return ""
    return (
        '<section id="identifiers"><h2>Identifier columns</h2>'
        f"<p>Left out of the measurement by configuration ([data] identifiers): {escape(', '.join(names))}. The "
        "synthetic table holds fresh surrogate keys there (docs/design.md section 2.8); they are not compared and "
        "not counted as empty.</p></section>"
    )


def _constraints_section(rules: list[dict[str, Any]] | None) -> str:
    """The declared rules (the release manifest's ``constraints``) and each one's violations in the synthetic
    table (docs/design.md section 4.8, "Conditions and declared rules")."""
    if not rules:
        return ""
    rows = "".join(
        f"<tr><td><code>{escape(r['rule'])}</code></td><td>{int(r['violations']):,}</td></tr>" for r in rules
    )
    return (
        '<section id="constraints"><h2>Declared rules</h2>'
        "<p>Rules every synthetic row should satisfy (public, declared with the release), and the rows of the "
        "synthetic table that do not.</p>"
        f"<table><tr><th>rule</th><th>violations</th></tr>{rows}</table></section>"
    )


def _failed_section(failed: dict[str, str] | None) -> str:
    if not failed:
        return ""
    items = "".join(f"<li>{escape(name)}: {escape(reason)}</li>" for name, reason in failed.items())
    return (
        '<section id="failed"><h2>Metrics that failed</h2>'
        "<p>These metrics could not be computed; the others are shown (docs/design.md section 5.6).</p>"
        f"<ul>{items}</ul></section>"
    )


def _numeric_section(numeric: dict[str, Any] | None) -> str:
    if not numeric or numeric.get("failed"):
        return ""
    by_column = numeric["by_column"]
    out = ['<section id="numeric"><h2>Numeric columns: distributions and correlations</h2>']
    out.append(
        "<p>Per numeric column (dates in days, timestamps in seconds since 1970-01-01), the Kolmogorov-Smirnov "
        "distance sup |F - G| and the Wasserstein-1 distance, the integral of |F - G| dx (in the column's unit), "
        "between the sensitive (F) and synthetic (G) distributions of its numbers, computed on Spark from "
        f"quantiles at {numeric['grid_size'] + 1} probabilities (percentile_approx, accuracy "
        f"{numeric['accuracy']:,}): the KS distance is within {numeric['ks_error_bound']:.4f} of the exact one, "
        "the Wasserstein distance within the bound shown. Castable share: the share of non-empty values that "
        "are numbers (bin labels are not).</p>"
    )
    rows = []
    for column, e in by_column.items():
        rows.append(
            [
                escape(column),
                format_number(e["ks"], "dec"),
                general(e["wasserstein"]) + ("" if e["wasserstein_error_bound"] is None else
                                       f" &plusmn; {general(e['wasserstein_error_bound'])}"),
                format_number(e["wasserstein_normalized"], "dec"),
                general(e["sensitive"]["mean"]) + " / " + general(e["synthetic"]["mean"]),
                format_number(e["sensitive"]["castable_share"], "pct") + " / "
                + format_number(e["synthetic"]["castable_share"], "pct"),
                escape(e["skipped"] or ""),
            ]
        )  # fmt: skip
    out.append(
        html_table(
            [
                "column",
                "KS",
                "Wasserstein-1",
                "W1 / sensitive std",
                "mean: sensitive / synthetic",
                "castable share: sensitive / synthetic",
                "skipped",
            ],
            rows,
            "sds",
        )
    )
    worst = numeric.get("worst") or []
    if worst:
        probs = numeric["cdf_probabilities"]
        fig = Figure(figsize=(9.6, 2.8 * math.ceil(len(worst) / 2)))
        axes = fig.subplots(math.ceil(len(worst) / 2), 2, squeeze=False).ravel()
        for ax, column in zip(axes, worst, strict=False):
            e = by_column[column]
            ax.step(e["cdf"]["sensitive"], probs, where="post", color=REAL_COLOR, label="sensitive")
            ax.step(e["cdf"]["synthetic"], probs, where="post", color=SYNTHETIC_COLOR, label="synthetic")
            ax.set_ylim(0, 1.02)
            ax.set_ylabel("CDF")
            ax.set_xlabel(column if e["kind"] == "number" else f"{column} ({e['scale']})", fontsize=7)
            ax.set_title(f"{column} (KS {e['ks']:.3f}, W1 {general(e['wasserstein'])})", fontsize=9)
            ax.legend(fontsize=7)
        for ax in axes[len(worst) :]:
            ax.set_visible(False)
        fig.suptitle("Sensitive vs synthetic CDFs of the numeric columns with the largest KS distance")
        fig.tight_layout()
        out.append(png_image(fig, "CDFs of the worst numeric columns", "plot-numeric-cdf"))
    corr = numeric.get("correlation")
    if corr:
        names = corr["columns"]
        d = len(names)
        size = max(3.2, 0.4 * d + 1.6)
        fig = Figure(figsize=(3 * size + 1.5, size))
        axes = fig.subplots(1, 3)
        panels = (("sensitive", "RdBu_r", 1.0), ("synthetic", "RdBu_r", 1.0), ("difference", "PuOr_r", None))
        for ax, (key, cmap, limit) in zip(axes, panels, strict=True):
            grid = np.array([[as_float(x) for x in row] for row in corr[key]])
            bound = limit or max(float(np.nanmax(np.abs(grid))) if np.isfinite(grid).any() else 0.0, 1e-9)
            image = ax.imshow(grid, cmap=cmap, vmin=-bound, vmax=bound)
            ax.set_xticks(range(d), names, rotation=90, fontsize=7)
            ax.set_yticks(range(d), names, fontsize=7)
            if d <= 12:
                for i in range(d):
                    for j in range(d):
                        if not math.isnan(grid[i, j]):
                            ax.text(j, i, f"{grid[i, j]:.2f}", ha="center", va="center", fontsize=6)
            ax.set_title({"difference": "synthetic - sensitive"}.get(key, key), fontsize=9)
            fig.colorbar(image, ax=ax, shrink=0.7)
        fig.suptitle("Pearson correlations of the numeric columns")
        out.append(png_image(fig, "correlation heatmaps", "plot-numeric-correlation"))
        out.append(
            "<p>Correlation difference over the column pairs: mean |difference| "
            f"{format_number(corr['mean_abs_difference'], 'dec')}, largest {format_number(corr['max_abs_difference'], 'dec')}"
            f" ({escape(' / '.join(corr['max_pair'] or []))}), Frobenius norm {format_number(corr['frobenius_norm'], 'dec')}."
            "</p>"
        )
    out.append("</section>")
    return "".join(out)


def _tstr_section(tstr: dict[str, Any] | None) -> str:
    if not tstr or tstr.get("failed"):
        return ""
    head = f'<section id="tstr"><h2>Train on synthetic, test on real: {escape(tstr["label"])}</h2>'
    if tstr.get("skipped"):
        return head + f"<p>Skipped: {escape(tstr['skipped'])}</p></section>"
    fig = Figure(figsize=(6.4, 3.2))
    ax = fig.add_subplot()
    groups = ["accuracy", f"F1 ({tstr['positive_class']})"]
    bars = [
        ("train on real", [tstr["trtr_accuracy"], tstr["trtr_f1"]], REAL_COLOR),
        ("train on synthetic", [tstr["tstr_accuracy"], tstr["tstr_f1"]], SYNTHETIC_COLOR),
    ]
    x = np.arange(len(groups))
    for i, (name, values, color) in enumerate(bars):
        values = [as_float(v) for v in values]
        ax.bar(x + (i - 0.5) * 0.38, values, width=0.38, label=name, color=color)
        for xi, v in zip(x, values, strict=True):
            if not math.isnan(v):
                ax.text(xi + (i - 0.5) * 0.38, v + 0.01, f"{v:.3f}", ha="center", fontsize=8)
    ax.axhline(tstr["majority_accuracy"], color="grey", linestyle="--", label="majority-class accuracy")
    ax.set_xticks(x, groups)
    ax.set_ylim(0, 1.1)
    ax.set_title("Tested on the held-out real data")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3, frameon=False)
    rows = tstr.get("rows", {})
    note = (
        f"<p>{escape(tstr.get('model', ''))}. Rows: synthetic {format_number(rows.get('synthetic'), 'int')}, real "
        f"training {format_number(rows.get('real_train'), 'int')}, held-out real {format_number(rows.get('real_test'), 'int')}"
        f" (each at most {format_number(tstr.get('max_rows'), 'int')}). F1 is that of the positive class "
        f"{escape(tstr['positive_class'])} (the least frequent label of the real training data).</p>"
    )
    return head + png_image(fig, "train-on-synthetic vs train-on-real", "plot-tstr") + note + "</section>"


_STYLE = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 1.5em auto; max-width: 1100px;
       color: #222; padding: 0 1em; }
.banner { background: #b00020; color: #fff; padding: 0.8em 1.1em; border-radius: 4px; font-size: 1.05em; }
.banner p { margin: 0.4em 0 0 0; }
h1 { margin-bottom: 0.3em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: 0.2em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: left; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
table.headline td:first-child { min-width: 24em; }
img { display: block; max-width: 100%; margin: 0.8em 0; }
#image-check { color: #888; font-size: 0.75em; }
"""

_SCRIPT = """
window.addEventListener("load", function () {
  var images = Array.prototype.slice.call(document.images);
  var out = document.getElementById("image-check");
  out.textContent = images.map(function (img) { return img.id + "=" + img.naturalWidth; }).join(" ");
  out.setAttribute("data-all-loaded", String(images.every(function (img) {
    return img.complete && img.naturalWidth > 0;
  })));
});
"""

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>{style}</style>
</head>
<body>
<h1>{title}</h1>
{body}
<p id="image-check" data-all-loaded="unknown"></p>
<script>{script}</script>
</body>
</html>
"""
