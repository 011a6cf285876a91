"""A task whose image cannot be pulled is an infrastructure error naming the registry, never a 0."""

from __future__ import annotations

import pytest

from sandbox_runtime.swe import Task
from sandbox_runtime.swe.agents.simple import OracleAgent
from sandbox_runtime.swe.runner import Runner, RunOptions
from tests.backends.local_registry import free_port
from tests.swe.conftest import task_named

pytestmark = pytest.mark.docker


def test_an_unpullable_image_is_an_error_outcome(
    bundled_tasks: list[Task], docker_image: str
) -> None:
    where = f"127.0.0.1:{free_port()}"  # nothing listens: the registry is unreachable
    task = task_named(bundled_tasks, "pricing", "r2e").model_copy(
        update={"image": f"{where}/swe/pricing:1"}
    )
    options = RunOptions(backend="docker", test_timeout=60)
    (outcome,) = Runner([task], OracleAgent, options).run()
    assert outcome.reward is None
    assert outcome.error is not None
    assert outcome.error.startswith("ImagePullError")
    assert f"registry {where}" in outcome.error
