"""Synthetic-data quality of our modes beside the peers MST and AIM (private-pgm), on the user's path (issues 4, 16, 29).

**Our modes run the command line a user runs**: each is ``spark-dpsynth pipeline --input T.csv --output DIR
--epsilon E --seed S [--config C] [mode options]`` in a subprocess (its own Spark session; the CLI's reading and
type inference, default options), and the synthetic table scored is the CLI's output table (``DIR/synthetic``).
``--seed`` makes our runs test mode (reproducible, NOT private). A pipeline that fails is a row that says so;
the table is then made by ``aggregate`` and ``synthesize`` (the pipeline without its evaluation). Modes:
``auto`` (the CLI's default: nothing added), ``model``, ``sds``, ``independent`` (``--synthesizer``; independent
with ``--reporting-length 1``, its 1-way tables alone), ``aim``, ``mst``
(``--synthesizer pgm --selection``).

Data sets (``DATASETS``): with the project's configurations, Adult's train split (``conf/adult.toml``), NIST's
Texas and national 2019 excerpts (``conf/nist_acs.toml``; national without ``INDP``, ``PINCP``, ``DENSITY``), the
EU LFS France sample with ``benchmarks/lfs.toml`` (the CSV's codes are inferred as doubles, as for any user);
with no configuration, Adult's train split recoded to integer codes (``adult_codes``: the numeric columns binned
on ``conf/adult.toml``'s public edges, then each column's distinct values mapped to 0..k-1 in sorted order, written
at run time), the same codes written as strings (``adult_codes_str``, ``c5``), Adult's train split as it comes
(``adult_raw``), the EU LFS sample as it comes (``lfs_raw``, 77 columns), NIST's Texas and national 2019
excerpts as they come (``nist_tx_raw``, ``nist_national_raw``: 24 columns, integer codes, a density, numbers
written as text with ``N``), and the SF fire calls table of private-pgm's examples (``sf_fire``: 32
integer-coded columns, a seeded sample of 20,000 of its 305,119 rows), and two wide small tables (issue 59):
``lfs_small`` (a seeded sample of 5,822 rows of the LFS sample, 77 columns) and ``sf_fire_small`` (5,000 rows of
SF fire, 32 columns). Files under ``../shared/data`` are skipped when absent.

``peer_mst``, ``peer_aim``: MST / AIM of private-pgm, run by smartnoise-synth from their own environment
(``.venv-peers``, ``make bench-peers-env``) in a subprocess (``benchmarks/peers.py``). **The peers read the table
as strings** (``inferSchema`` off: every value its text; the configuration's bins and empty values applied as our
release's input is), exported once to Parquet, and are told the domain (the values present); their string
output is read back in the input's types for the yardstick, a bin label decoded to a number drawn in its bin as
our synthesizer draws one (``decode_bin_labels``).

**The yardstick** (``benchmarks/yardstick.py``, pandas, independent of the package's evaluation) scores every
synthetic table, ours and the peers', against the input as the CLI reads it: mean 1-/2-/3-way TVD (categorical
columns and number columns with at most 100 values on the input's own values, other number columns on the
input's deciles; every subset, or ``--tvd-subsets`` / 1,000 seeded ones per length), the share of synthetic
cells outside the input column (a value it never holds, or outside its observed range), the number of columns
whose output type differs from the input's (not for the peers: strings by design), Wasserstein distance / std of
every number column. Beside it, the package's own evaluation of the same run (``pkg_*``: the CLI's
``evaluation/metrics.json``; TSTR where the configuration asks for it).

Cost: ``wall_s``, ``cpu_s`` and ``peak_mb`` of each run's subprocess tree (interpreter and JVM start, reading,
release, synthesis, the CLI's evaluation; summed over aggregate and synthesize after a failed pipeline).

Prints each row as it is done, then a markdown table, and writes every row as JSON (``DIR/quality.json``)::

    python benchmarks/quality.py [--output DIR] [--datasets adult_codes,adult_raw,lfs] [--epsilons 1,4]
        [--modes auto,model,sds,aim,mst,class_conditional] [--peers mst,aim | --skip-peers] [--peer-timeout S] [--tvd-subsets N]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale_measure import load_average, run_measured  # noqa: E402
from yardstick import recode_to_integers, yardstick  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("SPARK_DPSYNTH_SHARED_DATA", ROOT.parent / "shared" / "data"))
PEERS_PYTHON = ROOT / ".venv-peers" / "bin" / "python"

DATASETS: dict[str, dict[str, Any]] = {
    # with the project's configurations
    "adult": {
        "config": ROOT / "conf" / "adult.toml",
        "input": ROOT / "data" / "adult.csv.gz",
        "epsilons": [0.3, 1.0, 4.0],
    },
    "nist_tx": {
        "config": ROOT / "conf" / "nist_acs.toml",
        "input": SHARED_DATA / "nist_tx2019.csv.gz",
        "epsilons": [1.0, 4.0],
    },
    "nist_national": {
        "config": ROOT / "conf" / "nist_acs.toml",
        "input": SHARED_DATA / "nist_national2019.csv.gz",
        "drop": ("INDP", "PINCP", "DENSITY"),
        "epsilons": [1.0, 4.0],
    },
    "lfs": {
        # as a user runs it: the CSV's codes are inferred as doubles ("9.0"), the config lists them so
        "config": ROOT / "benchmarks" / "lfs.toml",
        "input": SHARED_DATA / "eurostat_lfs_fr_sample50k.csv.gz",
        "epsilons": [1.0, 4.0],
        "tvd_subsets": 2000,
    },
    # no configuration: the CLI with --input, --output, --epsilon (and the test-mode --seed) only
    "adult_codes": {
        "build": "adult_codes",
        "input": ROOT / "data" / "adult.csv.gz",
        "epsilons": [1.0, 4.0],
    },
    "adult_codes_str": {
        "build": "adult_codes_str",
        "input": ROOT / "data" / "adult.csv.gz",
        "epsilons": [1.0, 4.0],
    },
    "adult_raw": {
        "build": "adult_as_it_comes",
        "input": ROOT / "data" / "adult.csv.gz",
        "epsilons": [4.0],
    },
    "lfs_raw": {
        # the wide table as it comes: 77 columns, codes inferred as doubles ("9.0"), no configuration
        "input": SHARED_DATA / "eurostat_lfs_fr_sample50k.csv.gz",
        "epsilons": [4.0],
        "tvd_subsets": 2000,
    },
    "nist_tx_raw": {
        # as it comes: the CLI infers integers, a double (DENSITY) and strings (numbers with "N", PUMA)
        "input": SHARED_DATA / "nist_tx2019.csv.gz",
        "epsilons": [1.0, 4.0],
    },
    "nist_national_raw": {
        "input": SHARED_DATA / "nist_national2019.csv.gz",
        "epsilons": [1.0, 4.0],
    },
    "nist_ma_raw": {
        # a small state (7,634 records) as it comes: person weights, incomes and a top-coded poverty ratio spread
        # thinly over hundreds of values
        "input": SHARED_DATA / "nist_ma2019.csv.gz",
        "epsilons": [1.0, 4.0],
    },
    "sf_fire": {
        "build": "sample",
        "input": SHARED_DATA / "pgm_sf_fire_discretized.csv.gz",
        "rows": 20_000,
        "epsilons": [4.0],
    },
    # wide and small, no configuration (issue 59): few records per column
    "lfs_small": {
        "build": "sample",
        "input": SHARED_DATA / "eurostat_lfs_fr_sample50k.csv.gz",
        "rows": 5_822,
        "epsilons": [4.0],
        "tvd_subsets": 2000,
    },
    "sf_fire_small": {
        "build": "sample",
        "input": SHARED_DATA / "pgm_sf_fire_discretized.csv.gz",
        "rows": 5_000,
        "epsilons": [4.0],
    },
}
"""The data sets. ``build``: the CSV is written once at run time into ``OUTPUT/work/inputs/`` (``build_input``):
``adult_codes`` Adult's train split recoded to integer codes, ``adult_codes_str`` the same codes written as
strings (``c5``), ``adult_as_it_comes`` the train split's own text without ``split``, ``sample`` a seeded sample of
``rows`` rows of the file. ``drop``: columns left out of the configuration (a copy written beside the inputs)."""
CLI_MODES: dict[str, list[str]] = {
    "auto": [],
    "model": ["--synthesizer", "model"],
    "sds": ["--synthesizer", "sds"],
    "aim": ["--synthesizer", "pgm", "--selection", "aim"],
    "mst": ["--synthesizer", "pgm", "--selection", "mst"],
    "class_conditional": ["--synthesizer", "class_conditional"],
    "independent": ["--synthesizer", "independent", "--reporting-length", "1"],
}
"""Our modes: the ``spark-dpsynth`` options of each (``auto``: the CLI's default, nothing added)."""
PEER_MODES = {"peer_mst": "mst", "peer_aim": "aim"}
"""Modes run by ``benchmarks/peers.py`` in the peer environment: smartnoise-synth's synthesizer of that name."""
RELEASE_SEED = 20240501
"""The CLI's ``--seed`` of our runs (test mode: reproducible, NOT private; the release and the synthesis);
``--seed`` replaces it, to see how much a figure moves with the noise draws."""
SYNTHESIS_SEED = 7
"""numpy's global seed in the peers' subprocess (their selection and sampling, not their noise)."""
SAMPLE_SEED = 0
"""Seed of a data set's row sample (``build = "sample"``)."""
SUBSET_SEED = 0
"""Seed of the yardstick's column subsets where there are more than ``YARDSTICK_SUBSETS`` of a length."""
YARDSTICK_SUBSETS = 1000
"""Column subsets per length compared by the yardstick (all when there are fewer)."""
WORKLOAD_OVERRIDES: dict[str, Any] = {}
"""``--workload KEY=VALUE`` settings, passed to every CLI run as ``--key value``."""


def _session():  # noqa: ANN202 - SparkSession
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    return (
        SparkSession.builder.master(os.environ.get("SPARK_MASTER", "local[2]"))
        .appName("spark_dpsynth-bench-quality")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.memory", "4g")
        # as the CLI's sessions (data.session.SQL_DEFAULTS)
        .config("spark.sql.codegen.hugeMethodLimit", "8000")
        .getOrCreate()
    )


def _workload_overrides(pairs: list[str]) -> dict[str, Any]:
    """``--workload KEY=VALUE`` pairs as WorkloadParams fields, each value parsed as its field's default's type.

    Raises:
        ValueError: not KEY=VALUE, an unknown field, or a value of the wrong type.
    """
    from spark_dpsynth.params import WorkloadParams

    defaults = WorkloadParams()
    fields = {f.name: f.type for f in dataclasses.fields(WorkloadParams)}
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not hasattr(defaults, key):
            raise ValueError(f"--workload {pair!r}: expected KEY=VALUE with KEY a [workload] setting")
        current = getattr(defaults, key)
        if isinstance(current, bool) or "bool" in str(fields[key]):
            out[key] = value.lower() in ("1", "true", "yes")
        elif isinstance(current, int | float) or current is None:
            out[key] = float(value) if "." in value or "e" in value.lower() else int(value)
        else:
            out[key] = type(current)(value)
    return out


def _cli_command(
    command: str, spec_args: list[str], out: str, epsilon: float, mode: str, delta: float | None = None
) -> list[str]:
    """The ``spark-dpsynth`` command line of one of our modes: the data set's arguments (input, config), the
    epsilon, the test-mode seed, the mode's synthesizer options, ``--delta`` when given and the ``--workload``
    overrides. ``synthesize`` takes no data or mechanism options: only the output, seed and synthesizer."""
    if command == "synthesize":
        return [command, "--output", out, "--seed", str(RELEASE_SEED), "--overwrite", *CLI_MODES[mode][:2]]
    argv = [command, *spec_args, "--output", out, "--epsilon", repr(epsilon), "--seed", str(RELEASE_SEED)]
    argv += ["--overwrite", *CLI_MODES[mode]]
    if delta is not None:
        argv += ["--delta", repr(delta)]
    for key, value in WORKLOAD_OVERRIDES.items():
        flag = key.replace("_", "-")
        argv += (
            [f"--{flag}" if value else f"--no-{flag}"]
            if isinstance(value, bool)
            else [f"--{flag}", str(value)]
        )
    return argv


def _last_error(log: str) -> str:
    """The last ``spark-dpsynth`` error line of a log (no data values: the CLI's own one-line messages)."""
    try:
        with open(log, encoding="utf-8", errors="replace") as f:
            lines = [line.strip() for line in f if line.startswith("spark-dpsynth:")]
    except OSError:
        return ""
    errors = [line for line in lines if "error" in line or "failed" in line]
    return (errors or lines or [""])[-1][:200]


def _run_ours(mode: str, spec_args: list[str], epsilon: float, work: str, name: str, args) -> dict[str, Any]:  # noqa: ANN001
    """One of our modes as a user runs it: ``spark-dpsynth pipeline`` in a subprocess (its own Spark session,
    the CLI's reading and type inference), its output in ``WORK/NAME-epsE-MODE``. When the pipeline fails, the
    row says so and the synthetic table is made by ``aggregate`` then ``synthesize`` (the pipeline without its
    evaluation), as a user would retry. Figures: wall, CPU and peak RSS of the subprocesses (summed, peak the
    largest), the package's own evaluation (``pkg_*``, from ``evaluation/metrics.json``) where the pipeline
    wrote one, and ``synthetic`` (the output directory) when there is a synthetic table."""
    out = os.path.join(work, f"{name}-eps{epsilon:g}-{mode}")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    logs = Path(args.output) / "logs"
    figures: dict[str, Any] = {"wall_seconds": 0.0, "cpu_seconds": 0.0, "peak_rss_mb": 0.0, "commands": []}

    def run(command: str) -> dict[str, Any]:
        argv = _cli_command(command, spec_args, out, epsilon, mode, args.delta)
        figures["commands"].append("spark-dpsynth " + " ".join(argv))
        measured = run_measured(
            [sys.executable, "-m", "spark_dpsynth.cli.main", *argv],
            env,
            args.cli_timeout,
            logs / f"{name}-eps{epsilon:g}-{mode}-{command}.log",
        )
        figures["wall_seconds"] += measured["wall_seconds"]
        figures["cpu_seconds"] += measured["cpu_seconds"]
        figures["peak_rss_mb"] = max(figures["peak_rss_mb"], measured["sampled_peak_rss_mb"]["total"])
        measured["error"] = _last_error(measured["log"])
        return measured

    pipeline = run("pipeline")
    if pipeline["returncode"] == 0:
        figures["status"] = "ok"
        metrics_path = os.path.join(out, "evaluation", "metrics.json")
        if os.path.exists(metrics_path):
            with open(metrics_path, encoding="utf-8") as f:
                metrics = json.load(f)
            tvd = metrics.get("tvd", {})
            for k in ("1", "2", "3"):
                figures[f"pkg_tvd_{k}"] = (tvd.get(k) or {}).get("mean")
            tstr = metrics.get("tstr") or {}
            for key in ("tstr_accuracy", "trtr_accuracy"):
                figures[key] = tstr.get(key, metrics.get(key))
    else:
        figures["status"] = f"pipeline failed (exit {pipeline['returncode']}: {pipeline['error']})"
        aggregate = run("aggregate")
        if aggregate["returncode"] != 0:
            figures["status"] += f"; aggregate failed (exit {aggregate['returncode']}: {aggregate['error']})"
            return figures
        synthesize = run("synthesize")
        if synthesize["returncode"] != 0:
            figures["status"] += (
                f"; synthesize failed (exit {synthesize['returncode']}: {synthesize['error']})"
            )
            return figures
        figures["status"] += "; aggregate + synthesize ok"
    manifest_path = os.path.join(out, "release", "manifest.json")
    if os.path.exists(manifest_path):
        with open(manifest_path, encoding="utf-8") as f:
            manifest = json.load(f)
        figures.update(
            {
                "selection": manifest.get("selection"),
                "mechanism": manifest.get("mechanism"),
                "delta": manifest.get("delta"),
                "protected_number_of_records": manifest.get("protected_number_of_records"),
            }
        )
    figures["synthetic"] = os.path.join(out, "synthetic")
    return figures


def _run_peer(spark, mode, prepared, columns, epsilon, delta, work, name, args):  # noqa: ANN001
    """One peer: (synthetic DataFrame or None, figures); ``status`` is ok, timeout, failed or not run."""
    python = Path(args.peers_python)
    if not python.exists():
        return None, {"status": f"not run ({python} missing: make bench-peers-env)"}
    peer = PEER_MODES[mode]
    stem = os.path.join(work, f"{name}-eps{epsilon:g}-{mode}")
    command = [
        str(python), str(ROOT / "benchmarks" / "peers.py"), "--synthesizer", peer,
        "--input", prepared, "--output", stem + ".parquet", "--result", stem + ".json",
        "--epsilon", repr(epsilon), "--delta", repr(delta), "--seed", str(SYNTHESIS_SEED),
        "--sampling", args.peer_sampling, "--aim-degree", str(args.peer_aim_degree),
        "--aim-max-model-size", str(args.peer_aim_max_model_size),
    ]  # fmt: skip
    timeout = args.peer_aim_timeout if peer == "aim" else args.peer_timeout
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    measured = run_measured(
        command, env, timeout, Path(args.output) / "logs" / f"{name}-eps{epsilon:g}-{mode}.log"
    )
    figures: dict[str, Any] = {
        "wall_seconds": measured["wall_seconds"],
        "peak_rss_mb": measured["sampled_peak_rss_mb"]["total"],
        "cpu_seconds": measured["cpu_seconds"],
        "log": measured["log"],
        "protected_number_of_records": None,
    }
    if measured["returncode"] != 0:
        timed_out = measured["wall_seconds"] >= timeout
        figures["status"] = (
            f"timeout ({timeout:.0f} s)" if timed_out else f"failed (exit {measured['returncode']})"
        )
        return None, figures
    with open(stem + ".json", encoding="utf-8") as f:
        figures.update({f"peer_{key}": value for key, value in json.load(f).items()})
    figures["status"] = "ok"
    return spark.read.parquet(stem + ".parquet").select(*columns), figures


def decode_bin_labels(frame: Any, table: Any, bins: dict, seed: int) -> Any:  # noqa: ANN401 - pandas
    """The peers' values of the configuration's binned columns as numbers, drawn as our synthesizer draws a bin
    without a within-bin shape (``spark_dpsynth.synthesizers._types``): a point label ``=v`` is v, an interval
    label a value drawn uniformly in its [lo, hi), the open bins closed by the public bounds or the neighbour's
    width (``open_bounds``), among its whole numbers (the last bin's public upper bound included) when the input
    column holds whole numbers only; a passthrough code and an empty cell stay. Written as the input writes its
    numbers: its number dtype, or text (``"18"``, ``"15400.0"``). The peers are given the bin labels (public, as
    our release's are); undecoded, every label would be scored as a value the input never holds.

    Args:
        frame: the peer's synthetic table (pandas, every column a nullable string).
        table: the input as the CLI reads it (pandas, ``_input_frame``).
        bins: column -> ``BinSpec`` (the configuration's ``data.bins``).
        seed: seed of the draws (numpy's PCG64).
    """
    import math

    import numpy as np
    import pandas as pd

    from spark_dpsynth.synthesizers._types import open_bounds

    rng = np.random.default_rng(seed)
    out = frame.copy()
    for name, spec in bins.items():
        if name not in out.columns:
            continue
        source = table[name]
        numbers = pd.to_numeric(source, errors="coerce").dropna()
        whole = bool(len(numbers)) and bool((numbers == np.floor(numbers)).all())
        lo, hi = open_bounds(spec.edges, spec.lower, spec.upper, "integer" if whole else "real")
        bounds = [lo, *(float(e) for e in spec.edges), hi]
        labels = spec.interval_labels()
        values = out[name].astype(object)
        decoded = values.copy()
        for i, label in enumerate(labels):
            at = (values == label).to_numpy()
            if not at.any():
                continue
            a, b = bounds[i], bounds[i + 1]
            if whole:
                closed = i == len(labels) - 1 and spec.upper is not None and float(b).is_integer()
                first, stop = math.ceil(a), math.ceil(b) + int(closed)
                draws = first + rng.integers(0, max(stop - first, 1), size=int(at.sum()))
            else:
                draws = a + rng.random(int(at.sum())) * (b - a)
            decoded[at] = draws.astype("float64")
        for label, point in zip(spec.point_labels(), spec.points, strict=True):
            decoded[(values == label).to_numpy()] = float(point)
        if pd.api.types.is_numeric_dtype(source.dtype):
            out[name] = pd.to_numeric(decoded, errors="coerce")
        else:
            dotted = bool(source.dropna().astype(str).str.contains(".", regex=False).any()) or not whole

            def text(v: Any, dotted: bool = dotted) -> Any:  # noqa: ANN401
                return (
                    repr(v) if isinstance(v, float) and dotted else str(int(v)) if isinstance(v, float) else v
                )

            out[name] = decoded.map(text)
    return out


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return json.dumps(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def write_toml(document: dict[str, Any], path: str) -> None:
    """A configuration document (tables of scalars, lists and tables) as a TOML file."""
    lines: list[str] = []

    def table(prefix: tuple[str, ...], body: dict[str, Any]) -> None:
        if prefix:
            lines.append("[" + ".".join(json.dumps(p) for p in prefix) + "]")
            for key, value in body.items():
                if not isinstance(value, dict):
                    lines.append(f"{json.dumps(key)} = {_toml_value(value)}")
        for key, value in body.items():
            if isinstance(value, dict):
                table((*prefix, key), value)

    table((), document)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def _config_without(config: Path, drop: tuple[str, ...], path: str) -> str:
    """The configuration file with the columns ``drop`` left out (of ``[data] columns``, bins and domains)."""
    from spark_dpsynth.config import load_document

    document = load_document(str(config))
    data = document.setdefault("data", {})
    data["columns"] = [c for c in data.get("columns", []) if c not in drop]
    for key in ("bins", "domains"):
        if key in data:
            data[key] = {c: v for c, v in data[key].items() if c not in drop}
    write_toml(document, path)
    return path


def _adult_train() -> Any:  # noqa: ANN401 - pandas DataFrame
    """UCI Adult's train split from ``data/adult.csv.gz``, every value the file's own text, without ``split``."""
    import pandas as pd

    table = pd.read_csv(ROOT / "data" / "adult.csv.gz", dtype=str, keep_default_na=False)
    return table[table["split"] == "train"].drop(columns=["split"]).reset_index(drop=True)


def _adult_codes() -> Any:  # noqa: ANN401 - pandas DataFrame
    """Adult's train split recoded to integers (``yardstick.recode_to_integers``): the six numeric columns first
    binned on ``conf/adult.toml``'s public edges, then every column's distinct values mapped to 0..k-1 in sorted
    order. A deterministic transform of real data (the categorical table stored as integer codes of issue 29)."""
    from spark_dpsynth.config import load_config

    bins = {c: spec.edges for c, spec in load_config(str(ROOT / "conf" / "adult.toml")).data.bins.items()}
    return recode_to_integers(_adult_train(), bins)


def build_input(name: str, spec: dict[str, Any], work: str) -> str:
    """The CSV file a data set's runs read: the shared or embedded file itself, or one written here once from
    it (``spec["build"]``)."""
    build = spec.get("build")
    if build is None:
        return str(spec["input"])
    path = os.path.join(work, "inputs", f"{name}.csv")
    if os.path.exists(path):
        return path
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if build == "adult_codes":
        table = _adult_codes()
    elif build == "adult_codes_str":
        table = _adult_codes().apply(lambda c: c.map(lambda v: f"c{v}", na_action="ignore"))
    elif build == "adult_as_it_comes":
        table = _adult_train()
    elif build == "sample":
        import pandas as pd

        table = pd.read_csv(spec["input"], dtype=str, keep_default_na=False)
        if len(table) > spec["rows"]:
            table = table.sample(n=spec["rows"], random_state=SAMPLE_SEED).sort_index()
    else:
        raise ValueError(f"unknown input builder {build!r}")
    table.to_csv(path + ".tmp", index=False)
    os.replace(path + ".tmp", path)
    return path


def _spec_args(name: str, spec: dict[str, Any], source: str, work: str) -> list[str]:
    """The data set's CLI arguments: ``--input`` and, where it has one, ``--config``."""
    argv = ["--input", source]
    if spec.get("config"):
        config = spec["config"]
        if spec.get("drop"):
            config = _config_without(config, spec["drop"], os.path.join(work, "inputs", f"{name}.toml"))
        argv += ["--config", str(config)]
    return argv


def read_as_the_cli(spark, argv: list[str]):  # noqa: ANN001, ANN201 - SparkSession -> (DataFrame, JobConfig)
    """The input as ``spark-dpsynth pipeline ARGV`` reads it (the CLI's ``read_table``: its CSV options, type
    inference and row filter), restricted to the attribute columns, and the job's configuration."""
    from spark_dpsynth.cli.main import build_parser, load_job_config
    from spark_dpsynth.data.prepare import resolve_columns
    from spark_dpsynth.pipeline import read_table

    config = load_job_config(build_parser().parse_args(["pipeline", *argv, "--output", "unused"]))
    df = read_table(spark, config)
    data = resolve_columns(df.columns, config.data)
    return df.select(*data.columns), config


def _types(df) -> dict[str, str]:  # noqa: ANN001 - DataFrame
    return {f.name: f.dataType.simpleString() for f in df.schema.fields}


def _input_frame(df, config):  # noqa: ANN001, ANN202 - (DataFrame, JobConfig) -> pandas DataFrame
    """The input on the driver, the configuration's public empty markers (``empty_values``, ``"0"`` with
    ``zeros_are_empty``) as empty cells, as the CLI's users declared them."""
    table = df.toPandas()
    empties = {""} | set(config.data.empty_values) | ({"0"} if config.data.zeros_are_empty else set())
    for c in table.columns:
        if table[c].dtype == object:
            text = table[c].map(lambda v: v if v is None else str(v).strip())
            table[c] = table[c].where(~text.isin(empties), None)
    return table


def run_dataset(spark, name, epsilons, modes, args, work, rows, on_row) -> None:  # noqa: ANN001
    """Append to ``rows`` the benchmark rows (dicts) of one data set, every mode at every epsilon, calling
    ``on_row()`` after each."""
    from spark_dpsynth.data.prepare import prepare, resolve_columns

    spec = DATASETS[name]
    if not Path(spec["input"]).exists():
        print(f"bench-quality: {name}: {spec['input']} not found, skipped", file=sys.stderr)
        return
    source = build_input(name, spec, work)
    spec_args = _spec_args(name, spec, source, work)
    max_subsets = int(args.tvd_subsets or spec.get("tvd_subsets") or YARDSTICK_SUBSETS)
    typed, config = read_as_the_cli(spark, spec_args)
    input_types = _types(typed)
    table = _input_frame(typed, config)
    prepared = None
    if any(mode in PEER_MODES for mode in modes):
        # The peers read the table as strings (every value its text, no type inference), prepared as our
        # release's input is (the configuration's bins, empty values), and are told the domain (the values
        # present): peers.py.
        raw = spark.read.csv(source, header=True, inferSchema=False)
        train = raw.where(config.row_filter) if config.row_filter else raw
        sensitive = prepare(train, resolve_columns(train.columns, config.data))
        prepared = os.path.join(work, f"{name}-prepared.parquet")
        sensitive.coalesce(1).write.mode("overwrite").parquet(prepared)
    for epsilon in epsilons or spec["epsilons"]:
        for mode in modes:
            row: dict[str, Any] = {"dataset": name, "epsilon": epsilon, "mode": mode, "input": source}
            try:
                if mode in PEER_MODES:
                    delta = args.delta or config.budget.delta or 1e-6
                    row["delta"] = delta
                    synthetic, figures = _run_peer(
                        spark, mode, prepared, list(table.columns), epsilon, delta, work, name, args
                    )
                    row.update(figures)
                    synthetic_types = None  # strings by design: the peers' output is not typed
                else:
                    figures = _run_ours(mode, spec_args, epsilon, work, name, args)
                    row.update(figures)
                    synthetic = spark.read.parquet(figures["synthetic"]) if "synthetic" in figures else None
                    synthetic_types = _types(synthetic) if synthetic is not None else None
                if synthetic is not None:
                    started = time.perf_counter()
                    missing = [c for c in table.columns if c not in synthetic.columns]
                    if missing:
                        raise ValueError(f"the synthetic table lacks column(s) {missing}")
                    frame = synthetic.select(*table.columns).toPandas()
                    if mode in PEER_MODES and config.data.bins:
                        frame = decode_bin_labels(frame, table, dict(config.data.bins), SYNTHESIS_SEED)
                    row["rows"] = len(frame)
                    row.update(
                        yardstick(
                            table,
                            frame,
                            input_types if synthetic_types is not None else None,
                            synthetic_types,
                            max_subsets=max_subsets,
                            seed=SUBSET_SEED,
                        )
                    )
                    row["yardstick_seconds"] = time.perf_counter() - started
            except Exception as error:  # noqa: BLE001 - one failed mode is a row, the run goes on
                row.update({"status": f"failed ({type(error).__name__}: {str(error).splitlines()[0][:200]})"})
            rows.append(row)
            on_row()
            print(_format_row(row), flush=True)


COLUMNS = [
    ("dataset", "dataset", "s"),
    ("eps", "epsilon", "g"),
    ("mode", "mode", "s"),
    ("selection", "selection", "s"),
    ("status", "status", "s"),
    ("rows", "rows", ",d"),
    ("1-way TVD", "ys_tvd_1", ".3f"),
    ("2-way TVD", "ys_tvd_2", ".3f"),
    ("3-way TVD", "ys_tvd_3", ".3f"),
    ("cells outside %", "ys_outside_share_pct", ".2f"),
    ("cols outside > 1%", "ys_columns_outside_over_1pct", "d"),
    ("type diffs", "ys_type_differences_count", "d"),
    ("max W/std", "ys_wasserstein_over_std_max", ".3g"),
    ("max W/std column", "ys_wasserstein_over_std_max_column", "s"),
    ("pkg 1-way", "pkg_tvd_1", ".3f"),
    ("pkg 3-way", "pkg_tvd_3", ".3f"),
    ("TSTR acc.", "tstr_accuracy", ".3f"),
    ("wall s", "wall_seconds", ".0f"),
    ("CPU s", "cpu_seconds", ".0f"),
    ("peak MB", "peak_rss_mb", ",.0f"),
]
"""The printed columns: the yardstick's (``ys_*``, benchmarks/yardstick.py), then the package's own evaluation
of the same run (``pkg_*``, the CLI's ``evaluation/metrics.json``) and the run's cost."""


def _cells(row: dict) -> list[str]:
    out = []
    for _, key, fmt in COLUMNS:
        value = row.get(key)
        if key == "ys_outside_share_pct" and row.get("ys_outside_share") is not None:
            value = 100.0 * row["ys_outside_share"]
        out.append("-" if value is None else format(value, fmt))
    return out


def _format_row(row: dict) -> str:
    return " | ".join(_cells(row))


def markdown(rows: list[dict]) -> str:
    """The rows as a markdown table."""
    head = "| " + " | ".join(title for title, _, _ in COLUMNS) + " |"
    rule = "|" + "|".join("---" if fmt == "s" else "---:" for _, _, fmt in COLUMNS) + "|"
    return "\n".join([head, rule] + ["| " + " | ".join(_cells(row)) + " |" for row in rows])


def main(argv: list[str] | None = None) -> int:
    global RELEASE_SEED  # --seed
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--output", default=str(ROOT / "output" / "bench-quality"), help="directory of quality.json and logs"
    )
    parser.add_argument("--epsilons", default="", help="comma-separated epsilons (default: each data set's)")
    parser.add_argument(
        "--modes",
        default="auto,model,sds,mst",
        help="comma-separated, our modes (each a spark-dpsynth pipeline run): auto (the CLI's default), model, "
        "sds (marginals mechanism), independent (its 1-way tables alone), aim, mst (workload mechanism + pgm), "
        "class_conditional (its class: the last column); "
        "peer_mst, peer_aim may be listed here too",
    )
    parser.add_argument("--peers", default="mst,aim", help="comma-separated peers to add: mst, aim")
    parser.add_argument("--skip-peers", action="store_true", help="run no peer")
    parser.add_argument("--peers-python", default=str(PEERS_PYTHON), help="python of the peer environment")
    parser.add_argument("--peer-timeout", type=float, default=3600.0, help="peer MST's time limit (s)")
    parser.add_argument("--peer-aim-timeout", type=float, default=1800.0, help="peer AIM's time limit (s)")
    parser.add_argument(
        "--peer-sampling",
        choices=("sample", "round"),
        default="sample",
        help="peers' record sampling (peers.py)",
    )
    parser.add_argument(
        "--peer-aim-degree", type=int, default=3, help="peer AIM's workload: all k-way marginals"
    )
    parser.add_argument(
        "--peer-aim-max-model-size", type=float, default=80.0, help="peer AIM's model cap (MB)"
    )
    parser.add_argument(
        "--datasets",
        default="adult_codes,adult_codes_str,adult_raw,adult,lfs,sf_fire",
        help=f"comma-separated, of {sorted(DATASETS)}",
    )
    parser.add_argument(
        "--delta",
        type=float,
        default=None,
        help="--delta of every run, ours and the peers' (default: ours the CLI's, the config's or derived; "
        "the peers the config's, else 1e-6)",
    )
    parser.add_argument(
        "--cli-timeout", type=float, default=3600.0, help="time limit of each spark-dpsynth run (s)"
    )
    parser.add_argument(
        "--workload",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a [workload] setting passed to every run as --key value (repeatable), e.g. "
        "domain_rho_proportion=0.3",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=RELEASE_SEED,
        help=f"the CLI's test-mode --seed of our runs (default {RELEASE_SEED})",
    )
    parser.add_argument(
        "--tvd-subsets",
        type=int,
        default=0,
        help="random column subsets per length for the TVD (0: the data set's)",
    )
    args = parser.parse_args(argv)
    try:
        args.workload = _workload_overrides(args.workload)
    except ValueError as exc:
        parser.error(str(exc))
    WORKLOAD_OVERRIDES.update(args.workload)
    RELEASE_SEED = args.seed
    epsilons = [float(e) for e in args.epsilons.split(",") if e] or None
    modes = [m for m in args.modes.split(",") if m]
    if not args.skip_peers:
        modes += [f"peer_{p}" for p in args.peers.split(",") if p and f"peer_{p}" not in modes]
    else:
        modes = [m for m in modes if m not in PEER_MODES]
    known = {*CLI_MODES, *PEER_MODES}
    if set(modes) - known:
        parser.error(f"unknown mode(s) {sorted(set(modes) - known)}; known: {sorted(known)}")
    names = [d for d in args.datasets.split(",") if d]
    unknown = sorted(set(names) - set(DATASETS))
    if unknown:
        parser.error(f"unknown data set(s) {unknown}; known: {sorted(DATASETS)}")
    os.makedirs(args.output, exist_ok=True)
    load_before = load_average()
    spark = _session()
    try:
        spark.sparkContext.setLogLevel("ERROR")
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext: keep its default log level
        pass
    rows: list[dict] = []
    started = time.perf_counter()
    print(" | ".join(title for title, _, _ in COLUMNS), flush=True)
    out = os.path.join(args.output, "quality.json")

    def write() -> None:
        with open(out, "w", encoding="utf-8") as f:
            json.dump(
                {
                    "command": sys.argv,
                    "rows": rows,
                    "seconds": time.perf_counter() - started,
                    "load_before": load_before,
                    "load_after": load_average(),
                    "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                },
                f,
                indent=2,
            )
            f.write("\n")

    try:
        # the synthetic tables stay in DIR/work (a peer's run may take an hour: its output is kept to re-score)
        work = os.path.join(args.output, "work")
        os.makedirs(work, exist_ok=True)
        for name in names:
            run_dataset(spark, name, epsilons, modes, args, work, rows, write)
    finally:
        spark.stop()
    write()
    print()
    print(markdown(rows))
    print(f"\nload average {load_before} before, {load_average()} after; written to {out}")
    print(f"({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
