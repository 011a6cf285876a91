"""SWE tasks of this library as an Inspect task: samples, an oracle solver and the grader.

Each task of a source (``bundled``, ``bundled:r2e``, a JSONL or parquet file) becomes a
sample whose input is the issue and whose metadata names the task; the ``sandbox-runtime``
sandbox environment opens that task's prepared sandbox on the configured backend, any solver
(a model's agent, or :func:`oracle_solver`) works in it, and :func:`swe_scorer` grades it
with this library's grader where the task's benchmark grades (in that sandbox, or a fresh one
with its diff), so the score is the reward ``sandbox-runtime run`` gives.  When the tests give
no verdict (a sandbox fault, a test timeout) the scorer raises: Inspect records the sample as
an error, never as a 0::

    from sandbox_runtime.integrations.inspect import swe_task
    eval(swe_task("bundled:r2e", backend="docker"), model="openai/gpt-4o")
"""

from __future__ import annotations

from functools import partial
from typing import Any

from inspect_ai import Task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import Score, Target, mean, scorer
from inspect_ai.solver import Generate, TaskState, solver
from inspect_ai.util import SandboxEnvironmentSpec, sandbox

from sandbox_runtime.errors import ConfigError
from sandbox_runtime.integrations._harness_tasks import grade_sandbox
from sandbox_runtime.integrations.inspect._config import SandboxRuntimeConfig
from sandbox_runtime.integrations.inspect._environment import (
    SANDBOX_NAME,
    TASK_ID_KEY,
    SandboxRuntimeSandboxEnvironment,
    in_thread,
)
from sandbox_runtime.swe.dataset import load_rows, select_tasks
from sandbox_runtime.swe.grading import DEFAULT_TEST_TIMEOUT
from sandbox_runtime.swe.rows import read_rows

__all__ = ["oracle_solver", "swe_samples", "swe_scorer", "swe_task"]


def swe_samples(source: str, *, ids: list[str] | None = None) -> list[Any]:
    """One Inspect ``Sample`` per task of ``source`` (``ids``: only those, in source order)."""
    tasks = select_tasks(read_rows(load_rows(source)).tasks, ids=ids)
    return [
        Sample(
            input=task.problem_statement,
            id=task.task_id,
            metadata={TASK_ID_KEY: task.task_id, "format": task.format, "repo": task.repo},
        )
        for task in tasks
    ]


def swe_task(
    source: str,
    *,
    backend: str = "docker",
    backend_options: dict[str, Any] | None = None,
    solver: Any = None,
    ids: list[str] | None = None,
    env: dict[str, str] | None = None,
    base_image: str | None = None,
    labels: dict[str, str] | None = None,
    test_timeout: float = DEFAULT_TEST_TIMEOUT,
) -> Any:
    """An Inspect ``Task`` of ``source``'s tasks on ``backend``, scored by this library."""
    config = SandboxRuntimeConfig(
        backend=backend,
        backend_options=dict(backend_options or {}),
        tasks=source,
        env=dict(env or {}),
        base_image=base_image,
        labels=dict(labels or {}),
    )
    return Task(
        dataset=swe_samples(source, ids=ids),
        solver=solver,
        scorer=swe_scorer(test_timeout=test_timeout),
        sandbox=SandboxEnvironmentSpec(SANDBOX_NAME, config),
    )


def _task_sandbox() -> SandboxRuntimeSandboxEnvironment:
    environment: SandboxRuntimeSandboxEnvironment = sandbox().as_type(
        SandboxRuntimeSandboxEnvironment
    )
    if environment.task is None:
        raise ConfigError(
            "this sample's sandbox-runtime sandbox has no task: give the config a 'tasks' "
            f"source and the sample a '{TASK_ID_KEY}' in its metadata"
        )
    return environment


@scorer(metrics=[mean()])  # type: ignore[untyped-decorator,unused-ignore]
def swe_scorer(test_timeout: float = DEFAULT_TEST_TIMEOUT) -> Any:
    """Grade the sample's task: 1 resolved, 0 not; no verdict raises (an error sample)."""

    async def score(state: TaskState, target: Target) -> Any:
        environment = _task_sandbox()
        task, runtime = environment.task, environment.runtime.sync
        assert task is not None  # _task_sandbox says so
        graded = await in_thread(partial(grade_sandbox, task, runtime, timeout=test_timeout))
        if graded.reward is None:
            raise RuntimeError(f"grading gave no verdict: {graded.reason}")
        return Score(
            value=graded.reward,
            explanation=graded.reason,
            metadata={"outcome": graded.outcome.value, "grade_in": graded.grade_in},
        )

    return score


@solver  # type: ignore[untyped-decorator,unused-ignore]
def oracle_solver() -> Any:
    """Apply the task's gold patch through the sandbox (``git apply``): checks a setup gives 1."""

    async def solve(state: TaskState, generate: Generate) -> Any:
        environment = _task_sandbox()
        assert environment.task is not None
        applied = await environment.exec(["git", "apply", "-"], input=environment.task.gold_patch)
        if not applied.success:
            raise RuntimeError(f"the gold patch did not apply: {applied.stderr.strip()[:500]}")
        return state

    return solve
