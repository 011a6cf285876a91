"""Warm pools and concurrency: what a rollout loop waits for, in one run.

- ``acquire()`` from a warm :class:`SandboxPool` against a fresh ``SandboxRuntime.start()``,
  interleaved round by round, on ``local`` and ``docker`` (target: acquire median <= 5 ms).
  Each round waits until the pool is full again, so every acquire is a warm one; the lease
  is released (its sandbox closed) outside the timed part.
- 60 concurrent ``sleep 1`` through ``AsyncSandboxRuntime`` on its own executor, against the
  same calls through ``asyncio.to_thread`` (asyncio's default executor, ``min(32, cpus + 4)``
  threads, which the facade used before).
- ``--starts N``: N docker sandboxes started at once from N threads, with concurrent starts
  bounded at 8, at the docker backend's default (32) and unbounded; wall time and failures.

Usage: ``python benchmarks/bench_pool.py [--rounds 20] [--image IMAGE] [--skip-docker]
[--starts 32]``.  Prints medians and 90th percentiles.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sandbox_runtime import (
    AsyncSandboxRuntime,
    SandboxConfig,
    SandboxError,
    SandboxPool,
    SandboxRuntime,
)
from sandbox_runtime._core import limits

DEFAULT_IMAGE = "sandbox-runtime-test/base:bookworm"


def summarize(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return statistics.median(ordered), p90


def row(name: str, samples: list[float], scale: float = 1e3, unit: str = "ms") -> None:
    median, p90 = summarize(samples)
    print(f"  {name:<44}{median * scale:>10.2f}{p90 * scale:>10.2f} {unit}")


def bench_acquire(config: SandboxConfig, rounds: int, size: int) -> None:
    acquire: list[float] = []
    start: list[float] = []
    with SandboxRuntime(config) as warmup:  # image in page cache, client pools, handshake
        warmup.exec("true")
    with SandboxPool(config, size=size) as pool:
        for _ in range(rounds):
            if not pool.wait_ready(timeout=300):
                raise SystemExit(f"the pool did not fill: {pool.stats()}")
            began = time.perf_counter()
            lease = pool.acquire()
            acquire.append(time.perf_counter() - began)
            assert lease.sandbox.is_alive()
            lease.release()
            began = time.perf_counter()
            fresh = SandboxRuntime(config).start()
            start.append(time.perf_counter() - began)
            fresh.close()
        stats = pool.stats()
    print(f"\n{config.backend}: {rounds} rounds, pool size {size} ({stats})")
    print(f"  {'':<44}{'median':>10}{'p90':>10}")
    row("SandboxPool.acquire() (warm)", acquire)
    row("SandboxRuntime.start() (cold)", start)
    print(f"  acquire is {summarize(start)[0] / summarize(acquire)[0]:.0f}x faster than a start")


def bench_async(tmp: str, calls: int) -> None:
    config = SandboxConfig(backend="local", options={"base_dir": tmp})

    async def ours() -> float:
        async with AsyncSandboxRuntime(config) as sandbox:
            began = time.perf_counter()
            await asyncio.gather(*(sandbox.exec("sleep 1") for _ in range(calls)))
            return time.perf_counter() - began

    async def default_executor() -> float:
        with SandboxRuntime(config) as sandbox:
            began = time.perf_counter()
            await asyncio.gather(
                *(asyncio.to_thread(sandbox.exec, "sleep 1") for _ in range(calls))
            )
            return time.perf_counter() - began

    print(f"\nasync: {calls} concurrent `sleep 1` on one local sandbox (wall time)")
    print(f"  {'AsyncSandboxRuntime (own executor)':<44}{asyncio.run(ours()):>10.2f} s")
    print(
        f"  {'asyncio.to_thread (default executor)':<44}{asyncio.run(default_executor()):>10.2f} s"
    )


def bench_parallel_starts(image: str, count: int) -> None:
    from sandbox_runtime.backends.docker import DockerBackend  # only with docker-py

    config = SandboxConfig(backend="docker", image=image, lifetime=600)

    def start_one(_: int) -> tuple[float, str | None]:
        began = time.perf_counter()
        try:
            sandbox = SandboxRuntime(config).start()
        except SandboxError as exc:
            return time.perf_counter() - began, f"{type(exc).__name__}: {exc}"
        elapsed = time.perf_counter() - began
        sandbox.close()
        return elapsed, None

    print(f"\ndocker: {count} sandboxes started at once from {count} threads")
    print(f"  {'':<44}{'wall s':>10}{'median s':>10}{'failed':>8}")
    default = DockerBackend.max_concurrent_starts
    for label, bound in (
        ("bounded at 8", 8),
        (f"bounded at {default} (the default)", default),
        ("unbounded", None),
    ):
        limits.set_start_limit("docker", bound)
        began = time.perf_counter()
        with ThreadPoolExecutor(max_workers=count) as threads:
            results = list(threads.map(start_one, range(count)))
        wall = time.perf_counter() - began
        failures = [error for _, error in results if error]
        median = statistics.median(seconds for seconds, _ in results)
        print(f"  {label:<44}{wall:>10.2f}{median:>10.2f}{len(failures):>8}")
        for error in failures[:3]:
            print(f"    {error[:160]}")
    limits.set_start_limit("docker", DockerBackend.max_concurrent_starts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--size", type=int, default=2, help="pool size")
    parser.add_argument("--image", default=DEFAULT_IMAGE)
    parser.add_argument("--skip-docker", action="store_true")
    parser.add_argument("--calls", type=int, default=60, help="concurrent async calls")
    parser.add_argument("--starts", type=int, default=0, help="parallel docker starts (0: skip)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-pool-") as tmp:
        options: dict[str, Any] = {"base_dir": tmp}
        bench_acquire(SandboxConfig(backend="local", options=options), args.rounds, args.size)
        bench_async(tmp, args.calls)
    if not args.skip_docker:
        config = SandboxConfig(backend="docker", image=args.image, lifetime=600)
        bench_acquire(config, args.rounds, args.size)
        if args.starts:
            bench_parallel_starts(args.image, args.starts)


if __name__ == "__main__":
    main()
