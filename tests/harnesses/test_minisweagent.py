"""mini-swe-agent's own CLI (``mini``) and loop on a bundled task, through our environment.

Backends: ``local``, ``docker`` and ``ags`` pointed at the AGS emulator.

The model is mini-swe-agent's ``DeterministicModel`` (its test double: replies given in the
config), so no model API is needed; the environment is
``sandbox_runtime.integrations.minisweagent.SandboxRuntimeEnvironment`` chosen by dotted path in
the YAML config, as a user of mini-swe-agent chooses any environment.  The submission (the
diff the agent printed after the marker) is graded by this library's grader in a fresh sandbox:
the gold patch gives 1, no change gives 0.  Nothing of the run is left afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped,unused-ignore]

from sandbox_runtime import SandboxGoneError, SandboxRuntime, list_sandboxes
from sandbox_runtime.integrations._harness_tasks import load_task
from sandbox_runtime.integrations.minisweagent import SandboxRuntimeEnvironment, grade_trajectory
from tests.harnesses._killed import kill_when_open_then_reap

TASK_SOURCE = "bundled:r2e"
TASK_ID = "csvline__c2144404831e"
MINI = Path(sys.executable).with_name("mini")
MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


def _reply(command: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": f"```bash\n{command}\n```",
        "extra": {"actions": [{"command": command}], "cost": 0.0},
    }


def _gold_replies(gold: str) -> list[dict[str, Any]]:
    apply = f"git apply <<'SANDBOX_RUNTIME_EOF'\n{gold.rstrip(chr(10))}\nSANDBOX_RUNTIME_EOF"
    return [_reply(apply), _reply("git status --short"), _reply(f"echo {MARKER} && git diff")]


def _local_env() -> dict[str, str]:
    # local sandboxes run the host's python: make it this venv's, which has pytest.
    return {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


def _environment(backend: str, label: str, base_image: str | None) -> dict[str, Any]:
    env: dict[str, Any] = {
        "environment_class": "sandbox_runtime.integrations.minisweagent.SandboxRuntimeEnvironment",
        "backend": backend,
        "task_source": TASK_SOURCE,
        "task_id": TASK_ID,
        # bash -c, not mini's default login shell: Debian's /etc/profile resets PATH.
        "interpreter": ["bash", "-c"],
        "timeout": 120,
        "labels": {"test-run": label},
    }
    if backend == "local":
        env["env"] = _local_env()
    if base_image:
        env["base_image"] = base_image
    return env


def _run_mini(
    tmp_path: Path, replies: list[dict[str, Any]], environment: dict[str, Any]
) -> tuple[dict[str, Any], Path]:
    config = {
        "model": {
            "model_class": "deterministic",
            "model_name": "deterministic",
            "cost_per_call": 0.0,
            "outputs": replies,
        },
        "environment": environment,
    }
    config_file = tmp_path / "sandbox-runtime.yaml"
    config_file.write_text(yaml.safe_dump(config), encoding="utf-8")
    trajectory = tmp_path / "run.traj.json"
    env = {
        **os.environ,
        "MSWEA_CONFIGURED": "true",
        "MSWEA_SILENT_STARTUP": "1",
        "MSWEA_GLOBAL_CONFIG_DIR": str(tmp_path / "mswea"),
    }
    # mini's own command line: its default config, ours on top, no prompts.
    command = [str(MINI), "-c", "mini.yaml", "-c", str(config_file), "-y", "--exit-immediately"]
    command += ["-t", load_task(TASK_SOURCE, TASK_ID).problem_statement, "-o", str(trajectory)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    data: dict[str, Any] = json.loads(trajectory.read_text(encoding="utf-8"))
    return data, trajectory


def _grade(backend: str, trajectory: Path) -> float | None:
    # this library's grader, from the trajectory mini wrote (it names the task and backend)
    env = _local_env() if backend == "local" else None
    return grade_trajectory(trajectory, env=env, timeout=300).reward


@pytest.fixture(params=["local", "docker", "ags"])
def backend_and_image(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, str | None]:
    if request.param == "docker":
        return "docker", request.getfixturevalue("docker_image")
    if request.param == "ags":
        # the AGS emulator (instances: containers of the task's image), found as a user's
        # exported variables find AGS: by mini's process and by the grader in this one
        emulator = request.getfixturevalue("ags_task_emulator")
        for name, value in emulator.environment().items():
            monkeypatch.setenv(name, value)
        return "ags", None
    return "local", None


@pytest.mark.slow
def test_mini_cli_gold_is_1_and_null_is_0_and_nothing_is_left(
    tmp_path: Path, backend_and_image: tuple[str, str | None]
) -> None:
    backend, base_image = backend_and_image
    label = uuid.uuid4().hex[:12]
    gold = load_task(TASK_SOURCE, TASK_ID).gold_patch

    (tmp_path / "gold").mkdir()
    ran, trajectory = _run_mini(
        tmp_path / "gold", _gold_replies(gold), _environment(backend, label, base_image)
    )
    info = ran["info"]
    assert info["exit_status"] == "Submitted"
    assert "+++ b/" in info["submission"]
    assert info["config"]["environment_type"].endswith("SandboxRuntimeEnvironment")
    # the observations came from the sandbox: git status saw the agent's change
    assert any("M " in str(m.get("content")) for m in ran["messages"] if m["role"] == "user")
    assert _grade(backend, trajectory) == 1.0

    (tmp_path / "null").mkdir()
    null, null_trajectory = _run_mini(
        tmp_path / "null",
        [_reply(f"echo {MARKER} && git diff")],
        _environment(backend, label, base_image),
    )
    assert null["info"]["exit_status"] == "Submitted"
    assert null["info"]["submission"].strip() == ""
    assert _grade(backend, null_trajectory) == 0.0

    assert list_sandboxes(backend, labels={"test-run": label}) == []


def test_the_protocol_in_process(tmp_path: Path) -> None:
    """execute's cwd, timeout, merged streams, submission and the template variables."""
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.exceptions import Submitted
    from minisweagent.models.test_models import DeterministicModel

    label = uuid.uuid4().hex[:12]
    with SandboxRuntimeEnvironment(
        backend="local",
        interpreter=["bash", "-c"],
        labels={"test-run": label},
        env={"X": "1", "API_TOKEN": "s3cret"},
    ) as env:
        out = env.execute({"command": "echo out; echo err >&2; echo $X; pwd"}, cwd="/")
        assert out["returncode"] == 0
        assert out["output"].splitlines()[:3] == ["out", "err", "1"]
        slow = env.execute({"command": "sleep 30; echo late"}, timeout=1)
        assert slow["returncode"] == -1
        assert "timed out" in slow["exception_info"]
        assert "late" not in slow["output"]
        with pytest.raises(Submitted) as submitted:
            env.execute({"command": f"echo {MARKER}; echo the answer"})
        assert submitted.value.messages[0]["extra"]["submission"] == "the answer\n"
        variables = env.get_template_vars(extra=1)
        assert variables["system"] == "Linux"
        assert variables["extra"] == 1
        assert variables["backend"] == "local"
        # the token reaches commands, never prompts or trajectory files
        assert env.execute({"command": "echo $API_TOKEN"})["output"] == "s3cret\n"
        assert "s3cret" not in json.dumps(variables) + json.dumps(env.serialize())

        # mini-swe-agent's own loop, in process
        model = DeterministicModel(  # type: ignore[no-untyped-call,unused-ignore]
            outputs=[_reply("echo hi > note.txt"), _reply(f"echo {MARKER} && cat note.txt")],
            cost_per_call=0.0,
        )
        agent = DefaultAgent(model, env, system_template="sys", instance_template="{{task}}")
        result = agent.run("write a note")
        assert result["exit_status"] == "Submitted"
        assert result["submission"] == "hi\n"
    assert list_sandboxes("local", labels={"test-run": label}) == []


@pytest.mark.slow
def test_a_killed_mini_leaves_a_sandbox_that_reap_removes(tmp_path: Path) -> None:
    base_dir = tmp_path / "sandboxes"  # this test's own local sandboxes: reap sees only these
    label = uuid.uuid4().hex[:12]
    config = {
        "model": {
            "model_class": "deterministic",
            "model_name": "deterministic",
            "cost_per_call": 0.0,
            "outputs": [_reply("sleep 600")],
        },
        "environment": {
            "environment_class": (
                "sandbox_runtime.integrations.minisweagent.SandboxRuntimeEnvironment"
            ),
            "backend": "local",
            "backend_options": {"base_dir": str(base_dir)},
            "interpreter": ["bash", "-c"],
            "timeout": 600,
            "labels": {"test-run": label},
        },
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    env = {**os.environ, "MSWEA_CONFIGURED": "true", "MSWEA_SILENT_STARTUP": "1"}
    env["MSWEA_GLOBAL_CONFIG_DIR"] = str(tmp_path / "mswea")
    command = [str(MINI), "-c", "mini.yaml", "-c", str(tmp_path / "c.yaml"), "-y"]
    process = subprocess.Popen(
        [*command, "--exit-immediately", "-t", "wait", "-o", str(tmp_path / "t.json")],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    sandbox_id = kill_when_open_then_reap(process, label, base_dir, "mini-swe-agent")
    options = {"base_dir": str(base_dir)}
    with pytest.raises(SandboxGoneError):
        SandboxRuntime.connect("local", sandbox_id, options=options).exec("true")


def test_a_bad_key_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="bakend"):
        SandboxRuntimeEnvironment(bakend="local")
