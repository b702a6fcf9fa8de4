"""The README's library example runs as written (on the embedded Adult data)."""

from __future__ import annotations

import re

from tests.conftest import ROOT


def test_readme_library_example_runs(spark, tmp_path, monkeypatch) -> None:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Library") :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    df = spark.read.csv(str(ROOT / "data" / "adult.csv.gz"), header=True).where("split = 'train'")
    df = df.select("age", "workclass", "education", "sex", "income")
    scope = {"spark": spark, "df": df}
    exec(compile(code, "README.md", "exec"), scope)  # noqa: S102 - the README's own example
    assert (tmp_path / "out" / "release" / "manifest.json").is_file()
    assert scope["synthetic"].columns == df.columns
    assert 0 <= scope["metrics"]["tvd"]["2"]["mean"] <= 1
