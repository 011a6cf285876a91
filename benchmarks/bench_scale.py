"""1,000 sandboxes through an emulator that rate-limits its control plane like the real service.

    python benchmarks/bench_scale.py [--count 1000] [--concurrency 64] [--start-qps 20]
    python benchmarks/bench_scale.py --backend kubernetes --count 40 [--qps 5 --burst 10]

``ags`` (the default) runs the AGS emulator in its own process (``sandbox-runtime ags
emulator``, instances are ``local`` sandboxes running our envd) with AGS's documented
frequency limits (``--rate-limit realistic``) and ``StartSandboxInstance`` at ``--start-qps``
per second, then uses ``--count`` sandboxes through the ``ags`` backend, at most
``--concurrency`` alive at once: start, three ``echo``s, a file written and read back, stop.
The client is told no quota (no ``api_qps``): it learns the limit from the refusals alone.

The bound is what the limit allows: ``count / start_qps`` seconds of starts, plus one
sandbox's own time from start to stop (measured first, alone, with no limit in force).  The
run reports its wall time, the ratio to that bound, the errors surfaced to the caller (a
sandbox that failed) and the refusals the client absorbed (counted by the emulator).

``kubernetes`` runs the Kubernetes emulator (pods are Docker containers of ``--image``) with a
per-client token bucket of ``--qps``/``--burst`` on every request, and the ``kubernetes``
backend told the same quota (``api_qps``/``api_burst``, as client-go is).  Its bound is the
requests the run made divided by ``--qps`` (the bucket's burst aside), plus one sandbox's time.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import logging
import os
import re
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from sandbox_runtime import SandboxRuntime

_URL = re.compile(r"emulator on (http\S+)")


def use_one(config: dict[str, Any], index: int) -> float:
    """Start, use and stop one sandbox; its seconds from start to stopped."""
    began = time.monotonic()
    with SandboxRuntime(**config) as sandbox:
        for word in ("one", "two", "three"):
            result = sandbox.exec(f"echo {word}-{index}")
            if result.stdout != f"{word}-{index}\n":
                raise AssertionError(f"echo {word}-{index} gave {result.stdout!r}")
        payload = f"sandbox {index}\n".encode() * 64
        name = f"bench-{index}.txt"
        sandbox.write_bytes(name, payload)
        if sandbox.read_bytes(name) != payload:
            raise AssertionError(f"sandbox {index}: the file read back differs")
    return time.monotonic() - began


def run_all(config: dict[str, Any], count: int, concurrency: int) -> tuple[float, list[float], int]:
    """``count`` sandboxes, ``concurrency`` at once: (wall seconds, lifetimes, errors)."""
    lifetimes: list[float] = []
    errors = 0
    lock = threading.Lock()
    began = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        futures = [pool.submit(use_one, config, i) for i in range(count)]
        for done, future in enumerate(concurrent.futures.as_completed(futures), 1):
            try:
                lifetime = future.result()
            except Exception as exc:  # an error surfaced to the caller: what must not happen
                with lock:
                    errors += 1
                print(f"  sandbox failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            else:
                lifetimes.append(lifetime)
            if done % max(1, count // 10) == 0:
                print(f"  {done}/{count} done at {time.monotonic() - began:.1f}s", flush=True)
    return time.monotonic() - began, lifetimes, errors


@contextmanager
def emulator_process(argv: list[str], log: Path) -> Iterator[str]:
    """Run an emulator command in its own process; yields its URL, stops it after."""
    with log.open("w") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "sandbox_runtime.cli", *argv],
            stdout=subprocess.PIPE,
            stderr=sink,
            text=True,
        )
        try:
            assert process.stdout is not None
            url = None
            for line in process.stdout:
                print(f"  emulator: {line.rstrip()}")
                match = _URL.search(line)
                if match:
                    url = match.group(1)
                if line.startswith(("# TCR", "export KUBECONFIG")):
                    break  # the last line either emulator prints when it is ready
            if url is None:
                raise RuntimeError(f"the emulator did not start: see {log}")
            yield url
        finally:
            process.terminate()
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()


def refusals(url: str) -> tuple[int, int]:
    """(requests refused by the emulator's quotas, all requests) from its request log."""
    records = httpx.get(f"{url}/_emulator/requests", timeout=60).json()["requests"]
    return sum(1 for r in records if r["fault"] == "quota"), len(records)


def bench_ags(args: argparse.Namespace, log: Path) -> dict[str, Any]:
    secret_id, secret_key = "AKID" + secrets.token_hex(16), secrets.token_hex(16)
    argv = [
        "ags", "emulator", "--port", "0", "--local-isolation", "namespace",
        "--secret-id", secret_id, "--secret-key", secret_key,
    ]  # fmt: skip
    options = {
        "secret_id": secret_id,
        "secret_key": secret_key,
        "tool_name": "default",
        "control_plane": "cloud",
    }
    # One sandbox alone, with no limit: the latency part of the bound.
    with emulator_process(argv, log) as url:
        config = {"backend": "ags", "workdir": "/testbed", "options": {**options, "endpoint": url}}
        alone = statistics.median(use_one(config, -i) for i in range(1, 4))
    limited = [*argv, "--rate-limit", "realistic"]
    limited += ["--rate-limit", f"StartSandboxInstance={args.start_qps:g}"]
    with emulator_process(limited, log) as url:
        config = {"backend": "ags", "workdir": "/testbed", "options": {**options, "endpoint": url}}
        wall, lifetimes, errors = run_all(config, args.count, args.concurrency)
        refused, requests = refusals(url)
    bound = args.count / args.start_qps + alone
    # The emulator relaunches an instance's envd when bubblewrap's setup raced a host mount
    # (Docker starting containers on this host); counted, not hidden.
    relaunched = log.read_text().count("raced a host mount")
    return {
        "relaunched": relaunched,
        "limit": f"StartSandboxInstance {args.start_qps:g}/s (others: AGS's documented table)",
        "wall": wall,
        "bound": bound,
        "alone": alone,
        "lifetimes": lifetimes,
        "errors": errors,
        "refused": refused,
        "requests": requests,
    }


def bench_kubernetes(args: argparse.Namespace, log: Path) -> dict[str, Any]:
    def run_emulator(name: str, *extra: str) -> tuple[list[str], dict[str, Any]]:
        # One kubeconfig per emulator: the backend keeps its client per kubeconfig.
        kubeconfig = log.parent / f"kubeconfig-{name}"
        argv = ["kubernetes", "emulator", "--port", "0", "--offline-images"]
        return [*argv, "--kubeconfig", str(kubeconfig), *extra], {"kubeconfig": str(kubeconfig)}

    def config_for(options: dict[str, Any], quota: bool) -> dict[str, Any]:
        extra = {"api_qps": args.qps, "api_burst": args.burst} if quota else {}
        return {
            "backend": "kubernetes",
            "image": args.image,
            "workdir": "/testbed",
            "options": {**options, **extra},
        }

    argv, options = run_emulator("alone")
    with emulator_process(argv, log):
        alone = statistics.median(use_one(config_for(options, False), -i) for i in range(1, 4))
    argv, options = run_emulator("limited", "--rate-limit", f"*={args.qps:g}:{args.burst}")
    with emulator_process(argv, log):
        wall, lifetimes, errors = run_all(config_for(options, True), args.count, args.concurrency)
    counts = [line for line in log.read_text().splitlines() if "requests admitted" in line]
    admitted = refused = 0
    if counts:
        found = re.search(r"(\d+) requests admitted, (\d+) refused", counts[-1])
        if found:
            admitted, refused = int(found.group(1)), int(found.group(2))
    requests = admitted + refused
    bound = max(0, admitted - args.burst) / args.qps + alone
    return {
        "limit": f"every request {args.qps:g}/s, burst {args.burst}, per client",
        "wall": wall,
        "bound": bound,
        "alone": alone,
        "lifetimes": lifetimes,
        "errors": errors,
        "refused": refused,
        "requests": requests,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("ags", "kubernetes"), default="ags")
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--start-qps", type=float, default=5.0, help="ags: StartSandboxInstance")
    parser.add_argument("--qps", type=float, default=5.0, help="kubernetes: per-client QPS")
    parser.add_argument("--burst", type=int, default=10, help="kubernetes: per-client burst")
    parser.add_argument("--image", default="sandbox-runtime-test/base:bookworm")
    args = parser.parse_args()
    # Absorbed refusals are logged as warnings, one per refusal: counted below instead.
    logging.basicConfig(level=logging.ERROR)
    work = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    run: Callable[[argparse.Namespace, Path], dict[str, Any]]
    run = bench_ags if args.backend == "ags" else bench_kubernetes
    cpus = os.cpu_count()
    print(f"{args.backend}: {args.count} sandboxes, {args.concurrency} at once (cpus {cpus})")
    result = run(args, work / "emulator.log")
    lifetimes = result["lifetimes"]
    print(f"limit: {result['limit']}")
    print(f"one sandbox alone, no limit (median of 3): {result['alone']:.2f}s")
    print(f"bound: {result['bound']:.1f}s   wall: {result['wall']:.1f}s   "
          f"ratio: {result['wall'] / result['bound']:.3f}")  # fmt: skip
    print(f"errors surfaced: {result['errors']}   refusals absorbed: {result['refused']} "
          f"of {result['requests']} requests the emulator answered")  # fmt: skip
    if "relaunched" in result:
        print(f"instance envd launches repeated after a host bwrap race: {result['relaunched']}")
    if lifetimes:
        lifetimes.sort()
        print(f"sandbox start-to-stop: median {statistics.median(lifetimes):.2f}s, "
              f"max {lifetimes[-1]:.2f}s")  # fmt: skip
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
