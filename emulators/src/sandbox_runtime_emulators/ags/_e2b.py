"""The E2B-compatible REST door (``X-API-KEY: ark_...``), as the e2b SDK calls it.

``templateID`` is a tool name (or id), as on AGS.  Create answers 201 with the ``Sandbox``
object, kill and timeout 204, unknown sandboxes 404; errors are ``{"code", "message"}``.
Both the old routes (``POST /sandboxes``, ``POST /sandboxes/{id}/connect``, e2b < 2.51) and the
``/v2`` ones of newer SDKs are served, and pause, resume, snapshots and fork
(:mod:`._e2b_checkpoints`); metrics and logs are not.
"""

from __future__ import annotations

import contextlib
import datetime
import hmac
import json
import re
from typing import Any
from urllib.parse import parse_qs

from sandbox_runtime._envd.server import ENVD_VERSION

from ._e2b_checkpoints import E2bCheckpoints
from ._e2b_list import ListQuery, e2b_state, list_page
from ._seed import Seed
from ._service import AgsService
from ._state import DEFAULT_TIMEOUT, MAX_TIMEOUT, Instance, ServiceError, Tool

__all__ = ["E2bAnswer", "E2bApi"]

E2bAnswer = tuple[int, Any, dict[str, str]]
#: The least a refresh keeps the sandbox alive for, in seconds (E2B's default timeout).
DEFAULT_REFRESH = 15
_SANDBOX_ROUTE = re.compile(r"^/(?:v2/)?sandboxes/(?P<id>[^/]+)(?P<rest>/[a-z]+)?$")
_CHECKPOINT_ROUTES = ("/pause", "/resume", "/snapshots", "/fork")
_TEMPLATE_ROUTE = re.compile(r"^/templates/(?P<id>[^/]+)$")
_STATUS_FOR = {
    "ResourceNotFound.SandboxTool": 404,
    "ResourceNotFound.SandboxInstance": 404,
    "ResourceNotFound.SandboxSnapshot": 404,
    "ResourceUnavailable.SandboxTool": 400,
    "LimitExceeded.SandboxInstance": 429,
    "InvalidParameterValue.Timeout": 400,
    "UnsupportedOperation.SandboxInstance": 409,
}


def _precise(timestamp: float) -> str:
    """RFC 3339 in UTC with microseconds, as E2B times its sandboxes (``startedAfter`` needs it)."""
    moment = datetime.datetime.fromtimestamp(timestamp, tz=datetime.timezone.utc)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


def _error(status: int, message: str) -> E2bAnswer:
    return status, {"code": status, "message": message}, {}


class E2bApi:
    """Routes of the E2B REST API onto the service."""

    def __init__(self, service: AgsService, *, checkpoint_routes: bool = True) -> None:
        self.service = service
        self.checkpoints = E2bCheckpoints(service, self._sandbox)
        #: Off: pause, resume, snapshots and fork answer as a router without them does (an
        #: older self-hosted e2b), so clients' discovery and fallbacks can be tested.
        self.checkpoint_routes = checkpoint_routes

    def _route_off(self, method: str, path: str) -> bool:
        if self.checkpoint_routes:
            return False
        if (method, path) == ("GET", "/snapshots"):
            return True
        if method == "DELETE" and _TEMPLATE_ROUTE.match(path):
            return True
        match = _SANDBOX_ROUTE.match(path)
        return method == "POST" and match is not None and match["rest"] in _CHECKPOINT_ROUTES

    def operation(self, method: str, path: str) -> str:
        """A stable name for a request, for faults and the request log (``POST /sandboxes``)."""
        match = _SANDBOX_ROUTE.match(path)
        if match:
            prefix = "/v2" if path.startswith("/v2/") else ""
            return f"{method} {prefix}/sandboxes/{{id}}{match['rest'] or ''}"
        return f"{method} {path}"

    def authorized(self, headers: dict[str, str]) -> bool:
        """True if ``X-API-KEY`` is an active key of this service."""
        given = headers.get("x-api-key", "")
        key = self.service.store.api_key(given) if given else None
        return key is not None and hmac.compare_digest(key.secret, given)

    async def handle(
        self, method: str, path: str, query: bytes, headers: dict[str, str], body: bytes
    ) -> E2bAnswer:
        """``(status, JSON body or None, extra headers)`` for one REST request."""
        if not self.authorized(headers):
            return _error(401, "Invalid API key, please visit the console to get a valid key")
        try:
            payload = json.loads(body) if body else {}
        except ValueError:
            return _error(400, "request body is not valid JSON")
        if self._route_off(method, path):
            # What kin-openapi's router (e2b's API validates requests with it) answers.
            return _error(404, "no matching operation was found")
        try:
            if method == "POST" and path in ("/sandboxes", "/v2/sandboxes"):
                return await self._create(payload)
            if method == "GET" and path in ("/sandboxes", "/v2/sandboxes"):
                return self._list(parse_qs(query.decode()), v2=path.startswith("/v2"))
            if method == "GET" and path == "/snapshots":
                return self.checkpoints.list_snapshots(parse_qs(query.decode()))
            template = _TEMPLATE_ROUTE.match(path)
            if method == "DELETE" and template is not None:
                return await self.checkpoints.delete_snapshot(template["id"])
            match = _SANDBOX_ROUTE.match(path)
            if match is None:
                return _error(404, f"no route for {method} {path}")
            instance = self.service.store.instance(match["id"])
            await self.service.check_alive(instance)
            return await self._on_sandbox(method, match["rest"] or "", instance, payload)
        except ServiceError as exc:
            status = _STATUS_FOR.get(exc.code, exc.http_status)
            return _error(status, exc.message)

    async def _on_sandbox(
        self, method: str, rest: str, instance: Instance, payload: dict[str, Any]
    ) -> E2bAnswer:
        """The routes under ``/sandboxes/{id}``."""
        if method == "GET" and not rest:
            if e2b_state(instance) is None:
                return _error(404, f"sandbox {instance.instance_id} not found")
            return 200, self._detail(instance), {}
        if method == "DELETE" and not rest:
            if e2b_state(instance) is None:
                return _error(404, f"sandbox {instance.instance_id} not found")
            await self.service.stop_instance(instance)
            return 204, None, {}
        if method == "POST" and rest in ("/connect", "/resume"):
            await self.checkpoints.checkpoints.settle(instance, self.service.limits.start_wait)
        if method == "POST" and rest == "/connect" and instance.status == "PAUSED":
            return await self.checkpoints.resume(instance, payload.get("timeout"))
        if method == "POST" and rest in _CHECKPOINT_ROUTES:
            return await self._checkpoint_route(rest, instance, payload)
        return self._on_running(method, rest, instance, payload)

    async def _checkpoint_route(
        self, rest: str, instance: Instance, payload: dict[str, Any]
    ) -> E2bAnswer:
        if rest == "/pause":
            return await self.checkpoints.pause(instance)
        if rest == "/resume":
            return await self.checkpoints.resume(instance, payload.get("timeout"))
        if rest == "/snapshots":
            return await self.checkpoints.create_snapshot(instance, payload)
        return await self.checkpoints.fork(instance, payload)

    def _on_running(
        self, method: str, rest: str, instance: Instance, payload: dict[str, Any]
    ) -> E2bAnswer:
        """Timeout, refresh and connect: routes of a running sandbox."""
        if method == "POST" and rest == "/timeout":
            # E2B: the end becomes now + timeout, shorter or longer (negative: now).
            self._check_running(instance)
            self.service.set_timeout(instance, int(payload.get("timeout") or 0))
            return 204, None, {}
        if method == "POST" and rest == "/refreshes":
            self._check_running(instance)
            seconds = max(int(payload.get("duration") or 0), DEFAULT_REFRESH)
            self.service.set_timeout(instance, seconds, allow_shorter=False)
            return 204, None, {}
        if method == "POST" and rest == "/connect":
            self._check_running(instance)
            seconds = int(payload.get("timeout") or 0) or instance.timeout
            self.service.set_timeout(instance, seconds, allow_shorter=False)
            return 200, self._sandbox(instance), {}
        if rest in ("/metrics", "/logs"):
            return _error(501, f"{rest[1:]} is not supported by the emulator")
        return _error(404, f"no route for {method} /sandboxes/{instance.instance_id}{rest}")

    @staticmethod
    def _create_timeout(raw: Any) -> int:
        """A create's lifetime: E2B's checks (positive, at most 24 h), AGS's 5-minute default."""
        if raw is None:
            return DEFAULT_TIMEOUT
        seconds = int(raw)
        if seconds <= 0:
            raise ServiceError("InvalidParameterValue.Timeout", "Timeout must be greater than 0")
        if seconds > MAX_TIMEOUT:
            raise ServiceError(
                "InvalidParameterValue.Timeout",
                f"Timeout cannot be greater than {MAX_TIMEOUT // 3600} hours",
            )
        return seconds

    @staticmethod
    def _check_running(instance: Instance) -> None:
        if instance.status not in ("STARTING", "RUNNING"):
            raise ServiceError(
                "ResourceNotFound.SandboxInstance", f"sandbox {instance.instance_id} not found"
            )

    async def _create(self, payload: dict[str, Any]) -> E2bAnswer:
        template = str(payload.get("templateID") or "")
        if not template:
            return _error(400, "templateID is required")
        tool, seed = self._template(template)
        fault = self.service.faults.take("e2b", "POST /sandboxes", ("slow_start",))
        instance = await self.service.start_instance(
            tool=tool,
            timeout=self._create_timeout(payload.get("timeout")),
            custom={},
            metadata={str(k): str(v) for k, v in (payload.get("metadata") or {}).items()},
            env={str(k): str(v) for k, v in (payload.get("envVars") or {}).items()},
            auth_mode="DEFAULT" if payload.get("secure", True) else "NONE",
            client_token=None,
            slow_start=fault.delay if fault else 0.0,
            seed=seed,
        )
        instance.auto_pause = bool(payload.get("autoPause"))
        if fault is not None:
            # The REST API answers only once the sandbox runs.
            import asyncio

            await asyncio.to_thread(instance.boot_done.wait, self.service.limits.start_wait)
        return 201, self._sandbox(instance), {}

    def _template(self, template: str) -> tuple[Tool, Seed | None]:
        """The tool a ``templateID`` names (id or name), or a snapshot's tool and tree.

        e2b starts a sandbox from a snapshot by passing the snapshot's id as the template.
        """
        store = self.service.store
        with contextlib.suppress(ServiceError):
            return store.tool(tool_id=template), None
        with contextlib.suppress(ServiceError):
            return store.tool(name=template), None
        try:
            snapshot = store.snapshot(template)
        except ServiceError:
            raise ServiceError(
                "ResourceNotFound.SandboxTool", f"sandbox tool {template!r} not found"
            ) from None
        return snapshot.tool, snapshot.tree

    def _sandbox(self, instance: Instance) -> dict[str, Any]:
        body: dict[str, Any] = {
            "templateID": instance.tool.tool_id,
            "alias": instance.tool.name,
            "sandboxID": instance.instance_id,
            "clientID": "emulator",
            "envdVersion": ENVD_VERSION,
            "domain": None,
        }
        if instance.auth_mode != "NONE":
            body["envdAccessToken"] = instance.envd_token
            body["trafficAccessToken"] = instance.envd_token
        return body

    def _listed(self, instance: Instance) -> dict[str, Any]:
        return {
            "templateID": instance.tool.tool_id,
            "alias": instance.tool.name,
            "sandboxID": instance.instance_id,
            "clientID": "emulator",
            "startedAt": _precise(instance.created),
            "endAt": _precise(instance.expires),
            "cpuCount": 1,
            "memoryMB": 1024,
            "diskSizeMB": 10240,
            "metadata": instance.metadata,
            "state": e2b_state(instance) or "running",
            "envdVersion": ENVD_VERSION,
        }

    def _detail(self, instance: Instance) -> dict[str, Any]:
        detail = self._listed(instance)
        detail["domain"] = None
        if instance.auth_mode != "NONE":
            detail["envdAccessToken"] = instance.envd_token
        return detail

    def _list(self, query: dict[str, list[str]], *, v2: bool) -> E2bAnswer:
        parsed = ListQuery.parse(query)
        with self.service.store.lock:
            instances = list(self.service.store.instances.values())
        items, headers = list_page(instances, parsed, self._listed, paged=v2)
        return 200, items, headers
