"""Evaluate stage: compare a synthetic table (and a DP release) with the sensitive table.

``evaluate(sensitive, synthetic, release)`` returns plain, JSON-serialisable metrics (docs/design.md section 5), and
``write_metrics`` writes them to ``metrics.json`` (``spark_dpsynth.evaluation.report`` turns them into ``report.html``).
The metrics are:

* ``rows``, ``record_expansion`` (n_syn / n - 1) and ``blank_cell_share`` of both tables;
* ``tvd`` and ``tvd_by_subset``: the total variation distance between the sensitive and the synthetic L-way
  column marginals, for every column subset of length L = 1..``max_marginal_length``, the empty value counted
  as a category of its own, and ``nist_k_marginal_score`` = 1000 (1 - mean 3-way TVD) (docs/design.md section 5,
  "Plus"; NIST CRC's k-marginal metric); ``one_way_worst``: the value shares of the worst 1-way columns;
* ``sds``: Microsoft SDS's evaluator (docs/design.md section 5; SDS ``packages/core/src/processing/evaluator``) of
  the release's aggregates and of the synthetic table's aggregates, both against the true aggregates of the
  sensitive table (:func:`true_aggregates`), per length k = 1..R: suppressed %, fabricated %, mean absolute
  error, preservation, mean proportional error, leakage count (true tuples rarer than the resolution that
  appear); and per count bucket (10, 20, 40, ...) of the true count: preservation and errors;
* ``tstr``: train-on-synthetic / test-on-real against train-on-real accuracy and F1 for a label column, tested
  on held-out real rows (docs/design.md section 5; :func:`train_synthetic_test_real`);
* ``privacy``: the release manifest's privacy parameters, for the report.

Privacy: the evaluation reads the sensitive data and adds no noise. Its outputs (true counts of tuples, true
number of records, exact distances, classifier scores) are NOT differentially private and must not be published
or shared as if they were part of the DP release; they are for the data owner who already holds the sensitive
table. Logs and progress messages name stages and durations only, never a count.

Computation: everything record-level runs in Spark, in one Spark job. Each table is read once: a vectorized
``mapInArrow`` pass (numpy over Arrow batches, no row-at-a-time UDF) emits, per batch, the partial count of every
cell of every column subset. The sensitive, synthetic and release counts are stacked with ``unionByName`` (no
join on nullable keys), shuffled once by column subset, summed per cell, and reduced to one row per (column
subset, count bucket) (per-subset totals come from a window over the subset, in the same partitions), plus the
12 most frequent values of each column (from the same shuffle, a reused exchange). The driver receives only
those rows (about sum of C(d, L) times log2(n / 10) of them) and, when a release is given, holds the release,
which it hands to Spark as one small Arrow table. The classifiers of ``tstr`` are the one exception: they run
on the driver, on at most ``tstr_max_rows`` rows of each table (default 100,000), a top-N by a seeded hash of
the row. DataFrame API only (no RDD, no SparkContext, no JVM access), so it also runs on Spark Connect.
"""

from __future__ import annotations

import decimal
import itertools
import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from fractions import Fraction
from functools import reduce
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_dpsynth import _validate as v
from spark_dpsynth.errors import InvalidParameterError, SchemaError

if TYPE_CHECKING:
    import pandas as pd

    from spark_dpsynth.release.core import Release

__all__ = [
    "evaluate",
    "write_metrics",
    "true_aggregates",
    "train_synthetic_test_real",
    "METRICS_FILE",
    "METRICS_VERSION",
    "SDS_RESOLUTION",
    "TSTR_MAX_ROWS",
]

log = logging.getLogger(__name__)

METRICS_FILE = "metrics.json"
"""File name :func:`write_metrics` writes in its directory."""
METRICS_VERSION = 1
"""Version of the layout of the dict :func:`evaluate` returns; bumped when a key changes meaning or goes away."""

SDS_RESOLUTION = 10
"""SDS's default reporting resolution (``reporting_resolution`` in SDS's pipeline and web app): the count below
which a true tuple is "rare" for the leakage count and left out of preservation unless it appears."""
TSTR_MAX_ROWS = 100_000
"""Default bound on the rows of each table :func:`evaluate` hands to :func:`train_synthetic_test_real`."""

_SUBSET_SEPARATOR = "|"
_BUCKET_FIRST = 10
"""Upper bound of SDS's first count bucket (0, 10]; each next bucket doubles it (SDS's ``INITIAL_BIN``)."""
_ONE_WAY_VALUES = 12
"""Values per column kept for the 1-way distributions of ``one_way_worst``."""
_WORST_COLUMNS = 4
"""Columns in ``one_way_worst``."""
_PRIVACY_KEYS = (
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
_FLUSH_ROWS = 1 << 20
"""Rows of partial counts a ``mapInArrow`` task accumulates before it yields an Arrow batch."""


# ---------------------------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------------------------


def evaluate(
    sensitive: DataFrame,
    synthetic: DataFrame,
    release: Release | None = None,
    *,
    max_marginal_length: int = 3,
    resolution: int = SDS_RESOLUTION,
    holdout: DataFrame | None = None,
    label: str | None = None,
    label_values: Mapping[str, str] | None = None,
    tstr_max_rows: int = TSTR_MAX_ROWS,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    r"""Compare the synthetic table, and optionally the release, with the sensitive table.

    Args:
        sensitive: the *prepared* sensitive table (:func:`spark_dpsynth.data.prepare.prepare`): n rows, d nullable
            string columns, null = empty (no attribute).
        synthetic: the synthetic table, n_syn rows with exactly the same columns in the same order.
        release: the DP release the synthetic table was derived from; when given, SDS's evaluator runs for
            lengths k = 1..``release.reporting_length`` on the release and on the synthetic table. Its
            ``columns`` must be the tables' columns, in the same order.
        max_marginal_length: the longest column subsets whose marginals the TVD compares (an integer >= 1;
            capped at d). With d columns there are sum over L of C(d, L) subsets, and the cost of the pass
            over each table grows with that number times the number of rows.
        resolution: SDS's reporting resolution r (an integer >= 1, default :data:`SDS_RESOLUTION` = 10): true
            tuples with a count below r are "rare"; they count as leaked when they appear in the release or
            the synthetic data, and (as in SDS) a rare true tuple that does not appear is left out of the
            preservation statistics.
        holdout: the prepared *held-out* real table (same columns as ``sensitive``), rows the synthesizer never
            saw, e.g. Adult's test split; the test set of train-on-synthetic / test-on-real. Only read when
            ``label`` is given.
        label: a column of the tables to predict for train-on-synthetic / test-on-real
            (:func:`train_synthetic_test_real`); None skips it. Without ``holdout`` it is skipped too, with
            the reason logged and recorded in ``tstr``.
        label_values: a mapping applied to the label column of the three tables before the classifiers see
            them, to give one class one spelling (e.g. ``{">50K.": ">50K"}``: UCI Adult's test file ends its
            labels with a period). Values not in the mapping are kept.
        tstr_max_rows: at most this many rows (an integer >= 1) of each of the synthetic, sensitive and
            held-out tables reach the driver for the classifiers: a top-``tstr_max_rows`` by a seeded hash of
            the row, the same rows whatever the partitioning.
        seed: seed of that hash and of the classifiers (an integer).
        progress: called with a short message when a stage starts and ends (e.g. to drive a progress bar).

    Returns:
        A JSON-serialisable dict with these keys (lengths are decimal strings ``"1"``, ``"2"``, ...; a value
        that is undefined, e.g. a percentage of an empty set, is ``None``):

        * ``metrics_version`` (int): :data:`METRICS_VERSION`.
        * ``differentially_private`` (bool): always ``False`` (see Privacy).
        * ``columns`` (list[str]): the attribute columns, in order.
        * ``max_marginal_length`` (int): min(``max_marginal_length``, d), the longest subsets in ``tvd``.
        * ``resolution`` (int): r.
        * ``rows``: ``{"sensitive": n, "synthetic": n_syn}``.
        * ``record_expansion`` (float): n_syn / n - 1 (SDS's evaluator; docs/design.md section 5).
        * ``blank_cell_share``: ``{"sensitive": s, "synthetic": s_syn}``, the share in [0, 1] of null cells
          among the n * d (resp. n_syn * d) cells (docs/design.md section 5).
        * ``tvd``: per length L, ``{"mean": m, "max": x, "count": C(d, L), "worst": "colA|colB"}`` over the
          L-column subsets of the total variation distance 0.5 * sum over cells |p - q| in [0, 1], p (q) =
          the cell's count in the sensitive (synthetic) table / n (n_syn), the empty value being a category
          of its own; ``worst`` names the subset with the largest TVD (first in ``tvd_by_subset`` order).
        * ``tvd_by_subset``: per length L, ``{"colA|colB": tvd, ...}`` for every L-column subset, columns
          joined by ``"|"`` in table order (keys are listed in the order of ``itertools.combinations``, so a
          reader can rebuild the subsets from ``columns`` even when a name contains ``"|"``).
        * ``nist_k_marginal_score`` (float | None): 1000 * (1 - mean 3-way TVD), in [0, 1000], the score of
          NIST's CRC k-marginal metric with k = 3 over *every* 3-column subset (NIST samples some); None when
          fewer than 3 columns or ``max_marginal_length`` < 3.
        * ``one_way_worst``: for the (up to) 4 columns with the largest 1-way TVD, worst first, a list of
          ``{"column", "tvd", "values", "sensitive", "synthetic", "other"}``: the (up to) 12 values with the
          largest sensitive + synthetic count (None = empty), their shares of the sensitive and synthetic
          rows, and ``other`` = ``{"sensitive", "synthetic"}`` shares of all remaining values.
        * ``sds``: ``None`` without a release, else ``{"reporting_length": R, "release": SIDE,
          "synthetic": SIDE}``: SDS's evaluator (docs/design.md section 5; Microsoft SDS
          ``packages/core/src/processing/evaluator``) of the release's k-tuples and of the synthetic table's
          true k-tuples, both against S = the true k-tuples of the sensitive table (:func:`true_aggregates`).
          With Y = the side's tuples, r = ``resolution``, and the *evaluated* tuples P = the tuples of S with
          count >= r plus every tuple of Y (SDS's population), per tuple preservation = min(Y/S, 1)
          (0 when S = 0) and proportional error = |Y - S| / S (1 when S = 0). SIDE is a dict:

          - ``by_length``: k = 1..R -> ``true_tuples`` = |S|, ``tuples`` = |Y|, ``common_tuples`` = |S and
            Y|, ``suppressed_tuples`` = |S \ Y|, ``fabricated_tuples`` = |Y \ S|, ``suppressed_pct`` =
            100 |S \ Y| / |S|, ``fabricated_pct`` = 100 |Y \ S| / |S|, ``mean_absolute_error`` = mean over
            S and Y of |count_Y - count_S| (in records); ``rare_true_tuples`` = tuples of S with count < r;
            ``leakage_count`` = those that are also in Y (SDS: "combinations rarer than the resolution in the
            sensitive data that appear in the synthetic data"; SDS's code also asks count_Y < r, we do not),
            ``leakage_pct`` = 100 ``leakage_count`` / |S|; ``evaluated_tuples`` = |P|, ``preservation``,
            ``mean_proportional_error``, ``mean_count`` = means over P of preservation, proportional error,
            count_Y (SDS's preservation by length).
          - ``by_count_bucket``: bucket upper bound b = "10", "20", "40", ... (SDS's bins: (0, 10], (10, 20],
            (20, 40], ..., up to the largest true count in P) -> ``lower`` (exclusive bound), ``tuples`` =
            tuples of P whose *true* count is in the bucket (a fabricated tuple, true count 0, is in "10"),
            ``preservation``, ``mean_proportional_error``, ``mean_absolute_error``, ``mean_true_count``,
            ``mean_count`` (means over those tuples; None for an empty bucket). SDS's code buckets by count_Y;
            bucketing by the true count shows how tuples of a given true size fare, whatever the
            noise did to their count.
          - ``summary``: over all lengths, ``suppressed_pct``, ``fabricated_pct``, ``mean_absolute_error`` (as
            above), ``leakage_count``, ``preservation`` (mean over P), and ``mean_proportional_error`` =
            SDS's mean proportional error: the mean over the non-empty count buckets of their mean
            proportional error (SDS also averages in empty buckets as 0; we skip them).

        * ``tstr``: None without ``label``; else, when it ran, :func:`train_synthetic_test_real`'s dict plus
          ``max_rows`` and ``skipped`` = None; when it could not run, ``{"label": label, "skipped": reason}``.
        * ``privacy``: None without a release; else the release manifest's public privacy parameters
          (``epsilon``, ``delta``, ``rho``, ``reporting_length``, ``sigmas``, ``noise_std``, ``sensitivities``
          (Delta_k), ``thresholds`` (rho_k), ``protected_number_of_records``, ``accounting``,
          ``accuracy_mode``, ``fabrication_mode``, ``noise_sampler``, ``test_mode``; a key the manifest lacks
          is None).

    Raises:
        SchemaError: the two tables' columns differ (names or order), a column is not a string column, a
            column name repeats, there are no columns, the release's or the held-out table's columns are not
            the tables' columns, or ``label`` is not a column.
        InvalidParameterError: ``max_marginal_length``, ``resolution`` or ``tstr_max_rows`` is not an integer
            >= 1, ``seed`` is not an integer, ``label_values`` is not a mapping of strings, ``progress`` is not
            callable, or a table has no rows (the distributions are undefined).

    Privacy:
        None: the result is computed from the sensitive data without noise. It is not differentially private
        and must not be shared as if it were (see the module docstring).
    """
    started = time.perf_counter()
    columns = _check_table("sensitive", sensitive)
    syn_columns = _check_table("synthetic", synthetic)
    if syn_columns != columns:
        raise SchemaError(_mismatch("synthetic", syn_columns, columns))
    length = v.integer("max_marginal_length", max_marginal_length, low=1)
    res = v.integer("resolution", resolution, low=1)
    max_rows = v.integer("tstr_max_rows", tstr_max_rows, low=1)
    seed = v.integer("seed", seed)
    if progress is not None and not callable(progress):
        raise InvalidParameterError(f"progress must be a callable or None, got {type(progress).__name__}")
    if release is not None and tuple(release.columns) != columns:
        raise SchemaError(_mismatch("the release", tuple(release.columns), columns))
    mapping = _check_label(label, label_values, columns)
    if label is not None and holdout is not None:
        hold_columns = _check_table("holdout", holdout)
        if hold_columns != columns:
            raise SchemaError(_mismatch("the held-out table", hold_columns, columns))

    d = len(columns)
    tvd_length = min(length, d)
    reporting_length = release.reporting_length if release is not None else 0
    sds_length = min(reporting_length, d)
    plan = _SubsetPlan(d, all_cells_length=tvd_length, max_length=max(tvd_length, sds_length))

    parts = [
        _cell_counts(sensitive, plan).select(
            *plan.key_names, _as_long("n", "n_s"), _zero("n_y"), _zero("n_r")
        ),
        _cell_counts(synthetic, plan).select(
            *plan.key_names, _zero("n_s"), _as_long("n", "n_y"), _zero("n_r")
        ),
    ]
    if release is not None:
        with _stage("release tuples to a Spark DataFrame", progress):
            parts.append(_release_cells(release, plan, sensitive))
    stage = f"cell counts and metrics of {len(plan.subsets)} column subsets (one pass over each table)"
    with _stage(stage, progress):
        counts = _aggregate(reduce(DataFrame.unionByName, parts), plan, sds_length, res)
    per_subset = counts.per_subset
    # Every row is in exactly one cell of a 1-column subset (no row at all: no cell, no entry).
    first = per_subset.get(plan.ids[(0,)], {"rows_s": 0, "rows_y": 0})
    n, n_syn = first["rows_s"], first["rows_y"]
    for name, rows in (("sensitive", n), ("synthetic", n_syn)):
        if rows == 0:
            raise InvalidParameterError(f"the {name} table has no rows; the evaluation needs at least one")
    blank_s = sum(row["blank_s"] for row in per_subset.values())
    blank_y = sum(row["blank_y"] for row in per_subset.values())

    metrics: dict[str, Any] = {
        "metrics_version": METRICS_VERSION,
        "differentially_private": False,
        "columns": list(columns),
        "max_marginal_length": tvd_length,
        "resolution": res,
        "rows": {"sensitive": n, "synthetic": n_syn},
        "record_expansion": (n_syn - n) / n,
        "blank_cell_share": {
            "sensitive": blank_s / (n * d),
            "synthetic": blank_y / (n_syn * d),
        },
    }
    metrics.update(_tvd_metrics(per_subset, plan, columns))
    three_way = metrics["tvd"].get("3")
    metrics["nist_k_marginal_score"] = 1000.0 * (1.0 - three_way["mean"]) if three_way else None
    metrics["one_way_worst"] = _one_way_worst(
        counts.top_values, per_subset, plan, metrics["tvd_by_subset"]["1"]
    )
    metrics["sds"] = None
    if release is not None:
        bins = _bucket_bins(counts.per_bucket)
        metrics["sds"] = {
            "reporting_length": reporting_length,
            **{
                side_name: _sds_side(per_subset, counts.per_bucket, bins, reporting_length, side)
                for side_name, side in (("release", "r"), ("synthetic", "y"))
            },
        }
    metrics["tstr"] = None
    if label is not None:
        metrics["tstr"] = _tstr(synthetic, sensitive, holdout, label, mapping, max_rows, seed, progress)
    metrics["privacy"] = None
    if release is not None:
        metrics["privacy"] = {key: release.manifest.get(key) for key in _PRIVACY_KEYS}
    log.info("evaluation done in %.2f s", time.perf_counter() - started)
    return metrics


def write_metrics(metrics: dict[str, Any], directory: str) -> str:
    """Write ``metrics`` as ``directory/metrics.json`` (UTF-8, indented), creating the directory.

    The file is written to a temporary name in the same directory and then renamed, so a reader never sees a
    half-written file.

    Args:
        metrics: the dict returned by :func:`evaluate` (any JSON-serialisable dict).
        directory: a local directory on the driver (a ``file:`` prefix is accepted).

    Returns:
        The path of the written file.

    Raises:
        InvalidParameterError: ``metrics`` is not a dict or holds a value JSON cannot represent (NaN included).
        OSError: the directory cannot be created or written.

    Privacy:
        The metrics are not differentially private (see :func:`evaluate`); store them with the sensitive data.
    """
    if not isinstance(metrics, dict):
        raise InvalidParameterError(f"metrics must be a dict, got {type(metrics).__name__}")
    try:
        text = json.dumps(metrics, indent=2, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise InvalidParameterError(f"metrics cannot be written as JSON: {err}") from err
    from spark_dpsynth.data.io import write_text_atomically

    path = write_text_atomically(directory, METRICS_FILE, text + "\n")
    return path


def true_aggregates(df: DataFrame, reporting_length: int) -> DataFrame:
    """The true aggregates A_R of a prepared table: every non-empty k-tuple and its exact count, k = 1..R.

    A k-tuple is k attributes (column, non-null value) from k distinct columns; its count is the number of
    records holding all k attributes (docs/design.md section 2.1). No noise, no contribution bounding: this is the
    set S that SDS's evaluator compares a release with (docs/design.md section 5).

    Args:
        df: a prepared table, d nullable string columns, null = empty.
        reporting_length: R, the longest tuples (an integer >= 1; lengths above d have no tuples).

    Returns:
        A DataFrame with the schema of a release's aggregates (:data:`spark_dpsynth.release.core.AGGREGATES_SCHEMA`):
        ``k int`` (1..min(R, d)), ``columns array<string>`` (k column names in table order),
        ``values array<string>`` (the k non-null values), ``count bigint`` (>= 1); one row per k-tuple present
        in ``df``. Row order is unspecified.

    Raises:
        SchemaError: a column is not a string column, a name repeats, or there are no columns.
        InvalidParameterError: ``reporting_length`` is not an integer >= 1.

    Privacy:
        None: the counts are exact. The result is sensitive data and must never be released.
    """
    columns = _check_table("df", df)
    r = v.integer("reporting_length", reporting_length, low=1)
    plan = _SubsetPlan(len(columns), all_cells_length=0, max_length=min(r, len(columns)))
    counts = _cell_counts(df, plan).groupBy(*plan.key_names).agg(F.sum("n").alias("count"))
    # Subset-sized (sum of C(d, k) rows): the column names of each subset id, joined as a broadcast table.
    names = df.sparkSession.createDataFrame(
        [(i, [columns[c] for c in subset]) for i, subset in enumerate(plan.subsets)],
        schema="subset int, columns array<string>",
    )
    values = F.slice(F.array(*(F.col(c) for c in plan.value_names)), F.lit(1), F.col("k"))
    return counts.join(F.broadcast(names), on="subset").select(
        F.col("k").cast("int").alias("k"),
        F.col("columns"),
        values.alias("values"),
        F.col("count").cast("bigint").alias("count"),
    )


# ---------------------------------------------------------------------------------------------------------------
# Train on synthetic, test on real (docs/design.md section 5)
# ---------------------------------------------------------------------------------------------------------------

_EMPTY_CATEGORY = "\x00<empty>"
"""Stand-in for a null (empty) cell, so that empty is a category of its own (no string of the data holds NUL)."""
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
    synthesizer nor either model saw (docs/design.md section 5; docs/design.md section 5). A TSTR score close to
    the TRTR score means a model trained on the synthetic data can be trusted about as much as one trained on
    the real data.

    Model: scikit-learn's ``HistGradientBoostingClassifier`` (``random_state`` fixes its early-stopping split)
    on ordinal codes declared categorical. Each feature's categories are learned on the model's own training
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

        The inputs are held in memory on the driver: pass bounded samples. :func:`evaluate` passes at most
        ``tstr_max_rows`` (default :data:`TSTR_MAX_ROWS`) rows of each table, chosen on Spark by a seeded
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
# Column subsets and the vectorized cell counter
# ---------------------------------------------------------------------------------------------------------------


class _SubsetPlan:
    """The column subsets a pass counts, their ids, and which of their cells it keeps.

    Subsets are ordered by length, then lexicographically by column index; a subset's id is its position.
    Subsets of length <= ``all_cells_length`` keep every cell (the empty value is a category); longer ones, up
    to ``max_length``, keep only cells without an empty value (the non-empty k-tuples of docs/design.md section 2.2).
    """

    def __init__(self, n_columns: int, *, all_cells_length: int, max_length: int) -> None:
        self.n_columns = n_columns
        self.all_cells_length = all_cells_length
        self.max_length = max_length
        self.subsets: list[tuple[int, ...]] = [
            s for k in range(1, max_length + 1) for s in itertools.combinations(range(n_columns), k)
        ]
        self.ids = {s: i for i, s in enumerate(self.subsets)}
        self.value_names = [f"v{j}" for j in range(max_length)]
        self.key_names = ["k", "subset", *self.value_names]

    def ddl(self) -> str:
        values = ", ".join(f"{name} string" for name in self.value_names)
        return f"k int, subset int, {values}, n bigint"


def _cell_counts(df: DataFrame, plan: _SubsetPlan) -> DataFrame:
    """Partial counts of the cells of every subset in ``plan``, one Arrow batch of ``df`` at a time.

    Returns a DataFrame ``k int, subset int, v0..v{max_length-1} string, n bigint``: ``v_j`` is the value of
    the subset's j-th column (null for empty, and null for j >= k), ``n`` the rows of one input batch in that
    cell. The same (subset, cell) appears once per batch; sum ``n`` over the key to get the cell's count.
    """
    names = [f"c{i}" for i in range(plan.n_columns)]
    selected = df.select(*(F.col(_quote(c)).alias(a) for c, a in zip(df.columns, names, strict=True)))
    counter = _BatchCellCounter(plan.n_columns, plan.all_cells_length, plan.max_length, plan.ids)
    return selected.mapInArrow(counter, plan.ddl())


class _BatchCellCounter:
    """The ``mapInArrow`` function: numpy group-by of each Arrow batch over every column subset.

    Per batch, each column is dictionary-encoded (null gets its own code); the code of a subset is built from
    the code of its prefix subset and its last column, then compressed to 0..cells-1 by ``np.unique``, which
    also gives each cell's count and a row that holds it. Subsets are visited depth-first, so memory is
    O(max_length * batch rows) whatever the number of subsets. Cells are emitted with their values taken
    from the representative rows (one Arrow ``take`` per value position).
    """

    def __init__(
        self, n_columns: int, all_cells_length: int, max_length: int, ids: dict[tuple[int, ...], int]
    ) -> None:
        self.n_columns = n_columns
        self.all_cells_length = all_cells_length
        self.max_length = max_length
        self.ids = ids

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            if batch.num_rows:
                yield from self._count(batch)

    def _count(self, batch: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
        n = batch.num_rows
        arrays = [batch.column(i) for i in range(self.n_columns)]
        codes: list[np.ndarray] = []
        null_codes: list[int] = []
        for a in arrays:
            encoded = pc.dictionary_encode(a)
            size = len(encoded.dictionary)
            codes.append(encoded.indices.fill_null(size).to_numpy(zero_copy_only=False).astype(np.int64))
            null_codes.append(size)
        flat = pa.concat_arrays(arrays)
        out = _Emitter(self.max_length, flat)

        def visit(cols: tuple[int, ...], code: np.ndarray) -> Iterator[pa.RecordBatch]:
            k = len(cols)
            extend = k < self.max_length and cols[-1] < self.n_columns - 1
            if extend:
                _, first, inverse, counts = np.unique(
                    code, return_index=True, return_inverse=True, return_counts=True
                )
            else:
                _, first, counts = np.unique(code, return_index=True, return_counts=True)
            if k > self.all_cells_length:  # keep the cells whose k values are all non-empty
                keep = np.ones(first.shape[0], dtype=bool)
                for c in cols:
                    keep &= codes[c][first] != null_codes[c]
                first, counts = first[keep], counts[keep]
            out.add(k, self.ids[cols], cols, first, n, counts)
            if out.rows >= _FLUSH_ROWS:
                yield out.flush()
            if extend:
                prefix = inverse.reshape(-1).astype(np.int64)
                for c in range(cols[-1] + 1, self.n_columns):
                    yield from visit((*cols, c), prefix * (null_codes[c] + 1) + codes[c])

        for c in range(self.n_columns):
            yield from visit((c,), codes[c])
        if out.rows:
            yield out.flush()


class _Emitter:
    """Accumulates (k, subset, representative rows, counts) and builds the output Arrow batches."""

    def __init__(self, max_length: int, flat: pa.Array) -> None:
        self.max_length = max_length
        self.flat = flat
        self._reset()

    def _reset(self) -> None:
        self.rows = 0
        self.ks: list[np.ndarray] = []
        self.subsets: list[np.ndarray] = []
        self.positions: list[list[np.ndarray]] = [[] for _ in range(self.max_length)]
        self.counts: list[np.ndarray] = []

    def add(
        self, k: int, subset: int, cols: Sequence[int], first: np.ndarray, n: int, counts: np.ndarray
    ) -> None:
        m = first.shape[0]
        if m == 0:
            return
        self.rows += m
        self.ks.append(np.full(m, k, dtype=np.int32))
        self.subsets.append(np.full(m, subset, dtype=np.int32))
        for j in range(self.max_length):
            # Position of the value in ``flat`` (column-major concatenation of the batch), or -1 for "none".
            self.positions[j].append(cols[j] * n + first if j < k else np.full(m, -1, dtype=np.int64))
        self.counts.append(counts.astype(np.int64))

    def flush(self) -> pa.RecordBatch:
        arrays: list[pa.Array] = [
            pa.array(np.concatenate(self.ks), type=pa.int32()),
            pa.array(np.concatenate(self.subsets), type=pa.int32()),
        ]
        for j in range(self.max_length):
            pos = np.concatenate(self.positions[j]).astype(np.int64)
            arrays.append(self.flat.take(pa.array(pos, type=pa.int64(), mask=pos < 0)))
        arrays.append(pa.array(np.concatenate(self.counts), type=pa.int64()))
        names = ["k", "subset", *(f"v{j}" for j in range(self.max_length)), "n"]
        self._reset()
        return pa.RecordBatch.from_arrays(arrays, names=names)


# ---------------------------------------------------------------------------------------------------------------
# Spark-side aggregation
# ---------------------------------------------------------------------------------------------------------------


def _release_cells(release: Release, plan: _SubsetPlan, like: DataFrame) -> DataFrame:
    """The release's tuples as rows of the cell table: (k, subset, v0.., n_s = 0, n_y = 0, n_r = count).

    Built column-wise with numpy and handed to Spark as one Arrow table (release-sized: one row per tuple).
    """
    ks: list[np.ndarray] = []
    subsets: list[np.ndarray] = []
    values: list[list[np.ndarray]] = [[] for _ in range(plan.max_length)]
    counts: list[np.ndarray] = []
    for k, marginal in sorted(release.marginals.items()):
        m = len(marginal)
        if m == 0 or k > plan.max_length:
            continue
        unique_cols, inverse = np.unique(marginal.columns, axis=0, return_inverse=True)
        ids = np.array([plan.ids[tuple(row)] for row in unique_cols.tolist()], dtype=np.int32)
        ks.append(np.full(m, k, dtype=np.int32))
        subsets.append(ids[inverse.reshape(-1)])
        for j in range(plan.max_length):
            decoded = np.full(m, None, dtype=object)
            if j < k:
                for c in np.unique(marginal.columns[:, j]).tolist():
                    rows = marginal.columns[:, j] == c
                    decoded[rows] = np.asarray(release.domains[c], dtype=object)[marginal.values[rows, j]]
            values[j].append(decoded)
        counts.append(marginal.counts.astype(np.int64))

    def cat(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
        return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)

    n_rows = sum(len(c) for c in counts)
    table = pa.table(
        {
            "k": pa.array(cat(ks, np.int32), type=pa.int32()),
            "subset": pa.array(cat(subsets, np.int32), type=pa.int32()),
            **{
                name: pa.array(cat(values[j], object), type=pa.string())
                for j, name in enumerate(plan.value_names)
            },
            "n_s": pa.array(np.zeros(n_rows, dtype=np.int64)),
            "n_y": pa.array(np.zeros(n_rows, dtype=np.int64)),
            "n_r": pa.array(cat(counts, np.int64), type=pa.int64()),
        }
    )
    # Release-sized: one row per released tuple (the DP release is already held by the driver).
    return like.sparkSession.createDataFrame(table)


class _Counts(NamedTuple):
    """What the one Spark job of :func:`evaluate` returns to the driver (subset- and bucket-sized)."""

    per_subset: dict[int, dict[str, Any]]
    """subset id -> the per-subset sums (see :func:`_aggregate`)."""
    per_bucket: dict[tuple[int, int], dict[str, Any]]
    """(k, count bucket index j, upper bound 10 * 2**j) -> the same sums over that length's tuples in the bucket."""
    top_values: dict[int, list[tuple[str | None, int, int]]]
    """1-column subset id -> up to :data:`_ONE_WAY_VALUES` (value, sensitive count, synthetic count)."""


def _bucket_index(count: Column) -> Column:
    """SDS's count bucket of a positive ``count``: the smallest j with count <= 10 * 2**j (0 for count <= 10).

    A floating-point log2 gives the candidate; two comparisons with the exact bounds 10 * 2**j (powers of two
    are exact in a double, and cast to bigint) correct it.
    """
    ratio = F.greatest(count.cast("double") / F.lit(float(_BUCKET_FIRST)), F.lit(1.0))
    j = F.ceil(F.log2(ratio)).cast("int")

    def bound(exponent: Column) -> Column:
        return (F.lit(float(_BUCKET_FIRST)) * F.pow(F.lit(2.0), exponent)).cast("bigint")

    j = F.when(bound(j) < count, j + 1).otherwise(j)
    return F.when((j > 0) & (bound(j - 1) >= count), j - 1).otherwise(j)


def _aggregate(union: DataFrame, plan: _SubsetPlan, sds_length: int, resolution: int) -> _Counts:
    """Sum the partial cell counts and reduce them to per-subset and per-bucket sums, in one Spark job.

    ``union`` holds partial counts ``k, subset, v0.., n_s, n_y, n_r`` (sensitive, synthetic, release). It is
    hash-partitioned on ``subset`` once; the cell sums, the per-subset totals (a window over the subset), the
    per-(subset, count bucket) aggregates and the top values of the 1-column subsets then all run in those
    partitions without another shuffle (the two branches of the final union reuse the one exchange).

    Returns:
        :class:`_Counts`. Per subset (and per (k, bucket)): ``k``; ``rows_s``, ``rows_y`` = the sum of the
        sensitive / synthetic counts over the subset's cells (the number of rows for subsets whose empty
        cells are kept); ``blank_s``, ``blank_y`` = the count of the empty cell of a 1-column subset (0 for
        longer subsets); ``tvd2`` = sum over cells of |n_s rows_y - n_y rows_s| (exact integer; the subset's
        TVD is tvd2 / (2 rows_s rows_y)); and, for subsets of length <= ``sds_length`` and their non-empty
        cells (tuples): ``s``, ``y``, ``r`` = tuples with a positive sensitive / synthetic / release count,
        ``sy``, ``sr`` = tuples in both, ``sy_err``, ``sr_err`` = sum of |count - sensitive count| over those
        common tuples, ``rare_s`` = tuples with 0 < sensitive count < ``resolution``, and per side X in
        {y, r}: ``leak_X`` = rare tuples with a positive X count; over the evaluated tuples P_X (sensitive
        count >= resolution, or X count > 0): ``p_X`` = |P_X|, ``pres_X`` = sum of min(X/S, 1) (0 if S = 0),
        ``perr_X`` = sum of |X - S| / S (1 if S = 0), ``abserr_X`` = sum of |X - S|, ``cnt_X`` = sum of X,
        ``true_X`` = sum of S. Each tuple's bucket is that of its sensitive count (:func:`_bucket_index`).
    """
    k = F.col("k")
    n_s, n_y, n_r = F.col("n_s"), F.col("n_y"), F.col("n_r")
    cells = (
        union.repartition(F.col("subset"))
        .groupBy(*plan.key_names)
        .agg(*(F.sum(c).alias(c) for c in ("n_s", "n_y", "n_r")))
    )
    per_subset = Window.partitionBy("subset")
    cells = cells.withColumn("rows_s", F.sum(n_s).over(per_subset)).withColumn(
        "rows_y", F.sum(n_y).over(per_subset)
    )
    dec = T.DecimalType(38, 0)
    diff = F.abs(n_s.cast(dec) * F.col("rows_y").cast(dec) - n_y.cast(dec) * F.col("rows_s").cast(dec))
    in_tvd = k <= F.lit(plan.all_cells_length)
    blank = (k == F.lit(1)) & F.col("v0").isNull()
    non_empty: Column = k <= F.lit(sds_length)
    for j, name in enumerate(plan.value_names):
        non_empty = non_empty & ((k <= F.lit(j)) | F.col(name).isNotNull())
    in_s, in_y, in_r = non_empty & (n_s > 0), non_empty & (n_y > 0), non_empty & (n_r > 0)
    rare = in_s & (n_s < F.lit(resolution))

    def count_if(cond: Column, name: str) -> Column:
        return F.sum(F.when(cond, F.lit(1)).otherwise(F.lit(0))).cast("bigint").alias(name)

    def sum_if(cond: Column, value: Column, name: str) -> Column:
        return F.coalesce(F.sum(F.when(cond, value)), F.lit(0)).cast("bigint").alias(name)

    def fsum_if(cond: Column, value: Column, name: str) -> Column:
        return F.coalesce(F.sum(F.when(cond, value)), F.lit(0.0)).cast("double").alias(name)

    side_aggs: list[Column] = []
    for side, n_x in (("y", n_y), ("r", n_r)):
        evaluated = non_empty & ((n_s >= F.lit(resolution)) | (n_x > 0))
        true = n_s.cast("double")
        preservation = F.when(n_s > 0, F.least(n_x, n_s).cast("double") / true).otherwise(F.lit(0.0))
        proportional = F.when(n_s > 0, F.abs(n_x - n_s).cast("double") / true).otherwise(F.lit(1.0))
        side_aggs += [
            count_if(rare & (n_x > 0), f"leak_{side}"),
            count_if(evaluated, f"p_{side}"),
            fsum_if(evaluated, preservation, f"pres_{side}"),
            fsum_if(evaluated, proportional, f"perr_{side}"),
            sum_if(evaluated, F.abs(n_x - n_s), f"abserr_{side}"),
            sum_if(evaluated, n_x, f"cnt_{side}"),
            sum_if(evaluated, n_s, f"true_{side}"),
        ]

    agg = (
        cells.withColumn("bucket", F.when(non_empty, _bucket_index(n_s)))
        .groupBy("k", "subset", "bucket")
        .agg(
            F.max("rows_s").cast("bigint").alias("rows_s"),
            F.max("rows_y").cast("bigint").alias("rows_y"),
            sum_if(blank, n_s, "blank_s"),
            sum_if(blank, n_y, "blank_y"),
            F.coalesce(F.sum(F.when(in_tvd, diff)), F.lit(0).cast(dec)).alias("tvd2"),
            count_if(in_s, "s"),
            count_if(in_y, "y"),
            count_if(in_r, "r"),
            count_if(in_s & in_y, "sy"),
            count_if(in_s & in_r, "sr"),
            sum_if(in_s & in_y, F.abs(n_y - n_s), "sy_err"),
            sum_if(in_s & in_r, F.abs(n_r - n_s), "sr_err"),
            count_if(rare, "rare_s"),
            *side_aggs,
        )
        .withColumn("kind", F.lit("subset"))
    )
    # The top values of each 1-column subset. This branch must share the exchange (the one pass over every
    # table) with the other: Spark reuses an exchange only for identical subplans. So it keeps n_r in its
    # output although it does not need it (column pruning would drop n_r below the shuffle), and it filters on
    # k only after a window over the whole subset (a filter on k alone would be pushed below the shuffle).
    rank = F.row_number().over(
        Window.partitionBy("subset").orderBy(F.desc(n_s + n_y), F.col("v0").asc_nulls_first())
    )
    top = (
        cells.withColumn("rank", rank)
        .where((k == F.lit(1)) & ((n_s + n_y) > 0) & (F.col("rank") <= F.lit(_ONE_WAY_VALUES)))
        .select(
            F.lit("value").alias("kind"), "k", "subset", "v0", n_s.alias("s"), n_y.alias("y"), n_r.alias("r")
        )
    )
    out = _Counts({}, {}, {})
    # Subset-sized: one row per (column subset, count bucket), about sum of C(d, L) * log2(n / 10) rows, plus
    # at most _ONE_WAY_VALUES rows per column.
    for row in agg.unionByName(top, allowMissingColumns=True).collect():
        d = row.asDict()
        kind, subset, bucket = d.pop("kind"), int(d.pop("subset")), d.pop("bucket")
        if kind == "value":
            out.top_values.setdefault(subset, []).append((d["v0"], int(d["s"]), int(d["y"])))
            continue
        d.pop("v0", None)
        values = {key: (int(x) if isinstance(x, decimal.Decimal) else x) for key, x in d.items()}
        _add_into(out.per_subset.setdefault(subset, {}), values)
        if bucket is not None:
            _add_into(out.per_bucket.setdefault((int(values["k"]), int(bucket)), {}), values)
    for values_of_column in out.top_values.values():
        values_of_column.sort(key=lambda t: (-(t[1] + t[2]), t[0] is not None, t[0] or ""))
    return out


def _add_into(total: dict[str, Any], values: dict[str, Any]) -> None:
    """Add ``values`` into ``total`` key by key (``k``, ``rows_s``, ``rows_y`` are per subset: kept, not added)."""
    for key, value in values.items():
        if value is None:
            continue
        if key in ("k", "rows_s", "rows_y"):
            total[key] = max(total.get(key, 0), value)
        else:
            total[key] = total.get(key, 0) + value


# ---------------------------------------------------------------------------------------------------------------
# Driver-side summaries (subset-sized)
# ---------------------------------------------------------------------------------------------------------------


def _tvd_metrics(
    per_subset: dict[int, dict[str, Any]], plan: _SubsetPlan, columns: tuple[str, ...]
) -> dict[str, Any]:
    """``tvd`` and ``tvd_by_subset`` of :func:`evaluate`, each TVD = tvd2 / (2 n n_syn) rounded once."""
    tvd: dict[str, Any] = {}
    by_subset: dict[str, dict[str, float]] = {}
    for length in range(1, plan.all_cells_length + 1):
        values: dict[str, float] = {}
        for subset in itertools.combinations(range(plan.n_columns), length):
            row = per_subset[plan.ids[subset]]
            name = _SUBSET_SEPARATOR.join(columns[c] for c in subset)
            values[name] = float(Fraction(row["tvd2"], 2 * row["rows_s"] * row["rows_y"]))
        worst = max(values, key=lambda name: values[name])
        tvd[str(length)] = {
            "mean": float(np.mean(list(values.values()))),
            "max": values[worst],
            "count": len(values),
            "worst": worst,
        }
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


def _bucket_bins(per_bucket: dict[tuple[int, int], dict[str, Any]]) -> list[int]:
    """The bucket indices 0..J, J the largest bucket holding an evaluated tuple of either side (at least 0)."""
    used = [j for (_, j), row in per_bucket.items() if row.get("p_y", 0) or row.get("p_r", 0)]
    return list(range(max(used, default=0) + 1))


def _mean(total: float, size: int) -> float | None:
    return total / size if size else None


def _sds_side(
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

        by_bucket[str(_BUCKET_FIRST << j)] = {
            "lower": 0 if j == 0 else _BUCKET_FIRST << (j - 1),
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


# ---------------------------------------------------------------------------------------------------------------
# Train on synthetic, test on real: the Spark side
# ---------------------------------------------------------------------------------------------------------------


def _check_label(
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


def _tstr(
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
    with _stage(f"train-on-synthetic / test-on-real: samples of at most {max_rows} rows each", progress):
        frames = [_bounded_sample(df, max_rows, seed) for df in (synthetic, sensitive, holdout)]
    for frame in frames:
        if mapping:
            frame[label] = frame[label].replace(mapping)
    try:
        with _stage("train-on-synthetic / test-on-real: fit and score two classifiers", progress):
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
    order = F.xxhash64(*(F.col(_quote(c)) for c in df.columns), F.lit(seed))
    # Bounded: at most max_rows rows (a top-N sort; each task keeps at most max_rows rows).
    return df.orderBy(order).limit(max_rows).toPandas()


# ---------------------------------------------------------------------------------------------------------------
# Validation, logging
# ---------------------------------------------------------------------------------------------------------------


def _check_table(name: str, df: DataFrame) -> tuple[str, ...]:
    """The columns of a prepared table, after checking them on the schema (no data is read)."""
    fields = df.schema.fields
    columns = tuple(f.name for f in fields)
    if not columns:
        raise SchemaError(f"the {name} table has no columns")
    repeated = sorted({c for c in columns if columns.count(c) > 1})
    if repeated:
        raise SchemaError(f"the {name} table repeats column name(s) {repeated}")
    wrong = [
        f"{f.name} ({f.dataType.simpleString()})" for f in fields if not isinstance(f.dataType, T.StringType)
    ]
    if wrong:
        raise SchemaError(
            f"the {name} table must have string columns (a prepared table, null = empty); got {wrong}"
        )
    return columns


def _mismatch(what: str, got: tuple[str, ...], expected: tuple[str, ...]) -> str:
    missing = [c for c in expected if c not in got]
    extra = [c for c in got if c not in expected]
    if missing or extra:
        return f"{what} must have the sensitive table's columns; missing {missing}, unexpected {extra}"
    return (
        f"{what} must have the sensitive table's columns in the same order {list(expected)}, got {list(got)}"
    )


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _as_long(column: str, name: str) -> Column:
    return F.col(column).cast("bigint").alias(name)


def _zero(name: str) -> Column:
    return F.lit(0).cast("bigint").alias(name)


@contextmanager
def _stage(name: str, progress: Callable[[str], None] | None) -> Iterator[None]:
    """Log (and report through ``progress``) the start and end of a stage with its duration."""
    log.info("%s: started", name)
    if progress is not None:
        progress(f"{name}...")
    started = time.perf_counter()
    try:
        yield
    except BaseException:
        log.info("%s: failed after %.2f s", name, time.perf_counter() - started)
        raise
    seconds = time.perf_counter() - started
    log.info("%s: done in %.2f s", name, seconds)
    if progress is not None:
        progress(f"{name}: done in {seconds:.1f} s")
