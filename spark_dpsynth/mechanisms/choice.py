"""The default method's choice of mechanism: the marginals of every column subset when the data gives the signal
for them, else the DP-selected workload (docs/design.md section 4.7, "The default at scale").

Two of our mechanisms answer the same question (the k-way structure of a table, k <= R) in opposite ways. The
``workload`` mechanism (AIM or MST, then the ``pgm`` synthesizer) measures a few dozen cliques chosen by the data,
each at a small noise, and lets a graphical model fill in the rest; the ``marginals`` mechanism (then the ``model``
synthesizer) measures every subset of at most R columns, each at a noise that grows with the number of subsets. On
a small table the first wins (the noise of every subset drowns the signal); on a large one the second does,
because the noise of a count does not grow with n while its signal does, and a model of a few dozen cliques cannot
follow what all the subsets show (the figures: docs/design.md section 4.7, "The default at scale").

The rule reads only public values and n', the protected number of records (discrete Laplace at epsilon_N, the
same draw and the same share of the budget that the chosen mechanism would make and books in its manifest):

    W = sum_{k=1..R} C(d, k)            (subsets of at most R of the d attribute columns)
    s = sqrt(W / (2 rho))               (std of a count when each record adds 1 to one cell of every subset and
                                         the rho of the marginals is spread evenly: [BS16, Proposition 1.6])
    marginals  when  s / n' <= MAX_RELATIVE_NOISE  and  W <= MAX_SUBSETS,  else  workload,

with rho = rho(epsilon - epsilon_N, delta) by the release's accounting (delta given, or derived from n'). It is
post-processing of n' (Dwork and Roth, "The Algorithmic Foundations of Differential Privacy", Proposition 2.1).
A configuration the marginals mechanism might refuse once part of the budget is spent keeps the workload mechanism,
decided before any draw (:func:`marginals_feasible`): multi-value columns (their attribute columns are known only
after the data is read), a reporting length above 3 (the ``model`` synthesizer fits up to 3), a column without
public values (bins or a codebook), or more candidate k-tuples than ``max_candidates`` by the public domains.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
from dataclasses import dataclass
from typing import Any

from spark_dpsynth._progress import report
from spark_dpsynth.errors import InvalidParameterError
from spark_dpsynth.params import AggregationParams, DataConfig, WorkloadParams
from spark_dpsynth.privacy.budget import Budget

__all__ = [
    "MAX_RELATIVE_NOISE",
    "MAX_SUBSETS",
    "Choice",
    "choose",
    "fit_auto",
    "marginals_feasible",
    "subsets",
]

log = logging.getLogger(__name__)

MAX_RELATIVE_NOISE = 3e-4
"""The largest s / n' at which the default measures every subset (module docstring): between the relative
noise at which the workload is the better of the two and the one at which the marginals are (docs/design.md
section 4.7, "The default at scale")."""
MAX_SUBSETS = 2_000
"""The most column subsets W the default measures all of (d <= 22 columns at R = 3): every record adds to W
cells, so the cost of counting grows with n W."""
_MODEL_MAX_LENGTH = 3
"""The longest subsets the ``model`` synthesizer fits."""


@dataclass(frozen=True)
class Choice:
    """The mechanism the default method runs, and why (written in the release's manifest, ``mechanism_choice``)."""

    mechanism: str
    """``"marginals"`` or ``"workload"``."""
    subsets: int
    """W, the number of column subsets of at most R columns."""
    relative_noise: float | None
    """s / n' (None when the rule was not applied: a configuration the marginals mechanism does not take)."""
    reason: str
    """One line for the progress log and the manifest."""

    def to_json(self) -> dict[str, Any]:
        return {
            "mechanism": self.mechanism,
            "subsets": self.subsets,
            "relative_noise": self.relative_noise,
            "max_relative_noise": MAX_RELATIVE_NOISE,
            "max_subsets": MAX_SUBSETS,
            "reason": self.reason,
        }


def subsets(d: int, reporting_length: int) -> int:
    """W = sum_{k=1..R} C(d, k), d >= 0 columns, R >= 1."""
    return sum(math.comb(d, k) for k in range(1, min(reporting_length, d) + 1))


def marginals_feasible(d: int | None, aggregation: AggregationParams, data: DataConfig) -> str | None:
    """None when the rule may pick the marginals mechanism for this configuration, else why not (public values
    only: run before any data is read). ``d`` is the number of attribute columns (``data.columns``, resolved),
    None when unknown.

    The marginals mechanism refuses a length whose candidate k-tuples exceed ``max_candidates``, a number it
    knows only after the shorter tuples are released, when the budget is partly spent. So the default takes it only
    when that cannot happen: every column has public values (bins, or a domain: docs/design.md section 2.9) and
    sum over the k-column subsets of the product of their domain sizes, an upper bound of the candidates, is at
    most ``max_candidates`` for every k <= R."""
    if data.multi_value:
        return "multi-value columns (their attribute columns are known only after the data is read)"
    if d is None:
        return "the number of attribute columns is not known"
    if aggregation.reporting_length > _MODEL_MAX_LENGTH:
        return (
            f"reporting length {aggregation.reporting_length} > {_MODEL_MAX_LENGTH} (the model synthesizer's)"
        )
    w = subsets(d, aggregation.reporting_length)
    if w > MAX_SUBSETS:
        return f"{w:,} column subsets > {MAX_SUBSETS:,}"
    try:
        aggregation.check_columns(d)
    except InvalidParameterError as e:
        return str(e)
    assert data.columns is not None and len(data.columns) == d
    sizes = []
    for c in data.columns:
        if c in data.bins:
            sizes.append(len(data.bins[c].domain()))
        elif c in data.public_domains:
            sizes.append(len(data.public_domains[c]))
        else:
            return (
                f"column {c!r} has no public values (its domain is known only after its values are released)"
            )
    for k in range(2, min(aggregation.reporting_length, d) + 1):
        bound = sum(math.prod(sizes[j] for j in subset) for subset in itertools.combinations(range(d), k))
        if bound > aggregation.max_candidates:
            return f"up to {bound:,} candidate {k}-tuples > max_candidates {aggregation.max_candidates:,}"
    return None


def choose(d: int, aggregation: AggregationParams, budget: Budget, protected_n: int) -> Choice:
    """The rule of the module docstring for ``d`` >= 1 attribute columns and the protected number of records
    ``protected_n`` >= 1 (a DP value). ``aggregation`` gives epsilon_N's share and R, ``budget`` epsilon, delta
    and the accounting.

    Raises:
        InvalidParameterError: ``d`` < 1 or ``protected_n`` < 1.
    """
    from spark_dpsynth.mechanisms.budget_split import ACCOUNTING
    from spark_dpsynth.privacy.accounting import delta_from_protected_n, rho_of

    if d < 1 or protected_n < 1:
        raise InvalidParameterError(f"d and protected_n must be >= 1, got {d} and {protected_n}")
    w = subsets(d, aggregation.reporting_length)
    delta = budget.delta_or(delta_from_protected_n(protected_n))
    eps_m = budget.epsilon * (1.0 - aggregation.number_of_records_epsilon_proportion)
    rho = rho_of(eps_m, delta / 2.0, budget.accounting or ACCOUNTING)  # the marginals mechanism's
    relative = math.sqrt(w / (2.0 * rho)) / protected_n
    if relative <= MAX_RELATIVE_NOISE and w <= MAX_SUBSETS:
        return Choice(
            "marginals",
            w,
            relative,
            f"every subset of at most {aggregation.reporting_length} columns ({w:,}): relative noise "
            f"{relative:.2g} <= {MAX_RELATIVE_NOISE:g}",
        )
    why = f"{w:,} subsets > {MAX_SUBSETS:,}" if w > MAX_SUBSETS else f"> {MAX_RELATIVE_NOISE:g}"
    return Choice(
        "workload",
        w,
        relative,
        f"DP-selected marginals: relative noise of all {w:,} subsets {relative:.2g} ({why})",
    )


def fit_auto(  # noqa: ANN201 - returns (Choice, registry.Fitted)
    df,  # noqa: ANN001 - pyspark.sql.DataFrame
    aggregation: AggregationParams,
    workload: WorkloadParams,
    data: DataConfig,
    context,  # noqa: ANN001 - registry.MechanismContext
):
    """Draw n', choose the mechanism (module docstring) and run it with that n'.

    Args:
        df: the sensitive table.
        aggregation: the marginals mechanism's parameters.
        workload: the workload mechanism's parameters; its share epsilon_N must be ``aggregation``'s.
        data: the data configuration.
        context: the registry's :class:`~spark_dpsynth.registry.MechanismContext`: n' is drawn through its
            ``accountant`` (one is made for the default budget when it has none), which the chosen mechanism then
            spends the rest of; its ``protected_n`` is filled here.

    Returns:
        ``(choice, fitted)``: the :class:`Choice` and the chosen mechanism's :class:`~spark_dpsynth.registry.Fitted`,
        whose release's manifest holds ``mechanism_choice`` (:meth:`Choice.to_json`).

    Raises:
        InvalidParameterError: the two parameter sets disagree on epsilon_N (before any data is read); what
            either mechanism raises.

    Privacy:
        The chosen mechanism's guarantee: n' is its own draw, at its own epsilon_N, made once; the choice is
        post-processing of n'.
    """
    from spark_dpsynth import registry
    from spark_dpsynth.data.prepare import prepare, resolve_columns
    from spark_dpsynth.mechanisms._discovery import draw_protected_n, release_accountant
    from spark_dpsynth.profile import column_types, numeric_view

    name = "number_of_records_epsilon_proportion"
    if getattr(aggregation, name) != getattr(workload, name):
        raise InvalidParameterError(
            f"the marginals and workload parameters must share the budget: {name} "
            f"{getattr(aggregation, name)!r} != {getattr(workload, name)!r}"
        )
    config = resolve_columns(df.columns, data)
    assert config.columns is not None
    d = len(config.columns)
    why_not = marginals_feasible(d, aggregation, config)
    if why_not is not None:
        choice = Choice("workload", subsets(d, aggregation.reporting_length), None, f"workload: {why_not}")
        report(context.progress, log, f"auto: workload mechanism ({choice.reason})")
        fitted = registry.mechanism("workload").load_run()(df, workload, data, context)
    else:
        acct = release_accountant(acct=context.accountant)
        records = prepare(numeric_view(df, column_types(df.schema, config)), config)
        # One number reaches the driver: the true number of records, used only for n' (never logged).
        protected_n = draw_protected_n(records.count(), aggregation, acct)
        choice = choose(d, aggregation, acct.budget, protected_n)
        report(context.progress, log, f"auto: {choice.mechanism} mechanism ({choice.reason})")
        context = dataclasses.replace(context, accountant=acct, protected_n=protected_n)
        params = aggregation if choice.mechanism == "marginals" else workload
        fitted = registry.mechanism(choice.mechanism).load_run()(df, params, data, context)
    release = dataclasses.replace(
        fitted.release, manifest={**fitted.release.manifest, "mechanism_choice": choice.to_json()}
    )
    return choice, dataclasses.replace(fitted, release=release)
