"""Checkpoints of docker sandboxes: images committed from their containers.

``docker commit`` (with the container paused for the moment it takes) saves the
container's writable layer as an image of ``sandbox-runtime/checkpoint``, tagged with a
random name and labelled with this library's ownership labels: listing, deleting and
reaping go by those labels, so nothing else's images are touched.  Only the filesystem is
kept: processes and memory are not (the engine's CRIU checkpoints are an experimental
daemon feature; ``docs/checkpoints.md`` says what this engine did).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import Any

from sandbox_runtime.backend_kit import MANAGED, Checkpoint, ReapedSandbox, why_reapable
from sandbox_runtime.errors import BackendError, CheckpointNotFoundError, ConfigError

from ._client import docker, explain, requests, status_code

__all__ = ["REPOSITORY", "commit", "delete", "listing", "reap", "require"]

logger = logging.getLogger("sandbox_runtime.docker")

#: The repository every checkpoint image is tagged in.
REPOSITORY = "sandbox-runtime/checkpoint"
_CHECKPOINT_LABEL = "sandbox-runtime.checkpoint"
_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException)


def _ours(api: Any, backend_label: str, backend: str) -> list[dict[str, Any]]:
    """The engine's checkpoint images of this library.

    One label goes to the engine, the rest are checked here: Podman's image listing
    matches nothing when given several label filters.
    """
    found = api.images(filters={"label": f"{_CHECKPOINT_LABEL}=true"})
    return [
        item
        for item in found
        if (item.get("Labels") or {}).get(MANAGED) == "true"
        and (item.get("Labels") or {}).get(backend_label) == backend
    ]


def _label_changes(labels: Mapping[str, str]) -> list[str]:
    """``LABEL`` instructions for a commit: Podman's API ignores ``conf``'s labels.

    Values are quoted without escapes (Docker unescapes them, Podman keeps backslashes), so
    a value holding a quote or backslash is refused rather than stored differently.
    """
    for key, value in labels.items():
        if any(char in key + value for char in '"\\\n'):
            raise ConfigError(f"checkpoint label {key!r}={value!r}: no quotes or backslashes")
    return [f'LABEL "{key}"="{value}"' for key, value in labels.items()]


def commit(api: Any, container: str, labels: Mapping[str, str]) -> Checkpoint:
    """Commit ``container`` as a checkpoint image carrying ``labels`` (ownership included)."""
    changes = _label_changes(labels)
    try:
        committed = api.commit(
            container,
            repository=REPOSITORY,
            tag=uuid.uuid4().hex[:16],
            changes=changes,
            pause=True,
        )
        inspected = api.inspect_image(str(committed["Id"]))
        image_id = str(inspected["Id"])  # Podman answers the bare hex, listings sha256:...
        size = inspected.get("Size")
    except _ERRORS as exc:
        raise BackendError(f"cannot commit container {container[:12]}: {explain(exc)}") from exc
    return Checkpoint.from_labels(
        "docker", image_id, labels, size_bytes=int(size) if size is not None else None
    )


def listing(api: Any, backend_label: str, backend: str) -> list[Checkpoint]:
    """Checkpoint images of this library on this engine."""
    try:
        found = _ours(api, backend_label, backend)
    except _ERRORS as exc:
        raise BackendError(f"cannot list images: {explain(exc)}") from exc
    return [
        Checkpoint.from_labels(
            backend, str(item["Id"]), item.get("Labels") or {}, size_bytes=item.get("Size")
        )
        for item in found
    ]


def require(api: Any, image_id: str) -> None:
    """Raise :class:`CheckpointNotFoundError` unless ``image_id`` is on the engine."""
    try:
        api.inspect_image(image_id)
    except docker.errors.ImageNotFound as exc:
        raise CheckpointNotFoundError(f"no docker checkpoint {image_id!r}") from exc
    except _ERRORS as exc:
        raise BackendError(f"cannot inspect image {image_id!r}: {explain(exc)}") from exc


def delete(api: Any, image_id: str) -> None:
    """Remove one checkpoint image; refused while a running container uses it."""
    try:
        labels = (api.inspect_image(image_id).get("Config") or {}).get("Labels") or {}
    except docker.errors.ImageNotFound as exc:
        raise CheckpointNotFoundError(f"no docker checkpoint {image_id!r}") from exc
    except _ERRORS as exc:
        raise BackendError(f"cannot inspect image {image_id!r}: {explain(exc)}") from exc
    if labels.get(_CHECKPOINT_LABEL) != "true" or labels.get(MANAGED) != "true":
        raise CheckpointNotFoundError(f"image {image_id!r} is not a checkpoint of this library")
    try:
        api.remove_image(image_id, force=False)  # Podman's force removes its containers
    except docker.errors.ImageNotFound as exc:
        raise CheckpointNotFoundError(f"no docker checkpoint {image_id!r}") from exc
    except _ERRORS as exc:
        in_use = " (in use by a sandbox or a later checkpoint)" if status_code(exc) == 409 else ""
        raise BackendError(
            f"cannot delete checkpoint {image_id!r}{in_use}: {explain(exc)}"
        ) from exc


def reap(api: Any, backend_label: str, backend: str, dry_run: bool) -> list[ReapedSandbox]:
    """Remove checkpoint images that expired or lost their owner (in use: left for later)."""
    reaped: list[ReapedSandbox] = []
    for item in _ours(api, backend_label, backend):
        reason = why_reapable(item.get("Labels") or {})
        if reason is None:
            continue
        image_id = str(item["Id"])
        if not dry_run:
            try:
                api.remove_image(image_id, force=False)  # Podman's force removes its containers
            except docker.errors.ImageNotFound:
                continue
            except docker.errors.APIError as exc:
                if status_code(exc) == 409:  # a running sandbox still uses it
                    continue
                raise BackendError(f"cannot remove image {image_id}: {explain(exc)}") from exc
            logger.info("reaped checkpoint image %s (%s)", image_id[:19], reason)
        reaped.append(ReapedSandbox(backend, image_id, f"checkpoint: {reason}"))
    return reaped
