"""The e2b backend's checkpoints: the service's snapshots where it has them, archives if not.

With snapshot routes, a checkpoint is a snapshot made through ``POST
/sandboxes/{id}/snapshots`` (it outlives the sandbox; a sandbox starts from it with the
snapshot id as its template), named ``sandbox-runtime-<hex>`` and recorded with its labels on
this host (the core's :class:`~sandbox_runtime.backend_kit.agent.SnapshotBook`, which the
``ags`` backend's E2B door can share).  Listing joins the records with ``GET /snapshots``;
deleting removes both; reaping deletes those expired or whose owner died.

Without them (found out by :func:`~sandbox_runtime.backend_kit.agent.discover`), the
workdir and ``SandboxConfig.checkpoint_paths`` go into the core's
:class:`~sandbox_runtime.backend_kit.ArchiveCheckpointStore` (:func:`store_for`).  Which of
the two a checkpoint is comes from this client's own records, never from its id's shape.
"""

from __future__ import annotations

from sandbox_runtime.backend_kit import ArchiveCheckpointStore
from sandbox_runtime.backend_kit.agent import E2bApi, SnapshotBook
from sandbox_runtime.errors import CheckpointNotFoundError

from ._options import E2bOptions

__all__ = ["book", "is_archive", "store_for"]


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


def book(backend: str, opts: E2bOptions, api: E2bApi) -> SnapshotBook:
    """The service's snapshots as checkpoints, recorded in the same directory as the store."""
    return SnapshotBook(api, opts.resolved_checkpoint_dir, backend)
