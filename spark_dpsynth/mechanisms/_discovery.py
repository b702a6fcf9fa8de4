"""The DP steps the marginals and workload mechanisms share before their own counting: the protected number of
records, the noisy threshold of released counts, and which column values are public or must be discovered.

* :func:`release_accountant`: the run's one :class:`~spark_dpsynth.privacy.accounting.Accountant` (and noise source);
* :func:`draw_protected_n`: the one draw of n' (docs/design.md section 2.4), also made once by the default
  method's choice (:func:`spark_dpsynth.mechanisms.choice.fit_auto`) and handed on;
* :func:`noisy_threshold`: discrete Gaussian noise on every candidate count, then the threshold rho_k
  (docs/design.md sections 2.4 and 2.5; Gopi, Mahabadi, Yekhanin, "Differentially Private Marginals", 2022,
  Algorithm 1): the step that releases (discovers) the values of a column without public values;
* :func:`public_domains`: the columns whose values are public (bins, codebooks; docs/design.md section 2.9);
* :func:`distinct_values`: the values of a multi-value column (private, on the driver only).
"""

from __future__ import annotations

import numpy as np

from spark_dpsynth.errors import InvalidParameterError
from spark_dpsynth.params import AggregationParams, DataConfig
from spark_dpsynth.privacy.accounting import Accountant, spend_number_of_records
from spark_dpsynth.privacy.budget import Budget
from spark_dpsynth.privacy.noise import NoiseSource, noise_source_for

__all__ = [
    "distinct_values",
    "draw_protected_n",
    "noisy_threshold",
    "protected_n_from",
    "protected_n_of",
    "public_domains",
    "release_accountant",
]


def release_accountant(
    budget: Budget | None = None,
    noise: NoiseSource | None = None,
    acct: Accountant | None = None,
) -> Accountant:
    """The accountant of one release: ``acct``, the run's (made once, holding the run's budget); else one made
    from ``budget`` (default :class:`~spark_dpsynth.privacy.budget.Budget`): production noise (OpenDP over the
    OS's cryptographic source), or test-mode noise with the budget's ``seed``, unless ``noise`` is given. A
    derived delta is declared by the mechanism once n' is known.

    Raises:
        InvalidParameterError: both ``acct`` and a ``budget`` other than ``acct``'s are given.
    """
    if acct is not None:
        if budget is not None and budget != acct.budget:
            raise InvalidParameterError(
                f"the run's accountant holds epsilon {acct.budget.epsilon:g}, the call asks for {budget.epsilon:g}: "
                "give one budget"
            )
        return acct
    budget = budget if budget is not None else Budget()
    return Accountant(budget, noise=noise if noise is not None else noise_source_for(budget.seed))


def draw_protected_n(true_n: int, params: AggregationParams, acct: Accountant) -> int:
    """n' = max(1, n + L), L ~ discrete Laplace(1 / epsilon_N) (docs/design.md section 2.4), drawn through the
    release's accountant, which spends the share ``number_of_records`` (epsilon_N) here.

    Args:
        true_n: the true number of records (private: used only here, never logged).
        params: the budget; epsilon_N = ``number_of_records_epsilon_proportion`` x ``epsilon``.
        acct: the release's :class:`~spark_dpsynth.privacy.accounting.Accountant`.

    Returns:
        n', the protected number of records, >= 1. Drawn once per release: the default method's choice draws it
        and hands it, with the accountant, to the mechanism it runs (``protected_n``), which does not draw it
        again.

    Raises:
        BudgetError: the accountant has already spent ``number_of_records``.
    """
    spend_number_of_records(acct, params.number_of_records_epsilon_proportion)
    return protected_n_from(true_n, acct)


def protected_n_from(true_n: int, acct: Accountant) -> int:
    """n' = max(1, n + L) drawn through the share ``number_of_records`` already spent in ``acct`` (by a mechanism
    that spends it before it knows n, :func:`draw_protected_n` otherwise).

    Raises:
        BudgetError: the share was not spent, or n' was already drawn from it.
    """
    return max(1, int(acct.laplace("number_of_records", [true_n])[0]))


def protected_n_of(protected_n: int | None, acct: Accountant) -> int | None:
    """``protected_n`` handed in by a caller, checked: >= 1 and drawn through ``acct`` (its share
    ``number_of_records`` spent); None stays None (the mechanism draws it).

    Raises:
        InvalidParameterError: ``protected_n`` < 1, or the accountant has no share that paid for it.
    """
    if protected_n is None:
        return None
    if protected_n < 1:
        raise InvalidParameterError(f"protected_n must be >= 1, got {protected_n}")
    if not acct.spent("number_of_records"):
        raise InvalidParameterError(
            "protected_n must come with the accountant that drew it (its share number_of_records)"
        )
    return protected_n


def noisy_threshold(
    counts: np.ndarray, threshold: float, acct: Accountant, share: str, l2_sensitivity: float
) -> tuple[np.ndarray, np.ndarray]:
    """Noise on every candidate count of one length, then keep what passes the threshold (docs/design.md
    sections 2.4 and 2.5).

    Args:
        counts: int64 (M,) bounded counts of every candidate (zero counts included).
        threshold: rho_k; a noisy count is kept when it is > rho_k and > 0.
        acct: the release's accountant; the discrete Gaussian of its share ``share`` (std sigma_k per unit of
            L2 sensitivity) is drawn once per candidate.
        share: the share that pays for these counts.
        l2_sensitivity: sqrt(Delta_k), the counts' L2 sensitivity.

    Returns:
        (noisy int64 (M,), kept bool (M,)). Integer arithmetic throughout: exact for any count.
    """
    noisy = acct.gaussian(share, np.asarray(counts, dtype=np.int64), l2_sensitivity)
    return noisy, (noisy > threshold) & (noisy > 0)


def public_domains(
    names: tuple[str, ...], config: DataConfig, derived: dict[str, tuple[str, str]]
) -> dict[int, tuple[str, ...]]:
    """Columns whose values are public: binned columns (their labels and passthrough codes) and columns with a
    public domain (``config.domains``, a codebook, in its order; docs/design.md section 2.9). Their values cost
    no discovery budget and their tables cover the whole domain, absent values as zero cells."""
    out = {}
    for j, c in enumerate(names):
        if c in derived:
            continue
        if c in config.bins:
            spec = config.bins[c]
            out[j] = spec.domain()
        elif c in config.public_domains:  # a codebook, or hash-bucket labels
            out[j] = tuple(config.public_domains[c])
    return out


def distinct_values(prepared, column: str) -> tuple[str, ...]:  # noqa: ANN001 - pyspark DataFrame
    """The distinct values of a multi-value (array) column, sorted: private, bounded by the column's domain."""
    from pyspark.sql import functions as F

    rows = prepared.select(F.explode(F.col(f"`{column}`")).alias("v")).distinct().collect()
    return tuple(sorted(str(r["v"]) for r in rows))
