"""The agent's change as the engine sees it: the container's overlay, never a command in it.

``docker diff`` (``GET /containers/{id}/changes``) lists every path of the container's
writable layer: added, changed or deleted against the image, read by the engine from the
overlay without entering the container.  A mark keeps that list (and the bytes' digests of the
paths under the tree that setup had already changed); a later list names every path that may
differ since, and only those are read, each through the engine's archive endpoint.  So a
rollout downloads what the agent changed, not the repository.

A tree the engine does not see in the overlay (a bind mount or volume at or under it) falls
back to the generic archive mark, still read through the engine.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from sandbox_runtime.backend_kit import (
    TreeChanges,
    TreeEntry,
    TreeMark,
    archive_tree_changes,
    archive_tree_mark,
    compare_trees,
    entries_from_archive,
    ignored_in_tree,
    relative,
)
from sandbox_runtime.errors import SandboxFileNotFoundError

__all__ = [
    "EngineTree",
    "archive_changes",
    "archive_mark",
    "engine_changes",
    "engine_mark",
    "overlay_sees",
]

archive_mark = archive_tree_mark
archive_changes = archive_tree_changes

# Above this many candidate paths, one archive of the tree costs less than one call each.
_BULK = 256
_READERS = 4
_CHANGED, _DELETED = 0, 2
_GIT_HISTORY = (".git/HEAD", ".git/packed-refs", ".git/config")
_GIT_HISTORY_DIRS = (".git/refs/", ".git/hooks/", ".git/info/")
#: A path of the image whose bytes were not read: it differs from whatever is there now.
_IMAGE = TreeEntry("file", -1, "image")


@dataclass(frozen=True)
class EngineTree:
    """What an engine mark keeps: the overlay's list at the mark."""

    listed: Mapping[str, int]
    """Path -> kind (0 changed, 1 added, 2 deleted) as ``docker diff`` gave it."""


def overlay_sees(mounts: Iterable[Mapping[str, object]], root: str) -> bool:
    """Whether no mount sits at, above or under ``root`` (so the overlay holds all of it)."""
    for mount in mounts:
        target = str(mount.get("Destination", ""))
        if relative(target, root) is not None or relative(root, target) is not None:
            return False
    return True


def _wanted(root: str, path: str) -> bool:
    """Whether a path under the tree is read: not caches or git's objects, but its history."""
    rel = relative(root, path)
    if rel is None or rel == "":
        return False
    if not ignored_in_tree(rel):
        return True
    return rel in _GIT_HISTORY or rel.startswith(_GIT_HISTORY_DIRS)


def _parents(listed: Iterable[str]) -> set[str]:
    """Every directory above a listed path (the overlay lists a changed file's directories too)."""
    found: set[str] = set()
    for path in listed:
        parent = posixpath.dirname(path)
        while parent not in found and parent != "/":
            found.add(parent)
            parent = posixpath.dirname(parent)
    return found


def _read(get_archive: Callable[[str], bytes], root: str, paths: list[str]) -> dict[str, TreeEntry]:
    """Entries (relative to ``root``) of ``paths``, read through the engine.

    Many paths under a tree are read as one archive of it; never ``/`` (the whole container).
    """
    if len(paths) > _BULK and root != "/":
        top = posixpath.basename(root.rstrip("/")) or "."
        entries, _ = entries_from_archive(get_archive(root), top)
        wanted = {relative(root, path) for path in paths}
        return {rel: entry for rel, entry in entries.items() if rel in wanted}

    def one(path: str) -> tuple[str, TreeEntry | None]:
        rel = relative(root, path) or ""
        try:
            entries, _ = entries_from_archive(get_archive(path), posixpath.basename(path))
        except SandboxFileNotFoundError:
            return rel, None
        return rel, entries.get("")

    with ThreadPoolExecutor(_READERS) as pool:
        found = dict(pool.map(one, paths))
    return {rel: entry for rel, entry in found.items() if entry is not None}


def _contents(
    get_archive: Callable[[str], bytes], root: str, paths: list[str]
) -> tuple[dict[str, TreeEntry], dict[str, bytes]]:
    """Like :func:`_read`, with the bytes of files and the targets of symlinks."""
    if len(paths) > _BULK:
        top = posixpath.basename(root.rstrip("/")) or "."
        entries, data = entries_from_archive(get_archive(root), top, with_data=True)
        wanted = {relative(root, path) for path in paths}
        return (
            {rel: entry for rel, entry in entries.items() if rel in wanted},
            {rel: body for rel, body in data.items() if rel in wanted},
        )

    def one(path: str) -> tuple[str, TreeEntry | None, bytes]:
        rel = relative(root, path) or ""
        try:
            entries, data = entries_from_archive(
                get_archive(path), posixpath.basename(path), with_data=True
            )
        except SandboxFileNotFoundError:
            return rel, None, b""
        return rel, entries.get(""), data.get("", b"")

    found: dict[str, TreeEntry] = {}
    contents: dict[str, bytes] = {}
    with ThreadPoolExecutor(_READERS) as pool:
        for rel, entry, body in pool.map(one, paths):
            if entry is not None:
                found[rel], contents[rel] = entry, body
    return found, contents


def _inside(root: str, listed: Mapping[str, int]) -> list[str]:
    """The listed files and links under ``root`` (directories, named by their children, not)."""
    parents = _parents(listed)
    return sorted(
        path
        for path, kind in listed.items()
        if _wanted(root, path) and kind != _DELETED and path not in parents
    )


def engine_mark(
    listed: Mapping[str, int],
    get_archive: Callable[[str], bytes],
    root: str,
    watch: Iterable[str],
) -> TreeMark:
    """Mark ``root``: the overlay's list now, and the digests of what setup already changed."""
    entries = _read(get_archive, root, _inside(root, listed))
    # The overlay's list names every later change outside the tree by a new kind; a watched
    # path that setup already changed stays listed with the same kind, so its state is kept.
    watch = tuple(dict.fromkeys(watch))
    tracked = _tracked(listed, watch)
    watched: dict[str, TreeEntry | None] = dict.fromkeys(tracked)
    watched.update(_absolute(_read(get_archive, "/", tracked)))
    return TreeMark(root, watch, entries, watched, source="engine", state=EngineTree(listed))


def _tracked(listed: Mapping[str, int], watch: Iterable[str]) -> list[str]:
    """The listed files under the watched paths; a whole directory (``/``) only if few."""
    files = [w for w in watch if not w.endswith("/")]
    whole = [w.rstrip("/") for w in watch if w.endswith("/")]

    def under(path: str, roots: list[str]) -> bool:
        return any(relative(root, path) is not None for root in roots)

    parents = _parents(listed)
    candidates = [path for path, kind in listed.items() if kind != _DELETED and path not in parents]
    tracked = [path for path in candidates if under(path, files)]
    in_dirs = [path for path in candidates if under(path, whole) and path not in tracked]
    return sorted(tracked + (in_dirs if len(in_dirs) <= _BULK else []))


def _absolute(found: Mapping[str, TreeEntry]) -> dict[str, TreeEntry]:
    return {"/" + rel: entry for rel, entry in found.items()}


def engine_changes(
    listed: Mapping[str, int], get_archive: Callable[[str], bytes], mark: TreeMark
) -> TreeChanges:
    """Compare the overlay's list now with the mark's; read only the paths that may differ."""
    assert isinstance(mark.state, EngineTree)
    before_listed = mark.state.listed
    root = mark.root
    everything = {**before_listed, **listed}
    parents = _parents(listed)
    candidates = [
        path for path in sorted(everything) if _wanted(root, path) and path not in parents
    ]
    now, contents = _contents(
        get_archive, root, [path for path in candidates if listed.get(path) != _DELETED]
    )
    before: dict[str, TreeEntry] = {}
    for path in candidates:
        rel = relative(root, path) or ""
        if path in before_listed:
            # Setup had changed it: the mark holds its state (absent when deleted then).
            if rel in mark.entries:
                before[rel] = mark.entries[rel]
            continue
        # Untouched since the image at the mark: there unless the agent added it.
        kind, current = listed.get(path), now.get(rel)
        if kind == _CHANGED and current is not None and current.kind == "dir":
            before[rel] = current
        elif kind in (_CHANGED, _DELETED):
            before[rel] = _IMAGE
    changes, git = compare_trees(before, now, contents)
    outside = sorted(
        path
        for path, kind in listed.items()
        if relative(root, path) is None and before_listed.get(path) != kind and path not in parents
    )
    if mark.watched:
        again = [path for path in mark.watched if listed.get(path, _DELETED) != _DELETED]
        watched = _absolute(_read(get_archive, "/", again))
        outside += [p for p in mark.watched if watched.get(p) != mark.watched.get(p)]
    return TreeChanges(
        changes,
        git,
        sorted(set(outside)),
        source="engine",
    )
