"""Subcommand ``replay``: grade a run's trajectories again and say where the rewards differ.

``sandbox-runtime replay TRAJECTORIES.jsonl [--backend B] [-j N]`` opens a fresh sandbox per
record on any backend, applies the recorded final patch (``--actions``: runs the recorded
tool calls again), grades it, and prints recorded against replayed rewards with both
reasons; ``--report`` writes the same as JSON.  Exit code 1 when any record disagrees or
could not be replayed (see :mod:`sandbox_runtime.swe.replay`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from sandbox_runtime.cli._args import (
    backend_options,
    positive_float,
    positive_int,
    price,
    price_for,
    run_interruptibly,
)
from sandbox_runtime.errors import ConfigError

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add ``replay`` to the top-level parser."""
    replay = subparsers.add_parser(
        "replay",
        help="grade a run's trajectories again in fresh sandboxes and compare the rewards",
        description=(
            "For each trajectory record: a fresh sandbox, the recorded final patch applied, "
            "the task graded again; a table (and --report JSON) of agreements and "
            "disagreements. Exit code 1 on any disagreement or record that could not be "
            "replayed."
        ),
    )
    replay.add_argument("trajectories", type=Path, metavar="TRAJECTORIES.jsonl")
    replay.add_argument(
        "--backend", help="sandbox backend (default: the one that recorded the trajectories)"
    )
    replay.add_argument(
        "--backend-option", action="append", default=[], metavar="KEY=VALUE", help="as for run"
    )
    replay.add_argument("-j", "--jobs", type=positive_int, default=1, help="records at once")
    replay.add_argument(
        "--actions",
        action="store_true",
        help="run the recorded tool calls again in order instead of applying the final patch",
    )
    replay.add_argument(
        "--tasks", metavar="SOURCE", help="task source for records that carry no task row"
    )
    replay.add_argument("--report", type=Path, help="write the JSON report here")
    replay.add_argument(
        "--price",
        type=price,
        action="append",
        metavar="[BACKEND=]RATE",
        help="price of one sandbox-second, as for run",
    )
    replay.add_argument("--test-timeout", type=positive_float, default=300.0)
    replay.add_argument("--step-timeout", type=positive_float, default=120.0)
    replay.add_argument("--base-image", help="base image of the bundled samples' Docker images")
    replay.add_argument("--quiet", action="store_true", help="no table")
    replay.set_defaults(handler=_replay)


def _backend(records: list[dict[str, Any]], chosen: str | None) -> str:
    if chosen:
        return chosen
    recorded = sorted({str(record.get("backend") or "") for record in records} - {""})
    if len(recorded) != 1:
        raise ConfigError(
            "the records name "
            + (f"several backends ({', '.join(recorded)})" if recorded else "no backend")
            + ": choose one with --backend"
        )
    return recorded[0]


def _replay(args: argparse.Namespace) -> int:
    from sandbox_runtime.cli._tasks import load_tasks
    from sandbox_runtime.swe.dataset import DatasetError
    from sandbox_runtime.swe.progress import Progress
    from sandbox_runtime.swe.replay import (
        read_trajectories,
        replay_agent,
        replay_results,
        replay_summary,
        replay_table,
        tasks_of,
    )
    from sandbox_runtime.swe.report import run_accounting
    from sandbox_runtime.swe.runner import Runner, RunOptions

    records = read_trajectories(args.trajectories)
    if not records:
        raise ConfigError(f"{args.trajectories}: no records")
    backend = _backend(records, args.backend)
    options_for_backend = backend_options(backend, args.backend_option)
    known = None
    if args.tasks:
        try:
            known = {task.task_id: task for task in load_tasks([args.tasks], None, "train").tasks}
        except DatasetError as exc:
            raise ConfigError(str(exc)) from exc
    tasks = tasks_of(records, known)
    options = RunOptions(
        backend=backend,
        jobs=args.jobs,
        step_timeout=args.step_timeout,
        test_timeout=args.test_timeout,
        base_image=args.base_image,
        backend_options=options_for_backend,
        grade_in="same",  # the replay sandbox is fresh and holds only what is replayed
        price=price_for(backend, args.price),
    )
    progress = Progress(len(tasks), enabled=not args.quiet)
    runner = Runner(
        tasks,
        replay_agent(records, actions=args.actions),
        options,
        on_done=lambda o: progress.update(
            o.task_id, o.reward, o.reason, o.total_time, bool(o.error)
        ),
        agent_name="replay-actions" if args.actions else "replay-patch",
    )
    outcomes = run_interruptibly(runner, progress)
    if outcomes is None:
        return 130
    progress.close()
    results = replay_results(records, outcomes)
    if not args.quiet:
        print(replay_table(results))
    summary = replay_summary(results)
    if args.report:
        document = {
            "trajectories": str(args.trajectories),
            "backend": backend,
            "replayed": "actions" if args.actions else "final patch",
            "run_id": runner.run_id,
            "summary": summary,
            "accounting": run_accounting(outcomes),
            "records": [result.to_dict() for result in results],
        }
        args.report.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return 1 if summary["disagree"] or summary["error"] else 0
