"""Answers from the release: counts over the release's columns, with standard errors, from the fitted model.

``release.query("SELECT sex, count(*) AS n FROM t WHERE age >= 60 GROUP BY sex")`` answers a count query from a
release with measured marginals (the workload mechanism's, docs/design.md sections 4.7 and 4.8) without
sampling and without reading the sensitive table (docs/design.md section 4.8, "Answers from the release"):

1. **The model.** The graphical model the ``pgm`` synthesizer samples from (:mod:`spark_dpsynth.synthesizers.pgm`:
   the cells measured absent taken out, Private-PGM's estimate, McKenna, Sheldon and Miklau, ICML 2019, section
   4). An answer is the model's probability of the query's cells, from its marginal over the query's columns
   (exact junction-tree inference, :meth:`~spark_dpsynth.estimation.GraphicalModel.project`), times N, the
   release's estimate of its number of records (:func:`~spark_dpsynth.synthesizers.pgm.number_of_records`: the
   inverse-variance mean of the protected number n' and of the measured tables' sums): what counting the ``pgm``
   synthesizer's table of N records gives in expectation.
2. **Spark reads the SQL.** A small table of the query's columns' domain is built: one row per cell of the
   model's marginal over the columns the query names (found by Spark's analyser: a column is named when the query
   no longer analyses without it), each value decoded to the release's values in the input's types (a category
   as the input's value, the empty category as null), with the cell's index and a ``share`` column. The query
   runs on it as the view ``t``, with each ``count(*)`` (or ``count(1)``) replaced by the list of the
   (cell, share) pairs it counts; Spark parses, analyses and plans everything else (WHERE, GROUP BY, any
   expression of the columns). The replacement finds the ``count`` tokens with a lexical scan of the text
   (strings, quoted names and comments skipped): no grammar of ours.
3. **Binned numbers.** A binned number column (public or DP bins, docs/design.md section 2.8) holds, per bin,
   points spread uniformly over [lo, hi): every whole number of an integer bin of at most
   :data:`WHOLE_NUMBERS_PER_BIN` values, else :data:`POINTS_PER_BIN` evenly spaced points (the midpoints of equal
   parts), each with the share 1 / (number of points). So a WHERE that cuts inside a bin is answered with the
   bin's uniform share: exact for whole-number bins so enumerated and for cuts at bin edges, within
   1 / (2 POINTS_PER_BIN) of the bin's uniform share otherwise. The synthetic table draws inside a bin by the
   bin's shape where a DP profile measured one (``_types``); the answers use the uniform share. A GROUP BY on
   such a column groups its points: group by an expression aligned with the bin edges (``floor(age / 10)``) to
   get whole bins.
4. **Standard errors** by the parametric bootstrap of :mod:`spark_dpsynth.estimation.uncertainty` (Ferrando,
   Wang and Sheldon, AISTATS 2022): R models refitted to measurements redrawn around the fitted model with
   their recorded noise stds; with p the answer's probability under the model and p_r under replicate r,

       answer = N p,    se^2 = N^2 Var_r(p_r) + p^2 Var(N),

   Var(N) = 1 / (1 / Var(n') + 1 / Var(T)), Var(n') = 2 e^(-epsilon_N) / (1 - e^(-epsilon_N))^2 the variance of
   n''s discrete Laplace noise (docs/design.md section 2.4) and Var(T) that of the tables' mean sum; taken as
   independent of p (a share moves with a cell's noise less its share of the sum's: close to independent, exactly
   so for an even table). The bootstrap measures the noise's error,
   not the model's: where the query's columns never were measured together (no measured clique holds them all)
   the answer also carries the model's error (its structure fills in what was not measured). The output says so
   in its ``measured_together`` column (False) and a warning, and its standard error adds that error as
   N^2 (kappa p)^2, kappa the model's relative error on marginals it was not fitted to, estimated by leaving
   each measured clique out in turn (:func:`~spark_dpsynth.estimation.uncertainty.model_error`; conservative,
   since the cliques left out are those the selection found the model missed most).

**Noise floor.** Near a count of 0 the bootstrap's spread collapses (mirror descent's multiplicative steps hardly
move a cell the model holds nearly empty, and the estimate sits on the boundary of its parameter space, where
the bootstrap is known to fail: Andrews, "Inconsistency of the Bootstrap when a Parameter is on the Boundary of
the Parameter Space", Econometrica, 2000). So an answer's noise variance is at least what the release measured
of one cell of the query's columns: 1 / sum 1/sigma_i^2 over the measurements whose clique holds them all (or,
when none does, over those within them).

**Absent values.** A value the synthesizer judged absent (its 1-way mean y below 3 noise stds s,
:func:`~spark_dpsynth.synthesizers.pgm.absent_cells`) is a structural zero of the model: its cells answer 0, as
the synthetic table holds none, and each such value a group touches adds max(y, 0)^2 + s^2 to the group's
variance (its count is measured as y with std s; the group may hold all of it).

The empty category of a column (its empty cells, and for a discovered column also its values that did not pass
the release's threshold, docs/design.md section 4.7) is null in the query's table; the ``pgm`` synthesizer
writes the second kind as released values where the release measured its empty cells.

Supported: ``count(*)`` / ``count(1)`` as output columns, over the view ``t``, with WHERE and GROUP BY on
at most :data:`MAX_QUERY_COLUMNS` of the release's columns; other aggregates (sum, avg, count of a column,
count(DISTINCT ..)), window functions, LIMIT, TABLESAMPLE, a count inside an expression or HAVING, and reading
anything but ``t`` once are refused with :class:`~spark_dpsynth.errors.InvalidParameterError` naming what is not
supported.

Privacy: post-processing of the release (its measured marginals, their noise stds, the protected number of
records and epsilon_N); the sensitive table is never read. The bootstrap's draws are utility randomness from a
seeded NumPy generator (docs/design.md section 7.3).
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_dpsynth.errors import InvalidParameterError, ReleaseError
from spark_dpsynth.estimation import GraphicalModel, estimate
from spark_dpsynth.estimation.uncertainty import (
    BOOTSTRAP_ITERATIONS,
    BOOTSTRAP_REPLICATES,
    Bootstrap,
    bootstrap,
    measured_together,
    model_error,
)
from spark_dpsynth.release.core import Release, one_way_means
from spark_dpsynth.synthesizers._types import bin_intervals, restore_value
from spark_dpsynth.synthesizers.pgm import (
    FIT_ITERATIONS,
    absent_cells,
    number_of_records,
    release_domain,
    release_measurements,
    without_absent,
)

__all__ = [
    "BOOTSTRAP_REPLICATES",
    "MAX_QUERY_CELLS",
    "MAX_QUERY_COLUMNS",
    "MEASURED_TOGETHER",
    "POINTS_PER_BIN",
    "WHOLE_NUMBERS_PER_BIN",
    "ReleaseAnswers",
    "answer",
    "count_calls",
]

log = logging.getLogger(__name__)

MAX_QUERY_COLUMNS = 5
"""Most release columns one query may name (WHERE and GROUP BY together)."""
MAX_QUERY_CELLS = 1_000_000
"""Most rows of the query's domain table (cells of the model's marginal times the points of binned columns):
what Spark evaluates the query on and what the driver receives back as (cell, share) pairs."""
WHOLE_NUMBERS_PER_BIN = 32
"""An integer or date bin with at most this many whole numbers holds each of them (exact uniform shares)."""
POINTS_PER_BIN = 16
"""Points of a wider bin, or of a bin of reals: the midpoints of this many equal parts (module docstring)."""
MODEL_ERROR_ITERATIONS = 30
"""Most estimator steps of each refit of :func:`~spark_dpsynth.estimation.uncertainty.model_error`: each refit
starts from the fitted model less one clique's potential, near its optimum, and further steps move kappa little
(docs/design.md section 4.8, "Answers from the release")."""
MEASURED_TOGETHER = "measured_together"
"""The output column that says whether a measured clique holds every column of the query (module docstring)."""

_CELL = "__dpsynth_cell"
_SHARE = "__dpsynth_share"
_ROW = "__dpsynth_row"
_ABSENT = "__dpsynth_absent"
_PAIR = ("dpsynth_cell", "dpsynth_share", "dpsynth_row", "dpsynth_absent")
_COUNTED = (
    f"collect_list(named_struct('{_PAIR[0]}', {_CELL}, '{_PAIR[1]}', {_SHARE}, '{_PAIR[2]}', {_ROW}, "
    f"'{_PAIR[3]}', {_ABSENT}))"
)
"""What each ``count(*)`` of a query becomes: the list of the (cell, share) pairs it counts."""
_COUNT_PLACES = (
    "count(*) is supported as a column of the output of a query that reads t once (not in an expression, HAVING, "
    "ORDER BY, a subquery or a join)"
)
_REFUSED_WORDS = {
    "over": "window functions",
    "limit": "LIMIT (it would cut the groups before they are weighted)",
    "tablesample": "TABLESAMPLE",
}
_FALLBACK_AGGREGATES = frozenset(
    "any any_value approx_count_distinct approx_percentile array_agg avg bit_and bit_or bit_xor bool_and "
    "bool_or collect_list collect_set corr count_if count_min_sketch covar_pop covar_samp every first "
    "first_value histogram_numeric kurtosis last last_value max max_by mean median min min_by mode "
    "percentile percentile_approx regr_avgx regr_avgy regr_count regr_intercept regr_r2 regr_slope regr_sxx "
    "regr_sxy regr_syy skewness some std stddev stddev_pop stddev_samp sum try_avg try_sum var_pop "
    "var_samp variance grouping grouping_id".split()
)
"""Aggregate functions refused when Spark's catalog cannot list them (:func:`_aggregate_names`)."""
_AGGREGATES: dict[str, frozenset[str]] = {}
"""Spark version -> the names of its aggregate functions (:func:`_aggregate_names`, listed once)."""
_TOKENS = re.compile(
    r"""(?P<space>\s+)|(?P<comment>--[^\n]*|/\*.*?\*/)|(?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")"""
    r"""|(?P<quoted>`(?:[^`]|``)*`)|(?P<word>[A-Za-z_][A-Za-z_0-9]*)|(?P<number>\d+(?:\.\d*)?)|(?P<other>.)""",
    re.S,
)


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    start: int
    end: int


def _tokens(sql: str) -> list[_Token]:
    """The significant tokens of ``sql`` (no spaces or comments): words, numbers, strings, quoted names and single
    characters. A lexical scan, not a parse: Spark parses the query."""
    return [
        _Token(m.lastgroup or "other", m.group(), m.start(), m.end())
        for m in _TOKENS.finditer(sql)
        if m.lastgroup not in ("space", "comment")
    ]


def count_calls(sql: str, aggregates: frozenset[str] = _FALLBACK_AGGREGATES) -> list[tuple[int, int]]:
    """The spans (start, end) of the ``count(*)`` and ``count(1)`` calls of ``sql`` (lexical scan: strings,
    quoted names and comments skipped).

    Args:
        sql: the query text.
        aggregates: lower-case names of the aggregate functions to refuse (other than ``count``).

    Raises:
        InvalidParameterError: a count of a column or of DISTINCT, another aggregate function, a window function,
            LIMIT or TABLESAMPLE (the message names it).
    """
    toks = _tokens(sql)
    spans = []
    for i, tok in enumerate(toks):
        if tok.kind != "word":
            continue
        word = tok.text.lower()
        call = i + 1 < len(toks) and toks[i + 1].text == "("
        if word in _REFUSED_WORDS:
            raise InvalidParameterError(
                f"{_REFUSED_WORDS[word]} not supported in a query of the release: counts only (count(*))"
            )
        if not call:
            continue
        if word == "count":
            inner = toks[i + 2 : i + 4]
            if len(inner) == 2 and inner[1].text == ")" and inner[0].text in ("*", "1"):
                spans.append((tok.start, inner[1].end))
                continue
            raise InvalidParameterError(
                "count of a column or of DISTINCT is not supported in a query of the release: use count(*) "
                "with a WHERE on the column"
            )
        if word in aggregates:
            raise InvalidParameterError(
                f"the aggregate {word}() is not supported in a query of the release: counts only (count(*)); "
                "a sum or mean of a number has no standard error from the release's noise here"
            )
    return spans


def _aggregate_names(spark: SparkSession) -> frozenset[str]:
    """The names of Spark's aggregate functions (catalog classes under ``expressions.aggregate``), else a fixed
    list."""
    key = str(getattr(spark, "version", ""))
    if key in _AGGREGATES:
        return _AGGREGATES[key]
    try:
        listed = spark.catalog.listFunctions()
    except Exception:  # noqa: BLE001 - a catalog that cannot list its functions: the fixed list
        return _FALLBACK_AGGREGATES
    found = {
        f.name.lower()
        for f in listed
        if f.className and (".aggregate." in f.className or f.className.endswith("Grouping"))
    }
    _AGGREGATES[key] = frozenset(found - {"count"}) | _FALLBACK_AGGREGATES
    return _AGGREGATES[key]


# ------------------------------------------------------------------------------------- decoding the domain


def _points(t: dict[str, Any] | None, labels: tuple[str, ...]) -> list[list[tuple[str | None, float, float]]]:
    """Per release value of one column (the empty category last), its points: (label or None, number or NaN,
    share). A category value is one point (its label); a bin, its points (module docstring, step 3)."""
    out: list[list[tuple[str | None, float, float]]] = []
    bins = (t or {}).get("bins")
    scale = str((t or {}).get("scale", "category"))
    if not bins or scale == "category":
        return [[(lab, math.nan, 1.0)] for lab in labels] + [[(None, math.nan, 1.0)]]
    intervals = bin_intervals(bins, scale)
    points = dict(
        zip((str(x) for x in bins.get("point_labels") or ()), bins.get("points") or (), strict=True)
    )
    passthrough = {str(x) for x in bins.get("passthrough") or ()}
    closed = bins.get("upper") is not None
    whole = scale in ("integer", "date") or (scale == "real" and bool(bins.get("integral")))
    last = list(intervals)[-1] if intervals else None
    for lab in labels:
        if lab in points:
            out.append([(None, float(points[lab]), 1.0)])
        elif lab in passthrough or lab not in intervals:
            out.append([(lab, math.nan, 1.0)])
        else:
            lo, hi = intervals[lab]
            out.append([(None, x, w) for x, w in _bin_points(lo, hi, whole, closed and lab == last)])
    return out + [[(None, math.nan, 1.0)]]


def _bin_points(lo: float, hi: float, whole: bool, closed: bool) -> list[tuple[float, float]]:
    """The points of the bin [lo, hi) (``closed``: [lo, hi] for a last bin with a public upper bound) with their
    shares: the whole numbers, or :data:`POINTS_PER_BIN` midpoints (module docstring, step 3)."""
    if whole:
        first = math.ceil(lo)
        stop = math.ceil(hi) + (1 if closed and math.floor(hi) == hi else 0)
        count = max(stop - first, 1)
        if count <= WHOLE_NUMBERS_PER_BIN:
            return [(float(first + j), 1.0 / count) for j in range(count)]
        k = POINTS_PER_BIN
        return [(float(first + math.floor((j + 0.5) * count / k)), 1.0 / k) for j in range(k)]
    k = POINTS_PER_BIN
    return [(lo + (j + 0.5) * (hi - lo) / k, 1.0 / k) for j in range(k)]


def _typed(label: Column, number: Column, t: dict[str, Any] | None) -> Column:
    """A column's decoded value in the input's type: the number on its scale where there is one, else the label
    cast (as :func:`~spark_dpsynth.synthesizers._types.restore_types` decodes a synthetic value)."""
    if not t:
        return label
    scale, type_name = str(t["scale"]), str(t["type"])
    from_label = label if type_name == "string" else label.try_cast(type_name)
    if not t.get("bins") or scale == "category":
        return from_label
    value = restore_value(number, scale, type_name)
    return F.when(number.isNotNull() & ~F.isnan(number), value).otherwise(from_label)


# --------------------------------------------------------------------------------------------- answers


class ReleaseAnswers:
    """A release's model and its bootstrap, ready to answer count queries (module docstring).

    Args:
        release: a release with measured marginals.
        replicates: bootstrap replicates R, >= 2.
        iterations: most estimator steps of a replicate's refit, >= 1.
        seed: the bootstrap's seed (utility randomness).

    Raises:
        ReleaseError: the release has no measured marginal (a marginals or archetype release).
        InvalidParameterError: ``replicates`` or ``iterations`` out of range.
    """

    def __init__(
        self,
        release: Release,
        *,
        replicates: int = BOOTSTRAP_REPLICATES,
        iterations: int = BOOTSTRAP_ITERATIONS,
        seed: int = 0,
    ) -> None:
        if not release.measurements:
            raise ReleaseError(
                f"queries are answered from measured marginals (the workload mechanism, --synthesizer pgm); this "
                f"release of the {release.manifest.mechanism!r} mechanism has none"
            )
        if isinstance(replicates, bool) or not isinstance(replicates, int) or replicates < 2:
            raise InvalidParameterError(f"replicates must be an integer >= 2, got {replicates!r}")
        if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
            raise InvalidParameterError(f"iterations must be an integer >= 1, got {iterations!r}")
        self.release = release
        self.replicates = replicates
        self.iterations = iterations
        self.seed = int(seed)
        absent = absent_cells(release)
        self.domain, self.measurements, self.kept = without_absent(
            release_domain(release), release_measurements(release), absent
        )
        self._bootstrap: Bootstrap | None = None
        self._model_error: float | None = None
        self.model: GraphicalModel = estimate(self.domain, self.measurements, iterations=FIT_ITERATIONS)
        self.records, self.records_variance = number_of_records(release, release_measurements(release))

    @property
    def bootstrap(self) -> Bootstrap:
        """The bootstrap replicates, fitted on first use (R warm-started refits)."""
        if self._bootstrap is None:
            self._bootstrap = bootstrap(
                self.model,
                self.measurements,
                replicates=self.replicates,
                iterations=self.iterations,
                seed=self.seed,
            )
        return self._bootstrap

    @property
    def model_error(self) -> float:
        """kappa, the model's relative error over columns never measured together
        (:func:`~spark_dpsynth.estimation.uncertainty.model_error`), computed on first use."""
        if self._model_error is None:
            self._model_error = model_error(self.model, self.measurements, iterations=MODEL_ERROR_ITERATIONS)
        return self._model_error

    def query(self, spark: SparkSession, sql: str, *, view: str = "t") -> DataFrame:
        """The answers of a count query (module docstring).

        Args:
            spark: the session that parses and plans the query.
            sql: Spark SQL over the view ``view``: ``count(*)`` columns, WHERE and GROUP BY over at most
                :data:`MAX_QUERY_COLUMNS` of the release's columns (by their input names).
            view: the name the query reads the release's table by; no table or view of that name may exist in
                the session (it is defined for the query and dropped after).

        Returns:
            A DataFrame, one row per group as Spark returns them: the query's output columns, where each count
            column ``n`` is a double (N times the model's probability of the group's cells) followed by
            ``n_se`` (double, its standard error, in records), and a last boolean column
            :data:`MEASURED_TOGETHER` (False: the query's columns were never measured together, the answer also
            carries the model's error, and ``n_se`` adds its estimate kappa n). Group columns keep the types
            Spark gives them over the decoded values (a category in its input type, null for the empty
            category).

        Raises:
            InvalidParameterError: an empty query, a query Spark does not analyse over the release's columns, an
                unsupported construct (module docstring), too many columns or cells, ``view`` in use, or a
                column an event release holds as its offset from the time base (``time_offset_columns``).
        """
        if not isinstance(sql, str) or not sql.strip():
            raise InvalidParameterError("the query must be a non-empty SQL string")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z_0-9]*", view or ""):
            raise InvalidParameterError(f"view must be a plain name, got {view!r}")
        spans = count_calls(sql, _aggregate_names(spark))
        if not spans:
            raise InvalidParameterError(
                "a query of the release must count: SELECT ..., count(*) AS n FROM t [WHERE ...] [GROUP BY ...]"
            )
        if spark.catalog.tableExists(view):
            raise InvalidParameterError(
                f"a table or view named {view!r} exists in the session: give the query's table another name "
                "(view=...)"
            )
        rewritten = _rewrite(sql, spans)
        try:
            names = self._referenced(spark, sql, view)
            persons = self.release.manifest.get("persons") or {}
            offsets = [c for c in names if c in (persons.get("time_offset_columns") or ())]
            if offsets:
                base = persons.get("offset_time_column")
                raise InvalidParameterError(
                    f"the release holds {offsets} as offsets from {base!r} (the column minus {base!r}, a "
                    "person's own: it moves with time, docs/design.md section 2.10), not as their values: a "
                    "count of them is not answered from the release; count them in the synthetic table"
                )
            frame, absent_variance = self._domain_table(spark, names)
            frame.createOrReplaceTempView(view)
            original = _analysed(spark, sql, "the query")
            try:
                result = _analysed(spark, rewritten, "the query")
            except InvalidParameterError as err:  # the query analyses, its counts as lists do not
                raise InvalidParameterError(_COUNT_PLACES) from err
            rows, fields, counted = self._run(result, original, len(spans))
        finally:
            spark.catalog.dropTempView(view)
        return self._answers(spark, rows, fields, counted, names, absent_variance)

    # ---------------------------------------------------------------------------------------------- steps
    def noise_floor(self, names: Sequence[str]) -> float:
        """The least noise variance of an answer over ``names`` (module docstring, "Noise floor"): 1 / sum of
        1/sigma_i^2 over the whole measurements whose clique holds every column of ``names``, or, when none
        does, over those whose clique lies within them; 0 for no columns or no such measurement."""
        wanted = set(names)
        if not wanted:
            return 0.0
        whole = [m for m in self.measurements if m.mask is None]
        chosen = [m for m in whole if wanted <= set(m.clique)] or [
            m for m in whole if set(m.clique) <= wanted
        ]
        return 1.0 / sum(1.0 / m.std**2 for m in chosen) if chosen else 0.0

    def _types(self) -> dict[str, Any]:
        return dict(self.release.manifest.get("column_types") or {})

    def _schema(self, names: Sequence[str]) -> str:
        types = self._types()
        cols = [f"`{c}` {(types.get(c) or {}).get('type', 'string')}" for c in names]
        return ", ".join(
            [*cols, f"{_CELL} bigint", f"{_SHARE} double", f"{_ROW} bigint", f"{_ABSENT} bigint"]
        )

    def _referenced(self, spark: SparkSession, sql: str, view: str) -> tuple[str, ...]:
        """The release columns the query names: those without which it no longer analyses (Spark's analyser
        decides; no row is read). In release order.

        Raises:
            InvalidParameterError: the query does not analyse over the release's columns, or names more than
                :data:`MAX_QUERY_COLUMNS` of them.
        """
        columns = list(self.release.columns)
        spark.createDataFrame([], self._schema(columns)).createOrReplaceTempView(view)
        _analysed(spark, sql, "the query over the release's columns")
        named = []
        with _quiet_analysis():
            for c in columns:
                rest = [x for x in columns if x != c]
                spark.createDataFrame([], self._schema(rest)).createOrReplaceTempView(view)
                try:
                    _ = spark.sql(sql).schema
                except Exception:  # noqa: BLE001 - the analyser needs c (any failure without c)
                    named.append(c)
        if len(named) > MAX_QUERY_COLUMNS:
            raise InvalidParameterError(
                f"the query names {len(named)} of the release's columns ({', '.join(named)}); at most "
                f"{MAX_QUERY_COLUMNS} (SELECT * is not supported)"
            )
        return tuple(named)

    def _domain_table(self, spark: SparkSession, names: Sequence[str]) -> tuple[DataFrame, np.ndarray]:
        """The query's domain table (module docstring, step 2) and the variances of its absent values.

        Per row: the decoded values of ``names``; the model cell's flat index (C order over the model's domain
        of ``names``), or -1 for a cell holding a value measured absent (a structural zero of the model,
        :func:`~spark_dpsynth.synthesizers.pgm.absent_cells`); its share; its row number; and the index of its
        (first) absent value, or -1. The variance of absent value a is max(y_a, 0)^2 + s_a^2, y_a its 1-way mean
        and s_a that mean's std (module docstring, "Absent values").

        Raises:
            InvalidParameterError: more than :data:`MAX_QUERY_CELLS` rows.
        """
        import pandas as pd

        types = self._types()
        index = {c: i for i, c in enumerate(self.release.columns)}
        means = one_way_means(self.release.measurements, self.release.columns)
        absent_variance: list[float] = []
        # per column, one entry per point of each release value: (model code or -1, absent id or -1, label,
        # number, share)
        codes, absent, labels, numbers, shares = [], [], [], [], []
        for c in names:
            j = index[c]
            full = _points(types.get(c), tuple(self.release.domains[j]))
            kept = self.kept.get(j)
            model_code = {int(k): m for m, k in enumerate(kept)} if kept is not None else None
            entries = []
            for k, pts in enumerate(full):
                code = k if model_code is None else model_code.get(k, -1)
                gone = -1
                if code < 0:
                    y, sd = (float(means[j][0][k]), float(means[j][1][k])) if j in means else (0.0, 0.0)
                    gone = len(absent_variance)
                    absent_variance.append(max(y, 0.0) ** 2 + (sd**2 if math.isfinite(sd) else 0.0))
                entries += [(code, gone, lab, num, w) for lab, num, w in pts]
            codes.append(np.array([e[0] for e in entries], dtype=np.int64))
            absent.append(np.array([e[1] for e in entries], dtype=np.int64))
            labels.append(np.array([e[2] for e in entries], dtype=object))
            numbers.append(np.array([e[3] for e in entries], dtype=np.float64))
            shares.append(np.array([e[4] for e in entries], dtype=np.float64))
        rows = math.prod(len(x) for x in codes)
        if rows > MAX_QUERY_CELLS:
            raise InvalidParameterError(
                f"the query's columns ({', '.join(names)}) span {rows} cells and bin points, more than "
                f"{MAX_QUERY_CELLS}: name fewer columns"
            )
        shape = tuple(len(x) for x in codes)
        grid = np.indices(shape).reshape(len(codes), -1) if codes else np.zeros((0, 1), int)
        sizes = self.domain.shape(names)
        cell = np.zeros(grid.shape[1], dtype=np.int64)
        gone = np.full(grid.shape[1], -1, dtype=np.int64)
        share = np.ones(grid.shape[1])
        data: dict[str, Any] = {}
        for a in range(len(names)):
            code = codes[a][grid[a]]
            cell = np.where((cell < 0) | (code < 0), -1, cell * sizes[a] + code)
            gone = np.where(gone < 0, absent[a][grid[a]], gone)
            share = share * shares[a][grid[a]]
            data[f"l{a}"] = labels[a][grid[a]]
            data[f"x{a}"] = numbers[a][grid[a]]
        rows_no = np.arange(cell.shape[0], dtype=np.int64)
        data[_CELL], data[_SHARE], data[_ROW], data[_ABSENT] = cell, share, rows_no, gone
        hidden = (_CELL, _SHARE, _ROW, _ABSENT)
        schema = ", ".join(
            f"{name} {'string' if name[0] == 'l' else 'double'}" for name in data if name not in hidden
        )
        schema += f"{', ' if names else ''}{_CELL} bigint, {_SHARE} double, {_ROW} bigint, {_ABSENT} bigint"
        raw = spark.createDataFrame(pd.DataFrame(data), schema)
        typed = [_typed(F.col(f"l{a}"), F.col(f"x{a}"), types.get(c)).alias(c) for a, c in enumerate(names)]
        frame = raw.select(*typed, *(F.col(h) for h in hidden))
        return frame, np.array(absent_variance)

    def _run(
        self, result: DataFrame, original: DataFrame, counts: int
    ) -> tuple[list[Any], list[T.StructField], list[bool]]:
        """The rewritten query's rows (at most one per group; the (cell, share) pairs they hold are at most the
        domain table's rows, :data:`MAX_QUERY_CELLS`, per count), the output's fields (the count columns named
        as the original query's, typed double) and which of them are counts.

        Raises:
            InvalidParameterError: a count that is not an output column, a query that reads another table, or one
                that reads ``t`` more than once.
        """
        out = result.schema.fields
        if len(out) != len(original.schema.fields):
            raise InvalidParameterError(_COUNT_PLACES)
        is_count = [_is_counted(f.dataType) for f in out]
        if sum(is_count) != counts:
            raise InvalidParameterError(_COUNT_PLACES)
        try:
            files = result.inputFiles()
        except Exception:  # noqa: BLE001 - a client that cannot list input files: the view is checked below
            files = []
        if files:
            raise InvalidParameterError("a query of the release reads the view t only, not other tables")
        rows = (
            result.collect()
        )  # one row per group; their lists hold each domain-table row at most once (checked)
        fields = [
            T.StructField(o.name, T.DoubleType(), False)
            if c
            else T.StructField(o.name, f.dataType, f.nullable)
            for f, o, c in zip(out, original.schema.fields, is_count, strict=True)
        ]
        for j in (j for j, c in enumerate(is_count) if c):
            seen = sum(len(r[j]) for r in rows)
            distinct = len({p[2] for r in rows for p in r[j]})
            if seen != distinct:
                raise InvalidParameterError(
                    "a query of the release reads the view t once (no join, no self-union)"
                )
        return rows, fields, is_count

    def _answers(
        self,
        spark: SparkSession,
        rows: list[Any],
        fields: list[T.StructField],
        counted: list[bool],
        names: Sequence[str],
        absent_variance: np.ndarray,
    ) -> DataFrame:
        """The output DataFrame (:meth:`query`'s Returns) from the rewritten query's rows."""
        boot = self.bootstrap
        p, reps = boot.shares(names)
        p, reps = p.reshape(-1), reps.reshape(len(boot.replicates), -1)
        together = measured_together(self.domain, self.measurements, names)
        kappa = 0.0 if together else self.model_error
        if not together:
            log.warning(
                "the columns %s were never measured together: the answers carry the model's error, estimated as "
                "%.3g of each count and added to its standard error (measured_together = False)",
                ", ".join(names),
                kappa,
            )
        n, var_n = self.records, self.records_variance
        floor = self.noise_floor(names)
        out_fields: list[T.StructField] = []
        for f, c in zip(fields, counted, strict=True):
            out_fields.append(f)
            if c:
                out_fields.append(T.StructField(f"{f.name}_se", T.DoubleType(), False))
        flag = MEASURED_TOGETHER
        while flag in {f.name for f in out_fields}:
            flag = f"_{flag}"
        out_fields.append(T.StructField(flag, T.BooleanType(), False))
        values = []
        for row in rows:
            record: list[Any] = []
            for j, c in enumerate(counted):
                if not c:
                    record.append(row[j])
                    continue
                pairs = row[j]
                ids = np.fromiter((q[0] for q in pairs), dtype=np.int64, count=len(pairs))
                shares = np.fromiter((q[1] for q in pairs), dtype=np.float64, count=len(pairs))
                gone = {int(q[3]) for q in pairs if q[3] >= 0}
                ids, shares = ids[ids >= 0], shares[ids >= 0]
                prob = float(shares @ p[ids]) if len(ids) else 0.0
                rep = reps[:, ids] @ shares if len(ids) else np.zeros(reps.shape[0])
                noise = max(n * n * float(np.var(rep, ddof=1)), floor)
                missing = float(absent_variance[sorted(gone)].sum()) if gone else 0.0
                se = math.sqrt(noise + (n * kappa * prob) ** 2 + prob * prob * var_n + missing)
                record += [n * prob, se]
            record.append(together)
            values.append(tuple(record))
        return spark.createDataFrame(values, T.StructType(out_fields))


def _is_counted(data_type: T.DataType) -> bool:
    """Whether an output column is a replaced count (a list of (cell, share) pairs)."""
    return (
        isinstance(data_type, T.ArrayType)
        and isinstance(data_type.elementType, T.StructType)
        and tuple(data_type.elementType.names) == _PAIR
    )


@contextlib.contextmanager
def _quiet_analysis() -> Iterator[None]:
    """PySpark's logger of failed SQL analyses muted while the probes of :meth:`ReleaseAnswers._referenced` fail
    on purpose."""
    try:
        from pyspark.logger import PySparkLogger

        logger: logging.Logger = PySparkLogger.getLogger("SQLQueryContextLogger")
    except ImportError:  # a PySpark without its own loggers does not log failed analyses
        yield
        return

    def mute(record: logging.LogRecord) -> bool:
        return False

    logger.addFilter(mute)
    try:
        yield
    finally:
        logger.removeFilter(mute)


def _rewrite(sql: str, spans: Sequence[tuple[int, int]]) -> str:
    """``sql`` with each span of :func:`count_calls` replaced by the list of the pairs it counts."""
    out, last = [], 0
    for start, end in spans:
        out += [sql[last:start], _COUNTED]
        last = end
    return "".join([*out, sql[last:]])


def _analysed(spark: SparkSession, sql: str, what: str) -> DataFrame:
    """``spark.sql(sql)``, analysed now (Spark Connect analyses lazily).

    Raises:
        InvalidParameterError: Spark's first line of why it does not parse or analyse (it names the query's
            identifiers and the release's columns, never a value).
    """
    try:
        with _quiet_analysis():
            df = spark.sql(sql)
            _ = df.schema
    except Exception as err:  # noqa: BLE001 - Spark's parse and analysis errors, said in one line
        first = next((line.strip() for line in str(err).splitlines() if line.strip()), type(err).__name__)
        raise InvalidParameterError(f"{what} does not analyse: {first[:300]}") from err
    return df


_CACHE: OrderedDict[tuple[int, int, int, int], ReleaseAnswers] = OrderedDict()
_CACHE_SIZE = 4
"""Releases whose model and bootstrap are kept between queries (the most recently used)."""


def answer(
    release: Release,
    sql: str,
    spark: SparkSession,
    *,
    view: str = "t",
    replicates: int = BOOTSTRAP_REPLICATES,
    iterations: int = BOOTSTRAP_ITERATIONS,
    seed: int = 0,
) -> DataFrame:
    """:meth:`ReleaseAnswers.query` of ``release``, its model and bootstrap kept for the next queries of the same
    release object (the :data:`_CACHE_SIZE` most recent).

    Raises:
        ReleaseError, InvalidParameterError: as :class:`ReleaseAnswers` and :meth:`ReleaseAnswers.query`.
    """
    key = (id(release), replicates, iterations, int(seed))
    found = _CACHE.get(key)
    if found is None or found.release is not release:
        found = ReleaseAnswers(release, replicates=replicates, iterations=iterations, seed=seed)
        _CACHE[key] = found
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    _CACHE.move_to_end(key)
    return found.query(spark, sql, view=view)
