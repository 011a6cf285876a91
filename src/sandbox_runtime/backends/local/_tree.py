"""The agent's change as the host sees it: the sandbox's directory, read with ``lstat``.

A local sandbox's files are host files, so the library walks them itself: ``lstat`` of every
path (never following a symlink), and a path counts as untouched while its stamp (inode,
ctime, mtime, size, mode, owner: ``_tree_copy.stamp_of``) is the same.  ``ctime`` is set by the
kernel on every write, ``chmod``, link or rename, and no ``touch -d`` moves it back, so an
agent cannot make a changed file look untouched.  A path whose stamp was read too soon after
its last change to be trusted (same clock tick) has its digest kept at the mark instead.
Only the paths whose stamps differ are read.
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from sandbox_runtime.backend_kit import (
    TreeChanges,
    TreeEntry,
    TreeMark,
    compare_trees,
    ignored_in_tree,
)

from ._tree_copy import Stamp, stamp_of, trusted

__all__ = ["HostTree", "host_changes", "host_mark"]


@dataclass(frozen=True)
class HostTree:
    """What a host mark keeps: per relative path its stamp, and its entry when untrusted."""

    stamps: Mapping[str, Stamp]
    racy: Mapping[str, TreeEntry]
    """Entries (with digests) of the paths whose stamps cannot prove them unchanged."""
    watched: Mapping[str, Stamp | None]
    """Per watched absolute sandbox path: its stamp (``None``: absent)."""


def _walk(host: str) -> dict[str, os.stat_result]:
    """``lstat`` of ``host`` and everything under it, by relative path (``""``: the top)."""
    found: dict[str, os.stat_result] = {}
    pending = [""]
    while pending:
        rel = pending.pop()
        path = os.path.join(host, rel) if rel else host
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            continue
        found[rel] = info
        if stat.S_ISDIR(info.st_mode):
            try:
                names = os.listdir(path)
            except OSError:
                continue
            pending.extend(f"{rel}/{name}" if rel else name for name in names)
    return found


def _entry(path: str, info: os.stat_result) -> tuple[TreeEntry | None, bytes]:
    """The entry of one host path and its bytes (a file's, or a symlink's target)."""
    mode = stat.S_IMODE(info.st_mode)
    try:
        if stat.S_ISLNK(info.st_mode):
            body = os.fsencode(os.readlink(path))
            return TreeEntry("symlink", 0o777, hashlib.sha256(body).hexdigest()), body
        if stat.S_ISREG(info.st_mode):
            with open(path, "rb", opener=_no_follow) as handle:
                body = handle.read()
            return TreeEntry("file", mode, hashlib.sha256(body).hexdigest()), body
    except OSError:
        return None, b""
    if stat.S_ISDIR(info.st_mode):
        return TreeEntry("dir", mode), b""
    return None, b""


def _no_follow(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW)


def _watched(paths: Iterable[str], to_host: Callable[[str], str | None]) -> dict[str, Stamp | None]:
    """The stamp of each watched file, and of every file under a watched directory.

    ``None`` for a watched path that is absent; directories themselves and bytecode caches
    are left out (importing a module rewrites both).
    """
    stamps: dict[str, Stamp | None] = {}
    for given in paths:
        path = given.rstrip("/") or "/"
        host = to_host(path)
        if host is None:
            continue
        found = _walk(host)
        if not found:
            stamps[path] = None
        for rel, info in found.items():
            if stat.S_ISDIR(info.st_mode) or ignored_in_tree(rel):
                continue
            stamps[f"{path.rstrip('/')}/{rel}" if rel else path] = stamp_of(info)
    return stamps


def host_mark(
    host: str, root: str, watch: Iterable[str], to_host: Callable[[str], str | None]
) -> TreeMark:
    """Mark the sandbox tree at host path ``host`` (sandbox path ``root``)."""
    since = time.time_ns()
    found = _walk(host)
    stamps = {rel: stamp_of(info) for rel, info in found.items()}
    racy: dict[str, TreeEntry] = {}
    for rel, info in found.items():
        if not trusted(info, since) and not stat.S_ISDIR(info.st_mode):
            entry, _ = _entry(os.path.join(host, rel), info)
            if entry is not None:
                racy[rel] = entry
    watch = tuple(dict.fromkeys(watch))
    state = HostTree(stamps, racy, _watched(watch, to_host))
    return TreeMark(root, watch, source="host", state=state)


def host_changes(host: str, mark: TreeMark, to_host: Callable[[str], str | None]) -> TreeChanges:
    """The paths whose stamps moved since the mark, read from the host."""
    assert isinstance(mark.state, HostTree)
    state = mark.state
    found = _walk(host)
    before: dict[str, TreeEntry] = {}
    now: dict[str, TreeEntry] = {}
    contents: dict[str, bytes] = {}
    for rel in set(state.stamps) | set(found):
        info = found.get(rel)
        old = state.stamps.get(rel)
        if info is not None and old == stamp_of(info) and rel not in state.racy:
            continue
        if info is not None:
            entry, body = _entry(os.path.join(host, rel), info)
            if entry is not None:
                now[rel], contents[rel] = entry, body
        if old is not None:
            # Changed since the mark: its old bytes are unknown unless it was racy then.
            before[rel] = state.racy.get(rel) or _old_entry(old)
    changes, git = compare_trees(before, now, contents)
    watched = _watched(mark.watch, to_host)
    outside = sorted(
        path
        for path in set(watched) | set(state.watched)
        if watched.get(path, None) != state.watched.get(path, None)
    )
    return TreeChanges(changes, git, outside, source="host")


def _old_entry(stamp: Stamp) -> TreeEntry:
    """A stand-in for a path's state at the mark that no later state equals (bytes unknown)."""
    mode = stamp[0]
    if stat.S_ISDIR(mode):
        return TreeEntry("dir", stat.S_IMODE(mode))
    if stat.S_ISLNK(mode):
        return TreeEntry("symlink", 0o777, f"stamp:{stamp}")
    return TreeEntry("file", stat.S_IMODE(mode), f"stamp:{stamp}")
