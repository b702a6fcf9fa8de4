"""The package's docstrings cite only what a reader of the package has: docs/design.md and papers."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT

OUTSIDE = re.compile(r"DESIGN\.md|\bseeds? 0\d\d\b|\bissues? #?\d+\b")
"""A file outside the repository, a source file of the project's start, or an issue number."""
CITED = re.compile(r"docs/design\.md\s+sections?\s+(\d+(?:\.\d+)?)")


def package_files() -> list:
    return sorted((ROOT / "spark_dpsynth").rglob("*.py"))


def headings() -> set[str]:
    text = (ROOT / "docs" / "design.md").read_text()
    return {m.group(1) for m in re.finditer(r"^#{2,3} (\d+(?:\.\d+)?)[ .]", text, re.M)}


def test_no_citation_leaves_the_repository() -> None:
    found = [
        f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
        for p in package_files()
        for n, line in enumerate(p.read_text().splitlines(), start=1)
        if OUTSIDE.search(line)
    ]
    assert found == []


def test_every_cited_section_exists() -> None:
    sections = headings()
    assert {"1", "2", "2.3", "4.2", "5"} <= sections
    missing = [
        f"{p.relative_to(ROOT)}: section {m.group(1)}"
        for p in package_files()
        for m in CITED.finditer(p.read_text())
        if m.group(1) not in sections
    ]
    assert missing == []


@pytest.mark.parametrize(
    ("line", "bad"),
    [
        ("see DESIGN.md section 2", True),
        ("(seed 001, 3.2.2)", True),
        ("(issue 9)", True),
        ("seeded (seed 7)", False),
    ],
)
def test_the_pattern(line: str, bad: bool) -> None:
    assert bool(OUTSIDE.search(line)) is bad
