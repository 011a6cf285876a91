"""The emulator as one ASGI application: Cloud API, E2B REST, envd gateway and admin routes.

Routing is by path, since the three protocols never share one: envd's paths (``/health``,
``/files``, ``/process.Process/...``) go to the gateway, ``/sandboxes`` and ``/v2/...`` to the
E2B REST API, ``POST /`` with ``X-TC-Action`` to the Cloud API, and ``/_emulator/...`` to the
admin routes that tests and users call to inject faults and look at the state.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import fields
from typing import Any

from sandbox_runtime._envd.server._http import Message, Scope, request_body
from sandbox_runtime_emulators._ratelimit import ServerLimits

from ._cloudapi import CloudApi
from ._e2b import E2bApi
from ._faults import Fault, FaultBook
from ._gateway import Gateway, GatewayAnswer, StreamCut, instance_id_of
from ._limits import cloud_caller, cloud_refusal, e2b_refusal
from ._service import AgsService
from ._tcr import TCR_VERSION, TcrApi

__all__ = ["EmulatorApp"]

Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
_ENVD_PATHS = ("/health", "/init", "/files", "/envs", "/metrics")
_ENVD_SERVICES = ("/process.Process/", "/filesystem.Filesystem/")


class DroppedConnection(ConnectionAbortedError):
    """Raised to make the server close the connection without answering (a ``drop`` fault)."""


async def _answer(
    send: Send, status: int, body: bytes, headers: list[tuple[str, str]] | None = None
) -> None:
    raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers or []]
    raw.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


async def _answer_json(
    send: Send, status: int, payload: Any, headers: list[tuple[str, str]] | None = None
) -> None:
    body = b"" if payload is None else json.dumps(payload).encode()
    extra = [("content-type", "application/json")] if payload is not None else []
    await _answer(send, status, body, extra + (headers or []))


class EmulatorApp:
    """The ASGI callable; see the module docstring."""

    def __init__(
        self,
        service: AgsService,
        cloud: CloudApi,
        e2b: E2bApi,
        gateway: Gateway,
        tcr: TcrApi | None = None,
        limits: ServerLimits | None = None,
    ) -> None:
        self.service = service
        #: The service's own quotas and latencies (off unless configured), see ``_limits``.
        self.limits = limits if limits is not None else ServerLimits(window=True)
        self.faults: FaultBook = service.faults
        self.cloud = cloud
        self.tcr = tcr
        self.e2b = e2b
        self.gateway = gateway
        #: Requests that drew a random ``drop_answer`` (plane, operation, connection).
        self._pending_drops: set[tuple[str, str, int]] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = await request_body(receive)
        method: str = scope["method"]
        path: str = scope["path"]
        query: bytes = scope.get("query_string", b"")
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if path.startswith("/_emulator/"):
            await self._admin(method, path, body, send)
        elif path in _ENVD_PATHS or path.startswith(_ENVD_SERVICES):
            await self._envd(method, path, query, headers, body, send)
        elif path.startswith(("/sandboxes", "/v2/", "/snapshots", "/templates/")):
            await self._e2b(method, path, query, headers, body, send)
        elif method == "POST" and path == "/" and "x-tc-action" in headers:
            await self._cloud(headers, body, send)
        else:
            await _answer_json(send, 404, {"code": 404, "message": f"no route for {path}"})

    # -- faults ------------------------------------------------------------------------------

    async def _fault(
        self, plane: str, operation: str, send: Send, headers: dict[str, str] | None = None
    ) -> bool:
        """Apply an armed or random fault to this request; True if it was answered (or dropped).

        A random ``drop_answer`` is remembered for :meth:`_drop_answer`; a ``kill_instance``
        kills the named instance's container and lets the request go on (to fail as it would
        against a crashed host).
        """
        delayed = self.faults.take(plane, operation, ("delay",))
        if delayed is not None:
            await asyncio.sleep(delayed.delay)
        fault = self.faults.take(plane, operation, ("rate_limit", "unavailable", "drop", "error"))
        if fault is None:
            drawn = self.faults.draw(plane)
            if drawn == "slow":
                await asyncio.sleep(self.faults.slow_delay())
            elif drawn == "drop_answer":
                self._pending_drops.add((plane, operation, id(send)))
            elif drawn == "kill_instance":
                await self._kill_instance(headers or {})
            elif drawn is not None:
                fault = Fault(kind=drawn, operation=operation)  # type: ignore[arg-type]
        if fault is None:
            return False
        self.faults.record(plane, operation, 0 if fault.kind == "drop" else 200, fault)
        if fault.kind == "drop":
            raise DroppedConnection(f"injected drop of {operation}")
        if fault.kind == "unavailable":
            await _answer(send, 503, b"Service Unavailable", [("content-type", "text/plain")])
        elif plane == "cloud":
            code = "RequestLimitExceeded" if fault.kind == "rate_limit" else fault.code
            payload = {
                "Response": {
                    "Error": {"Code": code, "Message": fault.message},
                    "RequestId": "injected-fault",
                }
            }
            await _answer_json(send, 200, payload)
        else:
            status = 429 if fault.kind == "rate_limit" else fault.status
            await _answer_json(send, status, {"code": status, "message": fault.message})
        return True

    async def _limited(self, plane: str, operation: str, caller: str, send: Send) -> bool:
        """Refuse a request over its quota, as the service does; True if it was refused.

        An admitted request then waits the operation's latency, if one is set.
        """
        if not self.limits:
            return False
        if self.limits.admit(operation, caller) is not None:
            self.faults.record(plane, operation, 200 if plane == "cloud" else 429, "quota")
            if plane == "cloud":
                await _answer_json(send, 200, {"Response": cloud_refusal()})
            else:
                await _answer_json(send, 429, e2b_refusal())
            return True
        delay = self.limits.latency(operation)
        if delay > 0:
            await asyncio.sleep(delay)
        return False

    async def _kill_instance(self, headers: dict[str, str]) -> None:
        instance_id = instance_id_of(headers)
        if instance_id is None:
            return
        with self.service.store.lock:
            instance = self.service.store.instances.get(instance_id)
        runner = instance.runner if instance is not None else None
        if runner is not None:
            self.faults.record("envd", "kill_instance", 0, Fault(kind="drop"))
            await asyncio.to_thread(runner.crash)

    def _drop_answer(self, plane: str, operation: str, send: Send | None = None) -> None:
        """Close the connection of a request that was handled, if a fault says so."""
        drawn = (plane, operation, id(send))
        if send is not None and drawn in self._pending_drops:
            self._pending_drops.discard(drawn)
            self.faults.record(plane, operation, 0, Fault(kind="drop_answer"))
            raise DroppedConnection(f"injected drop of the answer to {operation}")
        fault = self.faults.take(plane, operation, ("drop_answer",))
        if fault is not None:
            self.faults.record(plane, operation, 0, fault)
            raise DroppedConnection(f"injected drop of the answer to {operation}")

    # -- planes ------------------------------------------------------------------------------

    async def _cloud(self, headers: dict[str, str], body: bytes, send: Send) -> None:
        action = headers.get("x-tc-action", "")
        if await self._fault("cloud", action, send, headers):
            return
        if await self._limited("cloud", action, cloud_caller(headers), send):
            return
        try:
            params = json.loads(body) if body else {}
        except ValueError:
            params = None
        if self.tcr is not None and headers.get("x-tc-version") == TCR_VERSION:
            response = await self.tcr.handle(action, headers, body, params)
        else:
            response = await self.cloud.handle(action, headers, body, params)
        self._drop_answer("cloud", action, send)
        self.faults.record("cloud", action, 200, None)
        await _answer_json(send, 200, {"Response": response})

    async def _e2b(
        self, method: str, path: str, query: bytes, headers: dict[str, str], body: bytes, send: Send
    ) -> None:
        operation = self.e2b.operation(method, path)
        if await self._fault("e2b", operation, send, headers):
            return
        if await self._limited("e2b", operation, headers.get("x-api-key", ""), send):
            return
        status, payload, extra = await self.e2b.handle(method, path, query, headers, body)
        self._drop_answer("e2b", operation, send)
        self.faults.record("e2b", operation, status, None)
        await _answer_json(send, status, payload, list(extra.items()))

    async def _envd(
        self, method: str, path: str, query: bytes, headers: dict[str, str], body: bytes, send: Send
    ) -> None:
        if await self._fault("envd", path, send, headers):
            return
        answer: GatewayAnswer = await self.gateway.forward(method, path, query, headers, body)
        if answer.stream is not None and (("envd", path, id(send)) in self._pending_drops):
            # Handled (a process started), then the connection is lost without an answer.
            close = getattr(answer.stream, "aclose", None)
            if close is not None:
                await close()
        self._drop_answer("envd", path, send)
        self.faults.record("envd", path, answer.status, None)
        raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in answer.headers]
        if answer.stream is None:
            await _answer(send, answer.status, answer.body, answer.headers)
            return
        await send({"type": "http.response.start", "status": answer.status, "headers": raw})
        try:
            async for chunk in answer.stream:
                if chunk:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
        except StreamCut as exc:
            raise DroppedConnection(str(exc)) from exc
        await send({"type": "http.response.body", "body": b""})

    # -- admin -------------------------------------------------------------------------------

    async def _admin(self, method: str, path: str, body: bytes, send: Send) -> None:
        if path == "/_emulator/faults" and method == "POST":
            spec = json.loads(body or b"{}")
            known = {f.name for f in fields(Fault)}
            unknown = set(spec) - known
            if unknown or "kind" not in spec:
                await _answer_json(send, 400, {"message": f"bad fault fields: {sorted(unknown)}"})
                return
            kind = spec.pop("kind")
            self.faults.inject(kind, **spec)
            await _answer_json(send, 200, {"faults": self.faults.armed()})
        elif path == "/_emulator/faults" and method == "DELETE":
            self.faults.clear()
            await _answer_json(send, 200, {"faults": []})
        elif path == "/_emulator/requests" and method == "GET":
            records = [r.__dict__ for r in self.faults.requests()]
            await _answer_json(send, 200, {"requests": records})
        elif path == "/_emulator/state" and method == "GET":
            store = self.service.store
            with store.lock:
                state = {
                    "tools": [t.to_api() for t in store.tools.values()],
                    "instances": [i.to_api() for i in store.instances.values()],
                }
            await _answer_json(send, 200, state)
        else:
            await _answer_json(send, 404, {"message": f"no admin route {method} {path}"})
