"""Checkpoint and rollback on the ``ags`` backend through the AGS emulator (issue 22).

    python benchmarks/bench_fork_ags.py [--rounds 3] [--files 10000] [--copies 4]
                                        [--emulator-backend local|docker]

One interleaved run against a local AGS emulator: a sandbox (cloud control plane) holds a
generated tree of ``--files`` Python modules in its workdir; each round times, in turns,

- a plain copy of the tree inside the sandbox (``cp -a tree tree.copy``, then removed),
- ``checkpoint()`` (``CreateSandboxSnapshot``) and ``rollback()`` to it after a change
  (``StartSandboxInstance`` with the ``SnapshotId``, the old instance stopped), checked by
  content (the changed file is back, the module count is right).

And the fork question: ``fork(n)`` (one snapshot, ``n`` starts from it) against ``n``
``StartSandboxInstance`` calls with ``SourceInstanceId`` (a clone of the running source each,
each until ``RUNNING``).  Prints one table.  What the emulator keeps is files only, taken from
the instance's sandbox (``local``: a tar of its root; ``docker``: ``docker commit``); the real
service's figures will differ (see docs/performance.md).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from sandbox_runtime import SandboxConfig, SandboxRuntime, delete_checkpoint
from sandbox_runtime_emulators.ags.server import AgsEmulator

IMAGE = "sandbox-runtime-test/base:bookworm"

# Writes $2 modules of a dozen small functions under $1, 500 per package directory.
_GENERATE = r"""
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
body = "".join(
    f"def f{j}(x, y=1):\n    total = 0\n    for i in range(x):\n"
    f"        total += (i * {j}) % (y + 7)\n    return [total, {{'k{j}': total}}]\n\n"
    for j in range(12)
)
for i in range(n):
    d = os.path.join(root, f"pkg{i // 500}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"mod{i}.py"), "w") as f:
        f.write(f"# module {i}\n" + body)
"""


def _count(sandbox: SandboxRuntime, files: int) -> None:
    found = sandbox.exec("find tree -name '*.py' | wc -l", check=True).stdout.strip()
    if found != str(files):
        raise SystemExit(f"{sandbox.id}: expected {files} modules, found {found}")


def plain_copy(sandbox: SandboxRuntime) -> float:
    """Seconds of ``cp -a`` of the tree inside the sandbox (the copy removed afterwards)."""
    began = time.monotonic()
    sandbox.exec("cp -a tree tree.copy", check=True)
    elapsed = time.monotonic() - began
    sandbox.exec("rm -rf tree.copy", check=True)
    return elapsed


def checkpoint_rollback(sandbox: SandboxRuntime, files: int) -> tuple[float, float]:
    """Seconds of one checkpoint, and of one rollback to it after a change."""
    began = time.monotonic()
    checkpoint = sandbox.checkpoint()
    taken = time.monotonic() - began
    sandbox.write_text("tree/pkg0/mod0.py", "changed\n")
    began = time.monotonic()
    sandbox.rollback(checkpoint)
    rolled = time.monotonic() - began
    if sandbox.read_text("tree/pkg0/mod0.py") == "changed\n":
        raise SystemExit("rollback did not restore the tree")
    _count(sandbox, files)
    delete_checkpoint(checkpoint, options=sandbox.config.options)
    return taken, rolled


def fork_by_snapshot(source: SandboxRuntime, copies: int, files: int) -> float:
    """Seconds of ``fork(copies)``: one snapshot, ``copies`` starts from it."""
    began = time.monotonic()
    results = source.fork(copies)
    elapsed = time.monotonic() - began
    sandboxes = [result.unwrap() for result in results]
    try:
        for sandbox in sandboxes:
            _count(sandbox, files)
    finally:
        for sandbox in sandboxes:
            sandbox.close()
    return elapsed


def clone_by_source(source: SandboxRuntime, copies: int) -> float:
    """Seconds of ``copies`` ``StartSandboxInstance(SourceInstanceId)`` calls, at once."""
    client = source.backend._cloud_client()  # type: ignore[attr-defined]
    tool = source.backend.options.tool_name

    def one(_: int) -> str:
        info = client.start_instance(
            tool_name=tool,
            timeout="600s",
            client_token=uuid.uuid4().hex,
            source_instance_id=source.id,
        )
        while info.status != "RUNNING":
            time.sleep(0.2)
            info = client.describe_instance(info.instance_id)
        return str(info.instance_id)

    began = time.monotonic()
    with ThreadPoolExecutor(max_workers=copies) as pool:
        started = list(pool.map(one, range(copies)))
    elapsed = time.monotonic() - began
    for instance_id in started:
        client.stop_instance(instance_id)
    return elapsed


def _row(name: str, values: list[float], against: float | None = None) -> str:
    median = statistics.median(values)
    ratio = f"{median / against:.2f}x" if against else ""
    runs = ", ".join(f"{value:.2f}" for value in values)
    return f"{name:<58} {median:>8.2f}s {ratio:>7}   [{runs}]"


def run(args: argparse.Namespace, timings: dict[str, list[float]]) -> None:
    isolation = "namespace" if args.emulator_backend == "local" else None
    with AgsEmulator(
        backend=args.emulator_backend, local_isolation=isolation, default_image=IMAGE
    ) as emulator:
        config = SandboxConfig(
            backend="ags",
            workdir="/testbed",
            lifetime=1800,
            start_timeout=600,
            options=emulator.backend_options(),
        )
        with SandboxRuntime(config) as sandbox:
            sandbox.write_text("gen.py", _GENERATE)
            sandbox.exec(f"python3 gen.py tree {args.files}", check=True)
            _count(sandbox, args.files)
            sides: list[tuple[str, Callable[[], None]]] = [
                ("copy", lambda: timings["plain copy in the sandbox"].append(plain_copy(sandbox))),
                ("checkpoint", lambda: _record(timings, *checkpoint_rollback(sandbox, args.files))),
            ]
            for round_index in range(args.rounds):
                for _name, side in sides if round_index % 2 == 0 else sides[::-1]:
                    side()
            forks: list[tuple[str, Callable[[], float]]] = [
                (
                    f"fork {args.copies} (snapshot + SnapshotId starts)",
                    lambda: fork_by_snapshot(sandbox, args.copies, args.files),
                ),
                (
                    f"{args.copies} SourceInstanceId clones",
                    lambda: clone_by_source(sandbox, args.copies),
                ),
            ]
            for round_index in range(args.rounds):
                for name, fork_side in forks if round_index % 2 == 0 else forks[::-1]:
                    timings.setdefault(name, []).append(fork_side())


def _record(timings: dict[str, list[float]], taken: float, rolled: float) -> None:
    timings["checkpoint (CreateSandboxSnapshot)"].append(taken)
    timings["rollback (start from SnapshotId, stop the old)"].append(rolled)
    timings["checkpoint + rollback"].append(taken + rolled)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--copies", type=int, default=4)
    parser.add_argument("--emulator-backend", choices=("local", "docker"), default="local")
    args = parser.parse_args()
    timings: dict[str, list[float]] = {
        "plain copy in the sandbox": [],
        "checkpoint (CreateSandboxSnapshot)": [],
        "rollback (start from SnapshotId, stop the old)": [],
        "checkpoint + rollback": [],
    }
    run(args, timings)
    print(
        f"cpus: {os.cpu_count()}, files: {args.files}, emulator instances: {args.emulator_backend}"
    )
    copy = statistics.median(timings["plain copy in the sandbox"])
    fork_name = f"fork {args.copies} (snapshot + SnapshotId starts)"
    for name, values in timings.items():
        against = None
        if name.startswith(("checkpoint", "rollback")):
            against = copy
        elif name.endswith("SourceInstanceId clones") and timings.get(fork_name):
            against = statistics.median(timings[fork_name])
        print(_row(name, values, against))


if __name__ == "__main__":
    main()
