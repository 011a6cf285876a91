"""The shared conformance suite, for the ``e2b`` backend against the AGS emulator's e2b door.

Twice: with the emulator's snapshot / fork / pause routes (the backend finds them and
declares checkpoints, forks and pause on them), and with them off
(``e2b_checkpoint_routes=False``, as an older e2b service: the backend finds none and keeps
checkpoints and forks through the core's archive store; no pause, whose test then checks the
typed error).  Instances run in ``local`` sandboxes with namespace isolation.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from sandbox_runtime import Capability, SandboxConfig, SandboxRuntime, delete_checkpoint
from sandbox_runtime.backend_kit.testing import SandboxConformance
from tests.conformance.emulated_pause import check_pause_keeps_the_files_not_the_processes
from tests.conftest import bwrap_problem, require

try:
    import e2b  # noqa: F401
except ImportError:  # pragma: no cover - fails in CI, skips elsewhere
    require("needs the ags extra and the emulators: pip install -e '.[ags]' -e ./emulators")

from sandbox_runtime_emulators.ags.server import AgsEmulator

pytestmark = pytest.mark.e2b_sdk


def _options(emulator: AgsEmulator, records: Path) -> dict[str, object]:
    return {
        "api_key": SecretStr(emulator.api_key),
        "api_url": emulator.url,
        "sandbox_url": emulator.url,
        "template": emulator.default_tool.name,
        "checkpoint_dir": records,
    }


@pytest.fixture(scope="module")
def with_routes() -> Iterator[AgsEmulator]:
    require(bwrap_problem())
    with AgsEmulator(backend="local", local_isolation="namespace") as running:
        yield running


@pytest.fixture(scope="module")
def without_routes() -> Iterator[AgsEmulator]:
    require(bwrap_problem())
    with AgsEmulator(
        backend="local", local_isolation="namespace", e2b_checkpoint_routes=False
    ) as running:
        yield running


class TestE2bWithRoutes(SandboxConformance):
    @pytest.fixture
    def sandbox_config(self, with_routes: AgsEmulator, tmp_path: Path) -> SandboxConfig:
        return SandboxConfig(
            backend="e2b",
            workdir="/testbed",
            lifetime=600,
            options=_options(with_routes, tmp_path / "records"),
        )

    def test_the_service_routes_are_found(self, sandbox: SandboxRuntime) -> None:
        backend = sandbox.backend
        found = backend.capabilities_for(backend.options)
        assert {Capability.CHECKPOINT_FILESYSTEM, Capability.FORK, Capability.PAUSE} <= found
        checkpoint = sandbox.checkpoint()
        try:  # a snapshot of the service, not an archive on this host
            assert not list(Path(backend.options.checkpoint_dir).glob("ckpt-*"))
        finally:
            delete_checkpoint(checkpoint, options=sandbox.config.options)

    def test_pause_keeps_a_running_process(self, sandbox: SandboxRuntime) -> None:
        """Not on the emulator, which keeps the files only (docs/ags-emulator.md)."""
        check_pause_keeps_the_files_not_the_processes(sandbox)


class TestE2bWithoutRoutes(SandboxConformance):
    @pytest.fixture
    def sandbox_config(self, without_routes: AgsEmulator, tmp_path: Path) -> SandboxConfig:
        return SandboxConfig(
            backend="e2b",
            workdir="/testbed",
            lifetime=600,
            options=_options(without_routes, tmp_path / "records"),
        )

    def test_no_route_is_found_and_archives_stand_in(self, sandbox: SandboxRuntime) -> None:
        backend = sandbox.backend
        found = backend.capabilities_for(backend.options)
        assert Capability.PAUSE not in found
        assert {Capability.CHECKPOINT_FILESYSTEM, Capability.FORK} <= found
        checkpoint = sandbox.checkpoint()
        try:  # an archive of the core's store, on this host
            assert (Path(backend.options.checkpoint_dir) / checkpoint.id / "data.tar").is_file()
        finally:
            delete_checkpoint(checkpoint, options=sandbox.config.options)
