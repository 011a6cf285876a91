"""Fixtures of the SWE tests: the bundled tasks, and sandboxes prepared for them."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox_runtime import SandboxRuntime
from sandbox_runtime.swe import Task, read_rows
from sandbox_runtime.swe.dataset import load_rows
from sandbox_runtime.swe.images import resolve_image
from sandbox_runtime.swe.prepare import prepare
from sandbox_runtime.swe.runner import backend_capabilities


@pytest.fixture(scope="session", autouse=True)
def _sample_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Build sample templates in a per-session cache, not the user's ~/.cache."""
    old = os.environ.get("SANDBOX_RUNTIME_CACHE")
    os.environ["SANDBOX_RUNTIME_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if old is None:
        os.environ.pop("SANDBOX_RUNTIME_CACHE", None)
    else:
        os.environ["SANDBOX_RUNTIME_CACHE"] = old


@pytest.fixture(scope="session")
def bundled_tasks() -> list[Task]:
    result = read_rows(load_rows("bundled"))
    assert not result.errors
    return result.tasks


def task_named(tasks: list[Task], sample: str, fmt: str) -> Task:
    return next(t for t in tasks if sample in t.task_id and t.format == fmt)


def open_prepared(task: Task, backend: str = "local") -> SandboxRuntime:
    image = resolve_image(task, backend_capabilities(backend, {}))
    env = dict(task.env)
    if backend == "local":
        # local sandboxes run the host's python: make it this one, which has pytest, whatever
        # python the user's shell would find first (an activated venv without pytest).
        env.setdefault("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    sandbox = SandboxRuntime(backend=backend, image=image, workdir=task.workdir, env=env).start()
    prepare(task, sandbox)
    sandbox.base_commit()
    return sandbox


@pytest.fixture
def local_base_dir(tmp_path: Path) -> Path:
    return tmp_path
