"""Bounded concurrent starts per engine.

A container engine or a cluster does not start sandboxes faster because more are asked for
at once: dockerd does much of a container's creation under shared locks (network namespace
and overlay set-up), so a burst of hundreds of creates only queues inside it until calls time
out or fail with 500s, which callers then retry, making it worse.  So every
:meth:`SandboxRuntime.start` first takes a slot from a semaphore shared by all sandboxes of
the same backend and engine in this process; the rest queue, in order, and none is failed.

A backend says what its engine bears (:attr:`Backend.max_concurrent_starts`, ``None`` for no
bound) and which engine a sandbox's options point at (:meth:`Backend.engine_key`, so two
Docker hosts get a semaphore each); :func:`set_start_limit` overrides the bound per backend.
The bound is per process: several processes sharing one engine each get their own.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

from sandbox_runtime._core.backend import Backend
from sandbox_runtime._core.config import BackendOptions

__all__ = ["set_start_limit", "start_limit", "start_slot"]

logger = logging.getLogger("sandbox_runtime.limits")

_lock = threading.Lock()
_overrides: dict[str, int | None] = {}
_semaphores: dict[tuple[str, str], tuple[int, threading.BoundedSemaphore]] = {}


def set_start_limit(backend: str, limit: int | None) -> None:
    """At most ``limit`` sandboxes of ``backend`` start at once per engine (``None``: no bound).

    Replaces the backend's own default (``Backend.max_concurrent_starts``).  Starts already
    holding a slot finish under the old bound.
    """
    if limit is not None and limit < 1:
        raise ValueError(f"a start limit must be at least 1 (or None), got {limit}")
    with _lock:
        _overrides[backend] = limit


def start_limit(backend_cls: type[Backend[Any]]) -> int | None:
    """The bound on concurrent starts for ``backend_cls``: the override, else its default."""
    with _lock:
        if backend_cls.name in _overrides:
            return _overrides[backend_cls.name]
    return backend_cls.max_concurrent_starts


def _semaphore(backend_cls: type[Backend[Any]], engine: str) -> threading.BoundedSemaphore | None:
    limit = start_limit(backend_cls)
    if limit is None:
        return None
    key = (backend_cls.name, engine)
    with _lock:
        current = _semaphores.get(key)
        if current is None or current[0] != limit:
            current = (limit, threading.BoundedSemaphore(limit))
            _semaphores[key] = current
        return current[1]


@contextlib.contextmanager
def start_slot(backend_cls: type[Backend[Any]], options: BackendOptions) -> Iterator[float]:
    """Hold one start slot of the engine ``options`` point at; yields the seconds waited."""
    semaphore = _semaphore(backend_cls, backend_cls.engine_key(options))
    if semaphore is None:
        yield 0.0
        return
    began = time.monotonic()
    semaphore.acquire()
    waited = time.monotonic() - began
    if waited > 1.0:
        logger.debug("waited %.1fs for a %s start slot", waited, backend_cls.name)
    try:
        yield waited
    finally:
        semaphore.release()
