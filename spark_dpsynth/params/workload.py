"""The parameters of the ``workload`` mechanism (docs/design.md section 4.7): how it chooses the cliques it
measures (:class:`Selection`) and its :class:`WorkloadParams`."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from spark_dpsynth import _validate as v
from spark_dpsynth.errors import InvalidParameterError
from spark_dpsynth.params.aggregation import check_pure_shares, enum_value

__all__ = [
    "Selection",
    "WorkloadParams",
]


class Selection(enum.StrEnum):
    """How the ``workload`` mechanism chooses the cliques it measures (docs/design.md section 4.7)."""

    AIM = "aim"
    """Adaptive rounds: an exponential-mechanism choice among candidate cliques scored by the estimate's error
    minus the noise a measurement would add, with budget annealing (McKenna, Mullins, Sheldon, Miklau, "AIM: An
    Adaptive and Iterative Mechanism for Differentially Private Synthetic Data", VLDB 2022, Algorithm 1)."""
    MST = "mst"
    """The cheap preset: 1-way tables, then a maximum spanning tree of 2-way cliques chosen by the exponential
    mechanism (McKenna, Miklau, Sheldon, "Winning the NIST Contest: A scalable and general approach to
    differentially private synthetic data", 2021, section 4)."""
    AUTO = "auto"
    """AIM when its planned rounds fit, 4 d <= ``max_rounds`` (d <= 25 columns at the default 100); on wider
    tables AIM while the budget is large enough for the width, else MST: the noise std a 1-way table would get
    with the rounds' rho spread evenly over the d columns, sqrt(d / (2 rho)), is at most
    ``aim_max_relative_noise`` of the protected number of records n' (:meth:`relative_noise`), and n' is at
    most ``aim_max_records`` when that cost cap is set (on a wide table each AIM round counts new candidate
    tables over the data, MST counts its tables once). Decided from d, rho and n' only (public, or post-processing of DP
    outputs). Why: AIM's adaptive rounds beat MST's fixed tree wherever they fit, and on wide tables while the
    final fit runs to the noise level and ``aim_join_columns`` joins what the rounds leave apart (the figures:
    docs/design.md section 4.7, "The default: `auto`" and "Joining what the rounds leave apart")."""

    def resolve(
        self,
        d: int,
        max_rounds: int,
        relative_noise: float | None = None,
        max_relative_noise: float = 0.0,
        records: int | None = None,
        max_records: int | None = None,
    ) -> Selection:
        """The selection run on ``d`` released columns (AUTO resolved; AIM and MST are themselves).

        Args:
            d: released columns (>= 1).
            max_rounds: AIM's largest number of rounds.
            relative_noise: :meth:`relative_noise` of the release, or None when unknown (then a table of more
                than ``max_rounds / 4`` columns gets MST).
            max_relative_noise: AUTO's threshold on it for the tables of more than ``max_rounds / 4`` columns.
            records: the protected number of records n', or None when unknown (then such a table gets MST).
            max_records: AUTO's cap on n' for the tables of more than ``max_rounds / 4`` columns (None: none).
        """
        if self is not Selection.AUTO:
            return self
        if 4 * d <= max_rounds:
            return Selection.AIM
        if (
            relative_noise is not None
            and relative_noise <= max_relative_noise
            and records is not None
            and (max_records is None or records <= max_records)
        ):
            return Selection.AIM
        return Selection.MST

    @staticmethod
    def relative_noise(d: int, rho: float, records: int) -> float:
        """sqrt(d / (2 rho)) / records: the std of the discrete Gaussian noise (in counts) of a 1-way table
        measured at rho / d (zCDP, [BS16, Proposition 1.6]: rho = 1 / (2 sigma^2) at L2 sensitivity 1), over
        ``records`` (the protected number of records n', >= 1). ``d`` >= 1 columns, ``rho`` > 0."""
        return math.sqrt(d / (2.0 * rho)) / max(1, records)


_DOMAIN_SHARE_MIN = 0.1
"""The default discovery share of rho for few columns without public values (WorkloadParams.domain_share)."""
_DOMAIN_SHARE_MAX = 0.5
"""The default discovery share of rho for many columns without public values."""
_DOMAIN_SHARE_COLUMNS = 150
"""Columns without public values per unit of the default discovery share (between the two bounds)."""


@dataclass(frozen=True)
class WorkloadParams:
    """Parameters of the ``workload`` mechanism: DP selection and measurement of marginals (cliques) over the
    released 1-way domain (docs/design.md section 4.7).

    Split of the release's :class:`~spark_dpsynth.privacy.budget.Budget` (held by the run's accountant):
    epsilon_N = ``number_of_records_epsilon_proportion`` x epsilon for the protected number of records
    (discrete Laplace), the rest converted to rho-zCDP at delta/2 as the marginals mechanism does; the other
    delta/2 pays for the threshold of the 1-way value discovery. rho is split: ``domain_rho_proportion`` for the
    discovery of the values of columns without public bins, the rest for the selection rounds and their
    measurements (each round's rho in the manifest).
    """

    reporting_length: int = 3
    """R, the largest clique measured (>= 1; the workload is every clique of R columns; from
    ``[aggregate] reporting_length``)."""
    percentile: float = 99.0
    """Q in (0, 100]: with multi-value columns, the DP percentile of attributes per record that sets the
    sensitivity Delta_1 of the 1-way discovery (from ``[aggregate] percentile``)."""
    number_of_records_epsilon_proportion: float = 0.005
    """N_p in (0, 1): share of epsilon spent on the protected number of records (from ``[aggregate]``)."""
    group_columns: tuple[str, ...] = ()
    """Names of columns that every clique of AIM's workload holds (fewer than R of them; each an attribute
    column, checked against the input's schema before any data is read): the workload is every R-column
    clique that holds them, the tables within each group (say ``["PUMA"]``: every pair of the other columns
    within each area, what NIST's k-marginal score measures), instead of every R-column clique. AIM weighs
    its candidates by the workload and scores its downward closure only (``mechanisms._aim.Workload``);
    MST's tree does not read the workload. Default (): every R-column clique."""
    selection: Selection = Selection.AUTO
    """``aim`` (adaptive rounds), ``mst`` (maximum spanning tree of 2-way cliques) or ``auto`` (AIM when
    4 d <= ``max_rounds`` or the budget is large enough for the width, else MST: :attr:`Selection.AUTO`)."""
    domain_rho_proportion: float | None = None
    """Share of rho in (0, 1) spent on discovering the values of the columns without public bins (unused, and
    given to the rounds, when every column has public bins); None: it grows with the number m of such columns,
    min(0.5, max(0.1, m / 150)) (:meth:`domain_share`; the discovery's noise std grows as sqrt(m / share);
    measured in docs/design.md section 4.7)."""
    selection_rho_proportion: float = 0.1
    """AIM: share in (0, 1) of each round's rho spent on the exponential-mechanism choice (AIM's 1 - alpha);
    the rest measures the chosen clique."""
    rounds: int | None = None
    """AIM: the planned number of rounds T >= 1 that sets the first round's rho (rho / T per round; None:
    4 d, where AIM uses 16 d: more rounds spread the budget thinner for no gain, docs/design.md section 4.7,
    "AIM settings"); annealing spends the budget in fewer."""
    max_rounds: int = 100
    """AIM: the largest number of rounds (>= 1); the last round spends what is left of the budget."""
    aim_join_columns: bool = True
    """AIM: when the rounds' cliques leave the columns in k > 1 parts (independent of each other under the
    model) and what is left of rho would pay for fewer than k + 1 rounds at the first rounds' budget, or the
    next round would be the last, spend it on k - 1 pairs that join them (MST's tree, from those parts)
    instead. Why: the model holds its parts independent of each other and samples them so (docs/design.md
    section 4.7, "Joining what the rounds leave apart")."""
    aim_max_relative_noise: float = 2e-3
    """``auto`` on tables of more than ``max_rounds`` / 4 columns: AIM when :meth:`Selection.relative_noise`
    (the rounds' rho spread evenly over the d released columns, as a share of n') is at most this (> 0), else
    MST. 2e-3 lies above the relative noise of every wide table on which AIM was the better of the two, and
    below that of none on which MST was (docs/design.md section 4.7, "The default: `auto`")."""
    aim_max_records: int | None = None
    """``auto`` on tables of more than ``max_rounds`` / 4 columns: AIM only up to this many protected records
    (>= 1), else MST; None (the default): no cap. A cost knob, not an accuracy one: on such a table the rounds
    that choose a new pair count its extensions in a pass over the cached patterns (about 20-50 passes where
    MST makes one), so the rounds' time grows with the number of records while their accuracy stays ahead of
    MST's (docs/design.md section 4.7, "The default: `auto`")."""
    max_model_cells: int = 1_000_000
    """AIM: cap (>= 1) on the junction-tree size of the model, in cells (AIM's model-size cap of 80 MB is
    10^7 float64 cells); candidates that would exceed ``max_model_cells`` x (rho used / rho) are not scored.
    A cost knob: the rounds' refits and scores grow with the model. Against 5 x 10^5, 10^6 gained 6 points of
    NIST's k-marginal at epsilon 10 and 6% of Adult's 3-way TVD at epsilon 4 for 1.5 times the CPU; 2 x 10^6
    gained 22 points and 8% for 2.9 times (docs/design.md section 4.7)."""
    max_clique_cells: int = 200_000
    """Candidates whose table has more cells than this (>= 1) are pruned before anything is counted."""
    max_candidates_per_round: int = 2_000
    """AIM: at most this many candidate cliques (>= 1) scored per round (pruned in a fixed public order)."""
    max_candidate_cells: int = 20_000_000
    """Cells (>= 1) of true candidate marginals the driver caches between rounds; beyond it, candidates are
    recounted per round in bounded Spark passes (int64 cells: 8 bytes each)."""
    max_cells_per_pass: int = 4_000_000
    """Cells (>= 1) of clique tables counted in one Spark pass (bounds each task's and the driver's arrays)."""
    estimation_iterations: int | None = None
    """AIM: the most steps (>= 1) of the estimator in each round, warm-started from the previous round's model
    (the synthesizer makes its own final fit); None: 300 where the counts hold few noise stds, down to 50 at
    scale (``mechanisms._aim.refit_steps``, docs/design.md section 4.8)."""
    bins_epsilon_proportion: float = 0.075
    """B_p in (0, 1): share of rho spent on the DP profile (code or measurement, range, bin edges) of numeric,
    date and timestamp columns without public bins (from ``[aggregate]``; spent only when there is one,
    docs/design.md section 2.8)."""
    discovery_measurements: bool = False
    """Pass the 1-way discovery's released counts on as partial 1-way measurements (post-processing, no more
    budget; docs/design.md section 4.7). Off by default: they lower the 1-way TVD but not the 2- and 3-way TVD
    (docs/design.md section 4.7, "The discovery's share")."""
    one_way_rho_proportion: float | None = None
    """Share in (0, 1) of the rho left after the discovery that measures the full 1-way tables (MST's first
    step, AIM's round 0); None: MST's 1/3 and, for AIM, one round's sigma. MST splits the rest evenly between
    the tree's choices and its 2-way tables (docs/design.md section 4.7)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "selection", enum_value(Selection, "selection", self.selection))
        v.integer("reporting_length", self.reporting_length, low=1)
        self._check_group_columns()
        q = v.finite("percentile", self.percentile)
        if not 0 < q <= 100:
            raise InvalidParameterError(f"percentile must be in (0, 100], got {self.percentile!r}")
        npp = v.open_unit("number_of_records_epsilon_proportion", self.number_of_records_epsilon_proportion)
        check_pure_shares(npp)
        if self.domain_rho_proportion is not None:
            v.open_unit("domain_rho_proportion", self.domain_rho_proportion)
        v.open_unit("selection_rho_proportion", self.selection_rho_proportion)
        bp = v.open_unit("bins_epsilon_proportion", self.bins_epsilon_proportion)
        dp = self.domain_rho_proportion if self.domain_rho_proportion is not None else _DOMAIN_SHARE_MAX
        if 2 * bp + dp >= 1:
            raise InvalidParameterError(
                "2 x bins_epsilon_proportion (the DP profile and the DP exact values) + domain_rho_proportion "
                f"must be < 1 (its default can reach {_DOMAIN_SHARE_MAX}), got 2 x {bp} + {dp}"
            )
        if self.one_way_rho_proportion is not None:
            v.open_unit("one_way_rho_proportion", self.one_way_rho_proportion)
        if self.rounds is not None:
            v.integer("rounds", self.rounds, low=1)
        v.integer("max_rounds", self.max_rounds, low=1)
        v.positive("aim_max_relative_noise", self.aim_max_relative_noise)
        if self.aim_max_records is not None:
            v.integer("aim_max_records", self.aim_max_records, low=1)
        for name in (
            "max_model_cells",
            "max_clique_cells",
            "max_candidates_per_round",
            "max_candidate_cells",
            "max_cells_per_pass",
        ):
            v.integer(name, getattr(self, name), low=1)
        if self.estimation_iterations is not None:
            v.integer("estimation_iterations", self.estimation_iterations, low=1)
        if self.max_clique_cells > self.max_cells_per_pass:
            raise InvalidParameterError(
                f"max_clique_cells must be <= max_cells_per_pass ({self.max_cells_per_pass}), "
                f"got {self.max_clique_cells}"
            )

    def _check_group_columns(self) -> None:
        """``group_columns``: a list of distinct non-empty names, fewer than R (the workload's cliques hold one
        more column at least)."""
        group = self.group_columns
        if isinstance(group, str) or not all(isinstance(c, str) and c for c in group):
            raise InvalidParameterError(f"group_columns must be a list of column names, got {group!r}")
        object.__setattr__(self, "group_columns", tuple(group))
        if len(set(group)) < len(group):
            raise InvalidParameterError(f"group_columns repeat a column: {list(group)}")
        if len(group) >= self.reporting_length:
            raise InvalidParameterError(
                f"group_columns must be fewer than reporting_length ({self.reporting_length}): the workload's "
                f"cliques of {self.reporting_length} columns hold them and one more at least, got {list(group)}"
            )

    def domain_share(self, columns: int) -> float:
        """The discovery's share of rho for ``columns`` (>= 0) columns without public values:
        ``domain_rho_proportion``, or when None min(0.5, max(0.1, columns / 150)): the discovery's threshold
        grows with the columns it discovers, so a wide table needs the larger share (docs/design.md section 4.7,
        "The discovery's share")."""
        if self.domain_rho_proportion is not None:
            return self.domain_rho_proportion
        return min(_DOMAIN_SHARE_MAX, max(_DOMAIN_SHARE_MIN, columns / _DOMAIN_SHARE_COLUMNS))
