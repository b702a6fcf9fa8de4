"""spark-submit entry point: `spark-submit jobs/pipeline.py --input ... --output DIR [options]`.

Thin wrapper around `spark-dpsynth pipeline` (see `spark-dpsynth pipeline --help`). spark-submit sets the master.
"""

import sys

from spark_dpsynth.cli import main

if __name__ == "__main__":
    sys.exit(main(["pipeline", *sys.argv[1:]]))
