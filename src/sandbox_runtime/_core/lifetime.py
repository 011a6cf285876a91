"""A running sandbox's end: where it is, how far it may move, and why a sandbox went away.

The runtime keeps one :class:`LifetimeClock` per sandbox.  It knows when the sandbox started
and when it ends (wall-clock seconds, the same clock the ownership labels use), and the
latest end allowed: the caller's hard cap (``SandboxConfig.max_lifetime``) or the service's
own (AGS: 24 h), whichever comes first.  ``extend`` and ``set_lifetime`` ask it for the new
end before the backend moves anything, so a refused extension changes nothing.

The container backends (docker, kubernetes) end a sandbox with an in-sandbox timer that
reads its end from a file (:func:`timer_script`), so that the end can move while the
sandbox runs and no client is needed for it to end; the file's end is clamped to the hard
cap given at create, so a sandbox that writes its own file cannot outlive the cap.
"""

from __future__ import annotations

import math
import secrets
import threading
import time
from dataclasses import dataclass

from sandbox_runtime.errors import GoneCause, LifetimeCapError

__all__ = [
    "LEASE_FILE_PREFIX",
    "LifetimeClock",
    "lease_file",
    "new_lease_key",
    "timer_argv",
    "timer_script",
    "write_end_script",
]

#: The in-sandbox file holding a container sandbox's end (epoch seconds), per lease key.
LEASE_FILE_PREFIX = "/tmp/.sandbox-runtime-lease-"

# The container's main process ($1: lifetime seconds, $2: the lease file, $3: the hard cap
# in epoch seconds, 0 for none).  It sleeps until the end the file names (or start +
# lifetime until the file exists), re-reading the file before it gives up, so an extension
# written before the end is always seen.  A file that is not a plain number is ignored.
# ``date +%s`` drops the fraction, hence the second added to the first end: never early.
_TIMER = (
    "e=$(( $(date +%s) + $1 + 1 )); while :; do "
    'if [ -s "$2" ]; then read -r x < "$2"; case "$x" in ""|*[!0-9]*) ;; *) e=$x;; esac; fi; '
    'if [ "$3" -gt 0 ] && [ "$e" -gt "$3" ]; then e=$3; fi; '
    'r=$(( e - $(date +%s) )); [ "$r" -le 0 ] && exit 0; [ "$r" -gt 5 ] && r=5; '
    'sleep "$r"; done'
)

# Writes the end ($1) to the lease file ($2) whole: a temporary beside it, then a rename.
_WRITE_END = 'printf "%s\\n" "$1" > "$2.new" && mv -f "$2.new" "$2"'


def new_lease_key() -> str:
    """A sandbox's own lease key (hex, valid in any label value)."""
    return secrets.token_hex(8)


def lease_file(key: str) -> str:
    """The in-sandbox path of the lease file of ``key``."""
    return LEASE_FILE_PREFIX + key


def timer_script() -> str:
    """The ``/bin/sh -c`` script of a container sandbox's main process (see ``_TIMER``)."""
    return _TIMER


def timer_argv(lifetime: float, key: str, cap_at: float | None) -> list[str]:
    """The argument vector that runs :func:`timer_script` as a container's command."""
    cap = 0 if cap_at is None else math.floor(cap_at)
    return [
        "/bin/sh",
        "-c",
        _TIMER,
        "sandbox-runtime-timer",
        str(math.ceil(lifetime)),
        lease_file(key),
        str(cap),
    ]


def write_end_script(end_at: float, key: str) -> tuple[str, ...]:
    """The command that moves a container sandbox's end to ``end_at`` (epoch seconds)."""
    return ("/bin/sh", "-c", _WRITE_END, "sh", str(math.ceil(end_at)), lease_file(key))


@dataclass
class LifetimeClock:
    """When one sandbox started and ends, and the latest end it may be given."""

    started_at: float
    ends_at: float
    cap_at: float | None
    """The earliest of the caller's and the service's hard caps; ``None``: no cap."""

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        #: Held while the end moves, so a lease's renewal and a caller's extension never
        #: interleave (the backend's last write would otherwise not be the clock's end).
        self.moving = threading.Lock()

    @classmethod
    def starting_now(
        cls, lifetime: float, max_lifetime: float | None, service_cap: float | None
    ) -> LifetimeClock:
        """The clock of a sandbox whose start is being requested now."""
        now = time.time()
        mine = None if max_lifetime is None else now + max_lifetime
        known = [cap for cap in (service_cap, mine) if cap is not None]
        return cls(started_at=now, ends_at=now + lifetime, cap_at=min(known) if known else None)

    def remaining(self) -> float:
        """Seconds left before the sandbox ends (negative once it has)."""
        return self.ends_at - time.time()

    def end_for(self, *, extend_by: float | None = None, lifetime: float | None = None) -> float:
        """The new end for an extension by ``extend_by``, or a lifetime of ``lifetime`` from now.

        Raises :class:`LifetimeCapError` when it is past the cap; nothing changes then.
        """
        if extend_by is not None:
            wanted = max(self.ends_at, time.time()) + extend_by
        else:
            assert lifetime is not None
            wanted = time.time() + lifetime
        if self.cap_at is not None and wanted > self.cap_at + 1:
            raise LifetimeCapError(
                f"the sandbox may run until {self.cap_at:.0f} (its hard cap, "
                f"{self.cap_at - self.started_at:.0f} s after start); asked for "
                f"{wanted - self.started_at:.0f} s",
                self.cap_at,
            )
        return wanted

    def capped(self, wanted: float) -> float:
        """``wanted``, or the cap if that comes first (what a lease renews to)."""
        return wanted if self.cap_at is None else min(wanted, self.cap_at)

    def moved_to(self, end: float) -> None:
        """Record that the backend moved the end to ``end``."""
        with self._lock:
            self.ends_at = end

    def cause_of_gone(self, backend_cause: str) -> GoneCause:
        """The cause of a death: ``expired`` when the end has passed, else the backend's."""
        if time.time() >= self.ends_at - 1:
            return "expired"
        if backend_cause in ("expired", "killed", "evicted", "closed"):
            return backend_cause  # type: ignore[return-value]
        return "unknown"
