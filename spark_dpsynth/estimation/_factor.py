"""Log-space tables over cliques in domain order: broadcasting, marginalization, products (numpy, float64).

Every table here is over a clique in domain order (:class:`~spark_dpsynth.estimation.domain.Domain`), one axis
per column. Because two cliques in domain order list their shared columns in the same relative order, a table over
a sub-clique S of C is brought onto C's axes by a reshape (size-1 axes for the columns of C not in S), and a table
over C is reduced to S by summing (or log-sum-exp-ing) the other axes: no transposition is ever needed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from spark_dpsynth.estimation.domain import Clique, Domain


def broadcast_shape(domain: Domain, sub: Sequence[str], sup: Sequence[str]) -> tuple[int, ...]:
    """The shape that puts a table over ``sub`` (a subset of ``sup``, both in domain order) on ``sup``'s axes."""
    inner = set(sub)
    return tuple(domain.size(n) if n in inner else 1 for n in sup)


def other_axes(sub: Sequence[str], sup: Sequence[str]) -> tuple[int, ...]:
    """The axes of a table over ``sup`` whose columns are not in ``sub``."""
    inner = set(sub)
    return tuple(i for i, n in enumerate(sup) if n not in inner)


def logsumexp(x: np.ndarray, axes: tuple[int, ...], *, keepdims: bool = False) -> np.ndarray:
    """log(sum(exp(x))) over ``axes``, computed stably; an all -inf slice gives -inf.

    The fast path shifts by the global maximum (one pass, one exp); the slices whose sum then underflows to 0
    although they hold a finite entry are recomputed with their own maximum.
    """
    if not axes:
        return x.copy()
    top = x.max() if x.size else -np.inf
    if -np.inf < top < np.inf:
        sums = np.exp(x - top).sum(axis=axes, keepdims=True)
        if sums.min() > 0:
            out = np.log(sums)
            out += top
            return out if keepdims else np.squeeze(out, axis=axes)
    m = np.max(x, axis=axes, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(under="ignore", divide="ignore", invalid="ignore"):
        out = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axes)


def union(domain: Domain, cliques: Sequence[Sequence[str]]) -> Clique:
    """The union of ``cliques``, in domain order."""
    names: set[str] = set()
    for c in cliques:
        names.update(c)
    return domain.canonical(names)
