"""AGS image pre-cache from the schedule: ``CreatePreCacheImageTask`` ahead of starts.

The service keeps the cache; we only ask it to fill ahead of need and, with a budget, to drop
what the schedule no longer needs.  One ``DescribePreCacheImageList`` listing (paged, never one
call per image) tells what is cached or caching already; a task is created only for the rest.
With ``precache_budget`` the entries this run asked for (``SourceType`` ``EXPLICIT``) that the
current schedule does not name are deleted least recently used first (the service's
``LastUsedTime``) until ``CachedImageSizeBytes`` add up to the budget.  Entries the service made
itself (``AUTO``, ``TCR_AUTO``) are never touched.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ._cloud import AgsApiError, AgsCloudClient

__all__ = ["prefetch"]

logger = logging.getLogger("sandbox_runtime.ags")

#: Registry types a pre-cache task accepts (``system`` images are the service's own).
PRECACHE_REGISTRY_TYPES = ("enterprise", "personal", "custom")


def prefetch(
    client: AgsCloudClient,
    images: Sequence[str],
    *,
    registry_type: str,
    budget: int | None,
) -> list[str]:
    """Ask the service to cache the uncached ones among ``images``; returns those asked."""
    if registry_type not in PRECACHE_REGISTRY_TYPES:
        logger.info("no pre-cache for %s images", registry_type)
        return []
    wanted = list(dict.fromkeys(image for image in images if image))
    cached = list(client.iter_precache())
    known = {row.get("Image") for row in cached if row.get("ImageRegistryType") == registry_type}
    asked = [image for image in wanted if image not in known]
    for image in asked:
        try:
            client.create_precache(image, registry_type)
        except AgsApiError as exc:  # the start that needs it pulls it as it always did
            logger.warning("pre-cache of %s refused: %s", image, exc)
    if budget is not None:
        _evict(client, cached, set(wanted), budget)
    return asked


def _evict(
    client: AgsCloudClient, cached: list[dict[str, Any]], wanted: set[str], budget: int
) -> None:
    used = sum(int(row.get("CachedImageSizeBytes") or 0) for row in cached)
    candidates = sorted(
        (
            row
            for row in cached
            if row.get("SourceType") == "EXPLICIT" and row.get("Image") not in wanted
        ),
        key=lambda row: str(row.get("LastUsedTime") or row.get("CreateTime") or ""),
    )
    for row in candidates:
        if used <= budget:
            return
        try:
            client.delete_precache(str(row["PreCacheImageId"]))
        except AgsApiError as exc:
            if not exc.is_not_found:
                logger.warning("cannot drop pre-cache of %s: %s", row.get("Image"), exc)
                continue
        used -= int(row.get("CachedImageSizeBytes") or 0)
        logger.info("dropped pre-cache of %s", row.get("Image"))
