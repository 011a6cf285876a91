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

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_delay

from sandbox_runtime._core.ratelimit import RateLimiter

__all__ = ["RetryPolicy", "call_with_retries", "retry_after_seconds", "retry_listener"]

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
    """
    began = time.monotonic()

    # A refusal that says when to come back (a rate limit) while other calls to the same
    # control plane are being served, or have got through since this call began, is the
    # quota being shared, not a failure: under a quota, each of a burst of callers is
    # refused several times before its turn.  Such refusals are bounded by the policy's time
    # only; a refusal while nothing else gets through (a limit that does not clear) counts
    # as a failed attempt, as any other error does.
    shared_refusals: set[int] = set()
    seen = [limiter.successes if limiter is not None else 0]  # when this call began
    sent = [time.monotonic()]  # when the latest attempt left
    out_of_time = stop_after_delay(policy.max_delay)

    def failed_attempts(state: RetryCallState) -> int:
        """Attempts so far that count against ``policy.attempts`` (idempotent per attempt)."""
        error = state.outcome.exception() if state.outcome is not None else None
        if (
            error is not None
            and limiter is not None
            and retry_after is not None
            and retry_after(error) is not None
            and (limiter.successes > seen[0] or limiter.in_flight > 0)
        ):
            shared_refusals.add(state.attempt_number)
        return state.attempt_number - len(shared_refusals)

    def stop(state: RetryCallState) -> bool:
        return failed_attempts(state) >= policy.attempts or out_of_time(state)

    def wait(state: RetryCallState) -> float:
        # Backoff grows with failures, not with a shared quota's refusals: a caller refused
        # ten times in a busy second should not then sit out five while its turn comes.
        failures = max(1, failed_attempts(state))
        backoff = random.uniform(0, min(policy.max_wait, policy.initial_wait * 2**failures))
        error = state.outcome.exception() if state.outcome is not None else None
        asked = retry_after(error) if retry_after is not None and error is not None else None
        chosen = backoff
        if asked is not None and limiter is not None:
            # The limiter holds the next attempt until the pause ends, in order of seniority
            # (RateLimiter.acquire); sleeping through the pause here instead woke every
            # refused caller at its end at once, a lottery one call lost 89 times in a row.
            limiter.pause(asked, since=sent[0])
        elif asked is not None:
            chosen = max(backoff, asked)
        return max(0.0, min(chosen, policy.max_delay - (time.monotonic() - began)))

    def log_retry(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        wait = state.next_action.sleep if state.next_action is not None else 0.0
        listener = _listener.get()
        if listener is not None and error is not None:
            listener(error)
        logger.warning(
            "%s failed (attempt %d, %s: %s); retrying in %.2fs",
            description,
            state.attempt_number,
            type(error).__name__,
            error,
            wait,
        )

    retrying = Retrying(
        stop=stop,
        wait=wait,
        retry=retry_if_exception(is_retryable),
        before_sleep=log_retry,
        reraise=True,
    )
    if limiter is None:
        return retrying(operation)

    def limited() -> T:
        limiter.acquire(refused=len(shared_refusals))
        sent[0] = time.monotonic()
        limiter.sent()
        accepted = False
        try:
            result = operation()
            accepted = True
        finally:
            limiter.answered(accepted)
        return result

    return retrying(limited)
