"""PersistentVolumeClaims and CSI volume snapshots, each kept in a Docker volume.

What a cluster with a CSI driver and the external snapshotter serves, as the emulator's one
node keeps it: a ``PersistentVolumeClaim`` is bound at once to a Docker volume of its own (the
dynamic provisioner's part); ``snapshot.storage.k8s.io/v1`` ``VolumeSnapshotClass`` objects
are plain data; a ``VolumeSnapshot`` of a bound claim copies the claim's volume into a volume
of its own, then reports ``readyToUse`` and ``restoreSize`` (the snapshot controller's and the
driver's part); a claim whose ``dataSource`` is a ready ``VolumeSnapshot`` starts as a copy of
it and is ``Pending`` until the copy is done.  Copies go through the engine's archive API on
containers created but never started (:meth:`DockerRuntime.copy_volume`), from the image of
the last pod the node ran (before any, of
any image the engine has).  Pods mount claims (``_pods``).  How this differs from a real
cluster is in ``docs/kubernetes.md``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from sandbox_runtime.backends.kubernetes._names import memory_bytes

from ._changes import ChangeLog
from ._docker import DockerRuntime, RuntimeProblem
from ._namespaces import Namespaces
from ._objects import ObjectTable, now
from ._selectors import NAME_FIELDS
from ._status import ApiError, invalid

__all__ = [
    "DEFAULT_CLASS_ANNOTATION",
    "DRIVER",
    "SNAPSHOT_GROUP",
    "SNAPSHOT_VERSION",
    "Volumes",
]

logger = logging.getLogger("sandbox_runtime_emulators.kubernetes")

SNAPSHOT_GROUP = "snapshot.storage.k8s.io"
SNAPSHOT_VERSION = f"{SNAPSHOT_GROUP}/v1"
#: The annotation marking the class a snapshot without ``volumeSnapshotClassName`` gets.
DEFAULT_CLASS_ANNOTATION = "snapshot.storage.kubernetes.io/is-default-class"
#: The CSI driver name the emulator's volumes and snapshots report.
DRIVER = "volumes.k8s-emulator.sandbox-runtime"
_EMULATOR_LIMIT = "Unsupported value: not supported by the sandbox-runtime emulator"
_ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
#: How long a deleted claim's or snapshot's volume is retried while a container holds it.
_REMOVE_WITHIN = 120.0


def docker_volume(obj: dict[str, Any]) -> str:
    """The Docker volume holding a claim's or a snapshot's files (named by its uid)."""
    return f"k8s-emu-{obj['metadata']['uid']}"


class Volumes:
    """The claims, snapshot classes and snapshots of every namespace; thread-safe."""

    def __init__(
        self,
        changes: ChangeLog,
        namespaces: Namespaces,
        runtime: DockerRuntime,
        background: Callable[..., None],
        closed: threading.Event,
    ) -> None:
        self.changes = changes
        self.namespaces = namespaces
        self.runtime = runtime
        self._background = background  # runs a function on a thread close() waits for
        self._closed = closed
        self.claims = ObjectTable(
            changes, "persistentvolumeclaims", "PersistentVolumeClaim", namespaced=True,
            fields=NAME_FIELDS,
        )  # fmt: skip
        self.classes = ObjectTable(
            changes, "volumesnapshotclasses", "VolumeSnapshotClass", namespaced=False,
            fields=NAME_FIELDS, api_version=SNAPSHOT_VERSION,
        )  # fmt: skip
        self.snapshots = ObjectTable(
            changes, "volumesnapshots", "VolumeSnapshot", namespaced=True,
            fields=NAME_FIELDS, api_version=SNAPSHOT_VERSION,
        )  # fmt: skip
        #: The image the copies' containers are made from (the last one a pod ran).
        self.helper_image: str | None = None
        self._made: set[str] = set()  # Docker volumes this emulator created and still has

    # -- claims -------------------------------------------------------------------------------

    def create_claim(self, namespace: str, body: Any) -> dict[str, Any]:
        """Store a claim and provision its volume: bound now, or once its snapshot is copied."""
        if not isinstance(body, dict):
            body = {}
        name = str((body.get("metadata") or {}).get("name") or "")
        self.namespaces.require_active(namespace, "persistentvolumeclaims", name)
        spec = body.setdefault("spec", {})
        source = _check_claim(name, spec)
        spec.setdefault("volumeMode", "Filesystem")
        if source is not None:
            spec["dataSourceRef"] = dict(source)
        body["status"] = {"phase": "Pending"}
        created = self.claims.create(namespace, body)
        volume = docker_volume(created)
        try:
            self.runtime.create_volume(volume)
        except RuntimeProblem as exc:
            self.claims.delete(namespace, created["metadata"]["name"])
            raise ApiError(500, "InternalError", f"cannot provision the volume: {exc}") from exc
        with self.changes.lock:
            self._made.add(volume)
        if source is None:
            return self._bind(created)
        self._background(self._populate, created, str(source["name"]))
        return created

    def _bind(self, claim: dict[str, Any]) -> dict[str, Any]:
        """Mark a claim ``Bound`` to its volume, with the capacity it asked for."""
        spec = claim["spec"]

        def bind(obj: dict[str, Any]) -> None:
            obj["spec"]["volumeName"] = f"pvc-{obj['metadata']['uid']}"
            obj["status"] = {
                "phase": "Bound",
                "accessModes": list(spec.get("accessModes") or []),
                "capacity": {"storage": spec["resources"]["requests"]["storage"]},
            }

        meta = claim["metadata"]
        return self.claims.update(meta["namespace"], meta["name"], bind)

    def _populate(self, claim: dict[str, Any], snapshot_name: str) -> None:
        """Copy a ready snapshot into a new claim's volume, then bind it (the provisioner)."""
        meta = claim["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        while not self._closed.is_set():
            if not self._same(self.claims, namespace, name, meta["uid"]):
                return  # deleted while it waited
            snapshot = self._find(self.snapshots, namespace, snapshot_name)
            if snapshot is not None and (snapshot.get("status") or {}).get("readyToUse"):
                break
            self._closed.wait(0.05)
        else:
            return
        try:
            self._copy(docker_volume(snapshot), docker_volume(claim))
        except RuntimeProblem as exc:
            logger.warning("cannot restore %s/%s from %s: %s", namespace, name, snapshot_name, exc)
            return
        try:
            self._bind(claim)
        except ApiError:
            logger.debug("claim %s/%s was deleted during its restore", namespace, name)

    def delete_claim(self, namespace: str, name: str) -> dict[str, Any]:
        """Remove a claim now; its volume goes once no container holds it."""
        gone = self.claims.delete(namespace, name)
        self._background(self._remove, docker_volume(gone))
        return gone

    def claim_volume(self, namespace: str, name: str) -> tuple[str | None, str]:
        """(Docker volume, "") of a bound claim, else (None, why the pod must wait)."""
        claim = self._find(self.claims, namespace, name)
        if claim is None:
            return None, f'persistentvolumeclaim "{name}" not found'
        if (claim.get("status") or {}).get("phase") != "Bound":
            return None, "pod has unbound immediate PersistentVolumeClaims"
        return docker_volume(claim), ""

    # -- snapshot classes and snapshots ---------------------------------------------------------

    def create_class(self, body: Any) -> dict[str, Any]:
        """Store a VolumeSnapshotClass (``driver`` and ``deletionPolicy`` are required)."""
        if not isinstance(body, dict):
            body = {}
        name = str((body.get("metadata") or {}).get("name") or "")
        causes = []
        if not body.get("driver"):
            causes.append(("driver", "Required value"))
        if body.get("deletionPolicy") not in ("Delete", "Retain"):
            causes.append(("deletionPolicy", 'Unsupported value: supported: "Delete", "Retain"'))
        if causes:
            raise invalid("VolumeSnapshotClass", name, causes)
        return self.classes.create(None, body)

    def create_snapshot(self, namespace: str, body: Any) -> dict[str, Any]:
        """Store a snapshot (not ready); its copy is taken in the background."""
        if not isinstance(body, dict):
            body = {}
        name = str((body.get("metadata") or {}).get("name") or "")
        self.namespaces.require_active(namespace, "volumesnapshots", name)
        spec = body.setdefault("spec", {})
        source = spec.get("source") or {}
        causes = []
        if source.get("volumeSnapshotContentName"):
            causes.append(("spec.source.volumeSnapshotContentName", _EMULATOR_LIMIT))
        elif not source.get("persistentVolumeClaimName"):
            causes.append(("spec.source", "Required value: persistentVolumeClaimName"))
        if causes:
            raise invalid("VolumeSnapshot", name, causes)
        body["status"] = {"readyToUse": False}
        created = self.snapshots.create(namespace, body)
        self._background(self._take, created)
        return created

    def _default_class(self) -> str | None:
        for item in self.classes.list(None):
            annotations = item["metadata"].get("annotations") or {}
            if annotations.get(DEFAULT_CLASS_ANNOTATION) == "true":
                return str(item["metadata"]["name"])
        return None

    def _take(self, snapshot: dict[str, Any]) -> None:
        """Copy the source claim's volume into the snapshot's, then mark it ready."""
        meta = snapshot["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        class_name = snapshot["spec"].get("volumeSnapshotClassName") or self._default_class()
        if class_name is None or not self.classes.exists(None, class_name):
            self._fail(snapshot, f"cannot find a VolumeSnapshotClass {class_name or '(default)'}")
            return
        claim_name = snapshot["spec"]["source"]["persistentVolumeClaimName"]
        while not self._closed.is_set():
            claim = self._find(self.claims, namespace, claim_name)
            if claim is None:
                self._fail(snapshot, f'persistentvolumeclaim "{claim_name}" not found')
                return
            if (claim.get("status") or {}).get("phase") == "Bound":
                break
            self._closed.wait(0.05)
        else:
            return
        volume = docker_volume(snapshot)
        try:
            self.runtime.create_volume(volume)
            with self.changes.lock:
                self._made.add(volume)
            self._copy(docker_volume(claim), volume)
        except RuntimeProblem as exc:
            self._fail(snapshot, f"the copy failed: {exc}")
            return

        def ready(obj: dict[str, Any]) -> None:
            obj["spec"]["volumeSnapshotClassName"] = class_name
            obj["status"] = {
                "boundVolumeSnapshotContentName": f"snapcontent-{obj['metadata']['uid']}",
                "creationTime": now(),
                "readyToUse": True,
                "restoreSize": claim["status"]["capacity"]["storage"],
            }

        try:
            self.snapshots.update(namespace, name, ready)
        except ApiError:  # deleted during the copy: its volume goes too
            self._background(self._remove, volume)

    def _fail(self, snapshot: dict[str, Any], message: str) -> None:
        meta = snapshot["metadata"]

        def failed(obj: dict[str, Any]) -> None:
            obj["status"] = {"readyToUse": False, "error": {"message": message, "time": now()}}

        try:
            self.snapshots.update(meta["namespace"], meta["name"], failed)
        except ApiError:
            logger.debug(
                "snapshot %s/%s went away before it failed", meta["namespace"], meta["name"]
            )

    def delete_snapshot(self, namespace: str, name: str) -> dict[str, Any]:
        """Remove a snapshot and its volume (``deletionPolicy: Delete``, the usual one)."""
        gone = self.snapshots.delete(namespace, name)
        self._background(self._remove, docker_volume(gone))
        return gone

    # -- plumbing -----------------------------------------------------------------------------

    def _copy(self, source: str, target: str) -> None:
        self.runtime.copy_volume(source, target, self.helper_image)

    def _remove(self, volume: str) -> None:
        """Remove a volume, waiting while a container (a pod being removed) still holds it."""
        until = time.monotonic() + _REMOVE_WITHIN
        while not self.runtime.remove_volume(volume):
            if time.monotonic() > until or self._closed.wait(0.2):
                logger.warning("volume %s is still in use; left for close()", volume)
                return
        with self.changes.lock:
            self._made.discard(volume)

    @staticmethod
    def _find(table: ObjectTable, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return table.get(namespace, name)
        except ApiError:
            return None

    def _same(self, table: ObjectTable, namespace: str, name: str, uid: str) -> bool:
        found = self._find(table, namespace, name)
        return found is not None and found["metadata"]["uid"] == uid

    def close(self) -> None:
        """Remove every volume this emulator made (after the pods' containers are gone)."""
        with self.changes.lock:
            volumes = sorted(self._made)
            self._made.clear()
        for volume in volumes:
            for _ in range(50):
                if self.runtime.remove_volume(volume):
                    break
                time.sleep(0.1)


def _check_claim(name: str, spec: dict[str, Any]) -> dict[str, Any] | None:
    """The claim's snapshot source (None without one); 422 for what the server refuses."""
    causes: list[tuple[str, str]] = []
    modes = spec.get("accessModes") or []
    if not modes:
        causes.append(("spec.accessModes", "Required value: at least 1 access mode is required"))
    for mode in modes:
        if mode not in _ACCESS_MODES:
            causes.append(("spec.accessModes", f"Unsupported value: {mode!r}"))
    storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    if storage is None:
        causes.append(("spec.resources[storage]", "Required value"))
    else:
        try:
            memory_bytes(str(storage))
        except ValueError:
            causes.append(("spec.resources[storage]", f"Invalid value: {storage!r}"))
    if spec.get("volumeMode", "Filesystem") != "Filesystem":
        causes.append(("spec.volumeMode", _EMULATOR_LIMIT))
    source = spec.get("dataSource") or spec.get("dataSourceRef")
    if source is not None and (
        source.get("kind") != "VolumeSnapshot"
        or source.get("apiGroup") != SNAPSHOT_GROUP
        or not source.get("name")
    ):
        causes.append(("spec.dataSource", f"{_EMULATOR_LIMIT} (only a VolumeSnapshot)"))
    if causes:
        raise invalid("PersistentVolumeClaim", name, causes)
    if source is not None:
        spec["dataSource"] = {k: source[k] for k in ("apiGroup", "kind", "name")}
    return source
