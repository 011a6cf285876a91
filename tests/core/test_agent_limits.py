"""The agent (our envd, run from its zip as in a sandbox) under a low open-file limit, and how
it takes its token: no container needed, the same process a sandbox runs."""

from __future__ import annotations

import concurrent.futures
import resource
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox_runtime._envd.agent import _agent_zip
from sandbox_runtime._envd.client import EnvdClient, EnvdUnauthorized
from tests.conftest import require

# Each running command holds four of the agent's descriptors: 256 would allow about 60.
SOFT_LIMIT = 256
COMMANDS = 200


def _low_soft_limit() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (SOFT_LIMIT, hard))


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], EnvdClient, str, Path]]:
    """The agent started as its start script starts it, with a soft open-file limit of 256."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 4 * COMMANDS + 100:
        require(f"the hard open-file limit here ({hard}) is below what the test needs")
    (tmp_path / "agent.zip").write_bytes(_agent_zip())
    token = secrets.token_urlsafe(24)
    token_file = tmp_path / "agent.token"
    token_file.write_text(token)
    token_file.chmod(0o600)
    port_file = tmp_path / "port"
    argv = [sys.executable, "-E", "-s", str(tmp_path / "agent.zip"), "--token-file"]
    argv += [str(token_file), "--port", "0", "--port-file", str(port_file), "--exec-like"]
    process = subprocess.Popen(argv, preexec_fn=_low_soft_limit, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists():
            assert process.poll() is None, "the agent exited"
            assert time.monotonic() < deadline, "the agent never listened"
            time.sleep(0.02)
        url = f"http://127.0.0.1:{port_file.read_text().strip()}"
        # As the agent link makes it: starts on the plain-HTTP pool.
        client = EnvdClient(
            url, sandbox_id="agent", token=token, request_timeout=60, plain_hot_path=True
        )
        yield process, client, token, token_file
        client.close()
    finally:
        process.terminate()
        process.wait(timeout=30)


def _output(client: EnvdClient, script: str) -> str:
    events = client.start(["/bin/sh", "-c", script], envs={}, server_timeout=60)
    return b"".join(data for kind, data in events if kind == "stdout").decode()


def test_the_agent_lifts_its_own_open_file_limit_not_its_commands(
    agent: tuple[subprocess.Popen[bytes], EnvdClient, str, Path],
) -> None:
    process, client, _, _ = agent
    limits = Path(f"/proc/{process.pid}/limits").read_text()
    soft, hard = next(line for line in limits.splitlines() if "open files" in line).split()[3:5]
    assert soft == hard  # its own soft limit lifted to the hard one
    # A command starts with the limit the agent was given, as under docker exec.
    assert _output(client, "ulimit -S -n") == f"{SOFT_LIMIT}\n"
    # A shell's script gets the limit in front of it, in the same shell (no second one), and
    # keeps its own arguments; any other program gets it through a /bin/sh around it.
    events = client.start(
        ["/bin/sh", "-c", 'echo "$0 $1"; ulimit -S -n; cat /proc/$$/cmdline', "zero", "one"],
        envs={},
        server_timeout=60,
    )
    lines = b"".join(data for kind, data in events if kind == "stdout").split(b"\n")
    assert lines[:2] == [b"zero one", str(SOFT_LIMIT).encode()]
    shell, flag, script = lines[2].split(b"\0")[:3]
    assert (shell, flag) == (b"/bin/sh", b"-c")
    assert script.startswith(b"ulimit -S -n")  # one shell, its script prefixed
    events = client.start(["/usr/bin/env", "sh", "-c", "ulimit -S -n"], envs={}, server_timeout=60)
    output = b"".join(data for kind, data in events if kind == "stdout")
    assert output == f"{SOFT_LIMIT}\n".encode()

    def one(i: int) -> str:
        return _output(client, f"sleep 1; echo {i}")

    with concurrent.futures.ThreadPoolExecutor(max_workers=COMMANDS) as pool:
        outputs = list(pool.map(one, range(COMMANDS)))
    assert outputs == [f"{i}\n" for i in range(COMMANDS)]


def test_the_token_leaves_its_file_and_no_environment_holds_it(
    agent: tuple[subprocess.Popen[bytes], EnvdClient, str, Path],
) -> None:
    process, client, token, token_file = agent
    assert not token_file.exists()
    try:  # the agent is non-dumpable: closed to a non-root reader, open to root
        environ = Path(f"/proc/{process.pid}/environ").read_bytes()
    except PermissionError:
        environ = b""
    assert token.encode() not in environ
    assert "ENVD_ACCESS_TOKEN" not in _output(client, "env")
    assert token not in _output(client, "cat /proc/$PPID/cmdline")
    # And the token is what lets a caller in.
    url = f"http://127.0.0.1:{client._client.base_url.port}"
    stranger = EnvdClient(url, sandbox_id="agent", token="not-it", request_timeout=10)
    with pytest.raises(EnvdUnauthorized):
        _output(stranger, "echo in")
    stranger.close()
