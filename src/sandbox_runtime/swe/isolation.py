"""Where a task is graded: in the agent's sandbox (``same``) or in a fresh one (``fresh``).

R2E-Gym grades in the container the agent just used, so whatever the agent changed there
(the held-out tests, a ``conftest.py``, an installed package) is part of the verdict.  The
SWE-bench harness instead starts a new container from the task's image, applies only the
model's patch of the repository, and runs the tests there; SWE-smith does the same.  Each task
format names its benchmark's practice (:attr:`RowFormat.grade_in
<sandbox_runtime.swe.formats.base.RowFormat.grade_in>`), and callers may override it.

The agent's change reaches the fresh sandbox as a change set read from outside the agent's
sandbox (:mod:`sandbox_runtime.swe.capture`, :func:`grade_fresh_changes`): written through the
file plane, path by path, with no patch tool and no fuzz.  :func:`grade_fresh` applies a patch
text instead (a model's response, a dataset's gold patch).

``fresh`` costs a second sandbox start and the setup of the task; what it buys is that only
the agent's diff of the repository reaches the tests.  A fresh sandbox that cannot be
started or prepared is an ``error`` outcome (no reward), never a 0; a diff that does not
apply there is a 0, as in the harness ("patch did not apply").
"""

from __future__ import annotations

import enum
import logging

from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.errors import ConfigError, SandboxError
from sandbox_runtime.swe.agents.simple import apply_reversed
from sandbox_runtime.swe.benchmark_checks import grade_benchmark, patch_paths
from sandbox_runtime.swe.canary import modules_of
from sandbox_runtime.swe.capture import ChangeSet, apply_changes
from sandbox_runtime.swe.formats import load_format
from sandbox_runtime.swe.grading import DEFAULT_TEST_TIMEOUT, GradeResult, grade
from sandbox_runtime.swe.prepare import prepare
from sandbox_runtime.swe.strict import (
    DroppedChange,
    GradingMode,
    StrictApplied,
    apply_strict,
    check_canary,
    grade_recorded,
    refused_grade,
)
from sandbox_runtime.swe.task import Task

__all__ = [
    "GradeIn",
    "apply_diff",
    "grade_fresh",
    "grade_fresh_changes",
    "resolve_grade_in",
]

logger = logging.getLogger("sandbox_runtime.swe")


class GradeIn(str, enum.Enum):
    """Which sandbox the tests run in."""

    SAME = "same"
    """The sandbox the agent used (R2E-Gym)."""
    FRESH = "fresh"
    """A new sandbox from the task's image with only the agent's diff applied (SWE-bench)."""


def resolve_grade_in(task: Task, choice: str | GradeIn | None) -> GradeIn:
    """``choice``, or the task's benchmark's own practice when it is ``None`` or ``default``."""
    if choice is None or choice == "default":
        return GradeIn(load_format(task.format).grade_in)
    return GradeIn(choice)


def grade_fresh(
    task: Task,
    sandbox: SandboxRuntime,
    patch: str,
    *,
    timeout: float = DEFAULT_TEST_TIMEOUT,
    patch_error: str | None = None,
    strict: bool = False,
    reverse: bool = False,
    prepared: bool = False,
) -> GradeResult:
    """Start ``sandbox`` (not yet started), ready it for ``task``, apply ``patch``, grade, close.

    ``prepared``: ``sandbox`` is started and ready already (a fork of the task's prepared
    sandbox, taken before any agent ran: ``run --group``), so neither start nor setup runs.

    The caller creates the sandbox (from the task's config, on the agent's backend) so that it
    can track it for cancellation and read its accounting afterwards.  ``strict`` applies only
    the part of ``patch`` that :mod:`sandbox_runtime.swe.strict` allows, and the result lists
    what it dropped.  ``reverse`` applies ``patch`` in reverse (a SWE-smith row's fix is its
    bug patch reverted); strict grading takes forward diffs only.
    """
    if strict and reverse:
        raise ConfigError("strict grading applies an agent's forward diff; reverse=True is not one")
    try:
        graded, dropped = _start_apply_grade(
            task,
            sandbox,
            patch,
            timeout,
            patch_error,
            strict=strict,
            reverse=reverse,
            prepared=prepared,
        )
    finally:
        try:
            sandbox.close()
        except SandboxError as exc:
            logger.warning("closing the grading sandbox of %s failed: %s", task.task_id, exc)
    if strict:
        graded.grading = GradingMode.STRICT.value
        graded.dropped = [change.to_dict() for change in dropped]
    return graded


def grade_fresh_changes(
    task: Task,
    sandbox: SandboxRuntime,
    changes: ChangeSet,
    *,
    timeout: float = DEFAULT_TEST_TIMEOUT,
    strict: bool = False,
    prepared: bool = False,
) -> tuple[GradeResult, str | None]:
    """Like :func:`grade_fresh`, for a change set read from outside the agent's sandbox.

    Returns the result and the readable patch of the change as this sandbox (the task's
    image, where no agent ran) held it before (``None`` when nothing was applied).  Both
    modes refuse paths that leave the repository; ``strict`` also drops, path by path, what
    strict grading keeps from the tests.
    """
    shown: str | None = None
    dropped: list[DroppedChange] = []
    try:
        try:
            if not prepared:
                sandbox.start()
                prepare(task, sandbox)
            sandbox.base_commit(refresh=True)
            applied = apply_changes(task, sandbox, changes, strict=strict)
            shown, dropped = applied.patch, applied.dropped
        except SandboxError as exc:
            error = f"infrastructure error: fresh sandbox: {type(exc).__name__}: {exc}"
            graded = GradeResult(None, error)
        else:
            if strict:
                graded = grade_recorded(task, sandbox, timeout=timeout)
            else:
                graded = grade_benchmark(task, sandbox, applied.written, timeout=timeout)
            graded.applied_by = "file plane"
            if strict:
                # A kept source module that forges the test machinery on import trips it.
                done = StrictApplied(
                    True, modules=modules_of(applied.written), applied_by="file plane"
                )
                graded = check_canary(sandbox, done, graded, timeout=timeout)
    finally:
        try:
            sandbox.close()
        except SandboxError as exc:
            logger.warning("closing the grading sandbox of %s failed: %s", task.task_id, exc)
    graded.dropped = [change.to_dict() for change in dropped]
    if strict:
        graded.grading = GradingMode.STRICT.value
    return graded, shown


def _start_apply_grade(
    task: Task,
    sandbox: SandboxRuntime,
    patch: str,
    timeout: float,
    patch_error: str | None,
    *,
    strict: bool,
    reverse: bool,
    prepared: bool = False,
) -> tuple[GradeResult, list[DroppedChange]]:
    if patch_error is not None:
        return grade(task, sandbox, timeout=timeout, patch_error=patch_error), []
    try:
        if not prepared:
            sandbox.start()
            prepare(task, sandbox)
        sandbox.base_commit(refresh=True)
        done = None
        applied_by = ""
        if strict:
            done = apply_strict(task, sandbox, patch)
            if done.refused or not done.applied:
                return refused_grade(done), done.dropped
        elif patch.strip():
            applied_by, message = _apply_lenient(sandbox, patch, reverse=reverse)
            if message is not None:
                return _not_applied(message), []
    except SandboxError as exc:
        error = f"infrastructure error: fresh sandbox: {type(exc).__name__}: {exc}"
        return GradeResult(None, error), []
    if done is None:
        graded = grade_benchmark(task, sandbox, patch_paths(patch), timeout=timeout)
        graded.applied_by = applied_by
        return graded, []
    graded = grade_recorded(task, sandbox, timeout=timeout)
    return check_canary(sandbox, done, graded, timeout=timeout), done.dropped


def _not_applied(message: str | None) -> GradeResult:
    text = (message or "the patch does not apply").strip()[:500]
    return GradeResult(0.0, f"patch did not apply in the fresh sandbox: {text}")


def _apply_lenient(sandbox: SandboxRuntime, patch: str, *, reverse: bool) -> tuple[str, str | None]:
    """Benchmark grading's apply: which tool applied ``patch``, and the failure (or None)."""
    if reverse:
        return "git apply -R", apply_diff(sandbox, patch, reverse=True)
    result = sandbox.apply_patch(patch)
    if result.applied:
        return result.method, None
    return "", (result.message or "").strip()[:500] or "the patch does not apply"


def apply_diff(sandbox: SandboxRuntime, patch: str, *, reverse: bool = False) -> str | None:
    """None when ``patch`` applied (in reverse if asked), else what the patch tool said."""
    if reverse:
        applied, message = apply_reversed(sandbox, patch)
    else:
        result = sandbox.apply_patch(patch)
        applied, message = result.applied, result.message
    return None if applied else ((message or "").strip()[:500] or "the patch does not apply")
