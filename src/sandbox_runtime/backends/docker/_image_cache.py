"""Images at SWE scale on one engine: pre-pull ahead of need, and a disk budget with LRU eviction.

One :class:`ImageCache` per engine and record file in a process.  ``prefetch`` pulls the
images a schedule names next on a few threads (nearest first), skipping those present or
already being pulled; a start that needs an image being pre-pulled waits for that pull rather
than starting a second one.  With a budget, after every pull and every close the images this
library pulled (:mod:`._image_record`) are measured in one engine call (``/system/df``,
never one call per image; see :meth:`ImageCache.usage`) and the least
recently used are removed until their total is within the budget, skipping any image a
container of anyone uses, any image pinned (scheduled soon or starting now, by any process),
and any image being pulled here.  When everything left is in use or pinned the budget cannot
hold; that is logged, never forced.  Between two processes there is a small window (one reads
the record, the other pins) in which an image may be removed just before its create; the
start then pulls it again, which costs time, not correctness.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from sandbox_runtime.backend_kit import RetryPolicy, call_with_retries

from ._client import docker, explain, requests, status_code
from ._image_record import ImageRecord, default_record_path
from ._options import DockerOptions
from ._pull import pull

__all__ = ["ImageCache", "image_cache", "normalize"]

logger = logging.getLogger("sandbox_runtime.docker")

#: Seconds an image a start needs is kept from eviction, at least, until its container
#: exists (a container protects its image from then on).
CREATE_PIN = 120.0


def normalize(image: str) -> str:
    """``image`` as the engine lists it in ``RepoTags`` (``:latest`` added, no ``docker.io``)."""
    name = image
    for prefix in ("docker.io/library/", "docker.io/"):
        if name.startswith(prefix):
            name = name[len(prefix) :]
            break
    last = name.rsplit("/", 1)[-1]
    if "@" not in name and ":" not in last:
        name += ":latest"
    return name


_DF_POLICY = RetryPolicy(attempts=30, max_delay=60.0, initial_wait=0.05, max_wait=1.0)
_df_lock = threading.Lock()


def _df_busy(exc: BaseException) -> bool:
    return "disk usage operation is already running" in explain(exc)


def _disk_usage(api: Any) -> dict[str, Any]:
    """``/system/df``, one at a time in this process, a busy engine waited out."""
    with _df_lock:
        answer = call_with_retries(api.df, _df_busy, description="disk usage", policy=_DF_POLICY)
    return dict(answer)


def _own_bytes(item: dict[str, Any]) -> int:
    size = int(item.get("Size") or 0)
    shared = item.get("SharedSize")
    return size - int(shared) if shared is not None and int(shared) >= 0 else size


class ImageCache:
    """Pre-pulls and the budget of one engine; see the module docstring."""

    def __init__(self, api: Callable[[], Any], options: DockerOptions, record: ImageRecord) -> None:
        self._api = api
        self.record = record
        self._inflight: dict[str, Future[None]] = {}
        self._lock = threading.Lock()
        self._evict_lock = threading.Lock()
        self._room_lock = threading.Lock()
        self._room_changed = threading.Condition(self._room_lock)
        self._pulling = 0
        self._largest = 0
        self._pool: ThreadPoolExecutor | None = None
        self.concurrency = 0
        self.configure(options)
        self.pulls = 0
        self.evictions = 0

    def configure(self, options: DockerOptions) -> None:
        """Take the budget, pin and concurrency of the latest caller (one cache per engine).

        The cache is shared by every sandbox of the engine and record, so its in-flight pulls
        are too; the settings are the options of the call at hand.
        """
        self.budget = options.image_cache_budget
        self.pin_seconds = options.image_pin
        if options.prefetch_concurrency != self.concurrency:
            old, self.concurrency = self._pool, options.prefetch_concurrency
            self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="image-prefetch")
            if old is not None:
                old.shutdown(wait=False)  # its queued pre-pulls still run

    # -- pulling -------------------------------------------------------------------------

    def present(self) -> set[str]:
        """Every tag and digest the engine holds, in one call (never one per image)."""
        found: set[str] = set()
        for item in self._api().images():
            found.update(item.get("RepoTags") or ())
            found.update(item.get("RepoDigests") or ())
        return found

    def ensure(self, image: str) -> None:
        """Have ``image`` on the engine: wait for its pre-pull, or pull it on this thread."""
        key = normalize(image)
        with self._lock:
            running = self._inflight.get(key)
            if running is None:
                mine: Future[None] = Future()
                self._inflight[key] = mine
        if running is not None:
            running.result()
            if key not in self.present():  # a pre-pull skipped for the budget
                self.ensure(image)
            return
        self._pull_into(image, key, mine, demanded=True)

    def _claim_room(self, *, demanded: bool) -> bool:
        """Make room for one more pull: evict until the budget holds it and those running.

        An image's size is known only once pulled, so each pull in flight reserves the
        largest image of ours seen so far; with that, the budget holds at every moment, not
        only after each eviction, for task images of similar sizes.  Before any image of
        ours was measured (the start of a run) nothing is known to reserve, so a pre-pull
        waits for the pull in flight to land and be measured: at most one image of unknown
        size is ever pulled at once.  A pre-pull without room is declined; a start's pull
        (``demanded``) goes ahead (the overshoot is logged).
        """
        with self._room_lock:
            if self.budget is not None and not demanded:
                self._room_changed.wait_for(lambda: self._largest > 0 or self._pulling == 0)
            reserve = self._largest * (self._pulling + 1)
            used = self.enforce(reserve=reserve)
            room = self.budget is None or used + reserve <= self.budget
            if room or demanded:
                self._pulling += 1
            return room or demanded

    def _pull_into(self, image: str, key: str, future: Future[None], *, demanded: bool) -> None:
        if not self._claim_room(demanded=demanded):
            # No room: the start that needs it pulls it then, after closes made room.
            logger.info("not pre-pulling %s: the image budget is full", key)
            with self._lock:
                self._inflight.pop(key, None)
            future.set_result(None)
            return
        try:
            pull(self._api(), image)
            self.pulls += 1
            # A start's pull is kept at least until its container exists (image_pin 0 once
            # let the eviction after this pull remove it first: "No such image").
            pin = max(self.pin_seconds, CREATE_PIN) if demanded else self.pin_seconds
            self.record.pulled(key, pin_for=pin)
        except BaseException as exc:
            with self._lock:
                self._inflight.pop(key, None)
            future.set_exception(exc)
            raise
        finally:
            with self._room_lock:
                self._pulling -= 1  # once recorded: from now on it counts as used
                if self._largest == 0:
                    self._measure_landed()
                self._room_changed.notify_all()
        with self._lock:
            self._inflight.pop(key, None)
        try:
            self.enforce()  # before the waiters go on: the budget holds when they do
        finally:
            future.set_result(None)

    def prefetch(self, images: Sequence[str]) -> list[Future[None]]:
        """Start pulls of the missing ones among ``images`` (nearest first); pin them all."""
        wanted = list(dict.fromkeys(normalize(image) for image in images))
        self.record.pin(wanted, self.pin_seconds)
        have = self.present()
        started: list[Future[None]] = []
        for key in wanted:
            with self._lock:
                if key in have or key in self._inflight:
                    continue
                future: Future[None] = Future()
                self._inflight[key] = future
            assert self._pool is not None
            self._pool.submit(self._prefetch_one, key, future)
            started.append(future)
        return started

    def wait_pulls(self, timeout: float | None = None) -> None:
        """Wait until no pull of this cache is in flight (tests, benchmarks, shutdown)."""
        while True:
            with self._lock:
                running = list(self._inflight.values())
            if not running:
                return
            for future in running:
                with contextlib.suppress(Exception):
                    future.result(timeout=timeout)

    def _prefetch_one(self, key: str, future: Future[None]) -> None:
        try:
            self._pull_into(key, key, future, demanded=False)
        except Exception as exc:  # the start that needs it reports it, typed
            logger.warning("pre-pull of %s failed: %s", key, exc)

    # -- use and eviction ----------------------------------------------------------------

    def starting(self, image: str) -> None:
        """A sandbox is being created from ``image``: keep it through the create.

        At least :data:`CREATE_PIN` seconds, whatever ``image_pin`` says (its 0 means "not
        ahead of need", never "evictable before its own create"); ``closed`` unpins it.
        """
        self.record.touch(normalize(image), pin_for=max(self.pin_seconds, CREATE_PIN))

    def closed(self, image: str, *, delete: bool) -> None:
        """A sandbox of ``image`` closed: note the use, then delete it or apply the budget."""
        key = normalize(image)
        self.record.touch(key)
        self.record.unpin(key)
        if delete:
            if key in self.record.entries():
                self._remove(key)
            return
        self.enforce()

    def _measure_landed(self) -> None:
        """Learn the size of the first image landed (for the reserve of the next pulls)."""
        with contextlib.suppress(Exception):  # the next enforce measures it all the same
            self.usage()

    def usage(self) -> tuple[int, dict[str, tuple[int, int]]]:
        """Bytes our images use, and each one's ``(own bytes, containers using it)``.

        One ``/system/df`` call whatever the number of images: each image's size less the
        layers it shares with any other image (what removing it frees), and how many
        containers, in any state, use it.  Layers shared with other images (a base image,
        an environment layer several task images have) are not counted: they stay as long
        as any user of them does.  The engine runs one disk-usage call at a time for all its
        clients, so a busy answer is waited out, and this process asks one at a time.
        """
        ours = self.record.entries()
        found: dict[str, tuple[int, int]] = {}
        for item in _disk_usage(self._api()).get("Images") or ():
            for tag in item.get("RepoTags") or ():
                if tag in ours:
                    found[tag] = (_own_bytes(item), int(item.get("Containers") or 0))
        for gone in set(ours) - set(found):
            if gone not in self._inflight:
                self.record.forget(gone)
        self._largest = max([self._largest, *(size for size, _ in found.values())])
        return sum(size for size, _ in found.values()), found

    def enforce(self, reserve: int = 0) -> int:
        """Evict least recently used images of ours until ``used + reserve`` is within budget.

        Returns the bytes our images use afterwards.
        """
        with self._evict_lock:
            used, found = self.usage()
            if self.budget is None or used + reserve <= self.budget:
                return used
            target = self.budget - reserve
            now = time.time()
            entries = self.record.entries()
            candidates = sorted(
                (entry.last_used, tag)
                for tag, entry in entries.items()
                if tag in found
                and found[tag][1] == 0
                and entry.pinned_until <= now
                and tag not in self._inflight
            )
            for _, tag in candidates:
                if used <= target:
                    break
                if self._remove(tag):
                    used -= found[tag][0]
            if used > target:
                logger.warning(
                    "image budget %d bytes exceeded (%d): the rest are in use or scheduled",
                    self.budget,
                    used,
                )
            return used

    def _remove(self, tag: str) -> bool:
        try:
            self._api().remove_image(tag)
        except docker.errors.APIError as exc:
            if status_code(exc) == 404:
                self.record.forget(tag)
                return True
            logger.info("keeping image %s: %s", tag, explain(exc))  # 409: a container uses it
            return False
        except requests.exceptions.RequestException as exc:
            logger.warning("cannot remove image %s: %s", tag, exc)
            return False
        self.record.forget(tag)
        self.evictions += 1
        logger.info("evicted image %s", tag)
        return True


_caches: dict[tuple[str, str], ImageCache] = {}
_caches_lock = threading.Lock()


def image_cache(options: DockerOptions, engine_key: str, api: Callable[[], Any]) -> ImageCache:
    """The process's cache for this engine and record file."""
    path = Path(options.image_record) if options.image_record else default_record_path(engine_key)
    key = (engine_key, str(path))
    with _caches_lock:
        cache = _caches.get(key)
        if cache is None:
            cache = ImageCache(api, options, ImageRecord(path))
            _caches[key] = cache
        cache.configure(options)
        return cache
