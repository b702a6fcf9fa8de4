"""The ``spark-dpsynth`` command line and its TOML configuration.

* :mod:`.main`: the commands (``pipeline``, ``aggregate``, ``synthesize``, ``evaluate``) and their outputs.
* :mod:`.config`: the configuration file's schema, generated from the parameter classes.
"""

from spark_dpsynth.cli.main import main

__all__ = ["main"]
