"""A lease: the owning process keeps its sandbox alive while it holds it, and only then.

A sandbox's lifetime is fixed at start unless someone moves it.  An episode of unknown
length wants the opposite of a long lifetime: a sandbox that lives exactly as long as its
owner needs it, and ends soon after that owner is gone (killed, crashed, its node lost) so
that nothing leaks for hours.  :class:`KeepAlive` is that: a daemon thread that keeps the
sandbox's end about ``lease`` seconds ahead, renewing once half of it is used, never past
the hard cap, and stopping when the sandbox closes.  Being a thread of the owner, it dies
with the owner; the last renewal then runs out within ``lease`` seconds and the sandbox
ends by itself, or ``reap`` takes it sooner (its owner is gone).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from types import TracebackType

from sandbox_runtime.errors import LifetimeCapError, SandboxError, SandboxGoneError

__all__ = ["KeepAlive"]

logger = logging.getLogger("sandbox_runtime")


class KeepAlive:
    """Renews a sandbox's lifetime ahead of its end until stopped, the cap, or the sandbox ends.

    Made by :meth:`SandboxRuntime.keep_alive`; ``stop()`` it (or leave the ``with`` block),
    and closing the sandbox stops it too.
    """

    def __init__(
        self,
        *,
        renew: Callable[[float], float],
        remaining: Callable[[], float],
        lease: float,
        until: float | None,
        name: str,
        floor: float = 0.0,
    ) -> None:
        """Start renewing.

        ``renew(seconds)`` sets the lifetime to ``seconds`` from now and returns the new end;
        ``remaining()`` is the seconds left; ``until`` is the caller's cap (epoch seconds);
        ``floor`` the shortest lifetime the backend can set (``Backend.min_lifetime``).
        """
        if lease <= 0:
            raise ValueError(f"lease must be positive, got {lease}")
        self.lease = lease
        self.until = until
        self.floor = floor
        self.renewals = 0
        self._renew = renew
        self._remaining = remaining
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"keep-alive {name}", daemon=True)
        self._thread.start()

    @property
    def active(self) -> bool:
        """True while the lease is being renewed."""
        return self._thread.is_alive() and not self._stopped.is_set()

    def stop(self) -> None:
        """Stop renewing (the sandbox keeps the end it has); harmless twice."""
        self._stopped.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=30)

    def __enter__(self) -> KeepAlive:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _next_lifetime(self) -> float | None:
        """The lifetime to renew to now, or ``None`` when no renewal may be asked for.

        Never past the cap: a backend that cannot set less than ``floor`` would move the
        end past it by a renewal asked for less.  So once the cap is within a lease and a
        floor, the renewal goes straight to the cap (a little over a lease, at most a floor
        more), and when less than a floor is left, nothing more is asked: the end already
        set is at the cap or before it; nor once the end is at the cap.
        """
        if self.until is None:
            return self.lease
        left = self.until - time.time()
        if left < max(self.floor, 1.0) or left - self._remaining() < 1.0:
            return None  # too close to ask, or the end is at the cap already
        return left if left <= self.lease + self.floor else self.lease

    def _run(self) -> None:
        while not self._stopped.is_set():
            if self._remaining() <= self.lease / 2:
                lifetime = self._next_lifetime()
                if lifetime is None:
                    logger.info("lease reached its cap; the sandbox ends at its lifetime")
                    return
                if not self._renew_once(lifetime):
                    return
            self._stopped.wait(max(0.2, min(self.lease / 8, 30.0)))

    def _renew_once(self, lifetime: float) -> bool:
        """One renewal; False when renewing must stop (the sandbox is gone, or capped)."""
        try:
            self._renew(lifetime)
        except SandboxGoneError:
            return False
        except LifetimeCapError as exc:
            last = exc.cap_at - time.time()
            if last < max(self.floor, 1.0):
                return False  # a renewal for less would be set to the floor: past the cap
            try:
                self._renew(last)
            except SandboxError as final:
                logger.warning("lease: the last renewal, to the cap, failed: %s", final)
            return False
        except SandboxError as exc:
            # A control plane's bad moment: the next tick tries again, well before the end.
            logger.warning("lease renewal failed (retried): %s", exc)
            return True
        self.renewals += 1
        return True
