"""docs/usage.md's lower-level API example runs as written (on the embedded Adult data).

The README's notebook example is run by tests/test_readme_examples.py; this one was the README's library example
until 2026-11-26, and keeps the same checks.
"""

from __future__ import annotations

import re

from tests.conftest import ROOT


def test_usage_lower_level_example_runs(spark, tmp_path, monkeypatch) -> None:
    text = (ROOT / "docs" / "usage.md").read_text()
    section = text[text.index("## Lower-level API") :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert "registry" in code and "release.save(" in code
    monkeypatch.chdir(tmp_path)
    df = spark.read.csv(str(ROOT / "data" / "adult.csv.gz"), header=True).where("split = 'train'")
    df = df.select("age", "workclass", "education", "sex", "income")
    scope = {"spark": spark, "df": df}
    exec(compile(code, "docs/usage.md", "exec"), scope)  # noqa: S102 - the doc's own example
    assert (tmp_path / "out" / "release" / "manifest.json").is_file()
    assert scope["synthetic"].columns == df.columns
    assert 0 <= scope["metrics"]["tvd"]["2"]["mean"] <= 1
