"""The emulators' server-side quotas: parsing, fixed windows (AGS), token buckets (Kubernetes)."""

from __future__ import annotations

import time

import pytest

from sandbox_runtime_emulators._ratelimit import (
    Quota,
    ServerLimits,
    parse_latency,
    parse_rate_limit,
)


def test_specs_parse_and_bad_ones_say_what_they_should_look_like() -> None:
    assert parse_rate_limit("StartSandboxInstance=20") == ("StartSandboxInstance", Quota(20))
    assert parse_rate_limit("*=5:10") == ("*", Quota(5, 10))
    assert parse_rate_limit("POST /sandboxes=2.5") == ("POST /sandboxes", Quota(2.5))
    assert parse_latency("create=0.25") == ("create", 0.25)
    for bad in ("20", "=3", "Op=0", "Op=-1", "Op=x", "Op=3:0"):
        with pytest.raises(ValueError):
            parse_rate_limit(bad)
    for bad in ("0.3", "Op=-1", "Op=later"):
        with pytest.raises(ValueError, match="OP=SECONDS"):
            parse_latency(bad)


def test_nothing_configured_admits_everything_at_once() -> None:
    limits = ServerLimits()
    assert not limits
    assert all(limits.admit("create", "me") is None for _ in range(1000))
    assert limits.latency("create") == 0.0


def test_a_window_admits_its_quota_per_second_per_operation_and_caller() -> None:
    limits = ServerLimits({"Start": Quota(3)}, window=True)
    # Start at the beginning of a window so that the five calls fall in one.
    time.sleep(1 - time.monotonic() % 1 + 0.01)
    answers = [limits.admit("Start", "a") for _ in range(5)]
    assert answers[:3] == [None, None, None]
    assert all(wait is not None and 0 < wait <= 1 for wait in answers[3:])
    assert limits.admit("Start", "b") is None, "another caller has its own quota"
    assert limits.admit("Stop", "a") is None, "an operation without a quota is not limited"
    assert (limits.admitted, limits.refused) == (4, 2), "counted: operations with a quota"
    time.sleep(answers[3] or 0)
    assert limits.admit("Start", "a") is None, "the next window admits again"


def test_a_bucket_allows_its_burst_then_its_rate_and_star_covers_every_operation() -> None:
    limits = ServerLimits({"*": Quota(10, 2)})
    assert limits.admit("get", "me") is None
    assert limits.admit("create", "me") is None
    wait = limits.admit("delete", "me")
    assert wait is not None
    assert 0 < wait <= 0.1
    time.sleep(wait + 0.01)
    assert limits.admit("exec", "me") is None
    limits.set_quota("*", None)
    assert limits.admit("exec", "me") is None
