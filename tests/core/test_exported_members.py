"""The public modules export exactly what they hold, sorted, and all of it is this library's.

``__all__`` is what ``from m import *``, the docs and type checkers take as a module's API; a
name imported for the module's own use but left out of it, or listed but no longer there,
is drift nobody sees until a user trips on it.  And an object re-exported from a dependency
by accident (an httpx or pydantic type) would make that dependency's API part of ours.
"""

from __future__ import annotations
import __future__

import ast
import importlib
import inspect
import re
import sys
import types
from typing import Any

import pytest

PUBLIC_MODULES = [
    "sandbox_runtime",
    "sandbox_runtime.backend_kit",
    "sandbox_runtime.backend_kit.agent",
    "sandbox_runtime.errors",
]

#: Underscored names a module may still export.
EXPORTED_DUNDERS = {"__version__"}

#: Names bound by the way a module is written, not part of what it offers:
#: ``from typing import TYPE_CHECKING`` for imports that exist only for the type checker.
#: (``from __future__ import annotations`` binds a ``_Feature``, filtered by its type.)
WRITING_ARTEFACTS = {"TYPE_CHECKING"}


def _isort_key(name: str) -> tuple[int, tuple[str | int, ...]]:
    """The order ruff's RUF022 keeps ``__all__`` in: constants, classes, the rest; natural.

    Within each group the comparison is case-sensitive with digit runs compared as numbers
    (``a9`` before ``a10``), as ``ruff check --select RUF022 --fix`` sorts.
    """
    if len(name) > 1 and name.isupper():
        group = 0
    elif name[0].isupper():
        group = 1
    else:
        group = 2
    parts = re.split(r"(\d+)", name)
    return group, tuple(int(part) if i % 2 else part for i, part in enumerate(parts))


def _public_names(module: types.ModuleType) -> set[str]:
    """What the module binds for its users: no submodules, no ``__future__`` features."""
    names = set()
    for name, value in vars(module).items():
        if name.startswith("_") and name not in EXPORTED_DUNDERS:
            continue
        if isinstance(value, (types.ModuleType, __future__._Feature)):
            continue
        if name in WRITING_ARTEFACTS:
            continue
        names.add(name)
    return names


def _assigned_at_top_level(module: types.ModuleType, name: str) -> bool:
    """True when ``module``'s source assigns ``name`` at its top level (``X = ...``)."""
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError):
        return False
    for node in tree.body:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        if any(isinstance(target, ast.Name) and target.id == name for target in targets):
            return True
    return False


def _defining_modules(value: Any) -> list[str]:
    """Modules of this library that assign ``value`` (a constant or type alias) themselves.

    Constants (``int``, ``str``) have no ``__module__`` and a ``Literal`` alias reports
    ``typing``, so for them the defining module is found by looking for the assignment.
    """
    found = []
    for module_name, module in list(sys.modules.items()):
        if module is None or module_name.split(".")[0] != "sandbox_runtime":
            continue
        for name, bound in list(vars(module).items()):
            if bound is value and _assigned_at_top_level(module, name):
                found.append(f"{module_name}.{name}")
    return found


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_all_is_sorted_and_unique(module_name: str) -> None:
    exported = importlib.import_module(module_name).__all__
    assert exported == sorted(set(exported), key=_isort_key)


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_all_lists_exactly_the_public_names(module_name: str) -> None:
    module = importlib.import_module(module_name)
    public = _public_names(module)
    exported = set(module.__all__)
    assert sorted(public - exported) == [], "public but not in __all__"
    assert sorted(exported - public) == [], "in __all__ but not bound in the module"


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_export_is_the_library_s_own(module_name: str) -> None:
    module = importlib.import_module(module_name)
    foreign = {}
    for name in module.__all__:
        value = getattr(module, name)
        owner = getattr(value, "__module__", None)
        if isinstance(owner, str) and owner.split(".")[0] == "sandbox_runtime":
            continue
        if owner in (None, "typing") and _defining_modules(value):
            continue  # a constant or a type alias that one of our modules assigns
        foreign[name] = owner
    assert not foreign, f"exports defined outside sandbox_runtime: {foreign}"


def test_the_sort_key_agrees_with_ruff() -> None:
    """The order the key gives, for the cases RUF022 decides, as ruff 0.17 fixes them."""
    shuffled = ["b", "A_B", "Ab", "aB", "AB", "a10", "a9", "__version__", "Zed", "ab", "_x", "X1"]
    assert sorted(shuffled, key=_isort_key) == [
        *("AB", "A_B", "X1"),
        *("Ab", "Zed"),
        *("__version__", "_x", "a9", "a10", "aB", "ab", "b"),
    ]
