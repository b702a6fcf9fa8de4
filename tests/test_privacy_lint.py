"""Privacy lint: no non-cryptographic randomness in the privacy code path (issue 3).

The privacy code path draws noise only from OpenDP (cryptographic) and keys only from ``secrets``; test mode's
seeded generators live in ``spark_dpsynth/privacy/_seeded.py``, which is the only exception.
"""

from __future__ import annotations

import ast

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "spark_dpsynth"
PRIVATE_PARTS = ("privacy", "mechanisms", "data", "release")
"""The subpackages that read private data, draw privacy noise or hold the release: found by the layout."""
TEST_MODE_MODULE = PACKAGE / "privacy" / "_seeded.py"
PRIVACY_PATH = sorted(
    str(p.relative_to(PACKAGE))
    for part in PRIVATE_PARTS
    for p in (PACKAGE / part).rglob("*.py")
    if p != TEST_MODE_MODULE
)


def violations(source: str) -> list[str]:
    """Uses of ``random``, ``numpy.random`` or an unseeded ``F.rand``/``F.randn`` in Python source."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [
                f"import {a.name}"
                for a in node.names
                if a.name.split(".")[0] == "random" or a.name == "numpy.random"
            ]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] == "random" or node.module.startswith("numpy.random"):
                found.append(f"from {node.module} import ...")
            if node.module == "numpy" and any(a.name == "random" for a in node.names):
                found.append("from numpy import random")
        elif isinstance(node, ast.Attribute) and node.attr == "random":
            if isinstance(node.value, ast.Name) and node.value.id in ("np", "numpy"):
                found.append(f"{node.value.id}.random (line {node.lineno})")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("rand", "randn") and not node.args and not node.keywords:
                found.append(f"unseeded {node.func.attr}() (line {node.lineno})")
    return found


@pytest.mark.parametrize("module", PRIVACY_PATH)
def test_privacy_path_has_no_insecure_randomness(module: str) -> None:
    source = (PACKAGE / module).read_text()
    assert violations(source) == []


@pytest.mark.parametrize(
    "snippet",
    [
        "import random",
        "from random import gauss",
        "import numpy as np\nx = np.random.normal()",
        "import numpy as np\nrng = np.random.default_rng(1)",
        "from numpy.random import default_rng",
        "from numpy import random",
        "from pyspark.sql import functions as F\ncol = F.rand()",
        "from pyspark.sql import functions as F\ncol = F.randn()",
    ],
)
def test_lint_catches_insecure_randomness(snippet: str) -> None:
    assert violations(snippet), snippet


def test_lint_accepts_cryptographic_and_seeded_spark_randomness() -> None:
    ok = "import secrets\nk = secrets.randbits(64)\nfrom pyspark.sql import functions as F\nc = F.rand(7)"
    assert violations(ok) == []


def test_seeded_generators_are_confined_to_test_mode_module() -> None:
    assert violations(TEST_MODE_MODULE.read_text()), "the test-mode module is the exception"
    assert {"mechanisms/marginals.py", "privacy/noise.py", "data/prepare.py"} <= set(PRIVACY_PATH)
    assert TEST_MODE_MODULE.read_text().count("NOT private") >= 1
