"""A local rollback that restores what changed, not the whole tree.

When a checkpoint was copied, the stamps of the sandbox's root were noted (``_tree_copy``):
a path whose stamp is still the same holds what the checkpoint's copy holds.  A rollback
then walks the root once, comparing stamps, and for each path that differs restores the
checkpoint's entry (removed and copied anew, never written in place: the old inode may be
another path's hard link); a directory whose stamp differs has its entries compared by
name with the checkpoint's, so deletions and additions are undone; a directory whose
entries changed gets the checkpoint's mode, owner and times back last, since changing its
entries moved them.  The sandbox's processes are dead by then, so nothing writes meanwhile.

What comes back is the new set of stamps, for the next rollback to the same checkpoint:
unchanged paths keep theirs; restored ones are stamped again after waiting out the clock's
granularity (``RACY_MARGIN_NS``), so a later change in the same clock tick cannot hide, or,
when they are few, left unstamped (the next rollback restores them again, which costs less
than the wait).
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from pathlib import Path

from ._tree_copy import (
    RACY_MARGIN_NS,
    Stamp,
    TreeCopier,
    scan_tree,
    set_owner_mode_times,
    stamp_of,
    trusted,
)

__all__ = ["restore_changes"]

# From how many written entries a rollback waits out the clock to stamp them again.
_WAIT_FROM = 200


def _entries(path: str) -> dict[str, os.stat_result]:
    with os.scandir(path) as found:
        return {entry.name: entry.stat(follow_symlinks=False) for entry in found}


class _Restorer:
    """One rollback's walk; see the module docstring."""

    def __init__(
        self,
        root: str,
        checkpoint: str,
        stamps: dict[str, Stamp],
        remove_tree: Callable[[Path], None],
    ) -> None:
        self.root, self.checkpoint, self.old = root, checkpoint, stamps
        self.remove_tree = remove_tree
        self.new: dict[str, Stamp] = {}
        self.copier = TreeCopier(since_ns=None)  # hard links grouped by checkpoint inode
        self.copied: list[str] = []  # entries copied from the checkpoint: stamped again
        self.touched: list[str] = []  # directories whose own stamp changed: stamped again
        self.restored = 0

    def walk(self, rel: str, trusted_dir: bool) -> None:
        """Make the directory ``rel`` hold what the checkpoint's holds (see the docstring)."""
        host, saved = self._host(rel), self._saved(rel)
        current = _entries(host)
        wanted = None if trusted_dir else _entries(saved)
        changed = False
        for name, info in current.items():
            child = f"{rel}/{name}" if rel else name
            if wanted is not None and name not in wanted:
                changed = self._make_room(host, changed)
                self._remove(f"{host}/{name}", info)
                continue
            stamp = stamp_of(info)
            if self.old.get(child) == stamp:
                self.new[child] = stamp
                if stat.S_ISDIR(info.st_mode):
                    self.walk(child, trusted_dir=True)
                continue
            original = wanted[name] if wanted is not None else os.lstat(self._saved(child))
            if stat.S_ISDIR(info.st_mode) and stat.S_ISDIR(original.st_mode):
                self.walk(child, trusted_dir=False)
                continue
            changed = self._make_room(host, changed)
            self._remove(f"{host}/{name}", info)
            self._copy(child, original)
        for name, original in (wanted or {}).items():
            if name not in current:
                changed = self._make_room(host, changed)
                self._copy(f"{rel}/{name}" if rel else name, original)
        if changed or not trusted_dir:
            set_owner_mode_times(host, os.lstat(saved))
            self.touched.append(rel)

    def _host(self, rel: str) -> str:
        return os.path.join(self.root, rel) if rel else self.root

    def _saved(self, rel: str) -> str:
        return os.path.join(self.checkpoint, rel) if rel else self.checkpoint

    @staticmethod
    def _make_room(host: str, already: bool) -> bool:
        """Let the owner change a directory's entries (its mode comes back afterwards)."""
        if not already and not os.access(host, os.W_OK | os.X_OK):
            os.chmod(host, stat.S_IMODE(os.lstat(host).st_mode) | stat.S_IRWXU)
        return True

    def _remove(self, path: str, info: os.stat_result) -> None:
        self.restored += 1
        if stat.S_ISDIR(info.st_mode):
            self.remove_tree(Path(path))
        else:
            os.unlink(path)

    def _copy(self, rel: str, original: os.stat_result) -> None:
        self.restored += 1
        self.copier.copy(self._saved(rel), self._host(rel), rel, original)
        self.copied.append(rel)

    def stamp_again(self) -> bool:
        """Stamp what this rollback wrote, once a change after it can no longer hide.

        Returns False when it stamped nothing anew: the noted stamps then still serve as
        they are (those of the paths restored name inodes and ctimes that are gone, so they
        match nothing), and need not be written again.
        """
        for rel in self.touched:  # stamped before this rollback changed it: stale
            self.new.pop(rel, None)
        if len(self.copied) + len(self.touched) < _WAIT_FROM:
            return False  # cheaper to restore these few again next time than to wait here
        time.sleep(RACY_MARGIN_NS * 2 / 1e9)
        since = time.time_ns()
        for rel in self.copied:
            self.new.update(scan_tree(self.root, since, rel))
        for rel in self.touched:  # the directory itself, not what is under it
            info = os.lstat(self._host(rel))
            if trusted(info, since):
                self.new[rel] = stamp_of(info)
        return True


def restore_changes(
    root: Path, checkpoint: Path, stamps: dict[str, Stamp], remove_tree: Callable[[Path], None]
) -> tuple[dict[str, Stamp] | None, int]:
    """Make ``root`` hold what ``checkpoint`` holds, given the root's stamps at copy time.

    Returns the root's new stamps (``None``: the given ones still serve, see
    ``stamp_again``) and how many entries were removed or copied.  Raises ``OSError`` when
    an entry cannot be restored; the caller then copies the whole tree.
    """
    restorer = _Restorer(str(root), str(checkpoint), stamps, remove_tree)
    top = os.lstat(root)
    trusted_top = stamps.get("") == stamp_of(top)
    if trusted_top:
        restorer.new[""] = stamp_of(top)
    restorer.walk("", trusted_dir=trusted_top)
    return (restorer.new if restorer.stamp_again() else None), restorer.restored
