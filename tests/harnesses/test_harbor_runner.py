"""Harbor's own runner, unmodified: ``harbor run`` of a Harbor task on this library's environment.

The task (``harbor_task/hello``) is graded by Harbor's verifier: its oracle agent runs the
task's solution (reward 1), its nop agent does nothing (reward 0).  Backends: ``local``,
``docker`` and ``ags`` pointed at the AGS emulator (Harbor uses files and exec only).  Harbor
needs Python 3.12+, so this file runs where Harbor imports: CI runs it in a Debian 13 chroot
with Harbor's current release (``scripts/harbor-e2e.sh``); elsewhere it is not collected.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox_runtime import list_sandboxes

pytestmark = pytest.mark.slow

TASK = Path(__file__).parent / "harbor_task" / "hello"
ENVIRONMENT = "sandbox_runtime.integrations.harbor:SandboxRuntimeEnvironment"


@pytest.fixture(params=["local", "docker", "ags"])
def backend(request: pytest.FixtureRequest, docker_image: str) -> Iterator[tuple[str, Any]]:
    """The backend's name, and the AGS emulator where the backend is ``ags``."""
    if request.param != "ags":
        yield request.param, None
        return
    from sandbox_runtime_emulators.ags.server import AgsEmulator

    # Instances are containers of the instance's image (the task's docker_image).
    with AgsEmulator(backend="docker", default_image=docker_image) as emulator:
        yield "ags", emulator


def _task(tmp_path: Path, image: str) -> Path:
    """The hello task with the test image as its ``docker_image``."""
    task = tmp_path / "hello"
    shutil.copytree(TASK, task)
    toml = task / "task.toml"
    toml.write_text(toml.read_text().replace("sandbox-runtime-test/base:bookworm", image))
    (task / "environment" / "Dockerfile").write_text(f"FROM {image}\n")
    return task


def _harbor_run(
    task: Path, agent: str, backend: str, label: str, jobs: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """``harbor run`` as a user types it, with this library's environment by import path."""
    labels = json.dumps({"test-run": label})
    command = ["harbor", "run", "-q", "-y", "-p", str(task), "-a", agent, "-e", ENVIRONMENT]
    command += ["--ek", f"backend={backend}", "--ek", f"labels={labels}", "-o", str(jobs)]
    return subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def _rewards(jobs: Path) -> list[Any]:
    """Each trial's verifier rewards (``None`` for a trial that ended in an exception)."""
    trials = [json.loads(path.read_text()) for path in sorted(jobs.glob("*/*/result.json"))]
    return [(trial.get("verifier_result") or {}).get("rewards") for trial in trials]


@pytest.mark.parametrize(("agent", "reward"), [("oracle", 1.0), ("nop", 0.0)])
def test_harbor_run_grades_the_task_on_this_librarys_environment(
    tmp_path: Path, docker_image: str, backend: tuple[str, Any], agent: str, reward: float
) -> None:
    name, emulator = backend
    label = uuid.uuid4().hex[:12]
    env = {**os.environ, **(emulator.environment() if emulator is not None else {})}
    jobs = tmp_path / "jobs"
    ran = _harbor_run(_task(tmp_path, docker_image), agent, name, label, jobs, env)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert _rewards(jobs) == [{"reward": reward}], ran.stdout[-3000:]
    options = emulator.backend_options() if emulator is not None else None
    assert list_sandboxes(name, labels={"test-run": label}, options=options) == []
