"""Local-backend behaviour beyond the conformance suite: the root, escapes, namespaces,
lifetime and reaping of what a killed client left behind."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from sandbox_runtime import (
    ConfigError,
    PathEscapeError,
    SandboxConfig,
    SandboxReadOnlyError,
    SandboxRuntime,
    SandboxStartError,
)
from sandbox_runtime.backends.local import LocalBackend, LocalOptions
from sandbox_runtime.cli import main as cli_main
from tests.backends.test_docker import _abandoned_sandbox
from tests.conftest import bwrap_problem, require


def _processes_marked(sandbox_id: str) -> list[int]:
    needle = f"SANDBOX_RUNTIME_ID={sandbox_id}".encode() + b"\0"
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if environ.startswith(needle) or b"\0" + needle in environ:
            found.append(int(entry))
    return found


def _processes_naming(sandbox_id: str) -> list[int]:
    """Processes whose command line mentions the sandbox (its watchdog)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if sandbox_id.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
            except OSError:
                continue
    return found


def _wait(predicate, within: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def _config(tmp_path: Path, **fields: object) -> SandboxConfig:
    options = {"base_dir": tmp_path / "sandboxes", **fields.pop("options", {})}  # type: ignore[dict-item]
    return SandboxConfig(backend="local", options=options, **fields)


def test_template_directory_is_copied_as_the_root(tmp_path: Path) -> None:
    template = tmp_path / "template"
    (template / "testbed").mkdir(parents=True)
    (template / "testbed" / "app.py").write_text("print('hi')\n")
    with SandboxRuntime(_config(tmp_path, image=str(template), workdir="/testbed")) as sandbox:
        assert sandbox.read_text("app.py") == "print('hi')\n"
        sandbox.write_text("app.py", "changed")
    assert (template / "testbed" / "app.py").read_text() == "print('hi')\n"


def test_container_image_names_are_refused_with_a_hint(tmp_path: Path) -> None:
    with pytest.raises(SandboxStartError, match="docker backend"):
        SandboxRuntime(_config(tmp_path, image="python:3.12")).start()


def test_symlinks_made_by_commands_cannot_leak_writes(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    with SandboxRuntime(_config(tmp_path)) as sandbox:
        sandbox.exec(f"ln -s {outside} link && ln -s {outside}/secret.txt file-link", check=True)
        (outside / "secret.txt").write_text("host secret")
        with pytest.raises(PathEscapeError):
            sandbox.write_text("link/planted.txt", "x")
        with pytest.raises(PathEscapeError):
            sandbox.read_text("file-link")
        # Writing at the link's own name replaces the link, never the host file.
        sandbox.write_text("file-link", "replaced")
        assert sandbox.read_text("file-link") == "replaced"
    assert (outside / "secret.txt").read_text() == "host secret"
    assert not (outside / "planted.txt").exists()


def test_close_kills_background_processes_and_removes_the_root(tmp_path: Path) -> None:
    # isolation=none: under namespace isolation a background process ends with its command
    # (its PID namespace goes), so there is nothing left for close to kill.
    sandbox = SandboxRuntime(_config(tmp_path, options={"isolation": "none"})).start()
    sandbox.exec("nohup sleep 600 >/dev/null 2>&1 &")
    # Seen once it has exec'd (its environment reads empty for an instant while it does).
    assert _wait(lambda: bool(_processes_marked(sandbox.id)), within=5)
    root = sandbox.backend.root  # type: ignore[attr-defined]
    sandbox.close()
    assert not root.exists()
    assert _wait(lambda: not _processes_marked(sandbox.id), within=5)


def test_environment_can_be_kept_from_the_host_or_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SRT_HOST_ONLY", "host")
    with SandboxRuntime(_config(tmp_path)) as sandbox:
        assert sandbox.exec("echo $SRT_HOST_ONLY").stdout == "host\n"
        assert sandbox.exec('test -d "$TMPDIR" && echo tmp-ok').stdout == "tmp-ok\n"
    with SandboxRuntime(_config(tmp_path, options={"inherit_env": False})) as sandbox:
        assert sandbox.exec("echo ${SRT_HOST_ONLY:-unset}").stdout == "unset\n"


def test_network_off_needs_namespaces(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="namespace"):
        SandboxRuntime(_config(tmp_path, options={"network": False, "isolation": "none"})).start()


def test_resources_are_said_to_be_unenforced(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = SandboxConfig(
        backend="local",
        resources={"cpus": 2, "memory": "1g"},
        options={"base_dir": tmp_path},
    )
    with SandboxRuntime(config) as sandbox:
        assert sandbox.exec("true").ok
    [record] = [r for r in caplog.records if r.name == "sandbox_runtime.local"]
    assert record.levelname == "WARNING"
    assert "cpus=2.0, memory=1073741824 are not enforced" in record.getMessage()


def test_namespace_isolation(tmp_path: Path) -> None:
    require(bwrap_problem())
    config = _config(
        tmp_path, workdir="/testbed", options={"isolation": "namespace", "network": False}
    )
    with SandboxRuntime(config) as sandbox:
        assert sandbox.exec("pwd").stdout == "/testbed\n"
        # A new PID namespace: the shell is one of very few processes.
        assert int(sandbox.exec("echo $$").stdout) < 10
        # The host is read-only; the sandbox's own directories are writable.
        assert sandbox.exec("touch /usr/srt-should-fail").exit_code != 0
        assert sandbox.exec("touch /tmp/ok && touch ok").exit_code == 0
        # No network namespace peers: only loopback exists, and it is down.
        interfaces = sandbox.exec("cat /proc/net/dev").stdout
        assert "lo:" in interfaces
        assert "eth0" not in interfaces
        probe = sandbox.exec(
            ["python3", "-c", "import socket; socket.create_connection(('1.1.1.1', 53), timeout=2)"]
        )
        assert probe.exit_code != 0


def test_namespace_root_is_one_mount_like_a_container(tmp_path: Path) -> None:
    """Absolute paths are the sandbox's, and a mv between its top-level directories is a
    rename (R2E-Gym's setup moves /r2e_tests to /root), also from a reattached client."""
    require(bwrap_problem())
    template = tmp_path / "template"
    for directory in ("testbed", "r2e_tests", "root"):
        (template / directory).mkdir(parents=True)
    (template / "r2e_tests" / "test_x.py").write_text("def test_x(): pass\n")
    (template / "testbed" / "run_tests.sh").write_text("echo ran\n")
    config = _config(
        tmp_path, image=str(template), workdir="/testbed", options={"isolation": "namespace"}
    )
    with SandboxRuntime(config) as sandbox:
        moved = sandbox.exec("mv /r2e_tests /root/r2e_tests && mv run_tests.sh /root/")
        assert moved.exit_code == 0, moved.output
        assert sandbox.exec("bash /root/run_tests.sh && cd /testbed && pwd").stdout == (
            "ran\n/testbed\n"
        )
        assert sandbox.read_text("/root/r2e_tests/test_x.py").startswith("def test_x")
        assert not sandbox.exists("/r2e_tests")
        # The host's directories are there, read-only, over empty stand-ins in the root.
        assert sandbox.exec("test -x /usr/bin/env && ! touch /usr/x").exit_code == 0
        assert not any((sandbox.backend.root / "usr").iterdir())  # type: ignore[attr-defined]
        again = SandboxRuntime.connect("local", sandbox.id, options=config.options)
        assert again.exec("ls /root").stdout.split() == ["r2e_tests", "run_tests.sh"]


def test_namespace_file_api_sees_what_commands_see(tmp_path: Path) -> None:
    """Host directories bound read-only read as the host's and refuse writes, instead of a
    write that the file API would see and commands would not (the AGS emulator once put
    envd under /opt that way and could not start it)."""
    require(bwrap_problem())
    config = _config(tmp_path, workdir="/work", options={"isolation": "namespace"})
    (tmp_path / "template-file").write_text("x")
    with SandboxRuntime(config) as sandbox:
        assert sandbox.read_text("/etc/passwd") == sandbox.exec("cat /etc/passwd").stdout
        assert sandbox.exists("/usr/bin/env")
        assert "bin" in {entry.name for entry in sandbox.list_dir("/usr")}
        writes: list[Callable[[], object]] = [
            lambda: sandbox.write_text("/opt/tool/x", "x"),
            lambda: sandbox.make_dir("/opt/tool"),
            lambda: sandbox.remove("/etc/passwd"),
            lambda: sandbox.upload(tmp_path / "template-file", "/usr/x"),
        ]
        for write in writes:
            with pytest.raises(SandboxReadOnlyError, match="read-only"):
                write()
        sandbox.write_text("/tmp/tool/x", "own")
        assert sandbox.exec("cat /tmp/tool/x").stdout == "own"


def test_namespace_var_tmp_is_the_sandboxs_own_and_writable(tmp_path: Path) -> None:
    """As in a container, /var/tmp takes writes (R2E-Gym's editor keeps its undo history
    there) while the rest of the host's /var stays read-only; the host's is untouched."""
    require(bwrap_problem())
    config = _config(tmp_path, workdir="/work", options={"isolation": "namespace"})
    with SandboxRuntime(config) as sandbox, SandboxRuntime(config) as other:
        name = f"/var/tmp/sandbox-runtime-test-{sandbox.id}"
        assert sandbox.exec(f"echo from-command > {name}").ok
        assert sandbox.read_text(name) == "from-command\n"
        sandbox.write_text(f"{name}.api", "from-api")
        assert sandbox.exec(f"cat {name}.api").stdout == "from-api"
        assert not Path(name).exists()  # not the host's /var/tmp
        assert not other.exists(name)  # nor another sandbox's
        assert not sandbox.exec("touch /var/sandbox-runtime-x").ok
        with pytest.raises(SandboxReadOnlyError):
            sandbox.write_text("/var/sandbox-runtime-x", "x")


def test_reap_cleans_up_after_a_killed_client(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = tmp_path / "sandboxes"
    orphan = _abandoned_sandbox("local", "", lifetime=600, base_dir=str(base))
    assert _processes_marked(orphan), "the orphan's background process should still run"
    with SandboxRuntime(_config(tmp_path)) as live:
        reaped = LocalBackend.reap(LocalOptions(base_dir=base))
        assert [r.sandbox_id for r in reaped] == [orphan]
        assert "owner process" in reaped[0].reason
        assert live.exec("echo alive").stdout == "alive\n"
        assert live.is_alive()
    assert not list(base.glob(f"sbx-{orphan.removeprefix('local-')}"))
    assert _wait(lambda: not _processes_marked(orphan), within=5)
    # The orphan's lifetime watchdog is gone too, not left sleeping until the lifetime.
    assert _wait(lambda: not _processes_naming(orphan), within=5)


def test_reap_takes_a_directory_whose_start_died_before_its_record(tmp_path: Path) -> None:
    # A client SIGKILLed between making the directory and writing its record leaves a bare
    # directory: reap leaves it alone while a start could still be writing the record, and
    # takes it once no live start could be.
    base = tmp_path / "sandboxes"
    interrupted, starting = base / "sbx-interrupted", base / "sbx-starting"
    for home in (interrupted, starting):
        home.mkdir(parents=True)
    (interrupted / ".meta.json.partial").write_text('{"id": "local-inter')  # a half write
    long_ago = time.time() - 120
    os.utime(interrupted, (long_ago, long_ago))
    reaped = LocalBackend.reap(LocalOptions(base_dir=base))
    assert [r.sandbox_id for r in reaped] == ["local-interrupted"]
    assert "interrupted" in reaped[0].reason
    assert not interrupted.exists()
    assert starting.exists()
    assert LocalBackend.list_sandboxes(LocalOptions(base_dir=base)) == []


def test_abandoned_local_sandbox_ends_at_its_lifetime(tmp_path: Path) -> None:
    base = tmp_path / "sandboxes"
    orphan = _abandoned_sandbox("local", "", lifetime=2, base_dir=str(base))
    home = base / f"sbx-{orphan.removeprefix('local-')}"
    assert _wait(lambda: not home.exists(), within=20), "watchdog did not remove the sandbox"
    assert _wait(lambda: not _processes_marked(orphan), within=5)


def test_reap_cli_covers_local(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["reap", "--backend", "local", "--json"]) == 0
    assert capsys.readouterr().out.strip().startswith("[")
