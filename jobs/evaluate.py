"""spark-submit entry point: `spark-submit jobs/evaluate.py --input ... --output DIR [options]`.

Thin wrapper around `spark-dpsynth evaluate` (see `spark-dpsynth evaluate --help`). spark-submit sets the master.
"""

import sys

from spark_dpsynth.cli import main

if __name__ == "__main__":
    sys.exit(main(["evaluate", *sys.argv[1:]]))
