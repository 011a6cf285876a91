"""``sandbox-runtime replay``: a run's trajectories graded again, on another backend too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sandbox_runtime.swe import Task
from sandbox_runtime.swe.images import build_sample_image
from sandbox_runtime.swe.samples import sample_names
from tests.conftest import DOCKER_IMAGE
from tests.swe.conftest import task_named
from tests.swe.test_audit import run_cli, tampering_script


def record_run(tmp_path: Path, agent: str, *options: str) -> Path:
    trajectories = tmp_path / f"{agent}.jsonl"
    done = run_cli(
        tmp_path,
        "run",
        "bundled",
        "--backend",
        "local",
        "--agent",
        agent,
        "-j",
        "2",
        "--quiet",
        "--trajectories",
        str(trajectories),
        *options,
    )
    assert done.returncode == 0, done.stderr
    return trajectories


def replay(tmp_path: Path, trajectories: Path, *options: str) -> tuple[int, dict[str, Any], str]:
    report = tmp_path / "replay.json"
    done = run_cli(
        tmp_path, "replay", str(trajectories), "-j", "2", "--report", str(report), *options
    )
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(report.read_text()), done.stdout


def records_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.docker
@pytest.mark.slow
# The oracle only, for CI's time (~50 s more for null); the null agent's 0 on each backend is
# checked by test_cli_run, and a disagreeing replay by the tests below.
@pytest.mark.parametrize("agent", ["oracle"])
def test_a_local_run_replayed_on_docker_agrees_on_every_bundled_task(
    tmp_path: Path, docker_image: str, agent: str
) -> None:
    for name in sample_names():
        build_sample_image(name, base=DOCKER_IMAGE)
    trajectories = record_run(tmp_path, agent)
    code, report, table = replay(tmp_path, trajectories, "--backend", "docker")
    assert code == 0, table
    assert report["backend"] == "docker"
    assert report["summary"] == {
        "records": 10,
        "agree": 10,
        "disagree": 0,
        "error": 0,
        "skipped": 0,
    }
    expected = 1.0 if agent == "oracle" else 0.0
    for entry in report["records"]:
        assert entry["recorded"]["reward"] == entry["replayed"]["reward"] == expected
        assert entry["replayed"]["sandbox_id"]
    assert "10 agree, 0 disagree" in table


@pytest.mark.slow
def test_a_hand_edited_reward_is_a_disagreement_with_exit_code_1(tmp_path: Path) -> None:
    recorded = records_of(record_run(tmp_path, "null", "--select", "pager__dfbfc9f5d176"))
    (record,) = recorded
    assert record["reward"] == 0.0
    record["reward"], record["reason"] = 1.0, "resolved"
    edited = tmp_path / "edited.jsonl"
    edited.write_text(json.dumps(record) + "\n")
    code, report, table = replay(tmp_path, edited)
    assert code == 1
    assert report["backend"] == "local"  # the recorded one
    (entry,) = report["records"]
    assert entry["status"] == "disagree"
    assert entry["recorded"] == {"reward": 1.0, "reason": "resolved"}
    assert entry["replayed"]["reward"] == 0.0
    assert entry["replayed"]["reason"].startswith("tests failed: ")
    assert "disagree" in table
    assert "replayed: tests failed" in table


@pytest.mark.slow
def test_a_reward_earned_by_gaming_the_tests_does_not_replay(
    tmp_path: Path, bundled_tasks: list[Task]
) -> None:
    """Graded in its own sandbox the gamed task earned 1; its patch alone earns 0."""
    task = task_named(bundled_tasks, "csvline", "r2e")
    script = tmp_path / "script.json"
    script.write_text(json.dumps(tampering_script(task)))
    trajectories = record_run(
        tmp_path,
        "scripted",
        "--script",
        str(script),
        "--select",
        task.task_id,
        "--grade-in",
        "same",
    )
    code, report, _ = replay(tmp_path, trajectories)
    assert code == 1
    (entry,) = report["records"]
    assert (entry["recorded"]["reward"], entry["replayed"]["reward"]) == (1.0, 0.0)
    # Running the recorded commands again reproduces the gamed state, and its reward.
    code, report, _ = replay(tmp_path, trajectories, "--actions")
    assert code == 0
    (entry,) = report["records"]
    assert entry["replayed"]["reward"] == 1.0
    assert entry["replayed"]["tamper"][0]["path"] == "/root/r2e_tests/test_1.py"


@pytest.mark.slow
def test_records_without_a_task_row_take_their_task_from_a_source(tmp_path: Path) -> None:
    trajectories = record_run(tmp_path, "oracle", "--select", "eventhub__5d93ab4e716e")
    (record,) = records_of(trajectories)
    del record["task"]
    bare = tmp_path / "bare.jsonl"
    bare.write_text(json.dumps(record) + "\n")
    done = run_cli(tmp_path, "replay", str(bare))
    assert done.returncode == 2
    assert "--tasks SOURCE" in done.stderr
    code, report, _ = replay(tmp_path, bare, "--tasks", "bundled")
    assert code == 0
    assert report["summary"]["agree"] == 1


def test_bad_trajectory_files_fail_before_any_sandbox(tmp_path: Path) -> None:
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"task_id": "a"}\nnot json\n')
    done = run_cli(tmp_path, "replay", str(broken))
    assert done.returncode == 2
    assert "broken.jsonl:2: not JSON" in done.stderr
    twice = tmp_path / "twice.jsonl"
    twice.write_text('{"task_id": "a", "backend": "local"}\n' * 2)
    done = run_cli(tmp_path, "replay", str(twice))
    assert done.returncode == 2
    assert "recorded more than once" in done.stderr
