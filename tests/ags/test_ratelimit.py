"""AGS control-plane rate limits through the emulator: refusals pause, a quota spaces calls."""

from __future__ import annotations

import time
from itertools import pairwise

import pytest

from sandbox_runtime import SandboxRuntime
from sandbox_runtime.backends.ags import AgsOptions
from sandbox_runtime.emulators.ags.server import AgsEmulator
from sandbox_runtime.ratelimit import RateLimiter, limiter_for


def _cloud_limiter_key(options: dict[str, object]) -> str:
    scheme, host = AgsOptions.model_validate(options).cloud_target()
    return f"ags-cloud:{scheme}://{host}"


def test_request_limit_exceeded_pauses_the_cloud_plane_for_a_second(
    emulator: AgsEmulator,
) -> None:
    options = emulator.backend_options()
    limiter = limiter_for(_cloud_limiter_key(options))
    before = limiter.pauses
    emulator.faults.inject("rate_limit", plane="cloud", operation="StartSandboxInstance", times=2)
    with SandboxRuntime(backend="ags", workdir="/testbed", options=options) as sandbox:
        assert sandbox.exec("echo ok").stdout == "ok\n"
    starts = emulator.faults.requests("cloud", "StartSandboxInstance")
    assert [r.fault for r in starts] == ["rate_limit", "rate_limit", None]
    gaps = [later.at - earlier.at for earlier, later in pairwise(starts)]
    assert all(gap >= 0.9 for gap in gaps), gaps
    assert limiter.pauses == before + 2


def test_api_qps_spaces_control_plane_calls(
    emulator: AgsEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = emulator.backend_options(api_qps=4.0, api_burst=1)
    limiter = limiter_for(_cloud_limiter_key(options), 4.0, 1)
    sent: list[float] = []
    real_acquire = RateLimiter.acquire

    def acquire(self: RateLimiter) -> float:
        waited = real_acquire(self)
        if self is limiter:
            sent.append(time.monotonic())
        return waited

    monkeypatch.setattr(RateLimiter, "acquire", acquire)
    began = len(emulator.faults.requests("cloud"))
    with SandboxRuntime(backend="ags", workdir="/testbed", options=options) as sandbox:
        assert sandbox.exec("echo ok").stdout == "ok\n"
    calls = emulator.faults.requests("cloud")[began:]
    assert len(sent) == len(calls) >= 3, "every Cloud API call went through the limiter"
    gaps = [later - earlier for earlier, later in pairwise(sent)]
    # 4 per second, one at a time: sent a quarter second apart.
    assert min(gaps) >= 0.24, gaps
    assert limiter.rate == 4.0
