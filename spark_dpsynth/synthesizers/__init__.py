"""Synthesizers: post-processing that reads only a release and returns a synthetic DataFrame.

No module here imports the readers, :mod:`spark_dpsynth.data.prepare` or the noise sources (a test checks the
imports), so a synthetic table carries exactly the guarantee of the release it came from.

* :mod:`.marginals`: the ``model`` synthesizer (graphical model fitted to the noisy marginals) and the ``sds``
  aggregate-seeded sampler, over a marginals release.
* :mod:`.class_conditional`, :mod:`.archetype`: the samplers of those mechanisms' releases.
* :mod:`.pgm`: the ``pgm`` synthesizer: a graphical model estimated from a release's measured marginals
  (:mod:`spark_dpsynth.estimation`), sampled over partitions.
* :mod:`._kernels`: partitioned sampling, exact splits, largest-remainder rounding, shared by all of them.
* :mod:`._types`: :func:`~spark_dpsynth.synthesizers._types.restore_types`, the input's column types back on any
  synthesizer's output, from the manifest's ``column_types`` (docs/design.md section 2.8).
"""
