"""The ``spark-dpsynth`` command line (its options are the keys of :mod:`spark_dpsynth.config`).

* :mod:`.main`: the commands (``pipeline``, ``aggregate``, ``synthesize``, ``evaluate``) and their outputs; its
  ``main`` is the entry point of ``spark-dpsynth`` and ``python -m spark_dpsynth``.
* :mod:`._spark_errors`: Spark's failures on bad input said in our words, naming no data value.
"""
