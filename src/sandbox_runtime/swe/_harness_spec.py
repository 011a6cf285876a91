"""The harness's own evaluation recipe for a SWE-bench row, read from the installed ``swebench``.

swebench 3.x and 4.x carry, per repository and version, how the official harness tests an
instance (``MAP_REPO_VERSION_TO_SPECS[repo][version]``: ``test_cmd``, ``eval_commands``,
``install``) and which targets it hands the runner (``get_test_directives``: the files the
``test_patch`` touches, without ``NON_TEST_EXTS`` paths, as dotted modules for Django).
swebench 5.x dropped the tables, and a repository the tables do not list has no recipe either;
:func:`harness_spec` returns ``None`` for both, and the caller grades with the library's own
rules instead (:mod:`sandbox_runtime.swe.formats._swebench_eval`).

Only the data is read here.  ``make_test_spec`` itself is not called: it also builds the image
setup scripts, which fetch the repository's requirements from GitHub for some repositories, and
its eval script assumes a conda ``testbed`` environment, which an image built another way may
not have.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

__all__ = ["HarnessSpec", "harness_spec"]

# Where get_test_directives lives: 3.x / 4.x, then 2.x.
_DIRECTIVE_MODULES = ("swebench.harness.test_spec.python", "swebench.harness.utils")


@dataclass(frozen=True, slots=True)
class HarnessSpec:
    """What the harness's eval script does for one row, as data."""

    test_cmd: str
    """The runner command (``pytest -rA``, ``bin/test -C --verbose``, ``./tests/runtests.py``)."""
    directives: tuple[str, ...]
    """The targets appended to ``test_cmd``, computed by swebench's ``get_test_directives``."""
    eval_commands: tuple[str, ...] = ()
    """Commands the harness runs first (locale exports for Django)."""
    install: str | None = None
    """The reinstall the harness runs before the tests (``python -m pip install -e .``)."""
    source: str = ""
    """``swebench <version>``, for reports."""


def _module(name: str) -> Any | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _directives_function() -> Any | None:
    for name in _DIRECTIVE_MODULES:
        found = getattr(_module(name), "get_test_directives", None)
        if callable(found):
            return found
    return None


def _python_repo(constants: Any, repo: str) -> bool:
    """Whether the harness tests ``repo`` with its Python recipe (4.x also has JS, Go, ...)."""
    languages = getattr(constants, "MAP_REPO_TO_EXT", None)
    return not isinstance(languages, dict) or languages.get(repo, "py") == "py"


def harness_spec(repo: str, version: str | None, test_patch: str) -> HarnessSpec | None:
    """The installed swebench's recipe for ``repo`` at ``version``, or ``None`` if it has none."""
    constants = _module("swebench.harness.constants")
    tables = getattr(constants, "MAP_REPO_VERSION_TO_SPECS", None)
    directives = _directives_function()
    if not isinstance(tables, dict) or directives is None or version is None:
        return None
    specs = tables.get(repo, {}).get(version)
    if (
        not isinstance(specs, dict)
        or not specs.get("test_cmd")
        or not _python_repo(constants, repo)
    ):
        return None
    instance = {"repo": repo, "version": version, "test_patch": test_patch}
    test_cmd = specs["test_cmd"]
    return HarnessSpec(
        test_cmd=" ".join(test_cmd) if isinstance(test_cmd, list) else str(test_cmd),
        directives=tuple(str(d) for d in directives(instance)),
        eval_commands=tuple(str(c) for c in specs.get("eval_commands", ())),
        install=str(specs["install"]) if specs.get("install") else None,
        source=f"swebench {_installed_version()}",
    )


def _installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("swebench")
    except PackageNotFoundError:  # pragma: no cover - importable but not installed
        return "?"
