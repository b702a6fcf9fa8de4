"""A damaged release is refused in one line naming the damaged file: a truncated Parquet file, another table's
file, a file from another release (with or without its checksum file), bytes that are not Parquet, an extra
part, another release's manifest. ``dps.load`` and :func:`spark_dpsynth.release.load_release` raise
:class:`ReleaseError` (docs/design.md section 1.3), never Spark's error or its Java trace. A release saved now
lists the SHA-256 of its files (``SHA256SUMS``), checked first; one written before (no ``SHA256SUMS``) still
loads, with the Parquet, checksum and manifest checks only. Reading a release settles a publish that a dead run
left half done in its output directory first (docs/design.md section 1.7)."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
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
from spark_dpsynth.release.integrity import DIGEST_FILE


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


def _from_another_release_with_its_checksum(part: Path, other: Path) -> None:
    """The other release's data file and its checksum file, both under this one's names."""
    theirs = _part(other, part.parent.name)
    shutil.copyfile(theirs, part)
    shutil.copyfile(theirs.with_name(f".{theirs.name}.crc"), part.with_name(f".{part.name}.crc"))


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
    "from-another-release-with-its-checksum": (_from_another_release_with_its_checksum, ""),
}
"""Each damage and the reason given for a release without digests (the swap with its checksum file passes
those checks: the reason the digests exist)."""
DIGEST_REASON = f"its SHA-256 is not the one {DIGEST_FILE} lists"


@pytest.mark.parametrize("digests", [True, False], ids=["with-digests", "written-before-digests"])
@pytest.mark.parametrize("table", ["measurements", "aggregates"])
@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.filterwarnings("error::UserWarning")
def test_a_damaged_release_file_is_a_release_error_naming_it(
    spark,
    releases: tuple[Path, Path],
    tmp_path: Path,
    damage: str,
    table: str,  # noqa: ANN001
    digests: bool,
) -> None:
    mine, other = releases
    harm, reason = DAMAGE[damage]
    if not digests and not reason:
        pytest.skip("without digests a file swapped with its checksum file is not detected")
    copy = tmp_path / "release"
    shutil.copytree(mine, copy)
    if not digests:
        (copy / DIGEST_FILE).unlink()
    part = _part(copy, table)
    harm(part, other)
    for read in (lambda: dps.load(str(copy), spark), lambda: load_release(str(copy), spark)):
        with pytest.raises(ReleaseError) as caught:
            read()
        message = str(caught.value)
        assert message == (
            f"the release file {str(part)!r} is damaged or not this release's ("
            + (DIGEST_REASON if digests else reason + ("" if damage != "another-table" else table))
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


def test_a_saved_release_lists_the_sha256_of_every_file_as_sha256sum_checks_them(releases) -> None:  # noqa: ANN001
    mine, _ = releases
    listed = [line.split("  ", 1)[1] for line in (mine / DIGEST_FILE).read_text().splitlines()]
    files = sorted(str(p.relative_to(mine)) for p in mine.rglob("*") if p.is_file() and p.name != DIGEST_FILE)
    assert sorted(listed) == files and "manifest.json" in listed
    assert any(n.startswith("measurements/.part-") and n.endswith(".crc") for n in listed)
    if shutil.which("sha256sum"):
        subprocess.run(["sha256sum", "--check", "--quiet", DIGEST_FILE], cwd=mine, check=True)


def _extra_part(copy: Path, other: Path) -> Path:
    extra = copy / "aggregates" / "part-99999.parquet"
    shutil.copyfile(_part(other, "aggregates"), extra)
    return extra


def _manifest_edited_consistently(copy: Path, other: Path) -> Path:
    doc = json.loads((copy / "manifest.json").read_text())
    doc["note"] = "edited by hand"  # every relation kept: only the digest sees it
    (copy / "manifest.json").write_text(json.dumps(doc))
    return copy / "manifest.json"


@pytest.mark.parametrize(
    ("harm", "reason"),
    [
        (_extra_part, f"{DIGEST_FILE} does not list it"),
        (_manifest_edited_consistently, DIGEST_REASON),
    ],
    ids=["extra-part", "consistent-manifest-edit"],
)
def test_an_extra_part_or_a_manifest_edit_that_keeps_every_relation_is_refused(
    spark,
    releases: tuple[Path, Path],
    tmp_path: Path,
    harm: Callable[[Path, Path], Path],
    reason: str,  # noqa: ANN001
) -> None:
    mine, other = releases
    copy = tmp_path / "release"
    shutil.copytree(mine, copy)
    named = harm(copy, other)
    with pytest.raises(ReleaseError) as caught:
        dps.load(str(copy), spark)
    assert str(caught.value) == (
        f"the release file {str(named)!r} is damaged or not this release's ({reason}); restore the release "
        "directory as it was written"
    )


def test_another_releases_manifest_is_refused(spark, releases: tuple[Path, Path], tmp_path: Path) -> None:  # noqa: ANN001
    """Named by the first check it fails: its measurements do not fit this release's cells, or its figures, or its
    digest."""
    mine, other = releases
    copy = tmp_path / "release"
    shutil.copytree(mine, copy)
    shutil.copyfile(other / "manifest.json", copy / "manifest.json")
    with pytest.raises(ReleaseError) as caught:
        dps.load(str(copy), spark)
    assert caught.value.__cause__ is None and "Py4J" not in str(caught.value)


def test_a_hand_edited_figure_is_named_before_the_manifests_digest(
    spark,
    releases: tuple[Path, Path],
    tmp_path: Path,  # noqa: ANN001
) -> None:
    mine, _ = releases
    copy = tmp_path / "release"
    shutil.copytree(mine, copy)
    doc = json.loads((copy / "manifest.json").read_text())
    doc["epsilon"] = 0.5
    (copy / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(ReleaseError, match="the release's manifest is inconsistent: .*epsilon"):
        dps.load(str(copy), spark)


def test_a_release_written_before_digests_loads_and_says_so(
    spark,
    releases: tuple[Path, Path],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,  # noqa: ANN001
) -> None:
    mine, _ = releases
    copy = tmp_path / "release"
    shutil.copytree(mine, copy)
    (copy / DIGEST_FILE).unlink()
    with caplog.at_level(logging.INFO, logger="spark_dpsynth.release.core"):
        loaded = dps.load(str(copy), spark)
    assert loaded.manifest == dps.load(str(mine), spark).manifest
    assert any("has no file digests" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(("step", "which"), [(3, "old"), (11, "new")], ids=["not-committed", "committed"])
def test_a_release_whose_directory_a_run_died_publishing_loads_all_old_or_all_new(
    spark,
    releases: tuple[Path, Path],
    tmp_path: Path,
    step: int,
    which: str,  # noqa: ANN001
) -> None:
    """The run was killed after the earlier release was renamed aside (not committed: rolled back) or after its
    commit (rolled forward): ``dps.load`` settles the directory first and reads one whole release."""
    from tests.test_publish import die_publishing, hidden

    mine, other = releases
    out = tmp_path / "out"
    out.mkdir()
    shutil.copytree(mine, out / "release")
    die_publishing(out, step, source=other)
    assert step != 3 or not (out / "release").exists(), "the earlier release is renamed aside"
    loaded = dps.load(str(out / "release"), spark)
    expected = mine if which == "old" else other
    assert loaded.manifest == dps.load(str(expected), spark).manifest
    assert hidden(out) == []
