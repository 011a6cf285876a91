"""The e2b backend at the service's instance quota: a typed ``QuotaExceededError`` (429)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from sandbox_runtime import QuotaExceededError, SandboxConfig, SandboxRuntime
from tests.conftest import bwrap_problem, require

try:
    from sandbox_runtime_emulators.ags._service import ServiceLimits
    from sandbox_runtime_emulators.ags.server import AgsEmulator
except ImportError:  # pragma: no cover
    require("needs the emulators: pip install -e ./emulators")


@pytest.fixture(scope="module")
def emulator() -> Iterator[AgsEmulator]:
    require(bwrap_problem())
    limits = ServiceLimits(max_instances=1)
    with AgsEmulator(backend="local", local_isolation="namespace", limits=limits) as running:
        yield running


def test_a_create_over_the_instance_quota_is_quota_exceeded(
    emulator: AgsEmulator, tmp_path: Path
) -> None:
    options = {
        "api_key": SecretStr(emulator.api_key),
        "api_url": emulator.url,
        "sandbox_url": emulator.url,
        "template": emulator.default_tool.name,
        "checkpoint_dir": tmp_path / "records",
    }
    config = SandboxConfig(backend="e2b", workdir="/testbed", lifetime=300, options=options)
    second = SandboxRuntime(config)
    with SandboxRuntime(config), pytest.raises(QuotaExceededError, match="429"):
        second.start()
    with SandboxRuntime(config) as again:  # the quota frees with the first: no lasting state
        assert again.exec("echo ok").stdout == "ok\n"
