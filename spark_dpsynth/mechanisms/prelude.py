"""The prelude every mechanism runs before its selection and measurement: the records, their column types and the
DP profile of the numeric columns without public bins (docs/design.md sections 2.1 and 2.8).

:func:`prepare_table` is the one sequence: the column types from the schema and the configuration (public), the
numeric view, the DP test of numbers written as text, the protected number of records n' when a DP step needs
it, the DP profile (code or measurement, DP bins), the DP exact values of the measurements off the profile's grid,
and the configuration with every bin applied. It returns a :class:`PreparedTable`; the mechanism then selects and
measures on ``PreparedTable.records``.

A mechanism pays for the prelude with its own share of the budget, given as a :class:`PreludeShares`: whether
the text test is a zCDP share (n' and the budget's rho first) or a pure share of epsilon, how n' is drawn, and
how the profile and the exact values are charged (a share of rho, a proportion of epsilon, and which part of
delta pays for the exact values' threshold). Every draw of the prelude goes through the mechanism's
:class:`~spark_dpsynth.privacy.accounting.Accountant`, in the shares it spent.

With a privacy unit the records are the rows of each person, bounded first: either merged into one record by
:func:`~spark_dpsynth.data.prepare.prepare` (``DataConfig.privacy_unit``), or bounded to at most L rows per
person by :func:`spark_dpsynth.mechanisms.persons.bound_persons`, whose rows are the ``df`` handed to the
prelude at the row-level budget (docs/design.md sections 1.4 and 2.10).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from spark_dpsynth._progress import Progress, report
from spark_dpsynth.params import TEXT_NUMBERS_RHO_PROPORTION, DataConfig
from spark_dpsynth.privacy.accounting import Accountant
from spark_dpsynth.profile import ColumnProfile, ColumnType

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["PreludeShares", "PreparedTable", "prepare_table"]

log = logging.getLogger(__name__)


class PreludeShares(Protocol):
    """How a mechanism pays for its prelude, in its accountant (its share of the budget).

    Implementations spend shares in the mechanism's :class:`~spark_dpsynth.privacy.accounting.Accountant` and
    return what they charged; :func:`prepare_table` calls them in a fixed order, at most once each.
    """

    @property
    def unit(self) -> str:
        """``"rho"`` or ``"epsilon"``: the unit of the amounts returned (for the progress lines)."""
        ...

    @property
    def text_numbers_in_rho(self) -> bool:
        """True: the text test is a zCDP share, rho T_p x the budget's rho (:data:`TEXT_NUMBERS_RHO_PROPORTION`),
        so n' and rho come first (:meth:`rho`) whenever a column is tested or profiled. False: a pure share of
        epsilon spent before any conversion, and n' drawn only for a profile."""
        ...

    @property
    def domains(self) -> Mapping[str, object]:
        """The columns with the mechanism's own public domain: neither tested nor profiled."""
        ...

    def protected_n(self, true_n: int) -> int:
        """n' >= 1 from the true number of records (private, used only there), drawn through the accountant."""
        ...

    def rho(self, protected_n: int) -> float:
        """The budget's rho (converting epsilon once, delta declared from n' when not given); only called
        with ``text_numbers_in_rho``."""
        ...

    def profile(self, types: Mapping[str, ColumnType], need: tuple[str, ...], protected_n: int) -> float:
        """Spend the share ``column_profile`` of the DP profile of ``need`` (with what the mechanism pays at the
        same time); returns its rho or epsilon."""
        ...

    def exact_values(self, exact: int, need: int, charged: float, protected_n: int) -> float:
        """Spend the shares ``exact_values`` and ``exact_values_threshold`` for ``exact`` of the ``need``
        profiled columns, out of the profile's ``charged``; returns the rho or epsilon spent."""
        ...

    def no_exact_values(self) -> None:
        """What the mechanism spends when the profile found no measurement off its grid (possibly nothing)."""
        ...


@dataclass(frozen=True)
class PreparedTable:
    """The outcome of :func:`prepare_table`: what a mechanism measures, and what its manifest says of the
    columns."""

    df: DataFrame
    """The input in its numeric view (numeric, date and timestamp columns as numbers), before preparation."""
    records: DataFrame
    """``prepare(df, config)``: the records with every column prepared, binned columns as bin labels."""
    config: DataConfig
    """The configuration with every bin (public or DP) and every domain released by the exact values."""
    types: Mapping[str, ColumnType]
    """Per attribute column its type, after the text test and the profile (a code has scale ``category``)."""
    column_types: dict[str, object]
    """The manifest's ``column_types`` block (:func:`~spark_dpsynth.profile.types_manifest`)."""
    column_meanings: dict[str, dict[str, object]]
    """The manifest's ``column_meanings`` block (:func:`~spark_dpsynth.profile.meanings_manifest`)."""
    profiles: Mapping[str, ColumnProfile] = field(default_factory=dict)
    """The DP profile of each profiled column (DP outputs)."""
    protected_n: int | None = None
    """n', given or drawn by the prelude (None when no DP step needed it and none was given)."""
    profiled: int = 0
    """The number of columns profiled."""
    charged: float = 0.0
    """The profile's share ``column_profile``, in :attr:`PreludeShares.unit` (0 without a profile)."""


def prepare_table(
    df: DataFrame,
    config: DataConfig,
    acct: Accountant,
    shares: PreludeShares,
    *,
    stage: str,
    progress: Progress | None = None,
    protected_n: int | None = None,
) -> PreparedTable:
    """Column types, the DP test of numbers written as text, n', the DP profile and its exact values, applied
    (docs/design.md section 2.8).

    Args:
        df: the sensitive records: the table's rows, or the rows of each person bounded to at most L
            (:func:`spark_dpsynth.mechanisms.persons.bound_persons`); with ``config.privacy_unit`` a person's
            rows are merged into one record by the preparation.
        config: the configuration with its columns resolved
            (:func:`~spark_dpsynth.data.prepare.resolve_columns`).
        acct: the mechanism's accountant: every share of the prelude is spent and drawn through it.
        shares: how the mechanism pays for the prelude (:class:`PreludeShares`).
        stage: the prefix of the progress lines (the mechanism's name).
        progress: optional callback, one message per stage (DP outputs and public figures only).
        protected_n: n' when already drawn through ``acct``; None draws it here when a DP step needs it.

    Returns:
        The :class:`PreparedTable`.

    Raises:
        BudgetError: a share exceeds the budget or is spent already.
        InvalidParameterError: a share pays for another number of draws than the profile makes.

    Privacy:
        The text test (counts of four kinds of value per string column), the profile (a noisy histogram on a
        public grid per column) and the exact values (thresholded noisy counts) are the DP steps of
        docs/design.md section 2.8, each drawn through the share ``shares`` spent; n' is one count of the records
        with discrete Laplace noise (section 2.4). Everything after the noise is post-processing. Nothing true is
        logged or returned.
    """
    from spark_dpsynth.data.prepare import prepare
    from spark_dpsynth.mechanisms._manifest import report_columns, report_profiles
    from spark_dpsynth.mechanisms._profile import dp_exact_values, dp_profiles, text_numbers_step
    from spark_dpsynth.profile import (
        apply_profiles,
        column_types,
        exact_value_targets,
        meanings_manifest,
        numeric_view,
        profile_targets,
        text_number_candidates,
        types_manifest,
    )

    def targets(types: Mapping[str, ColumnType]) -> tuple[str, ...]:
        return tuple(c for c in profile_targets(types, config) if c not in shares.domains)

    types = column_types(df.schema, config)
    report_columns(types, config, progress)
    df = numeric_view(df, types)
    records = prepare(df, config)  # the profiled columns are still plain values here

    def drawn() -> int:
        # One number reaches the driver: the true number of records, used only for n' (never logged).
        return protected_n if protected_n is not None else shares.protected_n(records.count())

    rho_text = None
    if shares.text_numbers_in_rho and (
        text_number_candidates(types, config, shares.domains) or targets(types)
    ):
        protected_n = drawn()
        rho_text = shares.rho(protected_n) * TEXT_NUMBERS_RHO_PROPORTION
    # strings that are numbers written as text (NIST's incomes and "N") are profiled as numbers
    types = text_numbers_step(df, types, config, acct, progress, stage, shares.domains, rho=rho_text)
    need = targets(types)
    input_types = types
    sources = {c: "config" for c in config.bins}
    profiles: dict[str, ColumnProfile] = {}
    charged = 0.0
    if need:
        protected_n = drawn()
        charged = shares.profile(types, need, protected_n)
        amount = f"{charged:.4g}" if shares.unit == "rho" else f"{charged:g}"
        report(
            progress, log, f"{stage}: DP profile of {len(need)} numeric column(s) ({shares.unit} {amount})"
        )
        profiles = dp_profiles(records, types, need, config.dp_bins, protected_n, acct)
        exact = exact_value_targets(types, profiles)
        if exact:
            spent = shares.exact_values(len(exact), len(need), charged, protected_n)
            report(
                progress,
                log,
                f"{stage}: DP exact values of {len(exact)} measurement(s) ({shares.unit} {spent:.4g})",
            )
        else:
            shares.no_exact_values()
        profiles = dp_exact_values(
            records, types, profiles, config.dp_bins, protected_n, acct if exact else None
        )
        report_profiles(profiles, progress)
        types, config = apply_profiles(types, config, profiles)
        sources.update({c: "dp_profile" for c, p in profiles.items() if p.meaning == "measurement"})
    return PreparedTable(
        df=df,
        records=prepare(df, config),
        config=config,
        types=types,
        column_types=types_manifest(types, config.bins, sources),
        column_meanings=meanings_manifest(input_types, config, profiles),
        profiles=profiles,
        protected_n=protected_n,
        profiled=len(need),
        charged=charged,
    )
