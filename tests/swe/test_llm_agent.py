"""The LLM agent against a local chat-completions server with scripted replies.

The server speaks the protocol over plain HTTP on 127.0.0.1; the agent talks to it through
the real ``openai`` client, so request and response shapes are the real ones.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import SecretStr

from sandbox_runtime.swe import Task, grade
from sandbox_runtime.swe.agents import Budget
from sandbox_runtime.swe.agents.llm import LLMAgent, LLMConfig
from tests.swe.conftest import open_prepared, task_named
from tests.swe.fake_chat import FakeChat, tool_reply

SECRET = "sk-test-do-not-leak-1234567890"


@pytest.fixture
def config() -> Callable[[str], LLMConfig]:
    def make(url: str) -> LLMConfig:
        return LLMConfig(
            base_url=url, model="scripted-model", api_key=SecretStr(SECRET), max_retries=0
        )

    return make


def test_llm_agent_fixes_the_bug_through_tool_calls(bundled_tasks: list[Task], config: Any) -> None:
    task = task_named(bundled_tasks, "csvline", "swebench")
    replies = [
        tool_reply([("bash", {"command": "grep -n 'if field' csvline/core.py"})], "Looking."),
        tool_reply(
            [
                (
                    "str_replace_editor",
                    {"command": "view", "path": "csvline/core.py", "view_range": [28, 31]},
                )
            ]
        ),
        {"role": "assistant", "content": "I think I know."},  # no tool call: costs a step
        tool_reply(
            [
                (
                    "str_replace_editor",
                    {
                        "command": "str_replace",
                        "path": "csvline/core.py",
                        "old_str": '    if field:\n        fields.append("".join(field))',
                        "new_str": '    fields.append("".join(field))',
                    },
                ),
                ("submit", {}),
            ]
        ),
    ]
    with FakeChat(replies) as chat, open_prepared(task) as sandbox:
        agent = LLMAgent(config(chat.url))
        result = agent.run(task, sandbox, Budget(max_steps=10))
        patch = sandbox.diff()
        graded = grade(task, sandbox)
    assert result.submitted
    assert result.stop_reason == "submitted"
    assert result.error is None
    assert [s.action for s in result.steps] == [
        "bash",
        "str_replace_editor",
        "message",
        "str_replace_editor",
        "submit",
    ]
    assert "if field:" in result.steps[0].output
    assert "    29     if field:" in result.steps[1].output
    assert result.usage == {"prompt_tokens": 40, "completion_tokens": 20, "total_tokens": 60}
    assert (graded.reward, graded.reason) == (1.0, "resolved")
    assert "-    if field:" in patch
    # The protocol as the server saw it: tools offered, results fed back, the key sent only as auth.
    first, last = chat.requests[0], chat.requests[-1]
    assert {t["function"]["name"] for t in first["tools"]} == {
        "bash",
        "str_replace_editor",
        "search",
        "submit",
    }
    assert "split_row drops the last field" in first["messages"][1]["content"]
    assert any(m["role"] == "tool" and m["tool_call_id"] == "call_0" for m in last["messages"])
    assert chat.auth[0] == f"Bearer {SECRET}"
    assert SECRET not in repr(agent)
    assert SECRET not in repr(agent.config)
    assert SECRET not in json.dumps([s.to_dict() for s in result.steps])


def test_step_limit_and_bad_arguments(bundled_tasks: list[Task], config: Any) -> None:
    task = task_named(bundled_tasks, "pager", "r2e")
    bad = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "bash", "arguments": "{oops"}}
        ],
    }
    replies = [bad, tool_reply([("nope", {})])] + [tool_reply([("bash", {"command": "true"})])] * 5
    with FakeChat(replies) as chat, open_prepared(task) as sandbox:
        result = LLMAgent(config(chat.url)).run(task, sandbox, Budget(max_steps=3))
    assert not result.submitted
    assert result.stop_reason == "step limit (3) reached"
    assert result.steps[0].output.startswith("error: arguments are not JSON")
    assert "unknown tool 'nope'" in result.steps[1].output
    assert len(chat.requests) == 3


def test_unreachable_endpoint_is_an_agent_error(bundled_tasks: list[Task], config: Any) -> None:
    task = task_named(bundled_tasks, "pager", "r2e")
    with FakeChat([]) as chat:
        url = chat.url
    with open_prepared(task) as sandbox:
        result = LLMAgent(config(url)).run(task, sandbox, Budget(max_steps=3))
    assert result.error is not None
    assert result.error.startswith("model request failed: APIConnectionError")
    assert SECRET not in result.error


def test_r2e_gym_text_replies_are_tool_calls(bundled_tasks: list[Task], config: Any) -> None:
    """What vLLM returns without a tool-call parser: the call in R2E-Gym's text form."""
    task = task_named(bundled_tasks, "csvline", "r2e")

    def text(body: str) -> dict[str, Any]:
        return {"role": "assistant", "content": f"Thinking first.\n{body}"}

    replies = [
        text(
            "<function=execute_bash>\n<parameter=cmd>grep -c 'if field' csvline/core.py"
            "</parameter>\n</function>"
        ),
        text(
            "<function=file_editor>\n<parameter=command>str_replace</parameter>\n"
            "<parameter=path>csvline/core.py</parameter>\n"
            '<parameter=old_str>    if field:\n        fields.append("".join(field))</parameter>\n'
            '<parameter=new_str>    fields.append("".join(field))</parameter>\n</function>'
        ),
        text("<function=finish>\n<parameter=command>submit</parameter>\n</function>"),
    ]
    with FakeChat(replies) as chat, open_prepared(task) as sandbox:
        result = LLMAgent(config(chat.url)).run(task, sandbox, Budget(max_steps=10))
        graded = grade(task, sandbox)
    assert result.submitted
    assert [s.action for s in result.steps] == ["bash", "str_replace_editor", "submit"]
    assert graded.reward == 1.0
    # The observation goes back as R2E-Gym frames it, in a user message.
    fed_back = chat.requests[1]["messages"][-1]
    assert fed_back["role"] == "user"
    assert fed_back["content"].startswith("Exit code: 0\nExecution output of [execute_bash]:")
    assert "1" in fed_back["content"]
