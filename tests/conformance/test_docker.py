from __future__ import annotations

import pytest

from sandbox_runtime import SandboxConfig
from sandbox_runtime.testing import SandboxConformance
from tests.conftest import DOCKER_IMAGE

pytestmark = pytest.mark.docker


class TestDocker(SandboxConformance):
    """The native path: every command a ``docker exec``, files through the engine's archives."""

    @pytest.fixture
    def sandbox_config(self, docker_image: str) -> SandboxConfig:
        return SandboxConfig(
            backend="docker",
            image=docker_image,
            workdir="/testbed",
            lifetime=600,
            options={"agent": "off"},
        )


class TestDockerAgent(SandboxConformance):
    """The fast path: every call through the in-sandbox agent (``on`` waits for it)."""

    @pytest.fixture
    def sandbox_config(self, docker_image: str) -> SandboxConfig:
        return SandboxConfig(
            backend="docker",
            image=docker_image,
            workdir="/testbed",
            lifetime=600,
            options={"agent": "on"},
        )


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
