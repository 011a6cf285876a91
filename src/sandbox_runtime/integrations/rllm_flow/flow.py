"""``SWEFlow``: rLLM main's ``AgentFlow`` for SWE tasks, registered as ``sandbox-runtime-swe``.

rLLM main (0.3, after the Agent/Environment stack was removed) runs agents as ``AgentFlow``
plugins: ``run(task, config) -> Episode``, with ``config.base_url`` the gateway session that
records every model call for training.  This flow:

* reads the task's row from ``task.metadata`` (R2E-Gym, SWE-bench, SWE-smith or this
  library's JSONL rows: anything :func:`~sandbox_runtime.swe.rows.parse_row` reads);
* opens the task's sandbox itself, on the backend its settings name
  (:mod:`~sandbox_runtime.integrations.rllm_flow.settings`), through
  :class:`~sandbox_runtime.integrations.rllm.env.SWEEnv` (the same readying and tool install as
  every other path of this library);
* runs the tool loop of :mod:`~sandbox_runtime.integrations.rllm_flow.loop` against the
  gateway with the OpenAI client (no tunnel: the sandbox never calls the model);
* returns an ``Episode`` with one ``Step`` per model call (the gateway's traces fill in the
  tokens in order) and the repository's diff in ``Episode.artifacts["patch"]``, then closes the
  sandbox.  :class:`~sandbox_runtime.integrations.rllm_flow.evaluator.SWEEvaluator` grades the
  diff by the task's own tests.

The rollouts of one task (rLLM runs each task ``group_size`` times, at once) share one
prepared sandbox where the backend can fork (``share_setup``, on by default): the task is set
up once per process, and each rollout starts from a checkpoint of that state
(:data:`SHARED_SETUPS`, :mod:`sandbox_runtime.swe.prepared`); the evaluator's fresh grading
sandboxes start from it too.

It declares ``needs_env = False``: rLLM's hooks provision nothing for it, so rLLM's fixed
``--sandbox-backend`` list, its tunnel and its warm queue are not involved (docs/rllm-main.md).
An exception (a sandbox that fails, an endpoint that errors) leaves the flow: rLLM's engine
retries it ``retry_limit`` times and then records an ERROR episode, which rLLM's trainer drops
from the update under ``rllm.compact_filtering`` (``enable`` and ``mask_error``).
"""

from __future__ import annotations

import atexit
import logging
import os
from collections.abc import Mapping
from typing import Any

from sandbox_runtime import close_on_signal
from sandbox_runtime.errors import ConfigError
from sandbox_runtime.integrations.rllm.env import SWEEnv
from sandbox_runtime.integrations.rllm_flow.loop import LoopResult, Reply, run_loop
from sandbox_runtime.integrations.rllm_flow.settings import (
    BACKEND_ENV,
    ROW_KEY,
    FlowSettings,
    resolve_settings,
)
from sandbox_runtime.swe.prepared import PreparedStates
from sandbox_runtime.swe.rows import parse_row
from sandbox_runtime.swe.task import Task as SWETask

__all__ = ["FLOW_NAME", "SHARED_SETUPS", "SWEFlow", "swe_task", "task_row"]

logger = logging.getLogger("sandbox_runtime.integrations")

#: The name under the ``rllm.agents`` and ``rllm.evaluators`` entry points.
FLOW_NAME = "sandbox-runtime-swe"
#: Keys rLLM's loaders add to a row that are not the task's.
_RLLM_ROW_KEYS = ("id", "instruction", "task_path", "sandbox_backend", ROW_KEY)

#: This process's prepared task states, shared by the rollouts of each task's group and by
#: the evaluator (``share_setup``); their checkpoints are deleted when the process exits, and
#: carry owner labels, so ``sandbox-runtime reap`` removes them if it dies instead.
SHARED_SETUPS = PreparedStates()
atexit.register(SHARED_SETUPS.close)


def task_row(task: Any) -> dict[str, Any]:
    """The dataset row behind an rLLM ``Task`` (its ``metadata``) or a plain row dict."""
    row = getattr(task, "metadata", task)
    if not isinstance(row, Mapping):
        raise ConfigError(
            f"{FLOW_NAME}: the task carries no row (metadata is {type(row).__name__}); "
            "give rLLM a dataset of R2E-Gym / SWE-bench / sandbox-runtime rows"
        )
    return dict(row)


def swe_task(row: Mapping[str, Any]) -> SWETask:
    """The library's task for a row, without the keys rLLM and this flow add."""
    plain = {key: value for key, value in row.items() if key not in _RLLM_ROW_KEYS}
    return parse_row(plain, index=str(row.get("id", "row")))


def open_env(task: SWETask, settings: FlowSettings) -> SWEEnv:
    """The task's environment on the configured backend (not yet reset)."""
    return SWEEnv(
        task,
        backend=settings.backend,
        backend_options=settings.backend_options,
        step_timeout=settings.step_timeout,
        reward_timeout=settings.reward_timeout,
        base_image=settings.base_image,
        max_output_chars=settings.max_output_chars,
        tools=settings.tools,
        shared=SHARED_SETUPS if settings.share_setup else None,
    )


class OpenAIChat:
    """One model call through the OpenAI client at rLLM's gateway URL."""

    def __init__(self, base_url: str, model: str, settings: FlowSettings) -> None:
        import openai

        self.client = openai.OpenAI(
            base_url=base_url,
            api_key=os.environ.get("OPENAI_API_KEY", "EMPTY"),
            timeout=settings.request_timeout,
            max_retries=2,
        )
        self.model = model
        self.extra: dict[str, Any] = {}
        if settings.temperature is not None:
            self.extra["temperature"] = settings.temperature
        if settings.max_tokens is not None:
            self.extra["max_tokens"] = settings.max_tokens

    def __call__(self, messages: list[dict[str, Any]]) -> Reply:
        sent: Any = messages  # plain dicts: the client's message TypedDicts, unchecked
        response = self.client.chat.completions.create(
            model=self.model, messages=sent, **self.extra
        )
        message = response.choices[0].message
        kept: dict[str, Any] = {"role": "assistant", "content": message.content or ""}
        calls = [call.model_dump() for call in (message.tool_calls or [])]
        if calls:
            kept["tool_calls"] = calls
        return Reply(message.content or "", calls, kept)

    def close(self) -> None:
        self.client.close()


def to_episode(result: LoopResult, task: SWETask, settings: FlowSettings) -> Any:
    """RLLM's ``Episode`` for a finished loop (imports rLLM: call only where it is installed)."""
    from rllm.types import Episode, Step, Trajectory
    from rllm.workflows.workflow import TerminationReason

    steps = [
        Step(
            output=turn.reply,
            model_response=turn.reply,
            action=turn.action,
            observation=turn.observation,
            done=turn.done,
        )
        for turn in result.turns
    ]
    summary = {
        "task_id": task.task_id,
        "backend": settings.backend,
        "stop_reason": result.stop_reason,
        "patch": result.patch,
    }
    trajectory = Trajectory(name=FLOW_NAME, steps=steps, output=result.patch, metadata=summary)
    reason = (
        TerminationReason.ENV_DONE
        if result.stop_reason == "submitted"
        else TerminationReason.MAX_TURNS_EXCEEDED
    )
    return Episode(
        trajectories=[trajectory],
        termination_reason=reason,
        artifacts={
            "patch": result.patch,
            "changes": result.changes,
            "tamper": result.tamper,
            "messages": result.messages,
        },
        metadata={**summary, "accounting": result.accounting},
    )


class SWEFlow:
    """rLLM ``AgentFlow``: one SWE task, its own sandbox, R2E-Gym's tools and observations."""

    name = FLOW_NAME
    needs_env = False
    llm_inside_env = False

    def configure(self, metadata: Mapping[str, Any]) -> dict[str, Any]:
        """RLLM's CLI hands over its sandbox flags here; this flow takes none of them.

        A refusal is a one-line ``SystemExit`` (rLLM's CLI would print a ``ConfigError`` as a
        30-line traceback).  Being called by rLLM's CLI, in its main thread, this is also where
        the flow makes SIGTERM and SIGINT close its sandboxes and prepared states before the
        process ends, where rLLM left those signals to Python (``_core/shutdown.py``).
        """
        if metadata.get("sandbox_backend"):
            raise SystemExit(
                f"{FLOW_NAME}: --sandbox-backend is not used (it picks rLLM's own sandboxes); "
                f"drop it and choose the backend with {BACKEND_ENV}=NAME or the row's "
                f"{ROW_KEY!r} settings"
            )
        close_on_signal(only_if_default=True)
        return {key: value for key, value in metadata.items() if key != "sandbox_concurrency"}

    def run(self, task: Any, config: Any) -> Any:
        """Play the task against the model at ``config.base_url``; the diff goes to grading."""
        row = task_row(task)
        settings = resolve_settings(row)
        swe = swe_task(row)
        max_steps = swe.max_steps or settings.max_steps
        chat = OpenAIChat(config.base_url, config.model, settings)
        try:
            with open_env(swe, settings) as env:
                env.reset()
                result = run_loop(env, chat, max_steps=max_steps)
        finally:
            chat.close()
        logger.info(
            "%s: %s after %d steps on %s",
            swe.task_id,
            result.stop_reason,
            len(result.turns),
            settings.backend,
        )
        return to_episode(result, swe, settings)
