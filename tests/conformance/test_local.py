from __future__ import annotations

from pathlib import Path

import pytest

from sandbox_runtime import SandboxConfig
from sandbox_runtime.backend_kit.testing import SandboxConformance
from tests.conftest import bwrap_problem, require


class TestLocalPlain(SandboxConformance):
    shares_absolute_paths = False

    @pytest.fixture
    def sandbox_config(self, tmp_path: Path) -> SandboxConfig:
        return SandboxConfig(
            backend="local", options={"isolation": "none", "base_dir": tmp_path / "sandboxes"}
        )


class TestLocalNamespace(SandboxConformance):
    @pytest.fixture
    def sandbox_config(self, tmp_path: Path) -> SandboxConfig:
        require(bwrap_problem())
        return SandboxConfig(
            backend="local",
            workdir="/testbed",
            options={"base_dir": tmp_path / "sandboxes", "isolation": "namespace"},
        )
