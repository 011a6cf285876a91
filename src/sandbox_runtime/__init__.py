r"""sandbox-runtime: one interface to isolated Linux sandboxes, whatever runs them.

Open a sandbox on any installed backend with the same code::

    from sandbox_runtime import SandboxRuntime

    with SandboxRuntime(backend="local") as sandbox:
        result = sandbox.exec("echo hello")
        assert result.stdout == "hello\\n"

The public API is what this module exports, for people who run sandboxes.  People who write
a backend use :mod:`sandbox_runtime.backend_kit` (the contract, its helpers and the
conformance suite).  :mod:`sandbox_runtime.errors` holds the error tree; the SWE layer
(:mod:`sandbox_runtime.swe`), the training integrations (:mod:`sandbox_runtime.integrations`),
the built-in backends (:mod:`sandbox_runtime.backends`) and the command line
(:mod:`sandbox_runtime.cli`) sit on top.  Everything in ``_``-prefixed packages is private.
"""

from sandbox_runtime._core.aio import (
    AsyncCommandHandle,
    AsyncForkResult,
    AsyncSandboxPool,
    AsyncSandboxRuntime,
)
from sandbox_runtime._core.backend import (
    Availability,
    Capability,
    ReapedSandbox,
    SandboxInfo,
)
from sandbox_runtime._core.checkpoints import Checkpoint, CheckpointKind
from sandbox_runtime._core.config import Resources, SandboxConfig
from sandbox_runtime._core.keepalive import KeepAlive
from sandbox_runtime._core.limits import set_start_limit
from sandbox_runtime._core.pool import Lease, PoolStats, SandboxPool
from sandbox_runtime._core.registry import BackendInfo, list_backends, load_backend
from sandbox_runtime._core.results import TIMEOUT_EXIT_CODE, ExecResult, FileInfo, PatchResult
from sandbox_runtime._core.runtime import (
    ForkResult,
    SandboxRuntime,
    delete_checkpoint,
    list_checkpoints,
    list_sandboxes,
)
from sandbox_runtime._core.shutdown import close_everything, close_on_signal
from sandbox_runtime._core.streaming import CommandHandle
from sandbox_runtime._core.usage import SandboxUsage
from sandbox_runtime.errors import (
    BackendError,
    BackendNotFoundError,
    BackendUnavailableError,
    CapabilityUnsupportedError,
    CheckpointNotFoundError,
    CommandFailedError,
    ConfigError,
    ImagePullError,
    LifetimeCapError,
    PathEscapeError,
    QuotaExceededError,
    SandboxClosedError,
    SandboxError,
    SandboxFileNotFoundError,
    SandboxGoneError,
    SandboxIsADirectoryError,
    SandboxNoSpaceError,
    SandboxNotADirectoryError,
    SandboxReadOnlyError,
    SandboxStartError,
    SandboxTimeoutError,
    ToolUnavailableError,
)

__version__ = "0.1.0"

__all__ = [
    "TIMEOUT_EXIT_CODE",
    "AsyncCommandHandle",
    "AsyncForkResult",
    "AsyncSandboxPool",
    "AsyncSandboxRuntime",
    "Availability",
    "BackendError",
    "BackendInfo",
    "BackendNotFoundError",
    "BackendUnavailableError",
    "Capability",
    "CapabilityUnsupportedError",
    "Checkpoint",
    "CheckpointKind",
    "CheckpointNotFoundError",
    "CommandFailedError",
    "CommandHandle",
    "ConfigError",
    "ExecResult",
    "FileInfo",
    "ForkResult",
    "ImagePullError",
    "KeepAlive",
    "Lease",
    "LifetimeCapError",
    "PatchResult",
    "PathEscapeError",
    "PoolStats",
    "QuotaExceededError",
    "ReapedSandbox",
    "Resources",
    "SandboxClosedError",
    "SandboxConfig",
    "SandboxError",
    "SandboxFileNotFoundError",
    "SandboxGoneError",
    "SandboxInfo",
    "SandboxIsADirectoryError",
    "SandboxNoSpaceError",
    "SandboxNotADirectoryError",
    "SandboxPool",
    "SandboxReadOnlyError",
    "SandboxRuntime",
    "SandboxStartError",
    "SandboxTimeoutError",
    "SandboxUsage",
    "ToolUnavailableError",
    "__version__",
    "close_everything",
    "close_on_signal",
    "delete_checkpoint",
    "list_backends",
    "list_checkpoints",
    "list_sandboxes",
    "load_backend",
    "set_start_limit",
]
