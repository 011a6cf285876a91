"""The on-disk record of the images this library pulled: when each was last used or pinned.

Why a file and not the engine: the engine keeps no last-used time (``LastTagTime`` is the
tag time, and an image's labels are fixed at build), and several processes of one run (a
trainer's workers, ``run`` next to a prefetcher) share one engine, so the record must outlive
and be shared by processes.  A small JSON file per engine, locked with ``flock`` for each
read-modify-write, is that; its entries are also what makes an image ours to evict: an image
never pulled by this library is never in it, so the user's other images are never touched.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["ImageEntry", "ImageRecord", "default_record_path"]

logger = logging.getLogger("sandbox_runtime.docker")


@dataclass
class ImageEntry:
    """One pulled image: when it was pulled, last used, and until when it must stay."""

    pulled_at: float
    last_used: float
    pinned_until: float = 0.0


def default_record_path(engine_key: str) -> Path:
    """``$XDG_STATE_HOME/sandbox-runtime/images-<engine>.json`` (``~/.local/state`` default)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    digest = hashlib.sha256(engine_key.encode()).hexdigest()[:12]
    return Path(base) / "sandbox-runtime" / f"images-{digest}.json"


class ImageRecord:
    """The record file at ``path``; every method takes the lock for its whole change."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, ImageEntry]]:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            lock = open(self.path.with_suffix(".lock"), "a+")  # noqa: SIM115 - closed below
        except OSError as exc:
            # No writable state directory: pulls and starts go on, without a budget's record.
            logger.warning("image record %s unusable (%s): nothing is recorded", self.path, exc)
            yield {}
            return
        with lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            entries = self._read()
            before = {name: asdict(entry) for name, entry in entries.items()}
            yield entries
            if {name: asdict(entry) for name, entry in entries.items()} != before:
                self._write(entries)

    def _read(self) -> dict[str, ImageEntry]:
        try:
            raw = json.loads(self.path.read_text())
        except (FileNotFoundError, json.JSONDecodeError, TypeError):
            return {}
        return {str(name): ImageEntry(**fields) for name, fields in raw.items()}

    def _write(self, entries: dict[str, ImageEntry]) -> None:
        data = json.dumps({name: asdict(entry) for name, entry in entries.items()}, indent=1)
        try:
            fd, temp = tempfile.mkstemp(dir=self.path.parent, prefix=".images-")
            with os.fdopen(fd, "w") as handle:
                handle.write(data)
            os.replace(temp, self.path)
        except OSError as exc:  # a full disk, of all things: the old record stands
            logger.warning("cannot write the image record %s: %s", self.path, exc)

    def entries(self) -> dict[str, ImageEntry]:
        """A snapshot of every entry."""
        with self._locked() as entries:
            return dict(entries)

    def pulled(self, image: str, *, pin_for: float = 0.0) -> None:
        """``image`` was just pulled by us: it becomes ours to evict later (not for ``pin_for``)."""
        now = time.time()
        with self._locked() as entries:
            old = entries.get(image)
            pinned = max(old.pinned_until if old else 0.0, now + pin_for)
            entries[image] = ImageEntry(now, now, pinned)

    def touch(self, image: str, *, pin_for: float = 0.0) -> None:
        """``image`` is used now (and must stay ``pin_for`` seconds); only for our images."""
        now = time.time()
        with self._locked() as entries:
            entry = entries.get(image)
            if entry is not None:
                entry.last_used = now
                entry.pinned_until = max(entry.pinned_until, now + pin_for)

    def pin(self, images: list[str], seconds: float) -> None:
        """Keep ``images`` (scheduled soon) from eviction for ``seconds``, ours or not yet."""
        until = time.time() + seconds
        with self._locked() as entries:
            for image in images:
                entry = entries.get(image)
                if entry is not None:
                    entry.pinned_until = max(entry.pinned_until, until)

    def unpin(self, image: str) -> None:
        """``image`` is no longer scheduled (its sandbox closed)."""
        with self._locked() as entries:
            entry = entries.get(image)
            if entry is not None:
                entry.pinned_until = 0.0

    def forget(self, image: str) -> None:
        """``image`` was removed from the engine."""
        with self._locked() as entries:
            entries.pop(image, None)
