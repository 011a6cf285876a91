"""Kubernetes checkpoint and rollback against a plain copy in the pod (issue 22): one
interleaved run through the Kubernetes emulator.

    python benchmarks/bench_fork_kubernetes.py [--rounds 3] [--files 10000] [--agent on off]

A pod holds the tree of ``bench_fork.py`` (``--files`` generated Python modules under
``/testbed/tree``).  One side is this library's ``checkpoint`` (the workdir read as tar
through the agent or ``pods/exec`` into the client's archive store) and ``rollback`` to it
after a change (the workdir emptied, the tar extracted back); the other is ``cp -a`` of the
same tree inside the pod, once (the issue's baseline), and a copy-based checkpoint + rollback
(``cp -a`` out, then ``rm -rf`` and ``cp -a`` back), each one command timed from the client.
Rounds alternate the sides' order, so a load change on the shared machine hits both.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_fork import _GENERATE, _row

from sandbox_runtime import SandboxRuntime, delete_checkpoint

IMAGE = "sandbox-runtime-test/base:bookworm"


def _timed(sandbox: SandboxRuntime, command: str) -> float:
    began = time.monotonic()
    sandbox.exec(command, check=True, timeout=1800)
    return time.monotonic() - began


def copy_side(sandbox: SandboxRuntime, timings: dict[str, list[float]], mode: str) -> None:
    """``cp -a`` once; then a copy-based checkpoint + rollback (out, then back)."""
    timings[f"{mode}: cp -a of the tree in the pod"].append(_timed(sandbox, "cp -a tree /tmp/c1"))
    sandbox.exec("rm -rf /tmp/c1", check=True)
    out = _timed(sandbox, "cp -a /testbed /tmp/save")
    sandbox.write_text("tree/pkg0/mod0.py", "changed\n")
    back = _timed(sandbox, "rm -rf /testbed/* && cp -a /tmp/save/. /testbed/")
    if sandbox.read_text("tree/pkg0/mod0.py") == "changed\n":
        raise SystemExit("the copy-based rollback did not restore the tree")
    sandbox.exec("rm -rf /tmp/save", check=True)
    timings[f"{mode}: cp -a out + rm, cp -a back"].append(out + back)


def checkpoint_side(sandbox: SandboxRuntime, timings: dict[str, list[float]], mode: str) -> None:
    """One checkpoint, a change, one rollback; the tree is checked after it."""
    began = time.monotonic()
    checkpoint = sandbox.checkpoint()
    taken = time.monotonic() - began
    sandbox.write_text("tree/pkg0/mod0.py", "changed\n")
    began = time.monotonic()
    sandbox.rollback(checkpoint)
    rolled = time.monotonic() - began
    if sandbox.read_text("tree/pkg0/mod0.py") == "changed\n":
        raise SystemExit("the rollback did not restore the tree")
    delete_checkpoint(checkpoint, options=sandbox.config.options)
    timings[f"{mode}: checkpoint"].append(taken)
    timings[f"{mode}: rollback"].append(rolled)
    timings[f"{mode}: checkpoint + rollback"].append(taken + rolled)
    if checkpoint.size_bytes:
        timings["archive MB"].append(checkpoint.size_bytes / 1e6)


def run(options: dict[str, Any], files: int, rounds: int, agent: str) -> dict[str, list[float]]:
    timings: defaultdict[str, list[float]] = defaultdict(list)
    mode = f"agent {agent}"
    config = {
        "backend": "kubernetes",
        "image": IMAGE,
        "workdir": "/testbed",
        "lifetime": 3600,
        "options": {**options, "agent": agent},
    }
    with SandboxRuntime(**config) as sandbox:
        sandbox.write_text("gen.py", _GENERATE)
        sandbox.exec(f"python3 gen.py tree {files}", check=True)
        count = sandbox.exec("find tree -name '*.py' | wc -l", check=True).stdout.strip()
        if count != str(files):
            raise SystemExit(f"expected {files} modules, found {count}")
        sides: list[Callable[[], None]] = [
            lambda: copy_side(sandbox, timings, mode),
            lambda: checkpoint_side(sandbox, timings, mode),
        ]
        for index in range(rounds):
            for side in sides if index % 2 == 0 else sides[::-1]:
                side()
    return timings


def main() -> None:
    from sandbox_runtime_emulators.kubernetes import KubernetesEmulator

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--agent", nargs="+", default=["on", "off"], choices=["on", "off"])
    args = parser.parse_args()
    store = Path(tempfile.mkdtemp(prefix="bench-k8s-ckpt-"))
    with KubernetesEmulator() as emulator:
        options = {**emulator.backend_options(), "checkpoint_dir": str(store)}
        print(f"cpus: {os.cpu_count()}, files: {args.files}, load: {os.getloadavg()[0]:.1f}")
        for agent in args.agent:
            timings = run(options, args.files, args.rounds, agent)
            baseline = f"agent {agent}: cp -a of the tree in the pod"
            copy = statistics.median(timings[baseline])
            for name, values in timings.items():
                if name == "archive MB":
                    print(f"{'archive size (MB)':<52} {statistics.median(values):>8.1f}")
                    continue
                against = None if name == baseline else copy
                print(_row(name, values, against))
        print(f"load after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
