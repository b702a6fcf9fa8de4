"""The archetype mechanism: user-level DP person histograms over archetypes learned from a public table.

The method follows the "TaxiTrip - Synthesizer" entry of the NIST Differential Privacy Temporal Map Challenge,
for a table in which one person (e.g. a taxi) contributes many rows:

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

The public profiles (rows per person, combinations of the sample columns, fill-column marginals) are aggregated
from the public table alike. The synthesizer that reads the release and the profiles (post-processing) is
:mod:`spark_dpsynth.synthesizers.archetype`.

Privacy (user-level, zCDP; Bun & Steinke 2016, Propositions 1.3 and 1.6; Canonne, Kamath, Steinke 2020): the
privacy unit is a person (``privacy_unit`` column; without one every row is its own person). Adding or removing one person, with any
number of rows, changes each histogram in exactly one bin by 1: L2 sensitivity 1, because each person is
counted once, in its majority bin, and the mixture and the domains depend on the public data only. Discrete
Gaussian noise of scale sigma on a sensitivity-1 histogram is 1/(2 sigma^2)-zCDP, so with
sigma_a = 1/sqrt(2 rho_a), sigma_c = 1/sqrt(2 rho_c) and rho_a + rho_c = rho the release is rho-zCDP, which
implies (epsilon, delta)-DP for the largest rho whose exact conversion (OpenDP, CKS 2020 Prop. 12) gives epsilon
(``tight_zcdp``, the default), or with epsilon = rho + 2 sqrt(rho ln(1/delta)) (``classic``). Unlike the
challenge entry (float Gaussian, epsilon < 1 only) this holds for any epsilon. Values of the count column
outside the public domain are not counted (sensitivity unchanged). Nothing else about the private data is
released: no true count, no number of persons or rows (the manifest's numbers of persons and records are sums
of noisy counts). See docs/design.md sections 4.6 and 6.4.
"""

from __future__ import annotations

import logging
import math
import secrets
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spark_dpsynth import _validate as v
from spark_dpsynth._progress import Progress, report
from spark_dpsynth.errors import InvalidParameterError, SchemaError
from spark_dpsynth.mechanisms._discovery import release_accountant
from spark_dpsynth.params import Accounting, DataConfig
from spark_dpsynth.privacy.accounting import Accountant
from spark_dpsynth.privacy.budget import Budget
from spark_dpsynth.privacy.noise import NoiseSource
from spark_dpsynth.registry import Fitted, MechanismContext, synthesizers_for
from spark_dpsynth.release.core import Release
from spark_dpsynth.release.manifest import FORMAT_VERSION
from spark_dpsynth.synthesizers.archetype import EMPTY, ArchetypeModel, ArchetypeRoles, Profiles, model_files

__all__ = [
    "ArchetypeParams",
    "DEFAULT_DELTA",
    "MAX_PUBLIC_ROWS",
    "fit_archetype",
    "resolve_roles",
    "true_histograms",
]

log = logging.getLogger(__name__)

DEFAULT_DELTA = 1e-6
"""delta when none is given (the synthesizer spends no budget on a record count to derive one)."""
MAX_PUBLIC_ROWS = 200_000
"""Default bound on the public rows collected to the driver to fit the mixture."""
ENCODINGS = ("onehot", "ordinal")
COVARIANCE_TYPES = ("full", "tied", "diag", "spherical")
_PERSON = "__person"
_ARCH = "__archetype"
_CAT = "__category"


@dataclass(frozen=True)
class ArchetypeParams:
    """Parameters of the archetype mechanism. Column roles default so that it runs on any table pair: every
    attribute column clusters and is sampled from its archetype, no count column."""

    privacy_unit: str | None = None
    """The person-id column (the privacy unit; not an attribute); None: every row is its own person."""
    n_archetypes: int = 10
    """k, the components of the Gaussian mixture (archetypes), >= 1 (the challenge entry uses 10)."""
    cluster_columns: tuple[str, ...] | None = None
    """Columns the mixture clusters rows on; None: the sample columns."""
    sample_columns: tuple[str, ...] | None = None
    """Columns drawn jointly from the public rows of the person's archetype; None: every attribute column that is
    neither the count column nor a fill column."""
    count_column: str | None = None
    """Column of the second histogram (persons per majority value, e.g. a taxi's company); None: no second
    histogram, all of rho goes to the archetype histogram."""
    fill: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Fill columns, in order: column -> its conditioning columns (sample, count or earlier fill columns), drawn
    from the public marginal given them, with coarser conditioning when a combination is not in the public data
    (the challenge entry's public k-way marginals)."""
    archetype_rho_proportion: float = 0.5
    """Share of rho spent on persons per archetype when there is a count column, in (0, 1) (the challenge
    entry: 0.1)."""
    cluster_encoding: str = "onehot"
    """Encoding of the clustering columns: onehot (over the public domain) or ordinal (standardized); the
    configuration key ``encoding`` of the [archetype] section is its deprecated name."""
    covariance_type: str = "diag"
    """covariance_type of scikit-learn's GaussianMixture: full, tied, diag or spherical."""
    max_public_rows: int = MAX_PUBLIC_ROWS
    """At most this many public rows are collected to the driver to fit the mixture (>= 1)."""

    def __post_init__(self) -> None:
        v.integer("n_archetypes", self.n_archetypes, low=1)
        v.integer("max_public_rows", self.max_public_rows, low=1)
        v.open_unit("archetype_rho_proportion", self.archetype_rho_proportion)
        for name, value, allowed in (
            ("cluster_encoding", self.cluster_encoding, ENCODINGS),
            ("covariance_type", self.covariance_type, COVARIANCE_TYPES),
        ):
            if value not in allowed:
                raise InvalidParameterError(f"{name} must be one of {list(allowed)}, got {value!r}")
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
        # Role conflicts visible in the parameters alone (the rest needs the schema: resolve_roles).
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


def resolve_roles(
    df_columns: list[str] | tuple[str, ...], params: ArchetypeParams, data: DataConfig
) -> ArchetypeRoles:
    """Resolve the column roles of ``params`` against an input's columns (a schema fact, no data read).

    Args:
        df_columns: the input's column names (the private or the public table).
        params: the roles as configured (privacy unit, cluster, sample, count and fill columns).
        data: the attribute columns (None: every column but the privacy unit).

    Returns:
        The roles, every attribute column with exactly one (sample, count or fill); the sample columns default
        to every attribute column that is neither the count column nor a fill column, the cluster columns to
        the sample columns.

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
    return ArchetypeRoles(
        columns=tuple(columns),
        cluster=tuple(cluster),
        sample=tuple(c for c in columns if c in set(sample)),
        count=params.count_column,
        fill=tuple(params.fill.items()),
    )


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
    budget: Budget | None = None,
    noise: NoiseSource | None = None,
    progress: Progress | None = None,
    acct: Accountant | None = None,
) -> tuple[ArchetypeModel, Release]:
    """Fit archetypes on the public table and release the two noisy person histograms of the private one.

    Args:
        private: the sensitive table; a person (``params.privacy_unit``) may have many rows.
        public: a public table of the same schema (same attribute columns and privacy unit column).
        params: column roles, k, the archetypes' share of rho, encoding.
        data_config: attribute columns, empty values and public bins, applied to both tables alike.
        budget: the release's :class:`~spark_dpsynth.privacy.budget.Budget` when no ``acct`` is given (default
            epsilon 4); its delta must be < 0.5, None takes :data:`DEFAULT_DELTA`; its seed is test mode (noise,
            tie-break key and the mixture's fit).
        noise: the noise source of a new accountant (default: production, or test mode with the budget's
            seed); ignored with ``acct``.
        progress: optional callback, one message per stage (no statistic of the private data).
        acct: the run's :class:`~spark_dpsynth.privacy.accounting.Accountant`, through which both histograms are
            drawn (it holds the budget); default a new one for ``budget``.

    Returns:
        (the model, :class:`spark_dpsynth.synthesizers.archetype.ArchetypeModel`, for
        :func:`spark_dpsynth.synthesizers.archetype.sample_archetype`: the noisy persons per archetype, float64
        (k,), and per category, float64 (|categories|,), clamped at 0, with the public profiles; a
        :class:`Release` whose manifest states the privacy unit and the budget; it holds no marginals: the
        archetype histograms are in the model).

    Raises:
        SchemaError: a column of the roles, the privacy unit or an attribute column is missing in either table
            (checked on the schemas, before any data is read).
        InvalidParameterError: the budget's delta is >= 0.5 (before any data is read); the public sample has
            fewer rows than archetypes.

    Privacy:
        rho-zCDP, hence (epsilon, delta)-DP, with a person as the unit (see the module docstring): two
        histograms of L2 sensitivity 1 with exact discrete Gaussian noise (OpenDP, cryptographic source).
        The mixture is fitted on the public table only.
    """
    from pyspark.sql import functions as F

    params = params if params is not None else ArchetypeParams()
    data = data_config if data_config is not None else DataConfig()
    check_data(params, data)
    unit = params.privacy_unit
    roles = resolve_roles(private.columns, params, data)
    public_roles = resolve_roles(public.columns, params, data.with_columns(roles.columns))
    assert public_roles.columns == roles.columns
    data = data.with_columns(roles.columns)
    acct = release_accountant(budget, noise, acct)
    if acct.delta is None:
        acct.declare_delta(DEFAULT_DELTA, "the archetype mechanism's default")
    delta = float(acct.delta)  # type: ignore[arg-type]
    if delta >= 0.5:
        raise InvalidParameterError(f"delta must be < 0.5 for the archetype mechanism, got {delta!r}")
    seed = acct.budget.seed
    from spark_dpsynth.privacy.accounting import rho_of

    rho = rho_of(acct.epsilon, delta, acct.resolve_accounting(Accounting.TIGHT_ZCDP))
    acct.set_rho(rho)  # converted at the whole delta: this mechanism has no threshold
    acct.spend_delta("zcdp_conversion", delta, "rho-zCDP -> (epsilon, delta)-DP")
    from spark_dpsynth.privacy.accounting import opendp_epsilon_of_rho

    started = time.perf_counter()
    per_person = unit is not None
    if seed is None:
        key = secrets.randbits(63)
        fit_state = secrets.randbits(31)
    else:
        from spark_dpsynth.privacy._seeded import derive_key

        key = derive_key(seed) >> 1
        fit_state = seed % (2**31)

    # 1. Public: domains, the bounded sample, the mixture.
    report(progress, log, "archetype: public domains")
    pub = _with_person(public, data, unit)
    domains = _public_domains(pub, roles.columns)
    categories = domains[roles.count] if roles.count else ()
    report(
        progress,
        log,
        f"archetype: fitting {params.n_archetypes} archetypes on <= {params.max_public_rows} public rows",
    )
    sample = _public_sample(
        pub.select(*[F.col(f"`{c}`") for c in roles.cluster]), params.max_public_rows, fit_state
    )
    if len(sample) < params.n_archetypes:
        raise InvalidParameterError(
            f"n_archetypes must be <= the public rows used for the fit ({len(sample)}), got {params.n_archetypes}"
        )
    encoder = _Encoder.fit(sample, roles.cluster, params.cluster_encoding)
    gmm = _fit_mixture(encoder.transform(sample), params, fit_state)
    fit_rows = len(sample)
    del sample

    # 2. Public profiles (the same assignment as the private rows get).
    report(progress, log, "archetype: public profiles")
    pub_labelled = _labelled(pub, roles, encoder, gmm, keep=roles.columns).cache()
    profiles = _public_profiles(pub_labelled, roles, categories, domains, per_person)
    pub_labelled.unpersist()

    # 3. Private: assignment, majority per person, the two histograms, noise.
    report(progress, log, "archetype: private person histograms")
    priv = _with_person(private, data, unit)
    labelled = _labelled(priv, roles, encoder, gmm)
    arch_true, cat_true = true_histograms(labelled, params.n_archetypes, categories, key, per_person)
    rho_a = rho * (params.archetype_rho_proportion if categories else 1.0)
    rho_c = rho - rho_a
    sigma_a = 1.0 / math.sqrt(2.0 * rho_a)
    sigma_c = 1.0 / math.sqrt(2.0 * rho_c) if categories else None
    acct.spend_rho(
        "archetype_histogram",
        rho_a,
        "discrete Gaussian on persons per archetype (L2 sensitivity 1)",
        sigma=sigma_a,
    )
    if categories:
        acct.spend_rho(
            "count_column_histogram",
            rho_c,
            "discrete Gaussian on persons per majority category (L2 sensitivity 1)",
            sigma=sigma_c,
        )
    arch_noisy = np.maximum(acct.gaussian("archetype_histogram", arch_true), 0).astype(np.float64)
    cat_noisy = (
        np.maximum(acct.gaussian("count_column_histogram", cat_true), 0).astype(np.float64)
        if categories
        else np.zeros(0)
    )
    del arch_true, cat_true, key

    manifest: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "mechanism": "archetype",
        "synthesizers": list(synthesizers_for("archetype")),
        "budget": acct.ledger().to_json(),
        "synthesizer": "archetype",
        "test_mode": acct.test_mode,
        "noise_sampler": acct.noise_name,
        "columns": list(roles.columns),
        "privacy_unit": "person" if unit is not None else "record",
        "privacy_unit_column": unit,
        "privacy_unit_note": (
            f"user-level: neighbouring tables differ by all rows of one {unit!r}"
            if unit
            else "record-level: no privacy unit column, every row is its own person"
        ),
        "reporting_length": 0,
        "epsilon": acct.epsilon,
        "delta": delta,
        "rho": rho,
        "accounting": acct.accounting.value,
        "epsilon_opendp_exact": opendp_epsilon_of_rho(rho, delta),
        "rho_archetypes": rho_a,
        "rho_count_column": rho_c,
        "noise": "exact discrete Gaussian on every bin of two sensitivity-1 person histograms, clamped at 0",
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
            "encoding": params.cluster_encoding,
            "covariance_type": params.covariance_type,
        },
        "parameters": {
            **acct.budget.parameters(),
            "archetype_rho_proportion": params.archetype_rho_proportion,
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
    # The input's column types, from the schema and the public bins (no data): the command line gives the
    # synthetic columns back in them (restore_types, docs/design.md section 2.8), a binned one drawn in its bin.
    from spark_dpsynth.profile import column_types, types_manifest

    typed = data.with_columns(tuple(roles.columns))
    types = column_types(private.schema, typed)
    manifest["column_types"] = types_manifest(types, typed.bins, {c: "config" for c in typed.bins})
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
    report(progress, log, f"archetype: released in {time.perf_counter() - started:.1f} s")
    return model, release


def check_data(params: ArchetypeParams, data: DataConfig) -> None:
    """The data configurations this mechanism takes (checked before any data is read).

    Raises:
        InvalidParameterError: multi-value columns (it samples whole rows of single values); identifier
            columns (a person's rows come from one public archetype: keys distinct per row would be invented
            structure; the marginals and workload mechanisms write surrogate keys).
    """
    if data.multi_value:
        raise InvalidParameterError("the archetype synthesizer takes single-value columns: no multi_value")
    if data.identifiers:
        raise InvalidParameterError(
            f"the archetype synthesizer takes no identifier columns, got identifiers {list(data.identifiers)}: "
            "leave them out of [data] columns, or use the pgm or model synthesizer, whose releases write "
            "surrogate keys"
        )


def run(private, params: ArchetypeParams, data: DataConfig, context: MechanismContext) -> Fitted:  # noqa: ANN001 - DataFrame
    """The registry's entry point: :func:`fit_archetype` on the private table and ``context.read_public()``.

    The rows of a person are not merged into one record (the synthesizer keeps a person's rows): the privacy
    unit is ``params.privacy_unit``, and ``data``'s is ignored. The release carries the model (the noisy
    histograms and the public profiles, :func:`spark_dpsynth.synthesizers.archetype.model_files`), which
    :meth:`~spark_dpsynth.release.core.Release.save` writes with it.

    Raises:
        InvalidParameterError: see :func:`check_data`; no public table in ``context``.
    """
    import dataclasses

    check_data(params, data)
    if context.read_public is None:
        raise InvalidParameterError("the archetype mechanism needs a public table")
    public = context.read_public()
    model, release = fit_archetype(
        private,
        public,
        params,
        dataclasses.replace(data, privacy_unit=None),
        progress=context.progress,
        acct=context.accountant,
    )
    return Fitted(release=dataclasses.replace(release, model_files=model_files(model)))
