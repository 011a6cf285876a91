from __future__ import annotations

import pytest

from sandbox_runtime import SandboxConfig
from sandbox_runtime.testing import SandboxConformance

pytestmark = pytest.mark.docker


class TestDocker(SandboxConformance):
    @pytest.fixture
    def sandbox_config(self, docker_image: str) -> SandboxConfig:
        return SandboxConfig(backend="docker", image=docker_image, workdir="/testbed", lifetime=600)
