"""The conformance suite through ``spread``: the same sandbox whichever member holds it.

Two member lists: local first (every sandbox lands on local; docker is there but never
needed) and docker first (every sandbox on docker, local behind it).  Either way ids are
``MEMBER:ID``, listing and reconnect go through the member, and the capabilities are those
both members share.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox_runtime import SandboxConfig
from sandbox_runtime.backend_kit.testing import SandboxConformance
from tests.conftest import docker_problem, require


@pytest.mark.docker
class TestSpreadLocalFirst(SandboxConformance):
    shares_absolute_paths = False

    @pytest.fixture
    def sandbox_config(self, tmp_path: Path) -> SandboxConfig:
        require(docker_problem())
        members = [
            {
                "backend": "local",
                # As tests/conformance/test_local.py: the suite's no-namespace expectations.
                "options": {"base_dir": str(tmp_path / "sandboxes"), "isolation": "none"},
            },
            {"backend": "docker"},
        ]
        return SandboxConfig(backend="spread", options={"members": members})


@pytest.mark.docker
class TestSpreadDockerFirst(SandboxConformance):
    @pytest.fixture
    def sandbox_config(self, tmp_path: Path, docker_image: str) -> SandboxConfig:
        require(docker_problem())
        members = [
            {"backend": "docker", "max_live": 64},
            {"backend": "local", "image": "", "options": {"base_dir": str(tmp_path / "local")}},
        ]
        return SandboxConfig(
            backend="spread", image=docker_image, lifetime=600, options={"members": members}
        )
