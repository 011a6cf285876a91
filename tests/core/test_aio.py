"""The async facade runs concurrent calls in an executor sized for them, not asyncio's default."""

from __future__ import annotations

import asyncio
import contextvars
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from sandbox_runtime import AsyncSandboxRuntime, SandboxRuntime
from sandbox_runtime._core import aio


def _local(tmp_path: Path) -> dict[str, Any]:
    return {"backend": "local", "options": {"base_dir": str(tmp_path)}}


def test_sixty_concurrent_one_second_commands_take_about_one_second(tmp_path: Path) -> None:
    async def main() -> tuple[float, list[str]]:
        async with AsyncSandboxRuntime(**_local(tmp_path)) as sandbox:
            began = time.monotonic()
            results = await asyncio.gather(*(sandbox.exec(f"sleep 1; echo {i}") for i in range(60)))
            return time.monotonic() - began, [r.stdout for r in results]

    elapsed, outputs = asyncio.run(main())
    assert outputs == [f"{i}\n" for i in range(60)]
    # asyncio's default executor (min(32, cpus + 4) threads) took 10 s on 2 cores.
    assert elapsed < 3.0, f"60 concurrent sleeps of 1 s took {elapsed:.1f}s"


def test_a_caller_sized_executor_bounds_concurrent_calls(tmp_path: Path) -> None:
    executor = ThreadPoolExecutor(max_workers=4)

    async def main() -> float:
        async with AsyncSandboxRuntime(**_local(tmp_path), executor=executor) as sandbox:
            assert sandbox.executor is executor
            began = time.monotonic()
            await asyncio.gather(*(sandbox.exec("sleep 0.5") for _ in range(8)))
            return time.monotonic() - began

    try:
        elapsed = asyncio.run(main())
    finally:
        executor.shutdown()
    assert 1.0 <= elapsed < 2.5, f"8 calls on 4 threads took {elapsed:.2f}s, expected two waves"


def test_set_default_max_workers_resizes_the_shared_executor(tmp_path: Path) -> None:
    aio.set_default_max_workers(2)
    try:

        async def main() -> float:
            async with AsyncSandboxRuntime(**_local(tmp_path)) as sandbox:
                began = time.monotonic()
                await asyncio.gather(*(sandbox.exec("sleep 0.4") for _ in range(4)))
                return time.monotonic() - began

        assert asyncio.run(main()) >= 0.8
    finally:
        aio.set_default_max_workers(aio.DEFAULT_MAX_WORKERS)
    with pytest.raises(ValueError):
        aio.set_default_max_workers(0)


def test_wrap_shares_a_sync_runtime_and_keeps_context_variables(tmp_path: Path) -> None:
    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="unset")
    with SandboxRuntime(**_local(tmp_path)) as runtime:
        facade = AsyncSandboxRuntime.wrap(runtime)
        assert facade.sync is runtime

        async def main() -> tuple[str, str]:
            marker.set("from-the-caller")
            seen = await facade._run(marker.get)
            result = await facade.exec("echo wrapped")
            return seen, result.stdout

        assert asyncio.run(main()) == ("from-the-caller", "wrapped\n")
