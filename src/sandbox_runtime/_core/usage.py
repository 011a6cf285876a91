"""What a sandbox used: the figures a cloud bill and a training budget are made of.

Every :class:`~sandbox_runtime.SandboxRuntime` counts, as its calls pass through it, how long
its start took, how long it existed (start to close: *sandbox-seconds*, what AGS and
Kubernetes bill), the commands it ran and their total time, the bytes it moved (files written
and uploaded, command input, up; files read and downloaded, command output, down), the
retries its backend made, and the faults it met, by kind.  Counting costs no engine call: the
figures come from results the calls return anyway.  ``sandbox.usage`` is a snapshot.

Retries happen deep inside backends (:mod:`sandbox_runtime._core.retry`); each runtime call makes
itself the listener of the retries made in its thread while it runs, so they are counted
for the sandbox that made them.

Faults are infrastructure errors (the sandbox died, the backend failed or timed out, the
sandbox did not start), not a missing file or a path refused: those are answers, not faults.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from sandbox_runtime._core.results import ExecResult
from sandbox_runtime._core.retry import retry_listener
from sandbox_runtime.errors import (
    BackendError,
    BackendUnavailableError,
    SandboxClosedError,
    SandboxGoneError,
    SandboxStartError,
    SandboxTimeoutError,
)

__all__ = ["SandboxUsage", "UsageMeter", "host_size"]

_FAULTS = (
    BackendError,
    BackendUnavailableError,
    SandboxGoneError,
    SandboxStartError,
    SandboxTimeoutError,
)


def _merged(*counts: Mapping[str, int]) -> dict[str, int]:
    total: dict[str, int] = {}
    for mapping in counts:
        for key, value in mapping.items():
            total[key] = total.get(key, 0) + value
    return {key: value for key, value in sorted(total.items()) if value}


@dataclass(frozen=True)
class SandboxUsage:
    """What one sandbox (or, summed with ``+``, several) used."""

    sandboxes: int = 0
    """How many sandboxes these figures cover (each one start: fresh or a fork)."""
    forks: int = 0
    """Of those, how many started from a checkpoint (a fork, ``from_checkpoint``) rather than
    from their image: the starts a group or a prepared state saved a setup for."""
    pulls: int = 0
    """Image pulls their starts waited for.

    Docker counts its own pulls, kubernetes each pod's ``Pulling`` events; 0 elsewhere.
    """
    start_latency: float = 0.0
    """Seconds ``start()`` took (summed over sandboxes)."""
    sandbox_seconds: float = 0.0
    """Seconds from the start request to the close (or to now, while open)."""
    commands: int = 0
    """``exec`` calls: the agent's, and the library's own (setup, diff, grading)."""
    command_seconds: float = 0.0
    """Their total duration."""
    command_timeouts: int = 0
    """Commands killed by their timeout."""
    bytes_up: int = 0
    """File writes and uploads, and command input."""
    bytes_down: int = 0
    """File reads and downloads, and command output (as returned, after the output cap)."""
    retries: Mapping[str, int] = field(default_factory=dict)
    """Backend retries, by the error that caused them."""
    faults: Mapping[str, int] = field(default_factory=dict)
    """Infrastructure errors raised to the caller, by kind."""

    def __add__(self, other: SandboxUsage) -> SandboxUsage:
        values: dict[str, Any] = {}
        for item in fields(self):
            mine, theirs = getattr(self, item.name), getattr(other, item.name)
            values[item.name] = (
                _merged(mine, theirs) if isinstance(mine, Mapping) else mine + theirs
            )
        return SandboxUsage(**values)

    def since(self, earlier: SandboxUsage) -> SandboxUsage:
        """The activity between ``earlier`` and this snapshot of the same sandbox.

        Counts and times of commands, bytes, retries and faults; the sandbox's own figures
        (start latency, lifetime) are not activity and are zero here.
        """
        return SandboxUsage(
            commands=self.commands - earlier.commands,
            command_seconds=self.command_seconds - earlier.command_seconds,
            command_timeouts=self.command_timeouts - earlier.command_timeouts,
            bytes_up=self.bytes_up - earlier.bytes_up,
            bytes_down=self.bytes_down - earlier.bytes_down,
            retries=_merged(self.retries, {k: -v for k, v in earlier.retries.items()}),
            faults=_merged(self.faults, {k: -v for k, v in earlier.faults.items()}),
        )

    def cost(self, price_per_second: float | None) -> float | None:
        """Estimated cost at a price per sandbox-second, or ``None`` without a price."""
        return None if price_per_second is None else self.sandbox_seconds * price_per_second

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready figures (seconds rounded to milliseconds)."""
        result: dict[str, Any] = {}
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, float):
                value = round(value, 3)
            elif isinstance(value, Mapping):
                value = dict(value)
            result[item.name] = value
        return result

    @classmethod
    def total(cls, usages: Iterable[SandboxUsage]) -> SandboxUsage:
        """The sum of several usages."""
        result = cls()
        for usage in usages:
            result = result + usage
        return result


def host_size(path: Path) -> int:
    """Bytes of the regular files at ``path`` on the host (a file or a tree; links not followed)."""
    if path.is_symlink() or not path.exists():
        return 0
    if path.is_file():
        return path.stat().st_size
    return sum(
        item.stat().st_size for item in path.rglob("*") if item.is_file() and not item.is_symlink()
    )


class UsageMeter:
    """The counters behind :attr:`SandboxRuntime.usage`; thread-safe, one per sandbox."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._began: float | None = None
        self._ended: float | None = None
        self._forked = False
        self._pulls = 0
        self._start_latency = 0.0
        self._commands = 0
        self._command_seconds = 0.0
        self._timeouts = 0
        self._up = 0
        self._down = 0
        self._retries: dict[str, int] = {}
        self._faults: dict[str, int] = {}

    def starting(self) -> float:
        """Mark the start request (the beginning of the sandbox's lifetime)."""
        began = time.monotonic()
        with self._lock:
            if self._began is None:
                self._began = began
        return began

    def started(self, began: float, *, pulls: int = 0) -> None:
        """Record the start latency of a start requested at ``began`` (and its image pulls)."""
        with self._lock:
            self._start_latency = time.monotonic() - began
            self._pulls += pulls

    def forked(self) -> None:
        """Mark this sandbox as started from a checkpoint (counted in ``forks``)."""
        with self._lock:
            self._forked = True

    def closed(self) -> None:
        """Mark the end of the sandbox's lifetime."""
        with self._lock:
            if self._began is not None and self._ended is None:
                self._ended = time.monotonic()

    def command(self, result: ExecResult, stdin: bytes | None) -> None:
        """Count a finished command."""
        with self._lock:
            self._commands += 1
            self._command_seconds += result.duration
            self._timeouts += int(result.timed_out)
            self._up += len(stdin or b"")
            self._down += len(result.stdout_bytes) + len(result.stderr_bytes)

    def moved(self, *, up: int = 0, down: int = 0) -> None:
        """Count bytes written to or read from the sandbox's files."""
        with self._lock:
            self._up += up
            self._down += down

    def _retried(self, error: BaseException) -> None:
        with self._lock:
            kind = type(error).__name__
            self._retries[kind] = self._retries.get(kind, 0) + 1

    @contextmanager
    def call(self) -> Iterator[None]:
        """Around one runtime call: its retries are counted here, its faults too."""
        with retry_listener(self._retried):
            try:
                yield
            except _FAULTS as exc:
                if not isinstance(exc, SandboxClosedError):
                    with self._lock:
                        kind = type(exc).__name__
                        self._faults[kind] = self._faults.get(kind, 0) + 1
                raise

    def snapshot(self) -> SandboxUsage:
        """The figures so far."""
        with self._lock:
            began = self._began
            lifetime = 0.0
            if began is not None:
                lifetime = (self._ended if self._ended is not None else time.monotonic()) - began
            return SandboxUsage(
                sandboxes=1 if began is not None else 0,
                forks=1 if began is not None and self._forked else 0,
                pulls=self._pulls,
                start_latency=self._start_latency,
                sandbox_seconds=lifetime,
                commands=self._commands,
                command_seconds=self._command_seconds,
                command_timeouts=self._timeouts,
                bytes_up=self._up,
                bytes_down=self._down,
                retries=dict(sorted(self._retries.items())),
                faults=dict(sorted(self._faults.items())),
            )
