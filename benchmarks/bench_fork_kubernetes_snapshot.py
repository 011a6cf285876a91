"""Kubernetes fork of 8 on the snapshot path against the archive path and 8 fresh starts
(issue 31 item 6): one interleaved run through the Kubernetes emulator.

    python benchmarks/bench_fork_kubernetes_snapshot.py [--rounds 3] [--copies 8] [--files 2000]

The emulator gets a default VolumeSnapshotClass, so both checkpoint methods can run side by
side. Two source sandboxes hold the same tree (``--files`` generated modules under
``/testbed/tree``): one with ``checkpoint_method=archive`` (a fork is a checkpoint read as tar
into the client's store, then each copy a fresh pod plus an archive restore) and one with
``snapshot`` (a ``VolumeSnapshot`` of the workdir's claim, then each copy a pod on a claim
restored from it). The third side starts ``--copies`` fresh sandboxes of the image at once,
with no state: what starting copies costs before any state is brought in. Each side is timed
from the call to every copy running; one copy's tree is checked. Rounds rotate the sides'
order, so a load change on the shared machine hits all three. Commands run through
``pods/exec`` (agent off) on every side.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench_fork import _GENERATE, _row

from sandbox_runtime import SandboxConfig, SandboxRuntime

IMAGE = "sandbox-runtime-test/base:bookworm"


def _config(options: dict[str, Any], method: str) -> SandboxConfig:
    return SandboxConfig(
        backend="kubernetes",
        image=IMAGE,
        workdir="/testbed",
        lifetime=3600,
        options={**options, "agent": "off", "checkpoint_method": method},
    )


def fork_side(source: SandboxRuntime, copies: int, files: int) -> float:
    began = time.monotonic()
    results = source.fork(copies)
    started = [result.unwrap() for result in results]
    took = time.monotonic() - began
    try:
        count = started[-1].exec("find tree -name '*.py' | wc -l", check=True).stdout.strip()
        if count != str(files):
            raise SystemExit(f"a copy has {count} modules, not {files}")
    finally:
        for copy in started:
            copy.close()
    return took


def fresh_side(config: SandboxConfig, copies: int) -> float:
    def one(_: int) -> SandboxRuntime:
        sandbox = SandboxRuntime(config)
        sandbox.start()
        return sandbox

    began = time.monotonic()
    with ThreadPoolExecutor(copies) as pool:
        started = list(pool.map(one, range(copies)))
    took = time.monotonic() - began
    for sandbox in started:
        sandbox.close()
    return took


def main() -> None:
    from sandbox_runtime_emulators.kubernetes import KubernetesEmulator

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--copies", type=int, default=8)
    parser.add_argument("--files", type=int, default=2000)
    args = parser.parse_args()
    store = Path(tempfile.mkdtemp(prefix="bench-k8s-snap-"))
    timings: defaultdict[str, list[float]] = defaultdict(list)
    with KubernetesEmulator() as emulator:
        emulator.add_snapshot_class()
        options = {**emulator.backend_options(), "checkpoint_dir": str(store)}
        print(f"cpus: {os.cpu_count()}, files: {args.files}, copies: {args.copies}, "
              f"load: {os.getloadavg()[0]:.1f}")  # fmt: skip
        sources = {}
        for method in ("archive", "snapshot"):
            source = SandboxRuntime(_config(options, method))
            source.start()
            source.write_text("gen.py", _GENERATE)
            source.exec(f"python3 gen.py tree {args.files}", check=True, timeout=1800)
            sources[method] = source
        fresh = f"{args.copies} fresh starts (no state)"
        sides: list[tuple[str, Callable[[], float]]] = [
            (fresh, lambda: fresh_side(_config(options, "archive"), args.copies)),
            (
                f"fork {args.copies}, archive path (fresh pods + restore)",
                lambda: fork_side(sources["archive"], args.copies, args.files),
            ),
            (
                f"fork {args.copies}, snapshot path (claims from a VolumeSnapshot)",
                lambda: fork_side(sources["snapshot"], args.copies, args.files),
            ),
        ]
        try:
            for index in range(args.rounds):
                order = sides[index % 3 :] + sides[: index % 3]
                for name, side in order:
                    timings[name].append(side())
                    print(f"round {index + 1}: {name}: {timings[name][-1]:.2f} s", flush=True)
        finally:
            for source in sources.values():
                source.close()
        baseline = statistics.median(timings[fresh])
        for name, values in timings.items():
            print(_row(name, values, None if name == fresh else baseline))
        print(f"load after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
