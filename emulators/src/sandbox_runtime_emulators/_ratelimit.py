"""Server-side rate limits and latencies for the emulators: refuse what the real service refuses.

A real control plane does not serve every request a client sends: Tencent Cloud API lets the
first N requests of each second through per API, region and sub-account and refuses the rest
with ``RequestLimitExceeded``; a Kubernetes API server answers 429 with ``Retry-After`` when
a client is over its share.  Without that, a benchmark through an emulator measures nothing
about how a client copes with the limit.  :class:`ServerLimits` holds both parts, keyed by an
operation name the emulator chooses (a Cloud API action, an E2B route, a Kubernetes verb):

- a quota per ``(operation, caller)``: ``qps`` requests per second, ``burst`` at once, as
  either fixed one-second windows (``window=True``: Tencent Cloud's documented behaviour, "the
  first 20 requests of each second") or a token bucket (the Kubernetes emulator);
- a latency per operation: seconds the emulator waits before it handles an admitted request.

The operation ``*`` is a quota every operation without one of its own shares (one bucket per
caller, as client-go keeps one limiter per client).  Everything is off unless configured, so
tests that ask for nothing are not slowed.  Specs come from the Python API or the emulators'
``--rate-limit OP=QPS[:BURST]`` and ``--latency OP=SECONDS`` flags (:func:`parse_rate_limit`,
:func:`parse_latency`).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["ANY_OPERATION", "Quota", "ServerLimits", "parse_latency", "parse_rate_limit"]

#: The operation name of a quota shared by every operation without its own.
ANY_OPERATION = "*"


@dataclass(frozen=True)
class Quota:
    """``qps`` requests per second, ``burst`` at once (default: one second's worth)."""

    qps: float
    burst: int | None = None

    def __post_init__(self) -> None:
        if not self.qps > 0 or math.isinf(self.qps):
            raise ValueError(f"a quota's QPS must be a positive number, got {self.qps}")
        if self.burst is not None and self.burst < 1:
            raise ValueError(f"a quota's burst must be at least 1, got {self.burst}")

    @property
    def capacity(self) -> int:
        """Requests admitted at once (in one window, or from a full bucket)."""
        return self.burst if self.burst is not None else max(1, round(self.qps))


def parse_rate_limit(text: str) -> tuple[str, Quota]:
    """``OP=QPS[:BURST]`` (``StartSandboxInstance=20``, ``*=5:10``) as ``(op, Quota)``."""
    operation, sep, value = text.rpartition("=")
    operation = operation.strip()
    if not sep or not operation:
        raise ValueError(f"a rate limit looks like OP=QPS[:BURST], got {text!r}")
    qps_text, _, burst_text = value.partition(":")
    try:
        qps = float(qps_text)
        burst = int(burst_text) if burst_text else None
        return operation, Quota(qps, burst)
    except ValueError as exc:
        raise ValueError(f"bad rate limit {text!r}: {exc}") from None


def parse_latency(text: str) -> tuple[str, float]:
    """``OP=SECONDS`` (``StartSandboxInstance=0.3``) as ``(op, seconds)``."""
    operation, sep, value = text.rpartition("=")
    operation = operation.strip()
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not sep or not operation or not 0 <= seconds < math.inf:
        raise ValueError(f"a latency looks like OP=SECONDS (0 or more), got {text!r}")
    return operation, seconds


class ServerLimits:
    """Quotas and latencies of one emulator; thread safe (see the module docstring)."""

    def __init__(
        self,
        quotas: Mapping[str, Quota] | Iterable[tuple[str, Quota]] = (),
        latencies: Mapping[str, float] | Iterable[tuple[str, float]] = (),
        *,
        window: bool = False,
    ) -> None:
        self._lock = threading.Lock()
        self.quotas: dict[str, Quota] = dict(quotas)
        self.latencies: dict[str, float] = dict(latencies)
        self.window = window
        # Bucket mode: (tokens, stamp); window mode: (count, window index).
        self._state: dict[tuple[str, str], tuple[float, float]] = {}
        #: Requests of operations with a quota admitted and refused (for reports and tests).
        self.admitted = 0
        self.refused = 0

    def __bool__(self) -> bool:
        return bool(self.quotas or self.latencies)

    def set_quota(self, operation: str, quota: Quota | None) -> None:
        """Add, change or (``None``) remove the quota of ``operation``; its counts restart."""
        with self._lock:
            if quota is None:
                self.quotas.pop(operation, None)
            else:
                self.quotas[operation] = quota
            self._state = {k: v for k, v in self._state.items() if k[0] != operation}

    def set_latency(self, operation: str, seconds: float) -> None:
        """Make every admitted ``operation`` wait ``seconds`` (0 removes it)."""
        with self._lock:
            if seconds > 0:
                self.latencies[operation] = seconds
            else:
                self.latencies.pop(operation, None)

    def latency(self, operation: str) -> float:
        """Seconds to wait before handling an admitted ``operation``."""
        return self.latencies.get(operation, 0.0)

    def admit(self, operation: str, caller: str = "") -> float | None:
        """``None`` when the request may go on, else the seconds until one would be admitted."""
        name = operation if operation in self.quotas else ANY_OPERATION
        quota = self.quotas.get(name)
        if quota is None:
            return None
        key = (name, caller)
        now = time.monotonic()
        with self._lock:
            if self.window:
                wait = self._admit_window(key, quota, now)
            else:
                wait = self._admit_bucket(key, quota, now)
            if wait is None:
                self.admitted += 1
            else:
                self.refused += 1
            return wait

    def _admit_window(self, key: tuple[str, str], quota: Quota, now: float) -> float | None:
        # Windows of 1/qps * capacity seconds: one second for the usual capacity == qps.
        length = quota.capacity / quota.qps
        index = math.floor(now / length)
        count, current = self._state.get(key, (0.0, index))
        if current != index:
            count = 0.0
        if count >= quota.capacity:
            return (index + 1) * length - now
        self._state[key] = (count + 1, index)
        return None

    def _admit_bucket(self, key: tuple[str, str], quota: Quota, now: float) -> float | None:
        tokens, stamp = self._state.get(key, (float(quota.capacity), now))
        tokens = min(float(quota.capacity), tokens + (now - stamp) * quota.qps)
        if tokens < 1.0:
            self._state[key] = (tokens, now)
            return (1.0 - tokens) / quota.qps
        self._state[key] = (tokens - 1.0, now)
        return None
