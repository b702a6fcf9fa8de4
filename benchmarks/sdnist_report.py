"""NIST's own yardstick: SDNist 2.4's report on a synthetic CSV of a NIST ACS excerpt, its headline figures as JSON.

SDNist (``pip install sdnist==2.4``, NIST CRC's deidentified-data report tool) runs from its own environment
``.venv-sdnist`` (``make bench-sdnist-env``), never from the project's. It reads its target data from a
``data_root`` laid out as SDNist's ``sdnist.load.build_name`` and ``sdnist.report.dataset.Dataset`` expect:

    data_root/config.json, data_dictionary.json, mappings.json     (Dataset: target path's parent's parent)
    data_root/national/national2019.csv and national2019.json      (load_dataset: <state dir>/<name>.csv, .json)

(``massachusetts/ma2019``, ``texas/tx2019`` for MA and TX). This script lays it out in a temporary directory from
``../shared/data`` (``nist_<name>.csv.gz`` decompressed, the JSON files of ``nist_acs_meta``), so SDNist finds
every file and never downloads; runs ``python -m sdnist.report SYNTHETIC.csv NATIONAL --data-root ROOT`` with
that environment's Python, in a temporary working directory (SDNist writes ``./reports/<name>_<time>/``), with
``BROWSER=true`` (SDNist opens its HTML page in a browser); and prints, from the report's ``report.json``:

* ``k_marginal_score``: SDNist's headline k-marginal score (int, 0..1000; PUMA x 2-way marginals, see
  ``spark_dpsynth.evaluation.nist``), ``sub_sampling_equivalent_pct`` (the % sub-sample of the target data with
  the nearest score), ``k_marginal_by_puma`` (each PUMA's score, their min, mean and max);
* ``inconsistencies``: records per inconsistency group (age, work, housing); ``age_inconsistencies``: the
  violations of each age-based rule (those reading ``AGEP``), ``other_inconsistencies`` the other rules;
* ``unique_exact_matches``: unique target records exactly matched in the synthetic data (count and %);
* ``propensity_mse`` and the features SDNist evaluated, with its validation log (a column whose synthetic values
  are not codes of NIST's data dictionary is dropped from every score).

Run (the project's Python is enough; the figures come from ``.venv-sdnist``):
``python benchmarks/sdnist_report.py SYNTHETIC.csv [--target NATIONAL|MA|TX] [--keep DIR]``. A few minutes on 2
cores for the national excerpt (SDNist's report also fits PCA, regressions and propensity models).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
META = DATA / "nist_acs_meta"
SDNIST_PYTHON = ROOT / ".venv-sdnist" / "bin" / "python"
TARGETS = {
    "NATIONAL": ("national", "national2019"),
    "MA": ("massachusetts", "ma2019"),
    "TX": ("texas", "tx2019"),
}
"""SDNist's target name -> (its state directory, its data set name) (``sdnist.load.dataset_name_state_map``)."""


def lay_out_data_root(root: Path, target: str, data: Path = DATA) -> Path:
    """Write SDNist's ``data_root`` for ``target`` under ``root`` from ``data`` (the shared NIST files)."""
    state, name = TARGETS[target]
    meta = data / "nist_acs_meta"
    (root / state).mkdir(parents=True, exist_ok=True)
    for f in ("config.json", "data_dictionary.json", "mappings.json"):
        shutil.copyfile(meta / f, root / f)
    shutil.copyfile(meta / f"{name}.json", root / state / f"{name}.json")
    with (
        gzip.open(data / f"nist_{name}.csv.gz", "rb") as src,
        open(root / state / f"{name}.csv", "wb") as dst,
    ):
        shutil.copyfileobj(src, dst)
    return root


def run_sdnist(synthetic: Path, target: str, work: Path, python: Path = SDNIST_PYTHON) -> Path:
    """Run SDNist's report on ``synthetic`` in ``work``; returns its ``report.json``."""
    if not python.exists():
        raise SystemExit(f"{python} not found: run `make bench-sdnist-env` first")
    root = lay_out_data_root(work / "data_root", target)
    env = {**os.environ, "BROWSER": "true", "MPLBACKEND": "Agg"}
    cmd = [str(python), "-m", "sdnist.report", str(synthetic.resolve()), target, "--data-root", str(root)]
    done = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
        raise SystemExit(f"SDNist failed with status {done.returncode}")
    reports = sorted((work / "reports").glob("*/report.json"))
    if not reports:
        raise SystemExit("SDNist wrote no report.json")
    return reports[-1]


def headline(report: dict[str, Any]) -> dict[str, Any]:
    """SDNist's headline figures from its ``report.json`` (see the module docstring)."""
    km = report.get("k_marginal", {}).get("k_marginal_synopsys", {})
    out: dict[str, Any] = {
        "k_marginal_score": km.get("k_marginal_score"),
        "sub_sampling_equivalent_pct": km.get("sub_sampling_equivalent"),
    }
    inc = report.get("inconsistencies", {})
    out["inconsistencies"] = {
        row.get("Inconsistency Group"): row.get("Number of Records Inconsistent")
        for row in inc.get("summary", [])
    }
    # SDNist 2.4 files its work-based rules under "age" too: the age-based ones are those that read AGEP
    rules = inc.get("age", {}).get("inconsistencies", [])
    out["age_inconsistencies"] = {
        r.get("inconsistency_name"): r.get("inconsistency_violations")
        for r in rules
        if "AGEP" in (r.get("inconsistency_features") or [])
    }
    out["other_inconsistencies"] = {
        r.get("inconsistency_name"): r.get("inconsistency_violations")
        for r in rules
        if "AGEP" not in (r.get("inconsistency_features") or [])
    }
    uem = report.get("unique_exact_matches", {})
    out["unique_exact_matches"] = {
        "records": uem.get("records matched in target data"),
        "pct": uem.get("percent records matched in target data"),
    }
    out["propensity_mse"] = report.get("propensity mean square error", {}).get("pmse_score")
    deid = report.get("data_description", {}).get("deid", {})
    out["features"] = deid.get("features")
    out["validations"] = deid.get("validations")
    return out


def puma_scores(report_dir: Path) -> dict[str, Any] | None:
    """SDNist's per-PUMA k-marginal scores (its ``score_in_each_puma.csv``): PUMA code -> score, and their
    min, mean and max."""
    import ast
    import csv

    path = report_dir / "k_marginal_synopsys" / "score_in_each_puma.csv"
    if not path.exists():
        return None
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    by_puma = {}
    for r in rows:
        puma = r["PUMA"]
        code = ast.literal_eval(puma)[0] if puma.startswith("[") else puma
        by_puma[code] = float(r["Deidentified Data Score"])
    scores = list(by_puma.values())
    return {
        "min": min(scores),
        "mean": sum(scores) / len(scores),
        "max": max(scores),
        "by_puma": dict(sorted(by_puma.items())),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("synthetic", type=Path, help="the synthetic CSV (SDNist's column names)")
    parser.add_argument("--target", choices=sorted(TARGETS), default="NATIONAL")
    parser.add_argument("--keep", type=Path, help="keep SDNist's data_root and report in this directory")
    args = parser.parse_args(argv)
    if not args.synthetic.exists():
        raise SystemExit(f"{args.synthetic} not found")
    work = Path(tempfile.mkdtemp(prefix="sdnist-")) if args.keep is None else args.keep
    work.mkdir(parents=True, exist_ok=True)
    try:
        path = run_sdnist(args.synthetic, args.target, work)
        with open(path) as f:
            report = json.load(f)
        out = {"synthetic": str(args.synthetic), "target": args.target, **headline(report)}
        out["k_marginal_by_puma"] = puma_scores(path.parent)
        print(json.dumps(out, indent=2))
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
