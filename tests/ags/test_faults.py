"""Fault injection: rate limits, 503s, dropped connections and slow starts give retries
where repeating is safe, and clean typed errors where it is not or retries run out."""

from __future__ import annotations

import time

import pytest

from sandbox_runtime import SandboxRuntime, SandboxStartError
from sandbox_runtime.backends.ags._cloud import AgsApiError
from sandbox_runtime_emulators.ags._faults import FaultKind
from sandbox_runtime_emulators.ags.server import AgsEmulator


def _config(emulator: AgsEmulator, **options: object) -> dict[str, object]:
    return {"backend": "ags", "workdir": "/testbed", "options": emulator.backend_options(**options)}


def _running(emulator: AgsEmulator) -> int:
    return sum(1 for i in emulator.store.instances.values() if i.status == "RUNNING")


@pytest.mark.parametrize("kind", ["rate_limit", "unavailable", "drop"])
def test_start_is_retried_without_a_second_instance(emulator: AgsEmulator, kind: FaultKind) -> None:
    before = len(emulator.store.instances)
    emulator.faults.inject(kind, plane="cloud", operation="StartSandboxInstance", times=2)
    with SandboxRuntime(**_config(emulator)) as sandbox:
        assert sandbox.exec("echo ok").stdout == "ok\n"
        attempts = emulator.faults.requests("cloud", "StartSandboxInstance")
        assert [r.fault for r in attempts] == [kind, kind, None]
        assert len(emulator.store.instances) == before + 1


def test_dropped_answer_after_the_start_reuses_the_client_token(emulator: AgsEmulator) -> None:
    # A drop on the token call comes after the instance exists: the retried start must not
    # create another one (the ClientToken makes the start idempotent).
    emulator.faults.inject("unavailable", plane="cloud", operation="AcquireSandboxInstanceToken")
    before = len(emulator.store.instances)
    with SandboxRuntime(**_config(emulator)) as sandbox:
        assert sandbox.exec("true").exit_code == 0
        assert len(emulator.store.instances) == before + 1
        assert len(emulator.faults.requests("cloud", "AcquireSandboxInstanceToken")) == 2


def test_slow_start_is_waited_for(emulator: AgsEmulator) -> None:
    emulator.faults.inject("slow_start", plane="cloud", operation="StartSandboxInstance", delay=1.5)
    began = time.monotonic()
    with SandboxRuntime(**_config(emulator)) as sandbox:
        assert time.monotonic() - began >= 1.5
        assert sandbox.exec("echo up").stdout == "up\n"
        polls = emulator.faults.requests("cloud", "DescribeSandboxInstanceList")
        assert len(polls) >= 2


def test_slow_start_past_start_timeout_is_a_clean_timeout(emulator: AgsEmulator) -> None:
    emulator.faults.inject("slow_start", plane="cloud", operation="StartSandboxInstance", delay=30)
    running = _running(emulator)
    with pytest.raises(TimeoutError):
        SandboxRuntime(**_config(emulator), start_timeout=1).start()
    # The half-started instance was stopped, not leaked.
    stopped = [i for i in emulator.store.instances.values() if i.status == "STOPPED"]
    assert stopped
    assert _running(emulator) == running


def test_persistent_rate_limit_ends_in_a_typed_error(emulator: AgsEmulator) -> None:
    emulator.faults.inject("rate_limit", plane="cloud", operation="StartSandboxInstance", times=50)
    began = time.monotonic()
    with pytest.raises(SandboxStartError) as raised:
        SandboxRuntime(**_config(emulator)).start()
    assert time.monotonic() - began < 60
    cause = raised.value.__cause__
    assert isinstance(cause, AgsApiError)
    assert cause.code == "RequestLimitExceeded"
    assert len(emulator.faults.requests("cloud", "StartSandboxInstance")) == 6


def test_non_retryable_errors_are_not_retried(emulator: AgsEmulator) -> None:
    emulator.faults.inject(
        "error",
        plane="cloud",
        operation="StartSandboxInstance",
        code="LimitExceeded.SandboxInstance",
    )
    with pytest.raises(SandboxStartError, match=r"LimitExceeded\.SandboxInstance"):
        SandboxRuntime(**_config(emulator)).start()
    assert len(emulator.faults.requests("cloud", "StartSandboxInstance")) == 1


@pytest.mark.e2b_sdk
def test_e2b_plane_retries_rate_limits_and_reports_drops(emulator: AgsEmulator) -> None:
    e2b_options = {"control_plane": "e2b", "api_key": emulator.api_key}
    emulator.faults.inject("rate_limit", plane="e2b", operation="POST /sandboxes", times=2)
    with SandboxRuntime(**_config(emulator, **e2b_options)) as sandbox:
        assert sandbox.exec("echo e2b").stdout == "e2b\n"
    assert [r.status for r in emulator.faults.requests("e2b", "POST /sandboxes")][-1] == 201
    # A dropped create may have created a sandbox: it is not repeated, and the error is clean.
    emulator.faults.inject("drop", plane="e2b", operation="POST /sandboxes")
    with pytest.raises(SandboxStartError, match="cannot create an AGS sandbox"):
        SandboxRuntime(**_config(emulator, **e2b_options)).start()


@pytest.mark.e2b_sdk
def test_e2b_create_whose_answer_is_lost_is_adopted_not_duplicated(
    emulator: AgsEmulator,
) -> None:
    e2b_options = {"control_plane": "e2b", "api_key": emulator.api_key}
    before = len(emulator.store.instances)
    emulator.faults.inject("drop_answer", plane="e2b", operation="POST /sandboxes")
    with SandboxRuntime(**_config(emulator, **e2b_options)) as sandbox:
        assert sandbox.exec("echo adopted").stdout == "adopted\n"
        assert len(emulator.store.instances) == before + 1
        assert sandbox.id in emulator.store.instances
    assert [r.fault for r in emulator.faults.requests("e2b", "POST /sandboxes")] == ["drop_answer"]


def test_admin_endpoint_injects_faults(emulator: AgsEmulator) -> None:
    import httpx

    answer = httpx.post(
        f"{emulator.url}/_emulator/faults",
        json={"kind": "rate_limit", "plane": "cloud", "operation": "DescribeSandboxToolList"},
    )
    assert answer.status_code == 200
    assert answer.json()["faults"][0]["kind"] == "rate_limit"
    assert httpx.post(f"{emulator.url}/_emulator/faults", json={"bogus": 1}).status_code == 400
    httpx.delete(f"{emulator.url}/_emulator/faults")
    assert emulator.faults.armed() == []


def test_a_command_start_refused_five_times_in_a_row_still_runs(emulator: AgsEmulator) -> None:
    """A refused start ran nothing, so it is sent again; 20% of envd answers failing at random
    (tests/ags/test_chaos.py) met five refusals in a row in about one run in ten."""
    with SandboxRuntime(**_config(emulator)) as sandbox:
        emulator.faults.inject(
            "unavailable", plane="envd", operation="/process.Process/Start", times=5
        )
        began = time.monotonic()
        assert sandbox.exec("echo ok").stdout == "ok\n"
        assert time.monotonic() - began < 12.0, "eight attempts wait at most ~11 s in all"
        starts = emulator.faults.requests("envd", "/process.Process/Start")
        assert [r.fault for r in starts].count("unavailable") == 5
