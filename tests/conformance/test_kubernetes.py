"""The shared conformance suite, for the ``kubernetes`` backend against the local emulator.

Pods are Docker containers of the test image behind a wire-level Kubernetes API emulator;
the backend talks to it with the unmodified ``kubernetes`` client, as it would to a cluster.
Their IPs route from this host, as pod IPs do inside a cluster, so the suite runs on both
paths: ``pods/exec`` and the in-sandbox agent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sandbox_runtime import SandboxConfig
from sandbox_runtime.backend_kit.testing import SandboxConformance

pytestmark = pytest.mark.docker


def _config(emulator: Any, image: str, agent: str, checkpoints: Path) -> SandboxConfig:
    return SandboxConfig(
        backend="kubernetes",
        image=image,
        workdir="/testbed",
        lifetime=600,
        options={**emulator.backend_options(), "agent": agent, "checkpoint_dir": str(checkpoints)},
    )


@pytest.fixture(scope="module")
def checkpoint_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The archive store of this module's checkpoints (not the user's own)."""
    return tmp_path_factory.mktemp("k8s-checkpoints")


class TestKubernetes(SandboxConformance):
    """The native path: every command through ``pods/exec``."""

    @pytest.fixture
    def sandbox_config(
        self, k8s_emulator: Any, docker_image: str, checkpoint_dir: Path
    ) -> SandboxConfig:
        return _config(k8s_emulator, docker_image, "off", checkpoint_dir)


class TestKubernetesAgent(SandboxConformance):
    """The agent path: every call through the agent at the pod's IP."""

    @pytest.fixture
    def sandbox_config(
        self, k8s_emulator: Any, docker_image: str, checkpoint_dir: Path
    ) -> SandboxConfig:
        return _config(k8s_emulator, docker_image, "on", checkpoint_dir)
