"""The unmodified ``kubernetes`` client against the emulator in ``--offline-images`` mode.

Everything here starts from a plain busybox-style manifest (one container, an untagged image,
so ``imagePullPolicy: Always``), over HTTPS with the CA from the kubeconfig the emulator
writes: pod lifecycle, watches, logs, exec with each stream flag, namespaces and service
accounts, as a user would drive them before spending money on a cluster.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def core(offline_k8s_emulator: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A CoreV1Api from the emulator's kubeconfig, loaded by the client's own loader."""
    from kubernetes import client, config

    path = offline_k8s_emulator.write_kubeconfig(tmp_path_factory.mktemp("kc") / "kubeconfig")
    loaders: Any = config
    return client.CoreV1Api(loaders.new_client_from_config(str(path)))


def _busybox(name: str, image: str, command: list[str] | None = None) -> dict[str, Any]:
    """The manifest a user copies from a tutorial: nothing but a name, an image, a command."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [
                {"name": "busybox", "image": image, "command": command or ["sleep", "3600"]}
            ]
        },
    }


def _watcher() -> Any:
    """A ``kubernetes.watch.Watch`` (untyped in the client)."""
    from kubernetes import watch

    module: Any = watch
    return module.Watch()


def _message(exc: Any) -> str:
    """The ``message`` of the Status body an ApiException carries."""
    return str(json.loads(exc.body)["message"])


def _wait(core: Any, name: str, phase: str, namespace: str = "default") -> Any:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pod = core.read_namespaced_pod(name, namespace)
        if pod.status.phase == phase:
            return pod
        time.sleep(0.1)
    raise AssertionError(f"pod {name} never reached {phase}")


@pytest.fixture
def running_pod(core: Any, busybox_like_image: str) -> Iterator[str]:
    name = f"bb-{time.monotonic_ns() % 10**8}"
    core.create_namespaced_pod("default", _busybox(name, busybox_like_image))
    try:
        _wait(core, name, "Running")
        yield name
    finally:
        core.delete_namespaced_pod(name, "default", grace_period_seconds=0)


def test_https_with_the_ca_from_the_kubeconfig(offline_k8s_emulator: Any, tmp_path: Path) -> None:
    import kubernetes.client
    import urllib3

    from sandbox_runtime_emulators.kubernetes import KubernetesEmulator

    kubeconfig = json.loads(offline_k8s_emulator.write_kubeconfig(tmp_path / "kc").read_text())
    cluster = kubeconfig["clusters"][0]["cluster"]
    assert cluster["server"].startswith("https://127.0.0.1:")
    assert base64.b64decode(cluster["certificate-authority-data"]) == offline_k8s_emulator.ca_pem
    # A client that does not trust the emulator's CA refuses the server, as with a cluster.
    untrusting = kubernetes.client.Configuration()
    untrusting.host = offline_k8s_emulator.url
    untrusting.retries = 0
    api = kubernetes.client.VersionApi(kubernetes.client.ApiClient(untrusting))
    with pytest.raises(urllib3.exceptions.MaxRetryError, match="CERTIFICATE_VERIFY_FAILED"):
        api.get_code()
    # Plain HTTP is there when asked for, without a CA.
    with KubernetesEmulator(tls=False) as plain:
        assert plain.url.startswith("http://")
        assert "certificate-authority-data" not in plain.kubeconfig()["clusters"][0]["cluster"]
        assert "ca_cert" not in plain.backend_options()


def test_untagged_image_runs_offline_and_the_events_say_so(
    core: Any, running_pod: str, busybox_like_image: str
) -> None:
    pod = core.read_namespaced_pod(running_pod, "default")
    assert pod.spec.containers[0].image_pull_policy == "Always"
    assert pod.status.container_statuses[0].ready
    events = core.list_namespaced_event(
        "default", field_selector=f"involvedObject.name={running_pod}"
    ).items
    events.sort(key=lambda event: int(event.metadata.resource_version))  # the order they came
    reasons = [event.reason for event in events]
    assert reasons[:1] == ["Scheduled"]
    assert {"Pulled", "Created", "Started"} <= set(reasons)
    assert "Pulling" not in reasons
    pulled = next(event for event in events if event.reason == "Pulled")
    assert "--offline-images" in pulled.message
    assert busybox_like_image in pulled.message
    assert pulled.involved_object.uid == pod.metadata.uid


def test_missing_image_offline_is_never_pulled(core: Any) -> None:
    core.create_namespaced_pod("default", _busybox("bb-missing", "sandbox-runtime-test/absent"))
    try:
        deadline, waiting = time.monotonic() + 20, None
        while time.monotonic() < deadline and waiting is None:
            statuses = core.read_namespaced_pod("bb-missing", "default").status.container_statuses
            waiting = (statuses or [None])[0] and statuses[0].state.waiting
            if waiting is not None and waiting.reason == "ContainerCreating":
                waiting = None
            time.sleep(0.1)
        assert waiting is not None
        assert waiting.reason == "ErrImageNeverPull"
        assert "--offline-images" in waiting.message
    finally:
        core.delete_namespaced_pod("bb-missing", "default", grace_period_seconds=0)


def test_watch_sees_the_pod_lifecycle_with_resource_versions(
    core: Any, busybox_like_image: str
) -> None:
    listed = core.list_namespaced_pod("default")
    since = listed.metadata.resource_version
    core.create_namespaced_pod(
        "default", _busybox("bb-watch", busybox_like_image, ["sh", "-c", "echo done"])
    )
    seen: list[tuple[str, str, int]] = []
    deleting = False
    watcher = _watcher()
    for event in watcher.stream(
        core.list_namespaced_pod,
        "default",
        field_selector="metadata.name=bb-watch",
        resource_version=since,
        timeout_seconds=30,
    ):
        pod = event["object"]
        seen.append((event["type"], pod.status.phase, int(pod.metadata.resource_version)))
        statuses = pod.status.container_statuses or []
        waiting = statuses[0].state.waiting if statuses else None
        if not deleting and waiting is not None and waiting.reason == "CrashLoopBackOff":
            # restartPolicy Always (the default): the ended command is restarted, for ever.
            deleting = True
            core.delete_namespaced_pod("bb-watch", "default", grace_period_seconds=0)
        if event["type"] == "DELETED":
            watcher.stop()
    types = [kind for kind, _phase, _version in seen]
    assert types[0] == "ADDED"
    assert types[-1] == "DELETED"
    assert set(types[1:-1]) == {"MODIFIED"}
    assert "Running" in [phase for _kind, phase, _version in seen]
    versions = [version for _kind, _phase, version in seen]
    assert versions == sorted(set(versions))
    assert versions[0] > int(since)


def test_watch_from_now_lists_nothing_old_and_ends_at_its_timeout(
    core: Any, running_pod: str
) -> None:
    # Without a version the stream starts with what exists; from the newest one, with nothing.
    first = next(iter(_watcher().stream(core.list_namespaced_pod, "default", timeout_seconds=5)))
    assert first["type"] == "ADDED"
    version = core.list_namespaced_pod("default").metadata.resource_version
    began = time.monotonic()
    events = list(
        _watcher().stream(
            core.list_namespaced_pod,
            "default",
            resource_version=version,
            timeout_seconds=2,
            field_selector=f"metadata.name={running_pod}",
        )
    )
    assert events == []
    assert 1.5 < time.monotonic() - began < 10


#: Prints three lines, then waits for /tmp/go (made by an exec) before the last one and its end.
_LOGGER = (
    "for i in 1 2 3; do echo line $i; done; while [ ! -e /tmp/go ]; do sleep 0.1; done; echo late"
)


def test_logs_honour_their_query(core: Any, busybox_like_image: str) -> None:
    from kubernetes.stream import stream

    pod = _busybox("bb-logs", busybox_like_image, ["sh", "-c", _LOGGER])
    pod["spec"]["restartPolicy"] = "Never"
    core.create_namespaced_pod("default", pod)
    try:
        _wait(core, "bb-logs", "Running")
        followed = core.read_namespaced_pod_log(
            "bb-logs", "default", follow=True, _preload_content=False
        )
        chunks: list[bytes] = []
        reader = threading.Thread(target=lambda: chunks.extend(followed.stream()))
        reader.start()
        reader.join(1.5)
        assert reader.is_alive()  # following: the container has not ended
        stream(
            core.connect_get_namespaced_pod_exec,
            "bb-logs",
            "default",
            command=["touch", "/tmp/go"],
            stdout=True,
            stderr=True,
        )
        reader.join(30)
        assert not reader.is_alive()  # the answer ended with the container
        assert b"".join(chunks) == b"line 1\nline 2\nline 3\nlate\n"
        assert core.read_namespaced_pod_log("bb-logs", "default", tail_lines=2) == "line 3\nlate\n"
        assert core.read_namespaced_pod_log("bb-logs", "default", tail_lines=0) == ""
        assert core.read_namespaced_pod_log("bb-logs", "default", limit_bytes=4) == "line"
        stamped = core.read_namespaced_pod_log("bb-logs", "default", timestamps=True)
        first_stamp, first_text = stamped.splitlines()[0].split(" ", 1)
        assert first_text == "line 1"
        assert time.strptime(first_stamp.split(".")[0], "%Y-%m-%dT%H:%M:%S")
        assert core.read_namespaced_pod_log("bb-logs", "default", since_seconds=3600) == (
            "line 1\nline 2\nline 3\nlate\n"
        )
    finally:
        core.delete_namespaced_pod("bb-logs", "default", grace_period_seconds=0)


def _exec(core: Any, pod: str, command: list[str], **flags: Any) -> Any:
    from kubernetes.stream import stream

    return stream(
        core.connect_get_namespaced_pod_exec,
        pod,
        "default",
        command=command,
        _preload_content=False,
        binary=True,
        **flags,
    )


def test_exec_text_binary_stdin_channels_and_exit_codes(core: Any, running_pod: str) -> None:
    from kubernetes.stream import stream, ws_client

    text = stream(
        core.connect_get_namespaced_pod_exec,
        running_pod,
        "default",
        command=["sh", "-c", "echo hello"],
        stderr=True,
        stdin=False,
        stdout=True,
        tty=False,
    )
    assert text == "hello\n"
    # Clients from 36.0 offer v5, whose close signal ends stdin; older ones only v4, so the
    # command reads exactly the bytes sent instead of waiting for the end of its input.
    script = "printf 'a\\000\\377'; echo oops >&2; head -c 3; exit 7"
    client = _exec(core, running_pod, ["sh", "-c", script], stdin=True, stdout=True, stderr=True)
    client.write_stdin(b"in\xfe")
    if hasattr(ws_client, "V5_CHANNEL_PROTOCOL"):
        client.sock.send(bytes([255, 0]), opcode=0x2)
    client.run_forever(timeout=20)
    assert client.read_stdout() == b"a\x00\xffin\xfe"
    assert client.read_stderr() == b"oops\n"
    assert client.returncode == 7


def test_exec_sends_only_the_streams_asked_for(core: Any, running_pod: str) -> None:
    from kubernetes.client.exceptions import ApiException

    both = ["sh", "-c", "echo out; echo err >&2"]
    only_out = _exec(core, running_pod, both, stdout=True, stderr=False)
    only_out.run_forever(timeout=20)
    # A channel that never carried anything reads as "" in some client releases, b"" in others.
    assert (only_out.read_stdout(), only_out.read_stderr() or b"") == (b"out\n", b"")
    only_err = _exec(core, running_pod, both, stdout=False, stderr=True)
    only_err.run_forever(timeout=20)
    assert (only_err.read_stdout() or b"", only_err.read_stderr()) == (b"", b"err\n")
    assert only_err.returncode == 0
    with pytest.raises(ApiException, match="400"):
        _exec(core, running_pod, both, stdout=False, stderr=False)


def test_namespaces_and_their_default_service_account(core: Any, busybox_like_image: str) -> None:
    from kubernetes.client.exceptions import ApiException

    names = {ns.metadata.name for ns in core.list_namespace().items}
    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= names
    assert core.read_namespaced_service_account("default", "default").metadata.name == "default"
    created = core.create_namespace({"metadata": {"name": "team-a", "labels": {"t": "a"}}})
    assert created.status.phase == "Active"
    assert created.metadata.labels["kubernetes.io/metadata.name"] == "team-a"
    assert core.read_namespace("team-a").metadata.uid == created.metadata.uid
    assert [ns.metadata.name for ns in core.list_namespace(label_selector="t=a").items] == [
        "team-a"
    ]
    accounts = core.list_namespaced_service_account("team-a").items
    assert [account.metadata.name for account in accounts] == ["default"]
    inside = _busybox("inside", busybox_like_image)
    inside["spec"]["terminationGracePeriodSeconds"] = 1  # sleep as PID 1 ignores SIGTERM
    core.create_namespaced_pod("team-a", inside)
    _wait(core, "inside", "Running", "team-a")
    with pytest.raises(ApiException) as conflict:
        core.create_namespace({"metadata": {"name": "team-a"}})
    assert conflict.value.status == 409

    deleted = json.loads(core.delete_namespace("team-a", _preload_content=False).data)
    assert (deleted["kind"], deleted["status"]["phase"]) == ("Namespace", "Terminating")
    assert deleted["metadata"]["deletionTimestamp"]
    deadline = time.monotonic() + 30
    while "team-a" in {ns.metadata.name for ns in core.list_namespace().items}:
        assert time.monotonic() < deadline, "the namespace never finished terminating"
        time.sleep(0.1)
    with pytest.raises(ApiException) as gone:
        core.read_namespace("team-a")
    assert gone.value.status == 404
    assert core.list_namespaced_pod("team-a").items == []
    with pytest.raises(ApiException) as missing:
        core.create_namespaced_pod("team-a", _busybox("late", busybox_like_image))
    assert missing.value.status == 404
    assert _message(missing.value) == 'namespaces "team-a" not found'
    with pytest.raises(ApiException) as protected:
        core.delete_namespace("default")
    assert protected.value.status == 403


def test_terminating_namespace_refuses_new_content(core: Any, busybox_like_image: str) -> None:
    from kubernetes.client.exceptions import ApiException

    core.create_namespace({"metadata": {"name": "team-b"}})
    slow = _busybox("slow", busybox_like_image)
    slow["spec"]["terminationGracePeriodSeconds"] = 4  # the namespace terminates for ~4 s
    core.create_namespaced_pod("team-b", slow)
    _wait(core, "slow", "Running", "team-b")
    core.delete_namespace("team-b")
    assert core.read_namespace("team-b").status.phase == "Terminating"
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod("team-b", _busybox("new", busybox_like_image))
    assert refused.value.status == 403
    assert "being terminated" in _message(refused.value)
    # The pod is deleted with its grace period (Killing), then the namespace goes.
    deadline = time.monotonic() + 30
    while "team-b" in {ns.metadata.name for ns in core.list_namespace().items}:
        assert time.monotonic() < deadline, "the namespace never finished terminating"
        time.sleep(0.2)


def test_service_accounts(core: Any, busybox_like_image: str) -> None:
    from kubernetes.client.exceptions import ApiException

    core.create_namespaced_service_account("default", {"metadata": {"name": "robot"}})
    try:
        pod = _busybox("bb-sa", busybox_like_image)
        pod["spec"]["serviceAccountName"] = "robot"
        created = core.create_namespaced_pod("default", pod)
        assert created.spec.service_account_name == "robot"
        core.delete_namespaced_pod("bb-sa", "default", grace_period_seconds=0)
        pod["spec"]["serviceAccountName"] = "nobody"
        with pytest.raises(ApiException) as refused:
            core.create_namespaced_pod("default", pod)
        assert refused.value.status == 403
        assert "nobody" in _message(refused.value)
        listed = core.list_service_account_for_all_namespaces(field_selector="metadata.name=robot")
        assert [(sa.metadata.namespace, sa.metadata.name) for sa in listed.items] == [
            ("default", "robot")
        ]
    finally:
        core.delete_namespaced_service_account("robot", "default")
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_service_account("robot", "default")
    assert gone.value.status == 404


def test_watch_with_a_selector_sees_objects_enter_and_leave_it(
    core: Any, busybox_like_image: str
) -> None:
    # A pod is Pending, then Running, then Succeeded: a watch on status.phase=Running sees it
    # arrive (ADDED) and leave (DELETED) although the pod itself was never deleted.
    version = core.list_namespaced_pod("default").metadata.resource_version
    pod = _busybox("bb-phase", busybox_like_image, ["sh", "-c", "sleep 1"])
    pod["spec"]["restartPolicy"] = "Never"  # so that it ends Succeeded rather than restarting
    core.create_namespaced_pod("default", pod)
    try:
        events = []
        watcher = _watcher()
        for event in watcher.stream(
            core.list_namespaced_pod,
            "default",
            field_selector="status.phase=Running,metadata.name=bb-phase",
            resource_version=version,
            timeout_seconds=30,
        ):
            events.append((event["type"], event["object"].status.phase))
            if event["type"] == "DELETED":
                watcher.stop()
        assert events[0] == ("ADDED", "Running")
        assert events[-1] == ("DELETED", "Running")  # as it last matched
        assert {phase for _kind, phase in events} == {"Running"}
    finally:
        core.delete_namespaced_pod("bb-phase", "default", grace_period_seconds=0)


def _serving_threads() -> int:
    return sum(1 for thread in threading.enumerate() if "process_request" in thread.name)


def test_a_watch_whose_client_hangs_up_ends(
    offline_k8s_emulator: Any, tmp_path: Path, running_pod: str
) -> None:
    from kubernetes import client, config

    loaders: Any = config
    path = offline_k8s_emulator.write_kubeconfig(tmp_path / "kubeconfig")
    own = client.CoreV1Api(loaders.new_client_from_config(str(path)))  # its own connection
    before = _serving_threads()
    answer: Any = own.list_namespaced_pod(
        "default", watch=True, timeout_seconds=600, _preload_content=False
    )
    assert b'"ADDED"' in next(answer.stream(1024))
    assert _serving_threads() == before + 1
    answer.close()  # the client goes away; nothing changes on the server meanwhile
    deadline = time.monotonic() + 10
    while _serving_threads() > before:
        assert time.monotonic() < deadline, "the watch outlived its client"
        time.sleep(0.1)


def test_attach_to_the_containers_own_stdio(core: Any, busybox_like_image: str) -> None:
    from kubernetes.stream import stream

    pod = _busybox("bb-attach", busybox_like_image, ["sh", "-c", "read l; echo got $l; exit 3"])
    pod["spec"]["restartPolicy"] = "Never"
    pod["spec"]["containers"][0].update(stdin=True, stdinOnce=True)
    core.create_namespaced_pod("default", pod)
    try:
        _wait(core, "bb-attach", "Running")
        client = stream(
            core.connect_get_namespaced_pod_attach,
            "bb-attach",
            "default",
            stdin=True,
            stdout=True,
            stderr=True,
            _preload_content=False,
            binary=True,
        )
        client.write_stdin(b"hello\n")
        client.run_forever(timeout=20)
        assert client.read_stdout() == b"got hello\n"
        ended = _wait(core, "bb-attach", "Failed")
        assert ended.status.container_statuses[0].state.terminated.exit_code == 3
    finally:
        core.delete_namespaced_pod("bb-attach", "default", grace_period_seconds=0)
