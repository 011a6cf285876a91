"""What ``run --group N`` costs against N independent runs of the same tasks.

Both modes run the bundled tasks (or the first ``--tasks``) with the same agent and the
same ``-j``: *independent* runs every task N times over in one run (each rollout starts
and sets up its own sandbox, a freshly graded one a second), *group* runs
``GroupRunner`` with ``group=N`` (one setup per task, rollouts forked from its checkpoint
when a slot is free, fresh grading in another fork).  Rounds alternate which mode goes
first, so that load on a shared machine hits both alike; ``uptime``'s load is printed
with each round.  Printed per round and as medians: wall time, sandbox-seconds, sandboxes
(started / forked), setups, sandbox-wait on the critical path, and the ratios group /
independent; the rewards of both modes must agree (gold 1, null 0).

Usage: ``python benchmarks/bench_group.py [--backend docker] [--group 4] [-j 4]
[--rounds 2] [--agent oracle] [--tasks 10]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections import Counter
from typing import Any

from sandbox_runtime.swe import Task, read_rows
from sandbox_runtime.swe.agents import make_agent
from sandbox_runtime.swe.dataset import load_rows
from sandbox_runtime.swe.group import GroupRunner
from sandbox_runtime.swe.images import build_sample_image
from sandbox_runtime.swe.report import TaskOutcome, run_accounting, summary
from sandbox_runtime.swe.runner import Runner, RunOptions
from sandbox_runtime.swe.samples import sample_names

MODES = ("independent", "group")


def one_mode(mode: str, tasks: list[Task], args: argparse.Namespace) -> dict[str, Any]:
    """Run ``tasks`` in ``mode``; the figures this benchmark compares."""
    options = RunOptions(backend=args.backend, jobs=args.jobs, base_image=args.base_image)
    runner: Runner
    if mode == "group":
        options.group = args.group
        runner = GroupRunner(tasks, lambda: make_agent(args.agent), options)
    else:
        runner = Runner(tasks * args.group, lambda: make_agent(args.agent), options)
    began = time.monotonic()
    outcomes = runner.run()
    wall = time.monotonic() - began
    used = run_accounting(outcomes)
    return {
        "wall": wall,
        "sandbox_seconds": used["sandbox_seconds"],
        "sandboxes": used["sandboxes"],
        "forks": used["forks"],
        "starts": used["starts"],
        "pulls": used["pulls"],
        "wait": used["sandbox_wait_seconds"],
        "setups": summary(outcomes)["setups"],
        "rewards": _rewards(outcomes),
        "errors": sum(1 for o in outcomes if o.outcome == "error"),
    }


def _rewards(outcomes: list[TaskOutcome]) -> Counter[tuple[str, float | None]]:
    return Counter((o.task_id, o.reward) for o in outcomes)


def _load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def _line(mode: str, figures: dict[str, Any]) -> str:
    return (
        f"  {mode:<11} {figures['wall']:7.1f}s wall  {figures['sandbox_seconds']:8.1f} "
        f"sandbox-s  {figures['sandboxes']:3d} sandboxes ({figures['starts']} started, "
        f"{figures['forks']} forked, {figures['pulls']} pulls)  {figures['setups']:3d} setups  "
        f"{figures['wait']:6.1f}s waiting  {figures['errors']} errors"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", default="docker")
    parser.add_argument("--group", type=int, default=4)
    parser.add_argument("-j", "--jobs", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--agent", default="oracle", help="oracle (gold: 1) or null (0)")
    parser.add_argument("--tasks", type=int, default=0, help="the first N bundled tasks")
    parser.add_argument("--base-image", default=None, help="base of the samples' images")
    args = parser.parse_args()
    tasks = read_rows(load_rows("bundled")).tasks
    tasks = tasks[: args.tasks] if args.tasks else tasks
    if args.backend == "docker":
        for name in sample_names():
            build_sample_image(name, base=args.base_image)
    results: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    for index in range(args.rounds):
        order = MODES if index % 2 == 0 else MODES[::-1]
        print(f"round {index + 1}: load {_load()}")
        for mode in order:
            figures = one_mode(mode, tasks, args)
            results[mode].append(figures)
            print(_line(mode, figures), f"(load after: {_load()})")
    pairs = list(zip(results["group"], results["independent"], strict=True))
    ratios = {
        key: statistics.median(g[key] / i[key] for g, i in pairs if i[key]) if pairs else 0.0
        for key in ("sandbox_seconds", "wall", "wait")
    }
    same = all(g["rewards"] == i["rewards"] for g, i in pairs)
    print(
        f"{len(tasks)} task(s) x {args.group}, -j {args.jobs}, {args.backend}, agent "
        f"{args.agent}: group / independent = {ratios['sandbox_seconds']:.2f}x sandbox-seconds, "
        f"{ratios['wall']:.2f}x wall, {ratios['wait']:.2f}x sandbox wait (medians over "
        f"{args.rounds} round(s)); same rewards: {same}"
    )


if __name__ == "__main__":
    main()
