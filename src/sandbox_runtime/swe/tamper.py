"""Tamper flags: what an agent changed that grading depends on.

A reward is only as good as the tests that gave it.  An agent that edits the task's tests, a
``conftest.py``, pytest's settings or an installed package can raise its own reward, and
grading in the agent's sandbox (R2E-Gym's way) would never say so.  This module lists such
changes; it never changes a reward (grading in a fresh sandbox, :mod:`sandbox_runtime.swe.
isolation`, is what takes them out of the verdict), so a run says both what the tests
concluded and whether the agent touched what they read.

Nothing here runs in the agent's sandbox after the agent: the agent is root there and could
replace ``find`` or ``git``.  :func:`take_baseline` runs one command *before* the agent (to
learn the interpreters' stdlib and site directories) and marks the repository and those
directories through the backend (``SandboxRuntime.mark_tree``: docker's engine, local's host
directory, another backend's file plane).  After the agent, :func:`check` reads what the
backend says changed (:func:`sandbox_runtime.swe.capture.capture`) and flags:

* repository files the task's format names as its tests, any ``conftest.py``, ``pytest.ini``,
  ``tox.ini``, and ``setup.cfg`` / ``pyproject.toml`` near pytest settings;
* the repository's git metadata (``HEAD``, refs, ``config``, hooks): history rewritten;
* outside the repository: the interpreters' directories (site-packages, the stdlib), any
  ``.pth`` / ``sitecustomize`` / ``usercustomize``, the task's tests kept outside the
  repository, and pytest's config files (``conftest.py``, ``pytest.ini``, ``setup.cfg``,
  ``tox.ini``, ``pyproject.toml``) in any directory from the repository up to ``/``, which
  pytest reads when the tests run in the same sandbox.

Bytecode caches are left out.  How much each backend's answer can be trusted is in
``docs/reliability.md``.
"""

from __future__ import annotations

import logging
import posixpath
import re
import shlex
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime._core.tree import TreeChanges, TreeMark, ignored
from sandbox_runtime.errors import SandboxError, SandboxGoneError
from sandbox_runtime.swe.formats import load_format
from sandbox_runtime.swe.module_guard import RUNNER_MODULES, STDLIB, ModuleGuard
from sandbox_runtime.swe.patch_text import PatchRefused, read_patch
from sandbox_runtime.swe.task import Task

__all__ = [
    "Baseline",
    "TamperFlag",
    "audit",
    "baseline_or_none",
    "check",
    "flags_from_patch",
    "take_baseline",
    "watch_paths",
]

logger = logging.getLogger("sandbox_runtime.swe")

_ALWAYS = {"pytest.ini": "pytest settings", "tox.ini": "tox / pytest settings"}
_IF_PYTEST = {"setup.cfg", "pyproject.toml"}
#: Files pytest reads in the repository's directory and every directory above it.
_RUNNER_CONFIGS = ("conftest.py", "pytest.ini", "setup.cfg", "tox.ini", "pyproject.toml")
_STARTUP = ("sitecustomize.py", "usercustomize.py")
#: The tools a test run calls, found on ``PATH`` (and through their links) before the agent.
_TOOLS = ("sh", "bash", "env", "python", "python3", "pytest", "git", "patch")
#: What a test run's shell reads before it starts (``PYTHON*``, ``PATH``, ``LD_PRELOAD``) and
#: the tools it runs: a change to any of them changes what the tests run with.  Single files
#: (a directory is watched only where its whole listing is cheap to compare).
SHELL_AND_TOOLS = (
    "/etc/profile",
    "/etc/profile.d/",
    "/etc/bash.bashrc",
    "/etc/environment",
    "/etc/ld.so.preload",
    "/root/.bashrc",
    "/root/.profile",
    "/root/.bash_profile",
    "/root/.bash_login",
    "/root/.pam_environment",
    *(
        f"{directory}/{tool}"
        for directory in ("/bin", "/usr/bin", "/usr/local/bin")
        for tool in ("sh", "bash", "env", "python", "python3", "pytest", "git", "patch")
    ),
)
#: Git metadata whose change rewrites what the repository's history says.
_GIT_HISTORY = ("HEAD", "packed-refs", "config", "refs/", "hooks/", "info/", "shallow")
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
    """One of ``test file``, ``test config``, ``outside repository``, ``git metadata``,
    ``patch format``."""
    detail: str = ""

    def to_dict(self) -> dict[str, str]:
        """A JSON-ready dict (reports and trajectories)."""
        return asdict(self)


@dataclass(frozen=True)
class Baseline:
    """What :func:`check` compares against: the backend's mark and the interpreters' dirs."""

    site_dirs: tuple[str, ...]
    mark: TreeMark
    tools: tuple[str, ...] = ()
    """The files the test run's tools are (each on ``PATH``, and where its links lead)."""
    own: frozenset[str] | None = None
    """The top-level names the repository had at the start in its root and ``src/`` (a
    change to its own module is the fix, a new one that shadows a standard module is not);
    ``None`` when they were not listed."""


def watch_paths(workdir: str, site_dirs: Iterable[str], outside_tests: Iterable[str]) -> list[str]:
    """What to watch outside the repository (a trailing ``/``: a whole directory).

    pytest's config files in each directory above the repository, the interpreters'
    directories with their startup hooks, the task's tests outside the repository, and
    the shell's startup files and the tools the test run calls (:data:`SHELL_AND_TOOLS`).
    """
    watch: list[str] = []
    directory = posixpath.dirname(workdir.rstrip("/"))
    while True:
        watch += [posixpath.join(directory, name) for name in _RUNNER_CONFIGS]
        if directory == "/":
            break
        directory = posixpath.dirname(directory)
    for site in site_dirs:
        if _under(site, [workdir]) or _under(workdir, [site]):
            continue
        watch += [posixpath.join(site, name) for name in _STARTUP]
        watch.append(site.rstrip("/") + "/")
    watch += [path for path in outside_tests if not _under(path, [workdir])]
    watch += list(SHELL_AND_TOOLS)
    return list(dict.fromkeys(watch))


def take_baseline(sandbox: SandboxRuntime, task: Task | None = None) -> Baseline:
    """Find the interpreters' directories (one command, before the agent) and mark the tree.

    The directories are those of ``python3`` and ``python`` (in a conda ``testbed`` env
    where the image has one, as graders use).  The mark is the backend's, taken without a
    command; everything compared later is read from outside the sandbox.
    """
    script = (
        "if [ -f /opt/miniconda3/bin/activate ]; then\n"
        "  . /opt/miniconda3/bin/activate >/dev/null 2>&1 && conda activate testbed 2>/dev/null\n"
        "fi\n"
        "for py in python3 python; do\n"
        f'  command -v "$py" >/dev/null 2>&1 && "$py" -c {shlex.quote(_SITE_DIRS)} 2>/dev/null\n'
        "done\n"
        f"for t in {' '.join(_TOOLS)}; do\n"
        '  p=$(command -v "$t" 2>/dev/null) || continue\n'
        '  case "$p" in /*) echo "tool $p"; r=$(readlink -f "$p") && echo "tool $r";; esac\n'
        "done\n"
        f"cd {shlex.quote(sandbox.workdir)} 2>/dev/null && for d in . src; do\n"
        '  [ -d "$d" ] && ls -A1 "$d" 2>/dev/null | while IFS= read -r n; do echo "own $n"; done\n'
        "done\n"
        "exit 0\n"
    )
    result = sandbox.exec(script, timeout=120)
    if result.exit_code != 0:
        raise SandboxError(f"cannot take the tamper baseline: {result.output.strip()[-500:]}")
    lines = [line.strip() for line in result.stdout.splitlines() if line.strip().startswith("/")]
    site_dirs = tuple(dict.fromkeys(lines))
    tools = tuple(
        dict.fromkeys(
            line.strip()[len("tool ") :]
            for line in result.stdout.splitlines()
            if line.strip().startswith("tool /")
        )
    )
    outside_tests: list[str] = []
    if task is not None:
        outside_tests = [p for p in load_format(task.format).test_paths(task) if p.startswith("/")]
    watch = watch_paths(sandbox.workdir, site_dirs, outside_tests) + [
        tool for tool in tools if not _under(tool, [sandbox.workdir])
    ]
    watch = list(dict.fromkeys(watch))
    own = frozenset(
        line[len("own ") :].split(".", 1)[0]
        for line in result.stdout.splitlines()
        if line.startswith("own ")
    )
    return Baseline(site_dirs=site_dirs, mark=sandbox.mark_tree(watch=watch), tools=tools, own=own)


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
    if name in _STARTUP or name.endswith(".pth"):
        return TamperFlag(path, "test config", "the interpreter runs it at startup")
    if name == "entry_points.txt" and _in_metadata(path) and _declares_plugin(section):
        return TamperFlag(path, "test config", "package metadata naming a pytest plugin")
    return None


def _in_metadata(path: str) -> bool:
    """Whether ``path`` is inside a package's metadata (``.dist-info``, ``.egg-info``)."""
    return any(part.endswith((".dist-info", ".egg-info")) for part in path.split("/")[:-1])


def _declares_plugin(text: str | None) -> bool:
    """Whether an ``entry_points.txt`` (or its diff) declares a ``pytest11`` entry point.

    pytest loads every ``pytest11`` entry point of every distribution on the import path, so
    a metadata directory at the repository's root is a plugin for any test run from there;
    other entry points (console scripts of ``pip install -e .``) are not flagged.
    """
    return text is None or re.search(r"^\+?\s*\[\s*pytest11\s*\]", text, re.M) is not None


def flags_from_patch(task: Task, patch: str) -> list[TamperFlag]:
    """The flags a diff alone shows (no command: for patches graded without an agent).

    A text git's unified-diff reader refuses (a second format hidden after a hunk, bad
    counts, ``..`` paths) is flagged too: strict grading refuses it, and benchmark grading,
    which may still apply it leniently (``patch --fuzz``), must say so.
    """
    tests = tuple(p for p in load_format(task.format).test_paths(task) if not p.startswith("/"))
    flags = [_classify(path, text, tests) for path, text in _patch_sections(patch).items()]
    if patch.strip():
        try:
            read_patch(patch)
        except PatchRefused as refused:
            flags.append(
                TamperFlag("<patch>", "patch format", f"git's reader refuses it: {refused}")
            )
    return [flag for flag in flags if flag is not None]


def _outside_flag(
    path: str, workdir: str, baseline: Baseline, outside_tests: tuple[str, ...]
) -> TamperFlag | None:
    """The flag for a changed path outside the repository, or ``None`` when tests skip it."""
    name = posixpath.basename(path)
    if ignored(path.lstrip("/")):
        return None
    if _under(path, outside_tests):
        return TamperFlag(path, "test file", "a test the task's grading runs")
    if name in _RUNNER_CONFIGS and _under(workdir, [posixpath.dirname(path)]):
        return TamperFlag(path, "test config", "pytest reads it above the repository")
    if name in _STARTUP or name.endswith(".pth"):
        return TamperFlag(path, "outside repository", "the interpreter runs it at startup")
    if _under(path, baseline.site_dirs):
        return TamperFlag(path, "outside repository", "the interpreter's files")
    if path in baseline.tools or path in SHELL_AND_TOOLS:
        return TamperFlag(path, "outside repository", "the test run's shell or tools")
    if _under(path, [w for w in SHELL_AND_TOOLS if w.endswith("/")]):
        return TamperFlag(path, "outside repository", "the test run's shell or tools")
    return None


def _shadow_flag(path: str, own: frozenset[str]) -> TamperFlag | None:
    """The flag for a new module that would be imported instead of a standard or runner one."""
    guard = ModuleGuard(STDLIB | RUNNER_MODULES, own, ("", "src"))
    name = guard.shadows(path)
    if name is None:
        return None
    whose = "the test runner's" if name in RUNNER_MODULES else "the standard library's"
    return TamperFlag(path, "test config", f"imported instead of {whose} {name!r}")


def check(task: Task, workdir: str, baseline: Baseline, found: TreeChanges) -> list[TamperFlag]:
    """The flags for what the backend says changed since the baseline (no command runs)."""
    paths = load_format(task.format).test_paths(task)
    repo_tests = tuple(p for p in paths if not p.startswith("/"))
    outside_tests = tuple(p for p in paths if p.startswith("/"))
    flags: list[TamperFlag] = []
    for change in found.changes:
        section = None
        if posixpath.basename(change.path) in (*_IF_PYTEST, "entry_points.txt"):
            section = change.data.decode("utf-8", "replace")
        flag = _classify(change.path, section, repo_tests)
        if flag is None and change.kind != "deleted" and baseline.own is not None:
            flag = _shadow_flag(change.path, baseline.own)
        if flag is not None:
            flags.append(flag)
    for rel in found.git:
        inside = rel.removeprefix(".git/")
        if any(inside == g or (g.endswith("/") and inside.startswith(g)) for g in _GIT_HISTORY):
            flags.append(TamperFlag(rel, "git metadata", "the repository's history or git config"))
    for path in found.outside:
        flag = _outside_flag(path.rstrip("/"), workdir, baseline, outside_tests)
        if flag is not None:
            flags.append(flag)
    seen: set[str] = set()
    first = []
    for flag in flags:
        if flag.path not in seen:
            seen.add(flag.path)
            first.append(flag)
    return first


def baseline_or_none(sandbox: SandboxRuntime, task: Task | None = None) -> Baseline | None:
    """:func:`take_baseline`, or ``None`` when it failed in a sandbox that is still alive.

    A task is not lost because its audit could not start; :func:`audit` then says the check
    was not made.  A sandbox that died is still :class:`~sandbox_runtime.errors.SandboxGoneError`.
    """
    try:
        return take_baseline(sandbox, task)
    except SandboxGoneError:
        raise
    except SandboxError as exc:
        logger.warning("no tamper baseline in %s: %s", sandbox.id, exc)
        return None


def audit(
    task: Task,
    workdir: str,
    baseline: Baseline | None,
    found: TreeChanges | None,
    error: str = "",
) -> list[TamperFlag]:
    """:func:`check`, with an ``unchecked`` flag instead when it could not be made."""
    if baseline is None:
        return [TamperFlag("", "unchecked", "no baseline was taken at the start")]
    if found is None:
        return [TamperFlag("", "unchecked", error[:300] or "the change could not be read")]
    return check(task, workdir, baseline, found)
