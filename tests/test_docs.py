"""The package's docstrings and comments cite only what a reader of the package has: docs/design.md and papers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

OUTSIDE = re.compile(r"(?<![\w/])DESIGN\.md|(?i:\bseeds? 0\d\d\b|\bissues? #?\d+\b)")
"""A design file outside the repository, a source document of the project's start, or an issue number."""
_NUMBER = r"\d+(?:\.\d+)?"
CITED = re.compile(rf"docs/design\.md,?\s+sections?\s+({_NUMBER}(?:(?:\s*,\s*|\s+and\s+|\s*-\s*){_NUMBER})*)")
"""A citation of one section ("docs/design.md section 2.3") or of several ("sections 2.5 and 6.1")."""
HEADING = re.compile(rf"^#{{2,3}} ({_NUMBER})[ .]", re.MULTILINE)


def package_files() -> list[Path]:
    return sorted((ROOT / "spark_dpsynth").rglob("*.py"))


def cited_sections(text: str) -> list[str]:
    """Every section number cited as docs/design.md section(s) N[.M] in ``text``."""
    return [n for m in CITED.finditer(text) for n in re.findall(_NUMBER, m.group(1))]


def headings() -> set[str]:
    return set(HEADING.findall((ROOT / "docs" / "design.md").read_text()))


COUNTER = re.compile(r"(?i)\bsessions?[ -]\d+\b")
"""An internal work counter ("session 9") where a result needs a date or a version."""


def lines_matching(path: str, pattern: re.Pattern) -> list[str]:
    """``path:line: text`` of every line of the .py and .md files under ``path`` that ``pattern`` finds."""
    root = ROOT / path
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.suffix in (".py", ".md"))
    return [
        f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
        for p in files
        for n, line in enumerate(p.read_text().splitlines(), start=1)
        if pattern.search(line)
    ]


@pytest.mark.parametrize("path", ["spark_dpsynth", "README.md", "docs", "benchmarks"])
def test_results_are_dated_not_counted(path: str) -> None:
    assert lines_matching(path, COUNTER) == []


@pytest.mark.parametrize("path", ["spark_dpsynth", "README.md", "docs"])
def test_no_citation_leaves_the_repository(path: str) -> None:
    assert lines_matching(path, OUTSIDE) == []


def test_every_cited_section_exists() -> None:
    sections = headings()
    assert {"1", "1.5", "2", "2.3", "2.7", "3", "4.2", "4.6", "5", "6.1", "7.2", "8"} <= sections
    missing = [
        f"{p.relative_to(ROOT)}: section {n}"
        for p in [*package_files(), ROOT / "README.md"]
        for n in cited_sections(p.read_text())
        if n not in sections
    ]
    assert missing == []


def test_the_doc_is_self_contained() -> None:
    """The design reference names no file of the project's working area outside the repository."""
    text = (ROOT / "docs" / "design.md").read_text()
    assert "shared/" not in text
    assert not re.search(r"\bseeds?/", text)


@pytest.mark.parametrize(
    ("line", "bad"),
    [
        ("see DESIGN.md section 2", True),
        ("see docs/design.md section 2", False),
        ("Seed 002's notebook", True),
        ("(seed 001, 3.2.2)", True),
        ("as seeds 002 and 004 do", True),
        ("(issue 9)", True),
        ("issues #12", True),
        ("seeded (seed 7)", False),
        ("the seed of partition 12", False),
    ],
)
def test_the_pattern(line: str, bad: bool) -> None:
    assert bool(OUTSIDE.search(line)) is bad


@pytest.mark.parametrize(
    ("text", "sections"),
    [
        ("docs/design.md section 2.3", ["2.3"]),
        ("(docs/design.md\n    section 2.2, step 1)", ["2.2"]),
        ("docs/design.md sections 2.5 and 6.1", ["2.5", "6.1"]),
        ("docs/design.md sections 2.4-2.5", ["2.4", "2.5"]),
        ("docs/design.md sections 4.4, 4.6 and 6.3", ["4.4", "4.6", "6.3"]),
        ("docs/design.md is the reference", []),
    ],
)
def test_cited_sections(text: str, sections: list[str]) -> None:
    assert cited_sections(text) == sections
