"""What the harness adapters share: a SWE task's sandbox on any backend, and its grading.

mini-swe-agent's environments and Inspect's sandbox environments are configured by their
users in the harness's own config (a YAML key, a sample's sandbox spec).  When that config
names a task of this library (a task source such as ``bundled:r2e`` or ``tasks.jsonl``, and a
task id), the adapter opens the sandbox the way ``sandbox-runtime run`` does: the task's
image resolved for the backend, its workdir and env, prepared for its benchmark, the base
commit recorded; and it grades with this library's grader, so a reward is the one
``sandbox-runtime run`` gives (and ``None`` when the tests gave no verdict, never a 0).
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Mapping
from typing import Any

from sandbox_runtime._core.config import SandboxConfig
from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.errors import ConfigError, SandboxError
from sandbox_runtime.swe.dataset import load_rows
from sandbox_runtime.swe.grading import DEFAULT_TEST_TIMEOUT, GradeResult, grade
from sandbox_runtime.swe.isolation import GradeIn, grade_fresh, resolve_grade_in
from sandbox_runtime.swe.prepare import prepare
from sandbox_runtime.swe.rows import read_rows
from sandbox_runtime.swe.runner import RunOptions, task_sandbox_config
from sandbox_runtime.swe.task import Task

__all__ = [
    "HARNESS_LABEL",
    "RUN_LABEL",
    "grade_patch",
    "grade_sandbox",
    "load_task",
    "new_run_id",
    "open_prepared",
    "task_config",
]

logger = logging.getLogger("sandbox_runtime.integrations")

#: The label naming the harness a sandbox was opened for (``mini-swe-agent``, ``inspect``).
HARNESS_LABEL = "harness"
#: The label every sandbox of one harness run carries, so cleanup finds exactly those.
RUN_LABEL = "harness-run"


def new_run_id() -> str:
    """A fresh id for one harness run (a label value: short, lower case)."""
    return uuid.uuid4().hex[:16]


def load_task(source: str, task_id: str) -> Task:
    """The task ``task_id`` of ``source`` (``bundled``, ``bundled:r2e``, a JSONL file, ...)."""
    result = read_rows(load_rows(source))
    for task in result.tasks:
        if task.task_id == task_id:
            return task
    known = ", ".join(task.task_id for task in result.tasks[:20]) or "none"
    raise ConfigError(f"task {task_id!r} is not in {source!r} (tasks: {known})")


def task_config(
    task: Task,
    *,
    backend: str,
    backend_options: Mapping[str, Any] | None = None,
    base_image: str | None = None,
    labels: Mapping[str, str] | None = None,
    lifetime: float | None = None,
    exec_timeout: float | None = None,
) -> SandboxConfig:
    """The config of ``task``'s sandbox on ``backend``, as ``sandbox-runtime run`` builds it."""
    options = RunOptions(
        backend=backend,
        backend_options=dict(backend_options or {}),
        base_image=base_image or os.environ.get("SANDBOX_RUNTIME_SAMPLES_BASE"),
        lifetime=lifetime,
    )
    config = task_sandbox_config(task, options)
    update: dict[str, Any] = {"labels": {**config.labels, **dict(labels or {})}}
    if exec_timeout is not None:
        update["exec_timeout"] = exec_timeout
    return config.model_copy(update=update)


def open_prepared(task: Task, config: SandboxConfig) -> SandboxRuntime:
    """A started sandbox readied for ``task`` (its base commit recorded); closed on failure."""
    sandbox = SandboxRuntime(config)
    try:
        sandbox.start()
        prepare(task, sandbox)
        sandbox.base_commit(refresh=True)
    except BaseException:
        sandbox.close()
        raise
    return sandbox


def grade_sandbox(
    task: Task, sandbox: SandboxRuntime, *, timeout: float = DEFAULT_TEST_TIMEOUT
) -> GradeResult:
    """Grade ``task`` where its benchmark grades: in ``sandbox``, or a fresh one with its diff.

    A fault of the sandboxes is an ``error`` result (reward ``None``), never a 0.
    """
    if resolve_grade_in(task, None) is GradeIn.SAME:
        return grade(task, sandbox, timeout=timeout)
    try:
        patch = sandbox.diff()
    except SandboxError as exc:
        return GradeResult(None, f"infrastructure error: reading the diff: {exc}")
    return grade_patch(task, sandbox.config, patch, timeout=timeout)


def grade_patch(
    task: Task, config: SandboxConfig, patch: str, *, timeout: float = DEFAULT_TEST_TIMEOUT
) -> GradeResult:
    """Grade ``patch`` in a fresh sandbox of ``config``, readied for ``task`` (SWE-bench's way)."""
    return grade_fresh(task, SandboxRuntime(config), patch, timeout=timeout)
