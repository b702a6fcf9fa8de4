"""spark-submit entry point: `spark-submit jobs/synthesize.py --input ... --output DIR [options]`.

Thin wrapper around `spark-dpsynth synthesize` (see `spark-dpsynth synthesize --help`). spark-submit sets the master.
"""

import sys

from spark_dpsynth.cli import main

if __name__ == "__main__":
    sys.exit(main(["synthesize", *sys.argv[1:]]))
