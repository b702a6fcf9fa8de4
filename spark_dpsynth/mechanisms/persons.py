"""Person-level DP over event tables: each person's rows bounded to L, and synthetic persons with their rows.

An event table has one row per trip, claim, visit or rating and a column naming the person (the privacy unit).
With ``DataConfig.privacy_unit`` set and ``person_rows`` ``events`` (the default without multi-value columns),
the release protects a person, every row of theirs, and the synthetic table is again an event table
(docs/design.md section 2.10):

1. **Keyless rows** (an empty person key) are left out before anything is counted: a row filter, so a person's
   presence still changes only that person's rows (1-stable).
2. **The cap L** on the rows one person contributes: given (``max_rows_per_person``), or the DP
   ``rows_per_person_percentile`` of the persons' numbers of rows, searched in 1..``rows_per_person_bound``
   (the exponential mechanism with OpenDP's quantile score, Smith 2011; each person adds one value, so the score
   moves by at most max(alpha, 1 - alpha) per person). It spends :data:`CAP_EPSILON_PROPORTION` of epsilon.
3. **Contribution bounding**: a person with more than L rows keeps the L rows of lowest keyed hash
   xxhash64(release key, person, row), a choice that depends on that person's rows alone, on no partitioning and
   on no task attempt. Every kept row gets the column :data:`ROWS_COLUMN`, its person's number of kept rows
   (1..L, a public domain), so the event model learns how a person's rows depend on how many they are.
4. **The person level**: the noisy histogram of persons by their number of kept rows (1..L; a person adds one
   to one bin: L1 sensitivity 1, discrete Laplace, :data:`HISTOGRAM_EPSILON_PROPORTION`), whose sum is the
   protected number of persons; and, unless declared, the DP test of person columns (per column the number of
   persons whose kept rows hold two values; a person adds at most one to each of the d counts: L1 sensitivity
   d, discrete Laplace, :data:`PERSON_COLUMNS_EPSILON_PROPORTION`).
5. **The event level**: the configured mechanism (the default's choice, the workload or the marginals
   mechanism ...) runs on the bounded rows at the row-level budget (epsilon_e / L, delta / (L e^((L-1)
   epsilon_e / L))), epsilon_e what steps 2-4 left. Adding or removing a person adds or removes at most L rows,
   so by group privacy for (epsilon, delta)-DP (Dwork & Roth 2014, "The Algorithmic Foundations of Differential
   Privacy", section 2.3; Vadhan 2017, "The Complexity of Differential Privacy", Lemma 2.2) the event release
   is (epsilon_e, delta)-DP per person. Every data-dependent step of that mechanism (its DP column profile,
   value discovery, n', selection, measurements) is covered by the one conversion: equivalently each k-way
   table has L1 and L2 sensitivity L per person.

Basic composition of the pure shares of steps 2-4 and of step 5 gives (epsilon, delta)-DP per person. The
manifest's ``persons`` block records L and how it was chosen, the noisy histogram, the person columns and the
person-level ledger; the event mechanism's own ``budget`` is its row-level one.

**Synthesis** (post-processing, :func:`assemble_persons`): the synthetic persons by number of rows come from
the noisy histogram; a pool of event rows is sampled from the event model; within each number of rows n, the
pool's rows are grouped by (n, person columns) and cut into chunks of n rows, each chunk a synthetic person whose
rows agree on the person columns and were drawn from the model given (n, those columns). Strata with too few
complete chunks take chunks of rows of the same n whose person columns are set to the chunk's first row's. A
person's rows share one surrogate key in the key column's type, ordered by the event time when there is one.
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
    "CAP_EPSILON_PROPORTION",
    "HISTOGRAM_EPSILON_PROPORTION",
    "PERSON_COLUMNS_EPSILON_PROPORTION",
    "PERSON_COLUMN_SHARE",
    "POOL_FACTOR",
    "check_event_table",
    "fit_events",
    "group_privacy_per_row",
    "persons_wanted",
    "assemble_persons",
    "pool_size",
    "with_rows_column",
]

log = logging.getLogger(__name__)

ROWS_COLUMN = "rows_per_person"
"""The column added to every kept row: its person's number of kept rows, ``"1"`` .. ``"L"`` (public domain)."""
CAP_EPSILON_PROPORTION = 0.05
"""Share of epsilon of the DP percentile that chooses L (when ``max_rows_per_person`` is not given)."""
HISTOGRAM_EPSILON_PROPORTION = 0.05
"""Share of epsilon of the noisy histogram of persons by number of kept rows."""
PERSON_COLUMNS_EPSILON_PROPORTION = 0.05
"""Share of epsilon of the DP test of person columns (when ``person_columns`` is not declared)."""
PERSON_COLUMN_SHARE = 0.05
"""A column is a person column when the noisy number of persons whose rows hold two of its values is at most
this share of the protected number of persons."""
POOL_FACTOR = 3
"""Event rows sampled from the model per synthetic row, from which the persons are cut (:func:`assemble_persons`)."""

_TIME_TYPES = ("date", "timestamp", "timestamp_ntz")


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
        raise SchemaError(f"unknown privacy unit column {unit!r}; the input has {len(names)} other column(s)")
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
    delta_row = delta / (cap * math.exp((cap - 1) * eps_row))
    if delta_row < MIN_DELTA:
        raise InvalidParameterError(
            f"at most {cap} rows per person at epsilon {epsilon:g} leaves a row-level delta below {MIN_DELTA:g}; "
            "lower max_rows_per_person or rows_per_person_percentile"
        )
    return eps_row, delta_row


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


def _histogram(counts, column: str, top: int) -> np.ndarray:  # noqa: ANN001 - DataFrame
    """h[v] = the number of persons whose ``column`` (an integer >= 1) is min(value, top), v in 0..top."""
    from pyspark.sql import functions as F

    rows = counts.groupBy(F.least(F.col(column), F.lit(top)).alias("v")).count().collect()
    h = np.zeros(top + 1, dtype=np.int64)
    for row in rows:
        h[int(row["v"])] = int(row["count"])
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
    if data.person_columns is not None:
        outside = [c for c in data.person_columns if c not in attributes]
        if outside:
            raise SchemaError(f"person column(s) {outside} are not attribute columns")
    agg = config.aggregate
    noise = noise_source_for(agg.seed)
    acct = Accountant(float(agg.epsilon), agg.delta, accounting=agg.accounting, noise=noise)
    key = secrets.randbits(62) if agg.seed is None else int(agg.seed) % (1 << 62)
    rows = df.where(_nonempty(F.col(f"`{unit}`"))).select(f"`{unit}`", *[f"`{c}`" for c in attributes])
    report(progress, log, f"persons: rows without a person ({unit!r} empty) are left out")
    counts = rows.groupBy(f"`{unit}`").count()
    block: dict[str, Any] = {"privacy_unit_column": unit}
    if data.max_rows_per_person is None:
        bound = data.rows_per_person_bound
        acct.spend_epsilon(
            "rows_per_person_cap",
            CAP_EPSILON_PROPORTION,
            f"DP percentile {data.rows_per_person_percentile:g} of rows per person in 1..{bound} "
            "(exponential mechanism, quantile score, Smith 2011)",
        )
        histogram = _histogram(counts, "count", bound)  # private, driver only
        cap = max(1, acct.quantile("rows_per_person_cap", histogram, data.rows_per_person_percentile))
        del histogram
        block.update(
            cap_source="dp_percentile", cap_percentile=data.rows_per_person_percentile, cap_search_upper=bound
        )
    else:
        cap = data.max_rows_per_person
        block.update(cap_source="given")
    block["max_rows_per_person"] = int(cap)
    report(progress, log, f"persons: at most {cap} rows per person ({block['cap_source']})")
    bounded = _bounded(rows, unit, cap, key).persist()
    try:
        persons = bounded.groupBy(f"`{unit}`").agg(F.max(F.col(ROWS_COLUMN).cast("int")).alias("n"))
        acct.spend_epsilon(
            "persons_by_rows",
            HISTOGRAM_EPSILON_PROPORTION,
            "discrete Laplace on the histogram of persons by number of kept rows (L1 sensitivity 1)",
        )
        noisy = acct.laplace("persons_by_rows", _histogram(persons, "n", cap)[1:], sensitivity=1.0)
        protected_persons = max(1, int(np.clip(noisy, 0, None).sum()))
        block["noisy_persons_by_rows"] = [int(x) for x in noisy]
        block["protected_number_of_persons"] = protected_persons
        candidates = [c for c in attributes]
        if data.person_columns is not None:
            person_columns = list(data.person_columns)
            block["person_columns_source"] = "given"
        elif candidates:
            d = len(candidates)
            acct.spend_epsilon(
                "person_columns",
                PERSON_COLUMNS_EPSILON_PROPORTION,
                f"discrete Laplace on the numbers of persons whose rows hold two values, {d} column(s) "
                f"(L1 sensitivity {d})",
            )
            varying = bounded.groupBy(f"`{unit}`").agg(
                *[
                    F.countDistinct(F.coalesce(F.trim(F.col(f"`{c}`").cast("string")), F.lit(""))).alias(
                        f"_v{j}"
                    )
                    for j, c in enumerate(candidates)
                ]
            )
            true = varying.agg(
                *[F.sum((F.col(f"_v{j}") > 1).cast("long")).alias(f"_v{j}") for j in range(d)]
            ).collect()[0]  # private, driver only
            noisy_varying = acct.laplace(
                "person_columns", [int(true[f"_v{j}"] or 0) for j in range(d)], sensitivity=float(d)
            )
            del true
            person_columns = [
                c
                for c, n in zip(candidates, noisy_varying, strict=True)
                if n <= PERSON_COLUMN_SHARE * protected_persons
            ]
            block["person_columns_source"] = "dp_test"
            block["noisy_varying_persons"] = {
                c: int(n) for c, n in zip(candidates, noisy_varying, strict=True)
            }
        else:
            person_columns = []
            block["person_columns_source"] = "given"
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
    budget = acct.budget()
    block.update(
        epsilon=float(acct.epsilon),
        delta=delta,
        budget=budget.to_json(),
        event_epsilon=float(eps_events),
        event_epsilon_per_row=float(eps_row),
        event_delta_per_row=float(delta_row),
        rows_column=ROWS_COLUMN,
        key_type=df.schema[unit].dataType.simpleString(),
        columns=list(df.columns),
        time_column=time_column,
        group_privacy="(epsilon_e / L, delta / (L exp((L - 1) epsilon_e / L)))-DP per row is (epsilon_e, "
        "delta)-DP per person of at most L rows",
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


def persons_wanted(block: dict[str, Any], target_rows: int | None = None) -> np.ndarray:
    """The synthetic persons by number of rows, M_n for n = 1..L (int64, length L): the noisy histogram
    clipped at 0 and, with ``target_rows``, scaled so that sum n M_n is about that; rounded by largest
    remainders to its rounded total. Post-processing of the release."""
    h = np.clip(np.asarray(block["noisy_persons_by_rows"], dtype=np.float64), 0, None)
    if h.sum() <= 0:
        h = np.zeros_like(h)
        h[0] = 1.0
    if target_rows is not None:
        n = np.arange(1, len(h) + 1)
        h = h * (target_rows / float((n * h).sum()))
    total = max(1, int(round(h.sum())))
    raw = h / h.sum() * total
    out = np.floor(raw).astype(np.int64)
    rest = total - int(out.sum())
    if rest > 0:
        out[np.argsort(-(raw - out), kind="stable")[:rest]] += 1
    return out


def pool_size(block: dict[str, Any], target_rows: int | None = None) -> int:
    """The event rows to sample for :func:`assemble_persons`: :data:`POOL_FACTOR` x the synthetic rows."""
    wanted = persons_wanted(block, target_rows)
    return max(1, POOL_FACTOR * int((np.arange(1, len(wanted) + 1) * wanted).sum()))


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
    *,
    target_rows: int | None = None,
    seed: int | None = None,
    progress: Progress | None = None,
):  # noqa: ANN201 - DataFrame
    """Synthetic persons cut from a pool of synthetic event rows (module docstring; post-processing).

    Args:
        pool: synthetic event rows in the input's types with :data:`ROWS_COLUMN` (``"1"`` .. ``"L"``), about
            :func:`pool_size` of them.
        block: the release manifest's ``persons`` block.
        target_rows: about this many rows (default: the noisy histogram's persons).
        seed: the random order of the pool (None: fresh randomness).
        progress: receives one short message per stage.

    Returns:
        The event table: the input's columns in order (``block["columns"]``), the person key a surrogate
        1..M in the key's type (``"syn-"`` and the zero-padded number for a string key), each person's rows
        together and ordered by the time column when there is one.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from spark_dpsynth.synthesizers._types import SURROGATE_PREFIX

    unit = block["privacy_unit_column"]
    wanted = persons_wanted(block, target_rows)
    cap = len(wanted)
    spark = pool.sparkSession
    person_cols = [c for c in block.get("person_columns") or () if c in pool.columns]
    value_cols = [c for c in pool.columns if c != ROWS_COLUMN]
    pool = (
        pool.withColumn("__n", F.col(ROWS_COLUMN).cast("int"))
        .where(F.col("__n").between(1, cap))
        .withColumn("__r", F.rand(seed))
        .withColumn("__g", F.xxhash64(*[F.col(f"`{c}`") for c in person_cols]) if person_cols else F.lit(0))
    )
    want = spark.createDataFrame([(n + 1, int(m)) for n, m in enumerate(wanted)], "__n int, __m long")
    # Stage 1: chunks of n rows that share (n, person columns).
    group = Window.partitionBy("__n", "__g")
    pool = pool.withColumn("__c", F.floor((F.row_number().over(group.orderBy("__r")) - 1) / F.col("__n")))
    pool = pool.withColumn("__s", F.count(F.lit(1)).over(Window.partitionBy("__n", "__g", "__c")))
    chunks = (
        pool.where(F.col("__s") == F.col("__n"))
        .groupBy("__n", "__g", "__c")
        .agg(F.min("__r").alias("__cr"))
        .withColumn("__k", F.row_number().over(Window.partitionBy("__n").orderBy("__cr")))
        .join(want, "__n")
        .where(F.col("__k") <= F.col("__m"))
        .select("__n", "__g", "__c", F.lit(1).alias("__stage1"))
    )
    tagged = pool.join(chunks, ["__n", "__g", "__c"], "left")
    first = (
        tagged.where(F.col("__stage1").isNotNull())
        .withColumn("__p", F.xxhash64(F.lit(1), "__n", "__g", "__c"))
        .select(*[f"`{c}`" for c in value_cols], "__p", "__r")
    )
    got = {int(r["__n"]): int(r["m"]) for r in chunks.groupBy("__n").agg(F.count("*").alias("m")).collect()}
    short = [(n + 1, int(m) - got.get(n + 1, 0)) for n, m in enumerate(wanted) if int(m) > got.get(n + 1, 0)]
    parts = [first]
    if short:
        # Stage 2: strata short of complete chunks take chunks of the rest of their rows, whatever their person
        # columns, which are then set to the chunk's first row's.
        need = spark.createDataFrame(short, "__n int, __m long")
        rest = (
            tagged.where(F.col("__stage1").isNull())
            .join(need, "__n")
            .withColumn(
                "__c",
                F.floor((F.row_number().over(Window.partitionBy("__n").orderBy("__r")) - 1) / F.col("__n")),
            )
            .withColumn("__s", F.count(F.lit(1)).over(Window.partitionBy("__n", "__c")))
            .where((F.col("__s") == F.col("__n")) & (F.col("__c") < F.col("__m")))
        )
        chunk = Window.partitionBy("__n", "__c").orderBy("__r").rowsBetween(Window.unboundedPreceding, 0)
        for c in person_cols:
            rest = rest.withColumn(c, F.first(F.col(f"`{c}`")).over(chunk))
        parts.append(
            rest.withColumn("__p", F.xxhash64(F.lit(2), "__n", "__c")).select(
                *[f"`{c}`" for c in value_cols], "__p", "__r"
            )
        )
    rows = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
    ids = rows.groupBy("__p").agg(F.min("__r").alias("__pr"))
    ids = ids.withColumn("__id", F.row_number().over(Window.orderBy("__pr", "__p")))
    rows = rows.join(ids.select("__p", "__id"), "__p")
    key_type = str(block.get("key_type") or "bigint")
    if key_type == "string":
        width = len(str(int(wanted.sum())))
        key = F.concat(F.lit(SURROGATE_PREFIX), F.lpad(F.col("__id").cast("string"), width, "0"))
    else:
        key = F.col("__id").cast(key_type)
    rows = rows.withColumn(unit, key)
    time_column = block.get("time_column")
    order = (
        [F.col("__id")] + ([F.col(f"`{time_column}`")] if time_column in value_cols else []) + [F.col("__r")]
    )
    columns = [c for c in block.get("columns") or [unit, *value_cols] if c == unit or c in value_cols]
    out = rows.orderBy(*order).select(*[F.col(f"`{c}`") for c in columns])
    report(progress, log, f"persons: {int(wanted.sum()):,} synthetic persons wanted, at most {cap} rows each")
    return out
