"""The data layer: reading and writing tables, the Spark session, and preparing rows into records.

* :mod:`.io`: reading and writing CSV, Parquet, Delta and catalog tables.
* :mod:`.publish`: the outputs of a run, staged and published all together or not at all (claims, locks,
  rollback, recovery of dead runs' staging).
* :mod:`.prepare`: columns, empty values, public bins, privacy units and multi-value columns (Spark built-ins).
* :mod:`.trends`: how a person's values of a number column go with a time base (offsets, decreases), as
  Spark aggregates.
* :mod:`.number_text`: numbers written as text in plain decimal notation (CSV outputs, synthetic text columns).
* :mod:`.session`: the SparkSession (classic or Spark Connect) of a job, and the gate that keeps Spark's and
  PySpark's log output (which can quote data values) off the terminal unless ``--debug``.

These modules read private data; the synthesizers (:mod:`spark_dpsynth.synthesizers`) never import them.
"""
