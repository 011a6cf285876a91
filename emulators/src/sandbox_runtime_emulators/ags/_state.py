"""What the emulated service remembers: tools, instances, data-plane tokens and API keys.

The structures mirror the Cloud API's ``SandboxTool`` and ``SandboxInstance`` (PascalCase
keys, durations as ``"5m"``, times as RFC 3339) so that handlers can return them as they are.
Instances expire at ``ExpiresAt``: a reaper in the app stops them with ``StopReason`` ``timeout``.
"""

from __future__ import annotations

import datetime
import re
import secrets
import string
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from ._runner import InstanceRunner
from ._seed import Seed

__all__ = [
    "ApiKey",
    "Instance",
    "ServiceError",
    "Snapshot",
    "Store",
    "Tool",
    "parse_timeout",
    "rfc3339",
]

_BASE36 = string.ascii_lowercase + string.digits
_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,50}$")
TOOL_TYPES = (
    "browser",
    "code-interpreter",
    "mobile",
    "osworld",
    "custom",
    "swebench",
    "aio",
    "android-world",
    "waa",
)
MIN_TIMEOUT, MAX_TIMEOUT, DEFAULT_TIMEOUT = 30, 24 * 3600, 300


class ServiceError(Exception):
    """An error the service answers with a Cloud API code (translated per protocol)."""

    def __init__(self, code: str, message: str, http_status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.http_status = http_status


def new_id(prefix: str, length: int = 8) -> str:
    """``prefix-`` and lower-case base36 characters, like the service's ids."""
    return prefix + "-" + "".join(secrets.choice(_BASE36) for _ in range(length))


def rfc3339(timestamp: float) -> str:
    """A Unix time as RFC 3339 in UTC with a ``Z`` suffix."""
    moment = datetime.datetime.fromtimestamp(timestamp, tz=datetime.timezone.utc)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def parse_timeout(value: Any, default: int = DEFAULT_TIMEOUT) -> int:
    """A Cloud API duration (``"5m"``, ``"300s"``, ``"1h30m"``) in seconds, range-checked."""
    if value in (None, ""):
        return default
    match = _DURATION.match(str(value).strip())
    if not match or not any(match.groups()):
        raise ServiceError("InvalidParameterValue.Timeout", f"invalid duration {value!r}")
    hours, minutes, seconds = (int(part or 0) for part in match.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if not MIN_TIMEOUT <= total <= MAX_TIMEOUT:
        raise ServiceError(
            "InvalidParameterValue.Timeout",
            f"timeout must be between {MIN_TIMEOUT}s and 24h, got {value!r}",
        )
    return total


@dataclass
class Tool:
    """A sandbox tool (template)."""

    tool_id: str
    name: str
    tool_type: str
    description: str
    default_timeout: int
    network: dict[str, Any]
    custom: dict[str, Any]
    tags: list[dict[str, str]]
    role_arn: str
    client_token: str | None
    status: str = "CREATING"
    active_at: float = 0.0
    created: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)
    storage_mounts: list[dict[str, Any]] = field(default_factory=list)
    checking: bool = False
    """True while the service still checks that the tool's image can run."""
    failure: str = ""
    """Why creation failed (found by the check); the tool turns FAILED with this reason."""
    status_reason: str = ""

    def refresh(self) -> None:
        """Creation completes at ``active_at`` once the image check is done: ACTIVE or FAILED."""
        if self.status == "CREATING" and not self.checking and time.time() >= self.active_at:
            self.status = "FAILED" if self.failure else "ACTIVE"
            self.status_reason = self.failure
            self.updated = time.time()

    def to_api(self) -> dict[str, Any]:
        """The ``SandboxTool`` structure."""
        self.refresh()
        return {
            "ToolId": self.tool_id,
            "ToolName": self.name,
            "ToolType": self.tool_type,
            "Status": self.status,
            "StatusReason": self.status_reason,
            "Description": self.description,
            "Persistent": False,
            "DefaultTimeoutSeconds": self.default_timeout,
            "NetworkConfiguration": self.network,
            "Tags": self.tags,
            "CreateTime": rfc3339(self.created),
            "UpdateTime": rfc3339(self.updated),
            "RoleArn": self.role_arn,
            "StorageMounts": self.storage_mounts,
            "CustomConfiguration": self.custom,
        }


@dataclass
class Instance:
    """A sandbox instance and the runner that makes it real."""

    instance_id: str
    tool: Tool
    timeout: int
    custom: dict[str, Any]
    metadata: dict[str, str]
    env: dict[str, str]
    auth_mode: str
    client_token: str | None
    runner: InstanceRunner | None = None
    status: str = "STARTING"
    stop_reason: str = ""
    status_reason: str = ""
    created: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)
    expires: float = 0.0
    boot_done: threading.Event = field(default_factory=threading.Event)
    envd_token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    tokens: dict[str, float] = field(default_factory=dict)
    seed: Seed | None = None
    """The filesystem it starts from (a snapshot's or a source instance's), None for the image's."""
    paused_tree: Seed | None = None
    auto_pause: bool = False
    """e2b's ``autoPause``: the end of its lifetime pauses it instead of stopping it."""
    """While PAUSED: its working tree, which a resume lays into a fresh sandbox."""

    def __post_init__(self) -> None:
        self.expires = self.created + self.timeout
        self.tokens[self.envd_token] = float("inf")

    @property
    def image(self) -> str | None:
        """The image it runs: the per-instance override, else the tool's."""
        return self.custom.get("Image") or self.tool.custom.get("Image") or None

    def token_valid(self, token: str) -> bool:
        """True if ``token`` was issued for this instance and has not expired."""
        expires = self.tokens.get(token)
        return expires is not None and expires > time.time()

    def to_api(self) -> dict[str, Any]:
        """The ``SandboxInstance`` structure."""
        custom = dict(self.tool.custom)
        custom.update(self.custom)
        return {
            "InstanceId": self.instance_id,
            "ToolId": self.tool.tool_id,
            "ToolName": self.tool.name,
            "Status": self.status,
            "Persistent": False,
            "TimeoutSeconds": self.timeout,
            "ExpiresAt": rfc3339(self.expires),
            "StopReason": self.stop_reason,
            "CreateTime": rfc3339(self.created),
            "UpdateTime": rfc3339(self.updated),
            "MountOptions": [],
            "CustomConfiguration": custom,
            "NetworkMode": self.tool.network.get("NetworkMode", "PUBLIC"),
            "Metadata": [{"Name": k, "Value": v} for k, v in self.metadata.items()],
            "AuthMode": self.auth_mode,
        }


@dataclass
class Snapshot:
    """A sandbox snapshot (``SandboxSnapshot``): the source instance's working tree.

    ``MemoryIncluded`` is always false here, whatever the request asked: the emulator keeps
    files only (see docs/ags-emulator.md), and says so in ``StatusReason``.
    """

    snapshot_id: str
    name: str
    source: str
    tool: Tool
    tree: Seed
    memory_requested: bool
    tags: list[dict[str, str]]
    client_token: str | None
    status: str = "ACTIVE"
    created: float = field(default_factory=time.time)

    def to_api(self) -> dict[str, Any]:
        """The ``SandboxSnapshot`` structure."""
        reason = "the emulator keeps the filesystem only" if self.memory_requested else ""
        return {
            "SnapshotId": self.snapshot_id,
            "SnapshotName": self.name,
            "SourceInstanceId": self.source,
            "MemoryIncluded": False,
            "Status": self.status,
            "StatusReason": reason,
            "Tags": self.tags,
            "CreateTime": rfc3339(self.created),
            "UpdateTime": rfc3339(self.created),
        }


@dataclass
class ApiKey:
    """An ``ark_`` API key of the E2B-compatible API."""

    key_id: str
    name: str
    secret: str
    created: float = field(default_factory=time.time)

    def to_api(self) -> dict[str, Any]:
        """The ``APIKeyInfo`` structure (the key itself only ever masked)."""
        return {
            "Name": self.name,
            "KeyId": self.key_id,
            "Status": "API_KEY_STATUS_ACTIVE",
            "MaskedKey": self.secret[:8] + "*" * 8,
            "CreatedAt": rfc3339(self.created),
        }


class Store:
    """All state, behind one lock (handlers are short; booting happens outside it)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.tools: dict[str, Tool] = {}
        self.instances: dict[str, Instance] = {}
        self.api_keys: dict[str, ApiKey] = {}
        self.snapshots: dict[str, Snapshot] = {}

    def tool(self, tool_id: str | None = None, name: str | None = None) -> Tool:
        """A tool by id or name, or ``ResourceNotFound.SandboxTool``."""
        with self.lock:
            if tool_id:
                found = self.tools.get(tool_id)
            else:
                found = next((t for t in self.tools.values() if t.name == name), None)
        if found is None:
            raise ServiceError(
                "ResourceNotFound.SandboxTool", f"sandbox tool {tool_id or name!r} not found"
            )
        return found

    def instance(self, instance_id: str) -> Instance:
        """An instance by id, or ``ResourceNotFound.SandboxInstance``."""
        with self.lock:
            found = self.instances.get(instance_id)
        if found is None:
            raise ServiceError(
                "ResourceNotFound.SandboxInstance", f"sandbox instance {instance_id!r} not found"
            )
        return found

    def snapshot(self, key: str) -> Snapshot:
        """A snapshot by id (or, for e2b's ``templateID``, by name), or ``ResourceNotFound``."""
        with self.lock:
            found = self.snapshots.get(key) or next(
                (s for s in self.snapshots.values() if s.name == key), None
            )
        if found is None:
            raise ServiceError("ResourceNotFound.SandboxSnapshot", f"snapshot {key!r} not found")
        return found

    def api_key(self, secret: str) -> ApiKey | None:
        """The API key with this secret, if any."""
        with self.lock:
            return next((k for k in self.api_keys.values() if k.secret == secret), None)
