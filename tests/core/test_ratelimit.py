"""Client-side rate limits: a token bucket per control plane, paused by the server's answers."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from sandbox_runtime._core.ratelimit import MAX_PAUSE, RateLimiter, limiter_for
from sandbox_runtime._core.retry import RetryPolicy, call_with_retries

FAST = RetryPolicy(attempts=4, max_delay=10, initial_wait=0.001, max_wait=0.01)


def test_the_bucket_lets_a_burst_through_then_spaces_calls() -> None:
    limiter = RateLimiter(rate=20, burst=5)
    began = time.monotonic()
    for _ in range(5):
        limiter.acquire()
    assert time.monotonic() - began < 0.1, "a burst passes at once"
    for _ in range(6):
        limiter.acquire()
    assert time.monotonic() - began >= 0.25, "then 20 per second"


def test_concurrent_callers_share_the_rate() -> None:
    limiter = RateLimiter(rate=50, burst=1)
    began = time.monotonic()
    threads = [
        threading.Thread(target=lambda: [limiter.acquire() for _ in range(5)]) for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # 20 calls at 50 per second: about 0.38 s whatever the number of threads.
    assert 0.3 <= time.monotonic() - began < 2.0


def test_a_pause_holds_every_caller_and_is_bounded() -> None:
    limiter = RateLimiter()
    assert limiter.acquire() == 0.0, "without a rate, only pauses apply"
    limiter.pause(0.3)
    limiter.pause(0.1)  # a shorter pause does not cut the longer one
    assert limiter.pauses == 2
    began = time.monotonic()
    waited: list[float] = []
    threads = [threading.Thread(target=lambda: waited.append(limiter.acquire())) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert time.monotonic() - began >= 0.25
    assert len(waited) == 3
    assert min(waited) >= 0.2
    limiter.pause(10 * MAX_PAUSE)
    assert limiter.paused_for() <= MAX_PAUSE


class Throttled(Exception):
    def __init__(self, retry_after: float) -> None:
        super().__init__(f"429, retry after {retry_after}s")
        self.retry_after = retry_after


def _create(operation: Callable[[], str], limiter: RateLimiter) -> str:
    """``operation`` with retries on :class:`Throttled`, waiting what it asks for."""
    return call_with_retries(
        operation,
        lambda e: isinstance(e, Throttled),
        description="create",
        policy=FAST,
        retry_after=lambda e: e.retry_after if isinstance(e, Throttled) else None,
        limiter=limiter,
    )


def test_a_retry_after_pauses_the_other_callers_of_the_control_plane() -> None:
    limiter = RateLimiter()
    refused = threading.Event()
    answers: list[str] = []

    def refused_once() -> str:
        if not refused.is_set():
            refused.set()
            raise Throttled(0.5)
        return "created"

    def other_call() -> str:
        refused.wait()
        began = time.monotonic()
        call_with_retries(lambda: "listed", lambda e: False, description="list", limiter=limiter)
        answers.append(f"other waited {time.monotonic() - began:.1f}")
        return "listed"

    other = threading.Thread(target=other_call)
    other.start()
    result = _create(refused_once, limiter)
    other.join()
    assert result == "created"
    assert limiter.pauses == 1
    assert answers
    assert float(answers[0].split()[-1]) >= 0.3, answers


def test_limiter_for_shares_one_limiter_per_key_and_takes_new_options() -> None:
    one = limiter_for("test:plane-a", 5, 10)
    assert limiter_for("test:plane-a", 5, 10) is one
    assert limiter_for("test:plane-b") is not one
    assert limiter_for("test:plane-a", 7).rate == 7
    with pytest.raises(ValueError):
        RateLimiter(rate=0)
    with pytest.raises(ValueError):
        RateLimiter(rate=1, burst=0)


def test_a_pause_ends_for_the_most_refused_calls_first() -> None:
    from sandbox_runtime._core.ratelimit import PAUSE_STAGGER, SENIOR_LEVELS, SENIOR_STEP, SENIORITY

    limiter = RateLimiter()
    limiter.pause(0.2)
    most = SENIORITY + SENIOR_LEVELS
    counts = (0, 2, SENIORITY, SENIORITY + 3, SENIORITY + 10, most, most + 30)
    waits = dict.fromkeys(counts, 0.0)
    for refused in waits:
        paused = limiter.paused_for()
        waited = limiter.acquire(refused=refused)
        waits[refused] = waited - paused
        limiter.pause(0.2)
    # Strictly in order of refusals, up to the last level; past it, at the pause's end.
    assert waits[most + 30] < 0.03
    assert waits[most] < 0.03
    seniors = [waits[SENIORITY + 10], waits[SENIORITY + 3], waits[SENIORITY]]
    assert seniors == sorted(seniors)
    assert waits[SENIORITY] >= SENIOR_STEP * SENIOR_LEVELS - 0.01
    assert waits[SENIORITY + 3] <= SENIOR_STEP * (SENIOR_LEVELS - 3) + 0.03
    # Newcomers after every senior.
    assert waits[2] >= waits[SENIORITY] + PAUSE_STAGGER * (SENIORITY - 2) - 0.01
    assert waits[0] >= waits[SENIORITY] + PAUSE_STAGGER * SENIORITY - 0.01
    assert limiter.acquire(refused=0) > 0, "a pause is still on"


def test_one_burst_refused_together_shares_one_pause() -> None:
    limiter = RateLimiter()
    sent = time.monotonic()
    limiter.pause(0.5, since=sent + 0.1)  # a later call of the burst answered first
    limiter.pause(0.5, since=sent)  # the first refused call: its pause is the burst's
    limiter.pause(0.5, since=sent + 0.2)  # later calls of the burst do not extend it
    assert limiter.paused_for() <= 0.5 - (time.monotonic() - sent) + 0.01
    time.sleep(limiter.paused_for())
    limiter.pause(0.5, since=time.monotonic())  # a call sent after the pause: a new one
    assert limiter.paused_for() > 0.4


def test_a_refused_call_waits_out_the_pause_in_the_limiter_in_its_turn() -> None:
    """The retry does not sleep through the pause itself: it would wake at the pause's end
    with every other refused caller at once, outside the order of seniority."""
    from sandbox_runtime._core.ratelimit import _stagger

    limiter = RateLimiter()
    sends: list[float] = []

    def refused_once() -> str:
        sends.append(time.monotonic())
        if len(sends) == 1:
            raise Throttled(0.5)
        return "created"

    _create(refused_once, limiter)
    # Nothing else got through meanwhile: a failed attempt, so a newcomer's turn.
    assert sends[1] - sends[0] >= 0.5 + _stagger(0) - 0.02
