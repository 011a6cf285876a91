"""Leases on AGS (docs/leases.md), through the emulator on both control planes: ``extend`` and
``set_lifetime`` move the instance's ``Timeout`` (``UpdateSandboxInstance``, sent by the
official SDK's client, or the E2B ``/timeout`` route), ``reap`` never takes an extended
instance whose owner lives, a killed owner's leased instance is reaped, and the hard caps
(``max_lifetime``, the service's 24 h) are refused before any call."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest

from sandbox_runtime import SandboxRuntime
from sandbox_runtime.backends.ags import AgsBackend, AgsOptions
from sandbox_runtime.errors import LifetimeCapError, SandboxGoneError
from sandbox_runtime_emulators.ags.server import AgsEmulator

PLANES = ["cloud", "e2b"]


def _options(emulator: AgsEmulator, plane: str) -> dict[str, Any]:
    extra = {"control_plane": "e2b", "api_key": emulator.api_key} if plane == "e2b" else {}
    return emulator.backend_options(**extra)


@pytest.mark.parametrize("plane", PLANES)
def test_extend_and_set_lifetime_move_the_instances_timeout(
    emulator: AgsEmulator, plane: str
) -> None:
    options = _options(emulator, plane)
    with SandboxRuntime(backend="ags", workdir="/tmp", lifetime=60, options=options) as sandbox:
        instance = emulator.store.instance(sandbox.id)
        first = instance.expires
        end = sandbox.extend(120)
        assert abs(instance.expires - end) < 3, (instance.expires, end)
        assert instance.expires > first + 100
        end = sandbox.set_lifetime(45)
        assert abs(instance.expires - (time.time() + 45)) < 3
        assert sandbox.expires_at == end
        with pytest.raises(LifetimeCapError):
            sandbox.extend(25 * 3600)  # AGS's own cap: 24 h from the start
        assert abs(instance.expires - end) < 3, "a refused extension changes nothing"
        assert sandbox.exec("echo alive").stdout == "alive\n"
        # AGS sets 30 s for less: the end recorded is the one it set (once 10 s, while the
        # instance answered 20 s past its expires_at).
        end = sandbox.set_lifetime(10)
        assert end == pytest.approx(time.time() + 30, abs=3)
        assert abs(instance.expires - end) < 3


def test_the_callers_cap_is_refused_before_any_call(emulator: AgsEmulator) -> None:
    with SandboxRuntime(
        backend="ags",
        workdir="/tmp",
        lifetime=60,
        max_lifetime=100,
        options=emulator.backend_options(),
    ) as sandbox:
        before = emulator.store.instance(sandbox.id).expires
        with pytest.raises(LifetimeCapError) as caught:
            sandbox.extend(200)
        assert caught.value.cap_at == pytest.approx(sandbox.cap_at)
        assert emulator.store.instance(sandbox.id).expires == before
        sandbox.extend(30)


@pytest.mark.parametrize("plane", PLANES)
def test_reap_leaves_an_extended_instance_whose_owner_lives(
    emulator: AgsEmulator, plane: str
) -> None:
    # lifetime=1: the metadata's end passes at once (AGS itself keeps it 30 s at least).
    options = _options(emulator, plane)
    with SandboxRuntime(backend="ags", workdir="/tmp", lifetime=1, options=options) as sandbox:
        sandbox.extend(120)
        time.sleep(2.5)
        reaped = AgsBackend.reap(sandbox.backend.options, dry_run=True)
        assert sandbox.id not in {found.sandbox_id for found in reaped}
        assert sandbox.exec("true").exit_code == 0


LEASED_OWNER = textwrap.dedent(
    """
    import time
    from sandbox_runtime import SandboxRuntime
    sandbox = SandboxRuntime(backend="ags", workdir="/tmp", lifetime=40).start()
    sandbox.keep_alive(lease=40, cap=3600)
    print(sandbox.id, flush=True)
    time.sleep(600)
    """
)


def test_a_killed_leaseholder_leaves_nothing_after_reap(emulator: AgsEmulator) -> None:
    env = {k: v for k, v in emulator.environment().items() if not k.startswith("E2B_")}
    child = subprocess.Popen(
        [sys.executable, "-c", LEASED_OWNER],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    instance_id = child.stdout.readline().strip()
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert instance_id
    assert emulator.store.instance(instance_id).status == "RUNNING"
    reaped = AgsBackend.reap(AgsOptions(**emulator.backend_options()))
    assert instance_id in {found.sandbox_id for found in reaped}
    deadline = time.monotonic() + 10
    while emulator.store.instance(instance_id).status != "STOPPED":
        assert time.monotonic() < deadline, "the killed owner's instance is still running"
        time.sleep(0.05)


def test_an_instance_stopped_at_its_timeout_is_gone_with_cause_expired(
    emulator: AgsEmulator,
) -> None:
    with SandboxRuntime(
        backend="ags", workdir="/tmp", lifetime=60, options=emulator.backend_options()
    ) as sandbox:
        instance = emulator.store.instance(sandbox.id)
        emulator.service.set_timeout(instance, 0)  # the service's own expiry, as at its end
        deadline = time.monotonic() + 10
        while instance.status == "RUNNING":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        with pytest.raises(SandboxGoneError) as caught:
            sandbox.exec("true")
        assert caught.value.cause == "expired"


def test_the_official_sdk_moves_timeout_and_metadata(emulator: AgsEmulator) -> None:
    """The emulator's ``UpdateSandboxInstance`` takes the SDK's own request model, fields named
    as tencentcloud-sdk-python-ags names them (``InstanceId``, ``Timeout``, ``Metadata``)."""
    import json

    from tencentcloud.ags.v20250920 import ags_client, models
    from tencentcloud.common import credential
    from tencentcloud.common.profile.client_profile import ClientProfile
    from tencentcloud.common.profile.http_profile import HttpProfile

    endpoint = emulator.url.removeprefix("http://")
    profile = ClientProfile(httpProfile=HttpProfile(protocol="http", endpoint=endpoint))
    client = ags_client.AgsClient(
        credential.Credential(emulator.secret_id, emulator.secret_key), "ap-guangzhou", profile
    )

    def request(model: type, **fields: object) -> Any:
        made = model()
        made.from_json_string(json.dumps(fields))
        return made

    started = client.StartSandboxInstance(
        request(models.StartSandboxInstanceRequest, ToolName="default", Timeout="60s")
    )
    instance_id = started.Instance.InstanceId
    client.UpdateSandboxInstance(
        request(
            models.UpdateSandboxInstanceRequest,
            InstanceId=instance_id,
            Timeout="2h",
            Metadata=[{"Name": "sandbox-runtime.expires-at", "Value": "123"}],
        )
    )
    instance = emulator.store.instance(instance_id)
    assert instance.expires == pytest.approx(time.time() + 7200, abs=3)
    assert instance.metadata["sandbox-runtime.expires-at"] == "123"
    listed = client.DescribeSandboxInstanceList(
        request(models.DescribeSandboxInstanceListRequest, InstanceIds=[instance_id])
    )
    assert listed.InstanceSet[0].Metadata[0].Value == "123"
    client.StopSandboxInstance(request(models.StopSandboxInstanceRequest, InstanceId=instance_id))
