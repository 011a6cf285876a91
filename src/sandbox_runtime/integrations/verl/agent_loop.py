"""``SWEAgentLoop``: verl 0.9's agent loop for SWE tasks in this library's sandboxes.

verl calls :meth:`SWEAgentLoop.run` once per trajectory with the batch row's fields
(``extra_info`` holds the task row ``sandbox-runtime tasks rllm`` wrote: R2E-Gym, SWE-bench,
SWE-smith or this library's rows).  It

1. opens the task's sandbox on the configured backend and readies it (the rollouts of one task
   start from one shared prepared state where the backend forks, ``share_setup``);
2. builds the prompt (the R2E-style system prompt and the issue) with verl's own Continuous
   Token builder, the tokenization every verl agent loop uses;
3. per turn: generates with ``server_manager.generate`` on token ids, appends the model's tokens
   (mask 1), runs the reply's ``<function=...>`` call with the R2E-style tools, and appends the
   observation as a user turn through the builder (mask 0); stops at ``finish``, at the step
   budget or when the response fills ``rollout.response_length``;
4. grades the repository's diff in a fresh sandbox with strict grading and returns the reward
   in ``reward_score``, so verl's reward manager is not consulted for these rows.

Faults.  A sandbox that fails to start, dies under a step, or a grading that gives no verdict
(killed sandbox, backend error, test timeout) is never a reward of 0.  With ``on_fault: mask``
(the default) the trajectory comes back with a ``response_mask`` of zeros, so none of its tokens
enters the policy loss, ``extra_fields["sandbox_runtime_fault"]`` holding the reason (verl
copies extra fields into the batch's non-tensor data, where a trainer or a metric can read it)
and ``extra_fields["reward_valid"] = False``.  verl 0.9.1 has no way to drop one sample of a
batch from the agent loop, and its batch needs a number for every sample once one sample has
one, so ``reward_score`` is a placeholder: the mean of the rewards the same task's other
rollouts in this worker process got (0.5 when none has one yet), which keeps it from pulling
GRPO's group baseline.  With ``on_fault: raise`` the fault leaves ``run`` and verl fails the
step.  Errors of the model's server always leave ``run``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import defaultdict
from collections.abc import Mapping
from typing import Any
from uuid import uuid4

from omegaconf import DictConfig, OmegaConf
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput

from sandbox_runtime.errors import BackendNotFoundError, ConfigError, SandboxError
from sandbox_runtime.integrations.rllm_flow.loop import SYSTEM_PROMPT, task_message
from sandbox_runtime.integrations.rllm_flow.settings import FlowSettings
from sandbox_runtime.integrations.verl import AGENT_LOOP_NAME
from sandbox_runtime.integrations.verl.episode import (
    Episode,
    act,
    episode_row,
    grade,
    loop_settings,
    start,
    task_of,
)

__all__ = ["CONFIG_KEY", "SWEAgentLoop"]

logger = logging.getLogger("sandbox_runtime.integrations")

#: The trainer config's mapping of settings (``+sandbox_runtime.backend=ags``).
CONFIG_KEY = "sandbox_runtime"
_ON_FAULT = ("mask", "raise")


class _Rewards:
    """The rewards this process's rollouts of each task got: a masked sample's placeholder."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_task: dict[str, list[float]] = defaultdict(list)

    def add(self, task_id: str, reward: float) -> None:
        with self._lock:
            self._by_task[task_id].append(reward)

    def placeholder(self, task_id: str) -> float:
        with self._lock:
            seen = self._by_task.get(task_id) or []
            return sum(seen) / len(seen) if seen else 0.5


REWARDS = _Rewards()


def _plain(config: Any) -> dict[str, Any]:
    if config is None:
        return {}
    if isinstance(config, DictConfig):
        container = OmegaConf.to_container(config, resolve=True)
        return dict(container) if isinstance(container, dict) else {}
    if isinstance(config, Mapping):
        return dict(config)
    raise ConfigError(f"trainer config: {CONFIG_KEY!r} must be a mapping of settings")


class SWEAgentLoop(AgentLoopBase):  # type: ignore[misc]  # verl is untyped
    """One SWE task per trajectory: sandbox, R2E-style tool loop, strict grading."""

    def __init__(self, *args: Any, on_fault: str = "mask", **kwargs: Any) -> None:
        self.file_settings = {
            key: kwargs.pop(key) for key in list(kwargs) if key in FlowSettings.model_fields
        }
        super().__init__(*args, **kwargs)
        self.config_settings = _plain(self.config.get(CONFIG_KEY))
        on_fault = str(self.config_settings.pop("on_fault", on_fault))
        if on_fault not in _ON_FAULT:
            raise ConfigError(f"{AGENT_LOOP_NAME}: field 'on_fault': must be one of {_ON_FAULT}")
        self.on_fault = on_fault
        self.response_length = int(self.rollout_config.response_length)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        """Play the row's task against ``server_manager``; the graded trajectory."""
        row = episode_row(kwargs.get("extra_info"))
        settings = loop_settings(row, self.file_settings, self.config_settings)
        task = task_of(row)
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": task_message(task)},
        ]
        tokens: list[int] = await self.ct_build_initial_tokens(messages)
        mask: list[int] = []
        logprobs: list[float] | None = []
        turns = 0
        stop = "max_steps"
        request_id = uuid4().hex
        max_steps = task.max_steps or settings.max_steps
        episode: Episode | None = None
        try:
            episode = await asyncio.to_thread(start, task, settings)
            while turns < max_steps:
                output = await self.server_manager.generate(
                    request_id=request_id, prompt_ids=tokens, sampling_params=sampling_params
                )
                turns += 1
                merged, mask, logprobs = await self.ct_merge_assistant_token(
                    tokens,
                    output.token_ids,
                    mask,
                    logprobs if (logprobs or output.log_probs) else None,
                    assistant_logprobs=output.log_probs or None,
                )
                tokens = merged.token_ids
                reply = self.tokenizer.decode(output.token_ids, skip_special_tokens=True)
                messages.append({"role": "assistant", "content": reply})
                if len(mask) >= self.response_length:
                    stop = "response_length"
                    break
                observation, done = await asyncio.to_thread(act, episode, reply)
                if done:
                    stop = "submitted"
                    break
                before = list(messages)
                messages.append({"role": "user", "content": observation})
                merged, mask, context_logprobs = await self.ct_merge_context_msg(
                    before, messages, tokens, mask, logprobs or None
                )
                logprobs = context_logprobs or []
                tokens = merged.token_ids
                if len(mask) >= self.response_length:
                    stop = "response_length"
                    break
            patch = await asyncio.to_thread(episode.env.patch)
            result = await asyncio.to_thread(grade, episode, patch)
        except (ConfigError, BackendNotFoundError):
            raise  # the user's settings, not the infrastructure: one line, never masked
        except SandboxError as exc:
            return self._fault(task.task_id, tokens, mask, turns, f"{type(exc).__name__}: {exc}")
        finally:
            if episode is not None:
                await asyncio.to_thread(episode.close)
        if result.reward is None:
            return self._fault(task.task_id, tokens, mask, turns, result.reason)
        REWARDS.add(task.task_id, result.reward)
        logger.info("%s: %s after %d turns, reward %s", task.task_id, stop, turns, result.reward)
        return self._output(
            tokens,
            mask,
            logprobs,
            turns,
            reward=result.reward,
            extra={
                "sandbox_runtime_fault": "",
                "reward_valid": True,
                "stop_reason": stop,
                "grading": result.grading,
                "dropped": [change["path"] for change in result.dropped],
            },
        )

    def _fault(
        self, task_id: str, tokens: list[int], mask: list[int], turns: int, reason: str
    ) -> AgentLoopOutput:
        """A trajectory without a verdict: masked (the default) or raised."""
        if self.on_fault == "raise":
            raise SandboxError(f"{task_id}: no reward: {reason}")
        logger.warning("%s: masked, no reward: %s", task_id, reason)
        if not mask:  # nothing generated: one pad token keeps verl's shapes, masked
            pad = self.tokenizer.pad_token_id
            tokens = [*tokens, pad if pad is not None else self.tokenizer.eos_token_id]
            mask = [0]
        return self._output(
            tokens,
            [0] * len(mask),
            None,
            turns,
            reward=REWARDS.placeholder(task_id),
            extra={"sandbox_runtime_fault": reason[:2000], "reward_valid": False},
        )

    def _output(
        self,
        tokens: list[int],
        mask: list[int],
        logprobs: list[float] | None,
        turns: int,
        *,
        reward: float,
        extra: dict[str, Any],
    ) -> AgentLoopOutput:
        cut = len(tokens) - len(mask)
        prompt_ids, response_ids = tokens[:cut], tokens[cut:]
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response_ids[: self.response_length],
            response_mask=mask[: self.response_length],
            response_logprobs=logprobs[: self.response_length] if logprobs else None,
            reward_score=reward,
            num_turns=2 * turns + 1,
            metrics={},
            extra_fields={"turn_scores": [], "tool_rewards": [], **extra},
        )
