"""``PATCH /api/v1/namespaces/{ns}/pods/{name}``: what a running pod lets a client change.

A pod's spec is immutable once created, with few exceptions; the ones a sandbox library
meets are ``metadata.labels`` and ``metadata.annotations`` (merged, a ``null`` value removing
the key, as merge and strategic-merge patches of maps do) and ``spec.activeDeadlineSeconds``,
which may be set where unset or lowered, never raised.  Anything else in ``spec`` is the API
server's 422 ``Forbidden``; a raised deadline is its 422 ``Invalid``.
"""

from __future__ import annotations

from typing import Any

from ._status import ApiError, invalid

__all__ = ["apply_pod_patch"]

_IMMUTABLE = (
    "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
    "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be "
    "set to 1 if it was previously negative)"
)


def _merge_map(target: dict[str, Any], changes: Any, field: str, name: str) -> None:
    if changes is None:
        return
    if not isinstance(changes, dict):
        raise invalid("Pod", name, [(field, "must be a map of strings")])
    for key, value in changes.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, str):
            target[key] = value
        else:
            raise invalid("Pod", name, [(f"{field}[{key}]", "must be a string")])


def _patch_spec(spec: dict[str, Any], changes: Any, name: str) -> None:
    if not changes:
        return
    if not isinstance(changes, dict) or set(changes) - {"activeDeadlineSeconds"}:
        raise invalid("Pod", name, [("spec", _IMMUTABLE.removeprefix("spec: "))])
    wanted = changes["activeDeadlineSeconds"]
    current = spec.get("activeDeadlineSeconds")
    if not isinstance(wanted, int) or wanted <= 0:
        raise invalid("Pod", name, [("spec.activeDeadlineSeconds", "must be a positive integer")])
    if current is not None and wanted > current:
        raise invalid(
            "Pod",
            name,
            [
                (
                    "spec.activeDeadlineSeconds",
                    f"Invalid value: {wanted}: must be less than or equal to previous value",
                )
            ],
        )
    spec["activeDeadlineSeconds"] = wanted


def apply_pod_patch(pod: dict[str, Any], body: Any) -> None:
    """Apply a merge patch to ``pod`` in place, or raise the API server's error."""
    name = str(pod["metadata"].get("name"))
    if not isinstance(body, dict):
        raise ApiError(400, "BadRequest", "the patch must be a JSON object", {})
    unknown = set(body) - {"metadata", "spec", "apiVersion", "kind"}
    if unknown:
        raise invalid("Pod", name, [(field, "cannot be patched") for field in sorted(unknown)])
    metadata = body.get("metadata") or {}
    if not isinstance(metadata, dict) or set(metadata) - {"labels", "annotations"}:
        raise invalid("Pod", name, [("metadata", "only labels and annotations can be patched")])
    spec = dict(pod["spec"])
    _patch_spec(spec, body.get("spec"), name)
    labels = dict(pod["metadata"].get("labels") or {})
    annotations = dict(pod["metadata"].get("annotations") or {})
    _merge_map(labels, metadata.get("labels"), "metadata.labels", name)
    _merge_map(annotations, metadata.get("annotations"), "metadata.annotations", name)
    pod["spec"] = spec
    pod["metadata"]["labels"] = labels
    pod["metadata"]["annotations"] = annotations
