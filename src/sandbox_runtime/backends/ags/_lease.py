"""Moving a running AGS instance's end, on either control plane, and why one ended.

AGS ends an instance at its ``Timeout`` by itself.  The Cloud API moves it with
``UpdateSandboxInstance`` (``Timeout`` counted again from the call: ``"300s"``), the
E2B-compatible API with ``POST /sandboxes/{id}/timeout`` (``{"timeout": seconds}``, the same
rule).  Both refuse less than 30 s and an end past 24 h from the start, which is the
service's hard cap (:data:`MAX_LIFETIME_S`); the backend asks for at least 30 s and the
runtime refuses an extension past the cap before any call.

The ownership labels' end moves too, so that ``reap`` never takes an extended instance: the
Cloud API's ``UpdateSandboxInstance`` rewrites the instance's ``Metadata`` (the whole set,
end moved) with its ``Timeout``; the E2B API cannot change metadata, so its reaper reads
each instance's ``endAt`` from the listing instead.
"""

from __future__ import annotations

import math
import time
from typing import Any

from sandbox_runtime.backend_kit import MANAGED, with_expiry
from sandbox_runtime.backend_kit.agent import E2bApi

from ._cloud import AgsApiError, AgsCloudClient

__all__ = [
    "MAX_LIFETIME_S",
    "MIN_TIMEOUT_S",
    "cause_of_stop",
    "is_gone_error",
    "set_cloud_timeout",
    "set_e2b_timeout",
]

#: The service's own cap on an instance's length, from its start.
MAX_LIFETIME_S = 24 * 3600
#: The shortest ``Timeout`` either API accepts.
MIN_TIMEOUT_S = 30


def _seconds(seconds: float) -> int:
    return max(MIN_TIMEOUT_S, math.ceil(seconds))


def set_cloud_timeout(client: AgsCloudClient, instance_id: str, end_at: float) -> None:
    """``UpdateSandboxInstance``: the instance ends at ``end_at``, its metadata's end too."""
    params: dict[str, Any] = {
        "InstanceId": instance_id,
        "Timeout": f"{_seconds(end_at - time.time())}s",
    }
    info = client.describe_instance(instance_id)
    if info is not None and info.metadata.get(MANAGED) == "true":
        moved = with_expiry(info.metadata, end_at)
        params["Metadata"] = [{"Name": k, "Value": v} for k, v in moved.items()]
    client.call("UpdateSandboxInstance", params, idempotent=True)


def set_e2b_timeout(api: E2bApi, sandbox_id: str, seconds: float) -> None:
    """``POST /sandboxes/{id}/timeout``: the sandbox ends ``seconds`` from now."""
    api.set_timeout(sandbox_id, _seconds(seconds))


def cause_of_stop(status: str, stop_reason: str) -> str:
    """A stopped instance's ``StopReason`` as ``SandboxGoneError.cause``."""
    if status in ("STARTING", "RUNNING"):
        return "unknown"
    reason = stop_reason.lower()
    if reason == "timeout":
        return "expired"
    if reason in ("error", "failed", "oom"):
        return "evicted"
    if reason in ("manual", "user", "stopped", "api", "delete"):
        return "killed"
    return "unknown"


def is_gone_error(exc: Any) -> bool:
    """True for a Cloud API refusal that means the instance no longer runs."""
    return isinstance(exc, AgsApiError) and (exc.is_not_found or "UnsupportedOperation" in str(exc))
