"""Helpers shared by the evaluation's modules: checks of a table's schema, column quoting, stage logging, the
reason of a failed metric."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pyspark.sql import DataFrame
from pyspark.sql import types as T

from spark_dpsynth.errors import DPSynthError, SchemaError


def check_table(name: str, df: DataFrame) -> tuple[str, ...]:
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


def mismatch(what: str, got: tuple[str, ...], expected: tuple[str, ...]) -> str:
    """The message of a :class:`SchemaError` for a table whose columns are not the sensitive table's."""
    missing = [c for c in expected if c not in got]
    extra = [c for c in got if c not in expected]
    if missing or extra:
        return f"{what} must have the sensitive table's columns; missing {missing}, unexpected {extra}"
    return (
        f"{what} must have the sensitive table's columns in the same order {list(expected)}, got {list(got)}"
    )


def quote(name: str) -> str:
    """A column name as a Spark SQL identifier (back-quoted, inner back quotes doubled)."""
    return "`" + name.replace("`", "``") + "`"


@contextmanager
def timed_stage(log: logging.Logger, name: str, progress: Callable[[str], None] | None) -> Iterator[None]:
    """Log on ``log`` (and report through ``progress``) the start and end of a stage with its duration (s)."""
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


def failure_reason(err: BaseException) -> str:
    """A failed metric's reason without any data value (docs/design.md section 5.6): the exception class, Spark's
    error condition (e.g. ``[CAST_INVALID_INPUT]``) or, for an error of Spark's JVM without one, the Java
    exception class (e.g. ``java.lang.OutOfMemoryError``). Never the message, which can quote values."""
    name = type(err).__name__
    if isinstance(err, DPSynthError):
        return f"{name}: {err}"  # our messages name no data value
    condition = None
    for getter_name in ("getCondition", "getErrorClass"):
        getter = getattr(err, getter_name, None)
        if getter is None:
            continue
        try:
            condition = getter()
        except Exception:  # noqa: BLE001 - a PySpark error without a condition
            condition = None
        if condition:
            return f"{name} [{condition}]"
    java = getattr(err, "java_exception", None)
    if java is not None:
        try:
            return f"{name} ({java.getClass().getName()})"
        except Exception:  # noqa: BLE001 - the JVM may be gone
            pass
    return name
