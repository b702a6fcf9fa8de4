"""MST's selection for the workload mechanism (McKenna, Miklau, Sheldon, "Winning the NIST Contest: A scalable and
general approach to differentially private synthetic data", 2021, section 4; docs/design.md section 4.7): the
1-way tables, a maximum spanning tree of 2-way cliques chosen by the exponential mechanism, its 2-way tables.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Callable, Sequence

import numpy as np

from spark_dpsynth._progress import Progress, report
from spark_dpsynth.estimation.domain import Measurement
from spark_dpsynth.mechanisms._cliques import clique_cells
from spark_dpsynth.mechanisms._selection import Components, State, TrueTables, measure
from spark_dpsynth.params import WorkloadParams
from spark_dpsynth.privacy.accounting import Accountant
from spark_dpsynth.release.core import one_way_means

__all__ = ["mst", "spanning_tree"]

log = logging.getLogger(__name__)


def mst(
    tables: TrueTables,
    sizes: tuple[int, ...],
    names: tuple[str, ...],
    rho: float,
    params: WorkloadParams,
    acct: Accountant,
    progress: Progress | None,
    known: Sequence[Measurement] = (),
) -> State:
    """MST (McKenna, Miklau, Sheldon 2021, section 4): a share p of rho for the 1-way tables (``one_way_rho_
    proportion``; MST's 1/3 when None), (1 - p)/2 each for the tree's d - 1 exponential-mechanism choices and
    the d - 1 chosen 2-way tables. The independent-columns estimate that scores the edges combines the 1-way
    tables with the ``known`` partial ones (inverse-variance mean on the cells they measure)."""
    state = State()
    d = len(sizes)
    ones = [(j,) for j in range(d)]
    share = params.one_way_rho_proportion if params.one_way_rho_proportion is not None else 1.0 / 3.0
    # d tables of sensitivity 1 each at std sigma_1: share x rho in total.
    sigma1 = math.sqrt(d / (2.0 * rho * share))
    true1 = tables.get(ones)
    for c in ones:
        measure(state, acct, true1[c], c, sigma1, names, 0, f"measure_1way_{names[c[0]]}")
    state.rounds.append({"round": 0, "kind": "1-way tables", "rho": d / (2 * sigma1**2), "sigma": sigma1})
    if d < 2:
        return state
    # Independent-columns estimate from the noisy 1-way tables and the known ones (post-processing).
    total = float(np.mean([max(m.values.sum(), 1.0) for m in state.measurements]))
    combined = {j: mean for j, (mean, _) in one_way_means([*known, *state.measurements], names).items()}
    probs = []
    for j in range(d):
        p = np.clip(combined[j], 0, None)
        probs.append(p / p.sum() if p.sum() > 0 else np.full(p.shape, 1.0 / p.size))
    pairs = [
        c for c in itertools.combinations(range(d), 2) if clique_cells(sizes, c) <= params.max_clique_cells
    ]
    report(progress, log, f"workload (mst): scoring {len(pairs)} 2-way cliques")
    true2 = tables.get(pairs)
    # Scores are private: used only by the exponential mechanism below, never logged or written.
    scores = {c: float(np.abs(true2[c] - total * np.outer(probs[c[0]], probs[c[1]])).sum()) for c in pairs}
    del true2
    steps = d - 1
    rho_step = rho * (1.0 - share) / 2.0 / steps
    chosen, _ = spanning_tree(
        pairs,
        scores,
        d,
        acct,
        rho_step,
        "select_tree_edge",
        "exponential mechanism (MST edge by L1 error of independent columns, sensitivity 1)",
    )
    state.rounds.append(
        {
            "round": 1,
            "kind": "maximum spanning tree (exponential mechanism per edge)",
            "rho": rho_step * len(chosen),
            "rho_per_choice": rho_step,
            "chosen": [[names[a], names[b]] for a, b in chosen],
        }
    )
    if chosen:
        left = rho - d / (2 * sigma1**2) - rho_step * len(chosen)
        sigma2 = math.sqrt(len(chosen) / (2.0 * left))
        true2 = tables.get(chosen)
        for c in chosen:
            measure(state, acct, true2[c], c, sigma2, names, 2, f"measure_{'_'.join(names[x] for x in c)}")
        state.rounds.append({"round": 2, "kind": "2-way tables of the tree", "rho": left, "sigma": sigma2})
    return state


def spanning_tree(
    pairs: Sequence[tuple[int, int]],
    scores: dict[tuple[int, int], float],
    d: int,
    acct: Accountant,
    rho_step: float,
    label: str,
    mechanism: str,
    fits: Callable[[tuple[int, int], list[tuple[int, int]]], bool] | None = None,
    joined: Sequence[tuple[int, ...]] = (),
) -> tuple[list[tuple[int, int]], int]:
    """Kruskal's maximum spanning tree with DP choices (McKenna, Miklau, Sheldon 2021, section 4): each step
    spends ``rho_step`` of ``acct`` (share ``{label}_{step}``) on one exponential-mechanism choice at
    sensitivity 1 among the ``pairs`` that join two components of the tree so far (and that ``fits``, a
    public test of a pair against the edges chosen before it, accepts: asked of drawn pairs only, by rejection
    as in :meth:`~spark_dpsynth.privacy.accounting.Accountant.exponential`), starting from the components
    that the cliques ``joined`` form; until one component is left, or no pair is. Returns the chosen pairs and
    the number of choices paid for (one more than the pairs when the last draw fit nowhere). ``scores`` are
    private (used by the mechanism only, never logged or written)."""
    parts = Components(d, joined)
    chosen: list[tuple[int, int]] = []
    for t in range(d - 1):
        options = [c for c in pairs if parts.root(c[0]) != parts.root(c[1])]
        if not options:
            break
        name = f"{label}_{t + 1}"
        acct.spend_rho(name, rho_step, mechanism, epsilon=math.sqrt(8 * rho_step))
        accept = None if fits is None else (lambda i, options=options: bool(fits(options[i], chosen)))
        i = acct.exponential(name, np.array([scores[c] for c in options]), 1.0, accept=accept)
        if i is None:
            return chosen, t + 1
        a, b = options[i]
        parts.join((a, b))
        chosen.append((a, b))
    return chosen, len(chosen)
