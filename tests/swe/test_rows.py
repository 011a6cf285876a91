from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sandbox_runtime.swe import Task, TaskError, TaskFormat, detect_format, parse_row, read_rows
from sandbox_runtime.swe.commit import ParsedCommit, is_r2e_test_path, parse_unified_diff
from sandbox_runtime.swe.formats.r2e import R2EGrading
from sandbox_runtime.swe.formats.swebench import SWEBenchGrading
from tests.swe import rows_fixtures as fx


def test_r2e_row_gives_gold_patch_expected_output_and_id() -> None:
    task = parse_row(fx.r2e_row())
    assert task.format == TaskFormat.R2E
    assert task.repo == "orange3"
    assert task.image == fx.r2e_row()["docker_image"]
    assert task.gold_patch == fx.GOLD_PATCH
    assert "tests/test_core.py" not in task.gold_patch
    assert task.grading_as(R2EGrading).expected_output == {
        "test_mean": "PASSED",
        "TestStats.test_var": "PASSED",
    }
    assert task.task_id == "orange3__0f9e8d7c6b5a"
    assert task.base_commit == "8f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6"
    assert task.source == fx.r2e_row()


def test_swebench_row_lists_from_json_text_and_default_image() -> None:
    task = parse_row(fx.swebench_row())
    assert task.format == TaskFormat.SWEBENCH
    assert task.grading_as(SWEBenchGrading).fail_to_pass == (
        "test_requests.py::RequestsTestCase::test_HTTP_200_OK_GET_ALTERNATIVE",
    )
    assert len(task.grading_as(SWEBenchGrading).pass_to_pass) == 2
    assert task.grading_as(SWEBenchGrading).version == "2.4"
    assert task.image == "swebench/sweb.eval.x86_64.psf_1776_requests-2317:latest"
    assert task.grading_as(SWEBenchGrading).eval_script is None


def test_swebench_row_with_newer_harness_fields_and_list_values() -> None:
    row = {
        **fx.swebench_row(),
        "FAIL_TO_PASS": ["a.py::t"],
        "PASS_TO_PASS": [],
        "image_name": "swebench/sweb.eval.x86_64.psf_1776_requests-2317:v2",
        "eval_script": "#!/bin/bash\necho hi\n",
        "log_parser": "parse_log_requests",
        "eval_type": "pass_and_fail",
    }
    task = parse_row(row)
    assert task.grading_as(SWEBenchGrading).fail_to_pass == ("a.py::t",)
    assert task.image is not None
    assert task.image.endswith(":v2")
    assert task.grading_as(SWEBenchGrading).eval_script == "#!/bin/bash\necho hi\n"
    assert task.grading_as(SWEBenchGrading).log_parser == "parse_log_requests"


def test_r2e_gym_copy_of_swebench_lite_uses_its_image_and_run_tests() -> None:
    row = {
        **fx.swebench_row(),
        "docker_image": "slimshetty/swebench-lite:sweb.eval.x86_64.psf__requests-2317",
        "run_tests": "#!/bin/bash\npytest -rA\n",
        "parsed_commit": json.dumps(fx.parsed_commit()),
    }
    assert detect_format(row) == "swebench"
    task = parse_row(row)
    assert task.image == row["docker_image"]
    assert task.grading_as(SWEBenchGrading).eval_script == row["run_tests"]


def test_swesmith_row_fix_is_the_reverted_bug_patch() -> None:
    task = parse_row(fx.swesmith_row())
    assert task.format == TaskFormat.SWESMITH
    assert task.gold_patch_reversed
    assert task.image == "jyangballin/swesmith.x86_64.oauthlib_1776_oauthlib.1fd52536:latest"
    assert task.grading_as(SWEBenchGrading).fail_to_pass == (
        "tests/test_common.py::ParametersTest::test_urldecode",
    )


def test_jsonl_task_with_r2e_ds_json_merges_both(tmp_path: Path) -> None:
    (tmp_path / "entry.json").write_text(json.dumps(fx.r2e_row()))
    task = parse_row(fx.jsonl_row("entry.json"), base_dir=tmp_path)
    assert task.task_id == "repoenv_sample_calc_fix"
    assert task.format == TaskFormat.R2E
    assert task.max_steps == 6
    assert task.workdir == "/repo"
    assert task.image == "graph_planner/repoenv-sample:latest"
    assert task.problem_statement.startswith("Fix calc.add returning subtraction")
    assert task.grading_as(R2EGrading).expected_output is not None


def test_jsonl_task_without_grading_data_is_graded_by_its_command() -> None:
    task = parse_row(fx.jsonl_row(None))
    assert task.format == TaskFormat.JSONL


@pytest.mark.parametrize(
    ("row", "field", "fragment"),
    [
        ({**fx.swebench_row(), "FAIL_TO_PASS": "[not json"}, "FAIL_TO_PASS", "not valid JSON"),
        ({**fx.swebench_row(), "PASS_TO_PASS": '{"a": 1}'}, "PASS_TO_PASS", "list of test ids"),
        (
            {k: v for k, v in fx.swebench_row().items() if k != "base_commit"},
            "base_commit",
            "required",
        ),
        ({**fx.r2e_row(), "expected_output_json": "[1, 2]"}, "expected_output_json", "JSON object"),
        (
            {**fx.r2e_row(), "parsed_commit_content": '{"file_diffs": 3}'},
            "parsed_commit_content",
            "ParsedCommit",
        ),
        ({**fx.r2e_row(), "docker_image": None}, "docker_image", "string"),
        ({**fx.swesmith_row(), "FAIL_TO_PASS": [1, 2]}, "FAIL_TO_PASS", "list of test ids"),
        (
            {**fx.jsonl_row(None), "sandbox": {"docker_image": "x", "mount": {}}},
            "sandbox.mount",
            "Extra",
        ),
    ],
)
def test_malformed_rows_name_row_and_field(row: dict[str, Any], field: str, fragment: str) -> None:
    with pytest.raises(TaskError) as info:
        parse_row(row, index=7)
    assert info.value.field == field
    assert info.value.row.startswith("row 7")
    assert fragment in str(info.value)


def test_unknown_format_and_non_object_rows() -> None:
    with pytest.raises(TaskError, match="unknown row format"):
        parse_row({"hello": 1}, index=3)
    with pytest.raises(TaskError, match="row 4: a row must be a JSON object"):
        parse_row([1, 2], index=4)  # type: ignore[arg-type]


def test_missing_r2e_ds_json_file_is_reported_on_its_field(tmp_path: Path) -> None:
    with pytest.raises(TaskError) as info:
        parse_row(fx.jsonl_row("nope.json"), base_dir=tmp_path)
    assert info.value.field == "sandbox.r2e_ds_json"


def test_one_bad_row_never_loses_the_others() -> None:
    rows = [
        fx.r2e_row(),
        {**fx.swebench_row(), "FAIL_TO_PASS": "oops"},
        fx.swebench_row(),
        "not a row",
        fx.swesmith_row(),
        fx.swebench_row(),  # duplicate id
    ]
    result = read_rows(rows)  # type: ignore[arg-type]
    assert [t.format for t in result.tasks] == [
        TaskFormat.R2E,
        TaskFormat.SWEBENCH,
        TaskFormat.SWESMITH,
    ]
    assert [(e.row.split(" ")[1], e.field) for e in result.errors] == [
        ("1", "FAIL_TO_PASS"),
        ("3", ""),
        ("5", "task_id"),
    ]
    assert "instance_id=psf__requests-2317" in str(result.errors[0])


def test_task_is_frozen() -> None:
    task = parse_row(fx.swebench_row())
    with pytest.raises(Exception, match="frozen"):
        task.repo = "x"  # type: ignore[misc]
    assert isinstance(task, Task)


def test_r2e_test_file_rule() -> None:
    assert is_r2e_test_path("pkg/tests/test_a.py")
    assert is_r2e_test_path("test_a.py")
    assert is_r2e_test_path("pkg/a_test.py")
    assert is_r2e_test_path("Test/x.py")
    assert not is_r2e_test_path("pkg/testing.py")


def test_parsed_commit_round_trips_a_git_diff() -> None:
    commit = ParsedCommit.model_validate(fx.parsed_commit())
    text = commit.patch(tests=True, code=True)
    again = parse_unified_diff(text, old_commit_hash="a", new_commit_hash="b")
    assert again.patch(tests=True, code=True) == text
    assert again.files == ["stats/core.py", "tests/test_core.py"]
    with pytest.raises(ValueError, match="renames"):
        parse_unified_diff("diff --git a/x.py b/y.py\n", old_commit_hash="a", new_commit_hash="b")
