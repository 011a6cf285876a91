"""Rewards under faults: the bundled tasks on the AGS emulator with random faults injected.

Acceptance of "rewards that never lie": with faults a careful client recovers from, every task
is graded as in a fault-free run; with destructive faults too (lost answers, killed
instances), every task is graded as in a fault-free run or reported as an error with no
reward, never a wrong 0 or 1; no instance is left running and none is made twice.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from sandbox_runtime.swe import Task, read_rows
from sandbox_runtime.swe.agents import make_agent
from sandbox_runtime.swe.dataset import load_rows
from sandbox_runtime.swe.images import build_sample_image
from sandbox_runtime.swe.report import TaskOutcome
from sandbox_runtime.swe.runner import Runner, RunOptions
from sandbox_runtime.swe.samples import sample_names
from sandbox_runtime_emulators.ags._faults import RANDOM_KINDS, parse_fault_spec
from sandbox_runtime_emulators.ags.server import AgsEmulator
from tests.conftest import DOCKER_IMAGE

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ALL_KINDS = ",".join(RANDOM_KINDS)
CLOUD_KINDS = ",".join(k for k in RANDOM_KINDS if k != "kill_instance")


@pytest.fixture(scope="module")
def bundled_tasks() -> list[Task]:
    return read_rows(load_rows("bundled")).tasks


@pytest.fixture(scope="module")
def sample_images(docker_image: str) -> list[str]:
    return [build_sample_image(name, base=DOCKER_IMAGE) for name in sample_names()]


def _run(
    tasks: list[Task], agent: str, faults: list[str], seed: int, sample_images: list[str]
) -> tuple[list[TaskOutcome], AgsEmulator]:
    specs = [parse_fault_spec(text) for text in faults]
    with AgsEmulator(
        backend="docker", default_image=DOCKER_IMAGE, faults=specs, fault_seed=seed
    ) as emulator:
        options = RunOptions(backend="ags", jobs=4, backend_options=emulator.backend_options())
        outcomes = Runner(tasks, lambda: make_agent(agent), options, agent_name=agent).run()
        return outcomes, emulator


def _rewards(outcomes: list[TaskOutcome]) -> dict[str, float | None]:
    return {outcome.task_id: outcome.reward for outcome in outcomes}


def _no_leak_no_duplicate(
    emulator: AgsEmulator, outcomes: list[TaskOutcome], *, every_start_succeeds: bool = True
) -> None:
    with emulator.store.lock:
        instances = list(emulator.store.instances.values())
    assert [i.instance_id for i in instances if i.status in ("STARTING", "RUNNING")] == []
    # One instance per sandbox start (the task's, and a fresh grading one for SWE-bench
    # rows), as the runs' own accounting counts them: no start made two.
    started = sum(outcome.accounting.sandboxes for outcome in outcomes)
    if every_start_succeeds:
        assert len(instances) == started
    else:  # a start that failed for good may have made no instance
        assert len(instances) <= started


@pytest.fixture(scope="module")
def fault_free(
    bundled_tasks: list[Task], sample_images: list[str]
) -> dict[str, dict[str, float | None]]:
    return {
        agent: _rewards(_run(bundled_tasks, agent, [], 0, sample_images)[0])
        for agent in ("oracle", "null")
    }


def test_the_fault_free_runs_grade_every_task(
    fault_free: dict[str, dict[str, float | None]],
) -> None:
    assert set(fault_free["oracle"].values()) == {1.0}
    assert set(fault_free["null"].values()) == {0.0}
    assert len(fault_free["oracle"]) == 10


# One seed: the recoverable-faults test below runs 20% envd and cloud faults on another.
@pytest.mark.parametrize("seed", [1])
def test_five_percent_envd_faults_change_nothing(
    bundled_tasks: list[Task],
    sample_images: list[str],
    fault_free: dict[str, dict[str, float | None]],
    seed: int,
) -> None:
    outcomes, emulator = _run(bundled_tasks, "oracle", ["envd:0.05"], seed, sample_images)
    assert _rewards(outcomes) == fault_free["oracle"]
    assert sum(1 for r in emulator.faults.requests() if r.fault) > 0
    # The accounting saw the envd client's retries, in the sandboxes that made them.
    assert sum(sum(o.accounting.retries.values()) for o in outcomes) > 0
    _no_leak_no_duplicate(emulator, outcomes)


@pytest.mark.parametrize("agent", ["oracle", "null"])
def test_twenty_percent_on_every_plane_never_gives_a_wrong_reward(
    bundled_tasks: list[Task],
    sample_images: list[str],
    fault_free: dict[str, dict[str, float | None]],
    agent: str,
) -> None:
    faults = [f"envd:0.2:{ALL_KINDS}", f"cloud:0.2:{CLOUD_KINDS}"]
    outcomes, emulator = _run(bundled_tasks, agent, faults, 3, sample_images)
    for outcome in outcomes:
        if outcome.reward is None:
            assert outcome.outcome == "error"
            assert outcome.error
        else:  # graded: exactly as without faults
            assert outcome.reward == fault_free[agent][outcome.task_id], outcome.reason
    assert sum(1 for r in emulator.faults.requests() if r.fault) >= 10
    _no_leak_no_duplicate(emulator, outcomes, every_start_succeeds=False)


def test_recoverable_faults_on_every_plane_change_nothing(
    bundled_tasks: list[Task],
    sample_images: list[str],
    fault_free: dict[str, dict[str, float | None]],
) -> None:
    outcomes, emulator = _run(bundled_tasks, "oracle", ["envd:0.2", "cloud:0.2"], 4, sample_images)
    assert _rewards(outcomes) == fault_free["oracle"]
    _no_leak_no_duplicate(emulator, outcomes)


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("envd:2", "rate must be between 0 and 1"),
        ("disk:0.1", "plane must be one of"),
        ("envd:0.1:explode", "kinds must be among"),
    ],
)
def test_the_emulator_refuses_a_bad_fault_flag(spec: str, fragment: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "sandbox_runtime.cli", "ags", "emulator", "--fault", spec],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert fragment in done.stderr
