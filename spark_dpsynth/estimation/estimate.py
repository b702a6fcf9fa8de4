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

The step size alpha_t starts at the Lipschitz rule 1 / (N sum_i 1/sigma_i^2) (N = total: the loss, as a
function of the normalized distribution, has a gradient that is N^2 sum_i 1/sigma_i^2-Lipschitz in the L1 norm,
and the entropy is 1-strongly convex there) and is then adapted by a backtracking line search: a step is kept
when it achieves half the first-order decrease, L(mu_t) - L(mu_{t+1}) >= 0.5 <grad L(mu_t), mu_t - mu_{t+1}>
(Armijo's condition on the mirror step, as private-pgm's line search), and then alpha grows by 1.5; otherwise it
is halved and the step retried. Each accepted step costs one belief propagation.

When ``total`` is not given, N is estimated from the measurements: each table's sum is an unbiased measurement of
N with variance (number of cells) x sigma_i^2, and N is their inverse-variance weighted mean (at least 1).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from spark_dpsynth.errors import InvalidParameterError
from spark_dpsynth.estimation.domain import Clique, Domain, Measurement
from spark_dpsynth.estimation.model import GraphicalModel, _Structure

__all__ = ["DEFAULT_ITERATIONS", "FitReport", "estimate", "estimate_total"]

log = logging.getLogger(__name__)

DEFAULT_ITERATIONS = 500
"""Mirror-descent iterations of :func:`estimate` when none are given."""
_GROW = 1.5
"""Factor of the step size after an accepted step."""
_SHRINK = 0.5
"""Factor of the step size after a rejected step."""
_MAX_BACKTRACKS = 30
"""Most halvings of one step before the solver stops (the loss cannot decrease further in float64)."""


@dataclass(frozen=True)
class FitReport:
    """How a fit went (``GraphicalModel.fit_report`` after :func:`estimate`)."""

    iterations: int
    """Mirror-descent steps taken."""
    propagations: int
    """Belief propagations run (steps plus rejected trials)."""
    loss: float
    """The final loss L(mu) (module docstring), in squared standard deviations (halved)."""
    seconds: float
    """Wall-clock time of the fit."""
    cells: int
    """Float cells of the junction tree."""


def estimate_total(measurements: Sequence[Measurement]) -> float:
    """The number of records estimated from the measurements' sums (module docstring), >= 1.

    Raises:
        InvalidParameterError: there is no measurement.
    """
    if not measurements:
        raise InvalidParameterError("estimating the number of records needs at least one measurement")
    weights = np.array([1.0 / (m.values.size * m.std**2) for m in measurements])
    sums = np.array([float(m.values.sum()) for m in measurements])
    return max(1.0, float(np.sum(weights * sums) / np.sum(weights)))


def estimate(
    domain: Domain,
    measurements: Iterable[Measurement],
    *,
    iterations: int = DEFAULT_ITERATIONS,
    warm_start: GraphicalModel | None = None,
    cliques: Iterable[Iterable[str]] = (),
    total: float | None = None,
    max_cells: int | None = None,
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

    Returns:
        The fitted model; ``model.fit_report`` (:class:`FitReport`) says how the fit went.

    Raises:
        InvalidParameterError: no measurement and no total, a measurement does not match the domain,
            ``iterations`` < 0, ``total`` <= 0, or ``warm_start`` has another domain.
        ModelSizeError: the junction tree needs more than ``max_cells`` cells.
    """
    started = time.perf_counter()
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 0:
        raise InvalidParameterError(f"iterations must be an integer >= 0, got {iterations!r}")
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

    # the measurements of each clique, combined: W_C = sum 1/sigma^2, B_C = sum y / sigma^2, K = sum y^2 / sigma^2
    precision: dict[Clique, float] = {}
    weighted: dict[Clique, np.ndarray] = {}
    constant = 0.0
    for m in measured:
        w = 1.0 / m.std**2
        precision[m.clique] = precision.get(m.clique, 0.0) + w
        weighted[m.clique] = weighted.get(m.clique, 0.0) + w * m.values
        constant += w * float(np.sum(m.values**2))
    model_cliques = list(precision) + [domain.canonical(c) for c in cliques]
    if warm_start is not None:
        model_cliques += list(warm_start.potentials)
    structure = _Structure(domain, model_cliques, max_cells=max_cells)
    theta: dict[Clique, np.ndarray] = {c: np.zeros(domain.shape(c)) for c in structure.model_cliques}
    if warm_start is not None:
        for c, values in warm_start.potentials.items():
            theta[c] = values.copy()

    measured_cliques = list(precision)

    def evaluate(
        beliefs: list[np.ndarray],
    ) -> tuple[float, dict[Clique, np.ndarray], dict[Clique, np.ndarray]]:
        """The loss, the marginals mu_C and the gradient of every measured clique."""
        probs: dict[int, np.ndarray] = {}
        mu: dict[Clique, np.ndarray] = {}
        grad: dict[Clique, np.ndarray] = {}
        loss = constant
        for c in measured_cliques:
            node = structure.assign[c]
            if node not in probs:
                probs[node] = np.exp(beliefs[node])
            mu_c = probs[node].sum(axis=structure.reduce[c]).reshape(domain.shape(c))
            mu[c] = mu_c
            grad[c] = precision[c] * mu_c - weighted[c]
            loss += precision[c] * float(np.sum(mu_c**2)) - 2.0 * float(np.sum(mu_c * weighted[c]))
        return 0.5 * loss, mu, grad

    beliefs = structure.calibrate(structure.clique_potentials(theta), total)
    propagations = 1
    loss, mu, grad = evaluate(beliefs)
    steps = 0
    if measured_cliques and iterations > 0:
        alpha = 1.0 / (total * sum(precision.values()))
        for _ in range(iterations):
            accepted = False
            for _ in range(_MAX_BACKTRACKS):
                trial = {c: (v - alpha * grad[c] if c in grad else v) for c, v in theta.items()}
                trial_beliefs = structure.calibrate(structure.clique_potentials(trial), total)
                propagations += 1
                trial_loss, trial_mu, trial_grad = evaluate(trial_beliefs)
                predicted = sum(float(np.sum(grad[c] * (mu[c] - trial_mu[c]))) for c in measured_cliques)
                if loss - trial_loss >= 0.5 * predicted:
                    theta, beliefs, loss, mu, grad = trial, trial_beliefs, trial_loss, trial_mu, trial_grad
                    alpha *= _GROW
                    accepted = True
                    break
                alpha *= _SHRINK
            if not accepted:
                break
            steps += 1
    model = GraphicalModel._from_parts(structure, theta, total, beliefs)
    model.fit_report = FitReport(
        iterations=steps,
        propagations=propagations,
        loss=float(loss),
        seconds=time.perf_counter() - started,
        cells=structure.tree.size(),
    )
    log.debug("estimate: %s", model.fit_report)
    return model
