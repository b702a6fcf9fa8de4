"""spark-submit entry point: `spark-submit jobs/aggregate.py --input ... --output DIR [options]`.

Thin wrapper around `spark-dpsynth aggregate` (see `spark-dpsynth aggregate --help`). spark-submit sets the master.
"""

import sys

from spark_dpsynth.cli import main

if __name__ == "__main__":
    sys.exit(main(["aggregate", *sys.argv[1:]]))
