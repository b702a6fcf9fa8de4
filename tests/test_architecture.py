"""The package's boundaries, checked on its source (docs/design.md sections 1.2 and 1.8): the layer table (which
package may import which, on the transitive closure of imports), the post-processing side never imports the
private side, only the mechanisms and the privacy primitives draw noise, only a few packages call the reader,
and no module imports itself through others (no import cycle, function-level imports included)."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
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


def _matches(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == f or module.startswith(f + ".") for f in prefixes)


def test_synthesizers_do_not_import_the_private_side() -> None:
    bad = []
    for path in sorted((PACKAGE / "synthesizers").rglob("*.py")):
        for imported in imports_of(path):
            if _matches(imported, FORBIDDEN_FOR_SYNTHESIZERS):
                bad.append(f"{module_name(path)} imports {imported}")
    assert bad == []


def test_synthesizers_do_not_reach_the_private_side_through_others() -> None:
    """Indirectly too: no chain of imports from a synthesizer ends in the preparation of private rows, a noise
    source or a mechanism. (``data.io`` itself is reached, through ``release.core`` -> ``data.publish``, for its
    path and table helpers; its reader is checked by name, :func:`test_only_a_few_packages_call_the_reader`.)"""
    g = graph()
    forbidden = tuple(f for f in FORBIDDEN_FOR_SYNTHESIZERS if f != "spark_dpsynth.data.io")
    bad = [
        f"{m} reaches {d}"
        for m in sorted(g)
        if layer_of(m) == "synthesizers"
        for d in sorted(closure(g, m))
        if _matches(d, forbidden)
    ]
    assert bad == []


# ------------------------------------------------------------------------------------------------- the layers

BELOW_THE_ENTRY_POINTS = (
    "errors",
    "_progress",
    "_validate",
    "params",
    "estimation",
    "profile",
    "data",
    "privacy",
    "release",
    "synthesizers",
    "registry",
    "mechanisms",
    "evaluation",
    "config",
    "pipeline",
)
"""What the command line and the package's facade may import: every other layer, each above the ones it may
import (a layer may import those before it, :func:`below`, unless :data:`LAYERS` says less)."""


def below(layer: str) -> tuple[str, ...]:
    """The layers listed before ``layer`` in :data:`BELOW_THE_ENTRY_POINTS`."""
    return BELOW_THE_ENTRY_POINTS[: BELOW_THE_ENTRY_POINTS.index(layer)]


LAYERS: dict[str, frozenset[str]] = {
    name: frozenset(allowed)
    for name, allowed in {
        "errors": (),
        "_progress": (),
        "_validate": ("errors",),
        "params": ("errors", "_validate"),
        "estimation": ("errors",),
        # profile holds the column types and the post-processing of the DP column profile (docs/design.md
        # section 2.8): data.prepare reads their epoch view (numeric_view)
        "profile": ("errors", "_validate", "params"),
        "data": ("errors", "_validate", "params", "profile"),
        # privacy holds the ledger and its record (privacy.ledger.Ledger, the manifest's budget block): the
        # release imports it, never the other way round. release holds the estimator's Measurement, the one
        # measurement type (docs/design.md section 4.8), and re-checks a release's budget with privacy.accounting.
        "privacy": ("errors", "_validate", "params"),
        "release": ("errors", "_validate", "params", "estimation", "profile", "data", "privacy"),
        "synthesizers": below("synthesizers"),
        # registry imports only these; it names the mechanisms, synthesizers and parameter classes by
        # "module:attr" strings, loaded at call time (DISPATCH below).
        "registry": below("registry"),
        "evaluation": ("errors", "_validate", "params", "profile", "data"),
        "mechanisms": below("mechanisms"),
        "config": below("evaluation"),  # not the evaluation
        "pipeline": below("pipeline"),
        "cli": BELOW_THE_ENTRY_POINTS,
        # the package itself (spark_dpsynth/__init__.py): the library's facade, lazy re-exports (PEP 562)
        "spark_dpsynth": BELOW_THE_ENTRY_POINTS,
    }.items()
}
"""Package -> the packages its modules may import, directly or through other modules (docs/design.md section
1.8). A package's own modules are always allowed; ``if TYPE_CHECKING:`` imports do not count. ``config`` is
spark_dpsynth/config/, ``pipeline`` spark_dpsynth/pipeline.py (no file: no imports), ``spark_dpsynth`` the
package's ``__init__``; ``spark_dpsynth/__main__.py`` is part of ``cli``."""

DISPATCH: dict[str, frozenset[str]] = {"registry": frozenset({"mechanisms", "synthesizers", "params"})}
"""Package -> the packages it loads by name at call time (``importlib``, from ``"module:attr"`` strings): not
imports, so not in :data:`LAYERS`; the registry's table of methods is data the mechanisms and synthesizers
register in. A mechanism importing the registry and the registry loading that mechanism is no import cycle."""


def layer_of(module: str) -> str:
    """The :data:`LAYERS` key of a module name (``spark_dpsynth.mechanisms.marginals`` -> ``mechanisms``)."""
    parts = module.split(".")
    if len(parts) == 1:
        return "spark_dpsynth"
    return "cli" if parts[1] == "__main__" else parts[1]


def closure(g: dict[str, set[str]], module: str) -> set[str]:
    """Every module ``module`` imports, directly or through others."""
    seen: set[str] = set()
    stack = [module]
    while stack:
        for dep in g.get(stack.pop(), ()):
            if dep not in seen:
                seen.add(dep)
                stack.append(dep)
    seen.discard(module)
    return seen


def layer_violations(g: dict[str, set[str]]) -> list[str]:
    bad = []
    for module in sorted(g):
        layer = layer_of(module)
        for dep in sorted(closure(g, module)):
            target = layer_of(dep)
            if target != layer and target not in LAYERS.get(layer, frozenset()):
                bad.append(f"{module} ({layer}) reaches {dep} ({target})")
    return bad


def test_every_module_is_in_the_layer_table() -> None:
    assert sorted({layer_of(m) for m in graph()} - set(LAYERS)) == []


def test_the_layer_table_is_closed_and_no_two_packages_allow_each_other() -> None:
    """What a package may import, it may import through what it may import; no pair of packages may import each
    other, so every arrow of :data:`LAYERS` runs down (docs/design.md section 1.8)."""
    for name, allowed in LAYERS.items():
        for other in allowed:
            assert LAYERS[other] <= allowed, f"{name} may import {other} but not all of its imports"
    mutual = {tuple(sorted((a, b))) for a in LAYERS for b in LAYERS[a] if a in LAYERS[b]}
    assert mutual == set()


def mutual_packages(g: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Pairs of packages (:func:`layer_of`) each of which has a module reaching a module of the other."""
    reaches: dict[str, set[str]] = {}
    for module in g:
        reaches.setdefault(layer_of(module), set()).update(layer_of(d) for d in closure(g, module))
    return sorted(
        {(min(a, b), max(a, b)) for a in reaches for b in reaches[a] if a != b and a in reaches.get(b, ())}
    )


def test_no_two_packages_import_each_other() -> None:
    """On the imports themselves, not only the table: no package reaches a module of a package that reaches it
    back, even through modules that form no cycle (a module cycle is :func:`test_no_import_cycles`)."""
    assert mutual_packages(graph()) == []


def test_the_mutual_import_check_sees_two_modules_of_two_packages() -> None:
    g = {
        "spark_dpsynth.privacy.accounting": {"spark_dpsynth.release.manifest"},
        "spark_dpsynth.release.manifest": set(),
        "spark_dpsynth.release.integrity": {"spark_dpsynth.privacy.x"},
        "spark_dpsynth.privacy.x": set(),
    }
    assert mutual_packages(g) == [("privacy", "release")]
    assert mutual_packages({**g, "spark_dpsynth.privacy.accounting": set()}) == []


def test_imports_follow_the_layer_table() -> None:
    assert layer_violations(graph()) == []


def test_the_layer_check_sees_indirect_imports() -> None:
    g = {
        "spark_dpsynth.synthesizers.x": {"spark_dpsynth.release.core"},
        "spark_dpsynth.release.core": {"spark_dpsynth.mechanisms.m"},  # release may not import mechanisms
        "spark_dpsynth.mechanisms.m": set(),
    }
    assert layer_violations(g) == [
        "spark_dpsynth.release.core (release) reaches spark_dpsynth.mechanisms.m (mechanisms)",
        "spark_dpsynth.synthesizers.x (synthesizers) reaches spark_dpsynth.mechanisms.m (mechanisms)",
    ]


_DISPATCH_TARGET = re.compile(r"^(spark_dpsynth(?:\.\w+)+):\w+$")


def test_the_registry_loads_only_mechanisms_synthesizers_and_parameters() -> None:
    """The registry's ``"module:attr"`` strings (its lazy dispatch) name existing modules of :data:`DISPATCH`."""
    for name, allowed in DISPATCH.items():
        path = PACKAGE / f"{name}.py"
        targets = {
            m.group(1)
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            if (m := _DISPATCH_TARGET.match(node.value))
        }
        assert targets, f"{name}: no dispatch strings found"
        assert sorted(t for t in targets if not _exists(t)) == []
        assert sorted(t for t in targets if layer_of(t) not in allowed) == []


# ------------------------------------------------------------------------------------- noise and the reader

NOISE_MODULES = ("spark_dpsynth.privacy.noise", "spark_dpsynth.privacy._seeded")
NOISE_DRAWS = frozenset({"discrete_gaussian", "discrete_laplace"})
"""NoiseSource methods whose name says what they are, counted on any receiver."""
NOISE_CHOICES = frozenset({"quantile", "exponential"})
"""NoiseSource methods with common names (``np.quantile``, a pandas ``quantile``), counted on a receiver that
names a noise source (``noise.quantile(...)``, ``self._noise.exponential(...)``)."""
NOISE_SOURCE_LAYERS = frozenset({"mechanisms", "privacy"})
"""Only the mechanisms (which hand a test's source to a new accountant) and the privacy package import the noise
sources (docs/design.md section 1.1)."""
DRAWING_MODULES = ("spark_dpsynth.privacy",)
"""Only the privacy package draws noise: the accountant, through a share of the budget (docs/design.md section
1.8); a mechanism draws by naming its share (``acct.gaussian(share, ...)``), never from a source."""


def noise_imports(path: Path, module: str | None = None) -> list[str]:
    """A file's imports of the noise sources (any depth, not under ``if TYPE_CHECKING:``)."""
    return [f"imports {m}" for m in sorted(imports_of(path, module)) if _matches(m, NOISE_MODULES)]


def noise_draws(path: Path) -> list[str]:
    """A file's NoiseSource draws: calls of :data:`NOISE_DRAWS` on any receiver, of :data:`NOISE_CHOICES` on one
    whose name says noise."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            attr, receiver = node.func.attr, ast.unparse(node.func.value)
            if attr in NOISE_DRAWS or (attr in NOISE_CHOICES and "noise" in receiver.lower()):
                found.append(f"calls {receiver}.{attr} (line {node.lineno})")
    return found


def noise_uses(path: Path, module: str | None = None) -> list[str]:
    """Imports of the noise sources and draws from them."""
    return [*noise_imports(path, module), *noise_draws(path)]


def outside(allowed: frozenset[str], uses: Callable[[Path], list[str]]) -> list[str]:
    """Every use (``uses`` of a file) in a package module whose layer is not in ``allowed``."""
    return [
        f"{module_name(p)} {use}"
        for p in sorted(PACKAGE.rglob("*.py"))
        if layer_of(module_name(p)) not in allowed
        for use in uses(p)
    ]


def test_only_mechanisms_and_privacy_import_noise_sources() -> None:
    assert outside(NOISE_SOURCE_LAYERS, noise_imports) == []


def test_noise_is_drawn_only_through_the_accountant() -> None:
    """No draw outside the ledger: only ``privacy/`` calls a noise source; the mechanisms draw through a share
    of the budget (``Accountant.gaussian``, ``laplace``, ``quantile``, ``exponential``)."""
    draws = [
        f"{module_name(p)} {use}"
        for p in sorted(PACKAGE.rglob("*.py"))
        if not _matches(module_name(p), DRAWING_MODULES)
        for use in noise_draws(p)
    ]
    assert draws == []


@pytest.mark.parametrize(
    "source",
    [
        "def f():\n    from spark_dpsynth.privacy.noise import noise_source_for\n",
        "from spark_dpsynth.privacy import _seeded\n",
        "def f(source):\n    return source.discrete_gaussian(1.0, 3)\n",
        "def f(self):\n    return self._noise.quantile(h, 0.9, 1.0)\n",
    ],
)
def test_the_noise_scan_sees_imports_and_draws(tmp_path: Path, source: str) -> None:
    path = tmp_path / "x.py"
    path.write_text(source)
    assert noise_uses(path, "spark_dpsynth.data.x")


def test_the_noise_scan_lets_numpy_quantiles_pass(tmp_path: Path) -> None:
    path = tmp_path / "x.py"
    path.write_text("import numpy as np\nq = np.quantile([1, 2], 0.5)\ns = series.quantile(0.9)\n")
    assert noise_uses(path, "spark_dpsynth.evaluation.x") == []


READER = "read_input"
READER_LAYERS = frozenset({"mechanisms", "evaluation", "data", "pipeline", "cli", "spark_dpsynth"})
"""Who may import or call the reader of private tables, ``data.io.read_input`` (docs/design.md section 1.8);
``spark_dpsynth`` (the package's ``__init__``) only re-exports it lazily for library users."""


def reader_uses(path: Path) -> list[str]:
    """Imports of ``read_input`` (``from ... import read_input``) and attribute uses ``x.read_input``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and any(a.name == READER for a in node.names):
            found.append(f"imports {READER} (line {node.lineno})")
        elif isinstance(node, ast.Attribute) and node.attr == READER:
            found.append(f"uses .{READER} (line {node.lineno})")
    return found


def test_only_a_few_packages_call_the_reader() -> None:
    assert outside(READER_LAYERS, reader_uses) == []


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


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_names_used(path: Path, module: str | None = None) -> list[str]:
    """Underscore names (not dunders) a file takes from another ``spark_dpsynth`` module, at any depth (function
    bodies and ``if TYPE_CHECKING:`` included): imported by name (``from spark_dpsynth.x import _y``, relative
    imports too) or read as an attribute of an imported package module (``x._y`` after ``from spark_dpsynth
    import x``, ``spark_dpsynth.x._y`` after ``import spark_dpsynth.x``). A module (``_counting``) is not a name."""
    module = module or module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    modules: dict[str, str] = {}  # local name -> the package module it is bound to
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("spark_dpsynth"):
                    local = alias.asname or "spark_dpsynth"
                    modules[local] = alias.name if alias.asname else "spark_dpsynth"
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + [base]).strip(".")
            if not base.startswith("spark_dpsynth"):
                continue
            for alias in node.names:
                if _exists(f"{base}.{alias.name}"):
                    modules[alias.asname or alias.name] = f"{base}.{alias.name}"
                elif _private(alias.name) and base != module:
                    found.append(f"{module} imports {base}.{alias.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            chain, value = [], node.value
            while isinstance(value, ast.Attribute):
                chain.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in modules:
                target = ".".join([modules[value.id], *reversed(chain)])
                if _exists(target) and target != module:
                    found.append(f"{module} reads {target}.{node.attr}")
    return found


PRIVATE_NAMES_OWNED_ELSEWHERE: frozenset[str] = frozenset()
"""Underscore names still crossing a module boundary while another owner edits their module (none)."""


def test_no_module_takes_another_modules_private_names() -> None:
    """What modules share they share under public names (docs/design.md section 1.8); importing an underscore
    module (``from spark_dpsynth.mechanisms import _counting``) is fine, and so are tests."""
    uses = {use for p in sorted(PACKAGE.rglob("*.py")) for use in private_names_used(p)}
    assert sorted(uses - PRIVATE_NAMES_OWNED_ELSEWHERE) == []
    assert sorted(PRIVATE_NAMES_OWNED_ELSEWHERE - uses) == [], "renamed: remove from the allow-list"


def test_the_private_name_scan(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    path = pkg / "x.py"
    path.write_text(
        "def f():\n    from spark_dpsynth.mechanisms.marginals import _SparkBackend, dp_aggregate\n"
        "from spark_dpsynth.mechanisms import _counting, marginals\n"
        "from . import _cliques\n"
        "from ._profile import _draw\n"
        "from .x import _own\n"
        "from ..evaluation.cells import __all__\n"
        "import spark_dpsynth.evaluation.tvd\n"
        "import spark_dpsynth.release.core as core\n"
        "_counting.count(marginals._BUDGET, _cliques.__doc__, spark_dpsynth.evaluation.tvd._WORST_COLUMNS)\n"
        "core._sorted_marginal(obj._private)\n"
    )
    assert sorted(private_names_used(path, "spark_dpsynth.mechanisms.x")) == [
        "spark_dpsynth.mechanisms.x imports spark_dpsynth.mechanisms._profile._draw",
        "spark_dpsynth.mechanisms.x imports spark_dpsynth.mechanisms.marginals._SparkBackend",
        "spark_dpsynth.mechanisms.x reads spark_dpsynth.evaluation.tvd._WORST_COLUMNS",
        "spark_dpsynth.mechanisms.x reads spark_dpsynth.mechanisms.marginals._BUDGET",
        "spark_dpsynth.mechanisms.x reads spark_dpsynth.release.core._sorted_marginal",
    ]


DATE = re.compile(r"\b\d{4}-[01]\d-[0-3]\d\b")
BEHAVIOUR_DATES = frozenset({"1970-01-01", "1900-01-01", "2100-01-01"})
"""Dates that are part of the code's behaviour, not of its history: the Unix epoch (dates are days and timestamps
seconds since 1970-01-01, ``profile`` and the evaluation's units) and the public date grid's range
1900-01-01 .. 2100-01-01 (``profile.grid``)."""
RUN_LOG = re.compile(
    r"\bone test-mode seed\b"
    r"|\bover (?:one|two|three|four|five|\d+) seeds\b"
    r"|\bas before \d{4}\b"
    r"|\breplicated to [\d,]+ records\b"
    r"|\b[Mm]easured on (?:the )?(?:EU LFS|LFS|NIST|UCI Adult|Adult|SF fire|MovieLens)\b"
    r"|\b(?:EU LFS|LFS|NIST|UCI Adult|Adult|SF fire calls|MovieLens)\b[^.;]{0,80}\b(?:epsilon|eps) \d[\d.]*[,;)]"
    r"|\b\d[\d.,]* (?:CPU )?s(?:econds)? (?:against|instead of) \d"
    r"|\b\d[\d.,]* s of (?:CPU|wall time)\b"
    r"|\b\d[\d.,]* minutes\b"
    r"|\b\d[\d.]*x (?:faster|slower)\b"
    r"|\bTVD \.\d+ against\b"
    r"|\.\d{3,4} (?:against|->) \.\d{3,4}\b"
)
"""Phrases of a benchmark run or a measurement history (a dataset at an epsilon, a replicated table, seeds,
timings, TVD comparisons): the package states the rule and points to the docs/design.md section that holds the
figure; the figures, with their dates, live there and in benchmarks/results/."""
RUN_LOG_OWNED_ELSEWHERE: frozenset[str] = frozenset()
"""Files still holding a run figure while another owner edits them (none)."""


def run_logs(path: Path) -> list[str]:
    """``path``'s dates (other than :data:`BEHAVIOUR_DATES`) and :data:`RUN_LOG` phrases, whitespace folded so
    that a phrase broken over lines is found, as ``"file: text"``."""
    text = " ".join(path.read_text(encoding="utf-8").replace("#", " ").split())
    name = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
    dates = [m.group() for m in DATE.finditer(text) if m.group() not in BEHAVIOUR_DATES]
    return [f"{name}: {found}" for found in dates + [m.group() for m in RUN_LOG.finditer(text)]]


def test_no_dates_or_benchmark_runs_in_the_package() -> None:
    """Docstrings and comments give shapes, units, errors and the paper, not run logs (issue 55)."""
    files = [
        p
        for p in sorted(PACKAGE.rglob("*.py"))
        if p.relative_to(ROOT).as_posix() not in RUN_LOG_OWNED_ELSEWHERE
    ]
    assert [hit for p in files for hit in run_logs(p)] == []


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ('"""Plain IPF, as before 2026-11-28."""', True),
        ("# UCI Adult, eps 2, 2026-11-26", True),
        ('"""On the EU LFS as it comes (77 columns, epsilon 4, one test-mode seed)."""', True),
        ('"""Measured on the EU LFS\n    replicated (76 columns)."""', True),
        ('"""77 s against 15 s this way."""', True),
        ('"""a pass 5x faster"""', True),
        ('"""3-way TVD .062 against .054"""', True),
        ('"""Days since 1970-01-01; the grid spans 1900-01-01 .. 2100-01-01."""', False),
        ('"""The measured marginals, at epsilon 4 by default (docs/design.md section 4.7)."""', False),
        ('"""NIST\'s ``"N"`` (not applicable) is a category of its own."""', False),
    ],
)
def test_the_run_log_scan(tmp_path: Path, text: str, found: bool) -> None:
    path = tmp_path / "x.py"
    path.write_text(text + "\n")
    assert bool(run_logs(path)) is found


# ----------------------------------------------------------------------------------------------- one budget value

BUDGET_FIELDS = frozenset({"epsilon", "delta", "accounting"})
"""The fields of the release's budget (docs/design.md section 2.3)."""
BUDGET_CLASS = "spark_dpsynth/privacy/budget.py:Budget"
"""The one class that holds them as a parameter."""
BUDGET_RECORDS = frozenset(
    {
        # what a release spent, read back from its manifest: records, not parameters
        "spark_dpsynth/privacy/ledger.py:Ledger",
        "spark_dpsynth/privacy/ledger.py:BudgetShare",
        "spark_dpsynth/release/manifest.py:Manifest",
        "spark_dpsynth/privacy/accounting.py:DrawRight",
        "spark_dpsynth/mechanisms/budget_split.py:BudgetSplit",
    }
)
"""Classes that record a release's spent budget (its manifest, the ledger's shares, the marginals mechanism's
split): they hold what was spent, never what may be spent."""


def budget_holders(root: Path) -> set[str]:
    """``path:Class`` of every class under ``root`` with an annotated field named like a budget field."""
    out = set()
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            names = {
                stmt.target.id
                for stmt in node.body
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
            }
            if names & BUDGET_FIELDS:
                out.add(f"{path.relative_to(root.parent).as_posix()}:{node.name}")
    return out


def test_epsilon_delta_and_accounting_are_fields_of_one_class() -> None:
    """The budget is one frozen value (``privacy.Budget``), held by the run's accountant; no parameter class
    copies it (docs/design.md section 2.3)."""
    assert budget_holders(ROOT / "spark_dpsynth") - BUDGET_RECORDS == {BUDGET_CLASS}


def test_the_budget_field_scan(tmp_path: Path) -> None:
    pkg = tmp_path / "spark_dpsynth"
    pkg.mkdir()
    (pkg / "p.py").write_text("class A:\n    epsilon: float = 1.0\nclass B:\n    share: float = 0.1\n")
    assert budget_holders(pkg) == {"spark_dpsynth/p.py:A"}


# ----------------------------------------------------------------------------------------------- file lengths

MAX_LINES = 800
"""The most lines of a package file: a longer one is split into modules that say what they hold, unless it is
listed in :data:`LONG_FILES` with its reason."""
LONG_FILES: dict[str, str] = {
    "spark_dpsynth/pipeline.py": (
        "One file over 800 lines: the run's steps in order (read, check, release, synthesize, evaluate, publish), "
        "shared by the library, the command line and the jobs."
    ),
    "spark_dpsynth/data/publish.py": (
        "One file over 800 lines: the output stage's claim, publish and recovery are one protocol on one journal."
    ),
    "spark_dpsynth/mechanisms/workload.py": (
        "One file over 800 lines: the workload mechanism's steps in order (domains, selection, measurement, "
        "manifest); its selection and counting are their own modules."
    ),
    "spark_dpsynth/synthesizers/_model.py": (
        "One file over 800 lines: the model synthesizer's fit and its raking share the fitted model's arrays."
    ),
    "spark_dpsynth/synthesizers/conditions.py": (
        "One file over 800 lines: a condition's and the rules' stages (cells in the model, values drawn again "
        "inside their bins, rows rejected) share one plan of columns, seeds and rounds."
    ),
}
"""Package file (repository path) -> why it is one file of more than :data:`MAX_LINES` lines, one sentence that
is also in its module docstring (whitespace folded)."""
LONG_FILES_OWNED_ELSEWHERE: frozenset[str] = frozenset()
"""Listed files whose module docstring does not carry the reason yet, while another owner edits them."""


def line_counts(root: Path) -> dict[str, int]:
    """Repository path (relative to ``root``'s parent) -> number of lines, of every ``*.py`` file under ``root``."""
    return {
        p.relative_to(root.parent).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
        for p in sorted(root.rglob("*.py"))
    }


def long_file_problems(
    root: Path, listed: dict[str, str], owned_elsewhere: frozenset[str] = frozenset()
) -> list[str]:
    """Files of more than :data:`MAX_LINES` lines not in ``listed``, listed files that are no longer long or are
    gone, and listed files (but ``owned_elsewhere``) whose module docstring does not hold their reason."""
    counts = line_counts(root)
    long = {path for path, n in counts.items() if n > MAX_LINES}
    problems = [
        f"{path}: {counts[path]} lines, not listed with a reason" for path in sorted(long - set(listed))
    ]
    problems += [f"{path}: listed, but not over {MAX_LINES} lines" for path in sorted(set(listed) - long)]
    for path in sorted(long & set(listed) - owned_elsewhere):
        doc = ast.get_docstring(ast.parse((root.parent / path).read_text(encoding="utf-8"))) or ""
        if " ".join(listed[path].split()) not in " ".join(doc.split()):
            problems.append(f"{path}: its module docstring does not give the reason {listed[path]!r}")
    return problems


def test_no_package_file_is_over_800_lines_unless_listed_with_its_reason() -> None:
    """Modules say what they hold: no file of the package has more than :data:`MAX_LINES` lines, except those of
    :data:`LONG_FILES`, each with its reason written at its top."""
    assert long_file_problems(PACKAGE, LONG_FILES, LONG_FILES_OWNED_ELSEWHERE) == []
    assert sorted(LONG_FILES_OWNED_ELSEWHERE - set(LONG_FILES)) == []


def test_the_long_file_scan(tmp_path: Path) -> None:
    pkg = tmp_path / "spark_dpsynth"
    pkg.mkdir()
    body = "x = 1\n" * MAX_LINES
    (pkg / "short.py").write_text(body)
    (pkg / "long.py").write_text('"""Long: one protocol."""\n' + body)
    (pkg / "bare.py").write_text('"""No reason."""\n' + body)
    assert long_file_problems(pkg, {"spark_dpsynth/long.py": "Long: one   protocol."}) == [
        "spark_dpsynth/bare.py: 801 lines, not listed with a reason"
    ]
    assert long_file_problems(
        pkg, {"spark_dpsynth/bare.py": "One protocol.", "spark_dpsynth/short.py": "x"}
    ) == [
        "spark_dpsynth/long.py: 801 lines, not listed with a reason",
        "spark_dpsynth/short.py: listed, but not over 800 lines",
        "spark_dpsynth/bare.py: its module docstring does not give the reason 'One protocol.'",
    ]
