"""The ``workload`` mechanism: DP-selected marginals (AIM rounds or the MST preset), measured on Spark.

Instead of every column subset of length k <= R (the marginals mechanism, whose noise and work grow as
C(d, k)), it measures only the cliques a DP selection chooses, as full noisy tables over a fixed domain, for a
graphical-model estimator to fit (:mod:`spark_dpsynth.estimation`, the ``pgm`` synthesizer). The steps
(docs/design.md section 4.7):

1. **Domain discovery.** Columns with public bins have their bin labels as domain, columns with a public
   domain (a codebook, ``DataConfig.domains``) its values; neither costs budget. The values of the other
   columns are private: the marginals mechanism's 1-way step releases them (every value present is a
   candidate; Delta_1 = the number of such columns, or with multi-value columns a DP percentile of attributes
   per record; exact discrete Gaussian noise of std sigma_1 sqrt(Delta_1); the threshold rho_1 that pays
   delta/2; Gopi, Mahabadi, Yekhanin, "Differentially Private Marginals", Algorithm 1). Without multi-value
   columns each discovered column's number of empty cells is released with them, noised alike and without
   threshold (each record adds 1 to exactly Delta_1 cells of the values-and-empties vector: no more budget;
   manifest ``empty_counts``). The fixed domain of column j is its released values plus one empty category
   (empty cells and unreleased values). Its share of rho grows with the number of columns it covers
   (``WorkloadParams.domain_share``); columns the DP profile has settled (codes whose standing values hold
   nearly all their records, :func:`settled_columns`) get a quarter of another column's rho, in a second group
   with its own noise and threshold; with ``discovery_measurements`` its released counts are passed on as
   partial 1-way measurements (post-processing: no more budget; the empty category unmeasured).
2. **Encoding.** The records are encoded once to codes over the fixed domain (``mapInArrow``, cached
   patterns with their multiplicity); every record adds 1 to exactly one cell of a clique's table, so a table
   has L2 sensitivity 1 (add/remove one record, or one person with a privacy unit: their rows are one record).
3. **Selection and measurement** (:func:`select_and_measure`: :mod:`._aim`, :mod:`._mst`). AIM (McKenna, Mullins, Sheldon, Miklau, VLDB 2022, Algorithm 1): the 1-way
   tables first, then rounds that choose one clique by the exponential mechanism over candidates scored
   w_r (||M_r(D) - M_r(p_hat)||_1 - sqrt(2/pi) sigma n_r) and measure it with discrete Gaussian noise; the
   per-round budget grows fourfold (sigma halves, epsilon doubles) when a measurement changed the estimate
   less than its expected noise, and the last round spends what is left. MST (McKenna, Miklau, Sheldon,
   "Winning the NIST Contest", 2021): rho/3 for the 1-way tables, rho/3 for d - 1 exponential-mechanism
   choices of a maximum spanning tree of 2-way cliques scored against independent columns, rho/3 to measure
   them. True candidate marginals are counted on Spark in bounded passes (:mod:`._cliques`, :mod:`._spark_backend`) and cached on the
   driver within ``max_candidate_cells``.

Privacy: zCDP composition (Bun & Steinke 2016, Lemma 1.7) of the discovery (the percentile's epsilon_Q^2/2,
the counts' 1/(2 sigma_1^2)), every measurement (1/(2 sigma^2): discrete Gaussian, Canonne, Kamath, Steinke
2020, Theorem 14) and every exponential-mechanism choice (epsilon^2/8: the bounded-range analysis of Cesar and
Rogers 2021, as in AIM), converted once to (epsilon - epsilon_N, delta/2)-DP; the discrete Laplace count of
records spends epsilon_N, the threshold rho_1 delta/2. The manifest lists every round's rho and choice; no true
count, score or candidate statistic is written or logged.

One file over 800 lines: the workload mechanism's steps in order (domains, selection, measurement, manifest); its
selection and counting are their own modules.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import logging
import math
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spark_dpsynth._progress import Progress, report
from spark_dpsynth.errors import InvalidParameterError
from spark_dpsynth.estimation.domain import Measurement
from spark_dpsynth.mechanisms._aim import aim
from spark_dpsynth.mechanisms._aim import order_key as candidate_order_key
from spark_dpsynth.mechanisms._cliques import CliqueCounter, clique_cells
from spark_dpsynth.mechanisms._discovery import (
    draw_protected_n,
    noisy_threshold,
    protected_n_of,
    release_accountant,
)
from spark_dpsynth.mechanisms._mst import mst
from spark_dpsynth.mechanisms._selection import TrueTables, all_cliques
from spark_dpsynth.mechanisms.prelude import prepare_table
from spark_dpsynth.params import Accounting, DataConfig, Selection, WorkloadParams
from spark_dpsynth.privacy.accounting import (
    Accountant,
    delta_from_protected_n,
    profile_mechanism,
    rho_1_threshold_discrete,
)
from spark_dpsynth.privacy.budget import Budget
from spark_dpsynth.privacy.noise import NoiseSource
from spark_dpsynth.registry import Fitted, MechanismContext, synthesizers_for
from spark_dpsynth.release.core import Marginal, Release, one_way_means, sorted_marginal
from spark_dpsynth.release.manifest import FORMAT_VERSION, discovery_noise_std

__all__ = ["fit_workload", "select_and_measure", "check_plan", "run", "Discovery", "Plan"]

log = logging.getLogger(__name__)

_PERCENTILE_SHARE = 0.05
"""Share of the discovery's rho spent on the DP percentile of Delta_1 (only with multi-value columns)."""

SETTLED_SHARE = 0.99
"""A column is *settled* when its DP profile found it a code whose standing values hold at least this share of
its non-empty records (``column_meanings``' ``point_share``, post-processing of the profile): what the
discovery can still find there holds at most the rest (docs/design.md section 4.7, "Settled columns")."""
SETTLED_RHO_FACTOR = 0.25
"""A settled column's per-column rho in the discovery, relative to another column's: its counts get twice the
noise std, and the rho saved goes to the columns whose values the discovery must find."""


# ------------------------------------------------------------------------------------------------ planner


@dataclass(frozen=True)
class Plan:
    """The work of a workload release, estimated from public values and the DP 1-way domain sizes."""

    columns: int
    """d, the number of attribute columns measured."""
    candidates: int
    """Candidate cliques (size <= R, at most ``max_clique_cells`` cells)."""
    pruned: int
    """Cliques left out because their table exceeds ``max_clique_cells``."""
    one_way_cells: int
    """Cells of the d 1-way tables (each measured first)."""
    largest_candidate_cells: int
    """Cells of the largest candidate table."""

    def to_json(self) -> dict[str, int]:
        return {
            "columns": self.columns,
            "candidates": self.candidates,
            "pruned_by_size": self.pruned,
            "one_way_cells": self.one_way_cells,
            "largest_candidate_cells": self.largest_candidate_cells,
        }


def check_plan(sizes: Sequence[int], params: WorkloadParams) -> Plan:
    """Estimate the work from the domain sizes (public after discovery) and stop when it cannot fit.

    The candidate cliques are every subset of at most R columns whose table has at most ``max_clique_cells``
    cells; they are counted from the sizes without being enumerated when there are many (only the counts of
    cliques by size matter for the plan).

    Raises:
        InvalidParameterError: the 1-way tables alone exceed ``max_model_cells`` (the model could not even hold
            them), naming what to change.
    """
    d = len(sizes)
    one_way = int(sum(sizes))
    if one_way > params.max_model_cells:
        raise InvalidParameterError(
            f"the {d} one-way tables need {one_way:,} model cells, more than max_model_cells "
            f"({params.max_model_cells:,}); raise [workload] max_model_cells or bin the widest columns"
        )
    r = min(params.reporting_length, d)
    total = sum(math.comb(d, k) for k in range(1, r + 1))
    if total <= 200_000:
        kept = [c for c in all_cliques(d, r) if clique_cells(sizes, c) <= params.max_clique_cells]
        largest = max((clique_cells(sizes, c) for c in kept), default=1)
        return Plan(d, len(kept), total - len(kept), one_way, largest)
    # Too many to enumerate: the pruning is estimated from the largest sizes (an upper bound on the cells).
    top = sorted(sizes, reverse=True)
    largest = min(params.max_clique_cells, int(np.prod(top[:r], dtype=np.float64)))
    return Plan(d, total, 0, one_way, largest)


def select_and_measure(
    counter: CliqueCounter,
    names: tuple[str, ...],
    rho: float,
    params: WorkloadParams,
    acct: Accountant,
    *,
    progress: Progress | None = None,
    order_key: bytes | None = None,
    known: Sequence[Measurement] = (),
) -> tuple[list[Measurement], list[dict[str, Any]], list[dict[str, Any]]]:
    """Choose and measure cliques under DP with a budget ``rho`` (the selection core, on any counter).

    Args:
        counter: the records over the fixed domain (Spark, or NumPy in tests); it returns true tables only to
            this function, which releases nothing but noisy tables and exponential-mechanism choices.
        names: column names (for the manifest), in domain order.
        rho: the zCDP budget of the selection and measurements (spent in ``acct``).
        params: ``selection`` (AIM or MST: :meth:`Selection.resolve` decides AUTO once, before), ``reporting_length``,
            caps, rounds.
        acct: the accountant (its rho already set); every round's shares are spent in it and every draw is
            made through it.
        progress: optional callback, one message per stage.
        order_key: the key of the public pseudo-random candidate order (default: fresh from ``secrets``).
        known: measurements already released and paid for (the discovery's partial 1-way tables): used as
            measurements by the estimate and the scores (post-processing), not returned, not charged.

    Returns:
        (measured marginals, their manifest entries ``{"columns", "std", "rho", "round"}``, the rounds'
        manifest entries).

    Raises:
        InvalidParameterError: ``params.selection`` is AUTO.
    """
    if params.selection is Selection.AUTO:
        raise InvalidParameterError(
            "select_and_measure runs AIM or MST: resolve the selection first (Selection.resolve, from DP figures)"
        )
    sizes = tuple(int(s) for s in counter.sizes)
    key = order_key if order_key is not None else secrets.token_bytes(16)
    tables = TrueTables(counter, params.max_candidate_cells, params.max_cells_per_pass)
    if params.selection is Selection.MST:
        state = mst(tables, sizes, names, rho, params, acct, progress, known)
    else:
        state = aim(tables, sizes, names, rho, params, acct, progress, key, known)
    return state.measurements, state.entries, state.rounds


# ---------------------------------------------------------------------------------------------- on Spark


@dataclass(frozen=True)
class Discovery:
    """The public outcome of the 1-way domain discovery (the manifest's ``domain_discovery``)."""

    domains: tuple[tuple[str, ...], ...]
    """Per column, its released (or public) values, sorted for discovered columns, in bin order for binned."""
    kept: tuple[int, ...]
    """Indices of the columns kept (derived multi-value columns that released nothing are dropped)."""
    counts: dict[tuple[int, int], int]
    """(column, value code) -> noisy count of the released value (discovered columns only)."""
    manifest: dict[str, Any]
    """Sensitivity, std, threshold, rho, the discovered and the public-domain columns, the empty counts."""
    _true_empty: dict[str, int] = field(default_factory=dict, repr=False)
    """Private until :meth:`release_empty_counts`: column name -> true number of its empty cells (discovered
    columns, none with multi-value columns). In memory only, never logged or written."""

    def release_empty_counts(self, acct: Accountant) -> None:
        """Add the discovery's noise (the second draw of its share ``discovery_counts``, std ``noise_std``, or of
        ``discovery_counts_settled`` for settled columns, no threshold; docs/design.md section 4.7, step 1) to
        the true empty counts, write them to the manifest's ``empty_counts`` and drop the true ones."""
        if not self._true_empty:
            return
        settled = set((self.manifest.get("settled") or {}).get("columns", ()))
        out: dict[str, int] = {}
        for share, group, key in (
            ("discovery_counts", [c for c in self._true_empty if c not in settled], self.manifest),
            (
                "discovery_counts_settled",
                [c for c in self._true_empty if c in settled],
                self.manifest.get("settled"),
            ),
        ):
            if not group:
                continue
            true = np.array([self._true_empty[name] for name in group], dtype=np.int64)
            noisy = acct.gaussian(share, true, math.sqrt(int(key["sensitivity"])))
            del true
            out.update({name: int(e) for name, e in zip(group, noisy.tolist(), strict=True)})
        self.manifest["empty_counts"] = {name: out[name] for name in self._true_empty}
        self._true_empty.clear()


def fit_workload(
    df,  # noqa: ANN001 - pyspark.sql.DataFrame
    params: WorkloadParams | None = None,
    data_config: DataConfig | None = None,
    *,
    budget: Budget | None = None,
    noise: NoiseSource | None = None,
    progress: Progress | None = None,
    protected_n: int | None = None,
    acct: Accountant | None = None,
) -> Release:
    """Release DP-selected marginals of a table (see the module docstring; docs/design.md section 4.7).

    Args:
        df: the sensitive table (any schema); a row is a record, or with ``data_config.privacy_unit`` the rows
            of one person are one record.
        params: the shares of the budget, the selection (``aim`` or ``mst``), the reporting length R and the caps.
        data_config: columns, empty values, public bins, privacy unit, multi-value columns, record limit.
        budget: the release's :class:`~spark_dpsynth.privacy.budget.Budget` when no ``acct`` is given (default
            epsilon 4, delta derived from n').
        noise: the noise source of a new accountant (default production noise, or test-mode noise with the
            budget's seed); ignored with ``acct``.
        progress: optional callback, one message per stage (never a statistic of the data).
        protected_n: n' when the caller has already drawn it through ``acct`` at this release's epsilon_N
            (:func:`spark_dpsynth.mechanisms.choice.fit_auto`), >= 1; None draws it here.
        acct: the run's :class:`~spark_dpsynth.privacy.accounting.Accountant`, through which every share is
            spent and every draw made (it holds the budget); default a new one for ``budget``
            (:func:`~spark_dpsynth.mechanisms._discovery.release_accountant`).

    Returns:
        The :class:`~spark_dpsynth.release.core.Release`: ``measurements`` (the full noisy tables of the chosen
        cliques over the released 1-way domain plus an empty category), 1-tuples of the released values (for
        the evaluation and the ``independent`` synthesizer), a manifest with the budget, every round and every
        measurement.

    Raises:
        SchemaError: a configured column is not in ``df`` (before any data is read).
        InvalidParameterError: the reporting length exceeds the number of columns (before any data is read);
            the plan does not fit (after discovery, before any clique is counted), naming what to change.

    Privacy:
        (epsilon, delta)-DP per record (or person): see the module docstring and docs/design.md section 4.7.
    """
    from pyspark.sql import functions as F

    from spark_dpsynth.data.prepare import check_privacy_units, expand_multi_value, resolve_columns
    from spark_dpsynth.mechanisms._discovery import distinct_values, public_domains
    from spark_dpsynth.mechanisms._manifest import (
        data_manifest,
        release_key,
        report_high_cardinality,
        report_identifiers,
        versions,
    )
    from spark_dpsynth.mechanisms._spark_backend import SparkBackend

    params = params if params is not None else WorkloadParams()
    data_config = data_config if data_config is not None else DataConfig()
    config = resolve_columns(df.columns, data_config)
    assert config.columns is not None
    if not config.multi_value:
        params = _shortened(params, len(config.columns), "attribute columns", progress)
    acct = release_accountant(budget, noise, acct)
    protected_n = protected_n_of(protected_n, acct)
    started = time.perf_counter()
    report(progress, log, f"workload ({params.selection.value}): {len(config.columns)} columns")
    from spark_dpsynth.profile import identifiers_manifest

    identifiers = identifiers_manifest(df.schema, config)  # schema only; never measured (design 2.8)
    report_identifiers(identifiers, progress)
    # Column types and bins, as the marginals mechanism (docs/design.md section 2.8).
    table = prepare_table(
        df,
        config,
        acct,
        _WorkloadShares(params, acct),
        stage="workload",
        progress=progress,
        protected_n=protected_n,
    )
    config = table.config
    prepared = table.records
    assert config.columns is not None
    names: tuple[str, ...] = config.columns
    derived: dict[str, tuple[str, str]] = {}
    cached = prepared = prepared.persist() if config.merges_rows else prepared
    counter = None
    backend = None
    try:
        if config.privacy_unit is not None:
            check_privacy_units(prepared, config)
        if config.multi_value:
            values = {c: distinct_values(prepared, c) for c in config.multi_value}  # private, driver only
            prepared, names, derived = expand_multi_value(prepared, config, values)
            del values
        d = len(names)
        positional = tuple(f"_a{j}" for j in range(d))
        prepared = prepared.select(
            *[F.col(f"`{c}`").alias(p) for c, p in zip(names, positional, strict=True)]
        )
        public = public_domains(names, config, derived)
        backend = SparkBackend(prepared, positional, public)
        discovery, protected_n, delta = _discover(
            backend,
            names,
            public,
            derived,
            config,
            params,
            acct,
            progress,
            release_key,
            protected_n=table.protected_n,
            settled=settled_columns(table.column_meanings, names),
        )
        kept = discovery.kept
        sizes = tuple(len(discovery.domains[j]) + 1 for j in kept)
        kept_names = tuple(names[j] for j in kept)
        if not kept:
            raise InvalidParameterError(
                "no column released a value: nothing to measure (a larger epsilon, fewer columns or public "
                "bins and domains release more)"
            )
        params = _shortened(params, len(kept), "released columns", progress)
        plan = check_plan(sizes, params)
        report(
            progress,
            log,
            f"workload: plan {plan.candidates:,} candidate cliques ({plan.pruned:,} pruned by size), "
            f"1-way cells {plan.one_way_cells:,}",
        )
        # Fixed-domain encoding of the patterns, cached: every later pass reads only this.
        luts = [discovery.manifest["_luts"][j] for j in kept]
        counter = backend.clique_counter(kept, luts, sizes)  # drops the backend's caches
        backend = None
        rho_rest = acct.rho - sum(s.rho or 0.0 for s in acct.ledger().shares)  # type: ignore[operator]
        relative_noise = Selection.relative_noise(len(kept), rho_rest, protected_n)
        chosen = params.selection.resolve(
            len(kept),
            params.max_rounds,
            relative_noise,
            params.aim_max_relative_noise,
            protected_n,
            params.aim_max_records,
        )
        if params.selection is Selection.AUTO:
            cap = (
                ""
                if params.aim_max_records is None
                else f" and that number at most {params.aim_max_records:,}"
            )
            report(
                progress,
                log,
                f"workload: selection auto -> {chosen.value} ({len(kept)} columns, relative 1-way noise "
                f"{relative_noise:.2g}; AIM when 4 x columns <= "
                f"max_rounds = {params.max_rounds}, or when the rounds' 1-way noise is at most "
                f"{params.aim_max_relative_noise:g} of the protected number of records{cap}; else MST)",
            )
        if chosen is Selection.MST and params.group_columns:
            log.warning(
                "workload: MST's tree does not read the workload: group_columns %s are not used (--selection aim "
                "chooses the tables within groups)",
                list(params.group_columns),
            )
        known, known_entries = (
            _discovery_measurements(discovery, kept, names, public, derived)
            if params.discovery_measurements
            else ([], [])
        )
        measurements, entries, rounds = select_and_measure(
            counter,
            kept_names,
            rho_rest,
            dataclasses.replace(params, selection=chosen),
            acct,
            progress=progress,
            order_key=candidate_order_key(acct.budget.seed),
            known=known,
        )
        measurements = [*known, *measurements]
        entries = [*known_entries, *entries]
        discovery.release_empty_counts(acct)
        # Identifier-like columns, from the released 1-way values and noisy empty counts only (docs/design.md
        # section 2.8): after the empty counts, the last draw of the release.
        empty = discovery.manifest.get("empty_counts") or {}
        high_cardinality = report_high_cardinality(
            {
                names[j]: (
                    len(discovery.domains[j]),
                    float(sum(n for (jj, _), n in discovery.counts.items() if jj == j))
                    + max(0, int(empty.get(names[j], 0))),
                )
                for j in range(d)
                if j not in public and names[j] not in derived
            },
            protected_n,
            progress,
        )
    finally:
        if backend is not None:
            backend.release_cache()
        if counter is not None:
            counter.release_cache()
        if cached is not None and config.merges_rows:
            cached.unpersist()

    domains = tuple(discovery.domains[j] for j in kept)
    ones = _one_tuples(kept_names, domains, measurements)
    disc = {k: v for k, v in discovery.manifest.items() if not k.startswith("_")}
    budget = acct.ledger()
    manifest: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "mechanism": "workload",
        "synthesizers": list(synthesizers_for("workload")),
        "budget": budget.to_json(),
        "created_utc": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "test_mode": acct.test_mode,
        "noise_sampler": acct.noise_name,
        "columns": list(kept_names),
        "privacy_unit": "record",
        "reporting_length": params.reporting_length,
        "epsilon": acct.epsilon,
        "delta": float(delta),
        "rho": float(acct.rho or 0.0),
        "accounting": acct.accounting.value,
        "epsilon_n": acct.share("number_of_records").epsilon,
        "selection": chosen.value,
        "selection_relative_noise": relative_noise,
        "protected_number_of_records": int(protected_n),
        "domain_discovery": disc,
        "plan": plan.to_json(),
        "rounds": rounds,
        "measurements": entries,
        "released_tuples": {"1": len(ones)},
        "parameters": {
            **acct.budget.parameters(),
            "reporting_length": params.reporting_length,
            "selection": params.selection.value,
            "group_columns": list(params.group_columns),
            "domain_rho_proportion": params.domain_rho_proportion,
            "selection_rho_proportion": params.selection_rho_proportion,
            "rounds": params.rounds,
            "max_rounds": params.max_rounds,
            "aim_join_columns": params.aim_join_columns,
            "aim_max_relative_noise": params.aim_max_relative_noise,
            "aim_max_records": params.aim_max_records,
            "max_model_cells": params.max_model_cells,
            "max_clique_cells": params.max_clique_cells,
            "max_candidates_per_round": params.max_candidates_per_round,
            "max_candidate_cells": params.max_candidate_cells,
            "max_cells_per_pass": params.max_cells_per_pass,
            "estimation_iterations": params.estimation_iterations,
            "one_way_rho_proportion": params.one_way_rho_proportion,
            "discovery_measurements": params.discovery_measurements,
            "number_of_records_epsilon_proportion": params.number_of_records_epsilon_proportion,
            "percentile": params.percentile,
        },
        "versions": versions(),
    }
    manifest.update(data_manifest(config, identifiers))
    manifest["column_types"] = table.column_types
    manifest["high_cardinality"] = high_cardinality
    manifest["bins_rho"] = table.charged
    manifest["profile_columns"] = table.profiled
    manifest["column_meanings"] = table.column_meanings
    if derived:
        manifest["multi_value_columns"] = {
            c: {
                "column": derived[c][0],
                "value": derived[c][1],
                "delimiter": config.multi_value[derived[c][0]],
            }
            for c in kept_names
            if c in derived
        }
    release = Release(
        columns=kept_names,
        domains=domains,
        marginals={1: ones},
        manifest=manifest,
        measurements=tuple(measurements),
    )
    report(
        progress,
        log,
        f"workload: {len(measurements)} marginals measured in {len(rounds)} rounds, "
        f"{time.perf_counter() - started:.1f} s",
    )
    return release


@dataclass(frozen=True)
class _WorkloadShares:
    """The workload mechanism's share of the prelude (:class:`~spark_dpsynth.mechanisms.prelude.PreludeShares`):
    zCDP throughout. n' is drawn first (one count of the records, discrete Laplace with epsilon_N) so that delta
    and rho are known (:func:`_to_zcdp`); the text test's ``text_numbers`` is rho T_p, the profile's
    ``column_profile`` rho B_p (``bins_epsilon_proportion``) and the exact values take the profile's rho per
    column and a quarter of delta for their threshold (the discovery's threshold keeps the other quarter)."""

    params: WorkloadParams
    acct: Accountant
    unit: str = "rho"
    text_numbers_in_rho: bool = True
    domains: dict[str, object] = field(default_factory=dict)

    def protected_n(self, true_n: int) -> int:
        return draw_protected_n(true_n, self.params, self.acct)

    def rho(self, protected_n: int) -> float:
        return self.acct.rho if self.acct.rho is not None else _to_zcdp(self.acct, protected_n)

    def profile(self, types, need, protected_n):  # noqa: ANN001, ANN201 - see PreludeShares.profile
        from spark_dpsynth.mechanisms._profile import profile_parts, profile_sigma, profile_units

        rho_b = self.rho(protected_n) * self.params.bins_epsilon_proportion
        return self.acct.spend_rho(
            "column_profile",
            rho_b,
            profile_mechanism(len(need)),
            sigma=profile_sigma(rho_b, profile_units(types, need)),
            parts=profile_parts(types, need),
        )

    def exact_values(self, exact: int, need: int, charged: float, protected_n: int) -> float:
        from spark_dpsynth.mechanisms._profile import spend_exact_values

        rho_e = charged * exact / need
        assert self.acct.delta is not None
        spend_exact_values(self.acct, self.acct.delta / 4.0, rho=rho_e)
        return rho_e

    def no_exact_values(self) -> None:
        return None


def _to_zcdp(acct: Accountant, protected_n: int, threshold: bool = True) -> float:
    """Declare delta (given, or derived from n') and convert the rest of epsilon to the budget's rho once, by the
    exact conversion unless the budget names another accounting (docs/design.md section 2.3): the shares ``zcdp``
    and ``zcdp_conversion``, at delta/2 when a ``threshold`` may be drawn (the discovery's or the exact values'
    take the other half), else at the whole delta. Returns rho."""
    if acct.delta is None:
        acct.declare_delta(delta_from_protected_n(protected_n), acct.budget.delta_source)
    eps_rest = acct.spend_rest_of_epsilon("zcdp", "rho-zCDP mechanisms below, converted once")
    delta = acct.delta / 2.0 if threshold else acct.delta
    rho = acct.convert_to_rho(eps_rest, delta, Accounting.TIGHT_ZCDP)
    acct.spend_delta(
        "zcdp_conversion",
        delta,
        f"rho-zCDP -> (epsilon - epsilon_N, {'delta/2' if threshold else 'delta'})-DP",
    )
    return rho


def settled_columns(meanings: dict[str, dict[str, object]], names: Sequence[str]) -> frozenset[int]:
    """The columns the discovery measures at ``SETTLED_RHO_FACTOR`` of another's rho: codes of the DP profile
    whose standing values hold at least ``SETTLED_SHARE`` of their non-empty records (``meanings``: the
    manifest's ``column_meanings``, DP outputs only; docs/design.md section 4.7, "Settled columns")."""
    out = set()
    for j, name in enumerate(names):
        m = meanings.get(name) or {}
        share = m.get("point_share")
        if m.get("meaning") == "code" and m.get("source") == "dp_profile" and share is not None:
            if float(share) >= SETTLED_SHARE:  # type: ignore[arg-type]
                out.add(j)
    return frozenset(out)


def _discover(
    backend,  # noqa: ANN001 - a SparkBackend (._spark_backend) or a LocalBackend (tests)
    names: tuple[str, ...],
    public: dict[int, tuple[str, ...]],
    derived: dict[str, tuple[str, str]],
    config: DataConfig,
    params: WorkloadParams,
    acct: Accountant,
    progress: Progress | None,
    release_key,  # noqa: ANN001 - callable(seed) -> int
    protected_n: int | None = None,
    settled: frozenset[int] = frozenset(),
) -> tuple[Discovery, int, float]:
    """The 1-way domain discovery (the marginals mechanism's k = 1 step over the columns without public
    values), the protected number of records and delta; converts the rest of epsilon to rho in ``acct``
    (:func:`_to_zcdp`) unless the DP profile did.

    ``settled`` (public: from the DP profile, :func:`settled_columns`): columns measured in a second group at
    ``SETTLED_RHO_FACTOR`` of another column's rho, each group its own Gaussian mechanism (sensitivity the
    square root of its columns) and threshold (delta split by columns: a union bound over the groups); without
    multi-value columns only."""
    from spark_dpsynth.mechanisms import _counting
    from spark_dpsynth.mechanisms._counting import CandidateIndex

    d = len(names)
    dictionary = backend.dictionary()  # private (values present): only released values are ever written
    disc_cols = [j for j in range(d) if j not in public]
    index_cols = disc_cols if disc_cols else list(range(d))
    radix1 = np.array([len(v) for v in dictionary], dtype=np.int64)
    index = CandidateIndex.build(
        1,
        d,
        tuple(np.arange(len(v), dtype=np.int32) for v in dictionary),
        radix1,
        {(j,): np.arange(len(dictionary[j]), dtype=np.int64)[:, None] for j in index_cols},
    )
    report(
        progress, log, f"workload: discovering the values of {len(disc_cols)} columns without public values"
    )
    hist = backend.histogram(index)
    true_n = int(hist.sum())
    # Empty cells are measured (docs/design.md section 4.7, step 1) when no column is multi-value: each record
    # then holds exactly one value or "empty" in every discovered column. Private: kept in memory only, used once
    # below, never logged or written.
    measure_empty = bool(disc_cols) and not any(names[j] in derived for j in disc_cols)
    records_for_empty = true_n if measure_empty else 0
    if protected_n is None:  # else drawn by the prelude (prepare_table) or by the default's choice
        protected_n = draw_protected_n(true_n, params, acct)
    del true_n
    rho = acct.rho if acct.rho is not None else _to_zcdp(acct, protected_n, threshold=bool(disc_cols))
    assert acct.delta is not None
    delta = acct.delta
    luts: list[np.ndarray] = []
    domains: list[tuple[str, ...]] = []
    counts: dict[tuple[int, int], int] = {}
    true_empty: dict[int, int] = {}
    manifest: dict[str, Any] = {
        "public_columns": [names[j] for j in public],
        "public_domain_columns": [names[j] for j in public if names[j] in config.public_domains],
        "columns": [names[j] for j in disc_cols],
    }
    if disc_cols:
        share = params.domain_share(len(disc_cols))
        rho_disc = rho * share
        private = [j for j in disc_cols if names[j] in derived]
        n_single = len(disc_cols) - len(private)
        if private:
            # A record can hold many values of a multi-value column: Delta_1 is a DP percentile over the public
            # range 0..(single columns + max_multi_values x multi-value columns).
            top = n_single + config.max_multi_values * len(config.multi_value)
            rho_q = rho_disc * _PERCENTILE_SHARE
            eps_q = math.sqrt(2.0 * rho_q)
            full = np.zeros(top + 1, dtype=np.int64)
            full[: min(hist.shape[0], top + 1)] = hist[: top + 1]
            full[top] += hist[top + 1 :].sum()
            acct.spend_rho(
                "discovery_percentile",
                rho_q,
                "exponential mechanism (DP percentile of Delta_1)",
                epsilon=eps_q,
            )
            sensitivity = max(1, acct.quantile("discovery_percentile", full, params.percentile / 100.0))
            rho_counts = rho_disc - rho_q
        else:
            # Each record has at most one value per single-value column.
            sensitivity = len(disc_cols)
            rho_counts = rho_disc
        settled_cols = [] if private else [j for j in disc_cols if j in settled]
        if len(settled_cols) == len(disc_cols):
            settled_cols = []  # all settled: one group, as without
        n_main = sensitivity - len(settled_cols)
        weight = n_main + SETTLED_RHO_FACTOR * len(settled_cols)
        rho_main = rho_counts * n_main / weight
        what = "discrete Gaussian (1-way counts of the values present" + (
            ", and of each column's empty cells: L2 sensitivity sqrt(Delta_1) still)"
            if measure_empty
            else ")"
        )
        sigma1 = 1.0 / math.sqrt(2.0 * rho_main)
        acct.spend_rho(
            "discovery_counts",
            rho_main,
            what if not settled_cols else what + ", columns not settled by the DP profile",
            sigma=sigma1,
            parts=2 if measure_empty else 1,
        )
        if settled_cols:
            rho_settled = rho_counts - rho_main
            sigma_s = 1.0 / math.sqrt(2.0 * rho_settled)
            acct.spend_rho(
                "discovery_counts_settled",
                rho_settled,
                what + f", the {len(settled_cols)} columns settled by the DP profile",
                sigma=sigma_s,
                parts=2 if measure_empty else 1,
            )
        # delta/2, or delta/4 when the DP exact-value step spent the other quarter
        delta_t = acct.spend_delta(
            "discovery_threshold", acct.remaining_delta(), "threshold rho_1 on the noisy 1-way counts"
        )
        key = release_key(acct.budget.seed)
        value_hash = tuple(_counting.value_hashes(list(vals), j) for j, vals in enumerate(dictionary))
        true_counts = backend.counts(index, sensitivity, key, value_hash)
        column_of = index.subsets[index.decode(index.keys)[0], 0].astype(np.int64)
        scale = sigma1 * math.sqrt(n_main)
        # a union bound over the groups: each its share of delta by its columns
        threshold = rho_1_threshold_discrete(sigma1, n_main, 2.0 * delta_t * n_main / sensitivity)
        if not settled_cols:
            noisy, keep = noisy_threshold(true_counts, threshold, acct, "discovery_counts", math.sqrt(n_main))
        else:
            in_settled = np.isin(column_of, np.array(settled_cols, dtype=np.int64))
            noisy = np.zeros(true_counts.shape, dtype=np.int64)
            keep = np.zeros(true_counts.shape, dtype=bool)
            noisy[~in_settled], keep[~in_settled] = noisy_threshold(
                true_counts[~in_settled], threshold, acct, "discovery_counts", math.sqrt(n_main)
            )
            threshold_s = rho_1_threshold_discrete(
                sigma_s, len(settled_cols), 2.0 * delta_t * len(settled_cols) / sensitivity
            )
            noisy[in_settled], keep[in_settled] = noisy_threshold(
                true_counts[in_settled],
                threshold_s,
                acct,
                "discovery_counts_settled",
                math.sqrt(len(settled_cols)),
            )
            manifest["settled"] = {
                "columns": [names[j] for j in settled_cols],
                "sensitivity": len(settled_cols),
                "sigma": sigma_s,
                "noise_std": sigma_s * math.sqrt(len(settled_cols)),
                "threshold": threshold_s,
                "rho": rho_settled,
                "rule": f"a DP-profiled code whose standing values hold >= {SETTLED_SHARE:g} of its non-empty "
                f"records: {SETTLED_RHO_FACTOR:g} of another column's rho",
            }
        if measure_empty:
            # c(j, empty) = n - sum of column j's value counts: exact (Delta_1 = the number of discovered columns
            # bounds no record), noised like every value count; the empty candidates are public, so no threshold.
            values_sum = np.bincount(column_of, weights=true_counts, minlength=d).astype(np.int64)
            # The noise is drawn after the selection (Discovery.release_empty_counts), the last draw of the
            # release: the other draws of a test-mode release stay those of a release without empty counts.
            true_empty = {j: int(records_for_empty - values_sum[j]) for j in disc_cols}
            del values_sum
        del column_of
        del true_counts, records_for_empty
        subset_idx, codes = index.decode(index.keys[keep])
        kept_noisy = noisy[keep]
        released: dict[int, list[tuple[int, int]]] = {}
        for s, c, n in zip(
            index.subsets[subset_idx][:, 0].tolist(), codes[:, 0].tolist(), kept_noisy.tolist(), strict=True
        ):
            released.setdefault(int(s), []).append((int(c), int(n)))
        manifest.update(
            {
                "sensitivity": int(n_main),
                "sigma": sigma1,
                "noise_std": scale,
                "threshold": threshold,
                "rho": rho_disc,
                "rho_proportion": share,
            }
        )
        if measure_empty:
            # the other columns' std; the settled columns' is "settled"'s noise_std (pgm.measured_empty_counts)
            manifest["empty_counts_noise_std"] = scale
        else:
            manifest["empty_counts_skipped"] = (
                "multi-value columns: the discovery bounds each record's contributions, so no empty count"
            )
    else:
        released = {}
        if acct.remaining_delta() > 0:  # none when the conversion took the whole delta
            acct.spend_delta(
                "discovery_threshold", acct.remaining_delta(), "unused: every column has public values"
            )
    for j in range(d):
        lut = np.full(len(dictionary[j]), -1, dtype=np.int32)
        if j in public:
            pos = {v: i for i, v in enumerate(public[j])}
            for i, val in enumerate(dictionary[j]):
                lut[i] = pos.get(val, -1)
            domains.append(public[j])
        else:
            found = sorted(released.get(j, []))
            for new, (old, n) in enumerate(found):
                lut[old] = new
                counts[(j, new)] = n
            domains.append(tuple(dictionary[j][old] for old, _ in found))
        luts.append(lut)
    del dictionary
    kept = tuple(j for j in range(d) if names[j] not in derived or len(domains[j]))
    manifest["_luts"] = luts
    discovery = Discovery(
        tuple(domains), kept, counts, manifest, {names[j]: n for j, n in true_empty.items()}
    )
    return discovery, protected_n, delta


def _discovery_measurements(
    discovery: Discovery,
    kept: tuple[int, ...],
    names: tuple[str, ...],
    public: dict[int, tuple[str, ...]],
    derived: dict[str, tuple[str, str]],
) -> tuple[list[Measurement], list[dict[str, Any]]]:
    """The discovery's released counts as partial 1-way measurements (post-processing of its DP release: no
    budget), and their manifest entries. Each discovered column's table measures the cells of its released
    values at the discovery's noise std; the empty category (empty cells and unreleased values) is not measured.
    A count was released only when it passed the threshold, so the counts of values whose true count is near it
    are biased upward (docs/design.md section 4.7 says by how much and why it is left). None with multi-value
    columns: their discovery bounds each record's contributions, so its counts are not those of the measured
    records."""
    if derived or "threshold" not in discovery.manifest:
        return [], []
    out: list[Measurement] = []
    entries: list[dict[str, Any]] = []
    for j in kept:
        if j in public:
            continue
        size = len(discovery.domains[j])
        values = np.zeros(size + 1)
        for code in range(size):
            values[code] = discovery.counts[(j, code)]
        mask = np.ones(size + 1, dtype=bool)
        mask[-1] = False
        if not size:
            continue
        scale = discovery_noise_std(discovery.manifest, names[j])
        out.append(Measurement((names[j],), values, scale, mask))
        entries.append(
            {
                "columns": [names[j]],
                "std": scale,
                "partial": True,
                "cells": int(mask.sum()),
                "round": "discovery",
                "rho": 0.0,
                "note": "the domain discovery's released counts (post-processing): its rho is charged once, "
                "as discovery_counts",
            }
        )
    return out, entries


def _one_tuples(
    columns: tuple[str, ...], domains: tuple[tuple[str, ...], ...], measurements: Sequence[Measurement]
) -> Marginal:
    """The released values as 1-tuples with counts from the noisy 1-way tables (post-processing: the
    inverse-variance mean of each column's 1-way measurements, the discovery's partial ones on their cells,
    rounded, at least 1), for the evaluation and the ``independent`` synthesizer."""
    latest = {j: mean for j, (mean, _) in one_way_means(measurements, columns).items()}
    cols, vals, counts = [], [], []
    for j, dom in enumerate(domains):
        table = latest.get(j)
        for i in range(len(dom)):
            n = 1 if table is None else max(1, int(round(float(table[i]))))
            cols.append([j])
            vals.append([i])
            counts.append(n)
    return sorted_marginal(
        np.array(cols, dtype=np.int16).reshape(-1, 1),
        np.array(vals, dtype=np.int32).reshape(-1, 1),
        np.array(counts, dtype=np.int64),
    )


def _shortened(params: WorkloadParams, d: int, what: str, progress: Progress | None) -> WorkloadParams:
    """``params`` with ``reporting_length`` at most ``d`` (>= 1): the workload of the k-way marginals, k <= R,
    over d < R columns is that of the marginals up to length d, so a table narrower than R is measured whole
    rather than refused (public figures only: d counts the input's columns, or those that released a value);
    with d or more group columns the workload is the one clique of every column (no group columns)."""
    if params.reporting_length <= d:
        return params
    report(
        progress,
        log,
        f"workload: {d} {what} < reporting_length {params.reporting_length}: marginals up to {d}",
    )
    group = params.group_columns if len(params.group_columns) < d else ()
    return dataclasses.replace(params, reporting_length=d, group_columns=group)


def run(df, params: WorkloadParams, data: DataConfig, context: MechanismContext) -> Fitted:  # noqa: ANN001 - DataFrame
    """The registry's entry point: :func:`fit_workload` (see there for the errors and the guarantee)."""
    release = fit_workload(
        df, params, data, progress=context.progress, protected_n=context.protected_n, acct=context.accountant
    )
    return Fitted(release=release)
