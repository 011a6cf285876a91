"""Image pre-cache tasks of the Cloud API (field names of tencentcloud-sdk-python-ags 3.1.193).

``CreatePreCacheImageTask``, ``DescribePreCacheImageList`` and ``DeletePreCacheImage``.  A task
starts ``Caching`` and is ``Ready`` after ``cache_seconds``; a second task for the same image
and registry type answers the existing entry (the emulator's choice: the SDK does not say).
The SDK documents neither the status values nor the size of a cached image, so these
are the emulator's: ``Caching``/``Ready``, and a size read from the image reference's digest
when it names one, else a stable figure derived from the reference, only so that a client's
budget arithmetic has numbers to work on.  ``LastUsedTime`` is the creation time until
:meth:`PreCache.used` notes a start from the image.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from ._cloud_filters import page_of
from ._state import ServiceError, rfc3339

__all__ = ["PreCache", "PreCacheEntry"]

_REFERENCE = re.compile(r"^[^\s@:]+(:[^\s@/]+)?(@sha256:[0-9a-f]{64})?$")
_REGISTRY_TYPES = ("enterprise", "personal", "custom")


@dataclass
class PreCacheEntry:
    """One pre-cached image."""

    precache_id: str
    image: str
    registry_type: str
    created: float
    last_used: float
    ready_at: float
    source: str = "EXPLICIT"

    @property
    def status(self) -> str:
        return "Ready" if time.time() >= self.ready_at else "Caching"

    @property
    def digest(self) -> str:
        named = self.image.partition("@")[2]
        return named or "sha256:" + hashlib.sha256(self.image.encode()).hexdigest()

    def size(self) -> int:
        """Bytes the cache holds for it (0 while caching); see the module docstring."""
        if self.status != "Ready":
            return 0
        return 50_000_000 + int(self.digest[-12:], 16) % 450_000_000

    def to_api(self) -> dict[str, Any]:
        return {
            "Image": self.image,
            "ImageDigest": self.digest,
            "ImageRegistryType": self.registry_type,
            "Status": self.status,
            "CreateTime": rfc3339(self.created),
            "PreCacheImageId": self.precache_id,
            "SourceType": self.source,
            "CachedImageSizeBytes": self.size(),
            "LastUsedTime": rfc3339(self.last_used),
        }


class PreCache:
    """The account's pre-cached images."""

    def __init__(self, cache_seconds: float = 1.0) -> None:
        self.cache_seconds = cache_seconds
        self._entries: dict[str, PreCacheEntry] = {}
        self._lock = threading.Lock()

    def create(self, params: dict[str, Any]) -> dict[str, Any]:
        image = str(params.get("Image") or "")
        registry_type = str(params.get("ImageRegistryType") or "")
        if not image:
            raise ServiceError("MissingParameter", "Image is required")
        if not _REFERENCE.match(image) or (":" not in image and "@" not in image):
            raise ServiceError(
                "InvalidParameterValue.Image",
                f"Image {image!r} must be repository:tag or repository@sha256:<digest>",
            )
        if registry_type not in _REGISTRY_TYPES:
            raise ServiceError(
                "InvalidParameterValue.ImageRegistryType",
                f"ImageRegistryType must be one of {', '.join(_REGISTRY_TYPES)}",
            )
        now = time.time()
        with self._lock:
            for entry in self._entries.values():
                if entry.image == image and entry.registry_type == registry_type:
                    break
            else:
                entry = PreCacheEntry(
                    "pci-" + uuid.uuid4().hex[:12],
                    image,
                    registry_type,
                    now,
                    now,
                    now + self.cache_seconds,
                )
                self._entries[entry.precache_id] = entry
        return {
            "Image": entry.image,
            "ImageDigest": entry.digest,
            "ImageRegistryType": entry.registry_type,
            "PreCacheImageId": entry.precache_id,
        }

    def describe(self, params: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            entries = sorted(self._entries.values(), key=lambda entry: entry.created)
        rows = [entry.to_api() for entry in entries]
        for flt in params.get("Filters") or []:
            name, values = str(flt.get("Name", "")), [str(v) for v in flt.get("Values") or []]
            if name not in ("Image", "ImageDigest", "ImageRegistryType", "Status", "SourceType"):
                raise ServiceError("InvalidParameter.Filter", f"unknown filter {name!r}")
            rows = [row for row in rows if str(row[name]) in values]
        page, next_token = page_of(rows, {**params, "MaxResults": params.get("MaxResults")})
        result: dict[str, Any] = {"PreCacheImageList": page}
        if params.get("NeedTotalCount"):
            result["TotalCount"] = len(rows)
        if next_token:
            result["NextToken"] = next_token
        return result

    def delete(self, params: dict[str, Any]) -> dict[str, Any]:
        wanted = params.get("PreCacheImageId")
        with self._lock:
            if wanted:
                if self._entries.pop(str(wanted), None) is None:
                    raise ServiceError("ResourceNotFound", f"pre-cache {wanted!r} not found")
                return {}
            image, registry_type = params.get("Image"), params.get("ImageRegistryType")
            if not image:
                raise ServiceError("MissingParameter", "PreCacheImageId or Image is required")
            doomed = [
                key
                for key, entry in self._entries.items()
                if entry.image == image and registry_type in (None, entry.registry_type)
            ]
            if not doomed:
                raise ServiceError("ResourceNotFound", f"no pre-cache of {image!r}")
            for key in doomed:
                del self._entries[key]
        return {}

    def used(self, image: str) -> None:
        """A sandbox started from ``image``: its ``LastUsedTime`` is now."""
        now = time.time()
        with self._lock:
            for entry in self._entries.values():
                if entry.image == image:
                    entry.last_used = now
