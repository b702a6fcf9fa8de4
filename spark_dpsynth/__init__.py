"""spark_dpsynth: differentially private marginals and synthetic data for data-lake tables, on Apache Spark.

The pipeline, one direction (docs/design.md section 1.1)::

    table --data--> records --mechanism--> DP release --synthesizer--> synthetic table
    sensitive table + release + synthetic table --evaluation--> metrics (not private)

Subpackages, in pipeline order (each ``__init__`` maps its modules):

* :mod:`spark_dpsynth.data`: reading and writing tables, the Spark session, preparing rows into records.
* :mod:`spark_dpsynth.privacy`: the privacy primitives: exact noise sources, and the accountant, the ledger of a
  release's budget through whose shares every draw of noise is made.
* :mod:`spark_dpsynth.mechanisms`: the DP mechanisms, the only code that reads private data and spends a budget
  (``marginals``, ``workload``, ``class_conditional``, ``archetype``), and the default's choice between the first
  two (``choice``).
* :mod:`spark_dpsynth.release`: the release a mechanism returns and a synthesizer reads, with its typed
  manifest; SDS's aggregates files.
* :mod:`spark_dpsynth.estimation`: the graphical model fitted to noisy measured marginals (Private-PGM's
  estimation), read by the workload's selection and the ``pgm`` synthesizer.
* :mod:`spark_dpsynth.synthesizers`: post-processing of a release into a synthetic table (``pgm``, ``model``,
  ``sds``, ``independent``, ``class_conditional``, ``archetype``).
* :mod:`spark_dpsynth.evaluation`: utility metrics and the HTML report against the sensitive data (not private).
* :mod:`spark_dpsynth.pipeline`: the steps above as one pipeline, for the notebook (``fit``, ``sample``,
  ``evaluate``) and the command line alike.
* :mod:`spark_dpsynth.cli`: the ``spark-dpsynth`` command: parses its options and runs the pipeline.

Modules: :mod:`spark_dpsynth.config` (the TOML configuration's schema, shared by the command line and the
library), :mod:`spark_dpsynth.registry` (every mechanism and synthesizer by name: the CLI and the configuration
are generated from it), :mod:`spark_dpsynth.params` (the frozen parameter objects shared by the mechanisms and
synthesizers), :mod:`spark_dpsynth.errors` (the error hierarchy).

Example (:mod:`spark_dpsynth.pipeline`, the default pipeline as the command line runs it)::

    import spark_dpsynth as dps

    release = dps.fit(df, epsilon=1.0)             # the DP release: the privacy budget is spent here, once
    synthetic = release.sample()                   # a DataFrame with df's columns and types
    report = dps.evaluate(df, synthetic, release)  # utility figures (they read df: keep them in-house)

The steps one by one: ``registry.mechanism(name).fit(df, params, data_config)`` returns a release;
``registry.resolve_synthesizer(release.manifest).synthesize(release, params, spark)`` samples it;
:func:`spark_dpsynth.evaluation.metrics.evaluate` compares prepared records.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Public name -> module. The modules are imported on first use (PEP 562): each Spark Python worker imports this
# package to run our kernels, and importing every module (scipy.stats, scikit-learn, matplotlib) cost ~1 s per
# worker.
_EXPORTS = {
    "ClassConditionalParams": "mechanisms.class_conditional",
    "fit_class_conditional": "mechanisms.class_conditional",
    "sample_class_conditional": "synthesizers.class_conditional",
    "BudgetError": "errors",
    "ConfigError": "errors",
    "DPSynthError": "errors",
    "InvalidParameterError": "errors",
    "OutputExistsError": "errors",
    "ReleaseError": "errors",
    "SchemaError": "errors",
    "SparkSetupError": "errors",
    "DPRelease": "pipeline",
    "evaluate": "pipeline",
    "fit": "pipeline",
    "job_config": "pipeline",
    "load": "pipeline",
    "train_synthetic_test_real": "evaluation.tstr",
    "true_aggregates": "evaluation.metrics",
    "write_metrics": "evaluation.metrics",
    "OutputStage": "data.publish",
    "read_input": "data.io",
    "dp_aggregate": "mechanisms.marginals",
    "AccuracyMode": "params",
    "AggregationParams": "params",
    "Budget": "privacy.budget",
    "BinSpec": "params",
    "DataConfig": "params",
    "FabricationMode": "params",
    "SynthesisParams": "params",
    "join_multi_value": "data.prepare",
    "prepare": "data.prepare",
    "Marginal": "release.core",
    "Manifest": "release.manifest",
    "load_release": "release",
    "Release": "release.core",
    "write_report": "evaluation.report",
    "read_sds": "release.sds_format",
    "write_sds_files": "release.sds_format",
    "synthesize": "synthesizers.marginals",
    "restore_types": "synthesizers._types",
}

if TYPE_CHECKING:
    from spark_dpsynth.data.io import read_input
    from spark_dpsynth.data.prepare import join_multi_value, prepare
    from spark_dpsynth.data.publish import OutputStage
    from spark_dpsynth.errors import (
        BudgetError,
        ConfigError,
        DPSynthError,
        InvalidParameterError,
        OutputExistsError,
        ReleaseError,
        SchemaError,
        SparkSetupError,
    )
    from spark_dpsynth.evaluation.metrics import true_aggregates, write_metrics
    from spark_dpsynth.evaluation.report import write_report
    from spark_dpsynth.evaluation.tstr import train_synthetic_test_real
    from spark_dpsynth.mechanisms.class_conditional import ClassConditionalParams, fit_class_conditional
    from spark_dpsynth.mechanisms.marginals import dp_aggregate
    from spark_dpsynth.params import (
        AccuracyMode,
        AggregationParams,
        BinSpec,
        DataConfig,
        FabricationMode,
        SynthesisParams,
    )
    from spark_dpsynth.pipeline import DPRelease, evaluate, fit, job_config, load
    from spark_dpsynth.release import load_release
    from spark_dpsynth.release.core import Marginal, Release
    from spark_dpsynth.release.manifest import Manifest
    from spark_dpsynth.release.sds_format import read_sds, write_sds_files
    from spark_dpsynth.synthesizers._types import restore_types
    from spark_dpsynth.synthesizers.class_conditional import sample_class_conditional
    from spark_dpsynth.synthesizers.marginals import synthesize


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"spark_dpsynth.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


__version__ = "0.1.0"

__all__ = [
    "DPRelease",
    "fit",
    "job_config",
    "load",
    "ClassConditionalParams",
    "fit_class_conditional",
    "sample_class_conditional",
    "train_synthetic_test_real",
    "write_report",
    "AccuracyMode",
    "AggregationParams",
    "BinSpec",
    "Budget",
    "BudgetError",
    "ConfigError",
    "DataConfig",
    "DPSynthError",
    "FabricationMode",
    "InvalidParameterError",
    "Manifest",
    "Marginal",
    "load_release",
    "OutputExistsError",
    "OutputStage",
    "Release",
    "ReleaseError",
    "SchemaError",
    "SparkSetupError",
    "SynthesisParams",
    "dp_aggregate",
    "evaluate",
    "join_multi_value",
    "prepare",
    "read_sds",
    "read_input",
    "restore_types",
    "synthesize",
    "true_aggregates",
    "write_metrics",
    "write_sds_files",
]
