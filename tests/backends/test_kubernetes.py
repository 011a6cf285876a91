"""Kubernetes-specific behaviour beyond the conformance suite, against the emulator with real
Docker containers behind its pods: labels, lifetime, reaping, start failures, credentials,
and the v4 exec protocol fallback."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox_runtime import (
    BackendUnavailableError,
    SandboxConfig,
    SandboxGoneError,
    SandboxRuntime,
    SandboxStartError,
    SandboxTimeoutError,
)
from sandbox_runtime._core import ownership
from sandbox_runtime.cli import main as cli_main

pytestmark = pytest.mark.docker


@pytest.fixture
def core(k8s_emulator: Any) -> Any:
    """The unmodified client's CoreV1Api, pointed at the emulator."""
    import kubernetes.client

    configuration = kubernetes.client.Configuration()
    configuration.host = k8s_emulator.url
    configuration.ssl_ca_cert = str(k8s_emulator.ca_file)
    configuration.api_key = {"authorization": f"Bearer {k8s_emulator.token.get_secret_value()}"}
    return kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(configuration))


@pytest.fixture
def kubeconfig(k8s_emulator: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A kubeconfig for the emulator, also exported as KUBECONFIG (reap reads it)."""
    path: Path = k8s_emulator.write_kubeconfig(tmp_path / "kubeconfig")
    monkeypatch.setenv("KUBECONFIG", str(path))
    return path


def _config(emulator: Any, image: str, **changes: Any) -> SandboxConfig:
    options = emulator.backend_options(**changes.pop("options", {}))
    fields: dict[str, Any] = {"backend": "kubernetes", "image": image, "workdir": "/testbed"}
    fields.update(changes)
    return SandboxConfig(**fields, options=options)


def _pod(core: Any, name: str) -> dict[str, Any] | None:
    from kubernetes.client.exceptions import ApiException

    try:
        response = core.read_namespaced_pod(name, "default", _preload_content=False)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return dict(json.loads(response.data))


def _wait(predicate: Any, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def test_labels_annotations_and_spec(k8s_emulator: Any, core: Any, docker_image: str) -> None:
    long_value = "x" * 80
    config = _config(
        k8s_emulator,
        docker_image,
        resources={"cpus": 0.5, "memory": "128m"},
        labels={"team": "rl", "note": long_value},
        run_id="run-42",
        lifetime=300,
        env={"FROM_CONFIG": "yes"},
    )
    with SandboxRuntime(config) as sandbox:
        pod = _pod(core, sandbox.id)
        assert pod is not None
        labels, annotations = pod["metadata"]["labels"], pod["metadata"]["annotations"]
        assert labels["sandbox-runtime.io/managed"] == "true"
        assert labels["sandbox-runtime.io/backend"] == "kubernetes"
        assert labels["sandbox-runtime.io/owner-pid"] == str(os.getpid())
        assert labels["sandbox-runtime.io/run-id"] == "run-42"
        assert labels["team"] == "rl"
        assert "note" not in labels
        assert annotations["note"] == long_value
        created = int(annotations["sandbox-runtime.io/created-at"])
        assert int(annotations["sandbox-runtime.io/expires-at"]) - created == 300
        assert annotations["sandbox-runtime.io/owner-host"] == ownership.current_owner().host
        spec = pod["spec"]
        assert spec["restartPolicy"] == "Never"
        assert spec["activeDeadlineSeconds"] == 300
        assert spec["automountServiceAccountToken"] is False
        container = spec["containers"][0]
        # The timer that ends the pod, after the agent's starter (agent "auto").
        assert container["command"][0] == "/bin/sh"
        assert container["command"][4] == "300"
        # The agent's own directory: a random name, not below a /tmp a volume may share.
        assert container["command"][5].startswith("/.sandbox-runtime/")
        # The main process: the lifetime timer (docs/leases.md), capped at the deadline.
        assert 'shift 3; exec "$@"' in container["command"][2]
        assert "sandbox-runtime-timer" in container["command"]
        assert container["resources"]["limits"] == {"cpu": "500m", "memory": str(128 * 1024**2)}
        assert container["resources"]["requests"] == container["resources"]["limits"]
        assert pod["status"]["qosClass"] == "Guaranteed"
        assert sandbox.exec("echo $FROM_CONFIG").stdout == "yes\n"
        # The limits are real: Docker got them from the pod spec.
        docker_id = pod["status"]["containerStatuses"][0]["containerID"].removeprefix("docker://")
        import docker

        host = docker.APIClient(version="auto").inspect_container(docker_id)["HostConfig"]
        assert host["NanoCpus"] == 500_000_000
        assert host["Memory"] == 128 * 1024**2


def test_sandbox_ends_itself_at_its_lifetime(
    k8s_emulator: Any, core: Any, docker_image: str
) -> None:
    sandbox = SandboxRuntime(_config(k8s_emulator, docker_image, lifetime=3)).start()
    try:
        assert sandbox.is_alive()
        assert _wait(lambda: not sandbox.is_alive(), within=20), "the pod outlived its lifetime"
        pod = _pod(core, sandbox.id)
        assert pod is not None
        assert pod["status"]["phase"] in ("Succeeded", "Failed")
        with pytest.raises(SandboxGoneError):
            sandbox.exec("true")
    finally:
        sandbox.close()
    assert _pod(core, sandbox.id) is None


def test_active_deadline_fails_the_pod(core: Any, docker_image: str) -> None:
    """activeDeadlineSeconds alone ends a pod whose command would run on (emulator check)."""
    body = {
        "metadata": {"name": "deadline-check"},
        "spec": {
            "restartPolicy": "Never",
            "activeDeadlineSeconds": 2,
            "containers": [{"name": "main", "image": docker_image, "command": ["sleep", "600"]}],
        },
    }
    core.create_namespaced_pod("default", body)
    try:
        assert _wait(
            lambda: (_pod(core, "deadline-check") or {})["status"].get("phase") == "Failed", 20
        )
        status = (_pod(core, "deadline-check") or {})["status"]
        assert status["reason"] == "DeadlineExceeded"
        assert _wait(
            lambda: (
                "terminated"
                in (_pod(core, "deadline-check") or {})["status"]["containerStatuses"][0]["state"]
            ),
            10,
        )
    finally:
        core.delete_namespaced_pod("deadline-check", "default", grace_period_seconds=0)


ABANDON = textwrap.dedent(
    """
    import sys, time
    from sandbox_runtime import SandboxRuntime
    sandbox = SandboxRuntime(backend="kubernetes", image=sys.argv[1], lifetime=600).start()
    print(sandbox.id, flush=True)
    time.sleep(600)
    """
)


def test_reap_removes_pods_of_a_killed_client_and_nothing_else(
    k8s_emulator: Any,
    core: Any,
    kubeconfig: Path,
    docker_image: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", ABANDON, docker_image], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    orphan = child.stdout.readline().strip()
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert orphan
    assert _pod(core, orphan) is not None, "the pod must outlive its killed client"
    foreign = {
        "metadata": {"name": "foreign", "labels": {"owner": "someone-else"}},
        "spec": {"containers": [{"name": "c", "image": docker_image, "command": ["sleep", "600"]}]},
    }
    remote_labels = {
        "sandbox-runtime.io/managed": "true",
        "sandbox-runtime.io/backend": "kubernetes",
    }
    remote = {
        "metadata": {
            "name": "remote",
            "labels": remote_labels,
            "annotations": {
                "sandbox-runtime.io/owner-host": "elsewhere",
                "sandbox-runtime.io/owner-pid": "1",
                "sandbox-runtime.io/expires-at": str(int(time.time()) + 600),
            },
        },
        "spec": {"containers": [{"name": "c", "image": docker_image, "command": ["sleep", "600"]}]},
    }
    core.create_namespaced_pod("default", foreign)
    core.create_namespaced_pod("default", remote)
    try:
        with SandboxRuntime(backend="kubernetes", image=docker_image) as live:
            assert cli_main(["reap", "--backend", "kubernetes", "--dry-run"]) == 0
            assert _pod(core, orphan) is not None
            assert cli_main(["reap", "--backend", "kubernetes"]) == 0
            output = capsys.readouterr().out
            assert f"removed kubernetes {orphan} (" in output
            assert "owner process" in output
            assert _pod(core, orphan) is None
            assert _pod(core, "foreign") is not None, "reap touched a pod it did not create"
            assert _pod(core, "remote") is not None, "reap removed a live pod owned elsewhere"
            assert live.exec("echo still-here").stdout == "still-here\n"
    finally:
        core.delete_namespaced_pod("foreign", "default", grace_period_seconds=0)
        core.delete_namespaced_pod("remote", "default", grace_period_seconds=0)


def test_reap_removes_ended_pods(k8s_emulator: Any, core: Any, docker_image: str) -> None:
    from sandbox_runtime.backends.kubernetes import KubernetesBackend, KubernetesOptions

    sandbox = SandboxRuntime(_config(k8s_emulator, docker_image, lifetime=2)).start()
    assert _wait(lambda: not sandbox.is_alive(), within=20)
    options = KubernetesOptions(**k8s_emulator.backend_options())
    reaped = KubernetesBackend.reap(options)
    reasons = [r.reason for r in reaped if r.sandbox_id == sandbox.id]
    # Its expiry and its end fall together here; either reason is right.
    assert reasons
    assert reasons[0] == "expired" or reasons[0].startswith("ended (")
    assert _pod(core, sandbox.id) is None
    sandbox.close()  # the pod is gone already: closing is still fine


def test_missing_image_is_a_clear_start_error_and_leaves_no_pod(
    k8s_emulator: Any, core: Any, docker_image: str
) -> None:
    config = _config(k8s_emulator, "sandbox-runtime-test/does-not-exist:nope", start_timeout=60)
    began = time.monotonic()
    with pytest.raises(SandboxStartError, match="ErrImagePull") as raised:
        SandboxRuntime(config).start()
    assert time.monotonic() - began < 15, "an image that cannot be pulled must fail fast"
    assert "does-not-exist" in str(raised.value)
    leftovers = core.list_namespaced_pod(
        "default", label_selector=f"sandbox-runtime.io/owner-pid={os.getpid()}"
    ).items
    assert all(
        pod.metadata.deletion_timestamp or pod.status.phase == "Running" for pod in leftovers
    ), "the failed pod was left behind"
    assert not [p for p in leftovers if p.spec.containers[0].image.endswith("does-not-exist:nope")]


def test_a_start_that_pulled_its_image_counts_the_pull(
    k8s_emulator: Any, docker_image: str, tmp_path: Path
) -> None:
    """Accounting's ``pulls`` on kubernetes: the kubelet's ``Pulling`` events of the pod."""
    import docker

    from tests.backends.local_registry import LocalRegistry, registry_problem
    from tests.conftest import require

    require(registry_problem())
    registry = LocalRegistry(tmp_path)
    client = docker.from_env(timeout=120)
    image = f"127.0.0.1:{registry.port}/sandbox-runtime-test/k8s-pull:{os.getpid()}"
    try:
        client.images.get(docker_image).tag(image)
        client.images.push(image)
        client.images.remove(image)  # the node no longer has it: the pod's start pulls it
        with SandboxRuntime(_config(k8s_emulator, image)) as pulled:
            assert pulled.exec("echo hi").stdout == "hi\n"
            assert pulled.usage.pulls == 1
        with SandboxRuntime(_config(k8s_emulator, image)) as cached:
            assert cached.usage.pulls == 0  # present on the node: no Pulling event
    finally:
        with contextlib.suppress(docker.errors.DockerException):
            client.images.remove(image)
        client.close()
        registry.close()


def test_unschedulable_pod_times_out_with_the_reason(k8s_emulator: Any, docker_image: str) -> None:
    config = _config(
        k8s_emulator,
        docker_image,
        start_timeout=2,
        options={"node_selector": {"pool": "gpu"}},
    )
    with pytest.raises(SandboxTimeoutError, match="Unschedulable"):
        SandboxRuntime(config).start()


def test_pod_deleted_behind_our_back_is_gone(
    k8s_emulator: Any, core: Any, docker_image: str
) -> None:
    with SandboxRuntime(_config(k8s_emulator, docker_image)) as sandbox:
        core.delete_namespaced_pod(sandbox.id, "default", grace_period_seconds=0)
        with pytest.raises(SandboxGoneError):
            sandbox.exec("true")
        assert not sandbox.is_alive()


def test_bad_token_is_a_clear_error_without_the_token(
    k8s_emulator: Any, docker_image: str, caplog: pytest.LogCaptureFixture
) -> None:
    from sandbox_runtime.backends.kubernetes import KubernetesBackend, KubernetesOptions

    secret = "wrong-token-0123456789abcdef"
    caplog.set_level(logging.DEBUG)
    options = k8s_emulator.backend_options(token=secret)
    with pytest.raises(BackendUnavailableError, match="401 Unauthorized") as raised:
        SandboxRuntime(_config(k8s_emulator, docker_image, options={"token": secret})).start()
    assert secret not in str(raised.value)
    availability = KubernetesBackend.availability(KubernetesOptions(**options))
    assert not availability.ok
    assert "401" in availability.reason
    assert secret not in availability.reason
    assert secret not in caplog.text


def test_the_token_option_beats_the_kubeconfigs_own(
    k8s_emulator: Any, docker_image: str, tmp_path: Path
) -> None:
    # The kubeconfig holds a valid token; the option names another identity, which must be
    # the one used (not replaced by the kubeconfig's before each request).
    kubeconfig = str(k8s_emulator.write_kubeconfig(tmp_path / "kubeconfig"))
    config = SandboxConfig(
        backend="kubernetes",
        image=docker_image,
        options={"kubeconfig": kubeconfig, "token": "not-the-kubeconfig-token"},
    )
    with pytest.raises(BackendUnavailableError, match="401 Unauthorized"):
        SandboxRuntime(config).start()
    good = {"kubeconfig": kubeconfig, "token": k8s_emulator.token.get_secret_value()}
    with SandboxRuntime(config.model_copy(update={"options": good})) as sandbox:
        assert sandbox.exec("echo ok").stdout == "ok\n"


def test_token_never_in_reprs_or_logs(
    k8s_emulator: Any, docker_image: str, caplog: pytest.LogCaptureFixture
) -> None:
    from sandbox_runtime.backends.kubernetes import KubernetesOptions

    token = k8s_emulator.token.get_secret_value()
    caplog.set_level(logging.DEBUG)
    config = _config(k8s_emulator, docker_image)
    options = KubernetesOptions(**k8s_emulator.backend_options())
    assert token not in repr(config)
    assert token not in str(config)
    assert token not in repr(options)
    assert token not in repr(k8s_emulator)
    assert token not in options.model_dump_json()
    with SandboxRuntime(config) as sandbox:
        assert sandbox.exec("echo hi").stdout == "hi\n"
        assert token not in repr(sandbox)
    assert token not in caplog.text


def test_retried_create_whose_first_attempt_succeeded_reuses_the_pod(
    k8s_emulator: Any, core: Any, docker_image: str
) -> None:
    from sandbox_runtime.backends.kubernetes import KubernetesBackend, KubernetesOptions

    config = _config(k8s_emulator, docker_image)
    backend = KubernetesBackend(config, KubernetesOptions(**k8s_emulator.backend_options()))
    manifest = backend._manifest()
    backend._create(backend.cluster, manifest)
    backend._started = True
    try:
        backend._create(backend.cluster, manifest)  # 409 for our own name: no error, no twin
        assert _pod(core, backend.sandbox_id) is not None
    finally:
        backend.stop()


@pytest.fixture(scope="module")
def v4_emulator() -> Iterator[Any]:
    """An emulator that speaks only v4.channel.k8s.io, as API servers before v5 do."""
    from tests.conftest import kubernetes_problem, require

    require(kubernetes_problem())
    from sandbox_runtime_emulators.kubernetes import KubernetesEmulator

    with KubernetesEmulator(channel_protocols=("v4.channel.k8s.io",)) as running:
        yield running


def test_v4_only_server_still_gets_stdin_and_files(v4_emulator: Any, docker_image: str) -> None:
    with SandboxRuntime(_config(v4_emulator, docker_image)) as sandbox:
        payload = bytes(range(256)) * 1024
        assert sandbox.exec("cat", stdin=payload).stdout_bytes == payload
        assert sandbox.exec("tr a-z A-Z", stdin="hello\n").stdout == "HELLO\n"
        sandbox.write_bytes("blob.bin", payload)
        assert sandbox.read_bytes("blob.bin") == payload
        assert sandbox.exec("true", stdin=b"").exit_code == 0


def test_cli_emulator_serves_until_interrupted(docker_image: str, tmp_path: Path) -> None:
    from tests.conftest import kubernetes_problem, require

    require(kubernetes_problem())
    from sandbox_runtime.backends.kubernetes import KubernetesBackend, KubernetesOptions

    kubeconfig = tmp_path / "kc"
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sandbox_runtime.cli",
            "kubernetes",
            "emulator",
            "--port",
            "0",
            "--kubeconfig",
            str(kubeconfig),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        lines = [server.stdout.readline() for _ in range(3)]
        assert f"export KUBECONFIG={kubeconfig}\n" in lines
        availability = KubernetesBackend.availability(KubernetesOptions(kubeconfig=str(kubeconfig)))
        assert availability.ok, availability.reason
    finally:
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=30) == 0


def test_cli_emulator_plain_http_and_offline_images_on_request(tmp_path: Path) -> None:
    from tests.conftest import kubernetes_problem, require

    require(kubernetes_problem())
    import kubernetes.client

    kubeconfig = tmp_path / "kc"
    command = [sys.executable, "-m", "sandbox_runtime.cli", "kubernetes", "emulator"]
    flags = ["--port", "0", "--kubeconfig", str(kubeconfig)]
    server = subprocess.Popen(
        [*command, *flags, "--plain-http", "--no-auth", "--offline-images"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        first = server.stdout.readline()
        assert first.startswith("Kubernetes emulator on http://127.0.0.1:")
        assert "offline images" in first
        cluster = json.loads(kubeconfig.read_text())["clusters"][0]["cluster"]
        assert "certificate-authority-data" not in cluster
        configuration = kubernetes.client.Configuration()
        configuration.host = cluster["server"]
        api: Any = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(configuration))
        assert "default" in {ns.metadata.name for ns in api.list_namespace().items}
    finally:
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=30) == 0


def test_a_pod_whose_user_is_not_root_still_gets_its_agent(
    k8s_emulator: Any, nobody_image: str
) -> None:
    """``nobody`` cannot create the agent's directory under ``/``: its files go to the same
    random name under ``/tmp`` (0700, token removed), and calls still go through it ("on")."""
    config = _config(k8s_emulator, nobody_image, workdir="/tmp/work", options={"agent": "on"})
    with SandboxRuntime(config) as sandbox:
        assert sandbox.exec("cat /proc/$PPID/comm").stdout.strip() == "sandbox-agent"
        assert sandbox.exec("id -un").stdout == "nobody\n"
        listing = sandbox.exec("stat -c '%U %a' /tmp/.sandbox-runtime-agent-*/").stdout
        assert listing == "nobody 700\n"
        assert "agent.token" not in sandbox.exec("ls /tmp/.sandbox-runtime-agent-*/").stdout
