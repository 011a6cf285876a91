"""The step-wise SWE environment (rLLM's BaseEnv interface) and the verl patch reward."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sandbox_runtime.swe import Task
from sandbox_runtime.swe.agents.tools import ToolCall
from sandbox_runtime.swe.dataset import load_rows, write_rllm_parquet
from sandbox_runtime.swe.env import CONTINUE_MESSAGE, SWEEnv, parse_action
from sandbox_runtime.swe.patch_reward import compute_score, extract_patch, grade_patch
from tests.swe.conftest import task_named

_FIX = {
    "old": '    if field:\n        fields.append("".join(field))',
    "new": '    fields.append("".join(field))',
}


def _r2e_action(name: str, **parameters: Any) -> str:
    body = "".join(f"<parameter={k}>{v}</parameter>\n" for k, v in parameters.items())
    return f"I will act now.\n<function={name}>\n{body}</function>"


def test_parse_action_reads_r2e_gym_text_and_tool_calls() -> None:
    call = parse_action(
        _r2e_action("file_editor", command="view", path="a.py", view_range="[3, 9]")
    )
    assert call == ToolCall(
        "file_editor", {"command": "view", "path": "a.py", "view_range": [3, 9]}
    )
    multiline = parse_action("<function=execute_bash>\n<parameter=cmd>\nls\n</parameter>\n")
    assert multiline == ToolCall("execute_bash", {"command": "ls"})
    assert parse_action("no function here") is None
    as_dict = parse_action({"name": "bash", "arguments": '{"command": "pwd"}'})
    assert as_dict == ToolCall("bash", {"command": "pwd"})
    openai_shape = parse_action({"function": {"name": "submit", "arguments": "{}"}})
    assert openai_shape == ToolCall("submit", {})


def test_an_episode_fixes_the_bug_and_earns_the_reward(bundled_tasks: list[Task]) -> None:
    task = task_named(bundled_tasks, "csvline", "r2e")
    with SWEEnv(task, backend="local") as env:
        instruction, info = env.reset()
        assert "split_row drops the last field" in instruction
        assert info["task_id"] == task.task_id
        observation, reward, done, step_info = env.step(
            _r2e_action("execute_bash", command="grep -n 'if field' csvline/core.py")
        )
        assert "if field:" in observation
        assert (reward, done, step_info["tool"], step_info["exit_code"]) == (0.0, False, "bash", 0)
        assert env.step("Let me think.") == (CONTINUE_MESSAGE, 0.0, False, {"tool": None})
        observation, _, done, _ = env.step(
            _r2e_action(
                "file_editor",
                command="str_replace",
                path="csvline/core.py",
                old_str=_FIX["old"],
                new_str=_FIX["new"],
            )
        )
        assert (observation, done) == ("edited csvline/core.py", False)
        assert env.step(_r2e_action("finish"))[2] is True
        assert env.total_steps == 4
        assert "-    if field:" in env.patch()
        assert env.compute_final_reward() == 1.0
        assert env.last_grade is not None
        assert env.last_grade.reason == "resolved"
        sandbox = env.sandbox
        assert sandbox is not None
    assert env.sandbox is None
    assert not sandbox.is_alive()


def test_reset_gives_a_fresh_sandbox_and_an_untouched_episode_scores_zero(
    bundled_tasks: list[Task],
) -> None:
    env = SWEEnv(task_named(bundled_tasks, "pager", "swebench"))
    try:
        env.reset()
        first = env.sandbox
        env.step({"name": "bash", "arguments": {"command": "echo junk > junk.txt"}})
        env.reset()
        assert first is not None
        assert not first.is_alive()
        assert env.sandbox is not first
        assert env.patch() == ""
        assert env.compute_final_reward() == 0.0
    finally:
        env.close()
    env.close()  # twice is harmless
    with pytest.raises(RuntimeError, match="reset"):
        env.step(_r2e_action("finish"))


def test_from_the_verl_parquet_extra_info(tmp_path: Path) -> None:
    """The exact row rLLM hands ``SWEEnv.from_dict`` after reading the verl parquet."""
    import pyarrow.parquet as pq

    rows = [r for r in load_rows("bundled") if r.get("repo_name") == "versionkit"]
    _, verl = write_rllm_parquet(rows, tmp_path)
    [record] = pq.read_table(verl).to_pylist()
    env = SWEEnv.from_dict({**record["extra_info"], "step_timeout": 30})
    assert SWEEnv.is_multithread_safe()
    assert env.options.step_timeout == 30
    try:
        env.reset()
        gold = env.task.gold_patch
        assert env.step({"name": "bash", "arguments": {"command": f"git apply <<'EOF'\n{gold}EOF"}})
        assert env.compute_final_reward() == 1.0
    finally:
        env.close()
    assert json.loads(json.dumps(record["extra_info"]))["repo_name"] == "versionkit"


def test_extract_patch_from_model_responses() -> None:
    diff = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"
    fenced = f"Broken:\n```python\nx = 1\n```\nFix:\n```diff\n{diff}```\nDone."
    assert extract_patch(fenced) == diff
    assert extract_patch(f"Here it is:\n{diff}") == diff
    assert extract_patch("I could not find the bug.") is None


def test_verl_reward_function_grades_model_patches(bundled_tasks: list[Task]) -> None:
    task = task_named(bundled_tasks, "eventhub", "swebench")
    row = task.source
    gold = f"The fix:\n```diff\n{task.gold_patch}```"
    assert compute_score("swe", gold, None, row) == 1.0
    assert compute_score("swe", gold, None, json.dumps(row), backend="local") == 1.0
    assert compute_score("swe", "no idea", None, row) == 0.0
    broken = "diff --git a/nope.py b/nope.py\n--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-a\n+b\n"
    graded = grade_patch(row, broken)
    assert graded.reward == 0.0
    assert graded.reason.startswith("patch did not apply")
    with pytest.raises(ValueError, match="extra_info"):
        compute_score("swe", gold, None, None)


@pytest.mark.docker
def test_environment_and_reward_on_docker(bundled_tasks: list[Task], docker_image: str) -> None:
    task = task_named(bundled_tasks, "pricing", "r2e")
    with SWEEnv(task, backend="docker", base_image=docker_image) as env:
        env.reset()
        assert env.sandbox is not None
        assert env.sandbox.config.backend == "docker"
        assert env.step(_r2e_action("execute_bash", command="ls ../root/r2e_tests"))[0]
        assert env.compute_final_reward() == 0.0
    gold = f"```diff\n{task.gold_patch}```"
    assert compute_score(None, gold, None, task.source, backend="docker") == 1.0
