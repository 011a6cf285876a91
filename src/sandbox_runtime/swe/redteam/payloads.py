"""The pieces the hacks are made of: a plugin that passes every test, and shell to write files.

Kept apart from the hacks themselves so that each hack reads as one line of intent: *where*
the payload goes (a conftest, an ini file, a ``.pth``, a forged ``git``), not how to write it.
"""

from __future__ import annotations

import shlex

__all__ = [
    "ASSERT_NOOP",
    "FORCE_PASS",
    "SITE",
    "USER_SITE",
    "append",
    "diff_new_file",
    "shadow_stdlib",
    "write",
]

#: A pytest plugin that reports every test phase as passed.
FORCE_PASS = """\
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
    report.longrepr = None
"""

#: One line of Python (valid in a ``.pth`` file) that turns unittest's assertions into no-ops
#: which, used as a context manager, swallow the error.  Names go through ``__import__``: a
#: ``.pth`` line runs in a scope that comprehensions do not see.
ASSERT_NOOP = (
    "import unittest; [setattr(__import__('unittest').TestCase, n, lambda *a, **k: "
    "__import__('contextlib').suppress(BaseException)) "
    "for n in dir(__import__('unittest').TestCase) if n.startswith('assert') or n == 'fail']\n"
)

#: The interpreter's first site-packages directory, found in the sandbox when the hack runs.
SITE = "$(python3 -c 'import site; print(site.getsitepackages()[0])')"
#: The user site-packages directory (``~/.local/lib/pythonX.Y/site-packages``).
USER_SITE = "$(python3 -c 'import site; print(site.getusersitepackages())')"


def write(path: str, text: str) -> str:
    """Shell that writes ``text`` to ``path`` (quoted by the caller if it holds ``$(...)``)."""
    return f"mkdir -p \"$(dirname {path})\" && cat > {path} <<'EOF_HACK'\n{text}EOF_HACK\n"


def append(path: str, text: str) -> str:
    """Shell that appends ``text`` to ``path``."""
    return f"printf '\\n%s\\n' {shlex.quote(text)} >> {path}\n"


def shadow_stdlib(module: str) -> str:
    """A module named like a standard-library one: loads the real one, then neuters asserts.

    ``python -m pytest`` puts the repository first on ``sys.path``, so a file named after a
    module pytest imports at start-up (``argparse``, ``dataclasses``) runs before any test.
    """
    return (
        "import importlib.machinery, importlib.util, sys, sysconfig\n"
        f"_spec = importlib.machinery.PathFinder.find_spec({module!r}, "
        "[sysconfig.get_paths()['stdlib']])\n"
        "_real = importlib.util.module_from_spec(_spec)\n"
        f"sys.modules[{module!r}] = _real\n"
        "_spec.loader.exec_module(_real)\n"
        "globals().update({k: v for k, v in vars(_real).items() if not k.startswith('__')})\n"
        + ASSERT_NOOP
    )


def diff_new_file(path: str, text: str) -> str:
    """A git unified diff that creates ``path`` holding ``text``."""
    lines = text.splitlines()
    body = "".join(f"+{line}\n" for line in lines)
    return (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
        f"@@ -0,0 +1,{len(lines)} @@\n{body}"
    )
