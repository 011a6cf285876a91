"""The e2b backend's checkpoints: the service's snapshots where it has them, archives if not.

With snapshot routes, a checkpoint is a snapshot made through ``POST
/sandboxes/{id}/snapshots`` (it outlives the sandbox; a sandbox starts from it with the
snapshot id as its template), named ``sandbox-runtime-<hex>`` and recorded with its labels on
this host (:mod:`._records`).  Listing joins the records with ``GET /snapshots``; deleting
removes both; reaping deletes those expired or whose owner died, as for sandboxes.

Without them (found out by :func:`~sandbox_runtime.backend_kit.agent.discover`), the
workdir and ``SandboxConfig.checkpoint_paths`` go into the core's
:class:`~sandbox_runtime.backend_kit.ArchiveCheckpointStore` (:func:`store_for`).  Which of
the two a checkpoint is comes from this client's own records, never from its id's shape.
"""

from __future__ import annotations

from sandbox_runtime.backend_kit import (
    ArchiveCheckpointStore,
    Checkpoint,
    ReapedSandbox,
    why_reapable,
)
from sandbox_runtime.backend_kit.agent import E2bApi
from sandbox_runtime.errors import CheckpointNotFoundError

from . import _records
from ._options import E2bOptions

__all__ = ["delete", "is_archive", "listed", "reap", "store_for"]


def store_for(opts: E2bOptions) -> ArchiveCheckpointStore:
    """The fallback's archive store (the same directory as the snapshot records)."""
    return ArchiveCheckpointStore(opts.resolved_checkpoint_dir)


def is_archive(backend: str, opts: E2bOptions, checkpoint_id: str) -> bool:
    """Whether this client holds ``checkpoint_id`` as an archive (else it is a snapshot)."""
    try:
        store_for(opts).record(checkpoint_id, backend)
    except CheckpointNotFoundError:
        return False
    return True


def listed(backend: str, opts: E2bOptions, api: E2bApi) -> list[Checkpoint]:
    """The checkpoints recorded here whose snapshots the service still has, newest first."""
    root, url = opts.resolved_checkpoint_dir, opts.resolved_api_url
    records = _records.read_all(root, url)
    if not records:
        return []
    present = {snapshot_id for snapshot_id, _names in api.list_snapshots()}
    found = []
    for checkpoint_id, labels in records.items():
        if checkpoint_id in present:
            found.append(Checkpoint.from_labels(backend, checkpoint_id, labels))
        else:
            _records.forget(root, url, checkpoint_id)  # deleted elsewhere: nothing to keep
    return sorted(found, key=lambda item: item.created, reverse=True)


def delete(opts: E2bOptions, api: E2bApi, checkpoint_id: str) -> None:
    """Delete the snapshot and its record; ``CheckpointNotFoundError`` when neither was."""
    recorded = _records.read_one(opts.resolved_checkpoint_dir, opts.resolved_api_url, checkpoint_id)
    deleted = api.delete_snapshot(checkpoint_id) if recorded is not None else False
    forgotten = _records.forget(opts.resolved_checkpoint_dir, opts.resolved_api_url, checkpoint_id)
    if not (deleted or forgotten):
        raise CheckpointNotFoundError(f"no e2b checkpoint {checkpoint_id!r} of this library")


def reap(backend: str, opts: E2bOptions, api: E2bApi, *, dry_run: bool) -> list[ReapedSandbox]:
    """Delete the checkpoints that expired or whose owner is gone."""
    root, url = opts.resolved_checkpoint_dir, opts.resolved_api_url
    reaped = []
    for checkpoint_id, labels in _records.read_all(root, url).items():
        reason = why_reapable(labels)
        if reason is None:
            continue
        if not dry_run:
            api.delete_snapshot(checkpoint_id)
            _records.forget(root, url, checkpoint_id)
        reaped.append(ReapedSandbox(backend, checkpoint_id, f"checkpoint: {reason}"))
    return reaped
