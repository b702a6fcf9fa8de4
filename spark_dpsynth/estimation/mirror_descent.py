"""Private-PGM estimation: the graphical model whose marginals best fit noisy measured marginals.

McKenna, Sheldon and Miklau, "Graphical-model based estimation and inference for differential privacy" (ICML
2019), sections 3-4. Given measurements y_i = M_{C_i} x + N(0, sigma_i^2 I) of the data's contingency table x
over cliques C_i, the estimate is the model p_theta (:class:`~spark_dpsynth.estimation.model.GraphicalModel`,
one log-potential per measured clique) whose clique marginals mu = (mu_C) minimize the Gaussian negative
log-likelihood

    L(mu) = sum_i 1/(2 sigma_i^2) || mu_{C_i} - y_i ||_2^2,        grad_C L = sum_{i: C_i = C} (mu_C - y_i) / sigma_i^2,

over the marginals of distributions with ``total`` records. The solver is their mirror descent (section 4,
algorithm 1), whose mirror map is the model's entropy: in the potentials it reads

    theta_{t+1} = theta_t - alpha_t grad L(mu_t),       mu_{t+1} = marginals of p_{theta_{t+1}} (belief propagation).

A partial measurement (``Measurement.mask``) adds its terms only on the cells it measures: W_C and the
gradient are then taken cell by cell, W_C(x) = sum_{i: C_i = C, x measured by i} 1/sigma_i^2 (per-cell precision).

The step size alpha starts at 1 / (N max_C W_C), W_C = sum_{i: C_i = C} 1/sigma_i^2 (N = total; the Lipschitz
rule of the loss as a function of the normalized distribution, N^2 sum_i 1/sigma_i^2, is as many times smaller as
there are measurements, and steps that large are slow), and is then adapted by a backtracking line search: a
step is kept when the loss does not increase and achieves half the first-order decrease,
L(mu_t) - L(mu_{t+1}) >= 0.5 <grad L(mu_t), mu_t - mu_{t+1}> (Armijo's condition on the mirror step, as in
private-pgm's line search); alpha then grows by 2 %. Otherwise alpha is halved and the step retried.

Steps carry momentum in the potentials, theta_{t+1} = theta_t - alpha grad L(mu_t) + beta_k (theta_t - theta_{t-1})
with beta_k = k / (k + 3) after k accepted steps (Nesterov's schedule), and the momentum restarts (k = 0) whenever
a step with momentum fails the test above (adaptive restart: O'Donoghue and Candes, "Adaptive Restart for
Accelerated Gradient Schemes", Foundations of Computational Mathematics, 2015). The line search keeps every step
a descent step, so the loss decreases monotonically, and the loss plain mirror descent reaches is reached in
several times fewer iterations, each costing about one belief propagation (docs/design.md section 4.8).

**Proportional steps.** A mirror step moves the marginal of a cell of probability p by about p times its relative
residual (mu - y) / mu, so the cells of small mass approach their measurements as many times slower than the
largest ones, and the steps a fit needs grow with N / sigma: at 2,000,000 and 10,000,000 records the noise sees
cells a million times smaller than the largest. Each step therefore also tries the *proportional direction*

    d_C(x) = grad_C L(x) / (W_C(x) max(mu_C(x), s_C(x))) = (mu_C(x) - y_C(x)) / max(mu_C(x), s_C(x)),

y_C the inverse-variance mean of the measurements of clique C and s_C = W_C^(-1/2) their combined noise std: the
update of iterative proportional fitting, theta_C += log(y_C / mu_C) (Deming and Stephan, "On a least squares
adjustment of a sampled frequency table when the expected marginal totals are known", Annals of Mathematical
Statistics, 1940), to first order, for the cells above the noise, and the residual in noise stds for those
below it (a Gauss-Newton step with the Hessian of L in theta_C taken as W_C diag(mu_C), clique by clique). It is
not a descent direction everywhere: when the measurements disagree, grad L is not zero at the optimum, only
the same for every record once summed over the cliques (sum_C grad_C(x_C) constant in x), which the mirror step
turns into no change of the model and a cell-by-cell scaling does not. So it has its own step size, starting at
1, and line search (the same test; after ``_PROPORTIONAL_BACKTRACKS`` = 4 halvings the step is left to the mirror
trial and the size stays halved; x 1.5 after an accepted step), and each step takes the trial of lower loss. A step
with both trials costs two propagations or more, and a fit of millions of records stops after several times fewer
steps, at a lower loss, than with the mirror step alone (``benchmarks/fit_convergence.py``; docs/design.md section
4.8, "Proportional steps"). Where the counts hold few noise stds (N / sigma small) the proportional trial seldom
wins and doubled the cost of every step, so it *rests*: after k trials lost in a row (its line search failed, or
the mirror trial's loss was lower) it sits out the next min(2^(k-1) - 1, ``_PROPORTIONAL_MAX_REST`` = 8) steps (0,
1, 3, 7, 8, ...), and once it wins it is tried at every step again. When the mirror trial fails, the proportional
one is tried whatever its rest, before the fit gives up.

The solver stops early when the last ``WINDOW`` = 10 steps lowered the loss by less than
``tolerance`` (default 1e-4) per measured cell, or when no step lowers it any more. The rule is tied to the
noise: the loss is in units of the measurements' noise variances, a noisy cell adds 1/2 to it on average at the
true table, so the fit stops when the next steps would move it by a small fraction of the noise. A fixed number
of iterations is not such a rule: the more records, the larger the loss of the starting model in these units
and the more steps the fit needs (docs/design.md section 4.8, "When the fit stops").

When ``total`` is not given, N is estimated from the measurements: each (whole) table's sum is an unbiased
measurement of N with variance (number of cells) x sigma_i^2, and N is their inverse-variance weighted mean (at
least 1); partial measurements do not sum to N and are left out.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from spark_dpsynth.errors import InvalidParameterError
from spark_dpsynth.estimation._factor import other_axes
from spark_dpsynth.estimation.domain import Clique, Domain, Measurement
from spark_dpsynth.estimation.model import GraphicalModel, Structure, evidence_potential

__all__ = [
    "DEFAULT_ITERATIONS",
    "DEFAULT_TOLERANCE",
    "WINDOW",
    "FitReport",
    "estimate",
    "estimate_total",
    "total_variance",
]

log = logging.getLogger(__name__)

DEFAULT_ITERATIONS = 300
"""Most mirror-descent iterations of :func:`estimate` when none are given."""
DEFAULT_TOLERANCE = 1e-4
"""Loss decrease over :data:`WINDOW` steps, per measured cell (in noise variances), under which :func:`estimate`
stops early."""
WINDOW = 10
"""Steps over which the loss decrease is measured for early stopping."""
_MOMENTUM = True
"""Whether steps carry momentum (with adaptive restart)."""
_ARMIJO = 0.5
"""Share of the first-order decrease a step must achieve to be kept."""
_GROW = 1.02
"""Factor of the step size after an accepted step."""
_SHRINK = 0.5
"""Factor of the step size after a rejected step."""
_MAX_BACKTRACKS = 30
"""Most halvings of one step before the solver stops (the loss cannot decrease further in float64)."""
_PROPORTIONAL = True
"""Whether each step also tries the proportional direction (module docstring)."""
_PROPORTIONAL_BACKTRACKS = 4
"""Most halvings of a proportional step before the step is left to the mirror step."""
_PROPORTIONAL_GROW = 1.5
"""Factor of the proportional step size after an accepted step (it is halved, and kept so, after a failure)."""
_PROPORTIONAL_MAX_REST = 8
"""Most steps the proportional trial sits out after losses in a row (module docstring, "rests")."""


@dataclass(frozen=True)
class FitReport:
    """How a fit went (``GraphicalModel.fit_report`` after :func:`estimate`)."""

    iterations: int
    """Mirror-descent steps taken (fewer than asked when the loss stopped decreasing)."""
    propagations: int
    """Belief propagations run (two trials per step, plus rejected trials)."""
    proportional_steps: int
    """Steps taken along the proportional direction rather than the mirror step (module docstring)."""
    loss: float
    """The final loss L(mu) (module docstring), in squared standard deviations (halved)."""
    seconds: float
    """Wall-clock time of the fit."""
    cells: int
    """Float cells of the junction tree."""
    step_sizes: tuple[float, float] | None = None
    """The step sizes the line search ended with: the mirror one as a multiple of its first, 1 / (N max_C W_C),
    and the proportional one. A fit warm-started from this model starts from them (the loss's curvature
    changes little from one of AIM's rounds to the next) rather than from 1 / (N max_C W_C) and 1, which the
    line search grows back by 2 % (x 1.5) a step. None when no step was tried."""


def estimate_total(measurements: Sequence[Measurement]) -> float:
    """The number of records estimated from the measurements' sums (module docstring), >= 1. Partial
    measurements (a ``mask``) are left out: their sum misses the unmeasured cells.

    Raises:
        InvalidParameterError: there is no measurement of a whole table.
    """
    weights, sums = _total_terms(measurements)
    return max(1.0, float(np.sum(weights * sums) / np.sum(weights)))


def total_variance(measurements: Sequence[Measurement]) -> float:
    """The variance of :func:`estimate_total`'s mean (before its floor at 1): 1 / sum_i 1 / (cells_i sigma_i^2)
    over the whole tables, in records^2 (module docstring).

    Raises:
        InvalidParameterError: there is no measurement of a whole table.
    """
    return 1.0 / float(np.sum(_total_terms(measurements)[0]))


def _total_terms(measurements: Sequence[Measurement]) -> tuple[np.ndarray, np.ndarray]:
    """(weights 1 / (cells sigma^2), sums) of the measurements of whole tables, float64 (T,) each."""
    full = [m for m in measurements if m.mask is None]
    if not full:
        raise InvalidParameterError(
            "estimating the number of records needs at least one measurement of every cell of its table"
        )
    weights = np.array([1.0 / (m.values.size * m.std**2) for m in full])
    sums = np.array([float(m.values.sum()) for m in full])
    return weights, sums


def estimate(
    domain: Domain,
    measurements: Iterable[Measurement],
    *,
    iterations: int = DEFAULT_ITERATIONS,
    warm_start: GraphicalModel | None = None,
    cliques: Iterable[Iterable[str]] = (),
    total: float | None = None,
    max_cells: int | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    structural_zeros: Mapping[Iterable[str], np.ndarray] | None = None,
) -> GraphicalModel:
    """Fit a graphical model to noisy measured marginals by Private-PGM's mirror descent (module docstring).

    Args:
        domain: the columns and their sizes.
        measurements: noisy tables over cliques of ``domain`` (several may share a clique).
        iterations: mirror-descent steps, >= 0 (0 returns the starting model).
        warm_start: a previous model over the same domain: its potentials are the starting point (cliques it
            has that are no longer measured keep their potentials when they fit in the new model); its total is
            kept when ``total`` is None.
        cliques: more cliques to include in the model structure (zero potential at first; e.g. a candidate
            about to be measured).
        total: the number of records N, > 0; None: the warm start's, else estimated from the measurements
            (:func:`estimate_total`).
        max_cells: the largest junction tree allowed, in float cells; None: no limit.
        tolerance: stop before ``iterations`` when the last :data:`WINDOW` steps lowered the loss by less than
            this much per measured cell (the loss is in noise variances), >= 0 (0: run every iteration that
            still lowers the loss).
        structural_zeros: clique (column names) -> bool array of shape ``domain.shape(clique)``, True on the
            cells a record may hold: the other cells are structural zeros of the model during the whole fit (a
            fixed log-potential :data:`~spark_dpsynth.estimation.model.STRUCTURAL_ZERO` added to the clique's,
            never updated), so the mass the measurements put there goes where the other measurements say
            (docs/design.md section 4.8, "Conditions and declared rules"). None: none.

    Returns:
        The fitted model; ``model.fit_report`` (:class:`FitReport`) says how the fit went.

    Raises:
        InvalidParameterError: no measurement and no total, a measurement does not match the domain,
            ``iterations`` < 0, ``tolerance`` < 0, ``total`` <= 0, or ``warm_start`` has another domain.
        ModelSizeError: the junction tree needs more than ``max_cells`` cells.
    """
    started = time.perf_counter()
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 0:
        raise InvalidParameterError(f"iterations must be an integer >= 0, got {iterations!r}")
    if not (np.isfinite(tolerance) and tolerance >= 0):
        raise InvalidParameterError(f"tolerance must be >= 0 and finite, got {tolerance!r}")
    measured = [m.in_domain_order(domain) for m in measurements]
    if warm_start is not None and warm_start.domain != domain:
        raise InvalidParameterError("warm_start must be a model over the same domain")
    if total is None:
        if warm_start is not None:
            total = warm_start.total
        elif measured:
            total = estimate_total(measured)
        else:
            raise InvalidParameterError("estimate needs measurements or a total")
    if not (np.isfinite(total) and total > 0):
        raise InvalidParameterError(f"total must be > 0 and finite, got {total!r}")
    total = float(total)

    # the measurements of each clique, combined: W_C = sum 1/sigma^2, B_C = sum y / sigma^2, K = sum y^2 / sigma^2,
    # cell by cell (W_C is an array when a partial measurement leaves cells out: zero weight there)
    precision: dict[Clique, float | np.ndarray] = {}
    weighted: dict[Clique, np.ndarray] = {}
    constant = 0.0
    for m in measured:
        w = m.precision()
        precision[m.clique] = precision.get(m.clique, 0.0) + w
        weighted[m.clique] = weighted.get(m.clique, 0.0) + w * m.values
        constant += float(np.sum(w * m.values**2))
    zeros = dict(evidence_potential(domain, c, a) for c, a in (structural_zeros or {}).items())
    model_cliques = list(precision) + [domain.canonical(c) for c in cliques] + list(zeros)
    if warm_start is not None:
        model_cliques += list(warm_start.potentials)
    structure = Structure(domain, model_cliques, max_cells=max_cells)
    theta: dict[Clique, np.ndarray] = {c: np.zeros(domain.shape(c)) for c in structure.model_cliques}
    if warm_start is not None:
        for c, values in warm_start.potentials.items():
            theta[c] = values.copy()

    # each measured clique's marginal is summed from the smallest already-summed table that holds it
    measured_cliques = sorted(precision, key=lambda c: (-len(c), domain.cells(c), c))
    sources: dict[Clique, tuple[Clique | None, tuple[int, ...]]] = {}
    for i, c in enumerate(measured_cliques):
        holders = [b for b in measured_cliques[:i] if set(c) <= set(b) and len(b) > len(c)]
        if holders:
            src = min(holders, key=domain.cells)
            sources[c] = (src, other_axes(c, src))
        else:
            sources[c] = (None, structure.reduce[c])

    def evaluate(
        beliefs: list[np.ndarray],
    ) -> tuple[float, dict[Clique, np.ndarray], dict[Clique, np.ndarray]]:
        """The loss, the marginals mu_C and the gradient of every measured clique."""
        probs: dict[int, np.ndarray] = {}
        mu: dict[Clique, np.ndarray] = {}
        grad: dict[Clique, np.ndarray] = {}
        loss = constant
        for c in measured_cliques:
            src, axes = sources[c]
            if src is None:
                node = structure.assign[c]
                if node not in probs:
                    probs[node] = np.exp(beliefs[node])
                table = probs[node]
            else:
                table = mu[src]
            mu_c = table.sum(axis=axes) if axes else table
            mu[c] = mu_c
            w = weighted[c]
            grad[c] = precision[c] * mu_c - w
            loss += float(np.vdot(grad[c] - w, mu_c))
        return 0.5 * loss, mu, grad

    def potentials(th: dict[Clique, np.ndarray]) -> list[np.ndarray]:
        """psi of the potentials ``th`` plus the fixed structural zeros."""
        psi = structure.clique_potentials(th)
        for c, z in zeros.items():
            psi[structure.assign[c]] += z.reshape(structure.expand[c])
        return psi

    beliefs = structure.calibrate(potentials(theta), total)
    propagations = 1
    loss, mu, grad = evaluate(beliefs)
    steps = 0
    measured_cells = sum(
        int(np.count_nonzero(np.broadcast_to(w, weighted[c].shape))) for c, w in precision.items()
    )
    proportional_steps = 0
    step_sizes: tuple[float, float] | None = None
    if measured_cliques and iterations > 0:
        # the noise std of each clique's combined measurements, cell by cell (cells no measurement covers: 0)
        with np.errstate(divide="ignore"):
            noise = {c: np.where(w > 0, 1.0 / np.sqrt(w), 0.0) for c, w in precision.items()}

        def proportional_direction(
            grad: dict[Clique, np.ndarray], mu: dict[Clique, np.ndarray]
        ) -> dict[Clique, np.ndarray]:
            """The proportional direction (module docstring): grad_C / (W_C max(mu_C, s_C)), 0 where W_C = 0."""
            out = {}
            for c, g in grad.items():
                w = np.broadcast_to(precision[c], g.shape)
                out[c] = np.divide(g, w * np.maximum(mu[c], noise[c]), out=np.zeros_like(g), where=w > 0)
            return out

        base_mirror = 1.0 / (total * max(float(np.max(w)) for w in precision.values()))
        alphas = {"mirror": base_mirror, "proportional": 1.0}
        carried = warm_start.fit_report if warm_start is not None else None
        if carried is not None and carried.step_sizes is not None:
            # the warm start's last step sizes (FitReport.step_sizes), the mirror one as a multiple of
            # 1 / (N max W_C): a new measurement of smaller noise scales it down as the first step's rule does
            alphas = {"mirror": base_mirror * carried.step_sizes[0], "proportional": carried.step_sizes[1]}
        previous = theta
        history = [loss]
        run = 0  # accepted momentum steps since the last restart

        def line_search(kind: str, direction: dict[Clique, np.ndarray]) -> tuple | None:
            """The first trial step along ``direction`` that passes the Armijo test (module docstring), or None."""
            nonlocal propagations
            alpha = alphas[kind]
            beta = run / (run + 3.0) if _MOMENTUM else 0.0
            for _ in range(_MAX_BACKTRACKS if kind == "mirror" else _PROPORTIONAL_BACKTRACKS):
                trial = {
                    c: v - alpha * direction[c] + beta * (v - previous[c]) if c in grad else v
                    for c, v in theta.items()
                }
                trial_beliefs = structure.calibrate(potentials(trial), total)
                propagations += 1
                trial_loss, trial_mu, trial_grad = evaluate(trial_beliefs)
                predicted = sum(float(np.vdot(grad[c], mu[c] - trial_mu[c])) for c in measured_cliques)
                if trial_loss <= loss and loss - trial_loss >= _ARMIJO * predicted:
                    alphas[kind] = alpha * (_GROW if kind == "mirror" else _PROPORTIONAL_GROW)
                    return trial_loss, trial, trial_beliefs, trial_mu, trial_grad, beta > 0
                if beta > 0:  # restart the momentum (O'Donoghue and Candes 2015), same step size
                    beta = 0.0
                    continue
                alpha *= _SHRINK
            alphas[kind] = alpha
            return None

        wait = losses = 0  # steps the proportional trial still sits out; its losses in a row
        for _ in range(iterations):
            mirror = line_search("mirror", grad)
            proportional = None
            if _PROPORTIONAL and (wait <= 0 or mirror is None):
                proportional = line_search("proportional", proportional_direction(grad, mu))
                won = proportional is not None and (mirror is None or proportional[0] < mirror[0])
                losses = 0 if won else losses + 1
                wait = min(2 ** max(losses - 1, 0) - 1, _PROPORTIONAL_MAX_REST)
            else:
                wait -= 1
            best = min((t for t in (mirror, proportional) if t is not None), key=lambda t: t[0], default=None)
            if best is None:
                break
            proportional_steps += best is proportional
            previous = theta
            loss, theta, beliefs, mu, grad, momentum = best
            run = run + 1 if momentum else 1
            steps += 1
            history.append(loss)
            if len(history) > WINDOW and history[-WINDOW - 1] - loss <= tolerance * measured_cells:
                break
        step_sizes = (alphas["mirror"] / base_mirror, alphas["proportional"])
    if zeros:
        theta = {c: v + zeros[c] if c in zeros else v for c, v in theta.items()}
    model = GraphicalModel._from_parts(structure, theta, total, beliefs)
    model.fit_report = FitReport(
        iterations=steps,
        propagations=propagations,
        proportional_steps=proportional_steps,
        loss=float(loss),
        seconds=time.perf_counter() - started,
        cells=structure.tree.size(),
        step_sizes=step_sizes,
    )
    log.debug("estimate: %s", model.fit_report)
    return model
