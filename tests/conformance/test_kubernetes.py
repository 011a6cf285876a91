"""The shared conformance suite, for the ``kubernetes`` backend against the local emulator.

Pods are Docker containers of the test image behind a wire-level Kubernetes API emulator;
the backend talks to it with the unmodified ``kubernetes`` client, as it would to a cluster.
"""

from __future__ import annotations

from typing import Any

import pytest

from sandbox_runtime import SandboxConfig
from sandbox_runtime.testing import SandboxConformance

pytestmark = pytest.mark.docker


class TestKubernetes(SandboxConformance):
    @pytest.fixture
    def sandbox_config(self, k8s_emulator: Any, docker_image: str) -> SandboxConfig:
        return SandboxConfig(
            backend="kubernetes",
            image=docker_image,
            workdir="/testbed",
            lifetime=600,
            options=k8s_emulator.backend_options(),
        )
