"""Shared constants and small helpers of the evaluation (validation, Spark column helpers, stage logging)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_dpsynth.errors import SchemaError

if TYPE_CHECKING:
    pass


log = logging.getLogger("spark_dpsynth.evaluation")

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
