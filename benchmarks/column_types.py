"""Typed synthetic data against its input: schema, empty cells and 3-way TVD on public discretizations.

Compares a synthetic Parquet directory written by ``spark-dpsynth pipeline`` with the input it came from (read
with the same schema inference), after binning the numeric columns of both tables on the same public edges:

* ``equal10``: 10 equal-width bins over public ranges given on the command line (``COLUMN=LOW:HIGH``);
* ``config``: the ``[data.bins]`` edges of a TOML configuration (e.g. ``conf/adult.toml``), if given.

Prints the schemas (equal or not), the share of empty cells per column in each table, and the mean and max TVD
over all column subsets of size 1, 2 and 3 (docs/design.md section 5.2). Not private: it reads the sensitive
table; the numbers are for the design reference and the README.

Example (UCI Adult as it comes, no configuration)::

    spark-dpsynth pipeline --input data/adult.csv.gz --output out --epsilon 4
    python benchmarks/column_types.py data/adult.csv.gz out/synthetic --config conf/adult.toml \\
        --range age=17:91 fnlwgt=0:1500000 education_num=1:17 capital_gain=0:100000 capital_loss=0:4500 \\
        hours_per_week=1:100
"""

from __future__ import annotations

import argparse
import itertools
import tomllib

import numpy as np
import pandas as pd


def _tvd(a: pd.DataFrame, b: pd.DataFrame, cols: list[str]) -> float:
    pa = a.groupby(cols, dropna=False).size() / len(a)
    pb = b.groupby(cols, dropna=False).size() / len(b)
    both = pd.concat([pa, pb], axis=1).fillna(0.0)
    return float(0.5 * np.abs(both.iloc[:, 0] - both.iloc[:, 1]).sum())


def _binned(df: pd.DataFrame, edges: dict[str, list[float]]) -> pd.DataFrame:
    out = df.copy()
    for c, e in edges.items():
        x = pd.to_numeric(out[c], errors="coerce").to_numpy(dtype=float)
        codes = np.searchsorted(np.asarray(e, dtype=float), x, side="right")
        out[c] = np.where(np.isnan(x), -1, codes)
    return out.astype("string")


def _report(name: str, real: pd.DataFrame, syn: pd.DataFrame, edges: dict[str, list[float]]) -> None:
    a, b = _binned(real, edges), _binned(syn, edges)
    cols = list(real.columns)
    for k in (1, 2, 3):
        values = [_tvd(a, b, list(s)) for s in itertools.combinations(cols, k)]
        print(
            f"{name:8s} {k}-way TVD  mean {np.mean(values):.4f}  max {np.max(values):.4f}  ({len(values)} subsets)"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("input", help="the input CSV (read with schema inference) or Parquet")
    p.add_argument("synthetic", help="the synthetic Parquet directory")
    p.add_argument(
        "--config", help="a TOML configuration whose [data.bins] edges give a second discretization"
    )
    p.add_argument("--range", nargs="*", default=[], help="COLUMN=LOW:HIGH public range for 10 equal bins")
    args = p.parse_args()

    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    if args.input.endswith((".csv", ".csv.gz")):
        real_sdf = spark.read.csv(args.input, header=True, inferSchema=True)
    else:
        real_sdf = spark.read.parquet(args.input)
    syn_sdf = spark.read.parquet(args.synthetic)
    same = [(f.name, f.dataType.simpleString()) for f in real_sdf.schema.fields] == [
        (f.name, f.dataType.simpleString()) for f in syn_sdf.schema.fields
    ]
    print("input schema     ", real_sdf.schema.simpleString())
    print("synthetic schema ", syn_sdf.schema.simpleString())
    print("schemas equal (names, order, types):", same)
    # benchmark only: the tables are small (Adult: 48,842 rows) and this script is not part of a release
    real = real_sdf.toPandas()
    syn = syn_sdf.toPandas()[list(real.columns)]
    empty = pd.DataFrame({"input": real.isna().mean(), "synthetic": syn.isna().mean()})
    print("empty-cell share per column (input / synthetic):")
    print(empty.to_string(float_format=lambda x: f"{x:.4f}"))
    print(
        f"empty-cell share, all cells: input {real.isna().to_numpy().mean():.4f}, synthetic "
        f"{syn.isna().to_numpy().mean():.4f}; columns empty in > 1% of synthetic rows where the input has none: "
        f"{[c for c in real.columns if real[c].isna().mean() == 0 and syn[c].isna().mean() > 0.01]}"
    )
    from scipy.stats import wasserstein_distance

    numeric = [
        f.name
        for f in real_sdf.schema.fields
        if f.dataType.typeName() in ("byte", "short", "integer", "long", "float", "double", "decimal")
    ]
    for c in numeric:
        x = pd.to_numeric(real[c], errors="coerce").dropna().to_numpy(dtype=float)
        y = pd.to_numeric(syn[c], errors="coerce").dropna().to_numpy(dtype=float)
        if len(x) and len(y):
            w = wasserstein_distance(x, y)
            print(
                f"Wasserstein {c:16s} {w:14.4f}  (input std {np.std(x):.4f}; W / std {w / max(np.std(x), 1e-12):.4f})"
            )
    ranges = {}
    for item in args.range:
        col, _, span = item.partition("=")
        low, high = (float(x) for x in span.split(":"))
        ranges[col] = list(np.linspace(low, high, 11)[1:-1])
    if ranges:
        _report("equal10", real, syn, ranges)
    if args.config:
        with open(args.config, "rb") as fh:
            bins = tomllib.load(fh).get("data", {}).get("bins", {})
        _report("config", real, syn, {c: list(b["edges"]) for c, b in bins.items()})
    spark.stop()


if __name__ == "__main__":
    main()
