"""Inspect's own conformance checks for sandbox providers, run against ``sandbox-runtime``.

The backends: ``local`` (under bubblewrap), ``docker`` and the AGS emulator.

``inspect_ai.util._sandbox.self_check`` ships the checks every provider should pass; a
provider pulls them in and gives a ``sandbox_env`` fixture.  One sandbox per backend serves
all checks (each check gets a fresh environment object over it).  The checks this library's
sandboxes cannot pass are xfailed below, each with the reason.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import pytest
from inspect_ai.util._sandbox.self_check import *  # noqa: F403

from sandbox_runtime import AsyncSandboxRuntime, SandboxRuntime
from sandbox_runtime.integrations.inspect import SandboxRuntimeSandboxEnvironment
from tests.conftest import bwrap_problem, require

pytestmark = pytest.mark.anyio

_ROOT_BYPASSES_MODES = "the sandbox runs commands as root, which reads and writes past chmod"
# Checks the backend cannot pass, with the reason (a deliberate difference, not a bug).
_XFAIL: dict[str, dict[str, str]] = {
    "local": {
        "test_exec_as_user": "a local sandbox runs as the host's user and cannot switch users",
    },
    "ags": {
        "test_exec_as_user": (
            "the emulator's instances are local sandboxes under bubblewrap whose /etc is the "
            "host's, read-only, so adduser cannot add the check's user (a real AGS instance "
            "is a container)"
        ),
    },
    "docker": {},
}
if os.geteuid() == 0:
    for reasons in _XFAIL.values():
        reasons["test_read_file_not_allowed"] = _ROOT_BYPASSES_MODES
        reasons["test_write_text_file_without_permissions"] = _ROOT_BYPASSES_MODES
        reasons["test_write_binary_file_without_permissions"] = _ROOT_BYPASSES_MODES
_XFAIL["docker"]["test_read_file_not_allowed"] = _ROOT_BYPASSES_MODES
_XFAIL["docker"]["test_write_text_file_without_permissions"] = _ROOT_BYPASSES_MODES
_XFAIL["docker"]["test_write_binary_file_without_permissions"] = _ROOT_BYPASSES_MODES


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module", params=["local", "docker", "ags"])
def shared_sandbox(request: pytest.FixtureRequest) -> Iterator[SandboxRuntime]:
    fields: dict[str, Any] = {"backend": request.param, "workdir": "/workspace"}
    with contextlib.ExitStack() as stack:
        if request.param == "docker":
            fields["image"] = request.getfixturevalue("docker_image")
        elif request.param == "local":
            # under bubblewrap a local sandbox sees the host's /usr, as Inspect's checks expect
            require(bwrap_problem())
            fields["options"] = {"isolation": "namespace"}
        else:  # the AGS emulator (its instances: local sandboxes under bubblewrap)
            require(bwrap_problem())
            from sandbox_runtime_emulators.ags.server import AgsEmulator

            emulator = stack.enter_context(
                AgsEmulator(backend="local", local_isolation="namespace")
            )
            fields["options"] = emulator.backend_options()
        sandbox = stack.enter_context(SandboxRuntime(**fields, labels={"test": "inspect-check"}))
        yield sandbox


@pytest.fixture
async def sandbox_env(
    request: pytest.FixtureRequest, shared_sandbox: SandboxRuntime
) -> SandboxRuntimeSandboxEnvironment:
    reason = _XFAIL[shared_sandbox.config.backend].get(request.node.originalname)
    if reason:
        request.node.add_marker(pytest.mark.xfail(reason=reason, strict=True))
    return SandboxRuntimeSandboxEnvironment(AsyncSandboxRuntime.wrap(shared_sandbox))
