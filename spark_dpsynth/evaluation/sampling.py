"""The evaluation's sampling: of the rows of large tables (:class:`RowSampling`) and of the column subsets
compared per length (``subset_sampling``), and the lines that say so in the summary and the report.

Rows: a table above ``max_rows`` rows is compared on a seeded uniform sample of about ``max_rows`` rows, drawn
where the table is read and persisted on the executors' local disks; its size is observed in the same pass
(docs/design.md section 5.5). Column subsets: the plan of :class:`~spark_dpsynth.evaluation.cells.SubsetPlan`
(a seeded, public choice of at most ``max_subsets`` subsets per length; docs/design.md section 5.5).

``evaluate`` below is :func:`spark_dpsynth.evaluation.metrics.evaluate`. Privacy: the evaluation is not private
(see :mod:`spark_dpsynth.evaluation.metrics`); the rates and the sizes these functions report are those of the
tables compared.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_dpsynth import _validate as v
from spark_dpsynth.errors import InvalidParameterError
from spark_dpsynth.evaluation._common import quote
from spark_dpsynth.evaluation.cells import SubsetPlan

__all__ = [
    "MAX_ROWS",
    "RowSampling",
    "describe_row_sampling",
    "describe_sampling",
    "subset_sampling_entry",
]

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


def subset_sampling_entry(plan: SubsetPlan) -> dict[str, Any]:
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
