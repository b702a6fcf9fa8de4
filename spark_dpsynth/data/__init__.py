"""The data layer: reading and writing tables, the Spark session, and preparing rows into records.

* :mod:`.io`: CSV, Parquet, Delta and catalog tables; atomic, staged outputs.
* :mod:`.prepare`: columns, empty values, public bins, privacy units and multi-value columns (Spark built-ins).
* :mod:`.session`: the SparkSession (classic or Spark Connect) of a job.

These modules read private data; the synthesizers (:mod:`spark_dpsynth.synthesizers`) never import them.
"""
