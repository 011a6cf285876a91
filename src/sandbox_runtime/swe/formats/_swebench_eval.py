"""The evaluation scripts of SWE-bench rows that carry none: the harness's recipe, or ours.

Both scripts do what the official harness's eval script does, in the same order: reset the
test files the ``test_patch`` modifies to the base commit, apply ``test_patch``, run the tests
between the harness's start and end markers, reset the test files again.  A conda ``testbed``
environment is activated only where the image has one (the harness's images do; an image
built another way may not), and the test patch's failure to apply is reported with the
harness's marker.

* :func:`harness_eval_script`: the installed swebench knows the row's repository and version
  (:class:`~sandbox_runtime.swe._harness_spec.HarnessSpec`): its ``eval_commands``, its
  ``install``, its ``test_cmd`` and its directives, exactly.
* :func:`fallback_eval_script`: it does not (a repository outside its tables, or swebench 5,
  which has no tables).  The same rules, written here: paths with a non-test extension are
  never handed to a runner (the harness's ``NON_TEST_EXTS``); the row's own ``test_cmd``
  where it names one, else the repository's own runner where the image has it (Django's
  ``tests/runtests.py`` with dotted modules, sympy's ``bin/test``), else pytest, else
  ``python -m unittest``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable

from sandbox_runtime.swe import _swebench
from sandbox_runtime.swe._harness_spec import HarnessSpec

__all__ = [
    "NON_TEST_SUFFIXES",
    "fallback_eval_script",
    "harness_eval_script",
    "patch_files",
    "runnable",
]

#: Paths the harness never hands a test runner: data and documents a test patch may add
#: (its ``NON_TEST_EXTS``; ``csv`` without a dot there too).
NON_TEST_SUFFIXES = (
    ".json",
    ".png",
    "csv",
    ".txt",
    ".md",
    ".jpg",
    ".jpeg",
    ".pkl",
    ".yml",
    ".yaml",
    ".toml",
)

_GIT = "git -c safe.directory='*'"
_PATCH_EOF = "EOF_SANDBOX_RUNTIME_TEST_PATCH"
_DIFF_HEAD = re.compile(r"^diff --git a/(?P<old>.*) b/(?P<new>.*)$")
_CONDA = (
    "if [ -f /opt/miniconda3/bin/activate ]; then\n"
    "  . /opt/miniconda3/bin/activate && conda activate testbed\n"
    "fi"
)
_DJANGO_RUNNER = "tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1"
_SYMPY_RUNNER = "bin/test -C --verbose"
_DJANGO_ID = re.compile(r"^\w+ \((?P<path>[\w.]+)\)$")


def patch_files(patch: str) -> list[str]:
    """The paths a patch touches, in order (``b/`` side, as the harness's directives)."""
    files: list[str] = []
    for line in patch.splitlines():
        head = _DIFF_HEAD.match(line)
        if head and (name := head.group("new").strip().strip('"')) not in files:
            files.append(name)
    return files


def _existing_files(patch: str) -> list[str]:
    """The paths a patch modifies that exist at the base commit (what the harness resets)."""
    files: list[str] = []
    for line in patch.splitlines():
        if line.startswith("--- a/"):
            name = line[len("--- a/") :].strip()
            if name not in files:
                files.append(name)
    return files


def _created_files(patch: str) -> list[str]:
    """The paths a patch creates (``--- /dev/null``), removed after the run.

    So the agent's diff and a later grading in the same sandbox never see them (the harness
    discards its container instead).
    """
    files: list[str] = []
    current = ""
    for line in patch.splitlines():
        head = _DIFF_HEAD.match(line)
        if head:
            current = head.group("new").strip().strip('"')
        elif line.startswith("--- /dev/null") and current and current not in files:
            files.append(current)
    return files


def runnable(paths: Iterable[str]) -> list[str]:
    """``paths`` without those the harness never hands a runner (``NON_TEST_EXTS``)."""
    return [p for p in paths if not p.endswith(NON_TEST_SUFFIXES)]


def _reset(base: str, files: Iterable[str]) -> list[str]:
    quoted = shlex.quote(base)
    return [f"{_GIT} checkout -q {quoted} -- {shlex.quote(p)} 2>/dev/null || true" for p in files]


def _apply(test_patch: str) -> list[str]:
    if not test_patch.strip():
        return []
    body = test_patch if test_patch.endswith("\n") else test_patch + "\n"
    return [
        f"if ! {_GIT} apply --whitespace=nowarn - <<'{_PATCH_EOF}'",
        body + _PATCH_EOF,
        "then",
        f"  echo '{_swebench.APPLY_PATCH_FAIL} (test patch)'",
        "  exit 1",
        "fi",
    ]


def _script(setup: list[str], test_patch: str, base: str, run: list[str]) -> str:
    reset = _reset(base, _existing_files(test_patch))
    remove = [f"rm -f -- {shlex.quote(p)}" for p in _created_files(test_patch)]
    lines = [
        "set -uo pipefail",
        _CONDA,
        *setup,
        *reset,
        *_apply(test_patch),
        f"echo '{_swebench.START_TEST_OUTPUT}'",
        *run,
        "status=$?",
        f"echo '{_swebench.END_TEST_OUTPUT}'",
        *reset,
        *remove,
        'exit "$status"',
    ]
    return "\n".join(lines) + "\n"


def harness_eval_script(spec: HarnessSpec, test_patch: str, base: str) -> str:
    """The harness's eval script for a row its tables know (see the module docstring)."""
    setup = list(spec.eval_commands)
    if spec.install:
        setup.append(spec.install)  # the harness reinstalls before testing, so do we
    command = " ".join([spec.test_cmd, *spec.directives])
    return _script(setup, test_patch, base, [f"{command} 2>&1"])


def _django_modules(files: Iterable[str], test_ids: Iterable[str]) -> list[str]:
    """Django's runner takes dotted modules under ``tests/``; its rows name ``(module.Class)``."""
    modules: list[str] = []
    for path in runnable(files):
        if path.endswith(".py"):
            name = path[: -len(".py")].removeprefix("tests/").replace("/", ".")
            modules.append(name)
    for test_id in test_ids:
        found = _DJANGO_ID.match(test_id)
        if found and "." in found.group("path"):
            modules.append(found.group("path").rpartition(".")[0])
    return list(dict.fromkeys(modules))


def _generic_runner(targets: list[str]) -> list[str]:
    """The generic runner: pytest where the sandbox has it, else unittest."""
    paths = " ".join(shlex.quote(p) for p in targets)
    modules = " ".join(
        shlex.quote(p[: -len(".py")].replace("/", ".")) for p in targets if p.endswith(".py")
    )
    return [
        'PY="$(command -v python || command -v python3)"',
        'if "$PY" -c "import pytest" 2>/dev/null; then',
        f'  "$PY" -m pytest -rA -p no:cacheprovider {paths}',
        "else",
        f'  "$PY" -m unittest -v {modules} 2>&1',
        "fi",
    ]


def _own_runner(repo: str, files: list[str], test_ids: list[str]) -> tuple[str, str] | None:
    """The repository's own runner (the file the image must have, the command), if it has one."""
    if repo == "django/django":
        modules = " ".join(shlex.quote(m) for m in _django_modules(files, test_ids))
        return "tests/runtests.py", f'"$PY" {_DJANGO_RUNNER} {modules} 2>&1'
    if repo == "sympy/sympy":
        quoted = " ".join(shlex.quote(p) for p in runnable(files))
        return "bin/test", f'"$PY" {_SYMPY_RUNNER} {quoted} 2>&1'
    return None


def fallback_eval_script(
    repo: str,
    test_patch: str,
    test_ids: list[str],
    id_files: list[str],
    base: str,
    test_cmd: str | None = None,
) -> str:
    """Our eval script for a row no installed specification covers (see the module docstring).

    ``id_files`` are the test files the row's ids name (pytest ids carry theirs); they are
    run with the patch's test files, as the harness runs only the latter but a row may list
    tests from files its patch does not touch.
    """
    files = list(dict.fromkeys(patch_files(test_patch) + id_files))
    targets = runnable(files)
    if test_cmd:
        run = [" ".join([test_cmd, *(shlex.quote(t) for t in targets)]) + " 2>&1"]
        return _script([], test_patch, base, run)
    generic = _generic_runner(targets)
    own = _own_runner(repo, files, test_ids)
    if own is None:
        return _script([], test_patch, base, generic)
    # The repository's runner when the image has its entry point, else the generic one.
    entry, command = own
    run = [
        generic[0],
        f"if [ -f {entry} ]; then",
        f"  {command}",
        "else",
        *(f"  {line}" for line in generic[1:]),
        "fi",
    ]
    return _script([], test_patch, base, run)
