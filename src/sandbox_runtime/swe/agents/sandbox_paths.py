"""What the tool box asks of a sandbox's files: a path's kind, and its own helper commands.

Shared by the editor (:mod:`~sandbox_runtime.swe.agents.r2e_editor`) and the search
(:mod:`~sandbox_runtime.swe.agents.r2e_search`), so both see a path the same way and run
``find``/``grep`` the same way on every backend and isolation mode.
"""

from __future__ import annotations

import codecs
from typing import Literal

import chardet

from sandbox_runtime._core.results import ExecResult
from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.errors import SandboxError
from sandbox_runtime.swe.agents.tool_check import NOT_FOUND_EXIT_CODES, require_tools

__all__ = ["PathKind", "detected_encoding", "path_kind", "read_text", "run_helper", "write_text"]

PathKind = Literal["dir", "file"] | None


def path_kind(sandbox: SandboxRuntime, path: str) -> PathKind:
    """``"dir"``, ``"file"`` or ``None`` (missing, or a broken symlink), links followed.

    Seen through the file API, as Python's ``Path.is_dir()``/``exists()`` see it.
    """
    try:
        info = sandbox.stat(path)
        if info.type == "symlink":  # followed, as ``is_dir`` follows it
            sandbox.list_dir(path)
            return "dir"
    except (FileNotFoundError, PermissionError):
        return None
    except NotADirectoryError:
        return "file"
    return "dir" if info.type == "dir" else "file"


def run_helper(
    sandbox: SandboxRuntime, command: str, *, cwd: str, programs: tuple[str, ...], timeout: float
) -> ExecResult:
    """Run one of the tool box's own commands (find, grep) in ``cwd``.

    The command names its operands relative to ``cwd``, which the backend maps, so it reads
    the sandbox's files on every backend and isolation mode (on ``local`` with
    ``isolation="none"`` an absolute path in a command is the host's).  A program the
    sandbox lacks raises :class:`~sandbox_runtime.ToolUnavailableError`.
    """
    result = sandbox.exec(command, cwd=cwd, timeout=timeout)
    if result.exit_code in NOT_FOUND_EXIT_CODES:
        require_tools(sandbox, programs)
    return result


def read_text(sandbox: SandboxRuntime, path: str) -> str | None:
    """A file's text as R2E-Gym's editor reads it (every newline made LF).

    ``None`` when there is no such file.  The encoding is the one chardet detects in the
    file's bytes (UTF-8 where it detects none), as R2E-Gym's ``file_editor`` decodes; bytes
    that encoding cannot decode are replaced.
    """
    try:
        data = sandbox.read_bytes(path)
    except (FileNotFoundError, IsADirectoryError):
        return None
    except SandboxError as exc:
        if isinstance(exc, (FileNotFoundError, IsADirectoryError)):
            return None
        raise
    text = data.decode(detected_encoding(data), errors="replace")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def detected_encoding(data: bytes) -> str:
    """The encoding chardet guesses for ``data``, or UTF-8 where it has none (or an unknown)."""
    encoding = chardet.detect(data)["encoding"]
    if encoding is None:
        return "utf-8"
    try:
        codecs.lookup(encoding)
    except LookupError:
        return "utf-8"
    return encoding


def write_text(sandbox: SandboxRuntime, path: str, text: str) -> None:
    """Write ``text`` over ``path``, keeping an existing file's permission bits."""
    mode = 0o644
    try:
        info = sandbox.stat(path)
        if info.type == "file":
            mode = info.mode
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        pass
    sandbox.write_text(path, text, mode=mode)
