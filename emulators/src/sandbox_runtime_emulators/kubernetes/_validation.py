"""Checking and defaulting a Pod the way the API server does before it stores it.

What a real server would refuse is refused with the same 422 ``Invalid`` shape; what only the
emulator cannot do (several containers, volumes other than claims, probes) is refused
the same way, with a message that says it is the emulator's limit (listed in
``docs/kubernetes.md``).
"""

from __future__ import annotations

from typing import Any

from sandbox_runtime.backends.kubernetes._names import (
    cpu_cores,
    dns1123_label_problem,
    dns1123_subdomain_problem,
    label_key_problem,
    label_value_problem,
    memory_bytes,
)

from ._status import bad_request, invalid

__all__ = ["default_pull_policy", "validate_pod"]

_RESTART_POLICIES = ("Always", "OnFailure", "Never")
_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
_EMULATOR_LIMIT = "not supported by the sandbox-runtime emulator"
_MAX_ANNOTATION_BYTES = 256 * 1024


def default_pull_policy(image: str) -> str:
    """``Always`` for ``:latest`` or untagged images, else ``IfNotPresent`` (the server's rule)."""
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    if ":" not in last or last.endswith(":latest"):
        return "Always"
    return "IfNotPresent"


def _check_metadata(meta: dict[str, Any], causes: list[tuple[str, str]]) -> None:
    name = meta.get("name")
    if not name and not meta.get("generateName"):
        causes.append(("metadata.name", "Required value: name or generateName is required"))
    elif name:
        problem = dns1123_subdomain_problem(str(name))
        if problem:
            causes.append(("metadata.name", f"Invalid value: {name!r}: {problem}"))
    for key, value in (meta.get("labels") or {}).items():
        problem = label_key_problem(str(key))
        if problem:
            causes.append(("metadata.labels", f"Invalid value: {key!r}: {problem}"))
        if not isinstance(value, str) or label_value_problem(value):
            reason = label_value_problem(value) if isinstance(value, str) else "must be a string"
            causes.append(("metadata.labels", f"Invalid value: {value!r}: {reason}"))
    annotations = meta.get("annotations") or {}
    size = 0
    for key, value in annotations.items():
        problem = label_key_problem(str(key))
        if problem:
            causes.append(("metadata.annotations", f"Invalid value: {key!r}: {problem}"))
        size += len(str(key)) + len(str(value))
    if size > _MAX_ANNOTATION_BYTES:
        causes.append(("metadata.annotations", "Too long: must have at most 262144 bytes"))


def _check_resources(resources: dict[str, Any], path: str, causes: list[tuple[str, str]]) -> None:
    parsed: dict[str, dict[str, float]] = {}
    for kind in ("requests", "limits"):
        for resource, quantity in (resources.get(kind) or {}).items():
            field = f"{path}.resources.{kind}[{resource}]"
            try:
                amount = cpu_cores(quantity) if resource == "cpu" else float(memory_bytes(quantity))
            except (ValueError, TypeError):
                causes.append((field, f"Invalid value: {quantity!r}: must be a quantity"))
                continue
            parsed.setdefault(kind, {})[resource] = amount
    for resource, request in parsed.get("requests", {}).items():
        limit = parsed.get("limits", {}).get(resource)
        if limit is not None and request > limit:
            causes.append(
                (
                    f"{path}.resources.requests",
                    f"Invalid value: {resource}: must be less than or equal to {resource} limit",
                )
            )


def _check_container(container: dict[str, Any], path: str, causes: list[tuple[str, str]]) -> None:
    name = container.get("name")
    if not name:
        causes.append((f"{path}.name", "Required value"))
    elif dns1123_label_problem(str(name)):
        causes.append((f"{path}.name", f"Invalid value: {name!r}: {dns1123_label_problem(name)}"))
    image = container.get("image")
    if not image or not str(image).strip():
        causes.append((f"{path}.image", "Required value"))
    policy = container.get("imagePullPolicy")
    if policy is not None and policy not in _PULL_POLICIES:
        causes.append(
            (
                f"{path}.imagePullPolicy",
                f"Unsupported value: {policy!r}: supported values: "
                + ", ".join(f'"{p}"' for p in _PULL_POLICIES),
            )
        )
    for index, variable in enumerate(container.get("env") or []):
        if not variable.get("name"):
            causes.append((f"{path}.env[{index}].name", "Required value"))
        if "valueFrom" in variable:
            causes.append((f"{path}.env[{index}].valueFrom", _EMULATOR_LIMIT))
    for index, mount in enumerate(container.get("volumeMounts") or []):
        where = f"{path}.volumeMounts[{index}]"
        if not str(mount.get("mountPath") or "").startswith("/"):
            causes.append((f"{where}.mountPath", "Required value: an absolute path"))
        if mount.get("subPath") or mount.get("subPathExpr"):
            causes.append((f"{where}.subPath", _EMULATOR_LIMIT))
    for field in ("ports", "livenessProbe", "readinessProbe", "startupProbe"):
        if container.get(field):
            causes.append((f"{path}.{field}", _EMULATOR_LIMIT))
    _check_resources(container.get("resources") or {}, path, causes)


def _check_volumes(
    spec: dict[str, Any], containers: list[dict[str, Any]], causes: list[tuple[str, str]]
) -> None:
    """Volumes: PersistentVolumeClaims only, each mount naming one of them."""
    names: set[str] = set()
    for index, volume in enumerate(spec.get("volumes") or []):
        name = str(volume.get("name") or "")
        if not name or dns1123_label_problem(name):
            causes.append((f"spec.volumes[{index}].name", f"Invalid value: {name!r}"))
        elif name in names:
            causes.append((f"spec.volumes[{index}].name", f"Duplicate value: {name!r}"))
        names.add(name)
        sources = set(volume) - {"name"}
        if sources != {"persistentVolumeClaim"}:
            causes.append(
                (f"spec.volumes[{index}]", f"{_EMULATOR_LIMIT} (only persistentVolumeClaim)")
            )
        elif not (volume["persistentVolumeClaim"] or {}).get("claimName"):
            causes.append(
                (f"spec.volumes[{index}].persistentVolumeClaim.claimName", "Required value")
            )
    for c_index, container in enumerate(containers):
        for index, mount in enumerate(container.get("volumeMounts") or []):
            if mount.get("name") not in names:
                causes.append(
                    (
                        f"spec.containers[{c_index}].volumeMounts[{index}].name",
                        f"Not found: {mount.get('name')!r}",
                    )
                )


def validate_pod(namespace: str, pod: dict[str, Any]) -> None:
    """Raise the server's 400 or 422 for a pod it would refuse; fill in the defaults it adds."""
    if not isinstance(pod, dict) or pod.get("kind", "Pod") != "Pod":
        raise bad_request("the body must be a Pod object")
    meta = pod.setdefault("metadata", {})
    if meta.get("namespace") not in (None, "", namespace):
        raise bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    spec = pod.setdefault("spec", {})
    causes: list[tuple[str, str]] = []
    _check_metadata(meta, causes)
    containers = spec.get("containers") or []
    if not containers:
        causes.append(("spec.containers", "Required value"))
    elif len(containers) > 1:
        causes.append(
            (
                "spec.containers",
                f"Too many: {len(containers)}: more than one container is {_EMULATOR_LIMIT}",
            )
        )
    for index, container in enumerate(containers):
        _check_container(container, f"spec.containers[{index}]", causes)
    inits = spec.get("initContainers") or []
    for index, container in enumerate(inits):
        _check_container(container, f"spec.initContainers[{index}]", causes)
        if container.get("restartPolicy"):  # a sidecar: it would never complete here
            causes.append((f"spec.initContainers[{index}].restartPolicy", _EMULATOR_LIMIT))
    _check_volumes(spec, [*containers, *inits], causes)
    for field in ("ephemeralContainers", "hostNetwork", "hostPID"):
        if spec.get(field):
            causes.append((f"spec.{field}", _EMULATOR_LIMIT))
    policy = spec.get("restartPolicy", "Always")
    if policy not in _RESTART_POLICIES:
        causes.append(
            (
                "spec.restartPolicy",
                f'Unsupported value: {policy!r}: supported values: "Always", "OnFailure", "Never"',
            )
        )
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and (not isinstance(deadline, int) or deadline <= 0):
        causes.append(
            (
                "spec.activeDeadlineSeconds",
                f"Invalid value: {deadline!r}: must be between 1 and 2147483647, inclusive",
            )
        )
    node_selector = spec.get("nodeSelector") or {}
    for key, value in node_selector.items():
        if label_key_problem(str(key)) or label_value_problem(str(value)):
            causes.append(("spec.nodeSelector", f"Invalid value: {key}={value}"))
    if causes:
        raise invalid("Pod", str(meta.get("name") or meta.get("generateName") or ""), causes)
    _apply_defaults(spec)


def _apply_defaults(spec: dict[str, Any]) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    account = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
    spec["serviceAccountName"] = spec["serviceAccount"] = account
    for container in [*spec["containers"], *(spec.get("initContainers") or [])]:
        container.setdefault("imagePullPolicy", default_pull_policy(container["image"]))
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
        container.setdefault("resources", {})
