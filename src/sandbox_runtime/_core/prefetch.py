"""``Prefetcher``: sandboxes started a bounded distance ahead of a known schedule.

A trainer knows which environments it needs next (its dataloader's order); a start storm at
every step and the wait on the slowest start both go away if each sandbox is started while
the previous batch still runs, or while the GPUs update the model.  A ``SandboxPool`` cannot
do this when every task has its own configuration (it keeps N of *one* configuration); a
prefetcher walks the schedule instead, one slot per sandbox that will be taken.

Guarantees, and why:

- **Bounded ahead.** At most ``ahead`` sandboxes are started-or-starting and not yet taken,
  so a long schedule never becomes a long bill, and at most ``max_in_flight`` background
  starts run at once (a service that caps starts sees a steady trickle, not a storm), each
  after a random ``jitter`` so that starts freed at the same moment spread out.
- **Nothing started for nobody.** Each background start claims one slot of the schedule,
  and each :meth:`Prefetcher.take` consumes one: a take that finds nothing ready or
  starting for its key removes the first unclaimed slot of that key, so the sandbox it
  starts on the spot is not started a second time by the prefetcher.  Slots of one key
  (a GRPO group's copies) are interchangeable.  What is still unconsumed at
  :meth:`Prefetcher.close` (the schedule was cut short) is closed and counted.
- **Never a dead sandbox.** A parked sandbox holds a lease (docs/leases.md) where its
  backend can extend lifetimes, so waiting does not use up its lifetime; it can still die
  (a service evicted it): :meth:`Prefetcher.take` checks first (one listing of the
  backend's sandboxes answers a batch of takes; one the listing lacks is asked with
  ``is_alive``), closes a dead one, counts it as replaced, and hands out another.
- **Errors reach the consumer.** A background start that fails is not retried in a loop:
  its slot goes back to the consumer, whose take starts it on the spot and gets the real,
  typed error.

Images further ahead than ``ahead`` are handed to ``Backend.prefetch_images`` (nearest
first), so a backend that can pre-pull or pre-cache them does so before their starts.
Every sandbox keeps its usual owner labels, so ``reap`` finds what a killed owner left.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import TracebackType

from pydantic import BaseModel, SecretStr

from sandbox_runtime._core.backend import Capability
from sandbox_runtime._core.config import SandboxConfig
from sandbox_runtime._core.keepalive import KeepAlive
from sandbox_runtime._core.registry import load_backend
from sandbox_runtime._core.runtime import SandboxRuntime, list_sandboxes, validate_options
from sandbox_runtime.errors import SandboxClosedError, SandboxError, SandboxTimeoutError

__all__ = ["PrefetchSlot", "PrefetchStats", "Prefetcher"]

logger = logging.getLogger("sandbox_runtime.prefetch")

Starter = Callable[[SandboxConfig], SandboxRuntime]


@dataclass(frozen=True, slots=True)
class PrefetchSlot:
    """One sandbox the schedule will take: its key (what makes two alike) and configuration."""

    key: str
    config: SandboxConfig


@dataclass(frozen=True, slots=True)
class PrefetchStats:
    """A snapshot of a prefetcher's accounting."""

    scheduled: int
    """Slots fed so far (``extend``)."""
    started: int
    """Sandboxes started, in the background and on the spot."""
    started_on_spot: int
    """Of those, started by a take that found none ready or starting."""
    handed_out: int
    """Sandboxes handed out by ``take``."""
    replaced: int
    """Parked sandboxes found dead at ``take`` and replaced."""
    failed: int
    """Background starts that failed (their slot went back to the consumer)."""
    discarded: int
    """Started sandboxes nobody took, closed at ``close`` (the schedule was cut short)."""
    ready: int
    """Started and parked now."""
    starting: int
    """Background starts in flight now."""
    peak_in_flight: int
    """The most background starts in flight at once."""
    wait_seconds: float
    """Time consumers spent in ``take`` (waiting for, or doing, a start)."""
    images_requested: int
    """Images handed to ``Backend.prefetch_images``."""


@dataclass(slots=True)
class _Parked:
    runtime: SandboxRuntime
    since: float
    lease: KeepAlive | None


@dataclass(slots=True)
class _Counters:
    scheduled: int = 0
    started: int = 0
    on_spot: int = 0
    handed_out: int = 0
    replaced: int = 0
    failed: int = 0
    discarded: int = 0
    peak_in_flight: int = 0
    wait_seconds: float = 0.0
    images: int = 0
    requested_images: set[tuple[str, str]] = field(default_factory=set)


def _start(config: SandboxConfig) -> SandboxRuntime:
    return SandboxRuntime(config).start()


class Prefetcher:
    """Keeps the schedule's next sandboxes started; see the module docstring.

    ::

        with Prefetcher(ahead=16) as prefetcher:
            prefetcher.extend(PrefetchSlot(key(t), config(t)) for t in next_batch)
            sandbox = prefetcher.take(key(task))   # started: at once when prefetched
            ...; sandbox.close()                   # the caller owns what it took

    ``images_ahead`` slots past ``ahead`` have their images prefetched (default ``4 *
    ahead``); ``liveness_ttl``: how long one listing of a backend's sandboxes answers the
    liveness checks of every take (0: each take asks its own sandbox); ``start`` replaces
    how a sandbox is started (tests, a backend's own fork).
    """

    def __init__(
        self,
        schedule: Iterable[PrefetchSlot] = (),
        *,
        ahead: int,
        max_in_flight: int = 4,
        jitter: float = 0.0,
        images_ahead: int | None = None,
        liveness_ttl: float = 1.0,
        start: Starter = _start,
    ) -> None:
        if ahead < 1:
            raise ValueError(f"ahead must be at least 1, got {ahead}")
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
        if jitter < 0:
            raise ValueError(f"jitter must not be negative, got {jitter}")
        self._ahead = ahead
        self._max_in_flight = max_in_flight
        self._jitter = jitter
        self._images_ahead = 4 * ahead if images_ahead is None else images_ahead
        self._start = start
        self._cond = threading.Condition()
        self._closing = threading.Event()
        self._pending: collections.deque[PrefetchSlot] = collections.deque()
        self._ready: dict[str, collections.deque[_Parked]] = collections.defaultdict(
            collections.deque
        )
        self._starting: collections.Counter[str] = collections.Counter()
        self._returned: dict[str, list[SandboxConfig]] = collections.defaultdict(list)
        self._forgone: collections.Counter[str] = collections.Counter()
        self._counts = _Counters()
        self._liveness = _Liveness(liveness_ttl)
        self._workers = ThreadPoolExecutor(max_in_flight, thread_name_prefix="prefetch")
        self._images = ThreadPoolExecutor(1, thread_name_prefix="prefetch-images")
        self._stoppers = ThreadPoolExecutor(4, thread_name_prefix="prefetch-lease-stop")
        self.extend(schedule)

    # -- feeding -----------------------------------------------------------------------

    def extend(self, slots: Iterable[PrefetchSlot]) -> None:
        """Append upcoming slots to the schedule, in the order they will be taken."""
        with self._cond:
            if self._closing.is_set():
                raise SandboxClosedError("this prefetcher was closed")
            for slot in slots:
                self._pending.append(slot)
                self._counts.scheduled += 1
            self._fill()

    feed = extend

    # -- taking ------------------------------------------------------------------------

    def take(
        self, key: str, config: SandboxConfig | None = None, *, timeout: float | None = None
    ) -> SandboxRuntime:
        """A started, live sandbox of ``key``; the caller owns it (and closes it).

        Prefetched: handed out at once; starting: waited for; neither: started here, from
        ``config`` or the first scheduled slot of ``key``.  Raises the start's own error when
        a start fails, :class:`SandboxTimeoutError` after ``timeout`` seconds of waiting.
        """
        began = time.monotonic()
        try:
            return self._take(key, config, began, timeout)
        finally:
            with self._cond:
                self._counts.wait_seconds += time.monotonic() - began

    async def take_async(self, key: str, config: SandboxConfig | None = None) -> SandboxRuntime:
        """:meth:`take` without blocking the event loop."""
        return await asyncio.to_thread(self.take, key, config)

    def _take(
        self, key: str, config: SandboxConfig | None, began: float, timeout: float | None
    ) -> SandboxRuntime:
        while True:
            parked, on_spot = self._claim(key, config, began, timeout)
            if on_spot is not None:
                runtime = self._start(on_spot)
                with self._cond:
                    self._counts.started += 1
                    self._counts.on_spot += 1
                    self._counts.handed_out += 1
                return runtime
            assert parked is not None
            if self._liveness.alive(parked):
                with self._cond:
                    self._counts.handed_out += 1
                return parked
            logger.warning("prefetched sandbox %s is dead; replacing it", parked.id)
            _close_quietly(parked)
            with self._cond:
                self._counts.replaced += 1
                # The dead one's slot is still owed: start its replacement in the background
                # (or here, if nothing else of this key is coming).
                self._pending.appendleft(PrefetchSlot(key, parked.config))
                self._fill()

    def _claim(
        self, key: str, config: SandboxConfig | None, began: float, timeout: float | None
    ) -> tuple[SandboxRuntime | None, SandboxConfig | None]:
        """A parked sandbox of ``key``, or the configuration to start on the spot."""
        with self._cond:
            while True:
                if self._closing.is_set():
                    raise SandboxClosedError("this prefetcher was closed")
                runtime = self._unpark(key)
                if runtime is not None:
                    return runtime, None
                returned = self._returned.get(key)
                if returned:  # a failed background start: start it here, for its error
                    return None, config or returned.pop(0)
                if self._starting[key] == 0:
                    slot = self._unclaimed(key)
                    chosen = config or (slot.config if slot is not None else None)
                    if chosen is None:
                        raise SandboxError(
                            f"nothing is scheduled for key {key!r} and no config was given"
                        )
                    return None, chosen
                remaining = None if timeout is None else began + timeout - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise SandboxTimeoutError(
                        f"no sandbox of key {key!r} was ready within {timeout}s"
                    )
                self._cond.wait(remaining)

    def _unclaimed(self, key: str) -> PrefetchSlot | None:
        """Remove and return the first unclaimed slot of ``key`` (lock held)."""
        for index, slot in enumerate(self._pending):
            if slot.key == key:
                del self._pending[index]
                return slot
        return None

    def forgo(self, key: str) -> None:
        """The consumer will not take one scheduled sandbox of ``key`` after all.

        A task that ended before its grading leaves the grading sandbox scheduled for it:
        an unclaimed slot is dropped, a parked sandbox closed, one still starting closed when
        its start ends (each counted as discarded), so nothing waits for a taker until
        :meth:`close`.
        """
        runtime: SandboxRuntime | None = None
        with self._cond:
            if self._unclaimed(key) is not None:
                return
            runtime = self._unpark(key)
            if runtime is not None:
                self._counts.discarded += 1
            elif self._starting[key] > 0:
                self._forgone[key] += 1
        if runtime is not None:
            _close_quietly(runtime)

    def _unpark(self, key: str) -> SandboxRuntime | None:
        """The first parked sandbox of ``key``, its parking lease stopped (lock held)."""
        parked = self._ready.get(key)
        if not parked:
            return None
        item = parked.popleft()
        if item.lease is not None:
            # Stopping joins a renewal in flight (seconds, under a rate limit): never under
            # this lock, never on the taker's path.  One more renewal after hand-out only
            # moves the end later.
            self._stoppers.submit(item.lease.stop)
        self._fill()  # its place ahead is free
        return item.runtime

    # -- filling (lock held) -----------------------------------------------------------

    def _unconsumed(self) -> int:
        return sum(len(parked) for parked in self._ready.values()) + sum(self._starting.values())

    def _fill(self) -> None:
        """Claim slots and start them while under both bounds (lock held)."""
        if self._closing.is_set():
            return
        while (
            self._pending
            and self._unconsumed() < self._ahead
            and sum(self._starting.values()) < self._max_in_flight
        ):
            slot = self._pending.popleft()
            self._starting[slot.key] += 1
            in_flight = sum(self._starting.values())
            self._counts.peak_in_flight = max(self._counts.peak_in_flight, in_flight)
            self._workers.submit(self._start_one, slot)
        self._request_images()

    def _request_images(self) -> None:
        """Hand the images of the slots beyond the started ones to their backends (lock held)."""
        wanted: list[SandboxConfig] = []
        for index, slot in enumerate(self._pending):
            if index >= self._images_ahead:
                break
            image = (slot.config.backend, slot.config.image or "")
            if slot.config.image and image not in self._counts.requested_images:
                self._counts.requested_images.add(image)
                wanted.append(slot.config)
        if wanted:
            self._counts.images += len(wanted)
            self._images.submit(_prefetch_images, wanted)

    def _start_one(self, slot: PrefetchSlot) -> None:
        if self._jitter:
            self._closing.wait(random.uniform(0, self._jitter))
        runtime: SandboxRuntime | None = None
        try:
            if not self._closing.is_set():
                runtime = self._start(slot.config)
        except Exception as exc:
            logger.warning("prefetch of %s failed; its consumer will start it: %s", slot.key, exc)
            with self._cond:
                self._counts.failed += 1
                self._returned[slot.key].append(slot.config)
        with self._cond:
            self._starting[slot.key] -= 1
            forgone = self._forgone[slot.key] > 0
            if forgone:
                self._forgone[slot.key] -= 1
                if runtime is None and self._returned[slot.key]:
                    self._returned[slot.key].pop()  # nobody will take it for its error
            closing = self._closing.is_set() or forgone
            if runtime is not None:
                self._counts.started += 1
                if closing:
                    self._counts.discarded += 1
                else:
                    parked = _Parked(runtime, time.monotonic(), _parking_lease(runtime))
                    self._ready[slot.key].append(parked)
            self._cond.notify_all()
            self._fill()
        if closing and runtime is not None:
            _close_quietly(runtime)

    # -- accounting and closing --------------------------------------------------------

    def stats(self) -> PrefetchStats:
        """The accounting now."""
        with self._cond:
            counts = self._counts
            return PrefetchStats(
                scheduled=counts.scheduled,
                started=counts.started,
                started_on_spot=counts.on_spot,
                handed_out=counts.handed_out,
                replaced=counts.replaced,
                failed=counts.failed,
                discarded=counts.discarded,
                ready=sum(len(parked) for parked in self._ready.values()),
                starting=sum(self._starting.values()),
                peak_in_flight=counts.peak_in_flight,
                wait_seconds=counts.wait_seconds,
                images_requested=counts.images,
            )

    def close(self) -> int:
        """Stop, wait for starts in flight, close every sandbox nobody took; returns how many.

        Idempotent.  Sandboxes already handed out are their takers' to close.
        """
        with self._cond:
            self._closing.set()
            self._cond.notify_all()
        self._workers.shutdown(wait=True)
        self._images.shutdown(wait=False, cancel_futures=True)
        self._stoppers.shutdown(wait=True)
        with self._cond:
            left = [item.runtime for parked in self._ready.values() for item in parked]
            self._ready.clear()
            self._counts.discarded += len(left)
        for runtime in left:
            _close_quietly(runtime)
        return len(left)

    def __enter__(self) -> Prefetcher:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _parking_lease(runtime: SandboxRuntime) -> KeepAlive | None:
    """A lease that keeps a parked sandbox from using up its lifetime while it waits.

    Where the backend can extend lifetimes; it stops at hand-out, when the sandbox closes,
    and with this process (so ``reap`` still finds what a killed owner left).
    """
    backend = runtime.backend
    if Capability.EXTEND_LIFETIME not in backend.capabilities_for(backend.options):
        return None
    return runtime.keep_alive(lease=runtime.config.lifetime)


class _Liveness:
    """Liveness checks of many takes answered by one listing per backend and ``ttl``.

    A batch of 64 takes asking each sandbox costs 64 control-plane calls at once, and a
    cloud API that allows 20 a second (AGS's ``DescribeSandboxInstance*``) refuses most of
    them; one ``list_sandboxes`` answers them all.  A sandbox the listing has is alive as of
    the listing (at most ``ttl`` old); one it lacks (started after it, or dead) is asked on
    its own, so the listing never condemns a live sandbox.
    """

    def __init__(self, ttl: float) -> None:
        self._ttl = ttl
        self._lock = threading.Lock()
        self._listed: dict[tuple[str, str], tuple[float, frozenset[str]]] = {}

    def alive(self, runtime: SandboxRuntime) -> bool:
        if self._ttl > 0 and runtime.id in self._listing(runtime.config):
            return True
        return _alive(runtime)

    def _listing(self, config: SandboxConfig) -> frozenset[str]:
        key = (config.backend, options_key(config))
        with self._lock:  # concurrent takes wait for one listing instead of making their own
            taken_at, ids = self._listed.get(key, (0.0, frozenset()))
            if time.monotonic() - taken_at <= self._ttl:
                return ids
            try:
                found = list_sandboxes(config.backend, options=config.options)
            except Exception as exc:  # the per-sandbox check still decides
                logger.warning("listing %s sandboxes for liveness failed: %s", config.backend, exc)
                return frozenset()
            ids = frozenset(info.sandbox_id for info in found)
            self._listed[key] = (time.monotonic(), ids)
            return ids


def options_key(config: SandboxConfig) -> str:
    """A digest of the backend options (secrets included): same digest, same account."""
    options = config.options
    raw = options.model_dump() if isinstance(options, BaseModel) else dict(options)
    plain = {k: v.get_secret_value() if isinstance(v, SecretStr) else v for k, v in raw.items()}
    text = json.dumps(plain, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _alive(runtime: SandboxRuntime) -> bool:
    """``is_alive``, where an error counts as dead (the check is documented not to raise)."""
    try:
        return runtime.is_alive()
    except Exception:
        logger.warning("is_alive of %s raised; treating it as dead", runtime.id, exc_info=True)
        return False


def _close_quietly(runtime: SandboxRuntime) -> None:
    try:
        runtime.close()
    except SandboxError as exc:
        logger.warning("closing prefetched sandbox %s failed: %s", runtime.id, exc)


def _prefetch_images(configs: list[SandboxConfig]) -> None:
    """``Backend.prefetch_images`` per backend and options, nearest first; best effort."""
    groups: dict[tuple[str, str], list[SandboxConfig]] = {}
    for config in configs:
        groups.setdefault((config.backend, options_key(config)), []).append(config)
    for group in groups.values():
        first = group[0]
        try:
            backend_cls = load_backend(first.backend)
            options = validate_options(first, backend_cls)
            backend_cls.prefetch_images([c.image for c in group if c.image], options)
        except Exception as exc:  # best effort: the start that needs the image reports it
            logger.warning("prefetching images on %s failed: %s", first.backend, exc)
