"""Very wide, short tables (hundreds of columns, hundreds of records): the default release's cost does not grow
with a Spark job per few columns (docs/design.md sections 2.8 and 4.7).

The tables here are generated (small integer codes, neighbouring columns correlated), never real data.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest

from spark_dpsynth.mechanisms import _profile
from spark_dpsynth.mechanisms._profile import (
    PROFILE_PASS_COLUMNS,
    dp_profiles,
    profile_parts,
    profile_sigma,
    profile_units,
)
from spark_dpsynth.params import DataConfig, Selection
from spark_dpsynth.privacy.accounting import Accountant
from spark_dpsynth.privacy.budget import Budget
from spark_dpsynth.privacy.noise import NoNoise
from spark_dpsynth.profile import column_types, numeric_view

WIDE_COLUMNS = 300
WIDE_ROWS = 500


def generated_codes(rows: int, columns: int, seed: int = 57) -> tuple[list[str], np.ndarray]:
    """A generated table (not real data): ``columns`` integer codes of 2-10 levels each, ``rows`` rows, each column
    equal to its left neighbour (modulo its levels) in about 60% of the rows. Returns (names, int array of shape
    (rows, columns))."""
    rng = np.random.default_rng(seed)
    levels = rng.integers(2, 11, size=columns)
    x = np.empty((rows, columns), dtype=np.int64)
    x[:, 0] = rng.integers(0, levels[0], size=rows)
    for j in range(1, columns):
        keep = rng.random(rows) < 0.6
        x[:, j] = np.where(keep, x[:, j - 1] % levels[j], rng.integers(0, levels[j], size=rows))
    return [f"c{j:03d}" for j in range(columns)], x


def write_csv(path: Path, names: list[str], x: np.ndarray) -> Path:
    np.savetxt(path, x, fmt="%d", delimiter=",", header=",".join(names), comments="")
    return path


def test_the_profile_of_a_wide_table_is_a_few_spark_jobs(spark, monkeypatch) -> None:  # noqa: ANN001
    # 300 integer columns are profiled in ceil(300 / PROFILE_PASS_COLUMNS) jobs, one cell key each (a job per
    # 4 columns was 75 jobs), and every column is still decided: all of them codes here
    names, x = generated_codes(60, WIDE_COLUMNS)
    df = spark.createDataFrame(
        [tuple(int(v) for v in row) for row in x], ", ".join(f"{c} int" for c in names)
    )
    types = column_types(df.schema, DataConfig(columns=tuple(names)))
    columns = tuple(names)
    acct = Accountant(Budget(10.0, 1e-6), noise=NoNoise())
    acct.set_rho(1.0)
    acct.spend_rho(
        "column_profile",
        1.0,
        "profile",
        sigma=profile_sigma(1.0, profile_units(types, columns)),
        parts=profile_parts(types, columns),
    )
    keys = []
    cell_key = _profile.cell_key
    monkeypatch.setattr(_profile, "cell_key", lambda x, scale: keys.append(scale) or cell_key(x, scale))
    profiles = dp_profiles(numeric_view(df, types), types, columns, 16, 60, acct)
    assert keys == ["integer"] * math.ceil(WIDE_COLUMNS / PROFILE_PASS_COLUMNS)
    assert set(profiles) == set(names)
    assert {p.meaning for p in profiles.values()} == {"code"}


def test_a_wide_short_table_takes_mst() -> None:
    # the public figures of the 300 x 500 table at epsilon 4: AIM's planned rounds do not fit (4 d > max_rounds)
    # and the rounds' 1-way noise is far above aim_max_relative_noise, so the workload runs MST (one pass of
    # 2-way cliques, not hundreds of AIM rounds)
    from spark_dpsynth.params import WorkloadParams

    params = WorkloadParams()
    relative = Selection.relative_noise(WIDE_COLUMNS, 1.0, WIDE_ROWS)
    assert relative > params.aim_max_relative_noise
    chosen = params.selection.resolve(
        WIDE_COLUMNS,
        params.max_rounds,
        relative,
        params.aim_max_relative_noise,
        WIDE_ROWS,
        params.aim_max_records,
    )
    assert chosen is Selection.MST


@pytest.mark.slow
@pytest.mark.long
def test_a_300_column_500_row_table_is_released_in_minutes(tmp_path: Path) -> None:
    # the whole default release of the generated 300 x 500 table through the command line, on local[2]
    import os
    import subprocess
    import sys

    names, x = generated_codes(WIDE_ROWS, WIDE_COLUMNS)
    csv = write_csv(tmp_path / "wide.csv", names, x)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    started = time.perf_counter()
    run = subprocess.run(
        [sys.executable, "-m", "spark_dpsynth", "aggregate", "--input", str(csv), "--output",
         str(tmp_path / "out"), "--epsilon", "4", "--seed", "1", "--master", "local[2]"],
        capture_output=True, text=True, env=env, timeout=900, check=False,
    )  # fmt: skip
    elapsed = time.perf_counter() - started
    assert run.returncode == 0, run.stderr[-2000:]
    assert (tmp_path / "out" / "release").is_dir()
    assert elapsed < 600, f"{elapsed:.0f} s"
