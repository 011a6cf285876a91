"""A correct agent that uses absolute paths in its shell commands, on ``local`` (issue 29).

The agent writes the gold patch to ``/tmp`` and applies it with ``cd /testbed && git apply``,
as a model told "the repository is at /testbed" does, and leaves a file in ``/tmp``.  With
every tool set (the runner's tool box, :class:`SWEEnv` with this library's R2E-style tools and
with R2E-Gym's scripts, :class:`R2EGymRuntime`) it gets 1 on ``isolation="namespace"``, where
its ``/tmp`` is the sandbox's and nothing lands in the host's; on ``isolation="none"``, whose
commands see the host's ``/``, every tool set refuses at start with the remedy, never a 0.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox_runtime import ToolUnavailableError
from sandbox_runtime.integrations.r2egym import R2EGymRuntime
from sandbox_runtime.integrations.rllm import SWEEnv
from sandbox_runtime.swe import Task
from sandbox_runtime.swe.agents import ScriptedAgent
from sandbox_runtime.swe.runner import Runner, RunOptions
from tests.conftest import bwrap_problem, require
from tests.integrations.gold_play import r2e_text, write_standin_r2egym
from tests.swe.conftest import task_named

_REMEDY = "use the backend option isolation=namespace"


@pytest.fixture(params=["none", "namespace"])
def isolation(request: pytest.FixtureRequest) -> str:
    if request.param == "namespace":
        require(bwrap_problem())
    value: str = request.param
    return value


@pytest.fixture
def mark() -> Iterator[Path]:
    """A unique path in ``/tmp`` the agent writes; it must never appear on the host."""
    path = Path(f"/tmp/sandbox-runtime-agent-mark-{uuid.uuid4().hex}")
    yield path
    path.unlink(missing_ok=True)


@pytest.fixture
def standin_r2egym(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    site = tmp_path / "site"
    write_standin_r2egym(site)
    monkeypatch.syspath_prepend(str(site))
    yield
    for name in [m for m in sys.modules if m == "r2egym" or m.startswith("r2egym.")]:
        del sys.modules[name]


def _commands(task: Task, mark: Path) -> list[str]:
    """The gold patch applied with absolute paths, and a mark left in ``/tmp``."""
    patch = f"/tmp/fix-{uuid.uuid4().hex[:8]}.patch"
    return [
        f"cat > {patch} <<'EOF_GOLD'\n{task.gold_patch}EOF_GOLD",
        f"cd {task.workdir} && git apply {patch} && echo applied > {mark} && cat {mark}",
    ]


def _options(isolation: str, tmp_path: Path) -> dict[str, Any]:
    return {"isolation": isolation, "base_dir": str(tmp_path / "sandboxes")}


def _no_sandbox_left(tmp_path: Path) -> None:
    assert list((tmp_path / "sandboxes").glob("sbx-*")) == []


def test_the_runners_tool_box(
    isolation: str, bundled_tasks: list[Task], mark: Path, tmp_path: Path
) -> None:
    task = task_named(bundled_tasks, "csvline", "r2e")
    script = [{"tool": "bash", "args": {"command": c}} for c in _commands(task, mark)]
    script.append({"tool": "submit"})
    run = RunOptions(backend="local", backend_options=_options(isolation, tmp_path))
    [outcome] = Runner([task], lambda: ScriptedAgent(script), run).run()
    if isolation == "none":
        assert outcome.reward is None
        assert outcome.error is not None
        assert "ToolUnavailableError" in outcome.error
        assert _REMEDY in outcome.error
        assert outcome.steps == []  # refused before the first step
    else:
        assert (outcome.reward, outcome.error) == (1.0, None)
        assert "applied" in outcome.steps[1].output
    assert not mark.exists()
    _no_sandbox_left(tmp_path)


@pytest.mark.parametrize("tools", ["builtin", "r2egym"])
def test_swe_env(
    isolation: str,
    tools: str,
    bundled_tasks: list[Task],
    standin_r2egym: None,
    mark: Path,
    tmp_path: Path,
) -> None:
    task = task_named(bundled_tasks, "csvline", "r2e")
    env = SWEEnv(
        task,
        backend="local",
        backend_options=_options(isolation, tmp_path),
        tools=tools,  # type: ignore[arg-type]
    )
    with env:
        if isolation == "none":
            with pytest.raises(ToolUnavailableError, match=_REMEDY):
                env.reset()
            assert env.sandbox is None
        else:
            env.reset()
            for command in _commands(task, mark):
                observation, *_ = env.step(r2e_text("execute_bash", cmd=command))
            assert "applied" in observation, observation
            env.step(r2e_text("finish", command="submit"))
            assert env.compute_final_reward() == 1.0
    assert not mark.exists()
    _no_sandbox_left(tmp_path)


def test_r2e_gym_runtime(
    isolation: str, bundled_tasks: list[Task], standin_r2egym: None, mark: Path, tmp_path: Path
) -> None:
    task = task_named(bundled_tasks, "csvline", "r2e")
    kwargs: dict[str, Any] = {
        "backend_options": _options(isolation, tmp_path),
        # the host's Python runs the tests: make it this one (pytest)
        "env": {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"},
    }
    if isolation == "none":
        with pytest.raises(ToolUnavailableError, match=_REMEDY):
            R2EGymRuntime(task.source, backend="local", **kwargs)
    else:
        with R2EGymRuntime(task.source, backend="local", **kwargs) as runtime:
            for command in _commands(task, mark):
                output, status = runtime.run(command)
                assert status == "0", output
            assert runtime._calculate_reward(timeout=120) == 1.0
    assert not mark.exists()
    _no_sandbox_left(tmp_path)


def test_rllm_sandbox(isolation: str, mark: Path, tmp_path: Path) -> None:
    """rLLM's flows upload to absolute paths and name them in commands."""
    from sandbox_runtime.integrations.rllm.sandbox import RLLMSandbox

    options = _options(isolation, tmp_path)
    if isolation == "none":
        with pytest.raises(ToolUnavailableError, match=_REMEDY):
            RLLMSandbox("task", backend="local", backend_options=options, workdir="/app")
    else:
        sandbox = RLLMSandbox("task", backend="local", backend_options=options, workdir="/app")
        try:
            source = tmp_path / "run.sh"
            source.write_text(f"echo ran > {mark} && cat {mark}\n")
            sandbox.upload_file(str(source), "/app/run.sh")
            assert sandbox.exec("sh /app/run.sh") == "ran\n"
        finally:
            sandbox.close()
    assert not mark.exists()
    _no_sandbox_left(tmp_path)
