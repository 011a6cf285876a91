"""Which of e2b's checkpoint routes a service has, found out by asking it, once per process.

e2b itself, self-hosted e2b of any age, AGS, ROCK and OpenKruise speak the same create / kill
/ envd protocol, but not all serve pause, snapshots or fork.  A backend must not guess that
from a host name, so each route is probed once with a sandbox id that cannot exist:

* a service **with** the route runs its handler, which answers "sandbox not found" (404 with
  a JSON error body naming the sandbox) or a validation error (400, 422);
* a service **without** it answers from its router: 405 or 501, or a 404 whose body is
  not the API's JSON error, or one that says no route / operation matched (the messages of
  Go's and kin-openapi's routers, and of the AGS emulator with its routes off).

``GET /snapshots?limit=1`` answers 200 where snapshots can be listed.  A probe that fails
for another reason (the key refused, the service unreachable, a 5xx) raises and is not
cached, so a later call asks again.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from sandbox_runtime.errors import BackendUnavailableError

from .e2b_control import E2bApi

__all__ = ["ServiceFeatures", "discover", "forget_discoveries", "route_answered"]

#: Phrases of routers that found no handler (Go's net/http and gin, kin-openapi, the emulator).
_NO_ROUTE = ("no matching operation", "no route", "404 page not found", "not implemented")


@dataclass(frozen=True, slots=True)
class ServiceFeatures:
    """The checkpoint routes one e2b-protocol service serves."""

    snapshots: bool
    """``POST /sandboxes/{id}/snapshots``, ``GET /snapshots`` and ``DELETE /templates/{id}``."""
    fork: bool
    """``POST /sandboxes/{id}/fork``."""
    pause: bool
    """``POST /sandboxes/{id}/pause`` and resuming through ``connect``."""


_lock = threading.Lock()
_known: dict[str, ServiceFeatures] = {}


def route_answered(response: httpx.Response, probe_id: str) -> bool:
    """Whether a probe's answer came from a handler (the route exists) or from a router."""
    status = response.status_code
    if status in (401, 403):
        raise BackendUnavailableError(
            f"the e2b API key was refused while probing {response.request.url.path}"
        )
    if status >= 500 and status != 501:
        raise BackendUnavailableError(
            f"the e2b API answered {status} while probing {response.request.url.path}"
        )
    if status in (405, 501):
        return False
    if status != 404:
        return True  # 2xx, 400, 409, 422...: a handler looked at the request
    try:
        body = response.json()
    except ValueError:
        return False  # a router's plain-text 404
    message = str(body.get("message", "")) if isinstance(body, dict) else ""
    if not message or any(phrase in message.lower() for phrase in _NO_ROUTE):
        return False
    return probe_id in message or "not found" in message.lower()


def _probe(api: E2bApi) -> ServiceFeatures:
    probe_id = f"srt-probe-{uuid.uuid4().hex[:12]}"
    try:
        listing = api.probe("GET", "/snapshots?limit=1", None)
        snapshot = api.probe("POST", f"/sandboxes/{probe_id}/snapshots", {})
        fork = api.probe("POST", f"/sandboxes/{probe_id}/fork", {"count": 1})
        pause = api.probe("POST", f"/sandboxes/{probe_id}/pause", {})
    except httpx.HTTPError as exc:
        raise BackendUnavailableError(f"cannot reach the e2b API at {api.api_url}: {exc}") from exc
    listed = listing.status_code == 200
    route_answered(listing, probe_id)  # raises on a refused key or a failing service
    return ServiceFeatures(
        snapshots=listed and route_answered(snapshot, probe_id),
        fork=route_answered(fork, probe_id),
        pause=route_answered(pause, probe_id),
    )


def discover(api_url: str, make_api: Callable[[], E2bApi]) -> ServiceFeatures:
    """The routes the service at ``api_url`` serves; probed on first use, then cached.

    ``make_api`` is called only when the service was not asked yet in this process.
    """
    key = api_url.rstrip("/")
    with _lock:
        known = _known.get(key)
    if known is not None:
        return known
    api = make_api()
    try:
        found = _probe(api)
    finally:
        api.close()
    with _lock:
        return _known.setdefault(key, found)


def forget_discoveries() -> None:
    """Forget every cached answer (a test that restarts a service with other routes)."""
    with _lock:
        _known.clear()
