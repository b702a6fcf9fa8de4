"""Evaluation of a synthetic table and its release against the sensitive table (NOT private).

* :mod:`.metrics`: ``evaluate`` (one Spark job per evaluation), ``write_metrics`` (``metrics.json``) and
  ``true_aggregates``; the layout of the metrics dict.
* :mod:`.cells`: cell counting on Spark (column-subset plans, the vectorized per-batch counter, the release's
  cells, the one-shuffle aggregation).
* :mod:`.scores`: total variation distances and SDS's evaluator, from the subset-sized aggregates.
* :mod:`.tstr`: train on synthetic, test on real.
* :mod:`.report`: the HTML report of the metrics.
* :mod:`._common`: shared constants and helpers.
"""

from spark_dpsynth.evaluation.metrics import evaluate, true_aggregates, write_metrics
from spark_dpsynth.evaluation.tstr import train_synthetic_test_real

__all__ = ["evaluate", "train_synthetic_test_real", "true_aggregates", "write_metrics"]
