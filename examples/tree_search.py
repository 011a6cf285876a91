"""Tree search over an agent's continuations: checkpoint mid-episode, try k, keep what passes.

    python examples/tree_search.py [--backend local] [--task pager] [--mode rollback|fork]

An agent that reaches a promising state (here: it has read the code and written a script
reproducing the issue) saves it with ``sandbox.checkpoint()`` and tries k alternative
continuations from it.  With ``--mode rollback`` it tries them one after the other in the
same sandbox, ``sandbox.rollback(checkpoint)`` before each; with ``--mode fork`` it starts k
copies at once (``sandbox.fork(k)``) and tries one in each.  Each continuation is scored by
the task's tests, and the first one whose tests pass is kept: its state is the sandbox's at
the end (rollback: a second checkpoint taken after the edit, before the tests ran; fork: the
winning copy).

The continuations are scripted from a bundled task, so it runs offline, on ``local``, with no
model: two wrong turns (changing nothing; an edit that breaks the module) and the task's own
fix (the oracle's).  A real agent would propose its continuations with a model and score
them with its own tests or a verifier; the checkpoint / rollback / fork calls stay the same.
It prints one JSON document: every continuation's reward, which one was kept, the final diff
and what the checkpoint calls took.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from sandbox_runtime import Checkpoint, ForkResult, SandboxRuntime, delete_checkpoint
from sandbox_runtime.swe import Task, read_rows
from sandbox_runtime.swe.dataset import load_rows
from sandbox_runtime.swe.grading import grade
from sandbox_runtime.swe.prepare import prepare
from sandbox_runtime.swe.runner import RunOptions, task_sandbox_config


@dataclass
class Continuation:
    """One way the episode could go on from the checkpoint."""

    name: str
    act: Callable[[SandboxRuntime], None]


def continuations(task: Task) -> list[Continuation]:
    """The scripted alternatives: two wrong turns, then the task's own fix."""
    touched = [
        line.split(" b/", 1)[1]
        for line in task.gold_patch.splitlines()
        if line.startswith("diff --git ")
    ] or [line[6:] for line in task.gold_patch.splitlines() if line.startswith("+++ b/")]

    def change_nothing(sandbox: SandboxRuntime) -> None:
        sandbox.exec("true")

    def break_the_module(sandbox: SandboxRuntime) -> None:
        for path in touched:
            text = sandbox.read_text(path)
            sandbox.write_text(path, text + '\nraise RuntimeError("a wrong turn")\n')

    def apply_the_fix(sandbox: SandboxRuntime) -> None:
        applied = sandbox.apply_patch(task.gold_patch)
        if not applied.applied:
            raise RuntimeError(f"the fix did not apply: {applied.message}")

    return [
        Continuation("change-nothing", change_nothing),
        Continuation("break-the-module", break_the_module),
        Continuation("apply-the-fix", apply_the_fix),
    ]


def explore(task: Task, sandbox: SandboxRuntime) -> None:
    """The episode so far: look around, write a script that reproduces the issue."""
    sandbox.exec("git log -1 --oneline && git ls-files | head -20", check=True)
    sandbox.write_text(
        "reproduce_issue.py",
        f"# Reproduces {task.task_id}: run with python3 reproduce_issue.py\nprint('issue')\n",
    )


def search_by_rollback(
    task: Task,
    sandbox: SandboxRuntime,
    options: list[Continuation],
    timings: dict[str, float],
    made: list[Checkpoint],
) -> tuple[list[dict[str, Any]], str | None]:
    """Try each continuation in ``sandbox``, rolling back to the checkpoint before each.

    Every checkpoint taken is appended to ``made``, for the caller to delete once the
    sandbox is closed: a checkpoint in use cannot be deleted everywhere (docker: the sandbox
    runs a container of the one it rolled back to, and each checkpoint is a child image of
    the one before).
    """
    began = time.monotonic()
    start = sandbox.checkpoint(labels={"example": "tree-search"})
    made.append(start)
    timings["checkpoint"] = time.monotonic() - began
    tried: list[dict[str, Any]] = []
    kept = None
    for index, option in enumerate(options):
        if index:
            began = time.monotonic()
            sandbox.rollback(start)
            timings[f"rollback_{index}"] = time.monotonic() - began
        option.act(sandbox)
        after = sandbox.checkpoint(labels={"example": "tree-search"})  # before the tests
        made.append(after)
        graded = grade(task, sandbox)
        tried.append({"name": option.name, "reward": graded.reward, "reason": graded.reason})
        if graded.reward == 1.0:
            kept = option.name
            sandbox.rollback(after)  # the kept state, without what the tests left behind
            break
    return tried, kept


def search_by_fork(
    task: Task, sandbox: SandboxRuntime, options: list[Continuation], timings: dict[str, float]
) -> tuple[list[dict[str, Any]], str | None, str]:
    """Try every continuation at once, each in its own copy of ``sandbox``; keep the winner.

    Returns what was tried, the kept continuation's name and its diff (taken before its
    tests ran).  Every copy is closed here; a caller going on from the winner would keep it.
    """
    began = time.monotonic()
    copies = sandbox.fork(len(options), labels={"example": "tree-search"})
    timings["fork"] = time.monotonic() - began

    def try_one(pair: tuple[Continuation, ForkResult]) -> dict[str, Any]:
        option, result = pair
        if not result.ok:  # this copy did not start: an error, not a 0
            return {"name": option.name, "reward": None, "reason": f"{result.error}"}
        with result.unwrap() as copy:
            option.act(copy)
            patch = copy.diff()
            graded = grade(task, copy)
        return {
            "name": option.name,
            "reward": graded.reward,
            "reason": graded.reason,
            "patch": patch,
        }

    with ThreadPoolExecutor(max_workers=len(options)) as pool:
        tried = list(pool.map(try_one, zip(options, copies, strict=True)))
    patches = [str(entry.pop("patch", "")) for entry in tried]
    for entry, patch in zip(tried, patches, strict=True):
        if entry["reward"] == 1.0:
            return tried, str(entry["name"]), patch
    return tried, None, ""


def load_task(name: str, fmt: str) -> Task:
    """A bundled sample task by its sample name."""
    for task in read_rows(load_rows("bundled")).tasks:
        if task.format == fmt and name in task.task_id:
            return task
    raise SystemExit(f"no bundled {fmt} task named {name!r}")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="local")
    parser.add_argument("--task", default="pager", help="a bundled sample (default: pager)")
    parser.add_argument("--format", default="r2e", help="r2e (graded in place) or swebench")
    parser.add_argument("--mode", choices=["rollback", "fork"], default="rollback")
    parser.add_argument("--base-dir", help="local backend: where its sandboxes live")
    parser.add_argument("--isolation", help="local backend: none or namespace (its default)")
    args = parser.parse_args(argv)
    task = load_task(args.task, args.format)
    backend_options = {"base_dir": args.base_dir} if args.base_dir else {}
    if args.isolation:
        backend_options["isolation"] = args.isolation
    config = task_sandbox_config(
        task, RunOptions(backend=args.backend, backend_options=backend_options)
    )
    timings: dict[str, float] = {}
    made: list[Checkpoint] = []
    try:
        with SandboxRuntime(config) as sandbox:
            prepare(task, sandbox)
            sandbox.base_commit(refresh=True)
            explore(task, sandbox)
            options = continuations(task)
            if args.mode == "rollback":
                tried, kept = search_by_rollback(task, sandbox, options, timings, made)
                patch = sandbox.diff()
            else:
                tried, kept, patch = search_by_fork(task, sandbox, options, timings)
    finally:
        for checkpoint in reversed(made):  # newest first: nothing uses them any more
            delete_checkpoint(checkpoint, options=config.options)
    document = {
        "task": task.task_id,
        "backend": args.backend,
        "mode": args.mode,
        "tried": tried,
        "kept": kept,
        # A continuation that could not be scored is an error, so "none passed" is no 0 then.
        "reward": 1.0 if kept else (None if any(t["reward"] is None for t in tried) else 0.0),
        "patch": patch,
        "timings": {key: round(value, 3) for key, value in timings.items()},
    }
    print(json.dumps(document, indent=2))
    return document


if __name__ == "__main__":
    main()
