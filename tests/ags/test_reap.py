"""``sandbox-runtime reap --backend ags``: instances of a killed client, and expired ones, are
stopped; live ones, other hosts' and other people's instances are left alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from sandbox_runtime import SandboxRuntime
from sandbox_runtime._core import ownership
from sandbox_runtime.backends.ags._cloud import AgsCloudClient
from sandbox_runtime.cli import main as cli_main
from sandbox_runtime_emulators.ags.server import AgsEmulator
from tests.ags.test_tools import client_for

ABANDON = textwrap.dedent(
    """
    import time
    from sandbox_runtime import SandboxRuntime
    sandbox = SandboxRuntime(backend="ags", workdir="/tmp", lifetime=600).start()
    sandbox.exec("true")
    print(sandbox.id, flush=True)
    time.sleep(600)
    """
)


def _abandoned_instance(env: dict[str, str]) -> str:
    """Start a sandbox in a child process, then kill -9 the child; return the instance id."""
    child = subprocess.Popen(
        [sys.executable, "-c", ABANDON],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    instance_id = child.stdout.readline().strip()
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert instance_id, "the child did not start a sandbox"
    return instance_id


def _status(emulator: AgsEmulator, instance_id: str) -> str:
    return emulator.store.instance(instance_id).status


def _wait_stopped(emulator: AgsEmulator, instance_id: str) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if _status(emulator, instance_id) == "STOPPED":
            return True
        time.sleep(0.05)
    return False


def _start(client: AgsCloudClient, metadata: dict[str, str] | None) -> str:
    return client.start_instance(
        tool_name="default", timeout="10m", client_token=os.urandom(8).hex(), metadata=metadata
    ).instance_id


def test_reap_stops_orphans_and_expired_instances_only(
    emulator: AgsEmulator, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    env = emulator.environment()
    cloud_env = {k: v for k, v in env.items() if not k.startswith("E2B_")}
    orphan = _abandoned_instance(cloud_env)
    assert _status(emulator, orphan) == "RUNNING", "the instance outlives its killed client"
    client = client_for(emulator)
    foreign = _start(client, {"owner": "someone-else"})
    labels = ownership.make_labels(lifetime=600, run_id=None, extra={})
    remote = _start(client, {**labels, ownership.OWNER_HOST: "elsewhere"})
    expired = _start(
        client, {**labels, ownership.OWNER_HOST: "elsewhere", ownership.EXPIRES_AT: "1"}
    )
    for name, value in cloud_env.items():
        monkeypatch.setenv(name, value)
    for name in ("E2B_API_KEY", "E2B_API_URL", "E2B_SANDBOX_URL"):
        monkeypatch.delenv(name, raising=False)
    with SandboxRuntime(backend="ags", workdir="/tmp", options=emulator.backend_options()) as live:
        assert cli_main(["reap", "--backend", "ags", "--dry-run"]) == 0
        dry = capsys.readouterr().out
        assert f"would remove ags {orphan}" in dry
        assert f"would remove ags {expired}" in dry
        assert _status(emulator, orphan) == "RUNNING"

        assert cli_main(["reap", "--backend", "ags"]) == 0
        output = capsys.readouterr().out
        assert f"removed ags {orphan} (owner process" in output
        assert f"removed ags {expired} (expired)" in output
        assert "2 sandbox(es) removed" in output
        assert _wait_stopped(emulator, orphan)
        assert _wait_stopped(emulator, expired)
        assert emulator.store.instance(orphan).stop_reason == "manual"
        for kept in (foreign, remote, live.id):
            assert _status(emulator, kept) == "RUNNING", kept
        assert live.exec("echo still-here").stdout == "still-here\n"
    for instance_id in (foreign, remote):
        client.stop_instance(instance_id)


def test_reap_without_credentials_says_what_to_set(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("TENCENTCLOUD_SECRET_ID", "TENCENTCLOUD_SECRET_KEY", "E2B_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert cli_main(["reap", "--backend", "ags"]) == 1
    assert "E2B_API_KEY" in capsys.readouterr().err


@pytest.mark.e2b_sdk
def test_reap_with_only_an_api_key(
    emulator: AgsEmulator, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {k: v for k, v in emulator.environment().items() if not k.startswith("TENCENTCLOUD_")}
    orphan = _abandoned_instance(env)
    for name in ("TENCENTCLOUD_SECRET_ID", "TENCENTCLOUD_SECRET_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert cli_main(["reap", "--backend", "ags", "--json"]) == 0
    assert orphan in capsys.readouterr().out
    assert _wait_stopped(emulator, orphan)
