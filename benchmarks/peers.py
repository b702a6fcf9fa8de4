"""The peers' side of ``make bench-quality``: MST or AIM from private-pgm (McKenna et al.), run by smartnoise-synth.

Runs in the peer environment ``.venv-peers`` (``make bench-peers-env``: PyPI ``smartnoise-synth`` 1.0.8, whose
``MSTSynthesizer`` and ``AIMSynthesizer`` wrap private-pgm's reference mechanisms on its PyPI package ``mbi``),
never in the project's. ``quality.py`` starts it in a subprocess (its wall time and the peak RSS of its process
tree are measured there) on the table our own modes see: the *prepared* table (binned, every value a string,
null = empty), exported once to Parquet, so both sides work on the same columns and the same domains.

Usage (the peer environment's python)::

    .venv-peers/bin/python benchmarks/peers.py --synthesizer mst|aim --input PREPARED.parquet
        --output SYNTHETIC.parquet --epsilon 1 --delta 1e-6 [--seed 7] [--aim-degree 3]
        [--aim-max-model-size 80] [--aim-max-cells 10000] [--result RESULT.json]

The synthetic table has the input's columns and row count (smartnoise-synth samples as many rows as it was fitted
on), every column a nullable string (empty = null). Both peers treat every column as categorical with the values
of the input (``preprocessor_eps`` 0: the domain is taken as public, as our binned columns' labels are). The
noise is smartnoise-synth's (OpenDP); ``--seed`` seeds numpy's global generator, which their selection and
sampling use, not the noise: a peer's release is private and not reproducible.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

EMPTY = "\u2205<empty>"
"""Stands for an empty cell (null) while the peer runs: smartnoise-synth's categorical columns take no null."""


def _sample_iid() -> None:
    """Make ``MarkovRandomField.synthetic_data`` (which smartnoise-synth calls with its default) sample records
    i.i.d. from the fitted model (``method="sample"``).

    mbi 1.1.0's default, ``method="round"`` (randomized rounding of each conditional), loses the dependence
    between columns that share no clique: on a chain a-b-c-d fitted from exact 2-way tables, the model's (a, c)
    marginal is within TVD .009 of the data's but the rounded records' is .351 (``"sample"``: .020); on Adult
    at epsilon 1 it gave MST a 3-way TVD of .272. The fitted model, the peers' work, is the same either way.
    """
    import functools

    from mbi import MarkovRandomField

    original = MarkovRandomField.synthetic_data

    @functools.wraps(original)
    def synthetic_data(self, rows=None, method="sample"):  # noqa: ANN001, ANN202
        return original(self, rows, method)

    MarkovRandomField.synthetic_data = synthetic_data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--synthesizer", choices=("mst", "aim"), required=True)
    parser.add_argument("--input", required=True, help="the prepared table (Parquet file or directory)")
    parser.add_argument("--output", required=True, help="synthetic table (Parquet file)")
    parser.add_argument("--epsilon", type=float, required=True)
    parser.add_argument("--delta", type=float, required=True)
    parser.add_argument("--seed", type=int, default=7, help="numpy's global seed (selection, sampling)")
    parser.add_argument(
        "--aim-degree", type=int, default=3, help="AIM's workload: all marginals of this size"
    )
    parser.add_argument("--aim-max-model-size", type=float, default=80.0, help="AIM's model size cap (MB)")
    parser.add_argument("--aim-max-cells", type=int, default=10000, help="AIM's largest workload marginal")
    parser.add_argument(
        "--sampling",
        choices=("sample", "round"),
        default="sample",
        help="mbi's synthetic_data method: i.i.d. sampling (default) or its randomized rounding",
    )
    parser.add_argument("--result", help="JSON file for the timings")
    args = parser.parse_args(argv)

    import numpy as np
    import pandas as pd

    started = time.perf_counter()
    data = pd.read_parquet(args.input)
    columns = list(data.columns)
    data = data.astype(object).where(data.notna(), EMPTY).astype(str)
    read_s = time.perf_counter() - started

    np.random.seed(args.seed)  # noqa: NPY002 - the peers draw from numpy's global generator
    if args.synthesizer == "mst":
        from snsynth.mst import MSTSynthesizer

        synth = MSTSynthesizer(epsilon=args.epsilon, delta=args.delta)
    else:
        from snsynth.aim import AIMSynthesizer

        synth = AIMSynthesizer(
            epsilon=args.epsilon,
            delta=args.delta,
            degree=args.aim_degree,
            max_model_size=args.aim_max_model_size,
            max_cells=args.aim_max_cells,
        )
    if args.sampling == "sample":
        _sample_iid()
    started = time.perf_counter()
    synth.fit(data, categorical_columns=columns, preprocessor_eps=0.0)
    fit_s = time.perf_counter() - started
    started = time.perf_counter()
    synthetic = synth.sample(len(data))
    sample_s = time.perf_counter() - started
    if not isinstance(synthetic, pd.DataFrame):
        synthetic = pd.DataFrame(synthetic, columns=columns)
    synthetic = synthetic[columns].astype(str)
    synthetic = synthetic.where(synthetic != EMPTY, None)
    synthetic.to_parquet(args.output, index=False)
    result = {
        "synthesizer": args.synthesizer,
        "rows": len(synthetic),
        "read_seconds": read_s,
        "fit_seconds": fit_s,
        "sample_seconds": sample_s,
        "sampling": args.sampling,
    }
    if args.result:
        with open(args.result, "w", encoding="utf-8") as f:
            json.dump(result, f)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
