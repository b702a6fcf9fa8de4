"""A release is tamper-evident: a manifest whose privacy figures or counts disagree is refused when it is read
(docs/design.md section 1.3, :mod:`spark_dpsynth.release.integrity`).

Real releases (the marginals mechanism on the local backend, the workload mechanism on Spark) pass the check;
each hand edit of the issue's kind (epsilon without rho, rho, delta, a share, sigma_k, the protected number of
records, a released count, a measurement) is refused with one line that names the figure. The ``slow`` tier runs
``spark-dpsynth synthesize`` on an edited release end to end.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from spark_dpsynth import registry
from spark_dpsynth.errors import ReleaseError
from spark_dpsynth.mechanisms._discovery import release_accountant
from spark_dpsynth.mechanisms.marginals import LocalBackend, aggregate_encoded
from spark_dpsynth.params import AggregationParams, DataConfig, WorkloadParams
from spark_dpsynth.privacy.budget import Budget
from spark_dpsynth.release import load_release
from spark_dpsynth.release.core import Marginal, Release
from spark_dpsynth.release.integrity import check_release
from tests.conftest import ROOT

ADULT = str(ROOT / "data" / "adult.csv.gz")
_JVM_START = (
    "WARNING: Using incubator modules",
    "Setting default log level to",
    "To adjust logging level use",
)
"""The lines a JVM prints when it starts (PySpark's and the JDK's, no data)."""


def _rows(n: int = 3000) -> list[tuple[str, str, str]]:
    rng = np.random.default_rng(7)
    a = rng.choice(["a", "b", "c"], size=n, p=[0.5, 0.3, 0.2])
    b = rng.choice(["x", "y"], size=n)
    c = np.where(a == "a", "p", rng.choice(["p", "q"], size=n))
    return list(zip(a.tolist(), b.tolist(), c.tolist(), strict=True))


@pytest.fixture(scope="module", params=["classic", "tight_zcdp"])
def marginals_release(request: pytest.FixtureRequest) -> Release:
    params = AggregationParams(reporting_length=2)
    budget = Budget(epsilon=1.0, accounting=request.param)
    return aggregate_encoded(LocalBackend.from_rows(_rows(), 3), ("A", "B", "C"), params, budget=budget)


def _edited(release: Release, edit: Callable[[dict[str, Any]], None]) -> Release:
    doc = release.manifest.to_json()
    edit(doc)
    return Release(release.columns, release.domains, release.marginals, doc, release.measurements)


def test_a_release_made_by_the_mechanism_passes(marginals_release: Release) -> None:
    assert marginals_release.sizes()[1] > 0, "the fixture releases values"
    check_release(marginals_release)


def _set(*path_value: Any) -> Callable[[dict[str, Any]], None]:
    *path, value = path_value

    def edit(doc: dict[str, Any]) -> None:
        target = doc
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value(target[path[-1]]) if callable(value) else value

    return edit


def _both(key: str, value: Callable[[float], float]) -> Callable[[dict[str, Any]], None]:
    def edit(doc: dict[str, Any]) -> None:
        doc[key] = value(doc[key])
        doc["budget"][key] = value(doc["budget"][key])

    return edit


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_set("epsilon", 0.5), r"epsilon 0\.5 differs from the budget's epsilon 1\.0"),
        (_both("epsilon", lambda e: 0.5), r"rho [0-9.e-]+ is \(epsilon 0\.995, delta [0-9.e-]+\)-DP under"),
        (_both("rho", lambda r: 2 * r), r"rho [0-9.e-]+ is \(epsilon 1\.4[0-9]+, delta"),
        (_both("delta", lambda d: 0.25), r"the delta shares add up to [0-9.e-]+, not delta 0\.25"),
        (_set("epsilon_n", lambda e: e / 2), r"epsilon_N [0-9.]+ \+ epsilon_M 0\.995 differs from epsilon 1"),
        (_set("sigmas", "1", lambda s: s / 2), r"sigma_1 [0-9.]+ does not spend its share rho"),
        (_set("noise_std", "2", lambda s: s * 2), r"the noise std of length 2 differs from sigma_2 sqrt\(Delta_2\)"),
        (_set("sensitivities", "2", 0), r"the sensitivity Delta_2 must be >= 1"),
        (_set("released_tuples", "2", lambda n: n + 1), "released_tuples for length 2 differs from the k-tuples"),
        (_set("budget", "shares", 0, "epsilon", -0.01), r"the share 'number_of_records': its epsilon is not a finite number >= 0"),
        (_set("protected_number_of_records", -5), r"protected_number_of_records must be an integer >= 1"),
        (_set("protected_number_of_records", 0), r"protected_number_of_records must be an integer >= 1"),
        (_set("protected_number_of_records", 10.5), r"protected_number_of_records must be an integer >= 1"),
        (_set("epsilon_q", lambda e: 2 * e), r"R epsilon_Q\^2 / 2 \+ bins rho \+ exact values rho \+ sum_k 1 / \(2 sigma_k\^2\) ="),
    ],
    ids=[
        "epsilon-flat", "epsilon-both", "rho", "delta", "epsilon_n", "sigma", "noise_std", "sensitivity",
        "released_tuples", "share", "n-negative", "n-zero", "n-fraction", "epsilon_q",
    ],
)  # fmt: skip
def test_an_edited_manifest_is_refused(
    marginals_release: Release, edit: Callable[[dict[str, Any]], None], message: str
) -> None:
    edited = _edited(marginals_release, edit)
    with pytest.raises(ReleaseError, match=r"^the release's manifest is inconsistent: " + message) as info:
        check_release(edited)
    text = str(info.value)
    assert "\n" not in text and text.endswith("(aggregate again to make a new release)")
    # the count as a number of its own (its digits may occur inside another figure: rho 0.0329617 and n' 2961)
    count = re.escape(str(marginals_release.protected_number_of_records))
    assert not re.search(rf"(?<![0-9.]){count}(?![0-9])", text), "no count in the message"


def test_a_negative_released_count_is_refused(marginals_release: Release) -> None:
    m1 = marginals_release.marginals[1]
    counts = m1.counts.copy()
    counts[0] = -1
    marginals = {**marginals_release.marginals, 1: Marginal(m1.columns, m1.values, counts)}
    edited = Release(
        marginals_release.columns, marginals_release.domains, marginals, marginals_release.manifest
    )
    with pytest.raises(ReleaseError, match="released counts of length 1 are negative"):
        check_release(edited)


def test_sds_releases_have_no_privacy_figures_and_load(tmp_path: Path) -> None:
    path = tmp_path / "aggregates.tsv"
    path.write_text("selections\tprotected_count\nrecord_count\t0\nA:a\t5\nA:b\t3\n")
    release = load_release(str(path), None)  # type: ignore[arg-type]
    assert release.manifest.source == "sds" and release.manifest.budget is None
    assert release.protected_number_of_records == 0, "an SDS file may hold an empty table"
    path.write_text("selections\tprotected_count\nrecord_count\t-3\nA:a\t5\n")
    with pytest.raises(ReleaseError, match=r"protected_number_of_records must be an integer >= 0"):
        load_release(str(path), None)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------- on Spark


@pytest.fixture(scope="module")
def workload_dir(spark, tmp_path_factory: pytest.TempPathFactory) -> Path:
    df = spark.createDataFrame(_rows(), "A string, B string, C string")
    spec = registry.mechanism("workload")
    params = WorkloadParams(reporting_length=2)
    context = registry.MechanismContext(spark=spark, accountant=release_accountant(Budget(epsilon=1.0)))
    fitted = spec.load_run()(df, params, DataConfig(), context)
    path = tmp_path_factory.mktemp("workload") / "release"
    fitted.release.save(str(path), spark)
    return path


def _copy_edited(src: Path, dst: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    shutil.copytree(src, dst)
    doc = json.loads((dst / "manifest.json").read_text())
    edit(doc)
    (dst / "manifest.json").write_text(json.dumps(doc))
    return dst


def _scale_measurement(key: str, factor: float) -> Callable[[dict[str, Any]], None]:
    def edit(doc: dict[str, Any]) -> None:
        entry = next(e for e in doc["measurements"] if e.get("rho"))
        entry[key] *= factor

    return edit


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_scale_measurement("std", 0.5), r"measurement \d+'s rho [0-9.e-]+ differs from 1 / \(2 std\^2\)"),
        (_scale_measurement("rho", 0.5), r"measurement \d+'s rho [0-9.e-]+ differs from 1 / \(2 std\^2\)"),
        (lambda doc: doc["measurements"].pop(), "has cells of a marginal its manifest does not list"),
        (_both("epsilon", lambda e: 0.5), r"the pure-DP shares add up to epsilon 1, more than epsilon 0\.5"),
        (_set("protected_number_of_records", -5), r"protected_number_of_records must be an integer >= 1"),
    ],
    ids=["std", "rho", "dropped", "epsilon", "n"],
)
def test_an_edited_workload_release_is_refused_on_load(
    spark, workload_dir: Path, tmp_path: Path, edit: Callable[[dict[str, Any]], None], message: str
) -> None:
    assert load_release(str(workload_dir), spark).measurements, "the real release loads, with measurements"
    edited = _copy_edited(workload_dir, tmp_path / "release", edit)
    with pytest.raises(ReleaseError, match=message):
        load_release(str(edited), spark)


@pytest.mark.slow
def test_synthesize_refuses_a_hand_edited_manifest_in_one_line(tmp_path: Path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "spark_dpsynth", *args],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=ROOT,
        )

    out = tmp_path / "o"
    made = cli(
        "aggregate", "--synthesizer", "model", "--input", ADULT, "--use-columns", "age,sex,race,income",
        "--epsilon", "1", "--output", str(out), "--quiet",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    release = out / "release"
    # one edit through the command line (the other checks' messages: test_an_edited_manifest_is_refused)
    cases = {"epsilon": (_set("epsilon", 0.5), "epsilon 0.5 differs from the budget's epsilon 1.0")}
    for name, (edit, message) in cases.items():
        edited = _copy_edited(release, tmp_path / name / "release", edit)
        result = cli("synthesize", "--release", str(edited), "--output", str(tmp_path / name), "--quiet")
        assert result.returncode == 2, result.stderr
        lines = [x for x in result.stderr.strip().splitlines() if not x.startswith(_JVM_START)]
        assert len(lines) == 1 and lines[0].startswith(
            "spark-dpsynth: error: the release's manifest is inconsistent"
        )
        assert message in lines[0]
        assert sorted(p.name for p in (tmp_path / name).iterdir()) == ["release"], "nothing synthesized"


def test_our_sds_files_load_with_their_manifest_checked(marginals_release: Release, tmp_path: Path) -> None:
    from spark_dpsynth.release.sds_format import write_sds_files

    write_sds_files(marginals_release, str(tmp_path))
    back = load_release(str(tmp_path / "sds_aggregates.json"), None)  # type: ignore[arg-type]
    assert back.manifest.source != "sds" and back.manifest.budget == marginals_release.manifest.budget
    doc = json.loads((tmp_path / "sds_aggregates.json").read_text())
    doc["spark_dpsynth_manifest"]["epsilon"] = 0.5
    (tmp_path / "sds_aggregates.json").write_text(json.dumps(doc))
    with pytest.raises(ReleaseError, match="epsilon 0.5 differs from the budget's epsilon 1.0"):
        load_release(str(tmp_path / "sds_aggregates.json"), None)  # type: ignore[arg-type]
