"""A step-wise SWE environment for RL loops, with rLLM's ``BaseEnv`` interface, on any backend.

rLLM's agent loop (and verl PPO behind it) drives an environment through ``reset() ->
(observation, info)``, ``step(action) -> (observation, reward, done, info)``,
``compute_final_reward()``, ``close()`` and ``from_dict(extra_info)``; rLLM's own ``SWEEnv``
hard-codes one runtime.  :class:`SWEEnv` keeps that interface and runs on whichever backend
is named, so the same training setup rolls out on ``local``, ``docker``, ``ags`` or any other.

* ``reset`` opens a fresh sandbox for the task (closing the previous one), readies it as the
  task's benchmark does, and returns the issue as the first observation.
* ``step`` takes an action in R2E-Gym's text form, which the rLLM SWE agent emits::

      <function=execute_bash>
      <parameter=command>grep -rn parse src/</parameter>
      </function>

  or an OpenAI-style tool call (``{"name": ..., "arguments": ...}`` / a
  :class:`~sandbox_runtime.swe.agents.tools.ToolCall`).  R2E-Gym's names map onto this
  library's tools (:mod:`sandbox_runtime.swe.agents.tools`): ``execute_bash``/``bash``,
  ``file_editor``/``str_replace_editor`` and ``finish``/``submit``.  Step rewards are 0; the
  episode's reward is :meth:`compute_final_reward`, graded by the task's own tests.
* ``from_dict`` accepts the ``extra_info`` of the verl parquet that
  :func:`~sandbox_runtime.swe.dataset.write_rllm_parquet` writes (the task row itself), with
  optional environment settings (``backend``, ``step_timeout`` ...) next to the row's fields.

When rLLM is installed, :class:`SWEEnv` is a subclass of its ``BaseEnv``; without it the
class has the same methods, so nothing here needs rLLM to run or to be tested.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sandbox_runtime.runtime import SandboxRuntime
from sandbox_runtime.swe.agents.llm import task_prompt
from sandbox_runtime.swe.agents.tools import ToolBox, ToolCall
from sandbox_runtime.swe.grading import DEFAULT_TEST_TIMEOUT, GradeResult, grade
from sandbox_runtime.swe.prepare import prepare
from sandbox_runtime.swe.rows import parse_row
from sandbox_runtime.swe.runner import RunOptions, task_sandbox_config
from sandbox_runtime.swe.task import Task

if TYPE_CHECKING:
    _EnvBase = object
else:
    try:  # rLLM's base class where rLLM is installed, so isinstance checks there pass
        from rllm.environments.base.base_env import BaseEnv as _EnvBase
    except ImportError:
        _EnvBase = object

__all__ = ["CONTINUE_MESSAGE", "SWEEnv", "parse_action"]

#: The observation for a reply that called no tool (R2E-Gym's agent says the same thing).
CONTINUE_MESSAGE = (
    "Your reply called no function. Use a function call in every reply; "
    "call finish (or submit) when you are done."
)

#: R2E-Gym's and SWE-agent's tool names -> this library's.
_TOOL_NAMES = {
    "execute_bash": "bash",
    "bash": "bash",
    "file_editor": "str_replace_editor",
    "str_replace_editor": "str_replace_editor",
    "finish": "submit",
    "submit": "submit",
}
_FUNCTION = re.compile(r"<function=([^>\s]+)>(.*?)(?:</function>|$)", re.DOTALL)
_PARAMETER = re.compile(r"<parameter=([^>\s]+)>(.*?)</parameter>", re.DOTALL)
_SETTINGS = ("backend", "backend_options", "step_timeout", "reward_timeout", "base_image")


def parse_action(action: str | ToolCall | Mapping[str, Any]) -> ToolCall | None:
    """The tool call in ``action``, or ``None`` when it calls none.

    Text follows R2E-Gym's ``<function=NAME><parameter=KEY>VALUE</parameter></function>``;
    one leading and one trailing newline of each value are dropped, as R2E-Gym does.
    """
    if isinstance(action, ToolCall):
        return action
    if isinstance(action, Mapping):
        function = action.get("function") or {}
        name = action.get("name") or function.get("name")
        raw = action.get("arguments", function.get("arguments"))
        return ToolCall.from_json(str(name), raw) if name else None
    match = _FUNCTION.search(action)
    if match is None:
        return None
    arguments: dict[str, Any] = {}
    for key, value in _PARAMETER.findall(match.group(2)):
        value = value.removeprefix("\n").removesuffix("\n")
        if key in ("insert_line",) and value.strip().lstrip("-").isdigit():
            arguments[key] = int(value)
        elif key == "view_range":
            arguments[key] = [int(n) for n in re.findall(r"-?\d+", value)]
        else:
            arguments[key] = value
    if "cmd" in arguments and "command" not in arguments:
        arguments["command"] = arguments.pop("cmd")
    return ToolCall(match.group(1), arguments)


class SWEEnv(_EnvBase):
    """One SWE task as an RL environment: a fresh sandbox per episode, tools as actions."""

    def __init__(
        self,
        entry: Mapping[str, Any] | Task,
        *,
        backend: str = "local",
        backend_options: Mapping[str, Any] | None = None,
        step_timeout: float = 90.0,
        reward_timeout: float = DEFAULT_TEST_TIMEOUT,
        base_image: str | None = None,
        max_output_chars: int = 16000,
    ) -> None:
        self.task = entry if isinstance(entry, Task) else parse_row(dict(entry), index="entry")
        self.options = RunOptions(
            backend=backend,
            step_timeout=step_timeout,
            test_timeout=reward_timeout,
            base_image=base_image,
            backend_options=dict(backend_options or {}),
        )
        self.max_output_chars = max_output_chars
        self.sandbox: SandboxRuntime | None = None
        self.total_steps = 0
        self.last_grade: GradeResult | None = None
        self._idx: Any = None
        self._lock = threading.Lock()

    # rLLM's batch index, kept here too so the class behaves the same without rLLM.
    @property
    def idx(self) -> Any:
        return self._idx

    @idx.setter
    def idx(self, value: Any) -> None:
        self._idx = value

    def reset(self) -> tuple[str, dict[str, Any]]:
        """Open a fresh sandbox for the task; returns the issue and the task's identity."""
        with self._lock:
            self._close_sandbox()
            sandbox = SandboxRuntime(task_sandbox_config(self.task, self.options))
            try:
                sandbox.start()
                prepare(self.task, sandbox)
                sandbox.base_commit(refresh=True)
            except BaseException:
                sandbox.close()
                raise
            self.sandbox = sandbox
            self.total_steps = 0
            self.last_grade = None
        info = {"task_id": self.task.task_id, "sandbox_id": sandbox.id}
        return task_prompt(self.task), info

    def step(
        self, action: str | ToolCall | Mapping[str, Any]
    ) -> tuple[str, float, bool, dict[str, Any]]:
        """Run one action; the reward of a step is 0 and ``done`` is set by finish/submit."""
        sandbox = self._require_sandbox()
        call = parse_action(action)
        self.total_steps += 1
        if call is None:
            return CONTINUE_MESSAGE, 0.0, False, {"tool": None}
        name = _TOOL_NAMES.get(call.name.lower(), call.name)
        tools = ToolBox(
            sandbox, timeout=self.options.step_timeout, max_output_chars=self.max_output_chars
        )
        observation = tools.run(ToolCall(name, call.arguments, call.id))
        info = {
            "tool": name,
            "exit_code": observation.exit_code,
            "error": observation.error,
            "duration": observation.duration,
        }
        return observation.output, 0.0, observation.done, info

    def compute_final_reward(self) -> float:
        """Grade the sandbox's current state by the task's own tests (1.0 or 0.0).

        Raises :class:`~sandbox_runtime.swe.grading.GradingError` when the tests gave no
        verdict (sandbox gone, backend error, harness timeout): never a 0 they did not give.
        """
        self.last_grade = grade(
            self.task, self._require_sandbox(), timeout=self.options.test_timeout
        )
        return self.last_grade.reward_or_raise()

    def patch(self) -> str:
        """The episode's changes to the repository, as a diff against the task's base."""
        return self._require_sandbox().diff()

    def close(self) -> None:
        """Remove the sandbox; harmless to call twice."""
        with self._lock:
            self._close_sandbox()

    @staticmethod
    def from_dict(extra_info: Mapping[str, Any] | str) -> SWEEnv:
        """From a verl row's ``extra_info``: the task row, plus optional env settings."""
        info = json.loads(extra_info) if isinstance(extra_info, str) else dict(extra_info)
        settings = {key: info.pop(key) for key in _SETTINGS if key in info}
        return SWEEnv(info, **settings)

    @staticmethod
    def is_multithread_safe() -> bool:
        """Each env owns its sandbox and the runtime is thread-safe: rLLM may use threads."""
        return True

    def __enter__(self) -> SWEEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = self.sandbox.id if self.sandbox is not None else "no sandbox"
        return f"SWEEnv(task={self.task.task_id!r}, backend={self.options.backend!r}, {state})"

    def _require_sandbox(self) -> SandboxRuntime:
        if self.sandbox is None:
            raise RuntimeError("call reset() first: the environment has no sandbox yet")
        return self.sandbox

    def _close_sandbox(self) -> None:
        if self.sandbox is not None:
            sandbox, self.sandbox = self.sandbox, None
            sandbox.close()
