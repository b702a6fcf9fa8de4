"""The DP release: what a mechanism publishes and a synthesizer reads.

* :mod:`.core`: :class:`Release` (columns, released domains, k-way marginals) and its on-disk layout.
* :mod:`.sds_format`: SDS's aggregates files (TSV and JSON), read and written.
"""

from spark_dpsynth.release.core import AGGREGATES_SCHEMA, Marginal, Release

__all__ = ["AGGREGATES_SCHEMA", "Marginal", "Release"]
