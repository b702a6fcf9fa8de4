"""The registry of mechanisms and synthesizers, the typed manifest it dispatches on, and the independent-columns
synthesizer (the smallest synthesizer: one module and one registry entry)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from spark_dpsynth import registry
from spark_dpsynth.errors import InvalidParameterError, ReleaseError
from spark_dpsynth.params import SynthesisParams
from spark_dpsynth.release import Manifest, Release
from spark_dpsynth.synthesizers.independent import column_distributions


def small_release(protected_n: int = 100) -> Release:
    """A marginals release of two columns: A = a (60) | b (30), B = x (50) | y (50), one 2-tuple."""
    aggregates = pd.DataFrame(
        [
            (1, ["A"], ["a"], 60),
            (1, ["A"], ["b"], 30),
            (1, ["B"], ["x"], 50),
            (1, ["B"], ["y"], 50),
            (2, ["A", "B"], ["a", "x"], 40),
        ],
        columns=["k", "columns", "values", "count"],
    )
    manifest = {
        "columns": ["A", "B"],
        "reporting_length": 2,
        "protected_number_of_records": protected_n,
        "epsilon": 1.0,
        "delta": 1e-6,
        "test_mode": True,
    }
    return Release.from_pandas(aggregates, manifest)


def test_every_entry_resolves() -> None:
    for spec in registry.MECHANISMS.values():
        assert dataclasses.is_dataclass(spec.params_class()), spec.name
        assert callable(spec.load_run()), spec.name
        assert spec.synthesizers and all(s in registry.SYNTHESIZERS for s in spec.synthesizers)
        if spec.check:
            assert callable(spec.load_check())
    for spec in registry.SYNTHESIZERS.values():
        assert callable(spec.load_sample()), spec.name
        assert all(m in registry.MECHANISMS for m in spec.mechanisms)


def test_unknown_names_list_the_known_ones() -> None:
    with pytest.raises(InvalidParameterError, match="one of .*'independent'"):
        registry.synthesizer("nope")
    with pytest.raises(InvalidParameterError, match="one of .*'marginals'"):
        registry.mechanism("nope")


@pytest.mark.parametrize(
    ("entries", "mechanism"),
    [
        ({}, "marginals"),  # written before the "mechanism" entry: the marginals mechanism
        (
            {"synthesizer": "class_conditional", "mechanism": "discrete Laplace on every bin"},
            "class_conditional",
        ),
        ({"synthesizer": "archetype"}, "archetype"),
        ({"mechanism": "archetype"}, "archetype"),
        ({"source": "sds"}, "marginals"),
    ],
)
def test_the_mechanism_of_old_and_new_manifests(entries: dict, mechanism: str) -> None:
    doc = {"columns": ["A"], "protected_number_of_records": 5, **entries}
    assert Manifest.from_json(doc).mechanism == mechanism


def test_resolve_synthesizer_takes_the_release_default_or_a_compatible_request() -> None:
    manifest = small_release().manifest
    assert registry.resolve_synthesizer(manifest).name == "model"
    assert registry.resolve_synthesizer(manifest, "independent").name == "independent"
    assert registry.resolve_synthesizer(manifest.with_entries(synthesizers=["sds"])).name == "sds"
    with pytest.raises(ReleaseError, match="cannot sample a release of the 'marginals' mechanism"):
        registry.resolve_synthesizer(manifest, "archetype")
    cc = {"columns": ["A"], "protected_number_of_records": 5, "mechanism": "class_conditional"}
    assert registry.resolve_synthesizer(cc).name == "class_conditional"


def test_registering_twice_is_an_error() -> None:
    with pytest.raises(InvalidParameterError, match="already registered"):
        registry.register_synthesizer(registry.SYNTHESIZERS["model"])


def test_the_manifest_is_frozen_and_typed() -> None:
    release = small_release()
    m = release.manifest
    assert isinstance(m, Manifest) and m["epsilon"] == 1.0 and m.budget.epsilon == 1.0
    with pytest.raises(TypeError, match="read-only"):
        m["epsilon"] = 2.0  # type: ignore[index]
    with pytest.raises(TypeError, match="read-only"):
        m["columns"].append("C")
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.mechanism = "archetype"  # type: ignore[misc]
    assert m.with_entries(note="x")["note"] == "x" and "note" not in m
    assert m.to_json() == dict(m.document) and isinstance(m.to_json()["columns"], list)


def test_column_distributions_follow_the_released_counts_and_the_empty_deficit() -> None:
    a, b = column_distributions(small_release(protected_n=100))
    np.testing.assert_allclose(a, [0.6, 0.3, 0.1])  # a, b, empty = 100 - 90
    np.testing.assert_allclose(b, [0.5, 0.5, 0.0])


def test_independent_synthesizer_end_to_end(spark) -> None:
    release = small_release(protected_n=100)
    spec = registry.synthesizer("independent")
    params = SynthesisParams(target_number_of_records=20_000, partitions=3, seed=5)
    out = spec.synthesize(release, params, spark)
    assert out.columns == ["A", "B"]
    assert out.rdd.getNumPartitions() == 3
    pdf = out.toPandas()
    assert len(pdf) == 20_000
    shares = pdf["A"].fillna("<empty>").value_counts(normalize=True)
    # binomial standard error at n = 20,000 is <= 0.0036: 0.02 is more than 5 of them
    assert shares["a"] == pytest.approx(0.6, abs=0.02)
    assert shares["<empty>"] == pytest.approx(0.1, abs=0.02)
    assert pdf["B"].notna().all()
    again = spec.synthesize(release, params, spark).toPandas()
    pd.testing.assert_frame_equal(pdf, again)
    # columns are drawn independently: P(A=a, B=x) ~ 0.6 x 0.5 (the released 2-tuple is not used)
    assert ((pdf["A"] == "a") & (pdf["B"] == "x")).mean() == pytest.approx(0.3, abs=0.02)
    default = spec.synthesize(release, SynthesisParams(partitions=2, seed=1), spark).count()
    assert default == 100  # the protected number of records


def test_a_new_synthesizer_is_one_function_and_one_entry(spark) -> None:
    name = "first_value_only"
    spec = registry.SynthesizerSpec(
        name=name,
        summary="every record takes each column's first released value (a test)",
        mechanisms=("marginals",),
        sample="tests.test_registry:first_value_sample",
    )
    registry.register_synthesizer(spec)
    try:
        assert name in registry.synthesizers_for("marginals")
        out = registry.resolve_synthesizer(small_release().manifest, name).synthesize(
            small_release(), SynthesisParams(target_number_of_records=3), spark
        )
        assert [tuple(r) for r in out.collect()] == [("a", "x")] * 3
    finally:
        del registry.SYNTHESIZERS[name]


def first_value_sample(release, params, spark, *, release_dir=None, progress=None):  # noqa: ANN001, ANN201
    row = tuple(domain[0] for domain in release.domains)
    return spark.createDataFrame([row] * params.target_number_of_records, list(release.columns))
