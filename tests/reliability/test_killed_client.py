"""A client killed with SIGKILL at any moment of a start leaves nothing ``reap`` cannot find.

For each backend, a child process opens a sandbox and is killed after a delay that lands in
each phase of the start (before the engine call, while the container/pod/instance is being
made, while it boots, while the workdir is prepared, after it is ready).  Every sandbox made
carries its ownership record from the first moment, so one ``reap`` afterwards finds them all:
the count left is 0, whatever the phase.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox_runtime import list_sandboxes, load_backend
from tests.conftest import DOCKER_IMAGE, bwrap_problem, require

pytestmark = [pytest.mark.slow]

#: Seconds after the child starts at which it is killed: from before any engine call to well
#: after the sandbox is ready (each backend's start takes 0.1-1.5 s here).
DELAYS = (0.0, 0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.8, 1.2, 2.0, 3.5)

_CHILD = """
import json, sys, time
from sandbox_runtime import SandboxRuntime
config = json.loads(sys.argv[1])
print("ready", flush=True)
SandboxRuntime(**config).start()
print("started", flush=True)
time.sleep(120)
"""


def _kill_during_start(config: dict[str, Any], delay: float) -> str:
    """Start a sandbox in a child process and SIGKILL it ``delay`` s later; what it printed."""
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, json.dumps(config)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"  # imports done: the start begins now
    time.sleep(delay)
    child.send_signal(signal.SIGKILL)
    child.wait(30)
    return child.stdout.read()


def _check_nothing_left(
    backend: str,
    config_for: Callable[[str], dict[str, Any]],
    options: dict[str, Any],
    leftovers: Callable[[str], int],
    *,
    slow_start: bool = True,
) -> None:
    run_id = f"killed-{uuid.uuid4().hex[:10]}"
    outcomes = [_kill_during_start(config_for(run_id), delay) for delay in DELAYS]
    assert any("started" in text for text in outcomes)  # the later kills hit a ready sandbox
    if slow_start:  # the earlier kills interrupt the start itself
        assert any("started" not in text for text in outcomes)
    backend_cls = load_backend(backend)
    validated = backend_cls.options_model.model_validate(options)
    deadline = time.monotonic() + 60
    while True:
        # A start the kill interrupted may still be completing on the service side; reap
        # again until the service has settled.
        backend_cls.reap(validated)
        left = leftovers(run_id)
        if left == 0 or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert left == 0
    assert [i for i in list_sandboxes(backend, options=options) if i.run_id == run_id] == []


def test_local(tmp_path: Path) -> None:
    base = tmp_path / "boxes"
    options = {"base_dir": str(base)}

    def config_for(run_id: str) -> dict[str, Any]:
        return {"backend": "local", "run_id": run_id, "options": options}

    def leftovers(run_id: str) -> int:
        return len(list(base.glob("sbx-*"))) if base.exists() else 0

    # A plain local start takes milliseconds: the kills may all land after it.
    _check_nothing_left("local", config_for, options, leftovers, slow_start=False)


def test_local_with_namespaces_and_a_template(tmp_path: Path) -> None:
    require(bwrap_problem())
    template = tmp_path / "template"
    for i in range(200):  # a template that takes a moment to copy
        (template / "testbed" / f"d{i % 10}").mkdir(parents=True, exist_ok=True)
        (template / "testbed" / f"d{i % 10}" / f"f{i}.py").write_text("x = 1\n" * 200)
    base = tmp_path / "boxes"
    options = {"base_dir": str(base), "isolation": "namespace"}

    def config_for(run_id: str) -> dict[str, Any]:
        return {
            "backend": "local",
            "image": str(template),
            "workdir": "/testbed",
            "run_id": run_id,
            "options": options,
        }

    _check_nothing_left("local", config_for, options, lambda _r: len(list(base.glob("sbx-*"))))


def test_docker(docker_image: str) -> None:
    import docker

    client = docker.from_env()

    def leftovers(run_id: str) -> int:
        found = client.containers.list(
            all=True, filters={"label": f"sandbox-runtime.run-id={run_id}"}
        )
        return len(found)

    _check_nothing_left(
        "docker",
        lambda run_id: {"backend": "docker", "image": docker_image, "run_id": run_id},
        {},
        leftovers,
    )


@pytest.fixture
def k8s(docker_image: str) -> Iterator[Any]:
    from tests.conftest import kubernetes_problem

    require(kubernetes_problem())
    from sandbox_runtime_emulators.kubernetes import KubernetesEmulator

    with KubernetesEmulator() as running:
        yield running


def test_kubernetes(k8s: Any, tmp_path: Path) -> None:
    kubeconfig = str(k8s.write_kubeconfig(tmp_path / "kubeconfig"))
    options = {"kubeconfig": kubeconfig}

    def leftovers(run_id: str) -> int:
        return len(k8s.store.list_pods(None, f"sandbox-runtime.io/run-id={run_id}"))

    _check_nothing_left(
        "kubernetes",
        lambda run_id: {
            "backend": "kubernetes",
            "image": DOCKER_IMAGE,
            "run_id": run_id,
            "options": options,
        },
        options,
        leftovers,
    )


def test_ags() -> None:
    require(bwrap_problem())
    from sandbox_runtime._core.ownership import RUN_ID
    from sandbox_runtime_emulators.ags.server import AgsEmulator

    with AgsEmulator(backend="local", local_isolation="namespace") as emulator:
        options = emulator.backend_options()
        plain = {
            k: v.get_secret_value() if hasattr(v, "get_secret_value") else v
            for k, v in options.items()
        }

        def leftovers(run_id: str) -> int:
            with emulator.store.lock:
                return sum(
                    1
                    for i in emulator.store.instances.values()
                    if i.status in ("STARTING", "RUNNING") and i.metadata.get(RUN_ID) == run_id
                )

        _check_nothing_left(
            "ags",
            lambda run_id: {
                "backend": "ags",
                "workdir": "/testbed",
                "run_id": run_id,
                "options": plain,
            },
            plain,
            leftovers,
        )
