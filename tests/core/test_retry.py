from __future__ import annotations

import logging

import pytest

from sandbox_runtime.retry import RetryPolicy, call_with_retries

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
