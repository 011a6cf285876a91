"""Stopping AGS instances that this library started and nobody will stop any more.

An instance outlives a client that was killed (``kill -9``, a node lost mid-training) until its
AGS ``Timeout``, which training runs set long; meanwhile it holds quota and costs money.  Every
instance the backend starts carries this library's ownership labels as instance ``Metadata``
(:mod:`sandbox_runtime.ownership`), so the reaper can tell which ones are ours, which are past
their lifetime, and which belong to a process on this host that is gone.  Instances without
the ``managed`` label (started by people, other tools, the console) are never touched; nor are
live instances owned on another host.

With SecretId/SecretKey, one paged ``DescribeSandboxInstanceList`` (status ``STARTING`` or
``RUNNING``) and a ``StopSandboxInstance`` per reapable instance.  With only an ``ark_`` API key,
the E2B-compatible API's listing filtered by the ``managed`` metadata, and ``kill``.
"""

from __future__ import annotations

import logging

import httpx

from sandbox_runtime.errors import BackendError, BackendUnavailableError
from sandbox_runtime.ownership import MANAGED, why_reapable

from ._dataplane import e2b, e2b_errors
from ._options import AgsOptions, cloud_client
from .cloud import AgsApiError, redact

__all__ = ["reap_instances"]

logger = logging.getLogger("sandbox_runtime.ags")

_LIVE = ("STARTING", "RUNNING")


def reap_instances(opts: AgsOptions, *, dry_run: bool = False) -> list[tuple[str, str]]:
    """``(instance id, reason)`` of every instance stopped (or, dry, that would be)."""
    if opts.resolved_control_plane == "cloud":
        return _reap_cloud(opts, dry_run)
    if opts.api_key is not None:
        return _reap_e2b(opts, dry_run)
    raise BackendUnavailableError(
        "reaping AGS instances needs TENCENTCLOUD_SECRET_ID/TENCENTCLOUD_SECRET_KEY or E2B_API_KEY"
    )


def _reap_cloud(opts: AgsOptions, dry_run: bool) -> list[tuple[str, str]]:
    client = cloud_client(opts)
    reaped: list[tuple[str, str]] = []
    for info in client.iter_instances(filters={"Status": list(_LIVE)}):
        if info.status not in _LIVE:  # a service that ignored the filter
            continue
        reason = why_reapable(info.metadata)
        if reason is None:
            continue
        reaped.append((info.instance_id, reason))
        if dry_run:
            continue
        try:
            client.stop_instance(info.instance_id)
            logger.info("reaped AGS instance %s (%s)", info.instance_id, reason)
        except AgsApiError as exc:
            if exc.is_not_found or exc.code.startswith("UnsupportedOperation"):
                continue  # stopped meanwhile
            raise BackendError(f"cannot stop AGS instance {info.instance_id}: {exc}") from exc
    return reaped


def _reap_e2b(opts: AgsOptions, dry_run: bool) -> list[tuple[str, str]]:
    assert opts.api_key is not None
    secret = opts.api_key.get_secret_value()
    api_url, _sandbox_url = opts.e2b_urls()
    params = {
        "api_key": secret,
        "domain": opts.resolved_domain,
        "api_url": api_url,
        "request_timeout": opts.request_timeout,
    }
    reaped: list[tuple[str, str]] = []
    try:
        pages = e2b.Sandbox.list(
            query=e2b.SandboxQuery(metadata={MANAGED: "true"}), limit=100, **params
        )
        while pages.has_next:
            for info in pages.next_items():
                reason = why_reapable(dict(info.metadata or {}))
                if reason is None:
                    continue
                reaped.append((info.sandbox_id, reason))
                if not dry_run:
                    e2b.Sandbox.kill(info.sandbox_id, **params)
                    logger.info("reaped AGS sandbox %s (%s)", info.sandbox_id, reason)
    except e2b_errors.AuthenticationException as exc:
        raise BackendUnavailableError(
            f"the AGS API key was refused: {redact(str(exc), [secret])}"
        ) from exc
    except (e2b_errors.SandboxException, httpx.HTTPError, OSError) as exc:
        raise BackendError(f"cannot reap AGS sandboxes: {redact(str(exc), [secret])}") from exc
    return reaped
