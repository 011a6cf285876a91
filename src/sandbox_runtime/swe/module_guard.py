"""Which new modules would be imported instead of the standard library's or the runner's.

A repository's directory comes first on the test run's ``sys.path`` (``python -m pytest``
puts the working directory there), so a new ``argparse.py`` at the root is imported instead
of the standard library's, before the tests run, and can neuter them.  Strict grading drops
such a file (:mod:`sandbox_runtime.swe.strict`); the tamper check flags it in every mode
(:mod:`sandbox_runtime.swe.tamper`).  Both ask this module which names count.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

__all__ = ["RUNNER_MODULES", "STDLIB", "ModuleGuard"]

#: Top-level names of the test runners' modules and of what they import before the tests
#: (a repository module of that name, first on ``sys.path``, would be loaded instead).
RUNNER_MODULES = frozenset(
    {
        "pytest", "_pytest", "pluggy", "unittest", "xdist", "py", "iniconfig", "packaging",
        "coverage", "pytest_cov", "hypothesis", "_hypothesis_pytestplugin", "exceptiongroup",
        "tomli", "colorama", "pygments", "execnet", "nose", "nose2", "mock", "six",
        "typing_extensions", "attr", "attrs", "_distutils_hack", "setuptools", "pkg_resources",
        "distutils", "site", "sitecustomize", "usercustomize", "_virtualenv", "pip",
    }
)  # fmt: skip
#: Files beside a module on ``sys.path`` that Python imports as that module.
_MODULE_SUFFIXES = (".py", ".pyc", ".pyw", ".so", ".pyd")

STDLIB: frozenset[str] = frozenset(getattr(sys, "stdlib_module_names", ())) | frozenset(
    sys.builtin_module_names
)
"""The standard library's module names of this interpreter."""


@dataclass(frozen=True)
class ModuleGuard:
    """What the test run imports first, and the names a new module there must not take.

    The directories on the run's ``sys.path`` ahead of the standard library are its
    ``path_dirs``.
    ``shadowed`` is the standard library's module names (of the sandbox's interpreter and
    of this one) and :data:`RUNNER_MODULES`; ``own`` the top-level names the repository
    already has there at its base commit (its own package may be called ``pytest``: a
    change to it is the fix, not shadowing).  ``path_dirs`` are repository-relative
    (``""`` is the root).
    """

    shadowed: frozenset[str]
    own: frozenset[str] = frozenset()
    path_dirs: tuple[str, ...] = ("",)

    @classmethod
    def default(cls) -> ModuleGuard:
        """The standard library of this interpreter and the runners, at the repository root."""
        return cls(STDLIB | RUNNER_MODULES)

    def shadows(self, path: str) -> str | None:
        """The module name ``path`` would shadow, or ``None``."""
        for directory in self.path_dirs:
            prefix = f"{directory}/" if directory else ""
            if not path.startswith(prefix):
                continue
            parts = path[len(prefix) :].split("/")
            if len(parts) == 1:
                name = parts[0]
                for suffix in _MODULE_SUFFIXES:
                    if name.endswith(suffix):
                        name = name[: -len(suffix)].split(".", 1)[0]
                        break
                else:
                    continue
            else:  # a package (or a directory that would become one) of that name
                name = parts[0]
            if name in self.shadowed and name not in self.own:
                return name
        return None
