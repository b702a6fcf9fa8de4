"""The package's boundaries, checked on its source: the post-processing side never imports the private side,
and no module imports itself through others (no import cycle, function-level imports included)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "spark_dpsynth"

FORBIDDEN_FOR_SYNTHESIZERS = (
    "spark_dpsynth.data.io",
    "spark_dpsynth.data.prepare",
    "spark_dpsynth.privacy.noise",
    "spark_dpsynth.privacy._seeded",
    "spark_dpsynth.mechanisms",
)
"""What a synthesizer (post-processing) must not import: the readers, the preparation of private rows, the
noise sources and the mechanisms."""


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(path: Path, module: str | None = None) -> set[str]:
    """Every ``spark_dpsynth`` module a file imports, at any depth (function bodies included), except under
    ``if TYPE_CHECKING:``. ``from pkg import name`` counts ``pkg.name`` when that is a module, else ``pkg``.
    ``module`` is the file's module name (default: from its path in the repository)."""
    found: set[str] = set()
    module = module or module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("spark_dpsynth"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + [base]
                ).strip(".")
            if base.startswith("spark_dpsynth"):
                for alias in node.names:
                    candidate = f"{base}.{alias.name}"
                    found.add(candidate if _exists(candidate) else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return found


def _exists(module: str) -> bool:
    rel = Path(*module.split("."))
    return (ROOT / rel).with_suffix(".py").is_file() or (ROOT / rel / "__init__.py").is_file()


def graph() -> dict[str, set[str]]:
    files = sorted(PACKAGE.rglob("*.py"))
    names = {module_name(p) for p in files}
    return {module_name(p): {m for m in imports_of(p) if m in names} - {module_name(p)} for p in files}


def test_synthesizers_do_not_import_the_private_side() -> None:
    bad = []
    for path in sorted((PACKAGE / "synthesizers").rglob("*.py")):
        for imported in imports_of(path):
            if any(imported == f or imported.startswith(f + ".") for f in FORBIDDEN_FOR_SYNTHESIZERS):
                bad.append(f"{module_name(path)} imports {imported}")
    assert bad == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def f():\n    from spark_dpsynth.data.prepare import prepare\n", "spark_dpsynth.data.prepare"),
        ("from spark_dpsynth.privacy import noise\n", "spark_dpsynth.privacy.noise"),
        ("from ..mechanisms import marginals\n", "spark_dpsynth.mechanisms.marginals"),
        ("import spark_dpsynth.data.io as io\n", "spark_dpsynth.data.io"),
    ],
)
def test_the_import_scan_sees_nested_aliased_and_relative_imports(
    tmp_path: Path, source: str, expected: str
) -> None:
    path = tmp_path / "x.py"
    path.write_text(source)
    assert expected in imports_of(path, "spark_dpsynth.synthesizers.x")


def test_type_checking_imports_do_not_count(tmp_path: Path) -> None:
    path = tmp_path / "x.py"
    path.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from spark_dpsynth.data import io\n"
    )
    assert imports_of(path, "spark_dpsynth.synthesizers.x") == set()


def _cycles(g: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(g):
        if v not in index:
            strong(v)
    return out


def _package_edges_removed(g: dict[str, set[str]]) -> dict[str, set[str]]:
    """A package's ``__init__`` importing its own submodules (re-exports) is not a cycle with them."""
    return {m: {d for d in deps if not d.startswith(m + ".")} for m, deps in g.items()}


def test_no_import_cycles() -> None:
    assert _cycles(_package_edges_removed(graph())) == []


@pytest.mark.parametrize(
    ("edges", "has_cycle"),
    [
        ({"a": {"b"}, "b": {"a"}}, True),
        ({"a": {"b"}, "b": {"c"}, "c": set()}, False),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, True),
    ],
)
def test_cycle_finder(edges: dict[str, set[str]], has_cycle: bool) -> None:
    assert bool(_cycles(edges)) is has_cycle


def test_every_subpackage_says_what_it_holds() -> None:
    for init in sorted(PACKAGE.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and len(doc) > 60, f"{init.relative_to(ROOT)} needs a docstring mapping its modules"
