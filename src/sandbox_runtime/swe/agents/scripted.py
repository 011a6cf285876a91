"""The ``scripted`` agent: replays a fixed list of tool calls (a rule agent, a test double).

A script is JSON: a list of calls for every task, or an object mapping task ids (and ``"*"``
for the rest) to lists.  A call is ``{"tool": NAME, "args": {...}}`` (``name``/``arguments``
are accepted too), with the tools of :mod:`sandbox_runtime.swe.agents.tools`, so a
trajectory of the LLM agent can be replayed step for step without a model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.errors import ConfigError
from sandbox_runtime.swe.agents.base import Agent, AgentResult, Budget
from sandbox_runtime.swe.agents.tools import ToolBox, ToolCall
from sandbox_runtime.swe.task import Task

__all__ = ["ScriptedAgent"]


def _call(item: Any, where: str) -> ToolCall:
    if not isinstance(item, Mapping):
        raise ConfigError(f"{where}: a call must be an object with 'tool' and 'args'")
    name = item.get("tool", item.get("name"))
    args = item.get("args", item.get("arguments", {}))
    if not isinstance(name, str) or not isinstance(args, Mapping):
        raise ConfigError(f"{where}: 'tool' must be a string and 'args' an object")
    return ToolCall(name, dict(args))


class ScriptedAgent(Agent):
    """Runs its script's calls in order until ``submit``, the end, or the budget."""

    name = "scripted"

    def __init__(self, script: Sequence[Any] | Mapping[str, Sequence[Any]]) -> None:
        if isinstance(script, Mapping):
            self._scripts = {
                str(key): [_call(c, f"script[{key!r}][{i}]") for i, c in enumerate(calls)]
                for key, calls in script.items()
            }
        else:
            self._scripts = {"*": [_call(c, f"script[{i}]") for i, c in enumerate(script)]}

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedAgent:
        """Load a script from a JSON file."""
        try:
            return cls(json.loads(Path(path).read_text(encoding="utf-8")))
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"cannot read agent script {path}: {exc}") from exc

    def run(self, task: Task, sandbox: SandboxRuntime, budget: Budget) -> AgentResult:
        """Replay the task's calls (its own list, else ``"*"``)."""
        calls = self._scripts.get(task.task_id, self._scripts.get("*", []))
        tools = ToolBox(sandbox, timeout=budget.step_timeout)
        result = AgentResult()
        for call in calls:
            stop = budget.exhausted(len(result.steps))
            if stop:
                result.stop_reason = stop
                return result
            observation = tools.run(call)
            result.record(call, observation)
            if observation.done:
                result.submitted, result.stop_reason = True, "submitted"
                return result
        result.stop_reason = "script ended"
        return result
