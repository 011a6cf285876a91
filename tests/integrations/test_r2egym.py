"""R2E-Gym's runtime contract on our backends, and install() swapping R2E-Gym's DockerRuntime.

R2E-Gym is not on PyPI (and CI cannot reach GitHub), so the real ``RepoEnv`` runs only where
it is installed (the closing notes say what ran); here the contract is checked: the members
R2E-Gym's ``RepoEnv`` and ``Agent`` call, their results, and the swap ``install`` makes in
modules laid out as R2E-Gym's are.
"""

from __future__ import annotations

import inspect
import os
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox_runtime import ConfigError
from sandbox_runtime.integrations import r2egym
from sandbox_runtime.integrations.r2egym import FALLBACK_BIN, R2EGymRuntime
from sandbox_runtime.swe import Task
from sandbox_runtime.swe.grading import GradingError
from sandbox_runtime.swe.images import build_sample_image
from tests.conftest import DOCKER_IMAGE, bwrap_problem, require
from tests.swe.conftest import task_named

# A tool as R2E-Gym ships them: its venv's interpreter, and chardet for the editor.
_TOOL = """#!/root/.venv/bin/python
import sys

import chardet

print(chardet.detect(b"plain text")["encoding"], sys.argv[1:])
"""


@pytest.fixture(autouse=True)
def _no_r2egym_left() -> Iterator[None]:
    """Stand-in R2E-Gym modules must not outlive the test that imported them."""

    def forget() -> None:
        for name in [m for m in sys.modules if m == "r2egym" or m.startswith("r2egym.")]:
            del sys.modules[name]

    forget()
    yield
    forget()


def test_members_match_r2e_gyms_docker_runtime() -> None:
    """The names and parameters RepoEnv, R2E-Gym's Agent and rLLM's SWEEnv use."""
    init = list(inspect.signature(R2EGymRuntime.__init__).parameters)
    assert init[1:8] == [
        "ds",
        "repo_path",
        "alt_path",
        "docker_image",
        "command",
        "logger",
        "backend",
    ]
    run = list(inspect.signature(R2EGymRuntime.run).parameters)
    assert run == ["self", "code", "timeout", "args", "workdir", "type"]
    for member in (
        "copy_to_container",
        "get_task_instruction",
        "_calculate_reward",
        "get_patch",
        "apply_patch",
        "reverse_patch",
        "run_tests",
        "demux_run_tests",
        "checkout",
        "read_file",
        "create_file",
        "reset",
        "close",
        "commit_after_step",
        "soft_git_reset",
    ):
        assert callable(getattr(R2EGymRuntime, member)), member


@pytest.fixture
def runtime_on(tmp_path: Path, bundled_tasks: list[Task]) -> Iterator[Any]:
    made: list[R2EGymRuntime] = []

    def make(backend: str) -> R2EGymRuntime:
        ds = task_named(bundled_tasks, "csvline", "r2e").source
        if backend == "local":
            require(bwrap_problem())
            options = {"isolation": "namespace", "base_dir": str(tmp_path / "sandboxes")}
            # Commands use the host's Python: make it this one, which has pytest.
            path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
            runtime = R2EGymRuntime(
                ds, backend="local", backend_options=options, env={"PATH": path}
            )
        else:
            build_sample_image("csvline", base=DOCKER_IMAGE)
            runtime = R2EGymRuntime(ds, backend=backend)
        made.append(runtime)
        return runtime

    yield make
    for runtime in made:
        runtime.close()


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_an_r2e_episode_through_the_runtime(
    runtime_on: Any, bundled_tasks: list[Task], tmp_path: Path, backend: str
) -> None:
    runtime = runtime_on(backend)
    task = task_named(bundled_tasks, "csvline", "r2e")
    assert runtime.repo_name
    assert runtime.docker_image == task.source["docker_image"]
    assert "split_row drops the last field" in runtime.get_task_instruction()
    assert "[ISSUE]" not in runtime.get_task_instruction()
    assert runtime.commit is not None
    assert runtime.commit.file_diffs

    # R2E-Gym's RepoEnv.add_commands: copy to /usr/local/bin, then chmod +x.
    tool = tmp_path / "probe_tool.py"
    tool.write_text(_TOOL)
    tool.chmod(0o755)
    runtime.copy_to_container(str(tool), "/usr/local/bin/probe_tool")
    runtime.run("chmod +x /usr/local/bin/probe_tool")  # fails where /usr is the host's
    output, code = runtime.run("probe_tool", args="--path x")
    # The stand-in (no chardet in the image) calls plain text utf-8; real chardet, which
    # local sandboxes see among the host's packages, calls it ascii.
    assert code == "0"
    assert output in ("utf-8 ['--path', 'x']\n", "ascii ['--path', 'x']\n")
    assert output.startswith("utf-8") == (backend == "docker")
    if backend == "local":  # /usr/local/bin is the host's, read-only: the fallback served it
        assert runtime.sandbox.exists(f"{FALLBACK_BIN}/probe_tool")

    assert runtime.run("echo out; echo err >&2; exit 3") == ("out\nerr\n", "Error: Exit code 3")
    assert runtime.run("sleep 5", timeout=1) == (
        "The command took too long to execute (>1s)",
        "-1",
    )
    assert runtime.run("pwd") == ("/testbed\n", "0")
    assert runtime.run("pwd", workdir="/tmp") == ("/tmp\n", "0")

    assert runtime._calculate_reward(timeout=120) == 0.0
    assert runtime.apply_patch(task.gold_patch)[1] == "0"
    assert "fields.append" in runtime.get_patch()
    reward, output = runtime._calculate_reward(get_test_output=True, timeout=120)
    assert reward == 1.0
    assert output
    assert runtime.reverse_patch(task.gold_patch)[1] == "0"
    assert runtime._calculate_reward(timeout=120) == 0.0

    runtime.close()
    with pytest.raises(GradingError, match="infrastructure error"):
        runtime._calculate_reward(timeout=120)  # never a 0 from a sandbox that is gone


def _fake_r2egym(root: Path) -> None:
    """Modules laid out as R2E-Gym's, building DockerRuntime as RepoEnv does (its call shape)."""
    files = {
        "r2egym/__init__.py": "",
        "r2egym/agenthub/__init__.py": "",
        "r2egym/agenthub/runtime/__init__.py": "",
        "r2egym/agenthub/runtime/docker.py": """
            class DockerRuntime:
                def __init__(self, ds, command="/bin/bash", logger=None, backend="docker"):
                    raise RuntimeError("R2E-Gym's own runtime: docker or kubernetes only")
        """,
        "r2egym/agenthub/environment/__init__.py": "",
        "r2egym/agenthub/environment/env.py": """
            from r2egym.agenthub.runtime.docker import DockerRuntime

            class RepoEnv:
                def __init__(self, ds, backend="docker"):
                    self.runtime = DockerRuntime(
                        ds=ds, command=["/bin/bash", "-l"], logger=None, backend=backend
                    )
        """,
    }
    # Tool scripts where R2E-Gym keeps them; these print what they were called with.
    script = (
        "#!/root/.venv/bin/python\nimport json, sys\n\nimport chardet\n\n"
        "print(json.dumps([sys.argv[0].rsplit('/', 1)[-1], *sys.argv[1:]]))\n"
    )
    bash = (
        "#!/root/.venv/bin/python\nimport subprocess, sys\n\n"
        "sys.exit(subprocess.run(sys.argv[2], shell=True).returncode)\n"
    )
    for name in ("r2egym/file_editor.py", "search.py", "finish.py"):
        files[f"r2egym/agenthub/tools/{name}"] = script
    files["r2egym/agenthub/tools/r2egym/execute_bash.py"] = bash
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text) if not text.startswith("#!") else text)


def test_install_makes_repoenv_build_ours(
    tmp_path: Path, bundled_tasks: list[Task], monkeypatch: pytest.MonkeyPatch
) -> None:
    require(bwrap_problem())
    with pytest.raises(ConfigError, match="needs R2E-Gym"):
        r2egym.install(backend="local")
    _fake_r2egym(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    from r2egym.agenthub.environment import env

    ds = task_named(bundled_tasks, "csvline", "r2e").source
    options = {"isolation": "namespace", "base_dir": str(tmp_path / "sandboxes")}
    installed = r2egym.install(backend="local", backend_options=options)
    try:
        assert r2egym.install(backend="local", backend_options=options) is not installed
        # rLLM's SWEEnv passes backend="kubernetes": the installed backend wins.
        repo_env = env.RepoEnv(ds, backend="kubernetes")
        try:
            assert isinstance(repo_env.runtime, R2EGymRuntime)
            assert repo_env.runtime.backend == "local"
            assert repo_env.runtime.run("test -d /root/r2e_tests && pwd") == ("/testbed\n", "0")
        finally:
            repo_env.runtime.close()
    finally:
        r2egym.uninstall()
    with pytest.raises(RuntimeError, match="R2E-Gym's own runtime"):
        env.RepoEnv(ds)
    assert list((tmp_path / "sandboxes").glob("sbx-*")) == []


def test_swe_env_runs_r2e_gyms_own_tool_scripts(
    tmp_path: Path, bundled_tasks: list[Task], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With R2E-Gym installed, SWEEnv runs R2E-Gym's scripts as RepoEnv does (its exact
    observations): quoted --KEY VALUE arguments as written, the script's exit status."""
    from sandbox_runtime.integrations.rllm import SWEEnv

    require(bwrap_problem())
    task = task_named(bundled_tasks, "csvline", "r2e")
    with pytest.raises(ConfigError, match="needs R2E-Gym"):
        SWEEnv(task, tools="r2egym")
    _fake_r2egym(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    options = {"isolation": "namespace", "base_dir": str(tmp_path / "sandboxes")}
    with SWEEnv(task, backend="local", backend_options=options) as env:  # "auto": scripts
        env.reset()
        view = env.step(
            "<function=file_editor>\n<parameter=command>view</parameter>\n"
            "<parameter=path>/testbed/a b.py</parameter>\n"
            "<parameter=view_range>[1,3]</parameter>\n</function>"
        )
        assert view[0] == (
            'Execution output of [file_editor]:\n["file_editor", "view", "--path", '
            '"/testbed/a b.py", "--view_range", "[1,3]"]\n'
        )
        failed = env.step("<function=execute_bash>\n<parameter=cmd>echo out; exit 3</parameter>")
        assert (
            failed[0] == "Exit code: Error: Exit code 3\nExecution output of [execute_bash]:\nout\n"
        )
        unknown = env.step("<function=jump>\n<parameter=x>1</parameter>\n</function>")
        assert unknown[0] == "Execution output of [jump]:\n"
        assert env.step("<function=finish>\n<parameter=command>submit</parameter>")[1:3] == (
            0.0,
            True,
        )
        # /usr/local/bin is the host's here: the scripts went to the fallback directory.
        assert env.sandbox is not None
        assert env.sandbox.exists(f"{FALLBACK_BIN}/file_editor")
        assert (
            env.sandbox.exists(f"{FALLBACK_BIN}/chardet.py")
            or env.sandbox.exec("python3 -c 'import chardet'").ok
        )
