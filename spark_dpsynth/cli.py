"""The ``spark-dpsynth`` command line: ``pipeline``, ``aggregate``, ``synthesize``, ``evaluate``.

Outputs under ``--output DIR``::

    DIR/release/            the DP release (aggregates Parquet + manifest.json), see spark_dpsynth.release
    DIR/synthetic/          synthetic records (Parquet), one nullable string column per attribute column
    DIR/synthetic.csv       the same as one CSV file with a header (empty = empty field)
    DIR/evaluation/metrics.json   utility metrics against the sensitive data (NOT private)

Every parameter is validated before Spark starts or any data is read; a user error prints one line
(``spark-dpsynth: error: ...``) and exits with status 2. An unexpected failure prints its exception class only
(its message could quote data values) and exits with status 1; ``--debug`` shows the full traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import shutil
import sys
import tempfile
import time
from typing import Any

from spark_dpsynth.config import JobConfig, load_config
from spark_dpsynth.errors import DPSynthError, InvalidParameterError, ReleaseError
from spark_dpsynth.params import DataConfig

log = logging.getLogger("spark_dpsynth.cli")

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="spark-dpsynth",
        description="Differentially private marginals (SDS method) and synthetic data on Apache Spark.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def common(p: argparse.ArgumentParser, *, needs_input: bool) -> None:
        if needs_input:
            p.add_argument("--input", help="sensitive table: CSV (header row, gzip allowed) or Parquet")
            p.add_argument(
                "--format", choices=("csv", "parquet"), help="input format (default: from the path)"
            )
        p.add_argument("--output", required=True, help="output directory")
        p.add_argument("--config", help="TOML configuration file (see conf/adult.toml)")
        p.add_argument(
            "--master", help="Spark master URL (default: Spark's own configuration, else local[*])"
        )
        p.add_argument("--debug", action="store_true", help="show full tracebacks (may show data values)")
        p.add_argument("--quiet", action="store_true", help="log warnings only")

    def privacy(p: argparse.ArgumentParser) -> None:
        p.add_argument("--epsilon", type=float, help="total privacy budget epsilon > 0 (default 4)")
        p.add_argument(
            "--delta", type=float, help="delta in (0,1) (default: 1/(n' ln n') from the protected n')"
        )
        p.add_argument("--reporting-length", type=int, help="longest released combination R (default 3)")
        p.add_argument("--columns", help="comma-separated attribute columns (default: config, else all)")

    def synthesis(p: argparse.ArgumentParser) -> None:
        p.add_argument("--target-number-of-records", type=int, help="records to synthesize")
        p.add_argument("--partitions", type=int, help="partitions synthesizing in parallel")

    def seed(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--seed",
            type=int,
            help="TEST MODE: reproducible output from a non-cryptographic generator; the result is NOT private",
        )

    p = sub.add_parser("pipeline", help="aggregate, synthesize and evaluate")
    common(p, needs_input=True)
    privacy(p)
    synthesis(p)
    seed(p)
    p = sub.add_parser("aggregate", help="input -> DIR/release (DP marginals)")
    common(p, needs_input=True)
    privacy(p)
    seed(p)
    p = sub.add_parser("synthesize", help="DIR/release -> DIR/synthetic (post-processing, no privacy cost)")
    common(p, needs_input=False)
    synthesis(p)
    seed(p)
    p = sub.add_parser("evaluate", help="input + DIR/release + DIR/synthetic -> DIR/evaluation (not private)")
    common(p, needs_input=True)
    p.add_argument("--columns", help="comma-separated attribute columns (default: config, else all)")
    return parser


def _apply_overrides(config: JobConfig, args: argparse.Namespace) -> JobConfig:
    """The config with command-line options applied (each re-validated by its parameter object)."""
    agg: dict[str, Any] = {}
    for name, key in (("epsilon", "epsilon"), ("delta", "delta"), ("reporting_length", "reporting_length")):
        value = getattr(args, name, None)
        if value is not None:
            agg[key] = value
    if getattr(args, "seed", None) is not None:
        agg["seed"] = args.seed
    syn: dict[str, Any] = {}
    for name in ("target_number_of_records", "partitions"):
        if getattr(args, name, None) is not None:
            syn[name] = getattr(args, name)
    if getattr(args, "seed", None) is not None:
        syn["seed"] = args.seed
    data = config.data
    columns = getattr(args, "columns", None)
    if columns:
        cols = tuple(c.strip() for c in columns.split(",") if c.strip())
        data = DataConfig(
            columns=cols,
            empty_values=data.empty_values,
            zeros_are_empty=data.zeros_are_empty,
            sensitive_zeros=tuple(c for c in data.sensitive_zeros if c in cols),
            bins={c: b for c, b in data.bins.items() if c in cols},
        )
    changes: dict[str, Any] = {"data": data}
    if agg:
        changes["aggregate"] = dataclasses.replace(config.aggregate, **agg)
    if syn:
        changes["synthesize"] = dataclasses.replace(config.synthesize, **syn)
    if getattr(args, "input", None):
        changes["input_path"] = args.input
    if getattr(args, "format", None):
        changes["input_format"] = args.format
    return dataclasses.replace(config, **changes)


def _is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file://")


def _check_input(config: JobConfig) -> str:
    path = config.input_path
    if not path:
        raise InvalidParameterError("no input: give --input PATH or [input] path in the config")
    if _is_local(path) and not os.path.exists(path.removeprefix("file://")):
        raise InvalidParameterError(f"input not found: {path}")
    return path


def read_table(spark, config: JobConfig):  # noqa: ANN001, ANN201 - SparkSession -> DataFrame
    """Read the input (CSV with a header, every column a string; or Parquet) and apply the row filter."""
    path = _check_input(config)
    fmt = config.input_format
    if fmt is None:
        lower = path.rstrip("/").lower()
        fmt = (
            "parquet"
            if lower.endswith(".parquet") or (os.path.isdir(path) and not lower.endswith(".csv"))
            else "csv"
        )
    if fmt == "csv":
        df = spark.read.csv(path, header=True, inferSchema=False, sep=config.delimiter, multiLine=False)
    else:
        df = spark.read.parquet(path)
    if config.row_filter:
        df = df.where(config.row_filter)
    return df


def _write_synthetic(df, out_dir: str) -> tuple[str, str]:  # noqa: ANN001 - DataFrame
    """Write DIR/synthetic (Parquet) and DIR/synthetic.csv (one file with a header), each replaced atomically."""
    parquet_path = os.path.join(out_dir, "synthetic")
    csv_path = os.path.join(out_dir, "synthetic.csv")
    os.makedirs(out_dir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".synthetic-", dir=out_dir)
    try:
        df.write.mode("overwrite").parquet(os.path.join(tmp, "parquet"))
        written = df.sparkSession.read.parquet(os.path.join(tmp, "parquet"))
        written.coalesce(1).write.mode("overwrite").csv(os.path.join(tmp, "csv"), header=True, emptyValue="")
        part = next(f for f in sorted(os.listdir(os.path.join(tmp, "csv"))) if f.startswith("part-"))
        if os.path.exists(parquet_path):
            shutil.rmtree(parquet_path)
        os.replace(os.path.join(tmp, "parquet"), parquet_path)
        os.replace(os.path.join(tmp, "csv", part), csv_path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return parquet_path, csv_path


def _session(args: argparse.Namespace):  # noqa: ANN202 - SparkSession
    from spark_dpsynth._session import get_session

    spark = get_session(master=args.master)
    try:
        spark.sparkContext.setLogLevel("ERROR")
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext
        pass
    return spark


def _run_aggregate(spark, config: JobConfig, out_dir: str):  # noqa: ANN001, ANN202
    from spark_dpsynth.marginals import dp_aggregate
    from spark_dpsynth.prepare import resolve_columns

    df = read_table(spark, config)
    data = resolve_columns(df.columns, config.data)  # schema check, no data read
    config.aggregate.check_columns(len(data.columns or ()))
    release = dp_aggregate(df, config.aggregate, data)
    path = os.path.join(out_dir, "release")
    release.save(path, spark)
    log.info("release written to %s", path)
    return release, path


def _run_synthesize(spark, config: JobConfig, out_dir: str, release=None):  # noqa: ANN001, ANN202
    from spark_dpsynth.release import Release
    from spark_dpsynth.synthesis import synthesize

    if release is None:
        release = Release.load(os.path.join(out_dir, "release"), spark)
    synthetic = synthesize(release, config.synthesize, spark)
    paths = _write_synthetic(synthetic, out_dir)
    log.info("synthetic data written to %s and %s", *paths)
    return paths


def _run_evaluate(spark, config: JobConfig, out_dir: str, release=None):  # noqa: ANN001, ANN202
    from spark_dpsynth.evaluation import evaluate, write_metrics
    from spark_dpsynth.prepare import prepare, resolve_columns
    from spark_dpsynth.release import Release

    if release is None:
        release = Release.load(os.path.join(out_dir, "release"), spark)
    syn_path = os.path.join(out_dir, "synthetic")
    if not os.path.isdir(syn_path):
        raise ReleaseError(f"no synthetic data at {syn_path}; run `spark-dpsynth synthesize` first")
    df = read_table(spark, config)
    data = resolve_columns(df.columns, config.data)
    if tuple(data.columns or ()) != tuple(release.columns):
        raise InvalidParameterError(
            f"the columns {list(data.columns or ())} differ from the release's {list(release.columns)}"
        )
    sensitive = prepare(df, data)
    synthetic = spark.read.parquet(syn_path)
    metrics = evaluate(
        sensitive,
        synthetic,
        release,
        max_marginal_length=config.max_marginal_length,
    )
    path = write_metrics(metrics, os.path.join(out_dir, "evaluation"))
    log.info("metrics written to %s", path)
    return metrics, path


def _summary(release, metrics: dict | None, out_dir: str) -> str:  # noqa: ANN001
    m = release.manifest
    lines = [
        "",
        "spark_dpsynth summary" + ("  [TEST MODE: NOT PRIVATE]" if m.get("test_mode") else ""),
        f"  privacy spent          epsilon={m['epsilon']:g} delta={m['delta']:.3g} (rho={m['rho']:.4g})",
        f"  protected n            {m['protected_number_of_records']}",
        "  released tuples        " + ", ".join(f"k={k}: {n}" for k, n in release.sizes().items()),
        "  sensitivities          " + ", ".join(f"k={k}: {v}" for k, v in m["sensitivities"].items()),
    ]
    if metrics is not None:
        tvd = metrics.get("tvd", {})
        lines.append(
            "  mean TVD (1/2/3-way)   "
            + " / ".join(f"{tvd[k]['mean']:.4f}" for k in sorted(tvd, key=int) if isinstance(tvd[k], dict))
        )
        lines.append(f"  synthetic rows         {metrics['rows']['synthetic']}")
        lines.append(
            f"  blank-cell share       synthetic {metrics['blank_cell_share']['synthetic']:.4f}"
            f" / sensitive {metrics['blank_cell_share']['sensitive']:.4f}"
        )
    lines.append(
        f"  outputs                {os.path.abspath(out_dir)}/{{release,synthetic,synthetic.csv,evaluation}}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 2 user error, 1 unexpected failure)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        config = load_config(args.config) if args.config else JobConfig()
        config = _apply_overrides(config, args)
        if args.command != "synthesize":
            _check_input(config)
        if args.command == "synthesize" and not os.path.isfile(
            os.path.join(args.output, "release", "manifest.json")
        ):
            raise ReleaseError(f"no release at {os.path.join(args.output, 'release')}; run `aggregate` first")
        if getattr(args, "seed", None) is not None:
            print(
                "spark-dpsynth: WARNING: --seed set: test mode, the output is reproducible and NOT private",
                file=sys.stderr,
            )
        started = time.perf_counter()
        spark = _session(args)
        release = metrics = None
        if args.command in ("pipeline", "aggregate"):
            release, _ = _run_aggregate(spark, config, args.output)
        if args.command in ("pipeline", "synthesize"):
            _run_synthesize(spark, config, args.output, release)
        if args.command in ("pipeline", "evaluate"):
            metrics, _ = _run_evaluate(spark, config, args.output, release)
        if release is None:
            from spark_dpsynth.release import Release

            release = Release.load(os.path.join(args.output, "release"), spark)
        print(_summary(release, metrics, args.output))
        print(f"  wall time              {time.perf_counter() - started:.1f} s")
        return 0
    except DPSynthError as err:
        print(f"spark-dpsynth: error: {err}", file=sys.stderr)
        return 2
    except Exception as err:  # noqa: BLE001 - one line, no data values, unless --debug
        if args.debug:
            raise
        name = type(err).__name__
        if name in ("AnalysisException", "ParseException", "IllegalArgumentException"):
            first = str(err).splitlines()[0] if str(err) else name
            # Schema-level Spark errors (unknown column in a filter, unreadable path) name no data values.
            print(f"spark-dpsynth: error: {first[:300]}", file=sys.stderr)
            return 2
        print(
            f"spark-dpsynth: failed with {name}; rerun with --debug for details (may show data values)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
