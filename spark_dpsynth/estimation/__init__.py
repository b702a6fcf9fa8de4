"""Estimation: graphical models fitted to noisy measured marginals (Private-PGM), and sampled.

Pure numpy/scipy, no Spark and no noise: it reads measurements, never data (post-processing). The design is
docs/design.md section 4.8. Modules, in pipeline order:

* :mod:`.domain`: :class:`Domain` (column names and sizes) and :class:`Measurement` (a noisy marginal over a
  clique, with its noise std).
* :mod:`.junction_tree`: triangulation by greedy elimination, maximal cliques, the junction tree
  (:class:`JunctionTree`) and its size (:func:`junction_tree_size`, the model-size cap).
* :mod:`.model`: :class:`GraphicalModel`: log-potentials, belief propagation in log space, ``project`` onto any
  clique, ancestral ``sample`` (independent or systematic).
* :mod:`.mirror_descent`: :func:`estimate`, Private-PGM's mirror descent (McKenna, Sheldon and Miklau, ICML 2019), and
  :func:`estimate_total` (with :func:`total_variance`).
* :mod:`._factor`: log-space table helpers (broadcasting, log-sum-exp).
"""

from __future__ import annotations

from spark_dpsynth.estimation.domain import Clique, Domain, Measurement
from spark_dpsynth.estimation.junction_tree import (
    JunctionTree,
    elimination_order,
    junction_tree_size,
    maximal_cliques,
)
from spark_dpsynth.estimation.mirror_descent import (
    DEFAULT_ITERATIONS,
    FitReport,
    estimate,
    estimate_total,
    total_variance,
)
from spark_dpsynth.estimation.model import GraphicalModel

__all__ = [
    "DEFAULT_ITERATIONS",
    "Clique",
    "Domain",
    "FitReport",
    "GraphicalModel",
    "JunctionTree",
    "Measurement",
    "elimination_order",
    "estimate",
    "estimate_total",
    "junction_tree_size",
    "maximal_cliques",
    "total_variance",
]
