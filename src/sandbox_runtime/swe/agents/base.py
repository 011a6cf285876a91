"""The agent interface: one small method, and the records every agent returns.

An agent gets a task, a started and prepared sandbox, and a budget, acts on the sandbox only
through :class:`~sandbox_runtime.SandboxRuntime`, and returns an :class:`AgentResult` whose
steps become the task's trajectory.  The patch is not the agent's business: the runner takes
it from the sandbox (``SandboxRuntime.diff``) after the agent returns, so every agent is
graded on what it actually left in the repository.

For step-wise loops (RL trainers such as rLLM drive the model themselves) use
:class:`~sandbox_runtime.integrations.rllm.SWEEnv`, which exposes the same tools one step at a
time.
"""

from __future__ import annotations

import abc
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.swe.agents.tools import Observation, ToolCall
from sandbox_runtime.swe.task import Task

__all__ = ["Agent", "AgentResult", "Budget", "Step"]


@dataclass
class Budget:
    """What an agent may spend on one task."""

    max_steps: int = 30
    """Actions (tool calls) the agent may take."""
    step_timeout: float = 120.0
    """Seconds one command (and one model request) may take."""
    time_limit: float | None = None
    """Seconds the whole attempt may take; None for no limit."""
    cancel: threading.Event = field(default_factory=threading.Event)
    """Set by the runner on Ctrl-C; agents stop at the next step."""
    started: float = field(default_factory=time.monotonic)

    def exhausted(self, steps_taken: int) -> str | None:
        """Why the agent must stop now, or None while it may go on."""
        if self.cancel.is_set():
            return "cancelled"
        if steps_taken >= self.max_steps:
            return f"step limit ({self.max_steps}) reached"
        if self.time_limit is not None and time.monotonic() - self.started > self.time_limit:
            return f"time limit ({self.time_limit:g}s) reached"
        return None


@dataclass
class Step:
    """One action and what came of it; the unit of a trajectory."""

    index: int
    action: str
    arguments: dict[str, Any] = field(default_factory=dict)
    output: str = ""
    exit_code: int | None = None
    duration: float = 0.0
    thought: str = ""
    phase: str = "act"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


@dataclass
class AgentResult:
    """What an agent did on one task."""

    steps: list[Step] = field(default_factory=list)
    submitted: bool = False
    """True when the agent said it was done (rather than running out of budget)."""
    stop_reason: str = ""
    patch_error: str | None = None
    """Set when the agent applied a patch that did not apply (the reward is then 0)."""
    error: str | None = None
    """An error that ended the attempt (model endpoint down, sandbox gone, ...)."""
    usage: dict[str, int] = field(default_factory=dict)
    """Token counts reported by a model endpoint, if any."""
    notes: list[str] = field(default_factory=list)
    """What a reader of the trajectory must know, e.g. that the issue the model got was cut."""

    def record(self, call: ToolCall, observation: Observation, thought: str = "") -> Step:
        """Append the step a tool call made, numbered after the ones before it."""
        step = Step(
            index=len(self.steps),
            action=call.name,
            arguments=call.arguments,
            output=observation.output,
            exit_code=observation.exit_code,
            duration=observation.duration,
            thought=thought,
        )
        self.steps.append(step)
        return step


class Agent(abc.ABC):
    """Acts on one task's sandbox; see the module docstring."""

    name: ClassVar[str] = ""

    @abc.abstractmethod
    def run(self, task: Task, sandbox: SandboxRuntime, budget: Budget) -> AgentResult:
        """Work on ``task`` in ``sandbox`` (started, prepared, at the base commit)."""
