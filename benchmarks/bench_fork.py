"""Fork and checkpoint against doing the work again (issue 22): one interleaved run.

    python benchmarks/bench_fork.py [--rounds 2] [--copies 8] [--files 10000] [--skip-docker]
                                    [--local-dir /mnt/xfs --local-dir /mnt/btrfs ...]

docker fork: a source sandbox is prepared with real work (a generated tree of ``--files``
Python modules, then ``python3 -m compileall`` over it, as a repository's build would), then
forked ``--copies`` times; against it, ``--copies`` fresh sandboxes started at once, each
doing the same setup.  Every copy's tree is checked (module and ``.pyc`` counts) before the
time counts.  docker checkpoint: the same source, ``checkpoint`` then ``rollback`` after a
one-file change, against ``cp -a`` of the tree inside the container.  local: a sandbox
holding the same tree (no compile) on each filesystem (the default base directory, and each
``--local-dir``), ``checkpoint`` then ``rollback`` after a one-file change, against ``cp -a``
of the tree on the host.  Rounds alternate the order of the sides, so a load change on the
(shared) machine hits both.  Prints one table.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sandbox_runtime import Checkpoint, SandboxRuntime, delete_checkpoint

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
_COUNT = "find tree -name '*.py' | wc -l; find tree -name '*.pyc' | wc -l"


def _setup(sandbox: SandboxRuntime, files: int) -> float:
    began = time.monotonic()
    sandbox.write_text("gen.py", _GENERATE)
    sandbox.exec(f"python3 gen.py tree {files} && python3 -m compileall -q tree", check=True)
    return time.monotonic() - began


def _check(sandbox: SandboxRuntime, files: int) -> None:
    counts = sandbox.exec(_COUNT, check=True).stdout.split()
    if counts != [str(files), str(files)]:
        raise SystemExit(f"{sandbox.id}: expected {files} modules and .pyc, got {counts}")


def _config(lifetime: float = 1800) -> dict[str, object]:
    return {"backend": "docker", "image": IMAGE, "workdir": "/testbed", "lifetime": lifetime}


def docker_fork(copies: int, files: int, source: SandboxRuntime) -> float:
    """Seconds from the prepared source to ``copies`` started, checked forks."""
    began = time.monotonic()
    results = source.fork(copies)
    elapsed = time.monotonic() - began
    sandboxes = [result.unwrap() for result in results]
    try:
        for sandbox in sandboxes:
            _check(sandbox, files)
    finally:
        for sandbox in sandboxes:
            sandbox.close()
    return elapsed


def docker_fresh(copies: int, files: int) -> float:
    """Seconds for ``copies`` fresh sandboxes started at once, each doing the setup."""

    def one(_: int) -> SandboxRuntime:
        sandbox = SandboxRuntime(**_config()).start()
        _setup(sandbox, files)
        return sandbox

    began = time.monotonic()
    with ThreadPoolExecutor(max_workers=copies) as pool:
        sandboxes = list(pool.map(one, range(copies)))
    elapsed = time.monotonic() - began
    try:
        for sandbox in sandboxes:
            _check(sandbox, files)
    finally:
        for sandbox in sandboxes:
            sandbox.close()
    return elapsed


def checkpoint_rollback(
    sandbox: SandboxRuntime, cpu: list[float] | None = None
) -> tuple[float, float]:
    """Seconds of one checkpoint, and of one rollback to it after a one-file change.

    ``cpu`` gets the CPU seconds of the two calls together (local: all in this process).
    """
    spent: list[float] = []
    began = time.monotonic()
    with _cpu(spent):
        checkpoint = sandbox.checkpoint()
    taken = time.monotonic() - began
    sandbox.write_text("tree/pkg0/mod0.py", "changed\n")
    began = time.monotonic()
    with _cpu(spent):
        sandbox.rollback(checkpoint)
    rolled = time.monotonic() - began
    if cpu is not None:
        cpu.append(sum(spent))
    if sandbox.read_text("tree/pkg0/mod0.py") == "changed\n":
        raise SystemExit(f"{sandbox.config.backend} rollback did not restore the tree")
    if sandbox.config.backend == "local":
        delete_checkpoint(checkpoint, options=sandbox.config.options)
    else:  # docker: the rolled-back container runs from the checkpoint's image
        _docker_leftovers.append(checkpoint)
    return taken, rolled


_docker_leftovers: list[Checkpoint] = []


def container_copy(sandbox: SandboxRuntime) -> float:
    """Seconds of ``cp -a`` of the tree inside the sandbox (timed inside, no exec overhead)."""
    done = sandbox.exec(
        "python3 -c 'import subprocess, time; began = time.monotonic(); "
        'subprocess.run(["cp", "-a", "tree", "tree.copy"], check=True); '
        "print(time.monotonic() - began)' && rm -rf tree.copy",
        check=True,
    )
    return float(done.stdout.strip())


@contextlib.contextmanager
def _cpu(into: list[float]) -> Iterator[None]:
    """Append the CPU seconds (user + system, this process and its children) of the block.

    On a machine shared with other work, wall time spreads widely; CPU time is what each
    side itself costs (it leaves out time spent waiting for the disk).
    """

    def spent() -> float:
        own, children = (
            resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
        )
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

    began = spent()
    yield
    into.append(spent() - began)


def host_copy(source: Path, cpu: list[float]) -> float:
    target = source.parent / f"copy-{time.monotonic_ns()}"
    began = time.monotonic()
    with _cpu(cpu):
        subprocess.run(["cp", "-a", "--", str(source), str(target)], check=True)
    elapsed = time.monotonic() - began
    shutil.rmtree(target)
    return elapsed


def _filesystem(path: Path) -> str:
    done = subprocess.run(["df", "--output=fstype", str(path)], capture_output=True, text=True)
    return done.stdout.split()[-1] if done.returncode == 0 else "unknown"


def _row(name: str, values: list[float], against: float | None = None) -> str:
    median = statistics.median(values)
    ratio = f"{median / against:.2f}x" if against else ""
    runs = ", ".join(f"{value:.2f}" for value in values)
    return f"{name:<52} {median:>8.2f}s {ratio:>7}   [{runs}]"


def run_local(
    rounds: int, files: int, timings: dict[str, list[float]], parent: Path | None
) -> None:
    base = Path(tempfile.mkdtemp(prefix="bench-fork-", dir=parent))
    fs = _filesystem(base)
    sandbox = SandboxRuntime(backend="local", options={"base_dir": base / "sandboxes"}).start()
    try:
        sandbox.write_text("gen.py", _GENERATE)
        sandbox.exec(f"python3 gen.py tree {files}", check=True)
        tree = sandbox.backend.root / sandbox.workdir.lstrip("/") / "tree"  # type: ignore[attr-defined]
        copies = timings[f"local {fs}: cp -a of the tree"]
        copies_cpu = timings[f"local {fs}: cp -a of the tree, CPU"]
        ours_cpu = timings[f"local {fs}: checkpoint + rollback, CPU"]
        for round_index in range(rounds):
            if round_index % 2 == 0:
                copies.append(host_copy(tree, copies_cpu))
            taken, rolled = checkpoint_rollback(sandbox, ours_cpu)
            if round_index % 2 == 1:
                copies.append(host_copy(tree, copies_cpu))
            timings[f"local {fs}: checkpoint"].append(taken)
            timings[f"local {fs}: rollback"].append(rolled)
            timings[f"local {fs}: checkpoint + rollback"].append(taken + rolled)
    finally:
        sandbox.close()
        shutil.rmtree(base, ignore_errors=True)


def run_docker(rounds: int, copies: int, files: int, timings: dict[str, list[float]]) -> None:
    with SandboxRuntime(**_config()) as source:
        timings["docker: setup of the source"].append(_setup(source, files))
        _check(source, files)
        sides: list[tuple[str, Callable[[], float]]] = [
            (
                f"docker: fork {copies} (checkpoint + {copies} starts)",
                lambda: docker_fork(copies, files, source),
            ),
            (f"docker: {copies} fresh starts + setup", lambda: docker_fresh(copies, files)),
        ]
        for round_index in range(rounds):
            order = sides if round_index % 2 == 0 else sides[::-1]
            for name, side in order:
                timings[name].append(side())
    with SandboxRuntime(**_config()) as plain:  # the same 10,000 modules, not compiled
        plain.write_text("gen.py", _GENERATE)
        plain.exec(f"python3 gen.py tree {files}", check=True)
        for round_index in range(rounds + 1):
            copied = container_copy(plain) if round_index % 2 == 0 else None
            taken, rolled = checkpoint_rollback(plain)
            if copied is None:
                copied = container_copy(plain)
            timings["docker: cp -a of the tree in the container"].append(copied)
            timings["docker: checkpoint"].append(taken)
            timings["docker: rollback"].append(rolled)
            timings["docker: checkpoint + rollback"].append(taken + rolled)
    for checkpoint in reversed(_docker_leftovers):  # newest first: each is the next's base
        try:
            delete_checkpoint(checkpoint)
        except Exception as exc:  # a leftover image is reaped later
            print(f"left {checkpoint.id}: {exc}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--copies", type=int, default=8)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--skip-docker", action="store_true")
    parser.add_argument(
        "--local-dir",
        type=Path,
        action="append",
        help="also measure local sandboxes here (e.g. an xfs or btrfs mount); repeatable",
    )
    args = parser.parse_args()
    timings: dict[str, list[float]] = defaultdict(list)
    for parent in [None, *(args.local_dir or [])]:
        run_local(args.rounds + 1, args.files, timings, parent)
    if not args.skip_docker:
        run_docker(args.rounds, args.copies, args.files, timings)
    print(f"cpus: {os.cpu_count()}, files: {args.files}, load: {os.getloadavg()}")
    fork_name = f"docker: fork {args.copies} (checkpoint + {args.copies} starts)"
    fresh = timings.get(f"docker: {args.copies} fresh starts + setup") or []
    for name, values in timings.items():
        against = None
        if name == fork_name and fresh:
            against = statistics.median(fresh)
        elif name.endswith(", CPU") and "checkpoint" in name:
            against = statistics.median(
                timings[name.replace("checkpoint + rollback", "cp -a of the tree")]
            )
        elif ": checkpoint" in name or name.endswith(": rollback"):
            baseline = name.split(":")[0] + (
                ": cp -a of the tree in the container"
                if name.startswith("docker")
                else ": cp -a of the tree"
            )
            against = statistics.median(timings[baseline])
        print(_row(name, values, against))


if __name__ == "__main__":
    main()
