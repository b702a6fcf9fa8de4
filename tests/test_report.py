"""Tests of spark_dpsynth.evaluation.report: content, agreement with the metrics, and the page in headless Chromium.

The Chromium tests need the Debian package ``chromium``. The session fixture installs it with apt-get when it is
missing and the tests run as root (as in CI, see .ci/run); elsewhere they are skipped with the reason.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from spark_dpsynth.errors import InvalidParameterError
from spark_dpsynth.evaluation.metrics import METRICS_FILE, evaluate
from spark_dpsynth.evaluation.report import REPORT_FILE, headline_numbers, render_report, write_report
from spark_dpsynth.release.core import Release

ROOT = Path(__file__).resolve().parent.parent

PLOTS = (
    "plot-preservation-by-length",
    "plot-preservation-by-count",
    "plot-error-vs-count",
    "plot-worth",
    "plot-tvd-heatmap",
    "plot-one-way-worst",
    "plot-tstr",
)
"""The images of a report with a release, the worth in real records, 2-way TVD, 1-way distributions and TSTR."""
NUMERIC_PLOTS = ("plot-numeric-cdf", "plot-numeric-correlation")
"""The images a report adds when the input has numeric columns (Adult as it comes, typed by inference)."""

_CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


# --- fixtures --------------------------------------------------------------------------------------------------


def _frame(spark, n: int, seed: int, label_flip: float):
    """n rows over 4 columns: a noisy rule income = f(edu, job) plus an independent column with empties."""
    rng = np.random.default_rng(seed)
    edu = rng.choice(np.array(["hs", "college", "phd"], dtype=object), size=n, p=[0.5, 0.35, 0.15])
    job = rng.choice(np.array(["a", "b", "c", None], dtype=object), size=n, p=[0.4, 0.3, 0.2, 0.1])
    town = rng.choice(np.array(["x", "y", None], dtype=object), size=n, p=[0.6, 0.3, 0.1])
    high = (edu != "hs") & (job == "a")
    flip = rng.random(n) < label_flip
    income = np.where(high != flip, ">50K", "<=50K").astype(object)
    pdf = pd.DataFrame({"edu": edu, "job": job, "town": town, "income": income})
    return spark.createDataFrame(pdf, schema="edu string, job string, town string, income string").coalesce(1)


@pytest.fixture(scope="module")
def metrics(spark):
    """The metrics of a small evaluation with a release (its true aggregates, lightly changed) and TSTR."""
    from spark_dpsynth.evaluation.metrics import true_aggregates

    sensitive = _frame(spark, 400, seed=1, label_flip=0.05)
    synthetic = _frame(spark, 380, seed=2, label_flip=0.25)
    holdout = _frame(spark, 200, seed=3, label_flip=0.05)
    # Release-sized: the true aggregates of a 400-row, 4-column table.
    aggregates = true_aggregates(sensitive, 3).toPandas()
    aggregates["count"] = aggregates["count"] + (np.arange(len(aggregates)) % 3) - 1
    aggregates = aggregates[aggregates["count"] > 0]
    manifest = {
        "columns": ["edu", "job", "town", "income"],
        "reporting_length": 3,
        "protected_number_of_records": 402,
        "epsilon": 4.0,
        "delta": 1e-6,
        "rho": 0.2409,
        "sigmas": {"1": 5.418, "2": 2.709, "3": 1.806},
        "sensitivities": {"1": 4, "2": 6, "3": 4},
        "noise_std": {"1": 10.8, "2": 6.6, "3": 3.6},
        "thresholds": {"1": 60.5, "2": 9.1, "3": 0.0},
        "test_mode": False,
    }
    release = Release.from_pandas(aggregates.reset_index(drop=True), manifest)
    return evaluate(sensitive, synthetic, release, holdout=holdout, label="income", resolution=10)


@pytest.fixture(scope="session")
def chromium() -> str:
    """The path of a headless-capable Chromium, installed with apt-get when missing and running as root."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None and hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        install = ["apt-get", "install", "-y", "--no-install-recommends", "chromium"]
        done = subprocess.run(install, capture_output=True, env=env, timeout=1200)
        if done.returncode != 0:  # a stale package index: refresh it once
            subprocess.run(["apt-get", "update"], capture_output=True, env=env, timeout=600)
            subprocess.run(install, capture_output=True, env=env, timeout=1200)
        path = shutil.which("chromium")
    if path is None:
        pytest.skip(
            "headless Chromium is not installed and cannot be installed here (needs root and apt-get: "
            "`apt-get install chromium`)"
        )
    return path


def _chromium(binary: str, page: Path, work: Path, *args: str) -> subprocess.CompletedProcess:
    command = [binary, *_CHROMIUM_FLAGS, f"--user-data-dir={work / 'profile'}", *args, page.as_uri()]
    return subprocess.run(command, capture_output=True, text=True, timeout=180)


def _open_in_chromium(binary: str, page: Path, work: Path) -> tuple[str, Path]:
    """(the DOM after the page's load event, a full-page screenshot) of ``page`` in headless Chromium."""
    work.mkdir(parents=True, exist_ok=True)
    dom = _chromium(binary, page, work, "--virtual-time-budget=10000", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    shot = work / "screenshot.png"
    taken = _chromium(binary, page, work, f"--screenshot={shot}", "--window-size=1200,6400")
    assert taken.returncode == 0 and shot.is_file(), taken.stderr[-2000:]
    return dom.stdout, shot


def _check_rendering(dom: str, shot: Path, metrics: dict, plots: tuple[str, ...]) -> None:
    """Every image decoded (naturalWidth > 0), the headline numbers and the banner are in the rendered DOM."""
    check = re.search(r'<p id="image-check" data-all-loaded="(\w+)">([^<]*)</p>', dom)
    assert check is not None, "the page's load script did not run"
    widths = dict(item.split("=") for item in check.group(2).split())
    assert set(widths) == set(plots)
    assert all(int(w) > 100 for w in widths.values()), widths
    assert check.group(1) == "true"
    text = html.unescape(re.sub(r"<[^>]+>", " ", dom))
    assert "NOT PRIVATE." in text and "not differentially private" in text
    for _, label, _, shown in headline_numbers(metrics):
        assert label in text and shown in text, (label, shown)
    # The screenshot is a real rendering: the red banner is near the top-left of a mostly white page.
    from matplotlib.image import imread

    image = imread(str(shot))
    assert image.shape[0] > 2000 and image.shape[1] == 1200
    banner = image[60:160, 60:1100, :3]
    red = (banner[..., 0] > 0.6) & (banner[..., 1] < 0.2) & (banner[..., 2] < 0.3)
    assert red.mean() > 0.5
    assert image[..., :3].std() > 0.05


def _data_values(page: str) -> dict[str, object]:
    """The exact values the report stores in its headline cells, by metrics key."""
    cells = re.findall(r'data-key="([^"]+)" data-value="([^"]*)">([^<]*)<', page)
    return {key: json.loads(html.unescape(value)) for key, value, _ in cells}


# --- content ---------------------------------------------------------------------------------------------------


def test_report_is_self_contained_and_agrees_with_the_metrics(metrics, tmp_path):
    path = Path(write_report(metrics, str(tmp_path / "evaluation")))
    assert path == tmp_path / "evaluation" / REPORT_FILE
    assert sorted(p.name for p in path.parent.iterdir()) == [REPORT_FILE]  # no temporary file left
    page = path.read_text(encoding="utf-8")

    # Images are embedded PNGs; nothing is fetched from elsewhere.
    sources = re.findall(r'<img id="([^"]+)" alt="[^"]*" src="([^"]+)"', page)
    assert [ident for ident, _ in sources] == list(PLOTS)
    for _, src in sources:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert not re.search(r'(src|href)="(https?:)?//', page)

    # The banner, the manifest's privacy parameters, and every headline number with its exact value.
    assert 'id="not-private-banner"' in page and "not differentially private" in page
    privacy = re.search(r'<section id="privacy">.*?</section>', page, re.S).group(0)
    for shown in (">4<", ">1e-06<", ">0.2409<", ">402<", ">5.418<", ">60.5<", ">3<"):
        assert shown in privacy, shown
    headline = headline_numbers(metrics)
    keys = [key for key, _, _, _ in headline]
    for key in (
        "tvd.1.mean",
        "tvd.3.max",
        "k_marginal_score",
        "sds.synthetic.summary.preservation",
        "sds.release.summary.leakage_count",
        "sds.synthetic.summary.mean_proportional_error",
        "tstr.tstr_accuracy",
        "tstr.trtr_f1",
        "blank_cell_share.synthetic",
    ):
        assert key in keys
    assert _data_values(page) == {key: value for key, _, value, _ in headline}
    for _, _, _, shown in headline:
        assert f">{html.escape(shown)}<" in page
    shown = {key: text for key, _, _, text in headline}
    assert shown["k_marginal_score"] == f"{metrics['k_marginal_score']:.1f}"
    assert "nist_k_marginal_score" not in shown  # no PUMA column: not NIST's formula, not NIST's name
    assert shown["tstr.tstr_accuracy"] == f"{100 * metrics['tstr']['tstr_accuracy']:.2f}%"


def test_report_without_release_or_label(spark, tmp_path):
    df = _frame(spark, 50, seed=5, label_flip=0.0)
    m = evaluate(df, df.limit(40), max_marginal_length=2, label="income")  # no holdout: TSTR skipped
    page = render_report(m)
    assert "No release was evaluated." in page and 'id="sds"' not in page
    assert "Skipped: no held-out real table" in page
    assert re.findall(r'<img id="([^"]+)"', page) == ["plot-worth", "plot-tvd-heatmap", "plot-one-way-worst"]
    assert [key for key, _, _, _ in headline_numbers(m)][:3] == [
        "rows.sensitive",
        "rows.synthetic",
        "record_expansion",
    ]


@pytest.mark.parametrize(
    ("value", "match"),
    [([1, 2], "metrics must be a dict"), ({"rows": {}}, r"metrics lacks \['tvd', 'columns'\]")],
)
def test_report_needs_evaluation_metrics(value, match, tmp_path):
    with pytest.raises(InvalidParameterError, match=match):
        render_report(value)
    with pytest.raises(InvalidParameterError, match=match):
        write_report(value, str(tmp_path))


# --- headless Chromium -----------------------------------------------------------------------------------------


def test_report_renders_in_headless_chromium(metrics, chromium, tmp_path):
    page = Path(write_report(metrics, str(tmp_path)))
    dom, shot = _open_in_chromium(chromium, page, tmp_path / "chromium")
    _check_rendering(dom, shot, metrics, PLOTS)


# --- real data -------------------------------------------------------------------------------------------------


def test_adult_epsilon_4_report_agrees_with_metrics_json(adult_quick_start, chromium, tmp_path):
    """The README quick start (`spark-dpsynth pipeline` on the embedded UCI Adult at epsilon 4, test mode, seeded;
    the session's run): report and metrics.json agree, train-on-synthetic / test-on-real runs with `income` on
    Adult's own test split, and the page renders."""
    assert adult_quick_start.status == 0, adult_quick_start.stderr
    out = adult_quick_start.out
    metrics = json.loads((out / "evaluation" / METRICS_FILE).read_text(encoding="utf-8"))
    page_path = out / "evaluation" / REPORT_FILE
    page = page_path.read_text(encoding="utf-8")

    assert metrics["privacy"]["epsilon"] == 4.0 and metrics["privacy"]["test_mode"] is True
    assert metrics["rows"]["sensitive"] == 32561  # the train split only
    stored = _data_values(page)
    assert stored == {key: value for key, _, value, _ in headline_numbers(metrics)}
    for key in ("tvd.3.mean", "k_marginal_score", "sds.synthetic.summary.preservation", "tstr.tstr_f1"):
        assert key in stored

    tstr = metrics["tstr"]
    assert tstr["skipped"] is None and tstr["label"] == "income" and tstr["positive_class"] == ">50K"
    assert tstr["rows"]["real_train"] == 32561 and tstr["rows"]["real_test"] == 16281  # Adult's test split
    assert 0.0 <= tstr["tstr_accuracy"] <= 1.0 and 0.0 <= tstr["tstr_f1"] <= 1.0
    assert tstr["trtr_accuracy"] > tstr["majority_accuracy"] > 0.7  # a real signal on real data
    assert 500.0 < metrics["k_marginal_score"] < 1000.0
    assert metrics["nist_k_marginal_score"] is None  # Adult has no PUMA column

    dom, shot = _open_in_chromium(chromium, page_path, tmp_path / "chromium")
    _check_rendering(dom, shot, metrics, PLOTS + NUMERIC_PLOTS)
