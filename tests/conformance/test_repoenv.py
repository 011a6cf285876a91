"""The conformance suite through ``repoenv``: a bundled R2E-Gym entry on each engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sandbox_runtime import SandboxConfig
from sandbox_runtime.backend_kit.testing import SandboxConformance
from sandbox_runtime.swe.dataset import load_rows


def _entry() -> dict[str, Any]:
    return next(r for r in load_rows("bundled") if r.get("repo_name") == "csvline")


class TestRepoEnvOnLocal(SandboxConformance):
    shares_absolute_paths = False

    @pytest.fixture
    def sandbox_config(self, tmp_path: Path) -> SandboxConfig:
        return SandboxConfig(
            backend="repoenv",
            options={
                "ds": _entry(),
                "engine": "local",
                # As tests/conformance/test_local.py: the suite's no-namespace expectations.
                "engine_options": {"base_dir": tmp_path / "sandboxes", "isolation": "none"},
            },
        )


@pytest.mark.docker
class TestRepoEnvOnDocker(SandboxConformance):
    @pytest.fixture
    def sandbox_config(self, docker_image: str) -> SandboxConfig:
        return SandboxConfig(
            backend="repoenv",
            lifetime=600,
            options={"ds": _entry(), "engine": "docker", "base_image": docker_image},
        )
