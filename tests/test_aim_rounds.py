"""AIM's rounds that cost less: several picks per round (budget, exclusions, model size) and refits that start
from the previous fit's step sizes (docs/design.md section 4.7, "Several picks per round")."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from spark_dpsynth.estimation import Domain, Measurement, estimate
from spark_dpsynth.mechanisms import _aim
from spark_dpsynth.mechanisms._cliques import LocalCliqueCounter
from spark_dpsynth.mechanisms.workload import select_and_measure
from spark_dpsynth.params import Accounting, WorkloadParams
from spark_dpsynth.privacy._seeded import SeededNoise
from spark_dpsynth.privacy.accounting import Accountant
from spark_dpsynth.privacy.budget import Budget
from tests.test_workload import _chain


def test_picks_per_round_fit_the_planned_picks_in_the_reference_rounds() -> None:
    """One pick while the planned picks fit in AIM_ROUNDS rounds (AIM as published), then as many as it takes."""
    m = _aim.AIM_ROUNDS
    assert _aim.picks_per_round(1) == _aim.picks_per_round(m) == 1
    assert _aim.picks_per_round(m + 1) == 2
    assert _aim.picks_per_round(4 * 47) == -(-4 * 47 // m)
    assert _aim.picks_per_round(4 * 15) == 1  # Adult's 15 columns: AIM as published


def test_a_narrow_table_takes_one_pick_per_round() -> None:
    """Tables whose candidates are all scored (not wide) keep AIM's one pick per round, however many planned."""
    d = 6
    codes, sizes = _chain(1000, d)
    names = tuple(f"x{i}" for i in range(d))
    acct = Accountant(Budget(2.0, 1e-6), noise=SeededNoise(5))
    rho = acct.convert_to_rho(2.0, 1e-6, Accounting.CLASSIC)
    params = WorkloadParams(selection="aim", rounds=1000, max_rounds=4, estimation_iterations=10)
    assert _aim.picks_per_round(1000) > 1
    _, _, rounds = select_and_measure(
        LocalCliqueCounter(codes, sizes), names, rho, params, acct, order_key=b"k"
    )
    assert all(r["picks"] == 1 for r in rounds[1:] if "picks" in r)


def test_a_rounds_later_picks_skip_the_cliques_of_its_earlier_ones() -> None:
    """A clique that holds or is held by an earlier pick of the round is refused; others go to ``fits``."""
    asked: list[tuple[int, ...]] = []

    def fits(c: tuple[int, ...]) -> bool:
        asked.append(c)
        return c != (4, 5)

    accept = _aim.batch_rule(fits, [(0, 1), (2, 3, 4)])
    assert not accept((0, 1)) and not accept((0,)) and not accept((0, 1, 5)) and not accept((3, 4))
    assert accept((0, 2)) and accept((1, 3, 5)) and not accept((4, 5))
    assert asked == [(0, 2), (1, 3, 5), (4, 5)]  # the exclusions never cost a triangulation


def test_the_model_size_rule_counts_the_rounds_earlier_picks() -> None:
    """A clique that fits the model alone may not fit it with the round's earlier picks in it."""
    names = tuple(f"x{i}" for i in range(4))
    domain = Domain(names, (10, 10, 10, 10))
    model = estimate(domain, [Measurement((x,), np.full(10, 10.0), 1.0) for x in names], iterations=0)
    alone = _aim.model_size_rule(domain, names, model, 1_000)
    assert alone((0, 2))  # 100 + 10 + 10 cells
    with_picks = _aim.model_size_rule(domain, names, model, 1_000, extra=[("x0", "x1"), ("x1", "x2")])
    assert with_picks((1, 2))  # inside an earlier pick: the tree as it is, 100 + 100 + 10 cells
    assert not with_picks((0, 2))  # the triangle x0-x1-x2: 1,000 + 10 cells
    assert with_picks((0, 3))  # the chain x3-x0-x1-x2: 300 cells


def _aim_on_a_chain(n: int, noise_seed: int, **params: object) -> tuple:
    """AIM (no joining round, 40 candidates a round) on a chain of 8 columns of n records at (2, 1e-6):
    (accountant, rho, measurements, rounds)."""
    d = 8
    codes, sizes = _chain(n, d)
    names = tuple(f"x{i}" for i in range(d))
    acct = Accountant(Budget(2.0, 1e-6), noise=SeededNoise(noise_seed))
    rho = acct.convert_to_rho(2.0, 1e-6, Accounting.CLASSIC)
    settings = WorkloadParams(selection="aim", aim_join_columns=False, max_candidates_per_round=40, **params)
    _, entries, rounds = select_and_measure(
        LocalCliqueCounter(codes, sizes), names, rho, settings, acct, order_key=b"k"
    )
    return acct, rho, entries, rounds


@pytest.mark.parametrize("picks", [1, 3])
def test_several_picks_per_round_are_charged_one_choice_each(picks: int, monkeypatch) -> None:  # noqa: ANN001
    """With k picks per round (a wide table: more candidates than max_candidates_per_round) each round spends
    k exponential-mechanism choices and k measurements (one share each, named after the round), its picks are
    distinct and none holds another, the rounds' rho adds up to the budget, and each round records its picks."""
    monkeypatch.setattr(_aim, "picks_per_round", lambda planned: picks)
    acct, rho, entries, rounds = _aim_on_a_chain(3000, 3, max_rounds=6, estimation_iterations=30)
    shares = acct.ledger().shares
    assert sum(s.rho or 0.0 for s in shares) == pytest.approx(rho, rel=1e-9)
    assert sum(r["rho"] for r in rounds) == pytest.approx(rho, rel=1e-9)
    later = rounds[1:]
    assert later
    for r in later:
        t = r["round"]
        chosen = [r["chosen"]] if picks == 1 else r["chosen"]
        assert r["picks"] == picks == len(chosen)
        sets = [set(c) for c in chosen]
        assert all(not (a <= b or b <= a) for i, a in enumerate(sets) for b in sets[i + 1 :])
        selections = [s for s in shares if s.name.startswith(f"round_{t}_selection")]
        assert len(selections) == picks
        assert sum(s.rho for s in selections) == pytest.approx(r["rho_selection"], rel=1e-12)
        measured = [e for e in entries if e["round"] == t]
        assert [e["columns"] for e in measured] == chosen
        assert sum(e["rho"] for e in measured) == pytest.approx(r["rho_measurement"], rel=1e-12)
        assert r["rho"] == pytest.approx(r["rho_selection"] + r["rho_measurement"], rel=1e-12)


def test_a_warm_started_refit_starts_from_the_last_step_sizes() -> None:
    """A fit records the step sizes its line search ended with; a refit warm-started from it after one more
    measurement starts from them and reaches at least the loss of a refit that starts from the first step's
    rule, with fewer propagations."""
    d = 6
    codes, sizes = _chain(20_000, d, seed=1)
    names = tuple(f"x{i}" for i in range(d))
    domain = Domain(names, sizes)
    rng = np.random.default_rng(2)
    counter = LocalCliqueCounter(codes, sizes)
    cliques = [(j,) for j in range(d)] + [(0, 1), (1, 2), (2, 3)]
    tables = counter.tables([*cliques, (3, 4)], 10**6)

    def noisy(c: tuple[int, ...], t: np.ndarray) -> Measurement:
        return Measurement(tuple(names[x] for x in c), t + rng.normal(0, 5.0, t.shape), 5.0)

    first = [noisy(c, t) for c, t in zip(cliques, tables[:-1], strict=True)]
    model = estimate(domain, first, iterations=300)
    assert model.fit_report.step_sizes is not None
    mirror, proportional = model.fit_report.step_sizes
    assert mirror > 0 and proportional > 0
    more = [*first, noisy((3, 4), tables[-1])]
    carried = estimate(domain, more, iterations=300, warm_start=model)
    model.fit_report = dataclasses.replace(model.fit_report, step_sizes=None)
    fresh = estimate(domain, more, iterations=300, warm_start=model)
    assert carried.fit_report.loss <= fresh.fit_report.loss * (1 + 1e-3)
    assert carried.fit_report.propagations < fresh.fit_report.propagations


def test_when_nothing_fits_a_rounds_picks_remeasure_distinct_one_way_tables(monkeypatch) -> None:  # noqa: ANN001
    """A model already at its size limit takes no clique: each pick of the round re-measures a 1-way table
    (a different one per pick), each still one choice and one measurement, and the budget adds up."""
    monkeypatch.setattr(_aim, "picks_per_round", lambda planned: 3)
    acct, rho, entries, rounds = _aim_on_a_chain(
        2000, 4, max_rounds=3, estimation_iterations=10, max_model_cells=20
    )
    assert sum(s.rho or 0.0 for s in acct.ledger().shares) == pytest.approx(rho, rel=1e-9)
    for r in rounds[1:]:
        assert len(r["chosen"]) == 3 and all(len(c) == 1 for c in r["chosen"])
        assert len({c[0] for c in r["chosen"]}) == 3
        assert len([e for e in entries if e["round"] == r["round"]]) == 3
