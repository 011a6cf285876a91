"""Retry policy for operations that are safe to repeat.

Only idempotent calls are retried (connection errors, 5xx on create-with-a-name and on
remove, rate limits), never a command: running ``pip install`` twice because a response was
lost is not what anyone asked for.  Backoff is jittered so that many rollouts hitting the
same daemon or cloud API do not retry in lockstep, and bounded in attempts and in time.  A
service that says when to come back (HTTP ``Retry-After``) is believed: the wait is at least
what it asked for, as long as the call's time bound allows it, and with a shared
:class:`~sandbox_runtime._core.ratelimit.RateLimiter` every other call to the same control plane
waits too.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

from sandbox_runtime._core.ratelimit import RateLimiter

__all__ = [
    "RetryPolicy",
    "backoff",
    "call_with_retries",
    "notify_retry",
    "retry_after_seconds",
    "retry_listener",
]

T = TypeVar("T")
logger = logging.getLogger("sandbox_runtime.retry")

_listener: ContextVar[Callable[[BaseException], None] | None] = ContextVar(
    "sandbox_runtime_retry_listener", default=None
)


@contextmanager
def retry_listener(callback: Callable[[BaseException], None]) -> Iterator[None]:
    """Call ``callback`` with the error of every retry made in this context (this thread).

    How a sandbox's accounting (:mod:`sandbox_runtime._core.usage`) learns of the retries its
    backend made, without the backend knowing about accounting.
    """
    token = _listener.set(callback)
    try:
        yield
    finally:
        _listener.reset(token)


class RetryPolicy:
    """Attempts, total time and backoff for one kind of operation."""

    __slots__ = ("attempts", "initial_wait", "max_delay", "max_wait")

    def __init__(
        self,
        attempts: int = 5,
        max_delay: float = 60.0,
        initial_wait: float = 0.2,
        max_wait: float = 5.0,
    ) -> None:
        self.attempts = attempts
        self.max_delay = max_delay
        self.initial_wait = initial_wait
        self.max_wait = max_wait


DEFAULT_POLICY = RetryPolicy()


def retry_after_seconds(value: str | None) -> float | None:
    """An HTTP ``Retry-After`` value (seconds or an HTTP date) as seconds from now."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def call_with_retries(
    operation: Callable[[], T],
    is_retryable: Callable[[BaseException], bool],
    *,
    description: str,
    policy: RetryPolicy = DEFAULT_POLICY,
    retry_after: Callable[[BaseException], float | None] | None = None,
    limiter: RateLimiter | None = None,
) -> T:
    """Call ``operation``; on a retryable error, wait with full jitter and try again.

    ``retry_after`` reads the wait a service asked for from its error (``Retry-After``); the
    jittered backoff is used when it says nothing, and the wait never runs past the policy's
    time bound.  The last error is re-raised unchanged once the attempts or the time run
    out, so callers translate it exactly as they would a first failure.

    ``limiter`` is the control plane's: every attempt waits for its turn there, and a wait
    the service asked for pauses the limiter, so concurrent callers hold off as well.

    A refusal that says when to come back (a rate limit) while other calls to the same
    control plane are being served, or have got through since this call began, is the quota
    being shared, not a failure: under a quota, each of a burst of callers is refused
    several times before its turn.  Such refusals are bounded by the policy's time only; a
    refusal while nothing else gets through (a limit that does not clear) counts as a failed
    attempt, as any other error does.
    """
    began = sent = time.monotonic()  # sent: when the latest attempt left
    seen = limiter.successes if limiter is not None else 0  # the plane's, when this began
    refusals = 0  # the shared quota's refusals so far, which are not failed attempts
    attempt = 0
    while True:
        attempt += 1
        try:
            if limiter is None:
                return operation()
            limiter.acquire(refused=refusals)
            sent = time.monotonic()
            return _answered(operation, limiter)
        except BaseException as error:  # what is retried is is_retryable's to say
            failed_at = time.monotonic()
            if not is_retryable(error):
                raise
            asked = retry_after(error) if retry_after is not None else None
            if asked is not None and limiter is not None and _shared(limiter, seen):
                refusals += 1
            failures = attempt - refusals
            # The limiter is paused even when this was the last attempt: the service asked
            # every caller of the plane to hold off, not only this one.
            delay = _delay(policy, failures, began, asked, limiter, sent)
            if failures >= policy.attempts or failed_at - began >= policy.max_delay:
                raise
            _announce(description, attempt, error, delay)
        time.sleep(delay)  # outside the handler: the next error is not chained to this one


def _answered(operation: Callable[[], T], limiter: RateLimiter) -> T:
    """``operation``, counted in flight at ``limiter`` until its answer comes back."""
    limiter.sent()
    accepted = False
    try:
        result = operation()
        accepted = True
    finally:
        limiter.answered(accepted)
    return result


def _shared(limiter: RateLimiter, seen: int) -> bool:
    """Whether other calls are being served, or got through since ``seen`` successes."""
    return limiter.successes > seen or limiter.in_flight > 0


def _delay(
    policy: RetryPolicy,
    failures: int,
    began: float,
    asked: float | None,
    limiter: RateLimiter | None,
    sent: float,
) -> float:
    """The wait before the next attempt; pauses ``limiter`` when the service ``asked`` one.

    Backoff grows with failures, not with a shared quota's refusals: a caller refused ten
    times in a busy second should not then sit out five while its turn comes.
    """
    chosen = backoff(policy, failures)
    if asked is not None and limiter is not None:
        # The limiter holds the next attempt until the pause ends, in order of seniority
        # (RateLimiter.acquire); sleeping through the pause here instead woke every refused
        # caller at its end at once, a lottery one call lost 89 times in a row.
        limiter.pause(asked, since=sent)
    elif asked is not None:
        chosen = max(chosen, asked)
    return max(0.0, min(chosen, policy.max_delay - (time.monotonic() - began)))


def backoff(policy: RetryPolicy, failures: int) -> float:
    """Full-jitter exponential backoff after ``failures`` failed attempts.

    A random wait below ``initial_wait * 2**failures``, and never above ``max_wait``.
    """
    return random.uniform(0, min(policy.max_wait, policy.initial_wait * 2 ** max(1, failures)))


def notify_retry(error: BaseException) -> None:
    """Count a retry made outside :func:`call_with_retries` (a re-sent command start).

    The sandbox's accounting hears of it as of any other retry, so a fault cured by
    sending again is never invisible in the figures.
    """
    listener = _listener.get()
    if listener is not None:
        listener(error)


def _announce(description: str, attempt: int, error: BaseException, delay: float) -> None:
    """Tell this context's usage listener (:func:`retry_listener`) and the log of a retry."""
    listener = _listener.get()
    if listener is not None:
        listener(error)
    logger.warning(
        "%s failed (attempt %d, %s: %s); retrying in %.2fs",
        description,
        attempt,
        type(error).__name__,
        error,
        delay,
    )
