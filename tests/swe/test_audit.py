"""Rewards you can audit: grading in the same or a fresh sandbox, and tamper flags.

The agent here games R2E-Gym's rule: it rewrites the task's held-out test file (hidden in
``/root/r2e_tests``) so that every expected test passes without fixing anything.  Graded in
its own sandbox that earns 1; graded in a fresh sandbox with only its repository diff, 0;
and either way the report names the file it changed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sandbox_runtime.integrations.rllm import SWEEnv
from sandbox_runtime.swe import Task
from sandbox_runtime.swe.formats.r2e import R2EGrading
from sandbox_runtime.swe.formats.swebench import SWEBenchGrading
from sandbox_runtime.swe.images import build_sample_image
from sandbox_runtime.swe.isolation import GradeIn, resolve_grade_in
from sandbox_runtime.swe.patch_reward import compute_score
from sandbox_runtime.swe.samples import sample_names
from sandbox_runtime.swe.tamper import TamperFlag, flags_from_patch
from tests.conftest import DOCKER_IMAGE
from tests.swe.conftest import task_named

HELD_OUT = "/root/r2e_tests/test_1.py"


def passing_tests(task: Task) -> str:
    """A test module defining every expected test, each of which passes."""
    classes: dict[str, list[str]] = {}
    for key in task.grading_as(R2EGrading).expected_output:
        cls, method = key.split(".")
        classes.setdefault(cls, []).append(method)
    body = "import unittest\n"
    for cls, methods in classes.items():
        body += f"\n\nclass {cls}(unittest.TestCase):\n"
        body += "".join(f"    def {m}(self):\n        pass\n" for m in methods)
    return body


def tampering_script(task: Task) -> list[dict[str, Any]]:
    """Overwrite the held-out tests (a path relative to the repository: every backend)."""
    command = f"cat > ../root/r2e_tests/test_1.py <<'EOF_T'\n{passing_tests(task)}EOF_T"
    return [{"tool": "bash", "args": {"command": command}}, {"tool": "submit", "args": {}}]


def run_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["TMPDIR"] = str(tmp_path / "tmp")
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "sandbox_runtime.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def run_tampering(
    tmp_path: Path, task: Task, backend: str, grade_in: str, script: list[dict[str, Any]]
) -> dict[str, Any]:
    script_file = tmp_path / f"script-{grade_in}.json"
    script_file.write_text(json.dumps(script))
    report, trajectories = tmp_path / f"{grade_in}.json", tmp_path / f"{grade_in}.jsonl"
    done = run_cli(
        tmp_path,
        "run",
        "bundled",
        "--select",
        task.task_id,
        "--backend",
        backend,
        "--agent",
        "scripted",
        "--script",
        str(script_file),
        "--grade-in",
        grade_in,
        "--report",
        str(report),
        "--trajectories",
        str(trajectories),
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(report.read_text())
    assert document["grade_in"] == grade_in
    assert document["summary"]["flagged"] == 1
    assert "1 task(s) flagged" in done.stdout
    (entry,) = document["tasks"]
    (record,) = [json.loads(line) for line in trajectories.read_text().splitlines()]
    assert record["tamper"] == entry["tamper"]
    assert record["grade_in"] == grade_in
    return dict(entry)


def check_same_and_fresh(tmp_path: Path, task: Task, backend: str) -> None:
    script = tampering_script(task)
    same = run_tampering(tmp_path, task, backend, "same", script)
    fresh = run_tampering(tmp_path, task, backend, "fresh", script)
    assert (same["reward"], same["reason"]) == (1.0, "resolved")
    assert fresh["reward"] == 0.0
    assert fresh["reason"].startswith("tests failed: ")
    for entry in (same, fresh):
        assert entry["flagged"] is True
        assert {"path": HELD_OUT, "kind": "test file"}.items() <= entry["tamper"][0].items()


@pytest.mark.slow
def test_a_gamed_test_file_earns_1_in_the_same_sandbox_0_in_a_fresh_one_on_local(
    tmp_path: Path, bundled_tasks: list[Task]
) -> None:
    check_same_and_fresh(tmp_path, task_named(bundled_tasks, "csvline", "r2e"), "local")


@pytest.mark.docker
@pytest.mark.slow
def test_a_gamed_test_file_earns_1_in_the_same_sandbox_0_in_a_fresh_one_on_docker(
    tmp_path: Path, bundled_tasks: list[Task], docker_image: str
) -> None:
    build_sample_image("pager", base=DOCKER_IMAGE)
    check_same_and_fresh(tmp_path, task_named(bundled_tasks, "pager", "r2e"), "docker")


@pytest.mark.docker
@pytest.mark.slow
def test_a_changed_installed_file_is_flagged_outside_the_repository(
    tmp_path: Path, bundled_tasks: list[Task], docker_image: str
) -> None:
    """The interpreter's own files (stdlib, site-packages) are named by the engine's overlay."""
    build_sample_image("pricing", base=DOCKER_IMAGE)
    task = task_named(bundled_tasks, "pricing", "swebench")
    command = (
        "python3 -c \"import os, sysconfig; open(os.path.join(sysconfig.get_paths()['stdlib'], "
        "'tamper_probe.py'), 'w').write('x = 1')\""
    )
    script = [{"tool": "bash", "args": {"command": command}}]
    entry = run_tampering(tmp_path, task, "docker", "fresh", script)
    assert entry["reason"].startswith("tests failed: ")  # the change itself fixes nothing
    (flag,) = entry["tamper"]
    assert flag["kind"] == "outside repository"
    assert flag["path"].endswith("/tamper_probe.py")


def test_defaults_follow_each_benchmark(bundled_tasks: list[Task]) -> None:
    r2e, swebench = (task_named(bundled_tasks, "pager", fmt) for fmt in ("r2e", "swebench"))
    assert resolve_grade_in(r2e, None) is GradeIn.SAME
    assert resolve_grade_in(swebench, "default") is GradeIn.FRESH
    assert resolve_grade_in(r2e, "fresh") is GradeIn.FRESH
    assert resolve_grade_in(swebench, GradeIn.SAME) is GradeIn.SAME
    assert set(sample_names()) >= {"pager"}


def _diff(path: str, *lines: str) -> str:
    body = "".join(f"{line}\n" for line in lines)
    return f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n{body}"


def test_which_repository_changes_are_flagged(bundled_tasks: list[Task]) -> None:
    task = task_named(bundled_tasks, "pager", "swebench")
    patch = "".join(
        [
            _diff("pager/core.py", "-a = 1", "+a = 2"),  # the fix itself: not flagged
            _diff("tests/test_pages.py", "-x", "+y"),  # named by test_patch
            _diff("sub/conftest.py", "+import pytest"),
            _diff("pytest.ini", "+addopts = -p no:warnings"),
            _diff("tox.ini", "+[testenv]"),
            _diff("setup.cfg", "-[metadata]", "+[metadata]"),  # no pytest nearby
            _diff("pyproject.toml", " [tool.pytest.ini_options]", "+addopts = '-x'"),
        ]
    )
    flags = flags_from_patch(task, patch)
    assert [(flag.path, flag.kind) for flag in flags] == [
        ("tests/test_pages.py", "test file"),
        ("sub/conftest.py", "test config"),
        ("pytest.ini", "test config"),
        ("tox.ini", "test config"),
        ("pyproject.toml", "test config"),
        # These hunks' counts do not match their lines: git's reader refuses the text.
        ("<patch>", "patch format"),
    ]
    assert [flag.kind for flag in flags_from_patch(task, _diff("pager/core.py", "-a", "+b"))] == []
    assert TamperFlag("a", "b").to_dict() == {"path": "a", "kind": "b", "detail": ""}


def test_package_metadata_is_flagged_only_when_it_names_a_pytest_plugin(
    bundled_tasks: list[Task],
) -> None:
    # pytest loads every pytest11 entry point on the import path, the repository's root
    # included; console scripts from `pip install -e .` are no such thing.
    task = task_named(bundled_tasks, "pager", "swebench")
    plugin = _diff("forcepass-1.0.dist-info/entry_points.txt", "+[pytest11]", "+f = forcepass")
    scripts = _diff("pager.egg-info/entry_points.txt", "+[console_scripts]", "+pager = pager:main")
    kinds = [(f.path, f.kind) for f in flags_from_patch(task, plugin + scripts)]
    assert ("forcepass-1.0.dist-info/entry_points.txt", "test config") in kinds
    assert not [path for path, _ in kinds if path.startswith("pager.egg-info")]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("grading", "grade_in", "reward", "graded_in"),
    [
        ("benchmark", "same", 1.0, "same"),
        ("benchmark", "fresh", 0.0, "fresh"),
        ("strict", None, 0.0, "fresh"),  # SWEEnv's default
    ],
)
def test_swe_env_grades_where_told_and_flags_the_gamed_tests(
    bundled_tasks: list[Task], grading: str, grade_in: str | None, reward: float, graded_in: str
) -> None:
    task = task_named(bundled_tasks, "csvline", "r2e")
    with SWEEnv(task, backend="local", grade_in=grade_in, grading=grading) as env:
        env.reset()
        command = f"cat > ../root/r2e_tests/test_1.py <<'EOF_T'\n{passing_tests(task)}EOF_T"
        env.step({"name": "execute_bash", "arguments": {"command": command}})
        assert env.compute_final_reward() == reward
        assert env.last_grade is not None
        assert env.last_grade.grade_in == graded_in
        assert [flag.path for flag in env.last_tamper] == [HELD_OUT]
        assert env.last_grade.grading == grading
        dropped = [change["path"] for change in env.last_grade.dropped]
        assert dropped == ([HELD_OUT] if grading == "strict" else [])


def test_swe_env_info_carries_the_accounting(bundled_tasks: list[Task]) -> None:
    task = task_named(bundled_tasks, "pager", "swebench")  # graded fresh: a second sandbox
    with SWEEnv(task, backend="local") as env:
        _, info = env.reset()
        assert info["grade_in"] == "fresh"
        first = info["accounting"]
        assert first["sandboxes"] == 1
        assert first["start_latency"] > 0
        _, _, _, step = env.step({"name": "execute_bash", "arguments": {"command": "printf 1234"}})
        # One bash step is one command; its output is 4 bytes.
        assert step["accounting"]["commands"] == first["commands"] + 1
        assert step["accounting"]["bytes_down"] == first["bytes_down"] + 4
        assert env.compute_final_reward() == 0.0
        graded = env.accounting()
        assert graded["sandboxes"] == 2
        assert graded["grading_seconds"] > 0
    assert env.accounting()["sandbox_seconds"] >= graded["sandbox_seconds"]


def test_verl_reward_details_flag_a_patch_to_the_tests_and_count_its_sandbox(
    bundled_tasks: list[Task],
) -> None:
    task = task_named(bundled_tasks, "pager", "swebench")
    grading = task.grading_as(SWEBenchGrading)
    gamed = f"```diff\n{task.gold_patch}{grading.test_patch}```"
    details = compute_score("swe", gamed, None, task.source, details=True)
    assert isinstance(details, dict)
    assert details["score"] == 1.0
    assert details["flagged"] == 1  # the patch edits tests/test_pages.py
    assert details["dropped"] == 1  # and strict grading (the default) kept that edit out
    assert details["sandbox_seconds"] > 0
    assert details["commands"] > 0
    assert details["bytes_up"] >= len(task.gold_patch)  # only the kept part is uploaded
    plain = compute_score("swe", f"```diff\n{task.gold_patch}```", None, task.source, details=True)
    assert isinstance(plain, dict)
    assert (plain["score"], plain["flagged"]) == (1.0, 0)


def test_an_agent_that_rewrites_the_repository_history_is_flagged(
    bundled_tasks: list[Task],
) -> None:
    """A moved ``HEAD`` (or ref, or hook) is read from outside the sandbox: ``git metadata``."""
    task = task_named(bundled_tasks, "eventhub", "r2e")
    command = "echo 'ref: refs/heads/rewritten' > .git/HEAD"  # (the env refuses a bare git)
    with SWEEnv(task, backend="local") as env:
        env.reset()
        env.step({"name": "execute_bash", "arguments": {"command": command}})
        assert env.compute_final_reward() == 0.0  # the reward is the tests' verdict still
        kinds = {flag.kind for flag in env.last_tamper}
        assert kinds == {"git metadata"}, env.last_tamper
