"""The archetype synthesizer: synthetic persons and their rows from the archetype histograms and public profiles.

Reads only what :func:`spark_dpsynth.mechanisms.archetype.fit_archetype` released (two noisy person histograms)
and the profiles it derived from the PUBLIC table, so its output costs no privacy budget beyond that release's
(post-processing; docs/design.md section 4.6). The method follows the "TaxiTrip - Synthesizer" entry of the NIST
Differential Privacy Temporal Map Challenge (public archetypes, noisy person counts, public k-way marginals).

Synthesis, distributed over partitions (:func:`spark_dpsynth.synthesizers._kernels.sample_partitions`):

1. synthetic persons per (archetype, category) cell from the noisy histograms: iterative proportional fitting
   (:func:`spark_dpsynth.synthesizers._kernels.ipf`) of the public archetype x category table of persons to the
   two noisy margins, then exact integer rounding per archetype
   (:func:`spark_dpsynth.synthesizers._kernels.largest_remainder`); the persons of each cell are split exactly
   over the partitions (:func:`spark_dpsynth.synthesizers._kernels.exact_split`);
2. in each partition: rows per person drawn from the public rows-per-person profile of their cell; the *sample
   columns* drawn jointly from the public rows of their cell (falling back to the archetype, then to all public
   rows); the count column set to the person's category; every *fill column*, in the configured order, drawn
   from the public marginal conditioned on its configured columns, dropping conditioning columns from the end
   while the public data has no row with that combination. Every value comes from the public data and is
   checked against the public domain;
3. the partition's rows come out in a seeded random order (no shuffle stage); a person's rows share its
   synthetic id ``"s<partition>-<n>"``.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from spark_dpsynth.data.session import default_parallelism
from spark_dpsynth.errors import ReleaseError
from spark_dpsynth.params import SynthesisParams
from spark_dpsynth.release.core import ModelFiles, Release
from spark_dpsynth.synthesizers._kernels import exact_split, ipf, largest_remainder, sample_partitions

__all__ = [
    "EMPTY",
    "ArchetypeModel",
    "ArchetypeRoles",
    "Profiles",
    "model_files",
    "model_of",
    "sample_archetype",
]

EMPTY = "\x00"
"""Internal marker of the empty value (null), a category of every domain."""

_SPLIT_STREAM = 1
"""Spawn key of the generator of the partitions' shares of the persons of each cell."""
_DRAW_STREAM = 2
"""Spawn key of a partition's generator of its persons' rows and values."""


@dataclass(frozen=True)
class ArchetypeRoles:
    """The column roles resolved against a schema: every attribute column has exactly one role (built by
    :func:`spark_dpsynth.mechanisms.archetype.resolve_roles`)."""

    columns: tuple[str, ...]
    """The attribute columns, in the table's order (the privacy unit excluded)."""
    cluster: tuple[str, ...]
    """The columns the mixture clusters rows on."""
    sample: tuple[str, ...]
    """The columns drawn jointly from the public rows of a person's cell, in the table's order."""
    count: str | None
    """The column of the second histogram (persons per majority value), or None."""
    fill: tuple[tuple[str, tuple[str, ...]], ...]
    """(fill column, its conditioning columns), in the order they are drawn."""


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
    """The column roles."""
    privacy_unit: str | None
    """The person-id column of the output, or None (every row is its own person)."""
    archetype_counts: np.ndarray
    """float64 (k,): noisy persons per archetype, clamped at 0."""
    categories: tuple[str, ...]
    """The public domain of the count column (EMPTY for empty); () without a count column."""
    category_counts: np.ndarray
    """float64 (|categories|,): noisy persons per majority category, clamped at 0; empty without."""
    profiles: Profiles
    """What synthesis takes from the public table."""
    manifest: dict[str, Any]
    """The release's manifest (a JSON object)."""

    @property
    def n_archetypes(self) -> int:
        """k, the number of archetypes."""
        return int(self.archetype_counts.shape[0])

    def persons_per_cell(self, scale: float = 1.0) -> np.ndarray:
        """Synthetic persons per (archetype, category) cell.

        The public archetype x category table of persons (plus 0.01 per cell) is fitted to the noisy margins by
        iterative proportional fitting (:func:`spark_dpsynth.synthesizers._kernels.ipf`, the category margin
        rescaled to the archetype total), then each archetype's row is rounded to round(scale x noisy persons)
        by largest remainders (:func:`spark_dpsynth.synthesizers._kernels.largest_remainder`). Post-processing.

        Args:
            scale: factor > 0 on the noisy numbers of persons per archetype.

        Returns:
            int64 (k, C), >= 0, C = 1 without a count column; row a sums to round(scale x noisy persons of a).
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
        margins = [((0,), row_margin)] + ([((1,), col_margin)] if col_margin.sum() > 0 else [])
        table = ipf([seed_table], [margins])[0]
        rs = table.sum(axis=1)
        out = np.zeros((k, c), dtype=np.int64)
        for a in range(k):
            quotas = table[a] * (row_margin[a] / rs[a]) if rs[a] > 0 else np.full(c, row_margin[a] / c)
            out[a] = largest_remainder(quotas, int(totals[a]))
        return out

    def expected_rows_per_person(self) -> np.ndarray:
        """float64 (k, C): mean public rows per person of each cell (the archetype's mean where the cell has no
        public person, 1 where the archetype has none)."""
        k, c = self.n_archetypes, max(1, len(self.categories))
        p = self.profiles.persons
        rows = np.zeros((k, c))
        people = np.zeros((k, c))
        cats = np.maximum(p["cat"].to_numpy(), 0)
        np.add.at(rows, (p["arch"].to_numpy(), cats), (p["rows"] * p["persons"]).to_numpy())
        np.add.at(people, (p["arch"].to_numpy(), cats), p["persons"].to_numpy())
        arch_mean = np.where(people.sum(1) > 0, rows.sum(1) / np.maximum(people.sum(1), 1), 1.0)
        return np.where(people > 0, rows / np.maximum(people, 1), arch_mean[:, None])


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
    """The distribution of the longest conditioning prefix of ``key`` the public data has (the fallback to
    coarser conditioning); ``levels[i]`` is keyed by prefixes of length len(key) - i."""
    for i, table in enumerate(levels):
        prefix = key[: len(key) - i]
        if prefix in table:
            return table[prefix]
    raise ReleaseError("the public profile is empty")


def sample_archetype(
    model: ArchetypeModel,
    spark: Any,
    *,
    target_number_of_records: int | None = None,
    partitions: int | None = None,
    seed: int | None = None,
) -> Any:
    """Synthesize persons and their rows from the model, distributed over partitions; post-processing only.

    The persons of each (archetype, category) cell (:meth:`ArchetypeModel.persons_per_cell`) are split exactly
    over the P partitions; partition p draws its persons' rows and values (see the module docstring) and emits
    them in a seeded random order (:func:`spark_dpsynth.synthesizers._kernels.sample_partitions`).

    Args:
        model: from :func:`spark_dpsynth.mechanisms.archetype.fit_archetype` or :func:`model_of`.
        spark: the SparkSession (classic or Spark Connect).
        target_number_of_records: rows to aim at: the numbers of persons are scaled so that about this many
            rows come out (rows per person are random); None: as many persons as the noisy archetype histogram
            says.
        partitions: P >= 1; None: :func:`spark_dpsynth.data.session.default_parallelism` (the output then
            depends on the cluster).
        seed: utility randomness; None draws one with ``secrets.randbits(63)`` (recorded nowhere). The same
            (model, target, P, seed) gives the same rows in the same order.

    Returns:
        A DataFrame: the privacy unit column (synthetic person ids ``"s<partition>-<n>"``, when the model has a
        privacy unit) followed by ``model.roles.columns``, all nullable strings (null = empty), in P partitions;
        every value is in its column's public domain.

    Raises:
        InvalidParameterError: P cannot be inferred from the session.
        ReleaseError: (when the DataFrame is evaluated) the public profiles are empty, or a synthetic value is
            outside its public domain.
    """
    p = int(partitions) if partitions is not None else default_parallelism(spark)
    seed = int(seed) if seed is not None else secrets.randbits(63)
    scale = 1.0
    if target_number_of_records is not None:
        expected = float((model.persons_per_cell() * model.expected_rows_per_person()).sum())
        scale = target_number_of_records / expected if expected > 0 else 1.0
    cells = model.persons_per_cell(scale)  # (k, C)
    k, c = cells.shape
    split_rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(_SPLIT_STREAM,)))
    split = exact_split(cells.ravel(), p, split_rng)  # (P, k * C)
    plan = _sampling_plan(model)
    roles = model.roles
    columns = roles.columns
    unit = model.privacy_unit
    categories = np.array(model.categories if model.categories else (EMPTY,), dtype=object)
    has_cat = bool(model.categories)
    domains = {col: set(model.profiles.domains[col]) for col in columns}

    def draw(part: int, parts: int) -> dict[str, list[str | None]]:
        """Partition ``part``'s rows, by column (None = empty), persons in order."""
        import pandas as pd

        rng = np.random.default_rng(np.random.SeedSequence([seed, part], spawn_key=(_DRAW_STREAM,)))
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
                    df.groupby(list(cond), sort=False, dropna=False).indices if cond else {(): np.arange(n)}
                )
                for key, sel in groups.items():
                    key = key if isinstance(key, tuple) else (key,)
                    vals, probs = _fallback(levels, key)
                    out[sel] = vals[rng.choice(vals.shape[0], size=len(sel), p=probs)]
            df[col] = out
        for col in columns:
            if n and not pd.Series(df[col]).isin(domains[col]).all():
                raise ReleaseError(f"a synthetic value of {col!r} is outside its public domain")
        rows: dict[str, list[str | None]] = {}
        if unit is not None:
            rows[unit] = [f"s{part}-{i}" for i in person_of_row.tolist()]
        for col in columns:
            rows[col] = [None if x == EMPTY else x for x in df[col].tolist()] if n else []
        return rows

    return sample_partitions(
        spark,
        draw,
        columns=((unit,) if unit is not None else ()) + tuple(columns),
        seed=seed,
        partitions=p,
        label="archetype",
    )


# --------------------------------------------------------------------------------------------- persistence


def model_files(model: ArchetypeModel) -> ModelFiles:
    """The model as the release holds it (:class:`~spark_dpsynth.release.core.ModelFiles`): a JSON document of
    the columns, the privacy unit, the roles, the two noisy histograms (DP output, no true count), the
    categories and the public domains (null for empty); the public profiles as the tables ``persons``, ``rows``
    and ``fill_<i>``."""
    document = {
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
    tables = {"persons": model.profiles.persons, "rows": model.profiles.rows}
    tables.update({f"fill_{i}": table for i, table in enumerate(model.profiles.fills)})
    return ModelFiles(document=document, tables=tables)


def model_of(release: Release) -> ArchetypeModel:
    """The model an archetype release carries (:attr:`~spark_dpsynth.release.core.Release.model_files`, loaded
    with the release).

    Raises:
        ReleaseError: the release is not an archetype one or carries no model.
    """
    files = release.model_files
    if release.manifest.mechanism != "archetype" or files is None:
        raise ReleaseError(
            "not an archetype release with its model (load it with Release.load from its directory)"
        )
    doc = files.document
    r = doc["roles"]
    roles = ArchetypeRoles(
        columns=tuple(doc["columns"]),
        cluster=tuple(r["cluster"]),
        sample=tuple(r["sample"]),
        count=r["count"],
        fill=tuple((c, tuple(cond)) for c, cond in r["fill"]),
    )
    try:
        profiles = Profiles(
            persons=files.tables["persons"],
            rows=files.tables["rows"],
            fills=tuple(files.tables[f"fill_{i}"] for i in range(len(roles.fill))),
            domains={c: tuple(EMPTY if x is None else x for x in d) for c, d in doc["domains"].items()},
        )
    except KeyError as err:
        raise ReleaseError(f"the archetype release lacks its public table {err.args[0]!r}") from None
    return ArchetypeModel(
        roles=roles,
        privacy_unit=doc["privacy_unit"],
        archetype_counts=np.asarray(doc["archetype_counts"], dtype=np.float64),
        categories=tuple(EMPTY if x is None else x for x in doc["categories"]),
        category_counts=np.asarray(doc["category_counts"], dtype=np.float64),
        profiles=profiles,
        manifest=dict(release.manifest),
    )


def sample(
    release: Release,
    params: SynthesisParams,
    spark: Any,
    *,
    release_dir: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> Any:
    """The registry's ``archetype`` synthesizer: the release's model (:func:`model_of`), then
    :func:`sample_archetype` with ``params.target_number_of_records``, ``partitions`` and ``seed``
    (``release_dir`` is unused: the release carries its model).

    Raises:
        ReleaseError: the release is not an archetype one or carries no model.
    """
    model = model_of(release)
    return sample_archetype(
        model,
        spark,
        target_number_of_records=params.target_number_of_records,
        partitions=params.partitions,
        seed=params.seed,
    )
