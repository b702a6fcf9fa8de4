"""Person-level DP over event tables: each person's rows bounded to L, and synthetic persons with their rows.

An event table has one row per trip, claim, visit or rating and a column naming the person (the privacy unit).
With ``DataConfig.privacy_unit`` set and ``person_rows`` ``events`` (the default without multi-value columns),
the release protects a person, every row of theirs, and the synthetic table is again an event table
(docs/design.md section 2.10):

1. **Keyless rows** (an empty person key) are left out before anything is counted: a row filter, so a person's
   presence still changes only that person's rows (1-stable).
2. **Persons by number of rows**: the histogram of the persons' numbers of rows over a public grid of
   :func:`rows_grid` (1, 2, ..., 10, 12, 15, 20, 25, 30, 40, 50, ... up to ``rows_per_person_bound``, a person
   with more counted in the last bin) with discrete Laplace noise (a person adds one to one bin: L1
   sensitivity 1; Ghosh, Roughgarden, Sundararajan 2009), :data:`HISTOGRAM_EPSILON_PROPORTION` of epsilon. Its
   sum is the protected number of persons P'; the synthetic persons' numbers of rows are drawn from it.
3. **The cap L** on the rows one person contributes to the event measurements: given
   (``max_rows_per_person``), or the ``rows_per_person_percentile`` of the noisy histogram (the lower edge of
   the bin where the cumulated persons reach it): post-processing of step 2, no further budget.
4. **Contribution bounding**: a person with more than L rows keeps the L rows of lowest keyed hash
   xxhash64(release key, person, row), a choice that depends on that person's rows alone, on no partitioning and
   on no task attempt. Every kept row gets the column :data:`ROWS_COLUMN`, its person's number of kept rows
   (1..L, a public domain), so the event model learns how a person's rows depend on how many they are.
5. **Person columns**: unless declared, the DP test per column of the number of persons whose kept rows hold
   two values (a person adds at most one to each of the d counts: L1 sensitivity d, discrete Laplace,
   :data:`PERSON_COLUMNS_EPSILON_PROPORTION`); a column is a person column when that noisy number is at most
   :data:`PERSON_COLUMN_SHARE` of P'. With L >= 2, the same pass counts per column the persons whose kept rows
   hold one value twice (L1 sensitivity d, discrete Laplace, :data:`REPEATS_EPSILON_PROPORTION`); a column that
   is not a person column is *distinct per person* (a panel's year) when that noisy number is at most
   :data:`REPEAT_SHARE` of the noisy persons with two rows or more.
   Time bases t: the time column if it holds whole numbers, or a declared date's or timestamp's calendar year
   (:func:`~spark_dpsynth.data.trends.time_base`), else up to :data:`MAX_TIME_BASES` whole-number columns
   at most :data:`MOVING_REPEATS` of whose persons repeat a value (fewest first). A second pass counts, per base,
   the persons whose t spans more than twice :data:`OFFSET_TOLERANCE` and, per other number column c (without a
   declared time column, one at most that share of whose persons repeat a value), those of them whose kept rows
   hold two offsets c - t more than the tolerance apart, the persons whose c goes down as t goes up, and those
   whose c takes two values (L1 sensitivity the number of counts, 3 d_t + 1 per base, discrete Laplace,
   :data:`TIME_COLUMNS_EPSILON_PROPORTION`). c *moves with time* (a panel's age with its year) when its noisy
   number is at most :data:`OFFSET_SHARE` of the first: the event level then holds c - t; it *never goes down*
   (work experience) when its second is at most :data:`NONDECREASING_SHARE` of its third; each rule only when its
   threshold is at least :data:`TIME_EVIDENCE` noise scales. The base whose rules hold for the most columns is
   kept. A third pass counts per other whole-number, date or timestamp column the persons by the decade class of
   their kept values' span, greatest minus least (:data:`~spark_dpsynth.data.trends.SPAN_EDGES`; L1 sensitivity
   d_s, discrete Laplace, :data:`SPANS_EPSILON_PROPORTION`).
6. **The event level**: the configured mechanism (the default's choice, the workload or the marginals
   mechanism ...) runs on the bounded rows at the row-level budget (epsilon_e / L, delta / (L e^((L-1)
   epsilon_e / L))), epsilon_e what steps 2 and 5 left. Adding or removing a person adds or removes at most L
   rows, so by group privacy for (epsilon, delta)-DP (Vadhan 2017, "The Complexity of Differential Privacy",
   Lemma 2.2) the event release is (epsilon_e, delta)-DP per person. Every data-dependent step of that
   mechanism (its DP column profile, value discovery, n', selection, measurements) is covered by the one
   conversion; equivalently, each of its k-way tables has L1 and L2 sensitivity L per person.

Basic composition of the pure shares of steps 2 and 5 and of step 6 gives (epsilon, delta)-DP per person. The
manifest's ``persons`` block records L and how it was chosen, the noisy histogram, the person columns and the
person-level ledger; the event mechanism's own ``budget`` is its row-level one.

**Synthesis** (post-processing, :mod:`spark_dpsynth.synthesizers.persons`): the synthetic persons' numbers of rows
n are drawn from the noisy histogram (uniformly within a bin), each person in the stratum s = min(n, L). A pool of
event rows is sampled from the event model; each person takes one random pool row of its stratum as its seed, whose
person columns become the person's, then n pool rows of its stratum that share those person columns (the model
given the stratum and the person columns), on distinct values of a distinct-per-person column where the group holds
them (the one of fewest values in the pool); a column that moves with time is set on each of a person's rows to t
plus the person's offset (the lower median of its rows' c - t), and one that never goes down is given out over them
in increasing order; a column whose persons' spans are narrow beside the pool's spread keeps a person's values within
a span drawn from its histogram. Where a (stratum, person columns) group runs short, the person takes other rows of its stratum
with its person columns written over theirs. A person's rows share one surrogate key in the key column's type,
ordered by the event time when there is one.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import secrets
from collections.abc import Callable
from typing import Any

import numpy as np

from spark_dpsynth._progress import Progress, report
from spark_dpsynth.data.trends import SPAN_EDGES, decreases, offset_spread, span_class, time_base, varies
from spark_dpsynth.data.trends import TIME_TYPES as _TIME_TYPES
from spark_dpsynth.errors import InvalidParameterError, SchemaError
from spark_dpsynth.params import MIN_DELTA, DataConfig
from spark_dpsynth.privacy.accounting import Accountant, delta_from_protected_n
from spark_dpsynth.privacy.noise import NoiseSource, noise_source_for
from spark_dpsynth.synthesizers.persons import ROWS_COLUMN

__all__ = [
    "ROWS_COLUMN",
    "HISTOGRAM_EPSILON_PROPORTION",
    "PERSON_COLUMNS_EPSILON_PROPORTION",
    "PERSON_COLUMN_SHARE",
    "REPEATS_EPSILON_PROPORTION",
    "REPEAT_SHARE",
    "TIME_COLUMNS_EPSILON_PROPORTION",
    "OFFSET_SHARE",
    "OFFSET_TOLERANCE",
    "NONDECREASING_SHARE",
    "TIME_EVIDENCE",
    "MAX_TIME_BASES",
    "MOVING_REPEATS",
    "SPANS_EPSILON_PROPORTION",
    "rows_grid",
    "check_event_table",
    "cap_from_histogram",
    "BoundedRows",
    "bound_persons",
    "fit_events",
    "group_privacy_per_row",
    "with_rows_column",
]

log = logging.getLogger(__name__)

HISTOGRAM_EPSILON_PROPORTION = 0.1
"""Share of epsilon of the noisy histogram of persons by number of rows (step 2 of the module docstring)."""
PERSON_COLUMNS_EPSILON_PROPORTION = 0.05
"""Share of epsilon of the DP test of person columns (when ``person_columns`` is not declared)."""
PERSON_COLUMN_SHARE = 0.05
"""A column is a person column when the noisy number of persons whose rows hold two of its values is at most
this share of the protected number of persons."""
REPEATS_EPSILON_PROPORTION = 0.02
"""Share of epsilon of the DP test of the columns whose values a person never repeats (with L >= 2)."""
REPEAT_SHARE = 0.05
"""A column is *distinct per person* (a panel's year, a visit's number) when the noisy number of persons whose
kept rows hold one of its values twice is at most this share of the protected persons with two rows or more."""
TIME_COLUMNS_EPSILON_PROPORTION = 0.04
"""Share of epsilon of the DP test of the number columns that move with the time base or never go down as it goes
up (with L >= 2 and a time base)."""
OFFSET_SHARE = 0.2
"""A number column c *moves with time* when, of the persons whose time base t spans more than twice
:data:`OFFSET_TOLERANCE` (the noisy number), the noisy number whose kept rows hold two offsets c - t more than
the tolerance apart is at most this share (on a panel of young women, 0% for age against its year, 73% or more
for every other column; a column constant per person breaks its offset for every such person)."""
OFFSET_TOLERANCE = 1.0
"""The spread of a person's offsets c - t allowed to a column that moves with time, in the columns' unit: an age
in whole years against a survey year is one year apart when the birthday falls between two interviews."""
MOVING_REPEATS = 0.5
"""The time-column tests take as time bases (unless a time column is declared) and test only the columns whose
noisy number of persons repeating a value is at most this share of the noisy persons with two rows or more (not
a panel's yes/no columns)."""
NONDECREASING_SHARE = 0.1
"""A number column *never goes down* as the time base goes up (a panel's total work experience) when the noisy
number of persons whose value does is at most this share of the noisy number of persons whose kept rows hold two
of its values with the base set (a column unrelated to time goes down for about half of those; on a panel of
young women with two rows kept per person, job tenure, which restarts at a change of job, for a quarter)."""
MAX_TIME_BASES = 3
"""The time-column tests try at most this many whole-number columns as the time base (a panel's year, and a
column that happens to repeat little, such as hours worked): each adds its counts to the test's L1
sensitivity."""
TIME_EVIDENCE = 2.0
"""The time-column tests decide only when their threshold (:data:`OFFSET_SHARE` of the noisy persons whose time
base spans more than twice the tolerance, :data:`NONDECREASING_SHARE` of those whose value varies) is at least
this many noise scales: a column no person breaks is then missed with probability at most e^-2 / 2 (6.8%), and
one that all break is all but never taken."""
SPANS_EPSILON_PROPORTION = 0.03
"""Share of epsilon of the histograms of persons by the span of their values in each whole-number, date or
timestamp column (with L >= 2): a person's activity period in a rating's timestamp."""
_WHOLE_TYPES = ("tinyint", "smallint", "int", "bigint")
_NUMBER_TYPES = ("tinyint", "smallint", "int", "bigint", "float", "double")
_STEPS = (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0)


def rows_grid(bound: int) -> tuple[int, ...]:
    """The lower edges of the public bins of rows per person: 1, 2, ..., 10, then 12, 15, 20, 25, 30, 40, 50,
    60, 80, 100, 120, ... (about ten per decade), all <= ``bound``. Bin i holds lo_i .. lo_(i+1) - 1 rows, the last
    one lo_last .. ``bound`` (a person with more rows is counted there)."""
    out = list(range(1, min(bound, 10) + 1))
    scale = 10
    while scale <= bound:
        out += [e for e in (int(round(step * scale)) for step in _STEPS) if out[-1] < e <= bound]
        scale *= 10
    return tuple(out)


def check_event_table(schema: Any, data: DataConfig) -> str | None:  # noqa: ANN401 - pyspark StructType
    """The checks of an event table that need only the input's schema, before any data is read; returns the event
    time column (declared, else the first date or timestamp column, else None).

    Raises:
        SchemaError: the privacy unit, a person column, a span column or the time column is not an input column;
            the input already has a column named :data:`ROWS_COLUMN`; the time column is not a date, timestamp or
            number; a span column is not a whole number, date or timestamp.
    """
    names = [f.name for f in schema.fields]
    unit = data.privacy_unit
    if unit not in names:
        raise SchemaError(f"unknown privacy unit column {unit!r}; the input has {len(names)} column(s)")
    if ROWS_COLUMN in names:
        raise SchemaError(
            f"the input has a column {ROWS_COLUMN!r}, the name person-level DP gives each row's number of rows "
            "of its person; rename it"
        )
    missing = [c for c in data.person_columns or () if c not in names]
    if missing:
        raise SchemaError(f"unknown person column(s) {missing}")
    types = {f.name: f.dataType.simpleString() for f in schema.fields}
    missing = [c for c in data.span_columns or () if c not in names]
    if missing:
        raise SchemaError(f"unknown span column(s) {missing}")
    other = {c: types[c] for c in data.span_columns or () if types[c] not in (*_WHOLE_TYPES, *_TIME_TYPES)}
    if other:
        raise SchemaError(f"span column(s) {list(other)} are not whole numbers, dates or timestamps: {other}")
    if data.time_column is not None:
        if data.time_column not in names:
            raise SchemaError(f"unknown time column {data.time_column!r}")
        if types[data.time_column] not in (*_TIME_TYPES, *_NUMBER_TYPES):
            raise SchemaError(
                f"the time column {data.time_column!r} is {types[data.time_column]}, not a date, timestamp or "
                "number"
            )
        return data.time_column
    return next((c for c in names if c != unit and types[c] in _TIME_TYPES), None)


def group_privacy_per_row(epsilon: float, delta: float, cap: int) -> tuple[float, float]:
    """The row-level (epsilon_r, delta_r) whose release is (epsilon, delta)-DP for a person of at most ``cap``
    rows: epsilon_r = epsilon / L, delta_r = delta / (L e^((L - 1) epsilon_r)) (group privacy for (epsilon,
    delta)-DP, Vadhan 2017, Lemma 2.2: an (e, d)-DP mechanism is (k e, k e^((k-1) e) d)-DP for k rows).

    Raises:
        InvalidParameterError: delta_r falls below the smallest delta a mechanism takes (L and epsilon too large).
    """
    eps_row = epsilon / cap
    log_delta_row = math.log(delta) - math.log(cap) - (cap - 1) * eps_row
    delta_row = math.exp(log_delta_row) if log_delta_row > -700 else 0.0
    if delta_row < MIN_DELTA:
        raise InvalidParameterError(
            f"at most {cap} rows per person at epsilon {epsilon:g} leaves a row-level delta below {MIN_DELTA:g}; "
            "lower max_rows_per_person or rows_per_person_percentile"
        )
    return eps_row, delta_row


def _fits(epsilon: float, delta: float, cap: int) -> bool:
    """True when :func:`group_privacy_per_row` gives a row-level delta a mechanism takes."""
    return math.log(delta) - math.log(cap) - (cap - 1) * epsilon / cap >= math.log(MIN_DELTA)


def cap_from_histogram(noisy: np.ndarray, grid: tuple[int, ...], percentile: float) -> int:
    """L: the lower edge of the first bin of ``grid`` where the noisy persons (clipped at 0), cumulated from one
    row up, reach ``percentile`` of their total (post-processing of the noisy histogram); 1 when it is empty."""
    weights = np.clip(np.asarray(noisy, dtype=np.float64), 0, None)
    total = weights.sum()
    if total <= 0:
        return 1
    reached = np.cumsum(weights) >= percentile * total
    return int(grid[int(np.argmax(reached))])


def _nonempty(column: Any) -> Any:  # noqa: ANN401 - Column
    from pyspark.sql import functions as F

    return column.isNotNull() & (F.length(F.trim(column.cast("string"))) > 0)


def _bounded(df, unit: str, cap: int, key: int):  # noqa: ANN001, ANN202 - DataFrame
    """The rows kept under the cap, each with :data:`ROWS_COLUMN`: per person the ``cap`` rows of lowest keyed
    hash of (key, person, row). Identical rows of one person hash alike; which of them is kept does not matter."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    person = Window.partitionBy(F.col(f"`{unit}`"))
    ranked = df.withColumn("__h", F.xxhash64(F.lit(key), *[F.col(f"`{c}`") for c in df.columns])).withColumn(
        "__k", F.row_number().over(person.orderBy("__h"))
    )
    kept = ranked.where(F.col("__k") <= cap).drop("__h", "__k")
    return kept.withColumn(ROWS_COLUMN, F.count(F.lit(1)).over(person).cast("string"))


def _grid_histogram(counts, grid: tuple[int, ...], bound: int) -> np.ndarray:  # noqa: ANN001 - DataFrame
    """h[i] = the number of persons whose ``count`` (rows, >= 1), clipped at ``bound``, falls in bin i."""
    from pyspark.sql import functions as F

    clipped = F.least(F.col("count"), F.lit(bound))
    index = F.lit(0)
    for i, edge in enumerate(grid[1:], start=1):
        index = F.when(clipped >= edge, F.lit(i)).otherwise(index)
    rows = counts.groupBy(index.alias("b")).count().collect()  # at most len(grid) rows
    h = np.zeros(len(grid), dtype=np.int64)
    for row in rows:
        h[int(row["b"])] = int(row["count"])
    return h


@dataclasses.dataclass(frozen=True)
class BoundedRows:
    """The outcome of :func:`bound_persons`: each person's rows bounded to at most L, and the row-level budget
    under which a mechanism's prelude and measurement read them (docs/design.md section 2.10)."""

    rows: Any  # pyspark DataFrame
    """The bounded rows (cached: :meth:`unpersist` when done): the event columns, :data:`ROWS_COLUMN`, then the
    row keys; no privacy unit column."""
    config: Any  # JobConfig (pipeline layer)
    """The job's configuration at the row level: its budget (epsilon_e / L, delta_r), no privacy unit, the
    event columns with :data:`ROWS_COLUMN`'s public domain 1..L."""
    noise: NoiseSource
    """The release's one noise source: the event mechanism draws through it after the person-level steps."""
    block: dict[str, Any]
    """The manifest's ``persons`` block: the noisy histogram, L and its source, the person columns, the
    person-level ledger and the budgets."""
    protected_persons: int
    """P', the protected number of persons (>= 1)."""
    cached: Any  # pyspark DataFrame

    def unpersist(self) -> None:
        """Drop the cache of the bounded rows."""
        self.cached.unpersist()


def _per_column_test(
    acct: Accountant,
    share: str,
    proportion: float,
    what: str,
    true: Any,  # noqa: ANN401 - a pyspark Row
    prefix: str,
    d: int,
) -> list[float]:
    """The noisy numbers of persons whose rows ``what``, one per attribute column (``true[prefix + j]``, exact,
    private): a person adds at most one to each of the d counts, so L1 sensitivity d, discrete Laplace of scale
    d / (``proportion`` epsilon) (Ghosh, Roughgarden, Sundararajan 2009), the ledger's share ``share``."""
    acct.spend_epsilon(
        share,
        proportion,
        f"discrete Laplace on the numbers of persons whose rows {what}, {d} column(s) (L1 sensitivity {d})",
    )
    return acct.laplace(share, [int(true[f"{prefix}{j}"] or 0) for j in range(d)], sensitivity=float(d))


def _time_bases(
    types: dict[str, str], block: dict[str, Any], time_column: str | None, several: float, declared: bool
) -> list[str]:
    """The candidate time bases of the time-column tests: the time column when it holds whole numbers, or
    ``declared`` dates or timestamps (their year, :func:`~spark_dpsynth.data.trends.time_base`: most event dates
    move no column, so not unasked), else the whole-number columns at most :data:`MOVING_REPEATS` of whose persons
    repeat a value, at most :data:`MAX_TIME_BASES` of fewest noisy repeats (post-processing of the repeat test)."""
    dated = _TIME_TYPES if declared else ()
    if time_column is not None and types.get(time_column) in (*_WHOLE_TYPES, *dated):
        return [time_column]
    repeats = block.get("noisy_repeating_persons") or {}
    person = set(block.get("person_columns") or ())
    whole = [
        c
        for c, n in repeats.items()
        if c not in person and types.get(c) in _WHOLE_TYPES and n <= MOVING_REPEATS * several
    ]
    return sorted(whole, key=lambda c: (repeats[c], whole.index(c)))[:MAX_TIME_BASES]


def _test_time_columns(
    bounded,  # noqa: ANN001 - pyspark DataFrame
    unit: str,
    attributes: list[str],
    schema: Any,  # noqa: ANN401 - pyspark StructType
    person_columns: list[str],
    data: DataConfig,
    time_column: str | None,
    several: float,
    acct: Accountant,
    block: dict[str, Any],
) -> None:
    """The DP tests of the number columns that move with a time base, and of those that never go down as it goes
    up (step 5 of the module docstring), against each candidate base in one pass; the base whose rules hold for
    the most columns is kept (ties: the fewest noisy repeats). Writes ``offset_time_column``,
    ``time_offset_columns`` and ``nondecreasing_columns`` (the kept base's), and ``noisy_spanning_persons``,
    ``noisy_offset_persons``, ``noisy_decreasing_persons`` and ``noisy_varying_in_time_persons`` per base into
    ``block``; spends
    :data:`TIME_COLUMNS_EPSILON_PROPORTION` only when there is a base and a number column to test."""
    from pyspark.sql import functions as F

    types = {f.name: f.dataType.simpleString() for f in schema.fields}
    bases = _time_bases(types, block, time_column, several, data.time_column is not None)
    # a column with declared values or bins keeps them: its offsets would fall outside
    declared = {*data.bins, *data.domains, *data.categorical, *data.hash_buckets}
    numbers = [
        c for c in attributes if c not in (*person_columns, *declared) and types.get(c) in _NUMBER_TYPES
    ]
    repeats = block.get("noisy_repeating_persons") or {}
    tested: dict[str, list[str]] = {}
    for base in bases:
        tested[base] = [c for c in numbers if c != base]
        if base != time_column:
            # a column that moves with a base few persons repeat repeats a value little itself: the columns most
            # persons repeat (a panel's yes/no columns) are not tested, and the test's noise shrinks with the
            # number tested (post-processing of the repeat test)
            tested[base] = [c for c in tested[base] if repeats.get(c, 0) <= MOVING_REPEATS * several]
    tested = {base: cs for base, cs in tested.items() if cs}
    if not tested:
        return
    # per base: the persons whose base spans more than twice the tolerance (a person tells a column that moves
    # from one that stays only then); per column, such a person whose offsets c - t spread beyond it, and any
    # person whose c goes down as t goes up; rows where c or t is empty left out
    counts: list[tuple[str, str, str, Any]] = []  # (base, test, column, per-person flag)
    for base, columns in tested.items():
        t = time_base(base, types[base])
        spans = F.coalesce(F.max(t) - F.min(t) > 2 * OFFSET_TOLERANCE, F.lit(False))
        counts.append((base, "spanning", "", spans))
        counts += [
            (base, "offset", c, spans & F.coalesce(offset_spread(c, t) > OFFSET_TOLERANCE, F.lit(False)))
            for c in columns
        ]
        counts += [(base, "decreasing", c, decreases(c, t)) for c in columns]
        counts += [(base, "varying", c, F.coalesce(varies(c, t), F.lit(False))) for c in columns]
    d = len(counts)
    per_person = bounded.groupBy(f"`{unit}`").agg(
        *[flag.cast("long").alias(f"_o{j}") for j, (_, _, _, flag) in enumerate(counts)]
    )
    true = per_person.agg(*[F.sum(f"_o{j}").alias(f"_o{j}") for j in range(d)]).collect()[0]  # private
    noisy = _per_column_test(
        acct,
        "time_columns",
        TIME_COLUMNS_EPSILON_PROPORTION,
        f"span more than {2 * OFFSET_TOLERANCE:g} of a time base {list(tested)} (and of those, per number "
        f"column, whose offsets from it spread beyond {OFFSET_TOLERANCE:g}), and per number column whose value "
        "goes down as the base goes up",
        true,
        "_o",
        d,
    )
    del true
    found = {(base, test, c): float(n) for (base, test, c, _), n in zip(counts, noisy, strict=True)}
    # a rule holds when few persons break it, and enough persons could break it for the noise (scale d /
    # epsilon_t) to tell: its threshold is at least TIME_EVIDENCE scales
    scale = d / (TIME_COLUMNS_EPSILON_PROPORTION * acct.epsilon)
    rules: dict[str, tuple[list[str], list[str]]] = {}
    for base, columns in tested.items():
        moving = OFFSET_SHARE * found[(base, "spanning", "")]
        offsets = [
            c for c in columns if moving >= TIME_EVIDENCE * scale and found[(base, "offset", c)] <= moving
        ]
        rising = {c: NONDECREASING_SHARE * found[(base, "varying", c)] for c in columns}
        growing = [
            c
            for c in columns
            if c not in offsets
            and rising[c] >= TIME_EVIDENCE * scale
            and found[(base, "decreasing", c)] <= rising[c]
        ]
        rules[base] = (offsets, growing)
    kept = max(
        tested, key=lambda base: (len(rules[base][0]) + len(rules[base][1]), -list(tested).index(base))
    )
    block["noisy_spanning_persons"] = {base: int(found[(base, "spanning", "")]) for base in tested}
    block["noisy_offset_persons"] = {
        base: {c: int(found[(base, "offset", c)]) for c in columns} for base, columns in tested.items()
    }
    block["noisy_decreasing_persons"] = {
        base: {c: int(found[(base, "decreasing", c)]) for c in columns} for base, columns in tested.items()
    }
    block["noisy_varying_in_time_persons"] = {
        base: {c: int(found[(base, "varying", c)]) for c in columns} for base, columns in tested.items()
    }
    block["offset_time_column"] = kept
    block["time_offset_columns"], block["nondecreasing_columns"] = rules[kept]


def _test_spans(
    bounded,  # noqa: ANN001 - pyspark DataFrame
    unit: str,
    attributes: list[str],
    schema: Any,  # noqa: ANN401 - pyspark StructType
    person_columns: list[str],
    data: DataConfig,
    acct: Accountant,
    block: dict[str, Any],
) -> None:
    """The histograms of persons by the span of their kept rows' values (greatest minus least, on the public decade
    classes of :data:`~spark_dpsynth.data.trends.SPAN_EDGES`) in each whole-number, date and timestamp column
    that is not a person column, has no declared values or bins and follows no time rule, or in each of
    ``data.span_columns`` that is not a person column and follows no time rule (step 5 of the module
    docstring): a person of two valued rows or more adds one to one class per column, so L1 sensitivity d,
    discrete Laplace, :data:`SPANS_EPSILON_PROPORTION`, the ledger's share ``person_spans``. Writes
    ``noisy_persons_by_span`` (per column, one count per class) and ``span_edges`` into ``block``; spends
    nothing without such a column. Synthesis keeps a person's rows within a span drawn from them where the
    spans are narrow beside the column's range."""
    from pyspark.sql import functions as F

    from spark_dpsynth.profile.columns import as_number, scale_of

    declared = {*data.bins, *data.domains, *data.categorical, *data.hash_buckets}
    ruled = {*(block.get("time_offset_columns") or ()), *(block.get("nondecreasing_columns") or ())}
    types = {f.name: f.dataType for f in schema.fields}
    base = block.get("offset_time_column")
    if ruled and types[base].simpleString() in _WHOLE_TYPES:
        # a whole-number base (a panel's year) keeps its values; a date's is windowed before the columns that
        # move with its year are set from it
        ruled.add(base)
    if data.span_columns is not None:  # declared (checked before any data was read), maybe none
        columns = [c for c in data.span_columns if c in attributes and c not in (*person_columns, *ruled)]
    else:
        columns = [
            c
            for c in attributes
            if c not in (*person_columns, *declared, *ruled)
            and types[c].simpleString() in (*_WHOLE_TYPES, *_TIME_TYPES)
        ]
    if not columns:
        return
    d, classes = len(columns), len(SPAN_EDGES) + 2
    per_person = bounded.groupBy(f"`{unit}`").agg(
        *[
            span_class(as_number(F.col(f"`{c}`"), scale_of(types[c]))).alias(f"_s{j}")
            for j, c in enumerate(columns)
        ]
    )
    true = per_person.agg(
        *[
            F.sum((F.col(f"_s{j}") == F.lit(k)).cast("long")).alias(f"_s{j}_{k}")
            for j in range(d)
            for k in range(classes)
        ]
    ).collect()[0]  # private
    acct.spend_epsilon(
        "person_spans",
        SPANS_EPSILON_PROPORTION,
        f"discrete Laplace on the histograms of persons by the span of their values over {classes} public "
        f"decade classes, {d} column(s) (L1 sensitivity {d})",
    )
    noisy = acct.laplace(
        "person_spans",
        [int(true[f"_s{j}_{k}"] or 0) for j in range(d) for k in range(classes)],
        sensitivity=float(d),
    )
    del true
    block["span_edges"] = list(SPAN_EDGES)
    block["noisy_persons_by_span"] = {
        c: [int(x) for x in noisy[j * classes : (j + 1) * classes]] for j, c in enumerate(columns)
    }


def _as_offsets(bounded, block: dict[str, Any]):  # noqa: ANN001, ANN202 - DataFrame
    """The kept rows with each column that moves with time replaced by its offset c - t (in c's type; empty where
    c or t is): the event model then learns a person's offset beside the person columns (a birth year), a 2-way
    relation, where c itself would need c, t and the person column together. Synthesis adds t back."""
    from pyspark.sql import functions as F

    base, columns = block.get("offset_time_column"), block.get("time_offset_columns") or []
    if not columns:
        return bounded
    types = {f.name: f.dataType for f in bounded.schema.fields}
    t = time_base(base, types[base].simpleString())
    offsets = {c: (F.col(f"`{c}`").cast("double") - t).cast(types[c]).alias(c) for c in columns}
    return bounded.select(*[offsets.get(c, F.col(f"`{c}`")) for c in bounded.columns])


def bound_persons(
    df,  # noqa: ANN001 - pyspark DataFrame
    config: Any,  # noqa: ANN401 - JobConfig (pipeline layer)
    *,
    progress: Progress | None = None,
) -> BoundedRows:
    """Steps 1-5 of the module docstring: the person-level steps that bound each person's rows to L, before any
    mechanism's prelude (:func:`spark_dpsynth.mechanisms.prelude.prepare_table`) reads them.

    Args:
        df: the sensitive event table after ``row_filter``; ``config.data.privacy_unit`` names the person.
        config: the job's :class:`~spark_dpsynth.config.JobConfig`; its ``[aggregate]`` epsilon and delta are
            the person-level budget (delta None: 1 / (P' ln P') from the protected number of persons P').
        progress: receives one short message per stage (never a statistic of the data).

    Returns:
        The :class:`BoundedRows` (cached: the caller unpersists them).

    L is lowered (halved) while the row-level delta of group privacy would fall below ``MIN_DELTA`` (an epsilon
    of hundreds): from public figures, so no refusal comes after budget is spent.

    Raises:
        SchemaError: a schema check of :func:`check_event_table` (before any data is read).

    Privacy:
        The histogram of persons by rows, the tests of person columns, of repeated values and of the time
        columns, and the histograms of persons by span are discrete Laplace shares of the person-level epsilon (L1
        sensitivity 1, d, d, the number of time-column counts and d_s); the rest, epsilon_e and delta, is the event level's, at epsilon_e / L and
        delta / (L e^((L-1) epsilon_e / L)) per row by group privacy (Vadhan 2017, Lemma 2.2).
    """
    from pyspark.sql import functions as F

    from spark_dpsynth.data.prepare import resolve_columns

    data: DataConfig = config.data
    unit = data.privacy_unit
    assert unit is not None
    time_column = check_event_table(df.schema, data)
    attributes = resolve_columns(df.columns, data).columns
    assert attributes is not None
    outside = [c for c in data.person_columns or () if c not in attributes]
    if outside:
        raise SchemaError(f"person column(s) {outside} are not attribute columns")
    budget = config.budget
    noise = noise_source_for(budget.seed)
    acct = Accountant(budget, noise=noise)
    key = secrets.randbits(62) if budget.seed is None else int(budget.seed) % (1 << 62)
    # identifier columns (row keys) are carried along, never measured: the event release writes fresh keys
    row_keys = [c for c in data.identifiers if c != unit]
    rows = df.where(_nonempty(F.col(f"`{unit}`"))).select(*[f"`{c}`" for c in (unit, *attributes, *row_keys)])
    report(progress, log, f"persons: rows without a person ({unit!r} empty) are left out")
    bound = data.rows_per_person_bound
    grid = rows_grid(bound)
    acct.spend_epsilon(
        "persons_by_rows",
        HISTOGRAM_EPSILON_PROPORTION,
        f"discrete Laplace on the histogram of persons by number of rows over {len(grid)} public bins "
        "(L1 sensitivity 1)",
    )
    noisy = acct.laplace(
        "persons_by_rows", _grid_histogram(rows.groupBy(f"`{unit}`").count(), grid, bound), sensitivity=1.0
    )
    protected_persons = max(1, int(np.clip(noisy, 0, None).sum()))
    block: dict[str, Any] = {
        "privacy_unit_column": unit,
        "rows_grid": list(grid),
        "rows_per_person_bound": bound,
        "noisy_persons_by_rows": [int(x) for x in noisy],
        "protected_number_of_persons": protected_persons,
    }
    if data.max_rows_per_person is None:
        cap = cap_from_histogram(noisy, grid, data.rows_per_person_percentile)
        block.update(cap_source="dp_histogram_percentile", cap_percentile=data.rows_per_person_percentile)
    else:
        cap = data.max_rows_per_person
        block.update(cap_source="given")
    if acct.delta is None:
        acct.declare_delta(
            delta_from_protected_n(protected_persons), "1/(P' ln P'), P' the protected number of persons"
        )
    delta = float(acct.delta)  # type: ignore[arg-type]
    tested = data.person_columns is None and bool(attributes)
    repeats = cap >= 2 and bool(attributes)
    eps_events = (
        acct.epsilon
        * (
            1.0
            - HISTOGRAM_EPSILON_PROPORTION
            - PERSON_COLUMNS_EPSILON_PROPORTION * tested
            - REPEATS_EPSILON_PROPORTION * repeats
        )
    )  # the time-column and span tests, when they run, lower epsilon_e further: the row-level delta only grows
    while cap > 1 and not _fits(eps_events, delta, cap):
        cap //= 2  # a row-level delta below MIN_DELTA: a smaller cap (public figures only), never a refusal
    repeats = repeats and cap >= 2  # one kept row per person repeats nothing: no test, no budget
    block["max_rows_per_person"] = int(cap)
    report(progress, log, f"persons: at most {cap} rows per person measured ({block['cap_source']})")
    bounded = _bounded(rows, unit, cap, key).persist()
    try:
        d = len(attributes)
        text = [F.coalesce(F.trim(F.col(f"`{c}`").cast("string")), F.lit("")) for c in attributes]
        # per person and column: its kept rows hold two values (their least and greatest differ), and they hold
        # one value twice (fewer distinct values than rows); one pass, no Expand
        per_person = bounded.groupBy(f"`{unit}`").agg(
            *[(F.min(t) < F.max(t)).cast("long").alias(f"_v{j}") for j, t in enumerate(text)]
            if tested
            else [],
            *[
                (F.size(F.collect_set(t)) < F.count(F.lit(1))).cast("long").alias(f"_r{j}")
                for j, t in enumerate(text)
            ]
            if repeats
            else [],
        )
        wanted = [f"_v{j}" for j in range(d) if tested] + [f"_r{j}" for j in range(d) if repeats]
        true = per_person.agg(*[F.sum(c).alias(c) for c in wanted]).collect()[0] if wanted else {}  # private
        if not tested:
            person_columns = list(data.person_columns or ())
            block["person_columns_source"] = "given"
        else:
            noisy_varying = _per_column_test(
                acct, "person_columns", PERSON_COLUMNS_EPSILON_PROPORTION, "hold two values", true, "_v", d
            )
            person_columns = [
                c
                for c, n in zip(attributes, noisy_varying, strict=True)
                if n <= PERSON_COLUMN_SHARE * protected_persons
            ]
            block["person_columns_source"] = "dp_test"
            block["noisy_varying_persons"] = {
                c: int(n) for c, n in zip(attributes, noisy_varying, strict=True)
            }
        block["person_columns"] = person_columns
        report(progress, log, f"persons: person columns {person_columns}")
        if repeats:
            several = float(np.clip(noisy[1:], 0, None).sum())  # persons with two rows or more (noisy)
            noisy_repeating = _per_column_test(
                acct, "repeated_values", REPEATS_EPSILON_PROPORTION, "hold one value twice", true, "_r", d
            )
            block["noisy_repeating_persons"] = {
                c: int(n) for c, n in zip(attributes, noisy_repeating, strict=True)
            }
            block["distinct_columns"] = [
                c
                for c, n in zip(attributes, noisy_repeating, strict=True)
                if c not in person_columns and n <= REPEAT_SHARE * several
            ]
            report(progress, log, f"persons: columns a person never repeats {block['distinct_columns']}")
        del true
        if repeats:
            _test_time_columns(
                bounded, unit, attributes, df.schema, person_columns, data, time_column, several, acct, block
            )
            if block.get("offset_time_column") is not None:
                moving, rising = block["time_offset_columns"], block["nondecreasing_columns"]
                report(progress, log, f"persons: against {block['offset_time_column']!r}, columns that move "
                       f"with it {moving}, that never go down {rising}")  # fmt: skip
            _test_spans(bounded, unit, attributes, df.schema, person_columns, data, acct, block)
        eps_events = acct.spend_rest_of_epsilon(
            "event_rows", f"the event mechanism on at most {cap} rows per person (group privacy)"
        )
        acct.spend_delta("event_rows_delta", delta, "the event mechanism's delta (group privacy)")
        eps_row, delta_row = group_privacy_per_row(eps_events, delta, cap)
        report(
            progress,
            log,
            f"persons: events at epsilon {eps_row:.4g}, delta {delta_row:.3g} per row "
            f"(epsilon {eps_events:.4g}, delta {delta:.3g} per person of at most {cap} rows)",
        )
        event_data = dataclasses.replace(
            data,
            privacy_unit=None,
            columns=(*attributes, ROWS_COLUMN),
            domains={**data.domains, ROWS_COLUMN: tuple(str(i) for i in range(1, cap + 1))},
            identifiers=tuple(c for c in data.identifiers if c != unit),
            person_columns=None,
            span_columns=None,
            time_column=None,
        )
        event_config = dataclasses.replace(
            config,
            data=event_data,
            budget=dataclasses.replace(budget, epsilon=eps_row, delta=delta_row),
        )
        kept = _as_offsets(bounded, block).select(*[f"`{c}`" for c in (*event_data.columns, *row_keys)])
    except BaseException:
        bounded.unpersist()
        raise
    block.update(
        epsilon=float(acct.epsilon),
        delta=delta,
        budget=acct.ledger().to_json(),
        event_epsilon=float(eps_events),
        event_epsilon_per_row=float(eps_row),
        event_delta_per_row=float(delta_row),
        rows_column=ROWS_COLUMN,
        key_type=df.schema[unit].dataType.simpleString(),
        columns=list(df.columns),
        time_column=time_column,
    )
    return BoundedRows(kept, event_config, noise, block, protected_persons, bounded)


def fit_events(
    df,  # noqa: ANN001 - pyspark DataFrame
    config: Any,  # noqa: ANN401 - JobConfig (pipeline layer)
    fit_rows: Callable[[Any, Any, NoiseSource], Any],
    *,
    progress: Progress | None = None,
) -> Any:  # noqa: ANN401 - registry.Fitted
    """The person-level release of an event table (module docstring; docs/design.md section 2.10): the rows
    bounded per person (:func:`bound_persons`), then the configured mechanism on them at the row-level budget.

    Args:
        df: the sensitive event table after ``row_filter``; ``config.data.privacy_unit`` names the person.
        config: the job's :class:`~spark_dpsynth.config.JobConfig`; its ``[aggregate]`` epsilon and delta are
            the person-level budget (delta None: 1 / (P' ln P') from the protected number of persons P').
        fit_rows: ``fit_rows(rows, row_config, noise)`` runs the configured mechanism on the bounded rows with
            ``row_config`` (the row-level budget, no privacy unit, :data:`ROWS_COLUMN` among the columns with
            its public domain) and the release's one noise source, and returns its ``Fitted``.
        progress: receives one short message per stage (never a statistic of the data).

    Returns:
        The event mechanism's ``Fitted`` whose release manifest has ``privacy_unit`` ``"person"``,
        ``privacy_unit_column``, ``protected_number_of_persons`` and the ``persons`` block.

    Raises:
        SchemaError: a schema check of :func:`check_event_table` (before any data is read).
    """
    bounded = bound_persons(df, config, progress=progress)
    try:
        fitted = fit_rows(bounded.rows, bounded.config, bounded.noise)
    finally:
        bounded.unpersist()
    manifest = fitted.release.manifest.with_entries(
        privacy_unit="person",
        privacy_unit_column=bounded.block["privacy_unit_column"],
        protected_number_of_persons=bounded.protected_persons,
        persons=bounded.block,
    )
    release = dataclasses.replace(fitted.release, manifest=manifest)
    return dataclasses.replace(fitted, release=release)


def with_rows_column(df, unit: str, cap: int):  # noqa: ANN001, ANN202 - DataFrame
    """``df``'s rows with a non-empty ``unit``, each with :data:`ROWS_COLUMN`: min(its person's rows, ``cap``)
    as a string (the evaluation's view of an event table; not private)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    person = Window.partitionBy(F.col(f"`{unit}`"))
    return df.where(_nonempty(F.col(f"`{unit}`"))).withColumn(
        ROWS_COLUMN, F.least(F.count(F.lit(1)).over(person), F.lit(cap)).cast("string")
    )
