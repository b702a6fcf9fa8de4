"""The class-conditional DP synthesizer (seed 002), on Spark and fixed.

One noisy histogram of (attribute value, class) pairs per attribute over the *full public domain*, then the
seed's post-processing: class totals, tuples per class, conditional distributions P(value | class), exact-count
vectors per class with random fill-up, shuffle (a naive-Bayes structure; seed 002, sections 3-9).

Fixed with respect to the seed's notebook (issue 7):

* independent noise per bin: one exact discrete Laplace draw per (value, class) bin (the notebook adds *one*
  scalar draw to every bin of a histogram, which is not DP);
* every bin of the public domain is noised, zero-count bins included (the notebook noises only the bins present in
  the data, so the set of non-zero bins leaks);
* no true record count anywhere: the number of tuples defaults to the protected number of records
  (n + discrete Laplace), never ``df.shape[0]``, and nothing about the data is printed.

Privacy (pure epsilon-DP when every domain is public): adding or removing one record changes each of the A
histograms in exactly one bin by 1 (L1 sensitivity 1 per histogram, A in total), so discrete Laplace noise of scale
A / epsilon_M on every bin is epsilon_M-DP (equivalently, the seed's split epsilon_M / A per histogram with
sensitivity 1). The protected number of records spends epsilon_N = N_p epsilon. Columns without a public domain
take theirs from a DP-thresholded 1-way release (SDS's k = 1 stage, :func:`spark_dpsynth.mechanisms.marginals.dp_aggregate`)
that spends a share ``domain_epsilon_proportion`` of epsilon and its delta; the total is then (epsilon, delta)-DP.
Values outside the domain are dropped from the histograms (sensitivity unchanged).

The release has the main path's format (``spark_dpsynth.release.core``): k = 2 tuples are the (attribute, label)
bins with noisy count >= 1, k = 1 tuples their sums, normalized so that no tuple exceeds its sub-tuples, so
``evaluate`` and the report work unchanged; the model itself (the noisy histograms) is in memory.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np

from spark_dpsynth import _validate as v
from spark_dpsynth.errors import InvalidParameterError, SchemaError
from spark_dpsynth.params import AggregationParams, DataConfig
from spark_dpsynth.privacy.noise import NoiseSource, noise_source_for
from spark_dpsynth.release.core import Release, _sorted_marginal

__all__ = [
    "ClassConditionalParams",
    "ClassConditionalModel",
    "fit_class_conditional",
    "sample_class_conditional",
    "save_model",
    "load_model",
]

MODEL_FILE = "class_conditional_histograms.json"
"""File beside the release's manifest holding the noisy histograms (DP output) for ``synthesize``."""

log = logging.getLogger(__name__)

EMPTY = "\x00"
"""Internal marker of the empty value (null), a category of every domain."""


@dataclass(frozen=True)
class ClassConditionalParams:
    """Parameters of the class-conditional synthesizer (seed 002, section 2; issue 7)."""

    epsilon: float = 1.0
    """Total privacy budget epsilon > 0 (seed 002's default is 1.0)."""
    label: str | None = None
    """The class column; None takes the last attribute column (seed 002's default)."""
    number_of_tuples: int | None = None
    """Records to synthesize (>= 1); None uses the protected number of records."""
    domains: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Public value domains per column (binned columns take their bin labels automatically)."""
    number_of_records_epsilon_proportion: float = 0.005
    """N_p: share of epsilon spent on the protected number of records, in (0, 1)."""
    domain_epsilon_proportion: float = 0.1
    """Share of epsilon spent on a DP-thresholded 1-way release for columns without a public domain, in (0, 1)."""
    delta: float | None = None
    """delta of that thresholded release, in (0, 1); None derives it as the main path does."""
    seed: int | None = None
    """Test mode: reproducible, NON-cryptographic noise (not private). Sampling uses it too."""

    def __post_init__(self) -> None:
        v.positive("epsilon", self.epsilon)
        if self.number_of_tuples is not None:
            v.integer("number_of_tuples", self.number_of_tuples, low=1)
        npp = v.open_unit("number_of_records_epsilon_proportion", self.number_of_records_epsilon_proportion)
        dpp = v.open_unit("domain_epsilon_proportion", self.domain_epsilon_proportion)
        if npp + dpp >= 1:
            raise InvalidParameterError(
                "number_of_records_epsilon_proportion + domain_epsilon_proportion must be < 1, "
                f"got {npp} + {dpp} = {npp + dpp}"
            )
        if self.delta is not None:
            v.open_unit("delta", self.delta)
        if self.seed is not None:
            v.integer("seed", self.seed, low=0)
        domains = {}
        for col, values in dict(self.domains).items():
            vals = tuple(str(x) for x in values)
            if not vals:
                raise InvalidParameterError(f"domains[{col!r}] must list at least one value")
            if len(set(vals)) != len(vals):
                raise InvalidParameterError(f"domains[{col!r}] has duplicate values")
            domains[col] = vals
        object.__setattr__(self, "domains", domains)


@dataclass(frozen=True)
class ClassConditionalModel:
    """The noisy histograms and what the seed's post-processing derives from them (release-sized)."""

    columns: tuple[str, ...]
    """All columns, in the table's order (attributes and the label)."""
    label: str
    """The class column."""
    domains: dict[str, tuple[str, ...]]
    """Per column, its domain including :data:`EMPTY`."""
    histograms: dict[str, np.ndarray]
    """Per attribute, float64 (|domain|, |classes|): noisy counts clipped at 0."""
    protected_number_of_records: int
    manifest: dict[str, object]

    @property
    def classes(self) -> tuple[str, ...]:
        return self.domains[self.label]

    def class_totals(self) -> np.ndarray:
        """classTotals(c) = sum over attributes and values of the noisy counts (seed 002, section 5)."""
        total = np.zeros(len(self.classes))
        for hist in self.histograms.values():
            total += hist.sum(axis=0)
        return total

    def tuples_per_class(self, number_of_tuples: int) -> np.ndarray:
        """n_c = number_of_tuples p(c), p(c) = classTotals(c) / total (uniform if the total is 0; seed 002,
        section 6), rounded by largest remainders so that the n_c sum to ``number_of_tuples`` exactly (the
        seed's plain rounding can miss it)."""
        totals = self.class_totals()
        p = totals / totals.sum() if totals.sum() > 0 else np.full(totals.shape, 1.0 / totals.shape[0])
        return _largest_remainder(p * number_of_tuples, number_of_tuples)

    def conditionals(self) -> dict[str, np.ndarray]:
        """P(value | class) per attribute, float64 (|domain|, |classes|): each column sums to 1 (uniform over the
        domain where a class has no mass; seed 002, section 7)."""
        out = {}
        for name, hist in self.histograms.items():
            sums = hist.sum(axis=0)
            uniform = np.full(hist.shape, 1.0 / hist.shape[0])
            out[name] = np.where(sums > 0, hist / np.where(sums > 0, sums, 1.0), uniform)
        return out

    def target_counts(self, number_of_tuples: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """(n_c per class, per attribute int64 (|domain|, |classes|) exact value counts per class).

        The seed rounds p(value | c) n_c per value, then fills up or removes at random (section 8); here the
        per-value targets come from largest remainders, which gives the same counts up to that random fill-up and
        sums to n_c exactly.
        """
        n_c = self.tuples_per_class(number_of_tuples)
        counts = {}
        for name, cond in self.conditionals().items():
            counts[name] = np.stack(
                [_largest_remainder(cond[:, c] * n_c[c], int(n_c[c])) for c in range(len(n_c))], axis=1
            )
        return n_c, counts


def _largest_remainder(quotas: np.ndarray, total: int) -> np.ndarray:
    """Integers that sum to ``total``, floor(quota) each plus one for the largest fractional parts."""
    quotas = np.asarray(quotas, dtype=np.float64)
    base = np.floor(quotas).astype(np.int64)
    missing = int(total - base.sum())
    if missing > 0:
        order = np.argsort(-(quotas - base), kind="stable")
        base[order[:missing]] += 1
    elif missing < 0:  # float rounding only
        order = np.argsort(quotas - base, kind="stable")
        base[order[:-missing]] -= 1
    return base


def _public_domains(
    columns: tuple[str, ...], data: DataConfig, params: ClassConditionalParams
) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for col in columns:
        if col in params.domains:
            out[col] = params.domains[col]
        elif col in data.bins:
            spec = data.bins[col]
            out[col] = tuple(spec.interval_labels()) + tuple(spec.passthrough)
    return out


def fit_class_conditional(
    df,  # noqa: ANN001 - pyspark.sql.DataFrame
    params: ClassConditionalParams | None = None,
    data_config: DataConfig | None = None,
    *,
    noise: NoiseSource | None = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[ClassConditionalModel, Release]:
    """Release the noisy (attribute value, class) histograms of a table (seed 002, Phase 1, fixed).

    Args:
        df: the sensitive table; one row per record.
        params: epsilon, label, number of tuples, public domains, seed.
        data_config: columns, empty values and public bins (binned columns have public domains).
        noise: the noise source (default: production noise, or test-mode noise when ``params.seed`` is set).
        progress: optional callback, one message per stage.

    Returns:
        (the model for :func:`sample_class_conditional`, a :class:`Release` in the main path's format).

    Raises:
        SchemaError: a configured column or the label is not in ``df`` (checked before any data is read).
        InvalidParameterError: fewer than two columns (an attribute and the label).

    Privacy:
        epsilon-DP (plus the delta of the domain release when a column has no public domain); see the module
        docstring. Discrete Laplace noise from OpenDP's exact sampler over a cryptographic source.
    """
    from pyspark.sql import functions as F

    from spark_dpsynth.data.prepare import prepare, resolve_columns

    params = params if params is not None else ClassConditionalParams()
    data = resolve_columns(df.columns, data_config if data_config is not None else DataConfig())
    columns = tuple(data.columns or ())
    label = params.label if params.label is not None else columns[-1]
    if label not in columns:
        raise SchemaError(
            f"label column {label!r} is not an attribute column; the columns are {list(columns)}"
        )
    if len(columns) < 2:
        raise InvalidParameterError(
            "the class-conditional synthesizer needs at least one attribute and a label"
        )
    unknown = [c for c in params.domains if c not in columns]
    if unknown:
        raise SchemaError(f"domains name column(s) {unknown} that are not attribute columns")
    noise = noise if noise is not None else noise_source_for(params.seed)
    started = time.perf_counter()
    prepared = prepare(df, data)
    domains = _public_domains(columns, data, params)
    eps = float(params.epsilon)
    eps_n = params.number_of_records_epsilon_proportion * eps
    eps_domain = 0.0
    delta = 0.0
    missing = [c for c in columns if c not in domains]
    if missing:
        eps_domain = params.domain_epsilon_proportion * eps
        _stage(progress, f"class_conditional: DP domains of {missing} (epsilon {eps_domain:g})")
        from spark_dpsynth.mechanisms.marginals import dp_aggregate

        domain_release = dp_aggregate(
            prepared.select(*[F.col(f"`{c}`") for c in missing]),
            AggregationParams(
                epsilon=eps_domain,
                delta=params.delta,
                reporting_length=1,
                number_of_records_epsilon_proportion=0.01,
                seed=params.seed,
            ),
            DataConfig(columns=tuple(missing)),
        )
        delta = float(domain_release.manifest["delta"])
        for j, col in enumerate(missing):
            domains[col] = tuple(domain_release.domains[j])
    eps_m = eps - eps_n - eps_domain
    full_domains = {c: (*domains[c], EMPTY) for c in columns}
    attributes = tuple(c for c in columns if c != label)

    # Distributed counts of the (value, class) pairs of every attribute, restricted to the public domain:
    # one explode, one groupBy, a join with the (broadcast) domain; at most sum |domain_j| |classes| rows.
    _stage(progress, f"class_conditional: counting {len(attributes)} (attribute, {label}) histograms")
    spark = df.sparkSession
    cls = F.coalesce(F.col(f"`{label}`"), F.lit(EMPTY))
    pairs = F.explode(
        F.array(
            *[
                F.struct(
                    F.lit(j).alias("j"), F.coalesce(F.col(f"`{a}`"), F.lit(EMPTY)).alias("v"), cls.alias("c")
                )
                for j, a in enumerate(attributes)
            ]
        )
    )
    cells = prepared.select(pairs.alias("p")).select("p.j", "p.v", "p.c").groupBy("j", "v", "c").count()
    domain_rows = [
        (j, val, i, c_val, ci)
        for j, a in enumerate(attributes)
        for i, val in enumerate(full_domains[a])
        for ci, c_val in enumerate(full_domains[label])
    ]
    domain_df = spark.createDataFrame(domain_rows, "j int, v string, vi int, c string, ci int")
    joined = cells.join(F.broadcast(domain_df), on=["j", "v", "c"], how="inner").select(
        "j", "vi", "ci", "count"
    )
    # n in the same job: every record adds exactly one (value, class) pair to the first attribute's cells.
    total = (
        cells.where(F.col("j") == 0)
        .agg(F.sum("count").alias("count"))
        .select(F.lit(-1).alias("j"), F.lit(-1).alias("vi"), F.lit(-1).alias("ci"), "count")
    )
    true_counts = {
        a: np.zeros((len(full_domains[a]), len(full_domains[label])), dtype=np.int64) for a in attributes
    }
    true_n = 0
    for row in joined.unionByName(total).collect():  # bounded by the public domain size (+1 row)
        if row["j"] < 0:
            true_n = int(row["count"] or 0)
        else:
            true_counts[attributes[row["j"]]][row["vi"], row["ci"]] = row["count"]

    # Phase 1 fixed: independent discrete Laplace noise on every bin of the full domain, then clip at 0.
    scale = len(attributes) / eps_m
    histograms = {a: noisy_histogram(true_counts[a], scale, noise) for a in attributes}
    # The protected number of records (n is never logged or written): discrete Laplace noise.
    protected_n = max(1, true_n + int(noise.discrete_laplace(1.0 / eps_n, 1)[0]))
    del true_n, true_counts

    manifest: dict[str, object] = {
        "format_version": 1,
        "synthesizer": "class_conditional",
        "test_mode": bool(noise.test_mode),
        "noise_sampler": noise.name,
        "columns": list(columns),
        "label": label,
        "privacy_unit": "record",
        "reporting_length": 2,
        "epsilon": eps,
        "delta": delta,
        "epsilon_n": eps_n,
        "epsilon_m": eps_m,
        "epsilon_domain": eps_domain,
        "mechanism": "discrete Laplace on every (value, class) bin of the public domain",
        "laplace_scale": scale,
        "epsilon_per_histogram": eps_m / len(attributes),
        "sensitivities": {"1": 1, "2": 1},
        "protected_number_of_records": int(protected_n),
        "domains_from_release": missing,
        "parameters": {
            "epsilon": eps,
            "label": label,
            "number_of_tuples": params.number_of_tuples,
            "number_of_records_epsilon_proportion": params.number_of_records_epsilon_proportion,
            "domain_epsilon_proportion": params.domain_epsilon_proportion,
            "delta": params.delta,
            "seed": params.seed,
        },
    }
    model = ClassConditionalModel(
        columns=columns,
        label=label,
        domains=full_domains,
        histograms=histograms,
        protected_number_of_records=int(protected_n),
        manifest=manifest,
    )
    release = _as_release(model)
    _stage(progress, f"class_conditional: histograms released in {time.perf_counter() - started:.1f} s")
    return model, release


def noisy_histogram(counts: np.ndarray, scale: float, noise: NoiseSource) -> np.ndarray:
    """One independent discrete Laplace draw per bin of a full-domain histogram, then clipped at 0.

    Args:
        counts: int64 (|domain|, |classes|) true counts, zero-count bins included.
        scale: Laplace scale b = A / epsilon_M (P(x) proportional to exp(-|x| / b)).
        noise: the noise source.

    Returns:
        float64 array of the same shape, >= 0 (seed 002, section 4, with one draw *per bin*).
    """
    draws = noise.discrete_laplace(scale, counts.size).reshape(counts.shape)
    return np.maximum(counts + draws, 0).astype(np.float64)


def _as_release(model: ClassConditionalModel) -> Release:
    """The histograms in the main path's release format (rounded counts >= 1, normalized, downward closed)."""
    columns = model.columns
    index = {c: i for i, c in enumerate(columns)}
    li = index[model.label]
    rounded = {a: np.rint(h).astype(np.int64) for a, h in model.histograms.items()}
    # 1-tuples: attribute values summed over classes; classes averaged over the histograms (each sums to ~n).
    one_counts: dict[tuple[int, str], int] = {}
    for a, h in rounded.items():
        for i, val in enumerate(model.domains[a]):
            if val != EMPTY:
                one_counts[(index[a], val)] = int(h[i].sum())
    per_class = np.mean([h.sum(axis=0) for h in rounded.values()], axis=0)
    for ci, c_val in enumerate(model.classes):
        if c_val != EMPTY:
            one_counts[(li, c_val)] = int(round(per_class[ci]))
    kept_ones = {key: n for key, n in one_counts.items() if n >= 1}
    domains = tuple(tuple(sorted(val for (j, val) in kept_ones if j == i)) for i in range(len(columns)))
    code = [{val: k for k, val in enumerate(d)} for d in domains]
    ones_cols = np.array([[j] for (j, _) in kept_ones], dtype=np.int16).reshape(-1, 1)
    ones_vals = np.array([[code[j][val]] for (j, val) in kept_ones], dtype=np.int32).reshape(-1, 1)
    ones = _sorted_marginal(ones_cols, ones_vals, np.array(list(kept_ones.values()), dtype=np.int64))
    pair_cols, pair_vals, pair_counts = [], [], []
    for a, h in rounded.items():
        ai = index[a]
        for i, val in enumerate(model.domains[a]):
            for ci, c_val in enumerate(model.classes):
                n = int(h[i, ci])
                if val == EMPTY or c_val == EMPTY or n < 1:
                    continue
                if (ai, val) not in kept_ones or (li, c_val) not in kept_ones:
                    continue
                n = min(n, kept_ones[(ai, val)], kept_ones[(li, c_val)])  # normalization (seed 001, 3.4)
                lo, hi = sorted([(ai, code[ai][val]), (li, code[li][c_val])])
                pair_cols.append([lo[0], hi[0]])
                pair_vals.append([lo[1], hi[1]])
                pair_counts.append(n)
    pairs = _sorted_marginal(
        np.array(pair_cols, dtype=np.int16).reshape(-1, 2),
        np.array(pair_vals, dtype=np.int32).reshape(-1, 2),
        np.array(pair_counts, dtype=np.int64),
    )
    manifest = dict(model.manifest)
    manifest["released_tuples"] = {"1": len(ones), "2": len(pairs)}
    return Release(columns=columns, domains=domains, marginals={1: ones, 2: pairs}, manifest=manifest)


def sample_class_conditional(
    model: ClassConditionalModel,
    spark,  # noqa: ANN001 - SparkSession
    *,
    number_of_tuples: int | None = None,
    partitions: int | None = None,
    seed: int | None = None,
):  # noqa: ANN201 - DataFrame
    """Synthesize records from the model (seed 002, Phase 2), distributed; post-processing only.

    The class counts n_c and, per attribute and class, the exact value counts are computed on the driver
    (release-sized); n_c is split exactly over P partitions (:func:`spark_dpsynth.synthesizers.marginals.exact_split`), each
    class's value counts by sequential multivariate hypergeometric draws (the same distribution as shuffling the
    class's whole value vector and cutting it into the partitions' shares). Each partition builds its exact-count
    value vectors, shuffles them within each class (seed 002, section 8), and assembles rows; the rows are then
    shuffled by a seeded key.

    Args:
        model: from :func:`fit_class_conditional`.
        spark: the session.
        number_of_tuples: records to emit; default the model's protected number of records.
        partitions: P; default the session's parallelism.
        seed: utility randomness; None draws one from ``secrets``.

    Returns:
        DataFrame with ``model.columns``, nullable strings (null = empty), ``number_of_tuples`` rows.
    """
    import pyarrow as pa

    from spark_dpsynth.mechanisms.marginals import parallelism
    from spark_dpsynth.synthesizers.marginals import exact_split

    n = int(number_of_tuples) if number_of_tuples is not None else model.protected_number_of_records
    p = int(partitions) if partitions is not None else parallelism(spark)
    seed = int(seed) if seed is not None else secrets.randbits(63)
    n_c, counts = model.target_counts(n)
    split_rng = np.random.default_rng(np.random.SeedSequence([seed, 0x636C73]))
    class_split = exact_split(n_c, p, split_rng)  # (P, C)
    value_splits = {a: _split_values(c, class_split, split_rng) for a, c in counts.items()}
    columns = model.columns
    label = model.label
    domains = {
        c: np.array([None if x == EMPTY else x for x in model.domains[c]], dtype=object) for c in columns
    }
    attributes = [c for c in columns if c != label]

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for part in batch.column(0).to_pylist():
                rng = np.random.default_rng(np.random.SeedSequence([seed, int(part)]))
                per_class = class_split[part]
                out = {}
                cls_codes = np.repeat(np.arange(per_class.shape[0]), per_class)
                out[label] = domains[label][cls_codes]
                for a in attributes:
                    vec = np.empty(cls_codes.shape[0], dtype=np.int64)
                    start = 0
                    for c in range(per_class.shape[0]):
                        values = np.repeat(np.arange(value_splits[a].shape[1]), value_splits[a][part][:, c])
                        rng.shuffle(values)
                        vec[start : start + values.shape[0]] = values
                        start += values.shape[0]
                    out[a] = domains[a][vec]
                order = rng.permutation(cls_codes.shape[0])
                arrays = [pa.array(out[c][order].tolist(), type=pa.string()) for c in columns]
                key = rng.integers(0, 2**62, size=cls_codes.shape[0])
                yield pa.RecordBatch.from_arrays([*arrays, pa.array(key)], names=[*columns, "__key"])

    schema = ", ".join(f"`{c}` string" for c in columns) + ", __key long"
    df = spark.range(p, numPartitions=p).mapInArrow(task, schema)
    return df.repartition(p, "__key").sortWithinPartitions("__key").drop("__key")


def _split_values(counts: np.ndarray, class_split: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """int64 (P, V, C): per partition, value counts per class summing to ``class_split[p, c]``, totals exact."""
    parts = class_split.shape[0]
    out = np.zeros((parts, *counts.shape), dtype=np.int64)
    for c in range(counts.shape[1]):
        pool = counts[:, c].astype(np.int64).copy()
        for part in range(parts - 1):
            take = rng.multivariate_hypergeometric(pool, int(class_split[part, c]))
            out[part, :, c] = take
            pool -= take
        out[parts - 1, :, c] = pool
    return out


def save_model(model: ClassConditionalModel, release_dir: str) -> str:
    """Write the noisy, clipped histograms (DP output, no true count) next to a saved release."""
    import json
    import os

    path = os.path.join(release_dir.removeprefix("file:"), MODEL_FILE)
    doc = {
        "columns": list(model.columns),
        "label": model.label,
        "domains": {c: [None if x == EMPTY else x for x in d] for c, d in model.domains.items()},
        "histograms": {a: h.tolist() for a, h in model.histograms.items()},
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    return path


def load_model(release: Release, release_dir: str) -> ClassConditionalModel:
    """The model saved by :func:`save_model` beside ``release``.

    Raises:
        ReleaseError: the release is not a class-conditional one or its histograms are missing.
    """
    import json
    import os

    from spark_dpsynth.errors import ReleaseError

    path = os.path.join(release_dir.removeprefix("file:"), MODEL_FILE)
    if release.manifest.get("synthesizer") != "class_conditional" or not os.path.isfile(path):
        raise ReleaseError(f"no class-conditional histograms at {path}")
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    return ClassConditionalModel(
        columns=tuple(doc["columns"]),
        label=doc["label"],
        domains={c: tuple(EMPTY if x is None else x for x in d) for c, d in doc["domains"].items()},
        histograms={a: np.asarray(h, dtype=np.float64) for a, h in doc["histograms"].items()},
        protected_number_of_records=release.protected_number_of_records,
        manifest=dict(release.manifest),
    )


def _stage(progress: Callable[[str], None] | None, message: str) -> None:
    log.info(message)
    if progress is not None:
        progress(message)
