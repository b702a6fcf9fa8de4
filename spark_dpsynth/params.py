"""Parameter objects: frozen, validated in ``__post_init__``, one docstring line per field.

* :class:`DataConfig` says how a table becomes records of attributes (prepare stage).
* :class:`AggregationParams` are the privacy parameters of a DP release (docs/design.md section 2).
* :class:`SynthesisParams` steer synthesis from a release (docs/design.md sections 4.1 and 4.2).
* :class:`WorkloadParams` are the parameters of the ``workload`` mechanism (docs/design.md section 4.7).

Every check here runs before any data is read. Messages name the field, the value and the allowed range.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from spark_dpsynth import _validate as v
from spark_dpsynth.errors import InvalidParameterError

__all__ = [
    "Accounting",
    "AccuracyMode",
    "FabricationMode",
    "BinSpec",
    "DataConfig",
    "hash_bucket_labels",
    "AggregationParams",
    "SynthesisParams",
    "MIN_DELTA",
    "MAX_HASH_BUCKETS",
    "MAX_MULTI_VALUES",
    "MAX_ROWS_PER_PERSON_BOUND",
    "PersonRows",
    "MAX_PARTITIONS",
    "MAX_RECORDS_PER_PARTITION",
    "MAX_SYNTHETIC_RECORDS",
    "RECORDS_PER_PARTITION",
    "check_synthesis_size",
    "synthesis_partitions",
    "Selection",
    "WorkloadParams",
]

MIN_DELTA = 1e-100
"""Smallest ``AggregationParams.delta``: below it the quantities derived from delta (ln(2/delta), the threshold
rho_1's tail delta/2, Phi^-1 of it) leave the floating-point range (NaN near 1e-308) or the 40-standard-deviation
window of the discrete Gaussian tail; no meaningful guarantee needs a smaller delta."""
MAX_HASH_BUCKETS = 10_000
"""Largest ``DataConfig.hash_buckets`` count of one column: its B labels are a public domain that every table of
the column covers whole (docs/design.md section 2.8), so B is bounded like a codebook, not like a set of values."""
MAX_MULTI_VALUES = 100_000
"""Largest ``DataConfig.max_multi_values``: the DP percentile of Delta_1 scores every candidate 0..(single-value
columns + max_multi_values x multi-value columns) in one array on the driver."""
MAX_PARTITIONS = 10_000
"""Largest ``SynthesisParams.partitions``: the driver plans every partition and splits the records (of each
cell, for some synthesizers) over them in (cells, partitions) arrays."""
MAX_RECORDS_PER_PARTITION = 2_000_000
"""Most synthetic records one partition (one task) draws: it holds them as an (n, d) array of value codes, then
as Arrow strings, and the ``model`` synthesizer rakes a pool ``pool_size_factor`` times as large in chunks."""
RECORDS_PER_PARTITION = 1_000_000
"""Synthetic records per partition the default number of partitions aims at (:func:`synthesis_partitions`):
half of :data:`MAX_RECORDS_PER_PARTITION`, so that :data:`MAX_SYNTHETIC_RECORDS` fits :data:`MAX_PARTITIONS`."""
MAX_SYNTHETIC_RECORDS = 10**10
"""Largest ``SynthesisParams.target_number_of_records``: more records than this is a job for several runs, each
writing its share (and every run holds at most :data:`MAX_RECORDS_PER_PARTITION` per partition)."""


class AccuracyMode(enum.StrEnum):
    """How the marginal budget is split over lengths k = 1..R through sigma proportions p_k (docs/design.md section 2.3)."""

    PRIORITIZE_LONG = "prioritize_long"
    """p_k = 1/k: smaller noise on longer combinations (the default)."""
    PRIORITIZE_SHORT = "prioritize_short"
    """p_k = 1/(R-k+1): smaller noise on shorter combinations."""
    BALANCED = "balanced"
    """p_k = 1: the same sigma for every length."""
    CUSTOM = "custom"
    """p_k given in ``AggregationParams.sigma_proportions``."""


class FabricationMode(enum.StrEnum):
    """How the thresholds rho_k of lengths k >= 2 are set (docs/design.md section 2.5)."""

    UNCONTROLLED = "uncontrolled"
    """Adaptive, eta_k = 1 for every k (threshold 0: the most fabrication)."""
    PROGRESSIVE = "progressive"
    """Adaptive, eta_k = 0.1 + 0.9 (k-2)/(R-2): strict on pairs, lax on the longest combinations."""
    BALANCED = "balanced"
    """Adaptive, eta_2 = 0.55 and eta_k = 1 for k > 2 (the default)."""
    MINIMIZE = "minimize"
    """Adaptive, eta_k = 0.01 for every k (the least fabrication, the most suppression)."""
    CUSTOM_FIXED = "custom_fixed"
    """Fixed thresholds t_2..t_R from ``AggregationParams.thresholds``."""
    CUSTOM_ADAPTIVE = "custom_adaptive"
    """Adaptive, eta_2..eta_R from ``AggregationParams.thresholds``, each in (0, 1]."""


class Accounting(enum.StrEnum):
    """How rho is derived from (epsilon_M, delta/2) (docs/design.md section 2.3)."""

    CLASSIC = "classic"
    """rho = (sqrt(epsilon_M + ln(2/delta)) - sqrt(ln(2/delta)))^2: the classic conversion (Bun & Steinke 2016,
    Proposition 1.3), as SDS (docs/design.md section 2.3). The default."""
    TIGHT_ZCDP = "tight_zcdp"
    """The largest rho whose exact zCDP -> (epsilon, delta) conversion (Canonne, Kamath, Steinke 2020,
    Proposition 12, computed by OpenDP) gives epsilon_M at delta/2: same guarantee, larger rho, smaller sigma."""


class PersonRows(enum.StrEnum):
    """What a privacy unit does with a person's rows (``DataConfig.person_rows``; docs/design.md section 2.10)."""

    AUTO = "auto"
    """``events``, unless multi-value columns are declared (then ``merge``, SDS's record of a person)."""
    EVENTS = "events"
    """Person-level DP over the event rows: each person keeps at most L rows (``max_rows_per_person``, or a DP
    percentile), the rows are measured at the row-level budget that group privacy over L rows allows, and the
    synthetic table holds persons with their rows under one surrogate key."""
    MERGE = "merge"
    """A person's rows are merged into one record (SDS's ``subject_id``); the synthetic table holds one record
    per person."""


MAX_ROWS_PER_PERSON_BOUND = 100_000
"""Largest ``DataConfig.rows_per_person_bound``: the DP percentile of rows per person scores every candidate
0..bound in one array on the driver."""


TEXT_NUMBERS_EPSILON_PROPORTION = 0.01
"""The share of epsilon of the DP test of numbers written as text (docs/design.md section 2.8) in its pure-DP
form (discrete Laplace), spent by the marginals and class-conditional mechanisms when the table has string columns
without a rule of the configuration: four noisy counts per such column."""

TEXT_NUMBERS_RHO_PROPORTION = 0.01
"""The share of rho of the same test in its zCDP form (discrete Gaussian, L2 sensitivity sqrt(s) for s columns),
spent by the workload mechanism (the default) once epsilon is converted to rho (docs/design.md section 2.8)."""


def _check_pure_shares(npp: float, *others: tuple[str, float]) -> None:
    """The pure-DP shares taken before the rest of epsilon: N_p, the test of numbers written as text
    (:data:`TEXT_NUMBERS_EPSILON_PROPORTION`) and ``others`` (name, proportion) must leave some epsilon."""
    total = npp + TEXT_NUMBERS_EPSILON_PROPORTION + sum(p for _, p in others)
    if total >= 1:
        named = " + ".join(
            [
                "number_of_records_epsilon_proportion",
                "the test of numbers written as text",
                *(n for n, _ in others),
            ]
        )
        raise InvalidParameterError(f"{named} must be < 1, got {total:g}")


@dataclass(frozen=True)
class BinSpec:
    """Public bin edges for one numeric column (edges are written in the config, never computed from data).

    A value x becomes the label of the interval that holds it: ``"<e0"`` for x < e_0, ``"[e_i, e_i+1)"`` for
    e_i <= x < e_i+1, and ``">=e_m"`` for x >= e_m. A value in ``passthrough`` stays as it is; any other value
    that is not a number is empty.
    """

    edges: tuple[float, ...]
    """Strictly increasing finite bin edges; at least one."""
    labels: tuple[str, ...] | None = None
    """Optional labels, one per interval (len(edges) + 1 of them); default labels as above."""
    passthrough: tuple[str, ...] = ()
    """Non-numeric codes kept as categories of their own (e.g. NIST's ``"N"``, not applicable)."""
    lower: float | None = None
    """Public lower bound of the column's values (finite, <= edges[0]): a synthetic value of the bin ``<e0`` is
    drawn in [lower, e0); None: the neighbour's width below e0, cut at 0 when e0 > 0 (docs/design.md section
    2.8)."""
    upper: float | None = None
    """Public upper bound (finite, >= the last edge): a synthetic value of the bin ``>=e_m`` is drawn in
    [e_m, upper]; None: the neighbour's width above e_m, cut at 0 when e_m < 0 (docs/design.md section 2.8)."""
    count: int | None = None
    """With ``lower`` and ``upper`` and no ``edges``: ``count`` >= 1 equal-width bins between the bounds."""
    points: tuple[float, ...] = ()
    """Exact values kept as categories of their own (a spike such as 0 in an amount, 40 in weekly hours): a
    value equal to one of them gets its label (:meth:`point_labels`) instead of its bin's, and comes back
    exactly (docs/design.md section 2.8). Finite, distinct."""
    integral: bool = False
    """True when the column's values are whole numbers (a real column of whole numbers): values drawn inside a
    bin are whole numbers too (docs/design.md section 2.8)."""
    shape: tuple[tuple[float, ...], ...] = ()
    """The within-bin shape a DP profile measured (post-processing of its noisy counts, docs/design.md section
    2.8): pieces ``(a, b, weight)`` with a <= b, in value order, that do not overlap; a value drawn inside a
    bin falls in one of the bin's pieces with probability proportional to its weight, then uniformly in
    [a, b] (the whole numbers of [a, b] on the integer scale; a = b is an exact value). A piece
    ``(a, b, weight, step)`` (step > 0, b - a a whole multiple of it) holds the values a, a + step, ..., b
    only: a lattice (months counted in whole years). Empty: uniform in the bin. Finite; weights > 0."""

    def __post_init__(self) -> None:
        lower = None if self.lower is None else v.finite("bins.lower", self.lower)
        upper = None if self.upper is None else v.finite("bins.upper", self.upper)
        if lower is not None and upper is not None and not lower < upper:
            raise InvalidParameterError(f"bins.lower must be < bins.upper, got {lower} and {upper}")
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)
        if self.count is not None:
            n = v.integer("bins.count", self.count, low=1)
            if self.edges or lower is None or upper is None:
                raise InvalidParameterError("bins.count needs lower and upper and no edges")
            width = (upper - lower) / n
            object.__setattr__(self, "edges", tuple(lower + i * width for i in range(n + 1)))
        edges = tuple(v.finite("bins.edges", e) for e in self.edges)
        if not edges:
            raise InvalidParameterError("bins.edges must hold at least one edge, got []")
        if any(b <= a for a, b in zip(edges, edges[1:], strict=False)):
            raise InvalidParameterError(f"bins.edges must be strictly increasing, got {list(self.edges)}")
        object.__setattr__(self, "edges", edges)
        object.__setattr__(self, "passthrough", tuple(str(x).strip() for x in self.passthrough))
        points = tuple(v.finite("bins.points", p) for p in self.points)
        if len(set(points)) != len(points):
            raise InvalidParameterError(f"bins.points must be distinct, got {list(points)}")
        object.__setattr__(self, "points", tuple(sorted(points)))
        shape = []
        for piece in self.shape:
            if len(piece) not in (3, 4):
                raise InvalidParameterError(
                    f"bins.shape pieces must be (a, b, weight) or (a, b, weight, step), got {list(piece)}"
                )
            a, b, w, *more = (v.finite("bins.shape", x) for x in piece)
            if not (a <= b and w > 0):
                raise InvalidParameterError(f"bins.shape pieces need a <= b and weight > 0, got {[a, b, w]}")
            if shape and a < shape[-1][1]:
                raise InvalidParameterError("bins.shape pieces must be in value order and must not overlap")
            step = more[0] if more else 0.0
            if step < 0 or (step > 0 and abs((b - a) / step - round((b - a) / step)) > 1e-6):
                raise InvalidParameterError(
                    f"bins.shape steps must be >= 0 and divide b - a, got {[a, b, w, step]}"
                )
            # a piece without a step stays (a, b, weight): the manifests of every release before steps
            shape.append((a, b, w, step) if step > 0 else (a, b, w))
        object.__setattr__(self, "shape", tuple(shape))
        if self.labels is not None:
            labels = tuple(str(x) for x in self.labels)
            if len(labels) != len(edges) + 1:
                raise InvalidParameterError(
                    f"bins.labels must have len(edges) + 1 = {len(edges) + 1} entries, got {len(labels)}"
                )
            if len(set(labels)) != len(labels):
                raise InvalidParameterError(f"bins.labels must be distinct, got {list(labels)}")
            object.__setattr__(self, "labels", labels)
        if lower is not None and lower > edges[0]:
            raise InvalidParameterError(f"bins.lower must be <= the first edge {edges[0]}, got {lower}")
        if upper is not None and upper < edges[-1]:
            raise InvalidParameterError(f"bins.upper must be >= the last edge {edges[-1]}, got {upper}")

    def intervals(self) -> tuple[tuple[float | None, float | None], ...]:
        """The len(edges) + 1 intervals [lo, hi) in label order; None where the bin is open and no bound is given
        (the first bin's lo, the last bin's hi)."""
        e = self.edges
        inner = [(a, b) for a, b in zip(e, e[1:], strict=False)]
        return ((self.lower, e[0]), *inner, (e[-1], self.upper))

    def interval_labels(self) -> tuple[str, ...]:
        """The len(edges) + 1 labels, in the order of the intervals."""
        if self.labels is not None:
            return self.labels

        def fmt(x: float) -> str:
            return str(int(x)) if x.is_integer() else repr(x)

        e = self.edges
        inner = [f"[{fmt(a)}, {fmt(b)})" for a, b in zip(e, e[1:], strict=False)]
        return (f"<{fmt(e[0])}", *inner, f">={fmt(e[-1])}")

    def point_labels(self) -> tuple[str, ...]:
        """The labels of the exact ``points``, in their order: ``"=0"``, ``"=40"``, ``"=2.5"``."""
        return tuple(f"={int(p)}" if float(p).is_integer() else f"={p!r}" for p in self.points)

    def domain(self) -> tuple[str, ...]:
        """Every value a binned column takes in the release: the interval labels, the point labels and the
        passthrough codes (a public domain, docs/design.md section 2.9)."""
        return (*self.interval_labels(), *self.point_labels(), *self.passthrough)


@dataclass(frozen=True)
class DataConfig:
    """How the rows of a table become records of attributes (the prepare stage, docs/design.md section 2.1).

    An attribute is a (column, value) pair. Empty values are not attributes: null, the empty string, a string
    of only white space, any of ``empty_values``, and ``"0"`` when ``zeros_are_empty`` and the column is not in
    ``sensitive_zeros``. Column names are matched exactly (no case folding).

    Privacy unit (SDS's ``subject_id``): with ``privacy_unit`` set, all rows with the same value in that column
    are merged into one record before counting, so the guarantee covers a person, not a row. A single-value
    column whose non-empty values differ among one person's rows is an error (declare it multi-value); empty
    rows do not conflict. The unit column is never an attribute.

    Multi-value columns (SDS's ``multi_value_columns``): ``multi_value = {column: delimiter}``; a cell holds
    zero or more values separated by the delimiter, and each value v becomes the binary attribute column
    ``f"{column}_{v}"`` (value ``"1"``), as in SDS. Unlike SDS, which columns exist is private: a derived column
    appears in the release (its columns, manifest, aggregates) only when its attribute passed the threshold
    rho_1.
    """

    columns: tuple[str, ...] | None = None
    """The attribute columns, in order; None means every column of the input."""
    empty_values: tuple[str, ...] = ()
    """Strings that mean "no value" (e.g. ``"?"``, ``"N"``), compared after trimming white space."""
    zeros_are_empty: bool = False
    """Treat the value ``"0"`` as empty (SDS's default); off by default: we never drop 0 unless asked."""
    sensitive_zeros: tuple[str, ...] = ()
    """Columns in which ``"0"`` stays a value even when ``zeros_are_empty`` is on."""
    bins: Mapping[str, BinSpec] = field(default_factory=dict)
    """Public bin edges for numeric columns: column name -> :class:`BinSpec`."""
    privacy_unit: str | None = None
    """Column naming the person whose rows form one record (the privacy unit); None: each row is a record."""
    person_rows: PersonRows = PersonRows.AUTO
    """With ``privacy_unit``: ``events`` keeps a person's rows (person-level DP over event rows, each person
    bounded to L rows), ``merge`` merges them into one record (SDS's semantics), ``auto`` is ``merge`` when
    multi-value columns are declared, else ``events`` (docs/design.md section 2.10)."""
    max_rows_per_person: int | None = None
    """L, the cap on the rows of one person that the event measurements read (``person_rows = events``),
    1..100000: a person with more keeps L of them, chosen by a keyed hash. None: read off the noisy histogram of
    rows per person at ``rows_per_person_percentile`` (post-processing, no further budget)."""
    rows_per_person_percentile: float = 0.2
    """The percentile, in (0, 1), of the persons' numbers of rows at which L is read off the noisy histogram of
    rows per person. Low by default: the event noise grows as L, while the synthetic persons' numbers of rows
    come from the histogram whatever L (docs/design.md section 2.10 gives the measurement behind 0.2)."""
    rows_per_person_bound: int = 1000
    """The public upper end, 1..100000, of the bins of the histogram of rows per person (a person with more rows
    is counted in the last bin; synthetic persons have at most this many rows); a range that must not depend on
    the data."""
    person_columns: tuple[str, ...] | None = None
    """Columns whose value is one per person (birth year, home region), declared: a synthetic person's rows share
    them. None: a DP test finds them (a column is a person column when the noisy number of persons whose rows
    hold two values is at most 5% of the noisy number of persons)."""
    time_column: str | None = None
    """The event time (a date, timestamp or number column, e.g. a year) along which a synthetic person's rows are
    ordered; None: the first date or timestamp column of the input, if any."""
    multi_value: Mapping[str, str] = field(default_factory=dict)
    """Multi-value columns: column name -> the delimiter (non-empty) between its values in a cell."""
    max_multi_values: int = 64
    """Public bound, 1..100000, on the values one record holds in one multi-value column: with multi-value columns
    the DP percentile for Delta_1 searches 0..(single-value columns + this x multi-value columns), a range that
    must not depend on the data. A record with more values is still counted (sampled down to Delta_1)."""
    categorical: tuple[str, ...] = ()
    """Numeric, date or timestamp columns counted as categories (one value per distinct number, each released
    only above the threshold) instead of being binned; their synthetic values come back in the column's type."""
    dp_bins: int = 16
    """Bins of a numeric, date or timestamp column that has no public bins and that its DP profile finds to be a
    measurement: edges at the noisy 1/dp_bins ..
    (dp_bins - 1)/dp_bins of the column, >= 2 (docs/design.md section 2.8, which gives the reason for 16)."""
    text_numbers: bool | None = None
    """Whether the string columns without a rule here (not categorical, no bins or domain, not multi-value, not
    hash-bucketed) go through the DP test of numbers written as text (an income of numbers and ``N``; share
    ``text_numbers``, docs/design.md section 2.8). None (the default): yes, except for a CSV read with ``[input]
    infer_schema = false`` and no declared schema (every column a string by the user's choice: categories, as
    before types); True or False: always or never."""
    record_limit: int | None = None
    """Use only the first ``record_limit`` rows of the input (>= 1; SDS's ``record_limit``): in the order Spark
    reads them, which is the file order for CSV and Parquet. None: every row."""
    domains: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """PUBLIC domains (codebooks) of categorical columns: column name -> its possible values, from public
    documentation (a survey's codebook, a data dictionary), never computed from the data. A value outside its
    column's domain is empty (compared after trimming white space). Such a column costs no domain discovery:
    the workload mechanism measures its tables over the whole domain (docs/design.md section 2.9)."""
    identifiers: tuple[str, ...] = ()
    """Identifier columns (a row key, a customer number): read from the schema only, left out of every
    measurement (no budget, no marginal), and written in the synthetic table at their input position and type as
    fresh surrogate keys that depend on nothing in the data: 1..N for an integer column, ``"syn-"`` and the
    zero-padded number for a string column (docs/design.md section 2.8). Not in ``columns``; integer or string
    columns only. The privacy unit may be one: a release of one record per person then writes one surrogate key
    per synthetic person."""
    hash_buckets: Mapping[str, int] = field(default_factory=dict)
    """Hash buckets of high-cardinality columns: column name -> B, 2..10000. The value (trimmed, as a string) is
    replaced by its bucket ``pmod(xxhash64(value), B)``, labelled ``"bucket i of B"`` (i zero-padded); the B
    labels are a public domain (docs/design.md sections 2.8 and 2.9), and the synthetic column holds labels
    (strings), never values."""

    def __post_init__(self) -> None:
        if self.columns is not None:
            cols = tuple(self.columns)
            if not cols:
                raise InvalidParameterError("columns must name at least one column, got []")
            dup = sorted({c for c in cols if cols.count(c) > 1})
            if dup:
                raise InvalidParameterError(f"columns must be distinct, got duplicates {dup}")
            object.__setattr__(self, "columns", cols)
        object.__setattr__(self, "empty_values", tuple(str(x).strip() for x in self.empty_values))
        object.__setattr__(self, "sensitive_zeros", tuple(self.sensitive_zeros))
        bins = dict(self.bins)
        for name, spec in bins.items():
            if not isinstance(spec, BinSpec):
                raise InvalidParameterError(f"bins[{name!r}] must be a BinSpec, got {type(spec).__name__}")
        object.__setattr__(self, "bins", bins)
        multi = dict(self.multi_value)
        for name, delimiter in multi.items():
            if not isinstance(delimiter, str) or not delimiter:
                raise InvalidParameterError(
                    f"multi_value[{name!r}] must be a non-empty delimiter string, got {delimiter!r}"
                )
        object.__setattr__(self, "multi_value", multi)
        binned_multi = sorted(set(multi) & set(bins))
        if binned_multi:
            raise InvalidParameterError(f"multi-value columns cannot have bins: {binned_multi}")
        if self.privacy_unit is not None:
            if not isinstance(self.privacy_unit, str) or not self.privacy_unit:
                raise InvalidParameterError(f"privacy_unit must be a column name, got {self.privacy_unit!r}")
            roles = [("columns", self.columns or ()), ("multi_value", tuple(multi)), ("bins", tuple(bins))]
            roles.append(("sensitive_zeros", self.sensitive_zeros))
            for what, names in roles:
                if self.privacy_unit in names:
                    raise InvalidParameterError(
                        f"the privacy unit column {self.privacy_unit!r} is never an attribute; remove it from {what}"
                    )
        object.__setattr__(self, "person_rows", PersonRows(self.person_rows))
        if self.max_rows_per_person is not None:
            v.integer("max_rows_per_person", self.max_rows_per_person, low=1, high=MAX_ROWS_PER_PERSON_BOUND)
        v.open_unit("rows_per_person_percentile", self.rows_per_person_percentile)
        v.integer("rows_per_person_bound", self.rows_per_person_bound, low=1, high=MAX_ROWS_PER_PERSON_BOUND)
        if self.person_columns is not None:
            if isinstance(self.person_columns, str):
                raise InvalidParameterError(
                    f"person_columns must be a list of column names, got {self.person_columns!r}"
                )
            object.__setattr__(self, "person_columns", tuple(self.person_columns))
            if self.privacy_unit is not None and self.privacy_unit in self.person_columns:
                raise InvalidParameterError(
                    f"the privacy unit column {self.privacy_unit!r} is never an attribute; remove it from "
                    "person_columns"
                )
        v.integer("max_multi_values", self.max_multi_values, low=1, high=MAX_MULTI_VALUES)
        v.integer("dp_bins", self.dp_bins, low=2)
        if self.text_numbers is not None and not isinstance(self.text_numbers, bool):
            raise InvalidParameterError(
                f"text_numbers must be true, false or unset, got {self.text_numbers!r}"
            )
        object.__setattr__(self, "categorical", tuple(self.categorical))
        both = sorted(set(self.categorical) & set(bins))
        if both:
            raise InvalidParameterError(f"a column cannot be both categorical and binned: {both}")
        if self.record_limit is not None:
            v.integer("record_limit", self.record_limit, low=1)
        object.__setattr__(self, "domains", self._checked_domains(bins, multi))
        self._check_identifiers_and_buckets(bins, multi)
        if self.columns is not None:
            names_by_role = (
                ("domains", tuple(self.domains)),
                ("categorical", self.categorical),
                ("sensitive_zeros", self.sensitive_zeros),
                ("bins", tuple(bins)),
                ("multi_value", tuple(multi)),
                ("hash_buckets", tuple(self.hash_buckets)),
            )
            for what, names in names_by_role:
                unknown = [c for c in names if c not in self.columns]
                if unknown:
                    raise InvalidParameterError(f"{what} names columns not in columns: {unknown}")

    def _checked_domains(
        self, bins: Mapping[str, BinSpec], multi: Mapping[str, str]
    ) -> dict[str, tuple[str, ...]]:
        """``domains`` validated: non-empty tuples of distinct, trimmed, non-empty strings on single-value
        columns without bins, never the privacy unit."""
        if not isinstance(self.domains, Mapping):
            raise InvalidParameterError(
                f"domains must map column names to lists of values, got {type(self.domains).__name__}"
            )
        out: dict[str, tuple[str, ...]] = {}
        for name, values in self.domains.items():
            if isinstance(values, str) or not isinstance(values, Sequence):
                raise InvalidParameterError(f"domains[{name!r}] must be a list of strings, got {values!r}")
            if not values:
                raise InvalidParameterError(f"domains[{name!r}] must hold at least one value, got []")
            bad = [x for x in values if not isinstance(x, str)]
            if bad:
                raise InvalidParameterError(f"domains[{name!r}] must hold strings, got {bad[:5]}")
            trimmed = tuple(x.strip() for x in values)
            zero_empty = self.zeros_are_empty and name not in self.sensitive_zeros
            empty = [x for x in trimmed if not x or x in self.empty_values or (zero_empty and x == "0")]
            if empty:
                raise InvalidParameterError(
                    f"domains[{name!r}] holds value(s) {empty} that the config treats as empty"
                )
            dup = sorted({x for x in trimmed if trimmed.count(x) > 1})
            if dup:
                raise InvalidParameterError(
                    f"domains[{name!r}] values must be distinct, got duplicates {dup}"
                )
            out[name] = trimmed
        for what, names in (("bins", bins), ("multi_value", multi)):
            both = sorted(set(out) & set(names))
            if both:
                raise InvalidParameterError(f"a column cannot have both a public domain and {what}: {both}")
        if self.privacy_unit is not None and self.privacy_unit in out:
            raise InvalidParameterError(
                f"the privacy unit column {self.privacy_unit!r} is never an attribute; remove it from domains"
            )
        return out

    def _check_identifiers_and_buckets(self, bins: Mapping[str, BinSpec], multi: Mapping[str, str]) -> None:
        """``identifiers`` and ``hash_buckets`` validated: distinct names, B in 2..:data:`MAX_HASH_BUCKETS`, and
        no column in two roles (an identifier is no attribute; a bucketed column has no other value rule)."""
        if isinstance(self.identifiers, str):
            raise InvalidParameterError(
                f"identifiers must be a list of column names, got {self.identifiers!r}"
            )
        ids = tuple(self.identifiers)
        bad = [c for c in ids if not isinstance(c, str) or not c]
        if bad:
            raise InvalidParameterError(f"identifiers must be column names, got {bad}")
        dup = sorted({c for c in ids if ids.count(c) > 1})
        if dup:
            raise InvalidParameterError(f"identifiers must be distinct, got duplicates {dup}")
        object.__setattr__(self, "identifiers", ids)
        if not isinstance(self.hash_buckets, Mapping):
            raise InvalidParameterError(
                f"hash_buckets must map column names to bucket counts, got {type(self.hash_buckets).__name__}"
            )
        buckets = dict(self.hash_buckets)
        for name, count in buckets.items():
            v.integer(f"hash_buckets[{name!r}]", count, low=2, high=MAX_HASH_BUCKETS)
        object.__setattr__(self, "hash_buckets", buckets)
        unit = () if self.privacy_unit is None else (self.privacy_unit,)
        roles = (
            ("columns", self.columns or ()),
            ("bins", tuple(bins)),
            ("domains", tuple(self.domains)),
            ("categorical", self.categorical),
            ("multi_value", tuple(multi)),
            ("sensitive_zeros", self.sensitive_zeros),
            ("hash_buckets", tuple(buckets)),
        )
        for what, names in roles:
            both = sorted(set(ids) & set(names))
            if both:
                raise InvalidParameterError(
                    f"identifier column(s) {both} are left out of the measurement, so they cannot be in {what}"
                )
        for what, names in (("privacy_unit", unit), *roles[1:-2]):
            both = sorted(set(buckets) & set(names))
            if both:
                raise InvalidParameterError(f"a column cannot have both hash_buckets and {what}: {both}")

    @property
    def public_domains(self) -> dict[str, tuple[str, ...]]:
        """Every column whose values are public by configuration: ``domains`` (codebooks) and the bucket labels
        of ``hash_buckets`` (:func:`hash_bucket_labels`), column -> its values in order."""
        return {**self.domains, **{c: hash_bucket_labels(b) for c, b in self.hash_buckets.items()}}

    def with_columns(self, columns: tuple[str, ...]) -> DataConfig:
        """This config with ``columns`` set (used when the config left them to the input's schema)."""
        return dataclasses.replace(self, columns=columns)

    @property
    def merges_rows(self) -> bool:
        """True when records are not rows: a privacy unit merges rows, or multi-value columns expand cells."""
        return self.privacy_unit is not None or bool(self.multi_value)

    @property
    def keeps_events(self) -> bool:
        """True when a privacy unit keeps its persons' event rows (``person_rows`` ``events``, or ``auto``
        without multi-value columns): person-level DP with event rows out (docs/design.md section 2.10)."""
        if self.privacy_unit is None:
            return False
        if self.person_rows is PersonRows.AUTO:
            return not self.multi_value
        return self.person_rows is PersonRows.EVENTS


def hash_bucket_labels(buckets: int) -> tuple[str, ...]:
    """The public labels of a column hashed into ``buckets`` buckets, in bucket order: ``"bucket 0 of 8"`` ..
    ``"bucket 7 of 8"``, the number zero-padded to the width of B - 1 (``"bucket 007 of 128"``) so that the
    labels sort in bucket order."""
    width = len(str(buckets - 1))
    return tuple(f"bucket {i:0{width}d} of {buckets}" for i in range(buckets))


@dataclass(frozen=True)
class AggregationParams:
    """Privacy parameters of a DP release of k-way marginals (docs/design.md section 2).

    The release's (epsilon, delta), accounting and test-mode seed are its
    :class:`~spark_dpsynth.privacy.budget.Budget`, held by the run's accountant; these are the mechanism's shares
    of it. Split: epsilon = epsilon_N + epsilon_M with epsilon_N = ``number_of_records_epsilon_proportion`` * epsilon;
    rho = (sqrt(epsilon_M + ln(2/delta)) - sqrt(ln(2/delta)))^2; a share ``percentile_epsilon_proportion`` of rho
    pays for the R DP percentiles, the rest for the Gaussian noise on the counts. See :mod:`spark_dpsynth.privacy.accounting`.
    """

    reporting_length: int = 3
    """R, the longest combination released, 1 <= R <= number of attribute columns."""
    percentile: float = 99.0
    """Q, the percentile of per-record k-tuple counts used as sensitivity Delta_k, in (0, 100]."""
    percentile_epsilon_proportion: float = 0.01
    """Q_p, the share of rho spent on the R DP percentiles, in (0, 1)."""
    number_of_records_epsilon_proportion: float = 0.005
    """N_p, the share of epsilon spent on the protected number of records, in (0, 1)."""
    bins_epsilon_proportion: float = 0.075
    """B_p, the share of rho spent on the DP profile (code or measurement, range, bin edges), in (0, 1); spent
    only when a numeric, date or timestamp column has no public bins (docs/design.md section 2.8)."""
    accuracy_mode: AccuracyMode = AccuracyMode.PRIORITIZE_LONG
    """Preset of sigma proportions p_k (see :class:`AccuracyMode`)."""
    sigma_proportions: tuple[float, ...] | None = None
    """p_1..p_R, each > 0, required with AccuracyMode.CUSTOM and forbidden otherwise."""
    fabrication_mode: FabricationMode = FabricationMode.BALANCED
    """Preset of thresholds for k >= 2 (see :class:`FabricationMode`)."""
    thresholds: tuple[float, ...] | None = None
    """t_2..t_R (fixed, >= 0) or eta_2..eta_R (adaptive, in (0, 1]); R-1 values, custom modes only."""
    max_column_subsets: int = 20_000
    """Planner: the largest C(d, k) (column subsets of one length, >= 1) the job counts; each record is looked
    up in every subset, so the work grows as records x C(d, k). Beyond it the job stops before reading data."""
    max_candidates: int = 2_000_000
    """Planner: the most candidate k-tuples of one length (>= 1) the job counts and noises on the driver;
    beyond it the job stops before counting that length."""

    def __post_init__(self) -> None:
        v.integer("reporting_length", self.reporting_length, low=1)
        v.integer("max_column_subsets", self.max_column_subsets, low=1)
        v.integer("max_candidates", self.max_candidates, low=1)
        q = v.finite("percentile", self.percentile)
        if not 0 < q <= 100:
            raise InvalidParameterError(f"percentile must be in (0, 100], got {self.percentile!r}")
        qp = v.open_unit("percentile_epsilon_proportion", self.percentile_epsilon_proportion)
        npp = v.open_unit("number_of_records_epsilon_proportion", self.number_of_records_epsilon_proportion)
        bp = v.open_unit("bins_epsilon_proportion", self.bins_epsilon_proportion)
        if qp + 2 * bp >= 1:
            raise InvalidParameterError(
                "percentile_epsilon_proportion + 2 x bins_epsilon_proportion (the DP profile and the DP exact "
                f"values) must be < 1, got {qp} + 2 x {bp} = {qp + 2 * bp}"
            )
        _check_pure_shares(npp)
        if qp + npp >= 1:
            raise InvalidParameterError(
                "percentile_epsilon_proportion + number_of_records_epsilon_proportion must be < 1, "
                f"got {qp} + {npp} = {qp + npp}"
            )
        object.__setattr__(self, "accuracy_mode", _enum(AccuracyMode, "accuracy_mode", self.accuracy_mode))
        object.__setattr__(
            self, "fabrication_mode", _enum(FabricationMode, "fabrication_mode", self.fabrication_mode)
        )
        r = self.reporting_length
        if self.accuracy_mode is AccuracyMode.CUSTOM:
            if self.sigma_proportions is None:
                raise InvalidParameterError("sigma_proportions are required with accuracy_mode 'custom'")
            props = tuple(v.positive("sigma_proportions", p) for p in self.sigma_proportions)
            if len(props) != r:
                raise InvalidParameterError(
                    f"sigma_proportions must have reporting_length = {r} values, got {len(props)}"
                )
            object.__setattr__(self, "sigma_proportions", props)
        elif self.sigma_proportions is not None:
            raise InvalidParameterError(
                f"sigma_proportions are only allowed with accuracy_mode 'custom', got '{self.accuracy_mode.value}'"
            )
        custom = (FabricationMode.CUSTOM_FIXED, FabricationMode.CUSTOM_ADAPTIVE)
        if self.fabrication_mode in custom:
            if self.thresholds is None:
                raise InvalidParameterError(
                    f"thresholds are required with fabrication_mode '{self.fabrication_mode.value}'"
                )
            ts = tuple(v.finite("thresholds", t) for t in self.thresholds)
            if len(ts) != r - 1:
                raise InvalidParameterError(
                    f"thresholds must have reporting_length - 1 = {r - 1} values (k = 2..R), got {len(ts)}"
                )
            if self.fabrication_mode is FabricationMode.CUSTOM_FIXED and any(t < 0 for t in ts):
                raise InvalidParameterError(f"fixed thresholds must be >= 0, got {list(ts)}")
            if self.fabrication_mode is FabricationMode.CUSTOM_ADAPTIVE and any(not 0 < t <= 1 for t in ts):
                raise InvalidParameterError(f"adaptive thresholds (eta) must be in (0, 1], got {list(ts)}")
            object.__setattr__(self, "thresholds", ts)
        elif self.thresholds is not None:
            raise InvalidParameterError(
                "thresholds are only allowed with fabrication_mode 'custom_fixed' or 'custom_adaptive', "
                f"got '{self.fabrication_mode.value}'"
            )

    def sigma_proportions_for(self) -> tuple[float, ...]:
        """p_1..p_R of the accuracy mode (docs/design.md section 2.3)."""
        r = self.reporting_length
        if self.accuracy_mode is AccuracyMode.CUSTOM:
            assert self.sigma_proportions is not None
            return self.sigma_proportions
        if self.accuracy_mode is AccuracyMode.PRIORITIZE_LONG:
            return tuple(1.0 / k for k in range(1, r + 1))
        if self.accuracy_mode is AccuracyMode.PRIORITIZE_SHORT:
            return tuple(1.0 / (r - k + 1) for k in range(1, r + 1))
        return tuple(1.0 for _ in range(r))

    def check_columns(self, n_columns: int) -> None:
        """Raise if the reporting length exceeds the number of attribute columns (a schema fact, not data), or
        if the longest length has more column subsets than the planner allows (:meth:`check_subsets`)."""
        if self.reporting_length > n_columns:
            raise InvalidParameterError(
                f"reporting_length must be <= the number of attribute columns ({n_columns}), "
                f"got {self.reporting_length}"
            )
        self.check_subsets(n_columns)

    def check_subsets(self, n_columns: int, k: int | None = None) -> None:
        """The planner's first check, from public values only: C(d, k) column subsets of length k (default R)
        must not exceed ``max_column_subsets`` (the counting work is records x C(d, k), and the noise of every
        k-tuple grows with Delta_k <= C(d, k)).

        Raises:
            InvalidParameterError: naming the count and what to change.
        """
        import math

        k = self.reporting_length if k is None else k
        subsets = math.comb(n_columns, k)
        if subsets > self.max_column_subsets:
            raise InvalidParameterError(
                f"reporting length {k} over {n_columns} columns means {subsets:,} column subsets per record "
                f"(max_column_subsets {self.max_column_subsets:,}): the counting work and the noise grow as "
                "C(d, k); use --synthesizer pgm --selection mst (DP-selected marginals, the wide-table preset), "
                f"or --reporting-length {k - 1}, "
                "or fewer columns"
            )


SYNTHESIS_MODES = ("model", "sds")
"""The synthesizers of :class:`SynthesisParams`: ``"model"`` (the default) and ``"sds"``."""


@dataclass(frozen=True)
class SynthesisParams:
    """Parameters of synthesis from a release (docs/design.md section 4).

    Synthesis reads only the release, so it is post-processing: it costs no privacy budget. Two synthesizers:
    ``mode = "model"`` (the default) estimates the 1-, 2- and 3-way marginals from the noisy release, fits a
    Bayesian network and rakes it to those marginals (:mod:`spark_dpsynth.synthesizers._model`); it emits the
    protected number of records, each complete. ``mode = "sds"`` is SDS's aggregate-seeded sampler (docs/design.md
    section 4.2; :mod:`spark_dpsynth.synthesizers._sds_sampler`), kept for comparison and compatibility.
    """

    mode: str = "model"
    """Which synthesizer of a marginals release: ``"model"`` (fitted model, the default) or ``"sds"`` (SDS's
    aggregate-seeded sampler). An alias kept from the first version: the registry's synthesizer names
    (``[run] synthesizer``) are the general choice, and this field is read only with the default
    ``aggregate_seeded``."""
    target_number_of_records: int | None = None
    """Records to emit, 1..10^10, at most 2000000 per partition; None emits the protected number of records
    ("model") or what the attribute budgets allow ("sds")."""
    aggregate_counts_scale_factor: float | None = None
    """Factor > 0: "sds" multiplies the released counts (budgets and weights) by it before sampling; "model"
    emits that many times the protected number of records (when no target is given)."""
    use_synthetic_counts: bool = False
    """"sds" only: subtract already synthesized counts from the released ones when weighting (docs/design.md section 4.2)."""
    weight_selection_percentile: float = 95.0
    """"sds" only: percentile in [0, 100] of sub-combination counts used as weight beyond R (docs/design.md section 4.2)."""
    pool_size_factor: int = 4
    """"model" only: records a partition draws from the network per record it emits (its raking pool), >= 1."""
    min_pool_size: int = 50_000
    """"model" only: the smallest raking pool of a partition, in records, >= 1 (small partitions rake a pool
    this large so that their output does not depend on their size)."""
    partitions: int | None = None
    """Number of partitions that synthesize in parallel, 1..10000; None uses the session's default parallelism
    (the command line passes :func:`synthesis_partitions` of the records instead, docs/design.md section 1.7)."""
    seed: int | None = None
    """Seed of the utility randomness of synthesis; None draws one at random (recorded nowhere)."""

    def __post_init__(self) -> None:
        if self.mode not in SYNTHESIS_MODES:
            raise InvalidParameterError(f"mode must be one of {list(SYNTHESIS_MODES)}, got {self.mode!r}")
        if self.target_number_of_records is not None:
            v.integer(
                "target_number_of_records", self.target_number_of_records, low=1, high=MAX_SYNTHETIC_RECORDS
            )
        if self.aggregate_counts_scale_factor is not None:
            v.positive("aggregate_counts_scale_factor", self.aggregate_counts_scale_factor)
        w = v.finite("weight_selection_percentile", self.weight_selection_percentile)
        if not 0 <= w <= 100:
            raise InvalidParameterError(
                f"weight_selection_percentile must be in [0, 100], got {self.weight_selection_percentile!r}"
            )
        v.integer("pool_size_factor", self.pool_size_factor, low=1)
        v.integer("min_pool_size", self.min_pool_size, low=1)
        if self.partitions is not None:
            v.integer("partitions", self.partitions, low=1, high=MAX_PARTITIONS)
        if self.seed is not None:
            v.integer("seed", self.seed, low=0)


def check_synthesis_size(records: int, partitions: int, *, what: str = "synthesizing") -> None:
    """Raise unless ``records`` synthetic records over ``partitions`` partitions fit the per-task bound
    :data:`MAX_RECORDS_PER_PARTITION` (public numbers only: called before any data is read, or on a release).

    Raises:
        InvalidParameterError: naming the records, the partitions and the smallest number of partitions that
            would do.
    """
    parts = max(int(partitions), 1)
    if records > MAX_SYNTHETIC_RECORDS:
        raise InvalidParameterError(
            f"{what} {records:.4g} records is more than one run writes (at most {MAX_SYNTHETIC_RECORDS}); "
            "set --target-number-of-records lower"
        )
    if records > parts * MAX_RECORDS_PER_PARTITION:
        need = -(-int(records) // MAX_RECORDS_PER_PARTITION)
        raise InvalidParameterError(
            f"{what} {records:.4g} records over {parts} partitions is more than a task holds (at most "
            f"{MAX_RECORDS_PER_PARTITION} records per partition); set --partitions to at least {need} or "
            "lower --target-number-of-records"
        )


def synthesis_partitions(records: int, parallelism: int, requested: int | None = None) -> int:
    """The number of partitions that synthesize ``records`` records (docs/design.md section 4.3).

    The default follows the records and the cluster: ``max(parallelism, ceil(records / RECORDS_PER_PARTITION))``
    (at most :data:`MAX_PARTITIONS`), so that every task runs and none holds more than
    :data:`RECORDS_PER_PARTITION` records, from a thousand records to :data:`MAX_SYNTHETIC_RECORDS`. A
    requested number is kept (check it with :func:`check_synthesis_size`). ``records`` is public: a target, or
    the protected number of records of a release (a DP figure of its manifest).

    Args:
        records: the records to synthesize, >= 0.
        parallelism: the tasks the session runs at once, >= 1.
        requested: an explicit number of partitions, or None for the default.
    """
    if requested is not None:
        return int(requested)
    need = -(-max(int(records), 0) // RECORDS_PER_PARTITION)
    return max(1, min(MAX_PARTITIONS, max(int(parallelism), need)))


def _enum(cls: type[enum.Enum], name: str, value: object) -> enum.Enum:
    if isinstance(value, cls):
        return value
    try:
        return cls(value)
    except ValueError:
        allowed = [m.value for m in cls]
        raise InvalidParameterError(f"{name} must be one of {allowed}, got {value!r}") from None


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
    max_model_cells: int = 500_000
    """AIM: cap (>= 1) on the junction-tree size of the model, in cells (AIM's model-size cap of 80 MB is
    10^7 float64 cells); candidates that would exceed ``max_model_cells`` x (rho used / rho) are not scored."""
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
        object.__setattr__(self, "selection", _enum(Selection, "selection", self.selection))
        v.integer("reporting_length", self.reporting_length, low=1)
        q = v.finite("percentile", self.percentile)
        if not 0 < q <= 100:
            raise InvalidParameterError(f"percentile must be in (0, 100], got {self.percentile!r}")
        npp = v.open_unit("number_of_records_epsilon_proportion", self.number_of_records_epsilon_proportion)
        _check_pure_shares(npp)
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

    def domain_share(self, columns: int) -> float:
        """The discovery's share of rho for ``columns`` (>= 0) columns without public values:
        ``domain_rho_proportion``, or when None min(0.5, max(0.1, columns / 150)): the discovery's threshold
        grows with the columns it discovers, so a wide table needs the larger share (docs/design.md section 4.7,
        "The discovery's share")."""
        if self.domain_rho_proportion is not None:
            return self.domain_rho_proportion
        return min(_DOMAIN_SHARE_MAX, max(_DOMAIN_SHARE_MIN, columns / _DOMAIN_SHARE_COLUMNS))
