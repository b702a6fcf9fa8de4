"""SDS's evaluator (Microsoft SDS ``packages/core/src/processing/evaluator``), on the driver.

From the subset- and bucket-sized sums of :func:`spark_dpsynth.evaluation.cells.aggregate`, per side (the
release or the synthetic table) against the true tuples of the sensitive table: suppressed and fabricated
tuples, preservation, proportional and absolute errors and the leakage count, by tuple length and by count
bucket (docs/design.md section 5.1).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from spark_dpsynth.evaluation.cells import BUCKET_FIRST


def bucket_bins(per_bucket: dict[tuple[int, int], dict[str, Any]]) -> list[int]:
    """The bucket indices 0..J, J the largest bucket holding an evaluated tuple of either side (at least 0)."""
    used = [j for (_, j), row in per_bucket.items() if row.get("p_y", 0) or row.get("p_r", 0)]
    return list(range(max(used, default=0) + 1))


def _mean(total: float, size: int) -> float | None:
    """``total / size``, or None for an empty set (``size`` = 0)."""
    return total / size if size else None


def sds_side(
    per_subset: dict[int, dict[str, Any]],
    per_bucket: dict[tuple[int, int], dict[str, Any]],
    bins: list[int],
    reporting_length: int,
    side: str,
) -> dict[str, Any]:
    """SDS's evaluator (docs/design.md section 5) for ``side`` "r" (release) or "y" (synthetic): the ``SIDE`` dict."""
    by_length: dict[str, Any] = {}
    totals: dict[str, float] = {}
    for length in range(1, reporting_length + 1):
        rows = [r for r in per_subset.values() if r["k"] == length]

        def total(key: str, rows: list[dict[str, Any]] = rows) -> Any:
            return sum(r.get(key, 0) for r in rows)

        s, y, common = total("s"), total(side), total("s" + side)
        error = total("s" + side + "_err")
        leak, p = total("leak_" + side), total("p_" + side)
        for key, value in (("s", s), ("y", y), ("common", common), ("error", error), ("leak", leak)):
            totals[key] = totals.get(key, 0) + value
        totals["p"] = totals.get("p", 0) + p
        totals["pres"] = totals.get("pres", 0.0) + total("pres_" + side)
        by_length[str(length)] = {
            "true_tuples": s,
            "tuples": y,
            "common_tuples": common,
            "suppressed_tuples": s - common,
            "fabricated_tuples": y - common,
            "suppressed_pct": 100.0 * (s - common) / s if s else None,
            "fabricated_pct": 100.0 * (y - common) / s if s else None,
            "mean_absolute_error": _mean(error, common),
            "rare_true_tuples": total("rare_s"),
            "leakage_count": leak,
            "leakage_pct": 100.0 * leak / s if s else None,
            "evaluated_tuples": p,
            "preservation": _mean(total("pres_" + side), p),
            "mean_proportional_error": _mean(total("perr_" + side), p),
            "mean_count": _mean(total("cnt_" + side), p),
        }
    by_bucket: dict[str, Any] = {}
    for j in bins:
        rows = [r for (k, b), r in per_bucket.items() if b == j and k <= reporting_length]
        p = sum(r.get("p_" + side, 0) for r in rows)

        def mean(key: str, rows: list[dict[str, Any]] = rows, p: int = p) -> float | None:
            return _mean(sum(r.get(key + "_" + side, 0) for r in rows), p)

        by_bucket[str(BUCKET_FIRST << j)] = {
            "lower": 0 if j == 0 else BUCKET_FIRST << (j - 1),
            "tuples": p,
            "preservation": mean("pres"),
            "mean_proportional_error": mean("perr"),
            "mean_absolute_error": mean("abserr"),
            "mean_true_count": mean("true"),
            "mean_count": mean("cnt"),
        }
    bucket_errors = [b["mean_proportional_error"] for b in by_bucket.values() if b["tuples"]]
    s, common = totals.get("s", 0), totals.get("common", 0)
    return {
        "by_length": by_length,
        "by_count_bucket": by_bucket,
        "summary": {
            "suppressed_pct": 100.0 * (s - common) / s if s else None,
            "fabricated_pct": 100.0 * (totals.get("y", 0) - common) / s if s else None,
            "mean_absolute_error": _mean(totals.get("error", 0), int(common)),
            "leakage_count": int(totals.get("leak", 0)),
            "preservation": _mean(totals.get("pres", 0.0), int(totals.get("p", 0))),
            "mean_proportional_error": float(np.mean(bucket_errors)) if bucket_errors else None,
        },
    }
