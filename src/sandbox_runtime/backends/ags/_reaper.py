"""Finding this library's AGS instances: listing them, and stopping those nobody will stop.

An instance outlives a client that was killed (``kill -9``, a node lost mid-training) until its
AGS ``Timeout``, which training runs set long; meanwhile it holds quota and costs money.  Every
instance the backend starts carries this library's ownership labels as instance ``Metadata``
(:mod:`sandbox_runtime.ownership`), so the reaper can tell which ones are ours, which are past
their lifetime, and which belong to a process on this host that is gone.  Instances without
the ``managed`` label (started by people, other tools, the console) are never touched; nor are
live instances owned on another host.

With SecretId/SecretKey, one paged ``DescribeSandboxInstanceList`` (status ``STARTING`` or
``RUNNING``) and a ``StopSandboxInstance`` per reapable instance.  With only an ``ark_`` API key,
the E2B-compatible API's listing filtered by the ``managed`` metadata, and ``kill``.  The same
listing serves ``list_sandboxes`` (running instances only).
"""

from __future__ import annotations

import logging
from typing import Any

import httpx

from sandbox_runtime.errors import BackendError, BackendUnavailableError
from sandbox_runtime.ownership import MANAGED, why_reapable

from ._dataplane import e2b, e2b_errors
from ._options import AgsOptions, cloud_client
from .cloud import AgsApiError, redact

__all__ = ["live_instances", "reap_instances"]

logger = logging.getLogger("sandbox_runtime.ags")

_LIVE = ("STARTING", "RUNNING")


def live_instances(opts: AgsOptions) -> list[tuple[str, str, dict[str, str]]]:
    """``(instance id, status, metadata)`` of this library's starting or running instances."""
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
    secret = opts.api_key.get_secret_value()
    found: list[tuple[str, str, dict[str, str]]] = []
    try:
        pages = e2b.Sandbox.list(
            query=e2b.SandboxQuery(metadata={MANAGED: "true"}), limit=100, **_e2b_params(opts)
        )
        while pages.has_next:
            for info in pages.next_items():
                found.append((info.sandbox_id, "RUNNING", dict(info.metadata or {})))
    except e2b_errors.AuthenticationException as exc:
        raise BackendUnavailableError(
            f"the AGS API key was refused: {redact(str(exc), [secret])}"
        ) from exc
    except (e2b_errors.SandboxException, httpx.HTTPError, OSError) as exc:
        raise BackendError(f"cannot list AGS sandboxes: {redact(str(exc), [secret])}") from exc
    return found


def _e2b_params(opts: AgsOptions) -> dict[str, Any]:
    assert opts.api_key is not None
    api_url, _sandbox_url = opts.e2b_urls()
    return {
        "api_key": opts.api_key.get_secret_value(),
        "domain": opts.resolved_domain,
        "api_url": api_url,
        "request_timeout": opts.request_timeout,
    }


def reap_instances(opts: AgsOptions, *, dry_run: bool = False) -> list[tuple[str, str]]:
    """``(instance id, reason)`` of every instance stopped (or, dry, that would be)."""
    reaped: list[tuple[str, str]] = []
    for instance_id, _status, metadata in live_instances(opts):
        reason = why_reapable(metadata)
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
    assert opts.api_key is not None
    secret = opts.api_key.get_secret_value()
    try:
        e2b.Sandbox.kill(instance_id, **_e2b_params(opts))
    except (e2b_errors.SandboxException, httpx.HTTPError, OSError) as exc:
        message = redact(str(exc), [secret])
        raise BackendError(f"cannot stop AGS sandbox {instance_id}: {message}") from exc
