"""The tool loop on the trainer's side: model reply -> R2E-Gym tool in the sandbox -> observation.

The loop runs where rLLM runs the flow (the trainer's or ``rllm eval``'s process), calls the
model through rLLM's gateway URL, and reaches the sandbox through this library's backends;
nothing in the sandbox calls the model, so no tunnel is needed for any backend.

Replies are read as R2E-Gym's agents write them (``<function=execute_bash>`` text, what
DeepSWE-style models produce and what vLLM returns without a tool-call parser) or as OpenAI
tool calls; each is run by :class:`~sandbox_runtime.integrations.rllm.env.SWEEnv`, whose
observations are R2E-Gym's, byte for byte, with R2E-Gym's scripts or this library's tools.
A reply that calls no tool gets a reminder and costs a step, as in R2E-Gym.  Every fault of
the sandbox or the model's endpoint propagates: rLLM turns an exception out of a flow into
an ERROR episode.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sandbox_runtime.errors import SandboxError, SandboxGoneError
from sandbox_runtime.integrations.rllm.env import SWEEnv
from sandbox_runtime.swe.agents.r2e_protocol import NO_FUNCTION_CALL
from sandbox_runtime.swe.parquet import issue_text
from sandbox_runtime.swe.task import Task as SWETask

__all__ = [
    "SYSTEM_PROMPT",
    "LoopResult",
    "Reply",
    "Turn",
    "first_message",
    "run_loop",
    "task_message",
]

SYSTEM_PROMPT = """You are a software engineer fixing an issue in a repository inside a sandbox.
Work in steps. In every reply call exactly one tool, written as

<function=TOOL>
<parameter=NAME>VALUE</parameter>
</function>

Tools:
- execute_bash: run a shell command. Parameter: cmd.
- file_editor: view or edit files. Parameters: command (view, create, str_replace, insert or
  undo_edit), path, and as the command needs: file_text, old_str, new_str, insert_line,
  view_range.
- search: find a term in files. Parameters: search_term, path (optional).
- finish: end the episode when the fix is done. No parameters.

Change the source code, not the tests. Reproduce the problem, fix it, check the fix, then
call finish."""

#: What a reply that calls no tool gets: R2E-Gym's own reminder, word for word.
NO_TOOL_REMINDER = NO_FUNCTION_CALL


@dataclass
class Reply:
    """What the model answered: its text, its tool calls (OpenAI form), the message to keep."""

    content: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    message: dict[str, Any] = field(default_factory=dict)


Chat = Callable[[list[dict[str, Any]]], Reply]


@dataclass
class Turn:
    """One model call and what it did in the sandbox."""

    reply: str
    action: Any
    observation: str
    done: bool


@dataclass
class LoopResult:
    """The episode: its turns, the conversation, the repository's diff, why it stopped."""

    turns: list[Turn]
    messages: list[dict[str, Any]]
    patch: str
    stop_reason: str
    """``submitted`` (the model called finish) or ``max_steps``."""
    accounting: dict[str, Any]
    changes: dict[str, Any] | None = None
    """The change set read from outside the sandbox (``ChangeSet.to_dict``): what grading
    applies.  ``patch`` is for people; ``None`` when the change could not be read."""
    tamper: list[dict[str, str]] = field(default_factory=list)
    """The tamper flags of the same reading (``TamperFlag.to_dict``): what the agent changed
    that a test run reads, outside the change set included (its tools, startup files)."""


def task_message(task: SWETask) -> str:
    """The task as the first user message: where the repository is and the issue."""
    issue = issue_text(task).strip()
    return (
        f"The repository is at {task.workdir}, the working directory of every command.\n"
        f"Resolve this issue:\n\n<issue>\n{issue}\n</issue>"
    )


def first_message(env: SWEEnv) -> str:
    """:func:`task_message` for the environment's task."""
    return task_message(env.task)


def _act(env: SWEEnv, reply: Reply, messages: list[dict[str, Any]]) -> tuple[Any, str, bool]:
    """Run the reply's tool call(s); append the observations the model sees next."""
    if reply.tool_calls:
        texts: list[str] = []
        done = False
        for call in reply.tool_calls:
            observation, _reward, done, _info = env.step(call)
            texts.append(observation)
            messages.append(
                {"role": "tool", "tool_call_id": str(call.get("id", "")), "content": observation}
            )
            if done:
                break
        return reply.tool_calls, "\n".join(texts), done
    observation, _reward, done, info = env.step(reply.content)
    if info.get("tool") is None and not done:
        observation = NO_TOOL_REMINDER
    messages.append({"role": "user", "content": observation})
    return reply.content, observation, done


def run_loop(env: SWEEnv, chat: Chat, *, max_steps: int) -> LoopResult:
    """Drive ``env`` (already reset) with ``chat`` until finish or ``max_steps`` model calls."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": first_message(env)},
    ]
    turns: list[Turn] = []
    stop_reason = "max_steps"
    while len(turns) < max_steps:
        reply = chat(list(messages))
        messages.append(reply.message or {"role": "assistant", "content": reply.content})
        action, observation, done = _act(env, reply, messages)
        turns.append(Turn(reply.content, action, observation, done))
        if done:
            stop_reason = "submitted"
            break
    changes = env.changes()
    return LoopResult(
        turns,
        messages,
        _shown_patch(env),
        stop_reason,
        env.accounting(),
        changes.to_dict() if changes is not None else None,
        [flag.to_dict() for flag in env.last_tamper],
    )


def _shown_patch(env: SWEEnv) -> str:
    """The diff for people; empty when the sandbox's ``git`` fails (the agent may own it)."""
    try:
        return env.patch()
    except SandboxGoneError:
        raise
    except SandboxError:
        return ""
