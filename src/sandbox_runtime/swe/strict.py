"""Strict grading: only the patch's change to non-test source reaches the tests.

A policy trained on a reward learns whatever raises it.  Besides fixing the code, a patch can
raise a test reward by changing what the tests are or how they run: a ``conftest.py`` that
marks every test passed, a pytest plugin loaded from ``addopts`` or from an entry point, a
``sitecustomize``/``.pth`` file that replaces ``unittest``'s assertions, a rewritten test
runner script, tests deleted or marked to be skipped, an edited site-packages.  Tamper flags
(:mod:`sandbox_runtime.swe.tamper`) name such changes; a trainer reads the reward, not the
flags, so strict grading takes them out of the reward instead:

* grading always runs in a fresh sandbox from the task's image (as ``--grade-in fresh``), so
  nothing outside the repository (the interpreter's files, R2E-Gym's hidden tests and
  ``run_tests.sh``, ignored files) reaches it;
* the agent's diff of the repository is split by file and each file's change that grading
  would read (:func:`drop_reason`) is dropped before the rest is applied, as the SWE-bench
  harness resets the test files it owns, but for every test file, test setting and startup
  hook, not only the ones the task's ``test_patch`` touches;
* ``setup.cfg`` and ``pyproject.toml`` hold test settings next to build metadata.  Their
  change is kept when the sections pytest and tox read (``[tool:pytest]``, ``[tox:tox]``,
  ``[tool.pytest...]``, ``[tool.tox]``, and any ``pytest11`` entry-point group) are the same
  as at the base commit, and the whole file's change is dropped when they differ or the file
  no longer parses.  The whole file, not only the section: a file with one section taken
  back is a file neither the agent nor the repository wrote, and a fix rarely needs to
  change test settings in the same patch.

Each dropped file is reported (:class:`DroppedChange`: path and why), so a run says what
the reward was computed without.  What strict grading cannot take out is the fix's own
code: the source files it changes run inside the test process.  A change there that only
games the exit code (``os._exit(0)`` at exit) earns nothing, because every format grades by
per-test results, not exit codes; a source change written to forge those results is not
caught here.
"""

from __future__ import annotations

import configparser
import enum
import posixpath
import shlex
import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.errors import ConfigError, SandboxError
from sandbox_runtime.swe.commit import is_r2e_test_path
from sandbox_runtime.swe.formats import load_format
from sandbox_runtime.swe.tamper import TamperFlag
from sandbox_runtime.swe.task import Task

__all__ = [
    "DroppedChange",
    "FileChange",
    "FilteredPatch",
    "GradingMode",
    "StrictApplied",
    "apply_strict",
    "drop_reason",
    "filter_patch",
    "outside_changes",
    "resolve_grading",
    "settings_for_tests_changed",
    "split_patch",
]

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

_GIT = "git -c safe.directory='*'"
#: Files that only configure tests: any change to them is dropped.
_TEST_SETTINGS = {
    "pytest.ini": "pytest settings",
    ".pytest.ini": "pytest settings",
    "tox.ini": "tox / pytest settings",
    "noxfile.py": "the test session runner (nox)",
}
#: Files that hold test settings among others: dropped only when those sections changed.
_MIXED_SETTINGS = frozenset({"setup.cfg", "pyproject.toml"})
#: Top-level names that would shadow the test runner's own modules for ``python -m pytest``.
_RUNNER_MODULES = frozenset({"pytest", "_pytest", "pluggy", "unittest", "xdist"})
#: Directory names that hold tests (R2E-Gym's and SWE-bench's rules together).
_TEST_DIRS = frozenset({"test", "tests", "Test", "Tests", "testing", "e2e"})


class GradingMode(str, enum.Enum):
    """What of the agent's work reaches grading."""

    BENCHMARK = "benchmark"
    """Whatever the benchmark's own harness lets through (``--grade-in`` says where)."""
    STRICT = "strict"
    """Only the changes to non-test source, in a fresh sandbox (this module)."""


def resolve_grading(mode: str | GradingMode | None, grade_in: str | None) -> GradingMode:
    """``mode`` checked against ``grade_in``: strict grading only ever runs in a fresh sandbox.

    Raises :class:`~sandbox_runtime.errors.ConfigError` for an unknown mode or for strict
    grading asked to run in the agent's own sandbox (whose files outside the repository
    cannot be taken back).
    """
    try:
        resolved = GradingMode(mode or GradingMode.BENCHMARK)
    except ValueError:
        known = ", ".join(m.value for m in GradingMode)
        raise ConfigError(f"unknown grading mode {mode!r} (known: {known})") from None
    if resolved is GradingMode.STRICT and grade_in == "same":
        raise ConfigError(
            "strict grading runs in a fresh sandbox; it cannot grade in the agent's (same)"
        )
    return resolved


@dataclass(frozen=True)
class DroppedChange:
    """One file whose change strict grading kept away from the tests, and why."""

    path: str
    why: str

    def to_dict(self) -> dict[str, str]:
        """A JSON-ready dict (reports, trajectories, ``GradeResult.dropped``)."""
        return asdict(self)


@dataclass(frozen=True)
class FileChange:
    """One file's section of a diff: its paths (old and new, once for a plain change)."""

    paths: tuple[str, ...]
    text: str

    @property
    def path(self) -> str:
        """The file's path after the change (its only path unless renamed)."""
        return self.paths[-1]


@dataclass
class FilteredPatch:
    """A diff split into what may reach the tests, what must be checked, and what may not."""

    kept: list[FileChange] = field(default_factory=list)
    settings: list[FileChange] = field(default_factory=list)
    """``setup.cfg`` / ``pyproject.toml`` changes, kept unless their test sections changed."""
    dropped: list[DroppedChange] = field(default_factory=list)

    @property
    def applicable(self) -> str:
        """The diff of the kept and the to-be-checked files, in their original order."""
        return "".join(change.text for change in self.kept + self.settings)


@dataclass
class StrictApplied:
    """What :func:`apply_strict` did: whether the allowed part applied, and what it dropped."""

    applied: bool
    message: str = ""
    dropped: list[DroppedChange] = field(default_factory=list)


def _unquote(name: str) -> str:
    name = name.strip()
    if len(name) >= 2 and name[0] == name[-1] == '"':
        name = name[1:-1].encode().decode("unicode_escape").encode("latin-1").decode()
    return name


def _strip_prefix(name: str) -> str | None:
    name = _unquote(name)
    if name == "/dev/null":
        return None
    return name[2:] if name[:2] in ("a/", "b/") else name


def _section_paths(header: str, lines: Iterable[str]) -> tuple[str, ...]:
    """Every path a file's section names: ``---``/``+++``, renames and copies, the header."""
    paths: list[str] = []
    for line in lines:
        for prefix in ("--- ", "+++ ", "rename from ", "rename to ", "copy from ", "copy to "):
            if line.startswith(prefix):
                raw = line[len(prefix) :].rstrip("\n").split("\t", 1)[0]
                name = _strip_prefix(raw) if prefix[0] in "-+" else _unquote(raw)
                if name is not None and name not in paths:
                    paths.append(name)
    if not paths and header.startswith("diff --git "):  # a mode change, an empty file
        paths.append(_unquote(header.rstrip("\n").split(" b/", 1)[-1]))
    return tuple(paths) or ("",)


def split_patch(patch: str) -> list[FileChange]:
    """The diff's sections, one per file; text before the first section is left out.

    A section starts at ``diff --git`` or, in a plain unified diff (as models write them), at
    a ``---`` line followed by ``+++`` that does not belong to the ``diff --git`` before it.
    """
    lines = patch.splitlines(keepends=True)
    sections: list[list[str]] = []
    awaiting_names = False  # a ``diff --git`` header whose ``---``/``+++`` are still to come
    for index, line in enumerate(lines):
        following = lines[index + 1] if index + 1 < len(lines) else ""
        plain_start = line.startswith("--- ") and following.startswith("+++ ")
        if line.startswith("diff --git ") or (plain_start and not awaiting_names):
            sections.append([line])
            awaiting_names = line.startswith("diff --git ")
            continue
        if plain_start or line.startswith("@@"):
            awaiting_names = False
        if sections:
            sections[-1].append(line)
    return [
        FileChange(_section_paths(section[0], _until_hunk(section)), "".join(section))
        for section in sections
    ]


def _until_hunk(lines: list[str]) -> Iterable[str]:
    for line in lines:
        if line.startswith("@@") or line.startswith("GIT binary patch"):
            return
        yield line


def drop_reason(path: str, task_tests: Iterable[str] = ()) -> str | None:
    """Why a change to repository file ``path`` must not reach grading, or ``None``.

    ``settings`` files (``setup.cfg``, ``pyproject.toml``) return ``None`` here: their change
    is judged by its content (:func:`settings_for_tests_changed`).
    """
    parts = path.split("/")
    name = parts[-1]
    if any(path == t or path.startswith(t.rstrip("/") + "/") for t in task_tests):
        return "a test the task's grading runs"
    if name == "conftest.py":
        return "pytest loads it before the tests"
    if name in _TEST_SETTINGS:
        return _TEST_SETTINGS[name]
    if name in ("sitecustomize.py", "usercustomize.py") or name.endswith(".pth"):
        return "the interpreter runs it at startup"
    if name == "run_tests.sh" or "r2e_tests" in parts:
        return "the task's test runner"
    if any(part.endswith((".dist-info", ".egg-info", ".egg-link")) for part in parts):
        return "package metadata (its entry points load pytest plugins)"
    if parts[0].removesuffix(".py") in _RUNNER_MODULES:
        return "it would shadow the test runner's own modules"
    if is_r2e_test_path(path) or any(part in _TEST_DIRS for part in parts[:-1]):
        return "a test file"
    return None


def filter_patch(task: Task, patch: str) -> FilteredPatch:
    """Sort each file of ``patch`` into kept, settings to check, or dropped (with why)."""
    tests = tuple(p for p in load_format(task.format).test_paths(task) if not p.startswith("/"))
    result = FilteredPatch()
    for change in split_patch(patch):
        reasons = [why for why in (drop_reason(p, tests) for p in change.paths) if why]
        if reasons:
            result.dropped.append(DroppedChange(change.path, reasons[0]))
        elif any(posixpath.basename(p) in _MIXED_SETTINGS for p in change.paths):
            result.settings.append(change)
        else:
            result.kept.append(change)
    return result


def _pytest11_groups(value: Any) -> list[Any]:
    """Every ``pytest11`` entry-point group anywhere in a parsed TOML document."""
    found: list[Any] = []
    if isinstance(value, dict):
        for key, item in value.items():
            found.extend([item] if key == "pytest11" else _pytest11_groups(item))
    return found


def _pyproject_view(text: str) -> Any:
    document = tomllib.loads(text)
    tool = document.get("tool", {})
    return [tool.get("pytest"), tool.get("tox"), _pytest11_groups(document)]


def _setup_cfg_view(text: str) -> Any:
    parser = configparser.RawConfigParser(strict=False)
    parser.read_string(text)
    view: dict[str, Any] = {
        name: dict(parser.items(name))
        for name in parser.sections()
        if name in ("tool:pytest", "pytest", "tox:tox") or name.startswith("testenv")
    }
    if parser.has_option("options.entry_points", "pytest11"):
        view["pytest11"] = parser.get("options.entry_points", "pytest11")
    return view


def settings_for_tests_changed(name: str, before: str | None, after: str | None) -> bool:
    """Whether the sections of ``setup.cfg`` / ``pyproject.toml`` that tests read differ.

    ``None`` is an absent file.  A file that no longer parses counts as changed (pytest would
    stop on it, which is no verdict about the fix).
    """
    view = _pyproject_view if name == "pyproject.toml" else _setup_cfg_view
    try:
        old = view(before or "")
        new = view(after or "")
    except (tomllib.TOMLDecodeError, configparser.Error, UnicodeDecodeError):
        return True
    return bool(old != new)


def outside_changes(flags: Iterable[TamperFlag]) -> list[DroppedChange]:
    """The agent's changes outside the repository that its tamper flags name.

    A fresh grading sandbox never holds them; listing them with the dropped files makes the
    outcome say everything the reward was computed without.
    """
    return [
        DroppedChange(flag.path, f"outside the repository: {flag.detail}")
        for flag in flags
        if flag.path.startswith("/")
    ]


def _file_at(sandbox: SandboxRuntime, base: str, path: str) -> str | None:
    result = sandbox.exec(f"{_GIT} show {shlex.quote(f'{base}:{path}')}", timeout=60)
    return result.stdout if result.exit_code == 0 else None


def _restore(sandbox: SandboxRuntime, base: str, path: str, existed: bool) -> None:
    quoted = shlex.quote(path)
    command = (
        f"{_GIT} checkout -q {shlex.quote(base)} -- {quoted}" if existed else f"rm -f {quoted}"
    )
    result = sandbox.exec(command, timeout=60)
    if result.exit_code != 0:
        raise SandboxError(f"cannot take back {path}: {result.output.strip()[-300:]}")


def apply_strict(task: Task, sandbox: SandboxRuntime, patch: str) -> StrictApplied:
    """Apply the part of ``patch`` strict grading allows to ``sandbox`` (prepared, at base).

    Dropped files are never applied; a ``setup.cfg`` / ``pyproject.toml`` change is applied
    and taken back when its test sections changed.  A patch whose allowed part is empty
    applies trivially (the tests then grade the untouched repository).
    """
    filtered = filter_patch(task, patch)
    dropped = list(filtered.dropped)
    if not filtered.applicable.strip():
        return StrictApplied(True, "nothing left to apply", dropped)
    applied = sandbox.apply_patch(filtered.applicable)
    if not applied:
        return StrictApplied(False, applied.message or "the patch does not apply", dropped)
    base = sandbox.base_commit()
    for change in filtered.settings:
        path = change.path
        before = _file_at(sandbox, base, path)
        after = sandbox.read_text(path, errors="replace") if sandbox.exists(path) else None
        if settings_for_tests_changed(posixpath.basename(path), before, after):
            _restore(sandbox, base, path, before is not None)
            dropped.append(DroppedChange(path, "its test settings changed"))
    return StrictApplied(True, applied.message, dropped)
