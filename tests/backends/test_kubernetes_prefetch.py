"""The prefetcher on Kubernetes (emulator): group copies share a key, a deleted pod is replaced,
and a completed schedule leaves no pod."""

from __future__ import annotations

import time
from typing import Any

from sandbox_runtime import SandboxConfig, SandboxRuntime, list_sandboxes
from sandbox_runtime._core.prefetch import Prefetcher, PrefetchSlot
from tests.conftest import DOCKER_IMAGE


def test_prefetch_on_kubernetes(k8s_emulator: Any) -> None:
    options = k8s_emulator.backend_options()
    keys = ["a", "a", "b", "b"]
    slots = [
        PrefetchSlot(
            key,
            SandboxConfig(
                backend="kubernetes",
                image=DOCKER_IMAGE,
                env={"TASK": key},
                lifetime=300,
                run_id="prefetch-k8s",
                options=options,
            ),
        )
        for key in keys
    ]
    with Prefetcher(slots, ahead=2, max_in_flight=2) as prefetcher:
        deadline = time.monotonic() + 120
        while prefetcher.stats().ready < 2:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        victim = prefetcher._ready["a"][0].runtime.id
        SandboxRuntime.connect("kubernetes", victim, options=options).close()
        for key in keys:
            sandbox = prefetcher.take(key)
            assert sandbox.id != victim
            assert sandbox.exec("echo $TASK").stdout.strip() == key
            sandbox.close()
        stats = prefetcher.stats()
    assert stats.replaced == 1
    assert stats.handed_out == 4
    assert stats.discarded == 0
    left = [i for i in list_sandboxes("kubernetes", options=options) if i.run_id == "prefetch-k8s"]
    assert left == []
