"""``DescribeQuotaOverview``: the account's quotas and current usage, as the Cloud API reports them.

Field names are those of tencentcloud-sdk-python-ags 3.1.193 (``AccountQuotaOverview`` with
``Quota`` and ``Usage``, each a ``QuotaResourceInfo``; ``QuotaGroupSet``, ``TotalCount``,
``DataTime``).  The emulator's one configured limit is its instance quota
(``ServiceLimits.max_instances``, ``--max-instances``), so ``Quota`` holds
``SandboxInstances`` only: a quota the emulator does not enforce is not reported, rather
than invented.  ``Usage`` counts what the quota counts (instances starting, running or
resuming, the same rule ``StartSandboxInstance`` refuses by), paused instances and tools.
The emulator has no quota groups (sub-account quotas), so ``QuotaGroupSet`` is empty.
"""

from __future__ import annotations

import time
from typing import Any

from ._service import AgsService
from ._state import rfc3339

__all__ = ["describe_quota_overview"]

#: Instance states the instance quota counts (as ``AgsService`` does when it refuses).
_COUNTED = ("STARTING", "RUNNING", "RESUMING")


def describe_quota_overview(service: AgsService) -> dict[str, Any]:
    """The ``Response`` body of ``DescribeQuotaOverview`` (without ``RequestId``)."""
    with service.store.lock:
        statuses = [instance.status for instance in service.store.instances.values()]
        tools = len(service.store.tools)
    usage = {
        "SandboxInstances": sum(status in _COUNTED for status in statuses),
        "PausedInstances": sum(status == "PAUSED" for status in statuses),
        "SandboxTools": tools,
    }
    return {
        "AccountQuotaOverview": {
            "Quota": {"SandboxInstances": service.limits.max_instances},
            "Usage": usage,
        },
        "QuotaGroupSet": [],
        "TotalCount": 0,
        "DataTime": rfc3339(time.time()),
    }
