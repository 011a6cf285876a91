"""What placement knows of each member in this process: its quota, its live sandboxes, its counts.

One :class:`MemberLedger` per member (keyed by the member's backend, name and options, so two
runs naming the same member share its quota and cap, as they share the service).  A start
first *reserves* on a ledger (a live slot under the cap and a token of the start quota, taken
together or not at all), then either keeps the slot (started) or gives it back (refused,
failed).  Nothing here blocks: placement asks each member in turn and waits only when none
has room (``_backend``).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Any

from sandbox_runtime.backend_kit import ServiceQuota

from ._options import SpreadMember

__all__ = [
    "REFUSAL_PAUSE",
    "MemberCounts",
    "MemberLedger",
    "capacity_changed",
    "ledger_for",
    "wait_for_change",
]


@dataclass(frozen=True, slots=True)
class MemberCounts:
    """One member's accounting, as :meth:`SpreadBackend.accounting` reports it."""

    member: str
    backend: str
    started: int
    """Sandboxes placed and started on it."""
    refused: int
    """Starts the service refused for its quota (the sandbox went to the next member)."""
    failed: int
    """Starts that failed otherwise (the error reached the caller)."""
    full: int
    """Times placement passed it over because its cap or start quota had no room."""
    live: int
    """Sandboxes placed on it and not stopped yet."""
    last_refusal: str = ""
    """The service's words for the latest refusal (which quota), empty when none."""


#: How long a member that refused a start for its quota is passed over.
REFUSAL_PAUSE = 1.0

_changed = threading.Condition()


def capacity_changed() -> None:
    """Wake placements waiting for room (a sandbox stopped, a start was refused)."""
    with _changed:
        _changed.notify_all()


def wait_for_change(seconds: float) -> None:
    """Sleep until some member may have room again, or ``seconds`` at most."""
    with _changed:
        _changed.wait(timeout=max(0.0, seconds))


class MemberLedger:
    """The live count, start-quota bucket and counts of one member."""

    def __init__(self, member: SpreadMember) -> None:
        self.member = member
        self._lock = threading.Lock()
        self._rate: float | None = member.starts_per_second
        self._burst = member.burst
        self._tokens = float(member.burst)
        self._refilled = time.monotonic()
        self._blocked_until = 0.0
        #: Whether the service's own quota was asked for (once per member and process).
        self.quota_read = False
        self._service_cap: int | None = None
        self.started = self.refused = self.failed = self.full = self.live = 0
        self.last_refusal = ""

    def set_service_quota(self, quota: ServiceQuota) -> None:
        """The service's own limits, kept where the member's options set none."""
        with self._lock:
            if self.member.max_live is None and quota.max_live is not None:
                self._service_cap = quota.max_live + self.live
            if self.member.starts_per_second is None and quota.starts_per_second is not None:
                self._rate, self._burst = quota.starts_per_second, max(1, quota.burst)
                self._tokens = min(self._tokens, float(self._burst))

    @property
    def cap(self) -> int | None:
        """Live sandboxes at most: the member's own cap, else the service's, else none."""
        return self.member.max_live if self.member.max_live is not None else self._service_cap

    @property
    def rate(self) -> float | None:
        """Starts per second this ledger allows (``None``: no quota)."""
        return self._rate

    def _refill(self, now: float) -> None:
        if self._rate is not None:
            gained = (now - self._refilled) * self._rate
            self._tokens = min(float(self._burst), self._tokens + gained)
        self._refilled = now

    def try_reserve(self) -> float | None:
        """Take a live slot and a start token: ``None`` when taken, else seconds until a token.

        ``inf`` when the cap is full (only a stop frees it).
        """
        with self._lock:
            cap = self.cap
            if cap is not None and self.live >= cap:
                self.full += 1
                return float("inf")
            now = time.monotonic()
            if now < self._blocked_until:
                self.full += 1
                return self._blocked_until - now
            self._refill(now)
            if self._rate is not None and self._tokens < 1.0:
                self.full += 1
                return (1.0 - self._tokens) / self._rate
            if self._rate is not None:
                self._tokens -= 1.0
            self.live += 1
            return None

    def settle(self, outcome: str, reason: str = "") -> None:
        """Record a reserved start's end: ``started`` keeps the slot, the others free it."""
        with self._lock:
            if outcome == "started":
                self.started += 1
                return
            self.live -= 1
            if outcome == "refused":
                self.refused += 1
                self.last_refusal = reason
                # The service says its quota is spent: leave it one quota window (a second,
                # as the Cloud APIs count) before placing there again.
                self._blocked_until = time.monotonic() + REFUSAL_PAUSE
            else:
                self.failed += 1
        capacity_changed()

    def stopped(self) -> None:
        """A sandbox placed here was stopped: its slot is free again."""
        with self._lock:
            self.live = max(0, self.live - 1)
        capacity_changed()

    def counts(self) -> MemberCounts:
        with self._lock:
            return MemberCounts(
                member=self.member.label,
                backend=self.member.backend,
                started=self.started,
                refused=self.refused,
                failed=self.failed,
                full=self.full,
                live=self.live,
                last_refusal=self.last_refusal,
            )


_ledgers: dict[str, MemberLedger] = {}
_ledgers_lock = threading.Lock()


def _key(member: SpreadMember) -> str:
    options: Any = member.options
    return json.dumps([member.label, member.backend, options], sort_keys=True, default=str)


def ledger_for(member: SpreadMember) -> MemberLedger:
    """The ledger of ``member`` in this process (made on first use)."""
    key = _key(member)
    with _ledgers_lock:
        found = _ledgers.get(key)
        if found is None or found.member != member:
            fresh = MemberLedger(member)
            if found is not None:  # same member, other limits: keep what is live
                fresh.live = found.live
            _ledgers[key] = found = fresh
        return found
