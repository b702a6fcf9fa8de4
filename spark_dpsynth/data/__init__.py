"""The data layer: reading and writing tables, the Spark session, and preparing rows into records.

* :mod:`.io`: CSV, Parquet, Delta and catalog tables; atomic, staged outputs.
* :mod:`.prepare`: columns, empty values, public bins, privacy units and multi-value columns (Spark built-ins).
* :mod:`.session`: the SparkSession (classic or Spark Connect) of a job, and the gate that keeps Spark's and
  PySpark's log output (which can quote data values) off the terminal unless ``--debug``.

These modules read private data; the synthesizers (:mod:`spark_dpsynth.synthesizers`) never import them.
"""
