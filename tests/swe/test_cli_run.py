"""The main job end to end, through the installed command line, on local and docker."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from sandbox_runtime.swe.dataset import load_rows
from sandbox_runtime.swe.images import build_sample_image
from sandbox_runtime.swe.samples import sample_names
from tests.conftest import DOCKER_IMAGE, bwrap_problem, require


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["TMPDIR"] = str(tmp_path / "tmp")  # the local backend's sandboxes live under it
    env["SANDBOX_RUNTIME_CACHE"] = os.environ["SANDBOX_RUNTIME_CACHE"]
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return env


def _cli(tmp_path: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sandbox_runtime.cli", "run", *args],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _sandbox_dirs(tmp_path: Path) -> list[Path]:
    return list((tmp_path / "tmp").glob("sandbox-runtime-*/sbx-*"))


@pytest.fixture(scope="session")
def sample_images(docker_image: str) -> list[str]:
    """The samples' images, built once (reused while their sources are unchanged)."""
    return [build_sample_image(name, base=DOCKER_IMAGE) for name in sample_names()]


def _check_run(tmp_path: Path, backend: str, agent: str, expected: float, *options: str) -> None:
    report, traj = tmp_path / f"{agent}.json", tmp_path / f"{agent}.jsonl"
    done = _cli(
        tmp_path,
        "bundled",
        "--backend",
        backend,
        *options,
        "--agent",
        agent,
        "-j",
        "2",
        "--report",
        str(report),
        "--trajectories",
        str(traj),
        "--predictions",
        str(tmp_path / "predictions.jsonl"),
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(report.read_text())
    assert document["summary"]["tasks"] == 10 == len(load_rows("bundled"))
    assert document["summary"]["errors"] == 0
    assert {t["reward"] for t in document["tasks"]} == {expected}
    records = [json.loads(line) for line in traj.read_text().splitlines()]
    assert sorted(r["task_id"] for r in records) == sorted(t["task_id"] for t in document["tasks"])
    for record in records:
        assert record["reward"] == expected
        assert record["tests"]["output"]
        assert record["tests"]["status"]
        assert record["backend"] == backend
        assert record["agent"] == agent
        if agent == "oracle":
            assert record["patch"].startswith("diff --git")
            assert record["reason"] == "resolved"
            assert record["actions"][0]["action"] == "apply_patch"
        else:
            assert record["patch"] == ""
            assert record["reason"].startswith("tests failed: ")
    # The predictions as the swebench harness reads them (its own reader).
    predictions = _swebench_predictions(tmp_path / "predictions.jsonl")
    patches = {r["task_id"]: r["patch"] for r in records}
    assert {p["instance_id"]: p["model_patch"] for p in predictions} == patches
    assert {p["model_name_or_path"] for p in predictions} == {agent}
    assert "10 task(s)" in done.stdout
    assert "reward" in done.stdout.splitlines()[0]
    assert "[10/10]" in done.stderr  # progress, one line per task when not a terminal


def _swebench_predictions(path: Path) -> list[dict[str, Any]]:
    from swebench.harness.utils import get_predictions_from_file  # 3.0.2 and later

    found: list[dict[str, Any]] = get_predictions_from_file(str(path), "unused", "test")
    return found


@pytest.mark.slow
@pytest.mark.parametrize(("agent", "expected"), [("oracle", 1.0), ("null", 0.0)])
def test_bundled_tasks_on_local(tmp_path: Path, agent: str, expected: float) -> None:
    _check_run(tmp_path, "local", agent, expected)
    assert _sandbox_dirs(tmp_path) == []


@pytest.mark.slow
@pytest.mark.parametrize(("agent", "expected"), [("oracle", 1.0), ("null", 0.0)])
def test_bundled_tasks_on_local_namespaces(tmp_path: Path, agent: str, expected: float) -> None:
    """R2E-Gym's setup moves /r2e_tests to /root: one rename inside the sandbox's root."""
    require(bwrap_problem())
    options = ("--backend-option", "isolation=namespace")
    _check_run(tmp_path, "local", agent, expected, *options)
    assert _sandbox_dirs(tmp_path) == []


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize(("agent", "expected"), [("oracle", 1.0), ("null", 0.0)])
def test_bundled_tasks_on_docker(
    tmp_path: Path, sample_images: list[str], agent: str, expected: float
) -> None:
    _check_run(tmp_path, "docker", agent, expected)


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize(("agent", "expected"), [("oracle", 1.0), ("null", 0.0)])
def test_bundled_tasks_on_kubernetes(
    tmp_path: Path,
    sample_images: list[str],
    k8s_emulator: Any,
    monkeypatch: pytest.MonkeyPatch,
    agent: str,
    expected: float,
) -> None:
    """The same rewards with one pod per task, through the Kubernetes API emulator."""
    kubeconfig = k8s_emulator.write_kubeconfig(tmp_path / "kubeconfig")
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    _check_run(tmp_path, "kubernetes", agent, expected)
    from kubernetes import client, config

    api = client.CoreV1Api(config.new_client_from_config(str(kubeconfig)))  # type: ignore[no-untyped-call]
    selector = "sandbox-runtime.io/managed=true"
    assert api.list_namespaced_pod("default", label_selector=selector).items == []


def test_smoke_mode_writes_graph_planner_report(tmp_path: Path) -> None:
    entry = tmp_path / "r2e_ds.json"
    entry.write_text(json.dumps(load_rows("bundled:r2e")[0]))
    report = tmp_path / "smoke_report.json"
    done = _cli(
        tmp_path,
        "--backend",
        "local",
        "--ds-json",
        str(entry),
        "--max-steps",
        "6",
        "--report",
        str(report),
        "--quiet",
    )
    assert done.returncode == 0, done.stderr
    smoke = json.loads(report.read_text())
    assert set(smoke) >= {"reward", "done", "steps", "trajectory", "last_info", "tests", "patch"}
    assert smoke["reward"] == 1.0
    assert smoke["done"] is True
    assert smoke["steps"] == 1
    assert set(smoke["trajectory"][0]) == {"step", "phase", "action", "info"}
    assert smoke["tests"]["passed"] is True
    assert smoke["patch"].startswith("diff --git")


def test_bad_rows_are_skipped_and_named(tmp_path: Path) -> None:
    rows = load_rows("bundled:swebench")[:1]
    bad = {**rows[0], "instance_id": "broken-1", "FAIL_TO_PASS": "[oops"}
    source = tmp_path / "tasks.jsonl"
    source.write_text("\n".join(json.dumps(r) for r in [bad, *rows]) + "\n")
    done = _cli(
        tmp_path, str(source), "--agent", "null", "--quiet", "--report", str(tmp_path / "r.json")
    )
    assert done.returncode == 0, done.stderr
    assert f"row {source}:1 (instance_id=broken-1), field 'FAIL_TO_PASS': not valid JSON" in (
        done.stderr
    )
    document = json.loads((tmp_path / "r.json").read_text())
    assert document["summary"]["tasks"] == 1
    assert len(document["skipped_rows"]) == 1


def test_scripted_agent_from_a_script_file(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "*": [{"tool": "submit", "args": {}}],
                "pager__dfbfc9f5d176": [
                    {
                        "tool": "bash",
                        "args": {"command": "grep -n '// per_page + 1' pager/pages.py"},
                    },
                    {
                        "tool": "str_replace_editor",
                        "args": {
                            "command": "str_replace",
                            "path": "pager/pages.py",
                            "old_str": "total // per_page + 1",
                            "new_str": "-(-total // per_page)",
                        },
                    },
                    {"tool": "submit", "args": {}},
                ],
            }
        )
    )
    report = tmp_path / "r.json"
    done = _cli(
        tmp_path,
        "bundled:r2e",
        "--agent",
        "scripted",
        "--script",
        str(script),
        "--select",
        "pager__dfbfc9f5d176,csvline__c2144404831e",
        "--quiet",
        "--report",
        str(report),
    )
    assert done.returncode == 0, done.stderr
    rewards = {
        t["task_id"]: (t["reward"], t["steps"]) for t in json.loads(report.read_text())["tasks"]
    }
    assert rewards == {"pager__dfbfc9f5d176": (1.0, 3), "csvline__c2144404831e": (0.0, 1)}


def _interrupt(
    tmp_path: Path,
    backend: str,
    signum: int = signal.SIGINT,
    extra_env: dict[str, str] | None = None,
    group: int = 1,
) -> None:
    """Stop a run of sleeping agents with ``signum``; nothing of it may be left, unreaped."""
    script = tmp_path / "slow.json"
    script.write_text(json.dumps([{"tool": "bash", "args": {"command": "sleep 120"}}]))
    env = {**_env(tmp_path), **(extra_env or {})}
    run_id = f"ctrlc-{os.getpid()}-{backend}-{signum}"
    # With --group the task is prepared once and its rollouts start from a checkpoint image.
    select = ["--group", str(group), "--select", "pager__dfbfc9f5d176"] if group > 1 else []
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sandbox_runtime.cli",
            "run",
            "bundled:r2e",
            "--backend",
            backend,
            "--agent",
            "scripted",
            "--script",
            str(script),
            "-j",
            "2",
            *select,
            "--run-id",
            run_id,
            "--step-timeout",
            "200",
            "--quiet",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and _open(tmp_path, backend, run_id) < 2:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        assert _open(tmp_path, backend, run_id) == 2
        if group > 1:
            assert _checkpoints(proc.pid) >= 1
        time.sleep(1.0)  # both agents are inside their `sleep 120`
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted: closed every sandbox" in err
    assert _open(tmp_path, backend, run_id) == 0
    if backend == "docker":
        assert _checkpoints(proc.pid) == 0


def _open(tmp_path: Path, backend: str, run_id: str) -> int:
    if backend == "local":
        return len(_sandbox_dirs(tmp_path))
    import docker

    # One listing call: the high-level list() inspects each container afterwards and fails
    # when one is removed in between, which is exactly what this test makes happen.
    api = docker.APIClient(version="auto")
    try:
        return len(api.containers(all=True, filters={"label": f"sandbox-runtime.run-id={run_id}"}))
    finally:
        api.close()


def _checkpoints(owner_pid: int) -> int:
    """Docker checkpoint images whose owner is the process ``owner_pid`` (of this host)."""
    import docker

    from sandbox_runtime._core.ownership import OWNER_HOST, OWNER_PID, current_owner

    api = docker.APIClient(version="auto")
    try:
        images = api.images(filters={"label": "sandbox-runtime.checkpoint=true"})
    finally:
        api.close()
    host = current_owner().host
    return sum(
        1
        for image in images
        if (image.get("Labels") or {}).get(OWNER_PID) == str(owner_pid)
        and (image.get("Labels") or {}).get(OWNER_HOST) == host
    )


@pytest.mark.slow
def test_ctrl_c_closes_every_local_sandbox(tmp_path: Path) -> None:
    _interrupt(tmp_path, "local")
    out = subprocess.run(["pgrep", "-f", "sleep 120"], capture_output=True, text=True, check=False)
    assert str(tmp_path) not in out.stdout


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stopped_run_leaves_no_container_and_no_checkpoint(
    tmp_path: Path, sample_images: list[str], signum: int
) -> None:
    """Ctrl-C, or a scheduler's SIGTERM, mid-run: no container, no checkpoint image, no reap."""
    _interrupt(tmp_path, "docker", signum, group=2)


def test_llm_agent_through_the_command_line(tmp_path: Path) -> None:
    """``run --agent llm``: flags reach the agent, the key only through the environment."""
    from tests.swe.fake_chat import FakeChat, tool_reply

    secret = "sk-cli-test-never-printed-0987654321"
    fix = {
        "command": "str_replace",
        "path": "csvline/core.py",
        "old_str": '    if field:\n        fields.append("".join(field))',
        "new_str": '    fields.append("".join(field))',
    }
    replies = [
        tool_reply([("bash", {"command": "grep -n 'if field' csvline/core.py"})]),
        tool_reply([("str_replace_editor", fix), ("submit", {})]),
    ]
    report, traj = tmp_path / "llm.json", tmp_path / "llm.jsonl"
    env = _env(tmp_path) | {"CLI_TEST_KEY": secret}
    with FakeChat(replies) as chat:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "sandbox_runtime.cli",
                "run",
                "bundled",
                "--select",
                "sandbox-runtime-samples__csvline-1",
                "--agent",
                "llm",
                "--base-url",
                chat.url,
                "--model",
                "scripted-model",
                "--api-key-env",
                "CLI_TEST_KEY",
                "--max-steps",
                "5",
                "--report",
                str(report),
                "--trajectories",
                str(traj),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    [task] = json.loads(report.read_text())["tasks"]
    assert (task["task_id"], task["reward"]) == ("sandbox-runtime-samples__csvline-1", 1.0)
    [record] = [json.loads(line) for line in traj.read_text().splitlines()]
    assert [a["action"] for a in record["actions"]] == ["bash", "str_replace_editor", "submit"]
    assert (record["steps"], record["usage"]["total_tokens"]) == (3, 30)
    assert "-    if field:" in record["patch"]
    assert [r["model"] for r in chat.requests] == ["scripted-model"] * 2
    assert chat.auth == [f"Bearer {secret}"] * 2
    for text in (done.stdout, done.stderr, report.read_text(), traj.read_text()):
        assert secret not in text


def test_llm_agent_needs_an_endpoint_and_a_model(tmp_path: Path) -> None:
    done = _cli(tmp_path, "bundled", "--agent", "llm", "--model", "m")
    assert done.returncode != 0
    assert "the llm agent needs --base-url and --model" in done.stderr


@pytest.mark.docker
@pytest.mark.slow
def test_a_sigtermed_tasks_check_leaves_no_container(
    tmp_path: Path, sample_images: list[str]
) -> None:
    """Every subcommand, not only ``run``: SIGTERM mid-check closes its grading sandboxes."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "sandbox_runtime.cli", "tasks", "check", "bundled:r2e", "-j", "2"],
        env=_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and _owned_containers(proc.pid) < 2:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        assert _owned_containers(proc.pid) >= 1
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert _owned_containers(proc.pid) == 0


def _owned_containers(owner_pid: int) -> int:
    """Docker containers whose owner labels name the process ``owner_pid`` of this host."""
    import docker

    from sandbox_runtime._core.ownership import OWNER_HOST, OWNER_PID, current_owner

    api = docker.APIClient(version="auto")
    try:
        found = api.containers(all=True, filters={"label": f"{OWNER_PID}={owner_pid}"})
    finally:
        api.close()
    return sum(1 for c in found if (c.get("Labels") or {}).get(OWNER_HOST) == current_owner().host)
