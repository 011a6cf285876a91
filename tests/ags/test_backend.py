"""Behaviour of the ``ags`` backend beyond the shared conformance suite."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from sandbox_runtime import (
    SandboxConfig,
    SandboxGoneError,
    SandboxRuntime,
    SandboxStartError,
)
from sandbox_runtime.backends.ags import AgsBackend, AgsOptions
from sandbox_runtime_emulators.ags.server import AgsEmulator


def _runtime(
    emulator: AgsEmulator, options: Mapping[str, object] | None = None, **fields: object
) -> SandboxRuntime:
    merged = emulator.backend_options(**(options or {}))
    return SandboxRuntime(backend="ags", workdir="/testbed", options=merged, **fields)


def test_non_zero_exit_keeps_output_and_code(emulator: AgsEmulator) -> None:
    with _runtime(emulator) as sandbox:
        result = sandbox.exec("echo partial; echo oops >&2; exit 5")
        assert (result.exit_code, result.stdout, result.stderr) == (5, "partial\n", "oops\n")
        killed = sandbox.exec("kill -9 $$")
        assert killed.exit_code == 137
        assert not killed.timed_out


def test_per_sandbox_image_goes_to_custom_configuration(emulator: AgsEmulator) -> None:
    with _runtime(emulator, image="registry/swe:task-1") as sandbox:
        instance = emulator.store.instance(sandbox.id)
        assert instance.custom["Image"] == "registry/swe:task-1"
        assert instance.custom["ImageRegistryType"] == "enterprise"
        assert instance.to_api()["Metadata"]  # ownership labels travel as metadata


def test_stopped_elsewhere_is_gone(emulator: AgsEmulator) -> None:
    with _runtime(emulator) as sandbox:
        instance = emulator.store.instance(sandbox.id)
        instance.expires = 0  # the service's lifetime ran out
        import time

        deadline = time.monotonic() + 10
        while instance.status != "STOPPED" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not sandbox.is_alive()
        with pytest.raises(SandboxGoneError):
            sandbox.exec("true")
        with pytest.raises(SandboxGoneError):
            sandbox.read_text("x")


def test_expired_token_is_refreshed(emulator: AgsEmulator) -> None:
    with _runtime(emulator) as sandbox:
        instance = emulator.store.instance(sandbox.id)
        for token in list(instance.tokens):
            instance.tokens[token] = 0.0  # every data-plane token expired
        assert sandbox.exec("echo fresh").stdout == "fresh\n"
        assert len(emulator.faults.requests("cloud", "AcquireSandboxInstanceToken")) >= 2


def test_unknown_tool_is_a_start_error(emulator: AgsEmulator) -> None:
    with pytest.raises(SandboxStartError, match=r"ResourceNotFound\.SandboxTool"):
        _runtime(emulator, options={"tool_name": "missing-tool"}).start()
    assert not [i for i in emulator.store.instances.values() if i.tool.name == "missing-tool"]


def test_e2b_control_plane(emulator: AgsEmulator) -> None:
    options = {"control_plane": "e2b", "api_key": emulator.api_key}
    with _runtime(emulator, options=options) as sandbox:
        sandbox.write_bytes("data.bin", b"\x00\xff")
        assert sandbox.exec("od -An -tx1 data.bin").stdout.split() == ["00", "ff"]
        instance_id = sandbox.id
    assert emulator.store.instance(instance_id).status == "STOPPED"
    with pytest.raises(Exception, match="per-sandbox image"):
        _runtime(emulator, options=options, image="x/y:1").start()


def test_options_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TENCENTCLOUD_SECRET_ID", "id-from-env")
    monkeypatch.setenv("TENCENTCLOUD_SECRET_KEY", "key-from-env")
    monkeypatch.setenv("AGS_TOOL_NAME", "tool-from-env")
    monkeypatch.setenv("AGS_REGION", "ap-shanghai")
    options = AgsOptions()
    assert options.resolved_control_plane == "cloud"
    assert options.tool_name == "tool-from-env"
    assert options.resolved_domain == "ap-shanghai.tencentags.com"
    assert options.secret_key is not None
    assert options.secret_key.get_secret_value() == "key-from-env"
    assert AgsBackend.availability(options).ok
    internal = AgsOptions(internal=True)
    assert internal.resolved_domain == "ap-shanghai.internal.tencentags.com"
    assert internal.cloud_target() == ("https", "ags.internal.tencentcloudapi.com")


def test_missing_credentials_say_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TENCENTCLOUD_SECRET_ID", "TENCENTCLOUD_SECRET_KEY", "E2B_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    availability = AgsBackend.availability(AgsOptions(tool_name="t"))
    assert not availability.ok
    assert "TENCENTCLOUD_SECRET_ID" in availability.reason
    assert SandboxConfig(backend="ags").backend == "ags"
