"""Leases on Kubernetes (docs/leases.md), through the emulator with real containers: the pod's
timer ends it at its moved end, its labels move for ``reap``, ``activeDeadlineSeconds`` (which
a pod never lets grow) carries the hard cap, and the emulator answers a pod PATCH as the API
server does."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from sandbox_runtime import SandboxConfig, SandboxGoneError, SandboxRuntime
from sandbox_runtime.backends.kubernetes import KubernetesBackend
from sandbox_runtime.errors import LifetimeCapError

pytestmark = pytest.mark.docker

EXPIRES = "sandbox-runtime.io/expires-at"


@pytest.fixture
def core(k8s_emulator: Any) -> Any:
    """The unmodified client's CoreV1Api, pointed at the emulator."""
    import kubernetes.client

    configuration = kubernetes.client.Configuration()
    configuration.host = k8s_emulator.url
    configuration.ssl_ca_cert = str(k8s_emulator.ca_file)
    configuration.api_key = {"authorization": f"Bearer {k8s_emulator.token.get_secret_value()}"}
    return kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(configuration))


def _config(emulator: Any, image: str, **changes: Any) -> SandboxConfig:
    fields: dict[str, Any] = {"backend": "kubernetes", "image": image, "workdir": "/testbed"}
    fields.update(changes)
    return SandboxConfig(**fields, options=emulator.backend_options())


def _pod(core: Any, name: str) -> dict[str, Any]:
    return dict(json.loads(core.read_namespaced_pod(name, "default", _preload_content=False).data))


def test_an_extended_pod_outlives_its_first_lifetime_and_reap_leaves_it(
    k8s_emulator: Any, core: Any, docker_image: str
) -> None:
    config = _config(k8s_emulator, docker_image, lifetime=4, max_lifetime=60)
    with SandboxRuntime(config) as sandbox:
        assert _pod(core, sandbox.id)["spec"]["activeDeadlineSeconds"] == 60
        began = time.time()
        end = sandbox.extend(6)
        annotations = _pod(core, sandbox.id)["metadata"]["annotations"]
        assert int(annotations[EXPIRES]) == pytest.approx(end, abs=1)
        time.sleep(max(0.0, began + 6 - time.time()))  # past the first lifetime
        assert sandbox.exec("echo still").stdout == "still\n"
        reaped = KubernetesBackend.reap(sandbox.backend.options, dry_run=True)
        assert sandbox.id not in {found.sandbox_id for found in reaped}
        deadline = time.monotonic() + 20
        while sandbox.is_alive():
            assert time.monotonic() < deadline, "the pod outlived its extended end"
            time.sleep(0.2)
        assert time.time() >= end - 1
        with pytest.raises(SandboxGoneError) as caught:
            sandbox.exec("true")
        assert caught.value.cause == "expired"


def test_without_max_lifetime_the_deadline_is_the_lifetime_and_extension_is_refused(
    k8s_emulator: Any, core: Any, docker_image: str
) -> None:
    with SandboxRuntime(_config(k8s_emulator, docker_image, lifetime=300)) as sandbox:
        with pytest.raises(LifetimeCapError):
            sandbox.extend(60)
        sandbox.set_lifetime(100)  # shorter is always allowed
        annotations = _pod(core, sandbox.id)["metadata"]["annotations"]
        assert int(annotations[EXPIRES]) == pytest.approx(time.time() + 100, abs=3)


def test_the_emulator_patches_a_pod_as_the_api_server_does(
    k8s_emulator: Any, core: Any, docker_image: str
) -> None:
    from kubernetes.client.exceptions import ApiException

    with SandboxRuntime(_config(k8s_emulator, docker_image, lifetime=60)) as sandbox:
        core.patch_namespaced_pod(sandbox.id, "default", {"metadata": {"labels": {"a": "b"}}})
        assert _pod(core, sandbox.id)["metadata"]["labels"]["a"] == "b"
        core.patch_namespaced_pod(sandbox.id, "default", {"spec": {"activeDeadlineSeconds": 50}})
        assert _pod(core, sandbox.id)["spec"]["activeDeadlineSeconds"] == 50
        with pytest.raises(ApiException) as raised:
            core.patch_namespaced_pod(
                sandbox.id, "default", {"spec": {"activeDeadlineSeconds": 500}}
            )
        assert raised.value.status == 422
        assert "less than or equal to previous value" in str(raised.value.body)
        with pytest.raises(ApiException) as forbidden:
            core.patch_namespaced_pod(sandbox.id, "default", {"spec": {"restartPolicy": "Always"}})
        assert forbidden.value.status == 422


def test_a_deleted_pod_is_gone_with_cause_killed(
    k8s_emulator: Any, core: Any, docker_image: str
) -> None:
    with SandboxRuntime(_config(k8s_emulator, docker_image, lifetime=300)) as sandbox:
        core.delete_namespaced_pod(sandbox.id, "default", grace_period_seconds=0)
        with pytest.raises(SandboxGoneError) as caught:
            sandbox.exec("true")
        assert caught.value.cause == "killed"


def test_episodes_running_twice_the_lifetime_are_graded_none_lost(k8s_emulator: Any) -> None:
    from sandbox_runtime.swe import read_rows
    from sandbox_runtime.swe.dataset import load_rows
    from sandbox_runtime.swe.images import build_sample_image
    from sandbox_runtime.swe.runner import Runner, RunOptions
    from tests.conftest import DOCKER_IMAGE
    from tests.reliability.test_leases import SlowOracle
    from tests.swe.conftest import task_named

    build_sample_image("pricing", base=DOCKER_IMAGE)
    task = task_named(read_rows(load_rows("bundled")).tasks, "pricing", "r2e")
    options = RunOptions(
        backend="kubernetes",
        backend_options=k8s_emulator.backend_options(),
        lifetime=4,
        max_lifetime=600,  # the pod's deadline: without it a pod cannot be extended
        test_timeout=60,
        jobs=2,
    )
    outcomes = Runner([task, task], lambda: SlowOracle(8), options).run()
    assert [outcome.reward for outcome in outcomes] == [1.0, 1.0], [o.reason for o in outcomes]
    assert all(outcome.timings["agent"] >= 8 for outcome in outcomes)
