"""DP mechanisms: the only code that reads the sensitive table and releases noisy statistics.

Each mechanism takes a DataFrame and returns a :class:`spark_dpsynth.release.Release` whose manifest records
every share of the budget it spent. Everything downstream (:mod:`spark_dpsynth.synthesizers`) is
post-processing of that release.

* :mod:`.marginals`: DP k-way marginals with the method of Gopi, Mahabadi and Yekhanin (SDS), on Spark.
* :mod:`.class_conditional`: per-attribute noisy (value, class) histograms over full public domains.
* :mod:`.archetype`: user-level DP person histograms over archetypes learned from a public table.
* :mod:`.workload`: DP-selected marginals (AIM rounds or MST) for the ``pgm`` synthesizer.
* :mod:`.choice`: the default method's choice between the marginals and the workload, from the DP number of
  records.
"""
