"""The DP release: what a mechanism publishes and a synthesizer reads.

* :mod:`.core`: :class:`Release` (columns, released domains, k-way marginals, measured marginals) and its
  on-disk layout.
* :mod:`.manifest`: :class:`Manifest`, the frozen, typed record of a release's mechanism, budget and parameters.
* :mod:`.sds_format`: SDS's aggregates files (TSV and JSON), read and written.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from spark_dpsynth.release.core import (
    AGGREGATES_SCHEMA,
    MEASUREMENTS_SCHEMA,
    Marginal,
    Release,
)
from spark_dpsynth.release.integrity import check_release
from spark_dpsynth.release.manifest import BudgetShare, Ledger, Manifest
from spark_dpsynth.release.sds_format import read_sds

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "AGGREGATES_SCHEMA",
    "MEASUREMENTS_SCHEMA",
    "Ledger",
    "BudgetShare",
    "Manifest",
    "Marginal",
    "Release",
    "load_release",
]

SDS_SUFFIXES = (".tsv", ".json", ".txt", ".csv")
"""Endings of the SDS aggregates files :func:`load_release` reads (any other file is an error)."""


def load_release(path: str, spark: SparkSession) -> Release:
    """Read a release: a directory written by :meth:`Release.save`, or an SDS aggregates file (``.tsv`` or
    ``.json``, see :mod:`spark_dpsynth.release.sds_format`), whose manifest then says ``"source": "sds"``.

    Raises:
        ReleaseError: the directory or file is missing, unreadable or malformed, or its manifest's figures
            disagree (:func:`spark_dpsynth.release.integrity.check_release`, docs/design.md section 1.3).
    """
    local = path.removeprefix("file:")
    if os.path.isfile(local) and local.endswith(SDS_SUFFIXES):
        release = read_sds(local)
        check_release(release)
        return release
    return Release.load(path, spark)
