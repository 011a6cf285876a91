"""Subcommands ``run`` and ``tasks``.

``sandbox-runtime run TASKS --backend B --agent A -j N --report report.json --trajectories
t.jsonl`` is the main job (see :mod:`sandbox_runtime.swe.runner`); ``--ds-json ENTRY`` runs
one dataset entry as a smoke test and writes the report in Graph Planner's shape.
``sandbox-runtime tasks`` lists, converts, checks (:mod:`sandbox_runtime.cli._check`) and
exports task sets and builds sample images.

Imports here stay light: the runner, the agents and the optional packages load when a
command runs, not when the CLI is assembled.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sandbox_runtime.cli._args import (
    backend_options,
    count,
    positive_float,
    positive_int,
    price,
    price_for,
    run_interruptibly,
)
from sandbox_runtime.cli._check import add_check
from sandbox_runtime.cli._tasks import SOURCES_HELP, load_tasks
from sandbox_runtime.errors import ConfigError

if TYPE_CHECKING:
    from sandbox_runtime.swe.report import TaskOutcome
    from sandbox_runtime.swe.runner import RunOptions
    from sandbox_runtime.swe.task import Task

__all__ = ["register"]

_EPILOG = f"""\
task sources: {SOURCES_HELP}
example:      sandbox-runtime run bundled --backend local --agent oracle -j 2 --report report.json
config file:  --config run.toml with keys named as the flags (backend = "docker", jobs = 8,
              [backend-option] volumes = ["/data:/data"]); flags given here win
exit codes:   0 every task graded, 1 some task ended in an error (no reward), 2 bad input,
              130 interrupted
"""


def register(subparsers: Any) -> None:
    """Add ``run`` and ``tasks`` to the top-level parser."""
    _register_run(subparsers)
    _register_tasks(subparsers)


def _register_run(subparsers: Any) -> None:
    """``run``: its arguments by group, in the order ``--help`` lists them."""
    run = subparsers.add_parser(
        "run",
        help="run SWE tasks: a fresh sandbox per task, an agent, grading by the task's tests",
        description="Run SWE tasks in parallel sandboxes and grade them (reward 0 or 1).",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_what_to_run(run)
    _add_outputs(run)
    _add_task_selection(run)
    _add_limits(run)
    _add_run_settings(run)
    _add_agent_settings(run)
    run.add_argument("--quiet", action="store_true", help="no progress and no table")
    run.set_defaults(handler=_run, subparser=run)


def _add_what_to_run(run: argparse.ArgumentParser) -> None:
    """Task sources, the backend and the agent."""
    run.add_argument("tasks", nargs="*", metavar="TASKS", help="task sources (see below)")
    run.add_argument("--config", metavar="FILE", help="flags from a TOML or YAML file")
    run.add_argument("--ds-json", metavar="FILE", help="smoke mode: one dataset entry (JSON)")
    run.add_argument("--backend", default="local", help="sandbox backend (default: local)")
    run.add_argument(
        "--backend-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option of the backend (repeat); VALUE may be JSON, e.g. "
        "volumes='[\"/data:/data\"]'; never secrets, which belong in the environment",
    )
    run.add_argument("--agent", default="oracle", help="oracle | null | scripted | llm")
    run.add_argument("-j", "--jobs", type=positive_int, default=1, help="tasks run at once")


def _add_outputs(run: argparse.ArgumentParser) -> None:
    """Files the run writes: report, trajectories, predictions."""
    run.add_argument("--report", type=Path, help="write the JSON report here")
    run.add_argument("--trajectories", type=Path, help="write one JSONL record per task here")
    run.add_argument(
        "--predictions",
        type=Path,
        metavar="FILE",
        help="write SWE-bench predictions (.jsonl or .json) for the swebench harness",
    )


def _add_task_selection(run: argparse.ArgumentParser) -> None:
    """Which rows, read how, in which order."""
    run.add_argument(
        "--format", metavar="NAME", help="task format of the rows (default: detected per row)"
    )
    run.add_argument("--split", default="train", help="split of a Hugging Face dataset")
    run.add_argument("--select", action="append", metavar="IDS", help="only these task ids")
    run.add_argument("--sort-by-image", action="store_true", help="order tasks by image")
    run.add_argument("--limit", type=positive_int, help="only the first N tasks (after sorting)")


def _add_limits(run: argparse.ArgumentParser) -> None:
    """Steps, time, retries and how many sandboxes start or wait at once."""
    run.add_argument("--max-steps", type=positive_int, help="step limit of the agent")
    run.add_argument(
        "--step-timeout", type=positive_float, default=120.0, help="seconds per command"
    )
    run.add_argument("--time-limit", type=positive_float, help="seconds per task for the agent")
    run.add_argument(
        "--test-timeout", type=positive_float, default=300.0, help="seconds for the tests"
    )
    run.add_argument(
        "--retries",
        type=count,
        default=0,
        help="run a task that ended in an error (no reward) again, in a fresh sandbox, up to "
        "N times; a graded 0 is never retried",
    )
    run.add_argument(
        "--warm",
        type=count,
        default=0,
        metavar="N",
        help="keep up to N sandboxes started ahead of the tasks that will use them, per "
        "distinct image and settings (a SandboxPool each); default 0",
    )
    run.add_argument(
        "--prefetch",
        type=count,
        default=0,
        metavar="K",
        help="keep the next K sandboxes of the run, in task order, started ahead of the tasks "
        "that will use them, whatever their images (not with --warm); default 0",
    )
    run.add_argument(
        "--group",
        type=positive_int,
        default=1,
        metavar="N",
        help="N rollouts per task (GRPO's group): the task's sandbox is prepared once and the "
        "rollouts are forked from it where the backend can fork (else N independent runs, "
        "said in the report); each rollout is graded in its own copy; default 1",
    )
    run.add_argument(
        "--max-starts",
        type=positive_int,
        metavar="N",
        help="at most N sandboxes of the backend start at once (default: the backend's own "
        "bound, 32 for docker)",
    )


def _add_run_settings(run: argparse.ArgumentParser) -> None:
    """Where grading runs, prices, the run's label and the samples' base image."""
    run.add_argument(
        "--grade-in",
        choices=["same", "fresh", "default"],
        default="default",
        help="where the tests run: same (the agent's sandbox, R2E-Gym's way), fresh (a new "
        "sandbox with only the agent's diff applied, SWE-bench's way), default (each "
        "benchmark's own: fresh for SWE-bench and SWE-smith, same for R2E-Gym and JSONL)",
    )
    run.add_argument(
        "--grading",
        choices=["benchmark", "strict"],
        default="benchmark",
        help="what of the agent's work reaches the tests: benchmark (what the benchmark's own "
        "harness lets through) or strict (only its change to non-test source, graded in a "
        "fresh sandbox; changes to tests, conftest.py, test settings, startup hooks and the "
        "interpreter's files are dropped and reported)",
    )
    run.add_argument(
        "--price",
        type=price,
        action="append",
        metavar="[BACKEND=]RATE",
        help="price of one sandbox-second (repeat per backend, e.g. ags=0.00005): the report "
        "adds an estimated cost to the accounting",
    )
    run.add_argument("--run-id", help="label grouping this run's sandboxes")
    run.add_argument("--base-image", help="base image of the bundled samples' Docker images")


def _add_agent_settings(run: argparse.ArgumentParser) -> None:
    """The scripted and llm agents' own settings."""
    run.add_argument("--script", type=Path, help="scripted agent: JSON script of tool calls")
    run.add_argument("--base-url", help="llm agent: OpenAI-compatible endpoint")
    run.add_argument("--model", help="llm agent: model name")
    run.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        help="llm agent: environment variable holding the API key (never a flag value)",
    )
    run.add_argument("--temperature", type=float, default=0.0)


def _register_tasks(subparsers: Any) -> None:
    """``tasks`` and its actions."""
    tasks = subparsers.add_parser("tasks", help="list, convert and export SWE task sets")
    sub = tasks.add_subparsers(dest="tasks_command", metavar="ACTION")
    _add_list_and_convert(sub)
    add_check(sub)
    _add_rllm(sub)
    build = sub.add_parser("build-images", help="build the bundled samples' Docker images")
    build.add_argument("--base-image", help="base with python3, git and bash")
    build.add_argument("--force", action="store_true", help="rebuild even if up to date")
    build.set_defaults(handler=_tasks_build)
    known = sub.add_parser("formats", help="list the task formats (built in and installed)")
    known.set_defaults(handler=_tasks_formats)
    where = sub.add_parser("path", help="print where the bundled task files are")
    where.set_defaults(handler=_tasks_path)
    tasks.set_defaults(handler=lambda _args: (tasks.print_help(), 2)[1])


def _add_list_and_convert(sub: Any) -> None:
    """``tasks list`` and ``tasks convert``."""
    show = sub.add_parser("list", help="read a task source and list its tasks and bad rows")
    show.add_argument("source")
    show.add_argument(
        "--format", metavar="NAME", help="task format of the rows (default: detected per row)"
    )
    show.add_argument("--split", default="train")
    show.set_defaults(handler=_tasks_list)
    convert = sub.add_parser("convert", help="write a source's good rows as JSONL")
    convert.add_argument("source")
    convert.add_argument("--out", type=Path, required=True)
    convert.add_argument("--split", default="train")
    convert.add_argument("--sort-by-image", action="store_true")
    convert.add_argument("--limit", type=positive_int)
    convert.set_defaults(handler=_tasks_convert)


def _add_rllm(sub: Any) -> None:
    """``tasks rllm``: rLLM's parquet pair."""
    rllm = sub.add_parser(
        "rllm",
        help="write rLLM's <split>.parquet and <split>_verl.parquet (verl-ready)",
        description=(
            "Write a source's good rows as rLLM's parquet pair: every row format this "
            "library reads, mixed files included, reads back through SWEEnv.from_dict, "
            "compute_score and run."
        ),
    )
    rllm.add_argument("source")
    where_to = rllm.add_mutually_exclusive_group(required=True)
    where_to.add_argument("--out", type=Path, help="directory (plays rLLM's <name> dir)")
    where_to.add_argument(
        "--register",
        metavar="NAME",
        help="register as rLLM dataset NAME in rLLM's DatasetRegistry (needs rLLM)",
    )
    rllm.add_argument("--split", default="train", help="split name of the written files")
    rllm.add_argument(
        "--prompt",
        choices=["agent", "patch"],
        default="agent",
        help="agent: rLLM's placeholder (its agent writes the prompt); patch: the issue as "
        "chat messages, for single-turn patch RL with compute_score (default: agent)",
    )
    rllm.add_argument(
        "--data-source",
        metavar="NAME",
        help="verl's data_source column (default: sandbox-runtime/<format>)",
    )
    rllm.add_argument("--sort-by-image", action="store_true")
    rllm.add_argument("--limit", type=positive_int)
    rllm.set_defaults(handler=_tasks_rllm)


def _agent_factory(args: argparse.Namespace) -> Any:
    from sandbox_runtime.swe.agents import make_agent

    options: dict[str, Any] = {}
    if args.agent == "scripted":
        options["script"] = args.script
    if args.agent == "llm":
        from pydantic import SecretStr

        from sandbox_runtime.swe.agents.llm import LLMConfig

        if not args.base_url or not args.model:
            raise ConfigError("the llm agent needs --base-url and --model")
        options["config"] = LLMConfig(
            base_url=args.base_url,
            model=args.model,
            api_key=SecretStr(os.environ.get(args.api_key_env, "EMPTY")),
            temperature=args.temperature,
            request_timeout=max(args.step_timeout, 30.0),
        )
    make_agent(args.agent, **options)  # fail before any sandbox starts
    return lambda: make_agent(args.agent, **options)


def _check_writable(path: Path | None, flag: str) -> None:
    """Fail before the run, not after it, when an output file cannot be written."""
    if path is None:
        return
    if path.is_dir():
        raise ConfigError(f"{flag} {path}: is a directory")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise ConfigError(f"{flag} {path}: the directory {parent} does not exist")
    target = path if path.exists() else parent
    if not os.access(target, os.W_OK):
        raise ConfigError(f"{flag} {path}: not writable")


def _run(args: argparse.Namespace) -> int:
    from sandbox_runtime.swe.group import GroupRunner
    from sandbox_runtime.swe.progress import Progress
    from sandbox_runtime.swe.report import summary_table, write_trajectory
    from sandbox_runtime.swe.runner import Runner

    sources = list(args.tasks) + ([args.ds_json] if args.ds_json else [])
    if not sources:
        raise ConfigError("give a task source (e.g. 'bundled') or --ds-json FILE")
    # Everything the user can get wrong fails here, before any sandbox starts.
    options_for_backend = backend_options(args.backend, args.backend_option)
    agent_factory = _agent_factory(args)
    _check_outputs(args)
    if args.prefetch and args.warm:
        raise ConfigError("--prefetch and --warm both start sandboxes ahead: choose one")
    if args.grading == "strict" and args.grade_in == "same":
        raise ConfigError(
            "--grading strict grades in a fresh sandbox; it cannot use --grade-in same"
        )
    tasks, errors = _tasks_to_run(args, sources)

    trajectories = args.trajectories.open("w", encoding="utf-8") if args.trajectories else None
    progress = Progress(len(tasks) * args.group, enabled=not args.quiet)

    def done(outcome: TaskOutcome) -> None:
        progress.update(
            outcome.label, outcome.reward, outcome.reason, outcome.total_time, bool(outcome.error)
        )
        if trajectories is not None:
            write_trajectory(trajectories, outcome)

    options = _run_options(args, options_for_backend)
    if args.max_starts is not None:
        from sandbox_runtime._core.limits import set_start_limit

        set_start_limit(args.backend, args.max_starts)
    runner_cls = GroupRunner if args.group > 1 else Runner
    runner = runner_cls(tasks, agent_factory, options, on_done=done, agent_name=args.agent)
    try:
        outcomes = run_interruptibly(runner, progress)
    finally:
        if trajectories is not None:
            trajectories.close()
    if outcomes is None:
        return 130
    progress.close()
    if not args.quiet:
        print(summary_table(outcomes))
    _write_outputs(args, runner.run_id, sources, errors, outcomes)
    return 1 if any(outcome.error for outcome in outcomes) else 0


def _check_outputs(args: argparse.Namespace) -> None:
    """Fail before the run when an output file cannot be written or has the wrong kind."""
    _check_writable(args.report, "--report")
    _check_writable(args.trajectories, "--trajectories")
    _check_writable(args.predictions, "--predictions")
    if args.predictions and args.group > 1:
        raise ConfigError(
            "--predictions holds one patch per task, and --group gives several: use "
            "--trajectories or --report for the rollouts"
        )
    if args.predictions and args.predictions.suffix not in (".json", ".jsonl"):
        raise ConfigError(
            f"--predictions {args.predictions}: the swebench harness reads .json or .jsonl"
        )


def _tasks_to_run(args: argparse.Namespace, sources: list[str]) -> tuple[list[Task], list[str]]:
    """The selected tasks and the rows that were skipped (each told on stderr)."""
    from sandbox_runtime.swe.dataset import DatasetError, select_tasks

    try:
        loaded = load_tasks(sources, args.format, args.split)
    except DatasetError as exc:
        raise ConfigError(str(exc)) from exc
    errors = loaded.problems
    ids = [i for chunk in args.select or [] for i in chunk.split(",") if i]
    tasks = select_tasks(
        loaded.tasks, ids=ids or None, sort_by_image=args.sort_by_image, limit=args.limit
    )
    for error in errors:
        print(f"skipped {error}", file=sys.stderr)
    if not tasks:
        raise ConfigError("no task to run")
    return tasks, errors


def _run_options(args: argparse.Namespace, options_for_backend: dict[str, Any]) -> RunOptions:
    """The runner's options, from the flags."""
    from sandbox_runtime.swe.runner import RunOptions

    return RunOptions(
        backend=args.backend,
        jobs=args.jobs,
        max_steps=args.max_steps,
        step_timeout=args.step_timeout,
        time_limit=args.time_limit,
        test_timeout=args.test_timeout,
        run_id=args.run_id,
        base_image=args.base_image,
        backend_options=options_for_backend,
        retries=args.retries,
        warm=args.warm,
        prefetch=args.prefetch,
        group=args.group,
        grade_in=None if args.grade_in == "default" else args.grade_in,
        grading=args.grading,
        price=price_for(args.backend, args.price),
    )


def _write_outputs(
    args: argparse.Namespace,
    run_id: str,
    sources: list[str],
    errors: list[str],
    outcomes: list[TaskOutcome],
) -> None:
    """The report (Graph Planner's shape for a one-entry smoke run) and the predictions."""
    from sandbox_runtime.swe.report import smoke_report, write_predictions, write_report

    if args.report:
        if args.ds_json and len(outcomes) == 1:
            args.report.write_text(json.dumps(smoke_report(outcomes[0]), indent=2) + "\n")
        else:
            run_info = {
                "run_id": run_id,
                "backend": args.backend,
                "agent": args.agent,
                "grade_in": args.grade_in,
                "grading": args.grading,
                "group": args.group,
                "sources": sources,
                "skipped_rows": errors,
            }
            write_report(args.report, run_info, outcomes)
    if args.predictions:
        left_out = write_predictions(args.predictions, outcomes, args.model or args.agent)
        if left_out:
            print(
                f"--predictions: left out {left_out} task(s) that ended in an error",
                file=sys.stderr,
            )


def _tasks_list(args: argparse.Namespace) -> int:
    loaded = load_tasks([args.source], args.format, args.split)
    tasks, errors = loaded.tasks, loaded.problems
    for task in tasks:
        print(f"{task.task_id}\t{task.format}\t{task.repo}\t{task.image or ''}")
    for error in errors:
        print(f"bad row: {error}", file=sys.stderr)
    print(f"{len(tasks)} task(s), {len(errors)} bad row(s)", file=sys.stderr)
    return 1 if errors else 0


def _tasks_convert(args: argparse.Namespace) -> int:
    from sandbox_runtime.swe.dataset import select_tasks, write_jsonl
    from sandbox_runtime.swe.parquet import written_rows

    loaded = load_tasks([args.source], None, args.split)
    errors = loaded.problems
    tasks = select_tasks(loaded.tasks, sort_by_image=args.sort_by_image, limit=args.limit)
    count = write_jsonl(written_rows(tasks)[0], args.out)
    for error in errors:
        print(f"bad row: {error}", file=sys.stderr)
    print(f"wrote {count} row(s) to {args.out}", file=sys.stderr)
    return 0


def _tasks_rllm(args: argparse.Namespace) -> int:
    from sandbox_runtime.swe.dataset import select_tasks
    from sandbox_runtime.swe.parquet import PromptMode, write_rllm_parquet

    loaded = load_tasks([args.source], None, "train")
    errors = loaded.problems
    tasks = select_tasks(loaded.tasks, sort_by_image=args.sort_by_image, limit=args.limit)
    prompt = PromptMode(args.prompt)
    if args.register:
        from sandbox_runtime.integrations.rllm import register_tasks

        plain, verl = register_tasks(
            args.register, tasks, split=args.split, data_source=args.data_source, prompt=prompt
        )
    else:
        plain, verl = write_rllm_parquet(
            tasks, args.out, split=args.split, data_source=args.data_source, prompt=prompt
        )
    for error in errors:
        print(f"bad row: {error}", file=sys.stderr)
    print(f"wrote {len(tasks)} row(s) to {plain} and {verl}", file=sys.stderr)
    return 0


def _tasks_build(args: argparse.Namespace) -> int:
    from sandbox_runtime.swe.images import build_sample_image
    from sandbox_runtime.swe.samples import sample_names

    for name in sample_names():
        print(build_sample_image(name, base=args.base_image, force=args.force))
    return 0


def _tasks_formats(args: argparse.Namespace) -> int:
    from sandbox_runtime.swe.formats import list_formats, load_format

    for info in list_formats():
        description = load_format(info.name).description
        print(f"{info.name:<12} {description} [{info.distribution or 'built in'}]")
    return 0


def _tasks_path(args: argparse.Namespace) -> int:
    from sandbox_runtime.swe.samples import bundled_rows_path

    print(bundled_rows_path("r2e"))
    print(bundled_rows_path("swebench"))
    return 0
