"""``AsyncSandboxRuntime``: the same methods as :class:`SandboxRuntime`, awaitable.

Backends and their SDKs (docker-py, the kubernetes client, tencentcloud) are synchronous, so
the async facade runs each call in a worker thread instead of duplicating every backend.
Each method is written out (no generated mirror) so that type checkers and readers see the
real signatures.  Cancelling an awaiting task does not stop a command already running in the
sandbox; its timeout still does.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

from sandbox_runtime.config import SandboxConfig
from sandbox_runtime.results import ExecResult, FileInfo, PatchResult
from sandbox_runtime.runtime import _DEFAULT, SandboxRuntime
from sandbox_runtime.usage import SandboxUsage

__all__ = ["AsyncSandboxRuntime"]


class AsyncSandboxRuntime:
    """Asyncio facade over a :class:`SandboxRuntime`; see that class for each method."""

    def __init__(self, config: SandboxConfig | None = None, /, **fields: Any) -> None:
        self._sync = SandboxRuntime(config, **fields)

    @property
    def sync(self) -> SandboxRuntime:
        """The synchronous runtime underneath, for code that mixes both styles."""
        return self._sync

    @property
    def config(self) -> SandboxConfig:
        """The validated configuration."""
        return self._sync.config

    @property
    def id(self) -> str:
        """The backend's identifier of this sandbox."""
        return self._sync.id

    @property
    def usage(self) -> SandboxUsage:
        """What this sandbox used so far (counted, never asked of the backend)."""
        return self._sync.usage

    async def start(self) -> AsyncSandboxRuntime:
        """Create the sandbox."""
        await asyncio.to_thread(self._sync.start)
        return self

    async def close(self) -> None:
        """Stop and remove the sandbox; idempotent."""
        await asyncio.to_thread(self._sync.close)

    async def __aenter__(self) -> AsyncSandboxRuntime:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def is_alive(self) -> bool:
        """True while the sandbox exists."""
        return await asyncio.to_thread(self._sync.is_alive)

    async def exec(
        self,
        command: str | Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = _DEFAULT,
        stdin: bytes | str | None = None,
        check: bool = False,
        max_output_bytes: int | None = None,
    ) -> ExecResult:
        """Run a command; see :meth:`SandboxRuntime.exec`."""
        return await asyncio.to_thread(
            self._sync.exec,
            command,
            cwd=cwd,
            env=env,
            timeout=timeout,
            stdin=stdin,
            check=check,
            max_output_bytes=max_output_bytes,
        )

    async def run_tests(
        self,
        command: str | Sequence[str],
        *,
        timeout: float | None = _DEFAULT,
        cwd: str | None = None,
    ) -> ExecResult:
        """Run a test command."""
        return await asyncio.to_thread(self._sync.run_tests, command, timeout=timeout, cwd=cwd)

    async def read_bytes(self, path: str | os.PathLike[str]) -> bytes:
        """Read a file."""
        return await asyncio.to_thread(self._sync.read_bytes, path)

    async def read_text(
        self, path: str | os.PathLike[str], *, encoding: str = "utf-8", errors: str = "strict"
    ) -> str:
        """Read a text file."""
        return await asyncio.to_thread(self._sync.read_text, path, encoding=encoding, errors=errors)

    async def write_bytes(
        self, path: str | os.PathLike[str], data: bytes, *, mode: int = 0o644
    ) -> None:
        """Write a file."""
        await asyncio.to_thread(self._sync.write_bytes, path, data, mode=mode)

    async def write_text(
        self, path: str | os.PathLike[str], text: str, *, encoding: str = "utf-8", mode: int = 0o644
    ) -> None:
        """Write a text file."""
        await asyncio.to_thread(self._sync.write_text, path, text, encoding=encoding, mode=mode)

    async def exists(self, path: str | os.PathLike[str]) -> bool:
        """True if the path exists."""
        return await asyncio.to_thread(self._sync.exists, path)

    async def stat(self, path: str | os.PathLike[str]) -> FileInfo:
        """What ``path`` is (``lstat``)."""
        return await asyncio.to_thread(self._sync.stat, path)

    async def list_dir(self, path: str | os.PathLike[str] = ".") -> list[FileInfo]:
        """The entries of a directory, sorted by name."""
        return await asyncio.to_thread(self._sync.list_dir, path)

    async def make_dir(self, path: str | os.PathLike[str]) -> None:
        """Create a directory and its parents."""
        await asyncio.to_thread(self._sync.make_dir, path)

    async def remove(self, path: str | os.PathLike[str], *, recursive: bool = False) -> None:
        """Remove a file, or a directory tree with ``recursive=True``; missing is fine."""
        await asyncio.to_thread(self._sync.remove, path, recursive=recursive)

    async def upload(self, local_path: str | os.PathLike[str], sandbox_path: str) -> None:
        """Copy a host file or directory in."""
        await asyncio.to_thread(self._sync.upload, local_path, sandbox_path)

    async def download(self, sandbox_path: str, local_path: str | os.PathLike[str]) -> None:
        """Copy a sandbox file or directory out."""
        await asyncio.to_thread(self._sync.download, sandbox_path, local_path)

    async def base_commit(self, *, cwd: str | None = None, refresh: bool = False) -> str:
        """The repository's base commit."""
        return await asyncio.to_thread(self._sync.base_commit, cwd=cwd, refresh=refresh)

    async def apply_patch(self, patch: str, *, cwd: str | None = None) -> PatchResult:
        """Apply a unified diff."""
        return await asyncio.to_thread(self._sync.apply_patch, patch, cwd=cwd)

    async def diff(self, *, base: str | None = None, cwd: str | None = None) -> str:
        """The working tree's changes against the base commit."""
        return await asyncio.to_thread(self._sync.diff, base=base, cwd=cwd)

    async def reset(self, *, base: str | None = None, cwd: str | None = None) -> None:
        """Return the repository to the base commit."""
        await asyncio.to_thread(self._sync.reset, base=base, cwd=cwd)
