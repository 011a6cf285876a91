"""Filesystem watch as envd serves it: inotify, read the way Go's fsnotify reads it.

envd watches a directory with (E2B's fork of) fsnotify, recursively when asked, and
reports each operation of an event as its own ``FilesystemEvent`` whose ``name`` is the
path relative to the watched directory.  This module does the same with Linux's inotify
through ``ctypes`` (the envd emulation may use the standard library only): the same kernel
events, mapped to fsnotify's operations (create, write, remove, rename, chmod) and emitted
in envd's order for one event (create, rename, chmod, write, remove).  A recursive watch
adds every directory below, and each directory created or moved in later.

Both of envd's forms are served: the ``WatchDir`` stream and the polling watchers
(``CreateWatcher`` / ``GetWatcherEvents`` / ``RemoveWatcher``) the synchronous SDK uses.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import secrets
import stat
import struct
from collections.abc import Callable

from ._connect import ConnectError

__all__ = ["Watch", "WatcherRegistry", "open_watch"]

_IN_MODIFY = 0x00000002
_IN_ATTRIB = 0x00000004
_IN_MOVED_FROM = 0x00000040
_IN_MOVED_TO = 0x00000080
_IN_CREATE = 0x00000100
_IN_DELETE = 0x00000200
_IN_DELETE_SELF = 0x00000400
_IN_MOVE_SELF = 0x00000800
_IN_IGNORED = 0x00008000
_IN_ISDIR = 0x40000000
_IN_Q_OVERFLOW = 0x00004000
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = os.O_CLOEXEC
# What fsnotify asks the kernel for.
_MASK = (
    _IN_MOVED_TO
    | _IN_MOVED_FROM
    | _IN_CREATE
    | _IN_ATTRIB
    | _IN_MODIFY
    | _IN_MOVE_SELF
    | _IN_DELETE
    | _IN_DELETE_SELF
)
_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len

Event = dict[str, str]


class _Inotify:
    """The inotify calls, through ``ctypes``, imported only when a watch starts.

    An image's python3 without ``_ctypes`` then still runs envd; only its watches fail.
    """

    def __init__(self) -> None:
        try:
            import ctypes
            import ctypes.util
        except ImportError as exc:
            raise ConnectError("internal", f"error creating watcher: {exc}") from exc
        self._ctypes = ctypes
        self._libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)

    def init(self) -> int:
        fd = int(self._libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC))
        if fd < 0:
            raise ConnectError("internal", f"error creating watcher: {self.error()}")
        return fd

    def add(self, fd: int, path: str) -> int:
        return int(self._libc.inotify_add_watch(fd, os.fsencode(path), _MASK))

    def errno(self) -> int:
        return int(self._ctypes.get_errno())

    def error(self) -> str:
        return os.strerror(self.errno())


def _operations(mask: int, is_root: bool) -> list[str]:
    """Fsnotify's operations for one inotify event, in the order envd sends them."""
    ops = []
    if mask & (_IN_CREATE | _IN_MOVED_TO):
        ops.append("EVENT_TYPE_CREATE")
    if mask & _IN_MOVED_FROM or (mask & _IN_MOVE_SELF and is_root):
        ops.append("EVENT_TYPE_RENAME")
    if mask & _IN_ATTRIB:
        ops.append("EVENT_TYPE_CHMOD")
    if mask & _IN_MODIFY:
        ops.append("EVENT_TYPE_WRITE")
    if mask & _IN_DELETE or (mask & _IN_DELETE_SELF and is_root):
        ops.append("EVENT_TYPE_REMOVE")
    return ops


class Watch:
    """One inotify instance over a directory (and, if recursive, everything below it)."""

    def __init__(self, host_root: str, recursive: bool, deliver: Callable[[Event], None]) -> None:
        self._inotify = _Inotify()
        self.root = host_root.rstrip("/") or "/"
        self.recursive = recursive
        self._deliver = deliver
        fd = self._inotify.init()
        self.fd = fd
        self._dirs: dict[int, str] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        try:
            if recursive:
                self._add_tree(self.root)
            else:
                self._add(self.root)
        except ConnectError:
            os.close(fd)
            raise

    def _add(self, directory: str) -> None:
        wd = self._inotify.add(self.fd, directory)
        if wd < 0:
            code = self._inotify.errno()
            if directory == self.root or code not in (errno.ENOENT, errno.ENOTDIR):
                raise ConnectError(
                    "internal", f"error adding path {directory} to watcher: {os.strerror(code)}"
                )
            return
        self._dirs[wd] = directory

    def _add_tree(self, directory: str) -> None:
        self._add(directory)
        for current, subdirs, _files in os.walk(directory):
            for name in subdirs:
                path = os.path.join(current, name)
                if not os.path.islink(path):
                    self._add(path)

    def start(self) -> None:
        """Deliver events from now on, on the running loop."""
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self.fd, self._read)

    def _read(self) -> None:
        try:
            data = os.read(self.fd, 64 * 1024)
        except BlockingIOError:
            return
        except OSError:
            self.close()
            return
        offset = 0
        while offset + _HEADER.size <= len(data):
            wd, mask, _cookie, length = _HEADER.unpack_from(data, offset)
            offset += _HEADER.size
            raw_name = data[offset : offset + length].split(b"\0", 1)[0]
            offset += length
            self._handle(wd, mask, os.fsdecode(raw_name))

    def _handle(self, wd: int, mask: int, name: str) -> None:
        directory = self._dirs.get(wd)
        if directory is None or mask & _IN_Q_OVERFLOW:
            return
        if mask & _IN_IGNORED:
            self._dirs.pop(wd, None)
            return
        path = os.path.join(directory, name) if name else directory
        is_root = path == self.root
        if not name and not is_root:
            return  # a subdirectory's own delete/move: its parent reports it by name
        if self.recursive and mask & _IN_ISDIR and mask & (_IN_CREATE | _IN_MOVED_TO):
            self._add_tree(path)
        relative = os.path.relpath(path, self.root)
        for op in _operations(mask, is_root):
            self._deliver({"name": relative, "type": op})

    def close(self) -> None:
        """Stop watching (idempotent)."""
        if self.fd < 0:
            return
        if self._loop is not None:
            with contextlib.suppress(Exception):
                self._loop.remove_reader(self.fd)
        with contextlib.suppress(OSError):
            os.close(self.fd)
        self.fd = -1


def open_watch(
    host_path: str, shown: str, recursive: bool, deliver: Callable[[Event], None]
) -> Watch:
    """A started watch of the directory ``host_path`` (``shown`` names it in errors)."""
    try:
        info = os.stat(host_path)
    except FileNotFoundError as exc:
        raise ConnectError("not_found", f"path {shown} not found: {exc}") from exc
    if not stat.S_ISDIR(info.st_mode):
        raise ConnectError("invalid_argument", f"path {shown} not a directory")
    watch = Watch(host_path, recursive, deliver)
    watch.start()
    return watch


class WatcherRegistry:
    """The polling watchers: events collect until ``GetWatcherEvents`` takes them."""

    def __init__(self) -> None:
        self._watchers: dict[str, tuple[Watch, list[Event]]] = {}

    def create(self, host_path: str, shown: str, recursive: bool) -> str:
        """``CreateWatcher``: start collecting; returns the watcher id."""
        events: list[Event] = []
        watch = open_watch(host_path, shown, recursive, events.append)
        watcher_id = secrets.token_hex(10)
        self._watchers[watcher_id] = (watch, events)
        return watcher_id

    def take(self, watcher_id: str) -> list[Event]:
        """``GetWatcherEvents``: the events since the last call."""
        entry = self._watchers.get(watcher_id)
        if entry is None:
            raise ConnectError("not_found", f"watcher with id {watcher_id} not found")
        _watch, events = entry
        taken = list(events)
        events.clear()
        return taken

    def remove(self, watcher_id: str) -> None:
        """``RemoveWatcher``."""
        entry = self._watchers.pop(watcher_id, None)
        if entry is None:
            raise ConnectError("not_found", f"watcher with id {watcher_id} not found")
        entry[0].close()

    def close_all(self) -> None:
        """Stop every watcher (envd shutting down)."""
        for watch, _events in self._watchers.values():
            watch.close()
        self._watchers.clear()
