"""File operations for backends that only run commands: stat, list, make a directory, remove.

A backend with a direct way (a host directory, envd's filesystem API) overrides the
:class:`~sandbox_runtime.Backend` methods; every other backend gets these, written once over
its ``exec``.  One command per call: GNU ``find -printf`` describes a whole directory in one
process (Debian and Ubuntu images always have findutils); where it is missing (busybox), a
shell loop with ``stat -c`` and ``readlink`` does the same, one entry at a time.  Fields are
NUL-separated, so names with spaces, newlines or non-UTF-8 bytes survive.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable

from sandbox_runtime._core.results import ExecResult, FileInfo, FileType
from sandbox_runtime.errors import (
    BackendError,
    SandboxFileNotFoundError,
    SandboxIsADirectoryError,
    SandboxNotADirectoryError,
)

__all__ = ["describe", "list_directory", "make_directory", "remove_path"]

Run = Callable[[tuple[str, ...]], ExecResult]
"""Runs an argument vector in the sandbox (cwd ``/``) and returns its result."""

_MISSING, _NOT_A_DIR, _IS_A_DIR = 3, 4, 5
_FIELDS = 6
_TYPES: dict[str, FileType] = {"f": "file", "d": "dir", "l": "symlink"}

# $1 path, $2 "list" or "stat".  Output per entry: type, size, mode, mtime, link, name (NUL).
_DESCRIBE = f"""
[ -e "$1" ] || [ -L "$1" ] || exit {_MISSING}
if [ "$2" = list ]; then
  if [ -L "$1" ] || [ ! -d "$1" ]; then exit {_NOT_A_DIR}; fi
fi
if find / -maxdepth 0 -printf '' >/dev/null 2>&1; then
  if [ "$2" = list ]; then
    exec find "$1" -mindepth 1 -maxdepth 1 -printf '%y\\0%s\\0%m\\0%T@\\0%l\\0%f\\0'
  fi
  exec find "$1" -maxdepth 0 -printf '%y\\0%s\\0%m\\0%T@\\0%l\\0%f\\0'
fi
emit() {{
  t=; y=o
  if [ -L "$1" ]; then y=l; t=$(readlink -- "$1"); elif [ -d "$1" ]; then y=d
  elif [ -f "$1" ]; then y=f; fi
  s=$(stat -c '%s %a %Y' -- "$1") || return 0
  set -- "$1" $s
  printf '%s\\0%s\\0%s\\0%s\\0%s\\0%s\\0' "$y" "$2" "$3" "$4" "$t" "${{1##*/}}"
}}
if [ "$2" = list ]; then
  for f in "$1"/* "$1"/.[!.]* "$1"/..?*; do
    if [ -e "$f" ] || [ -L "$f" ]; then emit "$f"; fi
  done
else
  emit "$1"
fi
"""

# $1 path, $2 "1" to remove a directory tree.  A missing path is not an error (as envd).
_REMOVE = f"""
[ -e "$1" ] || [ -L "$1" ] || exit 0
if [ -d "$1" ] && [ ! -L "$1" ]; then
  [ "$2" = 1 ] || exit {_IS_A_DIR}
  exec rm -rf -- "$1"
fi
exec rm -f -- "$1"
"""

# $1 path.  Parents are created; an existing directory is fine, anything else there is not.
_MAKE_DIR = f"""
if [ -e "$1" ] || [ -L "$1" ]; then [ -d "$1" ] && exit 0; exit {_NOT_A_DIR}; fi
exec mkdir -p -- "$1"
"""


def _checked(result: ExecResult, path: str, what: str) -> ExecResult:
    if result.exit_code == _MISSING:
        raise SandboxFileNotFoundError(f"no such file or directory in the sandbox: {path}")
    if result.exit_code == _NOT_A_DIR:
        raise SandboxNotADirectoryError(f"not a directory: {path}")
    if result.exit_code == _IS_A_DIR:
        raise SandboxIsADirectoryError(f"is a directory (use recursive=True): {path}")
    if not result.ok:
        raise BackendError(f"{what} {path} failed: {result.output.strip()[-500:]}")
    return result


def _parse(data: bytes, parent: str | None, path: str) -> list[FileInfo]:
    fields = data.split(b"\0")
    if fields and fields[-1] == b"":
        fields.pop()
    if len(fields) % _FIELDS:
        raise BackendError(f"unreadable listing of {path}")
    entries = []
    for i in range(0, len(fields), _FIELDS):
        kind, size, mode, mtime, link, name = (
            f.decode(errors="surrogateescape") for f in fields[i : i + _FIELDS]
        )
        file_type = _TYPES.get(kind, "other")
        entries.append(
            FileInfo(
                name=name if parent is not None else posixpath.basename(path) or "/",
                path=posixpath.join(parent, name) if parent is not None else path,
                type=file_type,
                size=int(size),
                mode=int(mode, 8),
                mtime=float(mtime),
                symlink_target=link if file_type == "symlink" else None,
            )
        )
    return entries


def describe(run: Run, path: str) -> FileInfo:
    """``lstat`` of ``path``."""
    result = _checked(run(("/bin/sh", "-c", _DESCRIBE, "sh", path, "stat")), path, "stat")
    entries = _parse(result.stdout_bytes, None, path)
    if len(entries) != 1:
        raise BackendError(f"stat {path}: unexpected answer")
    return entries[0]


def list_directory(run: Run, path: str) -> list[FileInfo]:
    """The entries of directory ``path`` (not recursive), sorted by name."""
    result = _checked(run(("/bin/sh", "-c", _DESCRIBE, "sh", path, "list")), path, "list")
    return sorted(_parse(result.stdout_bytes, path, path), key=lambda entry: entry.name)


def make_directory(run: Run, path: str) -> None:
    """Create ``path`` and its missing parents; an existing directory is fine."""
    _checked(run(("/bin/sh", "-c", _MAKE_DIR, "sh", path)), path, "make directory")


def remove_path(run: Run, path: str, *, recursive: bool) -> None:
    """Remove a file, a symlink, or (with ``recursive``) a directory tree; missing is fine."""
    flag = "1" if recursive else "0"
    _checked(run(("/bin/sh", "-c", _REMOVE, "sh", path, flag)), path, "remove")
