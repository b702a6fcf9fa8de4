"""Declared rules and a condition on NIST's national ACS excerpt (docs/design.md section 4.8, "Conditions and
declared rules"): SDNist's age-based rules of conf/nist_acs.toml broken by a pgm sample without them, with them,
and in the real data; a condition's estimated and real numbers of records.

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/python benchmarks/constraints_nist.py [--epsilon 4] [--seed 5]

Prints one line per figure. The seed makes the release reproducible (test mode: NOT private).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "nist_national2019.csv.gz"
WHERE = "SEX = '2' AND TRY_CAST(AGEP AS INT) >= 60"


def main() -> None:
    from pyspark.sql import SparkSession

    import spark_dpsynth as dps
    from spark_dpsynth.pipeline import job_config, synthesize
    from spark_dpsynth.release.manifest import thaw
    from spark_dpsynth.synthesizers.conditions import rule_violations

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilon", type=float, default=4.0)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    df = spark.read.csv(str(DATA), header=True, inferSchema=False)
    config = str(ROOT / "conf" / "nist_acs.toml")
    doc = tomllib.loads(Path(config).read_text())
    rules = doc["constraints"]["rules"]
    n = df.count()  # the benchmark's own figure (not a release output)
    started = time.perf_counter()
    release = dps.fit(df, config=config, epsilon=args.epsilon, synthesizer="pgm", seed=args.seed)
    print(f"fit (pgm, epsilon {args.epsilon:g}) {time.perf_counter() - started:.0f} s")
    print(f"real records: {n}, rules broken {sum(rule_violations(df, rules).values())}")

    bare_doc = {k: v for k, v in doc.items() if k != "constraints"}
    manifest = thaw(release.release.manifest)
    manifest.pop("constraints", None)
    bare = dataclasses.replace(release.release, manifest=manifest)
    started = time.perf_counter()
    without = synthesize(bare, job_config(bare_doc, target_number_of_records=n, seed=args.seed + 1), spark)
    broken = rule_violations(without, rules)
    print(
        f"pgm without the rules: {sum(broken.values())} broken in {n} rows ({time.perf_counter() - started:.0f} s)"
    )
    for rule, count in broken.items():
        print(f"  {count:6d}  {rule}")

    messages: list[str] = []
    started = time.perf_counter()
    with_rules = release.sample(n, seed=args.seed + 1, progress=messages.append)
    broken = rule_violations(with_rules, rules)
    print(f"pgm with the rules: {sum(broken.values())} broken in {with_rules.count()} rows "
          f"({time.perf_counter() - started:.0f} s)")  # fmt: skip
    print("  " + "; ".join(m for m in messages if m.startswith(("conditions:", "pgm: declared"))))

    messages.clear()
    rows = release.sample(2000, where=WHERE, seed=args.seed + 2, progress=messages.append)
    held = rows.where(WHERE).count()
    print(f"where {WHERE!r}: {rows.count()} rows, {held} satisfy it; real records {df.where(WHERE).count()}")
    print("  " + "; ".join(m for m in messages if "estimate" in m))


if __name__ == "__main__":
    main()
