"""The discovery's settled columns (docs/design.md section 4.7, "Settled columns"): codes whose DP profile's
standing values hold nearly all their records get a quarter of another column's rho in the discovery, the rest
goes to the columns whose values the discovery must find."""

from __future__ import annotations

import math

import numpy as np
import pytest

from spark_dpsynth.mechanisms._manifest import release_key
from spark_dpsynth.mechanisms.marginals import LocalBackend
from spark_dpsynth.mechanisms.workload import (
    SETTLED_RHO_FACTOR,
    _discover,
    _discovery_measurements,
    settled_columns,
)
from spark_dpsynth.params import DataConfig, WorkloadParams
from spark_dpsynth.privacy._seeded import SeededNoise
from spark_dpsynth.privacy.accounting import Accountant, rho_1_threshold_discrete
from spark_dpsynth.privacy.budget import Budget
from spark_dpsynth.privacy.noise import NoNoise
from spark_dpsynth.release.manifest import discovery_noise_std

NAMES = ("p", "q", "r", "s")


def _rows(n: int = 4000) -> list[tuple[str | None, ...]]:
    # p: one value and 32 records (0.8%) on another, which the discovery must find; q, r: two values each;
    # s: empty
    rows = []
    for i in range(n):
        rows.append(("a" if i % 500 >= 4 else "b", "x" if i % 2 else "y", "u" if i % 3 else "v", None))
    return rows


def _run(settled: frozenset[int], noise) -> tuple:  # noqa: ANN001
    acct = Accountant(Budget(4.0), noise=noise)
    discovery, _, _ = _discover(
        LocalBackend.from_rows(_rows(), 4),
        NAMES,
        {},
        {},
        DataConfig(),
        WorkloadParams(),
        acct,
        None,
        release_key,
        settled=settled,
    )
    return discovery, acct


def test_settled_columns_are_the_profiles_codes_that_hold_nearly_all_records() -> None:
    meanings = {
        "p": {"meaning": "code", "source": "dp_profile", "point_share": 0.967},
        "q": {"meaning": "code", "source": "dp_profile", "point_share": 0.995},
        "r": {"meaning": "measurement", "source": "dp_profile", "point_share": 1.0},
        "s": {"meaning": "code", "source": "schema"},  # a string column: no profile
    }
    assert settled_columns(meanings, NAMES) == frozenset({1})
    assert settled_columns({}, NAMES) == frozenset()


def test_settled_columns_cost_a_quarter_and_the_rest_get_the_rho_saved() -> None:
    plain, plain_acct = _run(frozenset(), NoNoise())
    split, split_acct = _run(frozenset({1, 2}), NoNoise())
    shares = {s.name: s.rho for s in split_acct.ledger().shares if s.rho}
    plain_rho = {s.name: s.rho for s in plain_acct.ledger().shares if s.rho}["discovery_counts"]
    # the same rho in total, split 2 : 2 x 1/4 by columns
    assert shares["discovery_counts"] + shares["discovery_counts_settled"] == pytest.approx(plain_rho)
    assert shares["discovery_counts_settled"] == pytest.approx(
        plain_rho * 2 * SETTLED_RHO_FACTOR / (2 + 2 * SETTLED_RHO_FACTOR)
    )
    m = split.manifest
    # per column: rho_j = rho_group / columns; std 1 / sqrt(2 rho_j)
    assert m["noise_std"] == pytest.approx(1 / math.sqrt(2 * shares["discovery_counts"] / 2))
    assert m["settled"]["noise_std"] == pytest.approx(
        1 / math.sqrt(2 * shares["discovery_counts_settled"] / 2)
    )
    assert m["settled"]["noise_std"] == pytest.approx(m["noise_std"] / math.sqrt(SETTLED_RHO_FACTOR))
    assert m["noise_std"] < plain.manifest["noise_std"]  # the columns left to discover get less noise
    assert m["threshold"] < plain.manifest["threshold"] < m["settled"]["threshold"]
    assert m["settled"]["columns"] == ["q", "r"] and m["sensitivity"] == 2
    # thresholds: a union bound over the groups, each its columns' part of the discovery's delta
    delta_t = next(s.delta for s in split_acct.ledger().shares if s.name == "discovery_threshold")
    assert m["threshold"] == rho_1_threshold_discrete(m["sigma"], 2, 2 * delta_t * 2 / 4)
    assert m["settled"]["threshold"] == rho_1_threshold_discrete(
        m["settled"]["sigma"], 2, 2 * delta_t * 2 / 4
    )
    # p's rare value (32 records) passes the lower threshold (30) only, not the one of before (37)
    assert "b" in split.domains[0] and "b" not in plain.domains[0]
    # the empty counts: each column at its group's std, drawn from its group's share
    split.release_empty_counts(split_acct)
    assert split.manifest["empty_counts"] == {"p": 0, "q": 0, "r": 0, "s": 4000}
    assert (
        m["empty_counts_noise_std"] == m["noise_std"]
    )  # the other columns' std; settled ones read "settled"
    assert (
        discovery_noise_std(m, "q") == m["settled"]["noise_std"]
        and discovery_noise_std(m, "p") == m["noise_std"]
    )
    # reused as partial measurements, each at its own std
    out, _ = _discovery_measurements(split, split.kept, NAMES, {}, {})
    assert {x.clique[0]: x.std for x in out} == {
        "p": m["noise_std"],
        "q": m["settled"]["noise_std"],
        "r": m["settled"]["noise_std"],
    }


def test_without_settled_columns_the_draws_are_those_of_before() -> None:
    """No settled column (or all of them): one share, one threshold, the same seeded draws."""
    one, _ = _run(frozenset(), SeededNoise(3))
    every, every_acct = _run(frozenset({0, 1, 2, 3}), SeededNoise(3))

    def public(m: dict) -> dict:
        return {k: v for k, v in m.items() if not k.startswith("_")}

    assert public(one.manifest) == public(every.manifest) and one.counts == every.counts
    assert "settled" not in every.manifest
    assert [s.name for s in every_acct.ledger().shares if s.rho].count("discovery_counts_settled") == 0


def test_settled_noise_has_its_groups_std() -> None:
    """Seeded: the empty counts of settled and other columns scatter with their own stds."""
    errors = {"p": [], "q": []}
    for seed in range(150):
        disc, acct = _run(frozenset({1, 2, 3}), SeededNoise(seed))
        disc.release_empty_counts(acct)
        errors["p"].append(disc.manifest["empty_counts"]["p"])
        errors["q"].append(disc.manifest["empty_counts"]["q"])
    m = disc.manifest
    # 150 draws: the sample std within 15% of the std fails with probability < 1e-3
    assert np.std(errors["p"]) == pytest.approx(m["noise_std"], rel=0.15)
    assert np.std(errors["q"]) == pytest.approx(m["settled"]["noise_std"], rel=0.15)
