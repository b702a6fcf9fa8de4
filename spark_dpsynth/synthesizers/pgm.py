"""The ``pgm`` synthesizer: records sampled from a graphical model estimated from the release's measured marginals.

For releases that carry measured marginals (``Release.measurements``: full noisy tables over cliques of columns,
with their noise std, and partial ones that measure only some cells, such as the 1-way value discovery's released
counts), such as those of the ``workload`` mechanism. The stages (docs/design.md section 4.8):

1. **Fit, on the driver** (release-sized): :func:`fit_release` builds the measurement domain (per column its
   released values plus the empty category) and runs Private-PGM (McKenna, Sheldon and Miklau, "Graphical-model
   based estimation and inference for differential privacy", ICML 2019) through
   :func:`spark_dpsynth.estimation.estimate`: the graphical model whose clique marginals best fit every measured
   marginal (1-, 2-, 3-way and longer alike), each weighted by its noise precision 1/std^2. The number of records
   of the model is estimated from the tables' sums.
2. **Sample, on the executors**: ``sample_partitions`` (docs/design.md section 4.3) runs one task per partition. The
   target (by default the release's estimate of its number of records, the inverse-variance mean of n' and of the
   tables' sums: :func:`number_of_records`) is cut into blocks of :data:`BLOCK_ROWS` records (the last one shorter),
   block b drawn from its own generator (seed, b); partition p of P draws the blocks p B / P to (p + 1) B / P - 1 of
   the B blocks, one at a time (a task holds one block), so the synthetic table, read in partition order, is the
   same rows in the same order whatever P. A block is drawn from the model by ancestral sampling along its junction
   tree, systematically (:meth:`GraphicalModel.sample` with ``rounded=True``): every group of the block's records
   that share a separator value splits over the next clique's cells with counts within one of their expected counts,
   so the output's marginals follow the model's closely; then decoded (stage 4) and put in random order. Codes are
   decoded to the released values; the empty category is written as null (but see stage 4).
3. **Empty cells, empty bins and a codebook's ends as measured** (done before stage 1): a column whose empty
   category is not significantly positive in its 1-way measurements (the inverse-variance mean of its 1-way
   tables' empty cell is below ``EMPTY_Z`` of its noise std) gets no empty cell, a binned number column no
   value in a bin measured so, and a codebook of numbers no value beyond where its records begin and end
   (:func:`codebook_range`). Those cells are taken out of the domain and of every measurement before the fit
   (:func:`without_absent`): the model holds no mass there and its fit puts that mass where the measurements
   say. Otherwise the noise alone would put empty cells, about sigma / n of each column's rows, into a table
   that has none, values into DP bins beyond the data, and codebook values no record holds (docs/design.md
   section 4.8).
4. **The empty category as measured**: a discovered column's empty category holds its empty cells and its
   values that did not pass the discovery's threshold. Where the release also measures the column's empty cells
   (the workload discovery's noisy empty count e, std s; :func:`measured_empty_counts`), a drawn cell of the
   category is written empty with probability min(1, e / r), r the model's expected count of the category,
   when e >= ``EMPTY_Z`` s (else never; always when r - e, the rare values' mass, does not stand out of the
   noise), and otherwise gets a released value drawn from the model's conditional
   distribution of the column given the record's other columns (:func:`rest_empty_shares`): a rare value is no
   longer written as an empty cell. Releases without empty counts write the whole category empty.

5. **Conditions and declared rules** (:mod:`spark_dpsynth.synthesizers.conditions`): :func:`fit_for_sampling` fits
   a declared rule's excluded cells as structural zeros, and :meth:`SamplingModel.condition` conditions the fitted
   model on a condition's cells (evidence in the junction tree), so that :func:`sample_model` draws only such
   records (docs/design.md section 4.8, "Conditions and declared rules").

Privacy: post-processing of the release (it reads the measured marginals, their std, the noisy empty counts and
the protected number of records, nothing else); the randomness of sampling is utility randomness (docs/design.md section 7.3).
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from pyspark.sql import DataFrame, SparkSession

from spark_dpsynth._progress import report
from spark_dpsynth.errors import InvalidParameterError, ReleaseError
from spark_dpsynth.estimation import (
    Domain,
    GraphicalModel,
    Measurement,
    estimate,
    estimate_total,
    total_variance,
)
from spark_dpsynth.params import SynthesisParams
from spark_dpsynth.privacy.accounting import discrete_laplace_variance
from spark_dpsynth.release.core import Release, one_way_means
from spark_dpsynth.release.manifest import discovery_noise_std
from spark_dpsynth.synthesizers._kernels import sample_partitions

__all__ = [
    "BLOCK_ROWS",
    "EMPTY_Z",
    "FIT_ITERATIONS",
    "RANGE_DRIFT",
    "RANGE_LIMIT",
    "SamplingModel",
    "absent_cells",
    "codebook_range",
    "fit_for_sampling",
    "fit_release",
    "measured_empty_counts",
    "number_of_records",
    "protected_records_variance",
    "release_domain",
    "release_measurements",
    "rest_empty_shares",
    "sample",
    "sample_model",
    "without_absent",
]

log = logging.getLogger(__name__)

FIT_ITERATIONS = 20_000
"""Most mirror-descent iterations of the synthesizer's fit, a guard: the fit stops when it has converged to
the noise level (:data:`~spark_dpsynth.estimation.mirror_descent.DEFAULT_TOLERANCE`), in a few thousand steps
on the tables measured (docs/design.md section 4.8, "When the fit stops")."""
BLOCK_ROWS = 1 << 18
"""Records per block, the unit of the draws (module docstring, stage 2): the same blocks whatever the number of
partitions; a task's memory holds one block (about 30 MB of codes at 15 columns)."""
_DRAW_STREAM = 0x70676D62
"""Seed stream of the records of a block (spawned with the seed and the block number)."""
EMPTY_Z = 3.0
"""A column's empty category is kept when its measured count is at least this many noise stds (module
docstring, stage 3): with no empty cell in the data, it is kept with probability 0.13 %."""
_DECODE_CELLS = 1 << 21
"""Float cells (records x column values) of one chunk of the rest decoding's conditional tables (16 MiB)."""


def measured_empty_counts(release: Release) -> tuple[dict[int, float], dict[int, float]] | None:
    """The release's noisy numbers of empty cells per column and their noise stds, or None when it has none.

    They are the workload mechanism's domain discovery's (manifest ``domain_discovery.empty_counts``,
    ``empty_counts_noise_std``, and for the columns the DP profile settled ``domain_discovery.settled``'s
    ``columns`` and ``noise_std``; docs/design.md section 4.7): one per discovered column, noisy (possibly
    negative). Releases without them (multi-value columns, releases written before) give None.

    Returns:
        ({column index: noisy empty count}, {column index: its noise std}), columns in ``release.columns``
        order.
    """
    disc = release.manifest.get("domain_discovery") or {}
    counts = disc.get("empty_counts")
    std = disc.get("empty_counts_noise_std")
    if not counts or std is None:
        return None
    found = {c: float(counts[name]) for c, name in enumerate(release.columns) if name in counts}
    stds = {c: discovery_noise_std(disc, release.columns[c], "empty_counts_noise_std") for c in found}
    return (found, stds) if found else None


def absent_cells(release: Release, z: float = EMPTY_Z) -> dict[int, np.ndarray]:
    """Per column, a boolean mask over its measurement domain (released values, then the empty category) of the
    cells judged absent from the data (module docstring, stage 3): cells whose 1-way mean y is below z s.
    A column whose measured empty count (:func:`measured_empty_counts`) is at least z of its noise std keeps
    its empty category whatever its 1-way tables say: the data has empty cells there.

    Tested: every column's empty category, and every bin of a binned number, date or timestamp column (the
    manifest's ``column_types``): DP bin edges can open bins far beyond the data, whose noisy cells would
    otherwise draw values there. A discovered value keeps its measured share (it passed its own discovery
    threshold). A column with a public domain of numbers (the manifest's
    ``domain_discovery.public_domain_columns``, every value a number: a codebook of years, hours, months) has
    the values beyond its measured range absent (:func:`codebook_range`): a codebook lists values no record
    holds (the years 1920..1944 of a survey whose oldest start is 1945), and their noisy cells would otherwise
    draw them. Only measured cells are tested (a cell that only partial tables leave out is never judged
    absent). Columns with nothing absent, every cell absent, or no 1-way table are not listed.
    """
    types = release.manifest.get("column_types") or {}
    public = set((release.manifest.get("domain_discovery") or {}).get("public_domain_columns") or ())
    empties, empty_stds = measured_empty_counts(release) or ({}, {})
    out = {}
    for c, (mean, std) in one_way_means(release.measurements, release.columns).items():
        below = (mean < z * std) & np.isfinite(std)
        t = types.get(release.columns[c]) or {}
        binned = bool(t.get("bins")) and t.get("scale") != "category"
        mask = below.copy() if binned else np.zeros_like(below)
        numbers = _numbers(release.domains[c]) if release.columns[c] in public else None
        if numbers is not None:
            order = np.argsort(numbers, kind="stable")
            lower, upper = codebook_range(mean[:-1][order], std[:-1][order])
            cut = np.zeros(len(order), dtype=bool)
            cut[order[:lower]] = True
            cut[order[upper + 1 :]] = True
            mask[:-1] |= cut & np.isfinite(std[:-1])
        mask[-1] = below[-1] and not (c in empties and empties[c] >= z * empty_stds[c])
        if mask.any() and not mask.all():
            out[c] = mask
    return out


RANGE_DRIFT = 0.5
"""The reference value k of :func:`codebook_range`'s CUSUM, in noise stds per cell (Page 1954)."""
RANGE_LIMIT = 6.0
"""The decision limit h of :func:`codebook_range`'s CUSUM, in noise stds: with k = 0.5, a run of empty cells
raises a false alarm once in about 2,600 cells (the average run length of a one-sided CUSUM, Siegmund's
approximation: (exp(2 k b) - 2 k b - 1) / (2 k^2), b = h + 1.166), so a codebook's few dozen empty values are
passed over in most releases; h = 5 (once in 900 cells) opened ranges too early (docs/design.md section 4.8, "A
codebook's ends as measured")."""


def _numbers(values: tuple[str, ...]) -> np.ndarray | None:
    """The values of a codebook as float64 when every one is a finite number (``"1945.0"``, ``"7"``), else None."""
    try:
        out = np.array([float(v) for v in values], dtype=np.float64)
    except ValueError:
        return None
    return out if out.size and bool(np.isfinite(out).all()) else None


def codebook_range(mean: np.ndarray, std: np.ndarray) -> tuple[int, int]:
    """The measured range of an ordered codebook: the first and last cell where its records begin, by a
    one-sided CUSUM from each end (Page, "Continuous inspection schemes", Biometrika 41, 1954).

    From the lowest value up, S_i = max(0, S_(i-1) + y_i / s_i - k) with k = :data:`RANGE_DRIFT`; the first i
    with S_i > h (:data:`RANGE_LIMIT`) says records have begun, and they begin after the last cell where S was
    0. The same from the highest value down. Values between the ends keep their cells: one value's noise
    alone cannot tell a rare value from an empty one (a value test judges many rare values absent); the
    running sum finds where a thin tail begins (docs/design.md section 4.8, "A codebook's ends as measured").
    Post-processing of the noisy 1-way means.

    Args:
        mean: float64 (m,) the noisy 1-way means of the codebook's values in increasing order of value (the
            empty category left out).
        std: float64 (m,) their noise std (infinite: the cell is not measured; 0: a release without noise;
            either adds nothing, so a release without noise keeps its whole codebook).

    Returns:
        (lower, upper): the cells lower..upper (indices into ``mean``) hold the records; (0, m - 1) when no end
        stands out (nothing is cut).
    """
    # an unmeasured cell (std infinite) or an exact one (std 0) neither raises nor lowers the sum
    noisy = np.isfinite(std) & (std > 0)
    z = np.where(noisy, mean / np.where(noisy, std, 1.0), RANGE_DRIFT)

    def start(scores: np.ndarray) -> int:
        total, last_zero = 0.0, 0
        for i, value in enumerate(scores):
            total = max(0.0, total + float(value) - RANGE_DRIFT)
            if total == 0.0:
                last_zero = i + 1
            if total > RANGE_LIMIT:
                return last_zero
        return 0

    m = mean.shape[0]
    lower, upper = start(z), m - 1 - start(z[::-1])
    return (lower, upper) if lower <= upper else (0, m - 1)


def rest_empty_shares(release: Release, model: GraphicalModel, z: float = EMPTY_Z) -> dict[int, float]:
    """Per column whose release measures its empty cells, the probability that a drawn cell of its empty
    category is written empty (module docstring, stage 4); the others get a released value.

    With e the column's noisy empty count (:func:`measured_empty_counts`, noise std s) and r the model's
    expected count of the category (its records x the category's probability): 0 when e < z s (no evidence of
    an empty cell: none is written, the rare values' mass stays as released values); 1 when r - e < z
    sqrt(s^2 + s_r^2), s_r the std of the category's 1-way mean (no evidence of rare values: the category is
    written empty, in the contexts where the model puts it, as without empty counts); else min(1, e / r).
    Columns without a released value are left out (their category is all they have: written empty).

    Returns:
        {column index: probability in [0, 1]}; empty for releases without empty counts.
    """
    measured = measured_empty_counts(release)
    if measured is None:
        return {}
    counts, stds = measured
    means = one_way_means(release.measurements, release.columns)
    out = {}
    for c, e in counts.items():
        if not release.domains[c]:
            continue
        std = stds[c]
        r = float(model.project((release.columns[c],))[-1])
        s_r = float(means[c][1][-1]) if c in means else 0.0
        s_r = s_r if np.isfinite(s_r) else 0.0
        if e < z * std or r <= 0:
            out[c] = 0.0
        elif r - e < z * float(np.hypot(std, s_r)):
            out[c] = 1.0
        else:
            out[c] = min(1.0, e / r)
    return out


def _released_given_others(
    model: GraphicalModel, c: int, rows: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """For each record of ``rows`` (int codes (k, d), domain order), a released value of column ``c`` drawn from
    the model's conditional distribution given the record's other columns, the empty category left out.

    Under p(x) proportional to exp(sum_q theta_q(x_q)) (docs/design.md section 4.8), p(x_c | x_-c) is
    proportional to exp of the sum of the potentials of the cliques q that contain c, evaluated at the record's
    codes: one fancy-index per clique, chunked to :data:`_DECODE_CELLS` cells.
    """
    name = model.domain.names[c]
    size = model.domain.sizes[c]
    released = size - 1
    factors = [
        (np.moveaxis(theta, clique.index(name), -1), [model.domain.index(x) for x in clique if x != name])
        for clique, theta in model.potentials.items()
        if name in clique
    ]
    out = np.empty(rows.shape[0], dtype=np.int64)
    step = max(1, _DECODE_CELLS // size)
    for start in range(0, rows.shape[0], step):
        block = rows[start : start + step]
        logits = np.zeros((block.shape[0], size))
        for table, cols in factors:
            logits += table[tuple(block[:, j] for j in cols)]
        logits = logits[:, :released]
        top = logits.max(axis=1, keepdims=True)
        weights = np.exp(logits - np.where(np.isfinite(top), top, 0.0))
        weights = np.where(np.isfinite(weights), weights, 0.0)
        cum = np.cumsum(weights, axis=1)
        total = cum[:, -1:]
        cum = np.where(
            total > 0, cum / np.where(total > 0, total, 1.0), np.arange(1, released + 1) / released
        )
        u = rng.random(size=(block.shape[0], 1))
        out[start : start + block.shape[0]] = np.minimum((cum <= u).sum(axis=1), released - 1)
    return out


def _decode(
    codes: np.ndarray,
    empty: np.ndarray,
    model: GraphicalModel,
    shares: dict[int, float],
    rng: np.random.Generator,
) -> np.ndarray:
    """Codes (n, d) of the model to output codes, -1 = empty (module docstring, stage 4): in the columns of
    ``shares`` a cell of the empty category is empty with its probability (systematically: floor(k p + U) of
    the k such cells, chosen uniformly), the others get a released value given the record's other columns;
    elsewhere the empty category is empty."""
    out = np.where(codes == empty, -1, codes)
    for c in sorted(shares):
        rows = np.flatnonzero(codes[:, c] == empty[c])
        k = rows.shape[0]
        if k == 0:
            continue
        nulls = min(k, int(np.floor(k * shares[c] + rng.random())))
        filled = rows[rng.permutation(k)[nulls:]]
        if filled.shape[0]:
            out[filled, c] = _released_given_others(model, c, codes[filled], rng)
    return out


def without_absent(
    domain: Domain, measurements: list[Measurement], absent: dict[int, np.ndarray]
) -> tuple[Domain, list[Measurement], dict[int, np.ndarray]]:
    """The domain and measurements with the cells of ``absent`` taken out (module docstring, stage 3).

    A model over the smaller domain holds no mass there by construction (structural zeros), and its fit puts
    that mass where the measurements say; the noisy cells taken out are not fitted.

    Args:
        domain: the measurement domain (:func:`release_domain`).
        measurements: its measured marginals.
        absent: per column index, a boolean mask over its cells (:func:`absent_cells`; never all True).

    Returns:
        (domain, measurements, kept): kept maps each column of ``absent`` to the int64 indices, in the full
        domain, of its cells left (in order): a code k of the smaller domain is the cell kept[c][k].
    """
    kept = {c: np.flatnonzero(~mask) for c, mask in absent.items()}
    if not kept:
        return domain, measurements, kept
    index = {name: i for i, name in enumerate(domain.names)}
    sizes = tuple(len(kept[c]) if c in kept else size for c, size in enumerate(domain.sizes))
    out = []
    for m in measurements:
        values, mask = m.values, m.mask
        for axis, name in enumerate(m.clique):
            cells = kept.get(index[name])
            if cells is not None:
                values = np.take(values, cells, axis=axis)
                mask = None if mask is None else np.take(mask, cells, axis=axis)
        out.append(Measurement(m.clique, values, m.std, mask))
    return Domain(domain.names, sizes), out, kept


def release_domain(release: Release) -> Domain:
    """The measurement domain of a release: its columns, each with its released values plus the empty category."""
    return Domain(release.columns, release.measurement_sizes())


def release_measurements(release: Release) -> list[Measurement]:
    """The release's measured marginals (estimator measurements: cliques of column names, in table order).

    Raises:
        ReleaseError: the release has no measured marginal.
    """
    if not release.measurements:
        raise ReleaseError(
            f"the pgm synthesizer samples releases with measured marginals (the workload mechanism); this "
            f"release of the {release.manifest.mechanism!r} mechanism has none: use one of its own synthesizers"
        )
    return list(release.measurements)


def protected_records_variance(release: Release) -> float:
    """Var(n') of the discrete Laplace noise of the protected number of records, 2 e^-eps / (1 - e^-eps)^2 at
    eps = epsilon_N, in records^2 (docs/design.md section 2.4); 0 when the manifest has no share
    ``number_of_records`` (an SDS file: no variance known)."""
    try:
        eps = release.manifest.budget.share("number_of_records").epsilon
    except Exception:  # noqa: BLE001 - a release without that share: no variance known
        return 0.0
    return discrete_laplace_variance(float(eps or 0.0))


def number_of_records(release: Release, measurements: Sequence[Measurement]) -> tuple[float, float]:
    """(N, Var(N)): the number of records the release estimates, in records, from two independent DP outputs: n'
    (variance :func:`protected_records_variance`) and the inverse-variance mean T of the measured tables' sums
    (:func:`~spark_dpsynth.estimation.estimate_total`, :func:`~spark_dpsynth.estimation.total_variance`), by their
    inverse-variance mean (docs/design.md section 4.8, "Synthesizer"): at epsilon 1, n''s std is 283 records
    (epsilon_N = 0.005), T's a few tens on a table of ten 1-way tables. n' alone (variance 0: its own noise is not
    known) when the release has no whole measured table, T alone when it has no n'. Post-processing of the
    release; N >= 1.

    Args:
        release: the release (its n' and its budget's share ``number_of_records``).
        measurements: its measured marginals (:func:`release_measurements`).
    """
    n = release.manifest.protected_number_of_records
    var_n = protected_records_variance(release) if n is not None else 0.0
    try:
        total, var_total = estimate_total(measurements), total_variance(measurements)
    except InvalidParameterError:  # no whole measured table
        return (float(n), var_n) if n is not None else (1.0, 0.0)
    if n is None:
        return total, var_total
    if var_n <= 0.0:
        return float(n), 0.0
    weight_n, weight_total = 1.0 / var_n, 1.0 / var_total
    mean = (weight_n * float(n) + weight_total * total) / (weight_n + weight_total)
    return max(mean, 1.0), 1.0 / (weight_n + weight_total)


def fit_release(
    release: Release, *, iterations: int = FIT_ITERATIONS, max_cells: int | None = None
) -> GraphicalModel:
    """The graphical model estimated from the release's measured marginals (module docstring, stage 1).

    Args:
        release: a release with measured marginals.
        iterations: mirror-descent iterations, >= 0.
        max_cells: the largest junction tree allowed, in float cells; None: no limit.

    Returns:
        The model over :func:`release_domain` (``model.fit_report`` says how the fit went).

    Raises:
        ReleaseError: the release has no measured marginal.
        ModelSizeError: the junction tree of the measured cliques needs more than ``max_cells`` cells.
    """
    return estimate(
        release_domain(release), release_measurements(release), iterations=iterations, max_cells=max_cells
    )


@dataclass(frozen=True)
class SamplingModel:
    """What :func:`sample_model` draws from: the fitted model and how its codes map to the release's (module
    docstring, stages 1, 3 and 4). Built by :func:`fit_for_sampling` on the driver; travels to the tasks in their
    closure (its beliefs: as many floats as its junction tree's size)."""

    model: GraphicalModel
    """The model over the measurement domain less the absent cells (conditioned on any evidence)."""
    kept: dict[int, np.ndarray]
    """Per column with absent cells, the indices in the release's measurement domain of its cells kept
    (:func:`without_absent`)."""
    empty: np.ndarray
    """int64 (d,): each column's empty category code in the model's domain, -2 where it is absent."""
    shares: dict[int, float]
    """Per column, the probability a drawn empty-category cell is written empty (:func:`rest_empty_shares`)."""
    records: float
    """The number of records the release estimates (:func:`number_of_records`): the default synthetic size."""

    def in_model_domain(self, columns: tuple[str, ...], cells: np.ndarray) -> np.ndarray:
        """A table over the release's measurement cells of ``columns`` (axes in that order) restricted to the
        model's cells (the absent cells taken out)."""
        out = cells
        for axis, name in enumerate(columns):
            kept = self.kept.get(self.model.domain.index(name))
            if kept is not None:
                out = np.take(out, kept, axis=axis)
        return out

    def condition(self, evidence: dict[tuple[str, ...], np.ndarray]) -> SamplingModel:
        """The same with the model conditioned on ``evidence`` (clique -> bool table over the release's
        measurement cells, True where a record may be; :meth:`GraphicalModel.condition`): sampled, it draws the
        evidence's records only (docs/design.md section 4.8, "Conditions and declared rules").

        Raises:
            InvalidParameterError: the evidence has probability zero under the model.
        """
        if not evidence:
            return self
        cells = {c: self.in_model_domain(c, a) for c, a in evidence.items()}
        model = self.model.condition(cells)
        return dataclasses.replace(self, model=model)

    def probability(self, columns: tuple[str, ...], cells: np.ndarray) -> float:
        """The model's probability of the cells ``cells`` (a float table of weights in [0, 1] over the release's
        measurement cells of ``columns``; a bool table for a set of cells): sum of the model's expected counts
        times the weights, over its number of records."""
        weights = self.in_model_domain(columns, np.asarray(cells, dtype=np.float64))
        counts = self.model.project(columns)
        return float(min(1.0, max(0.0, float(np.sum(counts * weights)) / self.model.total)))


def fit_for_sampling(
    release: Release,
    *,
    structural_zeros: dict[tuple[str, ...], np.ndarray] | None = None,
    progress: Callable[[str], None] | None = None,
) -> SamplingModel:
    """Fit the model the ``pgm`` synthesizer samples (module docstring, stages 1, 3 and 4), on the driver.

    Args:
        release: a release with measured marginals.
        structural_zeros: clique (column names) -> bool table over the release's measurement cells of its columns
            (released values, then the empty category), True where a record may be: the other cells are
            structural zeros of the fit (declared rules, docs/design.md section 4.8, "Conditions and declared
            rules"); None: none.
        progress: optional callback receiving short progress messages.

    Raises:
        ReleaseError: the release has no measured marginal.
    """
    absent = absent_cells(release)
    no_empty = sum(bool(mask[-1]) for mask in absent.values())
    no_values = sum(int(mask[:-1].sum()) for mask in absent.values())
    if absent:
        report(
            progress,
            log,
            f"pgm: {no_empty} of {len(release.columns)} columns measured without empty cells, {no_values} values "
            f"or bins measured absent (below {EMPTY_Z:g} noise stds, or beyond a codebook's measured range): "
            f"the model is fitted without them",
        )
    measured = release_measurements(release)
    domain, measurements, kept = without_absent(release_domain(release), measured, absent)
    zeros = None
    if structural_zeros:
        index = {name: i for i, name in enumerate(domain.names)}
        zeros = {}
        for clique, cells in structural_zeros.items():
            for axis, name in enumerate(clique):
                if index[name] in kept:
                    cells = np.take(cells, kept[index[name]], axis=axis)
            zeros[clique] = cells
        report(progress, log, f"pgm: declared rules fitted as structural zeros over {len(zeros)} column sets")
    report(progress, log, f"pgm: fitting a graphical model to {len(measurements)} measured marginals")
    started = time.perf_counter()
    model = estimate(domain, measurements, iterations=FIT_ITERATIONS, structural_zeros=zeros)
    fit = model.fit_report
    assert fit is not None  # estimate() always reports
    report(
        progress,
        log,
        f"pgm: fitted in {time.perf_counter() - started:.1f} s ({fit.iterations} iterations, "
        f"{len(model.cliques)} junction-tree cliques, {fit.cells} cells)",
    )
    # the empty category's code in the model's domain (the last cell); -2 (never drawn) where it is absent
    empty = np.array(
        [-2 if c in absent and absent[c][-1] else size - 1 for c, size in enumerate(domain.sizes)],
        dtype=np.int64,
    )
    shares = {
        c: p for c, p in rest_empty_shares(release, model).items() if c not in absent or not absent[c][-1]
    }
    if shares:
        writes = sum(p > 0 for p in shares.values())
        report(
            progress,
            log,
            f"pgm: the empty category of {len(shares)} columns decoded as measured: empty at the measured rate in "
            f"{writes}, a released value (given the record's other columns) otherwise",
        )
    return SamplingModel(model, kept, empty, shares, number_of_records(release, measured)[0])


def sample_model(
    fitted: SamplingModel,
    release: Release,
    params: SynthesisParams,
    spark: SparkSession,
    *,
    progress: Callable[[str], None] | None = None,
) -> DataFrame:
    """Sample a fitted :class:`SamplingModel` on the executors (module docstring, stage 2): the rows of
    :func:`sample`, from a model fitted once (:func:`fit_for_sampling`, conditioned or not).

    Args:
        fitted: the model.
        release: the release it was fitted to (its columns and released values decode the codes).
        params: as :func:`sample`.
        spark: the session.
        progress: optional callback receiving short progress messages.

    Returns:
        As :func:`sample`.
    """
    model, kept, empty, shares = fitted.model, fitted.kept, fitted.empty, fitted.shares
    target = params.target_number_of_records
    if target is None:
        target = max(1, round(fitted.records * (params.aggregate_counts_scale_factor or 1.0)))
    seed = params.seed if params.seed is not None else secrets.randbits(63)

    block_rows = BLOCK_ROWS
    blocks = -(-target // block_rows)

    def draw(part: int, parts: int) -> Iterator[np.ndarray]:
        """The partition's rows, block by block, as int32 codes (n_b, d) in random order, -1 = empty."""
        for b in range(part * blocks // parts, (part + 1) * blocks // parts):
            n_block = min(block_rows, target - b * block_rows)
            rng = np.random.default_rng(np.random.SeedSequence([seed, b], spawn_key=(_DRAW_STREAM,)))
            codes = _decode(model.sample(n_block, rng, rounded=True), empty, model, shares, rng)
            for c, cells in kept.items():  # the model's codes to the release's (-1, empty, stays)
                codes[:, c] = np.where(codes[:, c] >= 0, cells[np.maximum(codes[:, c], 0)], -1)
            yield codes[rng.permutation(n_block)].astype(np.int32)

    report(progress, log, f"pgm: sampling {target} records")
    return sample_partitions(
        spark,
        draw,
        columns=release.columns,
        domains=release.domains,
        seed=seed,
        partitions=params.partitions,
        label="pgm",
        permute=False,
    )


def sample(
    release: Release,
    params: SynthesisParams,
    spark: SparkSession,
    *,
    release_dir: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> DataFrame:
    """Sample a synthetic table from a graphical model fitted to the release's measured marginals.

    Args:
        release: a release with measured marginals (``release.measurements``).
        params: ``target_number_of_records`` (default: the release's estimate of its number of records,
            :func:`number_of_records`, times ``aggregate_counts_scale_factor`` when set), ``partitions`` P (default: the session's parallelism) and ``seed`` (None: drawn
            from ``secrets``); the other fields are ignored.
        spark: the session (DataFrame API only: Spark Connect works).
        release_dir: unused (the release holds everything it reads).
        progress: optional callback receiving short progress messages.

    Returns:
        DataFrame with the columns ``release.columns``, nullable strings (null = the empty category), exactly the
        target number of rows in P partitions; the same seed gives the same rows in the same order (partitions
        read in order) whatever P.

    Raises:
        InvalidParameterError: ``params`` is not a SynthesisParams.
        ReleaseError: the release has no measured marginal.
    """
    if not isinstance(params, SynthesisParams):
        raise InvalidParameterError(f"params must be a SynthesisParams, got {type(params).__name__}")
    return sample_model(
        fit_for_sampling(release, progress=progress), release, params, spark, progress=progress
    )
