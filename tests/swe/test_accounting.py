"""Accounting in the run's report, checked against counts the test makes itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sandbox_runtime import SandboxError, SandboxRuntime
from sandbox_runtime.swe import Task
from sandbox_runtime.swe.agents.base import Agent, AgentResult, Budget
from sandbox_runtime.swe.images import build_sample_image
from sandbox_runtime.swe.runner import Runner, RunOptions
from tests.conftest import DOCKER_IMAGE, docker_problem, require
from tests.swe.conftest import task_named
from tests.swe.test_audit import run_cli

#: The agent's calls: three commands printing 4 + 5 + 0 bytes, one file of 1234 bytes.
SCRIPT = [
    {"tool": "bash", "args": {"command": "printf abcd"}},
    {"tool": "bash", "args": {"command": "printf 12345"}},
    {"tool": "bash", "args": {"command": "true"}},
    {
        "tool": "str_replace_editor",
        "args": {"command": "create", "path": "notes.txt", "file_text": "n" * 1234},
    },
    {"tool": "submit", "args": {}},
]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["local", "docker"])
@pytest.mark.parametrize(("fmt", "sandboxes"), [("r2e", 1), ("swebench", 2)])
def test_the_report_counts_what_the_agent_did(
    tmp_path: Path, bundled_tasks: list[Task], backend: str, fmt: str, sandboxes: int
) -> None:
    if backend == "docker":
        require(docker_problem())
        build_sample_image("versionkit", base=DOCKER_IMAGE)
    task = task_named(bundled_tasks, "versionkit", fmt)
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    report = tmp_path / "report.json"
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
        str(script),
        "--price",
        "ags=5",
        "--price",
        f"{backend}=0.01",
        "--report",
        str(report),
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(report.read_text())
    (entry,) = document["tasks"]
    used = entry["accounting"]
    # On local, the tool box's check that commands see the sandbox's paths is one more.
    assert used["agent"] == {
        "commands": 3 + (backend == "local"),
        "command_seconds": used["agent"]["command_seconds"],
        "bytes_up": 1234,
        "bytes_down": 4 + 5,
    }
    # The default grading place: a second sandbox for SWE-bench's fresh grading.
    assert used["sandboxes"] == sandboxes
    assert used["commands"] > 3  # setup, the tamper check, diff and grading count too
    assert used["bytes_up"] >= 1234
    assert used["sandbox_seconds"] >= used["start_latency"] + used["command_seconds"] - 0.01
    assert used["grading_seconds"] == entry["timings"]["grade"]
    assert used["cost"] == pytest.approx(used["sandbox_seconds"] * 0.01, abs=1e-5)
    assert used["retries"] == {}
    assert used["faults"] == {}
    totals = document["summary"]["accounting"]
    for key in ("sandboxes", "commands", "bytes_up", "bytes_down", "sandbox_seconds", "cost"):
        assert totals[key] == used[key]
    assert "sandbox-seconds over" in done.stdout
    assert "estimated cost" in done.stdout


class _CrashOnce(Agent):
    """Crashes on its first task attempt (an infrastructure-like error), then does nothing."""

    attempts = 0

    def run(self, task: Task, sandbox: SandboxRuntime, budget: Budget) -> AgentResult:
        _CrashOnce.attempts += 1
        if _CrashOnce.attempts == 1:
            raise SandboxError("the agent's connection broke")
        return AgentResult(submitted=True, stop_reason="submitted")


def test_a_retried_task_pays_for_every_attempt(bundled_tasks: list[Task]) -> None:
    task = task_named(bundled_tasks, "pricing", "r2e")  # graded in the same sandbox
    options = RunOptions(backend="local", retries=1)
    (outcome,) = Runner([task], _CrashOnce, options).run()
    assert outcome.reward == 0.0
    assert len(outcome.attempts) == 2
    assert outcome.accounting.sandboxes == 2  # the failed attempt's sandbox was paid for too
