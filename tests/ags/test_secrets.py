"""Secrets (SecretId/SecretKey, ark_ keys, data-plane tokens) never reach logs, reprs or errors."""

from __future__ import annotations

import logging

import pytest

from sandbox_runtime import SandboxError, SandboxRuntime
from sandbox_runtime.backends.ags import AgsOptions
from sandbox_runtime_emulators.ags.server import AgsEmulator


def _known_secrets(emulator: AgsEmulator) -> list[str]:
    values = [emulator.secret_id, emulator.secret_key, emulator.api_key]
    for instance in emulator.store.instances.values():
        values.extend(instance.tokens)
    return values


def test_no_secret_in_logs_reprs_or_errors(
    emulator: AgsEmulator, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    texts: list[str] = []
    options = emulator.backend_options()
    texts.append(repr(AgsOptions(**options)))
    with SandboxRuntime(backend="ags", workdir="/testbed", options=options) as sandbox:
        texts += [repr(sandbox), repr(sandbox.backend), repr(sandbox.config)]
        sandbox.exec("echo hello", timeout=5)
        sandbox.exec("sleep 5", timeout=0.5)
        emulator.faults.inject("rate_limit", plane="cloud", operation="DescribeSandboxInstanceList")
        assert sandbox.is_alive()
        with pytest.raises(SandboxError) as missing:
            sandbox.read_text("no-such-file")
        texts.append(str(missing.value))
    bad = emulator.backend_options(secret_key="wrong-" + emulator.secret_key)
    with pytest.raises(SandboxError) as refused:
        SandboxRuntime(backend="ags", options=bad).start()
    texts += [str(refused.value), repr(refused.value), str(refused.value.__cause__)]
    assert "AuthFailure" in str(refused.value)  # an authentication error, said so
    e2b_options = emulator.backend_options(control_plane="e2b", api_key="ark_wrong_but_secret")
    with pytest.raises(SandboxError) as refused_key:
        SandboxRuntime(backend="ags", options=e2b_options).start()
    texts += [str(refused_key.value), repr(refused_key.value)]
    assert "API key was refused" in str(refused_key.value)
    everything = "\n".join(texts) + "\n" + caplog.text
    assert "DescribeSandboxInstanceList" in caplog.text  # the retry was logged...
    for secret in [
        *_known_secrets(emulator),
        "ark_wrong_but_secret",
        "wrong-" + emulator.secret_key,
    ]:
        assert secret not in everything  # ...without any secret


def test_no_secret_in_tool_management_reprs_reports_or_logs(
    emulator: AgsEmulator, caplog: pytest.LogCaptureFixture
) -> None:
    import json

    from pydantic import SecretStr

    from sandbox_runtime.backends.ags.manage.registry import RegistryPusher, RegistryTarget
    from sandbox_runtime.backends.ags.manage.settings import AgsConnection
    from sandbox_runtime.backends.ags.manage.sync import ToolSync, ToolTemplate

    caplog.set_level(logging.DEBUG)
    connection = AgsConnection.from_env(
        endpoint=emulator.url,
        secret_id=emulator.secret_id,
        secret_key=emulator.secret_key,
        session_token="sts-token-that-is-secret",
    )
    client, tcr = connection.ags_client(), connection.tcr_client()
    registry_password = "registry-password-that-is-secret"
    pusher = RegistryPusher(
        RegistryTarget.parse(f"tcr:{emulator.tcr.registry.registry_id}"),
        tcr=tcr,
        username="someone",
        password=SecretStr(registry_password),
    )
    texts = [repr(connection), str(connection), repr(client), repr(tcr), repr(pusher)]
    emulator.faults.inject("rate_limit", plane="cloud", operation="CreateSandboxTool")
    emulator.faults.inject("drop_answer", plane="cloud", operation="CreateSandboxTool")
    template = ToolTemplate(role_arn="qcs::cam::uin/1:roleName/r", env={"VISIBLE": "yes"})
    report = ToolSync(client, template, poll_interval=0.05).run(["secret/check:1"])
    assert report.ok
    texts.append(json.dumps(report.to_dict()))
    token = tcr.create_token(emulator.tcr.registry.registry_id)
    texts.append(repr(token))
    everything = "\n".join(texts) + "\n" + caplog.text
    assert "CreateSandboxTool" in caplog.text  # the retries were logged...
    for secret in [
        emulator.secret_id,
        emulator.secret_key,
        "sts-token-that-is-secret",
        registry_password,
        token.password.get_secret_value(),
    ]:
        assert secret not in everything  # ...without any secret
