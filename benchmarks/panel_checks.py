"""How a synthetic event table's persons go with time, beside the real table's (not private: reads both).

Per column, over the persons of two rows or more: the share that repeat a value, whose offsets column - time
spread by more than 1, and whose value goes down as the time goes up; then the exact 1-way TVD of the column and
the 2-way TVD of (column, time). With ``--born B``, the share of rows whose ``--age`` column is time - B or one
less (a panel's age against its birth year). Usage::

    python benchmarks/panel_checks.py REAL.csv SYNTHETIC.csv --person idcode --time year \\
        --columns age ttl_exp [--age age --born birth_yr]
"""

from __future__ import annotations

import argparse

import pandas as pd


def person_shares(df: pd.DataFrame, person: str, time: str, column: str) -> dict[str, float]:
    """Shares of the persons of two rows or more (rows where ``column`` and ``time`` are set)."""
    rows = df.dropna(subset=[column, time]).sort_values([person, time, column])
    sizes = rows.groupby(person).size()
    rows = rows[rows[person].isin(sizes[sizes >= 2].index)]
    by = rows.groupby(person)
    offsets = (rows[column] - rows[time]).groupby(rows[person])
    down = (by[column].diff() < 0).groupby(rows[person]).any()
    return {
        "repeat": float((by[column].nunique() < by.size()).mean()),
        "off by >1": float(((offsets.max() - offsets.min()) > 1).mean()),
        "goes down": float(down.mean()),
    }


def tvd(a: pd.DataFrame, b: pd.DataFrame, columns: list[str]) -> float:
    """The exact TVD of the joint distribution of ``columns`` (empty values dropped)."""
    p = a.groupby(columns).size() / len(a)
    q = b.groupby(columns).size() / len(b)
    return float(0.5 * p.subtract(q, fill_value=0).abs().sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("real")
    parser.add_argument("synthetic")
    parser.add_argument("--person", required=True)
    parser.add_argument("--time", required=True)
    parser.add_argument("--columns", nargs="+", required=True)
    parser.add_argument("--age")
    parser.add_argument("--born")
    args = parser.parse_args()
    tables = {"real": pd.read_csv(args.real), "synthetic": pd.read_csv(args.synthetic)}
    for column in args.columns:
        for name, df in tables.items():
            shares = person_shares(df, args.person, args.time, column)
            print(f"{column:>12} {name:>9}: " + ", ".join(f"{k} {v:.1%}" for k, v in shares.items()))
        real, synthetic = tables["real"], tables["synthetic"]
        joint = (
            ""
            if column == args.time
            else f", ({column}, {args.time}) {tvd(real, synthetic, [column, args.time]):.3f}"
        )
        print(f"{column:>12} exact TVD: 1-way {tvd(real, synthetic, [column]):.3f}{joint}")
    if args.age and args.born:
        for name, df in tables.items():
            rows = df.dropna(subset=[args.age, args.time, args.born])
            gap = rows[args.time] - rows[args.born] - rows[args.age]
            print(
                f"{args.age} = {args.time} - {args.born} (or one less), {name}: {gap.isin([0, 1]).mean():.1%}"
            )


if __name__ == "__main__":
    main()
