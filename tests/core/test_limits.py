"""Concurrent starts are bounded per backend and engine; the rest wait, none fails."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from sandbox_runtime import SandboxRuntime
from sandbox_runtime._core import limits
from sandbox_runtime.backends.local import LocalBackend


@pytest.fixture
def slow_local_starts(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Local starts that take 0.3 s and record how many run at once (the real backend)."""
    running = 0
    peaks: list[int] = []
    lock = threading.Lock()
    real_start = LocalBackend.start

    def start(self: LocalBackend) -> None:
        nonlocal running
        with lock:
            running += 1
            peaks.append(running)
        try:
            time.sleep(0.3)
            real_start(self)
        finally:
            with lock:
                running -= 1

    monkeypatch.setattr(LocalBackend, "start", start)
    yield peaks
    limits.set_start_limit("local", None)


def _start_many(count: int, base: Path) -> list[str]:
    def one(_: int) -> str:
        sandbox = SandboxRuntime(backend="local", options={"base_dir": str(base)})
        with sandbox:
            return sandbox.exec("echo up").stdout

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(one, range(count)))


def test_set_start_limit_bounds_concurrent_starts(
    slow_local_starts: list[int], tmp_path: Path
) -> None:
    limits.set_start_limit("local", 3)
    assert limits.start_limit(LocalBackend) == 3
    assert _start_many(9, tmp_path) == ["up\n"] * 9
    assert max(slow_local_starts) == 3


def test_without_a_bound_starts_run_together(slow_local_starts: list[int], tmp_path: Path) -> None:
    limits.set_start_limit("local", None)
    assert limits.start_limit(LocalBackend) is None
    assert _start_many(6, tmp_path) == ["up\n"] * 6
    assert max(slow_local_starts) > 3


def test_docker_bounds_its_starts_by_default_per_engine() -> None:
    from sandbox_runtime.backends.docker import DockerBackend, DockerOptions

    assert limits.start_limit(DockerBackend) == DockerBackend.max_concurrent_starts == 32
    one = DockerBackend.engine_key(DockerOptions(docker_host="unix:///a.sock"))
    other = DockerBackend.engine_key(DockerOptions(docker_host="tcp://b:2375"))
    assert one != other


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError):
        limits.set_start_limit("docker", 0)
