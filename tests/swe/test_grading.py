from __future__ import annotations

import pytest

from sandbox_runtime import SandboxRuntime
from sandbox_runtime.swe import Task, TaskFormat, grade
from sandbox_runtime.swe.agents import Budget, NullAgent, OracleAgent
from sandbox_runtime.swe.formats.swebench import SWEBenchGrading
from sandbox_runtime.swe.grading import GradingError, Outcome
from tests.swe.conftest import open_prepared, task_named

# Importing pytest is made to fail inside the sandbox (a shadowing module on PYTHONPATH,
# relative to the repository), so the graders' standard-library fallback is exercised.
NO_PYTEST = {"PYTHONPATH": "../root/nopytest"}


def _hide_pytest(sandbox: SandboxRuntime) -> None:
    sandbox.write_text("/root/nopytest/pytest.py", "raise ImportError('hidden for the test')\n")


@pytest.mark.parametrize("fmt", ["r2e", "swebench"])
def test_oracle_resolves_and_null_fails_with_failed_tests(
    bundled_tasks: list[Task], fmt: str
) -> None:
    task = task_named(bundled_tasks, "pager", fmt)
    with open_prepared(task) as sandbox:
        assert sandbox.read_text("/root/run_tests.sh") if fmt == "r2e" else True
        assert not sandbox.exists("run_tests.sh") or fmt == "swebench"
        null = grade(task, sandbox)
        assert null.reward == 0.0
        assert null.reason.startswith("tests failed: ")
        assert "test_exact_multiple" in null.reason
        assert sandbox.diff() == ""  # grading leaves no trace in the agent's patch
        OracleAgent().run(task, sandbox, Budget())
        resolved = grade(task, sandbox)
    assert (resolved.reward, resolved.reason) == (1.0, "resolved")
    assert resolved.status_map
    assert all(v == "PASSED" for v in resolved.status_map.values())
    assert "passed" in resolved.test_output


@pytest.mark.parametrize("fmt", ["r2e", "swebench"])
def test_unittest_fallback_without_pytest(bundled_tasks: list[Task], fmt: str) -> None:
    task = task_named(bundled_tasks, "csvline", fmt).model_copy(update={"env": NO_PYTEST})
    with open_prepared(task) as sandbox:
        _hide_pytest(sandbox)
        failed = grade(task, sandbox)
        OracleAgent().run(task, sandbox, Budget())
        passed = grade(task, sandbox)
    assert failed.reward == 0.0
    assert "test_trailing_empty_field" in failed.reason
    assert "short test summary" not in passed.test_output  # unittest really ran
    assert " ... ok" in passed.test_output
    assert (passed.reward, passed.reason) == (1.0, "resolved")


def test_a_harness_timeout_is_an_error_not_a_zero(bundled_tasks: list[Task]) -> None:
    task = task_named(bundled_tasks, "eventhub", "r2e")
    with open_prepared(task) as sandbox:
        sandbox.write_text("/root/run_tests.sh", "sleep 30\n")
        result = grade(task, sandbox, timeout=1)
    assert (result.reward, result.reason) == (None, "tests timed out after 1s")
    assert result.outcome is Outcome.ERROR
    with pytest.raises(GradingError, match="no reward: tests timed out"):
        result.reward_or_raise()


def test_a_sandbox_gone_while_grading_is_an_error_not_a_zero(bundled_tasks: list[Task]) -> None:
    task = task_named(bundled_tasks, "eventhub", "r2e")
    with open_prepared(task) as sandbox:
        sandbox.backend.stop()  # the sandbox disappears under the grader
        result = grade(task, sandbox)
    assert result.reward is None
    assert result.outcome is Outcome.ERROR
    assert result.reason.startswith("infrastructure error: ")


def test_a_run_without_results_is_a_test_error(bundled_tasks: list[Task]) -> None:
    task = task_named(bundled_tasks, "eventhub", "r2e")
    with open_prepared(task) as sandbox:
        sandbox.write_text("/root/run_tests.sh", "echo 'collection exploded' >&2; exit 4\n")
        result = grade(task, sandbox)
    assert result.reward is None
    assert result.outcome is Outcome.ERROR
    assert result.reason == "test error: no test results in the output (exit code 4)"
    assert "collection exploded" in result.test_output


def test_patch_and_test_patch_failures(bundled_tasks: list[Task]) -> None:
    task = task_named(bundled_tasks, "pricing", "swebench")
    with open_prepared(task) as sandbox:
        rejected = grade(task, sandbox, patch_error="error: patch failed: a.py:3")
        grading = task.grading_as(SWEBenchGrading)
        lines = grading.test_patch.splitlines(keepends=True)
        first_context = next(i for i, line in enumerate(lines) if line.startswith(" "))
        lines[first_context] = " this line is not in the file\n"
        broken_grading = grading.model_copy(update={"test_patch": "".join(lines)})
        broken = task.model_copy(update={"grading": broken_grading})
        no_tests = grade(broken, sandbox)
    assert rejected.reason == "patch did not apply: error: patch failed: a.py:3"
    assert (no_tests.reward, no_tests.reason) == (0.0, "test patch did not apply")


def test_row_eval_script_is_used_with_markers(bundled_tasks: list[Task]) -> None:
    task = task_named(bundled_tasks, "versionkit", "swebench")
    script = (
        "echo '>>>>> Start Test Output'\n"
        "echo 'PASSED tests/test_version.py::TestCompare::test_multi_digit_component'\n"
        "echo '>>>>> End Test Output'\n"
        "echo 'PASSED outside/markers.py::ignored'\n"
    )
    grading = task.grading_as(SWEBenchGrading).model_copy(
        update={
            "eval_script": script,
            "fail_to_pass": ("tests/test_version.py::TestCompare::test_multi_digit_component",),
            "pass_to_pass": (),
        }
    )
    only_one = task.model_copy(update={"grading": grading})
    timing_out = grading.model_copy(update={"eval_script": "echo '>>>>> Tests Timed Out'"})
    with open_prepared(task) as sandbox:
        result = grade(only_one, sandbox)
        timed = grade(task.model_copy(update={"grading": timing_out}), sandbox)
    assert (result.reward, result.reason) == (1.0, "resolved")
    assert "outside/markers.py::ignored" not in result.status_map
    assert timed.reason.startswith("test error: the evaluation script reported")


def test_swesmith_bug_patch_is_applied_and_reverted(bundled_tasks: list[Task]) -> None:
    sample = task_named(bundled_tasks, "pager", "swebench")
    grading = sample.grading_as(SWEBenchGrading)
    with open_prepared(sample) as sandbox:
        # Make the image's state the clean one (fix and tests committed), as SWE-smith's are.
        assert sandbox.apply_patch(sample.gold_patch + grading.test_patch)
        ident = "-c user.name=t -c user.email=t@t"
        assert sandbox.exec(f"git add -A && git {ident} commit -qm clean").ok
        bug = sandbox.exec("git diff HEAD HEAD~1 -- pager").stdout
        task = Task(
            task_id="pager.bug1",
            format=TaskFormat.SWESMITH,
            repo="swesmith/pager",
            gold_patch=bug,
            gold_patch_reversed=True,
            grading=SWEBenchGrading(
                fail_to_pass=grading.fail_to_pass, pass_to_pass=grading.pass_to_pass
            ),
        )
        from sandbox_runtime.swe.prepare import prepare

        prepare(task, sandbox)  # no such ref here: applies and commits the bug patch
        sandbox.base_commit(refresh=True)
        NullAgent().run(task, sandbox, Budget())
        buggy = grade(task, sandbox)
        OracleAgent().run(task, sandbox, Budget())
        fixed = grade(task, sandbox)
    assert buggy.reward == 0.0
    assert "test_exact_multiple" in buggy.reason
    assert (fixed.reward, fixed.reason) == (1.0, "resolved")
