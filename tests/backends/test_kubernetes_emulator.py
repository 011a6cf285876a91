"""The Kubernetes emulator driven by the unmodified ``kubernetes`` client, with no backend
code in between: what the backend's tests rely on is checked on the wire here."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

pytestmark = pytest.mark.docker


@pytest.fixture
def core(k8s_emulator: Any, tmp_path: Any) -> Any:
    """A CoreV1Api from a kubeconfig the emulator wrote, loaded by the client's own loader."""
    from kubernetes import client, config

    path = k8s_emulator.write_kubeconfig(tmp_path / "kubeconfig")
    loaders: Any = config  # typed in some client releases, untyped in others
    return client.CoreV1Api(loaders.new_client_from_config(str(path)))


def _pod(name: str, image: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": image, "command": ["sleep", "120"]}],
        },
    }


def _status_of(exc: Any) -> dict[str, Any]:
    return dict(json.loads(exc.body))


def _wait_phase(core: Any, name: str, phase: str, within: float = 30) -> Any:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        pod = core.read_namespaced_pod(name, "default")
        if pod.status.phase == phase:
            return pod
        time.sleep(0.1)
    raise AssertionError(f"pod {name} never reached {phase}")


def test_create_get_list_select_and_delete(core: Any, docker_image: str) -> None:
    from kubernetes.client.exceptions import ApiException

    core.create_namespaced_pod("default", _pod("wire-a", docker_image, {"app": "a", "tier": "x"}))
    core.create_namespaced_pod("default", _pod("wire-b", docker_image, {"app": "b"}))
    try:
        pod = _wait_phase(core, "wire-a", "Running")
        assert pod.status.container_statuses[0].state.running is not None
        assert pod.status.container_statuses[0].ready
        assert pod.spec.node_name

        def names(selector: str) -> list[str]:
            items = core.list_namespaced_pod("default", label_selector=selector).items
            return sorted(p.metadata.name for p in items if p.metadata.name.startswith("wire-"))

        assert names("app=a") == ["wire-a"]
        assert names("app in (a,b)") == ["wire-a", "wire-b"]
        assert names("app notin (a)") == ["wire-b"]
        assert names("app!=a") == ["wire-b"]
        assert names("tier") == ["wire-a"]
        assert names("!tier") == ["wire-b"]
        assert names("app=a,tier=x") == ["wire-a"]
        with pytest.raises(ApiException) as bad:
            core.list_namespaced_pod("default", label_selector="app in (a")
        assert bad.value.status == 400
        limited = core.list_namespaced_pod("default", limit=1)
        assert len(limited.items) == 1
        assert limited.metadata._continue

        with pytest.raises(ApiException) as conflict:
            core.create_namespaced_pod("default", _pod("wire-a", docker_image))
        assert conflict.value.status == 409
        assert _status_of(conflict.value)["reason"] == "AlreadyExists"
    finally:
        core.delete_namespaced_pod("wire-a", "default", grace_period_seconds=0)
        core.delete_namespaced_pod("wire-b", "default", grace_period_seconds=0)
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_pod("wire-a", "default")
    status = _status_of(missing.value)
    assert missing.value.status == 404
    assert (status["kind"], status["reason"], status["details"]["kind"]) == (
        "Status",
        "NotFound",
        "pods",
    )


def test_invalid_pod_is_422_with_causes(core: Any, docker_image: str) -> None:
    from kubernetes.client.exceptions import ApiException

    with pytest.raises(ApiException) as invalid:
        core.create_namespaced_pod("default", _pod("Bad_Name", docker_image, {"k": "-bad-"}))
    status = _status_of(invalid.value)
    assert invalid.value.status == 422
    assert status["reason"] == "Invalid"
    fields = {cause["field"] for cause in status["details"]["causes"]}
    assert {"metadata.name", "metadata.labels"} <= fields


def test_exec_streams_exit_codes_and_bytes(core: Any, docker_image: str) -> None:
    from kubernetes.stream import stream

    core.create_namespaced_pod("default", _pod("wire-exec", docker_image))
    try:
        _wait_phase(core, "wire-exec", "Running")
        # The client's simplest form: all output, as text.
        text = stream(
            core.connect_get_namespaced_pod_exec,
            "wire-exec",
            "default",
            command=["sh", "-c", "echo hello"],
            stderr=True,
            stdin=False,
            stdout=True,
            tty=False,
        )
        assert text == "hello\n"
        # Binary mode with stdin, separate channels and the exit code from the error channel.
        # Clients from 36.0 offer v5 (stdin can be closed); older ones offer only v4, so the
        # command reads a known number of bytes instead of waiting for end of input.
        from kubernetes.stream import ws_client

        offers_v5 = hasattr(ws_client, "V5_CHANNEL_PROTOCOL")
        client = stream(
            core.connect_get_namespaced_pod_exec,
            "wire-exec",
            "default",
            command=["sh", "-c", "printf 'a\\000\\377'; echo oops >&2; head -c 3; exit 3"],
            stderr=True,
            stdin=True,
            stdout=True,
            tty=False,
            _preload_content=False,
            binary=True,
        )
        headers = {k.lower(): v for k, v in client.sock.getheaders().items()}
        protocol = headers["sec-websocket-protocol"]
        assert protocol == ("v5.channel.k8s.io" if offers_v5 else "v4.channel.k8s.io")
        client.write_stdin(b"in\xfe")
        if offers_v5:
            client.sock.send(bytes([255, 0]), opcode=0x2)  # v5 close signal for stdin
        client.run_forever(timeout=20)
        assert client.read_stdout() == b"a\x00\xffin\xfe"
        assert client.read_stderr() == b"oops\n"
        assert client.returncode == 3
    finally:
        core.delete_namespaced_pod("wire-exec", "default", grace_period_seconds=0)


def test_missing_image_is_reported_in_container_status(core: Any) -> None:
    core.create_namespaced_pod("default", _pod("wire-pull", "sandbox-runtime-test/nope:none"))
    try:
        deadline, reasons = time.monotonic() + 20, set()
        while time.monotonic() < deadline and "ImagePullBackOff" not in reasons:
            pod = core.read_namespaced_pod("wire-pull", "default")
            assert pod.status.phase == "Pending"
            for status in pod.status.container_statuses or []:
                if status.state.waiting is not None:
                    reasons.add(status.state.waiting.reason)
            time.sleep(0.2)
        assert {"ErrImagePull", "ImagePullBackOff"} <= reasons
    finally:
        core.delete_namespaced_pod("wire-pull", "default", grace_period_seconds=0)


def test_wrong_token_is_401_unauthorized(k8s_emulator: Any) -> None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    configuration = client.Configuration()
    configuration.host = k8s_emulator.url
    configuration.ssl_ca_cert = str(k8s_emulator.ca_file)
    configuration.api_key = {"authorization": "Bearer not-the-token"}
    api = client.CoreV1Api(client.ApiClient(configuration))
    with pytest.raises(ApiException) as refused:
        api.list_namespaced_pod("default")
    assert refused.value.status == 401
    assert _status_of(refused.value)["reason"] == "Unauthorized"
    assert "not-the-token" not in str(refused.value)
    # /version stays public, as on a default cluster.
    assert client.VersionApi(client.ApiClient(configuration)).get_code().major == "1"


_CLOSE_AND_EXIT = """
import sys, time
from kubernetes import client, config
from sandbox_runtime_emulators.kubernetes import KubernetesEmulator

image, path = sys.argv[1], sys.argv[2]
with KubernetesEmulator() as emulator:
    core = client.CoreV1Api(config.new_client_from_config(str(emulator.write_kubeconfig(path))))
    for index in range(3):
        core.create_namespaced_pod("default", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"leak-{index}"},
            "spec": {"restartPolicy": "Never",
                     "containers": [{"name": "main", "image": image, "command": ["sleep", "120"]}]},
        })
    while core.read_namespaced_pod("leak-0", "default").status.phase != "Running":
        time.sleep(0.05)
    core.delete_namespaced_pod("leak-0", "default", grace_period_seconds=0)
    core.delete_namespaced_pod("leak-1", "default", grace_period_seconds=0)
    print(emulator.store.runtime.api.version()["Version"], flush=True)
# The interpreter exits right away: daemon threads still removing containers would die here.
"""


def test_an_emulator_process_leaves_no_container_behind(docker_image: str, tmp_path: Any) -> None:
    """Deletions in flight and pods still starting are finished by close(), before exit."""
    import subprocess
    import sys

    import docker

    done = subprocess.run(
        [sys.executable, "-c", _CLOSE_AND_EXIT, docker_image, str(tmp_path / "kubeconfig")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    api = docker.APIClient(version="auto")
    try:
        left = api.containers(all=True, filters={"name": "k8s-emu_default_leak-"})
    finally:
        api.close()
    assert [c["Names"] for c in left] == []


def test_change_log_replays_after_a_version_and_expires_what_it_no_longer_keeps() -> None:
    """What watches are served from: one counter, a bounded history, 410 past its start."""
    from sandbox_runtime_emulators.kubernetes._changes import ChangeLog

    changes = ChangeLog(keep=3)
    objects = [{"metadata": {"name": f"p{index}"}} for index in range(5)]
    for obj in objects:
        changes.record("pods", "ADDED", obj)
    assert [obj["metadata"]["resourceVersion"] for obj in objects] == ["1", "2", "3", "4", "5"]
    assert [change.obj["metadata"]["name"] for change in changes.since(2) or []] == [
        "p2",
        "p3",
        "p4",
    ]
    assert changes.since(5) == []
    assert changes.since(1) is None  # version 2 is no longer kept: the watch gets 410 Expired
    objects[4]["metadata"]["name"] = "changed later"
    assert (changes.since(4) or [])[0].obj["metadata"]["name"] == "p4"  # a copy was kept
