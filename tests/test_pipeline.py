"""The notebook pipeline (spark_dpsynth.pipeline): options by the command line's names, checks before any data
is read, every method of the registry by name, save and load."""

from __future__ import annotations

import pytest

import spark_dpsynth as dps
from spark_dpsynth.errors import ConfigError, InvalidParameterError
from tests.conftest import ROOT

ADULT = str(ROOT / "data" / "adult.csv.gz")


@pytest.fixture(scope="module")
def adult(spark):  # noqa: ANN001, ANN201 - SparkSession -> DataFrame
    columns = ("age", "workclass", "education", "sex", "income")
    return spark.read.csv(ADULT, header=True, inferSchema=True).where("split = 'train'").select(*columns)


def test_options_are_the_command_lines_over_a_toml_document() -> None:
    config = dps.job_config(
        {"aggregate": {"epsilon": 2.0}, "data": {"empty_values": ["?"]}},
        reporting_length=2,
        synthesizer="pgm",
        seed=5,
    )
    assert config.budget.epsilon == 2.0 and config.aggregate.reporting_length == 2
    assert config.synthesizer == "pgm" and config.data.empty_values == ("?",)
    assert config.budget.seed == 5 and config.synthesize.seed == 5  # as --seed
    again = dps.job_config(config.document, target_number_of_records=100)
    assert again.budget.epsilon == 2.0 and again.synthesize.target_number_of_records == 100
    with pytest.raises(ConfigError, match="unknown option 'epsilom'"):
        dps.job_config(epsilom=1.0)
    with pytest.raises(ConfigError, match="reporting_length"):
        dps.job_config(reporting_length="three")


def test_fit_checks_every_parameter_before_reading_any_row(adult, monkeypatch) -> None:  # noqa: ANN001
    from spark_dpsynth import pipeline

    def no_release(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        pytest.fail("the data must not be read")

    monkeypatch.setattr(pipeline, "fit_release", no_release)
    with pytest.raises((ConfigError, InvalidParameterError)):
        dps.fit(adult, epsilon=-1.0)
    with pytest.raises(InvalidParameterError, match="sds-format"):
        dps.fit(adult, epsilon=1.0, synthesizer="pgm", sds_format=True)
    from spark_dpsynth.errors import SchemaError

    with pytest.raises(SchemaError):
        dps.fit(adult, epsilon=1.0, columns=["age", "no_such_column"])


@pytest.mark.parametrize(
    ("synthesizer", "options"),
    [("pgm", {}), ("model", {"reporting_length": 2}), ("class_conditional", {"label": "income"})],
)
def test_every_method_by_name_samples_the_inputs_types(adult, tmp_path, synthesizer, options) -> None:  # noqa: ANN001
    messages: list[str] = []
    release = dps.fit(
        adult,
        epsilon=2.0,
        synthesizer=synthesizer,
        seed=3,
        empty_values=["?"],
        progress=messages.append,
        **options,
    )
    assert messages  # a notebook sees the stages of a long fit
    synthetic = release.sample(target_number_of_records=500)
    assert synthetic.schema == adult.schema
    assert synthetic.count() == 500
    path = release.save(str(tmp_path / "release"))
    loaded = dps.load(path, seed=3, synthesizer=synthesizer)
    assert loaded.manifest["epsilon"] == 2.0
    assert loaded.sample(target_number_of_records=500).schema == adult.schema
