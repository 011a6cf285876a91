"""How long an ``auto`` call waits for a sandbox's agent before it takes the native path."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from sandbox_runtime._envd.agent import AgentLink, _learn, _patience


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    """Holds the agent's upload, so its sandbox stays "agent starting" until the test opens it."""
    event = threading.Event()
    yield event
    event.set()


def _held_by(gate: threading.Event) -> Callable[[], None]:
    def upload() -> None:
        gate.wait(30)

    return upload


def _link(image: str, wait: float) -> AgentLink:
    # No address: once the upload is let through, the agent is given up at once.
    return AgentLink(
        mode="auto",
        token="t",
        address=lambda: None,
        is_alive=lambda: True,
        name=f"test {image}",
        wait=wait,
        image=image,
    )


def _timed(link: AgentLink) -> float:
    began = time.monotonic()
    assert link.commands() is None
    return time.monotonic() - began


def test_an_image_never_seen_goes_native_at_once(gate: threading.Event) -> None:
    link = _link("test|unseen", wait=30.0)
    link.start(_held_by(gate))
    assert _timed(link) < 1.0  # not the 30 s a wait for the agent could take


def test_an_image_whose_agent_answered_waits_once_then_goes_native(
    gate: threading.Event,
) -> None:
    _learn("test|seen", 0.2)
    link = _link("test|seen", wait=1.0)  # patience: the wait caps it
    link.start(_held_by(gate))
    assert 0.9 <= _timed(link) < 5.0
    assert _timed(link) < 0.5  # the wait ran out once: native until the agent answers
    # The agent then never comes (here: no address): the image is no longer expected to run one.
    gate.set()
    deadline = time.monotonic() + 10
    while _patience("test|seen", 30.0) is not None:
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_closing_the_sandbox_ends_a_wait(gate: threading.Event) -> None:
    _learn("test|closing", 5.0)
    link = _link("test|closing", wait=30.0)
    link.start(_held_by(gate))
    threading.Timer(0.2, link.close).start()
    assert _timed(link) < 5.0


def test_patience_follows_the_slowest_recent_answer() -> None:
    assert _patience("test|fresh", 30.0) is None
    _learn("test|fresh", 0.1)
    assert _patience("test|fresh", 30.0) == 5.0  # the floor
    _learn("test|fresh", 4.0)  # a burst of starts: agents answer late
    assert _patience("test|fresh", 30.0) == 16.0
    assert _patience("test|fresh", 10.0) == 10.0  # never past agent_wait
    for _ in range(5):  # quiet again: the burst's delay halves away
        _learn("test|fresh", 0.1)
    assert _patience("test|fresh", 30.0) == 5.0


def test_agent_can_run_reads_the_state_after_the_name() -> None:
    from sandbox_runtime._envd.agent import agent_can_run

    assert agent_can_run("12 (sandbox-agent) S 1 12 12 0")
    assert agent_can_run("12 (a) T) R 1 12")  # a name holding ") T)"
    assert not agent_can_run("12 (sandbox-agent) T 1 12 12 0")
    assert not agent_can_run("12 (sandbox-agent) Z 1 12 12 0")
    assert agent_can_run("")  # unreadable: says nothing, the wait decides
