"""``tasks check``: gold resolves, no patch does not, and a broken image is named as such."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from sandbox_runtime.cli import main
from sandbox_runtime.swe.check import (
    Disagreement,
    check_tasks,
    diagnose,
    disagreements,
    why_not_passed,
)
from sandbox_runtime.swe.check_harness import compare_run
from sandbox_runtime.swe.dataset import load_rows
from sandbox_runtime.swe.formats.swebench import SWEBenchGrading
from sandbox_runtime.swe.grading import GradeResult
from sandbox_runtime.swe.images import build_sample_image
from sandbox_runtime.swe.rows import parse_row
from sandbox_runtime.swe.runner import RunOptions
from sandbox_runtime.swe.samples import sample_names
from sandbox_runtime.swe.task import Task
from tests.conftest import DOCKER_IMAGE

_ROW_ID = "sandbox-runtime-samples__csvline-1"
_BROKEN_P2P = "tests/test_core.py::TestSplitRow::test_other_delimiter"
BROKEN_IMAGE = "sandbox-runtime-test/csvline-broken:latest"


def _csvline_row() -> dict[str, object]:
    return next(row for row in load_rows("bundled:swebench") if row["instance_id"] == _ROW_ID)


def test_ids_that_disagree_and_why() -> None:
    task = parse_row(_csvline_row())
    f2p = "tests/test_core.py::TestSplitRow::test_only_delimiter"
    gold = GradeResult(0.0, "tests failed", status_map={f2p: "FAILED"})
    null = GradeResult(0.0, "tests failed", status_map={f2p: "PASSED"})
    found = disagreements(task, gold, null)
    whys = {(item.run, item.test_id): item.why for item in found}
    assert whys[("gold", f2p)] == "failed"
    assert whys[("gold", _BROKEN_P2P)] == "missing from the log"
    assert whys[("null", f2p)] == "passed"
    assert whys[("null", _BROKEN_P2P)] == "missing from the log"
    assert diagnose(gold, null, found).startswith("ids not in the log: 9 of the row's test ids")
    null.status_map[_BROKEN_P2P] = "FAILED"
    found = disagreements(task, gold, null)
    assert diagnose(gold, null, found) == (
        "broken image: PASS_TO_PASS tests fail before any patch (1)"
    )


def test_diagnosis_of_each_shape() -> None:
    ok, zero, none = GradeResult(1.0, "resolved"), GradeResult(0.0, "x"), GradeResult(None, "y")
    f2p_passes = [Disagreement("null", "t", "FAIL_TO_PASS", "fail", "passed")]
    assert diagnose(ok, zero, []) == "OK"
    assert diagnose(zero, zero, []) == "gold does not resolve: x"
    assert diagnose(none, zero, []) == "no verdict with the gold patch: y"
    assert diagnose(ok, none, []) == "no verdict without a patch: y"
    assert diagnose(ok, ok, []).startswith("no patch resolves the task")
    assert "FAIL_TO_PASS tests already pass before any patch" in diagnose(ok, zero, f2p_passes)
    assert why_not_passed("ERROR") == "error"
    assert why_not_passed("SKIPPED") == "skipped"


def _check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any], str]:
    code = main(["tasks", "check", *args, "--backend", "docker", "--json"])
    captured = capsys.readouterr()
    assert captured.out.startswith("{"), f"exit {code}, stderr: {captured.err}"
    return code, json.loads(captured.out), captured.err


@pytest.fixture(scope="module")
def sample_images(docker_image: str) -> list[str]:
    return [build_sample_image(name, base=DOCKER_IMAGE) for name in sample_names()]


@pytest.fixture(scope="module")
def broken_image(sample_images: list[str]) -> str:
    """The csvline sample's image with ``split_row`` ignoring its delimiter: a PASS_TO_PASS
    test (``test_other_delimiter``) fails before any patch, and gold does not fix it."""
    import docker

    dockerfile = (
        "FROM sandbox-runtime-samples/csvline:latest\n"
        "RUN sed -i 's/^    fields = \\[\\]$/    delimiter = \",\"\\n    fields = []/' "
        "/testbed/csvline/core.py && grep -q 'delimiter = \",\"' /testbed/csvline/core.py\n"
    )
    client = docker.from_env(timeout=120)
    try:
        client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=BROKEN_IMAGE, rm=True)
    finally:
        client.close()
    return BROKEN_IMAGE


@pytest.mark.docker
@pytest.mark.slow
def test_bundled_tasks_check_ok(
    capsys: pytest.CaptureFixture[str], sample_images: list[str]
) -> None:
    code, body, _ = _check(capsys, "bundled", "-j", "4")
    rows = body["rows"]
    assert isinstance(rows, list)
    assert len(rows) == 10
    assert [row["diagnosis"] for row in rows] == ["OK"] * 10, rows
    assert all(row["gold"]["outcome"] == "resolved" for row in rows)
    assert all(row["null"]["outcome"] == "unresolved" for row in rows)
    assert code == 0


@pytest.mark.docker
@pytest.mark.slow
def test_broken_image_and_bad_row_are_reported(
    capsys: pytest.CaptureFixture[str], broken_image: str, tmp_path: Path
) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text("{not json\n" + json.dumps(_csvline_row()) + "\n")
    code, body, err = _check(capsys, str(rows), "--image", f"{_ROW_ID}={broken_image}")
    assert code == 1
    assert f"bad row: {rows}:1: not valid JSON" in err
    (row,) = body["rows"]
    assert row["image"] == broken_image
    assert row["diagnosis"].startswith("broken image: PASS_TO_PASS tests fail before any patch")
    assert not row["ok"]
    found = {(d["run"], d["test_id"], d["why"]) for d in row["disagreements"]}
    assert ("null", _BROKEN_P2P, "failed") in found
    assert ("gold", _BROKEN_P2P, "failed") in found
    assert row["null"]["outcome"] == "unresolved"
    assert row["gold"]["outcome"] == "unresolved"


def test_harness_comparison_names_each_id_and_verdict_that_differ() -> None:
    task = parse_row(_csvline_row())
    f2p = "tests/test_core.py::TestSplitRow::test_only_delimiter"
    grading = task.grading_as(SWEBenchGrading)
    everything = list(grading.fail_to_pass + grading.pass_to_pass)
    harness = {
        "found": True,
        "resolved": True,
        "tests_status": {
            "FAIL_TO_PASS": {"success": list(grading.fail_to_pass), "failure": []},
            "PASS_TO_PASS": {"success": list(grading.pass_to_pass), "failure": []},
        },
    }
    agreeing = GradeResult(1.0, "resolved", status_map=dict.fromkeys(everything, "PASSED"))
    assert compare_run(task, agreeing, harness, "gold") == ([], len(everything))
    one_failed = GradeResult(0.0, "tests failed", status_map={**agreeing.status_map, f2p: "FAILED"})
    lines, _ = compare_run(task, one_failed, harness, "gold")
    assert lines == [
        "gold: verdict: library unresolved, harness resolved",
        f"gold: FAIL_TO_PASS {f2p}: library failed, harness passed",
    ]
    no_verdict, _ = compare_run(task, GradeResult(None, "test error"), harness, "gold")
    assert no_verdict[0] == "gold: verdict: library no verdict, harness resolved"
    assert len(no_verdict) == 1 + len(everything)


def test_a_row_whose_check_raises_is_reported_and_the_others_still_run() -> None:
    task = parse_row(_csvline_row())
    other = task.model_copy(update={"task_id": "other"})

    def harness(checked: Task, *_: object) -> dict[str, Any]:
        if checked.task_id == "other":
            raise RuntimeError("the harness broke")
        return {"agrees": None, "summary": "not compared"}

    options = RunOptions(backend="no-such-backend", jobs=2)
    first, second = check_tasks([task, other], options, harness=harness)
    assert first.diagnosis.startswith("no verdict with the gold patch: infrastructure error")
    assert second.diagnosis == "check failed: RuntimeError: the harness broke"
    assert not first.ok
    assert not second.ok


def test_a_gold_patch_that_does_not_apply_is_named_not_the_ids(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The diagnosis reads the runs' reasons before the missing ids (issue 29).

    A gold patch removing a line the file does not have (no fuzz applies it) leaves the gold
    run without any test output, so every id is missing from its log; the line must say the
    patch did not apply, not that the row's ids and the runner's differ.  Run for real on
    ``local``, where the bundled row resolves to its template directory.
    """
    row = _csvline_row()
    patch = str(row["patch"])
    removed = next(
        line
        for line in patch.splitlines()
        if line.startswith("-") and not line.startswith("---") and line.strip("- ")
    )
    row["patch"] = patch.replace(removed, removed + "  # not in the file", 1)
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps(row) + "\n")
    code = main(
        [
            "tasks",
            "check",
            str(rows),
            "--backend",
            "local",
            "--backend-option",
            f"base_dir={tmp_path / 'sandboxes'}",
            "--json",
        ]
    )
    body = json.loads(capsys.readouterr().out)
    (checked,) = body["rows"]
    assert code == 1
    assert checked["diagnosis"].startswith("gold: patch did not apply"), checked["diagnosis"]
    assert "ids not in the log" not in checked["diagnosis"]
    assert checked["null"]["outcome"] == "unresolved"


def test_the_reasons_are_read_before_the_missing_ids() -> None:
    task = parse_row(_csvline_row())
    gold = GradeResult(0.0, "patch did not apply in the fresh sandbox: error: patch failed")
    null = GradeResult(0.0, "tests failed", status_map={})
    found = disagreements(task, gold, null)
    assert any(d.why == "missing from the log" for d in found)
    assert diagnose(gold, null, found) == (
        "gold: patch did not apply in the fresh sandbox: error: patch failed"
    )
    test_patch_failed = GradeResult(0.0, "test patch did not apply")
    assert diagnose(gold, test_patch_failed, found) == "null: test patch did not apply"
