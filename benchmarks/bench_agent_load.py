"""The load one in-sandbox agent holds: many commands at once on docker sandboxes.

    python benchmarks/bench_agent_load.py [--sandboxes 1] [--background 500] [--execs 500]
    python benchmarks/bench_agent_load.py --sandboxes 64 --background 200 --execs 0

Starts ``--sandboxes`` docker sandboxes with ``agent: on`` (``--agent`` to change it), then on
each, all at once: ``--background`` ``exec_background`` commands (``sleep --hold; echo i``,
each holding its connection to the agent for ``--hold`` seconds, so they all overlap), waited
for; then ``--execs`` short ``exec`` calls (``echo i``) from as many threads.  Every command's
output is checked.  A failure is a command that raised or answered something else; the run
prints each kind of failure once with its count, then the timings, and exits 1 if any failed.

It also prints the limits the agent runs under in the first sandbox (open files, processes,
listen backlog), the limits that a burst meets first (see docs/backends.md, "Load").
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import functools
import resource
import statistics
import sys
import threading
import time
from collections.abc import Callable

from sandbox_runtime import CommandHandle, ExecResult, SandboxConfig, SandboxRuntime

# The agent's own limits, read from inside the sandbox.
_LIMITS = (
    "p=$(pgrep -x sandbox-agent | head -n1); "
    "grep -E 'Max (open files|processes)' /proc/$p/limits; "
    'echo "somaxconn: $(cat /proc/sys/net/core/somaxconn)"; '
    'echo "pids.max: $(cat /sys/fs/cgroup/pids.max 2>/dev/null '
    '|| cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || echo unknown)"'
)


class Tally:
    """Failures by kind and per-command seconds, from many threads."""

    def __init__(self) -> None:
        self.failures: collections.Counter[str] = collections.Counter()
        self.seconds: list[float] = []
        self._lock = threading.Lock()

    def ok(self, seconds: float) -> None:
        with self._lock:
            self.seconds.append(seconds)

    def failed(self, why: str) -> None:
        with self._lock:
            self.failures[why[:200]] += 1

    def report(self, what: str, wall: float) -> None:
        done = sorted(self.seconds)
        failed = sum(self.failures.values())
        line = f"{what}: {len(done)} ok, {failed} failed, wall {wall:.2f}s"
        if done:  # for starts: each start's seconds; for commands: ExecResult.duration
            p99 = done[min(len(done) - 1, int(0.99 * len(done)))]
            line += f", each: median {statistics.median(done):.3f}s p99 {p99:.3f}s"
        print(line, flush=True)
        for why, count in self.failures.most_common():
            print(f"  {count} x {why}", flush=True)


def _checked(tally: Tally, call: Callable[[], ExecResult], expected: str) -> None:
    try:
        result = call()
    except Exception as exc:
        tally.failed(f"{type(exc).__name__}: {exc}")
        return
    if (result.exit_code, result.stdout) != (0, expected):
        tally.failed(f"exit {result.exit_code}, output {result.stdout!r} {result.stderr!r}")
    else:
        tally.ok(result.duration)


def background_burst(sandbox: SandboxRuntime, count: int, hold: float, tally: Tally) -> None:
    """``count`` background commands started at once, then each waited for and checked."""
    handles: list[tuple[int, CommandHandle]] = []
    for i in range(count):
        try:
            handles.append((i, sandbox.exec_background(f"sleep {hold}; echo {i}")))
        except Exception as exc:
            tally.failed(f"start: {type(exc).__name__}: {exc}")
    for i, handle in handles:
        _checked(tally, functools.partial(handle.wait, timeout=300), f"{i}\n")


def exec_burst(sandbox: SandboxRuntime, count: int, tally: Tally) -> None:
    """``count`` short ``exec`` calls from as many threads, released together."""
    gate = threading.Barrier(count)

    def one(i: int) -> None:
        gate.wait()
        _checked(tally, lambda: sandbox.exec(f"echo {i}", timeout=300), f"{i}\n")

    with concurrent.futures.ThreadPoolExecutor(max_workers=count) as pool:
        list(pool.map(one, range(count)))


def _start_all(image: str, agent: str, count: int, tally: Tally) -> list[SandboxRuntime]:
    """``count`` sandboxes, 16 starting at a time; a start that fails is counted, not fatal."""
    config = SandboxConfig(backend="docker", image=image, lifetime=1800, options={"agent": agent})
    started: list[SandboxRuntime] = []
    lock = threading.Lock()

    def start(_: int) -> None:
        sandbox = SandboxRuntime(config)
        began = time.monotonic()
        try:
            sandbox.start()
        except Exception as exc:
            tally.failed(f"{type(exc).__name__}: {exc}")
            return
        tally.ok(time.monotonic() - began)
        with lock:
            started.append(sandbox)

    with concurrent.futures.ThreadPoolExecutor(max_workers=min(16, count)) as pool:
        list(pool.map(start, range(count)))
    return started


def _each(sandboxes: list[SandboxRuntime], work: Callable[[SandboxRuntime], None]) -> float:
    began = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(sandboxes)) as pool:
        list(pool.map(work, sandboxes))
    return time.monotonic() - began


def _raise_open_file_limit() -> None:
    """Each running command holds a connection, one descriptor here: use the hard limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    print(f"client open files: {resource.getrlimit(resource.RLIMIT_NOFILE)[0]}", flush=True)


def main() -> int:
    """Run the bursts; exit 1 if any command failed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--image", default="sandbox-runtime-test/base:bookworm")
    parser.add_argument("--agent", default="on", choices=("on", "auto", "off"))
    parser.add_argument("--sandboxes", type=int, default=1)
    parser.add_argument("--background", type=int, default=500)
    parser.add_argument("--hold", type=float, default=2.0)
    parser.add_argument("--execs", type=int, default=500)
    args = parser.parse_args()
    _raise_open_file_limit()
    starts, background, execs = Tally(), Tally(), Tally()
    began = time.monotonic()
    sandboxes = _start_all(args.image, args.agent, args.sandboxes, starts)
    starts.report(f"{args.sandboxes} sandbox start(s)", time.monotonic() - began)
    try:
        if sandboxes:
            print(sandboxes[0].exec(_LIMITS).stdout, end="", flush=True)
        if args.background and sandboxes:
            wall = _each(
                sandboxes, lambda s: background_burst(s, args.background, args.hold, background)
            )
            background.report(f"{len(sandboxes)} x {args.background} exec_background", wall)
        if args.execs and sandboxes:
            wall = _each(sandboxes, lambda s: exec_burst(s, args.execs, execs))
            execs.report(f"{len(sandboxes)} x {args.execs} exec", wall)
    finally:
        with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
            list(pool.map(lambda s: s.close(), sandboxes))
    return 1 if starts.failures or background.failures or execs.failures else 0


if __name__ == "__main__":
    sys.exit(main())
