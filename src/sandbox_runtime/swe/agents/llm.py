"""The ``llm`` agent: a tool-calling loop against any OpenAI-compatible chat endpoint.

vLLM, SGLang, hosted APIs: anything that speaks ``/v1/chat/completions`` with ``tools``.
The model gets the issue and the tools of :mod:`sandbox_runtime.swe.agents.tools`; each tool
call is one step. A reply without tool calls that holds one in R2E-Gym's text form
(``<function=file_editor><parameter=command>view</parameter>...</function>``, what vLLM
returns without a tool-call parser, and what R2E-Gym-trained models write) is run as that
call and answered with R2E-Gym's framed observation; any other reply also costs a step and
is answered with a reminder (as R2E-Gym's agent does), so a chatty model cannot loop for
free.  The loop ends at ``submit``, at the step limit, at the time limit, or on cancellation.

The API key is a :class:`pydantic.SecretStr`: it is handed to the client and nowhere else,
so it never appears in reprs, logs, reports or trajectories.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.errors import ConfigError
from sandbox_runtime.swe.agents.base import Agent, AgentResult, Budget, Step
from sandbox_runtime.swe.agents.r2e_protocol import frame, parse_action, tool_name
from sandbox_runtime.swe.agents.tools import TOOL_SCHEMAS, ToolBox, ToolCall
from sandbox_runtime.swe.bigfields import issue_excerpt
from sandbox_runtime.swe.task import Task

__all__ = ["LLMAgent", "LLMConfig", "task_prompt"]

SYSTEM_PROMPT = (
    "You are a software engineer working in a repository inside a sandbox. Resolve the issue "
    "you are given by editing the repository's source code with the tools you have. Do not "
    "change the tests. Explore, reproduce, fix, check. When you are done, call submit."
)
CONTINUE_PROMPT = (
    "Your reply called no tool. Use a tool in every reply; call submit when you are done."
)


class LLMConfig(BaseModel):
    """Where the model is and how to call it."""

    model_config = ConfigDict(extra="forbid")

    base_url: str
    """Endpoint root, e.g. ``http://localhost:8000/v1``."""
    model: str
    """Model name the endpoint serves."""
    api_key: SecretStr = SecretStr("EMPTY")
    """API key (vLLM accepts any); never logged or reported."""
    temperature: float = 0.0
    max_tokens: int | None = Field(default=None, gt=0)
    request_timeout: float = Field(default=300.0, gt=0)
    """Seconds one model request may take."""
    max_retries: int = Field(default=2, ge=0)
    """Retries of a failed request (the client's backoff)."""
    system_prompt: str = SYSTEM_PROMPT


def task_prompt(task: Task) -> str:
    """The first user message: the issue (R2E-Gym's ``[ISSUE]`` wrapper removed).

    An issue over :data:`~sandbox_runtime.swe.bigfields.AGENT_TEXT_CHARS` characters is cut
    to its head and tail around a marker (the agent's trajectory notes it).
    """
    issue = issue_excerpt(task.problem_statement)[0].strip()
    return (
        f"The repository is at {task.workdir} (your working directory).\n"
        f"Resolve this issue:\n\n<issue>\n{issue}\n</issue>"
    )


def _message_dict(message: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant", "content": message.content or ""}
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.function.name, "arguments": call.function.arguments},
            }
            for call in message.tool_calls
        ]
    return out


class LLMAgent(Agent):
    """Drives a chat model through the tool loop described in the module docstring."""

    name = "llm"

    def __init__(self, config: LLMConfig) -> None:
        self.config = config

    def __repr__(self) -> str:
        return f"LLMAgent(model={self.config.model!r}, base_url={self.config.base_url!r})"

    def _client(self) -> Any:
        try:
            import openai
        except ImportError as exc:
            raise ConfigError(
                "the llm agent needs openai: pip install 'sandbox-runtime-swe[llm]'"
            ) from exc
        return openai.OpenAI(
            base_url=self.config.base_url,
            api_key=self.config.api_key.get_secret_value(),
            timeout=self.config.request_timeout,
            max_retries=self.config.max_retries,
        )

    def run(self, task: Task, sandbox: SandboxRuntime, budget: Budget) -> AgentResult:
        """Run the tool loop on ``task`` until submit or the budget ends."""
        import openai

        client = self._client()
        tools = ToolBox(sandbox, timeout=budget.step_timeout)
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": self.config.system_prompt},
            {"role": "user", "content": task_prompt(task)},
        ]
        result = AgentResult()
        cut = issue_excerpt(task.problem_statement)[1]
        if cut is not None:
            result.notes.append(f"the issue sent to the model was cut: {cut.note()}")
        try:
            while True:
                stop = budget.exhausted(len(result.steps))
                if stop:
                    result.stop_reason = stop
                    return result
                kwargs: dict[str, Any] = {"temperature": self.config.temperature}
                if self.config.max_tokens is not None:
                    kwargs["max_tokens"] = self.config.max_tokens
                try:
                    response = client.chat.completions.create(
                        model=self.config.model, messages=messages, tools=TOOL_SCHEMAS, **kwargs
                    )
                except openai.OpenAIError as exc:
                    result.error = f"model request failed: {type(exc).__name__}: {exc}"
                    result.stop_reason = "error"
                    return result
                self._count(result, response)
                message = response.choices[0].message
                messages.append(_message_dict(message))
                thought = message.content or ""
                if not message.tool_calls:
                    # R2E-Gym's text form, what vLLM returns without a tool-call parser.
                    text_call = parse_action(thought)
                    if text_call is None:
                        result.steps.append(
                            Step(index=len(result.steps), action="message", thought=thought)
                        )
                        messages.append({"role": "user", "content": CONTINUE_PROMPT})
                        continue
                    call = ToolCall(tool_name(text_call.name), text_call.arguments)
                    observation = tools.run(call)
                    result.record(call, observation, thought)
                    framed = frame(text_call.name, observation, timeout=budget.step_timeout)
                    messages.append({"role": "user", "content": framed})
                    if observation.done:
                        result.submitted, result.stop_reason = True, "submitted"
                        return result
                    continue
                for tool_call in message.tool_calls:
                    call = ToolCall.from_json(
                        tool_call.function.name, tool_call.function.arguments, tool_call.id
                    )
                    observation = tools.run(call)
                    result.record(call, observation, thought)
                    messages.append(
                        {
                            "role": "tool",
                            "tool_call_id": tool_call.id,
                            "content": observation.output,
                        }
                    )
                    if observation.done:
                        result.submitted, result.stop_reason = True, "submitted"
                        return result
        finally:
            client.close()

    @staticmethod
    def _count(result: AgentResult, response: Any) -> None:
        usage = getattr(response, "usage", None)
        for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
            value = getattr(usage, key, None)
            if isinstance(value, int):
                result.usage[key] = result.usage.get(key, 0) + value
