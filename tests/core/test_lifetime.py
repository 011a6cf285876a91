"""The pieces of leases that need no backend: the runtime's clock and its cap, the timer
that ends container sandboxes (run here by the host's ``/bin/sh``), the ownership labels'
moved expiry, and a lease's renewals (docs/leases.md)."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from sandbox_runtime._core import ownership
from sandbox_runtime._core.keepalive import KeepAlive
from sandbox_runtime._core.lifetime import (
    LifetimeClock,
    lease_file,
    new_lease_key,
    timer_argv,
    write_end_script,
)
from sandbox_runtime.errors import LifetimeCapError


def test_the_clock_refuses_past_the_earliest_cap() -> None:
    clock = LifetimeClock.starting_now(lifetime=10, max_lifetime=100, service_cap=None)
    assert clock.cap_at == pytest.approx(clock.started_at + 100)
    assert clock.end_for(extend_by=50) == pytest.approx(clock.ends_at + 50)
    with pytest.raises(LifetimeCapError) as caught:
        clock.end_for(extend_by=200)
    assert caught.value.cap_at == clock.cap_at
    service = LifetimeClock.starting_now(10, 100, service_cap=time.time() + 20)
    assert service.cap_at == pytest.approx(time.time() + 20, abs=1)
    assert LifetimeClock.starting_now(10, None, None).cap_at is None


def test_the_cause_is_expired_once_the_end_passed() -> None:
    clock = LifetimeClock.starting_now(lifetime=100, max_lifetime=None, service_cap=None)
    assert clock.cause_of_gone("killed") == "killed"
    assert clock.cause_of_gone("nonsense") == "unknown"
    clock.moved_to(time.time() - 5)
    assert clock.cause_of_gone("killed") == "expired"


def test_a_moved_expiry_is_what_reap_reads() -> None:
    labels = ownership.make_labels(lifetime=1, run_id=None, extra={})
    later = time.time() + 600
    assert ownership.why_reapable(labels, now=time.time() + 5) == "expired"
    moved = ownership.with_expiry(labels, later)
    assert ownership.why_reapable(moved, now=time.time() + 5) is None
    assert ownership.why_reapable(labels, now=time.time() + 5, expires_at=later) is None


def _run_timer(lifetime: float, cap_at: float | None, content: str | None) -> float:
    key = new_lease_key()
    path = lease_file(key)
    try:
        if content is not None:
            with open(path, "w", encoding="ascii") as handle:
                handle.write(content)
        began = time.monotonic()
        subprocess.run(timer_argv(lifetime, key, cap_at), check=True, timeout=30)
        return time.monotonic() - began
    finally:
        for leftover in (path, path + ".new"):
            if os.path.exists(leftover):
                os.unlink(leftover)


def test_the_timer_ends_at_its_file_clamped_to_the_cap() -> None:
    assert 1.0 <= _run_timer(1, None, None) < 4  # no file: the lifetime
    assert _run_timer(60, time.time() + 2, str(int(time.time()) + 600)) < 5  # the cap wins
    assert _run_timer(1, None, "garbage; rm -rf /") < 4  # not a number: ignored


def test_the_end_written_is_the_one_read() -> None:
    key = new_lease_key()
    end = time.time() + 2
    try:
        subprocess.run(write_end_script(end, key), check=True)
        began = time.monotonic()
        subprocess.run(timer_argv(60, key, None), check=True, timeout=30)
        assert 1 <= time.monotonic() - began < 5
    finally:
        os.unlink(lease_file(key))


def test_a_lease_renews_ahead_and_stops() -> None:
    ends = [time.time() + 1.0]
    renewals: list[float] = []

    def renew(seconds: float) -> float:
        renewals.append(seconds)
        ends.append(time.time() + seconds)
        return ends[-1]

    keeper = KeepAlive(
        renew=renew, remaining=lambda: ends[-1] - time.time(), lease=2, until=None, name="t"
    )
    time.sleep(2.5)
    keeper.stop()
    assert not keeper.active
    assert keeper.renewals == len(renewals) >= 2
    assert all(seconds == 2 for seconds in renewals)
    count = len(renewals)
    time.sleep(1.5)
    assert len(renewals) == count, "renewed after stop()"


def test_a_lease_with_a_floor_never_lands_past_its_cap() -> None:
    """A backend that sets at least ``floor`` seconds (AGS: 30) once moved the end past the
    cap with every renewal asked for less: lease 30, cap 70, the instance ended at 98 s.

    Here scaled down ten times (lease 3, floor 3, cap 7): the service below sets the floor
    for less, as AGS does, and the end it really set may never pass the cap.
    """
    floor, lease, cap = 3.0, 3.0, 7.0
    start = time.time()
    ends = [start + lease]

    def renew(seconds: float) -> float:
        ends.append(time.time() + max(seconds, floor))  # what the service really sets
        return ends[-1]

    keeper = KeepAlive(
        renew=renew,
        remaining=lambda: ends[-1] - time.time(),
        lease=lease,
        until=start + cap,
        name="t",
        floor=floor,
    )
    time.sleep(cap + 1.0)
    keeper.stop()
    assert len(ends) >= 2, "never renewed"
    assert max(ends) <= start + cap + 0.5  # the renewal loop's own tick is the only slack
    assert max(ends) >= start + cap - 1.5  # and it did reach (about) the cap
