"""AGS's documented API frequency limits, and the refusal the Cloud API answers over them.

Tencent Cloud API limits each API per *API + access region + sub-account* and lets "the
first N requests of each second" through, refusing the rest before they reach the service
(Tencent Cloud API guide, "API 频率限制说明", https://cloud.tencent.com/document/product/1278/109059).
AGS's API overview (https://cloud.tencent.com/document/product/1814/124833) gives N per
action: 100 per second for ``StartSandboxInstance``, ``StopSandboxInstance`` and
``AcquireSandboxInstanceToken``, 20 for every other action (20 is also the Tencent Cloud
default most APIs document).  Earlier versions of the same pages gave 20 for every action,
``StartSandboxInstance`` included (https://cloud.tencent.com/document/api/1814/124816).
:data:`REALISTIC_QUOTAS` is the current table; the emulator serves one region, so its quotas
are per action and SecretId.  The refusal is HTTP 200 with ``RequestLimitExceeded`` in
``Response.Error``, as every Cloud API error; the message is the error code's documented
description.  The E2B-compatible API documents no per-route figures: its routes are limited
only when asked, with HTTP 429.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from sandbox_runtime_emulators._ratelimit import Quota

__all__ = [
    "RATE_LIMIT_CODE",
    "RATE_LIMIT_MESSAGE",
    "REALISTIC_QUOTAS",
    "cloud_caller",
    "cloud_refusal",
    "e2b_refusal",
]

RATE_LIMIT_CODE = "RequestLimitExceeded"
#: The common error code's description in Tencent Cloud API's error code list.
RATE_LIMIT_MESSAGE = "The number of requests exceeds the frequency limit."

_FAST = ("StartSandboxInstance", "StopSandboxInstance", "AcquireSandboxInstanceToken")
_OTHERS = (
    "CreateSandboxTool",
    "DescribeSandboxToolList",
    "UpdateSandboxTool",
    "DeleteSandboxTool",
    "DescribeSandboxInstanceList",
    "DescribeSandboxInstances",
    "UpdateSandboxInstance",
    "CreateAPIKey",
    "DescribeAPIKeyList",
    "DeleteAPIKey",
)
#: Requests per second per action and SecretId, from AGS's API overview (module docstring).
REALISTIC_QUOTAS: dict[str, Quota] = {
    **{action: Quota(100) for action in _FAST},
    **{action: Quota(20) for action in _OTHERS},
}

_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/")


def cloud_caller(headers: dict[str, str]) -> str:
    """The SecretId a Cloud API request is signed with (its quota's sub-account)."""
    match = _CREDENTIAL.search(headers.get("authorization", ""))
    return match.group(1) if match else ""


def cloud_refusal() -> dict[str, Any]:
    """The ``Response`` object of a request refused for its frequency."""
    return {
        "Error": {"Code": RATE_LIMIT_CODE, "Message": RATE_LIMIT_MESSAGE},
        "RequestId": str(uuid.uuid4()),
    }


def e2b_refusal() -> dict[str, Any]:
    """The body of an E2B API request refused for its rate (the SDK reads only the status)."""
    return {"code": 429, "message": "Rate limit exceeded, please try again later."}
