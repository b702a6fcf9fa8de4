"""The ``spark-dpsynth`` command line and its TOML configuration.

* :mod:`.main`: the commands (``pipeline``, ``aggregate``, ``synthesize``, ``evaluate``) and their outputs; its
  ``main`` is the entry point of ``spark-dpsynth`` and ``python -m spark_dpsynth``.
* :mod:`.config`: the configuration file's schema, generated from the parameter classes and the registry.
* :mod:`._spark_errors`: Spark's failures on bad input said in our words, naming no data value.
"""
