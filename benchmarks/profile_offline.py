"""The DP profile of one column, offline: what the profile decides and which values its synthetic column can hold.

Reads one column of a CSV, counts it on its scale's public grid (cells, blocks, non-whole values and distinct
values, as :func:`spark_dpsynth.mechanisms._profile.dp_profiles` does), adds seeded Gaussian noise of a given std
per cell (the blocks and the distinct count their own multiples of it) and runs
:func:`spark_dpsynth.profile.profile_from_noisy` (docs/design.md section 2.8). Per seed it prints the meaning, the
range, and of the values a synthetic column can hold (the exact values and the within-bin shape's pieces, each
piece's weight spread evenly over its values) the share the column never holds, the share off a lattice
(``--lattice 0.5``: not a multiple of it), the number of distinct values and the 1-way TVD against the column
(the exact values at their true shares, the shape scaled to the rest: the profile's own error, not the
synthesizer's); on the timestamp scale (seconds since 1970) the range as dates and the largest distance of the
bins' edges from the column's sixteenths (the share of its records below each edge against 1/16, 2/16, ..).
Not private: it reads the sensitive table and seeds the noise. Usage::

    python benchmarks/profile_offline.py TABLE.csv COLUMN --scale integer --sigma 100 --seeds 6 \\
        [--rows-per-person KEY:2] [--lattice 0.5]

``--rows-per-person KEY:L`` keeps L seeded rows of each person first, as a person-level run bounds its events.
The noise std of a run's profile: sqrt((c + sum_j u_j + f) / (2 rho_P)) (docs/design.md section 2.8).
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from spark_dpsynth.profile import block_noise, block_tree, profile_from_noisy, profile_grid
from spark_dpsynth.profile.codes import DISTINCT_NOISE
from spark_dpsynth.profile.grid import cells_of


def noisy_profile(x: np.ndarray, scale: str, sigma: float, seed: int):  # noqa: ANN201 - a ColumnProfile
    """The profile of the values ``x`` (float64, NaN empty) under seeded noise of ``sigma`` per cell."""
    grid = profile_grid(scale)
    ok = ~np.isnan(x)
    i = np.searchsorted(grid.points, x[ok], side="right") - 1
    lower = np.full(len(x), np.nan)
    exact = np.zeros(len(x), dtype=bool)
    below = i < 0
    lower[ok] = np.where(below, grid.points[0] - 1.0, grid.points[np.maximum(i, 0)])
    exact[ok] = ~below & (grid.points[np.maximum(i, 0)] == x[ok])
    cells = cells_of(grid, lower, exact)
    cells[np.flatnonzero(ok)[below]] = 0
    true = np.bincount(cells, minlength=grid.size).astype(np.float64)
    rng = np.random.default_rng(seed)
    counts = true.copy()
    noised = grid.possible.copy()
    noised[grid.null_cell] = True
    counts[noised] += np.round(rng.normal(0.0, sigma, int(noised.sum())))
    fractions = float((x[ok] != np.floor(x[ok])).sum()) + round(rng.normal(0.0, sigma))
    tree, kappa = block_tree(scale), block_noise(scale)
    running = np.r_[0.0, np.cumsum(true[np.flatnonzero(grid.possible[: grid.null_cell])])]
    blocks = (
        running[tree[:, 1]] - running[tree[:, 0]] + np.round(rng.normal(0.0, 1.0, len(tree)) * kappa * sigma)
    )
    # the profile counts the distinct values of the number scales only
    distinct = (
        len(np.unique(x[ok])) + round(rng.normal(0.0, DISTINCT_NOISE * sigma))
        if scale != "timestamp"
        else None
    )
    return profile_from_noisy(
        "column",
        scale,
        grid,
        counts,
        fractions if scale == "real" else 0.0,
        sigma,
        16,
        len(x),
        blocks=blocks,
        block_sigma=kappa * sigma,
        distinct=distinct,
        distinct_sigma=DISTINCT_NOISE * sigma,
    )


def drawn(bins, real: pd.Series, whole: bool) -> pd.Series:  # noqa: ANN001 - a BinSpec
    """The shares of the values a synthetic column can hold: exact values at their true shares, the within-bin
    shape scaled to the rest (each piece evenly over its values: whole numbers when ``whole``, a lattice piece's,
    or for an interval of reals its midpoint, a value no record holds)."""
    points = set(bins.points)
    rest = 1.0 - float(real.reindex(sorted(points), fill_value=0.0).sum())
    total = sum(p[2] for p in bins.shape) or 1.0
    out: dict[float, float] = {v: float(real.get(v, 0.0)) for v in points}
    for a, b, w, *step in bins.shape:
        if step or a == b:
            values = np.arange(a, b + 1e-9, step[0] if step else 1.0)
        elif whole:
            values = np.arange(np.ceil(a), np.floor(b) + 1.0)
        else:
            values = np.array([(a + b) / 2.0])
        for v in np.round(values, 9):
            out[float(v)] = out.get(float(v), 0.0) + w / total * rest / len(values)
    return pd.Series(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("table")
    p.add_argument("column")
    p.add_argument("--scale", choices=("integer", "real", "timestamp"), default="integer")
    p.add_argument("--sigma", type=float, required=True, help="the noise std per cell, in records")
    p.add_argument("--seeds", type=int, default=6)
    p.add_argument("--rows-per-person", default=None, help="KEY:L, L seeded rows of each person")
    p.add_argument(
        "--lattice", type=float, default=0.0, help="report the share off the multiples of this step"
    )
    args = p.parse_args()
    usecols = [args.column] + ([args.rows_per_person.split(":")[0]] if args.rows_per_person else [])
    df = pd.read_csv(args.table, usecols=usecols)
    if args.rows_per_person:
        key, limit = args.rows_per_person.split(":")
        df = df.sample(frac=1.0, random_state=1).groupby(key).head(int(limit))
    x = pd.to_numeric(df[args.column], errors="coerce").to_numpy(dtype=np.float64)
    real = pd.Series(x[~np.isnan(x)]).value_counts(normalize=True)
    print(f"{args.column}: {len(x)} rows, {len(real)} distinct values, sigma {args.sigma}")
    for seed in range(args.seeds):
        profile = noisy_profile(x, args.scale, args.sigma, seed)
        if profile.bins is None:
            print(f"  seed {seed}: code ({profile.reason})")
            continue
        if args.scale == "timestamp":
            ends = pd.to_datetime([profile.bins.lower, profile.bins.upper], unit="s")
            done = np.sort(x[~np.isnan(x)])
            below = np.searchsorted(done, np.array(profile.bins.edges)) / len(done)
            error = float(np.abs(below - np.arange(1, len(below) + 1) / (len(below) + 1)).max())
            print(
                f"  seed {seed}: measurement [{ends[0].date()}, {ends[1].date()}], {len(below) + 1} bins, "
                f"edges off the column's quantiles by at most {error:.3f} (column {pd.to_datetime(done[0], unit='s').date()}"
                f" .. {pd.to_datetime(done[-1], unit='s').date()})"
            )
            continue
        syn = drawn(profile.bins, real, args.scale == "integer" or profile.bins.integral)
        syn = syn[syn > 0]
        never = float(syn[~syn.index.isin(real.index)].sum())
        off = (
            float(syn[np.abs(syn.index / args.lattice - np.round(syn.index / args.lattice)) > 1e-6].sum())
            if args.lattice
            else 0.0
        )
        idx = real.index.union(syn.index)
        tvd = 0.5 * float(np.abs(real.reindex(idx, fill_value=0.0) - syn.reindex(idx, fill_value=0.0)).sum())
        print(
            f"  seed {seed}: measurement [{profile.bins.lower:g}, {profile.bins.upper:g}], {len(syn)} values "
            f"drawn, {never:.3f} on values it never holds"
            + (f", {off:.3f} off the lattice {args.lattice:g}" if args.lattice else "")
            + f", 1-way TVD {tvd:.4f}"
        )


if __name__ == "__main__":
    main()
