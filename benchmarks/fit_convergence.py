"""How fast the graphical-model fit reaches its measurements (docs/design.md section 4.8), with and without the
proportional steps, on the measured marginals of a release, in the same run.

For each release (a directory the workload mechanism wrote), the measurements the ``pgm`` synthesizer fits (the
cells measured absent taken out, as it does) are fitted from the cold start with at most each number of steps
given, once with the mirror step only and once with the mirror and proportional steps (the default), and one
line per fit is printed: steps taken, proportional steps, belief propagations, CPU seconds, the final loss (in
noise variances, halved) and the mean residual |mu - y| / sigma of the 1-way cells and of all measured cells (0.80
at the true table: E|N(0, 1)|). With ``--refits K``, it also replays the selection's refits (docs/design.md
section 4.7): the 1-way tables fitted, then the first K other marginals added one at a time in the release's
order, each followed by ``--refit-steps`` warm-started steps, and prints the median and largest loss per
measured cell after a refit (0.5 at the true table) and the propagations of all refits. The release is read, not the sensitive table: nothing here is private or secret
beyond what the release already holds. Usage::

    python benchmarks/fit_convergence.py o/release --steps 100,300,1000,20000 --refits 60 --output fit.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np


def measured(release_dir: str):  # noqa: ANN201 - (Domain, list[Measurement])
    """The domain and measurements the pgm synthesizer fits for the release at ``release_dir``."""
    from pyspark.sql import SparkSession

    from spark_dpsynth.release import load_release
    from spark_dpsynth.synthesizers.pgm import (
        absent_cells,
        release_domain,
        release_measurements,
        without_absent,
    )

    spark = SparkSession.builder.master("local[1]").appName("fit_convergence").getOrCreate()
    release = load_release(release_dir, spark)
    domain, measurements, _ = without_absent(
        release_domain(release), release_measurements(release), absent_cells(release)
    )
    return domain, measurements


def residuals(model, measurements) -> tuple[float, float]:  # noqa: ANN001
    """Mean |mu - y| / sigma over the measured cells of the 1-way tables, and over every measured cell."""
    one, every = [], []
    for m in measurements:
        r = np.abs(model.project(m.clique) - m.values) / m.std
        r = r[m.mask] if m.mask is not None else r.ravel()
        every.append(r)
        if len(m.clique) == 1:
            one.append(r)
    return float(np.mean(np.concatenate(one))), float(np.mean(np.concatenate(every)))


def refits(domain, measurements, count: int, steps: int) -> dict:  # noqa: ANN001
    """The selection's refits replayed: the 1-way tables, then ``count`` marginals added one at a time."""
    from spark_dpsynth.estimation import estimate

    ones = [m for m in measurements if len(m.clique) == 1]
    rest = [m for m in measurements if len(m.clique) > 1][:count]
    started = time.process_time()
    model = estimate(domain, ones, iterations=steps)
    per_cell, propagations = [], 0
    for i in range(len(rest)):
        now = ones + rest[: i + 1]
        model = estimate(domain, now, iterations=steps, warm_start=model)
        propagations += model.fit_report.propagations
        cells = sum(m.values.size if m.mask is None else int(m.mask.sum()) for m in now)
        per_cell.append(model.fit_report.loss / cells)
    return {
        "refits": len(rest),
        "refit_steps": steps,
        "median_loss_per_cell": round(float(np.median(per_cell)), 3),
        "largest_loss_per_cell": round(float(np.max(per_cell)), 3),
        "propagations": propagations,
        "cpu_seconds": round(time.process_time() - started, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("releases", nargs="+", help="release directories with measured marginals")
    parser.add_argument("--steps", default="100,300,1000,20000", help="step caps, comma-separated")
    parser.add_argument("--refits", type=int, default=0, help="replay this many of the selection's refits")
    parser.add_argument("--refit-steps", type=int, default=50, help="warm-started steps per refit")
    parser.add_argument("--output", help="write the rows as JSON here")
    args = parser.parse_args(argv)

    import spark_dpsynth.estimation.mirror_descent as md
    from spark_dpsynth.estimation import estimate

    caps = [int(s) for s in args.steps.split(",")]
    rows = []
    print(
        "release | steps | measurements | cells | cap | steps taken | proportional | propagations | CPU s | loss | "
        "1-way residual | residual"
    )
    for path in args.releases:
        domain, measurements = measured(path)
        cells = sum(m.values.size for m in measurements)
        for label, proportional in (("mirror", False), ("mirror+proportional", True)):
            md._PROPORTIONAL = proportional  # noqa: SLF001 - the variant this benchmark compares
            for cap in caps:
                started = time.process_time()
                model = estimate(domain, measurements, iterations=cap)
                seconds = time.process_time() - started
                fit = model.fit_report
                one, every = residuals(model, measurements)
                row = {
                    "release": path,
                    "steps": label,
                    "measurements": len(measurements),
                    "cells": cells,
                    "model_cells": fit.cells,
                    "cap": cap,
                    "iterations": fit.iterations,
                    "proportional_steps": fit.proportional_steps,
                    "propagations": fit.propagations,
                    "cpu_seconds": round(seconds, 1),
                    "loss": fit.loss,
                    "residual_1way": round(one, 3),
                    "residual": round(every, 3),
                }
                rows.append(row)
                print(" | ".join(str(v) for k, v in row.items() if k != "model_cells"), flush=True)
            if args.refits:
                row = {
                    "release": path,
                    "steps": label,
                    **refits(domain, measurements, args.refits, args.refit_steps),
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
    md._PROPORTIONAL = True  # noqa: SLF001
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
