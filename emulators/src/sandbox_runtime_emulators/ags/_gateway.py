"""The data-plane gateway: envd requests for an instance, checked and passed to its envd.

On AGS an instance's envd is reached at ``https://49983-<InstanceId>.<region>.tencentags.com``
with ``X-Access-Token``.  Locally the e2b SDK sends every envd request to one ``sandbox_url``
and names the instance in the ``E2b-Sandbox-Id`` header; the gateway accepts either that
header or a ``49983-<id>.`` host name.  It checks the token (a data-plane token from
``AcquireSandboxInstanceToken`` or the ``envdAccessToken`` of an E2B create, unless the
instance's ``AuthMode`` is ``NONE``), then forwards the request to the instance's envd with the
instance's own internal token, streaming the answer back.  Signed ``/files`` URLs are checked
against the instance's tokens the way envd checks them.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import AsyncIterator
from urllib.parse import parse_qs

import httpx

from sandbox_runtime._envd.server.app import _signature

from ._state import Instance, Store

__all__ = ["ENVD_PORT", "Gateway", "StreamCut"]

ENVD_PORT = 49983
_HOP_HEADERS = {
    "host",
    "connection",
    "content-length",
    "transfer-encoding",
    "x-access-token",
    "e2b-sandbox-id",
    "e2b-sandbox-port",
    "keep-alive",
}


class StreamCut(Exception):
    """An answer being streamed lost its sandbox (killed, crashed, or envd died).

    The real service's proxy then resets the connection, so the client sees a truncated
    answer and its SDK raises; the app turns this into a closed connection, never into a
    cleanly finished stream, which a client would read as a command that merely ended.
    """


class GatewayAnswer:
    """A status and a body (bytes, or an async iterator of chunks for streams)."""

    def __init__(
        self,
        status: int,
        headers: list[tuple[str, str]],
        body: bytes = b"",
        stream: AsyncIterator[bytes] | None = None,
    ) -> None:
        self.status = status
        self.headers = headers
        self.body = body
        self.stream = stream


def _json_error(status: int, message: str) -> GatewayAnswer:
    import json

    body = json.dumps({"code": status, "message": message}).encode()
    return GatewayAnswer(status, [("content-type", "application/json")], body)


def instance_id_of(headers: dict[str, str]) -> str | None:
    """The instance a data-plane request is for, from its headers."""
    named = headers.get("e2b-sandbox-id")
    if named:
        return named
    host = headers.get("host", "")
    prefix = f"{ENVD_PORT}-"
    if host.startswith(prefix):
        return host[len(prefix) :].split(".", 1)[0] or None
    return None


class Gateway:
    """Token checks and forwarding to each instance's envd."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(connect=10.0, read=None, write=60.0, pool=60.0),
            limits=httpx.Limits(max_connections=512, max_keepalive_connections=64),
        )

    async def aclose(self) -> None:
        """Close the pooled connections to envds."""
        await self._client.aclose()

    def _instance_by_token(self, headers: dict[str, str]) -> str | None:
        """The instance a token belongs to: ``Sandbox.connect`` sends no ``E2b-Sandbox-Id``."""
        token = headers.get("x-access-token")
        if not token:
            return None
        with self.store.lock:
            for instance in self.store.instances.values():
                if token in instance.tokens:
                    return instance.instance_id
        return None

    def _allowed(
        self, instance: Instance, headers: dict[str, str], path: str, query: bytes
    ) -> bool:
        if instance.auth_mode == "NONE":
            return True
        token = headers.get("x-access-token", "")
        if token and instance.token_valid(token):
            return True
        if path != "/files":
            return False
        params = {k: v[-1] for k, v in parse_qs(query.decode()).items()}
        signature = params.get("signature")
        if not signature:
            return False
        expiration = (
            int(params["signature_expiration"]) if params.get("signature_expiration") else None
        )
        if expiration is not None and expiration < time.time():
            return False
        operation = "read" if headers.get(":method", "GET") == "GET" else "write"
        for candidate in list(instance.tokens):
            if not instance.token_valid(candidate):
                continue
            expected = _signature(
                params.get("path", ""), operation, params.get("username", ""), candidate, expiration
            )
            if hmac.compare_digest(signature, expected):
                return True
        return False

    async def forward(
        self, method: str, path: str, query: bytes, headers: dict[str, str], body: bytes
    ) -> GatewayAnswer:
        """Check and forward one envd request."""
        instance_id = instance_id_of(headers) or self._instance_by_token(headers)
        if instance_id is None:
            return _json_error(404, f"no route for {method} {path}")
        with self.store.lock:
            instance = self.store.instances.get(instance_id)
        runner = instance.runner if instance is not None else None
        if instance is None or instance.status != "RUNNING" or runner is None or not runner.url:
            return _json_error(502, f"The sandbox {instance_id} was not found")
        if not self._allowed(instance, {**headers, ":method": method}, path, query):
            return _json_error(401, "unauthorized access, please provide a valid access token")
        forward_headers = {k: v for k, v in headers.items() if k not in _HOP_HEADERS}
        forward_headers["x-access-token"] = runner.internal_token
        url = f"{runner.url}{path}" + (f"?{query.decode()}" if query else "")
        request = self._client.build_request(method, url, headers=forward_headers, content=body)
        try:
            response = await self._client.send(request, stream=True)
        except httpx.HTTPError:
            if not runner.alive():
                return _json_error(502, f"The sandbox {instance_id} was not found")
            return _json_error(502, f"The sandbox {instance_id} is not reachable")
        out_headers = [
            (k, v)
            for k, v in response.headers.items()
            if k.lower() not in ("content-length", "transfer-encoding", "connection")
        ]

        async def chunks() -> AsyncIterator[bytes]:
            try:
                async for chunk in response.aiter_raw():
                    if instance.status != "RUNNING":
                        break  # killed: whatever envd says while it dies never gets out
                    yield chunk
                else:
                    return
            except httpx.HTTPError as exc:
                raise StreamCut(f"the sandbox {instance_id} went away mid-answer") from exc
            finally:
                await response.aclose()
            raise StreamCut(f"the sandbox {instance_id} was stopped mid-answer")

        return GatewayAnswer(response.status_code, out_headers, stream=chunks())
