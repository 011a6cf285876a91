"""Checks of ``CreateSandboxTool`` parameters, with the error codes the real service uses.

The emulator stores what it does not apply (ports, probe, resources, storage mounts), but it
refuses what the service would refuse, so that a spec that passes here is at least well formed
for the real service.  Where the service's exact rule is not documented the check is the
documented shape only (see ``docs/ags-emulator.md``).
"""

from __future__ import annotations

from typing import Any

from ._state import TOOL_NAME, TOOL_TYPES, ServiceError

__all__ = ["ToolParams", "validate_tool_params"]

REGISTRY_TYPES = ("enterprise", "personal", "custom", "system")
NETWORK_MODES = ("PUBLIC", "VPC", "SANDBOX")
_SOURCES = ("Cos", "Image", "Cfs", "AgentBucket")
_MAX_DESCRIPTION = 200
_MAX_CLIENT_TOKEN = 64


class ToolParams:
    """The validated parts of a ``CreateSandboxTool`` request."""

    def __init__(
        self,
        *,
        name: str,
        tool_type: str,
        custom: dict[str, Any],
        network: dict[str, Any],
        storage_mounts: list[dict[str, Any]],
        tags: list[dict[str, str]],
        client_token: str | None,
    ) -> None:
        self.name = name
        self.tool_type = tool_type
        self.custom = custom
        self.network = network
        self.storage_mounts = storage_mounts
        self.tags = tags
        self.client_token = client_token


def _port(value: Any, where: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value < 65536:
        raise ServiceError("InvalidParameterValue", f"{where} must be a port number, got {value!r}")


def _check_custom(custom: dict[str, Any], tool_type: str) -> None:
    if tool_type == "custom" and not custom.get("Image"):
        raise ServiceError("InvalidParameterValue.Image", "custom tools need an Image")
    registry = custom.get("ImageRegistryType", "enterprise")
    if registry not in REGISTRY_TYPES:
        raise ServiceError(
            "InvalidParameterValue.ImageRegistry", f"invalid ImageRegistryType {registry!r}"
        )
    for index, port in enumerate(custom.get("Ports") or []):
        _port(port.get("Port"), f"CustomConfiguration.Ports[{index}].Port")
    probe = custom.get("Probe") or {}
    if probe.get("HttpGet"):
        _port(probe["HttpGet"].get("Port"), "CustomConfiguration.Probe.HttpGet.Port")
        if not str(probe["HttpGet"].get("Path", "")).startswith("/"):
            raise ServiceError(
                "InvalidParameterValue", "CustomConfiguration.Probe.HttpGet.Path must start with /"
            )
    for index, item in enumerate(custom.get("Env") or []):
        if not item.get("Name"):
            raise ServiceError(
                "InvalidParameterValue", f"CustomConfiguration.Env[{index}] has no Name"
            )


def _check_network(network: dict[str, Any]) -> None:
    mode = network.get("NetworkMode", "PUBLIC")
    if mode not in NETWORK_MODES:
        raise ServiceError("InvalidParameterValue", f"invalid NetworkMode {mode!r}")
    if mode == "VPC":
        vpc = network.get("VpcConfig") or {}
        if not vpc.get("SubnetIds") or not vpc.get("SecurityGroupIds"):
            raise ServiceError(
                "MissingParameter.VPCParameters", "VPC mode needs SubnetIds and SecurityGroupIds"
            )


def _check_mounts(mounts: list[dict[str, Any]], role_arn: str) -> None:
    names: set[str] = set()
    for index, mount in enumerate(mounts):
        where = f"StorageMounts[{index}]"
        name = str(mount.get("Name") or "")
        if not name or name in names:
            raise ServiceError("InvalidParameterValue.StorageMount", f"{where} needs a unique Name")
        names.add(name)
        if not str(mount.get("MountPath") or "").startswith("/"):
            raise ServiceError(
                "InvalidParameterValue.StorageMount", f"{where}.MountPath must be absolute"
            )
        source = mount.get("StorageSource") or {}
        given = [key for key in _SOURCES if source.get(key)]
        if len(given) != 1:
            raise ServiceError(
                "InvalidParameterValue.StorageMount",
                f"{where}.StorageSource needs exactly one of {', '.join(_SOURCES)}",
            )
        if given[0] == "Image":
            image = source["Image"]
            if not image.get("Reference"):
                raise ServiceError(
                    "InvalidParameterValue.StorageMount", f"{where} image source needs a Reference"
                )
            if image.get("ImageRegistryType", "enterprise") not in ("enterprise", "personal"):
                raise ServiceError(
                    "InvalidParameterValue.ImageRegistry",
                    f"{where} image sources come from enterprise or personal registries",
                )
            if not role_arn:
                raise ServiceError("MissingParameter.RoleArn", "image mounts need a RoleArn")


def _check_tags(tags: Any) -> list[dict[str, str]]:
    if not isinstance(tags, list):
        raise ServiceError("InvalidParameter.Tags", "Tags must be a list of {Key, Value}")
    checked = []
    for tag in tags:
        if not isinstance(tag, dict) or not tag.get("Key"):
            raise ServiceError("InvalidParameter.Tags", f"invalid tag {tag!r}")
        checked.append({"Key": str(tag["Key"]), "Value": str(tag.get("Value", ""))})
    return checked


def validate_tool_params(params: dict[str, Any]) -> ToolParams:
    """The request's fields, checked; raises :class:`ServiceError` with the service's code."""
    name = str(params.get("ToolName") or "")
    if not TOOL_NAME.match(name):
        raise ServiceError("InvalidParameterValue.SandboxTool", f"invalid tool name {name!r}")
    tool_type = str(params.get("ToolType") or "")
    if tool_type not in TOOL_TYPES:
        raise ServiceError("InvalidParameterValue.ToolType", f"invalid tool type {tool_type!r}")
    if len(str(params.get("Description") or "")) > _MAX_DESCRIPTION:
        raise ServiceError(
            "InvalidParameter.Description", f"Description is longer than {_MAX_DESCRIPTION}"
        )
    token = params.get("ClientToken") or None
    if token is not None and len(str(token)) > _MAX_CLIENT_TOKEN:
        raise ServiceError(
            "InvalidParameter", f"ClientToken is longer than {_MAX_CLIENT_TOKEN} characters"
        )
    custom = dict(params.get("CustomConfiguration") or {})
    _check_custom(custom, tool_type)
    role_arn = str(params.get("RoleArn") or "")
    registry = custom.get("ImageRegistryType", "enterprise")
    if tool_type == "custom" and registry in ("enterprise", "personal") and not role_arn:
        raise ServiceError("MissingParameter.RoleArn", "RoleArn is required to pull")
    network = dict(params.get("NetworkConfiguration") or {"NetworkMode": "PUBLIC"})
    _check_network(network)
    mounts = [dict(m) for m in params.get("StorageMounts") or []]
    _check_mounts(mounts, role_arn)
    return ToolParams(
        name=name,
        tool_type=tool_type,
        custom=custom,
        network=network,
        storage_mounts=mounts,
        tags=_check_tags(params.get("Tags") or []),
        client_token=str(token) if token else None,
    )
