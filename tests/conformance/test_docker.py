from __future__ import annotations

import pytest

from sandbox_runtime import SandboxConfig
from sandbox_runtime.backend_kit.testing import SandboxConformance
from tests.conftest import DOCKER_IMAGE

pytestmark = pytest.mark.docker


def _config(image: str, agent: str) -> SandboxConfig:
    return SandboxConfig(
        backend="docker", image=image, workdir="/testbed", lifetime=600, options={"agent": agent}
    )


class TestDocker(SandboxConformance):
    """The native path: every command a ``docker exec``, files through the engine's archives."""

    @pytest.fixture
    def sandbox_config(self, docker_image: str) -> SandboxConfig:
        return _config(docker_image, "off")


class TestDockerAgent(SandboxConformance):
    """The agent path: every call through the in-sandbox agent (``on``: the start waits for it)."""

    @pytest.fixture
    def sandbox_config(self, docker_image: str) -> SandboxConfig:
        return _config(docker_image, "on")


class TestDockerBackendOnPodman(SandboxConformance):
    """The docker backend against Podman's Docker-compatible API (``DOCKER_HOST`` users)."""

    @pytest.fixture
    def sandbox_config(self, podman_socket: str) -> SandboxConfig:
        return SandboxConfig(
            backend="docker",
            image=DOCKER_IMAGE,
            workdir="/testbed",
            lifetime=600,
            options={"docker_host": podman_socket},
        )
