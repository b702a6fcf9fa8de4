"""docs/design.md is a reference: short enough to read, every citation of it resolves, every result it links exists.

No Spark: these tests read files only. tests/test_docs.py checks the package's and the user pages' citations in
their canonical form; these tests read every citation form ("design.md section 2.3", "design.md sections 2.4-2.5",
"docs/design.md 2.10", across line breaks and comment markers) in the package, the tests, the docs, the README and
the benchmark scripts, and the cross-references inside docs/design.md itself.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

DESIGN = ROOT / "docs" / "design.md"
MAX_LINES = 1200
"""docs/design.md states each rule once; measurement histories live in benchmarks/results/."""

NUMBER = r"\d+(?:\.\d+)?"
NUMBERS = rf"{NUMBER}(?:(?:\s*,\s*|\s+and\s+|\s*-\s*){NUMBER})*"
CITATION = re.compile(
    rf"design\.md(?:\]\([^)\s]*\))?[\s#*\"'`,(]*(?:sections?\s+({NUMBERS})(?![\w/])|(\d+\.\d+)(?![\w/.-]))",
)
"""A citation of design.md's sections: "design.md section 2.3", "[docs/design.md](docs/design.md) sections 4.7 and
4.8", "design.md sections 2.4-2.5", "docs/design.md 2.10", with line breaks and comment markers in between."""
HEADING = re.compile(rf"^#{{2,3}} ({NUMBER})[ .]", re.MULTILINE)
INTERNAL = re.compile(rf"\bsections?\s+({NUMBERS})(?![\w/])")
"""A cross-reference inside docs/design.md ("section 2.5", "sections 5.3 and 5.5")."""
BRACKETED = re.compile(r"\[[^\[\]]*\]")
"""A paper's citation ("[GMY22, section 1.2]"): its section numbers are the paper's."""
RESULT = re.compile(r"(?:benchmarks/)?results/[\w.+-]+(?:/[\w.+-]+)*")
"""A path under benchmarks/results/ (in prose, or a link relative to benchmarks/)."""
CODE = re.compile(r"^```.*?^```|`[^`\n]*`", re.MULTILINE | re.DOTALL)
"""Code blocks and spans: their paths are commands' arguments (``--output benchmarks/results/DIR/x.png``), not links."""


def headings(text: str) -> set[str]:
    return set(HEADING.findall(text))


def numbers(group: str) -> list[str]:
    return re.findall(NUMBER, group)


def cited(text: str) -> list[str]:
    """Every section number of docs/design.md that ``text`` cites."""
    return [n for m in CITATION.finditer(text) for n in numbers(m.group(1) or m.group(2))]


def citing_files() -> list[Path]:
    files = [*sorted((ROOT / "spark_dpsynth").rglob("*.py")), *sorted((ROOT / "tests").rglob("*.py"))]
    files += sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md", ROOT / "benchmarks" / "README.md"]
    files += sorted((ROOT / "benchmarks").glob("*.py"))
    return [p for p in files if p.exists()]


def test_the_reference_is_short() -> None:
    lines = DESIGN.read_text().splitlines()
    assert len(lines) <= MAX_LINES, (
        f"docs/design.md has {len(lines)} lines: state the rule once and move measurements to benchmarks/results/"
    )


def test_every_section_keeps_its_number() -> None:
    """The numbers the package cites, sections 1-8 and 1.1 .. 7.3, stay headings (sections may be added, never
    renumbered)."""
    expected = {str(n) for n in range(1, 9)} | {
        "1.1", "1.2", "1.3", "1.4", "1.5", "1.6", "1.7", "1.8",
        "2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "2.7", "2.8", "2.9", "2.10",
        "3.1", "3.2", "3.3", "3.4",
        "4.1", "4.2", "4.3", "4.4", "4.5", "4.6", "4.7", "4.8",
        "5.1", "5.2", "5.3", "5.4", "5.5", "5.6",
        "6.1", "6.2", "6.3", "6.4",
        "7.1", "7.2", "7.3",
    }  # fmt: skip
    assert expected <= headings(DESIGN.read_text())


def test_every_citation_names_a_heading() -> None:
    sections = headings(DESIGN.read_text())
    missing = [
        f"{p.relative_to(ROOT)}: section {n}"
        for p in citing_files()
        if p not in (DESIGN, Path(__file__))
        for n in cited(p.read_text(encoding="utf-8"))
        if n not in sections
    ]
    assert missing == []


def test_every_cross_reference_inside_the_reference_resolves() -> None:
    text = DESIGN.read_text()
    sections = headings(text)
    own = BRACKETED.sub("", text)
    missing = [n for m in INTERNAL.finditer(own) for n in numbers(m.group(1)) if n not in sections]
    assert missing == []


DOCS_THAT_LINK_RESULTS = [
    "docs/design.md",
    "docs/usage.md",
    "docs/outputs.md",
    "README.md",
    "benchmarks/README.md",
]


@pytest.mark.parametrize("page", DOCS_THAT_LINK_RESULTS)
def test_every_linked_result_exists(page: str) -> None:
    text = CODE.sub("", (ROOT / page).read_text())
    found = {m.group(0).rstrip(".") for m in RESULT.finditer(text)}
    absent = sorted(
        path for path in found if not (ROOT / "benchmarks" / path.removeprefix("benchmarks/")).exists()
    )
    assert absent == []


def test_the_studies_moved_out_of_the_reference_name_their_section() -> None:
    """Each measurement history moved out of docs/design.md opens with the existing section it backs."""
    sections = headings(DESIGN.read_text())
    studies = sorted((ROOT / "benchmarks" / "results").glob("*-design-*.md"))
    assert studies
    for study in studies:
        first = study.read_text().splitlines()[0]
        match = re.fullmatch(rf"Backs docs/design\.md section ({NUMBER})\.", first)
        assert match and match.group(1) in sections, f"{study.name}: {first!r}"
        assert study.name in DESIGN.read_text(), f"docs/design.md does not link {study.name}"


@pytest.mark.parametrize(
    ("text", "sections"),
    [
        ("docs/design.md section 2.3", ["2.3"]),
        ("(docs/design.md\n    section 2.2, step 1)", ["2.2"]),
        ("# see docs/design.md\n    # section 2.8", ["2.8"]),
        ("docs/design.md sections 2.5 and 6.1", ["2.5", "6.1"]),
        ("docs/design.md sections 2.4-2.5", ["2.4", "2.5"]),
        ("docs/design.md sections 4.4, 4.6 and 6.3", ["4.4", "4.6", "6.3"]),
        ("[docs/design.md](docs/design.md) section 4.7", ["4.7"]),
        ("[docs/design.md](design.md) sections 4.7 and 4.8", ["4.7", "4.8"]),
        ('docs/design.md 2.10, "Not done yet"', ["2.10"]),
        ("design.md section 1.7 (a kept release)", ["1.7"]),
        ("docs/design.md is the reference", []),
        ("docs/design.md, 2026-12-05", []),
        ("docs/design.md", []),
    ],
)
def test_the_citation_pattern(text: str, sections: list[str]) -> None:
    assert cited(text) == sections


def test_the_citation_check_rejects_a_missing_section() -> None:
    sections = headings(DESIGN.read_text())
    assert "2.11" not in sections
    assert [n for n in cited("see docs/design.md section 2.11") if n not in sections] == ["2.11"]
