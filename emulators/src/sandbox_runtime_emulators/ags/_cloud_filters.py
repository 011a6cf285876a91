"""Filters and paging of the Cloud API's snapshot listing (``DescribeSandboxSnapshotList``)."""

from __future__ import annotations

from typing import Any, TypeVar

from ._state import ServiceError, Snapshot

__all__ = ["page_of", "snapshot_matches"]

T = TypeVar("T")


def snapshot_matches(snapshot: Snapshot, name: str, values: list[str]) -> bool:
    """True if the snapshot passes one ``Filter`` (unknown filter names pass everything)."""
    if name.startswith("tag:"):
        key = name[4:]
        return any(t.get("Key") == key and t.get("Value") in values for t in snapshot.tags)
    fields = {
        "SnapshotId": snapshot.snapshot_id,
        "SnapshotName": snapshot.name,
        "SourceInstanceId": snapshot.source,
        "Status": snapshot.status,
    }
    if name in fields:
        return fields[name] in values
    return True


def page_of(items: list[T], params: dict[str, Any]) -> tuple[list[T], str | None]:
    """One page by ``Offset``/``Limit`` or ``NextToken``/``MaxResults``, and the next token."""
    if params.get("Offset") is not None and params.get("NextToken"):
        raise ServiceError("InvalidParameter", "Offset and NextToken cannot both be given")
    limit = int(params.get("Limit") or params.get("MaxResults") or 20)
    if not 0 < limit <= 100:
        raise ServiceError("InvalidParameter.Limit", "Limit must be between 1 and 100")
    offset = int(params.get("Offset") or params.get("NextToken") or 0)
    next_token = str(offset + limit) if offset + limit < len(items) else None
    return items[offset : offset + limit], next_token
