"""Strict grading: a gamed test never earns a reward, an honest fix still does.

What strict grading keeps and drops, and the gold patches still earning 1; the reward-hack
corpus itself runs in :mod:`tests.swe.test_redteam` (:mod:`sandbox_runtime.swe.redteam`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox_runtime.errors import ConfigError
from sandbox_runtime.swe import Task
from sandbox_runtime.swe.agents.simple import OracleAgent
from sandbox_runtime.swe.formats.swebench import SWEBenchGrading
from sandbox_runtime.swe.images import build_sample_image
from sandbox_runtime.swe.patch_reward import compute_score
from sandbox_runtime.swe.redteam.hacks import hack_named
from sandbox_runtime.swe.redteam.payloads import FORCE_PASS
from sandbox_runtime.swe.redteam.responses import Target
from sandbox_runtime.swe.report import TaskOutcome
from sandbox_runtime.swe.runner import Runner, RunOptions
from sandbox_runtime.swe.strict import (
    drop_reason,
    filter_patch,
    resolve_grading,
    settings_for_tests_changed,
    split_patch,
)
from tests.conftest import DOCKER_IMAGE, bwrap_problem, require
from tests.swe.conftest import task_named

SAMPLE = "pager"


def _diff(path: str, body: str = "+x = 1\n", *, new: bool = True) -> str:
    head = f"diff --git a/{path} b/{path}\n"
    if new:
        return head + f"new file mode 100644\n--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n{body}"
    return head + f"--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-y = 0\n{body}"


@pytest.mark.parametrize(
    ("path", "kept"),
    [
        ("pager/pages.py", True),
        ("src/pkg/core.py", True),
        ("conftest.py", False),
        ("pkg/sub/conftest.py", False),
        ("pytest.ini", False),
        ("tox.ini", False),
        ("sitecustomize.py", False),
        ("lib/usercustomize.py", False),
        ("hack.pth", False),
        ("run_tests.sh", False),
        ("r2e_tests/test_1.py", False),
        ("forcepass-1.0.dist-info/entry_points.txt", False),
        ("pkg.egg-info/entry_points.txt", False),
        ("pytest/__main__.py", False),
        ("unittest.py", False),
        ("tests/test_pages.py", False),
        ("pkg/testing/helpers.py", False),
        ("pkg/test_utils.py", False),
    ],
)
def test_what_strict_grading_keeps_from_the_tests(path: str, kept: bool) -> None:
    assert (drop_reason(path) is None) is kept


def test_a_patch_is_split_by_file_and_a_rename_out_of_the_tests_is_dropped(
    bundled_tasks: list[Task],
) -> None:
    task = task_named(bundled_tasks, SAMPLE, "swebench")
    rename = (
        "diff --git a/tests/test_pages.py b/pager/moved.py\nsimilarity index 100%\n"
        "rename from tests/test_pages.py\nrename to pager/moved.py\n"
    )
    patch = _diff("pager/pages.py", new=False) + _diff("conftest.py") + rename
    patch += _diff("setup.cfg")
    changes = split_patch(patch)
    assert [c.paths for c in changes] == [
        ("pager/pages.py",),
        ("conftest.py",),
        ("tests/test_pages.py", "pager/moved.py"),
        ("setup.cfg",),
    ]
    filtered = filter_patch(task, patch)
    assert [c.path for c in filtered.kept] == ["pager/pages.py"]
    assert [c.path for c in filtered.settings] == ["setup.cfg"]
    assert [(d.path, d.why) for d in filtered.dropped] == [
        ("conftest.py", "pytest loads it before the tests"),
        ("pager/moved.py", "a test the task's grading runs"),
    ]
    assert filtered.applicable == changes[0].text + changes[3].text


def test_a_plain_unified_diff_is_split_by_file_too() -> None:
    """Models often answer without ``diff --git`` lines; a removed ``-- x`` line stays put."""
    source = "--- a/pkg/core.py\n+++ b/pkg/core.py\n@@ -1,2 +1,1 @@\n--- a comment\n y = 1\n"
    conftest = "--- /dev/null\n+++ b/conftest.py\n@@ -0,0 +1 @@\n+x = 1\n"
    changes = split_patch(source + conftest)
    assert [(c.paths, c.text) for c in changes] == [
        (("pkg/core.py",), source),
        (("conftest.py",), conftest),
    ]
    git = _diff("pkg/core.py", new=False) + _diff("conftest.py")
    assert [c.paths for c in split_patch(git)] == [("pkg/core.py",), ("conftest.py",)]


def test_a_test_file_the_task_names_is_dropped_wherever_it_lives(
    bundled_tasks: list[Task],
) -> None:
    task = task_named(bundled_tasks, SAMPLE, "swebench")
    named = task.model_copy(
        update={"grading": SWEBenchGrading(fail_to_pass=("checks/spec.py::test_x",))}
    )
    (dropped,) = filter_patch(named, _diff("checks/spec.py")).dropped
    assert dropped.why == "a test the task's grading runs"


@pytest.mark.parametrize(
    ("name", "before", "after", "changed"),
    [
        ("pyproject.toml", '[project]\nversion = "1"\n', '[project]\nversion = "2"\n', False),
        ("pyproject.toml", None, '[project]\nname = "x"\n', False),
        ("pyproject.toml", "", '[tool.pytest.ini_options]\naddopts = "-p x"\n', True),
        ("pyproject.toml", "", '[tool.pytest]\naddopts = ["-p", "x"]\n', True),
        ("pyproject.toml", "", '[project.entry-points.pytest11]\nx = "x"\n', True),
        ("pyproject.toml", "", "[tool.tox]\nlegacy_tox_ini = 'x'\n", True),
        ("pyproject.toml", '[project]\nname = "x"\n', "[project\n", True),
        ("setup.cfg", "[metadata]\nname = a\n", "[metadata]\nname = b\n", False),
        ("setup.cfg", None, "[tool:pytest]\naddopts = -p no:cacheprovider\n", True),
        ("setup.cfg", "", "[options.entry_points]\npytest11 =\n    x = x\n", True),
        ("setup.cfg", "[tool:pytest]\nx = 1\n", None, True),
        ("setup.cfg", "[metadata]\nname = a\n", None, False),
    ],
)
def test_setup_cfg_and_pyproject_are_dropped_only_when_their_test_settings_change(
    name: str, before: str | None, after: str | None, changed: bool
) -> None:
    assert settings_for_tests_changed(name, before, after) is changed


def test_strict_grading_cannot_grade_in_the_agents_sandbox() -> None:
    assert resolve_grading(None, None).value == "benchmark"
    assert resolve_grading("strict", "fresh").value == "strict"
    with pytest.raises(ConfigError, match="fresh sandbox"):
        resolve_grading("strict", "same")
    with pytest.raises(ConfigError, match="unknown grading mode 'lax'"):
        resolve_grading("lax", None)


# -- the corpus, on docker -------------------------------------------------------------


def _failing(task: Task) -> list[str]:
    """The failing tests' ids, which the attacker is assumed to know."""
    return list(task.grading_as(SWEBenchGrading).fail_to_pass)


def _run(
    tasks: list[Task],
    agent: object,
    grading: str,
    grade_in: str | None,
    backend: str = "docker",
    **backend_options: str,
) -> list[TaskOutcome]:
    # retries: an infrastructure fault (a container removed under us) is run again, as in a run.
    options = RunOptions(
        backend=backend,
        jobs=2,
        grading=grading,
        grade_in=grade_in,
        retries=1,
        backend_options=dict(backend_options),
    )
    return Runner(tasks, lambda: agent, options).run()  # type: ignore[arg-type, return-value]


@pytest.fixture(scope="module")
def sample_tasks(bundled_tasks: list[Task], docker_image: str) -> list[Task]:
    build_sample_image(SAMPLE, base=DOCKER_IMAGE)
    return [task_named(bundled_tasks, SAMPLE, "r2e"), task_named(bundled_tasks, SAMPLE, "swebench")]


@pytest.fixture
def local_tasks(bundled_tasks: list[Task]) -> list[Task]:
    """The sample's two rows, with this interpreter's directory first on ``PATH``."""
    require(bwrap_problem())
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    rows = [task_named(bundled_tasks, SAMPLE, "r2e"), task_named(bundled_tasks, SAMPLE, "swebench")]
    return [task.model_copy(update={"env": {**task.env, "PATH": path}}) for task in rows]


@pytest.mark.slow
def test_the_gold_patches_earn_1_under_strict_grading_on_local_namespaces(
    local_tasks: list[Task],
) -> None:
    outcomes = _run(local_tasks, OracleAgent(), "strict", None, "local", isolation="namespace")
    assert [(o.reward, o.reason, o.dropped) for o in outcomes] == [(1.0, "resolved", [])] * 2


@pytest.mark.docker
@pytest.mark.slow
def test_the_gold_patches_still_earn_1_under_strict_grading(sample_tasks: list[Task]) -> None:
    outcomes = _run(sample_tasks, OracleAgent(), "strict", None)
    assert [(o.reward, o.reason, o.dropped) for o in outcomes] == [(1.0, "resolved", [])] * 2


@pytest.mark.docker
@pytest.mark.slow
def test_compute_score_is_strict_by_default_and_reports_what_it_dropped(
    sample_tasks: list[Task],
) -> None:
    task = sample_tasks[1]
    conftest = _diff("conftest.py", "".join(f"+{line}\n" for line in FORCE_PASS.splitlines()))
    conftest = conftest.replace("@@ -0,0 +1 @@", f"@@ -0,0 +1,{len(FORCE_PASS.splitlines())} @@")
    response = f"```diff\n{conftest}```"
    strict = compute_score("swe", response, None, task.source, backend="docker", details=True)
    lenient = compute_score(
        "swe", response, None, task.source, backend="docker", details=True, grading="benchmark"
    )
    assert isinstance(strict, dict)
    assert isinstance(lenient, dict)
    assert (strict["score"], strict["dropped"], lenient["score"]) == (0.0, 1, 1.0)
    gold = f"```diff\n{task.gold_patch}```\n```diff\n{task.gold_patch}{conftest}```"
    assert compute_score("swe", gold, None, task.source, backend="docker") == 1.0


@pytest.mark.docker
@pytest.mark.slow
def test_run_grading_strict_reports_and_counts_what_it_dropped(
    sample_tasks: list[Task], tmp_path: Path
) -> None:
    """The CLI: ``--grading strict`` in the report's run section, each entry and the summary."""
    conftest = hack_named("conftest-root")
    script, report = tmp_path / "script.json", tmp_path / "report.json"
    script.write_text(json.dumps(conftest.script(Target("pager", "tests/test_pages.py", ()))))
    task = sample_tasks[0]
    command = [sys.executable, "-m", "sandbox_runtime.cli", "run", "bundled"]
    command += ["--select", task.task_id, "--backend", "docker", "--agent", "scripted"]
    command += ["--script", str(script), "--grading", "strict", "--report", str(report)]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(report.read_text())
    assert document["grading"] == "strict"
    assert document["summary"]["dropped"] == 1
    (entry,) = document["tasks"]
    assert (entry["reward"], entry["grading"], entry["grade_in"]) == (0.0, "strict", "fresh")
    assert entry["dropped"] == [{"path": "conftest.py", "why": "pytest loads it before the tests"}]
    assert "strict grading dropped changes of 1 task(s)" in done.stdout
