"""rLLM's SWE environment on our sandboxes (R2E-Gym's tools and frames) and the verl reward."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sandbox_runtime.integrations.rllm import SWEEnv
from sandbox_runtime.swe import Task, read_rows
from sandbox_runtime.swe.agents.r2e_protocol import NO_FUNCTION_CALL, parse_action
from sandbox_runtime.swe.agents.tools import ToolCall
from sandbox_runtime.swe.dataset import load_rows
from sandbox_runtime.swe.grading import GradingError
from sandbox_runtime.swe.parquet import write_rllm_parquet
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
    # As R2E-Gym's Action.from_string: values stripped, ``cmd`` is the command.
    multiline = parse_action("<function=execute_bash>\n<parameter=cmd>\n  ls\n</parameter>\n")
    assert multiline == ToolCall("execute_bash", {"command": "ls"})
    assert parse_action("no function here") is None
    as_dict = parse_action({"name": "bash", "arguments": '{"command": "pwd"}'})
    assert as_dict == ToolCall("bash", {"command": "pwd"})
    openai_shape = parse_action({"function": {"name": "submit", "arguments": "{}"}})
    assert openai_shape == ToolCall("submit", {})
    # The module's own address (rLLM configs name it) is the same class.
    from sandbox_runtime.integrations.rllm.env import SWEEnv as ModuleAddress

    assert ModuleAddress is SWEEnv


def test_an_episode_fixes_the_bug_and_earns_the_reward(bundled_tasks: list[Task]) -> None:
    task = task_named(bundled_tasks, "csvline", "r2e")
    with SWEEnv(task, backend="local") as env:
        instruction, info = env.reset()
        # The issue as R2E-Gym's get_task_instruction gives it: no prompt of ours around it.
        assert "split_row drops the last field" in instruction
        assert "<issue>" not in instruction
        assert "Resolve" not in instruction
        assert info["task_id"] == task.task_id
        observation, reward, done, step_info = env.step(
            _r2e_action("execute_bash", command="grep -n 'if field' csvline/core.py")
        )
        assert observation.startswith(
            "Exit code: 0\nExecution output of [execute_bash]:\n[STDOUT]\n\n"
        )
        assert "if field:" in observation
        assert (reward, done, step_info["tool"], step_info["exit_code"]) == (0.0, False, "bash", 0)
        # No function call: an empty observation, as rLLM's SWEEnv gives.
        assert env.step("Let me think.") == (
            NO_FUNCTION_CALL,
            0.0,
            False,
            {"tool": None, "accounting": _ANY},
        )
        observation, _, done, _ = env.step(
            _r2e_action(
                "file_editor",
                command="str_replace",
                path="csvline/core.py",
                old_str=_FIX["old"],
                new_str=_FIX["new"],
            )
        )
        assert observation.startswith(
            "Execution output of [file_editor]:\nThe file csvline/core.py has been edited."
        )
        assert 'fields.append("".join(field))' in observation
        assert not done
        assert env.step(_r2e_action("finish")) == ("<<< Finished >>>", 0.0, True, env_info(env))
        assert env.total_steps == 4
        assert "-    if field:" in env.patch()
        assert env.compute_final_reward() == 1.0
        assert env.last_grade is not None
        assert env.last_grade.reason == "resolved"
        sandbox = env.sandbox
        assert sandbox is not None
    assert env.sandbox is None
    assert not sandbox.is_alive()


def env_info(env: SWEEnv) -> dict[str, Any]:
    return {
        "tool": "submit",
        "exit_code": None,
        "error": False,
        "duration": _ANY,
        "accounting": _ANY,
    }


class _Anything:
    def __eq__(self, other: object) -> bool:
        return True


_ANY = _Anything()


def test_r2e_gym_tools_search_undo_view_ranges_and_blocked_commands(
    bundled_tasks: list[Task],
) -> None:
    """The tools rLLM's R2E-Gym prompt advertises, with R2E-Gym's frames and exit codes."""
    task = task_named(bundled_tasks, "csvline", "r2e")
    with SWEEnv(task, backend="local") as env:
        env.reset()
        found = env.step(_r2e_action("search", search_term="split_row", path="."))[0]
        assert found.startswith("Execution output of [search]:\n")
        assert "./csvline/core.py (" in found
        in_file = env.step(_r2e_action("search", search_term="def split", path="csvline/core.py"))[
            0
        ]
        assert 'Matches for "def split" in /testbed/csvline/core.py:' in in_file
        view = env.step(
            _r2e_action("file_editor", command="view", path="csvline/core.py", view_range="[2, 3]")
        )[0]
        numbered = view.splitlines()[2:]
        assert [line.split()[0] for line in numbered] == ["2", "3"]
        bad_range = env.step(
            _r2e_action("file_editor", command="view", path="csvline/core.py", view_range="[9, 2]")
        )[0]
        assert "\nERROR: Invalid view_range [9, 2]: end must be >= start" in bad_range
        original = env.sandbox.read_text("csvline/core.py")  # type: ignore[union-attr]
        edit = _r2e_action(
            "file_editor",
            command="insert",
            path="csvline/core.py",
            insert_line="0",
            new_str="# touched",
        )
        assert "has been edited" in env.step(edit)[0]
        assert env.sandbox.read_text("csvline/core.py").startswith("# touched\n")  # type: ignore[union-attr]
        undone = env.step(_r2e_action("file_editor", command="undo_edit", path="csvline/core.py"))
        assert "undone" in undone[0]
        assert env.sandbox.read_text("csvline/core.py") == original  # type: ignore[union-attr]
        again = env.step(_r2e_action("file_editor", command="undo_edit", path="csvline/core.py"))
        assert "ERROR: No previous edits found for csvline/core.py to undo." in again[0]
        exists = env.step(
            _r2e_action("file_editor", command="create", path="csvline/core.py", file_text="x")
        )[0]
        assert "ERROR: File already exists at: csvline/core.py." in exists
        refused, *_ = env.step(_r2e_action("execute_bash", command="git log"))
        assert refused.startswith("Exit code: Error: Exit code 1\nExecution output of")
        assert (
            "Bash command 'git' is not allowed. Please use a different command or tool." in refused
        )
        failed = env.step(_r2e_action("execute_bash", command="echo out; echo err >&2; exit 3"))
        assert failed[0] == (
            "Exit code: Error: Exit code 3\nExecution output of [execute_bash]:\n"
            "Error executing command:\n\n[STDOUT]\n\nout \n\n[STDERR]\n\nerr\n"
        )
        long = env.step(_r2e_action("execute_bash", command="seq 1 200"))[0]
        assert "<Observation truncated in middle for saving context>" in long
        assert "\n38\n" in long
        assert "\n170\n" in long
        assert "\n100\n" not in long


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

    tasks = [t for t in read_rows(load_rows("bundled")).tasks if t.repo == "versionkit"]
    _, verl = write_rllm_parquet(tasks[:1], tmp_path)
    [record] = pq.read_table(verl).to_pylist()
    # rLLM's trainer merges its env_args (Hydra: +rllm.env.env_args.*) over extra_info.
    env = SWEEnv.from_dict({**record["extra_info"], "step_timeout": 30, "scaffold": "r2egym"})
    assert SWEEnv.is_multithread_safe()
    assert env.options.step_timeout == 30
    try:
        env.reset()
        gold = env.task.gold_patch
        # git is refused in execute_bash, as in R2E-Gym; patch(1) is not.
        applied = env.step(
            {"name": "bash", "arguments": {"command": f"patch -p1 <<'EOF'\n{gold}EOF"}}
        )
        assert "Exit code: 0" in applied[0]
        assert env.compute_final_reward() == 1.0
    finally:
        env.close()
    assert json.loads(json.dumps(record["extra_info"]))["index"] == 0


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
    assert graded.reason.startswith("patch refused: it does not apply exactly")
    with pytest.raises(ValueError, match="extra_info"):
        compute_score("swe", gold, None, None)


def test_a_sandbox_fault_is_never_a_reward_of_zero(
    bundled_tasks: list[Task], tmp_path: Path
) -> None:
    """SWEEnv's final reward and verl's compute_score raise GradingError (not a
    TimeoutError, which verl's managers turn into 0.0) when the tests give no verdict."""
    task = task_named(bundled_tasks, "csvline", "r2e")
    with SWEEnv(task, backend="local") as env:
        env.reset()
        assert env.sandbox is not None
        env.sandbox.backend.stop()  # gone under the grader
        with pytest.raises(GradingError, match="infrastructure error"):
            env.compute_final_reward()
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    unusable = {"base_dir": str(blocker / "sandboxes")}  # every start fails
    gold = f"```diff\n{task.gold_patch}```"
    with pytest.raises(GradingError, match="infrastructure error: SandboxStartError") as caught:
        compute_score("swe", gold, None, task.source, backend_options=unusable, retries=2)
    assert not isinstance(caught.value, TimeoutError)
    assert compute_score("swe", gold, None, task.source, retries=0) == 1.0


@pytest.mark.docker
def test_environment_and_reward_on_docker(bundled_tasks: list[Task], docker_image: str) -> None:
    task = task_named(bundled_tasks, "pricing", "r2e")
    with SWEEnv(task, backend="docker", base_image=docker_image) as env:
        env.reset()
        assert env.sandbox is not None
        assert env.sandbox.config.backend == "docker"
        assert "Exit code: 0" in env.step(_r2e_action("execute_bash", command="ls /root"))[0]
        assert env.compute_final_reward() == 0.0
    gold = f"```diff\n{task.gold_patch}```"
    assert compute_score(None, gold, None, task.source, backend="docker") == 1.0


def test_rllms_delete_image_becomes_the_docker_option() -> None:
    row = dict(next(iter(load_rows("bundled"))))
    on_docker = SWEEnv.from_dict({**row, "backend": "docker", "delete_image": True})
    assert on_docker.options.backend_options == {"delete_image": True}
    elsewhere = SWEEnv.from_dict({**row, "backend": "local", "delete_image": True})
    assert "delete_image" not in elsewhere.options.backend_options
    kept = SWEEnv.from_dict({**row, "delete_image": False, "backend": "docker"})
    assert kept.options.backend_options == {}
