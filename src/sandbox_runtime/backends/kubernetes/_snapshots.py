"""Checkpoints as CSI ``VolumeSnapshot`` objects of the workdir's PersistentVolumeClaim.

Where the cluster serves ``snapshot.storage.k8s.io/v1`` with a snapshot class, a sandbox's
workdir can live on a claim of its own: a checkpoint is then a ``VolumeSnapshot`` of that
claim (taken by the CSI driver, nothing read through this client), and a fork is a new claim
whose ``dataSource`` is the snapshot, mounted by a fresh pod: no archive upload and no restore
step in the copy.  This module holds what is particular to that path: discovering the class
(:func:`snapshot_class`), the claim and snapshot manifests, the metadata that makes them
reapable and listable as checkpoints, and the calls on the snapshot group.  The backend
(``_backend.py``) decides which path a sandbox takes and wires the claim into its pod.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from sandbox_runtime.backend_kit import Checkpoint, checkpoint_labels
from sandbox_runtime.errors import BackendError, CheckpointNotFoundError, ConfigError

from ._client import ApiException, Cluster, read_json, status_code
from ._labels import BACKEND_KEY, DOMAIN, MANAGED_SELECTOR, key_for, ownership_view
from ._names import label_value_problem
from ._options import KubernetesOptions

__all__ = [
    "CLAIM_VOLUME",
    "GROUP",
    "SNAPSHOT_PREFIX",
    "VERSION",
    "checkpoint_of",
    "claim_manifest",
    "is_snapshot_id",
    "snapshot_class",
    "snapshot_manifest",
]

logger = logging.getLogger("sandbox_runtime.kubernetes")

GROUP, VERSION = "snapshot.storage.k8s.io", "v1"
DEFAULT_CLASS = "snapshot.storage.kubernetes.io/is-default-class"
#: Checkpoint ids of the snapshot path (the ``VolumeSnapshot``'s name); the archive store's
#: are ``ckpt-...``, so an id says which path holds it.
SNAPSHOT_PREFIX = "srt-snap-"
#: The pod's volume name for the workdir's claim.
CLAIM_VOLUME = "workdir"
#: Annotations: the image a checkpoint's sandbox ran, and the pod a claim belongs to.
IMAGE_KEY = f"{DOMAIN}/image"
POD_KEY = f"{DOMAIN}/pod"

#: By client (``connect`` keeps each for the process's life, so its id is never reused).
_classes: dict[tuple[int, str | None], str | None] = {}
_classes_lock = threading.Lock()


def is_snapshot_id(checkpoint_id: str) -> bool:
    """True for the id of a checkpoint kept as a ``VolumeSnapshot``."""
    return checkpoint_id.startswith(SNAPSHOT_PREFIX)


def snapshot_class(cluster: Cluster, options: KubernetesOptions) -> str | None:
    """The VolumeSnapshotClass to use, or None where the cluster offers none (cached).

    ``volume_snapshot_class`` must exist if given; otherwise the default-annotated class, else
    the only one.  A cluster without the group (404) or that does not let us list classes
    (403) has none.
    """
    key = (id(cluster), options.volume_snapshot_class)
    with _classes_lock:
        if key in _classes:
            return _classes[key]
    try:
        listing = cluster.custom_api().list_cluster_custom_object(
            GROUP, VERSION, "volumesnapshotclasses", _request_timeout=options.api_timeout
        )
    except ApiException as exc:
        if status_code(exc) not in (403, 404):
            raise
        logger.info("no volume snapshots at %s (%s)", cluster.server, status_code(exc))
        listing = {}
    names = [str(item["metadata"]["name"]) for item in listing.get("items") or []]
    found: str | None = None
    if options.volume_snapshot_class is not None:
        if options.volume_snapshot_class not in names:
            raise ConfigError(
                f"options.volume_snapshot_class: no VolumeSnapshotClass "
                f"{options.volume_snapshot_class!r} at {cluster.server} (found: {names})"
            )
        found = options.volume_snapshot_class
    else:
        defaults = [
            str(item["metadata"]["name"])
            for item in listing.get("items") or []
            if (item["metadata"].get("annotations") or {}).get(DEFAULT_CLASS) == "true"
        ]
        found = defaults[0] if defaults else (names[0] if len(names) == 1 else None)
    with _classes_lock:
        _classes[key] = found
    return found


def _metadata(name: str, stored: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, Any]:
    """Labels (selectable values) and annotations (every value) of our own objects."""
    annotations = {key_for(key): value for key, value in stored.items()}
    annotations.update(extra)
    labels = {
        key: value for key, value in annotations.items() if label_value_problem(value) is None
    }
    labels.pop(IMAGE_KEY, None)
    labels[BACKEND_KEY] = "kubernetes"
    return {"name": name, "labels": labels, "annotations": annotations}


def claim_manifest(
    name: str,
    pod: str,
    pod_metadata: Mapping[str, Any],
    options: KubernetesOptions,
    snapshot: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The workdir's claim, owned like its pod; restored from ``snapshot`` when given."""
    size = options.volume_size
    if snapshot is not None:
        size = str((snapshot.get("status") or {}).get("restoreSize") or size)
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": size}},
    }
    if options.storage_class:
        spec["storageClassName"] = options.storage_class
    if snapshot is not None:
        spec["dataSource"] = {
            "apiGroup": GROUP,
            "kind": "VolumeSnapshot",
            "name": snapshot["metadata"]["name"],
        }
    labels = dict(pod_metadata.get("labels") or {})
    annotations = {**(pod_metadata.get("annotations") or {}), POD_KEY: pod}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": spec,
    }


def snapshot_manifest(
    *,
    claim: str,
    class_name: str,
    source_id: str,
    image: str | None,
    labels: Mapping[str, str],
    lifetime: float,
    run_id: str | None,
    workdir: str,
) -> dict[str, Any]:
    """A ``VolumeSnapshot`` of ``claim`` carrying a checkpoint's ownership record."""
    stored = checkpoint_labels(
        source_id=source_id,
        kind="filesystem",
        lifetime=lifetime,
        run_id=run_id,
        labels=labels,
        workdir=workdir,
    )
    name = SNAPSHOT_PREFIX + secrets.token_hex(8)
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "VolumeSnapshot",
        "metadata": _metadata(name, stored, {IMAGE_KEY: image or ""}),
        "spec": {
            "volumeSnapshotClassName": class_name,
            "source": {"persistentVolumeClaimName": claim},
        },
    }


def checkpoint_of(snapshot: Mapping[str, Any]) -> Checkpoint:
    """The checkpoint a ``VolumeSnapshot`` of ours stands for."""
    meta = snapshot["metadata"]
    return Checkpoint.from_labels("kubernetes", str(meta["name"]), ownership_view(meta))


class SnapshotCalls:
    """The snapshot group's calls in one namespace, through the backend's retrying ``call``."""

    def __init__(
        self,
        cluster: Cluster,
        options: KubernetesOptions,
        call: Callable[[str, Callable[[], Any]], Any],
    ) -> None:
        self.cluster = cluster
        self.options = options
        self._call = call
        self._api = cluster.custom_api()

    def create(self, manifest: dict[str, Any]) -> None:
        """Create a snapshot (a lost answer's 409 for our own random name is success)."""

        def create() -> None:
            try:
                self._api.create_namespaced_custom_object(
                    GROUP,
                    VERSION,
                    self.cluster.namespace,
                    "volumesnapshots",
                    manifest,
                    _request_timeout=self.options.api_timeout,
                )
            except ApiException as exc:
                if status_code(exc) != 409:
                    raise

        self._call("create volumesnapshot", create)

    def get(self, name: str) -> dict[str, Any]:
        """One snapshot of ours; ``CheckpointNotFoundError`` if it does not exist."""
        found = self._on_snapshot("get", self._api.get_namespaced_custom_object, name)
        labels = (found.get("metadata") or {}).get("labels") or {}
        if labels.get(BACKEND_KEY) != "kubernetes":
            raise CheckpointNotFoundError(f"{name!r} is not a checkpoint of this library")
        return dict(found)

    def wait_taken(self, name: str, timeout: float) -> dict[str, Any]:
        """Wait until the driver has cut the snapshot (``creationTime`` or ``readyToUse``).

        A claim restored from it waits for ``readyToUse`` itself; the state it holds is fixed
        once it is cut.
        """
        deadline = time.monotonic() + timeout
        delay = 0.05
        while True:
            snapshot = self.get(name)
            status = snapshot.get("status") or {}
            if status.get("readyToUse") or status.get("creationTime"):
                return snapshot
            error = (status.get("error") or {}).get("message")
            if error:
                raise BackendError(f"VolumeSnapshot {name} failed: {error}")
            if time.monotonic() + delay > deadline:
                raise BackendError(f"VolumeSnapshot {name} was not taken within {timeout:.0f}s")
            time.sleep(delay)
            delay = min(delay * 1.5, 1.0)

    def delete(self, name: str) -> None:
        """Delete one snapshot; ``CheckpointNotFoundError`` if it is not there."""
        self.get(name)  # only ours
        self._on_snapshot("delete", self._api.delete_namespaced_custom_object, name)

    def _on_snapshot(self, verb: str, method: Callable[..., Any], name: str) -> Any:
        """``method`` (the custom objects API's get or delete) on snapshot ``name``.

        A 404 is :class:`CheckpointNotFoundError`: the checkpoint is gone.
        """
        try:
            return self._call(
                f"{verb} volumesnapshot",
                lambda: method(
                    GROUP,
                    VERSION,
                    self.cluster.namespace,
                    "volumesnapshots",
                    name,
                    _request_timeout=self.options.api_timeout,
                ),
            )
        except ApiException as exc:
            if status_code(exc) == 404:
                raise CheckpointNotFoundError(f"no kubernetes checkpoint {name!r}") from exc
            raise

    def list_snapshots(self) -> list[dict[str, Any]]:
        """Our snapshots in the namespace (none where the group is not served)."""
        try:
            listing = self._call(
                "list volumesnapshots",
                lambda: self._api.list_namespaced_custom_object(
                    GROUP,
                    VERSION,
                    self.cluster.namespace,
                    "volumesnapshots",
                    label_selector=MANAGED_SELECTOR,
                    _request_timeout=self.options.api_timeout,
                ),
            )
        except ApiException as exc:
            if status_code(exc) in (403, 404):
                return []
            raise
        return list(listing.get("items") or [])

    def list_claims(self) -> list[dict[str, Any]]:
        """Our claims in the namespace (none where we may not list claims)."""
        try:
            response = self._call(
                "list persistentvolumeclaims",
                lambda: self.cluster.api.list_namespaced_persistent_volume_claim(
                    self.cluster.namespace,
                    label_selector=MANAGED_SELECTOR,
                    _preload_content=False,
                    _request_timeout=self.options.api_timeout,
                ),
            )
        except ApiException as exc:
            if status_code(exc) in (403, 404):
                return []
            raise
        return list(read_json(response).get("items") or [])

    def create_claim(self, manifest: dict[str, Any]) -> None:
        """Create a claim (409 for our own random name: an earlier attempt went through)."""

        def create() -> None:
            try:
                self.cluster.api.create_namespaced_persistent_volume_claim(
                    self.cluster.namespace,
                    manifest,
                    _preload_content=False,
                    _request_timeout=self.options.api_timeout,
                )
            except ApiException as exc:
                if status_code(exc) != 409:
                    raise

        self._call("create persistentvolumeclaim", create)

    def delete_claim(self, name: str) -> None:
        """Delete a claim; one already gone is fine."""

        def delete() -> None:
            try:
                self.cluster.api.delete_namespaced_persistent_volume_claim(
                    name,
                    self.cluster.namespace,
                    _preload_content=False,
                    _request_timeout=self.options.api_timeout,
                )
            except ApiException as exc:
                if status_code(exc) != 404:
                    raise

        self._call("delete persistentvolumeclaim", delete)
