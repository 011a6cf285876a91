"""Accounting: what a sandbox used, checked against counts the test makes itself."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from sandbox_runtime import SandboxGoneError, SandboxRuntime, SandboxUsage
from sandbox_runtime._core.retry import RetryPolicy, call_with_retries
from sandbox_runtime._core.usage import UsageMeter, host_size
from tests.conftest import docker_problem, require


@pytest.fixture(params=["local", "docker"])
def sandbox(request: pytest.FixtureRequest, tmp_path: Path) -> SandboxRuntime:
    if request.param == "docker":
        require(docker_problem())
        from tests.conftest import DOCKER_IMAGE

        return SandboxRuntime(backend="docker", image=DOCKER_IMAGE, workdir="/work")
    return SandboxRuntime(
        backend="local", workdir="/work", options={"base_dir": str(tmp_path / "sbx")}
    )


def test_the_figures_are_the_calls_the_test_made(sandbox: SandboxRuntime, tmp_path: Path) -> None:
    assert sandbox.usage == SandboxUsage()
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "a.txt").write_bytes(b"x" * 300)
    (tree / "sub" / "b.bin").write_bytes(bytes(range(256)) * 4)
    with sandbox:
        sandbox.exec("printf hello")  # 5 bytes down
        sandbox.exec("cat", stdin=b"abc")  # 3 up, 3 down
        timed_out = sandbox.exec("sleep 5", timeout=0.5)
        assert timed_out.timed_out
        sandbox.write_bytes("data.bin", b"\1" * 1000)
        assert len(sandbox.read_bytes("data.bin")) == 1000
        sandbox.upload(tree, "tree")
        sandbox.download("tree", tmp_path / "back")
        before_close = sandbox.usage
        time.sleep(0.2)
    usage = sandbox.usage
    tree_bytes = 300 + 1024
    assert host_size(tmp_path / "back") == tree_bytes
    assert usage.sandboxes == 1
    assert usage.commands == 3
    assert usage.command_timeouts == 1
    assert usage.command_seconds >= 0.5
    assert usage.bytes_up == 3 + 1000 + tree_bytes
    assert usage.bytes_down == 5 + 3 + 1000 + tree_bytes
    assert usage.start_latency > 0
    assert usage.sandbox_seconds >= before_close.sandbox_seconds + 0.2
    assert usage.sandbox_seconds >= usage.start_latency + usage.command_seconds
    assert usage.retries == {}
    assert usage.faults == {}
    time.sleep(0.05)
    assert sandbox.usage == usage  # closed: the lifetime no longer grows
    assert usage.to_dict()["bytes_up"] == usage.bytes_up
    assert usage.cost(0.001) == pytest.approx(usage.sandbox_seconds * 0.001)
    assert usage.cost(None) is None


def test_retries_and_faults_are_counted_by_kind() -> None:
    meter = UsageMeter()
    failures = [ConnectionResetError("reset"), TimeoutError("slow")]

    def flaky() -> str:
        if failures:
            raise failures.pop(0)
        return "ok"

    policy = RetryPolicy(attempts=5, initial_wait=0.001, max_wait=0.002)
    with meter.call():
        result = call_with_retries(
            flaky, lambda exc: isinstance(exc, OSError), description="flaky", policy=policy
        )
    assert result == "ok"
    # Outside a meter's call, retries are nobody's.
    failures.append(ConnectionResetError("elsewhere"))
    call_with_retries(
        flaky, lambda exc: isinstance(exc, OSError), description="flaky", policy=policy
    )
    with pytest.raises(SandboxGoneError), meter.call():
        raise SandboxGoneError("died")
    with pytest.raises(FileNotFoundError), meter.call():
        raise FileNotFoundError("an answer, not a fault")
    usage = meter.snapshot()
    assert usage.retries == {"ConnectionResetError": 1, "TimeoutError": 1}
    assert usage.faults == {"SandboxGoneError": 1}
    assert usage.sandboxes == 0  # never started


def test_usages_add_up_and_phases_subtract() -> None:
    one = SandboxUsage(sandboxes=1, commands=2, bytes_up=10, retries={"A": 1}, faults={"F": 1})
    two = SandboxUsage(sandboxes=1, commands=3, bytes_down=7, retries={"A": 2, "B": 1})
    total = SandboxUsage.total([one, two])
    assert total == SandboxUsage(
        sandboxes=2,
        commands=5,
        bytes_up=10,
        bytes_down=7,
        retries={"A": 3, "B": 1},
        faults={"F": 1},
    )
    phase = total.since(one)
    assert (phase.commands, phase.bytes_down, dict(phase.retries)) == (3, 7, {"A": 2, "B": 1})
    assert phase.sandboxes == 0
