"""The domain of a table's columns and the noisy marginals measured over it.

A :class:`Domain` names the columns (attributes) in table order and gives each its number of values; a value is
an integer code ``0 .. size - 1``. A clique is a tuple of column names; in *domain order* its names appear in
the order of :attr:`Domain.names`, and every table over a clique has one axis per name, in that order. A
:class:`Measurement` is a noisy table over a clique with the standard deviation of its Gaussian noise: the
measurement y = M_C x + N(0, std^2 I) of McKenna, Sheldon and Miklau, "Graphical-model based estimation and
inference for differential privacy" (ICML 2019), section 3, with M_C the marginalization onto clique C. A
*partial* measurement (a ``mask``) measures only some cells of the table: y = S M_C x + noise, S selecting the
measured cells, still a linear query in their sense.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from spark_dpsynth.errors import InvalidParameterError

__all__ = ["Clique", "Domain", "Measurement"]

Clique = tuple[str, ...]
"""A tuple of distinct column names."""


@dataclass(frozen=True)
class Domain:
    """Column names and their numbers of values (codes ``0 .. size - 1``)."""

    names: tuple[str, ...]
    """Column names, in table order, distinct."""
    sizes: tuple[int, ...]
    """Per column, its number of values, >= 1."""

    def __post_init__(self) -> None:
        names = tuple(str(n) for n in self.names)
        sizes = tuple(self.sizes)
        if len(names) != len(sizes):
            raise InvalidParameterError(
                f"a domain needs one size per name, got {len(names)} names, {len(sizes)} sizes"
            )
        if len(set(names)) != len(names):
            raise InvalidParameterError(f"domain names must be distinct, got {list(names)}")
        for name, size in zip(names, sizes, strict=True):
            if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 1:
                raise InvalidParameterError(
                    f"the size of column {name!r} must be an integer >= 1, got {size!r}"
                )
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "sizes", tuple(int(s) for s in sizes))
        object.__setattr__(self, "_index", {n: i for i, n in enumerate(names)})

    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, name: object) -> bool:
        return name in self._index  # type: ignore[attr-defined]

    def index(self, name: str) -> int:
        """The position of column ``name``.

        Raises:
            InvalidParameterError: ``name`` is not a column of the domain.
        """
        try:
            return int(self._index[name])  # type: ignore[attr-defined]
        except KeyError:
            raise InvalidParameterError(
                f"{name!r} is not a column of the domain {list(self.names)}"
            ) from None

    def size(self, name: str) -> int:
        """The number of values of column ``name``."""
        return self.sizes[self.index(name)]

    def canonical(self, clique: Iterable[str]) -> Clique:
        """``clique`` in domain order.

        Raises:
            InvalidParameterError: a name is unknown or repeated.
        """
        names = tuple(clique)
        if len(set(names)) != len(names):
            raise InvalidParameterError(f"a clique's columns must be distinct, got {list(names)}")
        return tuple(sorted(names, key=self.index))

    def shape(self, clique: Iterable[str]) -> tuple[int, ...]:
        """The shape of a table over ``clique`` (one axis per name, in the order given)."""
        return tuple(self.size(n) for n in clique)

    def cells(self, clique: Iterable[str]) -> int:
        """The number of cells of a table over ``clique`` (an exact integer)."""
        return math.prod(self.shape(clique))


@dataclass(frozen=True, eq=False)
class Measurement:
    """A noisy marginal: ``values`` = the clique's table of counts + independent Gaussian noise of std ``std``.

    Sources: McKenna, Sheldon and Miklau (ICML 2019), section 3 (a measurement is a linear query of the data's
    contingency table plus noise; here the query is a marginal).

    The one measurement type of the package: the workload mechanism releases these
    (``Release.measurements``, docs/design.md section 4.7), the estimator and the ``pgm`` synthesizer read them.
    """

    clique: Clique
    """Column names, distinct (domain order is expected; other orders are accepted by :func:`estimate` with the
    table's axes in the same order as the names)."""
    values: np.ndarray
    """float64, one axis per clique name, ``domain.size(name)`` cells each: noisy counts (may be negative)."""
    std: float
    """Noise standard deviation of every cell, in counts, > 0 and finite."""
    mask: np.ndarray | None = None
    """A *partial* measurement: bool, the table's shape, True on the cells measured; the others carry no
    information (their ``values`` are ignored, the loss leaves them out). None: every cell is measured."""

    def __post_init__(self) -> None:
        clique = tuple(str(c) for c in self.clique)
        if not clique or len(set(clique)) != len(clique):
            raise InvalidParameterError(
                f"a measurement's clique must be non-empty and distinct, got {list(clique)}"
            )
        values = np.asarray(self.values, dtype=np.float64)
        if values.ndim != len(clique):
            raise InvalidParameterError(
                f"the measurement over {list(clique)} must have {len(clique)} axes, got shape {values.shape}"
            )
        if not np.all(np.isfinite(values)):
            raise InvalidParameterError(f"the measurement over {list(clique)} has non-finite values")
        std = float(self.std)
        if not (math.isfinite(std) and std > 0):
            raise InvalidParameterError(f"std must be > 0 and finite, got {self.std!r}")
        if self.mask is not None:
            mask = np.asarray(self.mask)
            if mask.dtype != np.bool_ or mask.shape != values.shape:
                raise InvalidParameterError(
                    f"the mask of the measurement over {list(clique)} must be a bool array of shape "
                    f"{values.shape}, got {mask.dtype} {mask.shape}"
                )
            if not mask.any():
                raise InvalidParameterError(f"the measurement over {list(clique)} masks every cell")
            object.__setattr__(self, "mask", None if mask.all() else mask)
            values = np.where(mask, values, 0.0)
        object.__setattr__(self, "clique", clique)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "std", std)

    @property
    def partial(self) -> bool:
        """Whether only some cells are measured (:attr:`mask`)."""
        return self.mask is not None

    def precision(self) -> np.ndarray | float:
        """1/std^2 per cell: a float when every cell is measured, else an array, zero on unmeasured cells."""
        w = 1.0 / self.std**2
        return w if self.mask is None else np.where(self.mask, w, 0.0)

    def __eq__(self, other: object) -> bool:
        """Equal cliques, stds, tables and masks (value equality of the arrays)."""
        if not isinstance(other, Measurement):
            return NotImplemented
        return (
            self.clique == other.clique
            and self.std == other.std
            and self.values.shape == other.values.shape
            and bool(np.array_equal(self.values, other.values))
            and (self.mask is None) == (other.mask is None)
            and (self.mask is None or bool(np.array_equal(self.mask, other.mask)))
        )

    __hash__ = None  # type: ignore[assignment]

    def in_domain_order(self, domain: Domain) -> Measurement:
        """The same measurement with its clique in domain order (the table's axes permuted alike).

        Raises:
            InvalidParameterError: a name is not in ``domain`` or the table's shape does not match it.
        """
        canonical = domain.canonical(self.clique)
        if self.values.shape != domain.shape(self.clique):
            raise InvalidParameterError(
                f"the measurement over {list(self.clique)} has shape {self.values.shape}, the domain gives "
                f"{domain.shape(self.clique)}"
            )
        if canonical == self.clique:
            return self
        order = [self.clique.index(n) for n in canonical]
        mask = None if self.mask is None else np.ascontiguousarray(self.mask.transpose(order))
        return Measurement(canonical, np.ascontiguousarray(self.values.transpose(order)), self.std, mask)
