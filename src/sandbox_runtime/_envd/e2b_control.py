"""The e2b control plane (REST, ``X-API-KEY``), over httpx: any e2b-protocol service.

Shared by the ``ags`` backend (AGS's E2B-compatible API with an ``ark_`` key) and the ``e2b``
backend (e2b itself, or any service speaking its protocol), so it lives in the core layer and
backends reach it through :mod:`sandbox_runtime.backend_kit.agent`.

Calls: create a sandbox from a template (``POST /sandboxes``), read one (``GET
/sandboxes/{id}``, which also hands out its envd token), list running ones by metadata
(``GET /v2/sandboxes``, paged by ``x-next-token``), kill one; and the checkpoint routes of
e2b's current SDK (2.63): pause, connect (which resumes a paused sandbox), snapshots (create,
list, delete through ``DELETE /templates/{id}``) and fork.  Whether a service has the
checkpoint routes is found out by asking it (:mod:`.e2b_features`), never from its name.
Written here rather than through the e2b SDK so that the backends work beside any e2b release
(the SDK's key checks, routes and models changed between 2.15 and 2.63).

Retries: reads, kills and timeouts are idempotent and retried on connection errors, 429 and
5xx; a create is retried only on answers that say nothing was done (429, 503), because a
create whose answer was lost may have made a sandbox that a second create would duplicate.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx
from pydantic import SecretStr

from sandbox_runtime._core.ratelimit import RateLimiter
from sandbox_runtime._core.retry import RetryPolicy, call_with_retries, retry_after_seconds
from sandbox_runtime.errors import BackendError, BackendUnavailableError

from .client import shared_tls_context

__all__ = ["E2bApi", "E2bApiError", "ForkCopy", "SandboxGrant"]

_PAGE = 100


def _epoch(moment: Any) -> float | None:
    """An RFC 3339 time (``...Z``) as epoch seconds, or ``None``."""
    if not isinstance(moment, str) or not moment:
        return None
    try:
        return datetime.datetime.fromisoformat(moment.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class E2bApiError(BackendError):
    """The E2B-compatible API refused or failed a call."""

    def __init__(
        self, message: str, *, status: int | None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class SandboxGrant:
    """What reaching one sandbox's envd needs."""

    sandbox_id: str
    envd_token: str | None
    envd_version: str
    domain: str | None


@dataclass(frozen=True, slots=True)
class ForkCopy:
    """One copy of a fork: its grant, or the service's error for that copy alone."""

    grant: SandboxGrant | None
    error: str | None
    status: int | None = None


class E2bApi:
    """One API key's view of the E2B-compatible API; thread-safe."""

    def __init__(
        self,
        api_url: str,
        api_key: SecretStr,
        *,
        request_timeout: float,
        limiter: RateLimiter | None = None,
        service: str = "AGS E2B API",
    ) -> None:
        self._key = api_key
        self._service = service
        self.api_url = api_url.rstrip("/")
        self._limiter = limiter
        self._client = httpx.Client(
            base_url=api_url.rstrip("/"), timeout=request_timeout, verify=shared_tls_context()
        )
        self._policy = RetryPolicy(attempts=6, max_delay=min(120.0, 4 * request_timeout))

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def _call(
        self,
        method: str,
        path: str,
        *,
        body: Mapping[str, Any] | None = None,
        idempotent: bool,
        ok: tuple[int, ...] = (200, 201, 204),
    ) -> httpx.Response:
        def once() -> httpx.Response:
            response = self._client.request(
                method,
                path,
                content=json.dumps(body).encode() if body is not None else None,
                headers={
                    "X-API-KEY": self._key.get_secret_value(),
                    "Content-Type": "application/json",
                },
            )
            if response.status_code not in ok:
                raise self._error(response, f"{method} {path.split('?')[0]}")
            return response

        def retryable(exc: BaseException) -> bool:
            if isinstance(exc, E2bApiError):
                return exc.status in (429, 503) or (idempotent and exc.status in (500, 502, 504))
            # A connection that never opened sent nothing; any other break may have.
            return isinstance(exc, httpx.ConnectError) or (
                idempotent and isinstance(exc, httpx.TransportError)
            )

        try:
            return call_with_retries(
                once,
                retryable,
                description=f"{self._service} {method} {path.split('?')[0]}",
                policy=self._policy,
                retry_after=lambda exc: exc.retry_after if isinstance(exc, E2bApiError) else None,
                limiter=self._limiter,
            )
        except httpx.ConnectError as exc:
            raise BackendUnavailableError(f"cannot reach the {self._service}: {exc}") from exc
        except httpx.TransportError as exc:
            # Sent, then the connection broke: the call may have been done.
            raise E2bApiError(
                f"{method} {path.split('?')[0]}: the connection broke before the answer ({exc})",
                status=None,
            ) from exc

    def _error(self, response: httpx.Response, what: str) -> E2bApiError:
        try:
            detail = str(response.json().get("message", ""))
        except ValueError:
            detail = response.text[:200]
        message = f"{what}: the {self._service} answered {response.status_code}" + (
            f" ({detail})" if detail else ""
        )
        if response.status_code in (401, 403):
            raise BackendUnavailableError(
                f"the API key was refused by the {self._service}: {message}"
            )
        return E2bApiError(
            message,
            status=response.status_code,
            retry_after=retry_after_seconds(response.headers.get("retry-after")),
        )

    @staticmethod
    def _grant(data: Mapping[str, Any]) -> SandboxGrant:
        return SandboxGrant(
            sandbox_id=str(data["sandboxID"]),
            envd_token=data.get("envdAccessToken") or None,
            envd_version=str(data.get("envdVersion") or "0.5.7"),
            domain=data.get("domain") or None,
        )

    def create(self, template: str, *, timeout: int, metadata: Mapping[str, str]) -> SandboxGrant:
        """Start a sandbox from a tool (by name or id); answers once it runs."""
        body = {"templateID": template, "timeout": timeout, "metadata": dict(metadata)}
        response = self._call("POST", "/sandboxes", body=body, idempotent=False)
        return self._grant(response.json())

    def get(self, sandbox_id: str) -> SandboxGrant | None:
        """A running sandbox's grant, or ``None`` when the API does not know it."""
        try:
            response = self._call("GET", f"/sandboxes/{sandbox_id}", idempotent=True)
        except E2bApiError as exc:
            if exc.status == 404:
                return None
            raise
        return self._grant(response.json())

    def list_running(
        self,
        metadata: Mapping[str, str],
        ends: dict[str, float] | None = None,
        *,
        paused: bool = False,
    ) -> list[tuple[str, dict[str, str]]]:
        """``(sandbox id, metadata)`` of every running sandbox carrying ``metadata``.

        ``ends``, when given, receives each sandbox's ``endAt`` (epoch seconds): its end as
        extended, which its metadata (fixed at create) does not follow.  ``paused`` lists
        paused sandboxes too: the service keeps them for weeks, billing, so listing and
        reaping must see them.
        """
        found: list[tuple[str, dict[str, str]]] = []
        token = ""
        states = "running,paused" if paused else "running"
        while True:
            query = {"metadata": urlencode(metadata), "state": states, "limit": _PAGE}
            if token:
                query["nextToken"] = token
            response = self._call("GET", f"/v2/sandboxes?{urlencode(query)}", idempotent=True)
            for item in response.json() or []:
                found.append((str(item["sandboxID"]), dict(item.get("metadata") or {})))
                end = _epoch(item.get("endAt"))
                if ends is not None and end is not None:
                    ends[str(item["sandboxID"])] = end
            token = response.headers.get("x-next-token", "")
            if not token:
                return found

    def kill(self, sandbox_id: str) -> bool:
        """Kill a sandbox; ``False`` when it was already gone."""
        response = self._call(
            "DELETE", f"/sandboxes/{sandbox_id}", idempotent=True, ok=(200, 204, 404)
        )
        return response.status_code != 404

    def set_timeout(self, sandbox_id: str, seconds: int) -> None:
        """End a running sandbox ``seconds`` from now (``POST /sandboxes/{id}/timeout``)."""
        self._call(
            "POST", f"/sandboxes/{sandbox_id}/timeout", body={"timeout": seconds}, idempotent=True
        )

    # -- checkpoint routes (e2b 2.63's SDK calls them this way) ------------------------------

    def pause(self, sandbox_id: str, *, memory: bool | None = None) -> bool:
        """Pause a running sandbox; ``False`` when it was paused already (409)."""
        body: dict[str, Any] = {} if memory is None else {"memory": memory}
        response = self._call(
            "POST", f"/sandboxes/{sandbox_id}/pause", body=body, idempotent=True, ok=(204, 409)
        )
        return response.status_code != 409

    def connect(self, sandbox_id: str, *, timeout: int | None = None) -> SandboxGrant:
        """Connect to a sandbox, resuming it when paused (``POST /v2/sandboxes/{id}/connect``)."""
        body: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        response = self._call(
            "POST", f"/v2/sandboxes/{sandbox_id}/connect", body=body, idempotent=True
        )
        return self._grant(response.json())

    def create_snapshot(self, sandbox_id: str, *, name: str | None = None) -> str:
        """Snapshot a sandbox (it outlives the sandbox); the snapshot's id."""
        body: dict[str, Any] = {} if name is None else {"name": name}
        response = self._call(
            "POST", f"/sandboxes/{sandbox_id}/snapshots", body=body, idempotent=False
        )
        return str(response.json()["snapshotID"])

    def list_snapshots(self, *, sandbox_id: str | None = None) -> list[tuple[str, list[str]]]:
        """``(snapshot id, names)`` of every snapshot the key sees (of one sandbox, if given)."""
        found: list[tuple[str, list[str]]] = []
        token = ""
        while True:
            query: dict[str, Any] = {"limit": _PAGE}
            if sandbox_id:
                query["sandboxID"] = sandbox_id
            if token:
                query["nextToken"] = token
            response = self._call("GET", f"/snapshots?{urlencode(query)}", idempotent=True)
            for item in response.json() or []:
                found.append((str(item["snapshotID"]), [str(n) for n in item.get("names") or []]))
            token = response.headers.get("x-next-token", "")
            if not token:
                return found

    def delete_snapshot(self, snapshot_id: str) -> bool:
        """Delete a snapshot (e2b's snapshots are templates); ``False`` when there was none."""
        response = self._call(
            "DELETE", f"/templates/{snapshot_id}", idempotent=True, ok=(200, 204, 404)
        )
        return response.status_code != 404

    def fork(self, sandbox_id: str, count: int, *, timeout: int | None = None) -> list[ForkCopy]:
        """``count`` copies of a running sandbox, each started or failed on its own."""
        body: dict[str, Any] = {"count": count}
        if timeout is not None:
            body["timeout"] = timeout
        response = self._call("POST", f"/sandboxes/{sandbox_id}/fork", body=body, idempotent=False)
        copies: list[ForkCopy] = []
        for item in response.json() or []:
            error = item.get("error")
            if item.get("sandbox") and not error:
                copies.append(ForkCopy(self._grant(item["sandbox"]), None))
            else:
                detail = error or {}
                copies.append(
                    ForkCopy(None, str(detail.get("message") or "no sandbox"), detail.get("code"))
                )
        return copies

    def probe(self, method: str, path: str, body: Mapping[str, Any] | None) -> httpx.Response:
        """One request answered as it comes (no retries, no error mapping), for discovery."""
        return self._client.request(
            method,
            path,
            content=json.dumps(body).encode() if body is not None else None,
            headers={"X-API-KEY": self._key.get_secret_value(), "Content-Type": "application/json"},
        )
