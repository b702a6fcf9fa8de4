"""DP mechanisms: the only code that reads the sensitive table and releases noisy statistics.

Each mechanism takes a DataFrame and the run's accountant, spends its budget in it share by share (drawing every
noise through a share), and returns a :class:`spark_dpsynth.release.Release` whose manifest records every share
it spent. Everything downstream (:mod:`spark_dpsynth.synthesizers`) is
post-processing of that release.

The mechanisms (each registered in :mod:`spark_dpsynth.registry`; one calls another only through its public
entry point):

* :mod:`.marginals`: DP k-way marginals with the method of Gopi, Mahabadi and Yekhanin (SDS), on Spark.
* :mod:`.class_conditional`: per-attribute noisy (value, class) histograms over full public domains.
* :mod:`.archetype`: user-level DP person histograms over archetypes learned from a public table.
* :mod:`.workload`: DP-selected marginals (AIM rounds or MST) for the ``pgm`` synthesizer.
* :mod:`.choice`: the default method's choice between the marginals and the workload, from the DP number of
  records.
* :mod:`.prelude`: what every mechanism runs first, paid with its own share of the budget
  (:func:`~.prelude.prepare_table`): the column types, the DP test of numbers written as text, n', the DP
  profile and its exact values; the mechanism is then its selection and measurement.
* :mod:`.persons`: a person's rows bounded to at most L (:func:`~.persons.bound_persons`) before a mechanism
  reads them at the row-level budget (docs/design.md section 2.10).

What they share (public names inside; docs/design.md section 1.8):

* :mod:`.budget_split`: the marginals mechanism's split of the budget (epsilon_N, rho, epsilon_Q, sigma_k) and its
  thresholds (docs/design.md sections 2.3 and 2.5).
* :mod:`._discovery`: the run's accountant, the one draw of the protected number of records n', the noisy threshold that releases a
  column's values, which columns have public values.
* :mod:`._profile`: the DP profile of the numeric columns without public bins (the noisy histogram; its
  post-processing is :mod:`spark_dpsynth.profile`).
* :mod:`._manifest`: the bounding key, the manifest's versions and data configuration, the per-column reports.
* :mod:`._spark_backend`: the records as cached patterns on Spark, and the counting passes over them (the
  marginals' candidate tuples, the workload's clique tables).
* :mod:`._counting` and :mod:`._cliques`: the NumPy kernels those passes run (bounded tuple counts; clique tables).
* :mod:`._selection`, :mod:`._aim` and :mod:`._mst`: the workload mechanism's selection of cliques (what the two
  share; AIM's rounds; MST's tree).
"""
