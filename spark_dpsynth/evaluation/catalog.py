"""The evaluation's table of metrics: each metric a named entry, as the registry holds the methods.

An entry (:class:`MetricSpec`) names a metric, the keys of the metrics dict it writes (``outputs``, in the order
``metrics.json`` lists them), when it applies and what those keys hold when it does not, and the function that
computes them from :class:`MetricInputs` (the compared tables and their counted cells, made once by
``evaluate``, :func:`spark_dpsynth.evaluation.metrics.evaluate`, which then writes the entries of :data:`METRICS`
in order).

A metric that may fail on its own (the numeric distances, TSTR, NIST's score) runs under :func:`guarded`: it
becomes ``{"failed": reason}`` and an entry of ``failed_metrics``, and the others are kept (docs/design.md section
5.6). The keys and their meaning are those of ``evaluate``'s docstring (docs/design.md section 5).

Privacy: none of these figures is private (see :mod:`spark_dpsynth.evaluation.metrics`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame

from spark_dpsynth.evaluation._common import failure_reason, timed_stage
from spark_dpsynth.evaluation.cells import CellCounts, SubsetPlan
from spark_dpsynth.evaluation.coverage import merge_coverage, release_coverage, synthetic_coverage
from spark_dpsynth.evaluation.nist import nist_k_marginal
from spark_dpsynth.evaluation.numeric import COLUMNS_PER_PASS, numeric_metrics
from spark_dpsynth.evaluation.sampling import RowSampling, subset_sampling_entry
from spark_dpsynth.evaluation.sds_evaluator import bucket_bins, sds_side
from spark_dpsynth.evaluation.tstr import tstr_metrics
from spark_dpsynth.evaluation.tvd import one_way_worst, tvd_metrics
from spark_dpsynth.evaluation.yardstick import CATEGORICAL_MAX_VALUES, QUANTILE_BINS, Yardstick

if TYPE_CHECKING:
    from spark_dpsynth.release.core import Release

__all__ = [
    "METRICS",
    "METRICS_VERSION",
    "PRIVACY_KEYS",
    "MetricInputs",
    "MetricSpec",
    "describe_out_of_support",
    "describe_real_sample",
    "guarded",
    "out_of_support",
]

METRICS_VERSION = 1
"""Version of the layout of the dict :func:`evaluate` returns; bumped when a key changes meaning or goes away."""


PRIVACY_KEYS = (
    "epsilon",
    "delta",
    "rho",
    "reporting_length",
    "sigmas",
    "noise_std",
    "sensitivities",
    "thresholds",
    "protected_number_of_records",
    "accounting",
    "accuracy_mode",
    "fabrication_mode",
    "noise_sampler",
    "test_mode",
)
"""The release manifest's entries :func:`evaluate` copies into ``privacy`` (all public, DP)."""


@dataclass
class MetricInputs:
    """What every metric reads: the compared tables, their counted cells and the options of
    :func:`evaluate` (validated there). Table sizes are rows; shares are in [0, 1]."""

    columns: tuple[str, ...]
    """The attribute columns, in order (d of them)."""
    tvd_length: int
    """min(``max_marginal_length``, d), the longest subsets in ``tvd``."""
    resolution: int
    """SDS's reporting resolution r, >= 1."""
    plan: SubsetPlan
    """The column subsets compared (:class:`~spark_dpsynth.evaluation.cells.SubsetPlan`)."""
    sampling: RowSampling
    """The row sampling of the two tables (:class:`~spark_dpsynth.evaluation.sampling.RowSampling`)."""
    compared: dict[str, int]
    """``{"sensitive": rows, "synthetic": rows}``: the rows compared (the samples' when sampled), each >= 1."""
    counts: CellCounts
    """The cell pass: ``per_subset`` (subset id -> its sums) and ``top_values``."""
    sds_counts: CellCounts
    """The cells SDS's evaluator reads (``counts`` itself when one pass served both)."""
    yard: Yardstick
    """How each column is compared (docs/design.md section 5.2)."""
    typed_source: bool
    """The yardstick's source is the typed tables (the input's own values), not the tables as given."""
    release: Release | None
    """The release, or None."""
    release_for_sds: Release | None
    """The release when SDS's evaluator runs (None when rows were sampled)."""
    reporting_length: int
    """R of ``release_for_sds`` (0 without it)."""
    sensitive: DataFrame
    """The prepared sensitive table."""
    synthetic: DataFrame
    """The prepared synthetic table."""
    typed_sensitive: DataFrame
    """The sensitive table with its own types, at the compared rows' rate."""
    typed_synthetic: DataFrame
    """The synthetic table as written, at the compared rows' rate."""
    source_sensitive: DataFrame
    """The yardstick's sensitive source (NIST's score reads it)."""
    source_synthetic: DataFrame
    """The yardstick's synthetic source."""
    numeric_kinds: Mapping[str, str]
    """The numeric columns compared and their kinds (empty: no ``numeric``)."""
    holdout: DataFrame | None
    """The held-out real table of TSTR, or None."""
    label: str | None
    """TSTR's label column, or None (no ``tstr``)."""
    label_values: Mapping[str, str] | None
    """The label's spellings mapped to one (checked)."""
    tstr_max_rows: int
    """The most rows of each table TSTR reads, >= 1."""
    seed: int
    """The seed of TSTR's row hash and classifiers."""
    nist_groups: tuple[str, ...] | None
    """NIST's group columns, or None (no NIST score)."""
    log: logging.Logger
    """The evaluation's logger: stages are logged on it."""
    progress: Callable[[str], None] | None = None
    """Called with a short message when a stage starts and ends."""
    failed: dict[str, str] = field(default_factory=dict)
    """Metric name -> the reason it failed (``failed_metrics``), filled by :func:`guarded`."""


@dataclass(frozen=True)
class MetricSpec:
    """One entry of :data:`METRICS`."""

    name: str
    """The metric's name (its ``failed_metrics`` key when it fails)."""
    summary: str
    """What it measures, in one line."""
    section: str
    """The docs/design.md section that defines it."""
    outputs: tuple[str, ...]
    """The keys of the metrics dict it writes, in order."""
    compute: Callable[[MetricInputs], dict[str, Any]]
    """``outputs`` -> their values, computed from the inputs."""
    applies: Callable[[MetricInputs], bool] = lambda inputs: True
    """Whether it applies (e.g. ``sds`` only with a release); when not, :meth:`absent_values`."""
    absent: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    """The value of an output when the metric does not apply (None unless listed)."""

    def absent_values(self) -> dict[str, Any]:
        """``outputs`` -> their values when the metric does not apply (a fresh copy of mutable ones)."""
        return {key: _fresh(self.absent.get(key)) for key in self.outputs}


def _fresh(value: Any) -> Any:
    return list(value) if isinstance(value, list | tuple) else value


def guarded(inputs: MetricInputs, name: str, compute: Callable[[], Any]) -> Any:
    """``compute()``, or, when it raises an Exception, ``{"failed": reason}`` with the reason also recorded in
    ``inputs.failed[name]`` (:func:`~spark_dpsynth.evaluation._common.failure_reason`: no data value;
    docs/design.md section 5.6). Interrupts (BaseException) go through."""
    try:
        return compute()
    except Exception as err:  # noqa: BLE001 - reported in the metrics, the other metrics are kept
        reason = failure_reason(err)
        inputs.log.warning("the %s metrics failed: %s", name, reason)
        inputs.failed[name] = reason
        return {"failed": reason}


# ------------------------------------------------------------------------------------------------- the metrics


def _shape(inputs: MetricInputs) -> dict[str, Any]:
    """What was compared: the columns, the lengths, the rows, the blank cells and the sampling."""
    per_subset, compared, sampling = inputs.counts.per_subset, inputs.compared, inputs.sampling
    d = len(inputs.columns)
    n, n_syn = (
        sampling.total("sensitive", compared["sensitive"]),
        sampling.total("synthetic", compared["synthetic"]),
    )
    blank_s = sum(row.get("blank_s", 0) for row in per_subset.values())
    blank_y = sum(row.get("blank_y", 0) for row in per_subset.values())
    return {
        "metrics_version": METRICS_VERSION,
        "differentially_private": False,
        "columns": list(inputs.columns),
        "max_marginal_length": inputs.tvd_length,
        "subset_sampling": subset_sampling_entry(inputs.plan),
        "resolution": inputs.resolution,
        "rows": {"sensitive": n, "synthetic": n_syn},
        "record_expansion": (n_syn - n) / n,
        "blank_cell_share": {
            "sensitive": blank_s / (compared["sensitive"] * d),
            "synthetic": blank_y / (compared["synthetic"] * d),
        },
        "row_sampling": sampling.entry(compared),
    }


def _yardstick(inputs: MetricInputs) -> dict[str, Any]:
    return {
        "yardstick": {
            "source": "input" if inputs.typed_source else "given",
            "categorical_max_values": CATEGORICAL_MAX_VALUES,
            "quantile_bins": QUANTILE_BINS,
            "columns": inputs.yard.rules,
        }
    }


def _coverage(inputs: MetricInputs) -> dict[str, Any]:
    per_subset, plan, compared, release = (
        inputs.counts.per_subset,
        inputs.plan,
        inputs.compared,
        inputs.release,
    )
    empty_shares = {
        c: {
            "sensitive": per_subset[plan.ids[(i,)]]["blank_s"] / compared["sensitive"],
            "synthetic": per_subset[plan.ids[(i,)]]["blank_y"] / compared["synthetic"],
        }
        for i, c in enumerate(inputs.columns)
    }
    binned = set(((release.manifest.get("data") or {}).get("bins") or {}) if release is not None else ())
    return {
        "empty_share_by_column": empty_shares,
        "out_of_support": out_of_support(inputs.yard, per_subset, plan, compared["synthetic"]),
        "empty_columns": merge_coverage(
            release_coverage(release) if release is not None else [],
            synthetic_coverage(empty_shares, binned=binned),
            inputs.columns,
        ),
    }


def _tvd(inputs: MetricInputs) -> dict[str, Any]:
    per_subset, plan = inputs.counts.per_subset, inputs.plan
    synthetic_sampled = inputs.sampling.rates.get("synthetic", 1.0) < 1.0
    out = tvd_metrics(per_subset, plan, inputs.columns, synthetic_sampled=synthetic_sampled)
    three_way = out["tvd"].get("3")
    out["k_marginal_score"] = 1000.0 * (1.0 - three_way["mean"]) if three_way else None
    out["one_way_worst"] = one_way_worst(
        inputs.counts.top_values, per_subset, plan, out["tvd_by_subset"]["1"]
    )
    return out


def _sds(inputs: MetricInputs) -> dict[str, Any]:
    sds_counts, r = inputs.sds_counts, inputs.reporting_length
    bins_sds = bucket_bins(sds_counts.per_bucket)
    return {
        "sds": {
            "reporting_length": r,
            **{
                side_name: sds_side(sds_counts.per_subset, sds_counts.per_bucket, bins_sds, r, side)
                for side_name, side in (("release", "r"), ("synthetic", "y"))
            },
        }
    }


def _numeric(inputs: MetricInputs) -> dict[str, Any]:
    d_num = len(inputs.numeric_kinds)
    passes = 1
    if d_num > COLUMNS_PER_PASS:
        passes = -(-d_num // COLUMNS_PER_PASS) + 1
    stage = (
        f"numeric metrics of {d_num} column(s) ({passes} pass{'es' if passes > 1 else ''} over the tables)"
    )

    def numeric() -> dict[str, Any] | None:
        with timed_stage(inputs.log, stage, inputs.progress):
            return numeric_metrics(
                inputs.typed_sensitive, inputs.typed_synthetic, tuple(inputs.numeric_kinds)
            )

    return {"numeric": guarded(inputs, "numeric", numeric)}


def _tstr(inputs: MetricInputs) -> dict[str, Any]:
    def tstr() -> dict[str, Any]:
        return tstr_metrics(
            inputs.synthetic,
            inputs.sensitive,
            inputs.holdout,
            inputs.label,
            inputs.label_values,
            inputs.tstr_max_rows,
            inputs.seed,
            inputs.progress,
        )

    return {"tstr": guarded(inputs, "tstr", tstr)}


def _nist(inputs: MetricInputs) -> dict[str, Any]:
    groups = inputs.nist_groups
    assert groups is not None
    # NIST's own formula, on the input's own values (the yardstick's source) with SDNist's bins
    stage = f"NIST's k-marginal score (SDNist's formula, groups {list(groups)})"

    def nist() -> dict[str, Any] | None:
        with timed_stage(inputs.log, stage, inputs.progress):
            return nist_k_marginal(inputs.source_sensitive, inputs.source_synthetic, groups)

    result = guarded(inputs, "nist_k_marginal", nist)
    score = None
    if result is not None and "failed" not in result:
        score = result.pop("score")
    return {"nist_k_marginal_score": score, "nist_k_marginal": result}


def _failed(inputs: MetricInputs) -> dict[str, Any]:
    return {"failed_metrics": inputs.failed}


def _release(inputs: MetricInputs) -> dict[str, Any]:
    manifest = inputs.release.manifest if inputs.release is not None else {}
    return {
        "privacy": {key: manifest.get(key) for key in PRIVACY_KEYS},
        # left out of every measurement by configuration: not compared, not counted as empty (design 2.8)
        "identifier_columns": list(manifest.get("identifier_columns") or {}),
    }


METRICS: tuple[MetricSpec, ...] = (
    MetricSpec(
        "shape",
        "the columns, lengths, rows, blank cells and sampling compared",
        "5.5",
        (
            "metrics_version",
            "differentially_private",
            "columns",
            "max_marginal_length",
            "subset_sampling",
            "resolution",
            "rows",
            "record_expansion",
            "blank_cell_share",
            "row_sampling",
        ),
        _shape,
    ),
    MetricSpec("yardstick", "how each column is compared (values, bins)", "5.2", ("yardstick",), _yardstick),
    MetricSpec(
        "coverage",
        "empty cells per column, synthetic values out of support, columns that released nothing",
        "5.4",
        ("empty_share_by_column", "out_of_support", "empty_columns"),
        _coverage,
    ),
    MetricSpec(
        "tvd",
        "total variation distance of the 1..L-way marginals, the k-marginal score, the worst 1-way columns",
        "5.2",
        ("tvd", "tvd_by_subset", "k_marginal_score", "one_way_worst"),
        _tvd,
    ),
    MetricSpec(
        "sds",
        "SDS's evaluator of the release and of the synthetic table against the true k-tuples",
        "5.1",
        ("sds",),
        _sds,
        applies=lambda inputs: inputs.release_for_sds is not None,
    ),
    MetricSpec(
        "numeric",
        "Kolmogorov-Smirnov and Wasserstein-1 distances and correlations of the numeric columns",
        "5.4",
        ("numeric",),
        _numeric,
        applies=lambda inputs: bool(inputs.numeric_kinds),
    ),
    MetricSpec(
        "tstr",
        "train on synthetic, test on real, against train on real",
        "5.3",
        ("tstr",),
        _tstr,
        applies=lambda inputs: inputs.label is not None,
    ),
    MetricSpec(
        "nist_k_marginal",
        "NIST's k-marginal score by SDNist's own formula",
        "5.2",
        ("nist_k_marginal_score", "nist_k_marginal"),
        _nist,
        applies=lambda inputs: inputs.nist_groups is not None,
    ),
    MetricSpec("failed_metrics", "the metrics that failed, and why", "5.6", ("failed_metrics",), _failed),
    MetricSpec(
        "privacy",
        "the release's public privacy parameters and its identifier columns",
        "5",
        ("privacy", "identifier_columns"),
        _release,
        applies=lambda inputs: inputs.release is not None,
        absent=MappingProxyType({"identifier_columns": []}),
    ),
)
"""The metrics :func:`evaluate` computes, in the order of its dict's keys."""


def out_of_support(
    yard: Yardstick, per_subset: dict[int, dict[str, Any]], plan: SubsetPlan, rows_y: int
) -> dict[str, Any]:
    """``out_of_support`` of :func:`evaluate`: per column, the synthetic values the sensitive column cannot hold
    (docs/design.md section 5.2), and the total over the table's cells."""
    outside = yard.out_of_range()
    by_column: dict[str, Any] = {}
    for i, c in enumerate(yard.columns):
        rule = yard.rules[c]["rule"]
        text = bool(yard.rules[c].get("text"))
        row = per_subset[plan.ids[(i,)]]
        count = int(outside.get(c, 0)) if rule == "bins" else int(row.get("unseen_y", 0))
        if text:
            # numbers written as text: its numbers outside the range, its text values never in the column
            count += int(row.get("unseen_y", 0))
        non_empty = rows_y - int(row.get("blank_y", 0))
        by_column[c] = {
            "rule": rule,
            "what": "a number outside the sensitive [min, max], or a text the sensitive column never holds"
            if text
            else "outside the sensitive [min, max] or not a number"
            if rule == "bins"
            else "never in the sensitive column",
            "count": count,
            "share": count / rows_y,
            "share_of_non_empty": count / non_empty if non_empty else None,
        }
    total = sum(entry["count"] for entry in by_column.values())
    worst = sorted((c for c in by_column if by_column[c]["count"]), key=lambda c: -by_column[c]["count"])
    return {
        "count": total,
        "share": total / (rows_y * len(yard.columns)),
        "columns": worst,
        "by_column": by_column,
    }


def describe_out_of_support(metrics: dict[str, Any]) -> list[str]:
    """The summary's lines on ``out_of_support``: the share of synthetic cells the sensitive column cannot hold,
    and the (up to 6) worst columns, e.g. "income 1,203 (12.0%)"; empty without the entry."""
    entry = metrics.get("out_of_support")
    if not entry:
        return []
    line = f"{entry['count']:,} synthetic cells ({entry['share']:.2%}) hold a value the sensitive column never holds"
    if not entry["columns"]:
        return [line]
    by_column = entry["by_column"]
    worst = ", ".join(
        f"{c} {by_column[c]['count']:,} ({by_column[c]['share']:.1%})" for c in entry["columns"][:6]
    )
    return [line, f"worst: {worst}"]


def describe_real_sample(metrics: dict[str, Any]) -> str | None:
    """The summary's line on what the synthetic table is worth in real records (``tvd[L].real_sample_records``,
    docs/design.md section 5.5), e.g. "1-way 2,140,000 / 2-way 95,300 / 3-way 41,200 records"; "within
    sampling error" for a length whose mean TVD is at or below the compared rows' own; None without the entry."""
    tvd = metrics.get("tvd") or {}
    lengths = [
        k for k in sorted(tvd, key=int) if isinstance(tvd[k], dict) and "real_sample_records" in tvd[k]
    ]
    if not lengths:
        return None
    parts = []
    for k in lengths:
        m = tvd[k]["real_sample_records"]
        parts.append(f"{k}-way " + ("within sampling error" if m is None else f"{m:,} records"))
    return " / ".join(parts)
