"""The slice of ``/openapi/v3`` that kubectl reads before ``create -f`` and ``apply -f``.

kubectl validates manifests (``--validate=strict``, its default) on the server when the
server's OpenAPI v3 document says the resource's PATCH operation takes ``fieldValidation``;
otherwise it downloads schemas to validate on the client, and with no OpenAPI at all it refuses
("failed to download openapi").  The emulator publishes just that: for each served kind, its
PATCH path with the ``x-kubernetes-group-version-kind`` extension and the ``fieldValidation``
parameter, and no schemas.  kubectl therefore sends ``fieldValidation=Strict`` and leaves
validation to the server, which checks what ``_validation`` checks (unknown fields are kept:
the emulator has no schema; see ``docs/kubernetes.md``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["DOCUMENT_PATH", "INDEX", "SNAPSHOT_DOCUMENT_PATH", "document"]

DOCUMENT_PATH = "/openapi/v3/api/v1"
SNAPSHOT_DOCUMENT_PATH = "/openapi/v3/apis/snapshot.storage.k8s.io/v1"
#: ``GET /openapi/v3``: where each group-version's document is (the hash only keys caches).
INDEX = {
    "paths": {
        path.removeprefix("/openapi/v3/"): {"serverRelativeURL": f"{path}?hash=sandbox-runtime-2"}
        for path in (DOCUMENT_PATH, SNAPSHOT_DOCUMENT_PATH)
    }
}

_SNAPSHOTS = "/apis/snapshot.storage.k8s.io/v1"
#: Per document: (group, version, {kind: PATCH path}).
_DOCUMENTS: dict[str, tuple[str, str, dict[str, str]]] = {
    DOCUMENT_PATH: (
        "",
        "v1",
        {
            "Pod": "/api/v1/namespaces/{namespace}/pods/{name}",
            "Namespace": "/api/v1/namespaces/{name}",
            "ServiceAccount": "/api/v1/namespaces/{namespace}/serviceaccounts/{name}",
            "Event": "/api/v1/namespaces/{namespace}/events/{name}",
            "PersistentVolumeClaim": "/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}",
        },
    ),
    SNAPSHOT_DOCUMENT_PATH: (
        "snapshot.storage.k8s.io",
        "v1",
        {
            "VolumeSnapshot": _SNAPSHOTS + "/namespaces/{namespace}/volumesnapshots/{name}",
            "VolumeSnapshotClass": _SNAPSHOTS + "/volumesnapshotclasses/{name}",
        },
    ),
}


def document(version: str, path: str = DOCUMENT_PATH) -> dict[str, Any]:
    """``GET /openapi/v3/<group-version>``: the PATCH operations of its kinds, no schemas."""
    group, group_version, kinds = _DOCUMENTS[path]
    parameter = {
        "name": "fieldValidation",
        "in": "query",
        "description": "Accepted; unknown fields are kept by the sandbox-runtime emulator.",
        "schema": {"type": "string", "uniqueItems": True},
    }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": version},
        "paths": {
            kind_path: {
                "patch": {
                    "operationId": f"patch{kind}",
                    "parameters": [parameter],
                    "responses": {},
                    "x-kubernetes-action": "patch",
                    "x-kubernetes-group-version-kind": {
                        "group": group,
                        "version": group_version,
                        "kind": kind,
                    },
                }
            }
            for kind, kind_path in kinds.items()
        },
        "components": {"schemas": {}},
    }
