"""The agent's token stays its own, against the real engine: a sandbox's own processes find it
in no environment, command line or file, cannot read the agent's memory, and two sandboxes
that share a ``/tmp`` volume each keep their own agent."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from sandbox_runtime import SandboxConfig, SandboxRuntime

pytestmark = pytest.mark.docker

# Run in the sandbox with the token reversed as its argument (so that its own command line
# does not hold the token it looks for): every process's environment and command line, every
# file below the places a token could be left, and the agent's memory.
HUNT = r"""
import json, os, sys
token = sys.argv[1][::-1].encode()
found, unreadable, read = [], [], 0
for pid in filter(str.isdigit, os.listdir("/proc")):
    for part in ("environ", "cmdline"):
        try:
            with open(f"/proc/{pid}/{part}", "rb") as handle:
                data = handle.read()
        except OSError:
            unreadable.append(f"{pid}/{part}")
            continue
        read += 1
        if token in data:
            found.append(f"/proc/{pid}/{part}")
for top in sys.argv[3:]:
    for folder, _, names in os.walk(top):
        for name in names:
            path = os.path.join(folder, name)
            try:
                with open(path, "rb") as handle:
                    data = handle.read(1 << 20)
            except OSError:
                continue
            read += 1
            if token in data:
                found.append(path)
memory = "readable"
try:
    with open(f"/proc/{sys.argv[2]}/mem", "rb") as handle:
        handle.seek(0)
except OSError as exc:
    memory = type(exc).__name__
print(json.dumps({"found": found, "unreadable": unreadable, "read": read, "memory": memory}))
"""
PLACES = ("/tmp", "/var/tmp", "/run", "/dev/shm", "/.sandbox-runtime")


def _config(image: str, **options: Any) -> SandboxConfig:
    return SandboxConfig(
        backend="docker", image=image, lifetime=300, options={"agent": "on", **options}
    )


def _agent_pid(sandbox: SandboxRuntime) -> str:
    return sandbox.exec("pgrep -x sandbox-agent").stdout.split()[0]


def _parent(sandbox: SandboxRuntime) -> str:
    return sandbox.exec("cat /proc/$PPID/comm").stdout.strip()


def _token(sandbox: SandboxRuntime) -> str:
    link = sandbox.backend._agent  # type: ignore[attr-defined]
    return str(link._token)


def test_no_process_of_the_sandbox_finds_the_token(docker_image: str) -> None:
    with SandboxRuntime(_config(docker_image)) as sandbox:
        token, agent = _token(sandbox), _agent_pid(sandbox)
        sandbox.write_text("/opt/hunt.py", HUNT)
        # A few commands of the sandbox's own running meanwhile, started by the agent.
        for _ in range(3):
            sandbox.exec_background("sleep 30")
        result = sandbox.exec(["python3", "/opt/hunt.py", token[::-1], agent, *PLACES])
        hunt = json.loads(result.stdout)
        assert hunt["found"] == []
        assert hunt["read"] > 10  # it did look: every other process, the agent's files
        # The agent is non-dumpable: its environment and memory are closed to the sandbox's
        # root, which has no CAP_SYS_PTRACE.
        assert f"{agent}/environ" in hunt["unreadable"]
        assert hunt["memory"] == "PermissionError"
        # Its command line names the token's file, which is gone; nothing inherits the token.
        listing = sandbox.exec("ls -a /.sandbox-runtime/*/").stdout.split()
        assert "agent.zip" in listing
        assert "agent.token" not in listing
        assert sandbox.exec("env").stdout.count("ENVD_ACCESS_TOKEN") == 0
        assert sandbox.exec("stat -c %a /.sandbox-runtime/*/").stdout.strip() == "700"
        assert _parent(sandbox) == "sandbox-agent"


@pytest.fixture
def shared_tmp(docker_image: str) -> Iterator[str]:
    """A named volume, removed after the test."""
    import docker

    client = docker.from_env(timeout=60)
    name = f"srt-test-tmp-{secrets.token_hex(4)}"
    try:
        yield name
    finally:
        try:
            client.volumes.get(name).remove(force=True)
        finally:
            client.close()


def test_two_sandboxes_sharing_a_tmp_volume_keep_their_own_agents(
    docker_image: str, shared_tmp: str
) -> None:
    """Their agents' files are not in the /tmp they share: each starts its own, with its own
    token ("on": no fallback to the native path would hide a 401)."""
    config = _config(docker_image, volumes=[f"{shared_tmp}:/tmp"])
    with SandboxRuntime(config) as first, SandboxRuntime(config) as second:
        first.exec("echo one > /tmp/shared")
        for sandbox in (first, second, first, second):
            assert _parent(sandbox) == "sandbox-agent"
            assert sandbox.read_text("/tmp/shared") == "one\n"
        assert _token(first) != _token(second)
        assert first.exec("hostname").stdout != second.exec("hostname").stdout


def test_an_image_user_that_is_not_root_owns_its_agent(nobody_image: str) -> None:
    """The agent runs as the image's user: its directory (0700) and token are that user's."""
    with SandboxRuntime(_config(nobody_image)) as sandbox:
        assert _parent(sandbox) == "sandbox-agent"
        assert sandbox.exec("id -un").stdout == "nobody\n"
        owner = sandbox.exec("stat -c '%U %a' /.sandbox-runtime/*/").stdout
        assert owner == "nobody 700\n"
        assert "agent.token" not in sandbox.exec("ls /.sandbox-runtime/*/").stdout
