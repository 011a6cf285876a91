"""SandboxPool on real engines: warm hand-out, refill, reuse on request, drain, reaping leaks."""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sandbox_runtime import (
    AsyncSandboxPool,
    SandboxClosedError,
    SandboxConfig,
    SandboxPool,
    SandboxStartError,
    list_sandboxes,
    load_backend,
)
from sandbox_runtime.backends.local import LocalBackend, LocalOptions
from tests.conftest import DOCKER_IMAGE, docker_problem, require


@pytest.fixture(params=["local", "docker"])
def config(request: pytest.FixtureRequest, tmp_path: Path) -> SandboxConfig:
    """A sandbox configuration per engine that runs here (docker skips without the engine)."""
    if request.param == "docker":
        require(docker_problem())
        return SandboxConfig(backend="docker", image=DOCKER_IMAGE, lifetime=600)
    return SandboxConfig(backend="local", options={"base_dir": str(tmp_path)}, lifetime=600)


def _local(tmp_path: Path, **fields: Any) -> SandboxConfig:
    return SandboxConfig(backend="local", options={"base_dir": str(tmp_path)}, **fields)


def _members(config: SandboxConfig, pool_id: str) -> set[str]:
    """Ids of the running sandboxes carrying the pool's label, as any client lists them."""
    return {
        info.sandbox_id
        for info in list_sandboxes(config.backend, options=config.options)
        if info.pool == pool_id
    }


def _eventually(predicate: Callable[[], bool], within: float = 60.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_pool_hands_out_started_sandboxes_and_refills(config: SandboxConfig) -> None:
    with SandboxPool(config, size=2) as pool:
        assert pool.wait_ready(timeout=120)
        assert pool.stats().ready == 2
        waits = []
        for round_ in range(3):
            began = time.perf_counter()
            with pool.acquire() as sandbox:
                waits.append(time.perf_counter() - began)
                assert sandbox.is_alive()
                assert sandbox.exec(f"echo {round_}").stdout == f"{round_}\n"
                sandbox.write_text("dirt.txt", "left by this rollout")
                used = sandbox.id
            assert not sandbox.is_alive(), "a leased sandbox is closed when its lease ends"
            with pytest.raises(SandboxClosedError):
                sandbox.exec("true")
            assert used not in _members(config, pool.id)
            assert pool.wait_ready(timeout=120)
            assert pool.stats().ready == 2, "the pool refills what was taken"
        stats = pool.stats()
        assert stats.started == 5
        assert stats.leased == 0
        assert stats.failed == 0
        # Warm hand-out is a queue pop, not a start (which takes 100s of ms).
        assert statistics.median(waits) < 0.05, waits


def test_close_drains_idle_sandboxes_and_waits_for_starts_in_flight(
    config: SandboxConfig,
) -> None:
    pool = SandboxPool(config, size=3).start()
    assert pool.wait_ready(timeout=120)
    lease = pool.acquire()  # a replacement start is now in flight
    members = _members(config, pool.id)
    assert lease.sandbox.id in members
    assert len(members) >= 3
    pool.close()
    assert _members(config, pool.id) == {lease.sandbox.id}, "close leaves only the leased one"
    assert lease.sandbox.exec("echo still-mine").stdout == "still-mine\n"
    lease.release(reuse=True)  # the pool is closed: released means closed
    assert _eventually(lambda: _members(config, pool.id) == set(), within=30)
    with pytest.raises(SandboxClosedError):
        pool.acquire()
    pool.close()


def test_reuse_only_when_asked(tmp_path: Path) -> None:
    with SandboxPool(_local(tmp_path), size=1) as pool:
        assert pool.wait_ready(timeout=60)
        with pool.acquire(reuse=True) as sandbox:
            sandbox.write_text("state.txt", "kept")
            first = sandbox.id
        # Borrowed, not replaced: the same sandbox comes back, with what it holds.
        assert pool.stats().started == 1
        assert pool.stats().reused == 1
        with pool.acquire() as again:
            assert again.id == first
            assert again.read_text("state.txt") == "kept"
        assert not again.is_alive()
        # A reuse lease ended by an exception is closed, and replaced.
        with pytest.raises(RuntimeError), pool.acquire(reuse=True) as broken:
            raise RuntimeError("rollout failed")
        assert not broken.is_alive()
        assert pool.wait_ready(timeout=60)
        assert pool.stats().ready == 1


def test_max_starts_bounds_what_the_pool_starts(tmp_path: Path) -> None:
    with SandboxPool(_local(tmp_path), size=2, max_starts=3) as pool:
        ids = []
        for _ in range(4):
            with pool.acquire() as sandbox:
                ids.append(sandbox.id)
        assert len(set(ids)) == 4
        # Three from the pool; the fourth was started by acquire itself.
        assert pool.stats().started == 3
        assert pool.stats().ready == 0
        assert pool.stats().starting == 0


def test_stale_sandboxes_are_replaced_not_handed_out(tmp_path: Path) -> None:
    with SandboxPool(_local(tmp_path), size=1, max_idle=0.3) as pool:
        assert pool.wait_ready(timeout=60)
        old = _members(pool.config, pool.id)
        time.sleep(0.6)
        with pool.acquire() as sandbox:
            assert sandbox.id not in old
        assert pool.stats().discarded == 1
        assert _eventually(lambda: not (old & _members(pool.config, pool.id)))


def test_failing_starts_surface_as_an_error_not_a_hang(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-template"
    with SandboxPool(_local(tmp_path, image=str(missing)), size=2) as pool:
        began = time.monotonic()
        with pytest.raises(SandboxStartError, match="failed in a row") as caught:
            pool.acquire(timeout=60)
        assert time.monotonic() - began < 30
        assert isinstance(caught.value.__cause__, SandboxStartError)
        assert pool.stats().failed >= 3
        assert pool.stats().started == 0


def test_a_bad_configuration_fails_when_the_pool_is_made() -> None:
    with pytest.raises(ValueError):
        SandboxPool(backend="local", size=0)
    with pytest.raises(ValueError, match="options"):
        SandboxPool(backend="local", size=1, options={"no_such_option": 1})


KILLED_POOL = textwrap.dedent(
    """
    import sys, time
    from sandbox_runtime import SandboxConfig, SandboxPool
    config = SandboxConfig.model_validate_json(sys.argv[1])
    pool = SandboxPool(config, size=2).start()
    assert pool.wait_ready(120)
    lease = pool.acquire()
    assert pool.wait_ready(120)
    print(pool.id, flush=True)
    time.sleep(600)
    """
)


def test_reap_finds_what_a_killed_pool_left(config: SandboxConfig) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_POOL, config.model_dump_json()],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    pool_id = child.stdout.readline().strip()
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert pool_id
    left = _members(config, pool_id)
    assert len(left) == 3, "two ready and one leased sandbox outlive the killed pool"
    backend_cls = load_backend(config.backend)
    options = backend_cls.options_model.model_validate(config.options)
    found = {item.sandbox_id: item.reason for item in backend_cls.reap(options, dry_run=True)}
    assert left <= set(found), found
    assert all("owner process" in found[sandbox_id] for sandbox_id in left)
    if config.backend == "local":
        reaped = LocalBackend.reap(LocalOptions.model_validate(config.options))
        assert {item.sandbox_id for item in reaped} == left
    else:
        # The engine is shared with other test runs: remove only this pool's, by id.
        from sandbox_runtime import SandboxRuntime

        for sandbox_id in left:
            SandboxRuntime.connect("docker", sandbox_id).close()
    assert _eventually(lambda: _members(config, pool_id) == set(), within=30)


def test_async_pool(tmp_path: Path) -> None:
    async def main() -> tuple[list[str], int]:
        async with AsyncSandboxPool(_local(tmp_path), size=2) as pool:
            assert await pool.wait_ready(timeout=60)

            async def rollout(number: int) -> str:
                async with pool.acquire() as sandbox:
                    return (await sandbox.exec(f"echo {number}")).stdout

            outputs = await asyncio.gather(*(rollout(n) for n in range(4)))
            return list(outputs), pool.stats().leased

    outputs, leased = asyncio.run(main())
    assert outputs == [f"{n}\n" for n in range(4)]
    assert leased == 0
