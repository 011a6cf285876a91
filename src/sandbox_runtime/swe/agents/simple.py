"""The agents that need no model: ``oracle`` (applies the gold patch) and ``null``.

They bound a run's rewards from above and below: on a sound task set the oracle earns 1
everywhere and the null agent 0, which is how the bundled tasks are checked on every backend.
"""

from __future__ import annotations

import time

from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.swe.agents.base import Agent, AgentResult, Budget, Step
from sandbox_runtime.swe.task import Task

__all__ = ["NullAgent", "OracleAgent", "apply_reversed"]


def apply_reversed(sandbox: SandboxRuntime, patch: str) -> tuple[bool, str]:
    """Apply ``patch`` in reverse (SWE-smith's fix is its bug patch reverted)."""
    data = patch if patch.endswith("\n") else patch + "\n"
    result = sandbox.exec(
        "git -c safe.directory='*' apply --reverse --whitespace=nowarn -", stdin=data, timeout=120
    )
    return result.ok, result.output.strip()


class OracleAgent(Agent):
    """Applies the task's gold patch and submits."""

    name = "oracle"

    def run(self, task: Task, sandbox: SandboxRuntime, budget: Budget) -> AgentResult:
        """Apply the gold patch (reversed for SWE-smith rows)."""
        began = time.monotonic()
        if task.gold_patch_reversed:
            applied, message = apply_reversed(sandbox, task.gold_patch)
        else:
            result = sandbox.apply_patch(task.gold_patch)
            applied, message = result.applied, result.message
        step = Step(
            index=0,
            action="apply_patch",
            arguments={"patch": task.gold_patch, "reverse": task.gold_patch_reversed},
            output=message,
            exit_code=0 if applied else 1,
            duration=time.monotonic() - began,
        )
        return AgentResult(
            steps=[step],
            submitted=True,
            stop_reason="submitted",
            patch_error=None if applied else (message or "the gold patch did not apply"),
        )


class NullAgent(Agent):
    """Changes nothing: the baseline every sound task must fail."""

    name = "null"

    def run(self, task: Task, sandbox: SandboxRuntime, budget: Budget) -> AgentResult:
        """Submit at once."""
        return AgentResult(submitted=True, stop_reason="submitted")
