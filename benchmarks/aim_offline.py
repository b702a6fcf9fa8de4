"""Offline AIM experiments (docs/design.md section 4.7): the selection core, the final fit and the sampling
without Spark, on the fixed-domain codes of a data set, in test mode (seeded noise: NOT private).

``dump`` runs the workload mechanism on Spark up to the selection (domain discovery and fixed-domain encoding,
as ``benchmarks/quality.py`` does) and saves the encoded patterns, their multiplicities, the domain sizes and
the rho left for the selection to a pickle (sensitive data: keep it local). ``run`` loads it, runs
``select_and_measure`` with the given ``WorkloadParams`` overrides, fits the model as the ``pgm`` synthesizer
does, samples as many records systematically and prints one JSON line per seed: 1/2/3-way TVD over every
column subset on the fixed domain (the unreleased values are the empty category on both sides, so the loss of
the domain discovery is not in these figures), CPU seconds of the selection and the fit, rounds, measurements,
3-way cliques measured and model cells. Usage::

    python benchmarks/aim_offline.py dump adult 1 /tmp/adult_eps1.pkl
    python benchmarks/aim_offline.py run /tmp/adult_eps1.pkl --seeds 1,2 --set rounds=240 --set max_rounds=100

``run --replicate N`` stands the dumped records in for a large table: they are repeated to N rows and 10% of
each column's cells swapped among themselves (seeded), as ``scale_data.py`` builds ``adult_10m``; the selection
counts those N records with the dumped rho, and the figures are the fitted model's exact marginals against the
table's (no sampling: the model's own error, which a synthetic sample adds its sampling error to). Usage::

    python benchmarks/aim_offline.py dump adult 4 /tmp/adult_eps4.pkl
    python benchmarks/aim_offline.py run /tmp/adult_eps4.pkl --replicate 10000000 --set max_model_cells=2000000
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import pickle
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def dump(name: str, epsilon: float, path: str) -> None:
    import quality

    from spark_dpsynth.config import load_config
    from spark_dpsynth.data.prepare import resolve_columns
    from spark_dpsynth.mechanisms import workload

    class _Done(Exception):
        pass

    def capture(counter, names, rho, params, acct, **kw):  # noqa: ANN001, ANN003, ANN202, ARG001
        from spark_dpsynth.mechanisms._cliques import packed_words, unpack

        pdf = counter.encoded.toPandas()  # the distinct patterns: a benchmark on Adult/NIST-sized data only
        words = [pdf[f"w{w}"].to_numpy() for w in range(packed_words(counter.sizes))]
        with open(path, "wb") as f:
            pickle.dump(
                {
                    "codes": unpack(words, counter.sizes),
                    "mult": pdf["n"].to_numpy(),
                    "sizes": counter.sizes,
                    "names": names,
                    "rho": rho,
                },
                f,
            )
        raise _Done

    workload.select_and_measure = capture
    spark = quality._session()
    spec = quality.DATASETS[name]
    config = load_config(str(spec["config"]))
    raw = spark.read.csv(str(spec["input"]), header=True, inferSchema=False)
    train = raw.where(config.row_filter) if config.row_filter else raw
    params = dataclasses.replace(
        config.workload, reporting_length=config.aggregate.reporting_length, selection="aim"
    )
    budget = dataclasses.replace(config.budget, epsilon=epsilon, seed=quality.RELEASE_SEED)
    try:
        workload.fit_workload(train, params, resolve_columns(train.columns, config.data), budget=budget)
    except _Done:
        pass


def replicate(codes: np.ndarray, rows: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The distinct records and their multiplicities of ``codes`` repeated to ``rows`` rows, then 10% of the
    cells of each column swapped among themselves (numpy, seeded): the construction of ``adult_10m``."""
    rng = np.random.default_rng(seed)
    table = np.tile(codes, (-(-rows // len(codes)), 1))[:rows].copy()
    for j in range(table.shape[1]):
        swapped = np.flatnonzero(rng.random(rows) < 0.1)
        table[swapped, j] = table[rng.permutation(swapped), j]
    return np.unique(table, axis=0, return_counts=True)


def model_tvd(  # noqa: PLR0913
    model,  # noqa: ANN001
    counter,  # noqa: ANN001
    names: tuple[str, ...],
    sizes: tuple[int, ...],
    n: int,
    k: int,
    max_subsets: int = 0,
) -> float:
    """Mean TVD of the model's exact k-way marginals against the records' (no sampling of records), over every
    k-subset of the columns or, with ``max_subsets``, a seeded uniform sample of that many."""
    subsets = list(itertools.combinations(range(len(sizes)), k))
    if max_subsets and len(subsets) > max_subsets:
        pick = np.random.default_rng(k).choice(len(subsets), max_subsets, replace=False)
        subsets = [subsets[i] for i in sorted(pick.tolist())]
    errors = []
    for subset, table in zip(subsets, counter.tables(subsets, 1 << 62), strict=True):
        p = np.clip(model.project(tuple(names[c] for c in subset)), 0, None)
        errors.append(0.5 * float(np.abs(table / n - p / p.sum()).sum()))
    return float(np.mean(errors))


def run(  # noqa: PLR0913
    path: str, seeds: list[int], overrides: dict, iterations: int, rows: int = 0, max_subsets: int = 0
) -> None:
    from spark_dpsynth.estimation import Domain, estimate
    from spark_dpsynth.mechanisms._cliques import LocalCliqueCounter
    from spark_dpsynth.mechanisms.workload import select_and_measure
    from spark_dpsynth.params import WorkloadParams
    from spark_dpsynth.privacy._seeded import SeededNoise
    from spark_dpsynth.privacy.accounting import Accountant
    from spark_dpsynth.privacy.budget import Budget

    with open(path, "rb") as f:
        data = pickle.load(f)  # noqa: S301 - our own dump
    codes = data["codes"].astype(np.int64)
    mult = data["mult"].astype(np.int64)
    sizes, names = tuple(data["sizes"]), tuple(data["names"])
    if rows:
        codes, mult = replicate(np.repeat(codes, mult, axis=0), rows)
    records = np.repeat(codes, mult, axis=0) if not rows else None
    d = len(sizes)

    def tvd(x: np.ndarray, y: np.ndarray, clique: tuple[int, ...]) -> float:
        shape = [sizes[c] for c in clique]
        cells = math.prod(shape)
        p = np.bincount(np.ravel_multi_index(tuple(x[:, c] for c in clique), shape), minlength=cells)
        q = np.bincount(np.ravel_multi_index(tuple(y[:, c] for c in clique), shape), minlength=cells)
        return 0.5 * float(np.abs(p / len(x) - q / len(y)).sum())

    for seed in seeds:
        # epsilon only sizes the accountant: the selection spends the dumped rho, which epsilon 100 covers
        # the selection core runs AIM or MST (AIM unless the overrides say otherwise)
        params = WorkloadParams(**{"selection": "aim", **overrides})
        acct = Accountant(Budget(100.0, 1e-6), noise=SeededNoise(seed))
        acct.convert_to_rho(100.0, 1e-6)
        started = time.process_time()
        ms, _, rounds = select_and_measure(
            LocalCliqueCounter(codes, sizes, mult), names, data["rho"], params, acct
        )
        selected = time.process_time()
        model = estimate(Domain(names, sizes), ms, iterations=iterations)
        fitted = time.process_time()
        if records is None:
            counter = LocalCliqueCounter(codes, sizes, mult)
            means = [
                round(model_tvd(model, counter, names, sizes, int(mult.sum()), k, max_subsets), 4)
                for k in (1, 2, 3)
            ]
        else:
            synthetic = model.sample(len(records), np.random.default_rng(7), rounded=True)
            means = [
                round(
                    float(np.mean([tvd(records, synthetic, c) for c in itertools.combinations(range(d), k)])),
                    4,
                )
                for k in (1, 2, 3)
            ]
        print(
            json.dumps(
                {
                    "seed": seed,
                    "overrides": overrides,
                    "tvd_1_2_3": means,
                    "scored": "the model's exact marginals"
                    if records is None
                    else "a sample of as many records",
                    "selection_cpu_s": round(selected - started, 1),
                    "fit_cpu_s": round(fitted - selected, 1),
                    "rounds": len(rounds) - 1,
                    "measurements": len(ms),
                    "three_way": sum(len(m.clique) == 3 for m in ms),
                    "model_cells": model.size(),
                }
            ),
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    from spark_dpsynth.synthesizers.pgm import FIT_ITERATIONS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("dump")
    p.add_argument("dataset")
    p.add_argument("epsilon", type=float)
    p.add_argument("path")
    p = sub.add_parser("run")
    p.add_argument("path")
    p.add_argument("--seeds", default="20240501")
    p.add_argument("--set", action="append", default=[], help="a WorkloadParams field=value (int or float)")
    p.add_argument("--fit-iterations", type=int, default=FIT_ITERATIONS)
    p.add_argument(
        "--replicate", type=int, default=0, help="stand the records in for a table of this many rows"
    )
    p.add_argument(
        "--max-subsets",
        type=int,
        default=0,
        help="score a seeded sample of this many column subsets per length",
    )
    args = parser.parse_args(argv)
    if args.command == "dump":
        dump(args.dataset, args.epsilon, args.path)
    else:
        overrides = {}
        for item in args.set:
            key, value = item.split("=")
            overrides[key] = float(value) if "." in value else int(value)
        run(
            args.path,
            [int(s) for s in args.seeds.split(",")],
            overrides,
            args.fit_iterations,
            args.replicate,
            args.max_subsets,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
