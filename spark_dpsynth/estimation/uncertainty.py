"""Uncertainty of a fitted model's marginals: a parametric bootstrap over the noise of the measurements.

A model p_hat fitted to noisy measured marginals (:func:`~spark_dpsynth.estimation.estimate`) answers any marginal
query; how far its answer may be from the data's depends on the noise the measurements carried. The parametric
bootstrap (Efron and Tibshirani, "An Introduction to the Bootstrap", 1993, section 6.5; for DP releases Ferrando,
Wang and Sheldon, "Parametric Bootstrap for Differentially Private Confidence Intervals", AISTATS 2022, section 3)
takes the fitted model as the truth and redraws the release's noise around it:

    y_i^(r) = M_{C_i} mu_hat + e_i^(r),    e_i^(r) ~ N(0, sigma_i^2 I)   on every cell measurement i measures,

with mu_hat the model's expected counts and sigma_i the measurement's recorded noise std (the release's noise is
the discrete Gaussian, whose variance is within 10^-6 of sigma^2 for sigma >= 1: Canonne, Kamath and Steinke,
NeurIPS 2020, section 2). Each replicate r is refitted by the same estimator (McKenna, Sheldon and Miklau, ICML
2019, section 4), warm-started at p_hat and stopped by the estimator's own rule or after ``iterations`` steps; the
spread of a query's answers over the replicates is its standard error. The replicates' refits start at the truth
of the bootstrap world, so a bounded number of steps moves each one the distance its noise asks for
(docs/design.md section 4.8, "Answers from the release").

What this does not measure: the error of the model itself where the query's columns were never measured
together (the model holds them as its structure says: independent, or linked through other columns). The
bootstrap world *is* the model, so that error does not show in the spread; :func:`measured_together` says when a
query is free of it. :func:`model_error` estimates it by leaving each measured clique of two or more columns out
in turn (cross-validation, Stone, "Cross-Validatory Choice and Assessment of Statistical Predictions", JRSS B,
1974): the model refitted without measurement i predicts its table mu^(-i), and

    kappa^2 = sum_i sum_x [ (y_i(x) - mu^(-i)(x))^2 - sigma_i^2 ] / sum_i sum_x mu^(-i)(x)^2,

the squared error beyond the noise, relative to the cells' counts, of a marginal the model was not fitted to
(clamped at 0). An answer over columns never measured together then has a model error of about kappa times its
count. The cliques left out are those the selection measured because the model missed them most (AIM's rounds
choose the largest errors, McKenna et al., VLDB 2022, section 4), so kappa is on the large side for the
cliques never chosen: the intervals it widens are conservative.

Pure numpy and the estimator; no Spark, no data: post-processing of a release. The randomness is utility
randomness, from a seeded NumPy generator (docs/design.md section 7.3).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from spark_dpsynth.errors import InvalidParameterError
from spark_dpsynth.estimation.domain import Domain, Measurement
from spark_dpsynth.estimation.mirror_descent import estimate
from spark_dpsynth.estimation.model import GraphicalModel

__all__ = [
    "BOOTSTRAP_ITERATIONS",
    "BOOTSTRAP_REPLICATES",
    "Bootstrap",
    "bootstrap",
    "measured_together",
    "model_error",
]

BOOTSTRAP_REPLICATES = 24
"""Replicates of :func:`bootstrap` by default: the standard error of a standard error estimated from R
replicates is about 1 / sqrt(2 R) of it (14 % at 24), enough for intervals of 2 standard errors."""
BOOTSTRAP_ITERATIONS = 100
"""Most estimator steps of one replicate's warm-started refit by default (the estimator's stopping rule ends
most refits before)."""


@dataclass(frozen=True)
class Bootstrap:
    """A fitted model and its bootstrap replicates (:func:`bootstrap`)."""

    model: GraphicalModel
    """The model fitted to the release (the answers' point estimate)."""
    replicates: tuple[GraphicalModel, ...]
    """The models refitted to the redrawn measurements, one per replicate, over the same domain."""
    seed: int
    """The seed of the redrawn noise (utility randomness)."""

    def shares(self, clique: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """The model's and the replicates' probabilities over ``clique``.

        Args:
            clique: column names of the model's domain (any order; the tables' axes follow it).

        Returns:
            (p, reps): p of shape ``domain.shape(clique)`` summing to 1; reps of shape (R,) + that shape, each
            replicate's probabilities. An empty clique gives p = 1.0 and reps = ones((R,)).

        Raises:
            InvalidParameterError: a name is unknown or repeated.
        """
        names = tuple(clique)
        if not names:
            return np.ones(()), np.ones((len(self.replicates),))
        p = self.model.project(names) / self.model.total
        reps = np.stack([m.project(names) / m.total for m in self.replicates])
        return p, reps


def bootstrap(
    model: GraphicalModel,
    measurements: Iterable[Measurement],
    *,
    replicates: int = BOOTSTRAP_REPLICATES,
    iterations: int = BOOTSTRAP_ITERATIONS,
    seed: int = 0,
) -> Bootstrap:
    """The parametric bootstrap of ``model`` over the noise of ``measurements`` (module docstring).

    Args:
        model: the model fitted to ``measurements`` (its domain is theirs).
        measurements: the measured marginals, each with its noise std (a partial one redraws only the cells it
            measures).
        replicates: R, the number of redrawn releases, >= 2.
        iterations: most estimator steps per replicate's refit, >= 1.
        seed: seed of the redrawn noise (a NumPy generator: utility randomness, not privacy noise).

    Returns:
        The :class:`Bootstrap`: the model and R refitted models.

    Raises:
        InvalidParameterError: ``replicates`` < 2, ``iterations`` < 1, or a measurement is not over the model's
            domain.
    """
    if isinstance(replicates, bool) or not isinstance(replicates, int) or replicates < 2:
        raise InvalidParameterError(f"replicates must be an integer >= 2, got {replicates!r}")
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
        raise InvalidParameterError(f"iterations must be an integer >= 1, got {iterations!r}")
    domain = model.domain
    measured = [m.in_domain_order(domain) for m in measurements]
    means = model.project_many([m.clique for m in measured])
    rng = np.random.default_rng(np.random.SeedSequence(int(seed)))
    fitted = []
    for _ in range(replicates):
        redrawn = []
        for m, mu in zip(measured, means, strict=True):
            values = mu + rng.normal(0.0, m.std, size=mu.shape)
            redrawn.append(Measurement(m.clique, values, m.std, m.mask))
        fitted.append(estimate(domain, redrawn, iterations=iterations, warm_start=model, total=model.total))
    return Bootstrap(model, tuple(fitted), int(seed))


def measured_together(domain: Domain, measurements: Iterable[Measurement], columns: Iterable[str]) -> bool:
    """Whether ``columns`` lie inside the clique of one whole (not partial) measurement: the model's marginal over
    them is then fitted to a measurement of it, and its error is the noise's, which :func:`bootstrap` measures.
    Otherwise the model's structure fills in what was never measured, and the bootstrap does not measure that
    error (module docstring). No columns: True.

    Raises:
        InvalidParameterError: a name is not in ``domain``.
    """
    wanted = set(domain.canonical(columns))
    if not wanted:
        return True
    return any(m.mask is None and wanted <= set(m.clique) for m in measurements)


def model_error(
    model: GraphicalModel, measurements: Iterable[Measurement], *, iterations: int = BOOTSTRAP_ITERATIONS
) -> float:
    """kappa, the relative error of the model's marginals over columns it was not fitted to together, by leaving
    each measured clique of two or more columns out in turn (module docstring).

    Args:
        model: the model fitted to ``measurements``.
        measurements: its measured marginals.
        iterations: most estimator steps of each refit without one clique, >= 1 (warm-started at the model less
            that clique's potential).

    Returns:
        kappa >= 0 (0 when no clique of two or more columns is measured, or none is missed beyond its noise).

    Raises:
        InvalidParameterError: ``iterations`` < 1, or a measurement is not over the model's domain.
    """
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
        raise InvalidParameterError(f"iterations must be an integer >= 1, got {iterations!r}")
    domain = model.domain
    measured = [m.in_domain_order(domain) for m in measurements]
    cliques = list(dict.fromkeys(m.clique for m in measured if m.mask is None and len(m.clique) >= 2))
    excess = scale = 0.0
    for clique in cliques:
        rest = [m for m in measured if m.clique != clique]
        start = GraphicalModel(
            domain, {c: t for c, t in model.potentials.items() if c != clique}, model.total
        )
        mu = estimate(domain, rest, iterations=iterations, warm_start=start, total=model.total).project(
            clique
        )
        for m in measured:
            if m.clique == clique and m.mask is None:
                excess += float(np.sum((m.values - mu) ** 2)) - m.values.size * m.std**2
                scale += float(np.sum(mu**2))
    return math.sqrt(max(excess, 0.0) / scale) if scale > 0 else 0.0
