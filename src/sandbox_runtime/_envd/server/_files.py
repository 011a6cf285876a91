"""Files as envd serves them: the ``/files`` HTTP routes and the ``filesystem.Filesystem`` calls.

Paths are sandbox paths.  envd normally runs with the sandbox's ``/`` as its own, but the
emulator can also run it as a plain host process over a sandbox directory (the ``local``
backend without namespaces), so every path goes through :meth:`Files.host`, which maps it
under ``root``.  Relative paths start at the default working directory, as in envd.
"""

from __future__ import annotations

import contextlib
import datetime
import grp
import os
import posixpath
import pwd
import stat
from typing import Any

from ._connect import ConnectError
from ._users import User

__all__ = ["Files", "go_mode_string", "parse_multipart"]


def go_mode_string(st_mode: int) -> str:
    """``st_mode`` as Go's ``FileMode.String()`` writes it (``drwxr-xr-x``, ``Lrwxrwxrwx``).

    Go's ``os.Lstat`` maps the file type and the set-id/sticky bits to letters written in the
    order ``dalTLDpSugct?`` (a character device is ``Dc``, ``/tmp`` is ``dtrwxrwxrwx``).
    """
    kind = stat.S_IFMT(st_mode)
    flags = (
        ("d", kind == stat.S_IFDIR),
        ("L", kind == stat.S_IFLNK),
        ("D", kind in (stat.S_IFBLK, stat.S_IFCHR)),
        ("p", kind == stat.S_IFIFO),
        ("S", kind == stat.S_IFSOCK),
        ("u", bool(st_mode & stat.S_ISUID)),
        ("g", bool(st_mode & stat.S_ISGID)),
        ("c", kind == stat.S_IFCHR),
        ("t", bool(st_mode & stat.S_ISVTX)),
    )
    letters = "".join(letter for letter, present in flags if present) or "-"
    bits = "".join(
        char if st_mode & (1 << (8 - index)) else "-" for index, char in enumerate("rwxrwxrwx")
    )
    return letters + bits


def _file_type(st_mode: int) -> str:
    if stat.S_ISREG(st_mode):
        return "FILE_TYPE_FILE"
    if stat.S_ISDIR(st_mode):
        return "FILE_TYPE_DIRECTORY"
    return "FILE_TYPE_UNSPECIFIED"


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


def _ensure_dirs(host: str, user: User | None) -> None:
    """``mkdir -p`` whose new directories belong to ``user`` (envd's ``EnsureDirs``)."""
    missing: list[str] = []
    current = host
    while current and not os.path.isdir(current):
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory)
        if user is not None:
            user.own(directory)


class Files:
    """File operations of one envd over the sandbox rooted at ``root``."""

    def __init__(self, root: str = "/", workdir: str = "/") -> None:
        self.root = os.path.realpath(root)
        self.workdir = workdir

    def sandbox_path(self, path: str, user: User | None = None) -> str:
        """The absolute, normalised sandbox path for ``path`` (``~`` is ``user``'s home)."""
        if path.startswith("~"):
            home = user.home if user is not None else os.environ.get("HOME", "/root")
            path = home + path[1:]
        if not path.startswith("/"):
            path = posixpath.join(self.workdir, path)
        return posixpath.normpath(path)

    def host(self, path: str, user: User | None = None) -> str:
        """Where a sandbox path lives on this machine."""
        normalized = self.sandbox_path(path, user)
        if self.root == "/":
            return normalized
        return os.path.join(self.root, normalized.lstrip("/"))

    # -- /files ----------------------------------------------------------------------------

    def read(self, path: str, user: User | None = None) -> bytes:
        """Content of a file; ``404``/``400`` errors carry envd's messages."""
        host = self.host(path, user)
        shown = self.sandbox_path(path, user)
        try:
            info = os.stat(host)
        except FileNotFoundError as exc:
            raise ConnectError("not_found", f"path '{shown}' does not exist") from exc
        if stat.S_ISDIR(info.st_mode):
            raise ConnectError("invalid_argument", f"path '{shown}' is a directory")
        with open(host, "rb") as handle:
            return handle.read()

    def write(self, path: str, data: bytes, user: User | None = None) -> dict[str, str]:
        """Create or replace a file as ``user``, making parents; returns the ``WriteInfo``."""
        host = self.host(path, user)
        shown = self.sandbox_path(path, user)
        if os.path.isdir(host):
            raise ConnectError("invalid_argument", f"path '{shown}' is a directory")
        _ensure_dirs(os.path.dirname(host), user)
        with open(host, "wb") as handle:
            handle.write(data)
        if user is not None:
            user.own(host)
        return {"name": posixpath.basename(shown), "type": "file", "path": shown}

    # -- filesystem.Filesystem -------------------------------------------------------------

    def resolve(self, path: str) -> str | None:
        """The sandbox path a symlink finally points to (``filepath.EvalSymlinks``), or None."""
        host = self.host(path)
        try:
            resolved = os.path.realpath(host, strict=True)
        except (OSError, RuntimeError):
            return None  # broken or cyclic
        if self.root == "/":
            return resolved
        if resolved == self.root or resolved.startswith(self.root + os.sep):
            relative = os.path.relpath(resolved, self.root)
            return "/" if relative == "." else "/" + relative
        return resolved

    def entry(self, path: str, user: User | None = None) -> dict[str, Any]:
        """The ``EntryInfo`` of a path, as envd builds it from ``os.Lstat``.

        ``mode`` is the permission bits only (Go's ``FileMode.Perm()``), ``permissions`` Go's
        ``FileMode.String()`` of the entry itself.  A symlink is described by what it finally
        points to: ``symlinkTarget`` is the fully resolved path, ``type`` and ``mode`` are the
        target's; a broken link keeps its own path as target, with no type and mode 0.
        """
        host = self.host(path, user)
        shown = self.sandbox_path(path, user)
        try:
            info = os.lstat(host)
        except FileNotFoundError as exc:
            raise ConnectError("not_found", f"file not found: {shown}") from exc
        target: str | None = None
        described: os.stat_result | None = info
        if stat.S_ISLNK(info.st_mode):
            target = self.resolve(shown)
            described = None
            if target is not None:
                try:
                    described = os.stat(host)
                except OSError:
                    described = None
            else:
                target = shown
        kind = "FILE_TYPE_UNSPECIFIED"
        mode = 0
        if described is not None:
            kind = _file_type(described.st_mode)
            mode = stat.S_IMODE(described.st_mode) & 0o777
        modified = datetime.datetime.fromtimestamp(info.st_mtime, tz=datetime.timezone.utc)
        entry: dict[str, Any] = {
            "name": posixpath.basename(shown) or "/",
            "type": kind,
            "path": shown,
            "size": str(info.st_size),
            "mode": mode,
            "permissions": go_mode_string(info.st_mode),
            "owner": _owner(info.st_uid),
            "group": _group(info.st_gid),
            "modifiedTime": modified.isoformat().replace("+00:00", "Z"),
        }
        if not entry["mode"]:
            del entry["mode"]  # proto3 JSON omits zero values
        if kind == "FILE_TYPE_UNSPECIFIED":
            del entry["type"]
        if target is not None:
            entry["symlinkTarget"] = target
        return entry

    def list_dir(self, path: str, depth: int, user: User | None = None) -> list[dict[str, Any]]:
        """Entries under a directory, down to ``depth`` levels (1 = direct children)."""
        depth = max(depth, 1)
        top = self.sandbox_path(path, user)
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

    def make_dir(self, path: str, user: User | None = None) -> dict[str, Any]:
        """Create a directory and its parents as ``user``; ``already_exists`` if it is there."""
        host = self.host(path, user)
        shown = self.sandbox_path(path, user)
        if os.path.lexists(host):
            if os.path.isdir(host):
                raise ConnectError("already_exists", f"directory '{shown}' already exists")
            raise ConnectError("invalid_argument", f"path '{shown}' is a file")
        _ensure_dirs(host, user)
        return self.entry(shown)

    def move(self, source: str, destination: str, user: User | None = None) -> dict[str, Any]:
        """Rename, creating the destination's parents as ``user``."""
        src = self.host(source, user)
        if not os.path.lexists(src):
            shown = self.sandbox_path(source, user)
            raise ConnectError("not_found", f"source '{shown}' does not exist")
        dst = self.host(destination, user)
        _ensure_dirs(os.path.dirname(dst), user)
        os.replace(src, dst)
        return self.entry(self.sandbox_path(destination, user))

    def remove(self, path: str, user: User | None = None) -> None:
        """Remove a file, link or whole directory tree; a missing path is no error.

        envd's ``Remove`` is Go's ``os.RemoveAll``, which succeeds when nothing is there.
        """
        host = self.host(path, user)
        if os.path.isdir(host) and not os.path.islink(host):
            import shutil  # here: its import (bz2, lzma) is a tenth of the agent's start

            shutil.rmtree(host)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(host)
