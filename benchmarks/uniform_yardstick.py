"""An outside yardstick for the evaluation at scale: mean TVD on uniform row samples, computed with numpy.

Reads the sensitive table and a synthetic table with pandas (Parquet or CSV), keeps the sensitive rows a
``--filter COLUMN=VALUE`` selects (the configuration's ``row_filter``, written as an equality), draws
``--rows`` rows of each uniformly without replacement (numpy, seeded; two disjoint samples of the sensitive
table for the sampling floor), and reports the mean 1-, 2- and 3-way TVD over every column subset (docs/design.md
section 5.2). A column with ``[data.bins.NAME]`` edges in the configuration is compared on those public bins
(right-open, open end bins); every other column on its own values, text trimmed; an empty cell (null, or one
of the configuration's ``empty_values``) is a value of its own. With
``--metrics``, the evaluation's ``metrics.json`` of the same pair is read and the relative difference printed.
Not private: it reads the sensitive table; the figures are for benchmarks/README.md. Usage::

    python benchmarks/uniform_yardstick.py --config conf/adult.toml --filter split=train \\
        --real adult_10m.parquet --synthetic o/synthetic --metrics o/evaluation/metrics.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd


def _read(path: str, columns: list[str]) -> pd.DataFrame:
    p = Path(path)
    if p.suffix in (".csv", ".gz") or p.name.endswith(".csv.gz"):
        return pd.read_csv(p, usecols=columns, dtype=str, keep_default_na=False, na_values=[""])
    return pd.read_parquet(p, columns=columns)


def _codes(parts: list[pd.Series], edges: list[float] | None) -> tuple[list[np.ndarray], int]:
    """The parts of one column as int64 codes of one shared domain (public bins, or the values found in the
    parts; an empty cell is a code of its own), and the domain's size."""
    if edges is not None:
        out = []
        for s in parts:
            x = pd.to_numeric(s, errors="coerce").to_numpy(dtype=np.float64)
            code = np.digitize(x, np.asarray(edges, dtype=np.float64), right=False)
            out.append(np.where(np.isnan(x), len(edges) + 1, code).astype(np.int64))
        return out, len(edges) + 2
    values = pd.concat(parts, ignore_index=True).astype("string").fillna("\0empty")
    codes, uniques = pd.factorize(values)
    bounds = np.cumsum([0] + [len(s) for s in parts])
    return [codes[lo:hi].astype(np.int64) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)], len(
        uniques
    )


def _mean_tvd(a: np.ndarray, b: np.ndarray, sizes: list[int], length: int) -> float:
    out = []
    for subset in itertools.combinations(range(a.shape[1]), length):
        cells = int(np.prod([sizes[c] for c in subset]))
        keys = []
        for x in (a, b):
            key = np.zeros(x.shape[0], dtype=np.int64)
            for c in subset:
                key = key * sizes[c] + x[:, c]
            keys.append(key)
        pa = np.bincount(keys[0], minlength=cells) / a.shape[0]
        pb = np.bincount(keys[1], minlength=cells) / b.shape[0]
        out.append(0.5 * float(np.abs(pa - pb).sum()))
    return float(np.mean(out))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="TOML with [data] columns and [data.bins]")
    parser.add_argument("--real", required=True, help="the sensitive table (Parquet directory or CSV)")
    parser.add_argument("--synthetic", required=True, help="the synthetic table (Parquet directory or CSV)")
    parser.add_argument("--filter", help="COLUMN=VALUE: keep these sensitive rows (the config's row_filter)")
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows sampled from each table")
    parser.add_argument("--max-length", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--metrics", help="the evaluation's metrics.json of the same pair, to compare")
    args = parser.parse_args(argv)

    with open(args.config, "rb") as f:
        data = tomllib.load(f).get("data", {})
    columns = list(data["columns"])
    bins = {c: list(spec["edges"]) for c, spec in (data.get("bins") or {}).items() if "edges" in spec}
    started = time.perf_counter()
    extra = [args.filter.split("=", 1)[0]] if args.filter else []
    real = _read(args.real, columns + extra)
    if args.filter:
        column, value = args.filter.split("=", 1)
        real = real[real[column].astype(str) == value].copy()
    synthetic = _read(args.synthetic, columns)
    empty = set(data.get("empty_values") or [])
    for frame in (real, synthetic):  # as the package prepares a column: text trimmed, the empty values empty
        for c in columns:
            if frame[c].dtype == object:
                text = frame[c].str.strip()
                frame[c] = text.where(~text.isin(empty), None)
    rng = np.random.default_rng(args.seed)
    m = min(args.rows, len(real) // 2, len(synthetic))
    order = rng.permutation(len(real))
    first, second = order[:m], order[m : 2 * m]
    picked = rng.choice(len(synthetic), size=m, replace=False)
    a = np.empty((m, len(columns)), dtype=np.int64)
    a2 = np.empty_like(a)
    b = np.empty_like(a)
    sizes = []
    for j, c in enumerate(columns):
        (a[:, j], b[:, j], a2[:, j]), k = _codes(
            [real[c].iloc[first], synthetic[c].iloc[picked], real[c].iloc[second]], bins.get(c)
        )
        sizes.append(k)
    print(f"sensitive rows kept {len(real):,}, synthetic rows {len(synthetic):,}; {m:,} sampled from each")
    metrics = None
    if args.metrics:
        with open(args.metrics) as f:
            metrics = json.load(f).get("tvd", {})
    for length in range(1, args.max_length + 1):
        ours = _mean_tvd(a, b, sizes, length)
        floor = _mean_tvd(a, a2, sizes, length)
        line = f"{length}-way: yardstick {ours:.4f} (floor {floor:.4f})"
        if metrics and str(length) in metrics:
            reported = float(metrics[str(length)]["mean"])
            line += f"; the evaluation {reported:.4f} ({100 * (reported - ours) / ours:+.1f}%)"
        print(line, flush=True)
    print(f"done in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
