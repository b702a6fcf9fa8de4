"""Evaluation of a synthetic table and its release against the sensitive table (NOT private).

* :mod:`.core`: marginal TVD, SDS's evaluator, train-on-synthetic / test-on-real, ``metrics.json``.
* :mod:`.report`: the HTML report of those metrics.
"""

from spark_dpsynth.evaluation.core import evaluate, train_synthetic_test_real, true_aggregates, write_metrics

__all__ = ["evaluate", "train_synthetic_test_real", "true_aggregates", "write_metrics"]
