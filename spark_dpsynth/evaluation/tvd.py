"""Total variation distances between the sensitive and the synthetic column marginals, on the driver.

From the subset-sized sums of :func:`spark_dpsynth.evaluation.cells.aggregate`: the TVD of every column subset
(exact integer numerators, one rounding), their mean and max per length, and the value shares of the columns
with the largest 1-way TVD (docs/design.md section 5.2).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from spark_dpsynth.evaluation.cells import SubsetPlan

_SUBSET_SEPARATOR = "|"
"""Joins the column names of a subset in the keys of ``tvd_by_subset``."""
_WORST_COLUMNS = 4
"""Columns in ``one_way_worst``."""


def tvd_metrics(
    per_subset: dict[int, dict[str, Any]],
    plan: SubsetPlan,
    columns: tuple[str, ...],
    *,
    synthetic_sampled: bool = False,
) -> dict[str, Any]:
    """``tvd`` and ``tvd_by_subset`` of :func:`evaluate`, each TVD = tvd2 / (2 n n_syn) rounded once.

    Beside each length's mean, its sampling error (docs/design.md section 5.5): ``floor``, the expected TVD
    between two independent uniform samples of n and n_syn rows of one table whose cells have the sensitive
    shares p (per subset (1/2) sqrt(2/pi) sqrt(1/n + 1/n_syn) sum over cells sqrt(p (1 - p)), the normal
    approximation of E|p^ - q^| per cell), and ``floor_measured``, the mean TVD between the compared sensitive
    sample and a second, disjoint uniform sample of the sensitive table of about the same size (None without one).
    From the same approximation, ``spread`` (the mean over subsets of sum over cells sqrt(p (1 - p))),
    ``sensitive_rows`` (the compared sensitive rows, mean over subsets), ``synthetic_rows`` (the compared
    synthetic rows when the synthetic table was sampled, ``synthetic_sampled``, else None) and
    ``real_sample_records`` (:func:`real_sample_records`): what the synthetic table is worth in real records.

    Per length the mean is over the plan's subsets: all C(d, L) of them, or its seeded sample (then the entry
    also has ``sampled`` = True, ``subsets_total`` = C(d, L) > ``count``, and ``subsets``, the sampled subsets'
    column indices).
    """
    tvd: dict[str, Any] = {}
    by_subset: dict[str, dict[str, float]] = {}
    for length in range(1, plan.all_cells_length + 1):
        values: dict[str, float] = {}
        floors: list[float] = []
        spreads: list[float] = []
        sensitive_rows: list[int] = []
        synthetic_rows: list[int] = []
        measured: list[float] = []
        subsets = plan.of_length(length)
        for subset in subsets:
            row = per_subset[plan.ids[subset]]
            name = _SUBSET_SEPARATOR.join(columns[c] for c in subset)
            values[name] = float(Fraction(row["tvd2"], 2 * row["rows_s"] * row["rows_y"]))
            scale = math.sqrt(1.0 / row["rows_s"] + 1.0 / row["rows_y"]) / math.sqrt(2.0 * math.pi)
            floors.append(scale * row.get("spread", 0.0))
            spreads.append(float(f"{row.get('spread', 0.0):.10g}"))  # summed in Spark: see "floor" below
            sensitive_rows.append(row["rows_s"])
            synthetic_rows.append(row["rows_y"])
            if row.get("rows_b"):
                measured.append(float(Fraction(row["tvd2_b"], 2 * row["rows_s"] * row["rows_b"])))
        worst = max(values, key=lambda name: values[name])
        mean = float(np.mean(list(values.values())))
        tvd[str(length)] = {
            "mean": mean,
            "max": values[worst],
            "count": len(values),
            "worst": worst,
            # an approximation summed over cells in Spark: rounded so that the order of that sum (the
            # tables' partitioning) does not show in its last digits
            "floor": float(f"{np.mean(floors):.10g}"),
            "floor_measured": float(np.mean(measured)) if len(measured) == len(values) else None,
            "spread": float(f"{np.mean(spreads):.10g}"),
            "sensitive_rows": round(float(np.mean(sensitive_rows))),
            "synthetic_rows": round(float(np.mean(synthetic_rows))) if synthetic_sampled else None,
            "real_sample_records": real_sample_records(
                mean,
                spreads,
                sensitive_rows,
                synthetic_rows if synthetic_sampled else None,
            ),
        }
        if plan.sampled[length]:
            tvd[str(length)].update(
                subsets_total=plan.totals[length], sampled=True, subsets=[list(s) for s in subsets]
            )
        by_subset[str(length)] = values
    return {"tvd": tvd, "tvd_by_subset": by_subset}


def expected_sample_tvd(
    records: float,
    spreads: list[float],
    sensitive_rows: list[int],
    synthetic_rows: list[int] | None = None,
) -> float:
    """The expected mean TVD of a uniform sample of ``records`` rows of the sensitive table, compared as the
    synthetic table was, against the compared sensitive rows (independent of it): the mean over subsets of
    sqrt(1/records + 1/r_S [+ 1/r_Y]) spread / sqrt(2 pi), r_S the compared sensitive rows, r_Y the compared
    synthetic rows when the synthetic table was sampled (the sample of the sample adds its own error; None: it was
    not), the normal approximation of E|p^ - q^| per cell (docs/design.md section 5.5; ``records`` may be inf)."""
    inverse = 0.0 if math.isinf(records) else 1.0 / records
    second = synthetic_rows if synthetic_rows is not None else [0] * len(spreads)
    return float(
        np.mean(
            [
                math.sqrt(inverse + 1.0 / r + (1.0 / y if y else 0.0)) * s
                for s, r, y in zip(spreads, sensitive_rows, second, strict=True)
            ]
        )
        / math.sqrt(2.0 * math.pi)
    )


def real_sample_records(
    mean_tvd: float,
    spreads: list[float],
    sensitive_rows: list[int],
    synthetic_rows: list[int] | None = None,
) -> int | None:
    """What a synthetic table is worth in real records (docs/design.md section 5.5): the size m >= 1 of a uniform
    sample of the sensitive table whose :func:`expected_sample_tvd` equals ``mean_tvd`` (bisection on log m),
    rounded to 3 significant digits; 1 when even one record would do as well; None when ``mean_tvd`` is at or
    below the expected TVD of an infinite sample (the comparison's own sampling error) or every subset has a
    single cell."""
    if (
        not spreads
        or max(spreads) <= 0
        or mean_tvd <= expected_sample_tvd(math.inf, spreads, sensitive_rows, synthetic_rows)
    ):
        return None
    if mean_tvd >= expected_sample_tvd(1.0, spreads, sensitive_rows, synthetic_rows):
        return 1
    low, high = 0.0, 60.0  # natural log of m: 1 .. 1e26 records
    while high - low > 1e-4:
        middle = (low + high) / 2
        if expected_sample_tvd(math.exp(middle), spreads, sensitive_rows, synthetic_rows) > mean_tvd:
            low = middle
        else:
            high = middle
    return max(1, int(float(f"{math.exp((low + high) / 2):.3g}")))


def one_way_worst(
    top_values: dict[int, list[tuple[str | None, int, int]]],
    per_subset: dict[int, dict[str, Any]],
    plan: SubsetPlan,
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
