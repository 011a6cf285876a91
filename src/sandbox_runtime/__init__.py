r"""sandbox-runtime: one interface to isolated Linux sandboxes, whatever runs them.

Open a sandbox on any installed backend with the same code::

    from sandbox_runtime import SandboxRuntime

    with SandboxRuntime(backend="local") as sandbox:
        result = sandbox.exec("echo hello")
        assert result.stdout == "hello\\n"

The public API is what this module exports; everything in ``_``-prefixed modules is private.
"""

from sandbox_runtime.aio import AsyncSandboxPool, AsyncSandboxRuntime
from sandbox_runtime.backend import (
    Availability,
    Backend,
    Capability,
    ExecRequest,
    ReapedSandbox,
    SandboxInfo,
)
from sandbox_runtime.config import BackendOptions, Resources, SandboxConfig
from sandbox_runtime.errors import (
    BackendError,
    BackendNotFoundError,
    BackendUnavailableError,
    CommandFailedError,
    ConfigError,
    PathEscapeError,
    SandboxClosedError,
    SandboxError,
    SandboxFileNotFoundError,
    SandboxGoneError,
    SandboxIsADirectoryError,
    SandboxNotADirectoryError,
    SandboxReadOnlyError,
    SandboxStartError,
    SandboxTimeoutError,
)
from sandbox_runtime.limits import set_start_limit
from sandbox_runtime.pool import Lease, PoolStats, SandboxPool
from sandbox_runtime.registry import BackendInfo, list_backends, load_backend
from sandbox_runtime.results import TIMEOUT_EXIT_CODE, ExecResult, FileInfo, PatchResult
from sandbox_runtime.runtime import SandboxRuntime, list_sandboxes
from sandbox_runtime.streaming import CommandHandle
from sandbox_runtime.usage import SandboxUsage

__version__ = "0.1.0"

__all__ = [
    "TIMEOUT_EXIT_CODE",
    "AsyncSandboxPool",
    "AsyncSandboxRuntime",
    "Availability",
    "Backend",
    "BackendError",
    "BackendInfo",
    "BackendNotFoundError",
    "BackendOptions",
    "BackendUnavailableError",
    "Capability",
    "CommandFailedError",
    "CommandHandle",
    "ConfigError",
    "ExecRequest",
    "ExecResult",
    "FileInfo",
    "Lease",
    "PatchResult",
    "PathEscapeError",
    "PoolStats",
    "ReapedSandbox",
    "Resources",
    "SandboxClosedError",
    "SandboxConfig",
    "SandboxError",
    "SandboxFileNotFoundError",
    "SandboxGoneError",
    "SandboxInfo",
    "SandboxIsADirectoryError",
    "SandboxNotADirectoryError",
    "SandboxPool",
    "SandboxReadOnlyError",
    "SandboxRuntime",
    "SandboxStartError",
    "SandboxTimeoutError",
    "SandboxUsage",
    "__version__",
    "list_backends",
    "list_sandboxes",
    "load_backend",
    "set_start_limit",
]
