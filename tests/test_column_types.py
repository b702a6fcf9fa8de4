"""Sparse code sets (docs/design.md section 2.8, "code sets"): a whole-number column whose records lie on few values
far apart is a code, a dense whole-number range stays a number, and a column of a few values never comes back
with values it does not hold. The unit tables are generated (not real data); the end-to-end run reads a real
extract of NIST's Texas 2019 excerpt from the shared data folder."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from spark_dpsynth.profile import (
    ColumnProfile,
    block_noise,
    block_tree,
    cells_of,
    profile_from_noisy,
    profile_grid,
)
from spark_dpsynth.profile.codes import DISTINCT_NOISE, code_set, effective_values

SIGMA = 23.0
"""The profile's cell noise std, in records (NIST's Texas excerpt at epsilon 4 had 23.3)."""


def _profile(values: np.ndarray, seed: int, distinct: bool = True) -> ColumnProfile:
    """The profile of a whole-number column ``values`` with Gaussian noise of :data:`SIGMA` on its cells, kappa
    sigma on its blocks and, with ``distinct``, DISTINCT_NOISE sigma on its number of distinct values."""
    grid = profile_grid("integer")
    cells = cells_of(grid, values.astype(np.float64), np.ones(len(values), dtype=bool))
    true = np.bincount(cells, minlength=grid.size).astype(np.float64)
    rng = np.random.default_rng(seed)
    tree, kappa = block_tree("integer"), block_noise("integer")
    running = np.r_[0.0, np.cumsum(true[np.flatnonzero(grid.possible[: grid.null_cell])])]
    blocks = running[tree[:, 1]] - running[tree[:, 0]] + np.round(rng.normal(0.0, SIGMA, len(kappa)) * kappa)
    counts = true.copy()
    counts[grid.possible] += np.round(rng.normal(0.0, SIGMA, int(grid.possible.sum())))
    noisy_distinct = (
        len(np.unique(values)) + round(rng.normal(0.0, DISTINCT_NOISE * SIGMA)) if distinct else None
    )
    return profile_from_noisy(
        "x",
        "integer",
        grid,
        counts,
        0.0,
        SIGMA,
        16,
        len(values),
        blocks=blocks,
        block_sigma=kappa * SIGMA,
        distinct=noisy_distinct,
        distinct_sigma=DISTINCT_NOISE * SIGMA,
    )


def _industry_like(seed: int) -> np.ndarray:
    """A generated sparse code set: 240 four-digit codes between 170 and 9920 (multiples of 10 and some odd
    ones, as an industry classification), 5,600 records with Zipf-like frequencies: most codes hold too few
    records to stand out of the noise alone."""
    rng = np.random.default_rng(seed)
    codes = np.sort(
        rng.choice(np.r_[np.arange(170, 9921, 10), np.arange(175, 9921, 40) + 1], 240, replace=False)
    )
    weights = 1.0 / np.arange(1, len(codes) + 1) ** 0.8
    return rng.choice(codes, 5600, p=weights / weights.sum())


@pytest.mark.parametrize("seed", range(4))
def test_a_sparse_lattice_of_codes_is_a_code_set(seed: int) -> None:
    p = _profile(_industry_like(seed), seed)
    assert p.meaning == "code" and p.bins is None and p.values is None
    assert p.reason.startswith("DP code set")


def test_without_the_distinct_count_a_thin_code_set_is_not_seen() -> None:
    # the cells alone cannot tell 240 codes of about 20 records from a thin measurement at this noise: the
    # distinct count is what the rule reads (the test fails if the rule ignored its evidence)
    assert _profile(_industry_like(0), 0, distinct=False).meaning == "measurement"


@pytest.mark.parametrize("seed", range(4))
def test_a_dense_whole_number_range_stays_a_number(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    # person weights: every whole number of 3..915 held, a skewed density
    weights = np.clip(np.round(rng.gamma(2.0, 60.0, 9300)), 3, 915).astype(np.int64)
    p = _profile(weights, seed)
    assert p.meaning == "measurement" and p.bins is not None
    # ages 0..92, each held
    ages = rng.integers(0, 93, 9300)
    assert not _profile(ages, seed).reason.startswith("DP code set")


@pytest.mark.parametrize("seed", range(6))
def test_a_column_of_seven_values_far_apart_is_a_code(seed: int) -> None:
    # seven values over 1..999 (a span beyond MAX_CODE_RANGE), two too rare to stand out alone: binned, the rest was spread over the
    # whole numbers between them; as a code its synthetic values are released values only (at most 7)
    values = np.repeat([1, 2, 3, 10, 150, 400, 999], [3000, 2500, 1500, 900, 300, 90, 80])
    p = _profile(values, seed)
    assert p.meaning == "code" and p.bins is None
    assert not _profile(values, seed, distinct=False).bins  # the sum of squares alone sees it too


def test_effective_values_bounds_the_rest_from_above() -> None:
    rng = np.random.default_rng(3)
    counts = np.zeros(1000)
    counts[:10] = 100.0  # the rest on 10 values
    noisy = counts + rng.normal(0.0, 5.0, 1000)
    assert 10.0 <= effective_values(noisy, 1000.0, 5.0, False) <= 14.0
    # spread thinly over every value: within the noise, no bound
    assert effective_values(np.full(1000, 1.0) + rng.normal(0.0, 5.0, 1000), 1000.0, 5.0, False) == math.inf
    assert effective_values(noisy, 0.0, 5.0, False) == 0.0


def test_code_set_needs_whole_numbers_and_two_standing_values() -> None:
    grid = profile_grid("integer")
    from spark_dpsynth.profile.blocks import RunSums

    cells = np.flatnonzero(grid.possible[: grid.null_cell])
    sums = RunSums(grid, cells, np.zeros(grid.size), 1.0, 5.0)
    standing = cells_of(grid, np.array([100.0, 9000.0]), np.array([True, True]))
    noisy = np.zeros(grid.size)
    noisy[standing] = 500.0
    assert code_set(grid.points, noisy, standing, None, sums, 4.0, False, 1000.0, 16) is None
    assert code_set(grid.points, noisy, standing[:1], cells, sums, 4.0, False, 1000.0, 16) is None


@pytest.mark.slow
@pytest.mark.long
def test_nist_industry_codes_come_back_as_codes_the_column_holds(spark, shared_data) -> None:
    # a real extract (NIST Texas 2019: industry code INDP, "N" where not applicable, its category and sex) through
    # the default workload mechanism and pgm: no synthetic code the column does not hold
    from spark_dpsynth.mechanisms.workload import fit_workload
    from spark_dpsynth.params import DataConfig, SynthesisParams, WorkloadParams
    from spark_dpsynth.privacy.budget import Budget
    from spark_dpsynth.synthesizers import pgm
    from spark_dpsynth.synthesizers._types import restore_types

    real = pd.read_csv(shared_data / "nist_tx2019.csv.gz", dtype=str, usecols=["INDP", "INDP_CAT", "SEX"])
    df = spark.createDataFrame(real)
    release = fit_workload(
        df,
        WorkloadParams(reporting_length=2, selection="mst", estimation_iterations=20),
        DataConfig(),
        budget=Budget(4.0, seed=5),
    )
    meaning = release.manifest["column_meanings"]["INDP"]
    assert meaning["meaning"] == "code" and meaning["reason"].startswith("DP code set"), meaning
    synthetic = restore_types(
        pgm.sample(release, SynthesisParams(partitions=2, seed=1), spark), release.manifest, seed=1
    )
    out = synthetic.toPandas()["INDP"].dropna()
    assert len(out) and set(out) <= set(real["INDP"])


def test_a_measurements_range_reaches_its_1st_and_99th_percentiles() -> None:
    # amounts (lognormal) and survey weights (gamma), 20,000 records each, 8 noise draws: the DP range plus the
    # exact values kept reaches the column's 99th percentile (trimmed at RANGE_TAIL; at a quarter bin, 1/64, it did
    # in 2 of the 16 draws) and the amounts' 1st (0 of 8 before); beyond the data in one draw of 16 (a block's
    # even spread past the largest weight, 634, to 724, within TAIL_REACH). The weights' thin low
    # values (1..7, 1% of the records over 7 whole numbers) stand out in no cell or block: their 1st percentile is
    # not reached.
    rng = np.random.default_rng(5)
    amounts = np.round(np.exp(rng.normal(8.0, 1.0, 20000)))
    weights = np.round(np.clip(rng.gamma(2.0, 50.0, 20000), 1, None))
    tops = bottoms = beyond = 0
    for values in (amounts, weights):
        low, high = np.percentile(values, [1, 99])
        for seed in range(8):
            b = _profile(values, seed).bins
            assert b is not None
            ends = [b.lower, b.upper, *b.points]
            beyond += min(ends) < values.min() or max(ends) > values.max()
            tops += max(ends) >= high
            bottoms += values is amounts and min(ends) <= low
    assert tops >= 12 and bottoms >= 6 and beyond <= 1, (tops, bottoms, beyond)
