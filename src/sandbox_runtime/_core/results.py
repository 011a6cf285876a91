"""Typed results of sandbox operations.

Results are frozen dataclasses rather than pydantic models: they are created on every
command, carry raw bytes, and never need validation, so the lighter type is the right one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

from sandbox_runtime._core.output import HeadTailBuffer
from sandbox_runtime.errors import CommandFailedError, SandboxTimeoutError

__all__ = ["TIMEOUT_EXIT_CODE", "ExecResult", "FileInfo", "FileType", "PatchResult"]

#: What a directory entry is; ``other`` covers fifos, sockets and devices.
FileType = Literal["file", "dir", "symlink", "other"]

#: Exit code reported for a command killed by its timeout, the same code ``timeout(1)`` uses,
#: so that scripts written against R2E-Gym or coreutils keep working.
TIMEOUT_EXIT_CODE = 124


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


@dataclass(frozen=True, slots=True)
class ExecResult:
    """What a command did.

    Output is kept as bytes so that binary and non-UTF-8 output survive; ``stdout`` and
    ``stderr`` decode it as UTF-8, replacing undecodable bytes.  When a stream was larger
    than the output cap, its head and tail are kept around a marker line and the matching
    ``*_truncated`` flag is set.
    """

    command: str
    exit_code: int
    stdout_bytes: bytes = b""
    stderr_bytes: bytes = b""
    duration: float = 0.0
    timed_out: bool = False
    stdout_truncated: bool = False
    stderr_truncated: bool = False

    @classmethod
    def from_buffers(
        cls,
        command: str,
        exit_code: int,
        stdout: HeadTailBuffer,
        stderr: HeadTailBuffer,
        *,
        began: float,
        timed_out: bool = False,
    ) -> ExecResult:
        """The result of a command whose streams were captured in head/tail buffers.

        Every backend ends a command here, so the timeout convention (exit code 124) and the
        truncation flags are decided in one place; ``began`` is a ``time.monotonic()`` value.
        """
        return cls(
            command=command,
            exit_code=TIMEOUT_EXIT_CODE if timed_out else exit_code,
            stdout_bytes=stdout.getvalue(),
            stderr_bytes=stderr.getvalue(),
            duration=time.monotonic() - began,
            timed_out=timed_out,
            stdout_truncated=stdout.truncated,
            stderr_truncated=stderr.truncated,
        )

    @property
    def stdout(self) -> str:
        """Standard output decoded as UTF-8 (invalid bytes replaced)."""
        return _decode(self.stdout_bytes)

    @property
    def stderr(self) -> str:
        """Standard error decoded as UTF-8 (invalid bytes replaced)."""
        return _decode(self.stderr_bytes)

    @property
    def output(self) -> str:
        """Standard output followed by standard error, the way most agents show a result."""
        if not self.stderr_bytes:
            return self.stdout
        if not self.stdout_bytes:
            return self.stderr
        separator = "" if self.stdout_bytes.endswith(b"\n") else "\n"
        return self.stdout + separator + self.stderr

    @property
    def ok(self) -> bool:
        """True when the command exited with code 0 within its time limit."""
        return self.exit_code == 0 and not self.timed_out

    @property
    def truncated(self) -> bool:
        """True when either stream was cut to the output cap."""
        return self.stdout_truncated or self.stderr_truncated

    def check(self) -> ExecResult:
        """Return self if the command succeeded, else raise the matching error."""
        if self.timed_out:
            raise SandboxTimeoutError(
                f"command timed out after {self.duration:.1f}s: {self.command}", self
            )
        if self.exit_code != 0:
            raise CommandFailedError(self)
        return self


@dataclass(frozen=True, slots=True)
class PatchResult:
    """Whether a patch applied, and if not, what the patch tool said about it."""

    applied: bool
    message: str = ""
    files: tuple[str, ...] = field(default=())
    method: str = ""
    """Which tool applied it: ``git apply``, ``git apply --recount`` or ``patch --fuzz=5``."""

    def __bool__(self) -> bool:
        return self.applied


@dataclass(frozen=True, slots=True)
class FileInfo:
    """One path in a sandbox, as ``lstat`` sees it (a symlink is described, not followed)."""

    name: str
    """The last path component."""
    path: str
    """The absolute sandbox path."""
    type: FileType
    size: int
    """Bytes (for a symlink, the length of its target text)."""
    mode: int
    """Permission bits only (``0o755``), as ``ls -l`` and e2b show them."""
    mtime: float
    """Modification time, seconds since the epoch."""
    symlink_target: str | None = None
    """A symlink's target text (not resolved); ``None`` for everything else."""

    @property
    def is_dir(self) -> bool:
        """True for a directory (not a symlink to one)."""
        return self.type == "dir"

    @property
    def is_file(self) -> bool:
        """True for a regular file (not a symlink to one)."""
        return self.type == "file"
