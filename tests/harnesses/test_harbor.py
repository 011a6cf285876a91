"""The Harbor environment's methods on local and docker, against Harbor's interface.

Every Harbor release requires Python 3.12 and its syntax (``harbor 0.26.0``'s
``environments/base.py`` has PEP 695 generics), and this suite runs on 3.11, where Harbor
does not import.  So unless a real Harbor imports, ``harbor.environments.base`` is replaced by
a double that reproduces ONLY the interface as read from Harbor 0.26.0's source: the
constructor's leading arguments, ``ExecResult``'s fields and the abstract methods with their
signatures.  The engine under it is real (bubblewrap, Docker).  CI runs this file again in
a Debian 13 chroot with Harbor's current release (``scripts/harbor-e2e.sh``), where the
environment subclasses Harbor's real base class and gets its real trial objects; Harbor's own
runner is ``test_harbor_runner.py`` there.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from sandbox_runtime import list_sandboxes
from sandbox_runtime.errors import ConfigError
from tests.harnesses._killed import hold_in_child, kill_when_open_then_reap
from tests.harnesses.harbor_double import harbor_imports, install_interface_double, trial_arguments

if not harbor_imports():
    install_interface_double()

from sandbox_runtime.integrations.harbor import SandboxRuntimeEnvironment


def _environment(tmp_path: Path, backend: str, image: str | None, label: str) -> Any:
    trial_paths, task_env_config = trial_arguments(tmp_path / "trial", image)
    return SandboxRuntimeEnvironment(
        environment_dir=tmp_path / "environment",
        environment_name="hello",
        session_id=f"hello__{label}__env",
        trial_paths=trial_paths,
        task_env_config=task_env_config,
        backend=backend,
        labels={"test-run": label},
    )


@pytest.fixture(params=["local", "docker"])
def backend_and_image(request: pytest.FixtureRequest) -> tuple[str, str | None]:
    if request.param == "docker":
        return "docker", request.getfixturevalue("docker_image")
    return "local", None


async def _calls(env: Any, backend: str, tmp_path: Path) -> None:
    await env.start(force_build=False)
    hello = await env.exec("echo out; echo err >&2; exit 3")
    assert (hello.stdout, hello.stderr, hello.return_code) == ("out\n", "err\n", 3)
    where = await env.exec('pwd; echo "$X"', cwd="/tmp", env={"X": "x"})
    assert where.stdout == "/tmp\nx\n"
    with pytest.raises(TimeoutError):
        await env.exec("sleep 30", timeout_sec=1)
    if backend == "docker":
        who = await env.exec("id -un", user="nobody")
        assert who.stdout == "nobody\n"

    (tmp_path / "tests" / "sub").mkdir(parents=True)
    (tmp_path / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    (tmp_path / "tests" / "sub" / "data.txt").write_text("data\n")
    (tmp_path / "solve.sh").write_text("echo solved\n")
    await env.upload_dir(tmp_path / "tests", "/tmp/harbor/tests")
    await env.upload_file(tmp_path / "solve.sh", "/tmp/harbor/solution/solve.sh")
    ran = await env.exec(
        "mkdir -p /logs/verifier && bash /tmp/harbor/solution/solve.sh && "
        "bash /tmp/harbor/tests/test.sh && cat /tmp/harbor/tests/sub/data.txt"
    )
    assert (ran.stdout, ran.return_code) == ("solved\ndata\n", 0)
    await env.download_file("/logs/verifier/reward.txt", tmp_path / "out" / "reward.txt")
    assert (tmp_path / "out" / "reward.txt").read_text() == "1\n"
    await env.download_dir("/tmp/harbor/tests", tmp_path / "back")
    assert (tmp_path / "back" / "sub" / "data.txt").read_text() == "data\n"
    await env.stop(delete=True)
    await env.stop(delete=True)  # idempotent


@pytest.mark.slow
def test_harbor_environment_methods(
    tmp_path: Path, backend_and_image: tuple[str, str | None]
) -> None:
    backend, image = backend_and_image
    label = uuid.uuid4().hex[:12]
    env = _environment(tmp_path, backend, image, label)
    assert env.type() == "sandbox-runtime"
    try:
        asyncio.run(_calls(env, backend, tmp_path))
    finally:
        asyncio.run(env.stop(delete=True))
    assert list_sandboxes(backend, labels={"test-run": label}) == []


def test_no_image_and_a_bad_option_are_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="docker_image"):
        _environment(tmp_path, "docker", None, "x")
    # keys other than ours are Harbor's own constructor arguments and go to its base class
    trial_paths, task_env_config = trial_arguments(tmp_path / "trial", "img")
    with pytest.raises(ValueError, match="backend_options"):
        SandboxRuntimeEnvironment(
            environment_dir=tmp_path,
            environment_name="t",
            session_id="t",
            trial_paths=trial_paths,
            task_env_config=task_env_config,
            backend_options="not a mapping",
        )


@pytest.mark.slow
def test_a_killed_harbor_process_leaves_a_sandbox_that_reap_removes(tmp_path: Path) -> None:
    """A process that started the environment dies by SIGKILL."""
    base_dir = tmp_path / "sandboxes"  # this test's own local sandboxes: reap sees only these
    label = uuid.uuid4().hex[:12]
    process = hold_in_child("harbor", label, base_dir)
    kill_when_open_then_reap(process, label, base_dir, "harbor")
