"""The synthetic values themselves against the input: the checks a new user makes by eye.

For each column of an input table and the ``synthetic.csv`` a ``spark-dpsynth pipeline`` run wrote from it, prints:

* ``one value``: the synthetic column holds a single value where the real one holds several values of at least
  ``--min-share`` of the rows each (a collapsed column); with ``--release``, values holding more records than the
  release's discovery threshold (a value below it is suppressed by design);
* ``range``: for a number column (with ``--release``: a column the release calls a measurement), whether the
  synthetic range covers the real 1st..99th percentiles;
* ``distinct``: for a column with at most 20 distinct real values, whether the synthetic one holds more;
* ``invented``: the share of synthetic cells holding a value the real column never holds (number and text columns
  alike, compared as values; not flagged for a measurement, whose values are drawn inside bins);
* ``format``: synthetic cells written in a form the input never uses (scientific notation, a decimal point in a
  column the input writes as whole numbers).

Not private: it reads the sensitive table. The figures are for docs and notes. Example::

    spark-dpsynth pipeline --input T.csv.gz --output out --epsilon 4
    python benchmarks/value_checks.py T.csv.gz out/synthetic.csv
"""

from __future__ import annotations

import argparse
import json
import re

import numpy as np
import pandas as pd

_SCI = re.compile(r"^-?\d+(\.\d+)?[eE][-+]?\d+$")


def _numbers(s: pd.Series) -> pd.Series:
    return pd.to_numeric(s, errors="coerce")


def column_checks(
    real: pd.Series, syn: pd.Series, *, min_share: float, min_count: float = 0.0, meaning: str | None = None
) -> dict:
    """One row of checks for one column; both series read as text (``dtype=str``), empty as NaN."""
    r, s = real.dropna(), syn.dropna()
    out: dict = {
        "column": real.name,
        "real_distinct": int(r.nunique()),
        "synthetic_distinct": int(s.nunique()),
    }
    counts = r.value_counts()
    several = ((counts >= min_share * len(r)) & (counts > min_count)).sum() >= 2
    out["one_value"] = bool(out["synthetic_distinct"] <= 1 and several)
    out["meaning"] = meaning
    rn, sn = _numbers(r), _numbers(s)
    numeric = len(r) > 0 and rn.notna().mean() > 0.99
    if numeric:
        rn, sn = rn.dropna(), sn.dropna()
        lo, hi = np.percentile(rn, [1, 99])
        out.update(
            real_p1=float(lo),
            real_p99=float(hi),
            real_min=float(rn.min()),
            real_max=float(rn.max()),
            synthetic_min=float(sn.min()) if len(sn) else None,
            synthetic_max=float(sn.max()) if len(sn) else None,
        )
        if meaning in (None, "measurement"):
            out["range_covers_p1_p99"] = bool(len(sn) and sn.min() <= lo and sn.max() >= hi)
        whole_real = bool((rn == np.round(rn)).all())
        written_whole = not r.str.contains(r"[.eE]").any()
        bad = s.str.match(_SCI.pattern) & ~r.str.match(_SCI.pattern).any()
        if written_whole:
            bad = bad | s.str.contains(r"\.")
        out["format_off_share"] = float(bad.mean()) if len(s) else 0.0
        out["whole_real"] = whole_real
        real_values = set(rn.unique())
        out["invented_share"] = float((~sn.isin(real_values)).mean()) if len(sn) else 0.0
    else:
        out["invented_share"] = float((~s.isin(set(r.unique()))).mean()) if len(s) else 0.0
    out["more_distinct"] = bool(
        out["real_distinct"] <= 20 and out["synthetic_distinct"] > out["real_distinct"]
    )
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("real")
    p.add_argument("synthetic")
    p.add_argument(
        "--min-share", type=float, default=0.01, help="a real value counts above this share of rows"
    )
    p.add_argument("--drop", nargs="*", default=[], help="columns left out of the run (identifiers)")
    p.add_argument("--na", nargs="*", default=[""], help="texts read as empty in the real table (NIST: N)")
    p.add_argument(
        "--release", help="the run's release directory: column meanings and the discovery threshold"
    )
    p.add_argument("--json", help="write the rows here")
    a = p.parse_args()
    real = pd.read_csv(a.real, dtype=str, keep_default_na=False, na_values=a.na)
    syn = pd.read_csv(a.synthetic, dtype=str, keep_default_na=False, na_values=a.na)
    meanings: dict = {}
    threshold = 0.0
    if a.release:
        with open(f"{a.release}/manifest.json") as f:
            manifest = json.load(f)
        meanings = {c: m.get("meaning") for c, m in (manifest.get("column_meanings") or {}).items()}
        threshold = float((manifest.get("domain_discovery") or {}).get("threshold") or 0.0)
    rows = [
        column_checks(
            real[c],
            syn[c],
            min_share=a.min_share,
            min_count=threshold,
            meaning=meanings.get(c, "category") if a.release else None,
        )
        for c in syn.columns
        if c in real and c not in a.drop
    ]
    flagged = 0
    for row in rows:
        why = []
        if row["one_value"]:
            why.append("one value")
        if row.get("range_covers_p1_p99") is False:
            why.append(
                f"range {row['synthetic_min']:g}..{row['synthetic_max']:g} misses p1..p99 "
                f"{row['real_p1']:g}..{row['real_p99']:g} (real {row['real_min']:g}..{row['real_max']:g})"
            )
        if row["more_distinct"]:
            why.append(f"distinct {row['synthetic_distinct']} > {row['real_distinct']}")
        if row.get("format_off_share", 0) > 0:
            why.append(f"format off {row['format_off_share']:.1%}")
        if row["invented_share"] > 0.001 and row["meaning"] != "measurement":
            why.append(
                f"invented {row['invented_share']:.1%} (distinct {row['synthetic_distinct']} of {row['real_distinct']})"
            )
        flagged += bool(why)
        print(f"{row['column']:>24}: " + ("; ".join(why) if why else "ok"))
    print(f"{flagged} of {len(rows)} columns flagged")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
