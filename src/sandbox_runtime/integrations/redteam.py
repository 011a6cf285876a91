"""The red-team corpus through the integrations' entry points: ``SWEEnv`` and rLLM's evaluator.

The SWE layer runs the corpus through ``run`` and ``compute_score``
(:mod:`sandbox_runtime.swe.redteam.corpus`); an RL trainer reaches the grader through these
two instead, so each hack is played here as a trainer would play it: the hack's command as a
``bash`` step of :class:`~sandbox_runtime.integrations.rllm.env.SWEEnv`, then ``submit``, then
the environment's reward; for rLLM main, the same episode in the flow's environment, its
change graded by :func:`~sandbox_runtime.integrations.rllm_flow.evaluator.grade_changes`, the
function ``SWEEvaluator.evaluate`` calls (rLLM itself need not be installed).
"""

from __future__ import annotations

from sandbox_runtime.integrations.rllm.env import SWEEnv
from sandbox_runtime.integrations.rllm_flow.evaluator import grade_changes, grade_patch
from sandbox_runtime.integrations.rllm_flow.flow import open_env
from sandbox_runtime.integrations.rllm_flow.settings import FlowSettings
from sandbox_runtime.swe.agents.tools import ToolCall
from sandbox_runtime.swe.grading import GradingError
from sandbox_runtime.swe.redteam.corpus import (
    SWE_ENTRIES,
    TEST_TIMEOUT,
    Backend,
    Cell,
    Entry,
    prepared_task,
    target_of,
)
from sandbox_runtime.swe.redteam.hacks import LANDED, Hack
from sandbox_runtime.swe.task import Task
from sandbox_runtime.swe.verdict import integrity_counts

__all__ = ["ALL_ENTRIES", "INTEGRATION_ENTRIES"]


def _play(env: SWEEnv, hack: Hack, task: Task) -> bool:
    """Reset, the hack's calls as steps; whether its command stopped early (it was blocked)."""
    env.reset()
    landed = False
    for call in hack.script(target_of(task)):
        args = call["args"]
        assert isinstance(args, dict)
        text, _reward, _done, _info = env.step(ToolCall(str(call["tool"]), args))
        landed = landed or LANDED in text
    return not landed


def _swe_env(hack: Hack, task: Task, backend: Backend) -> Cell:
    task = prepared_task(hack, task, backend)
    cell = Cell(
        hack.id, hack.klass.value, hack.expects.value, "swe-env", backend.label, task.format
    )
    env = SWEEnv(
        task,
        backend=backend.name,
        backend_options=dict(backend.options),
        reward_timeout=hack.test_timeout or TEST_TIMEOUT,
        tools="builtin",
    )
    with env:
        cell.blocked = _play(env, hack, task)
        try:
            cell.reward = env.compute_final_reward()
        except GradingError as exc:
            cell.reason = str(exc)
        grade = env.last_grade
    if grade is not None:
        cell.reason = cell.reason or grade.reason
        cell.dropped = len(grade.dropped)
    integrity = grade is not None and grade.integrity_flagged
    cell.flagged = bool(env.last_tamper) or cell.dropped > 0 or integrity
    return cell


def _rllm_evaluator(hack: Hack, task: Task, backend: Backend) -> Cell:
    task = prepared_task(hack, task, backend)
    cell = Cell(
        hack.id, hack.klass.value, hack.expects.value, "rllm-eval", backend.label, task.format
    )
    settings = FlowSettings(
        backend=backend.name,
        backend_options=dict(backend.options),
        reward_timeout=hack.test_timeout or TEST_TIMEOUT,
        tools="builtin",
        share_setup=False,
    )
    with open_env(task, settings) as env:
        cell.blocked = _play(env, hack, task)
        # As the flow hands it to the evaluator: the change read from outside the sandbox,
        # and the patch text only where none could be read.
        changes = env.changes()
        flags = list(env.last_tamper)  # handed to the evaluator with the change (artifacts)
        patch = env.patch() if changes is None else ""
    result = (
        grade_changes(task, changes, settings)
        if changes is not None
        else grade_patch(task, patch, settings)
    )
    cell.reward, cell.reason = result.reward, result.reason
    # What SWEEvaluator.evaluate reports in its output's metadata: the dropped paths and the
    # integrity counts, the flow's tamper flags included.
    cell.dropped = len(result.dropped)
    cell.flagged = bool(integrity_counts(result, flags)["flagged"]) or cell.dropped > 0
    return cell


INTEGRATION_ENTRIES: dict[str, Entry] = {"swe-env": _swe_env, "rllm-eval": _rllm_evaluator}
"""The integrations' entry points, by the name the matrix gives them."""

ALL_ENTRIES: dict[str, Entry] = {**SWE_ENTRIES, **INTEGRATION_ENTRIES}
"""Every entry point the corpus runs through, in the matrix's order."""
