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

This module checks the inputs, samples and counts the tables once, then writes the entries of the table of
metrics in order (:data:`spark_dpsynth.evaluation.catalog.METRICS`: each metric's function, when it applies and
the keys it writes): the row sampling is :mod:`spark_dpsynth.evaluation.sampling`, the cell counts on Spark
:mod:`~spark_dpsynth.evaluation.cells`, the scores :mod:`~spark_dpsynth.evaluation.tvd`,
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
import time
from collections.abc import Callable, Mapping, Sequence
from functools import reduce
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_dpsynth import _validate as v
from spark_dpsynth.errors import InvalidParameterError, SchemaError
from spark_dpsynth.evaluation._common import check_table, mismatch, timed_stage
from spark_dpsynth.evaluation.catalog import (
    METRICS,
    METRICS_VERSION,
    PRIVACY_KEYS,
    MetricInputs,
    describe_out_of_support,
    describe_real_sample,
)
from spark_dpsynth.evaluation.cells import SubsetPlan, aggregate, cell_counts, release_cells
from spark_dpsynth.evaluation.nist import nist_group_columns as resolve_nist_groups
from spark_dpsynth.evaluation.numeric import check_numeric_columns
from spark_dpsynth.evaluation.sampling import (
    MAX_ROWS,
    RowSampling,
    describe_row_sampling,
    describe_sampling,
    subset_sampling_entry,
)
from spark_dpsynth.evaluation.tstr import check_label
from spark_dpsynth.evaluation.yardstick import build_yardstick

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
SDS_RESOLUTION = 10
"""SDS's default reporting resolution (``reporting_resolution`` in SDS's pipeline and web app): the count below
which a true tuple is "rare" for the leakage count and left out of preservation unless it appears."""
TSTR_MAX_ROWS = 100_000
"""Default bound on the rows of each table :func:`evaluate` hands to :func:`train_synthetic_test_real`."""
MAX_SUBSETS = 2_000
"""Default bound on the L-column subsets :func:`evaluate` compares per length L >= 2: a length with more
(C(d, L) > 2,000, e.g. the 70,300 3-column subsets of a 76-column table) is compared on 2,000 subsets drawn
by a seeded, public choice (docs/design.md section 5.5)."""

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
        inputs = MetricInputs(
            columns=columns,
            tvd_length=tvd_length,
            resolution=res,
            plan=plan,
            sampling=sampling,
            compared={"sensitive": n, "synthetic": n_syn},
            counts=counts,
            sds_counts=sds_counts,
            yard=yard,
            typed_source=typed_source,
            release=release,
            release_for_sds=release_for_sds,
            reporting_length=reporting_length,
            sensitive=sensitive,
            synthetic=synthetic,
            typed_sensitive=typed_s,
            typed_synthetic=typed_y,
            source_sensitive=source_s,
            source_synthetic=source_y,
            numeric_kinds=numeric_kinds,
            holdout=holdout,
            label=label,
            label_values=mapping,
            tstr_max_rows=tstr_rows,
            seed=seed,
            nist_groups=nist_groups,
            log=log,
            progress=progress,
        )
        # The table of metrics, in order (spark_dpsynth.evaluation.catalog): a metric that fails is reported as
        # failed, with a reason that holds no data value, and the others are kept (docs/design.md section 5.6).
        metrics: dict[str, Any] = {}
        for spec in METRICS:
            metrics.update(spec.compute(inputs) if spec.applies(inputs) else spec.absent_values())
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
        "subset_sampling": subset_sampling_entry(plan),
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


def _as_long(column: str, name: str) -> Column:
    """Column ``column`` cast to bigint, named ``name``."""
    return F.col(column).cast("bigint").alias(name)


def _zero(name: str) -> Column:
    """A bigint 0 named ``name``."""
    return F.lit(0).cast("bigint").alias(name)


def _zeros(*names: str) -> list[Column]:
    """A bigint 0 per name."""
    return [_zero(name) for name in names]
