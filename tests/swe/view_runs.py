"""Reports for the ``view`` tests, written by the runner's own writers (no hand-made JSON).

Each outcome is a :class:`~sandbox_runtime.swe.report.TaskOutcome` turned into a report and
trajectories by :func:`~sandbox_runtime.swe.report.write_report` and
:func:`~sandbox_runtime.swe.report.write_trajectory`, so the page is tested on the shapes a
run writes today.  ``tests/swe/test_view_browser.py`` also views a real run's report.
"""

from __future__ import annotations

import random
from pathlib import Path

from sandbox_runtime._core.usage import SandboxUsage
from sandbox_runtime.swe.agents.base import Step
from sandbox_runtime.swe.grading import GradeResult
from sandbox_runtime.swe.report import TaskOutcome, write_report, write_trajectory
from sandbox_runtime.swe.tamper import TamperFlag

HOSTILE = '<script>document.title="pwned"</script><img src=x onerror="document.title=1">'

PATCH = (
    "diff --git a/pkg/core.py b/pkg/core.py\n--- a/pkg/core.py\n+++ b/pkg/core.py\n"
    "@@ -1,3 +1,3 @@\n def split(row):\n-    return row.split(',')\n+    return parse(row)\n"
)


def outcome(
    task_id: str,
    reward: float | None,
    reason: str,
    *,
    rollout: int | None = None,
    error: str | None = None,
    tamper: list[TamperFlag] | None = None,
    output: str = "ok\n",
    backend: str = "local",
    seconds: float = 8.0,
) -> TaskOutcome:
    """One task's outcome with two steps, a patch and test results."""
    steps = [
        Step(0, "bash", {"command": "grep -n split pkg/core.py"}, output, 0, 0.4, "Look first."),
        Step(1, "apply_patch", {"patch": PATCH}, "applied", 0, 0.2),
    ]
    status = {"tests/test_core.py::test_split": "PASSED" if reward else "FAILED"}
    grade = None
    if reward is not None:
        grade = GradeResult(reward, reason, status, "1 passed\n", 0, 2.0, "swebench", "pytest")
    return TaskOutcome(
        task_id=task_id,
        format="swebench",
        repo="pkg",
        backend=backend,
        agent="scripted",
        reward=reward,
        reason=reason,
        error=error,
        submitted=True,
        patch=PATCH,
        steps=steps,
        grade=grade,
        timings={"setup": 1.5, "agent": 0.7, "grade": 2.0, "total": seconds},
        accounting=SandboxUsage(sandboxes=1, start_latency=0.3, sandbox_seconds=seconds),
        tamper=tamper or [],
        setups=1,
        rollout=rollout,
        group_mode="fork" if rollout is not None else "",
        task_row={
            "format": "swebench",
            "row": {
                "FAIL_TO_PASS": '["tests/test_core.py::test_split"]',
                "PASS_TO_PASS": '["tests/test_core.py::test_join"]',
            },
        },
    )


def write_run(directory: Path, name: str, outcomes: list[TaskOutcome], **settings: object) -> Path:
    """Write ``name.json`` and ``name.jsonl`` as ``run --report --trajectories`` does."""
    report = directory / f"{name}.json"
    with (directory / f"{name}.jsonl").open("w", encoding="utf-8") as handle:
        for item in outcomes:
            write_trajectory(handle, item)
    write_report(report, {"run_id": name, "backend": "local", **settings}, outcomes)
    return report


def mixed_run(directory: Path, name: str = "after") -> Path:
    """A run with every kind of row: resolved, unresolved, errors of two causes, a flagged
    task with hostile output, and a group of two rollouts."""
    infra = outcome(
        "pkg__infra-3",
        None,
        "error: SandboxStartError: the sandbox did not start",
        error="SandboxStartError: the sandbox did not start",
    )
    infra.attempts = ["error: SandboxGoneError: gone", "error: SandboxStartError"]
    outcomes = [
        outcome("pkg__resolved-1", 1.0, "resolved"),
        outcome("pkg__unresolved-2", 0.0, "tests failed: tests/test_core.py::test_split"),
        infra,
        outcome("pkg__timeout-4", None, "tests timed out after 300s", error="timed out"),
        outcome(
            f"pkg__flagged-5{HOSTILE}",
            1.0,
            "resolved",
            tamper=[TamperFlag("tests/test_core.py", "test file", "modified")],
            output=HOSTILE,
        ),
        outcome("pkg__group-6", 1.0, "resolved", rollout=0),
        outcome("pkg__group-6", 0.0, "tests failed: tests/test_core.py::test_split", rollout=1),
    ]
    return write_run(directory, name, outcomes, agent="scripted", group=2)


def before_run(directory: Path) -> Path:
    """The run ``mixed_run`` is compared against: two tasks ended otherwise there."""
    outcomes = [
        outcome("pkg__resolved-1", 0.0, "tests failed: tests/test_core.py::test_split"),
        outcome("pkg__unresolved-2", 0.0, "tests failed: tests/test_core.py::test_split"),
        outcome("pkg__infra-3", 1.0, "resolved"),
    ]
    return write_run(directory, "before", outcomes, agent="scripted")


def large_run(directory: Path, tasks: int = 10_000) -> Path:
    """A synthetic run of ``tasks`` tasks over two backends, a mix of every outcome."""
    rng = random.Random(34)
    outcomes = []
    for index in range(tasks):
        roll = rng.random()
        if roll < 0.45:
            item = outcome(f"repo{index % 97}__task-{index}", 1.0, "resolved")
        elif roll < 0.9:
            item = outcome(f"repo{index % 97}__task-{index}", 0.0, "tests failed: t::x")
        else:
            item = outcome(
                f"repo{index % 97}__task-{index}",
                None,
                "infrastructure error: SandboxGoneError: gone",
                error="SandboxGoneError: gone",
            )
        item.backend = "docker" if index % 3 else "local"
        if index % 50 == 0:
            item.tamper = [TamperFlag("tests/conftest.py", "test config")]
        outcomes.append(item)
    return write_run(directory, "large", outcomes, agent="llm")
