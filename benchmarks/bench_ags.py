"""Per-command latency of ``echo`` through the ``ags`` backend (against the local emulator)
versus the ``local`` backend, measured in one run.

    python benchmarks/bench_ags.py [--runs 200]

Both sides run the same command through ``SandboxRuntime.exec``; the ags side adds the e2b
SDK, HTTP to the emulator's gateway, and HTTP to the envd inside the instance's sandbox.
"""

from __future__ import annotations

import argparse
import statistics
import time

from sandbox_runtime import SandboxRuntime
from sandbox_runtime_emulators.ags.server import AgsEmulator


def measure(sandbox: SandboxRuntime, runs: int) -> list[float]:
    for _ in range(10):  # warm connections and caches
        sandbox.exec("echo warm")
    samples = []
    for _ in range(runs):
        began = time.perf_counter()
        result = sandbox.exec("echo hello")
        samples.append(time.perf_counter() - began)
        assert result.stdout == "hello\n"
    return samples


def p90(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=10)[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    # Namespace isolation on both sides: the ags backend needs absolute paths to agree.
    parser.add_argument("--isolation", choices=("namespace",), default="namespace")
    args = parser.parse_args()
    local_options = {"isolation": args.isolation}
    with SandboxRuntime(backend="local", workdir="/testbed", options=local_options) as sandbox:
        local = measure(sandbox, args.runs)
    with AgsEmulator(backend="local", local_isolation=args.isolation) as emulator:
        options = emulator.backend_options()
        with SandboxRuntime(backend="ags", workdir="/testbed", options=options) as sandbox:
            ags = measure(sandbox, args.runs)
    print(f"echo latency, {args.runs} runs each, local isolation {args.isolation}")
    print(f"{'backend':<24}{'median ms':>12}{'p90 ms':>12}")
    for name, samples in (("local", local), ("ags (emulator)", ags)):
        print(f"{name:<24}{statistics.median(samples) * 1e3:>12.2f}{p90(samples) * 1e3:>12.2f}")
    ratio = statistics.median(ags) / statistics.median(local)
    print(f"ratio ags/local (median): {ratio:.2f}x; p90: {p90(ags) / p90(local):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
