"""AIM's selection for the workload mechanism (McKenna, Mullins, Sheldon, Miklau, "AIM: An Adaptive and Iterative
Mechanism for Differentially Private Synthetic Data", VLDB 2022, Algorithm 1; docs/design.md section 4.7): the
1-way tables, then rounds that choose one clique (several on wide tables: :func:`picks_per_round`) by the
exponential mechanism and measure it, with the estimate of :mod:`spark_dpsynth.estimation` refitted after each.

* :func:`aim`: the rounds, their budget (annealing) and the model-size rule; a last round that joins the
  columns the rounds left apart (:func:`_join_round`);
* :class:`Workload`: the workload's weights of the candidates and their sensitivity (with group columns);
* :func:`aim_candidates`, :func:`candidate_order`, :func:`order_key`: the cliques scored in a round (public);
* :func:`choose_fitting`: the exponential mechanism over the candidates that fit the model-size rule;
* :func:`picks_per_round`, :func:`batch_rule`: the cliques a round measures and the ones its later picks skip;
* :func:`refit_steps`: the step cap of the rounds' refits;
* :class:`Projector`, :func:`model_size_rule`: post-processing of the DP model (its marginals, its size).
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from spark_dpsynth._progress import Progress, report
from spark_dpsynth.estimation.domain import Measurement
from spark_dpsynth.mechanisms._cliques import clique_cells
from spark_dpsynth.mechanisms._mst import spanning_tree
from spark_dpsynth.mechanisms._selection import Components, State, TrueTables, all_cliques, measure
from spark_dpsynth.params import WorkloadParams
from spark_dpsynth.privacy.accounting import Accountant

__all__ = [
    "Projector",
    "Workload",
    "aim",
    "aim_candidates",
    "batch_rule",
    "candidate_order",
    "choose_fitting",
    "model_size_rule",
    "order_key",
    "picks_per_round",
    "refit_steps",
]

AIM_ROUNDS = 128
"""The rounds (refits) AIM's planned picks are spread over before a round measures several cliques
(:func:`picks_per_round`): one pick a round up to 32 columns at the default 4 d planned picks, two at 47
(docs/design.md section 4.7, "Several picks per round": fewer rounds cost a 24-column table quality)."""
REFIT_STEPS_MAX = 300
"""The rounds' refits take at most this many steps where the counts hold few noise stds (:func:`refit_steps`)."""
REFIT_STEPS_MIN = 50
"""The rounds' refits may take at least this many steps, however many noise stds the counts hold."""
REFIT_FULL_RATIO = 3_000.0
"""N / sigma up to which a refit may take :data:`REFIT_STEPS_MAX` steps; above it the cap falls as sigma / N."""


class Workload:
    """AIM's workload W of R-column cliques over d columns and the weights it gives the candidates
    (McKenna, Mullins, Sheldon, Miklau, VLDB 2022, Algorithm 1: w_r = sum over s in W of |r & s|, the score's
    factor; the exponential mechanism's sensitivity max_r w_r).

    Without group columns W is every R-column clique: w_r = |r| C(d - 1, R - 1), which over C(d - 1, R - 1)
    is |r|, sensitivity R. With g group columns G (``[workload] group_columns``, g < R), W is every R-column
    clique that holds G: a column of G lies in all C(d - g, R - g) of them, another in C(d - g - 1, R - g - 1),
    so over the latter w_r = |r & G| (d - g) / (R - g) + |r - G|, sensitivity g (d - g) / (R - g) + R - g.
    The candidates are W's downward closure: the cliques of at most R columns with at most R - g outside G.
    Public: from d, R and the configuration.

    Args:
        d: columns (>= 1).
        r: R, the workload's clique size (1 <= R <= d).
        group: indices of the group columns; ignored (every R-clique) when there are R or more of them.
    """

    def __init__(self, d: int, r: int, group: Sequence[int] = ()) -> None:
        self.d, self.r = d, r
        self.group = frozenset(group) if len(set(group)) < r else frozenset()

    def holds(self, c: tuple[int, ...]) -> bool:
        """Whether clique ``c`` is in W's downward closure (a candidate)."""
        return len(set(c) - self.group) <= self.r - len(self.group)

    def weight(self, c: tuple[int, ...]) -> float:
        """w_c over C(d - g - 1, R - g - 1) (> 0 for a non-empty clique)."""
        g = len(self.group)
        inside = len(self.group.intersection(c))
        return inside * (self.d - g) / (self.r - g) + (len(c) - inside)

    @property
    def sensitivity(self) -> float:
        """max_r w_r: the weight of an R-clique that holds G (R when there is no group column)."""
        g = len(self.group)
        return g * (self.d - g) / (self.r - g) + (self.r - g)


def refit_steps(total: float, sigma: float, iterations: int | None) -> int:
    """The step cap of one of AIM's warm-started refits (docs/design.md section 4.8, "The rounds' refits"):
    ``iterations`` when set, else REFIT_STEPS_MAX x min(1, REFIT_FULL_RATIO / (N / sigma)), at least
    REFIT_STEPS_MIN. The steps a refit needs grow with N / sigma, the number of noise stds the counts hold (a
    mirror step moves a cell by its relative residual); where N / sigma is small the fit's stopping rule ends most
    refits well before the cap, and where it is large none, so the cap is what bounds the rounds' time there.

    Args:
        total: N, the model's number of records (> 0; DP: estimated from the measurements).
        sigma: the noise std of the round's measurement, in records (> 0; public).
        iterations: the user's fixed cap (``[workload] estimation_iterations``), or None for the rule.

    Returns:
        The cap, in [REFIT_STEPS_MIN, REFIT_STEPS_MAX] by the rule. Post-processing of DP values: it spends nothing.
    """
    if iterations is not None:
        return iterations
    cap = REFIT_STEPS_MAX * min(1.0, REFIT_FULL_RATIO * sigma / total)
    return max(REFIT_STEPS_MIN, int(cap))


log = logging.getLogger(__name__)


def aim(
    tables: TrueTables,
    sizes: tuple[int, ...],
    names: tuple[str, ...],
    rho: float,
    params: WorkloadParams,
    acct: Accountant,
    progress: Progress | None,
    key: bytes,
    known: Sequence[Measurement] = (),
) -> State:
    """AIM (McKenna, Mullins, Sheldon, Miklau, VLDB 2022, Algorithm 1) over the candidates of
    :func:`aim_candidates`, with the estimator of :mod:`spark_dpsynth.estimation`; with ``aim_join_columns``,
    its last round joins the parts of the model its cliques leave apart (:func:`_join_round`)."""
    from spark_dpsynth.estimation import Domain, estimate, estimate_total

    state = State()
    d = len(sizes)
    r = min(params.reporting_length, d)
    domain = Domain(names=tuple(names), sizes=tuple(sizes))
    rounds_planned = params.rounds if params.rounds is not None else 4 * d
    alpha = 1.0 - params.selection_rho_proportion
    sigma = math.sqrt(rounds_planned / (2.0 * alpha * rho))
    epsilon = math.sqrt(8.0 * (1.0 - alpha) * rho / rounds_planned)
    if d / (2.0 * sigma**2) > rho:
        sigma = math.sqrt(d / (2.0 * rho * alpha))
    used = 0.0

    def as_measurements() -> list[Measurement]:
        return [*known, *state.measurements]

    # Round 0: every 1-way table (AIM, Algorithm 1, line 2), at the rounds' sigma or, with
    # ``one_way_rho_proportion``, at that share of rho.
    ones = [(j,) for j in range(d)]
    sigma0 = sigma
    if params.one_way_rho_proportion is not None:
        sigma0 = math.sqrt(d / (2.0 * rho * params.one_way_rho_proportion))
    true1 = tables.get(ones)
    for c in ones:
        measure(state, acct, true1[c], c, sigma0, names, 0, f"round_0_measure_{names[c[0]]}")
        used += 1.0 / (2 * sigma0**2)
    state.rounds.append({"round": 0, "kind": "1-way tables", "rho": used, "sigma": sigma0})
    report(progress, log, f"workload (aim): 1-way tables measured (sigma {sigma0:.3g}); fitting the model")
    total = estimate_total(as_measurements())
    steps = refit_steps(total, sigma0, params.estimation_iterations)
    model = estimate(domain, as_measurements(), iterations=steps, total=total)
    absent = [c for c in params.group_columns if c not in names]
    if absent:
        # Public: the released columns (a column that released no value, or a person-level column).
        log.warning("workload (aim): group_columns %s are not among the measured columns: not used", absent)
    workload = Workload(d, r, [names.index(c) for c in params.group_columns if c in names])
    candidates_all = [
        c
        for c in all_cliques(d, r)
        if workload.holds(c) and clique_cells(sizes, c) <= params.max_clique_cells
    ]
    wide = len(candidates_all) > params.max_candidates_per_round
    # Several picks per round on wide tables only, where a round scores a sample of the candidates anyway.
    picks = picks_per_round(rounds_planned) if wide else 1
    measured_cliques: list[tuple[int, ...]] = list(ones)
    join = params.aim_join_columns
    first_round_rho = 1.0 / (2 * sigma**2) + epsilon**2 / 8.0
    t = 0
    last = params.max_rounds
    while used < rho * (1 - 1e-9) and t < last:
        t += 1
        remaining = rho - used
        round_rho = picks * (1.0 / (2 * sigma**2) + epsilon**2 / 8.0)
        parts = Components(d, measured_cliques).count() - 1 if join else 0
        if parts and (remaining < (parts + 2) * first_round_rho or remaining < 2 * round_rho or t == last):
            # What is left joins the columns the rounds left apart (:func:`_join_round`) instead of a last round.
            used += _join_round(
                tables,
                sizes,
                names,
                model,
                remaining,
                alpha,
                params,
                acct,
                state,
                candidates_all,
                measured_cliques,
                t,
            )
            report(
                progress, log, f"workload (aim): round {t}: 2-way cliques join the model's {parts + 1} parts"
            )
            if used >= rho * (1 - 1e-9):
                break
            # No pair that fits the model joined the parts (public facts): the rounds go on with the rest.
            join, last = False, max(last, t + 1)
            continue
        final = remaining < 2 * round_rho or t == last
        if final:
            # The last round spends the rest over its picks (AIM, Algorithm 1, lines 8-10, per pick).
            sigma = math.sqrt(picks / (2.0 * alpha * remaining))
            epsilon = math.sqrt(8.0 * (1.0 - alpha) * remaining / picks)
        pick_rho = epsilon**2 / 8.0 + 1.0 / (2 * sigma**2)
        size_limit = params.max_model_cells * min(1.0, (used + picks * pick_rho) / rho)
        pool = aim_candidates(candidates_all, measured_cliques, d, wide, params, key, t)
        project = Projector(model)
        true = tables.get(pool)
        # Scores are private: used only by the exponential mechanism below, never logged or written.
        scores = np.empty(len(pool))
        estimates = project.many([tuple(names[x] for x in c) for c in pool])
        for i, c in enumerate(pool):
            est = estimates[i]
            n_cells = true[c].size
            scores[i] = workload.weight(c) * (
                float(np.abs(true[c] - est).sum()) - math.sqrt(2 / math.pi) * sigma * n_cells
            )
        del estimates
        chosen_round: list[tuple[int, ...]] = []
        full = False
        for j in range(picks):
            # Pick j: the exponential mechanism over the pool minus the cliques that hold or are held by an
            # earlier pick of the round, under the model-size rule with those picks in the model (public).
            selection = f"round_{t}_selection" if j == 0 else f"round_{t}_selection_{j + 1}"
            acct.spend_rho(
                selection,
                epsilon**2 / 8.0,
                f"exponential mechanism (AIM score, sensitivity {workload.sensitivity:g})",
                epsilon=epsilon,
            )
            chosen = None
            if not full:
                extra = [tuple(names[x] for x in c) for c in chosen_round]
                fits = batch_rule(model_size_rule(domain, names, model, size_limit, extra), chosen_round)
                chosen = choose_fitting(pool, scores, fits, acct, selection, workload.sensitivity)
            if chosen is None:
                # Nothing in the pool fits: a 1-way table (inside the model) is re-measured, and so are the
                # round's later picks (public: asking the rule again would cost a triangulation per candidate).
                full = True
                left = [c for c in ones if c not in chosen_round]
                ones_scores = np.array(
                    [
                        workload.weight(c)
                        * (
                            float(np.abs(true1[c] - model.project((names[c[0]],))).sum())
                            - math.sqrt(2 / math.pi) * sigma * true1[c].size
                        )
                        for c in left
                    ]
                )
                chosen = left[int(acct.exponential(selection, ones_scores, workload.sensitivity))]  # type: ignore[arg-type]
                del ones_scores
                true = {**true, chosen: true1[chosen]}
            chosen_round.append(chosen)
        del scores
        before = [model.project(tuple(names[x] for x in c)) for c in chosen_round]
        cells = 0
        for j, chosen in enumerate(chosen_round):
            label = f"round_{t}_measure" if j == 0 else f"round_{t}_measure_{j + 1}"
            cells += measure(state, acct, true[chosen], chosen, sigma, names, t, label).values.size
            if chosen not in measured_cliques:
                measured_cliques.append(chosen)
        del true
        used += picks * pick_rho
        chosen_names = [[names[x] for x in c] for c in chosen_round]
        state.rounds.append(
            {
                "round": t,
                "rho": picks * pick_rho,
                "rho_selection": picks * epsilon**2 / 8.0,
                "rho_measurement": picks / (2 * sigma**2),
                "epsilon_selection": epsilon,
                "sigma": sigma,
                "candidates": len(pool),
                "picks": picks,
                "chosen": chosen_names[0] if picks == 1 else chosen_names,
            }
        )
        report(
            progress,
            log,
            f"workload (aim): round {t}: {', '.join(str(c) for c in chosen_names)} of {len(pool)} candidates "
            f"(sigma {sigma:.3g}, rho used {used / rho:.0%})",
        )
        steps = refit_steps(model.total, sigma, params.estimation_iterations)
        model = estimate(domain, as_measurements(), iterations=steps, warm_start=model)
        if model.fit_report is not None:
            state.rounds[-1]["refit_steps"] = model.fit_report.iterations
        moved = sum(
            float(np.abs(model.project(tuple(names[x] for x in c)) - b).sum())
            for c, b in zip(chosen_round, before, strict=True)
        )
        # Annealing (AIM, Algorithm 1, lines 14-16; over a round's picks, their summed movement against their
        # summed expected noise): both estimates are DP, so this test is post-processing.
        if not final and moved <= math.sqrt(2 / math.pi) * sigma * cells:
            sigma /= 2.0
            epsilon *= 2.0
        if final:
            break
    return state


def _join_round(
    tables: TrueTables,
    sizes: tuple[int, ...],
    names: tuple[str, ...],
    model,  # noqa: ANN001 - estimation.GraphicalModel
    remaining: float,
    alpha: float,
    params: WorkloadParams,
    acct: Accountant,
    state: State,
    candidates: list[tuple[int, ...]],
    measured: list[tuple[int, ...]],
    round_no: int,
) -> float:
    """AIM's last round when its cliques leave the columns in k > 1 parts (connected components of the model's
    graph, independent of each other under it): the rho left joins them with k - 1 pairs, Kruskal's algorithm
    from those parts with one exponential-mechanism choice per pair among the pairs that join two parts (MST's
    tree, McKenna, Miklau, Sheldon 2021, section 4), scored by AIM's score of a pair against the model
    (||M_r(D) - M_r(p_hat)||_1 - sqrt(2/pi) sigma n_r; sensitivity 1, no weight); each pair gets rho left /
    (k - 1), 1 - alpha of it for the choice and alpha for the measurement. The pairs whose table would take the
    model beyond ``max_model_cells`` are not offered (public: sizes and the DP model's cliques). Returns the rho
    spent: ``remaining`` unless fewer pairs than k - 1 could be chosen."""
    apart = Components(len(sizes), measured)
    parts = apart.count()
    share = remaining / (parts - 1)
    sigma = math.sqrt(1.0 / (2.0 * alpha * share))
    epsilon = math.sqrt(8.0 * (1.0 - alpha) * share)

    pairs = [c for c in candidates if len(c) == 2 and apart.root(c[0]) != apart.root(c[1])]
    true2 = tables.get(pairs)
    estimates = Projector(model).many([tuple(names[x] for x in c) for c in pairs])
    # Scores are private: used only by the exponential mechanism, never logged or written.
    penalty = math.sqrt(2 / math.pi) * sigma
    scores = {
        c: float(np.abs(true2[c] - est).sum()) - penalty * true2[c].size
        for c, est in zip(pairs, estimates, strict=True)
    }
    del estimates
    from spark_dpsynth.estimation import junction_tree_size

    model_cliques = [tuple(c) for c in model.cliques]
    domain = model.domain

    def fits(c: tuple[int, ...], chosen: list[tuple[int, ...]]) -> bool:
        named = [tuple(names[x] for x in e) for e in [*chosen, c]]
        return junction_tree_size(domain, [*model_cliques, *named]) <= params.max_model_cells

    chosen, paid = spanning_tree(
        pairs,  # type: ignore[arg-type]
        scores,  # type: ignore[arg-type]
        len(sizes),
        acct,
        epsilon**2 / 8.0,
        f"round_{round_no}_join",
        "exponential mechanism (a pair joining two parts of the model, by AIM's score, sensitivity 1)",
        fits,  # type: ignore[arg-type]
        joined=[c for c in measured if len(c) > 1],
    )
    for c in chosen:
        measure(
            state,
            acct,
            true2[c],
            c,
            sigma,
            names,
            round_no,
            f"round_{round_no}_measure_{names[c[0]]}_{names[c[1]]}",
        )
    del true2, scores
    spent = paid * epsilon**2 / 8.0 + len(chosen) / (2 * sigma**2)
    state.rounds.append(
        {
            "round": round_no,
            "kind": "pairs joining the parts of the model (exponential mechanism per pair)",
            "rho": spent,
            "rho_selection": paid * epsilon**2 / 8.0,
            "rho_measurement": len(chosen) / (2 * sigma**2),
            "epsilon_selection": epsilon,
            "sigma": sigma,
            "candidates": len(pairs),
            "chosen": [[names[x] for x in c] for c in chosen],
        }
    )
    return spent


class Projector:
    """``model.project`` that uses the model's independences: columns in different connected components of the
    model's graph are independent under it, so a clique that spans components is the outer product of its
    parts' projections over total^(parts - 1), exact and without the elimination across the junction tree
    (on a wide table most candidates of the first rounds span components; each part's projection is cached)."""

    def __init__(self, model) -> None:  # noqa: ANN001 - estimation.GraphicalModel
        self._model = model
        index = {x: i for i, x in enumerate(model.domain.names)}
        parts = Components(len(index), [tuple(index[x] for x in c) for c in model.cliques])
        self._component = {x: parts.root(i) for x, i in index.items()}
        self._cache: dict[tuple[str, ...], np.ndarray] = {}

    def _part(self, names: tuple[str, ...]) -> np.ndarray:
        if names not in self._cache:
            self._cache[names] = self._model.project(names)
        return self._cache[names]

    def _groups(self, names: tuple[str, ...]) -> list[list[int]]:
        groups: dict[str, list[int]] = {}
        for i, x in enumerate(names):
            groups.setdefault(self._component[x], []).append(i)
        return list(groups.values())

    def __call__(self, names: tuple[str, ...]) -> np.ndarray:
        groups = self._groups(names)
        if len(groups) == 1:
            return self._model.project(names)
        operands: list[Any] = []
        for axes in groups:
            operands += [self._part(tuple(names[i] for i in axes)), list(axes)]
        out = np.einsum(*operands, list(range(len(names))))
        return out / self._model.total ** (len(groups) - 1)

    def many(self, cliques: Sequence[tuple[str, ...]]) -> list[np.ndarray]:
        """``[self(c) for c in cliques]``, the projections inside one component computed together by
        ``GraphicalModel.project_many`` (which shares their elimination messages)."""
        inside: list[tuple[str, ...]] = []
        for names in cliques:
            groups = self._groups(names)
            if len(groups) == 1:
                inside.append(names)
            else:
                inside += [
                    tuple(names[i] for i in axes)
                    for axes in groups
                    if tuple(names[i] for i in axes) not in self._cache
                ]
        inside = list(dict.fromkeys(inside))
        for names, table in zip(inside, self._model.project_many(inside), strict=True):
            self._cache[names] = table
        return [self._cache[c] if len(self._groups(c)) == 1 else self(c) for c in cliques]


def model_size_rule(  # noqa: ANN201 - callable(clique) -> bool
    domain,  # noqa: ANN001 - estimation.Domain
    names: Sequence[str],
    model,  # noqa: ANN001 - estimation.GraphicalModel
    size_limit: float,
    extra: Sequence[tuple[str, ...]] = (),
):
    """AIM's model-size rule as a predicate on cliques (public: sizes and the DP model's cliques only): True
    when the junction tree of the model plus ``extra`` (the round's earlier picks, column names) plus the
    clique stays within ``size_limit`` cells. A clique inside one of those cliques leaves the tree unchanged;
    the others need a triangulation (tens of ms on 76 columns), so the predicate is asked lazily, and cached,
    by :func:`choose_fitting`."""
    from spark_dpsynth.estimation import junction_tree_size

    model_cliques = [tuple(c) for c in model.cliques] + [tuple(c) for c in extra]
    covers = [set(c) for c in model_cliques]
    memo: dict[tuple[int, ...], bool] = {}
    current: list[int] = []

    def fits(c: tuple[int, ...]) -> bool:
        if c not in memo:
            named = tuple(names[x] for x in c)
            if any(set(named) <= m for m in covers):
                if not current:
                    current.append(junction_tree_size(domain, model_cliques))
                memo[c] = current[0] <= size_limit
            else:
                memo[c] = junction_tree_size(domain, [*model_cliques, named]) <= size_limit
        return memo[c]

    return fits


def picks_per_round(rounds_planned: int) -> int:
    """The cliques one AIM round of a wide table (more candidates than ``max_candidates_per_round``; other tables: 1)
    measures (public: from the width): ceil(T / :data:`AIM_ROUNDS`) for T planned picks, so that the T measurements
    AIM's budget is planned for take at most :data:`AIM_ROUNDS` rounds, one refit of the model and one scoring of
    the candidates each; 1 while T <= :data:`AIM_ROUNDS` (AIM as published). The picks of a round are the
    exponential mechanism drawn again on the same scores without the cliques already picked, each charged as one
    choice (docs/design.md section 4.7, "Several picks per round").
    """
    return max(1, -(-rounds_planned // AIM_ROUNDS))


def batch_rule(fits, chosen: Sequence[tuple[int, ...]]):  # noqa: ANN001, ANN201 - callable(clique) -> bool
    """``fits`` restricted to the cliques that neither hold nor are held by a clique of ``chosen`` (the round's
    earlier picks, public): a round measures no clique twice, nor a clique and one of its sub-cliques, whose
    scores, computed before either is measured, would count the same error twice."""
    taken = [set(c) for c in chosen]

    def accept(c: tuple[int, ...]) -> bool:
        cs = set(c)
        return not any(cs <= t or t <= cs for t in taken) and bool(fits(c))

    return accept


def choose_fitting(
    pool: Sequence[tuple[int, ...]],
    scores: np.ndarray,
    fits,  # noqa: ANN001 - callable(clique) -> bool, public
    acct: Accountant,
    share: str,
    sensitivity: float,
) -> tuple[int, ...] | None:
    """The exponential mechanism over the cliques of ``pool`` that ``fits`` accepts, drawn through the share
    ``share`` of ``acct`` (:meth:`~spark_dpsynth.privacy.accounting.Accountant.exponential` with ``accept``), by
    rejection: draw over the remaining cliques, and while the draw does not fit, drop it and draw again with fresh
    noise.

    For a draw r from P(r) proportional to exp(eps s_r) over a set L and a public subset F of L, the first draw
    that falls in F has P(r) = exp(eps s_r) / sum_{F} exp(eps s), the exponential mechanism over F itself, so
    the privacy cost is one choice (rho); the rejected draws are discarded, never logged or written. It asks
    ``fits`` only of drawn cliques (a handful), where testing every candidate would need one triangulation each.
    Returns None when no clique fits.
    """
    i = acct.exponential(share, scores, sensitivity, accept=lambda i: bool(fits(pool[i])))
    return None if i is None else pool[i]


def aim_candidates(
    candidates_all: list[tuple[int, ...]],
    measured: list[tuple[int, ...]],
    d: int,
    wide: bool,
    params: WorkloadParams,
    key: bytes,
    round_no: int,
) -> list[tuple[int, ...]]:
    """The cliques scored in one round (public: from sizes, earlier DP choices and a keyed public order).

    Narrow tables: every clique of size <= R within ``max_clique_cells``. Wide tables (more than
    ``max_candidates_per_round``): the cliques that extend a measured clique by one column (how AIM's model
    grows) plus every 2-way clique, in a fresh keyed pseudo-random order per round, cut to
    ``max_candidates_per_round``; the extensions come first so that the model can grow beyond pairs.
    """
    if not wide:
        return candidates_all
    allowed = set(candidates_all)
    ext: set[tuple[int, ...]] = set()
    for c in measured:
        if len(c) >= params.reporting_length or len(c) < 2:
            continue
        for j in range(d):
            if j not in c:
                e = tuple(sorted((*c, j)))
                if e in allowed:
                    ext.add(e)
    pairs = [c for c in candidates_all if len(c) == 2]
    cap = params.max_candidates_per_round
    # At least half of the pool is pairs (or every pair, when fewer): the extensions of a few dozen measured
    # pairs already exceed the cap on a wide table, and a pool of extensions only never again offers a pair of
    # two columns that no measured clique holds, which only a pair can join to the model.
    n_pairs = min(len(pairs), max(cap - len(ext), cap // 2))
    return (
        candidate_order(sorted(ext), key, round_no)[: cap - n_pairs]
        + candidate_order(pairs, key, round_no)[:n_pairs]
    )


def candidate_order(cliques: list[tuple[int, ...]], key: bytes, round_no: int) -> list[tuple[int, ...]]:
    """A data-independent pseudo-random order of cliques (keyed hash: a fresh public sample per round)."""

    def h(c: tuple[int, ...]) -> bytes:
        return hashlib.blake2b(f"{round_no}:{c}".encode(), key=key, digest_size=8).digest()

    return sorted(cliques, key=h)


def order_key(seed: int | None) -> bytes | None:
    """The key of AIM's public candidate order (:func:`candidate_order`): None in production (a fresh key from
    ``secrets`` per release), derived from the seed in test mode so that a test-mode release is reproducible
    also on tables whose candidates are pruned per round (more than ``max_candidates_per_round``)."""
    if seed is None:
        return None
    return hashlib.sha256(f"spark_dpsynth candidate order {seed}".encode()).digest()[:16]
