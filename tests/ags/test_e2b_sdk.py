"""The unmodified e2b SDK against the emulator: E2B REST control plane and envd data plane.

Only the SDK's public API is used, so these tests run under any e2b 2.x release
(``tests/run_with_version.sh e2b VERSION -m e2b_sdk tests/ags``), including those outside
the backend's pin.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import e2b
import pytest
from e2b import Sandbox

from sandbox_runtime_emulators.ags.server import AgsEmulator

pytestmark = pytest.mark.e2b_sdk


def _opts(emulator: AgsEmulator) -> dict[str, str]:
    return {"api_key": emulator.api_key, "api_url": emulator.url, "sandbox_url": emulator.url}


@pytest.fixture
def sandbox(emulator: AgsEmulator) -> Iterator[Sandbox]:
    created = Sandbox.create(
        template="default",
        timeout=120,
        metadata={"suite": "e2b"},
        envs={"GLOBAL": "g"},
        **_opts(emulator),
    )
    try:
        yield created
    finally:
        created.kill()


def test_commands_run_streams_and_exit_codes(sandbox: Sandbox) -> None:
    result = sandbox.commands.run('echo out; echo err >&2; printf %s "$GLOBAL"')
    assert result.exit_code == 0
    assert result.stdout == "out\ng"
    # bash -l sources the host profile in local instances, which may warn on stderr.
    assert result.stderr.endswith("err\n")
    with pytest.raises(e2b.CommandExitException) as failed:
        sandbox.commands.run("echo kept; exit 3")
    assert failed.value.exit_code == 3
    assert failed.value.stdout == "kept\n"


def test_command_env_cwd_and_missing_cwd(sandbox: Sandbox) -> None:
    sandbox.files.make_dir("/tmp/work")
    result = sandbox.commands.run("pwd; echo $X", cwd="/tmp/work", envs={"X": "1"})
    assert result.stdout == "/tmp/work\n1\n"
    with pytest.raises(e2b.InvalidArgumentException, match="does not exist"):
        sandbox.commands.run("true", cwd="/no/such/dir")


def test_background_list_kill_and_stdin(sandbox: Sandbox) -> None:
    handle = sandbox.commands.run("sleep 30", background=True)
    assert handle.pid in [p.pid for p in sandbox.commands.list()]
    assert sandbox.commands.kill(handle.pid)
    with pytest.raises(e2b.CommandExitException):
        handle.wait()
    assert handle.pid not in [p.pid for p in sandbox.commands.list()]
    assert not sandbox.commands.kill(999999)
    reader = sandbox.commands.run("head -c 5", background=True, stdin=True)
    sandbox.commands.send_stdin(reader.pid, "hello")
    assert reader.wait().stdout == "hello"


def test_command_timeout_kills_the_process(sandbox: Sandbox) -> None:
    began = time.monotonic()
    with pytest.raises(e2b.TimeoutException):
        sandbox.commands.run("sleep 30", timeout=1)
    assert time.monotonic() - began < 10

    def sleeping() -> list[object]:
        return [p for p in sandbox.commands.list() if "sleep 30" in " ".join(p.args)]

    # envd kills the process at the deadline it was sent (Connect-Timeout-Ms); newer SDKs
    # also give up on their own at the same moment, so the kill may land just after.
    deadline = time.monotonic() + 3
    while sleeping() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not sleeping()


def test_files_round_trip(sandbox: Sandbox) -> None:
    info = sandbox.files.write("/tmp/dir/a.bin", bytes(range(256)))
    assert info.path == "/tmp/dir/a.bin"
    assert bytes(sandbox.files.read("/tmp/dir/a.bin", format="bytes")) == bytes(range(256))
    assert sandbox.files.exists("/tmp/dir/a.bin")
    assert not sandbox.files.exists("/tmp/dir/none")
    assert [e.name for e in sandbox.files.list("/tmp/dir")] == ["a.bin"]
    assert sandbox.files.make_dir("/tmp/dir/sub")
    assert not sandbox.files.make_dir("/tmp/dir/sub")
    sandbox.files.rename("/tmp/dir/a.bin", "/tmp/dir/sub/b.bin")
    assert sandbox.files.get_info("/tmp/dir/sub/b.bin").size == 256
    sandbox.files.remove("/tmp/dir/sub")
    assert not sandbox.files.exists("/tmp/dir/sub")
    with pytest.raises(e2b.NotFoundException):
        sandbox.files.read("/tmp/dir/missing.txt")
    assert sandbox.commands.run("cat /tmp/x 2>/dev/null; true").exit_code == 0


def test_control_plane_info_list_timeout_connect(sandbox: Sandbox, emulator: AgsEmulator) -> None:
    info = sandbox.get_info()
    assert info.sandbox_id == sandbox.sandbox_id
    assert info.metadata == {"suite": "e2b"}
    listed = Sandbox.list(**_opts(emulator))
    items = listed.next_items() if hasattr(listed, "next_items") else listed
    assert sandbox.sandbox_id in [item.sandbox_id for item in items]
    sandbox.set_timeout(200)
    same = Sandbox.connect(sandbox.sandbox_id, **_opts(emulator))
    assert same.commands.run("echo again").stdout == "again\n"


def test_kill_and_gone_sandbox(emulator: AgsEmulator) -> None:
    created = Sandbox.create(template="default", timeout=60, **_opts(emulator))
    assert created.is_running()
    assert created.kill()
    assert not created.kill()
    assert not created.is_running()
    with pytest.raises(e2b.SandboxException):
        created.commands.run("true")


def test_wrong_api_key_and_template(emulator: AgsEmulator) -> None:
    with pytest.raises(e2b.AuthenticationException):
        Sandbox.create(
            template="default",
            api_key="ark_wrong",
            api_url=emulator.url,
            sandbox_url=emulator.url,
        )
    with pytest.raises(e2b.SandboxException, match="404"):
        Sandbox.create(template="no-such-tool", **_opts(emulator))


@pytest.mark.parametrize("pty", [False, True])
def test_a_killed_command_is_gone_when_kill_returns(sandbox: Sandbox, pty: bool) -> None:
    # envd answers a SIGKILL once the process is reaped: a check right after never finds a
    # zombie still holding the pid (e2b's own test_kill_pty did, 2 times in 11).
    for _ in range(12):
        if pty:
            pid = sandbox.pty.create(e2b.PtySize(rows=24, cols=80)).pid
            assert sandbox.pty.kill(pid)
        else:
            pid = sandbox.commands.run("sleep 600", background=True).pid
            assert sandbox.commands.kill(pid)
        probe = sandbox.commands.run(f"kill -0 {pid} 2>/dev/null; echo $?")
        assert probe.stdout.strip() == "1", f"pid {pid} still there after kill"
