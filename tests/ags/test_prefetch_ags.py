"""The prefetcher on AGS (emulator, rate-limited starts): live hand-outs, a parked instance kept
past its lifetime by its lease, a stopped one replaced, starts in flight bounded, none left."""

from __future__ import annotations

import time

from sandbox_runtime import SandboxConfig, SandboxRuntime, list_sandboxes
from sandbox_runtime._core.prefetch import Prefetcher, PrefetchSlot
from sandbox_runtime_emulators._ratelimit import Quota
from sandbox_runtime_emulators.ags.server import AgsEmulator


def _slots(
    emulator: AgsEmulator, keys: list[str], run_id: str, lifetime: float
) -> list[PrefetchSlot]:
    return [
        PrefetchSlot(
            key,
            SandboxConfig(
                backend="ags",
                workdir="/tmp",
                env={"TASK": key},
                lifetime=lifetime,
                max_lifetime=60,
                run_id=run_id,
                options=emulator.backend_options(),
            ),
        )
        for key in keys
    ]


def _running(emulator: AgsEmulator, run_id: str) -> list[str]:
    found = list_sandboxes("ags", options=emulator.backend_options())
    return [info.sandbox_id for info in found if info.run_id == run_id]


def _wait_for(predicate: object, within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_prefetch_through_a_rate_limited_service(emulator: AgsEmulator) -> None:
    emulator.api_limits.set_quota("StartSandboxInstance", Quota(5))
    emulator.api_limits.set_latency("StartSandboxInstance", 0.3)
    keys = ["a", "a", "b", "b", "c", "c"]
    try:
        slots = _slots(emulator, keys, "prefetch-ags", lifetime=4)
        with Prefetcher(slots, ahead=4, max_in_flight=2, jitter=0.1) as prefetcher:
            _wait_for(lambda: prefetcher.stats().ready == 4)
            time.sleep(5)  # past the lifetime: the parking lease keeps them
            stopped = prefetcher._ready["a"][0].runtime.id
            SandboxRuntime.connect("ags", stopped, options=emulator.backend_options()).close()
            for key in keys:
                sandbox = prefetcher.take(key)
                assert sandbox.id != stopped
                assert sandbox.exec("echo $TASK").stdout.strip() == key
                sandbox.close()
            stats = prefetcher.stats()
    finally:
        emulator.api_limits.set_quota("StartSandboxInstance", None)
        emulator.api_limits.set_latency("StartSandboxInstance", 0.0)
    assert stats.replaced == 1, "the stopped instance, and only it"
    assert stats.handed_out == 6
    assert stats.started == 7
    assert stats.discarded == 0
    assert stats.peak_in_flight <= 2
    assert _running(emulator, "prefetch-ags") == []
