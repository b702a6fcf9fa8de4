"""Evaluation of a synthetic table and its release against the sensitive table (NOT private).

Modules, by job:

* :mod:`.metrics`: ``evaluate`` (the orchestration: one Spark job per evaluation, then the table of metrics),
  ``write_metrics`` (``metrics.json``), ``true_aggregates`` (the exact k-tuple counts SDS's evaluator compares
  with), ``METRICS_FILE``.
* :mod:`.catalog`: the table of metrics, ``METRICS`` (each metric a named entry: its function, when it applies,
  the keys it writes), the layout's ``METRICS_VERSION`` and ``PRIVACY_KEYS``, the guard of a metric that fails.
* :mod:`.sampling`: ``RowSampling`` (the seeded row sampling of large tables) and the lines that describe the
  row and column-subset sampling.
* :mod:`.cells`: cell counting on Spark: column-subset plans, the vectorized per-batch counter run by
  ``mapInArrow`` in Spark's Python workers, the release's cells, the one-shuffle aggregation.
* :mod:`.tvd`: total variation distances of the column marginals, the worst 1-way columns.
* :mod:`.sds_evaluator`: SDS's evaluator (preservation, suppression, fabrication, errors, leakage) by tuple
  length and count bucket.
* :mod:`.numeric`: ``numeric_metrics``, the Kolmogorov-Smirnov and Wasserstein-1 distances of the numeric,
  date and timestamp columns and the difference of their Pearson correlations (one aggregation pass per table).
* :mod:`.coverage`: ``release_coverage`` (public, from the release) and ``synthetic_coverage``: the columns
  that released nothing or almost nothing, with what to do (``column_warnings``).
* :mod:`.tstr`: ``train_synthetic_test_real`` (scikit-learn classifiers on the driver) and its bounded
  samples on Spark.
* :mod:`.report`: ``write_report``, the HTML page of the metrics (matplotlib).
* :mod:`.report_marginals`: the page's sections on the marginals (SDS's evaluator, the TVDs, the yardstick).
* :mod:`.report_html`: the page's pieces (escaping, tables, number formats, embedded PNG figures, colors).
* :mod:`._common`: schema checks, column quoting and stage logging shared by the modules above.

The public names below are imported on first use (PEP 562): Spark's Python workers import this package to
unpickle the cell counter of :mod:`.cells`, and must not pay for scikit-learn or matplotlib.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "evaluate": "metrics",
    "true_aggregates": "metrics",
    "write_metrics": "metrics",
    "train_synthetic_test_real": "tstr",
    "numeric_metrics": "numeric",
    "release_coverage": "coverage",
    "column_warnings": "coverage",
    "write_report": "report",
}
"""Public name -> the module of this package that defines it."""

if TYPE_CHECKING:
    from spark_dpsynth.evaluation.coverage import column_warnings, release_coverage
    from spark_dpsynth.evaluation.metrics import evaluate, true_aggregates, write_metrics
    from spark_dpsynth.evaluation.numeric import numeric_metrics
    from spark_dpsynth.evaluation.report import write_report
    from spark_dpsynth.evaluation.tstr import train_synthetic_test_real

__all__ = [
    "column_warnings",
    "evaluate",
    "numeric_metrics",
    "release_coverage",
    "train_synthetic_test_real",
    "true_aggregates",
    "write_metrics",
    "write_report",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
