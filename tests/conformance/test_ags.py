"""The shared conformance suite, for the ``ags`` backend against the local AGS emulator.

Instances run in ``local`` sandboxes with namespace isolation, so absolute paths agree
between the file API and commands, as on the real service.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sandbox_runtime import SandboxConfig
from sandbox_runtime.backend_kit.testing import SandboxConformance
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
