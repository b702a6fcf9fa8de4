"""spark_dpsynth: differentially private marginals and synthetic data for data-lake tables, on Apache Spark.

The pipeline, one direction (DESIGN.md section 1)::

    table --prepare--> records of attributes --aggregate--> DP release --synthesize--> synthetic table
    sensitive table + release + synthetic table --evaluate--> metrics (not private)

Modules, in pipeline order:

* :mod:`spark_dpsynth.params`: frozen, validated parameter objects (DataConfig, AggregationParams, SynthesisParams).
* :mod:`spark_dpsynth.prepare`: columns, empty values, public bins (Spark built-ins).
* :mod:`spark_dpsynth.budget`: the privacy accounting (epsilon -> rho, epsilon_Q, sigma_k; thresholds).
* :mod:`spark_dpsynth.marginals`: DP k-way marginals with SDS's method, distributed (``dp_aggregate``).
* :mod:`spark_dpsynth.release`: the release on disk and in memory (``Release``).
* :mod:`spark_dpsynth.synthesis`: aggregate-seeded synthesis, partitioned (``synthesize``).
* :mod:`spark_dpsynth.evaluation` and :mod:`spark_dpsynth.report`: utility metrics and an HTML report against the
  sensitive data (``evaluate``, ``write_report``; not private).
* :mod:`spark_dpsynth.class_conditional`: seed 002's class-conditional synthesizer, fixed.
* :mod:`spark_dpsynth.io`: reading CSV, Parquet, Delta and catalog tables; atomic outputs (``read_input``,
  ``OutputStage``).
* :mod:`spark_dpsynth.config` and :mod:`spark_dpsynth.cli`: TOML configuration and the ``spark-dpsynth`` command.

Example::

    from spark_dpsynth import AggregationParams, DataConfig, dp_aggregate, synthesize, SynthesisParams
    release = dp_aggregate(df, AggregationParams(epsilon=1.0), DataConfig(empty_values=("?",)))
    release.save("out/release", spark)
    synthetic = synthesize(release, SynthesisParams(), spark)
"""

from spark_dpsynth.class_conditional import (
    ClassConditionalParams,
    fit_class_conditional,
    sample_class_conditional,
)
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
from spark_dpsynth.evaluation import evaluate, train_synthetic_test_real, true_aggregates, write_metrics
from spark_dpsynth.io import OutputStage, read_input
from spark_dpsynth.marginals import dp_aggregate
from spark_dpsynth.params import (
    AccuracyMode,
    AggregationParams,
    BinSpec,
    DataConfig,
    FabricationMode,
    SynthesisParams,
)
from spark_dpsynth.prepare import join_multi_value, prepare
from spark_dpsynth.release import Marginal, Release
from spark_dpsynth.report import write_report
from spark_dpsynth.sds_format import read_sds, write_sds_files
from spark_dpsynth.synthesis import synthesize

__version__ = "0.1.0"

__all__ = [
    "ClassConditionalParams",
    "fit_class_conditional",
    "sample_class_conditional",
    "train_synthetic_test_real",
    "write_report",
    "AccuracyMode",
    "AggregationParams",
    "BinSpec",
    "BudgetError",
    "ConfigError",
    "DataConfig",
    "DPSynthError",
    "FabricationMode",
    "InvalidParameterError",
    "Marginal",
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
    "synthesize",
    "true_aggregates",
    "write_metrics",
    "write_sds_files",
]
