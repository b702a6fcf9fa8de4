"""``spark-dpsynth query``: counts answered from a saved release, with standard errors, printed as CSV.

Post-processing of the release (:mod:`spark_dpsynth.synthesizers.query`): no budget is spent and the sensitive
table is not read.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from spark_dpsynth.config import JobConfig
from spark_dpsynth.data.io import local_path
from spark_dpsynth.errors import InvalidParameterError, ReleaseError

__all__ = ["run_query"]


def run_query(config: JobConfig, session: Callable[[bool], Any]) -> int:
    """Answer ``[query] sql`` (``--sql``) from the release ``--release DIR`` (else ``DIR/release`` of
    ``--output DIR``) and print the answers as CSV with a header (one row per group: the group columns, each count
    and its ``_se``, and ``measured_together``).

    Args:
        config: the command's configuration (``query_sql``, ``release`` or ``output_path``, the Spark options).
        session: starts the Spark session (``session(False)``: no Delta Lake needed).

    Returns:
        0.

    Raises:
        InvalidParameterError: no query or no release given, or an unsupported query (before any answer).
        ReleaseError: no release at the path, or one without measured marginals.
    """
    sql = config.query_sql
    if not isinstance(sql, str) or not sql.strip():
        raise InvalidParameterError(
            'no query: give --sql "SELECT ..., count(*) AS n FROM t ..." or [query] sql in the config'
        )
    release_dir = config.release or (
        os.path.join(config.output_path, "release") if config.output_path else None
    )
    if not release_dir:
        raise InvalidParameterError("no release: give --release DIR, or --output DIR to read DIR/release")
    from spark_dpsynth.data.publish import recover_before_reading

    recover_before_reading(os.path.dirname(os.path.abspath(local_path(release_dir))))  # design.md section 1.7
    if not os.path.isfile(os.path.join(local_path(release_dir), "manifest.json")):
        raise ReleaseError(f"no release at {release_dir}; run `spark-dpsynth aggregate` first")
    from spark_dpsynth.release import load_release
    from spark_dpsynth.synthesizers.query import answer

    spark = session(False)
    release = load_release(release_dir, spark)
    answers = answer(release, sql, spark).toPandas()  # one row per group, bounded by the query's domain table
    print(answers.to_csv(index=False), end="")
    return 0
