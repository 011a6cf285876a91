"""``SWEEvaluator``: rLLM main's ``Evaluator`` that grades an episode's diff by the task's tests.

rLLM's engine calls ``evaluate(task, episode)`` after the flow has returned, so the flow's
sandbox is gone by then; the evaluator grades the way the SWE-bench harness does: a fresh
sandbox from the task's image, readied for the task, the episode's diff applied, the task's
own tests run (``grade_in=fresh`` of :mod:`sandbox_runtime.swe.isolation`).  Grading is strict
unless the settings say ``grading = "benchmark"``: changes to tests, test settings and the
interpreter never reach the tests (:mod:`sandbox_runtime.swe.strict`), and the output's
metadata lists what was dropped.  What is graded is the change set the flow read from outside
its sandbox (``episode.artifacts["changes"]``, :mod:`sandbox_runtime.swe.capture`: written
into the grading sandbox through its file plane, never a diff made by programs the agent could
replace); an episode without one is graded by its diff, ``episode.artifacts["patch"]`` (any
flow that sets either can be graded).

A reward is 1.0 or 0.0 only when the tests gave a verdict (a diff that does not apply is a 0,
as in the harness).  When they gave none (the grading sandbox would not start, was killed,
the backend failed, the tests timed out) ``evaluate`` raises
:class:`~sandbox_runtime.swe.grading.GradingError`: rLLM's engine catches it, retries the
rollout ``retry_limit`` times, and records an ERROR episode (``rllm eval`` counts it under
Errors; rLLM's trainer masks it with ``rllm.compact_filtering.enable=true`` and
``mask_error=true``, or stops when ``rllm.workflow.raise_on_error`` is true, its default).
"""

from __future__ import annotations

import time
from typing import Any

from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.errors import ConfigError, SandboxError
from sandbox_runtime.integrations.rllm_flow.flow import FLOW_NAME, SHARED_SETUPS, swe_task, task_row
from sandbox_runtime.integrations.rllm_flow.settings import FlowSettings, resolve_settings
from sandbox_runtime.swe.capture import ChangeSet
from sandbox_runtime.swe.grading import GradeResult
from sandbox_runtime.swe.isolation import grade_fresh, grade_fresh_changes
from sandbox_runtime.swe.runner import RunOptions, task_sandbox_config
from sandbox_runtime.swe.strict import GradingMode
from sandbox_runtime.swe.tamper import TamperFlag
from sandbox_runtime.swe.task import Task as SWETask
from sandbox_runtime.swe.verdict import integrity_counts

__all__ = [
    "SWEEvaluator",
    "episode_changes",
    "episode_patch",
    "grade_changes",
    "grade_patch",
]


def episode_patch(episode: Any) -> str:
    """The diff the flow left on the episode (``artifacts["patch"]``, else its trajectory's)."""
    artifacts = getattr(episode, "artifacts", None) or {}
    if isinstance(artifacts.get("patch"), str):
        return str(artifacts["patch"])
    for trajectory in getattr(episode, "trajectories", None) or []:
        patch = (getattr(trajectory, "metadata", None) or {}).get("patch")
        if isinstance(patch, str):
            return patch
    raise ConfigError(
        f"{FLOW_NAME} evaluator: the episode carries no diff (artifacts['patch']); "
        f"grade episodes of the {FLOW_NAME} agent, or of a flow that sets it"
    )


def episode_changes(episode: Any) -> ChangeSet | None:
    """The change set the flow read from outside its sandbox (``artifacts["changes"]``)."""
    artifacts = getattr(episode, "artifacts", None) or {}
    found = artifacts.get("changes")
    return ChangeSet.from_dict(found) if isinstance(found, dict) else None


def episode_tamper(episode: Any) -> list[TamperFlag]:
    """The tamper flags the flow read with the change (``artifacts["tamper"]``)."""
    artifacts = getattr(episode, "artifacts", None) or {}
    found = artifacts.get("tamper")
    if not isinstance(found, list):
        return []
    return [
        TamperFlag(str(f.get("path", "")), str(f.get("kind", "")), str(f.get("detail", "")))
        for f in found
        if isinstance(f, dict)
    ]


def grade_changes(task: SWETask, changes: ChangeSet, settings: FlowSettings) -> GradeResult:
    """Grade a change set in a fresh sandbox on the configured backend (never raises for faults)."""
    options = _options(settings)
    strict = settings.grading == GradingMode.STRICT.value
    prepared = settings.share_setup
    try:
        sandbox = (
            SHARED_SETUPS.open(task, options)
            if prepared
            else SandboxRuntime(task_sandbox_config(task, options))
        )
    except SandboxError as exc:
        return GradeResult(None, f"infrastructure error: grading sandbox: {exc}")
    result, _shown = grade_fresh_changes(
        task, sandbox, changes, timeout=settings.reward_timeout, strict=strict, prepared=prepared
    )
    result.grade_in = "fresh"
    return result


def _options(settings: FlowSettings) -> RunOptions:
    return RunOptions(
        backend=settings.backend,
        step_timeout=settings.step_timeout,
        test_timeout=settings.reward_timeout,
        base_image=settings.base_image,
        backend_options=dict(settings.backend_options),
    )


def grade_patch(task: SWETask, patch: str, settings: FlowSettings) -> GradeResult:
    """Grade ``patch`` in a fresh sandbox on the configured backend (never raises for faults)."""
    options = _options(settings)
    strict = settings.grading == GradingMode.STRICT.value
    if not settings.share_setup:
        sandbox = SandboxRuntime(task_sandbox_config(task, options))
        result = grade_fresh(task, sandbox, patch, timeout=settings.reward_timeout, strict=strict)
    else:  # a copy of the task's shared prepared state: no setup runs again
        try:
            sandbox = SHARED_SETUPS.open(task, options)
        except SandboxError as exc:
            return GradeResult(None, f"infrastructure error: grading sandbox: {exc}")
        result = grade_fresh(
            task, sandbox, patch, timeout=settings.reward_timeout, strict=strict, prepared=True
        )
    result.grade_in = "fresh"
    return result


class SWEEvaluator:
    """rLLM ``Evaluator``: 1.0 / 0.0 from the task's own tests, an exception without a verdict."""

    name = FLOW_NAME

    def evaluate(self, task: Any, episode: Any) -> Any:
        """Grade the episode's diff; raises ``GradingError`` when the tests gave no verdict."""
        row = task_row(task)
        settings = resolve_settings(row)
        swe = swe_task(row)
        changes = episode_changes(episode)
        flags = episode_tamper(episode)
        began = time.monotonic()
        if changes is not None:
            result = grade_changes(swe, changes, settings)
        else:
            result = grade_patch(swe, episode_patch(episode), settings)
        reward = result.reward_or_raise()
        from rllm.eval.types import EvalOutput, Signal

        return EvalOutput(
            reward=reward,
            is_correct=reward >= 1.0,
            signals=[Signal(name="resolved", value=reward)],
            metadata={
                "grading_seconds": round(time.monotonic() - began, 3),
                "grading_reason": result.reason[:500],
                "grade_in": result.grade_in,
                "grading": result.grading,
                "dropped": [change["path"] for change in result.dropped],
                "integrity": integrity_counts(result, flags),
                "tamper": [flag.to_dict() for flag in flags],
                "refused": result.refused,
                "canary": result.canary,
                "outcome_record": result.outcome_record,
            },
        )
