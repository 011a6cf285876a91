from __future__ import annotations

import pytest

from sandbox_runtime import ConfigError
from sandbox_runtime.swe import Task
from sandbox_runtime.swe.agents import Budget, ScriptedAgent, ToolBox, ToolCall, make_agent
from tests.swe.conftest import open_prepared, task_named


def test_toolbox_editor_and_bash(bundled_tasks: list[Task]) -> None:
    task = task_named(bundled_tasks, "versionkit", "r2e")
    with open_prepared(task) as sandbox:
        tools = ToolBox(sandbox, timeout=5)
        listing = tools.run(ToolCall("str_replace_editor", {"command": "view", "path": "."}))
        assert "versionkit/version.py" in listing.output
        assert "run_tests.sh" not in listing.output
        assert "r2e_tests" not in listing.output  # the held-out tests are hidden from agents
        view = tools.run(
            ToolCall(
                "str_replace_editor",
                {"command": "view", "path": "versionkit/version.py", "view_range": [1, 2]},
            )
        )
        header, first, *rest = view.output.splitlines()
        assert header == "Here's the result of running `cat -n` on the file: versionkit/version.py:"
        assert len(rest) == 1
        assert first.endswith(
            '"""MAJOR.MINOR.PATCH versions that compare the way people expect."""'
        )
        dup = tools.run(
            ToolCall(
                "str_replace_editor",
                {
                    "command": "str_replace",
                    "path": "versionkit/version.py",
                    "old_str": "self",
                    "new_str": "me",
                },
            )
        )
        assert dup.error
        assert "Multiple occurrences of 'self'" in dup.output
        created = tools.run(
            ToolCall(
                "str_replace_editor",
                {"command": "create", "path": "notes.txt", "file_text": "x\n"},
            )
        )
        inserted = tools.run(
            ToolCall(
                "str_replace_editor",
                {"command": "insert", "path": "notes.txt", "insert_line": 0, "new_str": "first"},
            )
        )
        assert not created.error
        assert not inserted.error
        assert sandbox.read_text("notes.txt") == "first\nx\n"
        nested = tools.run(
            ToolCall(
                "str_replace_editor",
                {"command": "create", "path": "notes/a.txt", "file_text": "x"},
            )
        )
        assert nested.error  # as R2E-Gym's editor: create makes no directories
        assert "No such file or directory: 'notes/a.txt'" in nested.output
        slow = tools.run(ToolCall("bash", {"command": "sleep 10"}))
        assert slow.exit_code == 124
        assert "timed out after 5s" in slow.output
        missing = tools.run(ToolCall("str_replace_editor", {"command": "view", "path": "nope.py"}))
        assert missing.error
        assert tools.run(ToolCall("submit")).done


def test_budget_cancel_stops_scripted_agent(bundled_tasks: list[Task]) -> None:
    task = task_named(bundled_tasks, "versionkit", "r2e")
    budget = Budget(max_steps=10)
    budget.cancel.set()
    with open_prepared(task) as sandbox:
        result = ScriptedAgent([{"tool": "bash", "args": {"command": "true"}}]).run(
            task, sandbox, budget
        )
    assert result.stop_reason == "cancelled"
    assert result.steps == []


def test_make_agent_errors() -> None:
    with pytest.raises(ConfigError, match="agents: oracle, null, scripted, llm"):
        make_agent("gpt")
    with pytest.raises(ConfigError, match="needs a script"):
        make_agent("scripted")
    with pytest.raises(ConfigError, match="LLMConfig"):
        make_agent("llm")
    with pytest.raises(ConfigError, match="'tool' must be a string"):
        ScriptedAgent([{"tool": 3}])
