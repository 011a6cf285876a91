"""Inspect tasks for ``inspect eval`` in the tests: a bundled SWE task, gold and null solvers.

Run by Inspect's own command line (``inspect eval tests/harnesses/inspect_swe_tasks.py@swe_gold
-T backend=local --model mockllm/model``); no model is called by either solver.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from inspect_ai import task
from inspect_ai.solver import Generate, TaskState, solver
from inspect_ai.util import sandbox

from sandbox_runtime.integrations.inspect.swe import oracle_solver, swe_task

TASK_SOURCE = "bundled:r2e"
TASK_ID = "csvline__c2144404831e"


def _env(backend: str) -> dict[str, str]:
    if backend != "local":
        return {}
    # local sandboxes run the host's python: make it this venv's, which has pytest.
    return {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


@solver  # type: ignore[untyped-decorator,unused-ignore]
def null_solver() -> Any:
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        return state

    return solve


@solver  # type: ignore[untyped-decorator,unused-ignore]
def waiting_solver() -> Any:
    """Waits in the sandbox (the test kills Inspect meanwhile)."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        await sandbox().exec(["sleep", "600"], timeout=900)
        return state

    return solve


def _task(solver: Any, backend: str, base_image: str, label: str, base_dir: str = "") -> Any:
    return swe_task(
        TASK_SOURCE,
        backend=backend,
        backend_options={"base_dir": base_dir} if base_dir else None,
        solver=solver,
        ids=[TASK_ID],
        env=_env(backend),
        base_image=base_image or None,
        labels={"test-run": label},
        test_timeout=300,
    )


@task  # type: ignore[untyped-decorator,unused-ignore]
def swe_gold(backend: str = "local", base_image: str = "", label: str = "") -> Any:
    return _task(oracle_solver(), backend, base_image, label)


@task  # type: ignore[untyped-decorator,unused-ignore]
def swe_waiting(label: str, base_dir: str) -> Any:
    return _task(waiting_solver(), "local", "", label, base_dir)


@task  # type: ignore[untyped-decorator,unused-ignore]
def swe_null(backend: str = "local", base_image: str = "", label: str = "") -> Any:
    return _task(null_solver(), backend, base_image, label)
