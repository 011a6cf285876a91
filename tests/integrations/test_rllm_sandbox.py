"""rLLM's ``Sandbox`` protocol over our backends, and the hook into rLLM's create_sandbox.

rLLM is not on PyPI at the version that has ``rllm/sandbox``, so CI checks the contract
against the protocol as rLLM's source states it (``rllm/sandbox/protocol.py`` at 9beb6e0f),
and a stand-in ``rllm.sandbox.sandboxed_flow`` with the same ``create_sandbox`` signature; the
closing notes record the run against rLLM's real source.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from sandbox_runtime import SandboxError, SandboxRuntime
from sandbox_runtime.integrations.rllm import CommandFailedError, RLLMSandbox, install
from tests.conftest import bwrap_problem, require

#: rLLM's protocol: method -> (parameter names after self, defaults, return annotation).
PROTOCOL = {
    "exec": (["command", "timeout", "user"], {"timeout": None, "user": None}, "str"),
    "upload_file": (["local_path", "remote_path"], {}, "None"),
    "upload_dir": (["local_path", "remote_path"], {}, "None"),
    "close": ([], {}, "None"),
    "is_alive": ([], {}, "bool"),
}


def test_the_class_has_rllms_protocol_methods_and_signatures() -> None:
    for name, (parameters, defaults, returns) in PROTOCOL.items():
        signature = inspect.signature(getattr(RLLMSandbox, name))
        got = [p for p in signature.parameters.values() if p.name != "self"]
        assert [p.name for p in got] == parameters, name
        assert {p.name: p.default for p in got if p.default is not p.empty} == defaults, name
        assert signature.return_annotation == returns, name
    # rLLM's backends are built as Backend(name=..., image=..., **kwargs).
    constructor = inspect.signature(RLLMSandbox.__init__).parameters
    assert list(constructor)[1:3] == ["name", "image"]
    assert issubclass(CommandFailedError, RuntimeError)  # what rLLM's _safe_exec catches
    assert not issubclass(SandboxError, RuntimeError)  # infrastructure faults are not caught


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def sandbox_of(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    made: list[RLLMSandbox] = []

    def make(name: str = "t1") -> RLLMSandbox:
        if request.param == "docker":
            image = request.getfixturevalue("docker_image")
            sandbox = RLLMSandbox(name, image, backend="docker")
        else:
            # rLLM's tasks name absolute paths (/app): namespaces make them the sandbox's.
            require(bwrap_problem())
            options = {"base_dir": str(tmp_path / "sandboxes"), "isolation": "namespace"}
            sandbox = RLLMSandbox(name, None, backend="local", backend_options=options, cpu=2)
        made.append(sandbox)
        return sandbox

    yield make
    for sandbox in made:
        sandbox.close()


def test_exec_upload_close_as_rllm_expects(sandbox_of: Any, tmp_path: Path) -> None:
    sandbox = sandbox_of()
    assert sandbox.exec("echo out; echo err >&2") == "out\n"
    with pytest.raises(CommandFailedError) as failed:
        sandbox.exec("echo partial; echo broke >&2; exit 3")
    assert (failed.value.exit_code, failed.value.stdout) == (3, "partial\n")
    assert "Command failed (exit 3)" in str(failed.value)
    assert "broke" in str(failed.value)
    with pytest.raises(subprocess.TimeoutExpired):
        sandbox.exec("sleep 5", timeout=0.5)
    one = tmp_path / "one.txt"
    one.write_text("hello")
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "two.txt").write_text("two")
    sandbox.upload_file(str(one), "/app/in/one.txt")
    sandbox.upload_dir(str(tree), "/app/tree")
    assert sandbox.exec("cat /app/in/one.txt /app/tree/sub/two.txt", user="1000") == "hellotwo"
    with pytest.raises(FileNotFoundError):
        sandbox.upload_file(str(tmp_path / "missing"), "/app/x")
    assert sandbox.is_alive() is True
    sandbox.close()
    sandbox.close()
    assert sandbox.is_alive() is False


def test_a_dead_sandbox_is_an_infrastructure_error_not_a_command_failure(
    sandbox_of: Any,
) -> None:
    sandbox = sandbox_of()
    SandboxRuntime.connect(
        sandbox.runtime.config.backend, sandbox.runtime.id, options=sandbox.runtime.config.options
    ).close()
    assert sandbox.is_alive() is False
    with pytest.raises(SandboxError) as gone:
        sandbox.exec("true")
    assert not isinstance(gone.value, RuntimeError)


@pytest.fixture
def rllm_flow_module(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """A stand-in for ``rllm.sandbox.sandboxed_flow`` with rLLM's create_sandbox signature."""
    calls: list[tuple[str, str, str, dict[str, Any]]] = []

    def create_sandbox(backend: str, name: str, image: str, **kwargs: Any) -> Any:
        calls.append((backend, name, image, kwargs))
        if backend not in ("docker", "local", "modal", "daytona"):
            raise ValueError(f"Unknown sandbox backend: {backend}")
        return ("rllm's own", backend)

    flow = types.ModuleType("rllm.sandbox.sandboxed_flow")
    flow.create_sandbox = create_sandbox  # type: ignore[attr-defined]
    flow.calls = calls  # type: ignore[attr-defined]
    package = types.ModuleType("rllm.sandbox")
    package.sandboxed_flow = flow  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "rllm", types.ModuleType("rllm"))
    monkeypatch.setitem(sys.modules, "rllm.sandbox", package)
    monkeypatch.setitem(sys.modules, "rllm.sandbox.sandboxed_flow", flow)
    return flow


def test_install_routes_prefixed_names_here_and_others_to_rllm(
    rllm_flow_module: Any, tmp_path: Path
) -> None:
    require(bwrap_problem())
    options = {"local": {"base_dir": str(tmp_path / "sandboxes"), "isolation": "namespace"}}
    install(backend_options=options, workdir="/app")
    install(backend_options=options, workdir="/app")  # idempotent: wraps rLLM's once
    from rllm.sandbox.sandboxed_flow import create_sandbox  # as rLLM's callers import it

    assert create_sandbox("docker", "n", "python:3.11-slim") == ("rllm's own", "docker")
    assert len(rllm_flow_module.calls) == 1
    ours = create_sandbox("sandbox-runtime:local", "task-1", "ignored-image", memory=4096)
    try:
        assert isinstance(ours, RLLMSandbox)
        assert ours.runtime.config.backend == "local"
        assert ours.runtime.workdir == "/app"
        assert ours.exec("pwd") == "/app\n"
    finally:
        ours.close()
    with pytest.raises(ValueError, match="Unknown sandbox backend"):
        create_sandbox("nope", "n", "i")


def test_install_without_rllm_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "rllm.sandbox", None)
    with pytest.raises(SandboxError, match="needs rLLM"):
        install()
