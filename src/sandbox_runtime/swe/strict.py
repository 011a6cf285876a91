"""Strict grading: only the patch's change to non-test source reaches the tests.

A policy trained on a reward learns whatever raises it.  Besides fixing the code, a patch can
raise a test reward by changing what the tests are or how they run: a ``conftest.py`` that
marks every test passed, a pytest plugin loaded from ``addopts`` or from an entry point, a
``sitecustomize``/``.pth`` file that replaces ``unittest``'s assertions, a rewritten test
runner script, tests deleted or marked to be skipped, an edited site-packages.  Tamper flags
(:mod:`sandbox_runtime.swe.tamper`) name such changes; a trainer reads the reward, not the
flags, so strict grading takes them out of the reward instead:

* the patch text is read whole first (:mod:`sandbox_runtime.swe.patch_text`): anything but
  git's unified diff refuses it (0, ``refused``, flagged), and what was read is applied by
  ``git apply`` alone, with no fuzz;
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

* a new module that would be imported instead of the standard library's or the runner's
  (a ``/testbed/argparse.py``) is dropped; which names and directories count is asked of the
  fresh sandbox (:func:`module_guard`).

Each dropped file is reported (:class:`DroppedChange`: path and why), so a run says what
the reward was computed without.  What strict grading cannot take out is the fix's own
code: the source files it changes run inside the test process.  A change there that only
games the exit code (``os._exit(0)`` at exit) earns nothing, because every format grades by
per-test results, not exit codes; a source change written to forge those results is
detected by its effect instead: :func:`grade_strict` runs the canary
(:mod:`sandbox_runtime.swe.canary`) after the tests.  And the verdicts are not taken from
the log alone, which that code can print into: pytest records them out of band, and a log
that contradicts the record earns 0 (:mod:`sandbox_runtime.swe.outcome_record`).
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
from sandbox_runtime.swe.canary import modules_of, run_canary
from sandbox_runtime.swe.commit import is_r2e_test_path
from sandbox_runtime.swe.formats import load_format
from sandbox_runtime.swe.grading import GradeResult, grade
from sandbox_runtime.swe.module_guard import RUNNER_MODULES, STDLIB, ModuleGuard
from sandbox_runtime.swe.outcome_record import check_record, recorded
from sandbox_runtime.swe.patch_text import PatchRefused, PatchSection, read_patch
from sandbox_runtime.swe.tamper import TamperFlag
from sandbox_runtime.swe.task import Task

__all__ = [
    "DroppedChange",
    "FileChange",
    "FilteredPatch",
    "GradingMode",
    "ModuleGuard",
    "PatchRefused",
    "StrictApplied",
    "apply_strict",
    "check_canary",
    "drop_reason",
    "filter_patch",
    "grade_recorded",
    "grade_strict",
    "module_guard",
    "outside_changes",
    "refused_grade",
    "resolve_grading",
    "settings_for_tests_changed",
    "split_patch",
]

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

_GIT = "git -c safe.directory='*'"
#: Files the interpreter or the shell reads before the tests run, and files of environment.
_ENV_FILES = {
    ".env": "an environment file the test runner may read",
    ".envrc": "an environment file the shell may read",
    ".bashrc": "a shell startup file",
    ".bash_profile": "a shell startup file",
    ".profile": "a shell startup file",
    ".pythonrc.py": "the interpreter's startup file",
    ".coveragerc": "coverage settings the runner reads",
    "pytest.toml": "pytest settings",
    ".pytest.toml": "pytest settings",
}
#: Files that only configure tests: any change to them is dropped.
_TEST_SETTINGS = {
    "pytest.ini": "pytest settings",
    ".pytest.ini": "pytest settings",
    "tox.ini": "tox / pytest settings",
    "noxfile.py": "the test session runner (nox)",
    **_ENV_FILES,
}
#: Files that hold test settings among others: dropped only when those sections changed.
_MIXED_SETTINGS = frozenset({"setup.cfg", "pyproject.toml"})
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
    section: PatchSection | None = field(default=None, compare=False, repr=False)
    """The section as the strict reader read it (modes, renames, added lines)."""

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
    refused: str = ""
    """Why the patch text was refused whole (not git's unified diff, a rename onto a test,
    a symlink into the tests...): an error of the submission, nothing of it applied."""
    modules: list[str] = field(default_factory=list)
    """The dotted names of the Python modules the applied part changed (for the canary)."""
    applied_by: str = ""
    """``git apply`` (strict grading applies with nothing else), or empty when nothing was."""


def split_patch(patch: str) -> list[FileChange]:
    """The diff's sections, one per file, as the strict reader reads them.

    Raises :class:`~sandbox_runtime.swe.patch_text.PatchRefused` for a text that is not
    only git's unified diff (:mod:`sandbox_runtime.swe.patch_text`); prose before the
    first section is left out.
    """
    return [FileChange(section.paths, section.text, section) for section in read_patch(patch)]


def drop_reason(
    path: str, task_tests: Iterable[str] = (), *, guard: ModuleGuard | None = None
) -> str | None:
    """Why a change to repository file ``path`` must not reach grading, or ``None``.

    ``settings`` files (``setup.cfg``, ``pyproject.toml``) return ``None`` here: their change
    is judged by its content (:func:`settings_for_tests_changed`).  ``guard`` says what the
    test run imports first (:func:`module_guard` of the grading sandbox); without it, this
    interpreter's standard library and the runners' modules at the repository root.
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
    shadowed = (guard or ModuleGuard.default()).shadows(path)
    if shadowed is not None:
        kind = "the test runner's" if shadowed in RUNNER_MODULES else "the standard library's"
        return f"it would shadow {kind} module {shadowed!r} in the test run"
    if is_r2e_test_path(path) or any(part in _TEST_DIRS for part in parts[:-1]):
        return "a test file"
    return None


def filter_patch(task: Task, patch: str, *, guard: ModuleGuard | None = None) -> FilteredPatch:
    """Sort each file of ``patch`` into kept, settings to check, or dropped (with why).

    Raises :class:`PatchRefused` for a text that is not only git's unified diff, and for a
    section that would move a test's content (a rename or copy onto or off a test file) or
    make a symbolic link that leads into the tests or out of the repository: those are
    refused whole, not dropped, since a patch that tries them is no honest fix.
    """
    tests = tuple(p for p in load_format(task.format).test_paths(task) if not p.startswith("/"))
    result = FilteredPatch()
    for change in split_patch(patch):
        reasons = [why for why in (drop_reason(p, tests, guard=guard) for p in change.paths) if why]
        if change.section is not None:
            _refuse_moves(change.section, reasons, tests, guard)
        if reasons:
            result.dropped.append(DroppedChange(change.path, reasons[0]))
        elif any(posixpath.basename(p) in _MIXED_SETTINGS for p in change.paths):
            result.settings.append(change)
        else:
            result.kept.append(change)
    return result


def _refuse_moves(
    section: PatchSection, reasons: list[str], tests: tuple[str, ...], guard: ModuleGuard | None
) -> None:
    """Refuse a rename/copy that touches a test, and a symlink into tests or out of the repo."""
    onto = drop_reason(section.new_path, tests, guard=guard) if section.new_path else None
    if (section.rename or section.copy) and onto:
        kind = "rename" if section.rename else "copy"
        raise PatchRefused(
            section.start_line, f"a {kind} onto {section.new_path} ({onto}) is refused"
        )
    if section.new_mode == "160000":  # pragma: no cover - the reader refuses gitlinks
        raise PatchRefused(section.start_line, "a gitlink")
    if not section.symlink or section.new_path is None:
        return
    target = "".join(section.added).strip()
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(section.new_path), target))
    if target.startswith("/") or joined == ".." or joined.startswith("../"):
        raise PatchRefused(section.start_line, "a symlink out of the repository")
    into = (drop_reason(name, tests, guard=guard) for name in (joined, f"{joined}/_.py"))
    if reasons or any(into):
        raise PatchRefused(section.start_line, f"a symlink into what the tests read: {joined}")


def module_guard(sandbox: SandboxRuntime) -> ModuleGuard:
    """What the test run in ``sandbox`` (fresh, at the base commit: trusted) imports first.

    Asks the sandbox's interpreter once for its standard library's names and its
    ``PYTHONPATH``, and git for the top-level names the repository has at its base in each
    directory on that path (the root, ``src/``, ``PYTHONPATH`` entries inside the repo).
    """
    probe = 'p=$(command -v python || command -v python3) && "$p" -c ' + shlex.quote(
        "import os, sys; "
        "print(' '.join(sorted(set(getattr(sys, 'stdlib_module_names', ())) "
        "| set(sys.builtin_module_names)))); "
        "print(os.environ.get('PYTHONPATH', ''))"
    )
    result = sandbox.exec(probe, timeout=60)
    lines = result.stdout.splitlines() if result.exit_code == 0 else []
    stdlib = frozenset(lines[0].split()) if lines else frozenset()
    dirs = ["", "src"]
    for entry in (lines[1] if len(lines) > 1 else "").split(":"):
        relative = posixpath.relpath(posixpath.normpath(entry), sandbox.workdir) if entry else "."
        if entry.startswith("/") and not relative.startswith(".."):
            dirs.append("" if relative == "." else relative)
    base = sandbox.base_commit()
    own: set[str] = set()
    for directory in dict.fromkeys(dirs):
        tree = f"{base}:{directory}" if directory else base
        listed = sandbox.exec(f"{_GIT} ls-tree --name-only {shlex.quote(tree)}", timeout=60)
        if listed.exit_code == 0:
            for name in listed.stdout.splitlines():
                own.add(name.split(".", 1)[0] if "." in name else name)
    return ModuleGuard(STDLIB | stdlib | RUNNER_MODULES, frozenset(own), tuple(dict.fromkeys(dirs)))


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

    The text is read whole first (:mod:`sandbox_runtime.swe.patch_text`): anything that is
    not git's unified diff refuses the whole patch (``refused``; nothing applied).  Dropped
    files are never applied; the rest is applied by ``git apply`` alone (no ``--recount``,
    no ``patch --fuzz``), all or nothing.  A ``setup.cfg`` / ``pyproject.toml`` change is
    applied and taken back when its test sections changed.  A patch whose allowed part is
    empty applies trivially (the tests then grade the untouched repository).
    """
    if not patch.strip():  # no change at all: the tests grade the untouched repository
        return StrictApplied(True, "nothing to apply")
    try:
        filtered = filter_patch(task, patch, guard=module_guard(sandbox))
    except PatchRefused as exc:
        return StrictApplied(False, f"refused: {exc}", refused=str(exc))
    dropped = list(filtered.dropped)
    modules = modules_of(p for change in filtered.kept for p in change.paths)
    if not filtered.applicable.strip():
        return StrictApplied(True, "nothing left to apply", dropped, modules=modules)
    result = sandbox.exec(
        f"{_GIT} apply --whitespace=nowarn -", stdin=filtered.applicable.encode(), timeout=120
    )
    if result.exit_code != 0:
        message = result.output.strip() or "the patch does not apply"
        return StrictApplied(False, message, dropped, modules=modules)
    base = sandbox.base_commit()
    for change in filtered.settings:
        path = change.path
        before = _file_at(sandbox, base, path)
        after = sandbox.read_text(path, errors="replace") if sandbox.exists(path) else None
        if settings_for_tests_changed(posixpath.basename(path), before, after):
            _restore(sandbox, base, path, before is not None)
            dropped.append(DroppedChange(path, "its test settings changed"))
    return StrictApplied(
        True, result.output.strip(), dropped, modules=modules, applied_by="git apply"
    )


def refused_grade(done: StrictApplied) -> GradeResult:
    """The 0 of a patch whose text strict grading refused (nothing was applied or run).

    A patch that reads as git's diff but does not apply exactly is refused too: strict
    grading applies with no fuzz, and a hunk that needs some is either a broken patch or one
    written to apply differently than it reads (a wrong context line hiding what follows).
    """
    why = done.refused or (
        "it does not apply exactly (strict grading applies with no fuzz): "
        + (done.message or "git apply refused it").strip()[:300]
    )
    return GradeResult(0.0, f"patch refused: {why}", refused=why)


def check_canary(
    sandbox: SandboxRuntime, done: StrictApplied, graded: GradeResult, *, timeout: float
) -> GradeResult:
    """``graded`` after the canary (:mod:`sandbox_runtime.swe.canary`): a trip makes it 0.

    Runs only when the tests gave a verdict; the canary's state lands in ``graded.canary``.
    """
    graded.applied_by = graded.applied_by or done.applied_by
    if graded.reward is None:
        return graded
    canary = run_canary(sandbox, done.modules, timeout=min(timeout, 120.0))
    graded.canary = canary.state
    if canary.tripped and graded.reward:
        graded.reward = 0.0
        graded.reason = f"canary tripped ({canary.detail}); the tests said: {graded.reason}"
    elif canary.tripped:
        graded.reason = f"{graded.reason}; canary tripped ({canary.detail})"
    return graded


def grade_recorded(task: Task, sandbox: SandboxRuntime, *, timeout: float) -> GradeResult:
    """The task's tests graded with pytest's verdicts recorded out of band and checked.

    The log's verdict stands only where the record vouches for it
    (:mod:`sandbox_runtime.swe.outcome_record`); a sandbox fault setting up or reading the
    record is an infrastructure error (no reward).
    """
    try:
        with recorded(sandbox) as recorder:
            graded = grade(task, sandbox, timeout=timeout)
    except SandboxError as exc:
        return GradeResult(None, f"infrastructure error: outcome record: {exc}"[:500])
    try:
        return check_record(sandbox, recorder, graded)
    finally:
        recorder.remove(sandbox)


def grade_strict(
    task: Task, sandbox: SandboxRuntime, done: StrictApplied, *, timeout: float
) -> GradeResult:
    """The grade of a strictly applied patch: the tests' verdict, then the canary's check.

    A refused patch is 0 without running anything (``refused`` says why).  After the tests
    gave a verdict, the canary (:mod:`sandbox_runtime.swe.canary`) runs once with the kept
    modules imported; if it is reported passed, the reward is 0 whatever the tests said.
    A caller that applied the kept change another way builds ``done`` itself
    (``StrictApplied(True, modules=canary.modules_of(kept_paths), applied_by=...)``).
    """
    if done.refused:
        return refused_grade(done)
    graded = grade_recorded(task, sandbox, timeout=timeout)
    return check_canary(sandbox, done, graded, timeout=timeout)
