"""Command timeouts on one thread: each fires on time, and a command's start wakes nothing."""

from __future__ import annotations

import threading
import time

import pytest

from sandbox_runtime._envd.commands import _Deadlines


def test_an_earlier_deadline_added_later_still_fires_first() -> None:
    deadlines = _Deadlines()
    fired: list[tuple[str, float]] = []
    done = threading.Event()
    began = time.monotonic()

    def note(name: str) -> None:
        fired.append((name, time.monotonic() - began))
        if len(fired) == 2:
            done.set()

    deadlines.add(began + 0.6, lambda: note("late"))
    time.sleep(0.05)  # the thread now sleeps until the late one
    deadlines.add(began + 0.15, lambda: note("early"))
    assert done.wait(5)
    assert [name for name, _ in fired] == ["early", "late"]
    assert fired[0][1] < 0.5  # woken for it, not at the late one's time


def test_a_cancelled_deadline_never_fires() -> None:
    deadlines = _Deadlines()
    fired = threading.Event()
    deadlines.add(time.monotonic() + 0.1, fired.set).cancel()
    assert not fired.wait(0.4)


def test_alike_timeouts_do_not_wake_the_thread_and_ended_commands_do_not_pile_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run's commands have alike timeouts: adding one is no thread switch, and no leak."""
    deadlines = _Deadlines()
    first = deadlines.add(time.monotonic() + 600, lambda: None)
    time.sleep(0.05)  # the thread sleeps until the first
    notified = 0
    original = deadlines._wakeup.notify

    def counted(n: int = 1) -> None:
        nonlocal notified
        notified += 1
        original(n)

    monkeypatch.setattr(deadlines._wakeup, "notify", counted)
    first.cancel()
    for _ in range(1000):  # each command's deadline, cancelled when the command ends
        deadlines.add(time.monotonic() + 600, lambda: None).cancel()
    assert notified == 0
    assert len(deadlines._heap) <= 1  # ended commands are dropped as new ones come
