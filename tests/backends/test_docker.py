"""Docker-specific behaviour beyond the conformance suite: labels, limits, lifetime, reaping,
retries and engine compatibility, all against the real engine."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox_runtime import (
    BackendUnavailableError,
    SandboxConfig,
    SandboxGoneError,
    SandboxRuntime,
    SandboxStartError,
)
from sandbox_runtime._core import ownership
from sandbox_runtime._core.config import DEFAULT_PIDS
from sandbox_runtime.backends.docker import _client as docker_backend
from sandbox_runtime.cli import main as cli_main
from tests.backends.fault_proxy import FaultProxy

pytestmark = pytest.mark.docker


@pytest.fixture
def engine(docker_image: str) -> Any:
    import docker

    return docker.APIClient(version="auto")


def _exists(engine: Any, container: str) -> bool:
    import docker

    try:
        engine.inspect_container(container)
    except docker.errors.NotFound:
        return False
    return True


def _wait_gone(engine: Any, container: str, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not _exists(engine, container):
            return True
        time.sleep(0.5)
    return False


def test_labels_resources_and_init(engine: Any, docker_image: str) -> None:
    config = SandboxConfig(
        backend="docker",
        image=docker_image,
        resources={"cpus": 0.5, "memory": "128m", "pids": 64},
        labels={"team": "rl"},
        run_id="run-42",
        lifetime=300,
    )
    with SandboxRuntime(config) as sandbox:
        info = engine.inspect_container(sandbox.id)
        labels = info["Config"]["Labels"]
        host = info["HostConfig"]
        assert labels[ownership.MANAGED] == "true"
        assert labels[ownership.OWNER_PID] == str(os.getpid())
        assert labels[ownership.RUN_ID] == "run-42"
        assert labels["team"] == "rl"
        assert int(labels[ownership.EXPIRES_AT]) - int(labels[ownership.CREATED_AT]) == 300
        assert host["NanoCpus"] == 500_000_000
        assert host["Memory"] == 128 * 1024**2
        assert host["PidsLimit"] == 64
        assert host["Init"] is True
        assert host["AutoRemove"] is True
        # The lifetime is the timer's (docs/leases.md): alone, or after the agent's starter
        # (agent "auto") and the agent's own directory; its end moves through its lease file.
        command, entrypoint = info["Config"]["Cmd"], info["Config"]["Entrypoint"][0]
        assert entrypoint == "/bin/sh"
        timer = command[command.index("sandbox-runtime-timer") :]
        assert timer[1] == "300"
        assert timer[2].startswith("/tmp/.sandbox-runtime-lease-")
        assert timer[3] == "0"  # no hard cap asked for
        if "sandbox-runtime" in command:  # the agent's starter
            assert command[command.index("sandbox-runtime") + 2].startswith("/.sandbox-runtime/")
        key = info["Config"]["Labels"]["sandbox-runtime.lease-key"]
        assert timer[2].endswith(key)
        # The memory limit is real: a 512 MiB allocation is killed (SIGKILL: 128 + 9).
        hog = sandbox.exec(["python3", "-c", "b = bytearray(512 * 1024 * 1024); print(len(b))"])
        assert hog.exit_code == 137
        # And so is the process limit.
        fork = sandbox.exec("for i in $(seq 100); do sleep 5 & done; wait", timeout=30)
        assert "fork: retry: Resource temporarily unavailable" in fork.stderr
        container = sandbox.id
    assert not _exists(engine, container)


def test_a_sandbox_has_a_process_limit_by_default(engine: Any, docker_image: str) -> None:
    """A fork bomb in a sandbox without a limit is the host's problem: 4096 unless told."""
    config = SandboxConfig(backend="docker", image=docker_image, lifetime=120)
    with SandboxRuntime(config) as sandbox:
        assert engine.inspect_container(sandbox.id)["HostConfig"]["PidsLimit"] == DEFAULT_PIDS
    unlimited = SandboxConfig(
        backend="docker", image=docker_image, lifetime=120, resources={"pids": None}
    )
    with SandboxRuntime(unlimited) as sandbox:
        assert engine.inspect_container(sandbox.id)["HostConfig"]["PidsLimit"] in (None, 0, -1)


def test_close_twice_and_exec_after_external_removal(engine: Any, docker_image: str) -> None:
    sandbox = SandboxRuntime(backend="docker", image=docker_image).start()
    engine.remove_container(sandbox.id, force=True)
    assert not sandbox.is_alive()
    with pytest.raises(SandboxGoneError):
        sandbox.exec("true")
    with pytest.raises(SandboxGoneError):
        sandbox.read_text("/etc/hostname")
    sandbox.close()
    sandbox.close()


def test_sandbox_ends_itself_at_its_lifetime(engine: Any, docker_image: str) -> None:
    sandbox = SandboxRuntime(backend="docker", image=docker_image, lifetime=3).start()
    container = sandbox.id
    assert sandbox.exec("echo alive").stdout == "alive\n"
    assert _wait_gone(engine, container, within=30), "container outlived its lifetime"
    assert not sandbox.is_alive()
    with pytest.raises(SandboxGoneError):
        sandbox.exec("true")
    sandbox.close()


def test_missing_image_is_a_start_error(docker_image: str) -> None:
    config = SandboxConfig(
        backend="docker", image="sandbox-runtime-test/does-not-exist:1", options={"pull": "never"}
    )
    with pytest.raises(SandboxStartError, match="does-not-exist"):
        SandboxRuntime(config).start()


def test_image_without_the_config_is_a_start_error() -> None:
    with pytest.raises(SandboxStartError, match="needs an image"):
        SandboxRuntime(backend="docker").start()


ABANDON = textwrap.dedent(
    """
    import sys, time
    from sandbox_runtime import SandboxRuntime
    backend, image, lifetime, base_dir = sys.argv[1:5]
    # isolation=none on local: under namespaces a background process ends with its command.
    options = {"base_dir": base_dir, "isolation": "none"} if backend == "local" else {}
    sandbox = SandboxRuntime(
        backend=backend, image=image or None, lifetime=float(lifetime), options=options
    ).start()
    sandbox.exec("nohup sleep 600 >/dev/null 2>&1 &")
    print(sandbox.id, flush=True)
    time.sleep(600)
    """
)


def _abandoned_sandbox(backend: str, image: str, lifetime: float, base_dir: str = "") -> str:
    """Open a sandbox in a child process, then kill -9 the child; return the sandbox id."""
    child = subprocess.Popen(
        [sys.executable, "-c", ABANDON, backend, image, str(lifetime), base_dir],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    sandbox_id = child.stdout.readline().strip()
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert sandbox_id
    return sandbox_id


def test_reap_removes_sandboxes_of_a_killed_client_and_nothing_else(
    engine: Any, docker_image: str, capsys: pytest.CaptureFixture[str]
) -> None:
    orphan = _abandoned_sandbox("docker", docker_image, lifetime=600)
    assert _exists(engine, orphan), "the sandbox must outlive its killed client until reaped"
    foreign = engine.create_container(
        docker_image, ["sleep", "600"], labels={"owner": "someone-else"}
    )["Id"]
    engine.start(foreign)
    remote = engine.create_container(
        docker_image,
        ["sleep", "600"],
        labels={
            **ownership.make_labels(lifetime=600, run_id=None, extra={}),
            ownership.OWNER_HOST: "elsewhere",
        },
    )["Id"]
    engine.start(remote)
    try:
        with SandboxRuntime(backend="docker", image=docker_image) as live:
            assert cli_main(["reap", "--backend", "docker", "--dry-run"]) == 0
            assert _exists(engine, orphan)
            assert cli_main(["reap", "--backend", "docker"]) == 0
            output = capsys.readouterr().out
            assert f"removed docker {orphan[:12]} " in output
            assert "owner process" in output
            assert _wait_gone(engine, orphan, within=10)
            assert _exists(engine, foreign), "reap touched a container it did not create"
            assert _exists(engine, remote), "reap removed a live sandbox owned on another host"
            assert live.exec("echo still-here").stdout == "still-here\n"
    finally:
        engine.remove_container(foreign, force=True)
        engine.remove_container(remote, force=True)


def test_abandoned_sandbox_is_gone_by_itself_after_its_lifetime(
    engine: Any, docker_image: str
) -> None:
    orphan = _abandoned_sandbox("docker", docker_image, lifetime=4)
    assert _wait_gone(engine, orphan, within=30), "abandoned sandbox outlived its lifetime"


# -- retries through a misbehaving connection to the real engine -------------------------------


@pytest.fixture
def proxy(tmp_path: Path, docker_image: str) -> Iterator[FaultProxy]:
    server = FaultProxy(tmp_path / "docker.sock")
    yield server
    server.close()
    docker_backend._clients.clear()


def _through(proxy: FaultProxy, docker_image: str) -> SandboxConfig:
    # A fixed API version skips the version handshake, so the create call is the first request.
    return SandboxConfig(
        backend="docker",
        image=docker_image,
        options={"docker_host": proxy.url, "api_version": "1.41"},
    )


@pytest.mark.parametrize("fault", ["drop", "503"])
def test_create_is_retried_after_transient_failures(
    proxy: FaultProxy, docker_image: str, fault: str
) -> None:
    proxy.faults = {0: fault, 1: fault}
    with SandboxRuntime(_through(proxy, docker_image)) as sandbox:
        assert sandbox.exec("echo ok").stdout == "ok\n"
    assert proxy.requests[0].startswith(b"POST /v1.41/containers/create")
    assert len(proxy.requests) == 2


def test_retried_create_that_had_succeeded_reuses_its_container(
    proxy: FaultProxy, docker_image: str, engine: Any
) -> None:
    proxy.faults = {0: "forward-then-drop"}
    with SandboxRuntime(_through(proxy, docker_image)) as sandbox:
        name = sandbox.backend._name  # type: ignore[attr-defined]
        same_name = engine.containers(all=True, filters={"name": name})
        assert len(same_name) == 1, "a retried create must not leave a second container"
        assert sandbox.exec("echo once").stdout == "once\n"


def test_unreachable_engine_is_backend_unavailable(tmp_path: Path, docker_image: str) -> None:
    config = SandboxConfig(
        backend="docker",
        image=docker_image,
        options={"docker_host": f"unix://{tmp_path}/nothing.sock", "api_version": "1.41"},
    )
    from sandbox_runtime.backends.docker import DockerBackend, DockerOptions

    availability = DockerBackend.availability(
        DockerOptions(docker_host=f"unix://{tmp_path}/nothing.sock")
    )
    assert not availability.ok
    with pytest.raises(BackendUnavailableError):
        SandboxRuntime(config).start()
    docker_backend._clients.clear()


def test_docker_host_environment_variable_selects_the_engine(
    proxy: FaultProxy, docker_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", proxy.url)
    docker_backend._clients.clear()
    with SandboxRuntime(backend="docker", image=docker_image) as sandbox:
        assert sandbox.exec("echo via-env").stdout == "via-env\n"
    assert proxy.connections > 0


def test_many_execs_do_not_leak_connections(docker_image: str) -> None:
    with SandboxRuntime(backend="docker", image=docker_image) as sandbox:
        sandbox.exec("true")
        before = len(os.listdir("/proc/self/fd"))
        for index in range(60):
            assert sandbox.exec(f"echo {index}").stdout == f"{index}\n"
        sandbox.exec("sleep 5", timeout=0.5)
        after = len(os.listdir("/proc/self/fd"))
    assert after - before < 10


@pytest.fixture(scope="module")
def image_without_bash(docker_image: str) -> Iterator[str]:
    """The test image with bash removed, so that the sh fallback is exercised."""
    import docker

    client = docker.from_env()
    tag = "sandbox-runtime-test/nobash:latest"
    container = client.containers.run(
        docker_image, ["rm", "-f", "/bin/bash", "/usr/bin/bash"], detach=True
    )
    container.wait()
    container.commit(repository="sandbox-runtime-test/nobash", tag="latest")
    container.remove()
    yield tag
    client.images.remove(tag, force=True)


def test_images_without_bash_fall_back_to_sh(image_without_bash: str) -> None:
    with SandboxRuntime(backend="docker", image=image_without_bash) as sandbox:
        assert sandbox.exec("command -v bash || echo no-bash").stdout == "no-bash\n"
        assert sandbox.exec(["printf", "%s", "a b"]).stdout == "a b"
        assert sandbox.exec("echo $((6 * 7))").stdout == "42\n"
        timed = sandbox.exec("(sleep 3; touch late) & sleep 60", timeout=1)
        assert timed.timed_out
        time.sleep(4)
        assert not sandbox.exists("late")


def test_timeout_kills_a_command_that_replaced_its_shell(docker_image: str) -> None:
    with SandboxRuntime(backend="docker", image=docker_image) as sandbox:
        result = sandbox.exec("exec sleep 60", timeout=1)
        assert result.timed_out
        # A daemon that left the process group is found by its inherited token, too.
        sandbox.exec("setsid sh -c 'sleep 2; touch escaped' & sleep 60", timeout=1)
        time.sleep(3)
        assert not sandbox.exists("escaped")
        assert "sleep 60" not in sandbox.exec("ps -eo args").stdout


def test_a_privileged_container_either_runs_or_says_why_not(docker_image: str) -> None:
    # Where the host withholds the capabilities (this one does), runc refuses the container
    # and auto-remove deletes it; a retry then met "No such container", hiding the reason.
    config = SandboxConfig(backend="docker", image=docker_image, options={"privileged": True})
    why_not = ""
    try:
        with SandboxRuntime(config) as sandbox:
            assert sandbox.exec("echo ok").stdout == "ok\n"
    except SandboxStartError as refused:
        why_not = str(refused)
    if why_not:
        assert "No such container" not in why_not
        assert "OCI runtime" in why_not
