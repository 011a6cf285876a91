"""``SandboxPool``: sandboxes started before they are needed, handed out in microseconds.

Starting a container costs a few hundred milliseconds and a cloud instance seconds; an RL
trainer that opens one sandbox per rollout waits that long every time.  A pool keeps ``size``
sandboxes of one configuration started; :meth:`SandboxPool.acquire` hands one out at once and
a bounded set of background threads starts its replacement.

What a pool does not do, on purpose: hand a used sandbox to the next caller.  A rollout's
sandbox holds what the agent did to it, and a reward computed in a dirty sandbox is wrong in
ways nobody notices, so a leased sandbox is closed when its lease ends unless the caller
asks for it back (``acquire(reuse=True)`` or ``lease.release(reuse=True)``), taking on
knowing what it still holds.

Leaks: every pooled sandbox carries the usual owner labels (``ownership``), so ``reap``
removes what a killed pool left exactly as it does for any killed client, and a
``sandbox-runtime.pool`` label naming the pool (``SandboxInfo.pool``).  An idle sandbox also
uses up its lifetime, so one idle for longer than ``max_idle`` (default: half the lifetime)
is closed and replaced instead of handed out.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from sandbox_runtime._core.config import SandboxConfig
from sandbox_runtime._core.ownership import POOL
from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.errors import (
    SandboxClosedError,
    SandboxError,
    SandboxStartError,
    SandboxTimeoutError,
)

__all__ = ["Lease", "PoolStats", "SandboxPool"]

logger = logging.getLogger("sandbox_runtime.pool")

#: Consecutive failed starts after which waiting callers get the error instead of waiting on:
#: one failure may be a hiccup, several in a row are a missing image or an engine down.
_FAILURES_BEFORE_RAISING = 3
_MAX_BACKOFF = 30.0


@dataclass(frozen=True, slots=True)
class PoolStats:
    """A snapshot of a pool's counters."""

    ready: int
    """Started and waiting to be handed out."""
    starting: int
    """Starts in flight (or waiting out a backoff after a failure)."""
    leased: int
    """Handed out and not yet released."""
    started: int
    """Sandboxes started by the pool in total."""
    failed: int
    """Starts that failed."""
    discarded: int
    """Idle sandboxes closed for having waited longer than ``max_idle``."""
    reused: int
    """Leases that gave their sandbox back for another caller."""


@dataclass(slots=True)
class _Idle:
    runtime: SandboxRuntime
    since: float


class Lease:
    """One sandbox handed out by a pool; ``with`` it, or call :meth:`release` when done.

    The sandbox is closed on release unless reuse was asked for (and the lease ended without
    an exception): then it goes back to the pool for the next caller as it is.
    """

    def __init__(self, pool: SandboxPool, runtime: SandboxRuntime, *, reuse: bool) -> None:
        self._pool = pool
        self._runtime = runtime
        self._reuse = reuse
        self._released = False
        self._lock = threading.Lock()

    @property
    def sandbox(self) -> SandboxRuntime:
        """The started sandbox."""
        return self._runtime

    def release(self, *, reuse: bool | None = None) -> None:
        """Close the sandbox, or give it back to the pool with ``reuse=True``; idempotent."""
        with self._lock:
            if self._released:
                return
            self._released = True
        self._pool._release(
            self._runtime, borrowed=self._reuse, reuse=self._reuse if reuse is None else reuse
        )

    def __enter__(self) -> SandboxRuntime:
        return self._runtime

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release(reuse=self._reuse and exc_type is None)


class SandboxPool:
    """Keeps ``size`` started sandboxes of one configuration; see the module docstring.

    ::

        with SandboxPool(backend="docker", image="python:3.12", size=8) as pool:
            with pool.acquire() as sandbox:      # a started sandbox, at once when warm
                sandbox.exec("python -V")
            # closed here; the pool is already starting its replacement

    ``max_starts`` bounds the sandboxes the pool starts in all (for a known number of
    rollouts, so none is started for nobody); once reached, :meth:`acquire` starts one itself
    if none is ready.  ``workers`` bounds the background starts in flight (default: ``size``,
    at most 8); the backend's own start bound (``sandbox_runtime._core.limits``) still applies.
    """

    def __init__(
        self,
        config: SandboxConfig | None = None,
        /,
        *,
        size: int,
        max_starts: int | None = None,
        workers: int | None = None,
        max_idle: float | None = None,
        **fields: Any,
    ) -> None:
        if size < 1:
            raise ValueError(f"a pool's size must be at least 1, got {size}")
        if max_starts is not None and max_starts < 0:
            raise ValueError(f"max_starts must not be negative, got {max_starts}")
        if config is None:
            config = SandboxConfig(**fields)
        elif fields:
            config = SandboxConfig.model_validate(
                {**config.model_dump(exclude_unset=True), **fields}
            )
        self.id = uuid.uuid4().hex[:12]
        self._config = config.model_copy(update={"labels": {**config.labels, POOL: self.id}})
        SandboxRuntime(self._config)  # a bad backend, option or mount fails here, not later
        self._size = size
        self._max_starts = max_starts
        self._max_idle = config.lifetime / 2 if max_idle is None else max_idle
        self._workers = ThreadPoolExecutor(
            max_workers=workers or min(size, 8), thread_name_prefix=f"sandbox-pool-{self.id}"
        )
        self._cond = threading.Condition()
        self._closing = threading.Event()
        self._opened = False
        self._ready: collections.deque[_Idle] = collections.deque()
        self._starting = 0
        self._scheduled = 0
        self._leased = 0
        self._borrowed = 0  # leased with reuse=True: expected back, so not replaced yet
        self._started = 0
        self._failed = 0
        self._discarded = 0
        self._reused = 0
        self._failures_in_row = 0
        self._last_error: BaseException | None = None

    @property
    def config(self) -> SandboxConfig:
        """The configuration of every sandbox of this pool (with the pool's label)."""
        return self._config

    @property
    def size(self) -> int:
        """How many sandboxes the pool keeps started."""
        return self._size

    def stats(self) -> PoolStats:
        """The pool's counters now."""
        with self._cond:
            return PoolStats(
                ready=len(self._ready),
                starting=self._starting,
                leased=self._leased,
                started=self._started,
                failed=self._failed,
                discarded=self._discarded,
                reused=self._reused,
            )

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> SandboxPool:
        """Begin filling the pool in the background; returns ``self`` at once."""
        with self._cond:
            if self._closing.is_set():
                raise SandboxClosedError("this pool was closed")
            self._opened = True
            self._top_up()
        return self

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until the pool is full (or cannot start more); False if ``timeout`` passed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._closing.is_set():
                if len(self._ready) >= self._size or (
                    self._starting == 0 and not self._can_schedule()
                ):
                    return True
                if self._failures_in_row >= _FAILURES_BEFORE_RAISING:
                    return False
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return False

    def close(self) -> None:
        """Stop refilling, wait for starts in flight, close every idle sandbox; idempotent.

        Leased sandboxes stay their holders' (their leases close them); one released after
        the pool closed is closed whatever reuse was asked.
        """
        with self._cond:
            self._closing.set()
            self._cond.notify_all()
        # Starts in flight finish (a start cannot be interrupted safely) and see the pool
        # closed, so each closes its own sandbox.
        self._workers.shutdown(wait=True)
        with self._cond:
            idle = [item.runtime for item in self._ready]
            self._ready.clear()
        _close_all(idle)

    def __enter__(self) -> SandboxPool:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        stats = self.stats()
        return (
            f"SandboxPool(id={self.id!r}, backend={self._config.backend!r}, size={self._size}, "
            f"ready={stats.ready}, starting={stats.starting}, leased={stats.leased})"
        )

    # -- handing out -------------------------------------------------------------------

    def acquire(self, *, reuse: bool = False, timeout: float | None = None) -> Lease:
        """A started sandbox: one from the pool at once when warm, else the next to start.

        ``reuse=True`` gives the sandbox back to the pool when the lease ends without an
        exception, instead of closing it; the pool does not start a replacement meanwhile
        (it does when the sandbox is not given back).

        Raises :class:`SandboxStartError` when the pool's starts keep failing (the last
        failure is its cause), :class:`SandboxTimeoutError` when none is ready within
        ``timeout`` seconds.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        stale: list[SandboxRuntime] = []
        chosen: SandboxRuntime | None = None
        start_here = False
        with self._cond:
            if not self._opened and not self._closing.is_set():
                self._opened = True
            while chosen is None and not start_here:
                if self._closing.is_set():
                    raise SandboxClosedError("this pool was closed")
                now = time.monotonic()
                while self._ready:
                    item = self._ready.popleft()
                    if now - item.since > self._max_idle:
                        stale.append(item.runtime)
                        self._discarded += 1
                        continue
                    chosen = item.runtime
                    break
                if chosen is not None:
                    break
                if self._failures_in_row >= _FAILURES_BEFORE_RAISING:
                    error = self._last_error
                    raise SandboxStartError(
                        f"the pool cannot start sandboxes ({self._failures_in_row} failed "
                        f"in a row): {error}"
                    ) from error
                self._top_up()
                if self._starting == 0:
                    start_here = True  # max_starts reached: nothing else will come
                    break
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise SandboxTimeoutError(
                        f"no sandbox of pool {self.id} was ready within {timeout}s"
                    )
                self._cond.wait(remaining)
            self._leased += 1
            if reuse:
                self._borrowed += 1
            self._top_up()
        if stale:
            self._submit_close(stale)
        if start_here:
            try:
                chosen = SandboxRuntime(self._config).start()
            except BaseException:
                with self._cond:
                    self._leased -= 1
                    if reuse:
                        self._borrowed -= 1
                raise
        assert chosen is not None
        return Lease(self, chosen, reuse=reuse)

    def _release(self, runtime: SandboxRuntime, *, borrowed: bool, reuse: bool) -> None:
        with self._cond:
            self._leased -= 1
            if borrowed:
                self._borrowed -= 1
            keep = (
                reuse
                and not self._closing.is_set()
                and len(self._ready) + self._starting + self._borrowed < self._size
            )
        if keep and runtime.is_alive():
            with self._cond:
                if not self._closing.is_set():
                    self._ready.append(_Idle(runtime, time.monotonic()))
                    self._reused += 1
                    self._cond.notify()
                    return
        try:
            runtime.close()
        except SandboxError as exc:
            logger.warning("closing pooled sandbox %s failed: %s", runtime.id, exc)
        with self._cond:
            self._top_up()  # a borrowed sandbox that did not come back is replaced now

    # -- filling (called with the condition held) ---------------------------------------

    def _can_schedule(self) -> bool:
        return self._max_starts is None or self._scheduled < self._max_starts

    def _top_up(self) -> None:
        """Schedule starts until ready + starting + borrowed reaches the size (lock held)."""
        if not self._opened or self._closing.is_set():
            return
        while (
            len(self._ready) + self._starting + self._borrowed < self._size and self._can_schedule()
        ):
            self._starting += 1
            self._scheduled += 1
            self._workers.submit(self._start_one)

    def _start_one(self) -> None:
        try:
            runtime = SandboxRuntime(self._config).start()
        except Exception as exc:
            with self._cond:
                self._failed += 1
                self._failures_in_row += 1
                self._last_error = exc
                failures = self._failures_in_row
                self._cond.notify_all()
            logger.warning("pool %s could not start a sandbox: %s", self.id, exc)
            # Back off before the replacement start, counted as in flight meanwhile, so a
            # missing image does not become a tight loop of failing creates.
            self._closing.wait(min(_MAX_BACKOFF, 0.5 * 2 ** (failures - 1)))
            with self._cond:
                self._starting -= 1
                self._scheduled -= 1  # a failed start does not use up max_starts
                self._top_up()
                self._cond.notify_all()
            return
        with self._cond:
            self._starting -= 1
            closing = self._closing.is_set()
            if not closing:
                self._started += 1
                self._failures_in_row = 0
                self._last_error = None
                self._ready.append(_Idle(runtime, time.monotonic()))
                self._cond.notify_all()
        if closing:
            _close_all([runtime])

    def _submit_close(self, runtimes: list[SandboxRuntime]) -> None:
        try:
            self._workers.submit(_close_all, runtimes)
        except RuntimeError:  # the pool is closing: its executor takes no more work
            _close_all(runtimes)


def _close_all(runtimes: list[SandboxRuntime]) -> None:
    """Close sandboxes in parallel (removing a container takes ~100 ms each)."""
    if not runtimes:
        return

    def close(runtime: SandboxRuntime) -> None:
        try:
            runtime.close()
        except SandboxError as exc:
            logger.warning("closing pooled sandbox %s failed: %s", runtime.id, exc)

    if len(runtimes) == 1:
        close(runtimes[0])
        return
    with ThreadPoolExecutor(max_workers=min(len(runtimes), 8)) as closer:
        list(closer.map(close, runtimes))
