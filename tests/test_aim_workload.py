"""AIM's workload with group columns (``[workload] group_columns``): its candidates, their weights and the
exponential mechanism's sensitivity (docs/design.md section 4.7, "A workload by group")."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest

from spark_dpsynth.errors import InvalidParameterError
from spark_dpsynth.mechanisms import _aim
from spark_dpsynth.mechanisms._cliques import LocalCliqueCounter
from spark_dpsynth.mechanisms._selection import all_cliques
from spark_dpsynth.mechanisms.workload import select_and_measure
from spark_dpsynth.params import Accounting, WorkloadParams
from spark_dpsynth.privacy._seeded import SeededNoise
from spark_dpsynth.privacy.accounting import Accountant
from spark_dpsynth.privacy.budget import Budget
from tests.test_workload import _chain


@pytest.mark.parametrize(
    ("d", "r", "group"), [(5, 3, ()), (6, 3, (2,)), (7, 3, (0, 4)), (6, 4, (1,)), (5, 2, (3,))]
)
def test_the_weights_are_aims_sums_over_the_workloads_cliques(d: int, r: int, group: tuple[int, ...]) -> None:
    """Against the definition, by enumeration: the candidates are the cliques inside one of W's (every r-clique
    that holds the group columns), w_c is sum over s in W of |c & s| up to one common factor, and the
    sensitivity is the largest weight."""
    workload = _aim.Workload(d, r, group)
    cliques = [s for s in itertools.combinations(range(d), r) if set(group) <= set(s)]
    sums = {}
    for c in all_cliques(d, r):
        inside = any(set(c) <= set(s) for s in cliques)
        assert workload.holds(c) == inside, c
        if inside:
            sums[c] = sum(len(set(c) & set(s)) for s in cliques)
    factor = math.comb(d - len(group) - 1, r - len(group) - 1)
    for c, total in sums.items():
        assert workload.weight(c) * factor == pytest.approx(total), c
    assert workload.sensitivity * factor == pytest.approx(max(sums.values()))
    if not group:
        assert all(workload.weight(c) == len(c) for c in sums) and workload.sensitivity == r


def test_as_many_group_columns_as_the_clique_size_leave_every_clique_in_the_workload() -> None:
    workload = _aim.Workload(3, 2, (0, 1))
    assert workload.group == frozenset() and workload.sensitivity == 2 and workload.holds((1, 2))


def test_aim_by_group_measures_the_groups_tables_and_pays_their_sensitivity() -> None:
    """With x2 as the group column every 3-column clique AIM measures holds x2, each choice is charged at the
    workload's sensitivity ((d - 1) / 2 + 2 = 4.5 for d = 6: recorded with the share), the budget adds up;
    without it the rounds measure 3-column cliques without x2 on the same chain."""
    d = 6
    codes, sizes = _chain(3000, d)
    names = tuple(f"x{i}" for i in range(d))

    def run(group: tuple[str, ...]) -> tuple[Accountant, float, list[dict]]:
        acct = Accountant(Budget(4.0, 1e-6), noise=SeededNoise(11))
        rho = acct.convert_to_rho(4.0, 1e-6, Accounting.CLASSIC)
        params = WorkloadParams(
            selection="aim",
            group_columns=group,
            max_rounds=12,
            estimation_iterations=20,
            aim_join_columns=False,
        )
        _, entries, _ = select_and_measure(
            LocalCliqueCounter(codes, sizes), names, rho, params, acct, order_key=b"k"
        )
        return acct, rho, entries

    acct, rho, entries = run(("x2",))
    assert sum(s.rho or 0.0 for s in acct.ledger().shares) == pytest.approx(rho, rel=1e-9)
    measured = [tuple(e["columns"]) for e in entries]
    assert any(len(c) == 3 for c in measured)
    assert all("x2" in c for c in measured if len(c) == 3), measured
    choices = [s for s in acct.ledger().shares if "_selection" in s.name]
    assert choices and all("sensitivity 4.5" in s.mechanism for s in choices), {s.mechanism for s in choices}
    _, _, plain = run(())
    assert any(len(e["columns"]) == 3 and "x2" not in e["columns"] for e in plain)


@pytest.mark.parametrize(
    ("group", "match"),
    [
        ("PUMA", "group_columns must be a list of column names"),
        (["PUMA", ""], "group_columns must be a list of column names"),
        (["PUMA", "PUMA"], "group_columns repeat a column"),
        (["a", "b", "c"], r"group_columns must be fewer than reporting_length \(3\)"),
    ],
)
def test_group_columns_are_checked_with_the_parameters(group: object, match: str) -> None:
    with pytest.raises(InvalidParameterError, match=match):
        WorkloadParams(group_columns=group)  # type: ignore[arg-type]


def test_a_group_column_the_input_lacks_is_refused_before_any_dp_draw(
    spark, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spark_dpsynth.cli.main import main
    from tests.test_cli import ADULT, _no_dp_draw

    _no_dp_draw(monkeypatch)
    out = tmp_path / "out"
    code = main(
        ["pipeline", "--input", ADULT, "--output", str(out), "--columns", "age,sex,race", "--group-columns",
         "region", "--quiet"]
    )  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [
        "spark-dpsynth: error: [workload] group_columns ['region'] are not attribute columns of the input"
    ], err
    assert not list(out.iterdir()), "nothing is published"


@pytest.mark.parametrize("selection", ["aim", "mst"])
def test_the_manifest_records_the_group_columns_and_mst_says_it_ignores_them(
    spark, selection: str, caplog: pytest.LogCaptureFixture
) -> None:
    import pandas as pd

    from spark_dpsynth.mechanisms.workload import fit_workload
    from spark_dpsynth.privacy.noise import NoNoise

    df = spark.createDataFrame(
        pd.DataFrame({"a": ["x", "y"] * 100, "b": ["p", "q", "r", "s"] * 50, "c": ["u"] * 150 + ["v"] * 50})
    )
    params = WorkloadParams(selection=selection, group_columns=("a",), max_rounds=4, estimation_iterations=5)
    with caplog.at_level("WARNING", logger="spark_dpsynth.mechanisms.workload"):
        release = fit_workload(df, params, noise=NoNoise(), budget=Budget(epsilon=2.0, delta=1e-6, seed=1))
    assert release.manifest["parameters"]["group_columns"] == ["a"]
    ignored = [r.getMessage() for r in caplog.records if "group_columns" in r.getMessage()]
    assert ignored == (
        ["workload: MST's tree does not read the workload: group_columns ['a'] are not used (--selection aim "
         "chooses the tables within groups)"]
        if selection == "mst"
        else []
    )  # fmt: skip
    measured = [tuple(e["columns"]) for e in release.manifest["measurements"]]
    if selection == "aim":
        assert all("a" in c for c in measured if len(c) == 3), measured


def test_a_group_column_that_is_not_measured_is_said_and_left_out(caplog: pytest.LogCaptureFixture) -> None:
    """A group column the rounds do not see (it released no value; a person-level column) is named in a
    warning, and the workload is that of the other group columns (here none: every 3-column clique)."""
    d = 5
    codes, sizes = _chain(2000, d)
    names = tuple(f"x{i}" for i in range(d))
    acct = Accountant(Budget(2.0, 1e-6), noise=SeededNoise(3))
    rho = acct.convert_to_rho(2.0, 1e-6, Accounting.CLASSIC)
    params = WorkloadParams(selection="aim", group_columns=("gone",), max_rounds=3, estimation_iterations=5)
    with caplog.at_level("WARNING", logger="spark_dpsynth.mechanisms._aim"):
        select_and_measure(LocalCliqueCounter(codes, sizes), names, rho, params, acct, order_key=b"k")
    assert [r.getMessage() for r in caplog.records] == [
        "workload (aim): group_columns ['gone'] are not among the measured columns: not used"
    ]
    assert all("sensitivity 3)" in s.mechanism for s in acct.ledger().shares if "_selection" in s.name)
