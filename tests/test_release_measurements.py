"""The release's measured marginals (docs/design.md section 4.8): validation and the save/load round trip."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from spark_dpsynth.errors import InvalidParameterError, ReleaseError
from spark_dpsynth.estimation.domain import Measurement
from spark_dpsynth.release import Release


def measurement_of(columns, values, std, mask=None) -> Measurement:  # noqa: ANN001
    """A measurement over the columns A, B, C (and D, not a column of the releases here) by index."""
    return Measurement(tuple("ABCD"[c] for c in columns), values, std, mask)


def measured_release(*, listed: bool = True) -> Release:
    aggregates = pd.DataFrame(
        {
            "k": [1, 1, 1, 1, 1],
            "columns": [["A"], ["A"], ["B"], ["B"], ["C"]],
            "values": [["a"], ["b"], ["x"], ["y"], ["u"]],
            "count": [60, 30, 50, 40, 90],
        }
    )
    rng = np.random.default_rng(0)
    measurements = (
        measurement_of(columns=(0,), values=np.array([60.5, 29.0, 10.25]), std=2.5),
        measurement_of(columns=(0, 2), values=rng.normal(10, 5, size=(3, 2)), std=3.0),
        measurement_of(columns=(0, 1, 2), values=rng.normal(5, 5, size=(3, 3, 2)), std=4.0),
    )
    manifest = {
        "columns": ["A", "B", "C"],
        "mechanism": "workload",
        "reporting_length": 1,
        "protected_number_of_records": 100,
        "epsilon": 1.0,
        "delta": 1e-6,
        "test_mode": True,
    }
    if listed:
        manifest["measurements"] = [
            # rho = 1 / (2 std^2): a release is checked for it when it is read (spark_dpsynth.release.integrity)
            {"columns": ["A"], "std": 2.5, "rho": 1 / (2 * 2.5**2), "round": 0},
            {"columns": ["A", "C"], "std": 3.0, "rho": 1 / (2 * 3.0**2), "round": 1},
            {"columns": ["A", "B", "C"], "std": 4.0, "rho": 1 / (2 * 4.0**2), "round": 2},
        ]
    base = Release.from_pandas(aggregates, manifest)
    return Release(base.columns, base.domains, base.marginals, base.manifest, measurements=measurements)


def test_a_release_without_measurements_is_unchanged() -> None:
    aggregates = pd.DataFrame({"k": [1], "columns": [["A"]], "values": [["a"]], "count": [5]})
    release = Release.from_pandas(aggregates, {"columns": ["A"], "reporting_length": 1})
    assert release.measurements == ()
    assert release.measurement_sizes() == (2,)


@pytest.mark.parametrize(
    ("clique", "values", "std", "match"),
    [
        (("A", "A"), np.zeros((3, 3)), 1.0, "non-empty and distinct"),
        ((), np.zeros(()), 1.0, "non-empty and distinct"),
        (("A",), np.zeros((3, 3)), 1.0, "must have 1 axes"),
        (("A",), np.array([1.0, np.nan, 0.0]), 1.0, "non-finite"),
        (("A",), np.zeros(3), 0.0, "std must be > 0"),
        (("A",), np.zeros(3), float("inf"), "std must be > 0"),
    ],
)
def test_measured_marginals_are_validated(clique, values, std, match) -> None:  # noqa: ANN001
    with pytest.raises(InvalidParameterError, match=match):
        Measurement(clique, values, std)


def test_the_release_checks_the_measurement_domain() -> None:
    release = measured_release()
    wrong = measurement_of(columns=(1,), values=np.zeros(2), std=1.0)  # B has 2 values + empty = 3 cells
    with pytest.raises(ReleaseError, match="measurement domain is \\(3,\\)"):
        Release(release.columns, release.domains, release.marginals, release.manifest, measurements=(wrong,))
    for clique in [("D",), ("C", "A")]:  # not a column of the release; not in its column order
        outside = Measurement(clique, np.zeros((2,) * len(clique)), 1.0)
        with pytest.raises(ReleaseError, match="in its column order"):
            Release(
                release.columns, release.domains, release.marginals, release.manifest, measurements=(outside,)
            )


@pytest.mark.parametrize("listed", [True, False])
def test_measurements_survive_save_and_load(spark, tmp_path, listed: bool) -> None:  # noqa: ANN001
    release = measured_release(listed=listed)
    assert release.manifest.mechanism == "workload"
    path = str(tmp_path / "release")
    release.save(path, spark)
    with open(tmp_path / "release" / "manifest.json", encoding="utf-8") as f:
        doc = json.load(f)
    assert [e["columns"] for e in doc["measurements"]] == [["A"], ["A", "C"], ["A", "B", "C"]]
    assert [e["std"] for e in doc["measurements"]] == [2.5, 3.0, 4.0]
    if listed:  # the mechanism's own keys are kept
        assert [e["round"] for e in doc["measurements"]] == [0, 1, 2]
    back = Release.load(path, spark)
    assert back.measurements == release.measurements
    assert back.domains == release.domains and back.sizes() == release.sizes()


def test_a_manifest_that_contradicts_the_measurements_is_refused(spark, tmp_path) -> None:  # noqa: ANN001
    release = measured_release()
    doc = release.manifest.to_json()
    doc["measurements"][1]["std"] = 9.0
    bad = Release(release.columns, release.domains, release.marginals, doc, measurements=release.measurements)
    with pytest.raises(ReleaseError, match="does not match"):
        bad.save(str(tmp_path / "bad"), spark)
    assert not (tmp_path / "bad").exists()


def test_loading_incomplete_measurements_fails(spark, tmp_path) -> None:  # noqa: ANN001
    release = measured_release()
    path = tmp_path / "release"
    release.save(str(path), spark)
    cells = spark.read.parquet(str(path / "measurements")).where("NOT (marginal = 2 AND cell = 5)")
    cells.toPandas().to_parquet(tmp_path / "cells.parquet")
    import shutil

    shutil.rmtree(path / "measurements")
    (path / "measurements").mkdir()
    shutil.copy(tmp_path / "cells.parquet", path / "measurements" / "part-0.parquet")
    (path / "SHA256SUMS").unlink()  # rewritten by hand: read as a release without file digests
    with pytest.raises(ReleaseError, match="exactly one value per cell"):
        Release.load(str(path), spark)


def test_a_measurement_domain_in_bin_order_survives_save_and_load(spark, tmp_path) -> None:  # noqa: ANN001
    # A binned column's values are in bin order ("<1" before "[1, 5)" before ">=5"), not sorted: the measured
    # cells index that order, and loading must not re-sort it (it did: every code pointed at another bin).
    base = measured_release()
    order = ("[1, 5)", "<1", ">=5")
    aggregates = pd.DataFrame(
        {
            "k": [1, 1, 1, 2, 2],
            "columns": [["A"], ["A"], ["A"], ["A", "B"], ["A", "B"]],
            "values": [["<1"], ["[1, 5)"], [">=5"], [">=5", "x"], ["<1", "x"]],
            "count": [60, 30, 10, 7, 50],
        }
    )
    manifest = {**base.manifest.to_json(), "columns": ["A", "B"], "reporting_length": 2}
    manifest.pop("measurements")
    loaded = Release.from_pandas(
        pd.concat(
            [aggregates, pd.DataFrame({"k": [1], "columns": [["B"]], "values": [["x"]], "count": [90]})]
        ),
        manifest,
    )
    assert loaded.domains[0] == ("<1", ">=5", "[1, 5)")  # sorted by from_pandas
    measured = (measurement_of(columns=(0,), values=np.array([30.0, 60.0, 10.0, 0.0]), std=1.0),)
    from spark_dpsynth.release.core import _in_measurement_order

    release = _in_measurement_order(loaded, {"A": list(order), "B": ["x"]})
    release = Release(
        release.columns, release.domains, release.marginals, release.manifest, measurements=measured
    )
    path = str(tmp_path / "release")
    release.save(path, spark)
    back = Release.load(path, spark)
    assert back.domains[0] == order and back.measurements == release.measurements
    assert back.to_pandas().sort_values(["k", "count"]).to_dict("list") == release.to_pandas().sort_values(
        ["k", "count"]
    ).to_dict("list")
    pairs = back.to_pandas()
    assert pairs[pairs["k"] == 2].set_index("count")["values"].map(tuple).to_dict() == {
        7: (">=5", "x"),
        50: ("<1", "x"),
    }


def partial_release() -> Release:
    """measured_release plus a partial 1-way table of B: its two values measured, its empty category not."""
    base = measured_release()
    part = measurement_of(
        columns=(1,), values=np.array([50.5, 39.0, 7.0]), std=1.5, mask=np.array([True, True, False])
    )
    doc = base.manifest.to_json()
    doc["measurements"] = [
        {"columns": ["B"], "std": 1.5, "partial": True, "round": "discovery"},
        *doc["measurements"],
    ]
    return Release(base.columns, base.domains, base.marginals, doc, measurements=(part, *base.measurements))


def test_a_partial_measurement_holds_zero_on_its_unmeasured_cells() -> None:
    part = partial_release().measurements[0]
    assert part.partial and part.values.tolist() == [50.5, 39.0, 0.0]
    with pytest.raises(InvalidParameterError, match="masks every cell"):
        measurement_of(columns=(0,), values=np.zeros(3), std=1.0, mask=np.zeros(3, dtype=bool))
    with pytest.raises(InvalidParameterError, match="mask"):
        measurement_of(columns=(0,), values=np.zeros(3), std=1.0, mask=np.ones(2, dtype=bool))
    full = measurement_of(columns=(0,), values=np.zeros(3), std=1.0, mask=np.ones(3, dtype=bool))
    assert full.mask is None and not full.partial


def test_partial_measurements_survive_save_and_load(spark, tmp_path) -> None:  # noqa: ANN001
    release = partial_release()
    path = tmp_path / "release"
    release.save(str(path), spark)
    with open(path / "manifest.json", encoding="utf-8") as f:
        doc = json.load(f)
    assert [e.get("partial", False) for e in doc["measurements"]] == [True, False, False, False]
    cells = pd.read_parquet(path / "measurements")
    assert sorted(cells[cells["marginal"] == 0]["cell"]) == [0, 1]  # only the measured cells are written
    back = Release.load(str(path), spark)
    assert back.measurements == release.measurements
    assert back.measurements[0].mask.tolist() == [True, True, False]
    assert back.measurements[1].mask is None  # an entry without "partial" is a whole table (older releases)


def test_a_manifest_that_contradicts_partial_measurements_is_refused(spark, tmp_path) -> None:  # noqa: ANN001
    release = partial_release()
    doc = release.manifest.to_json()
    del doc["measurements"][0]["partial"]
    bad = Release(release.columns, release.domains, release.marginals, doc, measurements=release.measurements)
    with pytest.raises(ReleaseError, match="does not match"):
        bad.save(str(tmp_path / "bad"), spark)
