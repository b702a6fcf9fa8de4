"""Conditions and declared rules: synthetic rows that satisfy Spark SQL expressions (docs/design.md section 4.8,
"Conditions and declared rules").

Two uses of one machinery, both post-processing of the release (no privacy cost; an expression is public, written
by the user, never read from the data):

* a **condition** (``where``): ``release.sample(5000, where="sex = 'Female' AND age >= 60")`` draws rows that all
  satisfy it, from the model conditioned on it;
* **declared rules** (``constraints``, the ``[constraints]`` section): expressions every output row satisfies
  (public knowledge such as "a child is not married"), recorded in the release's manifest at fit time and
  applied to every draw.

A condition holds where it is true (as a ``WHERE`` clause: null fails); a rule is broken where it is false (as
a SQL ``CHECK`` constraint: null, e.g. a comparison with an empty cell, passes). An expression is Spark SQL over
the output columns, in their output types (the input's, restored by
:func:`~spark_dpsynth.synthesizers._types.restore_types`); Spark parses and evaluates it, never a parser of
ours. Three stages:

1. **Analysis** (:func:`named_columns`, on the driver, before any sampling): the expression is analysed against
   an empty table of the release's output schema: a column the release does not have, a syntax error or a
   non-boolean result is a :class:`~spark_dpsynth.errors.ConditionError` naming the expression.
2. **Cells** (:func:`cell_condition`): the expression is evaluated by Spark on a small decoded domain table, the
   cross product of the measurement cells of the columns it names (released values and the empty category),
   each cell by its representative values: a category its value, a bin of a number its whole numbers (at most
   :data:`REPRESENTATIVES`, evenly spaced, ends included) or an even grid of its interval, an empty cell null.
   Per cell, the share of its representatives that satisfy it: 0 means no record of the cell can (a structural
   zero), 1 every record does, in between a bin that the expression cuts inside.
3. **Rows** (:func:`sample_conditioned`): the ``pgm`` synthesizer fits the rules' zero cells as structural zeros
   (:func:`spark_dpsynth.synthesizers.pgm.fit_for_sampling`) and conditions its model on the condition's
   possible cells (evidence in the junction tree, :meth:`spark_dpsynth.estimation.GraphicalModel.condition`), so
   that it draws only such cells; when every expression is exact on the cells, every row satisfies them and
   nothing more is done. Otherwise (a bin cut inside, an order between two numbers), and for the other
   synthesizers (``model``, ``sds``, ``independent``: their samplers take no evidence), rows are drawn, typed,
   and those that do not satisfy every expression are rejected and redrawn: rejection sampling, whose accepted
   rows follow the sampler's distribution conditioned on the expressions exactly (von Neumann, "Various
   techniques used in connection with random digits", 1951). Exactly n rows are kept, the first that pass in
   the sample's partition order, which for ``pgm`` does not depend on the number of partitions.

   A declared rule that cuts a bin inside is first met, for ``pgm``, by drawing the row's values in their bins
   again where the rules allow them, its cells kept (:func:`_redrawing`; the rows that no value satisfies are
   then rejected as above). A rule, unlike a condition, is something every real record satisfies: the measured
   marginals count records that satisfy it, so the model's mass of a cell is the mass of the cell's values the
   rules allow, and the fit has already moved the mass of the cells no value of which is allowed (the
   structural zeros; McKenna, Miklau and Sheldon, "Winning the NIST contest: a scalable and general approach to
   differentially private synthetic data", JPC 2021 [MMS21]; private-pgm's ``structural_zeros``). Rejecting
   whole rows instead keeps of a cell's rows only the share of its values the rules allow (of the married
   records in a bin of ages 10 to 17, a rule "no married child under 15" keeps 3 ages in 8), so every marginal
   of the cut column and of the columns the rules name moves away from the measurements (docs/design.md section
   4.8, "Conditions and declared rules"). Redrawn, the cells' marginals stay the model's, and a bin's values
   are drawn from the joint of (the values a row's rules allow, the value) closest to independence with the
   rows and the bin's even values as its margins (iterative proportional fitting: Deming and Stephan, "On a
   least squares adjustment of a sampled frequency table when the expected marginal totals are known", Ann.
   Math. Statist. 11, 1940; its limit is the I-projection of Csiszar, "I-divergence geometry of probability
   distributions and minimization problems", Ann. Probab. 3, 1975), or, for bins of reals, again until the
   rules hold (rejection of the value alone [vN51]).

The model's estimate of how many real records satisfy a condition, its probability times the release's estimate
of its number of records (:func:`spark_dpsynth.synthesizers.pgm.number_of_records`), is logged (post-processing of
DP outputs).

One file over 800 lines: a condition's and the rules' stages (cells in the model, values drawn again inside their
bins, rows rejected) share one plan of columns, seeds and rounds.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_dpsynth._progress import report
from spark_dpsynth.errors import ConditionError, InvalidParameterError
from spark_dpsynth.synthesizers._types import bin_intervals, restore_value

if TYPE_CHECKING:
    from spark_dpsynth.params import SynthesisParams
    from spark_dpsynth.release.core import Release

__all__ = [
    "CONDITIONAL_SYNTHESIZERS",
    "MAX_CELL_ROWS",
    "MAX_OVERSAMPLING",
    "REDRAWS",
    "REPRESENTATIVES",
    "CellCondition",
    "cell_condition",
    "check_expressions",
    "check_rules",
    "named_columns",
    "output_frame",
    "rule_violations",
    "sample_conditioned",
    "satisfying",
    "with_rules",
]

log = logging.getLogger(__name__)

CONDITIONAL_SYNTHESIZERS = ("pgm", "model", "sds", "independent")
"""The synthesizers that sample with a condition or declared rules: ``pgm`` by conditioning its model (exact on
the cells), the others by rejection of whole rows."""
REPRESENTATIVES = 64
"""Most representative values of one bin of a number in the decoded domain table (stage 2): every whole number of
a bin that holds at most this many, else this many evenly spaced, the ends included."""
MAX_CELL_ROWS = 1 << 18
"""Most rows of one expression's decoded domain table; an expression over more cells is applied to rows only."""
MAX_OVERSAMPLING = 100.0
"""Most rows drawn per row kept by rejection: a condition rarer than 1 / this in the sampler's rows is an error
(``pgm`` conditions its model instead: only a bin cut inside is rejected, and for a rule only the rows whose
values redrawn in their bins still break it)."""
_ROUNDS = 4
"""Draws of the rejection stage before it gives up (each sized from the rate the previous one observed)."""
REDRAWS = 32
"""Most draws of a row's values in their bins before the row is rejected, where a declared rule cuts a bin inside
(module docstring, stage 3)."""
_ORDER = "__dpsynth_order"
_LABEL = "__dpsynth_label_"
_CANDIDATE = "__dpsynth_candidate_"
_VALUES = "__dpsynth_values"
_CUMULATIVE = "__dpsynth_cumulative"
_UNIFORM = "__dpsynth_uniform"
_BIN = "__dpsynth_bin"
_MASK = "__dpsynth_mask"
_KEY = "__dpsynth_kind"
_REDRAW_STREAM = 0x72647277
"""Seed stream of the redraws of values in their bins."""
_CELL = "__dpsynth_cell"
_OK = "__dpsynth_ok"
_ATTEMPT = "__dpsynth_attempt"
_FIRST = "__dpsynth_first"
_PARTITION_BITS = 33
"""``monotonically_increasing_id`` puts the partition index above bit 33 and the row's rank in it below."""
_ROUND_STREAM = 0x636F6E64
"""Seed stream of the rejection stage's later draws."""
_STRING_LITERAL = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
_IDENTIFIER = re.compile(r"`((?:[^`]|``)+)`|([A-Za-z_][A-Za-z0-9_]*)")


@dataclass(frozen=True)
class CellCondition:
    """An expression evaluated on the measurement cells of the columns it names (module docstring, stage 2)."""

    expression: str
    """The Spark SQL boolean expression, as given."""
    columns: tuple[str, ...]
    """The release columns it names, in release order."""
    share: np.ndarray | None
    """float64 over the measurement cells of ``columns`` (per column its released values, then the empty
    category; axes in ``columns``' order): the share of each cell's representative values that satisfy the
    expression, in [0, 1]; None when the table would exceed :data:`MAX_CELL_ROWS` rows (rows only)."""

    @property
    def allowed(self) -> np.ndarray | None:
        """bool over the same cells: True where a record may satisfy the expression (None: not evaluated)."""
        return None if self.share is None else self.share > 0

    @property
    def exact(self) -> bool:
        """True when every cell satisfies the expression for all its values or for none (the cells express it)."""
        return self.share is not None and bool(np.all((self.share == 0) | (self.share == 1)))


def check_expressions(value: Any, what: str) -> tuple[str, ...]:
    """Expressions as given by the user: a string or a list of strings, each non-empty (before anything runs).

    Args:
        value: None, a string, or a list or tuple of strings.
        what: the name of the parameter, for the message (``"where"``, ``"constraints"``).

    Returns:
        The expressions, stripped, in order, without repeats.

    Raises:
        ConditionError: not a string or list of strings, or an empty one.
    """
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not all(isinstance(x, str) for x in items):
        raise ConditionError(
            f"{what} must be a Spark SQL boolean expression or a list of them, got {value!r}"
        )
    out = []
    for x in items:
        if not x.strip():
            raise ConditionError(f"{what} must be non-empty Spark SQL boolean expressions, got {x!r}")
        out.append(x.strip())
    return tuple(dict.fromkeys(out))


# ------------------------------------------------------------------------------------------------- analysis


def _types(release: Release) -> Mapping[str, Any]:
    return release.manifest.get("column_types") or {}


def _typed(name: str, t: Mapping[str, Any] | None) -> Column:
    """The output value of column ``name`` of the decoded domain table (columns ``num_<name>``: a bin's number
    as a string of a double, ``txt_<name>``: a category or a label) in its output type, as
    :func:`~spark_dpsynth.synthesizers._types.restore_types` writes it."""
    num, txt = F.col(f"`num_{name}`").cast("double"), F.col(f"`txt_{name}`")
    if t is None:
        return txt.alias(name)
    scale, type_name = str(t["scale"]), str(t["type"])
    if t.get("bins") and scale != "category":
        return F.coalesce(restore_value(num, scale, type_name), txt.try_cast(type_name)).alias(name)
    return (txt if type_name == "string" else txt.try_cast(type_name)).alias(name)


def _frame(spark: SparkSession, columns: Sequence[str], rows: pd.DataFrame | None, types: Mapping[str, Any]):  # noqa: ANN202
    """The decoded domain table (``rows``, or none) as a DataFrame of the output columns ``columns`` (with
    ``_CELL`` first when ``rows`` has it)."""
    fields = [T.StructField(_CELL, T.LongType())] if rows is not None and _CELL in rows else []
    for c in columns:
        fields += [T.StructField(f"num_{c}", T.StringType()), T.StructField(f"txt_{c}", T.StringType())]
    schema = T.StructType(fields)
    if rows is None:
        df = spark.createDataFrame([], schema)
    else:
        df = spark.createDataFrame(rows[[f.name for f in fields]], schema)
    head = [F.col(_CELL)] if fields and fields[0].name == _CELL else []
    return df.select(*head, *[_typed(c, types.get(c)) for c in columns])


def output_frame(spark: SparkSession, release: Release) -> DataFrame:
    """An empty DataFrame with the release's output columns in their output types (the manifest's
    ``column_types``; strings without them): what expressions are analysed against."""
    return _frame(spark, release.columns, None, _types(release))


def _analyse(frame: DataFrame, expression: str, what: str) -> None:
    """Analyse ``expression`` on ``frame`` (no rows): it must resolve and be boolean.

    Raises:
        ConditionError: naming the expression, with the first line of Spark's message (it names columns and
            functions of the expression and the schema, never data: the table is empty).
    """
    from pyspark.errors import PySparkException

    try:
        field = frame.select(F.expr(expression).alias(_OK)).schema[_OK]
    except PySparkException as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ConditionError(
            f"{what} {expression!r} cannot be evaluated on the release's columns "
            f"({', '.join(frame.columns)}): {first}"
        ) from None
    if not isinstance(field.dataType, T.BooleanType):
        raise ConditionError(
            f"{what} {expression!r} must be a boolean expression, it gives {field.dataType.simpleString()}"
        )


def named_columns(
    spark: SparkSession, release: Release, expression: str, what: str = "condition"
) -> tuple[str, ...]:
    """The release columns an expression names, analysed by Spark (module docstring, stage 1).

    The names it may use (its identifiers outside string literals that are release columns, compared as Spark
    does, case-insensitively) are found first, and the expression is analysed on an empty table of those
    columns; if that fails, on all of them.

    Args:
        spark: the session.
        release: the release (its columns and ``column_types``).
        expression: a Spark SQL boolean expression over the output columns.
        what: the parameter's name, for messages.

    Returns:
        The columns, in release order (all of them when the expression cannot be analysed on fewer).

    Raises:
        ConditionError: the expression names a column the release does not have, does not parse, or is not
            boolean (before any sampling).
    """
    lower = {c.lower(): c for c in release.columns}
    text = _STRING_LITERAL.sub(" ", expression)
    found = set()
    for quoted, bare in _IDENTIFIER.findall(text):
        name = quoted.replace("``", "`") if quoted else bare
        if name.lower() in lower:
            found.add(lower[name.lower()])
    candidates = tuple(c for c in release.columns if c in found)
    types = _types(release)
    if candidates:
        try:
            _analyse(_frame(spark, candidates, None, types), expression, what)
            return candidates
        except ConditionError:
            pass
    _analyse(output_frame(spark, release), expression, what)
    return release.columns


def check_rules(df: DataFrame, columns: Sequence[str] | None, rules: Sequence[str]) -> None:
    """Analyse declared rules on the sensitive table's schema (its ``columns``, the release's; None: all), before
    any DP draw: its types are the output's. Reads the schema only.

    Raises:
        ConditionError: a rule names a column not among ``columns``, does not parse, or is not boolean (the
            message names the rule).
    """
    frame = df.select(*[F.col(f"`{c}`") for c in columns]) if columns else df
    for rule in rules:
        _analyse(frame, rule, "the rule")


def with_rules(fitted: Any, rules: Sequence[str]) -> Any:
    """A mechanism's :class:`~spark_dpsynth.registry.Fitted` with the declared rules in its release's manifest
    (``constraints``: public, no budget; every synthesizer applies them to every draw)."""
    from spark_dpsynth.release.manifest import thaw

    release = fitted.release
    manifest = {**thaw(release.manifest), "constraints": list(rules)}
    return dataclasses.replace(fitted, release=dataclasses.replace(release, manifest=manifest))


# ------------------------------------------------------------------------------------------------- cells


def _representatives(release: Release, c: int, per_bin: int) -> list[list[tuple[str | None, str | None]]]:
    """Per measurement cell of column ``c`` (released values, then the empty category), its representative
    values as (number, text) strings (module docstring, stage 2)."""
    name = release.columns[c]
    t = _types(release).get(name)
    cells: list[list[tuple[str | None, str | None]]] = []
    bins = t.get("bins") if t is not None else None
    if not bins or str(t["scale"]) == "category":
        cells = [[(None, v)] for v in release.domains[c]]
        return [*cells, [(None, None)]]
    scale = str(t["scale"])
    intervals = bin_intervals(bins, scale)
    integral = scale in ("integer", "date") or (scale == "real" and bool(bins.get("integral")))
    points = dict(
        zip((str(x) for x in bins.get("point_labels") or ()), bins.get("points") or (), strict=False)
    )
    passthrough = {str(x) for x in bins.get("passthrough") or ()}
    labels = list(intervals)
    closed = bins.get("upper") is not None
    for label in release.domains[c]:
        if label in points:
            cells.append([(repr(float(points[label])), None)])
        elif label in passthrough or label not in intervals:
            cells.append([(None, label if label in passthrough else None)])
        else:
            lo, hi = intervals[label]
            if integral:
                stop = math.ceil(hi) + (1 if closed and label == labels[-1] and math.floor(hi) == hi else 0)
                first = math.ceil(lo)
                values = np.arange(first, max(stop, first + 1), dtype=np.float64)
                if values.size > per_bin:
                    values = np.unique(np.round(np.linspace(values[0], values[-1], per_bin)))
            else:
                values = np.linspace(lo, hi, per_bin + 1)[:-1]
                values = np.append(values, np.nextafter(hi, lo))
            cells.append([(repr(float(v)), None) for v in values])
    return [*cells, [(None, None)]]


def _domain_table(release: Release, columns: Sequence[str]) -> tuple[pd.DataFrame, tuple[int, ...]] | None:
    """The cross product of the columns' representative values (module docstring, stage 2), with each row's
    flat cell index (C order over the columns' measurement cells); None when it exceeds :data:`MAX_CELL_ROWS`."""
    index = {c: i for i, c in enumerate(release.columns)}
    for per_bin in (REPRESENTATIVES, 9, 3):
        reps = [_representatives(release, index[c], per_bin) for c in columns]
        rows = math.prod(sum(len(r) for r in col) for col in reps)
        if rows <= MAX_CELL_ROWS:
            break
    else:
        return None
    shape = tuple(len(col) for col in reps)
    flat_cells, nums, txts = [], [], []
    for col in reps:
        flat_cells.append(np.repeat(np.arange(len(col)), [len(r) for r in col]))
        nums.append(np.array([v[0] for r in col for v in r], dtype=object))
        txts.append(np.array([v[1] for r in col for v in r], dtype=object))
    sizes = [len(x) for x in flat_cells]
    total = math.prod(sizes)
    grid = np.indices(sizes).reshape(len(sizes), total) if sizes else np.zeros((0, 1), dtype=np.int64)
    data: dict[str, Any] = {
        _CELL: np.ravel_multi_index(tuple(flat_cells[j][grid[j]] for j in range(len(columns))), shape)
    }
    for j, c in enumerate(columns):
        data[f"num_{c}"] = nums[j][grid[j]]
        data[f"txt_{c}"] = txts[j][grid[j]]
    return pd.DataFrame(data), shape


def _holds(expression: str, rule: bool) -> Column:
    """True where a row satisfies ``expression``: a condition where it is true, a rule where it is not false."""
    return F.coalesce(F.expr(expression).cast("boolean"), F.lit(rule))


def cell_condition(
    spark: SparkSession, release: Release, expression: str, what: str = "condition", *, rule: bool = False
) -> CellCondition:
    """An expression on the measurement cells of the columns it names (module docstring, stages 1 and 2).

    Args:
        spark: the session (the decoded domain table is evaluated by Spark).
        release: the release.
        expression: a Spark SQL boolean expression over the output columns (null counts as false).
        what: the parameter's name, for messages.
        rule: True for a declared rule, satisfied unless false (null passes, as a SQL ``CHECK`` constraint);
            False for a condition, satisfied where true (null fails, as ``WHERE``).

    Returns:
        The :class:`CellCondition` (its ``share`` None when the table would be too large: rows only).

    Raises:
        ConditionError: as :func:`named_columns`, or no cell of the release can satisfy it (it names the
            expression).
    """
    columns = named_columns(spark, release, expression, what)
    built = _domain_table(release, columns)
    if built is None:
        log.warning(
            "%s %r names too many cells to evaluate on them: it is applied to rows only", what, expression
        )
        return CellCondition(expression, columns, None)
    rows, shape = built
    frame = _frame(spark, columns, rows, _types(release))
    ok = _holds(expression, rule).cast("double")
    from pyspark.errors import PySparkException

    try:
        # at most prod(shape) <= MAX_CELL_ROWS rows: one per cell of the decoded domain (released values only)
        shares = frame.groupBy(_CELL).agg(F.avg(ok).alias(_OK)).toPandas()
    except PySparkException as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ConditionError(f"{what} {expression!r} fails on the release's values: {first}") from None
    share = np.zeros(math.prod(shape), dtype=np.float64)
    share[shares[_CELL].to_numpy(dtype=np.int64)] = shares[_OK].to_numpy(dtype=np.float64)
    out = CellCondition(expression, columns, share.reshape(shape))
    if not out.allowed.any():
        raise ConditionError(
            f"{what} {expression!r} has probability zero: no value the release can synthesize satisfies it"
        )
    return out


# ------------------------------------------------------------------------------------------------- rows


def satisfying(where: str | None, rules: Iterable[str]) -> Column:
    """The Column that is true where a row satisfies the condition (true) and every rule (not false)."""
    out = _holds(where, False) if where else F.lit(True)
    for r in rules:
        out = out & _holds(r, True)
    return out


def rule_violations(df: DataFrame, rules: Sequence[str]) -> dict[str, int]:
    """The number of rows of ``df`` (a synthetic table) that break each rule (where it is false; null passes, as
    a SQL ``CHECK`` constraint), in one aggregation.

    Returns:
        {rule: violations}, in the rules' order.
    """
    if not rules:
        return {}
    counts = [F.sum(F.when(_holds(r, True), 0).otherwise(1)).alias(f"r{j}") for j, r in enumerate(rules)]
    row = df.agg(*counts).first()  # one row: one count per rule
    return {r: int(row[f"r{j}"] or 0) for j, r in enumerate(rules)}


def _round_seed(seed: int, attempt: int) -> int:
    if attempt == 0:
        return seed
    state = np.random.SeedSequence([seed, attempt], spawn_key=(_ROUND_STREAM,)).generate_state(1, np.uint64)
    return int(state[0] >> np.uint64(1))


def _first_rows(passing: DataFrame, n: int) -> tuple[DataFrame, int]:
    """The first ``n`` rows of ``passing`` in partition order (or all when fewer), and how many there are: one
    count per partition is collected (at most the sample's partitions), then each partition keeps its quota."""
    ordered = passing.withColumn(_ORDER, F.monotonically_increasing_id())
    part = F.shiftright(F.col(_ORDER), _PARTITION_BITS)
    counts = ordered.groupBy(part.alias("p")).count().collect()  # one row per partition of the sample
    by_part = {int(r["p"]): int(r["count"]) for r in counts}
    total = sum(by_part.values())
    if total < n or not by_part:
        return ordered.drop(_ORDER), total
    limits, left = [], n
    for p in range(max(by_part) + 1):
        take = min(by_part.get(p, 0), left)
        limits.append((p << _PARTITION_BITS) + take)
        left -= take
    limit = F.element_at(F.array(*[F.lit(x).cast("long") for x in limits]), (part + F.lit(1)).cast("int"))
    return ordered.where(F.col(_ORDER) < limit).drop(_ORDER), n


def sample_conditioned(
    release: Release,
    synthesizer: str,
    params: SynthesisParams,
    spark: SparkSession,
    *,
    where: str | None,
    rules: Sequence[str],
    draw: Callable[[SynthesisParams], DataFrame],
    restore: Callable[[DataFrame, int], DataFrame],
    progress: Callable[[str], None] | None = None,
) -> DataFrame:
    """Synthetic rows that satisfy ``where`` and every rule (module docstring, stage 3).

    Args:
        release: the release.
        synthesizer: the registry name of the synthesizer (one of :data:`CONDITIONAL_SYNTHESIZERS`).
        params: its parameters; ``target_number_of_records`` is the number of rows returned (default: for a
            condition, its estimated number of real records, the model's probability of it times the release's
            estimate of its number of records for ``pgm``,
            the share of a draw of n' rows that satisfies it for the others; for rules alone, as without them).
        spark: the session.
        where: the condition, or None.
        rules: the declared rules (the release's and the call's).
        draw: the synthesizer's rows (codes as strings) for parameters, for the other synthesizers.
        restore: the rows in their output types, for a seed (``restore_types``).
        progress: optional callback receiving short progress messages.

    Returns:
        A DataFrame of the release's output columns, every row satisfying every expression; exactly the target
        number of rows.

    Raises:
        ConditionError: an expression names a column the release does not have, is not boolean, or has
            probability zero (under the model, or in the sampler's rows: it names the expression); the
            synthesizer samples with neither; a condition too rare for rejection (below 1 /
            :data:`MAX_OVERSAMPLING` of the sampler's rows).
    """
    asked = ([where] if where else []) + list(rules)
    if synthesizer not in CONDITIONAL_SYNTHESIZERS:
        raise ConditionError(
            f"the {synthesizer} synthesizer does not sample with where or constraints ({asked[0]!r}); use one "
            f"of {', '.join(CONDITIONAL_SYNTHESIZERS)} (pgm conditions its model exactly)"
        )
    if release.manifest.get("persons") or release.manifest.get("multi_value_columns"):
        raise ConditionError(
            f"where and constraints ({asked[0]!r}) are not supported for releases of persons with many rows or "
            "with multi-value columns"
        )
    # analysed and evaluated on the cells before anything is sampled
    rule_cells = [cell_condition(spark, release, r, "the rule", rule=True) for r in rules]
    where_cell = cell_condition(spark, release, where, "the condition") if where else None
    seed = params.seed if params.seed is not None else secrets.randbits(63)
    n_protected = release.manifest.protected_number_of_records
    target = params.target_number_of_records
    expressions = [c.expression for c in rule_cells]
    if synthesizer == "pgm":
        from spark_dpsynth.synthesizers.pgm import fit_for_sampling, sample_model

        zeros: dict[tuple[str, ...], np.ndarray] = {}
        for c in rule_cells:  # the rules over the same columns: their allowed cells intersected
            if c.allowed is not None:
                zeros[c.columns] = zeros[c.columns] & c.allowed if c.columns in zeros else c.allowed
                if not zeros[c.columns].any():
                    raise ConditionError(
                        f"the rules over {', '.join(c.columns)} exclude every value the release can synthesize"
                    )
        fitted = fit_for_sampling(release, structural_zeros=zeros or None, progress=progress)
        rate = 1.0
        if where_cell is not None and where_cell.allowed is not None:
            probability = fitted.probability(where_cell.columns, where_cell.share)
            if probability <= 0:
                raise ConditionError(f"the condition {where!r} has probability zero under the model")
            base = fitted.records
            report(
                progress,
                log,
                f"pgm: the model's estimate of the real records that satisfy the condition: {probability * base:.0f} "
                f"(its probability {probability:.4g} times the release's estimate of the number of records)",
            )
            if target is None:
                target = max(1, round(probability * base))
            possible = fitted.probability(where_cell.columns, where_cell.allowed)
            try:
                fitted = fitted.condition({where_cell.columns: where_cell.allowed})
            except InvalidParameterError as err:
                raise ConditionError(f"the condition {where!r} has probability zero under the model") from err
            rate = probability / max(possible, 1e-300)
        # a rule that cuts a bin inside: its rows' values in the bin are drawn again (module docstring, stage 3);
        # the rows left, and a condition cut inside a bin, are rejected on rows
        binned = _redrawn_columns(release, rule_cells)
        for cell in rule_cells:
            if cell.share is not None and not cell.exact:
                kept = 1.0 - (1.0 - cell.share) ** REDRAWS if set(binned) & set(cell.columns) else cell.share
                rate *= fitted.probability(cell.columns, kept)
        typed = _redrawing(restore, release, binned, rule_cells, progress) if binned else restore

        def sampled(p: SynthesisParams) -> DataFrame:
            return sample_model(fitted, release, p, spark, progress=progress)

        if all(c.exact for c in [*rule_cells, *([where_cell] if where_cell else [])]):
            n_rows = target if target is not None else None
            rows = sampled(dataclasses.replace(params, target_number_of_records=n_rows, seed=seed))
            return restore(rows, seed)
        return _rejection(
            sampled, typed, params, target, expressions, seed, rate, where, progress, fitted.records
        )
    if target is None and where is not None:
        # the rows of a draw of n' that satisfy it: an estimate of the real records that do (post-processing)
        rows = restore(draw(dataclasses.replace(params, seed=seed)), seed)
        passing = rows.where(satisfying(where, expressions))
        report(
            progress,
            log,
            f"{synthesizer}: the rows of a draw of the release's size that satisfy the condition",
        )
        return passing
    return _rejection(draw, restore, params, target, expressions, seed, 1.0, where, progress, n_protected)


def _redrawn_columns(release: Release, rule_cells: Sequence[CellCondition]) -> tuple[str, ...]:
    """The binned number columns named by a rule that is not exact on the cells (it cuts a bin inside, or is
    applied to rows only), in release order: their values are drawn again in their bins (module docstring,
    stage 3)."""
    types = _types(release)
    named = {c for cell in rule_cells if not cell.exact for c in cell.columns}
    out = []
    for c in release.columns:
        t = types.get(c)
        if c in named and t is not None and t.get("bins") and str(t["scale"]) != "category":
            out.append(c)
    return tuple(out)


def _redraw_seed(seed: int, attempt: int) -> int:
    state = np.random.SeedSequence([seed, attempt], spawn_key=(_REDRAW_STREAM,)).generate_state(1, np.uint64)
    return int(state[0] >> np.uint64(1))


def _bin_values(t: Mapping[str, Any]) -> dict[str, list[float]] | None:
    """Per bin label of a binned column, the whole numbers :func:`~spark_dpsynth.synthesizers._types.restore_types`
    draws in it, each alike; None when the column draws otherwise (reals, a within-bin shape) or a bin holds
    more than :data:`REPRESENTATIVES` of them."""
    bins, scale = t["bins"], str(t["scale"])
    if bins.get("shape") or not (scale == "integer" or (scale == "real" and bins.get("integral"))):
        return None
    intervals = bin_intervals(bins, scale)
    closed = bins.get("upper") is not None
    out = {}
    for i, (label, (lo, hi)) in enumerate(intervals.items()):
        first = math.ceil(lo)
        last = i == len(intervals) - 1
        stop = math.ceil(hi) + (1 if closed and last and math.floor(hi) == hi else 0)
        count = max(stop - first, 1)
        if count > REPRESENTATIVES:
            return None
        out[label] = [float(first + k) for k in range(count)]
    return out


def _coupling(masks: np.ndarray, counts: np.ndarray, iterations: int = 500) -> np.ndarray:
    """The joint of (a row's allowed values, its value) closest to independence in Kullback-Leibler divergence
    with the rows' counts and equal values as its margins, its support the allowed pairs (module docstring,
    stage 3): iterative proportional fitting (Deming and Stephan 1940; its limit is Csiszar's I-projection, 1975).

    Args:
        masks: bool (masks, values): the values each kind of row allows (each row at least one).
        counts: float (masks,): the rows of each kind.

    Returns:
        float (masks, values): per kind of row, its distribution over the values (rows sum to 1).
    """
    support = masks.astype(np.float64)
    target = np.full(support.shape[1], counts.sum() / support.shape[1])
    b = np.ones(support.shape[1])
    for _ in range(iterations):
        a = counts / np.maximum(support @ b, 1e-300)
        b = target / np.maximum(support.T @ a, 1e-300)
    joint = support * np.outer(a, b)
    return joint / np.maximum(joint.sum(axis=1, keepdims=True), 1e-300)


def _coupled_draw(
    frame: DataFrame, b: str, label: str, t: Mapping[str, Any], values: dict[str, list[float]],
    rules: Sequence[str], seed: int,
) -> DataFrame:  # fmt: skip
    """``frame`` with column ``b``'s values drawn again in their bins (label column ``label``) from
    :func:`_coupling`'s distribution of the row's kind, its kind the values of its bin that satisfy every rule
    of ``rules`` (which name ``b``) given the row's other values; a row that allows no value keeps its own."""

    scale, type_name = str(t["scale"]), str(t["type"])
    labels = list(values)
    number = F.create_map(*[x for i, lab in enumerate(labels) for x in (F.lit(lab), F.lit(i + 1))])
    candidates = F.element_at(
        F.array(
            *[F.array(*[restore_value(F.lit(v), scale, type_name) for v in values[lab]]) for lab in labels]
        ),
        F.element_at(number, F.col(f"`{label}`").cast("string")),
    )
    held = " AND ".join(f"coalesce(cast(({r}) AS boolean), true)" for r in rules)
    name = "`" + b.replace("`", "``") + "`"
    frame = frame.select(
        "*",
        candidates.alias(_VALUES),
        F.element_at(number, F.col(f"`{label}`").cast("string")).alias(_BIN),
    )
    frame = frame.select("*", F.expr(f"transform(`{_VALUES}`, {name} -> {held})").alias(_MASK))
    key = F.concat_ws(
        ":",
        F.col(_BIN).cast("string"),
        F.array_join(F.transform(F.col(_MASK), lambda x: F.when(x, "1").otherwise("0")), ""),
    )
    frame = frame.select("*", key.alias(_KEY))
    # one row per (bin, kind of row): at most the bins times the kinds the rules make
    kinds = frame.where(F.col(_BIN).isNotNull()).groupBy(_KEY).count().collect()
    by_bin: dict[int, list[tuple[str, np.ndarray, float]]] = {}
    for row in kinds:
        bin_no, bits = str(row[_KEY]).split(":")
        mask = np.array([c == "1" for c in bits], dtype=bool)
        if mask.any():
            by_bin.setdefault(int(bin_no), []).append((str(row[_KEY]), mask, float(row["count"])))
    table = []
    for kinds_of_bin in by_bin.values():
        if all(mask.all() for _, mask, _ in kinds_of_bin):
            continue  # the rules cut nothing in this bin: its values stay as drawn
        masks = np.array([mask for _, mask, _ in kinds_of_bin])
        dist = _coupling(masks, np.array([n for _, _, n in kinds_of_bin]))
        for (k, _, _), p in zip(kinds_of_bin, dist, strict=True):
            cum = np.cumsum(p)
            cum[-1] = 1.0
            table += [F.lit(k), F.array(*[F.lit(float(x)) for x in cum])]
    columns = [c for c in frame.columns if c not in (_VALUES, _BIN, _MASK, _KEY)]
    if not table:
        return frame.select(*[F.col(f"`{c}`") for c in columns])
    # the uniform drawn once per row, as a column (inside the lambda, rand would be drawn per element)
    frame = frame.select(
        "*", F.element_at(F.create_map(*table), F.col(_KEY)).alias(_CUMULATIVE), F.rand(seed).alias(_UNIFORM)
    )
    cum, u = F.col(_CUMULATIVE), F.col(_UNIFORM)
    index = F.size(F.filter(cum, lambda x: x <= u)) + F.lit(1)
    drawn = F.element_at(F.col(_VALUES), F.least(index, F.size(F.col(_VALUES))))
    value = F.when(cum.isNotNull(), drawn).otherwise(F.col(name))
    return frame.select(*[value.alias(c) if c == b else F.col(f"`{c}`") for c in columns])


def _uniforms(n: int, seed: int) -> Column:
    """An array of ``n`` uniforms on [0, 1) per row (seeded as ``F.rand``)."""
    return F.transform(F.sequence(F.lit(1), F.lit(n)), lambda _: F.rand(seed))


def _values(label: Column, bin_no: Column, t: Mapping[str, Any], uniforms: Sequence[str]) -> Column:
    """The array of a binned column's values drawn in the row's bin, one per element of the uniforms' arrays
    (the value's uniform, then the within-bin shape's piece's when there is one)."""
    from spark_dpsynth.synthesizers._types import binned_value

    arrays = [F.col(f"`{u}`") for u in uniforms]
    if len(arrays) == 2:
        return F.zip_with(*arrays, lambda u, piece: binned_value(label, bin_no, t, u, piece))
    return F.transform(arrays[0], lambda u: binned_value(label, bin_no, t, u))


def _drawn_until_held(
    frame: DataFrame, columns: Mapping[str, tuple[str, Mapping[str, Any]]], rules: Sequence[str], seed: int
) -> DataFrame:
    """``frame`` with the values of ``columns`` ({column: (its bin label column, its type)}) of each row that
    breaks a rule of ``rules`` drawn again in their bins, up to ``REDRAWS - 1`` times, the first draw under
    which every rule holds kept (rejection of the value alone [vN51]); a row that no draw satisfies keeps its
    values (the caller rejects it). The draws are one array per column, each computed once (higher-order
    functions over arrays of uniforms): the plan does not grow with the number of draws."""

    from spark_dpsynth.synthesizers._types import bin_number

    tries = REDRAWS - 1
    names = list(columns)
    cand = {b: f"{_CANDIDATE}{b}" for b in names}
    bins = {b: f"{_BIN}{b}" for b in names}
    # the uniforms first, as arrays (a rand in a lambda is drawn again at each of its uses), then the values
    uniforms: dict[str, Column] = {}
    values = []
    for j, (b, (label, t)) in enumerate(columns.items()):
        names_of = [f"{_UNIFORM}{k}_{b}" for k in range(2 if t["bins"].get("shape") else 1)]
        for k, name in enumerate(names_of):
            uniforms[name] = _uniforms(tries, (seed + 2 * j + k) % (1 << 63))
        values.append(_values(F.col(f"`{label}`"), F.col(f"`{bins[b]}`"), t, names_of).alias(cand[b]))
    frame = frame.select(
        "*",
        satisfying(None, rules).alias(_OK),
        *[bin_number(F.col(f"`{label}`"), t).alias(bins[b]) for b, (label, t) in columns.items()],
        *[column.alias(name) for name, column in uniforms.items()],
    )
    frame = frame.select("*", *values)
    # the rules with each column bound to its i-th draw (a lambda variable named as the column shadows it)
    held = " AND ".join(f"coalesce(cast(({r}) AS boolean), true)" for r in rules)
    for b in reversed(names):
        name = "`" + b.replace("`", "``") + "`"
        held = f"element_at(transform(array(element_at(`{cand[b]}`, `{_ATTEMPT}`)), {name} -> {held}), 1)"
    first = F.expr(f"array_position(transform(sequence(1, {tries}), `{_ATTEMPT}` -> {held}), true)")
    frame = frame.select("*", first.cast("int").alias(_FIRST))
    helpers = {_OK, _FIRST, *cand.values(), *bins.values(), *uniforms}
    keep = [c for c in frame.columns if c not in helpers]
    redrawn = {
        b: F.when(F.col(_OK) | (F.col(_FIRST) == 0), F.col(f"`{b}`"))
        .otherwise(F.element_at(F.col(cand[b]), F.col(_FIRST)))
        .alias(b)
        for b in names
    }
    return frame.select(*[redrawn.get(c, F.col(f"`{c}`")) for c in keep])


def _redrawing(
    restore: Callable[[DataFrame, int], DataFrame],
    release: Release,
    binned: Sequence[str],
    rule_cells: Sequence[CellCondition],
    progress: Callable[[str], None] | None,
) -> Callable[[DataFrame, int], DataFrame]:
    """``restore`` with the values of the ``binned`` columns drawn again in their bins where the rules that name
    them cut the bins (module docstring, stage 3); the rows' cells never change.

    A column whose bins hold whole numbers drawn alike (:func:`_bin_values`): each row's kind is the set of the
    values of its bin that satisfy the rules naming the column given the row's other values; the values are
    drawn from the joint of (kind, value) closest to independence that has the drawn rows' kinds and equal
    values in each bin as its margins (:func:`_coupling`), so a bin's values stay as even as without the rules
    wherever the rules allow, and each row gets a value its rules allow. A rule's support alone (each row
    uniform on its allowed values) would crowd the values that many kinds allow: children's ages under 5 have
    no disability answers, but a row without them may be any age, so ages 5 to 9 would get three in four of the
    bin [0, 10). Other binned columns: a row's values are drawn again, up to :data:`REDRAWS` times, while it
    breaks a rule (rejection of the value alone [vN51]). A row that no value satisfies is left as drawn (the
    caller rejects it).
    """
    types = _types(release)
    labels = {b: f"{_LABEL}{b}" for b in binned}
    exact = {b: v for b in binned if (v := _bin_values(types[b])) is not None}
    others = [b for b in binned if b not in exact]
    expressions = [c.expression for c in rule_cells]
    naming = {b: [c.expression for c in rule_cells if b in c.columns] for b in binned}
    report(
        progress,
        log,
        f"conditions: the values of {', '.join(binned)} in their bins are drawn where the rules allow them",
    )

    def typed(rows: DataFrame, seed: int) -> DataFrame:
        frame = restore(rows.select("*", *[F.col(f"`{b}`").alias(labels[b]) for b in binned]), seed)
        out = [c for c in frame.columns if c not in labels.values()]
        for j, (b, values) in enumerate(exact.items()):
            frame = _coupled_draw(
                frame, b, labels[b], types[b], values, naming[b], _redraw_seed(seed, REDRAWS + j)
            )
        if others:
            frame = _drawn_until_held(
                frame, {b: (labels[b], types[b]) for b in others}, expressions, _redraw_seed(seed, 1)
            )
        return frame.select(*[F.col(f"`{c}`") for c in out])

    return typed


def _rejection(
    draw: Callable[[SynthesisParams], DataFrame],
    restore: Callable[[DataFrame, int], DataFrame],
    params: SynthesisParams,
    target: int | None,
    expressions: Sequence[str],
    seed: int,
    rate: float,
    where: str | None,
    progress: Callable[[str], None] | None,
    records: float | None = None,
) -> DataFrame:
    """Draw, type and keep the first ``target`` rows that satisfy every expression (module docstring, stage 3);
    with no ``target``, as many as the synthesizer draws without rules: ``records`` (the release's n', or for
    ``pgm`` its estimate of the number of records) times the scale factor."""
    from spark_dpsynth.params import MAX_SYNTHETIC_RECORDS

    if target is None:  # rules alone: as many rows as without them
        target = max(1, round(float(records or 1) * (params.aggregate_counts_scale_factor or 1.0)))
    rate = min(1.0, max(rate, 1.0 / MAX_OVERSAMPLING))
    for attempt in range(_ROUNDS):
        m = math.ceil(target / rate * 1.02 + 6.0 * math.sqrt(target / rate) + 16)
        if m > MAX_OVERSAMPLING * target + 1000 or m > MAX_SYNTHETIC_RECORDS:
            break
        round_seed = _round_seed(seed, attempt)
        rows = restore(
            draw(dataclasses.replace(params, target_number_of_records=m, seed=round_seed)), round_seed
        )
        kept, passed = _first_rows(rows.where(satisfying(where, expressions)), target)
        report(
            progress,
            log,
            f"conditions: {passed} of {m} drawn rows kept (rejection of rows, round {attempt + 1})",
        )
        if passed >= target:
            return kept
        rate = max(passed, 0.5) / m
    what = f"the condition {where!r}" if where else f"the rules {list(expressions)!r}"
    raise ConditionError(
        f"{what} holds in too few of the synthesizer's rows to draw {target} by rejection (fewer than 1 in "
        f"{MAX_OVERSAMPLING:g}); the pgm synthesizer conditions its model on the cells exactly"
    )
