"""The docker backend's agent path: when the in-sandbox agent serves a sandbox, when the native
path does, and what happens when the agent goes away, against the real engine."""

from __future__ import annotations

import concurrent.futures
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from sandbox_runtime import (
    BackendError,
    SandboxConfig,
    SandboxRuntime,
    SandboxStartError,
    list_sandboxes,
)
from sandbox_runtime._envd.agent import AGENT_PORT
from sandbox_runtime.backend_kit.agent import agent_archive, agent_directory, launch_command

pytestmark = pytest.mark.docker

NO_PYTHON = "sandbox-runtime-test/no-python:latest"
# The process that started a command: the agent for the agent path; nothing the container can
# see (pid 0) for a docker exec, which runc starts from outside.
PARENT = "cat /proc/$PPID/comm 2>/dev/null || echo outside"


@pytest.fixture
def engine(docker_image: str) -> Any:
    import docker

    return docker.APIClient(version="auto")


@pytest.fixture(scope="module")
def no_python_image(docker_image: str) -> Iterator[str]:
    """The test image without python3 (a committed container, so no registry is needed)."""
    import docker

    client = docker.from_env(timeout=60)
    try:
        container = client.containers.run(
            docker_image,
            ["sh", "-c", "rm -f /usr/bin/python3* /usr/local/bin/python3*"],
            detach=True,
        )
        container.wait(timeout=60)
        container.commit(*NO_PYTHON.split(":"))
        container.remove(force=True)
        yield NO_PYTHON
    finally:
        client.close()


def _config(image: str, agent: str, **options: Any) -> SandboxConfig:
    labels = {"probe": "no-python"} if image == NO_PYTHON else {}
    return SandboxConfig(
        backend="docker",
        image=image,
        lifetime=300,
        labels=labels,
        options={"agent": agent, **options},
    )


def _parent(sandbox: SandboxRuntime) -> str:
    return sandbox.exec(PARENT).stdout.strip()


def test_on_serves_every_call_through_the_agent(docker_image: str) -> None:
    with SandboxRuntime(_config(docker_image, "on")) as sandbox:  # start waits for the agent
        assert _parent(sandbox) == "sandbox-agent"
        sandbox.write_text("/tmp/x/note.txt", "fast\n")
        assert sandbox.read_text("/tmp/x/note.txt") == "fast\n"
        # The agent is out of the way of the sandbox's own commands: not named python, not in
        # their session, its token in no command line.
        killers = "pkill python3; pkill -f 'python3 '; kill 0"
        assert sandbox.exec(killers).exit_code != 0
        assert _parent(sandbox) == "sandbox-agent"
        listing = sandbox.exec("cat /proc/[0-9]*/cmdline | tr '\\0' ' '").stdout
        assert "sandbox-agent" in listing
        assert "agent.token" not in sandbox.exec("ls /.sandbox-runtime/*/").stdout


def test_auto_moves_to_the_agent_once_it_answers(docker_image: str) -> None:
    with SandboxRuntime(_config(docker_image, "auto")) as sandbox:
        deadline = time.monotonic() + 30
        parents = {_parent(sandbox)}
        while "sandbox-agent" not in parents and time.monotonic() < deadline:
            time.sleep(0.05)
            parents.add(_parent(sandbox))
        assert "sandbox-agent" in parents


def test_auto_waits_for_the_agent_of_an_image_that_has_shown_one(docker_image: str) -> None:
    """Once an agent of the image answered, a new sandbox's first command waits for its own
    agent rather than taking a docker exec while it boots."""
    with SandboxRuntime(_config(docker_image, "on")):
        pass  # its agent answered: the image runs one
    with SandboxRuntime(_config(docker_image, "auto")) as sandbox:
        assert _parent(sandbox) == "sandbox-agent"


def test_off_never_starts_an_agent(docker_image: str) -> None:
    with SandboxRuntime(_config(docker_image, "off")) as sandbox:
        time.sleep(0.5)
        assert _parent(sandbox) != "sandbox-agent"
        assert "sandbox-agent" not in sandbox.exec("ps -eo comm").stdout


def test_an_image_without_python3_uses_the_native_path(no_python_image: str) -> None:
    with SandboxRuntime(_config(no_python_image, "auto", agent_wait=1.0)) as sandbox:
        for _ in range(3):
            result = sandbox.exec("echo native; exit 3")
            assert (result.exit_code, result.stdout) == (3, "native\n")
            time.sleep(0.5)
        assert _parent(sandbox) != "sandbox-agent"
    # "on" makes the agent part of the start: without one there is no sandbox, and nothing
    # is left behind.
    sandbox = SandboxRuntime(_config(no_python_image, "on", agent_wait=1.0))
    with pytest.raises(SandboxStartError, match="agent is required"):
        sandbox.start()
    assert not [s for s in list_sandboxes("docker") if s.labels.get("probe") == "no-python"]


def test_a_network_without_an_address_uses_the_native_path(docker_image: str) -> None:
    with SandboxRuntime(_config(docker_image, "auto", network="none")) as sandbox:
        assert sandbox.exec("echo ok").stdout == "ok\n"
        assert "sandbox-agent" not in sandbox.exec("ps -eo comm").stdout


def test_a_killed_agent_hands_over_to_the_native_path(engine: Any, docker_image: str) -> None:
    with SandboxRuntime(_config(docker_image, "auto")) as sandbox:
        deadline = time.monotonic() + 30
        while _parent(sandbox) != "sandbox-agent":
            assert time.monotonic() < deadline, "the agent never answered"
            time.sleep(0.05)
        # Killed from outside (as an OOM kill would), between two commands.
        exec_id = engine.exec_create(sandbox.id, ["pkill", "-9", "-f", "sandbox-agent"])
        engine.exec_start(exec_id)
        # As between an agent's turns: the kill's connection close has reached the client.  (A
        # command sent on a kept-alive connection the same instant may reach a dying agent;
        # its fate is then unknown and it raises, as the next test shows.)
        time.sleep(1)
        result = sandbox.exec("echo still here")
        assert (result.exit_code, result.stdout) == (0, "still here\n")
        # The agent is restarted meanwhile (tests/reliability/test_agent_faults.py): either
        # path serves the next calls, and none fails.
        assert _parent(sandbox) in ("sandbox-agent", "outside")


def test_a_command_that_kills_the_agent_is_an_error_never_a_rerun(docker_image: str) -> None:
    """The agent dies under a running command: the command's fate is unknown, so it raises;
    it is not sent again, and the next commands take the native path."""
    with SandboxRuntime(_config(docker_image, "auto")) as sandbox:
        deadline = time.monotonic() + 30
        while _parent(sandbox) != "sandbox-agent":
            assert time.monotonic() < deadline, "the agent never answered"
            time.sleep(0.05)
        with pytest.raises(BackendError):
            sandbox.exec("echo once >> /tmp/runs; pkill -9 -f sandbox-agent; sleep 1")
        assert sandbox.exec("cat /tmp/runs").stdout == "once\n"


def _answers(address: str, timeout: float) -> int | None:
    """The agent's ``/health`` status at ``address``, or None once ``timeout`` passes."""
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return httpx.get(f"http://{address}:{AGENT_PORT}/health", timeout=2).status_code
        except httpx.HTTPError:
            time.sleep(0.05)
    return None


@pytest.mark.parametrize("token", ["a-token", ""])
def test_the_starter_listens_before_the_files_and_serves_once_they_come(
    engine: Any, docker_image: str, token: str
) -> None:
    """The container's starter runs python3 at once, listening and importing while the
    agent's files upload; once they are there it serves, named ``sandbox-agent``.  Files
    without a token start nothing: the port closes."""
    directory = agent_directory()
    container = engine.create_container(
        docker_image,
        command=launch_command(60, directory),
        host_config=engine.create_host_config(init=True, auto_remove=True),
    )["Id"]
    try:
        engine.start(container)
        address = engine.inspect_container(container)["NetworkSettings"]["IPAddress"]
        deadline = time.monotonic() + 30
        while True:  # listening before any file of the agent is there
            with socket.socket() as probe:
                probe.settimeout(1)
                if probe.connect_ex((address, AGENT_PORT)) == 0:
                    break
            assert time.monotonic() < deadline, "the starter never listened"
            time.sleep(0.05)
        listing = engine.exec_start(engine.exec_create(container, ["ls", "-A", directory]))
        assert listing.split() == [b"sandbox-agent"]
        engine.put_archive(container, "/", agent_archive(token, directory))
        if token:
            assert _answers(address, 30) in (200, 204)
            names = engine.exec_start(engine.exec_create(container, ["ps", "-eo", "comm"]))
            assert b"sandbox-agent" in names.split()
            gone = engine.exec_create(container, ["test", "!", "-e", f"{directory}/agent.token"])
            engine.exec_start(gone)
            assert engine.exec_inspect(gone)["ExitCode"] == 0  # the token file is removed
        else:
            assert _answers(address, 3) is None
    finally:
        engine.remove_container(container, force=True)


def test_the_agent_answers_only_its_token(docker_image: str) -> None:
    """Another sandbox on the same network reaches the agent's port, but not its commands."""
    with (
        SandboxRuntime(_config(docker_image, "on")) as target,
        SandboxRuntime(_config(docker_image, "off")) as neighbour,
    ):
        address = target.exec("hostname -i").stdout.split()[0]
        script = (
            "import json, sys, urllib.request, urllib.error\n"
            "base = f'http://{sys.argv[1]}:49983'\n"
            "def post(path, body):\n"
            "    request = urllib.request.Request(base + path, data=json.dumps(body).encode(),"
            " headers={'Content-Type': 'application/json'})\n"
            "    try:\n"
            "        return urllib.request.urlopen(request, timeout=5).status\n"
            "    except urllib.error.HTTPError as exc:\n"
            "        return exc.code\n"
            "print(post('/init', {'accessToken': 'mine'}), post('/process.Process/List', {}))\n"
        )
        neighbour.write_text("/tmp/probe.py", script)
        assert neighbour.exec(["python3", "/tmp/probe.py", address]).stdout.split() == [
            "401",
            "401",
        ]
        assert target.exec("echo still mine").stdout == "still mine\n"


def test_five_hundred_commands_at_once_all_run(docker_image: str) -> None:
    """500 background commands, then 500 short ``exec`` calls released together, on one agent.

    Each running command holds a connection of its own; the agent's listen backlog must hold
    a burst of them (asyncio's default of 100 reset 66 of 500 here), and its open files (a
    connection and three pipes per command) must fit its limit.  See bench_agent_load.py.
    """
    with SandboxRuntime(_config(docker_image, "on")) as sandbox:
        handles = [sandbox.exec_background(f"sleep 2; echo {i}") for i in range(500)]
        outputs = [handle.wait(timeout=120).stdout for handle in handles]
        assert outputs == [f"{i}\n" for i in range(500)]
        gate = threading.Barrier(500)

        def one(i: int) -> str:
            gate.wait()
            return sandbox.exec(f"echo {i}", timeout=120).stdout

        with concurrent.futures.ThreadPoolExecutor(max_workers=500) as pool:
            assert list(pool.map(one, range(500))) == [f"{i}\n" for i in range(500)]
        assert _parent(sandbox) == "sandbox-agent"  # all of it through the agent
