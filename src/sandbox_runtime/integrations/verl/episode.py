"""The sandbox side of a verl rollout: settings, the task's environment, a step, the grade.

Nothing here imports verl: :mod:`~sandbox_runtime.integrations.verl.agent_loop` calls these
from worker threads (each blocks on the sandbox) while verl's event loop keeps generating.

The sandbox, its tools and its grading are the rLLM main flow's (one code path for both
trainers): :class:`~sandbox_runtime.integrations.rllm.env.SWEEnv` on the configured backend,
the rollouts of one task sharing one prepared state where the backend forks
(``share_setup``), and :func:`~sandbox_runtime.integrations.rllm_flow.evaluator.grade_patch`
for strict grading in a fresh sandbox.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sandbox_runtime.errors import ConfigError
from sandbox_runtime.integrations.rllm.env import SWEEnv
from sandbox_runtime.integrations.rllm_flow.evaluator import grade_patch
from sandbox_runtime.integrations.rllm_flow.flow import open_env, swe_task
from sandbox_runtime.integrations.rllm_flow.loop import NO_TOOL_REMINDER
from sandbox_runtime.integrations.rllm_flow.settings import (
    ROW_KEY,
    FlowSettings,
    resolve_settings,
)
from sandbox_runtime.swe.grading import GradeResult
from sandbox_runtime.swe.parquet import decode_row
from sandbox_runtime.swe.task import Task as SWETask

__all__ = ["Episode", "act", "episode_row", "grade", "loop_settings", "start", "task_of"]

#: Keys verl's dataset and ``tasks rllm`` add to ``extra_info`` that are not the task's.
_VERL_KEYS = ("index", "split", "tools_kwargs", "interaction_kwargs", "need_tools_kwargs")


def episode_row(extra_info: Any) -> dict[str, Any]:
    """The task row of a verl batch row: its ``extra_info`` (``sandbox-runtime tasks rllm``)."""
    if not isinstance(extra_info, Mapping):
        raise ConfigError(
            "sandbox_runtime_swe agent loop: the batch row has no extra_info mapping "
            f"(got {type(extra_info).__name__}); "
            "write the parquet with `sandbox-runtime tasks rllm`"
        )
    return {str(k): v for k, v in extra_info.items() if k not in _VERL_KEYS}


def _row_own_settings(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row's own ``sandbox_runtime`` mapping, also when the parquet stored it encoded."""
    decoded, _format = decode_row(row)
    own = decoded.get(ROW_KEY, row.get(ROW_KEY))
    if own is None:
        return {}
    if not isinstance(own, Mapping):
        raise ConfigError(f"task row: field {ROW_KEY!r} must be an object of settings")
    return dict(own)


def loop_settings(row: Mapping[str, Any], *layers: Mapping[str, Any] | None) -> FlowSettings:
    """Settings for one trajectory, each source overriding the one before.

    The environment (``SANDBOX_RUNTIME_RLLM_*``, as for the rLLM flow), then ``layers`` in
    order (the agent-loop file's keys, then the trainer config's ``sandbox_runtime`` mapping),
    then the row's own ``sandbox_runtime`` mapping: settings that travel with the data win.
    """
    merged: dict[str, Any] = {}
    for layer in layers:
        merged.update(dict(layer or {}))
    merged.update(_row_own_settings(row))
    return resolve_settings({ROW_KEY: merged} if merged else {})


@dataclass
class Episode:
    """One trajectory's task, settings and open environment."""

    task: SWETask
    settings: FlowSettings
    env: SWEEnv
    issue: str

    def close(self) -> None:
        self.env.close()


def task_of(row: Mapping[str, Any]) -> SWETask:
    """The task of a row in any format :func:`~sandbox_runtime.swe.rows.parse_row` reads."""
    return swe_task(dict(row))


def start(task: SWETask, settings: FlowSettings) -> Episode:
    """Open and ready the task's sandbox (a copy of the group's shared state where it can)."""
    env = open_env(task, settings)
    try:
        issue, _info = env.reset()
    except BaseException:
        env.close()
        raise
    return Episode(task, settings, env, issue)


def act(episode: Episode, reply: str) -> tuple[str, bool]:
    """Run the reply's tool call; the observation the model reads next, and whether it finished.

    A reply without a tool call costs a step and gets the loop's reminder, as in the rLLM
    flow; a sandbox fault raises (:class:`~sandbox_runtime.errors.SandboxError`).
    """
    observation, _reward, done, info = episode.env.step(reply)
    if info.get("tool") is None and not done:
        observation = NO_TOOL_REMINDER
    return observation, bool(done)


def grade(episode: Episode, patch: str) -> GradeResult:
    """Grade ``patch`` in a fresh sandbox (strict unless the settings say ``benchmark``)."""
    return grade_patch(episode.task, patch, episode.settings)
