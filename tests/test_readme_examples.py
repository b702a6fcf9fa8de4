"""The README's notebook example runs as written (on the embedded Adult data), and gives, for a seeded release,
the same typed table as ``spark-dpsynth synthesize`` on that release."""

from __future__ import annotations

import functools
import re

from pyspark.testing import assertDataFrameEqual

import spark_dpsynth
from spark_dpsynth.cli.main import main
from spark_dpsynth.pipeline import fit
from tests.conftest import ROOT

ADULT = str(ROOT / "data" / "adult.csv.gz")
COLUMNS = ("age", "workclass", "education", "sex", "hours_per_week", "income")


def readme_library_block() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Library") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_notebook_example_is_the_command_line_pipeline(spark, tmp_path, monkeypatch) -> None:
    code = readme_library_block()
    assert len([line for line in code.splitlines() if line.strip() and not line.startswith("import")]) <= 3
    # The input as a notebook has it: typed columns (integers for age and hours), Adult's train split.
    df = spark.read.csv(ADULT, header=True, inferSchema=True).where("split = 'train'").select(*COLUMNS)
    # TEST MODE: the README's `dps.fit` with a seed, so that its release and sample are reproducible.
    monkeypatch.setattr(spark_dpsynth, "fit", functools.partial(fit, seed=11, empty_values=["?"]))
    scope = {"df": df}
    exec(compile(code, "README.md", "exec"), scope)  # noqa: S102 - the README's own example
    release, synthetic, report = scope["release"], scope["synthetic"], scope["report"]
    assert synthetic.schema == df.schema  # the input's columns and types, not bin labels
    assert 0 <= report["tvd"]["2"]["mean"] <= 1
    assert release.manifest["epsilon"] == 1.0

    # The command line's `synthesize` on the same release, same seed: the same table, row for row.
    out = tmp_path / "out"
    release.save(str(out / "release"))
    assert main(["synthesize", "--output", str(out), "--seed", "11", "--no-single-csv", "--quiet"]) == 0
    from_cli = spark.read.parquet(str(out / "synthetic"))
    assert from_cli.schema == df.schema
    assertDataFrameEqual(from_cli, synthetic)
    again = spark_dpsynth.load(str(out / "release"), spark, seed=11).sample()
    assertDataFrameEqual(again, synthetic)
