"""``AsyncSandboxRuntime``: the same methods as :class:`SandboxRuntime`, awaitable.

Backends and their SDKs (docker-py, the kubernetes client, tencentcloud) are synchronous, so
the async facade runs each call in a worker thread instead of duplicating every backend.
Each method is written out (no generated mirror) so that type checkers and readers see the
real signatures.  Cancelling an awaiting task does not stop a command already running in the
sandbox; its timeout still does (or, for :meth:`AsyncSandboxRuntime.exec_background`, the
handle's ``kill``).

The threads come from an executor of this library's own, not asyncio's default one: that one
has ``min(32, cpus + 4)`` threads, so on a 2-core machine sixty concurrent one-second commands
took ten seconds, each call waiting for a thread while the threads only waited on sandboxes.
A call here holds a thread for as long as its command runs, so the executor needs one thread
per concurrent call: the shared one grows on demand up to :data:`DEFAULT_MAX_WORKERS`
(:func:`set_default_max_workers` changes it), and a caller who wants its own bound passes
``executor=`` to each sandbox.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

from sandbox_runtime._core.backend import Backend
from sandbox_runtime._core.checkpoints import Checkpoint
from sandbox_runtime._core.config import SandboxConfig
from sandbox_runtime._core.keepalive import KeepAlive
from sandbox_runtime._core.pool import Lease, PoolStats, SandboxPool
from sandbox_runtime._core.results import ExecResult, FileInfo, PatchResult
from sandbox_runtime._core.runtime import _DEFAULT, ForkResult, SandboxRuntime
from sandbox_runtime._core.streaming import CommandHandle, TextListener
from sandbox_runtime._core.tree import TreeChanges, TreeMark
from sandbox_runtime._core.usage import SandboxUsage

__all__ = [
    "DEFAULT_MAX_WORKERS",
    "AsyncCommandHandle",
    "AsyncForkResult",
    "AsyncLease",
    "AsyncSandboxPool",
    "AsyncSandboxRuntime",
    "default_executor",
    "set_default_max_workers",
]

T = TypeVar("T")

#: Threads of the shared executor: one per concurrent call.  Threads are made only when
#: calls overlap, and each mostly waits on a socket or a pipe, so a large bound costs little.
DEFAULT_MAX_WORKERS = 256

_shared_lock = threading.Lock()
_shared: ThreadPoolExecutor | None = None
_shared_size = DEFAULT_MAX_WORKERS


def default_executor() -> Executor:
    """The executor every :class:`AsyncSandboxRuntime` without its own uses (made lazily)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = ThreadPoolExecutor(
                max_workers=_shared_size, thread_name_prefix="sandbox-runtime-aio"
            )
        return _shared


def set_default_max_workers(max_workers: int) -> None:
    """Bound the shared executor at ``max_workers`` threads (calls beyond it wait for one).

    Calls already running finish on the old executor; new calls use a new one.
    """
    global _shared, _shared_size
    if max_workers < 1:
        raise ValueError(f"max_workers must be at least 1, got {max_workers}")
    with _shared_lock:
        old, _shared, _shared_size = _shared, None, max_workers
    if old is not None:
        old.shutdown(wait=False)


async def _in_executor(
    executor: Executor | None, function: Callable[..., T], /, *args: Any, **kwargs: Any
) -> T:
    """``function(*args, **kwargs)`` in ``executor`` (default: the shared one).

    The caller's context is copied as ``asyncio.to_thread`` does, so logging or tracing
    context set by the caller is seen by the backend's code.
    """
    loop = asyncio.get_running_loop()
    call = functools.partial(contextvars.copy_context().run, function, *args, **kwargs)
    return await loop.run_in_executor(executor or default_executor(), call)


class AsyncCommandHandle:
    """A command running in the background (:meth:`AsyncSandboxRuntime.exec_background`).

    The async face of a :class:`CommandHandle`: the command runs on a thread of its own, as
    with the synchronous runtime, and the handle's blocking calls (``wait``, ``kill``) run in
    the sandbox's executor.  A ``wait`` holds an executor thread until the command ends or its
    ``timeout`` passes, and cancelling the task awaiting it stops neither: ``kill`` ends the
    command.
    """

    def __init__(self, handle: CommandHandle, executor: Executor | None) -> None:
        self._handle = handle
        self._executor = executor

    @property
    def sync(self) -> CommandHandle:
        """The synchronous handle underneath."""
        return self._handle

    @property
    def command(self) -> str:
        """The command, as text (an argument vector is shell-quoted)."""
        return self._handle.command

    @property
    def done(self) -> bool:
        """True once the command has ended (its result or error is ready)."""
        return self._handle.done

    @property
    def killed(self) -> bool:
        """True when :meth:`kill` was called before the command ended."""
        return self._handle.killed

    async def wait(self, timeout: float | None = None) -> ExecResult:
        """The command's result; see :meth:`CommandHandle.wait` (``TimeoutError`` after it)."""
        return await _in_executor(self._executor, self._handle.wait, timeout)

    async def kill(self, *, wait: float | None = 30.0) -> ExecResult | None:
        """SIGKILL the command and all it started; see :meth:`CommandHandle.kill`."""
        return await _in_executor(self._executor, self._handle.kill, wait=wait)

    def __repr__(self) -> str:
        return f"Async{self._handle!r}"


@dataclass(frozen=True)
class AsyncForkResult:
    """One copy of an awaited fork: :class:`ForkResult` with an awaitable ``sandbox``."""

    index: int
    sandbox: AsyncSandboxRuntime | None = None
    error: BaseException | None = None

    @classmethod
    def of(cls, result: ForkResult, executor: Executor | None) -> AsyncForkResult:
        """``result``'s copy behind the async facade, in ``executor``."""
        started = result.sandbox
        facade = None if started is None else AsyncSandboxRuntime.wrap(started, executor=executor)
        return cls(result.index, facade, result.error)

    @property
    def ok(self) -> bool:
        """True when this copy started."""
        return self.sandbox is not None

    def unwrap(self) -> AsyncSandboxRuntime:
        """The started sandbox, or this copy's error raised."""
        if self.sandbox is None:
            assert self.error is not None
            raise self.error
        return self.sandbox


class AsyncSandboxRuntime:
    """Asyncio facade over a :class:`SandboxRuntime`; see that class for each method.

    ``executor`` runs the blocking calls (default: :func:`default_executor`); give several
    sandboxes one ``ThreadPoolExecutor(max_workers=N)`` to bound their concurrent calls at N.
    """

    def __init__(
        self,
        config: SandboxConfig | None = None,
        /,
        *,
        executor: Executor | None = None,
        **fields: Any,
    ) -> None:
        self._sync = SandboxRuntime(config, **fields)
        self._executor = executor

    @classmethod
    def wrap(
        cls, runtime: SandboxRuntime, *, executor: Executor | None = None
    ) -> AsyncSandboxRuntime:
        """The async facade over an existing runtime (one from a pool or ``connect``)."""
        facade = cls.__new__(cls)
        facade._sync = runtime
        facade._executor = executor
        return facade

    @property
    def executor(self) -> Executor:
        """The executor this sandbox's calls run in."""
        return self._executor or default_executor()

    @classmethod
    async def connect(
        cls,
        backend: str,
        sandbox_id: str,
        /,
        *,
        executor: Executor | None = None,
        **fields: Any,
    ) -> AsyncSandboxRuntime:
        """Take over a running sandbox by id; see :meth:`SandboxRuntime.connect`.

        The lookup (a listing on the backend's control plane) runs in ``executor``, which the
        returned facade keeps for its calls.
        """
        runtime = await _in_executor(
            executor, SandboxRuntime.connect, backend, sandbox_id, **fields
        )
        return cls.wrap(runtime, executor=executor)

    async def _run(self, function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``function(*args, **kwargs)`` in the executor, with the caller's context variables."""
        return await _in_executor(self._executor, function, *args, **kwargs)

    @property
    def sync(self) -> SandboxRuntime:
        """The synchronous runtime underneath, for code that mixes both styles."""
        return self._sync

    @property
    def config(self) -> SandboxConfig:
        """The validated configuration."""
        return self._sync.config

    @property
    def backend(self) -> Backend[Any]:
        """The backend instance, for backend-specific calls the common interface lacks.

        Its methods block: call them through ``loop.run_in_executor(sandbox.executor, ...)``.
        """
        return self._sync.backend

    @property
    def id(self) -> str:
        """The backend's identifier of this sandbox."""
        return self._sync.id

    @property
    def workdir(self) -> str:
        """The working directory of commands, and the base of relative paths."""
        return self._sync.workdir

    @property
    def usage(self) -> SandboxUsage:
        """What this sandbox used so far (counted, never asked of the backend)."""
        return self._sync.usage

    async def start(self) -> AsyncSandboxRuntime:
        """Create the sandbox."""
        await self._run(self._sync.start)
        return self

    async def close(self) -> None:
        """Stop and remove the sandbox; idempotent."""
        await self._run(self._sync.close)

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
        return await self._run(self._sync.is_alive)

    def resolve(self, path: str | os.PathLike[str]) -> str:
        """The absolute sandbox path for ``path``; see :meth:`SandboxRuntime.resolve`.

        Not a coroutine: it only computes the path, asking the sandbox nothing.
        """
        return self._sync.resolve(path)

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
        on_stdout: TextListener | None = None,
        on_stderr: TextListener | None = None,
    ) -> ExecResult:
        """Run a command; see :meth:`SandboxRuntime.exec`.

        The output callbacks run on the executor's thread that reads the output, not in the
        event loop: use ``loop.call_soon_threadsafe`` to hand text to a coroutine.
        """
        return await self._run(
            self._sync.exec,
            command,
            cwd=cwd,
            env=env,
            timeout=timeout,
            stdin=stdin,
            check=check,
            max_output_bytes=max_output_bytes,
            on_stdout=on_stdout,
            on_stderr=on_stderr,
        )

    async def exec_background(
        self,
        command: str | Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        stdin: bytes | str | None = None,
        max_output_bytes: int | None = None,
        on_stdout: TextListener | None = None,
        on_stderr: TextListener | None = None,
    ) -> AsyncCommandHandle:
        """Start a command and return at once; see :meth:`SandboxRuntime.exec_background`.

        Starting does not block (the command gets a thread of its own, not one of the
        executor's); the handle's ``wait()`` and ``kill()`` are awaited.  The output
        callbacks run on the command's thread, not in the event loop.
        """
        handle = self._sync.exec_background(
            command,
            cwd=cwd,
            env=env,
            timeout=timeout,
            stdin=stdin,
            max_output_bytes=max_output_bytes,
            on_stdout=on_stdout,
            on_stderr=on_stderr,
        )
        return AsyncCommandHandle(handle, self._executor)

    async def run_tests(
        self,
        command: str | Sequence[str],
        *,
        timeout: float | None = _DEFAULT,
        cwd: str | None = None,
    ) -> ExecResult:
        """Run a test command."""
        return await self._run(self._sync.run_tests, command, timeout=timeout, cwd=cwd)

    async def read_bytes(self, path: str | os.PathLike[str]) -> bytes:
        """Read a file."""
        return await self._run(self._sync.read_bytes, path)

    async def read_text(
        self, path: str | os.PathLike[str], *, encoding: str = "utf-8", errors: str = "strict"
    ) -> str:
        """Read a text file."""
        return await self._run(self._sync.read_text, path, encoding=encoding, errors=errors)

    async def write_bytes(
        self, path: str | os.PathLike[str], data: bytes, *, mode: int = 0o644
    ) -> None:
        """Write a file."""
        await self._run(self._sync.write_bytes, path, data, mode=mode)

    async def write_text(
        self, path: str | os.PathLike[str], text: str, *, encoding: str = "utf-8", mode: int = 0o644
    ) -> None:
        """Write a text file."""
        await self._run(self._sync.write_text, path, text, encoding=encoding, mode=mode)

    async def exists(self, path: str | os.PathLike[str]) -> bool:
        """True if the path exists."""
        return await self._run(self._sync.exists, path)

    async def stat(self, path: str | os.PathLike[str]) -> FileInfo:
        """What ``path`` is (``lstat``)."""
        return await self._run(self._sync.stat, path)

    async def list_dir(self, path: str | os.PathLike[str] = ".") -> list[FileInfo]:
        """The entries of a directory, sorted by name."""
        return await self._run(self._sync.list_dir, path)

    async def make_dir(self, path: str | os.PathLike[str]) -> None:
        """Create a directory and its parents."""
        await self._run(self._sync.make_dir, path)

    async def remove(self, path: str | os.PathLike[str], *, recursive: bool = False) -> None:
        """Remove a file, or a directory tree with ``recursive=True``; missing is fine."""
        await self._run(self._sync.remove, path, recursive=recursive)

    async def upload(self, local_path: str | os.PathLike[str], sandbox_path: str) -> None:
        """Copy a host file or directory in."""
        await self._run(self._sync.upload, local_path, sandbox_path)

    async def download(self, sandbox_path: str, local_path: str | os.PathLike[str]) -> None:
        """Copy a sandbox file or directory out."""
        await self._run(self._sync.download, sandbox_path, local_path)

    async def mark_tree(self, path: str | None = None, *, watch: Sequence[str] = ()) -> TreeMark:
        """Record the tree to compare with later; see :meth:`SandboxRuntime.mark_tree`."""
        return await self._run(self._sync.mark_tree, path, watch=watch)

    async def tree_changes(self, mark: TreeMark) -> TreeChanges:
        """What differs from ``mark``; see :meth:`SandboxRuntime.tree_changes`."""
        return await self._run(self._sync.tree_changes, mark)

    async def put_archive(self, data: bytes) -> None:
        """Extract a tar archive at the sandbox's ``/``; see :meth:`SandboxRuntime.put_archive`."""
        await self._run(self._sync.put_archive, data)

    async def base_commit(self, *, cwd: str | None = None, refresh: bool = False) -> str:
        """The repository's base commit."""
        return await self._run(self._sync.base_commit, cwd=cwd, refresh=refresh)

    async def apply_patch(self, patch: str, *, cwd: str | None = None) -> PatchResult:
        """Apply a unified diff."""
        return await self._run(self._sync.apply_patch, patch, cwd=cwd)

    async def diff(self, *, base: str | None = None, cwd: str | None = None) -> str:
        """The working tree's changes against the base commit."""
        return await self._run(self._sync.diff, base=base, cwd=cwd)

    async def reset(self, *, base: str | None = None, cwd: str | None = None) -> None:
        """Return the repository to the base commit."""
        await self._run(self._sync.reset, base=base, cwd=cwd)

    # -- lifetime and leases (docs/leases.md) ------------------------------------------------

    @property
    def expires_at(self) -> float | None:
        """When the sandbox ends unless extended; see :attr:`SandboxRuntime.expires_at`."""
        return self._sync.expires_at

    @property
    def cap_at(self) -> float | None:
        """The latest end any extension may reach; see :attr:`SandboxRuntime.cap_at`."""
        return self._sync.cap_at

    async def extend(self, seconds: float) -> float:
        """Move the sandbox's end ``seconds`` later; see :meth:`SandboxRuntime.extend`."""
        return await self._run(self._sync.extend, seconds)

    async def set_lifetime(self, seconds: float) -> float:
        """End the sandbox ``seconds`` from now; see :meth:`SandboxRuntime.set_lifetime`."""
        return await self._run(self._sync.set_lifetime, seconds)

    async def keep_alive(self, lease: float = 300.0, *, cap: float | None = None) -> KeepAlive:
        """Hold a lease; see :meth:`SandboxRuntime.keep_alive`.

        The renewals run on a daemon thread, not the event loop, so a loop blocked by the
        caller's own code cannot starve them; they end with the process all the same.
        """
        return await self._run(self._sync.keep_alive, lease, cap=cap)

    # -- checkpoints, forks and pause (docs/checkpoints.md) --------------------------------

    async def checkpoint(
        self, *, labels: Mapping[str, str] | None = None, lifetime: float | None = None
    ) -> Checkpoint:
        """Save this sandbox's state; see :meth:`SandboxRuntime.checkpoint`."""
        return await self._run(self._sync.checkpoint, labels=labels, lifetime=lifetime)

    async def rollback(self, checkpoint: Checkpoint) -> None:
        """Bring this sandbox back to ``checkpoint``."""
        await self._run(self._sync.rollback, checkpoint)

    async def fork(self, n: int = 1, **overrides: Any) -> list[AsyncForkResult]:
        """``n`` started copies, each awaitable like this sandbox (in its executor)."""
        results = await self._run(self._sync.fork, n, **overrides)
        return [AsyncForkResult.of(result, self._executor) for result in results]

    @classmethod
    async def from_checkpoint(
        cls, checkpoint: Checkpoint, *, n: int = 1, executor: Executor | None = None, **fields: Any
    ) -> list[AsyncForkResult]:
        """``n`` sandboxes started from ``checkpoint`` (``SandboxRuntime.from_checkpoint``)."""
        results = await _in_executor(
            executor, SandboxRuntime.from_checkpoint, checkpoint, n=n, **fields
        )
        return [AsyncForkResult.of(result, executor) for result in results]

    async def pause(self) -> None:
        """Stop running the sandbox until :meth:`resume`."""
        await self._run(self._sync.pause)

    async def resume(self) -> None:
        """Run a paused sandbox on."""
        await self._run(self._sync.resume)

    @property
    def paused(self) -> bool:
        """True between :meth:`pause` and :meth:`resume`."""
        return self._sync.paused


class AsyncLease:
    """A sandbox from an :class:`AsyncSandboxPool`; ``async with`` it (see :class:`Lease`)."""

    def __init__(self, pool: AsyncSandboxPool, *, reuse: bool, timeout: float | None) -> None:
        self._pool = pool
        self._reuse = reuse
        self._timeout = timeout
        self._lease: Lease | None = None

    async def __aenter__(self) -> AsyncSandboxRuntime:
        pool = self._pool
        lease = await pool._run(pool.sync.acquire, reuse=self._reuse, timeout=self._timeout)
        self._lease = lease
        return AsyncSandboxRuntime.wrap(lease.sandbox, executor=pool._executor)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._lease is not None:
            await self._pool._run(self._lease.release, reuse=self._reuse and exc_type is None)


class AsyncSandboxPool:
    """Asyncio facade over a :class:`SandboxPool`: ``async with pool.acquire() as sandbox``.

    The pool's own threads start sandboxes in the background; only ``acquire``, release and
    close run in ``executor`` (as do the leased sandboxes' calls).
    """

    def __init__(
        self,
        config: SandboxConfig | None = None,
        /,
        *,
        size: int,
        executor: Executor | None = None,
        **fields: Any,
    ) -> None:
        self._pool = SandboxPool(config, size=size, **fields)
        self._executor = executor

    @property
    def sync(self) -> SandboxPool:
        """The synchronous pool underneath."""
        return self._pool

    @property
    def id(self) -> str:
        """The pool's identifier, also its label on each of its sandboxes."""
        return self._pool.id

    @property
    def config(self) -> SandboxConfig:
        """The configuration of every sandbox of this pool (with the pool's label)."""
        return self._pool.config

    @property
    def size(self) -> int:
        """How many sandboxes the pool keeps started."""
        return self._pool.size

    def stats(self) -> PoolStats:
        """The pool's counters now."""
        return self._pool.stats()

    async def _run(self, function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        return await _in_executor(self._executor, function, *args, **kwargs)

    async def start(self) -> AsyncSandboxPool:
        """Begin filling the pool."""
        self._pool.start()  # only schedules starts: it does not block
        return self

    async def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until the pool is full; see :meth:`SandboxPool.wait_ready`."""
        return await self._run(self._pool.wait_ready, timeout)

    def acquire(self, *, reuse: bool = False, timeout: float | None = None) -> AsyncLease:
        """A lease to ``async with``; see :meth:`SandboxPool.acquire`."""
        return AsyncLease(self, reuse=reuse, timeout=timeout)

    async def close(self) -> None:
        """Drain the pool; see :meth:`SandboxPool.close`."""
        await self._run(self._pool.close)

    async def __aenter__(self) -> AsyncSandboxPool:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()
