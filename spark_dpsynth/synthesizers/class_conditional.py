"""The class-conditional synthesizer: naive-Bayes records from the noisy (value, class) histograms.

Reads only what :func:`spark_dpsynth.mechanisms.class_conditional.fit_class_conditional` released (the noisy,
clipped histograms and the protected number of records), so its output costs no privacy budget beyond that
release's (post-processing; docs/design.md section 4.4).

The post-processing has a naive-Bayes structure: class totals, tuples per class, conditional distributions
P(value | class), then per class and attribute an exact-count value vector, shuffled, so that attributes are
independent given the class. The model holds release-sized arrays only.

Distribution: the class counts n_c and the per-class value counts are computed on the driver; n_c is split
exactly over P partitions (:func:`spark_dpsynth.synthesizers._kernels.exact_split`) and each class's value
counts by sequential multivariate hypergeometric draws (the distribution of cutting the class's shuffled value
vector into the partitions' shares). Each partition then builds its exact-count value vectors, shuffles them
within each class and emits its rows in a seeded random order
(:func:`spark_dpsynth.synthesizers._kernels.sample_partitions`): no shuffle stage.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from spark_dpsynth.data.session import default_parallelism
from spark_dpsynth.errors import ReleaseError
from spark_dpsynth.params import SynthesisParams
from spark_dpsynth.release.core import ModelFiles, Release
from spark_dpsynth.synthesizers._kernels import exact_split, largest_remainder, sample_partitions

__all__ = [
    "EMPTY",
    "EMPTY_ETA",
    "ClassConditionalModel",
    "model_files",
    "model_of",
    "sample_class_conditional",
]

EMPTY = "\x00"
"""Internal marker of the empty value (null), a category of every domain."""

EMPTY_ETA = 1e-3
"""The probability that one noisy bin of an empty value (or class) with no record stands out of the noise
(:meth:`ClassConditionalModel.kept_histograms`)."""

_SPLIT_STREAM = 1
"""Spawn key of the driver's generator of the partitions' shares (classes, then values per class)."""
_VALUES_STREAM = 2
"""Spawn key of a partition's generator of the within-class shuffles of its value vectors."""


@dataclass(frozen=True)
class ClassConditionalModel:
    """The noisy histograms and what the post-processing derives from them (release-sized)."""

    columns: tuple[str, ...]
    """All columns, in the table's order (attributes and the label)."""
    label: str
    """The class column."""
    domains: dict[str, tuple[str, ...]]
    """Per column, its domain including :data:`EMPTY` (last)."""
    histograms: dict[str, np.ndarray]
    """Per attribute, float64 (|domain|, |classes|): noisy counts clipped at 0."""
    protected_number_of_records: int
    """The DP number of records n' (>= 1), the default number of records to synthesize."""
    manifest: dict[str, Any]
    """The release's manifest (a JSON object)."""

    @property
    def classes(self) -> tuple[str, ...]:
        """The label's domain (:data:`EMPTY` included)."""
        return self.domains[self.label]

    def empty_threshold(self) -> float:
        """t = b ln(1 / eta), b the release's Laplace scale (manifest ``laplace_scale``) and eta =
        :data:`EMPTY_ETA`: a discrete Laplace draw exceeds t with probability at most eta (for P(x) proportional
        to exp(-|x| / b) on the integers, P(L >= m) = exp(-m / b) / (1 + exp(-1 / b)) <= exp(-m / b); docs/design.md
        section 4.4). 0 when the manifest has no scale."""
        scale = float(self.manifest.get("laplace_scale") or 0.0)
        return scale * math.log(1.0 / EMPTY_ETA)

    def kept_histograms(self) -> dict[str, np.ndarray]:
        """Per attribute, the noisy histogram with the bins of the empty value and of the empty class set to 0
        where they do not stand out of the noise (noisy count <= :meth:`empty_threshold`); post-processing.

        Every domain ends with the empty value, so a column that has no empty cell still gets |classes| noisy
        empty bins, and the label an empty class: left as drawn, their positive noise puts empty cells in
        some synthetic rows of every column (docs/design.md section 4.4, step 0). Other values are in the
        domain because they are public or passed the domain release's threshold, so only the empty ones are
        thresholded here."""
        t = self.empty_threshold()
        empty_class = self.classes.index(EMPTY) if EMPTY in self.classes else None
        out = {}
        for name, hist in self.histograms.items():
            kept = hist.copy()
            rows = [self.domains[name].index(EMPTY)] if EMPTY in self.domains[name] else []
            for r in rows:
                kept[r] = np.where(kept[r] > t, kept[r], 0.0)
            if empty_class is not None:
                kept[:, empty_class] = np.where(kept[:, empty_class] > t, kept[:, empty_class], 0.0)
            out[name] = kept
        return out

    def class_totals(self) -> np.ndarray:
        """float64 (|classes|,): classTotals(c), the noisy counts summed over every attribute and value (the
        empty bins that stand out of the noise only, :meth:`kept_histograms`)."""
        total = np.zeros(len(self.classes))
        for hist in self.kept_histograms().values():
            total += hist.sum(axis=0)
        return total

    def tuples_per_class(self, number_of_tuples: int) -> np.ndarray:
        """int64 (|classes|,): n_c, the records of each class.

        n_c = number_of_tuples x p(c) with p(c) = classTotals(c) / total (uniform when the total is 0), rounded
        by largest remainders (:func:`spark_dpsynth.synthesizers._kernels.largest_remainder`) so that the n_c
        sum to ``number_of_tuples`` exactly (plain rounding can miss it).
        """
        totals = self.class_totals()
        p = totals / totals.sum() if totals.sum() > 0 else np.full(totals.shape, 1.0 / totals.shape[0])
        return largest_remainder(p * number_of_tuples, number_of_tuples)

    def conditionals(self) -> dict[str, np.ndarray]:
        """Per attribute, float64 (|domain|, |classes|): P(value | class); each column sums to 1 (uniform over
        the domain where a class has no mass)."""
        out = {}
        for name, hist in self.kept_histograms().items():
            sums = hist.sum(axis=0)
            uniform = np.full(hist.shape, 1.0 / hist.shape[0])
            out[name] = np.where(sums > 0, hist / np.where(sums > 0, sums, 1.0), uniform)
        return out

    def target_counts(self, number_of_tuples: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The exact counts the synthetic table will have.

        Args:
            number_of_tuples: records to synthesize, >= 1.

        Returns:
            (n_c: int64 (|classes|,) summing to ``number_of_tuples``; per attribute, int64 (|domain|,
            |classes|) value counts per class, column c summing to n_c). The per-value counts are
            P(value | c) n_c rounded by largest remainders (the same counts as rounding each and filling up or
            removing at random, up to that random fill-up, and exact by construction).
        """
        n_c = self.tuples_per_class(number_of_tuples)
        counts = {}
        for name, cond in self.conditionals().items():
            counts[name] = np.stack(
                [largest_remainder(cond[:, c] * n_c[c], int(n_c[c])) for c in range(len(n_c))], axis=1
            )
        return n_c, counts


def sample_class_conditional(
    model: ClassConditionalModel,
    spark: Any,
    *,
    number_of_tuples: int | None = None,
    partitions: int | None = None,
    seed: int | None = None,
) -> Any:
    """Synthesize records from the model, distributed over partitions; post-processing only.

    The driver computes n_c and the per-class value counts (:meth:`ClassConditionalModel.target_counts`) and
    splits them exactly over the P partitions (see the module docstring); partition p builds, for every class
    and attribute, the vector of its share of the value counts, shuffles it, and puts the columns side by side;
    its rows come out in a seeded random order (no shuffle stage).

    Args:
        model: from :func:`spark_dpsynth.mechanisms.class_conditional.fit_class_conditional` or
            :func:`load_model`.
        spark: the SparkSession (classic or Spark Connect).
        number_of_tuples: records to emit, >= 1; None: the model's protected number of records.
        partitions: P >= 1; None: :func:`spark_dpsynth.data.session.default_parallelism` (the output then
            depends on the cluster).
        seed: utility randomness; None draws one with ``secrets.randbits(63)`` (recorded nowhere). The same
            (model, number_of_tuples, P, seed) gives the same rows in the same order.

    Returns:
        A DataFrame with exactly ``model.columns``, in order, nullable strings (null = empty), exactly
        ``number_of_tuples`` rows in P partitions; every (value, class) count of the output is the model's
        target count (:meth:`ClassConditionalModel.target_counts`).

    Raises:
        InvalidParameterError: P cannot be inferred from the session.
    """
    n = int(number_of_tuples) if number_of_tuples is not None else model.protected_number_of_records
    p = int(partitions) if partitions is not None else default_parallelism(spark)
    seed = int(seed) if seed is not None else secrets.randbits(63)
    n_c, counts = model.target_counts(n)
    split_rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(_SPLIT_STREAM,)))
    class_split = exact_split(n_c, p, split_rng)  # (P, C)
    value_splits = {a: _split_values(c, class_split, split_rng) for a, c in counts.items()}  # (P, V, C)
    columns = model.columns
    label = model.label
    index = {c: j for j, c in enumerate(columns)}
    # output codes: the domain without EMPTY; EMPTY (the model's last value) becomes -1 (null)
    domains = [tuple(x for x in model.domains[c] if x != EMPTY) for c in columns]
    recode = {
        c: np.array([-1 if x == EMPTY else i for i, x in enumerate(model.domains[c])], dtype=np.int32)
        for c in columns
    }
    attributes = [c for c in columns if c != label]

    def draw(part: int, parts: int) -> np.ndarray:
        """Partition ``part``'s records: int32 codes (n_p, d) into ``domains``, -1 = empty."""
        rng = np.random.default_rng(np.random.SeedSequence([seed, part], spawn_key=(_VALUES_STREAM,)))
        per_class = class_split[part]
        cls_codes = np.repeat(np.arange(per_class.shape[0]), per_class)
        codes = np.empty((cls_codes.shape[0], len(columns)), dtype=np.int32)
        codes[:, index[label]] = recode[label][cls_codes]
        for a in attributes:
            split = value_splits[a][part]  # (V, C)
            vec = np.empty(cls_codes.shape[0], dtype=np.int64)
            start = 0
            for c in range(per_class.shape[0]):
                values = np.repeat(np.arange(split.shape[0]), split[:, c])
                rng.shuffle(values)
                vec[start : start + values.shape[0]] = values
                start += values.shape[0]
            codes[:, index[a]] = recode[a][vec]
        return codes

    return sample_partitions(
        spark, draw, columns=columns, seed=seed, partitions=p, domains=domains, label="class_conditional"
    )


def _split_values(counts: np.ndarray, class_split: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Per partition, its share of each class's value counts.

    Args:
        counts: int64 (V, C) value counts per class.
        class_split: int64 (P, C), the partitions' shares of the classes (columns summing to ``counts``'s).
        rng: the driver's split generator.

    Returns:
        int64 (P, V, C): ``out[p, :, c]`` sums to ``class_split[p, c]`` and ``out.sum(0) == counts``
        (sequential multivariate hypergeometric draws).
    """
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


def model_files(model: ClassConditionalModel) -> ModelFiles:
    """The model as the release holds it (:class:`~spark_dpsynth.release.core.ModelFiles`): a JSON document of
    the columns, the label, the domains (null for empty) and the noisy, clipped histograms (DP output, no true
    count) as nested lists."""
    return ModelFiles(
        document={
            "columns": list(model.columns),
            "label": model.label,
            "domains": {c: [None if x == EMPTY else x for x in d] for c, d in model.domains.items()},
            "histograms": {a: h.tolist() for a, h in model.histograms.items()},
        }
    )


def model_of(release: Release) -> ClassConditionalModel:
    """The model a class-conditional release carries (:attr:`~spark_dpsynth.release.core.Release.model_files`,
    loaded with the release).

    Raises:
        ReleaseError: the release is not a class-conditional one or carries no model.
    """
    files = release.model_files
    if release.manifest.mechanism != "class_conditional" or files is None:
        raise ReleaseError(
            "not a class_conditional release with its histograms (load it with Release.load from its directory)"
        )
    doc = files.document
    return ClassConditionalModel(
        columns=tuple(doc["columns"]),
        label=doc["label"],
        domains={c: tuple(EMPTY if x is None else x for x in d) for c, d in doc["domains"].items()},
        histograms={a: np.asarray(h, dtype=np.float64) for a, h in doc["histograms"].items()},
        protected_number_of_records=release.protected_number_of_records,
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
    """The registry's ``class_conditional`` synthesizer: the release's model (:func:`model_of`), then
    :func:`sample_class_conditional` with ``params.target_number_of_records``, ``partitions`` and ``seed``
    (``release_dir`` is unused: the release carries its model).

    Raises:
        ReleaseError: the release is not a class_conditional one or carries no model.
    """
    model = model_of(release)
    return sample_class_conditional(
        model,
        spark,
        number_of_tuples=params.target_number_of_records,
        partitions=params.partitions,
        seed=params.seed,
    )
