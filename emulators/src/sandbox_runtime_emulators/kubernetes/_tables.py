"""Server-side printing: lists and watch events as ``meta.k8s.io/v1`` ``Table`` objects.

``kubectl get`` asks for ``Accept: application/json;as=Table;...`` and prints the columns the
server chooses; without a Table it can only print names and ages.  These are the columns
kube-apiserver prints for the resources the emulator serves (pods: READY, STATUS, RESTARTS;
namespaces: STATUS; events: LAST SEEN, TYPE, REASON, OBJECT, MESSAGE), each row carrying the
object's metadata (``PartialObjectMetadata``, or the whole object with ``includeObject=Object``).
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Callable
from typing import Any

__all__ = ["table", "wants_table"]


def wants_table(accept: str) -> bool:
    """True when the client asked for server-side printing."""
    return "as=Table" in accept


def _age(stamp: str | None) -> str:
    """Kube's ``HumanDuration`` of the time since ``stamp`` (first branches: up to days)."""
    if not stamp:
        return "<unknown>"
    try:
        then = calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:
        return "<unknown>"
    seconds = max(0, int(time.time() - then))
    minutes, hours = seconds // 60, seconds // 3600
    if seconds < 120:
        return f"{seconds}s"
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    return f"{hours // 24}d"


def _pod_status(pod: dict[str, Any]) -> str:
    if pod["metadata"].get("deletionTimestamp"):
        return "Terminating"
    status = pod.get("status") or {}
    reason = str(status.get("reason") or status.get("phase") or "Pending")
    for container in status.get("containerStatuses") or []:
        state = container.get("state") or {}
        if state.get("waiting", {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif state.get("terminated", {}).get("reason"):
            reason = state["terminated"]["reason"]
    return reason


def _pod_cells(pod: dict[str, Any]) -> list[Any]:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    ready = sum(1 for status in statuses if status.get("ready"))
    total = len(pod["spec"].get("containers") or [])
    restarts = sum(int(status.get("restartCount") or 0) for status in statuses)
    return [
        pod["metadata"]["name"],
        f"{ready}/{total}",
        _pod_status(pod),
        restarts,
        _age(pod["metadata"].get("creationTimestamp")),
    ]


def _event_cells(event: dict[str, Any]) -> list[Any]:
    involved = event.get("involvedObject") or {}
    return [
        _age(event.get("lastTimestamp") or event["metadata"].get("creationTimestamp")),
        event.get("type", ""),
        event.get("reason", ""),
        f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
        event.get("message", ""),
    ]


def _claim_cells(claim: dict[str, Any]) -> list[Any]:
    status = claim.get("status") or {}
    return [
        claim["metadata"]["name"],
        status.get("phase", ""),
        claim["spec"].get("volumeName", ""),
        (status.get("capacity") or {}).get("storage", ""),
        ",".join(
            {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX"}.get(m, m)
            for m in status.get("accessModes") or []
        ),
        _age(claim["metadata"].get("creationTimestamp")),
    ]


def _snapshot_cells(snapshot: dict[str, Any]) -> list[Any]:
    status = snapshot.get("status") or {}
    return [
        snapshot["metadata"]["name"],
        bool(status.get("readyToUse")),
        (snapshot["spec"].get("source") or {}).get("persistentVolumeClaimName", ""),
        status.get("restoreSize", ""),
        snapshot["spec"].get("volumeSnapshotClassName", ""),
        _age(snapshot["metadata"].get("creationTimestamp")),
    ]


_Column = tuple[str, str, str]
_COLUMNS: dict[str, tuple[list[_Column], Callable[[dict[str, Any]], list[Any]]]] = {
    "pods": (
        [
            ("Name", "string", "name"),
            ("Ready", "string", ""),
            ("Status", "string", ""),
            ("Restarts", "string", ""),
            ("Age", "string", ""),
        ],
        _pod_cells,
    ),
    "namespaces": (
        [("Name", "string", "name"), ("Status", "string", ""), ("Age", "string", "")],
        lambda ns: [
            ns["metadata"]["name"],
            (ns.get("status") or {}).get("phase", ""),
            _age(ns["metadata"].get("creationTimestamp")),
        ],
    ),
    "serviceaccounts": (
        [("Name", "string", "name"), ("Secrets", "integer", ""), ("Age", "string", "")],
        lambda sa: [
            sa["metadata"]["name"],
            len(sa.get("secrets") or []),
            _age(sa["metadata"].get("creationTimestamp")),
        ],
    ),
    "persistentvolumeclaims": (
        [
            ("Name", "string", "name"),
            ("Status", "string", ""),
            ("Volume", "string", ""),
            ("Capacity", "string", ""),
            ("Access Modes", "string", ""),
            ("Age", "string", ""),
        ],
        _claim_cells,
    ),
    "volumesnapshots": (
        [
            ("Name", "string", "name"),
            ("ReadyToUse", "boolean", ""),
            ("SourcePVC", "string", ""),
            ("RestoreSize", "string", ""),
            ("SnapshotClass", "string", ""),
            ("Age", "string", ""),
        ],
        _snapshot_cells,
    ),
    "volumesnapshotclasses": (
        [
            ("Name", "string", "name"),
            ("Driver", "string", ""),
            ("DeletionPolicy", "string", ""),
            ("Age", "string", ""),
        ],
        lambda item: [
            item["metadata"]["name"],
            item.get("driver", ""),
            item.get("deletionPolicy", ""),
            _age(item["metadata"].get("creationTimestamp")),
        ],
    ),
    "events": (
        [
            ("Last Seen", "string", ""),
            ("Type", "string", ""),
            ("Reason", "string", ""),
            ("Object", "string", ""),
            ("Message", "string", ""),
        ],
        _event_cells,
    ),
}


def table(
    resource: str,
    objects: list[dict[str, Any]],
    resource_version: str = "",
    include_object: str = "PartialObjectMetadata",
) -> dict[str, Any]:
    """The ``Table`` of ``objects`` of ``resource``, rows in the order given."""
    columns, cells = _COLUMNS[resource]
    rows = []
    for obj in objects:
        if include_object == "Object":
            embedded: dict[str, Any] | None = obj
        elif include_object == "None":
            embedded = None
        else:
            embedded = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj["metadata"],
            }
        rows.append({"cells": cells(obj), "object": embedded})
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": [
            {"name": name, "type": kind, "format": form, "description": "", "priority": 0}
            for name, kind, form in columns
        ],
        "rows": rows,
    }
