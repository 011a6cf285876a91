"""Client-side rate limits, one per control plane, that every caller in the process shares.

A cloud API or a Kubernetes API server limits requests per second per account or client
(AGS's ``RequestLimitExceeded``, an API server's 429 with ``Retry-After`` under priority and
fairness).  Without a shared limit, 200 rollout threads each learn that the hard way: each
is refused, each backs off on its own, and their retries arrive together and are refused
again.  So calls to one control plane go through one :class:`RateLimiter`:

- a token bucket (``rate`` requests per second, ``burst`` at once) keeps the client under a
  quota it knows, queueing callers in order instead of letting the server refuse them;
- a refusal that says when to come back (``Retry-After``, or a rate-limit code) pauses the
  whole control plane, not just the refused call, so the other threads stop too; the calls
  of one refused burst share one pause, and when it ends the calls refused most often go
  first, so that a quota learned from refusals alone serves callers in about the order
  they came (``docs/performance.md``, 1,000 sandboxes under control-plane rate limits).

:func:`~sandbox_runtime._core.retry.call_with_retries` takes a limiter: it waits for a token before
every attempt and pauses the limiter when a retryable error asks for a wait.  Backends keep
one limiter per control plane (:func:`limiter_for`), configured from their options
(``api_qps``, ``api_burst``).  Only the pause is on by default: a quota is the user's to
state, since it depends on their account or cluster.
"""

from __future__ import annotations

import logging
import threading
import time

__all__ = ["RateLimiter", "limiter_for"]

logger = logging.getLogger("sandbox_runtime.ratelimit")

#: Longest pause a server may impose through one answer: a ``Retry-After`` of an hour is a
#: misconfigured proxy, not a reason to stop every thread for an hour.
MAX_PAUSE = 300.0
#: When a pause ends, calls refused fewer than :data:`SENIORITY` times wait this much longer
#: per refusal they lack (see :meth:`RateLimiter.acquire`).
PAUSE_STAGGER = 0.04
SENIORITY = 5
#: Among calls refused :data:`SENIORITY` times or more, each further refusal (up to
#: :data:`SENIOR_LEVELS` of them) lets a call go this much earlier than the others, so
#: seniors do not draw lots among themselves either: under 5 starts per second for 32
#: callers, a call that keeps losing the draw runs out of its 90 s.
SENIOR_STEP = 0.005
SENIOR_LEVELS = 20


class RateLimiter:
    """A token bucket with a shared pause; thread safe.  ``rate=None``: no bucket, pause only."""

    def __init__(self, rate: float | None = None, burst: int | None = None) -> None:
        self._lock = threading.Lock()
        self._rate: float | None = None
        self._burst = 1.0
        self._tokens = float("inf")  # a new limiter starts with a full bucket (configure)
        self._stamp = time.monotonic()
        self._paused_until = 0.0
        self._pause_since = 0.0
        self._pauses = 0
        self._successes = 0
        self._in_flight = 0
        self.configure(rate, burst)

    @property
    def rate(self) -> float | None:
        """Requests per second, or None when only pauses apply."""
        return self._rate

    def configure(self, rate: float | None, burst: int | None = None) -> None:
        """Set the quota: ``rate`` per second, ``burst`` (default: one second's worth) at once."""
        if rate is not None and rate <= 0:
            raise ValueError(f"a rate must be positive (or None), got {rate}")
        if burst is not None and burst < 1:
            raise ValueError(f"a burst must be at least 1, got {burst}")
        with self._lock:
            self._rate = rate
            self._burst = float(burst if burst is not None else max(1, round(rate or 1)))
            self._tokens = min(self._tokens, self._burst)

    def acquire(self, refused: int = 0) -> float:
        """Wait for this call's turn; returns the seconds waited.

        Each caller reserves its token under the lock (the bucket may go negative: a queue of
        reservations), then sleeps outside it, so callers pass in the order they came.

        A pause ends in order of seniority: the call ``refused`` most often goes first,
        newcomers last (:func:`_stagger`).  A service that admits "the first N requests of
        each second" then serves those that waited longest, so a burst of callers does not
        turn into a lottery that an unlucky call keeps losing.
        """
        with self._lock:
            now = time.monotonic()
            wait = 0.0
            if self._rate is not None:
                self._tokens = min(self._burst, self._tokens + (now - self._stamp) * self._rate)
                self._stamp = now
                self._tokens -= 1.0
                if self._tokens < 0:
                    wait = -self._tokens / self._rate
            if self._paused_until > now:
                wait = max(wait, self._paused_until - now + _stagger(refused))
        if wait > 0:
            time.sleep(wait)
        return wait

    def pause(self, seconds: float, since: float | None = None) -> None:
        """Let no call through for ``seconds`` from ``since`` (default: now).

        ``since`` is a ``time.monotonic()``; a longer pause already set stays.

        A refusal's pause counts from when the refused call was sent, and a call sent while
        a pause already asked for was coming (after the first refused call of its burst) does
        not push it later: the quota that refused the first one renews when that one's pause
        ends, so the calls of one burst, refused together, share one pause instead of each
        extending it by its own round trip or place in the burst.
        """
        seconds = min(max(0.0, seconds), MAX_PAUSE)
        with self._lock:
            start = time.monotonic() if since is None else since
            until = start + seconds
            self._pauses += 1
            if since is not None and since < self._paused_until:
                if since < self._pause_since:  # an earlier call of the burst, answered later
                    self._pause_since = start
                    self._paused_until = max(min(self._paused_until, until), time.monotonic())
                return  # otherwise sent after the first refused call of the burst
            self._pause_since = start
            if until > self._paused_until:
                self._paused_until = until
                logger.info("control plane asked for a pause: holding its calls %.2fs", seconds)

    def sent(self) -> None:
        """Count a call on its way to the control plane (until :meth:`answered`)."""
        with self._lock:
            self._in_flight += 1

    def answered(self, accepted: bool) -> None:
        """Count a call's answer: ``accepted`` when the control plane did not refuse it.

        How a refused caller tells a shared quota, which others get through or are being
        served, from a limit that does not clear.
        """
        with self._lock:
            self._in_flight -= 1
            if accepted:
                self._successes += 1

    @property
    def successes(self) -> int:
        """How many calls through this limiter the control plane accepted."""
        return self._successes

    @property
    def in_flight(self) -> int:
        """How many calls through this limiter are waiting for their answer."""
        return self._in_flight

    @property
    def pauses(self) -> int:
        """How many times the control plane asked for a pause (for logs and tests)."""
        return self._pauses

    def paused_for(self) -> float:
        """Seconds left of the current pause (0 when none)."""
        with self._lock:
            return max(0.0, self._paused_until - time.monotonic())


def _stagger(refused: int) -> float:
    """How long after a pause's end a call ``refused`` that many times goes.

    Seniors (:data:`SENIORITY` refusals or more) go first, :data:`SENIOR_STEP` apart per
    refusal; newcomers after all of them, :data:`PAUSE_STAGGER` apart per refusal they lack.
    """
    newcomer = PAUSE_STAGGER * max(0, SENIORITY - refused)
    senior = SENIOR_STEP * max(0, SENIOR_LEVELS - max(0, refused - SENIORITY))
    return newcomer + senior


_limiters: dict[str, RateLimiter] = {}
_limiters_lock = threading.Lock()


def limiter_for(key: str, rate: float | None = None, burst: int | None = None) -> RateLimiter:
    """The process's limiter of the control plane ``key`` (e.g. ``kubernetes:https://host``).

    Made on first use; a later call with another ``rate``/``burst`` reconfigures it (the
    newest options win), so every sandbox of one control plane shares one bucket.
    """
    with _limiters_lock:
        limiter = _limiters.get(key)
        if limiter is None:
            limiter = _limiters[key] = RateLimiter(rate, burst)
            return limiter
    if limiter.rate != rate or (burst is not None and limiter._burst != burst):
        limiter.configure(rate, burst)
    return limiter
