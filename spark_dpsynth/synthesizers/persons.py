"""Synthetic persons of an event release: persons drawn from the noisy histogram of rows per person, their rows
from the event model (post-processing of a person-level release; docs/design.md section 2.10).

The release (:mod:`spark_dpsynth.mechanisms.persons`) holds a noisy histogram of the persons by number of rows
over a public grid, the cap L of the rows per person the event measurements read, the person columns, and an
event model whose records carry :data:`ROWS_COLUMN`, their person's number of measured rows s = min(n, L).

:func:`persons_wanted` draws the synthetic persons' numbers of rows n from the histogram (uniformly within a bin),
each person in the stratum s = min(n, L). A pool of event rows is sampled from the event model (:func:`pool_size`
rows); :func:`assemble_persons` gives each person one random pool row of its stratum as its seed, whose person
columns become the person's, then n pool rows of its stratum that share those person columns (the model given the
stratum and the person columns), on distinct values of a column the release found no person repeats
(``distinct_columns``: a panel's year) while the group holds them; a column the release found moving with time
(``time_offset_columns``: a panel's age) is set to the time base plus the person's offset, and one found never
going down (``nondecreasing_columns``: work experience) is given out over the person's rows in increasing order,
and a time-like column whose persons' spans are narrow beside its range (``noisy_persons_by_span``: a rating's
timestamp) is drawn together towards one of the person's values, within a span drawn from the noisy histogram.
Where a (stratum, person columns) group runs short, the person takes other rows of its stratum with its person
columns written over theirs; where a stratum runs short, rows of any stratum. A person's rows share one surrogate
key in the key column's type, ordered by the event time when there is one.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from spark_dpsynth._progress import Progress, report

__all__ = [
    "ROWS_COLUMN",
    "POOL_FACTOR",
    "MAX_POOL_FACTOR",
    "COVERED_SHARE",
    "WINDOW_RATIO",
    "WINDOW_SHARE",
    "WINDOW_MIN_VALUES",
    "persons_wanted",
    "pool_size",
    "stratum_shares",
    "assemble_persons",
]

log = logging.getLogger(__name__)

ROWS_COLUMN = "rows_per_person"
"""The column added to every kept row: its person's number of kept rows, ``"1"`` .. ``"L"`` (public domain)."""
POOL_FACTOR = 1.5
"""Event rows sampled from the model per synthetic row its stratum needs, at the model's share of the stratum
(:func:`pool_size`)."""
MAX_POOL_FACTOR = 4
"""A stratum rarer in the model than the persons need is oversampled at most this many times (times
:data:`POOL_FACTOR`); the rows it still lacks come from the fallback of :func:`assemble_persons`."""
COVERED_SHARE = 0.95
"""The pool is sized for the strata that hold this share of the synthetic rows, those the model makes least
rare first (:func:`pool_size`)."""
WINDOW_RATIO = 10.0
"""A person's span in a column is *narrow* when at most the column's spread (the pool's 10th to 90th percentile)
over this ratio."""
WINDOW_SHARE = 0.5
"""A column's synthetic persons keep their rows within a drawn span when at least this share of the noisy
persons by span (:func:`_in_windows`) have a narrow one (ratings' timestamps on MovieLens: 93% of the users rate
within two years, against a range of twenty)."""
WINDOW_MIN_VALUES = 50
"""...and when the pool holds at least this many distinct values of the column: a code or a count with few values
keeps its rows' own values."""


def _bin_upper(grid: tuple[int, ...], bound: int) -> np.ndarray:
    return np.asarray([*(e - 1 for e in grid[1:]), bound], dtype=np.int64)


def _denoised(noisy: np.ndarray, epsilon: float) -> np.ndarray:
    """The noisy histogram without the bins its noise alone fills (post-processing).

    t = b ln(20 B), b = 1 / epsilon, B bins: a bin of at least t persons is kept; an empty bin passes with
    probability (1/2) e^(-t/b) = 1 / (40 B), so no empty bin at all in 39 releases of 40. Each maximal run of k
    consecutive bins below t is kept as a whole when its noisy sum reaches 3 b sqrt(2 k), three stds of the sum
    of k Laplace draws (an empty run passes with probability below 0.5%), its sum spread over its bins as their
    clipped values (evenly when none is positive); otherwise it is dropped. Many bins of a few persons each (a
    long tail) are kept together where one by one they would not pass.
    """
    b = 1.0 / epsilon
    t = b * math.log(20.0 * len(noisy))
    out = np.where(noisy >= t, noisy, 0.0)
    i = 0
    while i < len(noisy):
        if noisy[i] >= t:
            i += 1
            continue
        j = i
        while j < len(noisy) and noisy[j] < t:
            j += 1
        total = float(noisy[i:j].sum())
        if total >= 3.0 * b * math.sqrt(2.0 * (j - i)):
            weights = np.clip(noisy[i:j], 0, None)
            weights = weights if weights.sum() > 0 else np.ones(j - i)
            out[i:j] = total * weights / weights.sum()
        i = j
    return out


def persons_wanted(
    block: dict[str, Any], target_rows: int | None = None, rng: np.random.Generator | None = None
) -> np.ndarray:
    """The synthetic persons by number of rows: ``out[n - 1]`` persons with n rows, n = 1..bound (int64).

    The noisy histogram (post-processing) without the bins its noise alone fills (:func:`_denoised`; kept as it
    is, clipped at 0, if that empties it), scaled so that the rows add up to about ``target_rows`` when given, rounded to whole persons by largest remainders, and each bin's persons
    spread uniformly at random over its numbers of rows (``rng``; default fresh randomness).
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
        kept = _denoised(
            np.asarray(block["noisy_persons_by_rows"], dtype=np.float64), float(share["epsilon"])
        )
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
    ratio r (1 to :data:`MAX_POOL_FACTOR`) of a stratum's share of the synthetic rows to its share in the model
    (``stratum_shares``, s = 1..L, from the release's 1-way table of :data:`ROWS_COLUMN`) that covers the strata
    of :data:`COVERED_SHARE` of the synthetic rows (the smallest r such that the strata of ratio <= r hold that
    share)."""
    cap = int(block["max_rows_per_person"])
    need = _strata(wanted, cap).astype(np.float64)
    rows = max(1.0, need.sum())
    if stratum_shares is None:
        return int(math.ceil(POOL_FACTOR * rows))
    shares = np.asarray(stratum_shares, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(need > 0, (need / rows) / np.maximum(shares, 1e-12), 0.0)
    # the oversampling that serves the strata of 95% of the rows; the others are left to the fallback
    order = np.argsort(ratio, kind="stable")
    covered = np.cumsum(need[order]) / rows
    enough = float(ratio[order][int(np.searchsorted(covered, COVERED_SHARE - 1e-12))])
    return int(math.ceil(POOL_FACTOR * rows * min(MAX_POOL_FACTOR, max(1.0, enough))))


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


_NULL_VALUE = "\u0000null"
"""The distinct-per-person column's empty value in :func:`_distinct_plan` (one value like the others)."""


def _distinct_plan(group):  # noqa: ANN001, ANN202 - pandas DataFrame in and out
    """Which person of a (stratum, person columns) group takes which rows of a distinct-per-person column's values
    (``applyInPandas`` per group: the values' rows ``__v``, ``__c`` and the persons' slots ``__id``, ``__c``):
    persons of fewer rows first, each takes one row of each of the values with the most rows left, then, when it
    needs more rows than values are left, more of the most frequent: where a group's values cannot serve every
    person distinct ones, the persons of many rows repeat (on a panel's release, 6.6% of its persons against 10.2%
    with the persons of most rows first). One output row per row given: ``__s``, ``__g``, ``__id``, ``__v`` and
    ``__k``, the value's k-th row. Post-processing."""
    import pandas as pd

    values = group[group["__id"].isna()].sort_values("__v")
    persons = group[group["__id"].notna()].sort_values(["__c", "__id"])
    names = values["__v"].to_numpy(dtype=object)
    left = values["__c"].to_numpy(dtype=np.int64).copy()
    used = np.zeros(len(left), dtype=np.int64)
    ids, taken, ks = [], [], []
    for pid, need in zip(persons["__id"].astype(np.int64), persons["__c"].astype(np.int64), strict=True):
        order = np.argsort(-left, kind="stable")
        order = order[left[order] > 0]
        picks = list(order[:need])
        while len(picks) < need and left.sum() > len(picks):
            spare = left.copy()
            np.subtract.at(spare, picks, 1)
            if spare.max() <= 0:
                break
            picks.append(int(np.argmax(spare)))
        for i in picks:
            used[i] += 1
            left[i] -= 1
            ids.append(pid)
            taken.append(names[i])
            ks.append(used[i])
    n = len(ids)
    return pd.DataFrame(
        {
            "__s": np.full(n, int(group["__s"].iloc[0]), dtype=np.int64),
            "__g": np.full(n, int(group["__g"].iloc[0]), dtype=np.int64),
            "__id": np.asarray(ids, dtype=np.int64),
            "__v": pd.Series(taken, dtype=object),
            "__k": np.asarray(ks, dtype=np.int32),
        }
    )


def _spread_column(pool, block: dict[str, Any], person_cols: list[str]) -> str | None:  # noqa: ANN001
    """The distinct-per-person column (``block["distinct_columns"]``, the release's DP test) a person's rows are
    spread over: the time column when it is one, else the one of fewest distinct values in the synthetic pool (a
    panel's year rather than a wage that rarely repeats anyway); None without one. Post-processing."""
    from pyspark.sql import functions as F

    # a column moving with time is held as a person's offset in the pool: spread over its time base instead
    offsets = block.get("time_offset_columns") or ()
    candidates = [
        c
        for c in block.get("distinct_columns") or ()
        if c in pool.columns and c not in person_cols and c not in offsets
    ]
    if not candidates:
        return None
    if block.get("time_column") in candidates:
        return str(block["time_column"])
    counts = pool.agg(
        *[F.approx_count_distinct(F.col(f"`{c}`")).alias(f"_d{j}") for j, c in enumerate(candidates)]
    )
    row = counts.collect()[0]
    return min(candidates, key=lambda c: (int(row[f"_d{candidates.index(c)}"]), candidates.index(c)))


def _with_time_offsets(rows, block: dict[str, Any], value_cols: list[str]):  # noqa: ANN001, ANN202 - DataFrame
    """Each column that moves with time (``block["time_offset_columns"]``, the release's DP test), which the event
    model holds as the offset c - t, set on a person's rows to the time base t plus the person's offset: the lower
    median of its rows' offsets (a value the pool drew), so a synthetic person's age advances with the survey
    year. Empty where t or the person's offsets are. Post-processing."""
    from pyspark.sql import functions as F

    base = block.get("offset_time_column")
    columns = [c for c in block.get("time_offset_columns") or () if c in value_cols]
    if base not in value_cols or not columns:
        return rows
    # percentile_approx returns a value of the group; exact for groups below its accuracy (a person's rows)
    offsets = rows.groupBy("__id").agg(
        *[
            F.percentile_approx(F.col(f"`{c}`").cast("double"), 0.5, 100_000).alias(f"__o{j}")
            for j, c in enumerate(columns)
        ]
    )
    from spark_dpsynth.data.trends import time_base

    types = {f.name: f.dataType for f in rows.schema.fields}
    t = time_base(base, types[base].simpleString())
    moved = {c: (t + F.col(f"__o{j}")).cast(types[c]).alias(c) for j, c in enumerate(columns)}
    joined = rows.join(offsets, "__id", "left")
    return joined.select(*[moved.get(c, F.col(f"`{c}`")) for c in rows.columns])


def _rising(rows, block: dict[str, Any], value_cols: list[str]):  # noqa: ANN001, ANN202 - DataFrame
    """Each column that never goes down as the time base goes up (``block["nondecreasing_columns"]``, the
    release's DP test: work experience) given out again over a person's rows in increasing order along the time
    base: the person keeps its values (the table keeps the column's 1-way counts), its k-th least on its k-th row
    in time. Rows where the column is empty keep it empty. Post-processing."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    base = block.get("offset_time_column")
    if base not in value_cols:
        return rows
    for c in [c for c in block.get("nondecreasing_columns") or () if c in value_cols and c != base]:
        held = rows.where(F.col(f"`{c}`").isNotNull())
        person = Window.partitionBy("__id")
        in_time = held.withColumn(
            "__k", F.row_number().over(person.orderBy(F.col(f"`{base}`").asc_nulls_last(), "__r"))
        ).drop(c)
        in_order = held.select(
            "__id", F.row_number().over(person.orderBy(F.col(f"`{c}`"), "__r")).alias("__k"), F.col(f"`{c}`")
        )
        rows = (
            in_time.join(in_order, ["__id", "__k"])
            .select(*[F.col(f"`{n}`") for n in rows.columns])
            .unionByName(rows.where(F.col(f"`{c}`").isNull()))
        )
    return rows


def _span_draws(
    noisy: np.ndarray, epsilon: float, whole: bool, widest: float, m: int, rng: np.random.Generator
) -> np.ndarray:
    """m spans drawn from a noisy histogram of persons by span class (:data:`~spark_dpsynth.data.trends.SPAN_EDGES`;
    ``epsilon`` per unit of sensitivity): only the classes a span can fall in (none below 1 for whole numbers,
    none from ``widest`` up, the pool's whole spread), without those its noise alone fills (:func:`_denoised`);
    a class drawn by its mass, a span log-uniform within it (0 in class 0, uniform in class 1)."""
    from spark_dpsynth.data.trends import span_bounds

    bounds = np.array([span_bounds(i) for i in range(len(noisy))])
    possible = (bounds[:, 0] < widest) | (bounds[:, 1] == 0.0)
    if whole:
        possible &= ~((bounds[:, 1] > 0.0) & (bounds[:, 1] <= 1.0))
    h = np.zeros(len(noisy))
    h[possible] = _denoised(np.asarray(noisy, dtype=np.float64)[possible], epsilon)
    if h.sum() <= 0:
        return np.zeros(m)
    classes = rng.choice(len(h), size=m, p=h / h.sum())
    low, high = bounds[classes, 0], np.minimum(bounds[classes, 1], widest)
    u = rng.random(m)
    logs = np.exp(
        np.log(np.maximum(low, 1e-300))
        + u * (np.log(np.maximum(high, 1e-300)) - np.log(np.maximum(low, 1e-300)))
    )
    return np.where(classes == 0, 0.0, np.where(classes == 1, low + u * (high - low), logs))


def _in_windows(rows, block: dict[str, Any], value_cols: list[str], m: int, rng: np.random.Generator):  # noqa: ANN001, ANN202
    """Each time-like column whose persons' spans are narrow (:data:`WINDOW_SHARE` of the noisy persons by span,
    ``block["noisy_persons_by_span"]``, below the pool's 10th-90th percentile spread over :data:`WINDOW_RATIO`)
    with a person's rows drawn together: its values v on the person's rows become a + (v - a) min(1, w / r), a the
    value of one of its rows (at random), r its values' spread, w a span drawn for the person from the histogram
    (:func:`_span_draws`): each synthetic user rates within her own period, in her rows' order. Returns the rows
    and the columns so treated. Post-processing."""
    import pandas as pd
    from pyspark.sql import functions as F

    from spark_dpsynth.data.trends import span_bounds
    from spark_dpsynth.profile.columns import as_number, scale_of
    from spark_dpsynth.synthesizers._types import restore_value

    spans = block.get("noisy_persons_by_span") or {}
    columns = [c for c in spans if c in value_cols]
    if not columns:
        return rows, []
    share = next(
        (s for s in (block.get("budget") or {}).get("shares", ()) if s.get("name") == "person_spans"), None
    )
    if share is None or not share.get("epsilon"):
        return rows, []
    epsilon = float(share["epsilon"]) / len(spans)  # per unit of L1 sensitivity d
    types = {f.name: f.dataType for f in rows.schema.fields}
    scales = {c: scale_of(types[c]) for c in columns}
    x = {c: as_number(F.col(f"`{c}`"), scales[c]) for c in columns}
    stats = rows.agg(
        *[F.percentile_approx(x[c], [0.1, 0.9], 10_000).alias(f"_q{j}") for j, c in enumerate(columns)],
        *[(F.max(x[c]) - F.min(x[c])).alias(f"_w{j}") for j, c in enumerate(columns)],
        *[F.approx_count_distinct(x[c]).alias(f"_n{j}") for j, c in enumerate(columns)],
    ).collect()[0]
    widths = {}
    for j, c in enumerate(columns):
        q = stats[f"_q{j}"]
        if q is None or q[0] is None or stats[f"_n{j}"] < WINDOW_MIN_VALUES:
            continue
        h = np.clip(np.asarray(spans[c], dtype=np.float64), 0, None)
        narrow = sum(h[i] for i in range(len(h)) if span_bounds(i)[1] <= (q[1] - q[0]) / WINDOW_RATIO)
        if q[1] > q[0] and h.sum() > 0 and narrow >= WINDOW_SHARE * h.sum():
            whole = scales[c] in ("integer", "date")
            widths[c] = _span_draws(spans[c], epsilon, whole, float(stats[f"_w{j}"]), m, rng)
    if not widths:
        return rows, []
    chosen = list(widths)
    drawn = rows.sparkSession.createDataFrame(
        pd.DataFrame(
            {
                "__id": np.arange(1, m + 1, dtype=np.int64),
                **{f"__w{j}": widths[c] for j, c in enumerate(chosen)},
            }
        )
    )
    per_person = rows.groupBy("__id").agg(
        *[
            F.min_by(x[c], F.when(x[c].isNotNull(), F.col("__r"))).alias(f"__a{j}")
            for j, c in enumerate(chosen)
        ],
        *[(F.max(x[c]) - F.min(x[c])).alias(f"__d{j}") for j, c in enumerate(chosen)],
    )
    joined = rows.join(per_person.join(drawn, "__id"), "__id", "left")
    moved = {}
    for j, c in enumerate(chosen):
        a, r, w = F.col(f"__a{j}"), F.col(f"__d{j}"), F.col(f"__w{j}")
        v = a + (x[c] - a) * F.least(F.lit(1.0), w / r)
        value = F.when(r > 0, v).otherwise(x[c])
        if scales[c] in ("integer", "date"):
            value = F.round(value)
        moved[c] = (
            F.when(F.col(f"`{c}`").isNull(), F.col(f"`{c}`"))
            .otherwise(restore_value(value, scales[c], types[c].simpleString()))
            .alias(c)
        )
    return joined.select(*[moved.get(c, F.col(f"`{c}`")) for c in rows.columns]), chosen


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
    )
    # materialized without its lineage: the plans below join it many times, and under Spark Connect a plan
    # deeper than its decoder's limit fails
    pool = pool.localCheckpoint()
    try:
        keep = [f"__p{i}" for i in range(len(person_cols))]
        as_p = [F.col(f"`{c}`").alias(f"__p{i}") for i, c in enumerate(person_cols)]
        # Seeds: the k-th person of stratum s takes the k-th pool row of s in random order: its person columns;
        # a person whose stratum has too few rows takes a row of any stratum (the pool's first rows in random
        # order: a top-k, never one partition holding the whole pool).
        by_stratum = pool.withColumn("__k", F.row_number().over(Window.partitionBy("__s").orderBy("__r")))
        held = dict(pool.groupBy("__s").count().collect())  # synthetic rows per stratum: at most L numbers
        short = (persons["__k"] > persons["__s"].map(held).fillna(0)).to_numpy()
        seeds = people.join(by_stratum.select("__s", "__k", "__g", *as_p), ["__s", "__k"]).drop("__k")
        if short.any():
            count = int(short.sum())
            unseeded = persons.loc[short, ["__id", "__len", "__s"]].assign(**{"__k": np.arange(1, count + 1)})
            anywhere = (
                pool.orderBy("__r")
                .limit(count)
                .select(F.row_number().over(Window.orderBy("__r")).alias("__k"), "__g", *as_p)
            )
            unseeded = spark.createDataFrame(unseeded.astype("int64")).join(anywhere, "__k").drop("__k")
            seeds = seeds.unionByName(unseeded)
        # Each person's slots i in its group (s, g): offsets cumulated in id order.
        group = Window.partitionBy("__s", "__g").orderBy("__id")
        seeds = seeds.withColumn(
            "__end", F.sum("__len").over(group.rowsBetween(Window.unboundedPreceding, 0))
        )
        slots = seeds.select(
            "__id", "__s", "__g", "__len", *keep,
            F.posexplode(F.sequence(F.col("__end") - F.col("__len"), F.col("__end") - 1)).alias("__j", "__i"),
        )  # fmt: skip
        ranked = pool.withColumn(
            "__i", F.row_number().over(Window.partitionBy("__s", "__g").orderBy("__r")) - 1
        )
        taken = slots.groupBy("__s", "__g").agg(F.count(F.lit(1)).alias("__used"))
        # The group's rows its slots take: the first ones in random order, a random subset of the group's
        # whatever the order in which they meet the slots below.
        chosen = ranked.join(taken, ["__s", "__g"]).where(F.col("__i") < F.col("__used")).drop("__used")
        spread = _spread_column(pool, block, person_cols)
        if spread is None:
            matched = slots.drop("__len", "__j").join(chosen, ["__s", "__g", "__i"], "left")
            first = matched.where(F.col("__r").isNotNull()).select(
                "__id", *[f"`{c}`" for c in value_cols], "__r"
            )
            open_slots = matched.where(F.col("__r").isNull()).select("__id", "__s", "__i", *keep)
        else:
            # A distinct-per-person column (a panel's year): which person takes which of the group's rows is
            # planned on its value counts (_distinct_plan); the k-th row of a value (random order) goes to the
            # k-th person the plan gives that value.
            value = F.coalesce(F.col(f"`{spread}`").cast("string"), F.lit(_NULL_VALUE))
            chosen = chosen.withColumn("__v", value)
            counts = chosen.groupBy("__s", "__g", "__v").agg(F.count(F.lit(1)).alias("__c"))
            needs = slots.groupBy("__s", "__g", "__id").agg(F.count(F.lit(1)).alias("__c"))
            plan = (
                counts.withColumn("__id", F.lit(None).cast("long"))
                .unionByName(needs.withColumn("__v", F.lit(None).cast("string")))
                .groupBy("__s", "__g")
                .applyInPandas(_distinct_plan, schema="__s long, __g long, __id long, __v string, __k int")
            )
            by_value = Window.partitionBy("__s", "__g", "__v").orderBy("__r")
            first = (
                chosen.withColumn("__k", F.row_number().over(by_value))
                .join(plan, ["__s", "__g", "__v", "__k"])
                .select("__id", *[f"`{c}`" for c in value_cols], "__r")
            )
            given = plan.groupBy("__id").agg(F.count(F.lit(1)).alias("__a"))
            open_slots = (
                slots.join(given, "__id", "left")
                .where(F.col("__j") >= F.coalesce(F.col("__a"), F.lit(0)))
                .select("__id", "__s", "__i", *keep)
            )

        def overwritten(df):  # noqa: ANN001, ANN202 - a slot's person columns written over its row's
            values = [
                F.col(f"__p{person_cols.index(c)}").alias(c) if c in person_cols else F.col(f"`{c}`")
                for c in value_cols
            ]
            return df.select("__id", *values, "__r")

        # Slots whose group ran short: the rows of the same stratum no slot took, person columns written over.
        spare = ranked.join(taken, ["__s", "__g"], "left").where(
            F.col("__used").isNull() | (F.col("__i") >= F.col("__used"))
        )
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
        wanting = still.count()  # synthetic slots
        if wanting:
            report(progress, log, "persons: some strata of the pool ran short; their persons take other rows")
            rest = spare.join(second.select("__r"), "__r", "left_anti").drop(*person_cols)
            rest = rest.orderBy("__r").limit(wanting)  # as many as needed: a top-k of the spare rows
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
        # a date base's window first: the columns that move with its year are set from the windowed dates
        rows, windowed = _in_windows(rows, block, value_cols, m, rng)
        if windowed:
            report(progress, log, f"persons: each person's rows within a span of its own in {windowed}")
        rows = _rising(_with_time_offsets(rows, block, value_cols), block, value_cols)
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
