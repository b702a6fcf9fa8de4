"""Numeric columns: distances between the sensitive and synthetic distributions of numbers (NOT private).

``numeric_metrics(sensitive, synthetic, columns)`` compares, per numeric (or date, or timestamp) column, the
distribution of its numbers in the two tables, and the Pearson correlation matrices of those columns
(docs/design.md section 5.4):

* the Kolmogorov-Smirnov distance D = sup_x |F(x) - G(x)| [Kol33; Smi48] (``scipy.stats.ks_2samp``'s
  statistic), F and G the empirical CDFs of the sensitive and synthetic numbers;
* the Wasserstein-1 distance W1 = integral over the real line of |F(x) - G(x)| dx [Val74, equation (1.2)]
  (``scipy.stats.wasserstein_distance``), in the column's unit (days for a date, seconds for a timestamp);
* the Pearson correlation r_ij of every pair of compared columns in each table, over the rows where both are
  numbers (pairwise deletion, as pandas' ``DataFrame.corr``), the difference synthetic - sensitive, its mean and
  largest absolute value over the pairs i < j, and its Frobenius norm ||R_syn - R_sens||_F.

A column's values are cast to the sensitive column's kind: a number (compared as a double), a date (days since
1970-01-01, ``unix_date``) or a timestamp (seconds since 1970-01-01 00:00:00 UTC, ``unix_micros`` / 10^6).
Synthetic columns may hold their own type or strings (the synthesizers' output before they emit typed columns):
a string is trimmed and cast with ``try_cast``. A non-empty value that does not cast (a bin label such as
``[20, 30)``, a code such as ``N``), NaN or an infinity is not a number: ``castable_share`` says which share of a
column's non-empty values are numbers, and a column with no number on either side is skipped with the reason.

Computation: one aggregation pass up to :data:`COLUMNS_PER_PASS` columns; beyond (a wide table), one pass per
that many columns, so that the quantile summaries do not have to fit the driver at once, and one vectorized
pass for the co-moments of the d (d - 1) / 2 pairs (:func:`_co_moments`, d x d matrix sums in ``mapInArrow``
tasks; thousands of aggregates would be evaluated by Spark row by row), over the stacked tables persisted once.
The two tables are stacked
(``unionByName``, a side tag) and grouped by side; per column, ``percentile_approx`` returns the
quantiles at the probabilities i / m, i = 0..m (m = ``grid_size``), with Spark's relative rank error 1 /
``accuracy``, beside ``min``, ``max``, ``count``, ``avg``, ``stddev_samp``; per pair of columns, ``covar_samp``
and the two ``var_samp`` over the rows where both are numbers (Spark's one-pass central co-moments). The
driver receives two rows of d (m + 1) quantiles and 3 d (d - 1) / 2 co-moments, never a record.

Accuracy. Let Q be the quantile function percentile_approx estimates (Q(p) = the smallest x with F(x) >= p). The
step CDF F^(x) = max{i / m : Q(i / m) <= x} satisfies F(x) - 1/m - 1/A <= F^(x) <= F(x) + 1/A (A =
``accuracy``), and likewise G^. D and W1 are computed exactly on F^ and G^ (over the merged support of their
quantiles); hence |D^ - D| <= 1/m + 2/A and |W1^ - W1| <= (1/m + 2/A) (x_max - x_min), x_min and x_max the
smallest and largest number of both tables (``ks_error_bound``, ``wasserstein_error_bound``). When every
table's size divides m and is at most A, percentile_approx is exact and so are F^ = F, D and W1 (the tests
check this against scipy). Correlations are exact up to floating point.

Privacy: the metrics read the sensitive data without noise; they are not differentially private (as the rest
of :mod:`spark_dpsynth.evaluation`).

References: [Kol33] A. Kolmogorov, "Sulla determinazione empirica di una legge di distribuzione", Giornale
dell'Istituto Italiano degli Attuari, 1933. [Smi48] N. Smirnov, "Table for estimating the goodness of fit of
empirical distributions", Annals of Mathematical Statistics, 1948. [Val74] S. S. Vallender, "Calculation of the
Wasserstein distance between probability distributions on the line", Theory of Probability and its
Applications, 1974. [GK01] M. Greenwald and S. Khanna, "Space-efficient online computation of quantile
summaries", SIGMOD 2001 (the summary behind ``percentile_approx``).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from itertools import combinations
from typing import Any

import numpy as np
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.storagelevel import StorageLevel

from spark_dpsynth import _validate as v
from spark_dpsynth.errors import InvalidParameterError, SchemaError
from spark_dpsynth.evaluation._common import quote
from spark_dpsynth.params import DataConfig
from spark_dpsynth.profile import scale_of

__all__ = [
    "numeric_metrics",
    "numeric_columns_of",
    "check_numeric_columns",
    "typed_sensitive_table",
    "ks_wasserstein_from_quantiles",
    "numeric_kind",
    "GRID_SIZE",
    "ACCURACY",
    "CDF_POINTS",
    "WORST_COLUMNS",
    "COLUMNS_PER_PASS",
    "on_scale",
]

log = logging.getLogger(__name__)

GRID_SIZE = 10_000
"""Default m: quantiles at the probabilities i / m, i = 0..m, of every numeric column (KS error <= 1/m + 2/A)."""
ACCURACY = 10_000
"""Default A, ``percentile_approx``'s accuracy: its quantiles have a rank error of at most n / A records."""
CDF_POINTS = 101
"""Quantiles per column and table kept in the metrics for the report's CDF plots (percentiles 0..100)."""
WORST_COLUMNS = 4
"""Columns with the largest KS distance listed in ``worst`` (and plotted by the report)."""

COLUMNS_PER_PASS = 8
"""Numeric columns whose quantile summaries one aggregation pass builds: each summary of accuracy A holds up to
about 5 A entries per task and returns m + 1 quantiles, so a pass over every column of a wide table (dozens of
numeric columns) exhausts the driver's memory (docs/design.md section 5.6)."""

_SIDE = "__side"
# A query probability just below i / m: Spark's percentile_approx ranks ceil(p n), and i / m * n computed in
# floating point can exceed an integer k = i n / m by one ulp, which would return the (k + 1)-th value.
_NUDGE = 1e-9

_SCALES = {
    "number": "the column's own unit",
    "date": "days since 1970-01-01",
    "timestamp": "seconds since 1970-01-01 00:00:00 UTC",
}


def numeric_kind(data_type: T.DataType) -> str | None:
    """``"number"``, ``"date"``, ``"timestamp"`` for a numeric, date or timestamp Spark type; None otherwise
    (the scales of :func:`spark_dpsynth.profile.scale_of`, integers and reals both ``"number"``)."""
    scale = scale_of(data_type)
    if scale in ("integer", "real"):
        return "number"
    return None if scale == "category" else scale


def numeric_columns_of(df: DataFrame) -> tuple[str, ...]:
    """The columns of ``df`` whose type is numeric, date or timestamp (booleans excluded), in order."""
    return tuple(f.name for f in df.schema.fields if numeric_kind(f.dataType) is not None)


def numeric_metrics(
    sensitive: DataFrame,
    synthetic: DataFrame,
    columns: Sequence[str] | None = None,
    *,
    grid_size: int = GRID_SIZE,
    accuracy: int = ACCURACY,
) -> dict[str, Any] | None:
    """KS and Wasserstein-1 distances per numeric column and the difference of the correlation matrices.

    Args:
        sensitive: the sensitive table with its own column types (empty cells null). A column of a numeric,
            date or timestamp type is compared on that scale; a string column named in ``columns`` is cast to
            double (``try_cast`` after trimming; "" is empty).
        synthetic: the synthetic table: every column of ``columns``, of any type (its own, or strings).
        columns: the columns to compare, each in both tables; None: :func:`numeric_columns_of` ``sensitive``.
        grid_size: m, an integer in [10, 100000] (default 10,000): quantiles at the probabilities i / m (see the module
            docstring for the error bounds).
        accuracy: A, an integer in [100, 10^7]: ``percentile_approx``'s accuracy (relative rank error 1/A;
            default 10,000).

    Returns:
        None when there is no column to compare; else a JSON-serialisable dict (docs/design.md section 5.4):

        * ``columns``: the compared columns, in order; ``grid_size`` m, ``accuracy`` A, ``ks_error_bound``
          1/m + 2/A; ``cdf_probabilities``: the :data:`CDF_POINTS` probabilities of the ``cdf`` quantiles.
        * ``by_column``: column -> ``{"kind": "number" | "date" | "timestamp", "scale": its unit, "ks": D,
          "wasserstein": W1, "wasserstein_error_bound", "wasserstein_normalized": W1 / the sensitive standard
          deviation (None when it is 0), "sensitive": STATS, "synthetic": STATS, "cdf": {"sensitive": [..],
          "synthetic": [..]} (quantiles at ``cdf_probabilities``), "skipped": None}``, where STATS =
          ``{"rows", "empty", "numbers", "castable_share" (numbers / non-empty cells, None if none), "mean",
          "std", "min", "max"}``. A column without numbers on one side has ``ks`` ... ``cdf`` None and
          ``skipped`` = the reason.
        * ``worst``: the (up to) :data:`WORST_COLUMNS` compared columns with the largest ``ks``, worst first.
        * ``correlation``: None with fewer than 2 compared columns; else ``{"columns": the compared columns
          not skipped, "sensitive": R_sens, "synthetic": R_syn, "difference": R_syn - R_sens}`` (d x d lists,
          diagonal 1 / 0, None where a correlation is undefined: a constant column, fewer than 2 common rows),
          ``"mean_abs_difference"``, ``"max_abs_difference"`` (over the defined pairs i < j), ``"max_pair"``
          (the two columns of the largest), ``"frobenius_norm"`` (over the defined entries, both triangles).
        * ``seconds``: the wall time of the computation.

    Raises:
        SchemaError: a column is missing from a table, repeats, or is neither numeric, date, timestamp nor
            string in ``sensitive``.
        InvalidParameterError: ``grid_size`` or ``accuracy`` out of range.

    Privacy:
        None: exact statistics of the sensitive table; not differentially private.
    """
    started = time.perf_counter()
    m = v.integer("grid_size", grid_size, low=10, high=100_000)
    acc = v.integer("accuracy", accuracy, low=100, high=10_000_000)
    kinds = check_numeric_columns(sensitive, synthetic, columns)
    names = tuple(kinds)
    if not names:
        return None

    stacked = _normalized(sensitive, names, kinds, "s").unionByName(_normalized(synthetic, names, kinds, "y"))
    grid = np.arange(m + 1) / m
    # One array literal (a list would become m + 1 literal expressions, slow to analyse).
    probabilities = F.lit(np.where((grid > 0) & (grid < 1), grid - _NUDGE, grid))
    passes: list[list[Column]] = []
    for start in range(0, len(names), COLUMNS_PER_PASS):
        aggs: list[Column] = []
        for i in range(start, min(start + COLUMNS_PER_PASS, len(names))):
            x = F.col(f"x{i}")
            aggs += [
                F.sum(F.col(f"e{i}").cast("long")).alias(f"empty{i}"),
                F.count(x).alias(f"numbers{i}"),
                F.min(x).alias(f"min{i}"),
                F.max(x).alias(f"max{i}"),
                F.avg(x).alias(f"mean{i}"),
                F.stddev_samp(x).alias(f"std{i}"),
                F.percentile_approx(x, probabilities, acc).alias(f"q{i}"),
            ]
        passes.append(aggs)
    pairs = list(combinations(range(len(names)), 2))
    wide = len(names) > COLUMNS_PER_PASS
    if not wide:
        aggs = []
        for i, j in pairs:
            # Pearson's r over the rows where both are numbers, from Spark's one-pass central co-moments (corr
            # itself divides by a zero variance, an error under ANSI mode): r = cov / sqrt(var_i var_j).
            x, y = F.col(f"x{i}"), F.col(f"x{j}")
            aggs += [
                F.covar_samp(x, y).alias(f"cov{i}_{j}"),
                F.var_samp(F.when(y.isNotNull(), x)).alias(f"vi{i}_{j}"),
                F.var_samp(F.when(x.isNotNull(), y)).alias(f"vj{i}_{j}"),
            ]
        passes = [[agg for aggs_ in passes for agg in aggs_] + aggs]  # one pass in all
    # Per pass two rows (one per table); in all d (m + 1) quantiles and 3 d (d - 1) / 2 co-moments per table.
    rows: dict[str, dict[str, Any]] = {}
    if wide:
        stacked = stacked.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        for aggs in passes:
            for r in stacked.groupBy(_SIDE).agg(F.count(F.lit(1)).alias("rows"), *aggs).collect():
                rows.setdefault(r[_SIDE], {}).update(r.asDict())
        if wide and pairs:
            # d (d - 1) / 2 pairs are thousands of aggregates, which Spark evaluates row by row: the co-moments
            # are summed as d x d matrices instead, in one vectorized pass (:func:`_co_moments`).
            shifts = {side: [row.get(f"mean{i}") for i in range(len(names))] for side, row in rows.items()}
            for side, values in _co_moments(stacked, len(names), shifts).items():
                rows.setdefault(side, {}).update(values)
    finally:
        if wide:
            stacked.unpersist()
    side_rows = {side: rows.get(side) for side in ("s", "y")}

    cdf_index = np.rint(np.linspace(0, m, CDF_POINTS)).astype(int)
    by_column: dict[str, Any] = {}
    for i, c in enumerate(names):
        stats = {side: _stats(side_rows[side], i) for side in ("s", "y")}
        entry: dict[str, Any] = {
            "kind": kinds[c],
            "scale": _SCALES[kinds[c]],
            "ks": None,
            "wasserstein": None,
            "wasserstein_error_bound": None,
            "wasserstein_normalized": None,
            "sensitive": stats["s"],
            "synthetic": stats["y"],
            "cdf": None,
            "skipped": _skip_reason(stats["s"], stats["y"]),
        }
        if entry["skipped"] is None:
            q_s = np.asarray(side_rows["s"][f"q{i}"], dtype=float)  # type: ignore[index]
            q_y = np.asarray(side_rows["y"][f"q{i}"], dtype=float)  # type: ignore[index]
            # The ends are the exact min and max (percentile_approx's are within its rank error).
            q_s[0], q_s[-1] = stats["s"]["min"], stats["s"]["max"]
            q_y[0], q_y[-1] = stats["y"]["min"], stats["y"]["max"]
            q_s, q_y = np.maximum.accumulate(q_s), np.maximum.accumulate(q_y)
            ks, w1 = ks_wasserstein_from_quantiles(q_s, q_y)
            span = max(stats["s"]["max"], stats["y"]["max"]) - min(stats["s"]["min"], stats["y"]["min"])
            std = stats["s"]["std"]
            entry.update(
                ks=ks,
                wasserstein=w1,
                wasserstein_error_bound=(1.0 / m + 2.0 / acc) * span,
                wasserstein_normalized=w1 / std if std else None,
                cdf={"sensitive": q_s[cdf_index].tolist(), "synthetic": q_y[cdf_index].tolist()},
            )
        by_column[c] = entry

    compared = [c for c in names if by_column[c]["skipped"] is None]
    worst = sorted(compared, key=lambda c: -by_column[c]["ks"])[:WORST_COLUMNS]
    result = {
        "columns": list(names),
        "grid_size": m,
        "accuracy": acc,
        "ks_error_bound": 1.0 / m + 2.0 / acc,
        "cdf_probabilities": (cdf_index / m).tolist(),
        "by_column": by_column,
        "worst": worst,
        "correlation": _correlation(names, compared, side_rows),
    }
    result["seconds"] = time.perf_counter() - started
    log.info("numeric metrics of %d column(s) done in %.2f s", len(names), result["seconds"])
    return result


def check_numeric_columns(
    sensitive: DataFrame, synthetic: DataFrame, columns: Sequence[str] | None = None
) -> dict[str, str]:
    """Column -> its kind (``"number"``, ``"date"``, ``"timestamp"``), after checking the schemas (no data read).

    ``columns`` None: :func:`numeric_columns_of` ``sensitive``. A string column of ``sensitive`` is a number.

    Raises:
        SchemaError: a column is missing from a table, repeats, or is neither numeric, date, timestamp nor
            string in ``sensitive``.
    """
    names = tuple(numeric_columns_of(sensitive) if columns is None else columns)
    if len(set(names)) != len(names):
        raise SchemaError(f"numeric columns repeat: {sorted({c for c in names if names.count(c) > 1})}")
    types_s = {f.name: f.dataType for f in sensitive.schema.fields}
    types_y = {f.name: f.dataType for f in synthetic.schema.fields}
    for name, types in (("sensitive", types_s), ("synthetic", types_y)):
        missing = [c for c in names if c not in types]
        if missing:
            raise SchemaError(f"the {name} table lacks the numeric column(s) {missing}")
    kinds: dict[str, str] = {}
    for c in names:
        kind = numeric_kind(types_s[c])
        if kind is None and not isinstance(types_s[c], T.StringType):
            raise SchemaError(
                f"column {c} ({types_s[c].simpleString()}) is not numeric, date, timestamp or string"
            )
        kinds[c] = kind or "number"
    return kinds


def typed_sensitive_table(
    df: DataFrame,
    config: DataConfig,
    columns: Sequence[str],
    numeric_columns: Sequence[str] | None = None,
    *,
    every_column: bool = False,
) -> tuple[DataFrame, tuple[str, ...]]:
    """The sensitive input's numeric columns with their own types, empty cells null, and their names.

    Args:
        df: the sensitive input table (row filter applied), before :func:`~spark_dpsynth.data.prepare.prepare`.
        config: its data configuration: the empty values of :func:`~spark_dpsynth.data.prepare.empty_to_null`
            become null (the type is kept); with a privacy unit, the rows of one person are merged first (the
            largest value of each column, its only non-empty value after the prepare stage's checks).
        columns: the attribute columns of the release.
        numeric_columns: the columns to compare; None: those of ``columns`` whose type in ``df`` is numeric,
            date or timestamp, or that have public bins in ``config``, but not hash-bucketed
            (``config.hash_buckets``: the synthetic column holds bucket labels).
        every_column: the table holds every column of ``columns`` that ``df`` has (cleaned alike, with its own
            type), not only ``names``: the evaluation's yardstick reads them (docs/design.md section 5.2).

    Returns:
        (table, names): one column per name, in that order (with ``every_column``, the columns of ``columns``).

    Raises:
        SchemaError: a numeric column is not an attribute column of ``df``.
    """
    from spark_dpsynth.data.prepare import empty_to_null

    types = {f.name: f.dataType for f in df.schema.fields}
    if numeric_columns is None:
        # a hash-bucketed column comes back as bucket labels, not numbers (docs/design.md section 2.8)
        names = tuple(
            c
            for c in columns
            if c in types
            and c not in config.hash_buckets
            and (numeric_kind(types[c]) is not None or c in config.bins)
        )
    else:
        names = tuple(numeric_columns)
        wrong = [c for c in names if c not in types or c not in columns or c in config.hash_buckets]
        if wrong:
            raise SchemaError(
                f"numeric column(s) {wrong} are not attribute columns of the input with values (a hash-bucketed "
                "column holds bucket labels)"
            )
    kept = tuple(c for c in columns if c in types) if every_column else names
    cleaned = []
    for c in kept:
        raw = F.col(quote(c))
        zero = config.zeros_are_empty and c not in config.sensitive_zeros
        empty = empty_to_null(raw, config.empty_values, zero).isNull()
        cleaned.append(F.when(~empty, raw).alias(c))
    if config.privacy_unit is None or not kept:
        return df.select(*cleaned), names
    merged = df.select(F.col(quote(config.privacy_unit)).alias("__unit"), *cleaned)
    return merged.groupBy("__unit").agg(*[F.max(quote(c)).alias(c) for c in kept]).drop("__unit"), names


def ks_wasserstein_from_quantiles(q_f: np.ndarray, q_g: np.ndarray) -> tuple[float, float]:
    """KS and Wasserstein-1 distances of the step CDFs given by two quantile grids.

    Args:
        q_f, q_g: nondecreasing arrays of m + 1 floats, the quantiles Q(i / m), i = 0..m, of two distributions
            (Q(p) = the smallest x with F(x) >= p; Q(0) the minimum, Q(1) the maximum).

    Returns:
        (D, W1) of the step CDFs F^(x) = max{i / m : Q_F(i / m) <= x} (0 below Q_F(0)) and G^ alike: D = the
        largest |F^(x) - G^(x)| over the merged support, W1 = sum over consecutive support points x_k < x_k+1
        of |F^(x_k) - G^(x_k)| (x_k+1 - x_k), the integral of |F^ - G^| [Val74] (module docstring).
    """
    m = len(q_f) - 1
    if m < 1 or len(q_g) != len(q_f):
        raise InvalidParameterError("quantile grids must have the same length >= 2")
    support = np.union1d(q_f, q_g)
    f_hat = (np.searchsorted(q_f, support, side="right") - 1) / m
    g_hat = (np.searchsorted(q_g, support, side="right") - 1) / m
    diff = np.abs(np.clip(f_hat, 0.0, 1.0) - np.clip(g_hat, 0.0, 1.0))
    ks = float(diff.max()) if len(diff) else 0.0
    w1 = float(np.sum(diff[:-1] * np.diff(support)))
    return ks, w1


def _normalized(df: DataFrame, names: tuple[str, ...], kinds: dict[str, str], side: str) -> DataFrame:
    """``df`` as (side, x0, e0, x1, e1, ...): each column on its comparison scale (double, null when it is not a
    finite number) and whether its cell is empty (null, or a blank string)."""
    types = {f.name: f.dataType for f in df.schema.fields}
    out: list[Column] = [F.lit(side).alias(_SIDE)]
    for i, c in enumerate(names):
        col = F.col(quote(c))
        if isinstance(types[c], T.StringType):
            text = F.trim(col)
            empty = text.isNull() | (text == "")
            value = F.when(~empty, text)
        else:
            empty = col.isNull()
            value = col
        x = on_scale(value, types[c], kinds[c])
        finite = x.isNotNull() & ~F.isnan(x) & (F.abs(x) != F.lit(float("inf")))
        out += [F.when(finite, x).alias(f"x{i}"), empty.alias(f"e{i}")]
    return df.select(*out)


def on_scale(value: Column, data_type: T.DataType, kind: str) -> Column:
    """``value`` (of ``data_type``) as a double on the scale of ``kind`` (null when it does not cast)."""
    if kind == "date":
        day = value if isinstance(data_type, T.DateType) else value.try_cast("date")
        return F.unix_date(day).cast("double")
    if kind == "timestamp":
        ts = value if isinstance(data_type, T.TimestampType) else value.try_cast("timestamp")
        return (F.unix_micros(ts) / F.lit(1e6)).cast("double")
    if numeric_kind(data_type) == "number":
        return value.cast("double")
    return value.try_cast("double")


def _stats(row: dict[str, Any] | None, i: int) -> dict[str, Any]:
    """The per-table statistics of column ``i`` from the side's aggregated row (None: the table is empty)."""
    if row is None:
        return {"rows": 0, "empty": 0, "numbers": 0, "castable_share": None, "mean": None, "std": None,
                "min": None, "max": None}  # fmt: skip
    rows, empty, numbers = int(row["rows"]), int(row[f"empty{i}"] or 0), int(row[f"numbers{i}"])
    std = row[f"std{i}"]
    return {
        "rows": rows,
        "empty": empty,
        "numbers": numbers,
        "castable_share": numbers / (rows - empty) if rows > empty else None,
        "mean": row[f"mean{i}"],
        "std": None if std is None or math.isnan(std) else float(std),
        "min": row[f"min{i}"],
        "max": row[f"max{i}"],
    }


def _skip_reason(sens: dict[str, Any], syn: dict[str, Any]) -> str | None:
    """Why a column cannot be compared (no number on one side), or None."""
    for name, stats in (("sensitive", sens), ("synthetic", syn)):
        if stats["numbers"] == 0:
            if stats["rows"] == stats["empty"]:
                return f"every {name} cell is empty"
            return (
                f"no {name} value is a number ({stats['rows'] - stats['empty']} non-empty values, none castable"
                f"{'; bin labels?' if name == 'synthetic' else ''})"
            )
    return None


def _pearson(cov: float | None, var_i: float | None, var_j: float | None) -> float | None:
    """cov / sqrt(var_i var_j) clipped to [-1, 1]; None when undefined (fewer than 2 rows, a zero variance)."""
    if cov is None or var_i is None or var_j is None or not var_i > 0 or not var_j > 0:
        return None
    return float(min(1.0, max(-1.0, cov / math.sqrt(var_i * var_j))))


def _co_moments(
    stacked: DataFrame, d: int, shifts: dict[str, list[float | None]]
) -> dict[str, dict[str, Any]]:
    """Per side, ``cov{i}_{j}``, ``vi{i}_{j}``, ``vj{i}_{j}`` of every pair i < j over the rows where both are
    numbers (as ``covar_samp`` and ``var_samp``: divided by n_ij - 1, None below 2 rows), from four d x d
    matrices summed in a ``mapInArrow`` task per partition: with M the mask of numbers and X the numbers minus the
    side's column mean (0 where no number), N = M'M, A = X'M, B = (X*X)'M and C = X'X; then
    cov = (C - A A' / N) / (N - 1) and var_i = (B - A^2 / N) / (N - 1). The shift by the mean keeps the sums
    central (no cancellation). The driver receives 4 d^2 numbers per task and side, never a record."""
    import pyarrow as pa

    columns = [f"x{i}" for i in range(d)]
    means = {
        side: np.array([0.0 if m is None else float(m) for m in values]) for side, values in shifts.items()
    }
    schema = T.StructType(
        [T.StructField(_SIDE, T.StringType()), T.StructField("sums", T.ArrayType(T.DoubleType()))]
    )

    def task(batches):  # noqa: ANN001, ANN202 - Arrow record batches in and out
        acc: dict[str, np.ndarray] = {}
        for batch in batches:
            if batch.num_rows == 0:
                continue
            sides = batch.column(_SIDE).to_numpy(zero_copy_only=False)
            x = np.column_stack(
                [batch.column(c).to_numpy(zero_copy_only=False).astype(float) for c in columns]
            )
            for side in np.unique(sides):
                sel = x[sides == side]
                mask = ~np.isnan(sel)
                m = mask.astype(float)
                centred = np.where(mask, sel - means.get(str(side), np.zeros(d)), 0.0)
                sums = np.stack([m.T @ m, centred.T @ m, (centred * centred).T @ m, centred.T @ centred])
                acc[str(side)] = acc[str(side)] + sums if str(side) in acc else sums
        if acc:
            yield pa.RecordBatch.from_pydict(
                {_SIDE: list(acc), "sums": [a.ravel().tolist() for a in acc.values()]},
                schema=pa.schema([(_SIDE, pa.string()), ("sums", pa.list_(pa.float64()))]),
            )

    totals: dict[str, np.ndarray] = {}
    for r in stacked.select(_SIDE, *columns).mapInArrow(task, schema).collect():
        part = np.asarray(r["sums"], dtype=float).reshape(4, d, d)
        totals[r[_SIDE]] = totals[r[_SIDE]] + part if r[_SIDE] in totals else part
    out: dict[str, dict[str, Any]] = {}
    for side, (n, a, b, c) in totals.items():
        values: dict[str, Any] = {}
        for i, j in combinations(range(d), 2):
            k = n[i, j]
            if k < 2:
                values[f"cov{i}_{j}"] = values[f"vi{i}_{j}"] = values[f"vj{i}_{j}"] = None
                continue
            values[f"cov{i}_{j}"] = float((c[i, j] - a[i, j] * a[j, i] / k) / (k - 1))
            values[f"vi{i}_{j}"] = float(max(0.0, (b[i, j] - a[i, j] ** 2 / k) / (k - 1)))
            values[f"vj{i}_{j}"] = float(max(0.0, (b[j, i] - a[j, i] ** 2 / k) / (k - 1)))
        out[side] = values
    return out


def _correlation(
    names: tuple[str, ...], compared: list[str], side_rows: dict[str, dict[str, Any] | None]
) -> dict[str, Any] | None:
    """The correlation block of :func:`numeric_metrics` (see its Returns)."""
    if len(compared) < 2:
        return None
    index = {c: i for i, c in enumerate(names)}
    d = len(compared)

    def matrix(row: dict[str, Any]) -> list[list[float | None]]:
        out: list[list[float | None]] = [[1.0 if a == b else None for b in range(d)] for a in range(d)]
        for a, b in combinations(range(d), 2):
            i, j = sorted((index[compared[a]], index[compared[b]]))
            out[a][b] = out[b][a] = _pearson(row[f"cov{i}_{j}"], row[f"vi{i}_{j}"], row[f"vj{i}_{j}"])
        return out

    sens = matrix(side_rows["s"])  # type: ignore[arg-type]
    syn = matrix(side_rows["y"])  # type: ignore[arg-type]
    diff = [
        [None if sens[a][b] is None or syn[a][b] is None else syn[a][b] - sens[a][b] for b in range(d)]  # type: ignore[operator]
        for a in range(d)
    ]
    upper = [(abs(diff[a][b]), a, b) for a, b in combinations(range(d), 2) if diff[a][b] is not None]  # type: ignore[arg-type]
    defined = [x for row in diff for x in row if x is not None]
    worst = max(upper) if upper else None
    return {
        "columns": compared,
        "sensitive": sens,
        "synthetic": syn,
        "difference": diff,
        "mean_abs_difference": float(np.mean([u[0] for u in upper])) if upper else None,
        "max_abs_difference": worst[0] if worst else None,
        "max_pair": [compared[worst[1]], compared[worst[2]]] if worst else None,
        "frobenius_norm": float(math.sqrt(sum(x * x for x in defined))) if upper else None,
    }
