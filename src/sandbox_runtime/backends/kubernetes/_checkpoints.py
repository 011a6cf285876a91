"""Filesystem checkpoints of kubernetes sandboxes, through the shared archive store.

The archive path (``_snapshots`` is the other, where the cluster has a CSI snapshot class).
The pods API has no snapshot of a container's filesystem (a ``VolumeSnapshot`` covers
volumes only, and needs a CSI driver), nor a freezer: so a checkpoint is the sandbox's
workdir and ``SandboxConfig.checkpoint_paths`` read as tar through the pod's agent or
``pods/exec`` and kept on this client's disk (:class:`ArchiveCheckpointStore`).  A rollback
restores them in the same pod; a fork starts fresh pods of the same image and restores them
there.  ``pause`` is not offered: see ``docs/checkpoints.md``.
"""

from __future__ import annotations

from sandbox_runtime.backend_kit import ArchiveCheckpointStore

from ._options import KubernetesOptions

__all__ = ["store_for"]


def store_for(options: KubernetesOptions) -> ArchiveCheckpointStore:
    """The checkpoint store of sandboxes opened with ``options``."""
    return ArchiveCheckpointStore(options.checkpoint_dir)
