"""Close what this process started when it is told to stop (SIGTERM, SIGINT).

A scheduler stops a job with SIGTERM, whose default action ends Python at once: no
``finally``, no ``with`` exit, no ``atexit``.  Sandboxes and checkpoint images would then
stay until ``sandbox-runtime reap`` (their owner labels let it remove them once the owner
is dead), which costs money on a cloud backend and disk on docker.

So every started :class:`~sandbox_runtime.SandboxRuntime` and every holder of checkpoints
(``swe.prepared.PreparedStates``) registers here while it is open, and
:func:`close_everything` closes them: sandboxes first (a checkpoint image cannot be removed
while a container made from it exists), then the checkpoint holders.  Closing happens in
worker threads, one per object, because the thread that was interrupted may hold a sandbox's
lifecycle lock (it was in the middle of ``start``); a close that cannot finish in time is
left to ``reap``.  Once closing has begun, new sandboxes refuse to start, so a worker that
was about to open the next one does not leave it behind.

Installing a signal handler is the host program's decision: the command line installs one
(SIGTERM acts as Ctrl-C there), the rLLM plugin installs :func:`close_on_signal` only where
the signal still has Python's default handler, and a library user calls
:func:`close_on_signal` from their own main, or :func:`close_everything` from their own
handler.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any, Protocol

__all__ = [
    "Closable",
    "close_everything",
    "close_on_signal",
    "stopping",
    "track",
    "untrack",
]

logger = logging.getLogger("sandbox_runtime")


class Closable(Protocol):
    """Anything with an idempotent ``close()``."""

    def close(self) -> None: ...


#: Tier 0: sandboxes; tier 1: what holds checkpoints (closed after the sandboxes).
_TIERS = 2
_lock = threading.Lock()
_live: list[weakref.WeakSet[Any]] = [weakref.WeakSet() for _ in range(_TIERS)]
_stopping = threading.Event()


def track(obj: Closable, *, tier: int = 0) -> None:
    """Remember ``obj`` until :func:`untrack`; it is closed by :func:`close_everything`."""
    with _lock:
        _live[tier].add(obj)


def untrack(obj: Closable) -> None:
    """Forget ``obj`` (it closed itself)."""
    with _lock:
        for tier in _live:
            tier.discard(obj)


def stopping() -> bool:
    """Whether :func:`close_everything` has begun: a sandbox that starts now is closed."""
    return _stopping.is_set()


def close_everything(timeout: float = 120.0) -> int:
    """Close every tracked sandbox, then every checkpoint holder; returns how many closed.

    Marks the process as stopping first, so sandboxes do not start behind it.  Each object is
    closed in its own daemon thread; whatever is not closed within ``timeout`` seconds in
    all is left to ``sandbox-runtime reap`` (and logged).
    """
    _stopping.set()
    deadline = time.monotonic() + timeout
    closed = 0
    for tier in range(_TIERS):
        with _lock:
            objects = list(_live[tier])
        closed += _close_all(objects, deadline)
    return closed


def _close_all(objects: Iterable[Closable], deadline: float) -> int:
    """Close ``objects`` in parallel; the number that closed before ``deadline``."""
    done: list[Closable] = []

    def close(obj: Closable) -> None:
        try:
            obj.close()
        except Exception as exc:  # a backend fault here must not stop the others
            logger.warning("closing %r on shutdown failed: %s", obj, exc)
            return
        done.append(obj)
        untrack(obj)

    threads = [
        threading.Thread(target=close, args=(obj,), name="sandbox-runtime-shutdown", daemon=True)
        for obj in objects
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    left = sum(thread.is_alive() for thread in threads)
    if left:
        logger.warning(
            "%d objects were still closing at shutdown; run `sandbox-runtime reap`", left
        )
    return len(done)


Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


def close_on_signal(
    signals: Iterable[int] = (signal.SIGTERM, signal.SIGINT),
    *,
    only_if_default: bool = False,
    timeout: float = 120.0,
) -> list[int]:
    """On each of ``signals``: :func:`close_everything`, then what the signal did before.

    The previous handler still runs afterwards: Python's SIGINT handler raises
    ``KeyboardInterrupt``, the default SIGTERM action ends the process (exit status 143), a
    host's own handler is called with the signal.  With ``only_if_default`` a signal whose
    handler the host already set is left alone (the host then calls
    :func:`close_everything` itself).  Only the main thread may install handlers; elsewhere
    this does nothing.  Returns the signals it installed a handler for.
    """
    if threading.current_thread() is not threading.main_thread():
        return []
    installed = []
    for signum in signals:
        previous: Handler = signal.getsignal(signum)
        if getattr(previous, "_sandbox_runtime_closes", False):
            continue  # already installed
        if only_if_default and previous not in (
            signal.SIG_DFL,
            signal.default_int_handler,
        ):
            continue
        signal.signal(signum, _handler(previous, timeout))
        installed.append(signum)
    return installed


def _handler(previous: Handler, timeout: float) -> Callable[[int, FrameType | None], None]:
    """A handler that closes everything, then hands the signal to ``previous``."""

    def handle(signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        logger.warning("%s: closing this process's sandboxes and checkpoints", name)
        close_everything(timeout)
        signal.signal(signum, previous)  # a second signal now acts as before
        if callable(previous):
            previous(signum, frame)
        elif previous in (signal.SIG_DFL, None):
            os.kill(os.getpid(), signum)

    handle._sandbox_runtime_closes = True  # type: ignore[attr-defined]
    return handle
