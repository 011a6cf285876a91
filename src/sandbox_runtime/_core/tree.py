"""What changed in a sandbox's files, read by the library rather than by the sandbox.

An agent is root in its sandbox and can replace any program there (``git``, ``sh``,
``find``, ``python``), so the library never asks one of them what the agent changed.  A
backend marks a directory tree once, before the agent runs (:meth:`Backend.mark_tree
<sandbox_runtime._core.backend.Backend.mark_tree>`), and later names what differs
(:meth:`Backend.tree_changes <sandbox_runtime._core.backend.Backend.tree_changes>`); the
comparison runs here, in the library's process, on bytes and metadata the backend's own
file plane returned.

This module holds the shared pieces: the records (:class:`TreeEntry`, :class:`Change`,
:class:`TreeMark`, :class:`TreeChanges`), the reading of a tar archive into those records
(symlinks are kept as symlinks, nothing is followed), and the generic mark / compare built
on ``get_archive`` alone, which every backend has.  How far each source can be trusted is
in ``docs/reliability.md``.
"""

from __future__ import annotations

import hashlib
import io
import posixpath
import stat
import tarfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from sandbox_runtime.errors import SandboxFileNotFoundError

__all__ = [
    "Change",
    "TreeChanges",
    "TreeEntry",
    "TreeMark",
    "compare",
    "entries_from_archive",
    "generic_changes",
    "generic_mark",
    "ignored",
    "relative",
    "watched_state",
]

Kind = Literal["file", "symlink", "dir"]

#: Caches the test run rewrites on its own; never part of the agent's change.
_CACHE_DIRS = frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"})


@dataclass(frozen=True, slots=True)
class TreeEntry:
    """One path of a tree as marked: its kind, permission bits and a digest of its content."""

    kind: Kind
    mode: int
    digest: str = ""
    """sha256 of a file's bytes or a symlink's target; empty for directories."""


@dataclass(frozen=True, slots=True)
class Change:
    """One path (relative to the marked root) whose state differs from the mark."""

    path: str
    kind: Literal["file", "symlink", "deleted"]
    mode: int = 0o644
    data: bytes = b""
    """A file's new bytes."""
    target: str = ""
    """A symlink's target, as written in the link (never followed)."""


@dataclass
class TreeMark:
    """A backend's record of a tree before the agent ran; :meth:`Backend.tree_changes` reads it.

    ``entries`` is the generic mark (every path of ``root``); a backend that can name changed
    paths itself keeps what it needs in ``state`` and may leave ``entries`` empty.
    """

    root: str
    watch: tuple[str, ...] = ()
    """Absolute paths outside ``root`` whose change is reported in ``outside``; one that ends
    in ``/`` is a directory, all of it (watched where the backend lists changes cheaply)."""
    entries: dict[str, TreeEntry] = field(default_factory=dict)
    watched: dict[str, TreeEntry | None] = field(default_factory=dict)
    """The state of each ``watch`` path at the mark (``None``: absent)."""
    source: str = "archive"
    """Where the backend read the tree (``engine``, ``host``, ``archive``): for reports."""
    state: object = None


@dataclass
class TreeChanges:
    """What differs from a :class:`TreeMark`."""

    changes: list[Change]
    """Files and symlinks of the tree, without ``.git/`` and caches, sorted by path."""
    git: list[str]
    """Paths under the tree's ``.git/`` that changed (relative to the tree)."""
    outside: list[str]
    """Absolute paths outside the tree that changed: the watched ones, and any the backend can
    name by itself (docker names every changed path of the container)."""
    source: str = "archive"


def relative(root: str, path: str) -> str | None:
    """``path`` relative to ``root`` when it is under it (``""`` for the root itself)."""
    root = root.rstrip("/") or "/"
    if path == root:
        return ""
    prefix = root if root == "/" else root + "/"
    return path[len(prefix) :] if path.startswith(prefix) else None


def ignored(rel: str) -> bool:
    """Whether a path of the tree is outside the change: git's own files and test caches."""
    parts = rel.split("/")
    if parts[0] == ".git":
        return True
    return any(part in _CACHE_DIRS for part in parts) or rel.endswith((".pyc", ".pyo"))


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def entries_from_archive(
    data: bytes, top: str, *, with_data: bool = False
) -> tuple[dict[str, TreeEntry], dict[str, bytes]]:
    """The entries of a ``get_archive`` tar, keyed by path relative to ``top``'s basename.

    Links are recorded as links (their targets as text); hard links as files with the bytes
    of what they link to; devices and FIFOs are skipped.  ``with_data`` also returns the
    files' bytes.
    """
    entries: dict[str, TreeEntry] = {}
    contents: dict[str, bytes] = {}
    seen: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
        for member in archive:
            name = member.name.rstrip("/")
            rel = (
                "" if name == top else name[len(top) + 1 :] if name.startswith(top + "/") else None
            )
            if rel is None:
                continue
            mode = stat.S_IMODE(member.mode)
            if member.isdir():
                entries[rel] = TreeEntry("dir", mode)
            elif member.issym():
                entries[rel] = TreeEntry("symlink", 0o777, _digest(member.linkname.encode()))
                if with_data:
                    contents[rel] = member.linkname.encode()
            elif member.isfile() or member.islnk():
                if member.islnk():
                    body = seen.get(member.linkname.rstrip("/"), b"")
                else:
                    extracted = archive.extractfile(member)
                    body = extracted.read() if extracted is not None else b""
                    seen[name] = body
                entries[rel] = TreeEntry("file", mode, _digest(body))
                if with_data:
                    contents[rel] = body
    return entries, contents


def _change(rel: str, entry: TreeEntry, body: bytes) -> Change:
    if entry.kind == "symlink":
        return Change(rel, "symlink", 0o777, target=body.decode("utf-8", "surrogateescape"))
    return Change(rel, "file", entry.mode, data=body)


def _tree(
    get_archive: Callable[[str], bytes], root: str
) -> tuple[dict[str, TreeEntry], dict[str, bytes]]:
    top = posixpath.basename(root.rstrip("/")) or "."
    return entries_from_archive(get_archive(root), top, with_data=True)


def watched_state(
    get_archive: Callable[[str], bytes], paths: Iterable[str]
) -> dict[str, TreeEntry | None]:
    """The state of watched paths (of each file under a watched directory), by absolute path.

    A path ending in ``/`` stands for a whole directory, which only backends that list
    changes cheaply (an engine, a host) watch; one archive of it would cost a download.
    """
    found: dict[str, TreeEntry | None] = {}
    for path in paths:
        if path.endswith("/"):
            continue
        try:
            entries, _ = entries_from_archive(get_archive(path), posixpath.basename(path))
        except SandboxFileNotFoundError:
            found[path] = None
            continue
        for rel, entry in entries.items():
            # A directory (the task's tests outside the repository): every file under it.
            if entry.kind != "dir" and not ignored(rel):
                found[f"{path.rstrip('/')}/{rel}" if rel else path] = entry
        found.setdefault(path, entries.get(""))
    return found


def generic_mark(get_archive: Callable[[str], bytes], root: str, watch: Iterable[str]) -> TreeMark:
    """Mark ``root`` from one archive of it (every path, digested) and the watched paths."""
    entries, _ = _tree(get_archive, root)
    watch = tuple(dict.fromkeys(watch))
    return TreeMark(root, watch, entries, watched_state(get_archive, watch), source="archive")


def compare(
    before: Mapping[str, TreeEntry], after: Mapping[str, TreeEntry], contents: Mapping[str, bytes]
) -> tuple[list[Change], list[str]]:
    """The changes of the tree (files and symlinks) and the changed ``.git/`` paths."""
    changes: list[Change] = []
    git: list[str] = []
    for rel in sorted(set(before) | set(after)):
        old, new = before.get(rel), after.get(rel)
        if old == new or rel == "":
            continue
        if rel == ".git" or rel.startswith(".git/"):
            git.append(rel)
            continue
        if ignored(rel):
            continue
        if new is None or new.kind == "dir":
            if old is not None and old.kind != "dir":
                changes.append(Change(rel, "deleted"))
            continue
        changes.append(_change(rel, new, contents.get(rel, b"")))
    return changes, git


def generic_changes(get_archive: Callable[[str], bytes], mark: TreeMark) -> TreeChanges:
    """Read ``mark.root`` again through ``get_archive`` and compare it with the mark."""
    after, contents = _tree(get_archive, mark.root)
    changes, git = compare(mark.entries, after, contents)
    now = watched_state(get_archive, mark.watch)
    outside = sorted(p for p in set(now) | set(mark.watched) if now.get(p) != mark.watched.get(p))
    return TreeChanges(changes, git, outside, source=mark.source)
