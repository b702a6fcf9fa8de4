"""The package's docstrings and comments cite only what a reader of the package has: docs/design.md and papers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

OUTSIDE = re.compile(r"(?<![\w/])DESIGN\.md|(?i:\bseeds? 0\d\d\b|\bissues? #?\d+\b)")
"""A design file outside the repository, a source document of the project's start, or an issue number."""
_NUMBER = r"\d+(?:\.\d+)?"
_LINKED = r"(?:\]\((?:\.\./)?(?:docs/)?design\.md\))?"
"""The link target after a linked name: "[docs/design.md](docs/design.md) section 2.3"."""
CITED = re.compile(
    rf"docs/design\.md{_LINKED},?\s+sections?\s+({_NUMBER}(?:(?:\s*,\s*|\s+and\s+|\s*-\s*){_NUMBER})*)"
)
"""A citation of one section ("docs/design.md section 2.3", "[docs/design.md](docs/design.md) section 2.3") or of
several ("sections 2.5 and 6.1")."""
HEADING = re.compile(rf"^#{{2,3}} ({_NUMBER})[ .]", re.MULTILINE)


def package_files() -> list[Path]:
    return sorted((ROOT / "spark_dpsynth").rglob("*.py"))


DOC_PAGES = ["README.md", "docs/usage.md", "docs/outputs.md", "benchmarks/README.md"]
"""The pages a reader follows from the README (docs/design.md is checked by its own tests)."""
README_MAX_LINES = 300
"""The README is read in ten minutes; the reference is in docs/usage.md and docs/outputs.md."""


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
        for p in [*package_files(), *(ROOT / page for page in DOC_PAGES)]
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
        ("[docs/design.md](docs/design.md) section 4.7", ["4.7"]),
        ("[docs/design.md](design.md) sections 4.7 and 4.8", ["4.7", "4.8"]),
    ],
)
def test_cited_sections(text: str, sections: list[str]) -> None:
    assert cited_sections(text) == sections


def test_the_readme_is_short() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines: move the detail to docs/usage.md"
    )


def test_the_readme_names_every_method_and_the_data_licence() -> None:
    """The methods table lists every registered mechanism and synthesizer; the UCI Adult attribution stays."""
    from spark_dpsynth import registry

    text = (ROOT / "README.md").read_text()
    methods = text[text.index("## Methods") : text.index("## Outputs")]
    missing = [
        name for name in [*registry.MECHANISMS, *registry.SYNTHESIZERS, "auto"] if f"`{name}`" not in methods
    ]
    assert missing == []
    assert "`auto` (default)" in methods
    for needle in ("https://doi.org/10.24432/C5XW20", "CC BY 4.0", "Becker, B. & Kohavi, R. (1996)"):
        assert needle in text
    for page in ("docs/usage.md", "docs/outputs.md", "docs/design.md", "benchmarks/README.md"):
        assert f"]({page}" in text, page


LINK = re.compile(r"\]\(([^)\s]+)\)")
"""The target of a markdown link."""
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def anchors(path: Path) -> set[str]:
    """GitHub's anchors of the headings of a markdown file (code blocks left out)."""
    text = FENCE.sub("", path.read_text())
    titles = re.findall(r"^#{1,6} (.+)$", text, re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-") for title in titles}


@pytest.mark.parametrize("page", DOC_PAGES)
def test_links_between_the_pages_resolve(page: str) -> None:
    """Every relative link of the README and the docs it leads to names a file that exists, and a heading of it."""
    source = ROOT / page
    broken = []
    for target in LINK.findall(FENCE.sub("", source.read_text())):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        file = (source.parent / path).resolve() if path else source
        if not file.exists():
            broken.append(target)
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(target)
    assert broken == []


def test_anchors() -> None:
    assert anchors(ROOT / "docs" / "usage.md") >= {
        "lower-level-api",
        "column-types",
        "persons-multi-value-columns-sds-files",
        "archetype-synthesizer-public-data-persons-with-many-rows",
        "running-on-a-cluster",
        "configuration",
    }


COUNTER_ACROSS_LINES = re.compile(r"(?i)\b(?:sessions?|turns?)\s+\d+\b")
"""A work counter that a line break splits ("On session\n10's machine"), which the line scan above misses."""


@pytest.mark.parametrize("page", [*DOC_PAGES, "docs/design.md"])
def test_no_counter_across_line_breaks(page: str) -> None:
    text = (ROOT / page).read_text()
    assert [m.group(0) for m in COUNTER_ACROSS_LINES.finditer(text)] == []


def test_the_readme_make_targets_exist() -> None:
    """Every `make TARGET` the README names is a target of the Makefile; `make run`'s epsilon is the Makefile's."""
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([\w-]+):", makefile, re.MULTILINE))
    readme = (ROOT / "README.md").read_text()
    named = set(re.findall(r"\bmake ([a-z][\w-]*)", readme))
    assert {"run", "test"} <= named
    assert sorted(named - targets) == []
    epsilon = re.search(r"^EPSILON \?= (\S+)$", makefile, re.MULTILINE).group(1)
    quick_start = readme[readme.index("## Quick start") : readme.index("## Library")]
    assert f"(epsilon {epsilon})" in quick_start
