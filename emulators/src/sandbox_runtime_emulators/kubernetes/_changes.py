"""Resource versions and the change history that watches are served from.

On a real cluster every write gets the next etcd revision, whatever the resource, and a watch
from a ``resourceVersion`` replays what changed after it; a version older than what etcd kept
is ``410 Expired``.  :class:`ChangeLog` is that for the emulator: one counter and one bounded
history shared by every store, behind one lock that the stores use as their own, so that a
list and the version it was taken at are consistent (a watch started from a list misses
nothing and repeats nothing).
"""

from __future__ import annotations

import copy
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

__all__ = ["Change", "ChangeLog"]

#: Changes kept for watches that resume from a version (etcd keeps ~5 minutes of them).
_KEEP = 10000


@dataclass(frozen=True)
class Change:
    """One write: its version, the resource (``pods``...), the watch event type and the object."""

    version: int
    resource: str
    type: str  # ADDED, MODIFIED or DELETED
    obj: dict[str, Any]
    #: The object as the change before this one left it (``None`` for ADDED): a watch with a
    #: selector needs both to see an object entering (ADDED) or leaving (DELETED) its view.
    previous: dict[str, Any] | None = None


class ChangeLog:
    """The cluster-wide version counter, its history, and the lock every store writes under."""

    def __init__(self, keep: int = _KEEP) -> None:
        #: Held by every store while it reads or writes objects (reentrant).
        self.lock = threading.Condition(threading.RLock())
        self._version = 0
        self._history: deque[Change] = deque(maxlen=keep)
        self._latest: dict[tuple[str, str], dict[str, Any]] = {}  # (resource, uid): last copy

    @property
    def version(self) -> int:
        """The newest resource version given out."""
        with self.lock:
            return self._version

    def record(self, resource: str, kind: str, obj: dict[str, Any]) -> None:
        """Give ``obj`` the next resource version and remember the change; wakes watchers."""
        with self.lock:
            self._version += 1
            obj["metadata"]["resourceVersion"] = str(self._version)
            saved = copy.deepcopy(obj)
            key = (resource, str(obj["metadata"].get("uid") or obj["metadata"].get("name")))
            previous = self._latest.pop(key, None) if kind == "DELETED" else self._latest.get(key)
            if kind != "DELETED":
                self._latest[key] = saved
            self._history.append(Change(self._version, resource, kind, saved, previous))
            self.lock.notify_all()

    def since(self, version: int) -> list[Change] | None:
        """Changes after ``version``, oldest first; ``None`` when some are no longer kept."""
        with self.lock:
            if version >= self._version:
                return []
            if not self._history or self._history[0].version > version + 1:
                return None
            return [change for change in self._history if change.version > version]

    def wait(self, after: int, timeout: float) -> None:
        """Block until a version newer than ``after`` exists, or ``timeout`` seconds pass."""
        with self.lock:
            if self._version <= after:
                self.lock.wait(timeout)
