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
from sandbox_runtime.errors import BackendError, CheckpointNotFoundError

from ._client import docker, explain, requests, status_code

__all__ = ["REPOSITORY", "commit", "delete", "listing", "reap"]

logger = logging.getLogger("sandbox_runtime.docker")

#: The repository every checkpoint image is tagged in.
REPOSITORY = "sandbox-runtime/checkpoint"
_CHECKPOINT_LABEL = "sandbox-runtime.checkpoint"
_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException)


def _selector(backend_label: str, backend: str) -> dict[str, list[str]]:
    return {"label": [f"{MANAGED}=true", f"{_CHECKPOINT_LABEL}=true", f"{backend_label}={backend}"]}


def commit(api: Any, container: str, labels: Mapping[str, str]) -> Checkpoint:
    """Commit ``container`` as a checkpoint image carrying ``labels`` (ownership included)."""
    try:
        committed = api.commit(
            container,
            repository=REPOSITORY,
            tag=uuid.uuid4().hex[:16],
            conf={"Labels": dict(labels)},
            pause=True,
        )
        image_id = str(committed["Id"])
        size = api.inspect_image(image_id).get("Size")
    except _ERRORS as exc:
        raise BackendError(f"cannot commit container {container[:12]}: {explain(exc)}") from exc
    return Checkpoint.from_labels(
        "docker", image_id, labels, size_bytes=int(size) if size is not None else None
    )


def listing(api: Any, backend_label: str, backend: str) -> list[Checkpoint]:
    """Checkpoint images of this library on this engine."""
    try:
        found = api.images(filters=_selector(backend_label, backend))
    except _ERRORS as exc:
        raise BackendError(f"cannot list images: {explain(exc)}") from exc
    return [
        Checkpoint.from_labels(
            backend, str(item["Id"]), item.get("Labels") or {}, size_bytes=item.get("Size")
        )
        for item in found
    ]


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
        api.remove_image(image_id, force=True)
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
    for item in api.images(filters=_selector(backend_label, backend)):
        reason = why_reapable(item.get("Labels") or {})
        if reason is None:
            continue
        image_id = str(item["Id"])
        if not dry_run:
            try:
                api.remove_image(image_id, force=True)
            except docker.errors.ImageNotFound:
                continue
            except docker.errors.APIError as exc:
                if status_code(exc) == 409:  # a running sandbox still uses it
                    continue
                raise BackendError(f"cannot remove image {image_id}: {explain(exc)}") from exc
            logger.info("reaped checkpoint image %s (%s)", image_id[:19], reason)
        reaped.append(ReapedSandbox(backend, image_id, f"checkpoint: {reason}"))
    return reaped
