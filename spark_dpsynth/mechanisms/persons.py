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
   :data:`PERSON_COLUMN_SHARE` of P'.
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

**Synthesis** (post-processing, :func:`assemble_persons`): the synthetic persons' numbers of rows n are drawn
from the noisy histogram (uniformly within a bin), each person in the stratum s = min(n, L). A pool of event
rows is sampled from the event model; each person takes one random pool row of its stratum as its seed, whose
person columns become the person's, then n pool rows of its stratum that share those person columns (the model
given the stratum and the person columns). Where a (stratum, person columns) group runs short, the person takes
other rows of its stratum with its person columns written over theirs. A person's rows share one surrogate key in
the key column's type, ordered by the event time when there is one.
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
from spark_dpsynth.errors import InvalidParameterError, SchemaError
from spark_dpsynth.params import MIN_DELTA, DataConfig
from spark_dpsynth.privacy.accounting import Accountant, delta_from_protected_n
from spark_dpsynth.privacy.noise import NoiseSource, noise_source_for

__all__ = [
    "ROWS_COLUMN",
    "HISTOGRAM_EPSILON_PROPORTION",
    "PERSON_COLUMNS_EPSILON_PROPORTION",
    "PERSON_COLUMN_SHARE",
    "POOL_FACTOR",
    "MAX_POOL_FACTOR",
    "rows_grid",
    "check_event_table",
    "cap_from_histogram",
    "fit_events",
    "group_privacy_per_row",
    "persons_wanted",
    "assemble_persons",
    "pool_size",
    "stratum_shares",
    "with_rows_column",
]

log = logging.getLogger(__name__)

ROWS_COLUMN = "rows_per_person"
"""The column added to every kept row: its person's number of kept rows, ``"1"`` .. ``"L"`` (public domain)."""
HISTOGRAM_EPSILON_PROPORTION = 0.1
"""Share of epsilon of the noisy histogram of persons by number of rows (step 2 of the module docstring)."""
PERSON_COLUMNS_EPSILON_PROPORTION = 0.05
"""Share of epsilon of the DP test of person columns (when ``person_columns`` is not declared)."""
PERSON_COLUMN_SHARE = 0.05
"""A column is a person column when the noisy number of persons whose rows hold two of its values is at most
this share of the protected number of persons."""
POOL_FACTOR = 1.5
"""Event rows sampled from the model per synthetic row its stratum needs, at the model's share of the stratum
(:func:`pool_size`)."""
MAX_POOL_FACTOR = 4
"""A stratum rarer in the model than the persons need is oversampled at most this many times (times
:data:`POOL_FACTOR`); the rows it still lacks come from the fallback of :func:`assemble_persons`."""

_TIME_TYPES = ("date", "timestamp", "timestamp_ntz")
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


def _bin_upper(grid: tuple[int, ...], bound: int) -> np.ndarray:
    return np.asarray([*(e - 1 for e in grid[1:]), bound], dtype=np.int64)


def check_event_table(schema: Any, data: DataConfig) -> str | None:  # noqa: ANN401 - pyspark StructType
    """The checks of an event table that need only the input's schema, before any data is read; returns the event
    time column (declared, else the first date or timestamp column, else None).

    Raises:
        SchemaError: the privacy unit, a person column or the time column is not an input column; the input
            already has a column named :data:`ROWS_COLUMN`; the time column is not a date or timestamp.
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
    if data.time_column is not None:
        if data.time_column not in names:
            raise SchemaError(f"unknown time column {data.time_column!r}")
        if types[data.time_column] not in _TIME_TYPES:
            raise SchemaError(
                f"the time column {data.time_column!r} is {types[data.time_column]}, not a date or timestamp"
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


def fit_events(
    df,  # noqa: ANN001 - pyspark DataFrame
    config: Any,  # noqa: ANN401 - JobConfig (pipeline layer)
    fit_rows: Callable[[Any, Any, NoiseSource], Any],
    *,
    progress: Progress | None = None,
) -> Any:  # noqa: ANN401 - registry.Fitted
    """The person-level release of an event table (module docstring; docs/design.md section 2.10).

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
        InvalidParameterError: the row-level delta would be too small (after L is chosen).
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
    agg = config.aggregate
    noise = noise_source_for(agg.seed)
    acct = Accountant(float(agg.epsilon), agg.delta, accounting=agg.accounting, noise=noise)
    key = secrets.randbits(62) if agg.seed is None else int(agg.seed) % (1 << 62)
    rows = df.where(_nonempty(F.col(f"`{unit}`"))).select(f"`{unit}`", *[f"`{c}`" for c in attributes])
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
    block["max_rows_per_person"] = int(cap)
    report(progress, log, f"persons: at most {cap} rows per person measured ({block['cap_source']})")
    bounded = _bounded(rows, unit, cap, key).persist()
    try:
        if data.person_columns is not None or not attributes:
            person_columns = list(data.person_columns or ())
            block["person_columns_source"] = "given"
        else:
            d = len(attributes)
            acct.spend_epsilon(
                "person_columns",
                PERSON_COLUMNS_EPSILON_PROPORTION,
                f"discrete Laplace on the numbers of persons whose rows hold two values, {d} column(s) "
                f"(L1 sensitivity {d})",
            )
            text = [F.coalesce(F.trim(F.col(f"`{c}`").cast("string")), F.lit("")) for c in attributes]
            # a person's column holds two values when its least and greatest differ (one pass, no Expand)
            varying = bounded.groupBy(f"`{unit}`").agg(
                *[(F.min(t) < F.max(t)).cast("long").alias(f"_v{j}") for j, t in enumerate(text)]
            )
            true = varying.agg(*[F.sum(f"_v{j}").alias(f"_v{j}") for j in range(d)]).collect()[0]  # private
            noisy_varying = acct.laplace(
                "person_columns", [int(true[f"_v{j}"] or 0) for j in range(d)], sensitivity=float(d)
            )
            del true
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
        if acct.delta is None:
            acct.declare_delta(
                delta_from_protected_n(protected_persons), "1/(P' ln P'), P' the protected number of persons"
            )
        delta = float(acct.delta)  # type: ignore[arg-type]
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
            time_column=None,
        )
        event_config = dataclasses.replace(
            config,
            data=event_data,
            aggregate=dataclasses.replace(agg, epsilon=eps_row, delta=delta_row),
        )
        fitted = fit_rows(bounded.select(*[f"`{c}`" for c in event_data.columns]), event_config, noise)
    finally:
        bounded.unpersist()
    block.update(
        epsilon=float(acct.epsilon),
        delta=delta,
        budget=acct.budget().to_json(),
        event_epsilon=float(eps_events),
        event_epsilon_per_row=float(eps_row),
        event_delta_per_row=float(delta_row),
        rows_column=ROWS_COLUMN,
        key_type=df.schema[unit].dataType.simpleString(),
        columns=list(df.columns),
        time_column=time_column,
    )
    manifest = fitted.release.manifest.with_entries(
        privacy_unit="person",
        privacy_unit_column=unit,
        protected_number_of_persons=protected_persons,
        persons=block,
    )
    release = dataclasses.replace(fitted.release, manifest=manifest)
    return dataclasses.replace(fitted, release=release)


# ----------------------------------------------------------------------------------------------- synthesis


def persons_wanted(
    block: dict[str, Any], target_rows: int | None = None, rng: np.random.Generator | None = None
) -> np.ndarray:
    """The synthetic persons by number of rows: ``out[n - 1]`` persons with n rows, n = 1..bound (int64).

    The noisy histogram (post-processing): bins below b ln(20 B) (b = 1 / epsilon of its share, B bins; an empty
    bin passes with probability 1 / (40 B)) set to 0 unless that empties it, scaled so that the rows add up to about ``target_rows`` when given, rounded to whole
    persons by largest remainders, and each bin's persons spread uniformly at random over its numbers of rows.
    """
    rng = rng if rng is not None else np.random.default_rng()
    grid = tuple(int(x) for x in block["rows_grid"])
    bound = int(block["rows_per_person_bound"])
    upper = _bin_upper(grid, bound)
    h = np.clip(np.asarray(block["noisy_persons_by_rows"], dtype=np.float64), 0, None)
    share = next(
        (s for s in (block.get("budget") or {}).get("shares", ()) if s.get("name") == "persons_by_rows"), None
    )
    if share is not None and share.get("epsilon"):
        # bins below b ln(20 B) (b = 1 / epsilon, B bins) are dropped: an empty bin passes with probability
        # (1/2) e^(-t/b) = 1 / (40 B), so no empty bin at all in 39 of 40 releases
        threshold = math.log(20.0 * len(h)) / float(share["epsilon"])
        kept = np.where(h >= threshold, h, 0.0)
        h = kept if kept.sum() > 0 else h
    if h.sum() <= 0:
        h = np.zeros_like(h)
        h[0] = 1.0
    lows = np.asarray(grid, dtype=np.float64)
    if target_rows is not None:
        h = h * (target_rows / float((h * (lows + upper) / 2.0).sum()))
    total = max(1, int(round(h.sum())))
    raw = h / h.sum() * total
    per_bin = np.floor(raw).astype(np.int64)
    rest = total - int(per_bin.sum())
    if rest > 0:
        per_bin[np.argsort(-(raw - per_bin), kind="stable")[:rest]] += 1
    out = np.zeros(bound, dtype=np.int64)
    for lo, hi, m in zip(grid, upper, per_bin, strict=True):
        if m:
            out[lo - 1 : hi] += rng.multinomial(int(m), np.full(hi - lo + 1, 1.0 / (hi - lo + 1)))
    return out


def _strata(wanted: np.ndarray, cap: int) -> np.ndarray:
    """Rows needed per stratum s = min(n, L), s = 1..L."""
    n = np.arange(1, len(wanted) + 1)
    need = np.zeros(cap, dtype=np.int64)
    np.add.at(need, np.minimum(n, cap) - 1, n * wanted)
    return need


def pool_size(block: dict[str, Any], stratum_shares: np.ndarray | None, wanted: np.ndarray) -> int:
    """The event rows to sample for :func:`assemble_persons`: :data:`POOL_FACTOR` x the synthetic rows, x the
    largest ratio (at most :data:`MAX_POOL_FACTOR`) of a stratum's share of the synthetic rows to its share in
    the model (``stratum_shares``, s = 1..L, from the release's 1-way table of :data:`ROWS_COLUMN`)."""
    cap = int(block["max_rows_per_person"])
    need = _strata(wanted, cap).astype(np.float64)
    rows = max(1.0, need.sum())
    if stratum_shares is None:
        return int(math.ceil(POOL_FACTOR * rows))
    shares = np.asarray(stratum_shares, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(need > 0, (need / rows) / np.maximum(shares, 1e-12), 0.0)
    # a stratum the model makes 4 times rarer than the persons need is left to the fallback, not oversampled
    return int(math.ceil(POOL_FACTOR * rows * min(MAX_POOL_FACTOR, max(1.0, ratio.max(initial=1.0)))))


def stratum_shares(release: Any) -> np.ndarray | None:  # noqa: ANN401 - Release
    """The model's share of each stratum s = 1..L: the release's noisy 1-way counts of :data:`ROWS_COLUMN`,
    clipped at 0 and normalised (post-processing); None when the release has none."""
    cap = int(release.manifest["persons"]["max_rows_per_person"])
    if ROWS_COLUMN not in release.columns or 1 not in release.marginals:
        return None
    c = release.columns.index(ROWS_COLUMN)
    ones = release.marginals[1]
    counts = np.zeros(cap, dtype=np.float64)
    domain = release.domains[c]
    for v, n in zip(
        ones.values[ones.columns[:, 0] == c, 0], ones.counts[ones.columns[:, 0] == c], strict=True
    ):
        s = int(domain[int(v)])
        if 1 <= s <= cap:
            counts[s - 1] += max(float(n), 0.0)
    return counts / counts.sum() if counts.sum() > 0 else None


def with_rows_column(df, unit: str, cap: int):  # noqa: ANN001, ANN202 - DataFrame
    """``df``'s rows with a non-empty ``unit``, each with :data:`ROWS_COLUMN`: min(its person's rows, ``cap``)
    as a string (the evaluation's view of an event table; not private)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    person = Window.partitionBy(F.col(f"`{unit}`"))
    return df.where(_nonempty(F.col(f"`{unit}`"))).withColumn(
        ROWS_COLUMN, F.least(F.count(F.lit(1)).over(person), F.lit(cap)).cast("string")
    )


def assemble_persons(
    pool,  # noqa: ANN001 - pyspark DataFrame
    block: dict[str, Any],
    wanted: np.ndarray,
    *,
    seed: int | None = None,
    progress: Progress | None = None,
):  # noqa: ANN201 - DataFrame
    """Synthetic persons cut from a pool of synthetic event rows (module docstring; post-processing).

    Args:
        pool: synthetic event rows in the input's types with :data:`ROWS_COLUMN` (``"1"`` .. ``"L"``), about
            :func:`pool_size` of them.
        block: the release manifest's ``persons`` block.
        wanted: the persons by number of rows (:func:`persons_wanted`).
        seed: the random order of the pool and of the keys (None: fresh randomness).
        progress: receives one short message per stage.

    Returns:
        The event table: the input's columns in order (``block["columns"]``), the person key a surrogate
        1..M in the key's type (``"syn-"`` and the zero-padded number for a string key), each person's rows
        together and ordered by the time column when there is one. A person whose stratum of the pool ran out
        of rows has fewer rows (logged).
    """
    import pandas as pd
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from spark_dpsynth.synthesizers._types import SURROGATE_PREFIX

    unit = block["privacy_unit_column"]
    cap = int(block["max_rows_per_person"])
    spark = pool.sparkSession
    rng = np.random.default_rng(seed)
    person_cols = [c for c in block.get("person_columns") or () if c in pool.columns]
    value_cols = [c for c in pool.columns if c != ROWS_COLUMN]
    n = np.repeat(np.arange(1, len(wanted) + 1), wanted)
    m = len(n)
    persons = pd.DataFrame({"__id": rng.permutation(m) + 1, "__len": n, "__s": np.minimum(n, cap)})
    persons["__k"] = persons.groupby("__s").cumcount() + 1  # the person's seed row in its stratum
    people = spark.createDataFrame(persons.astype("int64"))
    pool = (
        pool.withColumn("__s", F.col(ROWS_COLUMN).cast("long"))
        .where(F.col("__s").between(1, cap))
        .withColumn("__r", F.rand(seed))
        .withColumn("__g", F.xxhash64(*[F.col(f"`{c}`") for c in person_cols]) if person_cols else F.lit(0))
        .drop(ROWS_COLUMN)
        .persist()
    )
    try:
        keep = [f"__p{i}" for i in range(len(person_cols))]
        as_p = [F.col(f"`{c}`").alias(f"__p{i}") for i, c in enumerate(person_cols)]
        # Seeds: the k-th person of stratum s takes the k-th pool row of s in random order: its person columns;
        # a person whose stratum has too few rows takes a row of any stratum.
        by_stratum = pool.withColumn("__k", F.row_number().over(Window.partitionBy("__s").orderBy("__r")))
        seeded = people.join(by_stratum.select("__s", "__k", "__g", *as_p), ["__s", "__k"], "left").drop(
            "__k"
        )
        unseeded = seeded.where(F.col("__g").isNull()).select(
            "__id", "__len", "__s", F.row_number().over(Window.orderBy("__id")).alias("__k")
        )
        anywhere = pool.select(F.row_number().over(Window.orderBy("__r")).alias("__k"), "__g", *as_p)
        seeds = seeded.where(F.col("__g").isNotNull()).unionByName(unseeded.join(anywhere, "__k").drop("__k"))
        # Each person's slots i in its group (s, g): offsets cumulated in id order.
        group = Window.partitionBy("__s", "__g").orderBy("__id")
        seeds = seeds.withColumn(
            "__end", F.sum("__len").over(group.rowsBetween(Window.unboundedPreceding, 0))
        )
        slots = seeds.select(
            "__id", "__s", "__g", *keep,
            F.explode(F.sequence(F.col("__end") - F.col("__len"), F.col("__end") - 1)).alias("__i"),
        )  # fmt: skip
        ranked = pool.withColumn(
            "__i", F.row_number().over(Window.partitionBy("__s", "__g").orderBy("__r")) - 1
        )
        matched = slots.join(ranked, ["__s", "__g", "__i"], "left")
        first = matched.where(F.col("__r").isNotNull()).select("__id", *[f"`{c}`" for c in value_cols], "__r")

        def overwritten(df):  # noqa: ANN001, ANN202 - a slot's person columns written over its row's
            return df.select(
                "__id",
                *[F.col(f"__p{person_cols.index(c)}").alias(c) if c in person_cols else F.col(f"`{c}`") for c in value_cols],
                "__r",
            )  # fmt: skip

        # Slots whose group ran short: the rows of the same stratum no slot took, person columns written over.
        taken = slots.groupBy("__s", "__g").agg(F.count(F.lit(1)).alias("__used"))
        spare = ranked.join(taken, ["__s", "__g"], "left").where(
            F.col("__used").isNull() | (F.col("__i") >= F.col("__used"))
        )
        open_slots = matched.where(F.col("__r").isNull()).select("__id", "__s", "__i", *keep)
        second = open_slots.withColumn(
            "__j", F.row_number().over(Window.partitionBy("__s").orderBy("__id", "__i"))
        ).join(
            spare.withColumn("__j", F.row_number().over(Window.partitionBy("__s").orderBy("__r"))).drop(
                "__i", "__used", *person_cols
            ),
            ["__s", "__j"],
        )
        parts = [first, overwritten(second)]
        # Slots whose stratum ran short: rows of any stratum no slot took (a single ordering: rare, logged).
        still = open_slots.join(second.select("__id", "__i"), ["__id", "__i"], "left_anti")
        if still.limit(1).count():
            report(progress, log, "persons: some strata of the pool ran short; their persons take other rows")
            rest = spare.join(second.select("__r"), "__r", "left_anti").drop(*person_cols)
            third = still.withColumn("__j", F.row_number().over(Window.orderBy("__id", "__i"))).join(
                rest.withColumn("__j", F.row_number().over(Window.orderBy("__r"))).drop(
                    "__s", "__i", "__used"
                ),
                "__j",
            )
            parts.append(overwritten(third))
        rows = parts[0]
        for part in parts[1:]:
            rows = rows.unionByName(part)
        key_type = str(block.get("key_type") or "bigint")
        if key_type == "string":
            key = F.concat(F.lit(SURROGATE_PREFIX), F.lpad(F.col("__id").cast("string"), len(str(m)), "0"))
        else:
            key = F.col("__id").cast(key_type)
        time_column = block.get("time_column")
        order = [F.col("__id")] + ([F.col(f"`{time_column}`")] if time_column in value_cols else [])
        columns = [c for c in block.get("columns") or [unit, *value_cols] if c == unit or c in value_cols]
        out = (
            rows.withColumn(unit, key)
            .orderBy(*order, F.col("__r"))
            .select(*[F.col(f"`{c}`") for c in columns])
            .localCheckpoint()
        )
    finally:
        pool.unpersist()
    report(progress, log, f"persons: {m:,} synthetic persons, {int((n).sum()):,} rows wanted")
    return out
