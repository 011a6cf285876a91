"""The exceptions sandbox-runtime raises.

Every error derives from :class:`SandboxError`, and most also derive from the builtin
that a caller would naturally catch (``TimeoutError``, ``FileNotFoundError``, ...), so code
that knows nothing of this library still handles them sensibly::

    SandboxError
    ├── ConfigError (ValueError)                 bad input that pydantic cannot see
    ├── BackendNotFoundError (LookupError)       no backend of that name is installed
    ├── BackendUnavailableError                  installed, but cannot run here (no daemon)
    ├── SandboxStartError                        the sandbox did not come up
    │   ├── QuotaExceededError                   ... because the service refused: quota or rate
    │   └── ImagePullError                       ... because its image could not be pulled
    ├── SandboxGoneError                         the sandbox died, expired or was removed
    │   └── SandboxClosedError                   ... because this client closed it
    ├── LifetimeCapError (ValueError)            an extension past the sandbox's hard cap
    ├── SandboxTimeoutError (TimeoutError)       start or a checked command ran past its time
    ├── CommandFailedError                       a checked command exited non-zero
    ├── SandboxFileNotFoundError (FileNotFoundError)
    ├── SandboxIsADirectoryError (IsADirectoryError)
    ├── SandboxNotADirectoryError (NotADirectoryError)
    ├── PathEscapeError (PermissionError)        a path that leaves the sandbox root
    ├── SandboxReadOnlyError (PermissionError)   a write to a read-only part of the sandbox
    ├── SandboxNoSpaceError (OSError)            a write found the sandbox's disk full
    ├── ToolUnavailableError                     a tool the library installed cannot run there
    ├── CapabilityUnsupportedError               the backend lacks the capability a call needs
    ├── CheckpointNotFoundError (LookupError)    no checkpoint of that id (deleted or reaped)
    └── BackendError                             the backend failed in a way we did not map

A command's non-zero exit code is data (:class:`~sandbox_runtime.ExecResult`), not an
exception, unless the caller asks for ``check=True``.  Backends translate their SDK's
exceptions into this tree at their boundary with ``raise ... from exc``.
"""

from __future__ import annotations

import errno
import typing

__all__ = [
    "BackendError",
    "BackendNotFoundError",
    "BackendUnavailableError",
    "CapabilityUnsupportedError",
    "CheckpointNotFoundError",
    "CommandFailedError",
    "ConfigError",
    "GoneCause",
    "ImagePullError",
    "LifetimeCapError",
    "PathEscapeError",
    "QuotaExceededError",
    "SandboxClosedError",
    "SandboxError",
    "SandboxFileNotFoundError",
    "SandboxGoneError",
    "SandboxIsADirectoryError",
    "SandboxNoSpaceError",
    "SandboxNotADirectoryError",
    "SandboxReadOnlyError",
    "SandboxStartError",
    "SandboxTimeoutError",
    "ToolUnavailableError",
]


class _CommandResult(typing.Protocol):
    """What these errors read of a command's result (it is an :class:`~sandbox_runtime.ExecResult`).

    A Protocol rather than the class itself so that this module, which the core imports to
    raise its errors, imports nothing of the core.
    """

    @property
    def command(self) -> str: ...

    @property
    def exit_code(self) -> int: ...

    @property
    def stdout(self) -> str: ...

    @property
    def stderr(self) -> str: ...


class SandboxError(Exception):
    """Base class of every error raised by sandbox-runtime."""


class ConfigError(SandboxError, ValueError):
    """A configuration or argument is invalid in a way the pydantic models cannot express."""


class BackendNotFoundError(SandboxError, LookupError):
    """No backend of the requested name is installed.

    The message lists the installed backends and, for a known backend that is missing,
    the extra that provides it.
    """


class BackendUnavailableError(SandboxError):
    """The backend is installed but cannot run here: its daemon is down, an extra is missing."""


class SandboxStartError(SandboxError):
    """The sandbox could not be created or did not become ready."""


class QuotaExceededError(SandboxStartError):
    """The service refused the start for its quota or rate limit, after the retry budget.

    Nothing was started, so another backend (or a later try) may start the sandbox instead:
    the ``spread`` backend moves to its next member on this error, and only on this one.
    """


class ImagePullError(SandboxStartError):
    """The sandbox's image could not be pulled: an infrastructure fault, never a task's 0.

    ``registry`` names the registry asked (``docker.io`` for a bare name), ``reason`` is the
    registry's or engine's own words, and ``transient`` says whether the failure was of a
    kind that retries (5xx, connection reset, timeout) and was still failing after them.
    """

    def __init__(
        self, message: str, *, image: str, registry: str, reason: str, transient: bool = False
    ) -> None:
        super().__init__(message)
        self.image = image
        self.registry = registry
        self.reason = reason
        self.transient = transient


#: Why a sandbox is gone, where its backend can tell (``SandboxGoneError.cause``).
GoneCause = typing.Literal["expired", "killed", "evicted", "closed", "unknown"]


class SandboxGoneError(SandboxError):
    """The sandbox no longer exists: it died, reached its lifetime, or was removed.

    :attr:`cause` says which, where the backend can tell: ``"expired"`` (its lifetime ran
    out), ``"killed"`` (removed by someone: a reaper, ``docker rm``, a pod deleted),
    ``"evicted"`` (the platform took it: a node pressure eviction, a crashed instance),
    ``"closed"`` (this client closed it), ``"unknown"`` otherwise.
    """

    def __init__(self, message: str = "", *, cause: GoneCause = "unknown") -> None:
        super().__init__(message)
        self.cause: GoneCause = cause


class LifetimeCapError(SandboxError, ValueError):
    """An extension asked for more than the sandbox's hard cap.

    The cap is ``SandboxConfig.max_lifetime`` or the service's own maximum, whichever comes
    first; :attr:`cap_at` is the latest end allowed (seconds since the epoch).
    """

    def __init__(self, message: str, cap_at: float) -> None:
        super().__init__(message)
        self.cap_at = cap_at


class SandboxClosedError(SandboxGoneError):
    """The sandbox was closed by this client and cannot be used any more."""

    def __init__(self, message: str = "") -> None:
        super().__init__(message, cause="closed")


class SandboxTimeoutError(SandboxError, TimeoutError):
    """An operation ran past its time limit.

    For a command run with ``check=True`` the partial result is in :attr:`result`.
    """

    def __init__(self, message: str, result: _CommandResult | None = None) -> None:
        super().__init__(message)
        self.result = result


class CommandFailedError(SandboxError):
    """A command run with ``check=True`` exited with a non-zero code; see :attr:`result`."""

    def __init__(self, result: _CommandResult) -> None:
        tail = (result.stderr or result.stdout).strip()[-2000:]
        message = f"command exited with code {result.exit_code}: {result.command}"
        super().__init__(f"{message}\n{tail}" if tail else message)
        self.result = result


class SandboxFileNotFoundError(SandboxError, FileNotFoundError):
    """A path does not exist inside the sandbox."""


class SandboxIsADirectoryError(SandboxError, IsADirectoryError):
    """A file operation was given a directory."""


class SandboxNotADirectoryError(SandboxError, NotADirectoryError):
    """A directory operation was given something else."""


class PathEscapeError(SandboxError, PermissionError):
    """A path resolves outside the sandbox root (``..`` components or an escaping symlink)."""


class SandboxReadOnlyError(SandboxError, PermissionError):
    """A write to a part of the sandbox's filesystem that the backend shows read-only."""


class SandboxNoSpaceError(SandboxError, OSError):
    """A write found no room left in the sandbox (``ENOSPC``: its disk, ``/tmp`` or quota full).

    Not transient: sending the same bytes again fails the same way, so it is raised at once,
    never retried.  The sandbox keeps serving reads and commands that write nothing.
    """

    def __init__(self, message: str) -> None:
        super().__init__(errno.ENOSPC, message)

    def __str__(self) -> str:
        return str(self.strerror)


class ToolUnavailableError(SandboxError):
    """A tool the library installed into a sandbox cannot run there: an infrastructure fault.

    Raised at start when the sandbox's commands cannot see the tools (the message says what
    to change, such as ``isolation=namespace`` on ``local``), and by a step whose tool was
    "not found": the agent never reads that as an observation, and no reward of 0 follows.
    """


class BackendError(SandboxError):
    """The backend failed in a way that has no more specific error here; the cause is chained."""


class CapabilityUnsupportedError(SandboxError):
    """A call needs a capability (checkpoint, fork, pause) that the sandbox's backend lacks.

    Callers ask for capabilities, never backend names: :attr:`capability` is the
    :class:`~sandbox_runtime.Capability` value (``"fork"``) and :attr:`backend` the backend.
    """

    def __init__(self, capability: str, backend: str, detail: str = "") -> None:
        message = f"the {backend!r} backend does not support {capability!r}"
        super().__init__(f"{message}: {detail}" if detail else message)
        self.capability = capability
        self.backend = backend


class CheckpointNotFoundError(SandboxError, LookupError):
    """No checkpoint of that id exists on the backend: never made, deleted, or reaped."""
