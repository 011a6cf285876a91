"""AGS sandbox instances by hand: start (and wait until running), list, stop, acquire tokens.

For debugging a tool or warming one up; training runs start instances through the ``ags``
backend instead, which adds ownership metadata, lifetimes and cleanup.  A start carries a
``ClientToken``, so the retries that make it survive a lost answer never make a second
instance.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping

from sandbox_runtime.backends.ags._cloud import (
    AgsApiError,
    AgsCloudClient,
    InstanceInfo,
    InstanceToken,
)
from sandbox_runtime.errors import SandboxStartError, SandboxTimeoutError

__all__ = ["acquire_token", "list_instances", "start_instance", "stop_instance"]

_FAILED = ("FAILED", "STARTING_FAILED", "STOPPED", "STOPPING")


def start_instance(
    client: AgsCloudClient,
    *,
    tool_name: str | None = None,
    tool_id: str | None = None,
    timeout: str = "5m",
    image: str | None = None,
    image_registry_type: str = "enterprise",
    metadata: Mapping[str, str] | None = None,
    wait: float | None = 300.0,
    poll_interval: float = 1.0,
) -> InstanceInfo:
    """``StartSandboxInstance``, then (unless ``wait`` is None) poll until it is RUNNING.

    ``image`` overrides the tool's image for this instance (``CustomConfiguration.Image``).
    """
    if not (tool_name or tool_id):
        raise ValueError("give a tool name or a tool id")
    custom = {"Image": image, "ImageRegistryType": image_registry_type} if image else None
    info = client.start_instance(
        tool_id=tool_id,
        tool_name=None if tool_id else tool_name,
        timeout=timeout,
        client_token=uuid.uuid4().hex,
        custom_configuration=custom,
        metadata=metadata,
    )
    if wait is None:
        return info
    deadline = time.monotonic() + wait
    while info.status != "RUNNING":
        if info.status in _FAILED:
            raise SandboxStartError(
                f"AGS instance {info.instance_id} is {info.status} "
                f"({info.stop_reason or 'no reason given'})"
            )
        if time.monotonic() >= deadline:
            raise SandboxTimeoutError(
                f"AGS instance {info.instance_id} still {info.status} after {wait:.0f}s"
            )
        time.sleep(poll_interval)
        found = client.describe_instance(info.instance_id)
        if found is None:
            raise SandboxStartError(f"AGS instance {info.instance_id} disappeared while starting")
        info = found
    return info


def list_instances(
    client: AgsCloudClient, *, tool_id: str | None = None, status: str | None = None
) -> list[InstanceInfo]:
    """Every instance (of one tool, in one status), all pages."""
    filters = {"Status": [status]} if status else None
    return [
        i
        for i in client.iter_instances(tool_id=tool_id, filters=filters)
        if not status or i.status == status
    ]


def stop_instance(client: AgsCloudClient, instance_id: str) -> bool:
    """Stop an instance; False if it was already stopped or is unknown."""
    try:
        client.stop_instance(instance_id)
    except AgsApiError as exc:
        if exc.is_not_found or exc.code.startswith("UnsupportedOperation"):
            return False
        raise
    return True


def acquire_token(client: AgsCloudClient, instance_id: str) -> InstanceToken:
    """A data-plane token (``X-Access-Token`` for envd on port 49983); it is a ``SecretStr``."""
    return client.acquire_token(instance_id)
