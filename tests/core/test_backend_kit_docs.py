"""``docs/writing-a-backend.md`` and the third-party example use the exported toolkit only.

A backend author should never need a private module: every library name the guide gives, and
every import of the pip-installed example backend, resolves to ``sandbox_runtime.backend_kit``
(with its ``agent`` and ``testing`` modules), the error tree, or the user API.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import sandbox_runtime
import sandbox_runtime.backend_kit
import sandbox_runtime.backend_kit.agent
import sandbox_runtime.errors

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "writing-a-backend.md"
EXAMPLE = ROOT / "tests" / "fixtures" / "thirdparty-backend" / "srt_thirdparty_backend.py"
#: What a backend author may import from the library.
ALLOWED_MODULES = {
    "sandbox_runtime",
    "sandbox_runtime.backend_kit",
    "sandbox_runtime.backend_kit.agent",
    "sandbox_runtime.backend_kit.testing",
    "sandbox_runtime.errors",
}
#: Names the guide mentions that are not importable: the entry-point groups.
ENTRY_POINT_GROUPS = {"sandbox_runtime.backends"}


def _resolves(dotted: str) -> bool:
    """``dotted`` names an allowed module, or an exported name of one."""
    if dotted in ALLOWED_MODULES:
        return True
    module, _, name = dotted.rpartition(".")
    if module not in ALLOWED_MODULES:
        return False
    return name in importlib.import_module(module).__all__


def test_every_library_name_in_the_guide_is_exported() -> None:
    text = GUIDE.read_text(encoding="utf-8")
    dotted = set(re.findall(r"\bsandbox_runtime(?:\.\w+)+", text)) - ENTRY_POINT_GROUPS
    assert dotted, "the guide names the toolkit"
    assert {name for name in dotted if not _resolves(name)} == set()
    kit_names = set(re.findall(r"`backend_kit\.(\w+)", text))
    assert kit_names <= set(sandbox_runtime.backend_kit.__all__)


def test_the_guides_code_imports_only_the_toolkit() -> None:
    text = GUIDE.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    imports = [
        node
        for block in blocks
        for node in ast.walk(ast.parse(block))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sandbox_runtime")
    ]
    assert imports
    for node in imports:
        assert node.module in ALLOWED_MODULES, node.module
        module = importlib.import_module(node.module or "")
        assert {alias.name for alias in node.names} <= set(module.__all__)


def test_the_third_party_example_imports_only_the_toolkit() -> None:
    tree = ast.parse(EXAMPLE.read_text(encoding="utf-8"))
    modules = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sandbox_runtime")
    }
    assert modules
    assert modules <= ALLOWED_MODULES
