"""Where the DP profile places a column's records: the cells that stand out alone and the blocks that stand out
together, a block's records spread evenly over its values or over the lattice they lie on (docs/design.md
section 2.8).

* :func:`signal_weights`: per cell, the noisy records the profile places there.
* :func:`spread_evenly`: an amount spread over a run's values (its lattice, :func:`_lattice`, or its cells'
  sizes); :func:`value_cells`: the cells that hold one whole number each.

Privacy: post-processing of the noisy profile; nothing here reads data or draws noise.
"""

from __future__ import annotations

import numpy as np

from spark_dpsynth.profile.blocks import RunSums, standing_blocks
from spark_dpsynth.profile.grid import UNIT_TOP, ProfileGrid
from spark_dpsynth.profile.levels import SIGNAL_FALSE_POSITIVE, noise_level, sum_threshold, tail_threshold

__all__ = ["open_lattice", "point_cells", "run_lattice", "signal_weights", "spread_evenly", "value_cells"]

_LATTICE_STEPS = (2, 3, 4, 5, 6, 10, 12, 20, 24, 25, 50, 60, 100, 1000)
"""The steps g of the lattices (the multiples of g) that a run of whole numbers is tested for where the profile
spreads its records evenly (:func:`_lattice`): pairs, quarters, fives and tens, dozens (months counted in whole
years), scores, hundreds (an occupation's major groups 0, 100, ..., 900), thousands. Public."""
_LATTICE_OFF_TAIL = 0.05
"""One-sided level at which the values off a lattice must not stand out of their noise together for the lattice
to be taken (:func:`_lattice`): no more than a 5% test can see off it."""
_LATTICE_OFF_SHARE = 0.25
"""A value off a lattice holds at most this share of what a value on it holds (the off values' mean noisy count
plus its noise at :data:`_LATTICE_OFF_TAIL`, against the on values' mean) for the lattice to be taken
(:func:`_lattice`): weekly hours heaped at 10, 15, ..., 30 with a third as many records on each value between
can pass the first test alone under a large noise, and would come back as multiples of 5 only (docs/design.md
section 2.8)."""


def _run_values(
    grid: ProfileGrid,
    members: np.ndarray,
    values: np.ndarray | None,
    counts: np.ndarray,
    sigma: float,
    laplace: bool,
    points: bool,
) -> tuple[np.ndarray, np.ndarray, float] | None:
    """(the members that hold one value each, those values in units of their decimal step u, u), or None when a
    lattice cannot be read from ``members``: no ``values`` (:func:`value_cells`), none of them among the members,
    or a member that holds whole numbers the profile does not tell apart (an open cell wider than one, beyond
    9,999). u is the largest power of ten (at most 1) that every value held is a multiple of: 1 for whole numbers,
    0.1 for ratings 3.0, 3.5, .., 5.0. With ``points`` (``values`` are the real grid's points, :func:`point_cells`:
    a real column that is not one of whole numbers) also None when the run's open cells (values between the
    points) stand out of their noise together at the one-sided level :data:`_LATTICE_OFF_TAIL`: its records
    then lie between the points too. ``counts``: float64 (len(members),) the members' noisy counts."""
    if values is None or len(members) == 0:
        return None
    held = np.isin(members, values)
    if not held.any() or bool((grid.sizes[members[~held]] > 1.0).any()):
        return None
    if points:
        between = ~held & grid.possible[members]
        bound = float(tail_threshold(int(between.sum()), sigma, _LATTICE_OFF_TAIL, laplace))
        if between.any() and float(counts[between].sum()) > bound:
            return None
    at = grid.points[(members[held] - 1) // 2]
    unit = next(
        (u for u in _DECIMAL_UNITS if np.allclose(at / u, np.rint(at / u), rtol=0.0, atol=1e-6)),
        _DECIMAL_UNITS[-1],
    )
    return members[held], np.rint(at / unit), unit


_DECIMAL_STEPS = (10, 100, 1000)
"""The lattices an open cell beyond 9,999 is drawn on (:func:`open_lattice`): amounts rounded to tens, hundreds,
thousands, as the grid's two significant digits there are decimal. Public."""

_DECIMAL_UNITS = (1.0, 0.1, 0.01, 0.001, 1e-4)
"""The decimal steps u a run's values are read in (:func:`_run_values`), coarsest first: the real grid's points
below 9,999 are multiples of 10^-4 at least (its two significant digits from 0.001)."""


def _multiple(a: float, b: float) -> bool:
    """``a`` (> 0) is a whole multiple of ``b`` (> 0), within rounding."""
    q = a / b
    return abs(q - round(q)) <= 1e-6 * max(q, 1.0)


def _lattice(
    cells: np.ndarray,
    at: np.ndarray,
    counts: np.ndarray,
    sigma: float,
    laplace: bool,
    steps: tuple[int, ...] = _LATTICE_STEPS,
) -> int:
    """The step g of the coarsest lattice of whole numbers, the multiples of g (of ``steps``), that carries the
    records of a run's whole numbers, or 1: they may then lie on any of its values. Post-processing of the noisy
    profile (docs/design.md section 2.8).

    Survey tables store durations in months that are whole years beyond the first three (the EU LFS's months since
    a start: 0..35, then 36, 48, ..., 528) and occupations as major groups (0, 100, ..., 900): a run of such values
    spread evenly over its whole numbers came back as 437 months and occupation 523, which no record holds. The
    steps are tested from the finest up, each on the lattice found so far (g0, first 1): g, a multiple of g0, is
    taken when the noisy sum of the run's multiples of g0 that are not multiples of g does not stand out of its
    noise at the one-sided level :data:`_LATTICE_OFF_TAIL`, their mean plus that noise is at most
    :data:`_LATTICE_OFF_SHARE` of the multiples' mean, and the multiples of g hold more per value than the
    others by more than the noise of that difference (:func:`sum_threshold`, at a Bonferroni level
    :data:`SIGNAL_FALSE_POSITIVE` over the steps): a run spread evenly over its values, or too thin to tell,
    keeps them all.

    Args:
        cells, at: the run's cells that hold one whole number each and those numbers (:func:`_run_values`).
        counts: float64 (len(cells),) their noisy counts.
        sigma: the noise std of one cell, in records; laplace: the cells' noise is discrete Laplace.
    """
    if len(cells) < 4:
        return 1
    tail = SIGNAL_FALSE_POSITIVE / len(steps)
    strict, strict_gaussian = noise_level(tail, laplace), noise_level(tail, False)
    loose, loose_gaussian = noise_level(_LATTICE_OFF_TAIL, laplace), noise_level(_LATTICE_OFF_TAIL, False)
    step = 1
    on = np.ones(len(cells), dtype=bool)
    for g in steps:
        if g % step:
            continue
        multiple = on & (np.mod(at, g) == 0)
        off = on & ~multiple
        n_on, n_off = int(multiple.sum()), int(off.sum())
        if n_on == 0 or n_off == 0:
            continue
        s_on, s_off = float(counts[multiple].sum()), float(counts[off].sum())
        bound = float(sum_threshold(n_off, sigma, loose, loose_gaussian))
        off_quiet = s_off <= bound and (s_off + bound) / n_off <= _LATTICE_OFF_SHARE * s_on / n_on
        # the multiples' sum less what an even spread over the lattice found so far would give them
        excess = s_on - s_off * n_on / n_off
        if off_quiet and excess > float(
            sum_threshold(n_on + n_on**2 / n_off, sigma, strict, strict_gaussian)
        ):
            step, on = g, multiple
    return step


def run_lattice(
    grid: ProfileGrid,
    members: np.ndarray,
    counts: np.ndarray,
    sigma: float,
    laplace: bool,
    values: np.ndarray | None,
    points: bool = False,
    step: float = 0.0,
) -> tuple[np.ndarray, float] | None:
    """(the members on the run's lattice, its step in the run's values), or None when no lattice can be read from
    the run (:func:`_run_values`). The step is :func:`_lattice`'s in the run's units times their decimal step (100
    for an occupation's major groups, 0.5 for ratings in halves; the unit itself when no coarser lattice carries the
    records), or ``step``, the lattice of the block the run lies in, when the run's own is finer and divides it (a
    few values of it were too few to tell 12 from 4). ``values``: :func:`value_cells`, or with ``points`` (a real
    column that is not one of whole numbers) :func:`point_cells`. ``counts``: float64 (len(members),) the members'
    noisy counts. Post-processing of the noisy profile (docs/design.md section 2.8)."""
    whole = _run_values(grid, members, values, counts, sigma, laplace, points)
    if whole is None:
        return None
    cells, at, unit = whole
    own = _lattice(cells, at, counts[np.isin(members, cells)], sigma, laplace) * unit
    g = step if step > 0.0 and _multiple(step, own) else own
    ratio = at * unit / g
    return cells[np.abs(ratio - np.rint(ratio)) <= 1e-6 * np.maximum(np.abs(ratio), 1.0)], g


def open_lattice(
    grid: ProfileGrid,
    reach: np.ndarray,
    counts: np.ndarray,
    sigma: float,
    laplace: bool,
    values: np.ndarray | None,
) -> tuple[float, ...]:
    """The decimal lattice steps (:data:`_DECIMAL_STEPS`, finest first) of a whole-number column's records in the
    cells of ``reach`` (a measurement's range) that tell whole numbers apart (at most 9,999 in magnitude), or
    none: where its open cells beyond 9,999 hold values the profile does not tell apart, they are drawn on the
    coarsest of these lattices that has a value inside them (incomes in hundreds: 41,100, .., 41,900 between the
    grid's points 41,000 and 42,000, not 41,658; :func:`~spark_dpsynth.profile.shape.within_bin_shape`).
    ``counts``: float64 (grid.size,) the noisy counts without the column's exact values (a spike at 0 is a
    multiple of every step); ``values``: :func:`value_cells` (None: no whole numbers, no lattice).
    Post-processing of the noisy profile (docs/design.md section 2.8)."""
    if values is None or len(reach) == 0:
        return ()
    # the unit cells of the range: whole numbers and the open cells between them, none wider than one
    unit = reach[
        (grid.sizes[reach] <= 1.0) & (np.abs(grid.points[np.maximum(reach - 1, 0) // 2]) <= UNIT_TOP)
    ]
    unit = unit[unit > 0]
    whole = _run_values(grid, unit, values, counts[unit], sigma, laplace, False)
    if whole is None:
        return ()
    cells, at, unit_step = whole
    g = _lattice(cells, at, counts[cells], sigma, laplace, _DECIMAL_STEPS)
    # records on the multiples of 1,000 are on those of 100 and 10 too
    return tuple(float(d * unit_step) for d in _DECIMAL_STEPS if g > 1 and g % d == 0)


def spread_evenly(
    grid: ProfileGrid,
    members: np.ndarray,
    amount: float,
    counts: np.ndarray,
    sigma: float,
    laplace: bool,
    values: np.ndarray | None,
    step: float = 0.0,
    points: bool = False,
) -> np.ndarray:
    """float64 (len(members),) ``amount`` spread evenly over the values of ``members``: over their lattice when
    the run has one coarser than its whole numbers, or with ``points`` any (:func:`run_lattice`, ``step`` as
    there: a run of fractions whose open cells hold nothing lies on the grid's points), each of its values the
    same; else each cell's share in proportion to its ``sizes`` (an open cell of 999 whole numbers takes 999 times
    a point's; all alike when no member has a size). ``counts``: the members' noisy counts. Post-processing."""
    out = np.zeros(len(members))
    if len(members) == 0:
        return out
    lattice = run_lattice(grid, members, counts, sigma, laplace, values, points, step)
    if lattice is not None and len(lattice[0]) and (points or lattice[1] > 1.0):
        out[np.isin(members, lattice[0])] = amount / len(lattice[0])
        return out
    size = grid.sizes[members]
    total = float(size.sum())
    return amount * size / total if total > 0 else np.full(len(members), amount / len(members))


def value_cells(grid: ProfileGrid, integral: bool) -> np.ndarray | None:
    """The cells of ``grid`` that each hold one whole number of at most 9,999 in magnitude (the point cells of the
    integer scale there; of the real scale, its whole-number points, when ``integral``: a real column of whole
    numbers), sorted; None on the other scales and for a real column that is not integral. What
    :func:`_lattice` reads. Public: from the grid alone."""
    if not (grid.scale == "integer" or (grid.scale == "real" and integral)):
        return None
    p = grid.points
    whole = (p == np.floor(p)) & (np.abs(p) <= UNIT_TOP)
    return 1 + 2 * np.flatnonzero(whole)


def point_cells(grid: ProfileGrid) -> np.ndarray | None:
    """The point cells of the real grid of at most 9,999 in magnitude, sorted: the values a real column that is not
    one of whole numbers may hold, where its open cells hold no records (ratings in halves, scores in tenths);
    None on the other scales. What :func:`run_lattice` reads with ``points``. Public: from the grid alone."""
    if grid.scale != "real":
        return None
    return 1 + 2 * np.flatnonzero(np.abs(grid.points) <= UNIT_TOP)


def signal_weights(
    grid: ProfileGrid,
    rest: np.ndarray,
    cells: np.ndarray,
    threshold: float,
    sums: RunSums,
    gaussian: float,
    block_gaussian: float,
    laplace: bool = False,
    values: np.ndarray | None = None,
    points: bool = False,
    column_step: float = 0.0,
) -> tuple[np.ndarray, list[np.ndarray]]:
    """The noisy counts of the cells that stand out alone, plus, in each block of magnitude whose summed noisy
    count stands out (:func:`standing_blocks`), the rest of that sum spread evenly over the block's values
    (:func:`spread_evenly`: over the lattice its values lie on, when ``values`` are given and it has one, or
    ``column_step``'s, the column's lattice read from all its records, where the block's own is finer; else each
    cell's share in proportion to its ``sizes``), within the parts of the block that stand out when it is halved,
    and halved again, while the amount is large enough to tell the halves apart, or the halves are measured
    blocks (searched or fine, :func:`block_tree`) (both halves standing out: the amount split by their noisy sums;
    one: the other keeps its own noisy sum, a measured one less one std of its noise; neither, when they are
    measured blocks and one holds more than :data:`_HALF_SPLIT` stds: the amount split by their positive sums);
    where an amount is finally spread over a part, the part's cells that stand out at a Bonferroni level over the
    part alone take it first when they hold at least :data:`_LOCAL_SHARE` of it; zero elsewhere. ``laplace``: the
    cells' noise is discrete Laplace (the part's level is its quantile); ``values``: the cells that hold the
    column's whole numbers (:func:`value_cells`), or with ``points`` the real grid's points (:func:`point_cells`).
    Also returns the runs of cells that stood out (blocks and halves), in the order found (post-processing)."""
    weights = np.zeros_like(rest)
    alone = cells[rest[cells] > threshold]
    weights[alone] = rest[alone]

    step = 0.0  # the lattice of the standing block being spread (_lattice): a part too small to tell keeps it

    def even(members: np.ndarray, amount: float) -> None:
        # the lattice is read from every record of the part, those of the values taken out alone too
        weights[members] += spread_evenly(
            grid, members, amount, rest[members], sums.sigma, laplace, values, step, points
        )

    def place(members: np.ndarray, amount: float) -> None:
        # the cells of the part that stand out of their noise at a level for this part's cells alone (a
        # Bonferroni level over len(members), not the grid's: the part's records are known to lie here) take
        # the amount first, up to their noisy counts; what is left is spread evenly (the years 2011..2013 each
        # held too few records to stand out among the grid's cells, and their records were spread up to 2120)
        if len(members) > 1 and amount > 0:
            current = rest[members] - weights[members]
            local = sums.sigma * noise_level(SIGNAL_FALSE_POSITIVE / len(members), laplace)
            up = current > local
            held = float(current[up].sum())
            if up.any() and held >= _LOCAL_SHARE * amount:
                taken = min(held, amount)
                weights[members[up]] += current[up] * taken / held
                amount -= taken
        if amount > 0:
            even(members, amount)

    def spread(members: np.ndarray, amount: float) -> None:
        # While the amount is at least twice what the members' sum must pass to stand out (so that even halves
        # would each stand out), halve the members: a half that stands out gets its share and is halved in
        # turn, a half that does not gets its own noisy excess (if positive) evenly; the amount is spread evenly
        # over the values of the parts that are left (a thin tail of amounts between 10,000 and 900,000 is not
        # spread up to 999,999). Halves whose records the profile measured as blocks are always tested: their
        # noise does not add up over their cells, and a half that does not stand out keeps its own excess.
        while len(members) >= 2:
            current = rest - weights
            # measured halves are blocks of the tree, tested at the blocks' level (:func:`block_level`)
            measured = sums.halves_measured(members)
            if not measured and amount <= 2.0 * sums.left(members, current, gaussian)[1]:
                break
            halves = (members[: len(members) // 2], members[len(members) // 2 :])
            level = block_gaussian if measured else gaussian
            left = [sums.left(h, current, level) for h in halves]
            excess = [e for e, _ in left]
            stands = [e > needed for e, needed in left]
            stood.extend(h for h, up in zip(halves, stands, strict=True) if up)
            if all(stands):
                total = excess[0] + excess[1]
                spread(halves[0], amount * excess[0] / total)
                members, amount = halves[1], amount * excess[1] / total
            elif any(stands):
                i = 1 - stands.index(True)
                other = halves[i]
                # a measured half keeps its excess beyond one std of its noise (shrunk: a half without records
                # keeps its positive noise otherwise, spread evenly over it, and the range ran past the data)
                shrink = left[i][1] / level if measured else 0.0
                kept = min(max(excess[i] - shrink, 0.0), amount)
                if kept > 0:
                    place(other, kept)
                members, amount = halves[stands.index(True)], amount - kept
            elif measured and any(e > _HALF_SPLIT * n / level for e, n in left):
                # neither measured half stands out, but one holds more than _HALF_SPLIT stds of its noise (a
                # block's rest beyond the values that stood out alone carries the noise of every value taken
                # out): the amount goes to the halves in proportion to their positive counts, each placed
                # further in turn (spread evenly over 1984..2124, the rest of the years 1984..2013 was drawn up
                # to 2120; a searched block's, log wages of 0..5.3 up to 9.8); when neither does, evenly over
                # both (a thin tail, as person weights of 100..661)
                kept = [max(e, 0.0) for e, _ in left]
                total = kept[0] + kept[1]
                if kept[0] > 0:
                    spread(halves[0], amount * kept[0] / total)
                if kept[1] <= 0:
                    return
                members, amount = halves[1], amount * kept[1] / total
            else:
                break
        place(members, amount)

    def lattice_of(members: np.ndarray) -> None:
        # the lattice a run's amount is spread on: its own, or the column's where the run's own is finer (its
        # values that stood out alone were taken out)
        nonlocal step
        lattice = run_lattice(grid, members, rest[members], sums.sigma, laplace, values, points)
        step = lattice[1] if lattice is not None else 0.0
        step = column_step if column_step > 0.0 and (step == 0.0 or _multiple(column_step, step)) else step

    stood: list[np.ndarray] = []
    for members in standing_blocks(grid, rest, cells, sums, block_gaussian):
        stood.append(members)
        amount = sums.left(members, rest - weights, block_gaussian)[0]
        if amount > 0:
            lattice_of(members)
            spread(members, amount)
    # beyond the outermost placed records on each side: the runs next out (the rest of the end's block of
    # magnitude, the next blocks), each tested at a level over those few runs, not over every block of the grid
    keys = grid.block_keys(cells)
    reach = noise_level(SIGNAL_FALSE_POSITIVE / (2 * _REACH_RUNS), False)
    for outward in (True, False):
        while True:
            placed = cells[weights[cells] > 0]
            if len(placed) == 0:
                break
            end = int(placed[-1] if outward else placed[0])
            runs = _runs_beyond(cells, keys, end, outward)
            tested = [sums.left(run, rest - weights, reach) for run in runs]
            up = [i for i, (value, needed) in enumerate(tested) if value > needed]
            if not up:
                break
            for i in range(up[-1] + 1):
                value, needed = tested[i]
                lattice_of(runs[i])
                if i in up:
                    stood.append(runs[i])
                    spread(runs[i], value)
                elif value - needed / reach > 0:
                    # a run between the placed records and one beyond that stood out: its own noisy count
                    # less one std of its noise, as a measured half that does not stand out keeps
                    place(runs[i], value - needed / reach)
            placed = cells[weights[cells] > 0]
            if int(placed[-1] if outward else placed[0]) == end:
                break  # nothing placed beyond the end (an amount spread over no value)
    stood.sort(key=lambda m: int(m[0]))
    return weights, stood


_REACH_RUNS = 3
"""How many runs next out beyond a column's placed records :func:`signal_weights` tests on each side (the rest of
the outermost block of magnitude with records, and the next two blocks), each at the Gaussian level
Phi^-1(1 - 0.001 / (2 x this)) (a Bonferroni bound over the two sides' runs; while one stands out, the runs
beyond it are tested in turn). A thin tail in a block of its own (incomes of 100,000..713,000, 5% of a
10,000-row table; ages 0..9 of a state's 9,276 records) does not stand out at the level over every block of the
grid (:func:`~spark_dpsynth.profile.blocks.block_level`), at epsilon 1, and was left out of the range
(docs/design.md section 2.8)."""


def _runs_beyond(cells: np.ndarray, keys: np.ndarray, end: int, outward: bool) -> list[np.ndarray]:
    """The runs of cells next out from ``end`` (a cell of ``cells``, which are in value order with their blocks
    of magnitude ``keys``), up (``outward``) or down: the rest of ``end``'s block beyond it (when not empty), then
    the next blocks, :data:`_REACH_RUNS` runs at most, each in value order."""
    at = int(np.searchsorted(cells, end))
    out: list[np.ndarray] = []
    if outward:
        p = at + 1
        while p < len(cells) and len(out) < _REACH_RUNS:
            q = p + int(np.argmax(keys[p:] != keys[p])) if (keys[p:] != keys[p]).any() else len(cells)
            out.append(cells[p:q])
            p = q
    else:
        q = at
        while q > 0 and len(out) < _REACH_RUNS:
            below = keys[:q] != keys[q - 1]
            p = int(np.flatnonzero(below)[-1]) + 1 if below.any() else 0
            out.append(cells[p:q])
            q = p
    return out


_LOCAL_SHARE = 0.5
"""An amount placed in a part of a block (:func:`signal_weights`) goes first to the part's cells that stand out
of their noise at a Bonferroni level over the part's cells alone when those cells hold at least this share of
it (a few years among 111 whole numbers); else it is spread evenly (the ages 70..90 of a thin tail, each within
the noise: a few of them standing out by their noise would take it all)."""
_HALF_SPLIT = 2.0
"""When neither measured half of a block (fine or searched) stands out but one holds more than this many stds of
its noise, the block's amount is split between them by their positive counts instead of spread evenly over both
(:func:`signal_weights`): the rest of a block beyond the values that stood out alone carries the noise of every
value taken out, and spread evenly over the fine block 1984..2124, the years 1984..2013 were drawn up to 2120; over
a searched block, log wages of 0..5.3 up to 9.8 (docs/design.md section 2.8)."""
