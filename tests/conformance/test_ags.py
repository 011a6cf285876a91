"""The shared conformance suite, for the ``ags`` backend against the local AGS emulator.

Instances run in ``local`` sandboxes with namespace isolation, so absolute paths agree
between the file API and commands, as on the real service.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox_runtime import SandboxConfig, SandboxRuntime
from sandbox_runtime.backend_kit.testing import SandboxConformance
from tests.conformance.emulated_pause import check_pause_keeps_the_files_not_the_processes
from tests.conftest import bwrap_problem, require

try:
    import e2b  # noqa: F401
except ImportError:  # pragma: no cover - fails in CI, skips elsewhere
    require("needs the ags extra and the emulators: pip install -e '.[ags]' -e ./emulators")

from sandbox_runtime_emulators.ags.server import AgsEmulator

pytestmark = pytest.mark.e2b_sdk


@pytest.fixture(scope="module")
def emulator() -> Iterator[AgsEmulator]:
    require(bwrap_problem())
    with AgsEmulator(backend="local", local_isolation="namespace") as running:
        yield running


class TestAgs(SandboxConformance):
    @pytest.fixture
    def sandbox_config(self, emulator: AgsEmulator) -> SandboxConfig:
        return SandboxConfig(
            backend="ags", workdir="/testbed", lifetime=600, options=emulator.backend_options()
        )


class TestAgsE2bPlane(SandboxConformance):
    """The e2b control plane (an ``ark_`` key): checkpoints through the emulator's e2b routes,
    found by discovery and kept by the core's shared ``SnapshotBook``."""

    @pytest.fixture
    def sandbox_config(
        self, emulator: AgsEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> SandboxConfig:
        monkeypatch.setenv("SANDBOX_RUNTIME_CHECKPOINT_DIR", str(tmp_path / "checkpoints"))
        options = emulator.backend_options(control_plane="e2b", api_key=emulator.api_key)
        return SandboxConfig(backend="ags", workdir="/testbed", lifetime=600, options=options)

    def test_pause_keeps_a_running_process(self, sandbox: SandboxRuntime) -> None:
        """Not on the emulator, which keeps the files only (docs/ags-emulator.md)."""
        check_pause_keeps_the_files_not_the_processes(sandbox)
