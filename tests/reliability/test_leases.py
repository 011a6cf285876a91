"""Leases (docs/leases.md) on the engines that run here, local and docker: ``extend`` and
``set_lifetime`` move what really ends the sandbox (the local watchdog, the container's
timer) and the expiry ``reap`` reads; a hard cap is refused before anything moves; a lease
keeps a sandbox past its first lifetime and stops with its owner, after which the sandbox
ends by itself and ``reap`` takes it; a sandbox that expires anyway is ``SandboxGoneError``
with cause ``expired``; and an episode running twice the lifetime is graded, none lost."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest

from sandbox_runtime import (
    AsyncSandboxRuntime,
    LifetimeCapError,
    SandboxGoneError,
    SandboxRuntime,
)
from sandbox_runtime._core.registry import load_backend
from sandbox_runtime.backends.local import LocalBackend
from sandbox_runtime.swe import Task, read_rows
from sandbox_runtime.swe.agents.base import Agent, AgentResult, Budget
from sandbox_runtime.swe.agents.simple import OracleAgent
from sandbox_runtime.swe.dataset import load_rows
from sandbox_runtime.swe.images import build_sample_image
from sandbox_runtime.swe.runner import Runner, RunOptions
from tests.conftest import DOCKER_IMAGE, docker_problem, require
from tests.swe.conftest import task_named

BACKENDS = ["local", "docker", "docker-agent"]


def _fields(backend: str) -> dict[str, Any]:
    if backend == "local":
        return {"backend": "local"}
    require(docker_problem())
    agent = "on" if backend == "docker-agent" else "off"
    return {"backend": "docker", "image": DOCKER_IMAGE, "options": {"agent": agent}}


def _ended_within(sandbox: SandboxRuntime, seconds: float) -> float:
    """Seconds until the sandbox ended by itself; fails past ``seconds``."""
    began = time.monotonic()
    while sandbox.is_alive():
        assert time.monotonic() - began < seconds, "the sandbox outlived its end"
        time.sleep(0.2)
    return time.monotonic() - began


def _reaped_ids(sandbox: SandboxRuntime) -> set[str]:
    backend_cls = load_backend(sandbox.config.backend)
    return {found.sandbox_id for found in backend_cls.reap(sandbox.backend.options, dry_run=True)}


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_extended_sandbox_outlives_its_lifetime_and_reap_leaves_it(backend: str) -> None:
    with SandboxRuntime(lifetime=3, **_fields(backend)) as sandbox:
        first = sandbox.expires_at
        assert first is not None
        end = sandbox.extend(5)
        assert end == pytest.approx(first + 5)
        assert sandbox.expires_at == end
        time.sleep(max(0.0, first + 1.5 - time.time()))  # past the first lifetime
        assert sandbox.exec("echo still").stdout == "still\n"
        assert sandbox.id not in _reaped_ids(sandbox), "reap took an extended sandbox"
        _ended_within(sandbox, 10)
        assert time.time() >= end - 1, "the sandbox ended before its extended end"
        with pytest.raises(SandboxGoneError) as caught:
            sandbox.exec("true")
        assert caught.value.cause == "expired"


def test_a_paused_sandbox_is_judged_by_its_lease_like_a_running_one() -> None:
    """Once the lease was read by an exec, which a paused container refuses: reap then took a
    paused sandbox with a live lease and a living owner as expired."""
    with SandboxRuntime(lifetime=3, **_fields("docker")) as sandbox:
        first = sandbox.expires_at
        assert first is not None
        sandbox.extend(60)
        sandbox.pause()
        try:
            time.sleep(max(0.0, first + 1.5 - time.time()))  # past the label's end
            assert sandbox.id not in _reaped_ids(sandbox), "reap took a paused, leased sandbox"
        finally:
            sandbox.resume()
        assert sandbox.exec("echo back").stdout == "back\n"


@pytest.mark.parametrize("backend", ["local", "docker"])
def test_set_lifetime_shortens_the_end(backend: str) -> None:
    with SandboxRuntime(lifetime=600, **_fields(backend)) as sandbox:
        sandbox.set_lifetime(2)
        _ended_within(sandbox, 12)  # a shorter end is read within 5 s


def test_the_hard_cap_is_refused_and_nothing_moves() -> None:
    with SandboxRuntime(backend="local", lifetime=5, max_lifetime=20) as sandbox:
        end = sandbox.expires_at
        with pytest.raises(LifetimeCapError) as caught:
            sandbox.extend(30)
        assert caught.value.cap_at == sandbox.cap_at
        assert sandbox.expires_at == end
        sandbox.extend(10)  # within the cap
        assert sandbox.expires_at == pytest.approx((end or 0) + 10)


def test_a_lease_keeps_the_sandbox_until_its_cap_then_it_ends() -> None:
    with SandboxRuntime(backend="local", lifetime=2) as sandbox:
        keeper = sandbox.keep_alive(lease=2, cap=6)
        time.sleep(4.5)  # twice the lifetime
        assert sandbox.is_alive()
        assert keeper.renewals >= 2
        _ended_within(sandbox, 8)
        assert not keeper.active


def test_closing_the_sandbox_stops_its_lease() -> None:
    sandbox = SandboxRuntime(backend="local", lifetime=5).start()
    keeper = sandbox.keep_alive(lease=4)
    sandbox.close()
    assert not keeper.active


def test_async_twins_move_the_end() -> None:
    async def scenario() -> None:
        async with AsyncSandboxRuntime(backend="local", lifetime=3) as sandbox:
            end = await sandbox.extend(4)
            assert sandbox.expires_at == end
            await sandbox.set_lifetime(60)
            keeper = await sandbox.keep_alive(lease=60)
            assert keeper.active

    asyncio.run(scenario())


LEASEHOLDER = textwrap.dedent(
    """
    import sys, time
    from sandbox_runtime import SandboxRuntime
    fields = {"backend": sys.argv[1], "lifetime": 2}
    if sys.argv[1] == "docker":
        fields.update(image=sys.argv[2], options={"agent": "off"})
    sandbox = SandboxRuntime(**fields).start()
    sandbox.keep_alive(lease=3)
    print(sandbox.id, flush=True)
    time.sleep(600)
    """
)


@pytest.mark.parametrize("backend", ["local", "docker"])
def test_a_killed_leaseholder_leaves_nothing(backend: str) -> None:
    """kill -9 the owner: reap finds the sandbox at once, and left alone it ends by itself."""
    fields = _fields(backend)
    child = subprocess.Popen(
        [sys.executable, "-c", LEASEHOLDER, fields["backend"], DOCKER_IMAGE],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    sandbox_id = child.stdout.readline().strip()
    assert sandbox_id, "the child did not start a sandbox"
    time.sleep(3)  # the lease renewed past the first lifetime
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    backend_cls = load_backend(fields["backend"])
    options = backend_cls.coerce_options(None)
    found = {r.sandbox_id: r.reason for r in backend_cls.reap(options, dry_run=True)}
    match = [reason for key, reason in found.items() if key.startswith(sandbox_id[:12])]
    assert match, f"reap does not see the killed owner's sandbox {sandbox_id}"
    assert "owner process" in match[0] or match[0] == "expired"

    # Renewals stopped with the owner: the sandbox ends within its last lease, unreaped.
    def listed() -> bool:
        return any(
            info.sandbox_id.startswith(sandbox_id[:12])
            for info in backend_cls.list_sandboxes(options)
        )

    deadline = time.monotonic() + 12
    while listed():
        assert time.monotonic() < deadline, "the killed owner's sandbox did not end by itself"
        time.sleep(0.3)
    backend_cls.reap(options)  # what an ended sandbox left (a stopped container), if anything
    assert not listed()


@pytest.fixture(scope="module")
def bundled_tasks() -> list[Task]:
    result = read_rows(load_rows("bundled"))
    assert not result.errors
    return result.tasks


class SlowOracle(Agent):
    """Works for ``seconds`` (twice the sandbox's lifetime), then applies the gold patch."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def run(self, task: Task, sandbox: SandboxRuntime, budget: Budget) -> AgentResult:
        deadline = time.monotonic() + self.seconds
        while time.monotonic() < deadline:
            sandbox.exec("true")  # a step
            time.sleep(0.5)
        return OracleAgent().run(task, sandbox, budget)


@pytest.mark.parametrize("backend", ["local", "docker"])
def test_episodes_running_twice_the_lifetime_are_graded_none_lost(
    backend: str, bundled_tasks: list[Task]
) -> None:
    if backend == "docker":
        require(docker_problem())
        build_sample_image("pricing", base=DOCKER_IMAGE)
    task = task_named(bundled_tasks, "pricing", "r2e")  # graded in the agent's sandbox
    options = RunOptions(backend=backend, lifetime=4, test_timeout=60, jobs=2)
    outcomes = Runner([task, task], lambda: SlowOracle(8), options).run()
    assert [outcome.reward for outcome in outcomes] == [1.0, 1.0], [o.reason for o in outcomes]
    assert all(outcome.timings["agent"] >= 8 for outcome in outcomes)


@pytest.mark.parametrize("backend", ["local", "docker"])
def test_a_sandbox_removed_from_outside_is_gone_with_cause_killed(backend: str) -> None:
    with SandboxRuntime(lifetime=600, **_fields(backend)) as sandbox:
        if backend == "docker":
            subprocess.run(["docker", "rm", "-f", sandbox.id], check=True, capture_output=True)
        else:  # its directory removed behind the client's back, as another reaper would
            local = sandbox.backend
            assert isinstance(local, LocalBackend)
            shutil.rmtree(local.root.parent)
        with pytest.raises(SandboxGoneError) as caught:
            sandbox.exec("true")
        assert caught.value.cause == "killed"
