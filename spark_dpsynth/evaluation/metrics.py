"""Evaluate stage: compare a synthetic table (and a DP release) with the sensitive table.

``evaluate(sensitive, synthetic, release)`` returns plain, JSON-serialisable metrics (docs/design.md section 5), and
``write_metrics`` writes them to ``metrics.json`` (``spark_dpsynth.evaluation.report`` turns them into ``report.html``).
The metrics are:

* ``rows``, ``record_expansion`` (n_syn / n - 1) and ``blank_cell_share`` of both tables;
* ``tvd`` and ``tvd_by_subset``: the total variation distance between the sensitive and the synthetic L-way
  column marginals, for every column subset of length L = 1..``max_marginal_length``, the empty value counted
  as a category of its own, and ``k_marginal_score`` = 1000 (1 - mean 3-way TVD) (docs/design.md section 5.2);
  ``one_way_worst``: the value shares of the worst 1-way columns;
* ``nist_k_marginal_score`` and ``nist_k_marginal``: NIST's k-marginal score by SDNist 2.4's own formula (group
  column x 2-way marginals, SDNist's bins; :mod:`~spark_dpsynth.evaluation.nist`), when the tables have SDNist's
  group column ``PUMA`` or the caller names group columns;
* ``sds``: Microsoft SDS's evaluator (docs/design.md section 5.1; SDS ``packages/core/src/processing/evaluator``) of
  the release's aggregates and of the synthetic table's aggregates, both against the true aggregates of the
  sensitive table (:func:`true_aggregates`), per length k = 1..R: suppressed %, fabricated %, mean absolute
  error, preservation, mean proportional error, leakage count (true tuples rarer than the resolution that
  appear); and per count bucket (10, 20, 40, ...) of the true count: preservation and errors;
* ``empty_share_by_column`` and ``empty_columns``: the columns that released nothing or almost nothing
  (:mod:`~spark_dpsynth.evaluation.coverage`);
* ``numeric``: per numeric, date or timestamp column the Kolmogorov-Smirnov and Wasserstein-1 distances, and the
  difference of the Pearson correlation matrices (docs/design.md section 5.4; :mod:`~spark_dpsynth.evaluation.numeric`,
  one more aggregation pass over each table);
* ``tstr``: train-on-synthetic / test-on-real against train-on-real accuracy and F1 for a label column, tested
  on held-out real rows (docs/design.md section 5.3; :func:`train_synthetic_test_real`);
* ``privacy``: the release manifest's privacy parameters, for the report.
* ``identifier_columns``: the release's identifier columns (left out of the measurement by configuration,
  synthetic surrogate keys; docs/design.md section 2.8): never compared, never counted as empty.

This module checks the inputs, runs the parts in order and assembles the dict: the cell counts on Spark are
:mod:`spark_dpsynth.evaluation.cells`, the scores :mod:`~spark_dpsynth.evaluation.tvd`,
:mod:`~spark_dpsynth.evaluation.sds_evaluator` and :mod:`~spark_dpsynth.evaluation.tstr`.

Privacy: the evaluation reads the sensitive data and adds no noise. Its outputs (true counts of tuples, true
number of records, exact distances, classifier scores) are NOT differentially private and must not be published
or shared as if they were part of the DP release; they are for the data owner who already holds the sensitive
table. Logs and progress messages name stages and durations only, never a count.

Computation: everything record-level runs in Spark, in one Spark job. Each table is read once: a vectorized
``mapInArrow`` pass (numpy over Arrow batches, no row-at-a-time UDF) emits, per batch, the partial count of every
cell of every column subset. The sensitive, synthetic and release counts are stacked with ``unionByName`` (no
join on nullable keys), shuffled once by column subset, summed per cell, and reduced to one row per (column
subset, count bucket) (per-subset totals come from a window over the subset, in the same partitions), plus the
12 most frequent values of each column (from the same cell sums, persisted so that the pass over the tables runs
once). The driver receives only those rows (about sum of C(d, L) times log2(n / 10) of them) and, when a release
is given, holds the release, which it hands to Spark as one small Arrow table. The classifiers of ``tstr`` are
the one exception: they run on the driver, on at most ``tstr_max_rows`` rows of each table (default 100,000), a
top-N by a seeded hash of the row. Tables above ``max_rows`` rows (default 1,000,000) are counted on a seeded uniform sample of
their rows (``row_sampling``), best drawn before the tables are prepared (:class:`RowSampling`: each table is then
read once, and only the sampled rows are prepared). DataFrame API only (no RDD, no SparkContext, no JVM access), so it also runs on Spark Connect.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from functools import reduce
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_dpsynth import _validate as v
from spark_dpsynth.errors import InvalidParameterError, SchemaError
from spark_dpsynth.evaluation._common import check_table, failure_reason, mismatch, quote, timed_stage
from spark_dpsynth.evaluation.cells import SubsetPlan, aggregate, cell_counts, release_cells
from spark_dpsynth.evaluation.coverage import merge_coverage, release_coverage, synthetic_coverage
from spark_dpsynth.evaluation.nist import nist_group_columns as resolve_nist_groups
from spark_dpsynth.evaluation.nist import nist_k_marginal
from spark_dpsynth.evaluation.numeric import (
    COLUMNS_PER_PASS,
    check_numeric_columns,
    numeric_metrics,
)
from spark_dpsynth.evaluation.sds_evaluator import bucket_bins, sds_side
from spark_dpsynth.evaluation.tstr import check_label, tstr_metrics
from spark_dpsynth.evaluation.tvd import one_way_worst, tvd_metrics
from spark_dpsynth.evaluation.yardstick import (
    CATEGORICAL_MAX_VALUES,
    QUANTILE_BINS,
    Yardstick,
    build_yardstick,
)

if TYPE_CHECKING:
    from spark_dpsynth.release.core import Release

__all__ = [
    "evaluate",
    "write_metrics",
    "true_aggregates",
    "METRICS_FILE",
    "METRICS_VERSION",
    "PRIVACY_KEYS",
    "SDS_RESOLUTION",
    "TSTR_MAX_ROWS",
    "MAX_SUBSETS",
    "MAX_ROWS",
    "describe_sampling",
    "describe_row_sampling",
    "describe_out_of_support",
    "describe_real_sample",
    "RowSampling",
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
MAX_SUBSETS = 2_000
"""Default bound on the L-column subsets :func:`evaluate` compares per length L >= 2: a length with more
(C(d, L) > 2,000, e.g. the 70,300 3-column subsets of a 76-column table) is compared on 2,000 subsets drawn
by a seeded, public choice (docs/design.md section 5.5)."""

MAX_ROWS = 1_000_000
"""Default bound on the rows of each table the evaluation counts exactly: a larger table (by the release's
protected number of records for the sensitive table, by its count for the synthetic one) is evaluated on a
seeded hash sample of about this many rows (docs/design.md section 5.5)."""
SAMPLE_ROWS_PER_PARTITION = 250_000
"""Rows per partition of a table sampled by :meth:`RowSampling.sample` when the evaluation reads it (about
``max_rows`` / this partitions: 4 at the default)."""
_DRAW = "__evaluation_draw"
"""The uniform random column of a sampled table (dropped once the sample is drawn)."""
_SYNTHETIC_SEED = 0x5DEECE66D
"""XORed into the seed of the synthetic table's draw (the sensitive table uses the seed itself)."""

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
    max_subsets: int = MAX_SUBSETS,
    subset_seed: int = 0,
    max_rows: int = MAX_ROWS,
    progress: Callable[[str], None] | None = None,
    numeric_columns: Sequence[str] | None = None,
    typed_sensitive: DataFrame | None = None,
    typed_synthetic: DataFrame | None = None,
    row_sampling: RowSampling | None = None,
    bins: Mapping[str, Sequence[float]] | None = None,
    floor_sensitive: DataFrame | None = None,
    nist_group_columns: Sequence[str] | None = None,
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
        max_subsets: the most L-column subsets compared per length L >= 2 (an integer >= 0; 0: every
            subset; default :data:`MAX_SUBSETS` = 2,000). A length with C(d, L) > ``max_subsets`` is compared
            on ``max_subsets`` subsets drawn uniformly without replacement from the column count, L and
            ``subset_seed`` alone (never from the data; docs/design.md section 5.5): the TVD means, the NIST
            score and SDS's evaluator of that length are then over the sample, and the result says so
            (``subset_sampling``, ``tvd[L]["sampled"]``). Every 1-column subset is always compared.
        subset_seed: the seed of that choice (an integer); the same seed and column count give the same
            subsets, whatever the data and its partitioning.
        max_rows: the most rows of each table counted exactly (an integer >= 0; 0: every row; default
            :data:`MAX_ROWS` = 1,000,000). A table with more rows (the sensitive table: by the release's public
            protected number of records n' when a release is given, else by a count; the synthetic table: by
            a count, cheap for a table read from files) is evaluated on the rows whose seeded 64-bit hash of
            their values falls below the rate max_rows / rows (Bernoulli sampling, about ``max_rows`` rows,
            the same rows whatever the partitioning; docs/design.md section 5.5). The distances, shares and
            numeric metrics are then those of the samples, ``rows`` stays the tables' sizes (observed in the
            same pass), SDS's evaluator (exact counts) is skipped, and ``row_sampling`` says so.
        progress: called with a short message when a stage starts and ends (e.g. to drive a progress bar).
        numeric_columns: the columns to compare as numbers, dates or timestamps (``numeric``); None: the
            numeric, date and timestamp columns of ``typed_sensitive`` (none without it).
        typed_sensitive: the sensitive table with its own column types (e.g. the input before
            :func:`~spark_dpsynth.data.prepare.prepare`, empty cells null), holding ``numeric_columns``;
            default ``sensitive`` (strings, cast to double).
        typed_synthetic: the synthetic table as the synthesizer wrote it (its own types or strings); default
            ``synthetic``.
        row_sampling: the tables were derived from samples :meth:`RowSampling.sample` drew before they were
            prepared (``sensitive`` and ``typed_sensitive`` from the sensitive sample, ``synthetic`` and
            ``typed_synthetic`` from the synthetic one): they are compared as given, ``max_rows`` and ``seed``
            of the row sampling are those of ``row_sampling``, and its persisted samples are released when
            the evaluation returns (docs/design.md section 5.5). None: the tables are sampled here, after they
            were prepared (and the typed tables at the same rates, on their own values).
        bins: public bin edges per column (the configuration's ``[data.bins]``) for the yardstick's binned
            columns; others are cut at the sensitive deciles (docs/design.md section 5.2). Never the release's.
        floor_sensitive: a second uniform sample of the sensitive table, disjoint from the compared one, in the
            form of ``typed_sensitive`` (``RowSampling.floor``): its TVD to the compared sample is
            ``tvd[L]["floor_measured"]`` (docs/design.md section 5.5).
        nist_group_columns: the group columns of NIST's k-marginal score (SDNist's ``group_features``); None:
            ``("PUMA",)`` when the tables have a ``PUMA`` column, else no NIST score; ``()``: SDNist's formula
            without groups (docs/design.md section 5.2).

    Returns:
        A JSON-serialisable dict with these keys (lengths are decimal strings ``"1"``, ``"2"``, ...; a value
        that is undefined, e.g. a percentage of an empty set, is ``None``):

        * ``metrics_version`` (int): :data:`METRICS_VERSION`.
        * ``differentially_private`` (bool): always ``False`` (see Privacy).
        * ``columns`` (list[str]): the attribute columns, in order.
        * ``max_marginal_length`` (int): min(``max_marginal_length``, d), the longest subsets in ``tvd``.
        * ``subset_sampling``: ``{"max_subsets", "seed", "sampled": {L: bool}, "compared": {L: count},
          "total": {L: C(d, L)}, "method"}`` for L = 1..max(``max_marginal_length``, R) (capped at d): which
          lengths were compared on a seeded sample of their subsets (``method`` describes the draw).
        * ``resolution`` (int): r.
        * ``rows``: ``{"sensitive": n, "synthetic": n_syn}`` (the tables' sizes, also when rows were sampled).
        * ``row_sampling``: ``{"max_rows", "seed", "sampled", "method", "sensitive": T, "synthetic": T,
          "sds_skipped"}``, T = ``{"sampled", "rate", "rows", "rows_compared", "cdf_error_95"}``: whether the
          table was compared on a seeded hash sample of its rows (``max_rows``), at which rate, its size, the
          rows compared, and the Dvoretzky-Kiefer-Wolfowitz bound on the sample's CDF error at 95%
          (sqrt(ln 40 / (2 rows_compared)), 0 when not sampled); ``sds_skipped``: why SDS's evaluator was
          skipped (None when it ran or there is no release). Without sampling, every entry below is over all rows.
        * ``record_expansion`` (float): n_syn / n - 1 (SDS's evaluator; docs/design.md section 5).
        * ``blank_cell_share``: ``{"sensitive": s, "synthetic": s_syn}``, the share in [0, 1] of null cells
          among the n * d (resp. n_syn * d) cells (docs/design.md section 5).
        * ``tvd``: per length L, ``{"mean": m, "max": x, "count": c, "worst": "colA|colB"}`` over the c
          compared L-column subsets (c = C(d, L) unless sampled; a sampled length also has ``"sampled": True``,
          ``"subsets_total": C(d, L)`` and ``"subsets"``, the column indices of its c subsets) of the total
          variation distance 0.5 * sum over cells |p - q| in [0, 1], p (q) =
          the cell's count in the sensitive (synthetic) table / n (n_syn), the empty value being a category
          of its own; ``worst`` names the subset with the largest TVD (first in ``tvd_by_subset`` order).
        * ``tvd_by_subset``: per length L, ``{"colA|colB": tvd, ...}`` for every L-column subset, columns
          joined by ``"|"`` in table order (keys are listed in the order of ``itertools.combinations``, so a
          reader can rebuild the subsets from ``columns`` even when a name contains ``"|"``; for a sampled
          length, in the order of ``tvd[L]["subsets"]``), for every compared L-column subset.
        * ``k_marginal_score`` (float | None): 1000 * (1 - mean 3-way TVD), in [0, 1000], over every
          3-column subset, or over the sampled ones when ``tvd["3"]["sampled"]``; None when fewer than 3
          columns or ``max_marginal_length`` < 3. Not NIST's score (that is ``nist_k_marginal_score``).
        * ``nist_k_marginal_score`` (float | None): NIST's k-marginal score in [0, 1000] by SDNist 2.4's formula
          (:func:`~spark_dpsynth.evaluation.nist.nist_k_marginal`: 1000 (1 - mean TVD) of the marginals group
          columns x every pair of the other columns but ``INDP``, on SDNist's bins, before SDNist's int()); None
          without group columns (``nist_group_columns``) or without a pair column.
        * ``nist_k_marginal``: None, or the rest of that result: ``group_columns``, ``columns`` (the pair
          columns), ``pairs``, ``binning`` (column -> ``percentile``, ``density`` or ``codes``) and
          ``score_by_group`` (group value -> SDNist's per-group score in [0, 1000]); or ``{"failed": reason}``
          (then also in ``failed_metrics``).
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

        * ``empty_share_by_column``: column -> ``{"sensitive": e_s, "synthetic": e_y}``, the share of its
          empty cells in each table.
        * ``empty_columns``: the columns that released nothing or almost nothing, one dict per column, in
          table order (:mod:`spark_dpsynth.evaluation.coverage`; docs/design.md section 5.4): with a release,
          ``released_values`` and ``released_share`` (the release's 1-tuples of the column, their noisy counts
          / n'), listed when no value or less than 50% of n' was released; ``sensitive_empty_share`` and
          ``synthetic_empty_share``, listed when the synthetic share of non-empty cells is below 50% of the
          sensitive one; ``binned``, ``advice`` (what to do).
        * ``numeric``: None without numeric columns; else
          :func:`spark_dpsynth.evaluation.numeric.numeric_metrics`'s dict: per column the Kolmogorov-Smirnov
          and Wasserstein-1 distances (on quantiles from ``percentile_approx``, error bounds stated), the
          castable share of its values, and the difference of the Pearson correlation matrices.
        * ``tstr``: None without ``label``; else, when it ran, :func:`train_synthetic_test_real`'s dict plus
          ``max_rows`` and ``skipped`` = None; when it could not run, ``{"label": label, "skipped": reason}``.
        * ``failed_metrics``: metric -> the reason it failed (the exception class and Spark's error condition,
          never a value; docs/design.md section 5.6); such a metric's entry (``numeric``, ``tstr``) is then
          ``{"failed": reason}`` and the others are computed. A table with no rows defines no distance: the
          entry ``distances`` says so, ``tvd`` is empty and the shares are None.
        * ``privacy``: None without a release; else the release manifest's public privacy parameters
          (``epsilon``, ``delta``, ``rho``, ``reporting_length``, ``sigmas``, ``noise_std``, ``sensitivities``
          (Delta_k), ``thresholds`` (rho_k), ``protected_number_of_records``, ``accounting``,
          ``accuracy_mode``, ``fabrication_mode``, ``noise_sampler``, ``test_mode``; a key the manifest lacks
          is None).

    Raises:
        SchemaError: the two tables' columns differ (names or order), a column is not a string column, a
            column name repeats, there are no columns, the release's or the held-out table's columns are not
            the tables' columns, ``label`` is not a column, a numeric column is missing from a typed table,
            repeats, or is neither numeric, date, timestamp nor string, or a ``nist_group_columns`` entry is
            not a column or repeats.
        InvalidParameterError: ``max_marginal_length``, ``resolution`` or ``tstr_max_rows`` is not an integer
            >= 1, ``max_subsets`` is not an integer >= 0, ``seed`` or ``subset_seed`` is not an integer, ``label_values`` is not a mapping of strings, ``progress`` is not
            callable, ``nist_group_columns`` is a string.

    Privacy:
        None: the result is computed from the sensitive data without noise. It is not differentially private
        and must not be shared as if it were (see the module docstring).
    """
    started = time.perf_counter()
    columns = check_table("sensitive", sensitive)
    syn_columns = check_table("synthetic", synthetic)
    if syn_columns != columns:
        raise SchemaError(mismatch("synthetic", syn_columns, columns))
    length = v.integer("max_marginal_length", max_marginal_length, low=1)
    res = v.integer("resolution", resolution, low=1)
    tstr_rows = v.integer("tstr_max_rows", tstr_max_rows, low=1)
    seed = v.integer("seed", seed)
    bound_rows = v.integer("max_rows", max_rows, low=0)
    bound = v.integer("max_subsets", max_subsets, low=0)
    subset_seed = v.integer("subset_seed", subset_seed)
    if progress is not None and not callable(progress):
        raise InvalidParameterError(f"progress must be a callable or None, got {type(progress).__name__}")
    if release is not None and tuple(release.columns) != columns:
        raise SchemaError(mismatch("the release", tuple(release.columns), columns))
    mapping = check_label(label, label_values, columns)
    nist_groups = resolve_nist_groups(columns, nist_group_columns)
    typed_s = sensitive if typed_sensitive is None else typed_sensitive
    typed_y = synthetic if typed_synthetic is None else typed_synthetic
    if numeric_columns is None and typed_sensitive is None:
        numeric_columns = ()
    numeric_kinds = check_numeric_columns(typed_s, typed_y, numeric_columns)
    if label is not None and holdout is not None:
        hold_columns = check_table("holdout", holdout)
        if hold_columns != columns:
            raise SchemaError(mismatch("the held-out table", hold_columns, columns))

    if row_sampling is not None and not isinstance(row_sampling, RowSampling):
        raise InvalidParameterError(
            f"row_sampling must be a RowSampling or None, got {type(row_sampling).__name__}"
        )
    # The yardstick's source (docs/design.md section 5.2): the typed tables when they hold every compared
    # column (the input's own values and types), else the tables as given.
    typed_source = typed_sensitive is not None and all(
        c in t.columns for t in (typed_s, typed_y) for c in columns
    )
    sampling = row_sampling if row_sampling is not None else RowSampling(bound_rows, seed)
    try:
        source_s, source_y = (typed_s, typed_y) if typed_source else (sensitive, synthetic)
        floor_s = floor_sensitive
        if row_sampling is None:
            source_s = sampling.apply(
                "sensitive", source_s, release.protected_number_of_records if release is not None else None
            )
            source_y = sampling.apply("synthetic", source_y, None)
            floor_s = sampling.floor("sensitive")
            if typed_source:
                typed_s, typed_y = source_s, source_y
            elif sampling.sampled:
                typed_s = sampling.same_rate("sensitive", typed_s)
                typed_y = sampling.same_rate("synthetic", typed_y)
        if sampling.sampled:
            if release is not None:
                log.info("rows sampled: SDS's evaluator (exact tuple counts) is skipped")
                sampling.sds_skipped = "rows were sampled (max_rows): SDS's evaluator compares exact tuple counts with the release"
        release_for_sds = None if sampling.sampled else release

        d = len(columns)
        tvd_length = min(length, d)
        reporting_length = release_for_sds.reporting_length if release_for_sds is not None else 0
        sds_length = min(reporting_length, d)
        with timed_stage(log, "the yardstick's bins (aggregations over the sensitive table)", progress):
            declared = tuple(numeric_kinds) if typed_source else ()
            yard = build_yardstick(source_s, columns, numbers=declared, bins=bins)
        # The prepared tables are the compared cells when they are the source and nothing is binned: one pass
        # then serves the TVDs and SDS's evaluator; otherwise SDS's evaluator (on the release's cells) has its own.
        one_pass = not typed_source and not yard.binned
        plan = SubsetPlan(
            d,
            all_cells_length=tvd_length,
            max_length=max(tvd_length, sds_length) if one_pass else tvd_length,
            max_subsets=bound,
            seed=subset_seed,
        )
        if any(plan.sampled.values()):
            # Public: the shapes and the bound only, no data.
            log.info(
                "comparing a seeded sample of the column subsets: %s",
                ", ".join(f"{len(plan.of_length(k))} of {t} {k}-column" for k, t in plan.totals.items()),
            )
        compared_s = yard.table(source_s)
        compared_y = yard.table(yard.observe(source_y))
        parts = [
            cell_counts(compared_s, plan).select(
                *plan.key_names, _as_long("n", "n_s"), *_zeros("n_y", "n_r", "n_b")
            ),
            cell_counts(compared_y, plan).select(
                *plan.key_names, _zero("n_s"), _as_long("n", "n_y"), *_zeros("n_r", "n_b")
            ),
        ]
        if floor_s is not None:
            parts.append(
                cell_counts(yard.table(floor_s), plan).select(
                    *plan.key_names, *_zeros("n_s", "n_y", "n_r"), _as_long("n", "n_b")
                )
            )
        if release_for_sds is not None and one_pass:
            with timed_stage(log, "release tuples to a Spark DataFrame", progress):
                parts.append(release_cells(release_for_sds, plan, sensitive))
        stage = f"cell counts and metrics of {len(plan.subsets)} column subsets (one pass over each table)"
        with timed_stage(log, stage, progress):
            counts = aggregate(reduce(DataFrame.unionByName, parts), plan, sds_length if one_pass else 0, res)
        per_subset = counts.per_subset
        sds_counts = counts
        if release_for_sds is not None and not one_pass:
            sds_plan = SubsetPlan(
                d, all_cells_length=0, max_length=sds_length, max_subsets=bound, seed=subset_seed
            )
            with timed_stage(
                log, f"SDS's evaluator on the release's cells ({len(sds_plan.subsets)} subsets)", progress
            ):
                sds_parts = [
                    cell_counts(sensitive, sds_plan).select(
                        *sds_plan.key_names, _as_long("n", "n_s"), *_zeros("n_y", "n_r", "n_b")
                    ),
                    cell_counts(synthetic, sds_plan).select(
                        *sds_plan.key_names, _zero("n_s"), _as_long("n", "n_y"), *_zeros("n_r", "n_b")
                    ),
                    release_cells(release_for_sds, sds_plan, sensitive),
                ]
                sds_counts = aggregate(reduce(DataFrame.unionByName, sds_parts), sds_plan, sds_length, res)
        # Every row is in exactly one cell of a 1-column subset (no row at all: no cell, no entry).
        first = per_subset.get(plan.ids[(0,)], {"rows_s": 0, "rows_y": 0})
        n, n_syn = first["rows_s"], first["rows_y"]
        empty = [name for name, rows in (("sensitive", n), ("synthetic", n_syn)) if rows == 0]
        if empty:
            # No distance is defined; the evaluation (not private) says so and the run goes on (design 1.7).
            return _undefined_metrics(columns, tvd_length, res, plan, sampling, n, n_syn, empty, release)
        compared = {"sensitive": n, "synthetic": n_syn}
        n, n_syn = sampling.total("sensitive", n), sampling.total("synthetic", n_syn)
        blank_s = sum(row.get("blank_s", 0) for row in per_subset.values())
        blank_y = sum(row.get("blank_y", 0) for row in per_subset.values())

        metrics: dict[str, Any] = {
            "metrics_version": METRICS_VERSION,
            "differentially_private": False,
            "columns": list(columns),
            "max_marginal_length": tvd_length,
            "subset_sampling": _sampling_entry(plan),
            "resolution": res,
            "rows": {"sensitive": n, "synthetic": n_syn},
            "record_expansion": (n_syn - n) / n,
            "blank_cell_share": {
                "sensitive": blank_s / (compared["sensitive"] * d),
                "synthetic": blank_y / (compared["synthetic"] * d),
            },
            "row_sampling": sampling.entry(compared),
        }
        metrics["yardstick"] = {
            "source": "input" if typed_source else "given",
            "categorical_max_values": CATEGORICAL_MAX_VALUES,
            "quantile_bins": QUANTILE_BINS,
            "columns": yard.rules,
        }
        empty_shares = {
            c: {
                "sensitive": per_subset[plan.ids[(i,)]]["blank_s"] / compared["sensitive"],
                "synthetic": per_subset[plan.ids[(i,)]]["blank_y"] / compared["synthetic"],
            }
            for i, c in enumerate(columns)
        }
        metrics["empty_share_by_column"] = empty_shares
        metrics["out_of_support"] = _out_of_support(yard, per_subset, plan, compared["synthetic"])
        binned = set(((release.manifest.get("data") or {}).get("bins") or {}) if release is not None else ())
        metrics["empty_columns"] = merge_coverage(
            release_coverage(release) if release is not None else [],
            synthetic_coverage(empty_shares, binned=binned),
            columns,
        )
        metrics.update(
            tvd_metrics(
                per_subset, plan, columns, synthetic_sampled=metrics["row_sampling"]["synthetic"]["sampled"]
            )
        )
        three_way = metrics["tvd"].get("3")
        metrics["k_marginal_score"] = 1000.0 * (1.0 - three_way["mean"]) if three_way else None
        metrics["one_way_worst"] = one_way_worst(
            counts.top_values, per_subset, plan, metrics["tvd_by_subset"]["1"]
        )
        metrics["sds"] = None
        if release_for_sds is not None:
            bins_sds = bucket_bins(sds_counts.per_bucket)
            metrics["sds"] = {
                "reporting_length": reporting_length,
                **{
                    side_name: sds_side(
                        sds_counts.per_subset, sds_counts.per_bucket, bins_sds, reporting_length, side
                    )
                    for side_name, side in (("release", "r"), ("synthetic", "y"))
                },
            }
        # A metric that fails is reported as failed, with a reason that holds no data value, and the others
        # are kept (docs/design.md section 5.6): the evaluation spends no budget and never loses the rest.
        failed: dict[str, str] = {}
        metrics["numeric"] = None
        if numeric_kinds:
            d_num = len(numeric_kinds)
            passes = 1
            if d_num > COLUMNS_PER_PASS:
                passes = -(-d_num // COLUMNS_PER_PASS) + 1
            stage = f"numeric metrics of {d_num} column(s) ({passes} pass{'es' if passes > 1 else ''} over the tables)"

            def numeric() -> dict[str, Any] | None:
                with timed_stage(log, stage, progress):
                    return numeric_metrics(typed_s, typed_y, tuple(numeric_kinds))

            metrics["numeric"] = _guarded("numeric", failed, numeric)
        metrics["tstr"] = None
        if label is not None:
            metrics["tstr"] = _guarded(
                "tstr",
                failed,
                lambda: tstr_metrics(
                    synthetic, sensitive, holdout, label, mapping, tstr_rows, seed, progress
                ),
            )
        metrics["nist_k_marginal_score"] = None
        metrics["nist_k_marginal"] = None
        if nist_groups is not None:
            # NIST's own formula, on the input's own values (the yardstick's source) with SDNist's bins
            stage = f"NIST's k-marginal score (SDNist's formula, groups {list(nist_groups)})"

            def nist() -> dict[str, Any] | None:
                with timed_stage(log, stage, progress):
                    return nist_k_marginal(source_s, source_y, nist_groups)

            nist_result = _guarded("nist_k_marginal", failed, nist)
            if nist_result is not None and "failed" not in nist_result:
                metrics["nist_k_marginal_score"] = nist_result.pop("score")
            metrics["nist_k_marginal"] = nist_result
        metrics["failed_metrics"] = failed
        metrics["privacy"] = None
        metrics["identifier_columns"] = []
        if release is not None:
            metrics["privacy"] = {key: release.manifest.get(key) for key in PRIVACY_KEYS}
            # left out of every measurement by configuration: not compared, not counted as empty (design 2.8)
            metrics["identifier_columns"] = list(release.manifest.get("identifier_columns") or {})
        log.info("evaluation done in %.2f s", time.perf_counter() - started)
        return metrics
    finally:
        sampling.unpersist()


def _undefined_metrics(
    columns: tuple[str, ...],
    length: int,
    resolution: int,
    plan: SubsetPlan,
    sampling: RowSampling,
    n: int,
    n_syn: int,
    empty: list[str],
    release: Release | None,
) -> dict[str, Any]:
    """The metrics when a table has no row: the shapes and the row counts, no distance (each is a ratio over the
    rows), and ``failed_metrics`` saying why (docs/design.md section 5.6)."""
    reason = f"the {' and the '.join(empty)} table{'s have' if len(empty) > 1 else ' has'} no rows"
    compared = {"sensitive": n, "synthetic": n_syn}
    return {
        "metrics_version": METRICS_VERSION,
        "differentially_private": False,
        "columns": list(columns),
        "max_marginal_length": length,
        "subset_sampling": _sampling_entry(plan),
        "resolution": resolution,
        "rows": {
            "sensitive": sampling.total("sensitive", n),
            "synthetic": sampling.total("synthetic", n_syn),
        },
        "record_expansion": None,
        "blank_cell_share": {"sensitive": None, "synthetic": None},
        "row_sampling": sampling.entry(compared),
        "empty_share_by_column": {},
        "empty_columns": [],
        "tvd": {},
        "tvd_by_subset": {},
        "k_marginal_score": None,
        "nist_k_marginal_score": None,
        "nist_k_marginal": None,
        "one_way_worst": [],
        "sds": None,
        "numeric": None,
        "tstr": None,
        "failed_metrics": {"distances": f"{reason}: no distance is defined"},
        "privacy": {key: release.manifest.get(key) for key in PRIVACY_KEYS} if release is not None else None,
        "identifier_columns": list(release.manifest.get("identifier_columns") or {}) if release else [],
    }


def _guarded(name: str, failed: dict[str, str], compute: Callable[[], Any]) -> Any:
    """``compute()``, or, when it raises an Exception, ``{"failed": reason}`` with the reason also recorded in
    ``failed[name]`` (:func:`~spark_dpsynth.evaluation._common.failure_reason`: no data value). Interrupts
    (BaseException) go through."""
    try:
        return compute()
    except Exception as err:  # noqa: BLE001 - reported in the metrics, the other metrics are kept
        reason = failure_reason(err)
        log.warning("the %s metrics failed: %s", name, reason)
        failed[name] = reason
        return {"failed": reason}


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
    from spark_dpsynth.data.publish import write_text_atomically

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
    columns = check_table("df", df)
    r = v.integer("reporting_length", reporting_length, low=1)
    plan = SubsetPlan(len(columns), all_cells_length=0, max_length=min(r, len(columns)))
    counts = cell_counts(df, plan).groupBy(*plan.key_names).agg(F.sum("n").alias("count"))
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


class RowSampling:
    """The seeded row sampling of :func:`evaluate` (``max_rows``): which tables are sampled, at which rate, and
    their sizes (observed in the cell pass itself with :class:`pyspark.sql.Observation`, no extra pass).

    :func:`evaluate` samples the prepared tables it is given. A caller that holds the tables before they are
    prepared (the ``evaluate`` and ``pipeline`` commands) samples them there instead, with :meth:`sample`, and
    hands the sampling to :func:`evaluate` (``row_sampling``): only the sampled rows are then cleaned, binned and
    converted, each table is read once (the sample is kept on the executors' local disks, ``DISK_ONLY``, for
    the cell pass and the numeric metrics), and the cell counts and the numeric metrics are of the same rows
    (docs/design.md section 5.5).

    Args:
        max_rows: the most rows of each table counted exactly (an integer >= 0; 0: every row).
        seed: the seed of the row hash (an integer).

    Raises:
        InvalidParameterError: ``max_rows`` or ``seed`` out of range.
    """

    METHOD = (
        "Bernoulli by a seeded uniform random column: a row is kept when rand(seed) < rate = max_rows / rows "
        "(independently of its values: identical rows are drawn independently), the synthetic table with "
        "another seed; rand is a function of the seed, the input partition's index and the row's position in it"
    )
    RAW_METHOD = METHOD.replace("a row is kept", "before preparing, a row is kept")

    def __init__(self, max_rows: int = MAX_ROWS, seed: int = 0) -> None:
        self.max_rows = v.integer("max_rows", max_rows, low=0)
        self.seed = v.integer("seed", seed)
        self.rates: dict[str, float] = {}
        self.expected: dict[str, int] = {}
        self.observations: dict[str, Any] = {}
        self.floors: dict[str, DataFrame] = {}
        self.sds_skipped: str | None = None
        self.raw = False
        self._persisted: list[DataFrame] = []

    @property
    def sampled(self) -> bool:
        return any(rate < 1.0 for rate in self.rates.values())

    def sample(
        self,
        side: str,
        df: DataFrame,
        rows: int | None = None,
        *,
        columns: Sequence[str] | None = None,
    ) -> DataFrame:
        """A table before it is prepared, or its seeded uniform sample when it has more than ``max_rows`` rows.

        Args:
            side: ``"sensitive"`` or ``"synthetic"``.
            df: the table as read (the sensitive input after its row filter, or the synthetic table as written).
            rows: its number of rows (the sensitive table: the release's public protected number of records
                n'); None: a count of ``df`` (from the files' metadata for a table read from Parquet).
            columns: the columns the evaluation reads (hashed, and the only ones kept); None: every column.
                A table whose rows are merged per person (a privacy unit) must not be sampled here: the sample
                would split a person's rows; :func:`evaluate` samples the merged records instead.

        Returns:
            ``df`` (restricted to ``columns``) when it has at most ``max_rows`` rows or ``max_rows`` is 0;
            else a uniform sample at the rate max_rows / rows, persisted on the local disks (``DISK_ONLY``;
            released when :func:`evaluate` returns, or by :meth:`unpersist`). The table's size is observed in
            the first pass over it. For the sensitive table at a rate <= 1/2, a second sample disjoint from the
            first, at the same rate and in the same persisted pass, is kept for the real-vs-real floor
            (:meth:`floor`).

        Raises:
            InvalidParameterError: ``side`` is not one of the two, or was sampled already.
        """
        if side not in ("sensitive", "synthetic") or side in self.rates:
            raise InvalidParameterError(f"side must be 'sensitive' or 'synthetic', once each, got {side!r}")
        table = df.select(*(F.col(quote(c)) for c in dict.fromkeys(columns))) if columns is not None else df
        out = self.apply(side, table, rows)
        if self.rates[side] < 1.0:
            self.raw = True
        return out

    def unpersist(self) -> None:
        """Release the samples :meth:`sample` persisted."""
        for df in self._persisted:
            df.unpersist()
        self._persisted = []

    def apply(self, side: str, df: DataFrame, rows_hint: int | None) -> DataFrame:
        """``df`` itself, or its uniform sample when its rows (``rows_hint``, else a count) exceed ``max_rows``.

        The sample is drawn with ``rand(seed)`` (the synthetic table with another seed, so that a table compared
        with a copy of itself is not compared on the same row positions) right where ``df`` is read, and
        persisted on the local disks (``DISK_ONLY``, about ``max_rows`` rows, twice that for the sensitive table
        with its floor sample), so that every later pass reads the same rows. ``rand`` is seeded per partition
        with seed + the partition's index and draws in the partition's row order: the sample is reproducible
        on a task's retry and on a re-read of the same input with the same splits (a file scan), and it changes
        (within the sampling error) when the input is split differently (docs/design.md section 5.5).
        """
        if self.max_rows == 0:
            self.rates[side] = 1.0
            return df
        # A count of the table (synthetic: from the files' metadata when read from Parquet); the sensitive
        # table's size comes from the release's public n' when there is a release.
        rows = int(rows_hint) if rows_hint is not None else df.count()
        self.expected[side] = rows
        if rows <= self.max_rows:
            self.rates[side] = 1.0
            return df
        rate = self.rates[side] = self.max_rows / rows
        from pyspark import StorageLevel
        from pyspark.sql import Observation

        self.observations[side] = Observation(f"evaluate_{side}_rows")
        observed = df.observe(self.observations[side], F.count(F.lit(1)).alias("rows"))
        # a second, disjoint sample of the sensitive table for the real-vs-real floor: rate <= u < 2 rate
        with_floor = side == "sensitive" and rate <= 0.5
        u = F.rand(self._seed(side))
        drawn = observed.withColumn(_DRAW, u).where(F.col(_DRAW) < F.lit(2 * rate if with_floor else rate))
        # About max_rows rows (twice that with the floor sample), on disk: not in the JVM's heap.
        persisted = drawn.persist(StorageLevel.DISK_ONLY)
        self._persisted.append(persisted)
        # The sample keeps the input's partitions (10M rows read in 60 splits: 60 slivers of ~17,000 rows), and
        # each later pass (cell counts, numeric metrics) would pay a task per sliver; it reads the persisted
        # partitions merged into a few (no shuffle: the sampling pass keeps the input's parallelism).
        merged = persisted.coalesce(max(1, math.ceil(self.max_rows / SAMPLE_ROWS_PER_PARTITION)))
        if with_floor:
            self.floors[side] = merged.where(F.col(_DRAW) >= F.lit(rate)).drop(_DRAW)
        return merged.where(F.col(_DRAW) < F.lit(rate)).drop(_DRAW)

    def floor(self, side: str = "sensitive") -> DataFrame | None:
        """The second uniform sample of ``side`` drawn by :meth:`apply` (disjoint from the compared one, at the
        same rate), or None (not sampled, or a rate above 1/2)."""
        return self.floors.get(side)

    def same_rate(self, side: str, df: DataFrame) -> DataFrame:
        """``df`` (the typed twin of a table) sampled uniformly at that table's rate (another draw of rows)."""
        rate = self.rates.get(side, 1.0)
        return df if rate >= 1.0 else df.where(F.rand(self._seed(side) + 1) < F.lit(rate))

    def _seed(self, side: str) -> int:
        return self.seed if side == "sensitive" else self.seed ^ _SYNTHETIC_SEED

    def total(self, side: str, compared: int) -> int:
        """The table's number of rows: ``compared`` when it was not sampled, else the observed count."""
        observation = self.observations.get(side)
        if observation is None:
            return compared
        return int(observation.get["rows"])

    def entry(self, compared: dict[str, int]) -> dict[str, Any]:
        """``row_sampling`` of :func:`evaluate`."""
        sides = {}
        for side, rows in compared.items():
            rate = self.rates.get(side, 1.0)
            sides[side] = {
                "sampled": rate < 1.0,
                "rate": rate,
                "rows": self.total(side, rows),
                "rows_compared": rows,
                # Dvoretzky-Kiefer-Wolfowitz (Massart 1990): P(sup |F_m - F| > e) <= 2 exp(-2 m e^2), e at 95%
                "cdf_error_95": math.sqrt(math.log(2 / 0.05) / (2 * rows)) if rate < 1.0 and rows else 0.0,
            }
        return {
            "max_rows": self.max_rows,
            "seed": self.seed,
            "sampled": self.sampled,
            "method": self.RAW_METHOD if self.raw else self.METHOD,
            **sides,
            "sds_skipped": self.sds_skipped,
        }


def describe_row_sampling(metrics: dict[str, Any]) -> list[str]:
    """One line per sampled table of ``metrics``, e.g. "sensitive table: 1,000,212 of 10,000,000 rows compared
    (a seeded uniform sample, max_rows 1,000,000)"; empty when every row was compared."""
    sampling = metrics.get("row_sampling") or {}
    return [
        f"{side} table: {sampling[side]['rows_compared']:,} of {sampling[side]['rows']:,} rows compared "
        f"(a seeded uniform sample, max_rows {sampling['max_rows']:,})"
        for side in ("sensitive", "synthetic")
        if (sampling.get(side) or {}).get("sampled")
    ]


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


def _sampling_entry(plan: SubsetPlan) -> dict[str, Any]:
    """``subset_sampling`` of :func:`evaluate`: which lengths compare a seeded sample of their subsets."""
    return {
        "max_subsets": plan.max_subsets,
        "seed": plan.seed,
        "sampled": {str(k): plan.sampled[k] for k in plan.totals},
        "compared": {str(k): len(plan.of_length(k)) for k in plan.totals},
        "total": {str(k): plan.totals[k] for k in plan.totals},
        "method": "uniform without replacement from (d, L, seed) only: numpy PCG64 seeded by (seed, d, L)",
    }


def describe_sampling(metrics: dict[str, Any]) -> list[str]:
    """One line per sampled length of ``metrics`` (:func:`evaluate`'s dict), e.g. "3-way: mean over 2,000 of
    70,300 3-column subsets, sampled (seed 0)"; empty when every subset was compared."""
    sampling = metrics.get("subset_sampling") or {}
    return [
        f"{k}-way: mean over {sampling['compared'][k]:,} of {sampling['total'][k]:,} {k}-column subsets, "
        f"sampled (seed {sampling['seed']})"
        for k, sampled in (sampling.get("sampled") or {}).items()
        if sampled
    ]


def _as_long(column: str, name: str) -> Column:
    """Column ``column`` cast to bigint, named ``name``."""
    return F.col(column).cast("bigint").alias(name)


def _zero(name: str) -> Column:
    """A bigint 0 named ``name``."""
    return F.lit(0).cast("bigint").alias(name)


def _zeros(*names: str) -> list[Column]:
    """A bigint 0 per name."""
    return [_zero(name) for name in names]


def _out_of_support(
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
