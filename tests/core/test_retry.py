from __future__ import annotations

import logging

import pytest

from sandbox_runtime._core.retry import RetryPolicy, call_with_retries

FAST = RetryPolicy(attempts=4, max_delay=5, initial_wait=0.001, max_wait=0.01)


def test_retries_retryable_errors_then_succeeds(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError("reset")
        return "ok"

    with caplog.at_level(logging.WARNING, logger="sandbox_runtime.retry"):
        assert (
            call_with_retries(
                flaky, lambda e: isinstance(e, ConnectionError), description="op", policy=FAST
            )
            == "ok"
        )
    assert len(calls) == 3
    assert "op failed (attempt 1, ConnectionError: reset)" in caplog.text


def test_non_retryable_error_is_raised_at_once() -> None:
    calls: list[int] = []

    def broken() -> None:
        calls.append(1)
        raise ValueError("bad input")

    with pytest.raises(ValueError, match="bad input"):
        call_with_retries(
            broken, lambda e: isinstance(e, ConnectionError), description="op", policy=FAST
        )
    assert len(calls) == 1


def test_attempts_are_bounded_and_last_error_is_reraised() -> None:
    calls: list[int] = []

    def always_down() -> None:
        calls.append(1)
        raise ConnectionError(f"down {len(calls)}")

    with pytest.raises(ConnectionError, match="down 4"):
        call_with_retries(always_down, lambda e: True, description="op", policy=FAST)
    assert len(calls) == 4


class _Refused(Exception):
    """A rate-limit refusal that asks for a short pause."""


def test_refusals_while_others_get_through_do_not_use_up_attempts() -> None:
    """A shared quota: others' calls succeed between this call's refusals."""
    from sandbox_runtime._core.ratelimit import RateLimiter

    limiter = RateLimiter()
    calls: list[int] = []

    def crowded() -> str:
        calls.append(1)
        if len(calls) <= 6:  # more refusals than FAST's 4 attempts
            limiter.sent()  # another caller got the slot meanwhile
            limiter.answered(accepted=True)
            raise _Refused
        return "ok"

    result = call_with_retries(
        crowded,
        lambda e: isinstance(e, _Refused),
        description="op",
        policy=FAST,
        retry_after=lambda e: 0.01 if isinstance(e, _Refused) else None,
        limiter=limiter,
    )
    assert result == "ok"
    assert len(calls) == 7
    assert limiter.pauses == 6


def test_refusals_while_another_call_is_being_served_do_not_use_up_attempts() -> None:
    """The winners of a window are still being served when the refusals come back."""
    from sandbox_runtime._core.ratelimit import RateLimiter

    limiter = RateLimiter()
    limiter.sent()  # another caller's call, admitted and not answered yet
    calls: list[int] = []

    def crowded() -> str:
        calls.append(1)
        if len(calls) <= 6:
            raise _Refused
        return "ok"

    result = call_with_retries(
        crowded,
        lambda e: isinstance(e, _Refused),
        description="op",
        policy=FAST,
        retry_after=lambda e: 0.01,
        limiter=limiter,
    )
    assert result == "ok"
    assert (len(calls), limiter.in_flight, limiter.successes) == (7, 1, 1)


def test_refusals_while_nothing_gets_through_end_after_the_attempts() -> None:
    from sandbox_runtime._core.ratelimit import RateLimiter

    limiter = RateLimiter()
    calls: list[int] = []

    def refused() -> None:
        calls.append(1)
        raise _Refused

    with pytest.raises(_Refused):
        call_with_retries(
            refused,
            lambda e: isinstance(e, _Refused),
            description="op",
            policy=FAST,
            retry_after=lambda e: 0.01,
            limiter=limiter,
        )
    assert len(calls) == FAST.attempts
