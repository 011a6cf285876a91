"""The issue's acceptance check: ``sandbox-runtime run bundled --backend ags`` against the
emulator (instances are Docker containers of the tasks' images) gives exactly the per-task
rewards ``--backend local`` gives, for the oracle and the null agent; once with one tool and a
per-task image override, once with each task's tool resolved from a mapping that
``sandbox-runtime ags sync`` made for the bundled dataset."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox_runtime._core.ownership import RUN_ID
from sandbox_runtime.swe.images import build_sample_image
from sandbox_runtime.swe.samples import sample_names
from sandbox_runtime_emulators.ags.server import AgsEmulator
from tests.ags.test_tools import ROLE
from tests.conftest import DOCKER_IMAGE

pytestmark = [pytest.mark.docker, pytest.mark.slow]

AGENTS = [("oracle", 1.0), ("null", 0.0)]


@pytest.fixture(scope="module")
def base_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of every command: private temp and cache, no AGS variables."""
    root = tmp_path_factory.mktemp("crosscheck")
    (root / "tmp").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGS_", "E2B_", "TENCENT"))}
    env.update({"TMPDIR": str(root / "tmp"), "SANDBOX_RUNTIME_CACHE": str(root / "cache")})
    return env


@pytest.fixture(scope="module")
def sample_images(docker_image: str) -> list[str]:
    return [build_sample_image(name, base=DOCKER_IMAGE) for name in sample_names()]


@pytest.fixture(scope="module")
def docker_emulator(docker_image: str, sample_images: list[str]) -> Iterator[AgsEmulator]:
    with AgsEmulator(backend="docker", default_image=docker_image) as running:
        yield running


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sandbox_runtime.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _sandboxes_started(report: Path) -> int:
    """Sandboxes the run's own accounting counted (SWE-bench rows grade in a second one)."""
    document = json.loads(report.read_text())
    return sum(int(task["accounting"]["sandboxes"]) for task in document["tasks"])


def _rewards(env: dict[str, str], report: Path, *args: str) -> dict[str, float]:
    done = _cli(env, "run", "bundled", "-j", "2", "--quiet", "--report", str(report), *args)
    assert done.returncode == 0, done.stderr
    document = json.loads(report.read_text())
    assert document["summary"]["errors"] == 0
    return {task["task_id"]: task["reward"] for task in document["tasks"]}


@pytest.fixture(scope="module")
def local_rewards(
    base_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, float]]:
    reports = tmp_path_factory.mktemp("local")
    return {
        agent: _rewards(base_env, reports / f"{agent}.json", "--backend", "local", "--agent", agent)
        for agent, _expected in AGENTS
    }


def _instances_of_run(emulator: AgsEmulator, run_id: str) -> list[dict[str, Any]]:
    with emulator.store.lock:
        instances = [i.to_api() for i in emulator.store.instances.values()]
    return [
        i for i in instances if {m["Name"]: m["Value"] for m in i["Metadata"]}.get(RUN_ID) == run_id
    ]


@pytest.mark.parametrize(("agent", "expected"), AGENTS)
def test_ags_gives_the_rewards_local_gives(
    agent: str,
    expected: float,
    local_rewards: dict[str, dict[str, float]],
    docker_emulator: AgsEmulator,
    sample_images: list[str],
    base_env: dict[str, str],
    tmp_path: Path,
) -> None:
    env = {**base_env, **docker_emulator.environment()}
    run_id = f"crosscheck-{agent}"
    args = ("--backend", "ags", "--agent", agent, "--run-id", run_id)
    rewards = _rewards(env, tmp_path / "report.json", *args)
    assert rewards == local_rewards[agent]
    assert len(rewards) == 10
    assert set(rewards.values()) == {expected}
    instances = _instances_of_run(docker_emulator, run_id)
    # One instance per sandbox the run started, no more: each task's, and a fresh grading
    # sandbox for the SWE-bench rows (--grade-in default).
    assert len(instances) == _sandboxes_started(tmp_path / "report.json") == 15
    assert {i["CustomConfiguration"]["Image"] for i in instances} == set(sample_images)
    assert {i["Status"] for i in instances} == {"STOPPED"}


@pytest.fixture(scope="module")
def synced_mapping(
    docker_emulator: AgsEmulator, base_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """``ags sync`` over the bundled dataset, through the command line."""
    out = tmp_path_factory.mktemp("sync") / "mapping.json"
    env = {**base_env, **docker_emulator.environment(), "AGS_ROLE_ARN": ROLE}
    done = _cli(env, "ags", "sync", "--dataset", "bundled", "--out", str(out), "-j", "3")
    assert done.returncode == 0, done.stderr
    assert "5 image(s): 0 reused, 5 created, 5 ACTIVE" in done.stdout
    return out


@pytest.mark.parametrize(("agent", "expected"), AGENTS)
def test_ags_with_tools_from_a_synced_mapping(
    agent: str,
    expected: float,
    local_rewards: dict[str, dict[str, float]],
    docker_emulator: AgsEmulator,
    synced_mapping: Path,
    sample_images: list[str],
    base_env: dict[str, str],
    tmp_path: Path,
) -> None:
    mapping = json.loads(synced_mapping.read_text())
    assert sorted(mapping) == sorted(sample_images)
    env = {**base_env, **docker_emulator.environment()}
    del env["AGS_TOOL_NAME"]  # only the mapping says which tool serves a task
    run_id = f"crosscheck-mapped-{agent}"
    docker_emulator.faults.clear()
    rewards = _rewards(
        env,
        tmp_path / "report.json",
        *("--backend", "ags", "--agent", agent, "--run-id", run_id),
        *("--backend-option", f"tool_mapping={synced_mapping}"),
    )
    assert rewards == local_rewards[agent]
    assert set(rewards.values()) == {expected}
    instances = _instances_of_run(docker_emulator, run_id)
    assert len(instances) == _sandboxes_started(tmp_path / "report.json") == 15
    assert {i["ToolName"] for i in instances} == {m["tool_name"] for m in mapping.values()}
    for instance in instances:
        tool = docker_emulator.store.tool(name=instance["ToolName"])
        assert instance["CustomConfiguration"]["Image"] == tool.custom["Image"]
        # The tool's own image ran: no per-instance override was sent.
        assert "Image" not in docker_emulator.store.instance(instance["InstanceId"]).custom
    # Ten rollouts, and not one tool lookup on the control plane.
    assert docker_emulator.faults.requests("cloud", "DescribeSandboxToolList") == []
