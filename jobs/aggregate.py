"""spark-submit entry point: `spark-submit [--py-files dist/spark_dpsynth.zip] jobs/aggregate.py --input PATH|--input-table DB.T --output DIR ...`.

Thin wrapper around `spark-dpsynth aggregate` (see `spark-dpsynth aggregate --help`: every option is also a config key).
spark-submit sets the master; `--remote sc://host:15002` runs it through Spark Connect instead.
"""

import sys

from spark_dpsynth.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["aggregate", *sys.argv[1:]]))
