"""Prefetcher on real engines: ahead of the schedule, live hand-outs, nothing for nobody."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from sandbox_runtime import SandboxConfig, SandboxRuntime, list_sandboxes
from sandbox_runtime._core.prefetch import Prefetcher, PrefetchSlot
from tests.conftest import DOCKER_IMAGE, docker_problem, require


@pytest.fixture(params=["local", "docker"])
def config(request: pytest.FixtureRequest, tmp_path: Path) -> SandboxConfig:
    """A configuration per engine that runs here (docker skips without the engine)."""
    run_id = f"prefetch-{request.node.name[-20:]}".replace("[", "-").replace("]", "")
    if request.param == "docker":
        require(docker_problem())
        return SandboxConfig(backend="docker", image=DOCKER_IMAGE, lifetime=600, run_id=run_id)
    return SandboxConfig(
        backend="local", options={"base_dir": str(tmp_path)}, lifetime=600, run_id=run_id
    )


def _slots(config: SandboxConfig, keys: list[str]) -> list[PrefetchSlot]:
    """One slot per key, each key its own configuration (a label tells them apart)."""
    return [
        PrefetchSlot(key, config.model_copy(update={"labels": {"prefetch-key": key}}))
        for key in keys
    ]


def _running(config: SandboxConfig) -> list[str]:
    """This test's sandboxes still running, as any client lists them."""
    assert config.run_id is not None
    return [
        info.sandbox_id
        for info in list_sandboxes(config.backend, options=config.options)
        if info.run_id == config.run_id
    ]


class _CountingStarter:
    """Starts sandboxes for real, slowly, and records the most starts running at once."""

    def __init__(self, delay: float = 0.0, fail_first: int = 0) -> None:
        self.delay = delay
        self.fail_first = fail_first
        self.calls = 0
        self.now = 0
        self.peak = 0
        self.started: list[SandboxRuntime] = []
        self._lock = threading.Lock()

    def __call__(self, config: SandboxConfig) -> SandboxRuntime:
        with self._lock:
            self.calls += 1
            failing = self.calls <= self.fail_first
            self.now += 1
            self.peak = max(self.peak, self.now)
        try:
            time.sleep(self.delay)
            if failing:
                raise RuntimeError("the engine refused this start")
            runtime = SandboxRuntime(config).start()
            with self._lock:
                self.started.append(runtime)
            return runtime
        finally:
            with self._lock:
                self.now -= 1


def _wait_for(predicate: Any, within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_completed_schedule_hands_out_live_sandboxes_and_leaves_none(
    config: SandboxConfig,
) -> None:
    keys = ["a", "a", "b", "b", "c", "c"]  # three tasks, GRPO group of two
    starter = _CountingStarter()
    with Prefetcher(_slots(config, keys), ahead=2, max_in_flight=2, start=starter) as prefetcher:
        _wait_for(lambda: prefetcher.stats().ready == 2)
        assert prefetcher.stats().started == 2, "never more than `ahead` started ahead"
        for key in keys:
            sandbox = prefetcher.take(key)
            assert sandbox.is_alive()
            assert sandbox.config.labels["prefetch-key"] == key
            assert sandbox.exec("echo ok").stdout.strip() == "ok"
            sandbox.close()
        stats = prefetcher.stats()
    assert prefetcher.close() == 0
    assert stats.started == stats.handed_out == 6
    assert stats.discarded == 0
    assert stats.replaced == 0
    assert _running(config) == []


def test_a_killed_prestarted_sandbox_is_replaced(config: SandboxConfig) -> None:
    starter = _CountingStarter()
    with Prefetcher(_slots(config, ["a", "b"]), ahead=2, start=starter) as prefetcher:
        _wait_for(lambda: prefetcher.stats().ready == 2)
        victim = next(box for box in starter.started if box.config.labels["prefetch-key"] == "a")
        SandboxRuntime.connect(config.backend, victim.id, options=config.options).close()
        sandbox = prefetcher.take("a")
        assert sandbox.id != victim.id
        assert sandbox.is_alive()
        sandbox.close()
        prefetcher.take("b").close()
        stats = prefetcher.stats()
    assert stats.replaced == 1
    assert stats.handed_out == 2
    assert stats.discarded == 0
    assert _running(config) == []


def test_a_schedule_cut_short_is_closed_and_counted(config: SandboxConfig) -> None:
    prefetcher = Prefetcher(_slots(config, ["a", "b", "c", "d"]), ahead=3)
    _wait_for(lambda: prefetcher.stats().ready == 3)
    prefetcher.take("a").close()
    _wait_for(lambda: prefetcher.stats().ready == 3)
    assert prefetcher.close() == 3
    stats = prefetcher.stats()
    assert stats.started == 4
    assert stats.handed_out == 1
    assert stats.discarded == 3
    assert _running(config) == []


def test_starts_in_flight_stay_bounded(tmp_path: Path) -> None:
    config = SandboxConfig(backend="local", options={"base_dir": str(tmp_path)}, run_id="bound")
    starter = _CountingStarter(delay=0.2)
    keys = [f"t{i}" for i in range(8)]
    with Prefetcher(_slots(config, keys), ahead=6, max_in_flight=2, start=starter) as prefetcher:
        for key in keys:
            prefetcher.take(key).close()
        stats = prefetcher.stats()
    assert starter.peak <= 2 + 1, "two background starts, at most one consumer's own"
    assert stats.peak_in_flight == 2
    assert stats.started == 8
    assert stats.discarded == 0


def test_a_failed_start_goes_to_its_consumer_and_nothing_is_started_twice(tmp_path: Path) -> None:
    config = SandboxConfig(backend="local", options={"base_dir": str(tmp_path)}, run_id="fail")
    starter = _CountingStarter(fail_first=1)
    with Prefetcher(_slots(config, ["a", "b"]), ahead=2, max_in_flight=1, start=starter) as pf:
        _wait_for(lambda: pf.stats().failed == 1 and pf.stats().ready == 1)
        pf.take("a").close()  # started here, after the background start of it failed
        pf.take("b").close()
        stats = pf.stats()
    assert stats.failed == 1
    assert stats.started_on_spot == 1
    assert stats.started == 2
    assert starter.calls == 3
    assert _running(config) == []


def test_unscheduled_takes_and_async_take(tmp_path: Path) -> None:
    config = SandboxConfig(backend="local", options={"base_dir": str(tmp_path)}, run_id="spot")
    with Prefetcher(ahead=2) as prefetcher:
        with pytest.raises(Exception, match="nothing is scheduled"):
            prefetcher.take("x")
        prefetcher.take("x", config).close()
        prefetcher.feed(_slots(config, ["y"]))
        asyncio.run(prefetcher.take_async("y")).close()
        stats = prefetcher.stats()
    assert stats.started == 2
    assert stats.started_on_spot == 1
    assert stats.handed_out == 2
    assert _running(config) == []


def test_one_listing_answers_a_batch_of_liveness_checks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sandbox_runtime._core import prefetch

    config = SandboxConfig(backend="local", options={"base_dir": str(tmp_path)}, run_id="list")
    listings: list[str] = []
    real = list_sandboxes

    def counted(backend: str, **kwargs: Any) -> Any:
        listings.append(backend)
        return real(backend, **kwargs)

    monkeypatch.setattr(prefetch, "list_sandboxes", counted)
    keys = [f"t{i}" for i in range(6)]
    with Prefetcher(_slots(config, keys), ahead=6, liveness_ttl=30) as prefetcher:
        _wait_for(lambda: prefetcher.stats().ready == 6)
        taken = [prefetcher.take(key) for key in keys]
        assert all(sandbox.is_alive() for sandbox in taken)
        for sandbox in taken:
            sandbox.close()
    assert listings == ["local"], "six takes, one listing"


def test_images_beyond_the_started_ones_go_to_the_backend_nearest_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sandbox_runtime.backends.local import LocalBackend

    asked: list[list[str]] = []

    def record(images: Any, options: Any = None) -> None:
        asked.append(list(images))

    monkeypatch.setattr(LocalBackend, "prefetch_images", staticmethod(record))
    base = SandboxConfig(backend="local", options={"base_dir": str(tmp_path)}, run_id="img")
    templates = []
    for index in range(4):
        template = tmp_path / f"image-{index}"
        template.mkdir()
        templates.append(str(template))
    slots = [
        PrefetchSlot(f"t{i}", base.model_copy(update={"image": image}))
        for i, image in enumerate(templates)
    ]
    with Prefetcher(slots, ahead=1, max_in_flight=1) as prefetcher:
        _wait_for(lambda: bool(asked))
        for index in range(4):
            prefetcher.take(f"t{index}").close()
    assert asked[0] == templates[1:], "the three not started yet, nearest first"
    assert sorted(image for batch in asked for image in batch) == templates[1:], "each once"


_KILLED_OWNER = """
import sys, time
from sandbox_runtime import SandboxConfig
from sandbox_runtime._core.prefetch import Prefetcher, PrefetchSlot
config = SandboxConfig.model_validate_json(sys.argv[1])
slots = [PrefetchSlot(f"k{i}", config) for i in range(6)]
prefetcher = Prefetcher(slots, ahead=3)
held = prefetcher.take("k0")
while prefetcher.stats().ready < 3:
    time.sleep(0.05)
print("holding", flush=True)
time.sleep(600)
"""


def test_reap_finds_what_a_killed_prefetching_owner_left(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys

    from sandbox_runtime import load_backend
    from sandbox_runtime.backends.local import LocalOptions

    config = SandboxConfig(
        backend="local", options={"base_dir": str(tmp_path)}, lifetime=600, run_id="killed"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", _KILLED_OWNER, config.model_dump_json()],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "holding"
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    left = set(_running(config))
    assert len(left) == 4, "one taken and three parked outlive the killed owner"
    reaped = load_backend("local").reap(LocalOptions.model_validate(config.options))
    assert {item.sandbox_id for item in reaped} >= left
    assert _running(config) == []
