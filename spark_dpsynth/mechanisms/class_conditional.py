"""The class-conditional mechanism: noisy (attribute value, class) histograms over full public domains.

One noisy histogram of (attribute value, class) pairs per attribute over the *full public domain*, and the
protected number of records. The synthesizer that reads them (post-processing: class totals, tuples per class,
P(value | class), exact-count value vectors per class, shuffled; a naive-Bayes structure) is
:mod:`spark_dpsynth.synthesizers.class_conditional`.

Fixed with respect to the notebook this method comes from:

* independent noise per bin: one exact discrete Laplace draw per (value, class) bin (the notebook adds *one*
  scalar draw to every bin of a histogram, which is not DP);
* every bin of the public domain is noised, zero-count bins included (the notebook noises only the bins present in
  the data, so the set of non-zero bins leaks);
* no true record count anywhere: the number of tuples defaults to the protected number of records
  (n + discrete Laplace), never the table's size, and nothing about the data is printed.

Privacy (pure epsilon-DP when every domain is public): adding or removing one record changes each of the A
histograms in exactly one bin by 1 (L1 sensitivity 1 per histogram, A in total), so discrete Laplace noise of scale
A / epsilon_M on every bin is epsilon_M-DP (equivalently, epsilon_M / A per histogram with sensitivity 1; the
Laplace mechanism, Dwork, McSherry, Nissim, Smith 2006, in its discrete form, Ghosh, Roughgarden, Sundararajan
2009). The protected number of records spends epsilon_N = N_p epsilon. Columns without a public domain take
theirs from a DP-thresholded 1-way release (the k = 1 stage of
:func:`spark_dpsynth.mechanisms.marginals.dp_aggregate`) that spends a share ``domain_epsilon_proportion`` of
epsilon and its delta; the total is then (epsilon, delta)-DP by sequential composition. The numeric columns
without public bins are decided by the DP profile (``profile_epsilon_proportion`` of epsilon) and, when it finds
measurements off its grid, by the DP exact values of those (the profile's epsilon per column, discrete Laplace,
and half of delta, declared then: given, or derived from n'; the domains' release keeps the other half). Values
outside the domain are dropped from the histograms (sensitivity unchanged). See docs/design.md sections 2.8, 4.4
and 6.3.

The release has the marginals mechanism's format (:mod:`spark_dpsynth.release.core`): k = 2 tuples are the
(attribute, label) bins with noisy count >= 1, k = 1 tuples their sums, normalized so that no tuple exceeds its
sub-tuples, so evaluation and the report work unchanged; the noisy histograms themselves are the model
(:class:`spark_dpsynth.synthesizers.class_conditional.ClassConditionalModel`), saved beside the release.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from spark_dpsynth import _validate as v
from spark_dpsynth._progress import Progress, report
from spark_dpsynth.errors import InvalidParameterError, SchemaError
from spark_dpsynth.mechanisms._discovery import protected_n_from, release_accountant
from spark_dpsynth.mechanisms.prelude import prepare_table
from spark_dpsynth.params import TEXT_NUMBERS_EPSILON_PROPORTION, AggregationParams, DataConfig
from spark_dpsynth.privacy.accounting import Accountant, spend_number_of_records
from spark_dpsynth.privacy.budget import Budget
from spark_dpsynth.privacy.noise import NoiseSource
from spark_dpsynth.registry import Fitted, MechanismContext, synthesizers_for
from spark_dpsynth.release.core import Release, sorted_marginal
from spark_dpsynth.release.manifest import FORMAT_VERSION
from spark_dpsynth.synthesizers.class_conditional import EMPTY, ClassConditionalModel, model_files

__all__ = ["ClassConditionalParams", "fit_class_conditional", "noisy_histogram"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClassConditionalParams:
    """Parameters of the class-conditional mechanism (and, through ``number_of_tuples`` and ``seed``, of its
    synthesizer)."""

    label: str | None = None
    """The class column; None takes the last attribute column."""
    number_of_tuples: int | None = None
    """Records to synthesize (>= 1); None uses the protected number of records."""
    domains: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Public value domains per column (binned columns take their bin labels, columns of ``[data.domains]`` their
    codebook, automatically)."""
    number_of_records_epsilon_proportion: float = 0.005
    """N_p: share of epsilon spent on the protected number of records, in (0, 1)."""
    domain_epsilon_proportion: float = 0.1
    """Share of epsilon spent on a DP-thresholded 1-way release for columns without a public domain, in (0, 1)."""
    profile_epsilon_proportion: float = 0.2
    """Share of epsilon spent on the DP profile of the numeric columns without public bins (code or measurement,
    docs/design.md sections 2.8 and 4.4), in (0, 1); spent only when there are such columns. Larger than the
    other mechanisms' share: in pure DP the profile's Laplace scale grows with the number of profiled columns
    (L1 sensitivity), and a code that does not stand out of that noise is binned as a measurement."""

    def __post_init__(self) -> None:
        if self.number_of_tuples is not None:
            v.integer("number_of_tuples", self.number_of_tuples, low=1)
        npp = v.open_unit("number_of_records_epsilon_proportion", self.number_of_records_epsilon_proportion)
        dpp = v.open_unit("domain_epsilon_proportion", self.domain_epsilon_proportion)
        ppp = v.open_unit("profile_epsilon_proportion", self.profile_epsilon_proportion)
        tp = TEXT_NUMBERS_EPSILON_PROPORTION
        if npp + dpp + 2 * ppp + tp >= 1:
            raise InvalidParameterError(
                "number_of_records_epsilon_proportion + domain_epsilon_proportion + 2 x "
                "profile_epsilon_proportion (the DP profile, and at most as much for the DP exact values) + "
                f"the test of numbers written as text ({tp}) must be < 1, got {npp} + {dpp} + 2 x {ppp} + {tp} "
                f"= {npp + dpp + 2 * ppp + tp}"
            )
        domains = {}
        for col, values in dict(self.domains).items():
            vals = tuple(str(x) for x in values)
            if not vals:
                raise InvalidParameterError(f"domains[{col!r}] must list at least one value")
            if len(set(vals)) != len(vals):
                raise InvalidParameterError(f"domains[{col!r}] has duplicate values")
            domains[col] = vals
        object.__setattr__(self, "domains", domains)


def _public_domains(
    columns: tuple[str, ...], data: DataConfig, params: ClassConditionalParams
) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for col in columns:
        if col in params.domains:
            out[col] = params.domains[col]
        elif (
            col in data.public_domains
        ):  # a codebook of [data.domains] or hash-bucket labels (design 2.8, 2.9)
            out[col] = data.public_domains[col]
        elif col in data.bins:
            spec = data.bins[col]
            out[col] = spec.domain()
    return out


@dataclass(frozen=True)
class _ClassConditionalShares:
    """The class-conditional mechanism's share of the prelude
    (:class:`~spark_dpsynth.mechanisms.prelude.PreludeShares`), in pure DP: the text test a share of epsilon; n'
    from the count of records whose epsilon_N is already spent; the profile ``profile_epsilon_proportion`` x
    epsilon (discrete Laplace, no blocks); the exact values the profile's epsilon per column and half of delta
    (declared from n' unless given; the domains' release keeps the other half)."""

    params: ClassConditionalParams
    acct: Accountant
    unit: str = "epsilon"
    text_numbers_in_rho: bool = False

    @property
    def domains(self) -> Mapping[str, tuple[str, ...]]:
        return self.params.domains

    def protected_n(self, true_n: int) -> int:
        return protected_n_from(true_n, self.acct)

    def rho(self, protected_n: int) -> float:
        raise AssertionError("the class-conditional mechanism is accounted in pure DP")

    def profile(self, types, need, protected_n):  # noqa: ANN001, ANN201 - see PreludeShares.profile
        from spark_dpsynth.mechanisms._profile import profile_parts
        from spark_dpsynth.privacy.accounting import profile_mechanism

        return self.acct.spend_epsilon(
            "column_profile",
            self.params.profile_epsilon_proportion,
            profile_mechanism(len(need)),
            parts=profile_parts(types, need, blocks=False),
        )

    def exact_values(self, exact: int, need: int, charged: float, protected_n: int) -> float:
        from spark_dpsynth.mechanisms._profile import spend_exact_values
        from spark_dpsynth.privacy.accounting import delta_from_protected_n

        if self.acct.delta is None:
            self.acct.declare_delta(delta_from_protected_n(protected_n), self.acct.budget.delta_source)
        assert self.acct.delta is not None
        spend_exact_values(
            self.acct,
            self.acct.delta / 2.0,
            epsilon_proportion=self.params.profile_epsilon_proportion * exact / need,
        )
        return charged * exact / need

    def no_exact_values(self) -> None:
        return None


def fit_class_conditional(
    df,  # noqa: ANN001 - pyspark.sql.DataFrame
    params: ClassConditionalParams | None = None,
    data_config: DataConfig | None = None,
    *,
    budget: Budget | None = None,
    noise: NoiseSource | None = None,
    progress: Progress | None = None,
    acct: Accountant | None = None,
) -> tuple[ClassConditionalModel, Release]:
    """Release the noisy (attribute value, class) histograms of a table (see the module docstring).

    Args:
        df: the sensitive table; one row per record.
        params: label, number of tuples (kept in the manifest for the synthesizer), public domains, the shares
            of epsilon.
        data_config: columns, empty values and public bins (binned columns have public domains).
        budget: the release's :class:`~spark_dpsynth.privacy.budget.Budget` when no ``acct`` is given (default
            epsilon 4; its delta, given or derived, pays for the thresholded releases; its seed is test mode).
        noise: the noise source of a new accountant (default: production noise, or test-mode noise with the
            budget's seed); ignored with ``acct``.
        progress: optional callback, one message per stage (no statistic of the data).
        acct: the run's :class:`~spark_dpsynth.privacy.accounting.Accountant` (pure DP: its delta is declared
            only by the domains' release unless the budget gives it); default a new one for ``budget``.

    Returns:
        (the model, :class:`spark_dpsynth.synthesizers.class_conditional.ClassConditionalModel`, for
        :func:`spark_dpsynth.synthesizers.class_conditional.sample_class_conditional`: per attribute a float64
        (|domain|, |classes|) histogram of noisy counts clipped at 0, every domain ending with the empty value;
        a :class:`Release` in the marginals mechanism's format, reporting length 2).

    Raises:
        SchemaError: a configured column or the label is not in ``df`` (checked before any data is read).
        InvalidParameterError: fewer than two columns (an attribute and the label).

    Privacy:
        epsilon-DP (plus the delta of the domains' release when a column has no public domain, and of the DP
        exact values when the profile finds measurements); see the module
        docstring. Discrete Laplace noise from OpenDP's exact sampler over a cryptographic source.
    """
    from pyspark.sql import functions as F

    from spark_dpsynth.data.prepare import resolve_columns

    params = params if params is not None else ClassConditionalParams()
    check_data(params, data_config if data_config is not None else DataConfig())
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
    acct = release_accountant(budget, noise, acct)
    started = time.perf_counter()
    eps = acct.epsilon
    eps_n = spend_number_of_records(acct, params.number_of_records_epsilon_proportion)
    # Column meanings (docs/design.md section 2.8), through the same DP profile as the other mechanisms, here in
    # its pure-DP form (discrete Laplace): a numeric code stays a category, a measurement gets DP bins.
    table = prepare_table(
        df, data, acct, _ClassConditionalShares(params, acct), stage="class_conditional", progress=progress
    )
    data, prepared, protected_n = table.config, table.records, table.protected_n
    domains = _public_domains(columns, data, params)
    eps_domain = 0.0
    delta = 0.0
    missing = [c for c in columns if c not in domains]
    if missing:
        eps_domain = acct.spend_epsilon(
            "domains",
            params.domain_epsilon_proportion,
            "the marginals mechanism, k = 1 only: DP-thresholded 1-way release of the columns without a public domain",
        )
        report(progress, log, f"class_conditional: DP domains of {missing} (epsilon {eps_domain:g})")
        from spark_dpsynth.mechanisms.marginals import dp_aggregate

        domain_params = AggregationParams(reporting_length=1, number_of_records_epsilon_proportion=0.01)
        domain_release = dp_aggregate(
            prepared.select(*[F.col(f"`{c}`") for c in missing]),
            domain_params,
            # the prepared columns are text whose meaning is decided (codes): categories, never profiled again
            DataConfig(columns=tuple(missing), categorical=tuple(missing)),
            # what the exact values left of a declared delta (None: derived by the release)
            acct=acct.sub_budget(eps_domain, acct.remaining_delta() if acct.delta is not None else None),
        )
        delta_domains = float(domain_release.manifest["delta"])
        if acct.delta is None:
            acct.declare_delta(
                delta_domains, f"the domains' release: {domain_release.manifest.budget.delta_source}"
            )
        acct.spend_delta("domains_threshold", delta_domains, "threshold of the domains' 1-way release")
        for j, col in enumerate(missing):
            domains[col] = tuple(domain_release.domains[j])
    elif acct.delta is not None:
        acct.spend_delta("domains_threshold", acct.remaining_delta(), "unused: every domain is public")
    if acct.delta is not None:
        delta = float(acct.delta)
    full_domains = {c: (*domains[c], EMPTY) for c in columns}
    attributes = tuple(c for c in columns if c != label)
    eps_m = acct.spend_rest_of_epsilon(
        "histograms",
        "discrete Laplace on every (value, class) bin of the full public domain",
        parts=len(attributes),
    )

    # Distributed counts of the (value, class) pairs of every attribute, restricted to the public domain:
    # one explode, one groupBy, a join with the (broadcast) domain; at most sum |domain_j| |classes| rows.
    report(progress, log, f"class_conditional: counting {len(attributes)} (attribute, {label}) histograms")
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
    histograms = {a: noisy_histogram(true_counts[a], acct, "histograms", len(attributes)) for a in attributes}
    # The protected number of records (n is never logged or written): discrete Laplace noise.
    if protected_n is None:  # else drawn before the DP profile, from the same count with the same epsilon_N
        protected_n = protected_n_from(true_n, acct)
    del true_n, true_counts

    manifest: dict[str, object] = {
        "format_version": FORMAT_VERSION,
        "mechanism": "class_conditional",
        "synthesizers": list(synthesizers_for("class_conditional")),
        "budget": acct.ledger().to_json(),
        "synthesizer": "class_conditional",
        "test_mode": acct.test_mode,
        "noise_sampler": acct.noise_name,
        "columns": list(columns),
        "label": label,
        "privacy_unit": "record",
        "reporting_length": 2,
        "epsilon": eps,
        "delta": delta,
        "epsilon_n": eps_n,
        "epsilon_m": eps_m,
        "epsilon_domain": eps_domain,
        "epsilon_profile": table.charged,
        "epsilon_exact_values": acct.share("exact_values").epsilon if acct.spent("exact_values") else 0.0,
        "epsilon_text_numbers": acct.share("text_numbers").epsilon if acct.spent("text_numbers") else 0.0,
        "noise": "discrete Laplace on every (value, class) bin of the public domain",
        "laplace_scale": len(attributes) / eps_m,
        "epsilon_per_histogram": eps_m / len(attributes),
        "sensitivities": {"1": 1, "2": 1},
        "protected_number_of_records": int(protected_n),
        "domains_from_release": missing,
        "column_types": table.column_types,
        "column_meanings": table.column_meanings,
        "profile_columns": table.profiled,
        "parameters": {
            **acct.budget.parameters(),
            "label": label,
            "number_of_tuples": params.number_of_tuples,
            "number_of_records_epsilon_proportion": params.number_of_records_epsilon_proportion,
            "domain_epsilon_proportion": params.domain_epsilon_proportion,
            "profile_epsilon_proportion": params.profile_epsilon_proportion,
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
    report(progress, log, f"class_conditional: histograms released in {time.perf_counter() - started:.1f} s")
    return model, release


def noisy_histogram(counts: np.ndarray, acct: Accountant, share: str, sensitivity: int) -> np.ndarray:
    """One independent discrete Laplace draw per bin of a full-domain histogram, then clipped at 0.

    Args:
        counts: int64 (|domain|, |classes|) true counts, zero-count bins included.
        acct: the release's accountant; the draw is one part of its pure share ``share`` (epsilon_M).
        share: the share's name.
        sensitivity: A, the L1 sensitivity of all the histograms together: the Laplace scale is
            b = A / epsilon_M (P(x) proportional to exp(-|x| / b)).

    Returns:
        float64 array of the same shape, >= 0 (one independent draw *per bin*: see the module docstring).
    """
    return np.maximum(acct.laplace(share, counts, sensitivity=sensitivity), 0).astype(np.float64)


def _as_release(model: ClassConditionalModel) -> Release:
    """The histograms in the marginals mechanism's release format (rounded counts >= 1, normalized, downward
    closed)."""
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
    ones = sorted_marginal(ones_cols, ones_vals, np.array(list(kept_ones.values()), dtype=np.int64))
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
                # normalization: no tuple above its sub-tuples
                n = min(n, kept_ones[(ai, val)], kept_ones[(li, c_val)])
                lo, hi = sorted([(ai, code[ai][val]), (li, code[li][c_val])])
                pair_cols.append([lo[0], hi[0]])
                pair_vals.append([lo[1], hi[1]])
                pair_counts.append(n)
    pairs = sorted_marginal(
        np.array(pair_cols, dtype=np.int16).reshape(-1, 2),
        np.array(pair_vals, dtype=np.int32).reshape(-1, 2),
        np.array(pair_counts, dtype=np.int64),
    )
    manifest = dict(model.manifest)
    manifest["released_tuples"] = {"1": len(ones), "2": len(pairs)}
    return Release(columns=columns, domains=domains, marginals={1: ones, 2: pairs}, manifest=manifest)


def check_data(params: ClassConditionalParams, data: DataConfig) -> None:
    """The data configurations this mechanism takes (checked before any data is read).

    Raises:
        InvalidParameterError: a privacy unit or multi-value columns (records must be rows); identifier
            columns (their surrogate keys are written by the marginals and workload mechanisms' releases).
    """
    if data.merges_rows:
        raise InvalidParameterError(
            "the class_conditional synthesizer takes one row per record: no privacy_unit or multi_value"
        )
    if data.identifiers:
        raise InvalidParameterError(
            f"the class_conditional synthesizer takes no identifier columns, got identifiers "
            f"{list(data.identifiers)}: leave them out of [data] columns, or use the pgm or model synthesizer, "
            "whose releases write surrogate keys"
        )


def run(df, params: ClassConditionalParams, data: DataConfig, context: MechanismContext) -> Fitted:  # noqa: ANN001 - DataFrame
    """The registry's entry point: :func:`fit_class_conditional` on ``df`` (schema checked first); the noisy
    release carries the model (the noisy histograms, :func:`spark_dpsynth.synthesizers.class_conditional.model_files`),
    which :meth:`~spark_dpsynth.release.core.Release.save` writes with it.

    Raises:
        InvalidParameterError: see :func:`check_data`.
        SchemaError: a configured column is not in ``df``.
    """
    from spark_dpsynth.data.prepare import resolve_columns

    check_data(params, data)
    import dataclasses

    data = resolve_columns(df.columns, data)  # schema check, no data read
    model, release = fit_class_conditional(
        df, params, data, progress=context.progress, acct=context.accountant
    )
    return Fitted(release=dataclasses.replace(release, model_files=model_files(model)))
