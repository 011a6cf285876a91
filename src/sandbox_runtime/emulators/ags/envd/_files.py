"""Files as envd serves them: the ``/files`` HTTP routes and the ``filesystem.Filesystem`` calls.

Paths are sandbox paths.  envd normally runs with the sandbox's ``/`` as its own, but the
emulator can also run it as a plain host process over a sandbox directory (the ``local``
backend without namespaces), so every path goes through :meth:`Files.host`, which maps it
under ``root``.  Relative paths start at the default working directory, as in envd.
"""

from __future__ import annotations

import datetime
import grp
import os
import posixpath
import pwd
import shutil
import stat
from typing import Any

from ._connect import ConnectError

__all__ = ["Files", "parse_multipart"]

_TYPE_NAMES = {"file": "FILE_TYPE_FILE", "dir": "FILE_TYPE_DIRECTORY"}


def _owner(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _group(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def parse_multipart(body: bytes, content_type: str) -> list[tuple[str | None, bytes]]:
    """``(filename, content)`` of each part of a ``multipart/form-data`` body."""
    boundary = None
    for param in content_type.split(";")[1:]:
        key, _, value = param.strip().partition("=")
        if key.lower() == "boundary":
            boundary = value.strip('"')
    if not boundary:
        raise ValueError("multipart body without a boundary")
    delimiter = b"--" + boundary.encode("latin-1")
    parts: list[tuple[str | None, bytes]] = []
    for raw in body.split(delimiter)[1:]:
        if raw.startswith(b"--"):
            break
        raw = raw.removeprefix(b"\r\n")
        head, _, content = raw.partition(b"\r\n\r\n")
        content = content.removesuffix(b"\r\n")
        filename = None
        for line in head.decode("utf-8", "replace").split("\r\n"):
            name, _, value = line.partition(":")
            if name.strip().lower() != "content-disposition":
                continue
            for item in value.split(";"):
                key, _, val = item.strip().partition("=")
                if key == "filename":
                    filename = val.strip().strip('"')
        parts.append((filename, content))
    return parts


class Files:
    """File operations of one envd over the sandbox rooted at ``root``."""

    def __init__(self, root: str = "/", workdir: str = "/") -> None:
        self.root = os.path.realpath(root)
        self.workdir = workdir

    def sandbox_path(self, path: str) -> str:
        """The absolute, normalised sandbox path for ``path`` (``~`` and relative allowed)."""
        if path.startswith("~"):
            path = os.environ.get("HOME", "/root") + path[1:]
        if not path.startswith("/"):
            path = posixpath.join(self.workdir, path)
        return posixpath.normpath(path)

    def host(self, path: str) -> str:
        """Where a sandbox path lives on this machine."""
        normalized = self.sandbox_path(path)
        if self.root == "/":
            return normalized
        return os.path.join(self.root, normalized.lstrip("/"))

    # -- /files ----------------------------------------------------------------------------

    def read(self, path: str) -> bytes:
        """Content of a file; ``404``/``400`` errors carry envd's messages."""
        host = self.host(path)
        shown = self.sandbox_path(path)
        try:
            info = os.stat(host)
        except FileNotFoundError as exc:
            raise ConnectError("not_found", f"path '{shown}' does not exist") from exc
        if stat.S_ISDIR(info.st_mode):
            raise ConnectError("invalid_argument", f"path '{shown}' is a directory")
        with open(host, "rb") as handle:
            return handle.read()

    def write(self, path: str, data: bytes) -> dict[str, str]:
        """Create or replace a file, making parents; returns the ``WriteInfo`` object."""
        host = self.host(path)
        shown = self.sandbox_path(path)
        if os.path.isdir(host):
            raise ConnectError("invalid_argument", f"path '{shown}' is a directory")
        os.makedirs(os.path.dirname(host), exist_ok=True)
        with open(host, "wb") as handle:
            handle.write(data)
        return {"name": posixpath.basename(shown), "type": "file", "path": shown}

    # -- filesystem.Filesystem -------------------------------------------------------------

    def entry(self, path: str) -> dict[str, Any]:
        """The ``EntryInfo`` of a path (symlinks described, not followed)."""
        host = self.host(path)
        shown = self.sandbox_path(path)
        try:
            info = os.lstat(host)
        except FileNotFoundError as exc:
            raise ConnectError("not_found", f"no such file or directory: {shown}") from exc
        target = None
        if stat.S_ISLNK(info.st_mode):
            target = os.readlink(host)
            try:
                followed = os.stat(host)
            except OSError:
                followed = info
        else:
            followed = info
        kind = "FILE_TYPE_DIRECTORY" if stat.S_ISDIR(followed.st_mode) else "FILE_TYPE_FILE"
        modified = datetime.datetime.fromtimestamp(info.st_mtime, tz=datetime.timezone.utc)
        entry: dict[str, Any] = {
            "name": posixpath.basename(shown) or "/",
            "type": kind,
            "path": shown,
            "size": str(info.st_size),
            "mode": stat.S_IMODE(info.st_mode) | (0o20000000000 if kind.endswith("Y") else 0),
            "permissions": stat.filemode(info.st_mode),
            "owner": _owner(info.st_uid),
            "group": _group(info.st_gid),
            "modifiedTime": modified.isoformat().replace("+00:00", "Z"),
        }
        if target is not None:
            entry["symlinkTarget"] = target
        return entry

    def list_dir(self, path: str, depth: int) -> list[dict[str, Any]]:
        """Entries under a directory, down to ``depth`` levels (1 = direct children)."""
        depth = max(depth, 1)
        top = self.sandbox_path(path)
        host = self.host(top)
        if not os.path.exists(host):
            raise ConnectError("not_found", f"path '{top}' does not exist")
        if not os.path.isdir(host):
            raise ConnectError("invalid_argument", f"path '{top}' is not a directory")
        entries: list[dict[str, Any]] = []

        def walk(directory: str, level: int) -> None:
            for name in sorted(os.listdir(self.host(directory))):
                child = posixpath.join(directory, name)
                entries.append(self.entry(child))
                child_host = self.host(child)
                if level < depth and os.path.isdir(child_host) and not os.path.islink(child_host):
                    walk(child, level + 1)

        walk(top, 1)
        return entries

    def make_dir(self, path: str) -> dict[str, Any]:
        """Create a directory and its parents; ``already_exists`` if it is there."""
        host = self.host(path)
        if os.path.lexists(host):
            if os.path.isdir(host):
                raise ConnectError(
                    "already_exists", f"directory '{self.sandbox_path(path)}' already exists"
                )
            raise ConnectError("invalid_argument", f"path '{self.sandbox_path(path)}' is a file")
        os.makedirs(host)
        return self.entry(path)

    def move(self, source: str, destination: str) -> dict[str, Any]:
        """Rename, creating the destination's parents."""
        src = self.host(source)
        if not os.path.lexists(src):
            raise ConnectError("not_found", f"source '{self.sandbox_path(source)}' does not exist")
        dst = self.host(destination)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        os.replace(src, dst)
        return self.entry(destination)

    def remove(self, path: str) -> None:
        """Remove a file, link or whole directory tree."""
        host = self.host(path)
        if not os.path.lexists(host):
            raise ConnectError("not_found", f"path '{self.sandbox_path(path)}' does not exist")
        if os.path.isdir(host) and not os.path.islink(host):
            shutil.rmtree(host)
        else:
            os.unlink(host)
