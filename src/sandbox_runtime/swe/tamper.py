"""Tamper flags: what an agent changed that grading depends on.

A reward is only as good as the tests that gave it.  An agent that edits the task's tests, a
``conftest.py``, pytest's settings or an installed package can raise its own reward, and
grading in the agent's sandbox (R2E-Gym's way) would never say so.  This module lists such
changes; it never changes a reward (grading in a fresh sandbox, :mod:`sandbox_runtime.swe.
isolation`, is what takes them out of the verdict), so a run says both what the tests
concluded and whether the agent touched what they read.

Two sources, both cheap:

* the agent's diff of the repository (no command): files the task's format names as its
  tests (:meth:`RowFormat.test_paths <sandbox_runtime.swe.formats.base.RowFormat.test_paths>`),
  any ``conftest.py``, ``pytest.ini`` and ``tox.ini``, and ``setup.cfg`` / ``pyproject.toml``
  when the change is near pytest settings;
* one command at the start (:func:`take_baseline`: a marker file in the repository's git
  directory, and the interpreter's stdlib and site directories) and one after the agent
  (:func:`check`): ``find -cnewer MARKER`` over those directories, the task's tests outside
  the repository, and the repository's ignored files.  ``-cnewer`` compares the inode change
  time, which no ``touch -d`` can set back.  Bytecode caches are left out; a file deleted
  outside the repository is not seen (only directories would show it, and importing alone
  changes those).
"""

from __future__ import annotations

import logging
import posixpath
import re
import shlex
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.errors import SandboxError, SandboxGoneError
from sandbox_runtime.swe.formats import load_format
from sandbox_runtime.swe.task import Task

__all__ = [
    "Baseline",
    "TamperFlag",
    "audit",
    "baseline_or_none",
    "check",
    "flags_from_patch",
    "take_baseline",
]

logger = logging.getLogger("sandbox_runtime.swe")

_MARKER = "sandbox-runtime-tamper-marker"
_MAX_LISTED = 100
_GIT = "git -c safe.directory='*'"
_ALWAYS = {"pytest.ini": "pytest settings", "tox.ini": "tox / pytest settings"}
_IF_PYTEST = {"setup.cfg", "pyproject.toml"}
_SITE_DIRS = (
    "import site, sysconfig\n"
    "paths = set(getattr(site, 'getsitepackages', list)()) | {site.getusersitepackages()}\n"
    "paths |= {sysconfig.get_paths()[k] for k in ('stdlib', 'purelib', 'platlib')}\n"
    "print('\\n'.join(sorted(paths)))\n"
)


@dataclass(frozen=True)
class TamperFlag:
    """One change the tests depend on: where, of what kind, and why it matters."""

    path: str
    kind: str
    """``test file``, ``test config`` or ``outside repository``."""
    detail: str = ""

    def to_dict(self) -> dict[str, str]:
        """A JSON-ready dict (reports and trajectories)."""
        return asdict(self)


@dataclass(frozen=True)
class Baseline:
    """What :func:`check` compares against: the marker and the directories to search."""

    marker: str
    site_dirs: tuple[str, ...]


def take_baseline(sandbox: SandboxRuntime) -> Baseline:
    """Touch the marker and find the interpreters' directories: one command, before the agent.

    The marker lives in the repository's git directory, which no diff shows and every
    backend has; the directories are those of ``python3`` and ``python`` (in a conda
    ``testbed`` env where the image has one, as graders use).
    """
    script = (
        f"d=$({_GIT} rev-parse --absolute-git-dir) || exit 1\n"
        f'touch "$d/{_MARKER}" && echo "$d/{_MARKER}"\n'
        "if [ -f /opt/miniconda3/bin/activate ]; then\n"
        "  . /opt/miniconda3/bin/activate >/dev/null 2>&1 && conda activate testbed 2>/dev/null\n"
        "fi\n"
        "for py in python3 python; do\n"
        f'  command -v "$py" >/dev/null 2>&1 && "$py" -c {shlex.quote(_SITE_DIRS)} 2>/dev/null\n'
        "done\n"
        "exit 0\n"
    )
    result = sandbox.exec(script, timeout=120)
    lines = [line.strip() for line in result.stdout.splitlines() if line.strip()]
    if result.exit_code != 0 or not lines:
        raise SandboxError(f"cannot take the tamper baseline: {result.output.strip()[-500:]}")
    return Baseline(marker=lines[0], site_dirs=tuple(dict.fromkeys(lines[1:])))


def _patch_sections(patch: str) -> dict[str, str]:
    """Each file a diff touches, with the text of its section."""
    sections: dict[str, str] = {}
    current: str | None = None
    for line in patch.splitlines(keepends=True):
        if line.startswith("diff --git "):
            current = line.rstrip("\n").split(" b/", 1)[-1].strip().strip('"')
            sections[current] = ""
        if current is not None:
            sections[current] += line
    return sections


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def _classify(path: str, section: str | None, tests: tuple[str, ...]) -> TamperFlag | None:
    """The flag for a changed repository file, or ``None`` when grading does not read it."""
    name = posixpath.basename(path)
    if _under(path, tests):
        return TamperFlag(path, "test file", "a test the task's grading runs")
    if name == "conftest.py":
        return TamperFlag(path, "test config", "pytest loads it before the tests")
    if name in _ALWAYS:
        return TamperFlag(path, "test config", _ALWAYS[name])
    if name in _IF_PYTEST and (section is None or re.search(r"pytest", section, re.I)):
        return TamperFlag(path, "test config", "a change near pytest settings")
    return None


def flags_from_patch(task: Task, patch: str) -> list[TamperFlag]:
    """The flags a diff alone shows (no command: for patches graded without an agent)."""
    tests = tuple(p for p in load_format(task.format).test_paths(task) if not p.startswith("/"))
    flags = [_classify(path, text, tests) for path, text in _patch_sections(patch).items()]
    return [flag for flag in flags if flag is not None]


def _find(roots: Iterable[str], marker: str) -> str:
    quoted = " ".join(shlex.quote(root) for root in roots)
    return (
        f"find {quoted} \\( -name __pycache__ -o -name '*.pyc' -o -name .pytest_cache \\) "
        f"-prune -o \\( -type f -o -type l \\) -cnewer {shlex.quote(marker)} -print 2>/dev/null"
    )


def check(task: Task, sandbox: SandboxRuntime, baseline: Baseline, patch: str) -> list[TamperFlag]:
    """The flags for what the agent changed since :func:`take_baseline`: one command.

    Raises :class:`~sandbox_runtime.errors.SandboxError` when the sandbox cannot answer; the
    caller records that the check could not be made rather than claiming nothing changed.
    """
    flags = flags_from_patch(task, patch)
    seen = {flag.path for flag in flags} | set(_patch_sections(patch))
    paths = load_format(task.format).test_paths(task)
    repo_tests = tuple(p for p in paths if not p.startswith("/"))
    outside = [posixpath.relpath(p, sandbox.workdir) for p in paths if p.startswith("/")]
    marker = shlex.quote(baseline.marker)
    script = (
        f"[ -e {marker} ] || {{ echo 'the marker is gone' >&2; exit 3; }}\n"
        f"echo '#repo'; {_find(['.'], baseline.marker)} | grep -v '^\\./\\.git/' "
        f"| head -n {_MAX_LISTED}\n"
    )
    for label, roots in (("#tests", outside), ("#site", baseline.site_dirs)):
        existing = [root for root in roots if root]
        if existing:
            script += (
                f"echo '{label}'; {_find(existing, baseline.marker)} | head -n {_MAX_LISTED}\n"
            )
    result = sandbox.exec(script, timeout=300)
    if result.exit_code != 0:
        raise SandboxError(f"the tamper check failed: {result.output.strip()[-500:]}")
    section = ""
    for line in result.stdout.splitlines():
        if line.startswith("#"):
            section = line
            continue
        if section == "#repo":
            path = line[2:] if line.startswith("./") else line
            flag = _classify(path, None, repo_tests)
        elif section == "#tests":
            path = posixpath.normpath(posixpath.join(sandbox.workdir, line))
            flag = TamperFlag(path, "test file", "a test the task's grading runs")
        else:
            path = line
            flag = TamperFlag(path, "outside repository", "the interpreter's files")
        if flag is not None and flag.path not in seen:
            seen.add(flag.path)
            flags.append(flag)
    return flags


def baseline_or_none(sandbox: SandboxRuntime) -> Baseline | None:
    """:func:`take_baseline`, or ``None`` when it failed in a sandbox that is still alive.

    A task is not lost because its audit could not start; :func:`audit` then says the check
    was not made.  A sandbox that died is still :class:`~sandbox_runtime.errors.SandboxGoneError`.
    """
    try:
        return take_baseline(sandbox)
    except SandboxGoneError:
        raise
    except SandboxError as exc:
        logger.warning("no tamper baseline in %s: %s", sandbox.id, exc)
        return None


def audit(
    task: Task, sandbox: SandboxRuntime, baseline: Baseline | None, patch: str
) -> list[TamperFlag]:
    """:func:`check`, with an ``unchecked`` flag instead of an error when it cannot be made."""
    if baseline is None:
        return [TamperFlag("", "unchecked", "no baseline was taken at the start")]
    try:
        return check(task, sandbox, baseline, patch)
    except SandboxError as exc:
        return [TamperFlag("", "unchecked", str(exc)[:300])]
