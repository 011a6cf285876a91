"""The bundled tasks on the Kubernetes emulator with random API and exec faults.

Recoverable faults (429 with Retry-After, 503, dropped requests, slow answers) change no
reward; with lost answers and killed pods too, a task is graded as without faults or reported
as an error with no reward, and no pod is left.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from sandbox_runtime.swe import Task, read_rows
from sandbox_runtime.swe.agents import make_agent
from sandbox_runtime.swe.dataset import load_rows
from sandbox_runtime.swe.images import build_sample_image
from sandbox_runtime.swe.report import TaskOutcome
from sandbox_runtime.swe.runner import Runner, RunOptions
from sandbox_runtime.swe.samples import sample_names
from tests.conftest import DOCKER_IMAGE

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def tasks(docker_image: str) -> list[Task]:
    for name in sample_names():
        build_sample_image(name, base=DOCKER_IMAGE)
    return read_rows(load_rows("bundled")).tasks


def _run(tasks: list[Task], faults: list[str], seed: int) -> tuple[list[TaskOutcome], int, int]:
    from tests.conftest import kubernetes_problem, require

    require(kubernetes_problem())
    from sandbox_runtime_emulators.kubernetes._http import parse_fault_spec
    from sandbox_runtime_emulators.kubernetes.server import KubernetesEmulator

    specs = [parse_fault_spec(text) for text in faults]
    with KubernetesEmulator(faults=specs, fault_seed=seed) as emulator:
        options = RunOptions(
            backend="kubernetes", jobs=3, backend_options=emulator.backend_options()
        )
        outcomes = Runner(tasks, lambda: make_agent("oracle"), options).run()
        store: Any = emulator.store
        return outcomes, len(store.list_pods(None)), seed


def test_recoverable_api_and_exec_faults_change_no_reward(tasks: list[Task]) -> None:
    outcomes, pods_left, _seed = _run(tasks, ["api:0.15", "exec:0.15"], 11)
    assert {o.task_id: o.reward for o in outcomes} == {t.task_id: 1.0 for t in tasks}
    assert pods_left == 0


def test_lost_answers_and_killed_pods_give_errors_never_wrong_rewards(tasks: list[Task]) -> None:
    faults = [
        "api:0.2:rate_limit,unavailable,drop,slow,drop_answer",
        "exec:0.2:rate_limit,unavailable,drop,slow,drop_answer,kill_pod",
    ]
    outcomes, pods_left, _seed = _run(tasks, faults, 3)
    for outcome in outcomes:
        assert outcome.reward in (1.0, None), outcome.reason
        if outcome.reward is None:
            assert outcome.error
    assert pods_left == 0


def test_a_bad_fault_flag_is_refused() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sandbox_runtime.cli",
            "kubernetes",
            "emulator",
            "--fault",
            "api:0.1:meteor",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "kinds must be among" in done.stderr
