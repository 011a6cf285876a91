"""What auditable rewards cost: the tamper check, and grading in a fresh sandbox.

- tamper check: ``take_baseline`` (one command, and the backend's mark) + ``check`` (the
  backend's answer, no command) on a prepared bundled task,
  against one ``exec("true")`` round trip on the same sandbox;
- grading place: the ten bundled tasks with the oracle agent, ``--grade-in same`` against
  ``--grade-in fresh``, wall time and the runs' own accounting (sandbox-seconds, commands).

Usage: ``python benchmarks/bench_audit.py [--backend local|docker] [--rounds 20] [-j 2]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.swe import read_rows, tamper
from sandbox_runtime.swe.agents import make_agent
from sandbox_runtime.swe.dataset import load_rows
from sandbox_runtime.swe.prepare import prepare
from sandbox_runtime.swe.report import run_accounting
from sandbox_runtime.swe.runner import Runner, RunOptions, task_sandbox_config


def bench_check(backend: str, rounds: int) -> None:
    tasks = read_rows(load_rows("bundled")).tasks
    task = next(t for t in tasks if t.format == "r2e")
    with SandboxRuntime(task_sandbox_config(task, RunOptions(backend=backend))) as sandbox:
        prepare(task, sandbox)
        sandbox.base_commit(refresh=True)
        checks, trues = [], []
        for _ in range(rounds):
            began = time.perf_counter()
            baseline = tamper.take_baseline(sandbox, task)
            found = sandbox.tree_changes(baseline.mark)
            tamper.check(task, sandbox.workdir, baseline, found)
            checks.append(time.perf_counter() - began)
            began = time.perf_counter()
            sandbox.exec("true")
            trues.append(time.perf_counter() - began)
        print(f"site dirs searched: {len(baseline.site_dirs)}")
    print(
        f"tamper baseline + check: median {statistics.median(checks) * 1e3:.1f} ms "
        f"(one exec round trip: {statistics.median(trues) * 1e3:.1f} ms)"
    )


def bench_grading(backend: str, jobs: int) -> None:
    tasks = read_rows(load_rows("bundled")).tasks
    for where in ("same", "fresh"):
        options = RunOptions(backend=backend, jobs=jobs, grade_in=where)
        began = time.perf_counter()
        outcomes = Runner(tasks, lambda: make_agent("oracle"), options).run()
        wall = time.perf_counter() - began
        used = run_accounting(outcomes)
        rewards = sorted({o.reward for o in outcomes}, key=str)
        print(
            f"grade-in {where:<5}: {wall:6.1f}s wall for {len(tasks)} tasks (-j {jobs}), "
            f"{used['sandboxes']} sandboxes, {used['sandbox_seconds']:.1f} sandbox-seconds, "
            f"{used['commands']} commands, rewards {rewards}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", default="local")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("-j", "--jobs", type=int, default=2)
    args = parser.parse_args()
    bench_check(args.backend, args.rounds)
    bench_grading(args.backend, args.jobs)


if __name__ == "__main__":
    main()
