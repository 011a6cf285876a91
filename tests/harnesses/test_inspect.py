"""Inspect's own ``inspect eval`` of a bundled SWE task in ``sandbox-runtime`` sandboxes.

The gold solver applies the task's patch through the sandbox environment's ``exec`` and scores
1 by this library's grader; the null solver changes nothing and scores 0.  No model is called
(``mockllm/model``).  Backends: ``local``, ``docker``, and ``ags`` and ``kubernetes`` pointed at
this project's emulators.  Afterwards no sandbox of the run is left (task cleanup removes what
carries the run's label).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from sandbox_runtime import list_sandboxes
from tests.harnesses._killed import kill_when_open_then_reap

TASKS = Path(__file__).with_name("inspect_swe_tasks.py")
INSPECT = Path(sys.executable).with_name("inspect")


@pytest.fixture(params=["local", "docker"])
def backend_and_image(request: pytest.FixtureRequest) -> tuple[str, str]:
    if request.param == "docker":
        return "docker", request.getfixturevalue("docker_image")
    return "local", ""


def _eval(
    tmp_path: Path,
    backend: str,
    image: str,
    label: str,
    env: Mapping[str, str] | None = None,
) -> dict[str, float]:
    """The score of each of the gold and null tasks, run by one ``inspect eval`` (two tasks).

    One process for both: Inspect's start costs ~15 s on a loaded machine.
    """
    from inspect_ai.log import read_eval_log

    logs = tmp_path / "logs"
    command = [str(INSPECT), "eval", f"{TASKS}@swe_gold", f"{TASKS}@swe_null", "--max-tasks", "2"]
    command += ["--model", "mockllm/model", "--log-dir", str(logs)]
    command += ["-T", f"backend={backend}", "-T", f"label={label}"]
    if image:
        command += ["-T", f"base_image={image}"]
    done = subprocess.run(
        [*command, "--display", "plain", "--log-format", "json"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    scores: dict[str, float] = {}
    for log_file in logs.glob("*.json"):
        log = read_eval_log(str(log_file))
        assert log.status == "success", log.error
        (sample,) = log.samples or []
        assert sample.error is None, sample.error
        assert sample.scores is not None
        (score,) = sample.scores.values()
        assert isinstance(score.value, (int, float)), score.value
        scores[log.eval.task] = float(score.value)
    return scores


GOLD_1_NULL_0 = {"swe_gold": 1.0, "swe_null": 0.0}


@pytest.mark.slow
def test_inspect_eval_gold_is_1_and_null_is_0_and_nothing_is_left(
    tmp_path: Path, backend_and_image: tuple[str, str]
) -> None:
    backend, image = backend_and_image
    label = uuid.uuid4().hex[:12]
    assert _eval(tmp_path, backend, image, label) == GOLD_1_NULL_0
    assert list_sandboxes(backend, labels={"test-run": label}) == []


@pytest.mark.slow
def test_inspect_eval_on_the_ags_emulator(tmp_path: Path, ags_task_emulator: Any) -> None:
    """Unmodified ``inspect eval`` with ``backend=ags``, pointed at the AGS emulator."""
    label = uuid.uuid4().hex[:12]
    env = ags_task_emulator.environment()
    assert _eval(tmp_path, "ags", "", label, env) == GOLD_1_NULL_0
    options = ags_task_emulator.backend_options()
    assert list_sandboxes("ags", labels={"test-run": label}, options=options) == []


@pytest.mark.slow
def test_inspect_eval_on_the_kubernetes_emulator(
    tmp_path: Path, k8s_emulator: Any, docker_image: str
) -> None:
    """Unmodified ``inspect eval`` with ``backend=kubernetes``, through a kubeconfig.

    The emulator's pods are containers of the local engine, so the task's sample image is
    built there (``base_image``), as on ``docker``; a real cluster's nodes would pull it.
    """
    label = uuid.uuid4().hex[:12]
    kubeconfig = k8s_emulator.write_kubeconfig(tmp_path / "kubeconfig")
    env = {"KUBECONFIG": str(kubeconfig)}
    assert _eval(tmp_path, "kubernetes", docker_image, label, env) == GOLD_1_NULL_0
    options = k8s_emulator.backend_options()
    assert list_sandboxes("kubernetes", labels={"test-run": label}, options=options) == []


def test_inspect_finds_the_sandbox_by_name_through_the_entry_point() -> None:
    code = (
        "from inspect_ai.util._sandbox.registry import registry_find_sandboxenv;"
        "print(registry_find_sandboxenv('sandbox-runtime').__module__)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "sandbox_runtime.integrations.inspect._environment"


@pytest.mark.slow
def test_a_killed_inspect_eval_leaves_a_sandbox_that_reap_removes(tmp_path: Path) -> None:
    base_dir = tmp_path / "sandboxes"  # this test's own local sandboxes: reap sees only these
    label = uuid.uuid4().hex[:12]
    command = [str(INSPECT), "eval", f"{TASKS}@swe_waiting", "--model", "mockllm/model"]
    command += ["-T", f"label={label}", "-T", f"base_dir={base_dir}"]
    command += ["--log-dir", str(tmp_path / "logs"), "--display", "none"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kill_when_open_then_reap(process, label, base_dir, "inspect")


def test_the_config_round_trips_hides_credentials_and_names_a_bad_field(tmp_path: Path) -> None:
    from sandbox_runtime.errors import ConfigError
    from sandbox_runtime.integrations.inspect import (
        SandboxRuntimeConfig,
        SandboxRuntimeSandboxEnvironment,
    )

    config = SandboxRuntimeConfig(backend="ags", backend_options={"api_key": "s3cret"})
    assert "s3cret" not in config.model_dump_json()
    assert SandboxRuntimeSandboxEnvironment.config_deserialize(config.model_dump()) == config
    assert hash(config) == hash(SandboxRuntimeConfig.model_validate(config.model_dump()))
    bad = tmp_path / "sandbox.yaml"
    bad.write_text("backend: local\nworkdri: /x\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"sandbox.yaml: workdri: Extra inputs"):
        SandboxRuntimeSandboxEnvironment.config_deserialize(str(bad))  # type: ignore[arg-type]
