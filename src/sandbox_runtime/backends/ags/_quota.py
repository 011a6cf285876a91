"""The account's instance quota, from the Cloud API's ``DescribeQuotaOverview``.

``AccountQuotaOverview.Quota.SandboxInstances`` is how many instances the account may run,
``Usage.SandboxInstances`` how many it runs now (every client's); what is left is what a
``spread`` member on this account may still start.  The action reports no start rate (the
rate limits are per API action, documented, not queried), so none is returned.
"""

from __future__ import annotations

from sandbox_runtime.backend_kit import ServiceQuota

from ._options import AgsOptions, cloud_client

__all__ = ["read_quota"]


def read_quota(opts: AgsOptions) -> ServiceQuota | None:
    """Instances the account may still start, or ``None`` off the Cloud API / when unreported."""
    if opts.resolved_control_plane != "cloud":
        return None
    answer = cloud_client(opts).call("DescribeQuotaOverview", {}, idempotent=True)
    overview = answer.get("AccountQuotaOverview") or {}
    limit = (overview.get("Quota") or {}).get("SandboxInstances")
    if limit is None:
        return None
    used = (overview.get("Usage") or {}).get("SandboxInstances") or 0
    return ServiceQuota(max_live=max(0, int(limit) - int(used)))
