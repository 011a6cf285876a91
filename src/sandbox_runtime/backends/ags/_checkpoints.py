"""Checkpoints of ``ags`` sandboxes: the Cloud API's sandbox snapshots, and pause polling.

A checkpoint is a ``CreateSandboxSnapshot`` of the instance (beta on the service).  The
action takes ``Tags`` (``SandboxSnapshot.Tags``, cloud resource tags), so this library's
ownership labels and the user's labels (base64 JSON, as on docker) travel as tags on the
snapshot itself: listing, deleting and reaping go by them, with no record kept by the client,
and snapshots without the ``managed`` tag (made in the console, by other tools) are never
touched.  ``DescribeSandboxSnapshotList`` is asked for the ``tag:`` filter and the answer is
checked here as well, so a service that ignored the filter still lists only ours.

Errors leave as the library's: a snapshot the service does not know is
:class:`~sandbox_runtime.errors.CheckpointNotFoundError`; a quota refusal (``LimitExceeded.*``)
a :class:`~sandbox_runtime.errors.BackendError` saying so; ``RequestLimitExceeded`` is retried
by the client under the shared rate limiter, as every call is.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace

from sandbox_runtime.backend_kit import (
    MANAGED,
    Checkpoint,
    ReapedSandbox,
    why_reapable,
)
from sandbox_runtime.errors import (
    BackendError,
    CheckpointNotFoundError,
    ConfigError,
    SandboxTimeoutError,
)

from ._cloud import AgsApiError, AgsCloudClient, SnapshotInfo

__all__ = ["CHECKPOINT_TAG", "delete", "listing", "reap", "take", "wait_for_status"]

logger = logging.getLogger("sandbox_runtime.ags")

#: The tag that marks a snapshot as a checkpoint of this library (value ``"true"``).
CHECKPOINT_TAG = "sandbox-runtime.checkpoint"
#: Tencent Cloud tag limits: keys up to 127 characters, values up to 255.
_KEY_MAX, _VALUE_MAX = 127, 255
#: Snapshot states after which it will never be usable.
_GONE = ("DELETING", "DELETED")
_POLL = 0.5


def _tags(labels: Mapping[str, str]) -> dict[str, str]:
    """The labels as snapshot tags; one the service's tag limits would refuse is refused here."""
    for key, value in labels.items():
        if not key or len(key) > _KEY_MAX or len(value) > _VALUE_MAX:
            raise ConfigError(
                f"checkpoint label {key!r}: AGS snapshot tags hold keys of 1-{_KEY_MAX} and "
                f"values of up to {_VALUE_MAX} characters (user labels travel base64-encoded "
                f"in one tag, {len(value)} characters here)"
            )
    return dict(labels)


def _translated(exc: AgsApiError, what: str) -> Exception:
    """A Cloud API error as the library's error for a checkpoint operation."""
    if exc.code.startswith("ResourceNotFound"):
        return CheckpointNotFoundError(f"{what}: {exc}")
    if exc.code.startswith("LimitExceeded"):
        return BackendError(
            f"{what}: the account's AGS quota is used up ({exc}); delete checkpoints "
            "(delete_checkpoint) or stop sandboxes, or run `sandbox-runtime reap`"
        )
    return exc


def _checkpoint(info: SnapshotInfo) -> Checkpoint:
    found = Checkpoint.from_labels("ags", info.snapshot_id, info.tags)
    if info.memory_included == (found.kind == "memory"):
        return found
    # What the service says it kept wins over what was asked.
    return replace(found, kind="memory" if info.memory_included else "filesystem")


def _wait_active(client: AgsCloudClient, info: SnapshotInfo, wait: float) -> SnapshotInfo:
    """Poll until the snapshot is ``ACTIVE`` (the service may answer before it is)."""
    deadline = time.monotonic() + wait
    while info.status != "ACTIVE":
        if info.status in _GONE or info.status.endswith("FAILED"):
            raise BackendError(
                f"AGS snapshot {info.snapshot_id} is {info.status} "
                f"({info.status_reason or 'no reason given'})"
            )
        if time.monotonic() > deadline:
            raise SandboxTimeoutError(
                f"AGS snapshot {info.snapshot_id} was still {info.status} after {wait:.0f}s"
            )
        time.sleep(_POLL)
        found = client.describe_snapshots([info.snapshot_id])
        if not found:
            raise BackendError(f"AGS snapshot {info.snapshot_id} disappeared while being made")
        info = found[0]
    return info


def take(
    client: AgsCloudClient,
    instance_id: str,
    labels: Mapping[str, str],
    *,
    memory: bool,
    wait: float,
) -> Checkpoint:
    """``CreateSandboxSnapshot`` of the instance, tagged with ``labels``; waits until usable."""
    tags = _tags(labels)
    try:
        info = client.create_snapshot(
            instance_id,
            name=f"sandbox-runtime-{uuid.uuid4().hex[:12]}",
            memory=memory,
            tags=tags,
            client_token=uuid.uuid4().hex,
        )
    except AgsApiError as exc:
        raise _translated(exc, f"cannot snapshot AGS instance {instance_id}") from exc
    if memory and not info.memory_included:
        logger.warning(
            "AGS snapshot %s was asked for memory but keeps files only (%s)",
            info.snapshot_id,
            info.status_reason or "no reason given",
        )
    if not info.tags:  # an answer without the tags it was given: they are ours regardless
        info = replace(info, tags=tags)
    return _checkpoint(_wait_active(client, info, wait))


def _ours(client: AgsCloudClient) -> list[SnapshotInfo]:
    found = client.iter_snapshots(filters={f"tag:{CHECKPOINT_TAG}": ["true"]})
    return [
        info
        for info in found
        if info.tags.get(MANAGED) == "true"
        and info.tags.get(CHECKPOINT_TAG) == "true"
        and info.status not in _GONE
    ]


def listing(client: AgsCloudClient) -> list[Checkpoint]:
    """The snapshots of this library on the account (any client's)."""
    return [_checkpoint(info) for info in _ours(client)]


def delete(client: AgsCloudClient, snapshot_id: str) -> None:
    """``DeleteSandboxSnapshot`` of one of this library's snapshots."""
    what = f"cannot delete AGS checkpoint {snapshot_id!r}"
    try:
        found = client.describe_snapshots([snapshot_id])
    except AgsApiError as exc:
        raise _translated(exc, what) from exc
    info = next((item for item in found if item.snapshot_id == snapshot_id), None)
    if info is None or info.status in _GONE:
        raise CheckpointNotFoundError(f"no AGS checkpoint {snapshot_id!r}")
    if info.tags.get(MANAGED) != "true" or info.tags.get(CHECKPOINT_TAG) != "true":
        raise CheckpointNotFoundError(
            f"AGS snapshot {snapshot_id!r} is not a checkpoint of this library"
        )
    try:
        client.delete_snapshot(snapshot_id)
    except AgsApiError as exc:
        raise _translated(exc, what) from exc


def reap(client: AgsCloudClient, *, dry_run: bool) -> list[ReapedSandbox]:
    """Delete this library's snapshots that expired or whose owner is gone."""
    reaped: list[ReapedSandbox] = []
    for info in _ours(client):
        reason = why_reapable(info.tags)
        if reason is None:
            continue
        if not dry_run:
            try:
                client.delete_snapshot(info.snapshot_id)
            except AgsApiError as exc:
                if exc.code.startswith("ResourceNotFound"):
                    continue  # deleted meanwhile
                raise
            logger.info("reaped AGS snapshot %s (%s)", info.snapshot_id, reason)
        reaped.append(ReapedSandbox("ags", info.snapshot_id, f"checkpoint: {reason}"))
    return reaped


def wait_for_status(
    status_of: Callable[[], str | None],
    *,
    wanted: str,
    passing: tuple[str, ...],
    wait: float,
    what: str,
) -> None:
    """Poll ``status_of`` until ``wanted``; a status not in ``passing`` is an error.

    Pause and resume are asynchronous on the service (``PAUSING``, ``RESUMING``); the bound
    is the sandbox's ``start_timeout``.
    """
    deadline = time.monotonic() + wait
    while True:
        status = status_of()
        if status == wanted:
            return
        if status is None:
            raise BackendError(f"{what}: the instance is gone")
        if status not in passing:
            raise BackendError(f"{what}: the instance is {status}")
        if time.monotonic() > deadline:
            raise SandboxTimeoutError(f"{what}: still {status} after {wait:.0f}s")
        time.sleep(_POLL)
