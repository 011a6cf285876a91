"""SWE-ReX's runtime calls, made by SWE-ReX's own request types, on our deployment.

The deployment (``sandbox_runtime.integrations.swerex.SandboxRuntimeDeployment``) is driven as
SWE-agent drives a deployment: ``start``, then the runtime's ``create_session``,
``run_in_session``, ``execute``, ``read_file``/``write_file``, ``upload``, ``close_session``,
``close``, then ``stop``; on ``local`` (under bubblewrap) and ``docker``, real sandboxes.
Nothing carrying the run's label is left afterwards.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from pydantic import TypeAdapter, ValidationError
from swerex.deployment.config import DeploymentConfig
from swerex.deployment.hooks.abstract import DeploymentHook
from swerex.exceptions import (
    BashIncorrectSyntaxError,
    CommandTimeoutError,
    DeploymentNotStartedError,
    NonZeroExitCodeError,
    SessionDoesNotExistError,
    SessionExistsError,
)
from swerex.runtime.abstract import (
    BashAction,
    BashInterruptAction,
    CloseBashSessionRequest,
    Command,
    CreateBashSessionRequest,
    ReadFileRequest,
    UploadRequest,
    WriteFileRequest,
)

from sandbox_runtime import list_sandboxes
from sandbox_runtime.integrations.swerex import (
    SandboxRuntimeDeployment,
    SandboxRuntimeDeploymentConfig,
)
from tests.harnesses._killed import hold_in_child, kill_when_open_then_reap


class _Steps(DeploymentHook):  # type: ignore[misc,unused-ignore]
    def __init__(self) -> None:
        self.messages: list[str] = []

    def on_custom_step(self, message: str) -> None:
        self.messages.append(message)


@pytest.fixture(params=["local", "docker"])
def backend_and_image(request: pytest.FixtureRequest) -> tuple[str, str | None]:
    if request.param == "docker":
        return "docker", request.getfixturevalue("docker_image")
    return "local", None


async def _session_calls(deployment: SandboxRuntimeDeployment, tmp_path: Path) -> None:
    runtime = deployment.runtime
    assert await deployment.is_alive()
    workdir = deployment.sandbox.workdir

    # a startup file is sourced once; what it defines lives on in the session
    await runtime.write_file(
        WriteFileRequest(
            path="/tmp/rc/startup.sh", content='export GREETING=hi\nshout() { echo "$1!"; }\n'
        )
    )
    created = await runtime.create_session(
        CreateBashSessionRequest(session="main", startup_source=["/tmp/rc/startup.sh"])
    )
    assert created.session_type == "bash"
    with pytest.raises(SessionExistsError):
        await runtime.create_session(CreateBashSessionRequest(session="main"))

    first = await runtime.run_in_session(BashAction(session="main", command="pwd"))
    assert (first.output.strip(), first.exit_code) == (workdir, 0)
    # the working directory, exported variables, functions and aliases persist
    await runtime.run_in_session(
        BashAction(
            session="main", command="mkdir -p sub && cd sub && export N=7 && alias ll='echo ll'"
        )
    )
    state = await runtime.run_in_session(
        BashAction(session="main", command='pwd; echo "$N $GREETING"; shout hey; ll; echo oops >&2')
    )
    assert state.output.splitlines() == [f"{workdir}/sub", "7 hi", "hey!", "ll", "oops"]
    # another session is another shell
    await runtime.create_session(CreateBashSessionRequest(session="other"))
    other = await runtime.run_in_session(BashAction(session="other", command='pwd; echo "[$N]"'))
    assert other.output.splitlines() == [workdir, "[]"]

    # exit codes as SWE-ReX's check modes report them
    with pytest.raises(NonZeroExitCodeError, match="exit code 3"):
        await runtime.run_in_session(BashAction(session="main", command="(exit 3)"))
    silent = await runtime.run_in_session(
        BashAction(session="main", command="echo out; (exit 3)", check="silent")
    )
    assert (silent.output, silent.exit_code) == ("out\n", 3)
    ignored = await runtime.run_in_session(
        BashAction(session="main", command="false", check="ignore")
    )
    assert ignored.exit_code is None
    with pytest.raises(BashIncorrectSyntaxError):
        await runtime.run_in_session(BashAction(session="main", command="if then fi"))
    with pytest.raises(CommandTimeoutError):
        await runtime.run_in_session(BashAction(session="main", command="sleep 30", timeout=1))
    # the session survives its timed-out command, state intact
    after = await runtime.run_in_session(BashAction(session="main", command="pwd"))
    assert after.output.strip() == f"{workdir}/sub"
    with pytest.raises(NotImplementedError):
        await runtime.run_in_session(BashInterruptAction(session="main"))
    with pytest.raises(SessionDoesNotExistError):
        await runtime.run_in_session(BashAction(session="nope", command="true"))

    await runtime.close_session(CloseBashSessionRequest(session="other"))
    with pytest.raises(SessionDoesNotExistError):
        await runtime.run_in_session(BashAction(session="other", command="true"))


async def _command_and_file_calls(deployment: SandboxRuntimeDeployment, tmp_path: Path) -> None:
    runtime = deployment.runtime
    listed = await runtime.execute(Command(command=["ls", "/"]))
    assert "tmp" in listed.stdout.split()
    assert listed.exit_code == 0
    shell = await runtime.execute(
        Command(command="echo $X; echo err >&2; exit 4", shell=True, env={"X": "x"}, cwd="/tmp")
    )
    assert (shell.stdout, shell.stderr, shell.exit_code) == ("x\n", "err\n", 4)
    merged = await runtime.execute(
        Command(command="echo a; echo b >&2", shell=True, merge_output_streams=True)
    )
    assert (merged.stdout, merged.stderr) == ("a\nb\n", "")
    with pytest.raises(NonZeroExitCodeError, match="exit code 1"):
        await runtime.execute(Command(command=["false"], check=True))
    with pytest.raises(CommandTimeoutError):
        await runtime.execute(Command(command=["sleep", "30"], timeout=1))

    text = "zwölf\nlines\n"
    await runtime.write_file(WriteFileRequest(path="/tmp/deep/er/f.txt", content=text))
    read = await runtime.read_file(ReadFileRequest(path="/tmp/deep/er/f.txt"))
    assert read.content == text
    latin = await runtime.read_file(ReadFileRequest(path="/tmp/deep/er/f.txt", encoding="latin-1"))
    assert latin.content == text.encode().decode("latin-1")

    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "mod.py").write_text("X = 1\n")
    (tmp_path / "one.txt").write_text("one\n")
    await runtime.upload(UploadRequest(source_path=str(tree), target_path="/tmp/up"))
    await runtime.upload(
        UploadRequest(source_path=str(tmp_path / "one.txt"), target_path="/tmp/one.txt")
    )
    got = await runtime.execute(Command(command="cat /tmp/up/pkg/mod.py /tmp/one.txt", shell=True))
    assert got.stdout == "X = 1\none\n"


@pytest.mark.slow
def test_swerex_runtime_calls_on_our_deployment(
    tmp_path: Path, backend_and_image: tuple[str, str | None]
) -> None:
    backend, image = backend_and_image
    label = uuid.uuid4().hex[:12]
    config = SandboxRuntimeDeploymentConfig(
        backend=backend, image=image, labels={"test-run": label}, workdir="/tmp/work"
    )
    deployment = config.get_deployment()
    steps = _Steps()
    deployment.add_hook(steps)
    with pytest.raises(DeploymentNotStartedError):
        _ = deployment.runtime

    async def run() -> None:
        await deployment.start()
        try:
            await _session_calls(deployment, tmp_path)
            await _command_and_file_calls(deployment, tmp_path)
            await deployment.runtime.close()
        finally:
            await deployment.stop()

    asyncio.run(run())
    assert steps.messages == [f"Starting a {backend} sandbox"]
    with pytest.raises(DeploymentNotStartedError):
        asyncio.run(deployment.is_alive())
    assert list_sandboxes(backend, labels={"test-run": label}) == []


def test_an_unstopped_deployment_is_removed_when_dropped() -> None:
    label = uuid.uuid4().hex[:12]
    deployment = SandboxRuntimeDeployment(backend="local", labels={"test-run": label})
    asyncio.run(deployment.start())
    assert len(list_sandboxes("local", labels={"test-run": label})) == 1
    del deployment
    assert list_sandboxes("local", labels={"test-run": label}) == []


def test_swerex_config_union_is_closed_so_a_python_object_is_the_route() -> None:
    """What docs/harnesses.md says: SWE-ReX's DeploymentConfig cannot name our type."""
    # SWE-agent's EnvironmentConfig.deployment is this union: our keys parse as one of
    # SWE-ReX's own classes (its first that ignores them), never as ours.
    parsed = TypeAdapter(DeploymentConfig).validate_python(
        {"type": "sandbox-runtime", "backend": "docker"}
    )
    assert type(parsed).__module__ == "swerex.deployment.config"
    assert not isinstance(parsed, SandboxRuntimeDeploymentConfig)
    with pytest.raises(ValidationError, match="nope"):
        SandboxRuntimeDeploymentConfig.model_validate({"nope": 1})


@pytest.mark.slow
def test_a_killed_owner_of_a_deployment_leaves_a_sandbox_that_reap_removes(
    tmp_path: Path,
) -> None:
    """A process that started a deployment dies by SIGKILL: no stop, no finalizer runs."""
    base_dir = tmp_path / "sandboxes"  # this test's own local sandboxes: reap sees only these
    label = uuid.uuid4().hex[:12]
    process = hold_in_child("swe-rex", label, base_dir)
    kill_when_open_then_reap(process, label, base_dir, "swe-rex")
