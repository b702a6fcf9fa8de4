"""``python -m spark_dpsynth``: the same command line as ``spark-dpsynth``."""

import sys

from spark_dpsynth.cli.main import main

sys.exit(main())
