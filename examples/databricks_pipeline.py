# Databricks notebook source
# MAGIC %md
# MAGIC # spark_dpsynth: DP aggregates and synthetic data from a lakehouse table
# MAGIC
# MAGIC This notebook runs the default pipeline with the library API (`spark_dpsynth.pipeline`, the same steps as
# MAGIC `spark-dpsynth pipeline`):
# MAGIC
# MAGIC 1. read the sensitive table (a catalog table, or a CSV/Parquet/Delta path);
# MAGIC 2. `dps.fit`: the DP release (the default method: marginals or the selected workload, docs/design.md
# MAGIC    section 4.7), saved to a volume;
# MAGIC 3. `release.sample()`: synthetic records in the input's columns and types, from the release only
# MAGIC    (post-processing, no privacy cost), written to a table atomically (staged, then renamed in);
# MAGIC 4. `dps.evaluate`: utility metrics against the sensitive table (**not private**: keep them with the data).
# MAGIC
# MAGIC It runs on classic clusters, shared clusters and serverless compute (Spark Connect: no RDD or SparkContext
# MAGIC is used). Install the package on the cluster or in the notebook (`%pip install spark_dpsynth`, or the wheel
# MAGIC from a volume). As a job: a notebook task on this file, with the widgets below as parameters.
# MAGIC
# MAGIC Outside Databricks the file runs as a plain script: `python examples/databricks_pipeline.py`, with the
# MAGIC parameters in `DPSYNTH_*` environment variables and `SPARK_REMOTE=sc://...` for a Spark Connect server.

# COMMAND ----------

import os

from pyspark.sql import SparkSession

import spark_dpsynth as dps
from spark_dpsynth import OutputStage, read_input, write_metrics


def parameter(name: str, default: str) -> str:
    """A job parameter: a notebook widget on Databricks, else the environment variable DPSYNTH_<NAME>."""
    try:
        dbutils.widgets.text(name, default)  # type: ignore[name-defined]  # noqa: F821 - Databricks global
        return dbutils.widgets.get(name)  # type: ignore[name-defined]  # noqa: F821
    except NameError:
        return os.environ.get(f"DPSYNTH_{name.upper()}", default)


try:
    spark  # type: ignore[used-before-def]  # noqa: B018 - Databricks defines the session
except NameError:
    spark = SparkSession.builder.getOrCreate()  # SPARK_REMOTE, if set, makes it a Spark Connect session

INPUT_TABLE = parameter("input_table", "")  # e.g. main.hr.people; empty: read input_path
INPUT_PATH = parameter("input_path", "/Volumes/main/default/data/adult.csv.gz")
OUTPUT_DIR = parameter("output_dir", "/Volumes/main/default/dpsynth")  # release/ and evaluation/
SYNTHETIC_TABLE = parameter("synthetic_table", "main.default.adult_synthetic")
EPSILON = float(parameter("epsilon", "4.0"))
SEED = parameter("seed", "")  # TEST MODE only: a seed makes the output reproducible and NOT private

# COMMAND ----------

# MAGIC %md
# MAGIC ## 1. The sensitive table and its public description
# MAGIC The columns, the empty-value marker and the bin edges are public knowledge written here, never computed
# MAGIC from the data (the same keys as a TOML configuration file: conf/adult.toml).

# COMMAND ----------

if INPUT_TABLE:
    df = read_input(spark, table=INPUT_TABLE)
else:
    df = read_input(spark, path=INPUT_PATH)
df = df.where("split = 'train'")  # a public predicate on a public column (Adult's own train split)

config = {
    "data": {
        "columns": [
            "age", "workclass", "education", "marital_status", "occupation", "sex", "hours_per_week", "income",
        ],
        "empty_values": ["?"],
        "bins": {
            "age": {"edges": [20, 30, 40, 50, 60, 70]},
            "hours_per_week": {"edges": [20, 35, 40, 41, 50, 60]},
        },
    },
}  # fmt: skip
seed = {"seed": int(SEED)} if SEED else {}

# COMMAND ----------

# MAGIC %md
# MAGIC ## 2. The DP release
# MAGIC `delta` is left to its default, from the protected number of records n'.

# COMMAND ----------

release = dps.fit(df, epsilon=EPSILON, config=config, **seed)
release.save(f"{OUTPUT_DIR}/release", overwrite=True)
print({k: release.manifest[k] for k in ("epsilon", "delta", "protected_number_of_records", "mechanism")})

# COMMAND ----------

# MAGIC %md
# MAGIC ## 3. Synthetic data from the release only
# MAGIC The table appears (or is replaced) only once it is completely written.

# COMMAND ----------

release = dps.load(f"{OUTPUT_DIR}/release", spark, config=config, **seed)  # what a separate job would do
synthetic = release.sample()
with OutputStage(spark, OUTPUT_DIR, overwrite=True) as stage:
    synthetic.write.saveAsTable(stage.table(SYNTHETIC_TABLE))
synthetic = spark.read.table(SYNTHETIC_TABLE)

# COMMAND ----------

# MAGIC %md
# MAGIC ## 4. Evaluation (NOT private)

# COMMAND ----------

metrics = dps.evaluate(df, synthetic, release, max_marginal_length=2)
path = write_metrics(metrics, f"{OUTPUT_DIR}/evaluation")
print("synthetic rows", metrics["rows"]["synthetic"], "| mean TVD 1-way / 2-way:",
      round(metrics["tvd"]["1"]["mean"], 4), "/", round(metrics["tvd"]["2"]["mean"], 4))  # fmt: skip
print("metrics written to", path)
