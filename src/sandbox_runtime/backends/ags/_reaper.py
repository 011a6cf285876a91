"""Finding this library's AGS instances: listing them, and stopping those nobody will stop.

An instance outlives a client that was killed (``kill -9``, a node lost mid-training) until its
AGS ``Timeout``, which training runs set long; meanwhile it holds quota and costs money.  Every
instance the backend starts carries this library's ownership labels as instance ``Metadata``
(:mod:`sandbox_runtime._core.ownership`), so the reaper can tell which ones are ours, which are past
their lifetime, and which belong to a process on this host that is gone.  Instances without
the ``managed`` label (started by people, other tools, the console) are never touched; nor are
live instances owned on another host.

With SecretId/SecretKey, one paged ``DescribeSandboxInstanceList`` (status ``STARTING``,
``RUNNING`` or ``PAUSED``: a paused instance holds its quota too) and a
``StopSandboxInstance`` per reapable instance.  With only an ``ark_`` API key, the
E2B-compatible API's listing filtered by the ``managed`` metadata, and ``kill``.  The same
listing serves ``list_sandboxes`` (running instances only).  The snapshots this library made
are reaped by ``AgsBackend.reap`` through ``_checkpoints``.
"""

from __future__ import annotations

import logging

from sandbox_runtime.backend_kit import (
    MANAGED,
    why_reapable,
)
from sandbox_runtime.errors import BackendError, BackendUnavailableError

from ._cloud import AgsApiError
from ._options import AgsOptions, cloud_client, e2b_api

__all__ = ["live_instances", "reap_instances"]

logger = logging.getLogger("sandbox_runtime.ags")

_LIVE = ("STARTING", "RUNNING", "PAUSED")


def live_instances(
    opts: AgsOptions, ends: dict[str, float] | None = None
) -> list[tuple[str, str, dict[str, str]]]:
    """``(instance id, status, metadata)`` of this library's starting or running instances.

    On the E2B plane, ``ends`` receives each one's end as the service has it (an extended
    instance's metadata keeps its first end; the Cloud API's is moved with it).
    """
    if opts.resolved_control_plane == "cloud":
        client = cloud_client(opts)
        return [
            (info.instance_id, info.status, info.metadata)
            for info in client.iter_instances(filters={"Status": list(_LIVE)})
            # A service that ignored the filter, or someone else's instance.
            if info.status in _LIVE and info.metadata.get(MANAGED) == "true"
        ]
    if opts.api_key is None:
        raise BackendUnavailableError(
            "listing AGS instances needs TENCENTCLOUD_SECRET_ID/TENCENTCLOUD_SECRET_KEY or "
            "E2B_API_KEY"
        )
    api = e2b_api(opts)
    try:
        return [
            (sandbox_id, "RUNNING", metadata)
            for sandbox_id, metadata in api.list_running({MANAGED: "true"}, ends)
        ]
    finally:
        api.close()


def reap_instances(opts: AgsOptions, *, dry_run: bool = False) -> list[tuple[str, str]]:
    """``(instance id, reason)`` of every instance stopped (or, dry, that would be)."""
    reaped: list[tuple[str, str]] = []
    ends: dict[str, float] = {}
    for instance_id, _status, metadata in live_instances(opts, ends):
        reason = why_reapable(metadata)
        if reason == "expired" and instance_id in ends:
            # Extended through the E2B API, whose metadata cannot follow (docs/leases.md).
            reason = why_reapable(metadata, expires_at=ends[instance_id])
        if reason is None:
            continue
        reaped.append((instance_id, reason))
        if not dry_run:
            _stop(opts, instance_id)
            logger.info("reaped AGS instance %s (%s)", instance_id, reason)
    return reaped


def _stop(opts: AgsOptions, instance_id: str) -> None:
    if opts.resolved_control_plane == "cloud":
        try:
            cloud_client(opts).stop_instance(instance_id)
        except AgsApiError as exc:
            if exc.is_not_found or exc.code.startswith("UnsupportedOperation"):
                return  # stopped meanwhile
            raise BackendError(f"cannot stop AGS instance {instance_id}: {exc}") from exc
        return
    api = e2b_api(opts)
    try:
        api.kill(instance_id)
    finally:
        api.close()
