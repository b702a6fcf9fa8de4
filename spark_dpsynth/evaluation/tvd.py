"""Total variation distances between the sensitive and the synthetic column marginals, on the driver.

From the subset-sized sums of :func:`spark_dpsynth.evaluation.cells._aggregate`: the TVD of every column subset
(exact integer numerators, one rounding), their mean and max per length, and the value shares of the columns
with the largest 1-way TVD (docs/design.md section 5.2).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from spark_dpsynth.evaluation.cells import _SubsetPlan

_SUBSET_SEPARATOR = "|"
"""Joins the column names of a subset in the keys of ``tvd_by_subset``."""
_WORST_COLUMNS = 4
"""Columns in ``one_way_worst``."""


def _tvd_metrics(
    per_subset: dict[int, dict[str, Any]], plan: _SubsetPlan, columns: tuple[str, ...]
) -> dict[str, Any]:
    """``tvd`` and ``tvd_by_subset`` of :func:`evaluate`, each TVD = tvd2 / (2 n n_syn) rounded once.

    Beside each length's mean, its sampling error (docs/design.md section 5.5): ``floor``, the expected TVD
    between two independent uniform samples of n and n_syn rows of one table whose cells have the sensitive
    shares p (per subset (1/2) sqrt(2/pi) sqrt(1/n + 1/n_syn) sum over cells sqrt(p (1 - p)), the normal
    approximation of E|p^ - q^| per cell), and ``floor_measured``, the mean TVD between the compared sensitive
    sample and a second, disjoint uniform sample of the sensitive table of about the same size (None without one).

    Per length the mean is over the plan's subsets: all C(d, L) of them, or its seeded sample (then the entry
    also has ``sampled`` = True, ``subsets_total`` = C(d, L) > ``count``, and ``subsets``, the sampled subsets'
    column indices).
    """
    tvd: dict[str, Any] = {}
    by_subset: dict[str, dict[str, float]] = {}
    for length in range(1, plan.all_cells_length + 1):
        values: dict[str, float] = {}
        floors: list[float] = []
        measured: list[float] = []
        subsets = plan.of_length(length)
        for subset in subsets:
            row = per_subset[plan.ids[subset]]
            name = _SUBSET_SEPARATOR.join(columns[c] for c in subset)
            values[name] = float(Fraction(row["tvd2"], 2 * row["rows_s"] * row["rows_y"]))
            scale = math.sqrt(1.0 / row["rows_s"] + 1.0 / row["rows_y"]) / math.sqrt(2.0 * math.pi)
            floors.append(scale * row.get("spread", 0.0))
            if row.get("rows_b"):
                measured.append(float(Fraction(row["tvd2_b"], 2 * row["rows_s"] * row["rows_b"])))
        worst = max(values, key=lambda name: values[name])
        tvd[str(length)] = {
            "mean": float(np.mean(list(values.values()))),
            "max": values[worst],
            "count": len(values),
            "worst": worst,
            # an approximation summed over cells in Spark: rounded so that the order of that sum (the
            # tables' partitioning) does not show in its last digits
            "floor": float(f"{np.mean(floors):.10g}"),
            "floor_measured": float(np.mean(measured)) if len(measured) == len(values) else None,
        }
        if plan.sampled[length]:
            tvd[str(length)].update(
                subsets_total=plan.totals[length], sampled=True, subsets=[list(s) for s in subsets]
            )
        by_subset[str(length)] = values
    return {"tvd": tvd, "tvd_by_subset": by_subset}


def _one_way_worst(
    top_values: dict[int, list[tuple[str | None, int, int]]],
    per_subset: dict[int, dict[str, Any]],
    plan: _SubsetPlan,
    one_way_tvd: dict[str, float],
) -> list[dict[str, Any]]:
    """``one_way_worst`` of :func:`evaluate`: the value shares of the columns with the largest 1-way TVD."""
    order = sorted(range(plan.n_columns), key=lambda c: -list(one_way_tvd.values())[c])[:_WORST_COLUMNS]
    out = []
    for c in order:
        subset = plan.ids[(c,)]
        rows_s, rows_y = per_subset[subset]["rows_s"], per_subset[subset]["rows_y"]
        top = top_values.get(subset, [])
        sensitive = [s / rows_s for _, s, _ in top]
        synthetic = [y / rows_y for _, _, y in top]
        out.append(
            {
                "column": list(one_way_tvd)[c],
                "tvd": list(one_way_tvd.values())[c],
                "values": [value for value, _, _ in top],
                "sensitive": sensitive,
                "synthetic": synthetic,
                "other": {
                    "sensitive": (rows_s - sum(s for _, s, _ in top)) / rows_s,
                    "synthetic": (rows_y - sum(y for _, _, y in top)) / rows_y,
                },
            }
        )
    return out
