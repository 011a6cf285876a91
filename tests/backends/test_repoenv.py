"""``repoenv``: an R2E-Gym entry opened as R2E-Gym's RepoEnv opens it, on an engine backend."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from sandbox_runtime import SandboxRuntime
from sandbox_runtime._core.ownership import MANAGED, RUN_ID
from sandbox_runtime.errors import ConfigError
from sandbox_runtime.swe.dataset import load_rows


def _entry(name: str = "csvline") -> dict[str, Any]:
    return next(r for r in load_rows("bundled") if r.get("repo_name") == name)


def _local(tmp_path: Path, **options: Any) -> dict[str, Any]:
    return {"engine": "local", "engine_options": {"base_dir": tmp_path / "sbx"}, **options}


def test_entry_gives_image_and_workdir_and_hides_the_tests(tmp_path: Path) -> None:
    with SandboxRuntime(backend="repoenv", options=_local(tmp_path, ds=_entry())) as sandbox:
        assert sandbox.workdir == "/testbed"
        assert "csvline" in str(sandbox.config.image)
        # RepoEnv's setup: the held-out tests and their runner are out of the agent's sight,
        # and the repository is clean, at the entry's base.
        assert not sandbox.exists("run_tests.sh")
        assert not sandbox.exists("r2e_tests")
        assert sandbox.exists("../root/run_tests.sh")
        assert sandbox.exists("../root/r2e_tests/test_1.py")
        assert sandbox.exec("git status --porcelain", check=True).stdout == ""
        assert sandbox.read_text("csvline/core.py").startswith('"""')


def test_config_fields_win_over_the_entry(tmp_path: Path) -> None:
    template = tmp_path / "template"
    (template / "work").mkdir(parents=True)
    (template / "work" / "marker").write_text("mine\n")
    options = _local(tmp_path, ds=_entry())
    with SandboxRuntime(
        backend="repoenv", image=str(template), workdir="/work", options=options
    ) as sandbox:
        assert (sandbox.workdir, sandbox.config.image) == ("/work", str(template))
        assert sandbox.read_text("marker") == "mine\n"


def test_entry_from_a_json_file_as_graph_planner_gives_it(tmp_path: Path) -> None:
    path = tmp_path / "r2e_ds_repoenv_sample.json"
    path.write_text(json.dumps(_entry("pager")))
    with SandboxRuntime(backend="repoenv", options=_local(tmp_path, ds_json=path)) as sandbox:
        assert sandbox.exists("pager")
        assert sandbox.exists("../root/run_tests.sh")


def test_without_an_entry_it_opens_the_image_and_still_readies_it(tmp_path: Path) -> None:
    from sandbox_runtime.swe.samples import template_dir

    image = str(template_dir("eventhub"))
    with SandboxRuntime(
        backend="repoenv", image=image, workdir="/testbed", options=_local(tmp_path)
    ) as sandbox:
        assert not sandbox.exists("run_tests.sh")
        assert sandbox.exists("../root/run_tests.sh")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"ds_json": "/nonexistent/entry.json"}, "ds_json: cannot read /nonexistent/entry.json"),
        ({"ds": {"repo_name": "x"}}, "ds: not an R2E-Gym entry"),
        ({"ds": {}, "ds_json": "/x.json"}, "not both"),
        ({"engine": "repoenv"}, "cannot run on itself"),
        ({"engin": "docker"}, "engin"),
    ],
)
def test_bad_options_name_the_field(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        SandboxRuntime(backend="repoenv", options=options)
    assert message in str(caught.value)
    assert "options" in str(caught.value)


def test_no_entry_and_no_image_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="needs an entry"):
        SandboxRuntime(backend="repoenv", options={"engine": "local"})


def test_the_entry_stays_out_of_reprs(tmp_path: Path) -> None:
    entry = _entry() | {"problem_statement": "token=hunter2-very-secret"}
    sandbox = SandboxRuntime(backend="repoenv", options=_local(tmp_path, ds=entry))
    assert "hunter2" not in repr(sandbox.config)
    assert "hunter2" not in repr(sandbox.backend.options)


@pytest.mark.docker
def test_on_docker_the_container_carries_the_engines_labels(docker_image: str) -> None:
    import docker

    options = {"ds": _entry(), "base_image": docker_image}
    with SandboxRuntime(backend="repoenv", run_id="repoenv-labels", options=options) as sandbox:
        api = docker.APIClient(version="auto")
        try:
            labels = api.inspect_container(sandbox.id)["Config"]["Labels"]
        finally:
            api.close()
        assert sandbox.exec("test -x ../root/run_tests.sh").ok
    # So `sandbox-runtime reap` finds a lost one under the docker backend's rules.
    assert labels[MANAGED] == "true"
    assert labels[RUN_ID] == "repoenv-labels"


@pytest.mark.docker
@pytest.mark.parametrize(("agent", "reward"), [("oracle", 1.0), ("null", 0.0)])
def test_smoke_run_of_one_entry(
    tmp_path: Path, docker_image: str, agent: str, reward: float
) -> None:
    """The ``--backend repoenv --ds-json ENTRY`` flow of R2E-Gym/Graph Planner smoke runs."""
    entry = tmp_path / "entry.json"
    entry.write_text(json.dumps(_entry("versionkit")))
    report = tmp_path / "report.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sandbox_runtime.cli",
            "run",
            "--backend",
            "repoenv",
            "--ds-json",
            str(entry),
            "--agent",
            agent,
            "--max-steps",
            "5",
            "--base-image",
            docker_image,
            "--report",
            str(report),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # The smoke report: one entry's reward, trajectory and test output.
    document = json.loads(report.read_text())
    assert (document["task_id"], document["reward"]) == ("versionkit__cda850795019", reward)
    assert "r2e_tests/test_1.py" in document["tests"]["stdout"]


@pytest.mark.docker
def test_on_the_kubernetes_engine(k8s_emulator: Any, docker_image: str) -> None:
    options = {
        "ds": _entry("pricing"),
        "engine": "kubernetes",
        "engine_options": k8s_emulator.backend_options(),
        "base_image": docker_image,
    }
    with SandboxRuntime(backend="repoenv", options=options) as sandbox:
        assert sandbox.backend.sandbox_id.startswith("sandbox-runtime-")  # a pod name
        assert sandbox.exec("test -x ../root/run_tests.sh && test ! -e run_tests.sh").ok
        assert sandbox.exec("git status --porcelain", check=True).stdout == ""


def test_checkpoints_and_forks_go_through_to_the_engine(tmp_path: Path) -> None:
    """The engine's checkpoint, named repoenv's; a fork holds the setup without rerunning it."""
    from sandbox_runtime import Capability, delete_checkpoint, list_checkpoints
    from sandbox_runtime.backend_kit import load_backend

    options = _local(tmp_path, ds=_entry())
    engine = load_backend("local")
    engine_declares = engine.capabilities_for(engine.options_model.model_validate({}))
    repoenv = load_backend("repoenv")
    declared = repoenv.capabilities_for(repoenv.options_model.model_validate(options))
    assert Capability.FORK in declared
    assert declared == engine_declares
    with SandboxRuntime(backend="repoenv", options=options) as sandbox:
        sandbox.write_text("csvline/core.py", "broken\n")
        checkpoint = sandbox.checkpoint(labels={"why": "repoenv"})
        assert checkpoint.backend == "repoenv"
        listed = list_checkpoints("repoenv", labels={"why": "repoenv"}, options=options)
        assert [found.id for found in listed] == [checkpoint.id]
        sandbox.write_text("csvline/core.py", "later\n")
        [copy] = [result.unwrap() for result in sandbox.fork(1)]
        with copy:
            assert copy.read_text("csvline/core.py") == "later\n"
            # The R2E-Gym setup is in the copy (tests hidden) and was not run again on it:
            # the held-out tests stay out of the workdir, and nothing else moved.
            assert not copy.exists("r2e_tests")
            assert copy.exists("../root/r2e_tests/test_1.py")
            assert copy.exec("git status --porcelain").stdout == " M csvline/core.py\n"
        sandbox.rollback(checkpoint)
        assert sandbox.read_text("csvline/core.py") == "broken\n"
    delete_checkpoint(checkpoint, options=options)
    assert list_checkpoints("repoenv", labels={"why": "repoenv"}, options=options) == []
