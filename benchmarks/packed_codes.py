"""What a counting pass pays to read the cached patterns: int columns against packed words (docs/design.md
section 4.7, "Counting on Spark").

Builds ``--rows`` synthetic records of ``--columns`` codes (a seeded hash of the row id, ``--values`` values per
column: not data, only the shape of a wide coded table), caches them twice in a local Spark session, as one int
column per column and as the words of ``spark_dpsynth.mechanisms._cliques.pack``, then times, alternating
``--repeats`` times, a ``mapInArrow`` pass that reads every record into an int32 (rows, columns) NumPy array (the
unpacking included for the words) and sums one column (the two sums must agree). Prints one line per pass and
the medians. Usage::

    python benchmarks/packed_codes.py --rows 2000000 --columns 76 --values 20
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Iterator


def main(argv: list[str] | None = None) -> int:
    import numpy as np
    import pyarrow as pa
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from spark_dpsynth.mechanisms._cliques import packed_words, packing, unpack

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--columns", type=int, default=76)
    parser.add_argument("--values", type=int, default=20, help="values (codes) per column")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)
    d, sizes = args.columns, (args.values,) * args.columns
    spark = (
        SparkSession.builder.master(args.master)
        .config("spark.driver.memory", "8g")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    base = spark.range(args.rows).repartition(spark.sparkContext.defaultParallelism)
    plain = base.select(
        *[(F.abs(F.hash("id", F.lit(j))) % args.values).cast("int").alias(f"c{j}") for j in range(d)]
    ).cache()
    words: list = [F.lit(0).cast("long")] * packed_words(sizes)
    for j, (w, shift, _) in enumerate(packing(sizes)):
        words[w] = words[w].bitwiseOR(F.shiftleft(F.col(f"c{j}").cast("long"), shift))
    packed = plain.select(*[x.alias(f"w{i}") for i, x in enumerate(words)]).cache()
    plain.count(), packed.count()

    def read_plain(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        total = 0
        for b in batches:
            codes = np.empty((b.num_rows, d), dtype=np.int32)
            for j in range(d):
                codes[:, j] = b.column(j).to_numpy(zero_copy_only=False)
            total += int(codes[:, d - 1].sum())
        yield pa.RecordBatch.from_pydict({"s": [total]})

    def read_packed(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        total = 0
        for b in batches:
            codes = unpack([c.to_numpy(zero_copy_only=False) for c in b.columns], sizes)
            total += int(codes[:, d - 1].sum())
        yield pa.RecordBatch.from_pydict({"s": [total]})

    times: dict[str, list[float]] = {"int columns": [], "packed words": []}
    for _ in range(args.repeats):
        sums = []
        for name, df, task in (("int columns", plain, read_plain), ("packed words", packed, read_packed)):
            started = time.perf_counter()
            sums.append(df.mapInArrow(task, "s long").agg(F.sum("s")).collect()[0][0])
            times[name].append(time.perf_counter() - started)
            print(f"{name}: {times[name][-1]:.2f} s", flush=True)
        assert sums[0] == sums[1], sums
    print(
        f"{args.rows:,} records x {d} columns of {args.values} values ({packed_words(sizes)} words): "
        + ", ".join(f"{k} median {statistics.median(v):.2f} s" for k, v in times.items())
    )
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
