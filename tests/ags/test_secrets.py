"""Secrets (SecretId/SecretKey, ark_ keys, data-plane tokens) never reach logs, reprs or errors."""

from __future__ import annotations

import logging

import pytest

from sandbox_runtime import SandboxError, SandboxRuntime
from sandbox_runtime.backends.ags import AgsOptions
from sandbox_runtime.emulators.ags.server import AgsEmulator


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
    e2b_options = emulator.backend_options(control_plane="e2b", api_key="ark_wrong_but_secret")
    with pytest.raises(SandboxError) as refused_key:
        SandboxRuntime(backend="ags", options=e2b_options).start()
    texts += [str(refused_key.value), repr(refused_key.value)]
    everything = "\n".join(texts) + "\n" + caplog.text
    assert "DescribeSandboxInstanceList" in caplog.text  # the retry was logged...
    for secret in [
        *_known_secrets(emulator),
        "ark_wrong_but_secret",
        "wrong-" + emulator.secret_key,
    ]:
        assert secret not in everything  # ...without any secret
