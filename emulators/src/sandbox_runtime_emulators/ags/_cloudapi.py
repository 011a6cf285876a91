"""The Tencent Cloud API door: ``POST /`` with ``X-TC-Action``, version ``2025-09-20``.

Answers are always HTTP 200 with ``{"Response": {..., "RequestId"}}``; errors go in
``Response.Error`` with the service's codes.  When the emulator knows a SecretId/SecretKey
pair, requests must carry a valid TC3-HMAC-SHA256 signature made with it (checked the way the
service documents: canonical request over ``content-type;host`` and the body's SHA-256),
otherwise any credential is accepted.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from ._checkpoints import Checkpoints
from ._cloud_filters import page_of, snapshot_matches
from ._precache import PreCache
from ._quota import describe_quota_overview
from ._seed import Seed
from ._service import AgsService
from ._state import Instance, ServiceError, Tool, parse_timeout, rfc3339

__all__ = ["VERSION", "CloudApi", "verify_signature"]

VERSION = "2025-09-20"
_AUTH = re.compile(
    r"^TC3-HMAC-SHA256 Credential=(?P<id>[^/]+)/(?P<date>\d{4}-\d{2}-\d{2})/(?P<service>[^/]+)"
    r"/tc3_request, SignedHeaders=(?P<signed>[a-z0-9;-]+), Signature=(?P<signature>[0-9a-f]{64})$"
)
_SIGNATURE_WINDOW = 300


def _sign(key: bytes, message: str) -> bytes:
    return hmac.new(key, message.encode(), hashlib.sha256).digest()


def tc3_signature(
    secret_key: str, *, headers: dict[str, str], body: bytes, date: str, service: str, ts: str
) -> str:
    """The TC3-HMAC-SHA256 signature of a POST to ``/`` signing ``content-type;host``."""
    canonical = "\n".join(
        [
            "POST",
            "/",
            "",
            f"content-type:{headers.get('content-type', '')}\nhost:{headers.get('host', '')}\n",
            "content-type;host",
            hashlib.sha256(body).hexdigest(),
        ]
    )
    scope = f"{date}/{service}/tc3_request"
    to_sign = "\n".join(
        ["TC3-HMAC-SHA256", ts, scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    key = _sign(_sign(_sign(("TC3" + secret_key).encode(), date), service), "tc3_request")
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def verify_signature(
    credentials: tuple[str, str] | None, headers: dict[str, str], body: bytes
) -> None:
    """Refuse a request whose TC3 signature is missing, expired or wrong.

    Shared by every Cloud API service the emulator serves (AGS, TCR): the service name is
    taken from the credential scope, as the real gateway does.  Without ``credentials`` any
    well-formed ``Authorization`` header is accepted.
    """
    match = _AUTH.match(headers.get("authorization", ""))
    if match is None:
        raise ServiceError("AuthFailure.SignatureFailure", "missing or malformed Authorization")
    if credentials is None:
        return
    secret_id, secret_key = credentials
    if not hmac.compare_digest(match["id"], secret_id):
        raise ServiceError("AuthFailure.SecretIdNotFound", "the SecretId is not found")
    ts = headers.get("x-tc-timestamp", "0")
    if not ts.isdigit() or abs(time.time() - int(ts)) > _SIGNATURE_WINDOW:
        raise ServiceError("AuthFailure.SignatureExpire", "the signature has expired")
    expected = tc3_signature(
        secret_key,
        headers=headers,
        body=body,
        date=match["date"],
        service=match["service"],
        ts=ts,
    )
    if not hmac.compare_digest(expected, match["signature"]):
        raise ServiceError("AuthFailure.SignatureFailure", "the signature is invalid")


class CloudApi:
    """Dispatch of Cloud API actions onto the service."""

    def __init__(self, service: AgsService, credentials: tuple[str, str] | None) -> None:
        self.service = service
        self.credentials = credentials
        self.checkpoints = Checkpoints(service)
        self.precache = PreCache()
        self._actions: dict[str, Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]] = {
            "CreateSandboxTool": self._create_tool,
            "DescribeSandboxToolList": self._describe_tools,
            "UpdateSandboxTool": self._update_tool,
            "DeleteSandboxTool": self._delete_tool,
            "StartSandboxInstance": self._start_instance,
            "DescribeSandboxInstanceList": self._describe_instances,
            "DescribeSandboxInstances": self._describe_instances,
            "StopSandboxInstance": self._stop_instance,
            "AcquireSandboxInstanceToken": self._acquire_token,
            "UpdateSandboxInstance": self._update_instance,
            "PauseSandboxInstance": self._pause_instance,
            "ResumeSandboxInstance": self._resume_instance,
            "CreateSandboxSnapshot": self._create_snapshot,
            "DescribeSandboxSnapshotList": self._describe_snapshots,
            "DeleteSandboxSnapshot": self._delete_snapshot,
            "CreateAPIKey": self._create_api_key,
            "DescribeAPIKeyList": self._describe_api_keys,
            "DeleteAPIKey": self._delete_api_key,
            "DescribeQuotaOverview": self._describe_quota_overview,
            "CreatePreCacheImageTask": self._precache_action(self.precache.create),
            "DescribePreCacheImageList": self._precache_action(self.precache.describe),
            "DeletePreCacheImage": self._precache_action(self.precache.delete),
        }

    @staticmethod
    def _precache_action(
        method: Callable[[dict[str, Any]], dict[str, Any]],
    ) -> Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]:
        """An image pre-cache action (``_precache``): synchronous bookkeeping, no I/O."""

        async def action(params: dict[str, Any]) -> dict[str, Any]:
            return method(params)

        return action

    def check_auth(self, headers: dict[str, str], body: bytes) -> None:
        """Refuse requests without a valid signature (only when credentials are configured)."""
        verify_signature(self.credentials, headers, body)

    async def handle(
        self, action: str, headers: dict[str, str], body: bytes, params: Any
    ) -> dict[str, Any]:
        """The ``Response`` object for one action (errors included)."""
        request_id = str(uuid.uuid4())
        try:
            self.check_auth(headers, body)
            if headers.get("x-tc-version") != VERSION:
                raise ServiceError(
                    "InvalidAction", f"version {headers.get('x-tc-version')!r} of {action} unknown"
                )
            handler = self._actions.get(action)
            if handler is None:
                raise ServiceError("InvalidAction", f"the action {action!r} is not supported")
            if not isinstance(params, dict):
                raise ServiceError("InvalidParameter", "the body must be a JSON object")
            result = await handler(params)
        except ServiceError as exc:
            return {"Error": {"Code": exc.code, "Message": exc.message}, "RequestId": request_id}
        return {**result, "RequestId": request_id}

    # -- tools -----------------------------------------------------------------------------

    async def _create_tool(self, params: dict[str, Any]) -> dict[str, Any]:
        tool = await self.service.create_tool(params)
        return {"ToolId": tool.tool_id}

    async def _describe_tools(self, params: dict[str, Any]) -> dict[str, Any]:
        limit = int(params.get("Limit") or 20)
        if not 0 < limit <= 100:
            raise ServiceError("InvalidParameter.Limit", "Limit must be between 1 and 100")
        offset = int(params.get("Offset") or 0)
        ids = params.get("ToolIds") or []
        if len(ids) > 100:
            raise ServiceError("InvalidParameterValue.ToolIds", "at most 100 ToolIds")
        with self.service.store.lock:
            tools = sorted(self.service.store.tools.values(), key=lambda t: t.created)
        if ids:
            tools = [t for t in tools if t.tool_id in ids]
        for flt in params.get("Filters") or []:
            name, values = str(flt.get("Name", "")), [str(v) for v in flt.get("Values") or []]
            tools = [t for t in tools if _tool_matches(t.to_api(), name, values)]
        page = tools[offset : offset + limit]
        return {"SandboxToolSet": [t.to_api() for t in page], "TotalCount": len(tools)}

    async def _update_tool(self, params: dict[str, Any]) -> dict[str, Any]:
        self.service.update_tool(params)
        return {}

    async def _delete_tool(self, params: dict[str, Any]) -> dict[str, Any]:
        self.service.delete_tool(str(params.get("ToolId") or ""))
        return {}

    # -- instances -------------------------------------------------------------------------

    async def _origin(self, params: dict[str, Any]) -> tuple[Tool, Seed | None]:
        """The tool and the starting tree of ``StartSandboxInstance``.

        ``SnapshotId`` starts from a snapshot's tree, ``SourceInstanceId`` from a running (or
        paused) instance's tree as it is now; either gives the tool when none is named.
        """
        tool_id, tool_name = params.get("ToolId"), params.get("ToolName")
        snapshot_id, source_id = params.get("SnapshotId"), params.get("SourceInstanceId")
        if snapshot_id and source_id:
            raise ServiceError(
                "InvalidParameter", "SnapshotId and SourceInstanceId cannot both be given"
            )
        seed: Seed | None = None
        origin_tool: Tool | None = None
        if snapshot_id:
            snapshot = self.service.store.snapshot(str(snapshot_id))
            seed, origin_tool = snapshot.tree, snapshot.tool
        elif source_id:
            source = self.service.store.instance(str(source_id))
            seed, origin_tool = await self.checkpoints.tree_of(source), source.tool
        if tool_id or tool_name:
            return self.service.store.tool(tool_id=tool_id, name=tool_name), seed
        if origin_tool is None:
            raise ServiceError("MissingParameter", "ToolId or ToolName is required")
        return origin_tool, seed

    async def _start_instance(self, params: dict[str, Any]) -> dict[str, Any]:
        tool, seed = await self._origin(params)
        custom = params.get("CustomConfiguration") or {}
        if isinstance(custom, dict) and custom.get("Image"):
            self.precache.used(str(custom["Image"]))
        timeout = parse_timeout(params.get("Timeout"), default=tool.default_timeout)
        metadata = {
            str(m.get("Name")): str(m.get("Value", ""))
            for m in params.get("Metadata") or []
            if m.get("Name")
        }
        auth_mode = str(params.get("AuthMode") or "DEFAULT")
        if auth_mode not in ("DEFAULT", "TOKEN", "NONE", "PUBLIC"):
            raise ServiceError("InvalidParameterValue", f"invalid AuthMode {auth_mode!r}")
        fault = self.service.faults.take("cloud", "StartSandboxInstance", ("slow_start",))
        instance = await self.service.start_instance(
            tool=tool,
            timeout=timeout,
            custom=dict(params.get("CustomConfiguration") or {}),
            metadata=metadata,
            env={},
            auth_mode=auth_mode,
            client_token=params.get("ClientToken") or None,
            slow_start=fault.delay if fault else 0.0,
            seed=seed,
        )
        return {"Instance": instance.to_api()}

    async def _describe_instances(self, params: dict[str, Any]) -> dict[str, Any]:
        ids = params.get("InstanceIds") or []
        with self.service.store.lock:
            instances = sorted(self.service.store.instances.values(), key=lambda i: i.created)
        if ids:
            instances = [i for i in instances if i.instance_id in ids]
        if params.get("ToolId"):
            instances = [i for i in instances if i.tool.tool_id == params["ToolId"]]
        for flt in params.get("Filters") or []:
            name, values = str(flt.get("Name", "")), [str(v) for v in flt.get("Values") or []]
            instances = [i for i in instances if _instance_matches(i, name, values)]
        limit = int(params.get("Limit") or params.get("MaxResults") or 20)
        if not 0 < limit <= 100:
            raise ServiceError("InvalidParameter.Limit", "Limit must be between 1 and 100")
        offset = int(params.get("Offset") or params.get("NextToken") or 0)
        page = instances[offset : offset + limit]
        result: dict[str, Any] = {
            "InstanceSet": [i.to_api() for i in page],
            "TotalCount": len(instances),
        }
        if offset + limit < len(instances):
            result["NextToken"] = str(offset + limit)
        return result

    def _instance(self, params: dict[str, Any]) -> Instance:
        instance_id = params.get("InstanceId")
        if not instance_id:
            raise ServiceError("MissingParameter", "InstanceId is required")
        return self.service.store.instance(str(instance_id))

    async def _stop_instance(self, params: dict[str, Any]) -> dict[str, Any]:
        await self.service.stop_instance(self._instance(params))
        return {}

    async def _acquire_token(self, params: dict[str, Any]) -> dict[str, Any]:
        token, expires = self.service.acquire_token(self._instance(params))
        return {"Token": token, "ExpiresAt": rfc3339(expires), "TrafficToken": token}

    async def _update_instance(self, params: dict[str, Any]) -> dict[str, Any]:
        instance = self._instance(params)
        if params.get("Timeout"):
            self.service.set_timeout(instance, parse_timeout(params["Timeout"]))
        if params.get("Metadata"):
            with self.service.store.lock:
                for item in params["Metadata"]:
                    instance.metadata[str(item.get("Name"))] = str(item.get("Value", ""))
        return {}

    async def _pause_instance(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"InstanceStatus": await self.checkpoints.pause(self._instance(params))}

    async def _resume_instance(self, params: dict[str, Any]) -> dict[str, Any]:
        timeout = parse_timeout(params["Timeout"]) if params.get("Timeout") else None
        await self.checkpoints.resume(self._instance(params), timeout)
        return {}

    # -- snapshots -------------------------------------------------------------------------

    async def _create_snapshot(self, params: dict[str, Any]) -> dict[str, Any]:
        snapshot = await self.checkpoints.create_snapshot(params, self._instance(params))
        return {"Snapshot": snapshot.to_api()}

    async def _describe_snapshots(self, params: dict[str, Any]) -> dict[str, Any]:
        snapshots = self.checkpoints.list_snapshots()
        ids = params.get("SnapshotIds") or []
        if ids:
            snapshots = [s for s in snapshots if s.snapshot_id in ids]
        for flt in params.get("Filters") or []:
            name, values = str(flt.get("Name", "")), [str(v) for v in flt.get("Values") or []]
            snapshots = [s for s in snapshots if snapshot_matches(s, name, values)]
        page, next_token = page_of(snapshots, params)
        result: dict[str, Any] = {
            "SnapshotSet": [s.to_api() for s in page],
            "TotalCount": len(snapshots),
        }
        if next_token:
            result["NextToken"] = next_token
        return result

    async def _delete_snapshot(self, params: dict[str, Any]) -> dict[str, Any]:
        if not params.get("SnapshotId"):
            raise ServiceError("MissingParameter", "SnapshotId is required")
        await self.checkpoints.delete_snapshot(str(params["SnapshotId"]))
        return {}

    # -- API keys --------------------------------------------------------------------------

    async def _create_api_key(self, params: dict[str, Any]) -> dict[str, Any]:
        key = self.service.create_api_key(str(params.get("Name") or "key"))
        return {"APIKey": key.secret, "KeyId": key.key_id, "Name": key.name}

    async def _describe_api_keys(self, params: dict[str, Any]) -> dict[str, Any]:
        with self.service.store.lock:
            keys = [k.to_api() for k in self.service.store.api_keys.values()]
        return {"APIKeySet": keys, "TotalCount": len(keys)}

    async def _describe_quota_overview(self, params: dict[str, Any]) -> dict[str, Any]:
        return describe_quota_overview(self.service)

    async def _delete_api_key(self, params: dict[str, Any]) -> dict[str, Any]:
        with self.service.store.lock:
            if self.service.store.api_keys.pop(str(params.get("KeyId")), None) is None:
                raise ServiceError("ResourceNotFound", f"API key {params.get('KeyId')!r} not found")
        return {}


def _tool_matches(tool: dict[str, Any], name: str, values: list[str]) -> bool:
    if name.startswith("tag:"):
        key = name[4:]
        return any(t.get("Key") == key and t.get("Value") in values for t in tool["Tags"])
    field = {"ToolName": "ToolName", "ToolType": "ToolType", "Status": "Status", "ToolId": "ToolId"}
    if name in field:
        return str(tool[field[name]]) in values
    return True


def _instance_matches(instance: Instance, name: str, values: list[str]) -> bool:
    if name == "Status":
        return instance.status in values
    if name == "ToolName":
        return instance.tool.name in values
    if name.startswith("metadata:"):
        return instance.metadata.get(name[9:]) in values
    return True
