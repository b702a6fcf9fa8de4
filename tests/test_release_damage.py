"""A damaged release is refused in one line naming the damaged file: a truncated Parquet file, another table's
file, a file from another release (its checksum is this release's), bytes that are not Parquet. ``dps.load``
and :func:`spark_dpsynth.release.load_release` raise :class:`ReleaseError` (docs/design.md section 1.3), never
Spark's error or its Java trace."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import spark_dpsynth as dps
from spark_dpsynth import registry
from spark_dpsynth.errors import ReleaseError
from spark_dpsynth.mechanisms._discovery import release_accountant
from spark_dpsynth.params import DataConfig, WorkloadParams
from spark_dpsynth.privacy.budget import Budget
from spark_dpsynth.release import load_release
from spark_dpsynth.release.core import ModelFiles


def _rows(n: int, seed: int) -> list[tuple[str, str, str]]:
    rng = np.random.default_rng(seed)
    a = rng.choice(["a", "b", "c"], size=n, p=[0.5, 0.3, 0.2])
    b = rng.choice(["x", "y"], size=n)
    c = np.where(a == "a", "p", rng.choice(["p", "q"], size=n))
    return list(zip(a.tolist(), b.tolist(), c.tolist(), strict=True))


@pytest.fixture(scope="module")
def releases(spark, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:  # noqa: ANN001
    """Two small real releases with measurements (the workload mechanism), of two different tables."""
    out = []
    for n, seed in ((3000, 7), (2000, 8)):
        df = spark.createDataFrame(_rows(n, seed), "A string, B string, C string")
        run = registry.mechanism("workload").load_run()
        fitted = run(
            df,
            WorkloadParams(reporting_length=2),
            DataConfig(),
            registry.MechanismContext(spark=spark, accountant=release_accountant(Budget(1.0))),
        )
        path = tmp_path_factory.mktemp(f"release{seed}") / "release"
        fitted.release.save(str(path), spark)
        out.append(path)
    return out[0], out[1]


def _part(release: Path, table: str) -> Path:
    (part,) = sorted(release.glob(f"{table}/part-*.parquet"))
    return part


def _truncate(part: Path, other: Path) -> None:
    data = part.read_bytes()
    part.write_bytes(data[: len(data) // 2])


def _from_another_release(part: Path, other: Path) -> None:
    """As ``cp`` would do it: the other release's data file, under this one's name (its checksum stays)."""
    shutil.copyfile(_part(other, part.parent.name), part)


def _another_table(part: Path, other: Path) -> None:
    table = "aggregates" if part.parent.name == "measurements" else "measurements"
    shutil.copyfile(_part(part.parent.parent, table), part)
    part.with_name(f".{part.name}.crc").unlink()


def _not_parquet(part: Path, other: Path) -> None:
    part.write_bytes(b"PAR1 this is not a Parquet file\n" * 4)
    part.with_name(f".{part.name}.crc").unlink()


DAMAGE: dict[str, tuple[Callable[[Path, Path], None], str]] = {
    "truncated": (_truncate, "not a readable Parquet file"),
    "from-another-release": (_from_another_release, "Spark cannot read it"),
    "another-table": (_another_table, "its columns are not those of release/"),
    "not-parquet": (_not_parquet, "not a readable Parquet file"),
}


@pytest.mark.parametrize("table", ["measurements", "aggregates"])
@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.filterwarnings("error::UserWarning")
def test_a_damaged_release_file_is_a_release_error_naming_it(
    spark,
    releases: tuple[Path, Path],
    tmp_path: Path,
    damage: str,
    table: str,  # noqa: ANN001
) -> None:
    mine, other = releases
    copy = tmp_path / "release"
    shutil.copytree(mine, copy)
    part = _part(copy, table)
    harm, reason = DAMAGE[damage]
    harm(part, other)
    for read in (lambda: dps.load(str(copy), spark), lambda: load_release(str(copy), spark)):
        with pytest.raises(ReleaseError) as caught:
            read()
        message = str(caught.value)
        assert message == (
            f"the release file {str(part)!r} is damaged or not this release's ({reason}"
            + ("" if damage != "another-table" else table)
            + "); restore the release directory as it was written"
        )
        error = caught.value
        assert error.__cause__ is None, "no Spark error or Java trace attached"
        assert error.__context__ is None or error.__suppress_context__
    assert dps.load(str(mine), spark).manifest["epsilon"] == 1.0, "the undamaged release loads"


def test_a_damaged_public_table_of_a_model_is_a_release_error(tmp_path: Path) -> None:
    (tmp_path / "archetype_model.json").write_text(json.dumps({"histograms": []}))
    (tmp_path / "archetype_public").mkdir()
    table = tmp_path / "archetype_public" / "profiles.parquet"
    table.write_bytes(b"not parquet")
    with pytest.raises(
        ReleaseError, match=rf"the release file '{table}' is damaged .*not a readable Parquet"
    ):
        ModelFiles.read(str(tmp_path), "archetype")
