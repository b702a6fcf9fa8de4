"""The parameters of the prepare stage: how a table becomes records of attributes (docs/design.md sections 2.8
and 2.10): public bins (:class:`BinSpec`), the data configuration (:class:`DataConfig`), hashed columns' labels and
what a privacy unit does with a person's rows (:class:`PersonRows`)."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from spark_dpsynth import _validate as v
from spark_dpsynth.errors import InvalidParameterError

__all__ = [
    "BinSpec",
    "DataConfig",
    "PersonRows",
    "hash_bucket_labels",
    "MAX_HASH_BUCKETS",
    "MAX_MULTI_VALUES",
    "MAX_ROWS_PER_PERSON_BOUND",
]

MAX_HASH_BUCKETS = 10_000
"""Largest ``DataConfig.hash_buckets`` count of one column: its B labels are a public domain that every table of
the column covers whole (docs/design.md section 2.8), so B is bounded like a codebook, not like a set of values."""
MAX_MULTI_VALUES = 100_000
"""Largest ``DataConfig.max_multi_values``: the DP percentile of Delta_1 scores every candidate 0..(single-value
columns + max_multi_values x multi-value columns) in one array on the driver."""


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
    span_columns: tuple[str, ...] | None = None
    """With persons' event rows and L >= 2: the columns whose persons' spans (a person's greatest value less its
    least, by decade classes) are measured, so that a synthetic person's values stay as close together as real
    persons' (a user's ratings within two years); whole-number, date or timestamp columns. None: every such
    column that is not a person column, has no declared values or bins and follows no time rule; an empty list:
    none, and the share ``person_spans`` is not spent (a table of codes, whose spans mean nothing). Person
    columns and columns that follow a time rule are left out even when listed (docs/design.md section 2.10)."""
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
        for name in ("person_columns", "span_columns"):  # lists of attribute columns, maybe unset
            listed = getattr(self, name)
            if listed is None:
                continue
            if isinstance(listed, str):
                raise InvalidParameterError(f"{name} must be a list of column names, got {listed!r}")
            object.__setattr__(self, name, tuple(listed))
            if self.privacy_unit is not None and self.privacy_unit in listed:
                raise InvalidParameterError(
                    f"the privacy unit column {self.privacy_unit!r} is never an attribute; remove it from {name}"
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
