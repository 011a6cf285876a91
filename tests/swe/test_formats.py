"""Task formats as plug-ins: the built-ins, detection, and a pip-installed third-party format."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox_runtime import ConfigError
from sandbox_runtime.swe import formats, parse_row
from sandbox_runtime.swe.task import Task, TaskError
from tests.swe.conftest import task_named

FIXTURE = Path(__file__).parent.parent / "fixtures" / "thirdparty-format"
ROW = {
    "id": "calc-add",
    "files": {"calc.py": "def add(a, b):\n    return a - b\n"},
    "issue": "calc.add subtracts instead of adding",
    "fix": (
        "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n"
        " def add(a, b):\n-    return a - b\n+    return a + b\n"
    ),
    "check": "python3 -c 'import calc; assert calc.add(2, 3) == 5'",
}


def test_built_in_formats_are_listed_without_importing_them() -> None:
    names = {info.name: info for info in formats.list_formats()}
    assert {"r2e", "swebench", "swesmith", "jsonl"} <= set(names)
    assert names["r2e"].target == "sandbox_runtime.swe.formats.r2e:R2EGymFormat"


def test_unknown_format_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"no task format named 'swebench-pro' \(known: .*r2e"):
        formats.load_format("swebench-pro")
    with pytest.raises(TaskError, match="field 'format'"):
        parse_row(ROW, format="swebench-pro")


@pytest.fixture(scope="module")
def installed_format(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The fixture distribution installed into a directory put on sys.path (pip --target)."""
    target = tmp_path_factory.mktemp("site")
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target"]
    offline = subprocess.run(
        [*command, str(target), "--no-build-isolation", str(FIXTURE)],
        capture_output=True,
        check=False,
    )
    if offline.returncode != 0:
        subprocess.run([*command, str(target), str(FIXTURE)], check=True)
    sys.path.insert(0, str(target))
    importlib.invalidate_caches()
    formats.FORMATS.clear_cache()
    yield target
    sys.path.remove(str(target))
    sys.modules.pop("srt_thirdparty_format", None)
    formats.FORMATS.clear_cache()


def test_a_third_party_format_is_detected_and_parsed(installed_format: Path) -> None:
    info = {i.name: i for i in formats.list_formats()}["script-check"]
    assert info.distribution == "srt-thirdparty-format"
    assert formats.detect(ROW).name == "script-check"
    task = parse_row(ROW)
    assert (task.task_id, task.format, task.workdir) == ("calc-add", "script-check", "/work")
    assert task.grading.kind == "script-check"


@pytest.mark.parametrize(("agent", "reward"), [("oracle", 1.0), ("null", 0.0)])
def test_sandbox_runtime_run_grades_a_third_party_format(
    installed_format: Path, tmp_path: Path, agent: str, reward: float
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(ROW) + "\n", encoding="utf-8")
    report = tmp_path / "report.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(installed_format), *sys.path])}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "sandbox_runtime.cli",
            "run",
            str(tasks),
            "--backend",
            "local",
            "--agent",
            agent,
            "--report",
            str(report),
            "--quiet",
            "--backend-option",
            f"base_dir={tmp_path / 'sandboxes'}",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    entry = json.loads(report.read_text())["tasks"][0]
    assert (entry["task_id"], entry["format"], entry["reward"]) == (
        "calc-add",
        "script-check",
        reward,
    )


def test_a_saved_prepared_state_keeps_what_setup_left_outside_the_workdir(
    bundled_tasks: list[Task],
) -> None:
    """R2E-Gym's setup hides its tests in ``/root``: every task sandbox declares them."""
    from sandbox_runtime.swe.runner import RunOptions, task_sandbox_config

    options = RunOptions(backend="local")
    r2e = task_named(bundled_tasks, "csvline", "r2e")
    swebench = task_named(bundled_tasks, "csvline", "swebench")
    assert task_sandbox_config(r2e, options).checkpoint_paths == [
        "/root/r2e_tests",
        "/root/run_tests.sh",
    ]
    assert task_sandbox_config(swebench, options).checkpoint_paths == []
