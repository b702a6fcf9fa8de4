"""The public-data archetype synthesizer with user-level DP (seed 004), on Spark.

Seed 004 (NIST DP Temporal Map Challenge, "TaxiTrip - Synthesizer") synthesizes a table in which one person (a
taxi) contributes many rows:

1. *Archetypes* are learned on a **public** table of the same schema: a Gaussian mixture (scikit-learn
   ``GaussianMixture``, k components, default 10) is fitted on the clustering columns of at most
   ``max_public_rows`` public rows (default 200,000, collected to the driver: the only non-distributed step),
   categoricals one-hot (or ordinal and standardized) encoded over their public domain.
2. Every row of the **private** table is assigned an archetype by the fitted model (``mapInPandas`` with the
   model in the task closure, vectorized per Arrow batch); every person gets the archetype most of their rows
   have, and the value of the count-histogram column most of their rows have (ties broken by a keyed hash of
   (release key from ``secrets``, person id, candidate), so a retried task chooses alike).
3. Two histograms are released: persons per archetype (k bins) and persons per majority category (every value
   of the public domain of the count column), each bin with independent exact discrete Gaussian noise (OpenDP,
   :class:`spark_dpsynth.privacy.noise.CryptographicNoise`), clamped at 0.
4. Synthesis (post-processing, no privacy cost), distributed over partitions: synthetic persons per
   (archetype, category) cell from the noisy histograms (iterative proportional fitting of the public
   archetype x category table to the two noisy margins, then exact integer rounding per archetype); rows per
   person drawn from the public rows-per-person profile of their cell; the *sample columns* drawn jointly from
   the public rows of their cell (falling back to the archetype, then to all public rows); the count column set
   to the person's category; every *fill column*, in the configured order, drawn from the public marginal
   conditioned on its configured columns, dropping conditioning columns from the end while the public data has
   no row with that combination (seed 004, "Public K-Way Marginals" and Table 1). Every value comes from the
   public data and is checked against the public domain.

Privacy (user-level, zCDP; Bun & Steinke 2016, Canonne, Kamath, Steinke 2020): the privacy unit is a person
(``privacy_unit`` column; without one every row is its own person). Adding or removing one person, with any
number of rows, changes each histogram in exactly one bin by 1: L2 sensitivity 1, because each person is
counted once, in its majority bin, and the mixture and the domains depend on the public data only. Discrete
Gaussian noise of scale sigma on a sensitivity-1 histogram is 1/(2 sigma^2)-zCDP, so with
sigma_a = 1/sqrt(2 rho_a), sigma_c = 1/sqrt(2 rho_c) and rho_a + rho_c = rho the release is rho-zCDP, which
implies (epsilon, delta)-DP with epsilon = rho + 2 sqrt(rho ln(1/delta)) (the ``classic`` accounting), or the
largest rho whose exact conversion (OpenDP, CKS 2020 Prop. 12) gives epsilon (``tight_zcdp``). Unlike the seed
(float Gaussian, epsilon < 1 only) this holds for any epsilon. Values of the count column outside the public
domain are not counted (sensitivity unchanged). Nothing else about the private data is released: no true count,
no number of persons or rows (the manifest's numbers of persons and records are sums of noisy counts).
"""

from __future__ import annotations

import json
import logging
import math
import os
import secrets
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spark_dpsynth import _validate as v
from spark_dpsynth.errors import InvalidParameterError, ReleaseError, SchemaError
from spark_dpsynth.params import DataConfig
from spark_dpsynth.privacy.noise import NoiseSource, noise_source_for
from spark_dpsynth.release.core import Release

__all__ = [
    "ArchetypeParams",
    "ArchetypeModel",
    "ArchetypeRoles",
    "DEFAULT_DELTA",
    "MAX_PUBLIC_ROWS",
    "fit_archetype",
    "sample_archetype",
    "archetype_rho",
    "save_model",
    "load_model",
]

log = logging.getLogger(__name__)

MODEL_FILE = "archetype_model.json"
"""File beside the release's manifest holding the noisy histograms (DP output) for ``synthesize``."""
PUBLIC_DIR = "archetype_public"
"""Directory beside the release's manifest holding the public profiles (derived from the PUBLIC table only)."""
EMPTY = "\x00"
"""Internal marker of the empty value (null), a category of every domain."""
DEFAULT_DELTA = 1e-6
"""delta when none is given (the synthesizer spends no budget on a record count to derive one)."""
MAX_PUBLIC_ROWS = 200_000
"""Default bound on the public rows collected to the driver to fit the mixture."""
ENCODINGS = ("onehot", "ordinal")
COVARIANCE_TYPES = ("full", "tied", "diag", "spherical")
ACCOUNTINGS = ("classic", "tight_zcdp")
_PERSON = "__person"
_ARCH = "__archetype"
_CAT = "__category"


@dataclass(frozen=True)
class ArchetypeParams:
    """Parameters of the archetype synthesizer (seed 004; issue 8). Column roles default so that it runs on any
    table pair: every attribute column clusters and is sampled from its archetype, no count column."""

    privacy_unit: str | None = None
    """The person-id column (the privacy unit; not an attribute); None: every row is its own person."""
    n_archetypes: int = 10
    """k, the components of the Gaussian mixture (archetypes), >= 1 (seed 004 uses 10)."""
    cluster_columns: tuple[str, ...] | None = None
    """Columns the mixture clusters rows on; None: the sample columns."""
    sample_columns: tuple[str, ...] | None = None
    """Columns drawn jointly from the public rows of the person's archetype; None: every attribute column that is
    neither the count column nor a fill column."""
    count_column: str | None = None
    """Column of the second histogram (persons per majority value, e.g. seed 004's company_id); none: no second
    histogram, all of rho goes to the archetype histogram."""
    fill: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Fill columns, in order: column -> its conditioning columns (sample, count or earlier fill columns), drawn
    from the public marginal given them, with coarser conditioning when a combination is not in the public data
    (seed 004, Table 1)."""
    archetype_rho_proportion: float = 0.5
    """Share of rho spent on persons per archetype when there is a count column, in (0, 1) (seed 004: 0.1)."""
    encoding: str = "onehot"
    """Encoding of the clustering columns: onehot (over the public domain) or ordinal (standardized)."""
    covariance_type: str = "diag"
    """covariance_type of scikit-learn's GaussianMixture: full, tied, diag or spherical."""
    max_public_rows: int = MAX_PUBLIC_ROWS
    """At most this many public rows are collected to the driver to fit the mixture (>= 1)."""
    epsilon: float = 4.0
    """Total privacy budget epsilon > 0 (the CLI takes it from [aggregate] epsilon)."""
    delta: float | None = None
    """delta in (0, 0.5); None uses DEFAULT_DELTA = 1e-6 (the CLI takes it from [aggregate] delta)."""
    accounting: str = "classic"
    """classic (rho + 2 sqrt(rho ln(1/delta)) = epsilon) or tight_zcdp (OpenDP's exact conversion)."""
    seed: int | None = None
    """Test mode: reproducible, NON-cryptographic noise and tie-break key (not private); also seeds the fit."""

    def __post_init__(self) -> None:
        v.integer("n_archetypes", self.n_archetypes, low=1)
        v.integer("max_public_rows", self.max_public_rows, low=1)
        v.open_unit("archetype_rho_proportion", self.archetype_rho_proportion)
        v.positive("epsilon", self.epsilon)
        if self.delta is not None:
            d = v.open_unit("delta", self.delta)
            if d >= 0.5:
                raise InvalidParameterError(f"delta must be < 0.5, got {self.delta!r}")
        for name, value, allowed in (
            ("encoding", self.encoding, ENCODINGS),
            ("covariance_type", self.covariance_type, COVARIANCE_TYPES),
            ("accounting", str(self.accounting), ACCOUNTINGS),
        ):
            if value not in allowed:
                raise InvalidParameterError(f"{name} must be one of {list(allowed)}, got {value!r}")
        object.__setattr__(self, "accounting", str(self.accounting))
        if self.seed is not None:
            v.integer("seed", self.seed, low=0)
        for name in ("cluster_columns", "sample_columns"):
            cols = getattr(self, name)
            if cols is not None:
                cols = tuple(str(c) for c in cols)
                if not cols:
                    raise InvalidParameterError(f"{name} must name at least one column, got []")
                if len(set(cols)) != len(cols):
                    raise InvalidParameterError(f"{name} must be distinct, got {list(cols)}")
                object.__setattr__(self, name, cols)
        fill: dict[str, tuple[str, ...]] = {}
        if not isinstance(self.fill, Mapping):
            raise InvalidParameterError(f"fill must be a table column -> [columns], got {self.fill!r}")
        for col, cond in dict(self.fill).items():
            if isinstance(cond, str) or not all(isinstance(c, str) for c in cond):
                raise InvalidParameterError(f"fill[{col!r}] must be a list of column names, got {cond!r}")
            cond = tuple(cond)
            if col in cond or len(set(cond)) != len(cond):
                raise InvalidParameterError(
                    f"fill[{col!r}] must list distinct columns other than {col!r}, got {list(cond)}"
                )
            fill[str(col)] = cond
        object.__setattr__(self, "fill", fill)
        # Role conflicts visible in the parameters alone (the rest needs the schema: ArchetypeRoles.resolve).
        roles = [self.count_column] if self.count_column else []
        roles += list(fill)
        if self.privacy_unit is not None and self.privacy_unit in (
            roles + list(self.sample_columns or ()) + list(self.cluster_columns or ())
        ):
            raise InvalidParameterError(
                f"privacy_unit {self.privacy_unit!r} is the person id, not an attribute column"
            )
        if self.count_column is not None and self.count_column in fill:
            raise InvalidParameterError(f"count_column {self.count_column!r} cannot also be a fill column")
        both = [c for c in self.sample_columns or () if c in roles]
        if both:
            raise InvalidParameterError(f"sample_columns {both} are also the count column or fill columns")

    @property
    def test_mode(self) -> bool:
        return self.seed is not None

    @property
    def delta_in_force(self) -> float:
        return float(self.delta) if self.delta is not None else DEFAULT_DELTA


@dataclass(frozen=True)
class ArchetypeRoles:
    """The column roles resolved against a schema: every attribute column has exactly one role."""

    columns: tuple[str, ...]
    """The attribute columns, in the table's order (the privacy unit excluded)."""
    cluster: tuple[str, ...]
    sample: tuple[str, ...]
    count: str | None
    fill: tuple[tuple[str, tuple[str, ...]], ...]

    @classmethod
    def resolve(
        cls, df_columns: list[str] | tuple[str, ...], params: ArchetypeParams, data: DataConfig
    ) -> ArchetypeRoles:
        """Check the roles against the input's columns (a schema fact, no data read).

        Raises:
            SchemaError: a role names a column that is not an attribute column, the privacy unit is missing or
                is an attribute column, a fill column is conditioned on a later fill column, or an attribute
                column has no role.
        """
        available = list(df_columns)
        unit = params.privacy_unit
        if unit is not None and unit not in available:
            raise SchemaError(f"privacy unit column {unit!r} is not in the input; it has {available}")
        columns = data.columns if data.columns is not None else tuple(c for c in available if c != unit)
        missing = [c for c in columns if c not in available]
        if missing:
            raise SchemaError(f"unknown column(s) {missing}; the input has {available}")
        if unit is not None and unit in columns:
            raise SchemaError(f"privacy unit column {unit!r} must not be an attribute column")
        if not columns:
            raise SchemaError("the input has no attribute columns")
        named = list(params.fill) + [c for cond in params.fill.values() for c in cond]
        named += list(params.cluster_columns or ()) + list(params.sample_columns or ())
        named += [params.count_column] if params.count_column else []
        unknown = sorted({c for c in named if c not in columns})
        if unknown:
            raise SchemaError(f"[archetype] names column(s) {unknown} that are not attribute columns")
        taken = set(params.fill) | ({params.count_column} if params.count_column else set())
        sample = params.sample_columns or tuple(c for c in columns if c not in taken)
        without = [c for c in columns if c not in set(sample) | taken]
        if without:
            raise SchemaError(
                f"attribute column(s) {without} have no role: list them in sample_columns, count_column or fill"
            )
        if not sample:
            raise SchemaError("the archetype synthesizer needs at least one sample column")
        known = set(sample) | ({params.count_column} if params.count_column else set())
        for col, cond in params.fill.items():
            later = [c for c in cond if c not in known]
            if later:
                raise SchemaError(
                    f"fill[{col!r}] is conditioned on {later}, which are filled later or not at all; "
                    "list the fill columns in the order they are drawn"
                )
            known.add(col)
        cluster = params.cluster_columns or tuple(sample)
        return cls(
            columns=tuple(columns),
            cluster=tuple(cluster),
            sample=tuple(c for c in columns if c in set(sample)),
            count=params.count_column,
            fill=tuple(params.fill.items()),
        )


def archetype_rho(epsilon: float, delta: float, accounting: str = "classic") -> float:
    """The zCDP budget rho that implies (epsilon, delta)-DP.

    ``classic``: the largest rho with rho + 2 sqrt(rho ln(1/delta)) <= epsilon (Bun & Steinke 2016, Prop. 1.3),
    i.e. :func:`spark_dpsynth.privacy.accounting.rho_from_epsilon_delta` at 2 delta (that function converts at delta/2 because
    the main path's other delta/2 pays its threshold; this synthesizer has no threshold). ``tight_zcdp``: the
    largest rho whose exact conversion by OpenDP gives epsilon at delta
    (:func:`spark_dpsynth.privacy.accounting.rho_tight_from_epsilon_delta` at 2 delta).
    """
    from spark_dpsynth.privacy import accounting as budget

    v.positive("epsilon", epsilon)
    if not 0 < delta < 0.5:
        raise InvalidParameterError(f"delta must be in (0, 0.5), got {delta!r}")
    if accounting == "tight_zcdp":
        return budget.rho_tight_from_epsilon_delta(float(epsilon), 2.0 * delta)
    return budget.rho_from_epsilon_delta(float(epsilon), 2.0 * delta)


# --------------------------------------------------------------------------------------------- the model


@dataclass(frozen=True)
class Profiles:
    """What synthesis takes from the PUBLIC table (pandas, bounded by the public table's distinct values)."""

    persons: Any
    """pandas (arch int, cat int (-1: no count column), rows int, persons int): public persons per cell and
    number of rows."""
    rows: Any
    """pandas (arch, cat, *sample columns, weight): public rows per (cell, combination of sample columns)."""
    fills: tuple[Any, ...]
    """Per fill column: pandas (*conditioning columns, column, weight), public counts."""
    domains: dict[str, tuple[str, ...]]
    """Per attribute column, its public domain (EMPTY included when the public data has empty cells)."""


@dataclass(frozen=True)
class ArchetypeModel:
    """The noisy histograms (DP) and the public profiles (public): everything synthesis needs."""

    roles: ArchetypeRoles
    privacy_unit: str | None
    archetype_counts: np.ndarray
    """float64 (k,): noisy persons per archetype, clamped at 0."""
    categories: tuple[str, ...]
    """The public domain of the count column (EMPTY for empty); () without a count column."""
    category_counts: np.ndarray
    """float64 (|categories|,): noisy persons per majority category, clamped at 0; empty without."""
    profiles: Profiles
    manifest: dict[str, Any]

    @property
    def n_archetypes(self) -> int:
        return int(self.archetype_counts.shape[0])

    def persons_per_cell(self, scale: float = 1.0) -> np.ndarray:
        """int64 (k, C) synthetic persons per (archetype, category); C = 1 without a count column.

        The public archetype x category table of persons (plus 0.01 per cell) is fitted to the noisy margins by
        iterative proportional fitting (the category margin rescaled to the archetype total), then each
        archetype's row is rounded to round(scale * noisy persons) by largest remainders. Post-processing.
        """
        k = self.n_archetypes
        totals = np.rint(np.maximum(self.archetype_counts, 0) * scale).astype(np.int64)
        if not self.categories:
            return totals.reshape(k, 1)
        c = len(self.categories)
        persons = self.profiles.persons
        seed_table = np.full((k, c), 0.01)
        np.add.at(
            seed_table, (persons["arch"].to_numpy(), persons["cat"].to_numpy()), persons["persons"].to_numpy()
        )
        row_margin = totals.astype(np.float64)
        col_margin = np.maximum(self.category_counts, 0).astype(np.float64)
        if col_margin.sum() > 0:
            col_margin = col_margin * row_margin.sum() / col_margin.sum()
        table = seed_table
        for _ in range(100):
            rs = table.sum(axis=1)
            table = table * np.where(rs > 0, row_margin / np.where(rs > 0, rs, 1), 0)[:, None]
            if col_margin.sum() > 0:
                cs = table.sum(axis=0)
                table = table * np.where(cs > 0, col_margin / np.where(cs > 0, cs, 1), 0)[None, :]
        rs = table.sum(axis=1)
        out = np.zeros((k, c), dtype=np.int64)
        for a in range(k):
            quotas = table[a] * (row_margin[a] / rs[a]) if rs[a] > 0 else np.full(c, row_margin[a] / c)
            out[a] = _largest_remainder(quotas, int(totals[a]))
        return out

    def expected_rows_per_person(self) -> np.ndarray:
        """float64 (k, C): mean public rows per person of each cell (archetype mean, then 1, where empty)."""
        k, c = self.n_archetypes, max(1, len(self.categories))
        p = self.profiles.persons
        rows = np.zeros((k, c))
        people = np.zeros((k, c))
        cats = np.maximum(p["cat"].to_numpy(), 0)
        np.add.at(rows, (p["arch"].to_numpy(), cats), (p["rows"] * p["persons"]).to_numpy())
        np.add.at(people, (p["arch"].to_numpy(), cats), p["persons"].to_numpy())
        arch_mean = np.where(people.sum(1) > 0, rows.sum(1) / np.maximum(people.sum(1), 1), 1.0)
        return np.where(people > 0, rows / np.maximum(people, 1), arch_mean[:, None])


def _largest_remainder(quotas: np.ndarray, total: int) -> np.ndarray:
    quotas = np.asarray(quotas, dtype=np.float64)
    base = np.floor(quotas).astype(np.int64)
    missing = int(total - base.sum())
    if missing > 0:
        base[np.argsort(-(quotas - base), kind="stable")[:missing]] += 1
    elif missing < 0:
        order = [i for i in np.argsort(quotas - base, kind="stable") if base[i] > 0]
        base[order[:-missing]] -= 1
    return base


# --------------------------------------------------------------------------------------------- encoding


@dataclass(frozen=True)
class _Encoder:
    """Encodes the clustering columns over their PUBLIC domains (fitted on the public sample only)."""

    columns: tuple[str, ...]
    domains: tuple[tuple[str, ...], ...]
    encoding: str
    mean: np.ndarray
    scale: np.ndarray

    @classmethod
    def fit(cls, pdf, columns: tuple[str, ...], encoding: str) -> _Encoder:  # noqa: ANN001 - pandas
        domains = tuple(tuple(_sort_values(pdf[c].fillna(EMPTY).unique().tolist())) for c in columns)
        enc = cls(columns, domains, encoding, np.zeros(0), np.zeros(0))
        raw = enc._raw(pdf)
        if encoding == "ordinal":
            mean, std = raw.mean(axis=0), raw.std(axis=0)
            return cls(columns, domains, encoding, mean, np.where(std > 0, std, 1.0))
        return cls(columns, domains, encoding, np.zeros(raw.shape[1]), np.ones(raw.shape[1]))

    def _raw(self, pdf) -> np.ndarray:  # noqa: ANN001 - pandas
        import pandas as pd

        n = len(pdf)
        if self.encoding == "ordinal":
            out = np.zeros((n, len(self.columns)))
            for j, (c, dom) in enumerate(zip(self.columns, self.domains, strict=True)):
                codes = pd.Categorical(pdf[c].fillna(EMPTY), categories=list(dom)).codes.astype(np.float64)
                # A value outside the public domain sits at the middle of the scale (the public mean).
                out[:, j] = np.where(codes < 0, (len(dom) - 1) / 2.0, codes)
            return out
        width = sum(len(d) for d in self.domains)
        out = np.zeros((n, width))
        offset = 0
        for c, dom in zip(self.columns, self.domains, strict=True):
            codes = pd.Categorical(pdf[c].fillna(EMPTY), categories=list(dom)).codes.astype(np.int64)
            rows = np.flatnonzero(codes >= 0)  # outside the public domain: all zeros
            out[rows, offset + codes[rows]] = 1.0
            offset += len(dom)
        return out

    def transform(self, pdf) -> np.ndarray:  # noqa: ANN001 - pandas
        return (self._raw(pdf) - self.mean) / self.scale


def _sort_values(values: list[str]) -> list[str]:
    """Numeric order when every (non-empty) value parses as a number, else string order; EMPTY last."""
    plain = [x for x in values if x != EMPTY]
    try:
        ordered = sorted(plain, key=float)
    except ValueError:
        ordered = sorted(plain)
    return ordered + ([EMPTY] if EMPTY in values else [])


def _fit_mixture(x: np.ndarray, params: ArchetypeParams, random_state: int):  # noqa: ANN202 - GaussianMixture
    """Fit scikit-learn's GaussianMixture on the encoded PUBLIC sample (the only place a mixture is fitted)."""
    from sklearn.mixture import GaussianMixture

    gmm = GaussianMixture(
        n_components=params.n_archetypes,
        covariance_type=params.covariance_type,
        reg_covar=1e-3,
        max_iter=200,
        random_state=random_state,
    )
    return gmm.fit(x)


# --------------------------------------------------------------------------------------------- Spark stages


def _labelled(prepared, roles: ArchetypeRoles, encoder: _Encoder, gmm, keep: tuple[str, ...] = ()):  # noqa: ANN001, ANN202
    """(person, archetype[, category], *keep): every row's archetype by the fitted model, vectorized per batch.

    ``prepared`` holds the prepared attribute columns plus ``__person`` (a string). The model and the encoder
    travel in the task closure (public objects); ``gmm.predict`` runs on a whole batch at once. The category is
    the count column with EMPTY for empty.
    """
    from pyspark.sql import functions as F

    count = roles.count
    needed = list(dict.fromkeys([*roles.cluster, *([count] if count else []), *keep]))
    cluster = list(roles.cluster)

    def task(frames: Iterator[Any]) -> Iterator[Any]:
        import pandas as pd

        for pdf in frames:
            if len(pdf) == 0:
                continue
            labels = gmm.predict(encoder.transform(pdf[cluster])).astype(np.int32)
            out = {_PERSON: pdf[_PERSON], _ARCH: labels}
            if count is not None:
                out[_CAT] = pdf[count].fillna(EMPTY)
            for c in keep:
                out[c] = pdf[c]
            yield pd.DataFrame(out)

    schema = f"{_PERSON} string, {_ARCH} int" + (f", {_CAT} string" if count else "")
    schema += "".join(f", `{c}` string" for c in keep)
    return prepared.select(F.col(_PERSON), *[F.col(f"`{c}`") for c in needed]).mapInPandas(task, schema)


def _majority(labelled, value: str, key: int, per_person: bool):  # noqa: ANN001, ANN202
    """One row per person: the value most of their rows have, ties broken by a keyed hash (key, person, value).

    Without a privacy unit every row is its own person and keeps its value (no shuffle).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if not per_person:
        return labelled.select(_PERSON, value)
    counts = labelled.groupBy(_PERSON, value).count()
    order = Window.partitionBy(_PERSON).orderBy(
        F.desc("count"), F.xxhash64(F.lit(key), F.col(_PERSON), F.col(value))
    )
    return (
        counts.withColumn("__r", F.row_number().over(order)).where(F.col("__r") == 1).select(_PERSON, value)
    )


def _with_person(df, data: DataConfig, unit: str | None):  # noqa: ANN001, ANN202
    """The prepared attribute columns (:func:`spark_dpsynth.data.prepare.prepare`) plus ``__person``.

    ``__person`` is the privacy unit as a string, its raw value (no empty values, no bins: every distinct id,
    null included, is one person); without a privacy unit a constant (every row is its own person and the
    column is not used).
    """
    from pyspark.sql import functions as F

    from spark_dpsynth.data.prepare import select_attributes

    person = F.coalesce(F.col(f"`{unit}`").cast("string"), F.lit(EMPTY)) if unit else F.lit("")
    prepared = select_attributes(df, data, ((_PERSON, person),))
    return prepared.select(*[F.col(f"`{c}`") for c in data.columns or ()], _PERSON)


def true_histograms(
    labelled,  # noqa: ANN001 - DataFrame (person, archetype, category)
    n_archetypes: int,
    categories: tuple[str, ...],
    key: int,
    per_person: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """The two sensitivity-1 histograms, exact (never written): persons per majority archetype, persons per
    majority category over the public domain ``categories`` (values outside it are not counted).

    Returns:
        (int64 (n_archetypes,), int64 (len(categories),)); the second is empty without categories.

    Privacy:
        Each person is counted once in each histogram (its majority bin): adding or removing one person with any
        number of rows changes each histogram in one bin by 1 (L1 and L2 sensitivity 1).
    """
    arch = np.zeros(n_archetypes, dtype=np.int64)
    # Bounded by k rows.
    for row in _majority(labelled, _ARCH, key, per_person).groupBy(_ARCH).count().collect():
        arch[int(row[_ARCH])] = int(row["count"])
    cat = np.zeros(len(categories), dtype=np.int64)
    if categories:
        inside = _in_domain(labelled, categories)
        # Bounded by the public domain of the count column.
        for row in _majority(inside, "__code", key, per_person).groupBy("__code").count().collect():
            cat[int(row["__code"])] = int(row["count"])
    return arch, cat


def _in_domain(labelled, categories: tuple[str, ...]):  # noqa: ANN001, ANN202
    """(person, __code): the rows whose category is in the public domain, with its index there."""
    from pyspark.sql import functions as F

    spark = labelled.sparkSession
    domain = spark.createDataFrame([(c, i) for i, c in enumerate(categories)], f"{_CAT} string, __code int")
    return labelled.join(F.broadcast(domain), on=_CAT, how="inner").select(_PERSON, "__code")


def _public_sample(public, max_rows: int, seed: int):  # noqa: ANN001, ANN202 - DataFrame -> pandas
    """At most ``max_rows`` PUBLIC rows on the driver: all of them, or those with the smallest seeded hash."""
    from pyspark.sql import functions as F

    order = F.xxhash64(*[F.col(f"`{c}`") for c in public.columns], F.lit(seed))
    # Bounded: at most max_rows public rows (default 200,000) reach the driver.
    return public.orderBy(order).limit(max_rows).toPandas()


def _public_domains(public, columns: tuple[str, ...]) -> dict[str, tuple[str, ...]]:  # noqa: ANN001
    """Every attribute column's PUBLIC domain (distinct values, EMPTY for empty), from one Spark job."""
    from pyspark.sql import functions as F

    cells = F.explode(
        F.array(
            *[
                F.struct(F.lit(j).alias("j"), F.coalesce(F.col(f"`{c}`"), F.lit(EMPTY)).alias("v"))
                for j, c in enumerate(columns)
            ]
        )
    )
    out: dict[int, list[str]] = {j: [] for j in range(len(columns))}
    # Bounded by the sum of the public domain sizes.
    for row in public.select(cells.alias("p")).select("p.j", "p.v").distinct().collect():
        out[int(row["j"])].append(row["v"])
    return {c: tuple(_sort_values(out[j])) for j, c in enumerate(columns)}


def _public_profiles(
    labelled,  # noqa: ANN001 - DataFrame (person, archetype[, category], *attributes) of the PUBLIC rows
    roles: ArchetypeRoles,
    categories: tuple[str, ...],
    domains: dict[str, tuple[str, ...]],
    per_person: bool,
) -> Profiles:
    """Aggregate the PUBLIC table into the synthesis profiles (distributed; the aggregates are collected).

    Public persons get their archetype and category as private ones do (majority, any tie-break key).
    """
    from pyspark.sql import functions as F

    def q(c: str):  # noqa: ANN202 - Column
        return F.col(f"`{c}`")

    if per_person:
        person = _majority(labelled, _ARCH, 0, per_person).withColumnRenamed(_ARCH, "arch")
        if categories:
            cats = _majority(_in_domain(labelled, categories), "__code", 0, per_person)
            person = person.join(cats, on=_PERSON, how="left")
            person = person.select(_PERSON, "arch", F.coalesce("__code", F.lit(-1)).alias("cat"))
        else:
            person = person.select(_PERSON, "arch", F.lit(-1).alias("cat"))
        rows_per = labelled.groupBy(_PERSON).agg(F.count(F.lit(1)).alias("rows"))
        person = person.join(rows_per, on=_PERSON, how="inner")
        rows_df = labelled.drop(_ARCH).join(person.select(_PERSON, "arch", "cat"), on=_PERSON, how="inner")
    else:
        rows_df = labelled.withColumnRenamed(_ARCH, "arch")
        if categories:
            code = F.coalesce(
                F.element_at(
                    F.create_map(*[x for i, c in enumerate(categories) for x in (F.lit(c), F.lit(i))]),
                    F.col(_CAT),
                ),
                F.lit(-1),
            )
            rows_df = rows_df.withColumn("cat", code)
        else:
            rows_df = rows_df.withColumn("cat", F.lit(-1))
        person = rows_df.select("arch", "cat", F.lit(1).alias("rows"))
    # Bounded by k x |categories| x the number of rows of the longest public person.
    persons = person.groupBy("arch", "cat", "rows").agg(F.count(F.lit(1)).alias("persons")).toPandas()
    sample = [F.coalesce(q(c), F.lit(EMPTY)).alias(c) for c in roles.sample]
    # Bounded by the distinct (cell, sample-column combination)s of the public table (at most its rows).
    rows = (
        rows_df.select("arch", "cat", *sample)
        .groupBy("arch", "cat", *[q(c) for c in roles.sample])
        .agg(F.count(F.lit(1)).alias("weight"))
        .toPandas()
    )
    fills = []
    for col, cond in roles.fill:
        names = (*cond, col)
        # Bounded by the distinct combinations of (conditioning columns, column) in the public table.
        fills.append(
            rows_df.select(*[F.coalesce(q(c), F.lit(EMPTY)).alias(c) for c in names])
            .groupBy(*[q(c) for c in names])
            .agg(F.count(F.lit(1)).alias("weight"))
            .toPandas()
        )
    return Profiles(persons=persons, rows=rows, fills=tuple(fills), domains=domains)


def fit_archetype(
    private,  # noqa: ANN001 - pyspark.sql.DataFrame
    public,  # noqa: ANN001 - pyspark.sql.DataFrame
    params: ArchetypeParams | None = None,
    data_config: DataConfig | None = None,
    *,
    noise: NoiseSource | None = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[ArchetypeModel, Release]:
    """Fit archetypes on the public table and release the two noisy person histograms of the private one.

    Args:
        private: the sensitive table; a person (``params.privacy_unit``) may have many rows.
        public: a public table of the same schema (same attribute columns and privacy unit column).
        params: column roles, k, budget (epsilon, delta, accounting), encoding, seed.
        data_config: attribute columns, empty values and public bins, applied to both tables alike.
        noise: the noise source (default: production, or test mode when ``params.seed`` is set).
        progress: optional callback, one message per stage.

    Returns:
        (the model for :func:`sample_archetype`, a :class:`Release` whose manifest states the privacy unit and
        the budget; it holds no marginals: the archetype histograms are in the model).

    Raises:
        SchemaError: a column of the roles, the privacy unit or an attribute column is missing in either table
            (checked on the schemas, before any data is read).
        InvalidParameterError: the public sample has fewer rows than archetypes.

    Privacy:
        rho-zCDP, hence (epsilon, delta)-DP, with a person as the unit (see the module docstring): two
        histograms of L2 sensitivity 1 with exact discrete Gaussian noise (OpenDP, cryptographic source).
        The mixture is fitted on the public table only.
    """
    from pyspark.sql import functions as F

    params = params if params is not None else ArchetypeParams()
    data = data_config if data_config is not None else DataConfig()
    unit = params.privacy_unit
    roles = ArchetypeRoles.resolve(private.columns, params, data)
    public_roles = ArchetypeRoles.resolve(public.columns, params, data.with_columns(roles.columns))
    assert public_roles.columns == roles.columns
    data = data.with_columns(roles.columns)
    noise = noise if noise is not None else noise_source_for(params.seed)
    delta = params.delta_in_force
    rho = archetype_rho(params.epsilon, delta, params.accounting)
    from spark_dpsynth.privacy.accounting import opendp_epsilon_of_rho

    started = time.perf_counter()
    per_person = unit is not None
    if params.seed is None:
        key = secrets.randbits(63)
        fit_state = secrets.randbits(31)
    else:
        from spark_dpsynth.privacy._seeded import derive_key

        key = derive_key(params.seed) >> 1
        fit_state = params.seed % (2**31)

    # 1. Public: domains, the bounded sample, the mixture.
    _stage(progress, "archetype: public domains")
    pub = _with_person(public, data, unit)
    domains = _public_domains(pub, roles.columns)
    categories = domains[roles.count] if roles.count else ()
    _stage(
        progress,
        f"archetype: fitting {params.n_archetypes} archetypes on <= {params.max_public_rows} public rows",
    )
    sample = _public_sample(
        pub.select(*[F.col(f"`{c}`") for c in roles.cluster]), params.max_public_rows, fit_state
    )
    if len(sample) < params.n_archetypes:
        raise InvalidParameterError(
            f"n_archetypes must be <= the public rows used for the fit ({len(sample)}), got {params.n_archetypes}"
        )
    encoder = _Encoder.fit(sample, roles.cluster, params.encoding)
    gmm = _fit_mixture(encoder.transform(sample), params, fit_state)
    fit_rows = len(sample)
    del sample

    # 2. Public profiles (the same assignment as the private rows get).
    _stage(progress, "archetype: public profiles")
    pub_labelled = _labelled(pub, roles, encoder, gmm, keep=roles.columns).cache()
    profiles = _public_profiles(pub_labelled, roles, categories, domains, per_person)
    pub_labelled.unpersist()

    # 3. Private: assignment, majority per person, the two histograms, noise.
    _stage(progress, "archetype: private person histograms")
    priv = _with_person(private, data, unit)
    labelled = _labelled(priv, roles, encoder, gmm)
    arch_true, cat_true = true_histograms(labelled, params.n_archetypes, categories, key, per_person)
    rho_a = rho * (params.archetype_rho_proportion if categories else 1.0)
    rho_c = rho - rho_a
    sigma_a = 1.0 / math.sqrt(2.0 * rho_a)
    sigma_c = 1.0 / math.sqrt(2.0 * rho_c) if categories else None
    arch_noisy = np.maximum(arch_true + noise.discrete_gaussian(sigma_a, arch_true.shape[0]), 0).astype(
        np.float64
    )
    cat_noisy = (
        np.maximum(cat_true + noise.discrete_gaussian(sigma_c, cat_true.shape[0]), 0).astype(np.float64)
        if sigma_c is not None
        else np.zeros(0)
    )
    del arch_true, cat_true, key

    manifest: dict[str, Any] = {
        "format_version": 1,
        "synthesizer": "archetype",
        "test_mode": bool(noise.test_mode),
        "noise_sampler": noise.name,
        "columns": list(roles.columns),
        "privacy_unit": "person" if unit is not None else "record",
        "privacy_unit_column": unit,
        "privacy_unit_note": (
            f"user-level: neighbouring tables differ by all rows of one {unit!r}"
            if unit
            else "record-level: no privacy unit column, every row is its own person"
        ),
        "reporting_length": 0,
        "epsilon": float(params.epsilon),
        "delta": delta,
        "rho": rho,
        "accounting": params.accounting,
        "epsilon_opendp_exact": opendp_epsilon_of_rho(rho, delta),
        "rho_archetypes": rho_a,
        "rho_count_column": rho_c,
        "mechanism": "exact discrete Gaussian on every bin of two sensitivity-1 person histograms, clamped at 0",
        "sensitivities": {},
        "histograms": {
            "archetypes": {"bins": params.n_archetypes, "l2_sensitivity": 1, "rho": rho_a, "sigma": sigma_a},
            **(
                {roles.count: {"bins": len(categories), "l2_sensitivity": 1, "rho": rho_c, "sigma": sigma_c}}
                if roles.count
                else {}
            ),
        },
        "n_archetypes": params.n_archetypes,
        "roles": {
            "cluster_columns": list(roles.cluster),
            "sample_columns": list(roles.sample),
            "count_column": roles.count,
            "fill": {c: list(cond) for c, cond in roles.fill},
        },
        "mixture": {
            "library": "scikit-learn GaussianMixture",
            "fitted_on": "public table only",
            "public_rows_used": int(fit_rows),
            "max_public_rows": params.max_public_rows,
            "encoding": params.encoding,
            "covariance_type": params.covariance_type,
        },
        "parameters": {
            "epsilon": float(params.epsilon),
            "delta": params.delta,
            "accounting": params.accounting,
            "archetype_rho_proportion": params.archetype_rho_proportion,
            "seed": params.seed,
        },
    }
    model = ArchetypeModel(
        roles=roles,
        privacy_unit=unit,
        archetype_counts=arch_noisy,
        categories=categories,
        category_counts=cat_noisy,
        profiles=profiles,
        manifest=manifest,
    )
    persons = model.persons_per_cell()
    manifest["protected_number_of_persons"] = int(persons.sum())
    manifest["protected_number_of_records"] = max(
        1, int(round(float((persons * model.expected_rows_per_person()).sum())))
    )
    manifest["noisy_persons_per_archetype"] = [int(x) for x in np.rint(arch_noisy)]
    if categories:
        manifest["noisy_persons_per_category"] = {
            (None if c == EMPTY else c): int(x) for c, x in zip(categories, np.rint(cat_noisy), strict=True)
        }
    release = Release(
        columns=roles.columns, domains=tuple(() for _ in roles.columns), marginals={}, manifest=manifest
    )
    _stage(progress, f"archetype: released in {time.perf_counter() - started:.1f} s")
    return model, release


# --------------------------------------------------------------------------------------------- synthesis


def _distribution(
    table, cols: tuple[str, ...], target: str
) -> dict[tuple[str, ...], tuple[np.ndarray, np.ndarray]]:  # noqa: ANN001
    """key (values of ``cols``) -> (values of ``target``, probabilities), from a public weight table."""
    grouped = table.groupby(list(cols) + [target], sort=True, dropna=False)["weight"].sum().reset_index()
    out = {}
    if cols:
        for key, part in grouped.groupby(list(cols), sort=False, dropna=False):
            key = key if isinstance(key, tuple) else (key,)
            w = part["weight"].to_numpy(dtype=np.float64)
            out[tuple(key)] = (part[target].to_numpy(dtype=object), w / w.sum())
    else:
        w = grouped["weight"].to_numpy(dtype=np.float64)
        out[()] = (grouped[target].to_numpy(dtype=object), w / w.sum())
    return out


def _sampling_plan(model: ArchetypeModel) -> dict[str, Any]:
    """Release- and public-sized lookup tables for the tasks (built once on the driver)."""
    prof = model.profiles
    k = model.n_archetypes
    c = max(1, len(model.categories))
    # Rows per person: per cell, then per archetype, then overall.
    p = prof.persons
    rows_by: dict[tuple[int | None, int | None], tuple[np.ndarray, np.ndarray]] = {}
    for (a, cat), part in p.groupby(["arch", "cat"]):
        rows_by[(int(a), int(cat))] = (
            part["rows"].to_numpy(),
            part["persons"].to_numpy() / part["persons"].sum(),
        )
    for a, part in p.groupby("arch"):
        g = part.groupby("rows")["persons"].sum()
        rows_by[(int(a), None)] = (g.index.to_numpy(), g.to_numpy() / g.sum())
    g = p.groupby("rows")["persons"].sum()
    rows_by[(None, None)] = (g.index.to_numpy(), g.to_numpy() / g.sum())
    # Sample-column combinations: per cell, per archetype, overall (row indices into one combined table).
    r = prof.rows
    combos: dict[Any, tuple[np.ndarray, np.ndarray]] = {}
    idx = np.arange(len(r))
    for (a, cat), part in r.groupby(["arch", "cat"]):
        w = part["weight"].to_numpy(dtype=np.float64)
        combos[(int(a), int(cat))] = (idx[part.index.to_numpy()], w / w.sum())
    for a, part in r.groupby("arch"):
        w = part["weight"].to_numpy(dtype=np.float64)
        combos[(int(a), None)] = (idx[part.index.to_numpy()], w / w.sum())
    w = r["weight"].to_numpy(dtype=np.float64)
    combos[(None, None)] = (idx, w / w.sum())
    values = {col: r[col].to_numpy(dtype=object) for col in model.roles.sample}
    # Fill columns: one distribution per conditioning prefix (the fallback chain).
    fills = []
    for (col, cond), table in zip(model.roles.fill, prof.fills, strict=True):
        levels = [_distribution(table, cond[:m], col) for m in range(len(cond), -1, -1)]
        fills.append((col, cond, levels))
    return {"k": k, "c": c, "rows_by": rows_by, "combos": combos, "values": values, "fills": fills}


def _pick(table: dict, keys: list) -> tuple[np.ndarray, np.ndarray]:  # noqa: ANN001
    for key in keys:
        if key in table:
            return table[key]
    raise ReleaseError("the public profile is empty")


def _fallback(levels: list[dict], key: tuple) -> tuple[np.ndarray, np.ndarray]:  # noqa: ANN001
    """The distribution of the longest conditioning prefix of ``key`` the public data has (seed 004's fallback
    to coarser conditioning); ``levels[i]`` is keyed by prefixes of length len(key) - i."""
    for i, table in enumerate(levels):
        prefix = key[: len(key) - i]
        if prefix in table:
            return table[prefix]
    raise ReleaseError("the public profile is empty")


def sample_archetype(
    model: ArchetypeModel,
    spark,  # noqa: ANN001 - SparkSession
    *,
    target_number_of_records: int | None = None,
    partitions: int | None = None,
    seed: int | None = None,
):  # noqa: ANN201 - DataFrame
    """Synthesize persons and their rows from the model, distributed over partitions; post-processing only.

    Args:
        model: from :func:`fit_archetype` or :func:`load_model`.
        spark: the session.
        target_number_of_records: scale the numbers of persons so that about this many rows come out; None:
            as many persons as the noisy archetype histogram says.
        partitions: P; default the session's parallelism.
        seed: utility randomness; None draws one from ``secrets``.

    Returns:
        DataFrame: the privacy unit column (synthetic person ids ``"s<partition>-<n>"``, when the model has a
        privacy unit) followed by ``model.roles.columns``, nullable strings (null = empty).
    """
    import pyarrow as pa

    from spark_dpsynth.mechanisms.marginals import parallelism
    from spark_dpsynth.synthesizers.marginals import exact_split

    p = int(partitions) if partitions is not None else parallelism(spark)
    seed = int(seed) if seed is not None else secrets.randbits(63)
    scale = 1.0
    if target_number_of_records is not None:
        expected = float((model.persons_per_cell() * model.expected_rows_per_person()).sum())
        scale = target_number_of_records / expected if expected > 0 else 1.0
    cells = model.persons_per_cell(scale)  # (k, C)
    k, c = cells.shape
    split = exact_split(cells.ravel(), p, np.random.default_rng(np.random.SeedSequence([seed, 0x617263])))
    plan = _sampling_plan(model)
    roles = model.roles
    columns = roles.columns
    unit = model.privacy_unit
    categories = np.array(model.categories if model.categories else (EMPTY,), dtype=object)
    has_cat = bool(model.categories)
    domains = {col: set(model.profiles.domains[col]) for col in columns}

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pandas as pd

        for batch in batches:
            for part in batch.column(0).to_pylist():
                rng = np.random.default_rng(np.random.SeedSequence([seed, int(part), 0x73796E]))
                per_cell = split[part]  # (k * C,)
                cell_of_person = np.repeat(np.arange(k * c), per_cell)
                n_persons = cell_of_person.shape[0]
                arch_p, cat_p = np.divmod(cell_of_person, c)
                rows_p = np.zeros(n_persons, dtype=np.int64)
                for cell in np.flatnonzero(per_cell):
                    a, cc = divmod(int(cell), c)
                    sel = cell_of_person == cell
                    cat_key = cc if has_cat else -1
                    vals, probs = _pick(plan["rows_by"], [(a, cat_key), (a, None), (None, None)])
                    rows_p[sel] = rng.choice(vals, size=int(sel.sum()), p=probs)
                person_of_row = np.repeat(np.arange(n_persons), rows_p)
                arch_r, cat_r = arch_p[person_of_row], cat_p[person_of_row]
                n = person_of_row.shape[0]
                frame = {}
                combo = np.zeros(n, dtype=np.int64)
                cell_r = arch_r * c + cat_r
                for cell in np.unique(cell_r):
                    a, cc = divmod(int(cell), c)
                    sel = np.flatnonzero(cell_r == cell)
                    cat_key = cc if has_cat else -1
                    idx, probs = _pick(plan["combos"], [(a, cat_key), (a, None), (None, None)])
                    combo[sel] = idx[rng.choice(idx.shape[0], size=sel.shape[0], p=probs)]
                for col in roles.sample:
                    frame[col] = plan["values"][col][combo]
                if roles.count is not None:
                    frame[roles.count] = categories[cat_r]
                df = pd.DataFrame(frame)
                for col, cond, levels in plan["fills"]:
                    out = np.empty(n, dtype=object)
                    if n:
                        groups = (
                            df.groupby(list(cond), sort=False, dropna=False).indices
                            if cond
                            else {(): np.arange(n)}
                        )
                        for key, sel in groups.items():
                            key = key if isinstance(key, tuple) else (key,)
                            vals, probs = _fallback(levels, key)
                            out[sel] = vals[rng.choice(vals.shape[0], size=len(sel), p=probs)]
                    df[col] = out
                for col in columns:
                    if n and not pd.Series(df[col]).isin(domains[col]).all():
                        raise ReleaseError(f"a synthetic value of {col!r} is outside its public domain")
                arrays = [
                    pa.array(
                        [None if x == EMPTY else x for x in df[col].tolist()] if n else [], type=pa.string()
                    )
                    for col in columns
                ]
                names = list(columns)
                if unit is not None:
                    ids = [f"s{part}-{i}" for i in person_of_row.tolist()]
                    arrays.insert(0, pa.array(ids, type=pa.string()))
                    names.insert(0, unit)
                yield pa.RecordBatch.from_arrays(arrays, names=names)

    schema = (f"`{unit}` string, " if unit else "") + ", ".join(f"`{col}` string" for col in columns)
    return spark.range(p, numPartitions=p).mapInArrow(task, schema)


# --------------------------------------------------------------------------------------------- persistence


def save_model(model: ArchetypeModel, release_dir: str) -> str:
    """Write the noisy histograms (DP) and the public profiles (public) next to a saved release."""
    path = release_dir.removeprefix("file:")
    doc = {
        "columns": list(model.roles.columns),
        "privacy_unit": model.privacy_unit,
        "roles": {
            "cluster": list(model.roles.cluster),
            "sample": list(model.roles.sample),
            "count": model.roles.count,
            "fill": [[c, list(cond)] for c, cond in model.roles.fill],
        },
        "archetype_counts": model.archetype_counts.tolist(),
        "categories": [None if x == EMPTY else x for x in model.categories],
        "category_counts": model.category_counts.tolist(),
        "domains": {c: [None if x == EMPTY else x for x in d] for c, d in model.profiles.domains.items()},
    }
    with open(os.path.join(path, MODEL_FILE), "w", encoding="utf-8") as f:
        json.dump(doc, f)
    public = os.path.join(path, PUBLIC_DIR)
    os.makedirs(public, exist_ok=True)
    model.profiles.persons.to_parquet(os.path.join(public, "persons.parquet"), index=False)
    model.profiles.rows.to_parquet(os.path.join(public, "rows.parquet"), index=False)
    for i, table in enumerate(model.profiles.fills):
        table.to_parquet(os.path.join(public, f"fill_{i}.parquet"), index=False)
    return os.path.join(path, MODEL_FILE)


def load_model(release: Release, release_dir: str) -> ArchetypeModel:
    """The model saved by :func:`save_model` beside ``release``.

    Raises:
        ReleaseError: the release is not an archetype one or its model files are missing.
    """
    import pandas as pd

    path = release_dir.removeprefix("file:")
    model_path = os.path.join(path, MODEL_FILE)
    if release.manifest.get("synthesizer") != "archetype" or not os.path.isfile(model_path):
        raise ReleaseError(f"no archetype model at {model_path}")
    with open(model_path, encoding="utf-8") as f:
        doc = json.load(f)
    r = doc["roles"]
    roles = ArchetypeRoles(
        columns=tuple(doc["columns"]),
        cluster=tuple(r["cluster"]),
        sample=tuple(r["sample"]),
        count=r["count"],
        fill=tuple((c, tuple(cond)) for c, cond in r["fill"]),
    )
    public = os.path.join(path, PUBLIC_DIR)
    profiles = Profiles(
        persons=pd.read_parquet(os.path.join(public, "persons.parquet")),
        rows=pd.read_parquet(os.path.join(public, "rows.parquet")),
        fills=tuple(
            pd.read_parquet(os.path.join(public, f"fill_{i}.parquet")) for i in range(len(roles.fill))
        ),
        domains={c: tuple(EMPTY if x is None else x for x in d) for c, d in doc["domains"].items()},
    )
    return ArchetypeModel(
        roles=roles,
        privacy_unit=doc["privacy_unit"],
        archetype_counts=np.asarray(doc["archetype_counts"], dtype=np.float64),
        categories=tuple(EMPTY if x is None else x for x in doc["categories"]),
        category_counts=np.asarray(doc["category_counts"], dtype=np.float64),
        profiles=profiles,
        manifest=dict(release.manifest),
    )


def _stage(progress: Callable[[str], None] | None, message: str) -> None:
    log.info(message)
    if progress is not None:
        progress(message)
