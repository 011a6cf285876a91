"""A correct agent gets 1 in every isolation mode of ``local`` (and on docker), or the start fails.

The issue this guards (#19 item 4): on ``local`` with ``isolation="none"`` R2E-Gym's tool
scripts were written under the sandbox's root while commands looked on the host's paths, so
every call printed ``command not found`` and a correct agent got 0.0.  Here a gold-playing
agent (the gold patch as file-editor calls on ``/testbed/...`` paths, as R2E-Gym's prompt has
agents write them) plays the bundled R2E rows through each way the library gives tools:

* ``sandbox-runtime run`` (the runner, this library's tool box);
* :class:`SWEEnv` with this library's tools and with R2E-Gym's tool scripts installed;
* :class:`R2EGymRuntime` with tool scripts installed as R2E-Gym's ``RepoEnv`` installs them.

Each gets reward 1, or the start raises :class:`ToolUnavailableError` saying what to change;
never a 0.  R2E-Gym's real scripts are used where ``SANDBOX_RUNTIME_R2EGYM_SRC`` names its
``src`` directory (a checkout of 0d94c4e); otherwise stand-ins written for these tests, which
the library installs and checks exactly as it does the real ones.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox_runtime import ToolUnavailableError
from sandbox_runtime.integrations.r2egym import FALLBACK_BIN, R2EGymRuntime, tool_files
from sandbox_runtime.integrations.rllm import SWEEnv
from sandbox_runtime.swe import Task
from sandbox_runtime.swe.agents import ScriptedAgent, ToolBox, ToolCall
from sandbox_runtime.swe.images import build_sample_image
from sandbox_runtime.swe.runner import Runner, RunOptions
from tests.conftest import DOCKER_IMAGE, bwrap_problem, require
from tests.integrations.gold_play import (
    gold_edits,
    gold_r2e_actions,
    r2e_text,
    write_standin_r2egym,
)
from tests.swe.conftest import task_named

MODES = [
    pytest.param("local", {"isolation": "none"}, id="local-none"),
    pytest.param("local", {"isolation": "namespace"}, id="local-namespace"),
    pytest.param("docker", {}, id="docker", marks=pytest.mark.docker),
]
_REMEDY = "use the backend option isolation=namespace"


def _options(backend: str, options: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    if backend != "local":
        return dict(options)
    if options.get("isolation") == "namespace":
        require(bwrap_problem())
    return {**options, "base_dir": str(tmp_path / "sandboxes")}


def _r2e_tasks(bundled_tasks: list[Task]) -> list[Task]:
    return [task for task in bundled_tasks if task.format == "r2e"]


@pytest.fixture
def r2egym_scripts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Path]]:
    """R2E-Gym's tool scripts as ``tool_files()`` finds them (real ones where given)."""
    real = os.environ.get("SANDBOX_RUNTIME_R2EGYM_SRC")
    site = Path(real) if real else tmp_path / "site"
    if not real:
        write_standin_r2egym(site)
    monkeypatch.syspath_prepend(str(site))
    yield tool_files()
    for name in [m for m in sys.modules if m == "r2egym" or m.startswith("r2egym.")]:
        del sys.modules[name]


@pytest.mark.parametrize(("backend", "options"), MODES)
def test_run_with_the_tool_box_gives_a_correct_agent_1(
    backend: str, options: dict[str, Any], bundled_tasks: list[Task], tmp_path: Path
) -> None:
    """The runner's tools read and search ``/testbed/...`` in every mode: 1 on every row."""
    tasks = _r2e_tasks(bundled_tasks)
    script = {
        task.task_id: [
            {"tool": "search", "args": {"search_term": "def ", "path": task.workdir}},
            {"tool": "str_replace_editor", "args": {"command": "view", "path": task.workdir}},
            *(
                {
                    "tool": "str_replace_editor",
                    "args": {
                        "command": "str_replace",
                        "path": e.path,
                        "old_str": e.old,
                        "new_str": e.new,
                    },
                }
                for e in gold_edits(task)
            ),
            {"tool": "submit"},
        ]
        for task in tasks
    }
    run = RunOptions(
        backend=backend,
        jobs=2,
        base_image=DOCKER_IMAGE,
        backend_options=_options(backend, options, tmp_path),
    )
    outcomes = Runner(tasks, lambda: ScriptedAgent(script), run).run()
    if options.get("isolation") == "none":  # its bash would see the host's paths (issue 29)
        for outcome in outcomes:
            assert outcome.reward is None
            assert outcome.error is not None
            assert _REMEDY in outcome.error
            assert outcome.steps == []
        return
    assert [(o.task_id, o.reward, o.error) for o in outcomes] == [
        (task.task_id, 1.0, None) for task in tasks
    ]
    for outcome in outcomes:  # the look around found the repository, not an error
        search, view = outcome.steps[0], outcome.steps[1]
        assert "matches for" in search.output, search.output
        assert "/testbed/" in view.output, view.output


@pytest.mark.parametrize(("backend", "options"), MODES)
@pytest.mark.parametrize("tools", ["builtin", "r2egym"])
def test_swe_env_gives_a_correct_agent_1_or_fails_at_reset(
    backend: str,
    options: dict[str, Any],
    tools: str,
    bundled_tasks: list[Task],
    r2egym_scripts: list[Path],
    tmp_path: Path,
) -> None:
    assert r2egym_scripts
    task = task_named(bundled_tasks, "csvline", "r2e")
    env = SWEEnv(
        task,
        backend=backend,
        backend_options=_options(backend, options, tmp_path),
        base_image=DOCKER_IMAGE,
        tools=tools,  # type: ignore[arg-type]
    )
    with env:
        if options.get("isolation") == "none":  # both tool sets have a shell (issue 29)
            with pytest.raises(ToolUnavailableError, match=_REMEDY):
                env.reset()
            assert env.sandbox is None
            return
        env.reset()
        for action in gold_r2e_actions(task):
            observation, _, done, _ = env.step(action)
            assert "command not found" not in observation
            assert "No such file" not in observation, observation
        assert done
        assert env.compute_final_reward() == 1.0
    if backend == "local":
        assert list((tmp_path / "sandboxes").glob("sbx-*")) == []


@pytest.mark.parametrize(("backend", "options"), MODES)
def test_r2e_gym_runtime_gives_a_correct_agent_1_or_fails_at_start(
    backend: str,
    options: dict[str, Any],
    bundled_tasks: list[Task],
    r2egym_scripts: list[Path],
    tmp_path: Path,
) -> None:
    task = task_named(bundled_tasks, "csvline", "r2e")
    kwargs: dict[str, Any] = {"backend_options": _options(backend, options, tmp_path)}
    if backend == "local":  # commands use the host's Python: make it this one (pytest)
        kwargs["env"] = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    else:
        build_sample_image("csvline", base=DOCKER_IMAGE)
    if options.get("isolation") == "none":
        with pytest.raises(ToolUnavailableError, match=_REMEDY):
            R2EGymRuntime(task.source, backend=backend, **kwargs)
        assert list((tmp_path / "sandboxes").glob("sbx-*")) == []
        return
    with R2EGymRuntime(task.source, backend=backend, **kwargs) as runtime:
        for script in r2egym_scripts:  # as RepoEnv.add_commands does
            name = script.stem
            runtime.copy_to_container(str(script), f"/usr/local/bin/{name}")
            runtime.run(f"chmod +x /usr/local/bin/{name}")
        for edit in gold_edits(task):  # as R2E-Gym's Action.to_bashcmd writes a call
            output, status = runtime.run(
                f"file_editor str_replace --path {shlex.quote(edit.path)} "
                f"--old_str {shlex.quote(edit.old)} --new_str {shlex.quote(edit.new)}"
            )
            assert status == "0", output
        assert runtime._calculate_reward(timeout=120) == 1.0


def test_a_vanished_tool_is_an_error_and_a_commands_own_127_is_output(
    bundled_tasks: list[Task], r2egym_scripts: list[Path], tmp_path: Path
) -> None:
    require(bwrap_problem())
    task = task_named(bundled_tasks, "csvline", "r2e")
    options = {"isolation": "namespace", "base_dir": str(tmp_path / "sandboxes")}
    with SWEEnv(task, backend="local", backend_options=options, tools="r2egym") as env:
        env.reset()
        own, *_ = env.step(r2e_text("execute_bash", cmd="no-such-program-here"))
        assert "Exit code: Error: Exit code 127" in own  # the agent's command: an observation
        assert env.sandbox is not None
        env.sandbox.remove(f"{FALLBACK_BIN}/file_editor")
        with pytest.raises(ToolUnavailableError, match="file_editor: not found"):
            env.step(r2e_text("file_editor", command="view", path="/testbed/csvline/core.py"))


def test_the_tool_box_raises_when_its_own_programs_are_missing(
    bundled_tasks: list[Task], tmp_path: Path
) -> None:
    """grep missing is no "No matches" observation: the search cannot run at all."""
    from sandbox_runtime import SandboxRuntime

    empty = tmp_path / "empty-bin"
    empty.mkdir()
    sandbox = SandboxRuntime(
        backend="local",
        workdir="/testbed",
        env={"PATH": str(empty)},
        options={"base_dir": str(tmp_path / "sandboxes")},
    )
    with sandbox:
        sandbox.write_text("/testbed/a.py", "x = 1\n")
        tools = ToolBox(sandbox)
        with pytest.raises(ToolUnavailableError, match="grep: not found"):
            tools.run(ToolCall("search", {"search_term": "x", "path": "/testbed"}))
        with pytest.raises(ToolUnavailableError, match="find: not found"):
            tools.run(ToolCall("str_replace_editor", {"command": "view", "path": "/testbed"}))


def test_run_turns_a_tool_that_cannot_run_into_an_error_not_a_0(
    bundled_tasks: list[Task], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The host's programs but grep: the task sets up, then the agent's search cannot run.

    The folder is in the checkout, which a namespaced sandbox (the default where bubblewrap
    works) sees, read-only; the host's /tmp it does not, nor /root, which the task has.
    """
    require(bwrap_problem())
    checkout = Path(__file__).resolve().parents[2]
    no_grep = Path(tempfile.mkdtemp(prefix=".no-grep-bin-", dir=checkout))
    request.addfinalizer(lambda: shutil.rmtree(no_grep, ignore_errors=True))
    for folder in ("/usr/local/bin", "/usr/bin", "/bin"):
        for program in Path(folder).iterdir():
            link = no_grep / program.name
            if program.name not in ("grep", "egrep", "fgrep") and not link.exists():
                link.symlink_to(program)
    task = task_named(bundled_tasks, "csvline", "r2e")
    task = task.model_copy(update={"env": {**task.env, "PATH": str(no_grep)}})
    script = [{"tool": "search", "args": {"search_term": "x", "path": task.workdir}}]
    run = RunOptions(
        backend_options={"isolation": "namespace", "base_dir": str(tmp_path / "sandboxes")}
    )
    [outcome] = Runner([task], lambda: ScriptedAgent(script), run).run()
    assert outcome.reward is None
    assert outcome.error is not None
    assert "ToolUnavailableError" in outcome.error
    assert "grep: not found" in outcome.error
