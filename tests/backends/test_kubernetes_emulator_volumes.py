"""The emulator's claims and CSI snapshots, driven by the unmodified ``kubernetes`` client.

What the snapshot path of the backend relies on, checked on the wire: discovery of the
``snapshot.storage.k8s.io/v1`` group, a claim bound at once, a pod writing to it, a
``VolumeSnapshot`` that becomes ``readyToUse`` with a ``restoreSize``, a claim restored from
it (``dataSource``) that a second pod reads, and deletion of all of it.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

pytestmark = pytest.mark.docker

GROUP, VERSION = "snapshot.storage.k8s.io", "v1"


@pytest.fixture
def apis(k8s_emulator: Any, tmp_path: Any) -> tuple[Any, Any]:
    """(CoreV1Api, CustomObjectsApi) from a kubeconfig, through the client's own loader."""
    from kubernetes import client, config

    path = k8s_emulator.write_kubeconfig(tmp_path / "kubeconfig")
    loaders: Any = config
    api_client = loaders.new_client_from_config(str(path))
    return client.CoreV1Api(api_client), client.CustomObjectsApi(api_client)


def _claim(name: str, snapshot: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}},
    }
    if snapshot:
        spec["dataSource"] = {"apiGroup": GROUP, "kind": "VolumeSnapshot", "name": snapshot}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": spec,
    }


def _pod(name: str, image: str, claim: str, script: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
            "containers": [
                {
                    "name": "main",
                    "image": image,
                    "command": ["sh", "-c", script],
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                }
            ],
        },
    }


def _wait(read: Any, done: Any, within: float = 60) -> Any:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        obj = read()
        if done(obj):
            return obj
        time.sleep(0.1)
    raise AssertionError(f"never reached the wanted state: {obj}")


def test_discovery_serves_the_snapshot_group(apis: tuple[Any, Any]) -> None:
    from kubernetes import client

    core, custom = apis
    groups = client.ApisApi(core.api_client).get_api_versions()
    assert [g.name for g in groups.groups] == [GROUP]
    resources = custom.get_api_resources(GROUP, VERSION)
    assert {r.name for r in resources.resources} == {
        "volumesnapshots",
        "volumesnapshotclasses",
    }
    core_resources = {r.name for r in core.get_api_resources().resources}
    assert "persistentvolumeclaims" in core_resources


def test_claim_snapshot_restore_and_delete(apis: tuple[Any, Any], docker_image: str) -> None:
    from kubernetes.client.exceptions import ApiException

    core, custom = apis
    custom.create_cluster_custom_object(
        GROUP,
        VERSION,
        "volumesnapshotclasses",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "VolumeSnapshotClass",
            "metadata": {
                "name": "emu",
                "annotations": {"snapshot.storage.kubernetes.io/is-default-class": "true"},
            },
            "driver": "volumes.k8s-emulator.sandbox-runtime",
            "deletionPolicy": "Delete",
        },
    )
    try:
        claim = core.create_namespaced_persistent_volume_claim("default", _claim("src"))
        bound = _wait(
            lambda: core.read_namespaced_persistent_volume_claim("src", "default"),
            lambda c: c.status.phase == "Bound",
        )
        assert bound.spec.volume_name == f"pvc-{claim.metadata.uid}"
        assert bound.status.capacity == {"storage": "1Gi"}
        # The volume is empty at first (the image's /data is not copied in), and a pod writes.
        core.create_namespaced_pod(
            "default",
            _pod(
                "writer",
                docker_image,
                "src",
                'test -z "$(ls -A /data)" && mkdir /data/d && echo one > /data/d/f && '
                "chmod 640 /data/d/f && sleep 120",
            ),
        )
        _wait(
            lambda: core.read_namespaced_pod("writer", "default"),
            lambda p: p.status.phase == "Running",
        )
        _wait(lambda: _ls(core, "writer"), lambda out: "one" in out)
        custom.create_namespaced_custom_object(
            GROUP,
            VERSION,
            "default",
            "volumesnapshots",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "VolumeSnapshot",
                "metadata": {"name": "snap"},
                "spec": {"source": {"persistentVolumeClaimName": "src"}},
            },
        )
        snapshot = _wait(
            lambda: custom.get_namespaced_custom_object(
                GROUP, VERSION, "default", "volumesnapshots", "snap"
            ),
            lambda s: (s.get("status") or {}).get("readyToUse"),
        )
        assert snapshot["status"]["restoreSize"] == "1Gi"
        assert snapshot["spec"]["volumeSnapshotClassName"] == "emu"
        # A change after the snapshot is not in it.
        _exec(core, "writer", "echo two > /data/d/f")
        core.create_namespaced_persistent_volume_claim("default", _claim("copy", "snap"))
        core.create_namespaced_pod("default", _pod("reader", docker_image, "copy", "sleep 120"))
        _wait(
            lambda: core.read_namespaced_pod("reader", "default"),
            lambda p: p.status.phase == "Running",
        )
        copy = core.read_namespaced_persistent_volume_claim("copy", "default")
        assert copy.status.phase == "Bound"
        assert copy.spec.data_source.name == "snap"
        assert _exec(core, "reader", "cat /data/d/f; stat -c %a /data/d/f") == "one\n640\n"
        listed = custom.list_namespaced_custom_object(GROUP, VERSION, "default", "volumesnapshots")
        assert listed["apiVersion"] == f"{GROUP}/{VERSION}"
        assert [item["metadata"]["name"] for item in listed["items"]] == ["snap"]
        for pod in ("writer", "reader"):
            core.delete_namespaced_pod(pod, "default", grace_period_seconds=0)
        for name in ("src", "copy"):
            core.delete_namespaced_persistent_volume_claim(name, "default")
        custom.delete_namespaced_custom_object(GROUP, VERSION, "default", "volumesnapshots", "snap")
        with pytest.raises(ApiException) as caught:
            custom.get_namespaced_custom_object(
                GROUP, VERSION, "default", "volumesnapshots", "snap"
            )
        assert caught.value.status == 404
        assert json.loads(caught.value.body or "{}")["reason"] == "NotFound"
    finally:
        custom.delete_cluster_custom_object(GROUP, VERSION, "volumesnapshotclasses", "emu")


def test_a_pod_waits_for_its_claim_and_bad_claims_are_refused(
    apis: tuple[Any, Any], docker_image: str
) -> None:
    from kubernetes.client.exceptions import ApiException

    core, _custom = apis
    core.create_namespaced_pod("default", _pod("waiter", docker_image, "later", "sleep 60"))
    pending = _wait(
        lambda: core.read_namespaced_pod("waiter", "default"),
        lambda p: any(c.reason == "Unschedulable" for c in p.status.conditions or []),
    )
    assert pending.status.phase == "Pending"
    assert 'persistentvolumeclaim "later" not found' in pending.status.conditions[0].message
    core.create_namespaced_persistent_volume_claim("default", _claim("later"))
    _wait(
        lambda: core.read_namespaced_pod("waiter", "default"),
        lambda p: p.status.phase == "Running",
    )
    core.delete_namespaced_pod("waiter", "default", grace_period_seconds=0)
    core.delete_namespaced_persistent_volume_claim("later", "default")
    bad = _claim("bad")
    del bad["spec"]["accessModes"]
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_persistent_volume_claim("default", bad)
    assert caught.value.status == 422
    assert "spec.accessModes" in json.loads(caught.value.body or "{}")["message"]


def _exec(core: Any, pod: str, script: str) -> str:
    from kubernetes.stream import stream

    return str(
        stream(
            core.connect_get_namespaced_pod_exec,
            pod,
            "default",
            command=["sh", "-c", script],
            stderr=True,
            stdout=True,
        )
    )


def _ls(core: Any, pod: str) -> str:
    return _exec(core, pod, "cat /data/d/f 2>/dev/null || true")
