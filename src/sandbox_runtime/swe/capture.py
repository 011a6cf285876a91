"""The agent's change as the library measured it, and how it reaches a grading sandbox.

The agent is root in its sandbox: a ``git``, ``sh`` or ``python`` there may be its own, so
the change is never computed by a program in that sandbox.  :func:`capture` asks the backend
what differs in the repository from the mark taken after setup (``SandboxRuntime.mark_tree``:
docker's engine, local's host directory, another backend's file plane) and compares on this
side.  The result is a :class:`ChangeSet`: per path the new bytes and mode, a symlink's
target, or a deletion.

Fresh grading writes a change set into the new sandbox through its file plane
(:func:`apply_changes`: one archive plus removals; no patch tool, no fuzz).  Every path is
checked first (:func:`unsafe_reason`): nothing is written outside the repository, and no
symlink may point out of it or at a test; strict grading also drops, per path, what
:func:`sandbox_runtime.swe.strict.drop_reason` and
:func:`~sandbox_runtime.swe.strict.settings_for_tests_changed` refuse.  The readable patch of
reports (:func:`render_patch`) is written here too, with :mod:`difflib`, against the bytes the
grading sandbox (from the task's image, never the agent's) holds before the change.
"""

from __future__ import annotations

import base64
import difflib
import io
import posixpath
import stat
import tarfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime._core.tree import Change, TreeChanges, TreeMark
from sandbox_runtime.errors import (
    ConfigError,
    SandboxError,
    SandboxFileNotFoundError,
    SandboxGoneError,
    SandboxIsADirectoryError,
)
from sandbox_runtime.swe.formats import load_format
from sandbox_runtime.swe.strict import (
    DroppedChange,
    drop_reason,
    module_guard,
    settings_for_tests_changed,
)
from sandbox_runtime.swe.tamper import Baseline
from sandbox_runtime.swe.task import Task

__all__ = [
    "Applied",
    "ChangeSet",
    "apply_changes",
    "capture",
    "display_patch",
    "read_change",
    "render_patch",
    "unsafe_reason",
]

_SETTINGS = frozenset({"setup.cfg", "pyproject.toml"})
_FORMAT = "sandbox-runtime-changeset/1"


@dataclass
class ChangeSet:
    """The agent's change of the repository: files, symlinks and deletions, by relative path."""

    changes: list[Change] = field(default_factory=list)
    source: str = ""
    """Where it was read: ``engine`` (docker), ``host`` (local) or ``archive`` (file plane)."""

    def __bool__(self) -> bool:
        return bool(self.changes)

    @property
    def paths(self) -> list[str]:
        """The changed paths, sorted."""
        return sorted(change.path for change in self.changes)

    @property
    def written(self) -> list[str]:
        """The paths of the files the change writes (not links or deletions), sorted."""
        return sorted(change.path for change in self.changes if change.kind == "file")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (rLLM's episode artifacts), bytes as base64."""
        return {
            "format": _FORMAT,
            "source": self.source,
            "changes": [
                {
                    "path": c.path,
                    "kind": c.kind,
                    "mode": c.mode,
                    **({"data": base64.b64encode(c.data).decode()} if c.kind == "file" else {}),
                    **({"target": c.target} if c.kind == "symlink" else {}),
                }
                for c in self.changes
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ChangeSet:
        """Read :meth:`to_dict`'s form back; a malformed one is a :class:`ConfigError`."""
        if data.get("format") != _FORMAT:
            raise ConfigError(
                f"change set: format: expected {_FORMAT!r}, got {data.get('format')!r}"
            )
        changes: list[Change] = []
        for index, item in enumerate(data.get("changes") or []):
            try:
                kind = str(item["kind"])
                if kind not in ("file", "symlink", "deleted"):
                    raise ValueError(f"unknown kind {kind!r}")
                changes.append(
                    Change(
                        path=str(item["path"]),
                        kind=kind,  # type: ignore[arg-type]
                        mode=int(item.get("mode", 0o644)),
                        data=base64.b64decode(item.get("data", ""), validate=True),
                        target=str(item.get("target", "")),
                    )
                )
            except (KeyError, TypeError, ValueError) as exc:
                raise ConfigError(f"change set: changes[{index}]: {exc}") from exc
        return cls(changes, str(data.get("source", "")))


def capture(sandbox: SandboxRuntime, mark: TreeMark) -> tuple[ChangeSet, TreeChanges]:
    """What differs in the repository from ``mark``, as the backend's engine or files say.

    No command runs in ``sandbox``.  Returns the change set and the backend's full answer
    (the changed ``.git/`` paths and paths outside the repository, for the tamper flags).
    """
    found = sandbox.tree_changes(mark)
    return ChangeSet(list(found.changes), found.source), found


def read_change(
    sandbox: SandboxRuntime, baseline: Baseline | None
) -> tuple[ChangeSet | None, TreeChanges | None, str]:
    """:func:`capture` against the baseline's mark, or why it could not be read.

    Returns ``(None, None, reason)`` without a baseline or when the backend cannot answer in
    a sandbox that is still alive; a sandbox that is gone raises, as everywhere.
    """
    if baseline is None:
        return None, None, "no baseline was taken at the start"
    try:
        changes, found = capture(sandbox, baseline.mark)
    except SandboxGoneError:
        raise
    except SandboxError as exc:
        return None, None, f"the change could not be read: {exc}"
    return changes, found, ""


def display_patch(sandbox: SandboxRuntime, changes: ChangeSet | None) -> str:
    """The readable patch of the agent's sandbox until grading renders a trusted one.

    ``git diff`` in the agent's sandbox, for display only: nothing grades or flags from this
    text when a change set was read (fresh grading replaces it with :func:`render_patch` of
    what it applied).  Without a change set it is also what fresh grading applies, and the
    outcome carries an ``unchecked`` tamper flag.  A failing ``git`` leaves it empty when a
    change set exists (the agent may have replaced ``git``).
    """
    try:
        return sandbox.diff()
    except SandboxGoneError:
        raise
    except SandboxError:
        if changes is None:
            raise
        return ""


def _test_paths(task: Task) -> tuple[str, ...]:
    return tuple(p for p in load_format(task.format).test_paths(task) if not p.startswith("/"))


def unsafe_reason(change: Change, tests: Iterable[str] = ()) -> str | None:
    """Why ``change`` may never be written, in any grading mode, or ``None``.

    A path must be relative, without ``..`` or ``.git``; a symlink's target must stay in the
    repository and must not name a test the task runs.
    """
    path = change.path
    parts = path.split("/")
    if not path or path.startswith("/") or "\0" in path:
        return "not a relative path in the repository"
    if any(part in ("", ".", "..") for part in parts):
        return "the path leaves the repository"
    if parts[0] == ".git":
        return "git's own files are not part of a change"
    if change.kind != "symlink":
        return None
    target = change.target
    if not target or target.startswith("/") or "\0" in target:
        return "a symlink out of the repository"
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
    if resolved == ".." or resolved.startswith("../") or resolved.split("/")[0] == ".git":
        return "a symlink out of the repository"
    tests = tuple(tests)
    if any(resolved == t.rstrip("/") or resolved.startswith(t.rstrip("/") + "/") for t in tests):
        return "a symlink to a test the task's grading runs"
    if drop_reason(resolved, tests) is not None:
        return "a symlink to test infrastructure"
    return None


@dataclass
class _Base:
    """A path's state in the grading sandbox before the change (from the task's image)."""

    kind: str  # "file", "symlink", "dir", "absent"
    data: bytes = b""
    mode: int = 0o644


def _base_of(sandbox: SandboxRuntime, path: str) -> _Base:
    """Read one path of the grading sandbox through its file plane."""
    try:
        info = sandbox.stat(path)
    except SandboxFileNotFoundError:
        return _Base("absent")
    kind = getattr(info.type, "value", str(info.type))
    if kind == "symlink":
        return _Base("symlink", (info.symlink_target or "").encode(), 0o777)
    if kind == "dir":
        return _Base("dir")
    try:
        return _Base("file", sandbox.read_bytes(path), stat.S_IMODE(info.mode or 0o644))
    except (SandboxFileNotFoundError, SandboxIsADirectoryError):
        return _Base("absent")


@dataclass
class Applied:
    """What :func:`apply_changes` wrote and kept away, and the readable patch of what it wrote."""

    written: list[str]
    dropped: list[DroppedChange]
    patch: str


def _same(change: Change, base: _Base) -> bool:
    if change.kind == "deleted":
        return base.kind == "absent"
    if change.kind == "symlink":
        return base.kind == "symlink" and base.data == change.target.encode()
    return base.kind == "file" and base.data == change.data and base.mode == _mode(change)


def _mode(change: Change) -> int:
    """A file's permission bits as written: ``0o755`` or ``0o644`` (git's two), no set-id bits."""
    return 0o755 if change.mode & 0o111 else 0o644


def _archive(workdir: str, changes: Iterable[Change]) -> bytes:
    """One tar of the files and symlinks, member names relative to the sandbox's ``/``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for change in changes:
            name = posixpath.join(workdir, change.path).lstrip("/")
            member = tarfile.TarInfo(name)
            if change.kind == "symlink":
                member.type, member.linkname, member.mode = tarfile.SYMTYPE, change.target, 0o777
                archive.addfile(member)
            else:
                member.size, member.mode = len(change.data), _mode(change)
                archive.addfile(member, io.BytesIO(change.data))
    return buffer.getvalue()


def apply_changes(
    task: Task, sandbox: SandboxRuntime, changes: ChangeSet, *, strict: bool
) -> Applied:
    """Write ``changes`` into ``sandbox`` (prepared, at the base commit) through its file plane.

    Unsafe paths are dropped in both modes; ``strict`` also drops what strict grading keeps
    from the tests, path by path (a ``setup.cfg`` / ``pyproject.toml`` only when its test
    sections change).  A change equal to what the sandbox holds already is skipped.
    """
    tests = _test_paths(task)
    workdir = sandbox.workdir
    # What the test run imports first, asked of this (fresh, trusted) sandbox once.
    guard = module_guard(sandbox) if strict else None
    dropped: list[DroppedChange] = []
    kept: list[tuple[Change, _Base]] = []
    shown: list[tuple[Change, str, bytes, int]] = []
    for change in sorted(changes.changes, key=lambda c: c.path):
        unsafe = unsafe_reason(change, tests)
        base = (
            _base_of(sandbox, posixpath.join(workdir, change.path))
            if _plain(change)
            else _Base("absent")
        )
        why = unsafe
        if why is None and strict:
            why = drop_reason(change.path, tests, guard=guard)
        if why is None and strict and posixpath.basename(change.path) in _SETTINGS:
            before = base.data.decode("utf-8", "replace") if base.kind == "file" else None
            after = change.data.decode("utf-8", "replace") if change.kind == "file" else None
            if settings_for_tests_changed(posixpath.basename(change.path), before, after):
                why = "its test settings changed"
        if _same(change, base):
            continue
        shown.append((change, base.kind, base.data, base.mode))
        if why is not None:
            dropped.append(DroppedChange(change.path, why))
        else:
            kept.append((change, base))
    for change, base in kept:
        if change.kind == "deleted" or base.kind in ("dir", "symlink"):
            sandbox.remove(posixpath.join(workdir, change.path), recursive=base.kind == "dir")
    writes = [change for change, _ in kept if change.kind != "deleted"]
    if writes:
        sandbox.put_archive(_archive(workdir, writes))
    return Applied([change.path for change, _ in kept], dropped, render_patch(shown))


def _plain(change: Change) -> bool:
    """Whether a change's path is safe to read in the grading sandbox (relative, no ``..``)."""
    parts = change.path.split("/")
    return bool(change.path) and not change.path.startswith("/") and ".." not in parts


def _is_binary(data: bytes) -> bool:
    if b"\0" in data[:8000]:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def _lines(data: bytes) -> list[str]:
    lines = data.decode("utf-8").splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n\\ No newline at end of file\n"
    return lines


def render_patch(items: Iterable[tuple[Change, str, bytes, int]]) -> str:
    """A git-style unified diff of ``(change, base kind, base bytes, base mode)`` items.

    For people (reports, trajectories), never for applying: grading writes the change set.
    Binary files are named, not shown; a symlink's text is its target, as git writes it.
    """
    out: list[str] = []
    for change, base_kind, base_data, base_mode in items:
        path = change.path
        old = base_data if base_kind in ("file", "symlink") else None
        new = (
            change.data
            if change.kind == "file"
            else change.target.encode()
            if change.kind == "symlink"
            else None
        )
        old_mode = "120000" if base_kind == "symlink" else f"100{base_mode & 0o777:o}"
        new_mode = "120000" if change.kind == "symlink" else f"100{_mode(change):o}"
        out.append(f"diff --git a/{path} b/{path}\n")
        if old is None and new is None:
            out.append(f"deleted directory {path}\n")
            continue
        if old is None:
            out.append(f"new file mode {new_mode}\n")
        elif new is None:
            out.append(f"deleted file mode {old_mode}\n")
        elif old_mode != new_mode:
            out.append(f"old mode {old_mode}\nnew mode {new_mode}\n")
        if (old is not None and _is_binary(old)) or (new is not None and _is_binary(new)):
            if old != new:
                a = "/dev/null" if old is None else f"a/{path}"
                b = "/dev/null" if new is None else f"b/{path}"
                out.append(f"Binary files {a} and {b} differ\n")
            continue
        diff = difflib.unified_diff(
            _lines(old or b""),
            _lines(new or b""),
            "/dev/null" if old is None else f"a/{path}",
            "/dev/null" if new is None else f"b/{path}",
        )
        out.extend(line if line.endswith("\n") else line + "\n" for line in diff)
    return "".join(out)
