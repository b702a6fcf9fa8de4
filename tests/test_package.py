"""The package's import surface: lazy public names, and light imports in Spark's Python workers (issue 6)."""

from __future__ import annotations

import subprocess
import sys

import spark_dpsynth

HEAVY = ("scipy", "sklearn", "matplotlib", "opendp")


def _modules_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_every_public_name_resolves_and_is_listed() -> None:
    assert set(spark_dpsynth.__all__) == set(spark_dpsynth._EXPORTS)
    for name in spark_dpsynth.__all__:
        value = getattr(spark_dpsynth, name)
        assert value.__module__.startswith("spark_dpsynth."), name
    assert set(spark_dpsynth.__all__) <= set(dir(spark_dpsynth))
    try:
        spark_dpsynth.no_such_name  # noqa: B018
    except AttributeError as err:
        assert "no_such_name" in str(err)
    else:
        raise AssertionError("an unknown name must raise AttributeError")


def test_importing_the_package_or_the_counting_kernels_stays_light() -> None:
    # a Spark Python worker imports the package and the kernels of the aggregation: no scipy, scikit-learn,
    # matplotlib or OpenDP (each worker paid ~1 s for them before the lazy imports)
    for statement in (
        "import spark_dpsynth",
        "import spark_dpsynth.mechanisms._counting",
        "import spark_dpsynth.evaluation.cells",  # the evaluation's cell counter
    ):
        loaded = _modules_after(statement)
        assert not [m for m in loaded if m.split(".")[0] in HEAVY or m.startswith(HEAVY)], statement
    assert "spark_dpsynth.mechanisms.marginals" in _modules_after("from spark_dpsynth import dp_aggregate")
    # `prepare` is the function (its module is spark_dpsynth.data.prepare, no name clash)
    assert _modules_after(
        "import spark_dpsynth.mechanisms.marginals, spark_dpsynth; assert callable(spark_dpsynth.prepare)"
    )
