"""spark-submit entry point: `spark-submit [--py-files dist/spark_dpsynth.zip] jobs/synthesize.py --output DIR ...`.

Thin wrapper around `spark-dpsynth synthesize` (see `spark-dpsynth synthesize --help`: every option is also a config key).
spark-submit sets the master; `--remote sc://host:15002` runs it through Spark Connect instead.
"""

import sys

from spark_dpsynth.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["synthesize", *sys.argv[1:]]))
