"""Checkpoints on the ags backend's e2b control plane (an ``ark_`` key), through shared code.

The same as the ``e2b`` backend's, from the core: which of e2b's snapshot / pause routes the
service serves is asked of it (``discover``, once per process), and a checkpoint is one of
its snapshots with this host's record (``SnapshotBook``).  The cloud control plane has its
own actions (``_checkpoints``).  No archive fallback here: an AGS E2B door without snapshot
routes declares no checkpoints, and the cloud plane has them.
"""

from __future__ import annotations

from sandbox_runtime.backend_kit import Capability, default_checkpoint_root
from sandbox_runtime.backend_kit.agent import E2bApi, SnapshotBook, discover

from ._options import AgsOptions, e2b_api

__all__ = ["book", "capabilities"]


def capabilities(opts: AgsOptions) -> frozenset[Capability]:
    """What the e2b plane adds: checkpoints and forks with snapshot routes, pause with its."""
    if opts.api_key is None:
        return frozenset()
    api_url, _sandbox_url = opts.e2b_urls()
    found = discover(api_url or f"https://api.{opts.resolved_domain}", lambda: e2b_api(opts))
    added: set[Capability] = set()
    if found.snapshots:
        added |= {Capability.CHECKPOINT_FILESYSTEM, Capability.FORK}
    if found.pause:
        added.add(Capability.PAUSE)
    return frozenset(added)


def book(api: E2bApi) -> SnapshotBook:
    """The service's snapshots as the ags backend's checkpoints, recorded on this host."""
    return SnapshotBook(api, default_checkpoint_root(None), "ags")
