"""AGS sandbox tools (templates): a validated spec, create, wait, list, get, delete.

A tool is what instances start from: an image, how envd gets into it, ports, the health
probe, resources, network mode, the CAM role AGS assumes to pull, and tags.  :class:`ToolSpec`
checks what the service would refuse (names, tag sizes, durations) before any call, so a bad
dataset row fails here with a readable message instead of as a remote error halfway through a
sync of thousands of images.

envd, the daemon every AGS instance needs on port 49983, comes either from the image itself
(:class:`EnvdInImage`, for images built with it) or from Tencent's envd image mounted read-only
into the instance (:class:`EnvdMount`, for images that know nothing of AGS, such as SWE-bench's).
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from sandbox_runtime.backends.ags._cloud import AgsApiError, AgsCloudClient
from sandbox_runtime.errors import BackendError, ConfigError, SandboxTimeoutError

__all__ = [
    "DEFAULT_ENVD_IMAGE",
    "ENVD_PORT",
    "EnvdInImage",
    "EnvdMount",
    "ToolFailedError",
    "ToolInfo",
    "ToolNotFoundError",
    "ToolSettings",
    "ToolSpec",
    "create_tool",
    "delete_tool",
    "get_tool",
    "list_tools",
    "valid_tool_name",
    "wait_for_active",
    "wait_for_tools",
]

ENVD_PORT = 49983
#: Tencent's envd image (the binary is ``/usr/bin/envd``); ``agr instance debug`` pins it too.
DEFAULT_ENVD_IMAGE = "ccr.ccs.tencentyun.com/ags-image/envd:v0.5.14"
TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,50}$")
_DURATION_RE = re.compile(r"^(?:\d+h)?(?:\d+m)?(?:\d+s)?$")
_MAX_TAG_KEY, _MAX_TAG_VALUE = 127, 255
_POLL_BATCH = 100


def valid_tool_name(name: str) -> str:
    """``name`` if AGS accepts it as a tool name (1-50 of ``[A-Za-z0-9_-]``), else ValueError."""
    if not TOOL_NAME_RE.match(name):
        raise ValueError(
            f"invalid tool name {name!r}: 1 to 50 characters of letters, digits, '_' and '-'"
        )
    return name


def _duration(value: str) -> str:
    if not value or not _DURATION_RE.match(value):
        raise ValueError(f"invalid duration {value!r}: use e.g. 300s, 5m, 1h or 1h30m")
    return value


ToolName = Annotated[str, AfterValidator(valid_tool_name)]


class ToolFailedError(BackendError):
    """A tool turned ``FAILED``; :attr:`reason` is the service's ``StatusReason``."""

    def __init__(self, tool: ToolInfo) -> None:
        super().__init__(
            f"sandbox tool {tool.name} ({tool.tool_id}) FAILED: "
            f"{tool.status_reason or 'no reason given'}"
        )
        self.tool = tool
        self.reason = tool.status_reason


class ToolNotFoundError(BackendError, LookupError):
    """No tool has that name or id."""


class EnvdInImage(BaseModel):
    """envd is in the image; the tool starts it as the instance's command."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["image"] = "image"
    path: str = "/usr/bin/envd"
    """Where the image has the envd binary."""


class EnvdMount(BaseModel):
    """envd comes from an image mounted into the instance (the image itself is left alone)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["mount"] = "mount"
    image: str = DEFAULT_ENVD_IMAGE
    """Image holding the envd binary."""
    registry_type: Literal["enterprise", "personal"] = "personal"
    """Registry of that image (Tencent's public envd image is on CCR Personal)."""
    sub_path: str = "/usr/bin/envd"
    """The binary inside that image."""
    mount_path: str = "/mnt/envd"
    """Where the binary appears in the instance (read-only)."""


class ToolSettings(BaseModel):
    """What a tool is made of besides its name, image and entrypoint.

    Shared by :class:`ToolSpec` (one tool) and ``sync.ToolTemplate`` (what every tool of a
    dataset sync shares), so both validate the same way.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    image_registry_type: Literal["enterprise", "personal", "custom", "system"] = "enterprise"
    """``enterprise`` (TCR), ``personal`` (CCR), ``custom`` or ``system``."""
    envd: EnvdInImage | EnvdMount = Field(default_factory=EnvdMount, discriminator="kind")
    """How envd gets into the instance."""
    ports: tuple[int, ...] = (ENVD_PORT,)
    """Ports the instance serves (envd's must be among them)."""
    cpu: str = "2000m"
    """CPU as the service writes it (``"2000m"`` = 2 cores)."""
    memory: str = "4Gi"
    """Memory (``"4Gi"``)."""
    storage: Literal["1Gi", "5Gi", "10Gi", "20Gi"] | None = None
    """Disk size; default: the service's."""
    role_arn: str | None = None
    """CAM role AGS assumes to pull the image (needed for TCR/CCR and envd mounts)."""
    network_mode: Literal["PUBLIC", "VPC", "SANDBOX"] = "PUBLIC"
    """``PUBLIC`` internet access, ``VPC`` (needs subnet and security groups), ``SANDBOX`` none."""
    subnet_ids: tuple[str, ...] = ()
    security_group_ids: tuple[str, ...] = ()
    tags: dict[str, str] = Field(default_factory=dict)
    """Cloud tags; sync puts ``image=<source image>`` here to find the tool again."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment of the instance's processes."""
    default_timeout: Annotated[str, AfterValidator(_duration)] = "1h"
    """Default instance lifetime (``"5m"``, max 24 h); the backend sets its own per instance."""

    @field_validator("tags")
    @classmethod
    def _check_tags(cls, tags: dict[str, str]) -> dict[str, str]:
        for key, value in tags.items():
            if not 0 < len(key) <= _MAX_TAG_KEY or len(value) > _MAX_TAG_VALUE:
                raise ValueError(
                    f"tag {key!r}: keys are 1-{_MAX_TAG_KEY} and values at most "
                    f"{_MAX_TAG_VALUE} characters"
                )
        return tags

    @field_validator("ports")
    @classmethod
    def _check_ports(cls, ports: tuple[int, ...]) -> tuple[int, ...]:
        if any(not 0 < p < 65536 for p in ports):
            raise ValueError(f"ports must be between 1 and 65535, got {ports}")
        return ports


class ToolSpec(ToolSettings):
    """Everything ``CreateSandboxTool`` needs for a ``custom`` tool; see the module docstring."""

    name: ToolName
    """Tool name, unique per account: 1-50 of ``[A-Za-z0-9_-]``."""
    image: str = Field(min_length=1)
    """Image the instances run (TCR ``*.tencentcloudcr.com/...`` or CCR reference)."""
    command: tuple[str, ...] | None = None
    """Entrypoint; default: envd (see :attr:`envd`) listening on 49983."""
    args: tuple[str, ...] | None = None
    """Arguments of :attr:`command`; default ``-port 49983`` when envd is the command."""
    description: str = Field(default="", max_length=200)
    probe_path: str = "/health"
    probe_port: int = Field(default=ENVD_PORT, gt=0, lt=65536)
    probe_period_ms: int = Field(default=2000, gt=0)
    probe_timeout_ms: int = Field(default=1000, gt=0)
    probe_failure_threshold: int = Field(default=30, gt=0)
    probe_ready_timeout_ms: int = Field(default=60000, gt=0)

    def _entrypoint(self) -> tuple[list[str], list[str]]:
        if self.command is not None:
            return list(self.command), list(self.args or ())
        binary = self.envd.path if isinstance(self.envd, EnvdInImage) else self.envd.mount_path
        args = list(self.args) if self.args is not None else ["-port", str(ENVD_PORT)]
        return [binary], args

    def to_request(self, client_token: str | None = None) -> dict[str, Any]:
        """The ``CreateSandboxTool`` parameters (PascalCase, as the SDK's models name them)."""
        if self.network_mode == "VPC" and not (self.subnet_ids and self.security_group_ids):
            raise ConfigError("network mode VPC needs subnet ids and security group ids")
        needs_role = self.image_registry_type in ("enterprise", "personal") or isinstance(
            self.envd, EnvdMount
        )
        if needs_role and not self.role_arn:
            raise ConfigError(
                f"tool {self.name}: a role ARN is needed so that AGS can pull the image "
                "(--role-arn or AGS_ROLE_ARN, e.g. qcs::cam::uin/<uin>:roleName/<role>)"
            )
        command, args = self._entrypoint()
        resources: dict[str, str] = {"CPU": self.cpu, "Memory": self.memory}
        if self.storage:
            resources["Storage"] = self.storage
        custom: dict[str, Any] = {
            "Image": self.image,
            "ImageRegistryType": self.image_registry_type,
            "Command": command,
            "Args": args,
            "Ports": [
                {"Name": "envd" if p == ENVD_PORT else f"port-{p}", "Port": p, "Protocol": "TCP"}
                for p in self.ports
            ],
            "Resources": resources,
            "Probe": {
                "HttpGet": {"Path": self.probe_path, "Port": self.probe_port, "Scheme": "HTTP"},
                "ReadyTimeoutMs": self.probe_ready_timeout_ms,
                "ProbeTimeoutMs": self.probe_timeout_ms,
                "ProbePeriodMs": self.probe_period_ms,
                "SuccessThreshold": 1,
                "FailureThreshold": self.probe_failure_threshold,
            },
        }
        if self.env:
            custom["Env"] = [{"Name": k, "Value": v} for k, v in self.env.items()]
        network: dict[str, Any] = {"NetworkMode": self.network_mode}
        if self.network_mode == "VPC":
            network["VpcConfig"] = {
                "SubnetIds": list(self.subnet_ids),
                "SecurityGroupIds": list(self.security_group_ids),
            }
        params: dict[str, Any] = {
            "ToolName": self.name,
            "ToolType": "custom",
            "NetworkConfiguration": network,
            "DefaultTimeout": self.default_timeout,
            "Tags": [{"Key": k, "Value": v} for k, v in self.tags.items()],
            "CustomConfiguration": custom,
        }
        if self.description:
            params["Description"] = self.description
        if self.role_arn:
            params["RoleArn"] = self.role_arn
        if isinstance(self.envd, EnvdMount):
            params["StorageMounts"] = [
                {
                    "Name": "envd",
                    "StorageSource": {
                        "Image": {
                            "Reference": self.envd.image,
                            "ImageRegistryType": self.envd.registry_type,
                            "SubPath": self.envd.sub_path,
                        }
                    },
                    "MountPath": self.envd.mount_path,
                    "ReadOnly": True,
                }
            ]
        if client_token:
            params["ClientToken"] = client_token
        return params


@dataclass(frozen=True)
class ToolInfo:
    """The parts of a ``SandboxTool`` the library acts on (``raw`` has all of it)."""

    tool_id: str
    name: str
    status: str
    status_reason: str
    tool_type: str
    image: str
    tags: Mapping[str, str]
    created: str
    raw: Mapping[str, Any] = field(repr=False)

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> ToolInfo:
        """Build from the Cloud API structure."""
        custom = data.get("CustomConfiguration") or {}
        return cls(
            tool_id=str(data.get("ToolId", "")),
            name=str(data.get("ToolName", "")),
            status=str(data.get("Status", "")),
            status_reason=str(data.get("StatusReason", "") or ""),
            tool_type=str(data.get("ToolType", "")),
            image=str(custom.get("Image", "") or ""),
            tags={str(t.get("Key")): str(t.get("Value", "")) for t in data.get("Tags") or []},
            created=str(data.get("CreateTime", "")),
            raw=dict(data),
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (for ``--json`` output)."""
        return {
            "tool_id": self.tool_id,
            "name": self.name,
            "status": self.status,
            "status_reason": self.status_reason,
            "tool_type": self.tool_type,
            "image": self.image,
            "tags": dict(self.tags),
            "created": self.created,
        }


def create_tool(
    client: AgsCloudClient,
    spec: ToolSpec,
    *,
    client_token: str | None = None,
    wait: bool = False,
    timeout: float = 600.0,
    poll_interval: float = 2.0,
) -> ToolInfo:
    """Create a tool; with ``wait``, return once it is ACTIVE (:class:`ToolFailedError` if not).

    The ``ClientToken`` (random unless given) makes retries after a lost answer return the
    same tool rather than a duplicate; give your own to make a re-run idempotent too.
    """
    token = client_token or uuid.uuid4().hex
    tool_id = client.create_tool(spec.to_request(token))
    if wait:
        return wait_for_active(client, tool_id, timeout=timeout, poll_interval=poll_interval)
    return get_tool(client, tool_id)


def wait_for_tools(
    client: AgsCloudClient,
    tool_ids: Sequence[str],
    *,
    timeout: float = 600.0,
    poll_interval: float = 2.0,
    on_change: Callable[[ToolInfo], None] | None = None,
) -> dict[str, ToolInfo]:
    """Poll until no tool of ``tool_ids`` is ``CREATING``; returns each one's last state.

    One ``DescribeSandboxToolList`` per 100 tools per round, so waiting for a whole dataset
    costs a few requests every ``poll_interval`` rather than one per tool.  FAILED tools are
    returned, not raised: callers decide what a failure means.  Tools still CREATING at the
    deadline raise :class:`SandboxTimeoutError`.
    """
    pending = list(dict.fromkeys(tool_ids))
    states: dict[str, ToolInfo] = {}
    deadline = time.monotonic() + timeout
    while pending:
        found = {t.tool_id: t for t in map(ToolInfo.from_api, client.describe_tools_by_id(pending))}
        still: list[str] = []
        for tool_id in pending:
            info = found.get(tool_id)
            if info is None:
                raise ToolNotFoundError(f"sandbox tool {tool_id} disappeared while creating")
            previous = states.get(tool_id)
            states[tool_id] = info
            if on_change is not None and (previous is None or previous.status != info.status):
                on_change(info)
            if info.status == "CREATING":
                still.append(tool_id)
        pending = still
        if not pending:
            break
        if time.monotonic() >= deadline:
            names = ", ".join(states[t].name for t in pending[:5])
            raise SandboxTimeoutError(
                f"{len(pending)} sandbox tool(s) still CREATING after {timeout:.0f}s: {names}"
            )
        time.sleep(poll_interval)
    return states


def wait_for_active(
    client: AgsCloudClient, tool_id: str, *, timeout: float = 600.0, poll_interval: float = 2.0
) -> ToolInfo:
    """Wait for one tool; ACTIVE returns it, FAILED raises :class:`ToolFailedError`."""
    info = wait_for_tools(client, [tool_id], timeout=timeout, poll_interval=poll_interval)[tool_id]
    if info.status != "ACTIVE":
        raise ToolFailedError(info)
    return info


def _matches(info: ToolInfo, tags: Mapping[str, str], status: str | None) -> bool:
    if status and info.status != status:
        return False
    return all(info.tags.get(k) == v for k, v in tags.items())


def list_tools(
    client: AgsCloudClient,
    *,
    tags: Mapping[str, str] | None = None,
    status: str | None = None,
    tool_type: str | None = None,
) -> list[ToolInfo]:
    """Every tool matching all ``tags`` (and ``status`` / ``tool_type``), all pages.

    The filters are sent with the request (``tag:<key>``, ``Status``, ``ToolType``, as
    Tencent's own CLI sends them) and checked again here, so a service that ignores one
    still gives the right answer.
    """
    filters: dict[str, Sequence[str]] = {f"tag:{k}": [v] for k, v in (tags or {}).items()}
    if status:
        filters["Status"] = [status]
    if tool_type:
        filters["ToolType"] = [tool_type]
    found = (ToolInfo.from_api(t) for t in client.iter_tools(filters=filters or None))
    return [
        t
        for t in found
        if _matches(t, tags or {}, status) and (not tool_type or t.tool_type == tool_type)
    ]


def _looks_like_id(value: str) -> bool:
    return value.startswith("sdt-")


def get_tool(client: AgsCloudClient, name_or_id: str) -> ToolInfo:
    """One tool by id (``sdt-...``) or by exact name; :class:`ToolNotFoundError` otherwise."""
    if _looks_like_id(name_or_id):
        try:
            tools, _total = client.describe_tools([name_or_id])
        except AgsApiError as exc:
            if not exc.is_not_found:
                raise
            tools = []
        for tool in tools:
            if tool.get("ToolId") == name_or_id:
                return ToolInfo.from_api(tool)
    else:
        filtered, _total = client.describe_tools(filters={"ToolName": [name_or_id]})
        candidates: Iterable[dict[str, Any]] = filtered
        if not any(t.get("ToolName") == name_or_id for t in filtered):
            # A service that ignores the filter answers with the first page of everything.
            candidates = client.iter_tools()
        for tool in candidates:
            if tool.get("ToolName") == name_or_id:
                return ToolInfo.from_api(tool)
    raise ToolNotFoundError(f"no sandbox tool named or with id {name_or_id!r}")


def delete_tool(client: AgsCloudClient, name_or_id: str) -> ToolInfo:
    """Delete a tool by name or id; returns what it was.

    ``ResourceInUse.SandboxTool`` (instances still run) is raised as it is; a tool that
    vanished between the lookup and the delete counts as deleted.
    """
    info = get_tool(client, name_or_id)
    try:
        client.delete_tool(info.tool_id)
    except AgsApiError as exc:
        if not exc.is_not_found:
            raise
    return info
