"""Train on synthetic, test on real (TSTR; docs/design.md section 5.3): bounded samples of the tables on Spark,
gradient-boosted classifiers (scikit-learn) on the driver, accuracy and F1 against train-on-real (TRTR).

scikit-learn is imported inside the functions that fit the classifiers, so importing this module stays light.

Privacy: the scores are computed from the sensitive table and a held-out real table without noise; they are
NOT differentially private and must not be shared as if they were part of the DP release.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_dpsynth.errors import InvalidParameterError, SchemaError
from spark_dpsynth.evaluation._common import quote, timed_stage

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["train_synthetic_test_real", "check_label", "tstr_metrics"]

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------------------------
# The classifiers (driver, pandas in memory)
# ---------------------------------------------------------------------------------------------------------------

_EMPTY_CATEGORY = "\x00<empty>"
"""Stand-in for a null (empty) cell, so that empty is a category of its own (no string of the data holds NUL)."""
_CLASSIFIER_THREADS = 1
"""OpenMP threads of the classifiers. scikit-learn's histogram gradient boosting uses every core by default, and
its threads spin while they wait, so on a machine whose cores are busy (a Spark driver beside its executors, a
shared host) one thread is several times faster in wall time and CPU; the models are the same (the thread count
does not change the fit; docs/design.md section 5.5, "Where the time goes")."""
_MAX_CATEGORIES = 255
"""HistGradientBoostingClassifier takes at most ``max_bins`` = 255 categories per feature; rarer ones are pooled."""


def train_synthetic_test_real(
    synthetic: pd.DataFrame,
    real_train: pd.DataFrame,
    real_test: pd.DataFrame,
    label: str,
    *,
    random_state: int = 0,
) -> dict:
    """Train-on-synthetic / test-on-real (TSTR) against train-on-real / test-on-real (TRTR) classification.

    The same classifier is fitted twice, once on the synthetic table and once on the real training table, to
    predict ``label`` from every other column; both are scored on the held-out real table, which neither the
    synthesizer nor either model saw (Esteban, Hyland, Ratsch 2017; docs/design.md section 5.3). A TSTR score close to
    the TRTR score means a model trained on the synthetic data can be trusted about as much as one trained on
    the real data.

    Model: scikit-learn's ``HistGradientBoostingClassifier`` (``random_state`` fixes its early-stopping split)
    on ordinal codes declared categorical, fitted with one OpenMP thread (:data:`_CLASSIFIER_THREADS`). Each feature's categories are learned on the model's own training
    table; the empty value (null) is a category of its own; categories beyond the 254 most frequent of a
    column are pooled into one; a category unseen in training is treated as missing. Rows whose label is
    empty are dropped from every table (an empty label is no class to predict). When a training table holds
    one class only, the model predicts that class.

    F1: ``*_f1`` is the one-vs-rest F1 score of the *positive class*, defined as the least frequent label of
    ``real_train`` (ties: the smallest in string order), e.g. ``">50K"`` for Adult's income; ``*_f1_macro`` is
    the unweighted mean of the per-class F1 over the classes of ``real_test``.

    Args:
        synthetic: the synthetic records (pandas, nullable string columns; None/NaN = empty). Must hold the
            columns of ``real_train``; extra columns are ignored.
        real_train: real records the synthesizer was built from (TRTR training set), same columns.
        real_test: held-out real records the synthesizer never saw (the test set of both models).
        label: the column to predict (a categorical column of all three tables).
        random_state: seed of the classifiers (their early-stopping validation split).

        The inputs are held in memory on the driver: pass bounded samples.
        :func:`spark_dpsynth.evaluation.metrics.evaluate` passes at most ``tstr_max_rows`` (default
        :data:`spark_dpsynth.evaluation.metrics.TSTR_MAX_ROWS`) rows of each table, chosen on Spark by a seeded
        hash of the row (independent of partitioning).

    Returns:
        A JSON-serialisable dict: ``label``; ``positive_class`` (str); ``tstr_accuracy``, ``trtr_accuracy``
        (fraction of ``real_test`` rows predicted right, in [0, 1]); ``tstr_f1``, ``trtr_f1`` (F1 of the
        positive class, in [0, 1]); ``tstr_f1_macro``, ``trtr_f1_macro``; ``majority_class`` and
        ``majority_accuracy`` (the accuracy of always predicting ``real_train``'s most frequent label, the
        baseline); ``rows`` = ``{"synthetic", "real_train", "real_test"}`` (rows used, label non-empty);
        ``model`` (str). A TSTR value is ``None`` when the synthetic table has no row with a label.

    Raises:
        SchemaError: ``label`` is missing from a table, or ``synthetic`` / ``real_test`` lacks a column of
            ``real_train``.
        InvalidParameterError: ``real_train`` or ``real_test`` has no row with a non-empty label, or
            ``real_train`` has no feature column.

    Privacy:
        None: the scores are computed from the sensitive data (both real tables) without noise; they are not
        differentially private (see the module docstring).
    """
    from sklearn.metrics import accuracy_score, f1_score

    for name, frame in (("synthetic", synthetic), ("real_train", real_train), ("real_test", real_test)):
        if label not in frame.columns:
            raise SchemaError(f"the label column {label!r} is not in the {name} table")
    features = [c for c in real_train.columns if c != label]
    if not features:
        raise InvalidParameterError("real_train has no feature column besides the label")
    for name, frame in (("synthetic", synthetic), ("real_test", real_test)):
        missing = [c for c in features if c not in frame.columns]
        if missing:
            raise SchemaError(f"the {name} table lacks the column(s) {missing} of real_train")

    def labelled(frame: pd.DataFrame) -> pd.DataFrame:
        out = frame.loc[frame[label].notna(), [*features, label]].copy()
        out[label] = out[label].astype(str)
        return out

    syn, train, test = labelled(synthetic), labelled(real_train), labelled(real_test)
    for name, frame in (("real_train", train), ("real_test", test)):
        if frame.empty:
            raise InvalidParameterError(f"{name} has no row with a non-empty {label!r}")

    counts = train[label].value_counts()
    positive = min(counts.index[counts == counts.min()])
    majority = min(counts.index[counts == counts.max()])
    y_test = test[label].to_numpy()
    classes = sorted(set(y_test.tolist()))

    def scores(predicted: np.ndarray) -> tuple[float, float, float]:
        accuracy = float(accuracy_score(y_test, predicted))
        f1 = float(f1_score(y_test == positive, predicted == positive, zero_division=0.0))
        macro = float(f1_score(y_test, predicted, labels=classes, average="macro", zero_division=0.0))
        return accuracy, f1, macro

    def fit_predict(training: pd.DataFrame) -> np.ndarray:
        y = training[label].to_numpy()
        if len(set(y.tolist())) < 2:
            return np.full(len(test), y[0], dtype=object)
        encoder, model = _tstr_model(len(features), random_state)
        model.fit(encoder.fit_transform(_categories(training[features])), y)
        return model.predict(encoder.transform(_categories(test[features])))

    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=_CLASSIFIER_THREADS, user_api="openmp"):
        trtr = scores(fit_predict(train))
        tstr = scores(fit_predict(syn)) if not syn.empty else (None, None, None)
    majority_accuracy = float(np.mean(y_test == majority))
    return {
        "label": label,
        "positive_class": str(positive),
        "tstr_accuracy": tstr[0],
        "tstr_f1": tstr[1],
        "tstr_f1_macro": tstr[2],
        "trtr_accuracy": trtr[0],
        "trtr_f1": trtr[1],
        "trtr_f1_macro": trtr[2],
        "majority_class": str(majority),
        "majority_accuracy": majority_accuracy,
        "rows": {"synthetic": len(syn), "real_train": len(train), "real_test": len(test)},
        "model": "HistGradientBoostingClassifier (scikit-learn) on ordinal-encoded categorical features",
    }


def _categories(frame: pd.DataFrame) -> np.ndarray:
    """Feature values as a 2-D object array of strings, null -> :data:`_EMPTY_CATEGORY`."""
    return frame.astype(object).where(frame.notna(), _EMPTY_CATEGORY).astype(str).to_numpy(dtype=object)


def _tstr_model(n_features: int, random_state: int) -> tuple[Any, Any]:
    """A fresh (encoder, classifier) pair for :func:`train_synthetic_test_real`."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.preprocessing import OrdinalEncoder

    encoder = OrdinalEncoder(
        handle_unknown="use_encoded_value",
        unknown_value=np.nan,
        max_categories=_MAX_CATEGORIES,
        dtype=np.float64,
    )
    model = HistGradientBoostingClassifier(
        categorical_features=np.ones(n_features, dtype=bool), random_state=random_state
    )
    return encoder, model


# ---------------------------------------------------------------------------------------------------------------
# Train on synthetic, test on real: the Spark side
# ---------------------------------------------------------------------------------------------------------------


def check_label(
    label: str | None, label_values: Mapping[str, str] | None, columns: tuple[str, ...]
) -> dict[str, str]:
    """Validate ``label`` and ``label_values`` of :func:`evaluate` (schema only, no data read)."""
    if label is not None:
        if not isinstance(label, str):
            raise InvalidParameterError(f"label must be a column name or None, got {label!r}")
        if label not in columns:
            raise SchemaError(f"the label column {label!r} is not one of the columns {list(columns)}")
    if label_values is None:
        return {}
    if not isinstance(label_values, Mapping) or not all(
        isinstance(a, str) and isinstance(b, str) for a, b in label_values.items()
    ):
        raise InvalidParameterError("label_values must be a mapping of strings to strings")
    return dict(label_values)


def tstr_metrics(
    synthetic: DataFrame,
    sensitive: DataFrame,
    holdout: DataFrame | None,
    label: str,
    mapping: dict[str, str],
    max_rows: int,
    seed: int,
    progress: Callable[[str], None] | None,
) -> dict[str, Any]:
    """``tstr`` of :func:`evaluate`: bounded samples of the three tables, then the two classifiers."""
    if holdout is None:
        reason = "no held-out real table (set [evaluate] holdout_filter to rows the synthesizer never saw)"
        log.warning("train-on-synthetic / test-on-real skipped: %s", reason)
        return {"label": label, "skipped": reason}
    with timed_stage(
        log, f"train-on-synthetic / test-on-real: samples of at most {max_rows} rows each", progress
    ):
        frames = [_bounded_sample(df, max_rows, seed) for df in (synthetic, sensitive, holdout)]
    for frame in frames:
        if mapping:
            frame[label] = frame[label].replace(mapping)
    try:
        with timed_stage(log, "train-on-synthetic / test-on-real: fit and score two classifiers", progress):
            result = train_synthetic_test_real(frames[0], frames[1], frames[2], label, random_state=seed)
    except InvalidParameterError as err:  # e.g. a held-out filter that selects no labelled row
        log.warning("train-on-synthetic / test-on-real skipped: %s", err)
        return {"label": label, "skipped": str(err)}
    return {**result, "max_rows": max_rows, "skipped": None}


def _bounded_sample(df: DataFrame, max_rows: int, seed: int) -> pd.DataFrame:
    """At most ``max_rows`` rows of ``df`` as pandas: the rows with the smallest seeded 64-bit hash.

    The hash is of the row's values, so the sample does not depend on the partitioning or on task retries
    (identical rows hash alike, which does not bias which distinct rows are kept).
    """
    order = F.xxhash64(*(F.col(quote(c)) for c in df.columns), F.lit(seed))
    # Bounded: at most max_rows rows (a top-N sort; each task keeps at most max_rows rows).
    return df.orderBy(order).limit(max_rows).toPandas()
