"""Check the evaluation's figures against an outside yardstick computed with pandas (docs/design.md section 5.2).

UCI Adult's training rows (data/adult.csv.gz, 32,561 rows, 15 columns), each column's distinct values recoded to
the integers 0..k-1 in sorted order and read back with Spark's CSV type inference (integer columns), are
compared with a perturbed copy, a test fixture and not real data: each column shuffled independently within a
fraction of the rows, 5% of ``income`` cells set to 4399 (a code the column never holds) and 5% of ``fnlwgt``
cells set to 2,147,483,647 (outside its range). pandas computes the mean 1-, 2- and 3-way TVD over every
column subset, on the input's own values for columns with at most 100 distinct values and on the sensitive
deciles (right-open bins, open end bins) for the others, and the out-of-support counts; the script prints them
beside what :func:`spark_dpsynth.evaluation.evaluate` reports for the same pair, and fails when they differ by
more than 0.01.

Run: ``PYTHONPATH=. python benchmarks/evaluation_yardstick.py [--shuffle 0.3]``.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
CATEGORICAL_MAX_VALUES = 100


def coded_adult() -> pd.DataFrame:
    df = pd.read_csv(ROOT / "data" / "adult.csv.gz", skipinitialspace=True)
    df = df[df["split"] == "train"].drop(columns=["split"])
    out = pd.DataFrame(index=df.index)
    for c in df.columns:
        values = sorted(df[c].dropna().unique())
        out[c] = df[c].map({v: i for i, v in enumerate(values)})
    return out.reset_index(drop=True)


def perturbed(df: pd.DataFrame, share: float, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    out = df.copy()
    n = len(df)
    for c in df.columns:
        rows = np.flatnonzero(rng.random(n) < share)
        out.loc[rows, c] = out.loc[rng.permutation(rows), c].to_numpy()
    out.loc[rng.random(n) < 0.05, "income"] = 4399
    out.loc[rng.random(n) < 0.05, "fnlwgt"] = 2_147_483_647
    return out


def pandas_yardstick(s: pd.DataFrame, y: pd.DataFrame) -> dict:
    s_cells, y_cells, outside = pd.DataFrame(), pd.DataFrame(), {}
    for c in s.columns:
        if s[c].nunique() <= CATEGORICAL_MAX_VALUES:
            s_cells[c], y_cells[c] = s[c].astype("Int64"), y[c].astype("Int64")
            outside[c] = int((~y[c].isin(set(s[c].dropna()))).sum())
        else:
            edges = np.unique(np.quantile(s[c].to_numpy(float), np.arange(1, 10) / 10, method="inverted_cdf"))
            s_cells[c] = np.searchsorted(edges, s[c].to_numpy(float), side="right")
            y_cells[c] = np.searchsorted(edges, y[c].to_numpy(float), side="right")
            outside[c] = int(((y[c] < s[c].min()) | (y[c] > s[c].max())).sum())
    tvd = {}
    for k in (1, 2, 3):
        values = []
        for subset in itertools.combinations(s.columns, k):
            p = s_cells.value_counts(list(subset), normalize=True, dropna=False)
            q = y_cells.value_counts(list(subset), normalize=True, dropna=False)
            values.append(0.5 * p.sub(q, fill_value=0).abs().sum())
        tvd[str(k)] = float(np.mean(values))
    return {"tvd": tvd, "outside": outside}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shuffle", type=float, default=0.3, help="share of rows shuffled per column")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from spark_dpsynth.evaluation import evaluate

    sens = coded_adult()
    syn = perturbed(sens, args.shuffle, args.seed)
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for name, table in (("sensitive", sens), ("synthetic", syn)):
            paths[name] = os.path.join(tmp, f"{name}.csv")
            table.to_csv(paths[name], index=False)
        # The tables as a user's CSV reads them: Spark's type inference (integer codes).
        s_df = spark.read.csv(paths["sensitive"], header=True, inferSchema=True)
        y_df = spark.read.csv(paths["synthetic"], header=True, inferSchema=True)
        print("types:", ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in s_df.schema.fields))
        # pandas reads the typed tables back from Spark's own reading (the same values)
        s_pd, y_pd = s_df.toPandas(), y_df.toPandas()

        def strings(df):  # noqa: ANN001, ANN202
            return df.select(*(df[c].cast("string").alias(c) for c in df.columns))

        started = time.perf_counter()
        metrics = evaluate(
            strings(s_df),
            strings(y_df),
            max_marginal_length=3,
            typed_sensitive=s_df,
            typed_synthetic=y_df,
            numeric_columns=[],
        )
        seconds = time.perf_counter() - started
    reference = pandas_yardstick(s_pd, y_pd)
    print(f"spark_dpsynth.evaluation.evaluate: {seconds:.1f} s")
    print("rules:", {c: r["rule"] for c, r in metrics["yardstick"]["columns"].items()})
    ok = True
    print("length  pandas   evaluate  |diff|  floor")
    for k in ("1", "2", "3"):
        ours, theirs = metrics["tvd"][k]["mean"], reference["tvd"][k]
        ok &= abs(ours - theirs) <= 0.01
        print(
            f"{k}-way   {theirs:.4f}   {ours:.4f}    {abs(ours - theirs):.4f}  {metrics['tvd'][k]['floor']:.4f}"
        )
    print("out of support (pandas / evaluate):")
    for c, count in reference["outside"].items():
        got = metrics["out_of_support"]["by_column"][c]["count"]
        ok &= got == count
        if count or got:
            print(f"  {c}: {count} / {got}")
    print("agree within .01:" if ok else "DISAGREE:", ok)
    spark.stop()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
