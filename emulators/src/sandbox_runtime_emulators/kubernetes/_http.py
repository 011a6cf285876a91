"""The HTTP surface: routes, authentication, request bodies, lists, watches and exec.

A stdlib ``ThreadingHTTPServer`` (one thread per connection, HTTP/1.1 keep-alive, TLS
when given a context), which is what the synchronous ``kubernetes`` client (urllib3 and
websocket-client) and kubectl (client-go, HTTP/1.1 when the server offers no ``h2``) need.
Served paths::

    GET    /version /healthz /livez /readyz          (no credentials needed, as by default)
    GET    /api  /apis  /api/v1                      discovery
    GET    /openapi/v3  /openapi/v3/api/v1           what kubectl needs to validate on the server
    GET    /openapi/v3/apis/snapshot.storage.k8s.io/v1   (the same for the snapshot group)
    GET    /api/v1/{pods,namespaces,serviceaccounts,events}   list or watch, all namespaces
    GET    /api/v1/namespaces/{ns}/{pods,serviceaccounts,events}   list or watch
    POST   /api/v1/namespaces                        create a namespace
    GET|DELETE /api/v1/namespaces/{name}             (delete: Terminating, then gone)
    POST   /api/v1/namespaces/{ns}/{pods,serviceaccounts,events}   create
    GET|DELETE /api/v1/namespaces/{ns}/{pods,serviceaccounts,events}/{name}
    GET    /api/v1/namespaces/{ns}/pods/{name}/status
    GET    /api/v1/namespaces/{ns}/pods/{name}/log   (tailLines, follow, sinceSeconds, ...)
    GET|POST /api/v1/namespaces/{ns}/pods/{name}/exec    websocket upgrade
    GET|POST /api/v1/namespaces/{ns}/pods/{name}/attach  websocket upgrade (the container's stdio)
    GET|POST /api/v1/namespaces/{ns}/persistentvolumeclaims     list or watch, create
    GET|DELETE /api/v1/namespaces/{ns}/persistentvolumeclaims/{name}
    GET    /apis/snapshot.storage.k8s.io[/v1]        discovery of the CSI snapshot group
    GET|POST /apis/snapshot.storage.k8s.io/v1/volumesnapshotclasses[/{name}]  (+ DELETE)
    GET|POST /apis/snapshot.storage.k8s.io/v1/namespaces/{ns}/volumesnapshots[/{name}]  (+ DELETE)

Lists take ``labelSelector``, ``fieldSelector``, ``limit`` and ``continue``; with
``watch=true`` they are watch streams (``_streams``).

Random faults (``--fault api:0.1``, ``--fault exec:0.05:kill_pod``), drawn per request by
plane (``exec`` for the exec upgrade, ``api`` for everything else but the health paths):
``rate_limit`` (429 ``TooManyRequests`` with ``Retry-After: 1``, as the API server's
priority and fairness answers), ``unavailable`` (503), ``drop`` (the connection closes without
an answer, the request not handled), ``slow`` (0.2-1 s late), ``drop_answer`` (handled, then
the connection closes without the answer) and ``kill_pod`` (the pod's container is killed, as
a lost node would leave it).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import logging
import math
import re
import socket
import ssl
import sys
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from sandbox_runtime_emulators._random_faults import FaultDraws, RandomFaults
from sandbox_runtime_emulators._random_faults import parse_fault_spec as _parse
from sandbox_runtime_emulators._ratelimit import ServerLimits

from . import _openapi as openapi
from . import _protobuf as protobuf
from ._docker import RuntimeProblem
from ._exec import AttachSession, ExecSession, accept_headers, choose_protocol
from ._objects import ObjectTable
from ._pods import PodStore
from ._status import ApiError, bad_request, method_not_allowed, unauthorized
from ._streams import ChunkedWriter, LogOptions, serve_watch, watch_deadline
from ._tables import table, wants_table
from ._volumes import SNAPSHOT_GROUP, SNAPSHOT_VERSION

__all__ = ["FAULT_KINDS", "EmulatorServer", "parse_fault_spec"]

#: What a random fault of this emulator can be; the first four are recoverable (the default).
FAULT_KINDS = ("rate_limit", "unavailable", "drop", "slow", "drop_answer", "kill_pod")


def parse_fault_spec(text: str) -> RandomFaults:
    """``PLANE:RATE[:KIND,...]`` with planes ``api`` and ``exec``."""
    return _parse(text, planes=("api", "exec"), kinds=FAULT_KINDS, default=FAULT_KINDS[:4])


logger = logging.getLogger("sandbox_runtime_emulators.kubernetes")

SERVER_VERSION = {
    "major": "1",
    "minor": "31",
    "gitVersion": "v1.31.0+sandbox-runtime-emulator",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2024-08-13T00:00:00Z",
    "goVersion": "go1.22.5",
    "compiler": "gc",
    "platform": "linux/amd64",
}
_PUBLIC = ("/version", "/healthz", "/livez", "/readyz")
_POD_PATH = re.compile(r"^/api/v1/namespaces/([^/]+)/pods(?:/([^/]+)(?:/(status|exec|log))?)?/?$")
#: The last path segment of a collection (a GET of one is a ``list``).
_COLLECTIONS = frozenset(
    {
        "pods",
        "namespaces",
        "serviceaccounts",
        "events",
        "persistentvolumeclaims",
        "volumesnapshots",
        "volumesnapshotclasses",
    }
)
#: Every served resource path: namespaced collections, cluster-wide lists, and namespaces.
_PATH = re.compile(
    r"^/api/v1/(?:namespaces/(?P<namespace>[^/]+)/"
    r"(?P<resource>pods|serviceaccounts|events|persistentvolumeclaims)"
    r"|(?P<top>pods|namespaces|serviceaccounts|events|persistentvolumeclaims))"
    r"(?:/(?P<name>[^/]+)(?:/(?P<sub>[a-z]+))?)?$"
)
_SNAPSHOTS = f"/apis/{SNAPSHOT_GROUP}"
#: The resources of the CSI snapshot group (``snapshot.storage.k8s.io/v1``).
_SNAPSHOT_PATH = re.compile(
    rf"^{re.escape(_SNAPSHOTS)}/v1/(?:namespaces/(?P<namespace>[^/]+)/(?P<resource>volumesnapshots)"
    r"|(?P<top>volumesnapshots|volumesnapshotclasses))(?:/(?P<name>[^/]+)(?:/(?P<sub>[a-z]+))?)?$"
)
_SNAPSHOT_GROUP_VERSION = {"groupVersion": SNAPSHOT_VERSION, "version": "v1"}
_SNAPSHOT_API_GROUP = {
    "name": SNAPSHOT_GROUP,
    "versions": [_SNAPSHOT_GROUP_VERSION],
    "preferredVersion": _SNAPSHOT_GROUP_VERSION,
}
#: Request lines up to this long are read: the exec command travels in the query string, and
#: the real server accepts ~1 MiB of request head where http.server stops at 64 KiB.
_MAX_REQUEST_LINE = 1024 * 1024


def _resource(name: str, kind: str, verbs: list[str], namespaced: bool = True) -> dict[str, Any]:
    return {
        "name": name,
        "singularName": "",
        "namespaced": namespaced,
        "kind": kind,
        "verbs": verbs,
    }


_VERBS = ["create", "delete", "get", "list", "watch"]
_API_RESOURCES = {
    "kind": "APIResourceList",
    "groupVersion": "v1",
    "resources": [
        {**_resource("events", "Event", _VERBS), "shortNames": ["ev"], "singularName": "event"},
        {
            **_resource("namespaces", "Namespace", _VERBS, namespaced=False),
            "shortNames": ["ns"],
            "singularName": "namespace",
        },
        {
            **_resource("pods", "Pod", _VERBS),
            "shortNames": ["po"],
            "singularName": "pod",
            "categories": ["all"],
        },
        {
            **_resource("persistentvolumeclaims", "PersistentVolumeClaim", _VERBS),
            "shortNames": ["pvc"],
            "singularName": "persistentvolumeclaim",
        },
        _resource("pods/attach", "PodAttachOptions", ["create", "get"]),
        _resource("pods/exec", "PodExecOptions", ["create", "get"]),
        _resource("pods/log", "Pod", ["get"]),
        _resource("pods/status", "Pod", ["get"]),
        {
            **_resource("serviceaccounts", "ServiceAccount", _VERBS),
            "shortNames": ["sa"],
            "singularName": "serviceaccount",
        },
    ],
}


_SNAPSHOT_RESOURCES = {
    "kind": "APIResourceList",
    "apiVersion": "v1",
    "groupVersion": SNAPSHOT_VERSION,
    "resources": [
        {
            **_resource("volumesnapshotclasses", "VolumeSnapshotClass", _VERBS, namespaced=False),
            "shortNames": ["vsclass", "vsclasses"],
            "singularName": "volumesnapshotclass",
        },
        {
            **_resource("volumesnapshots", "VolumeSnapshot", _VERBS),
            "shortNames": ["vs"],
            "singularName": "volumesnapshot",
        },
    ],
}


class EmulatorServer(ThreadingHTTPServer):
    """The listening server; its handler reads ``store``, ``token`` and ``protocols`` from it."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        store: PodStore,
        token: str | None,
        protocols: tuple[str, ...],
        faults: FaultDraws | None = None,
        ssl_context: ssl.SSLContext | None = None,
        limits: ServerLimits | None = None,
    ) -> None:
        super().__init__(address, _Handler)
        self.store = store
        self.token = token
        self.protocols = protocols
        self.faults = faults or FaultDraws()
        #: Per-client quotas by verb (``*``: all), and latencies by verb: see ``_ratelimit``.
        self.limits = limits if limits is not None else ServerLimits()
        self.ssl_context = ssl_context

    def get_request(self) -> tuple[socket.socket, Any]:
        """Accept, and wrap in TLS when serving HTTPS; the handshake runs on the handler's thread.

        Handshaking here, on the one accepting thread, would let one slow client hold up all.
        """
        sock, address = super().get_request()
        if self.ssl_context is not None:
            sock = self.ssl_context.wrap_socket(
                sock, server_side=True, do_handshake_on_connect=False
            )
        return sock, address

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Log instead of printing; a client that hangs up mid-request is routine."""
        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionError, TimeoutError, ssl.SSLError)):
            logger.debug("client %s went away: %s", client_address, error)
        else:
            logger.exception("error serving %s", client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: EmulatorServer

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s - %s", self.address_string(), format % args)

    def setup(self) -> None:
        """Finish the TLS handshake (on this connection's own thread) before reading."""
        if isinstance(self.request, ssl.SSLSocket):
            self.request.settimeout(30)  # a client that never finishes the handshake
            self.request.do_handshake()
            self.request.settimeout(None)
        super().setup()

    def handle_one_request(self) -> None:
        """The stdlib's, with a longer request line allowed (exec commands are query params)."""
        try:
            self.raw_requestline = self.rfile.readline(_MAX_REQUEST_LINE + 1)
            if len(self.raw_requestline) > _MAX_REQUEST_LINE:
                self.send_error(414)
                return
            if not self.raw_requestline:
                self.close_connection = True
                return
            if not self.parse_request():
                return
            self._dispatch()
            self.wfile.flush()
        except TimeoutError:
            self.close_connection = True

    # -- plumbing ----------------------------------------------------------------------------

    def _reply(
        self,
        code: int,
        body: Any,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        if getattr(self, "_drop_answer", False):
            self.close_connection = True  # handled; the answer is lost on the way
            return
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache, private")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        try:
            if self.headers.get("Content-Type", "").startswith(protobuf.CONTENT_TYPE):
                return protobuf.decode(raw)
            return json.loads(raw)
        except ValueError as exc:
            raise bad_request(f"the body of the request was in an unknown format: {exc}") from exc

    def _authorized(self) -> bool:
        expected = self.server.token
        if expected is None:
            return True
        header = self.headers.get("Authorization", "")
        scheme, _, presented = header.partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(presented.strip().encode(), expected.encode())

    def _fault(self, path: str) -> bool:
        """Apply a random fault to this request; True when it was answered (or dropped)."""
        self._drop_answer = False
        trimmed = path.rstrip("/")
        if trimmed in _PUBLIC:
            return False
        plane = "exec" if trimmed.endswith("/exec") else "api"
        kind = self.server.faults.draw(plane)
        if kind in ("rate_limit", "unavailable", "drop"):
            # Answered (or dropped) before the body was read: it must not be taken for the
            # next request on this connection.
            self.close_connection = self.close_connection or self.command in (
                "POST",
                "PUT",
                "PATCH",
            )
        if kind == "slow":
            time.sleep(self.server.faults.slow_delay())
        elif kind == "rate_limit":
            error = ApiError(429, "TooManyRequests", "injected fault: too many requests")
            self._reply(429, error.body(), headers={"Retry-After": "1"})
            return True
        elif kind == "unavailable":
            error = ApiError(503, "ServiceUnavailable", "injected fault: service unavailable")
            self._reply(503, error.body())
            return True
        elif kind == "drop" or (kind == "drop_answer" and plane == "exec"):
            self.close_connection = True
            return True
        elif kind == "drop_answer":
            self._drop_answer = True
        elif kind == "kill_pod":
            match = _POD_PATH.match(path)
            if match and match.group(2):
                self.server.store.crash(match.group(1), match.group(2))
        return False

    def _limited(self, path: str, query: dict[str, list[str]]) -> bool:
        """Refuse a request over its client's quota (429, ``Retry-After``); True if refused.

        The answer is the API server's to a client over its share: a ``TooManyRequests``
        Status, its ``Retry-After`` in whole seconds (at least 1) in the header and in
        ``details.retryAfterSeconds``.  An admitted request then waits its verb's latency.
        """
        limits = self.server.limits
        if not limits or path.rstrip("/") in _PUBLIC:
            return False
        operation = _verb(self.command, path, query)
        wait = limits.admit(operation, self.headers.get("Authorization", ""))
        if wait is not None:
            seconds = max(1, math.ceil(wait))
            error = ApiError(
                429,
                "TooManyRequests",
                "Too many requests, please try again later.",
                {"retryAfterSeconds": seconds},
            )
            # Answered before the body was read: it must not be taken for the next request.
            self.close_connection = self.close_connection or self.command in (
                "POST",
                "PUT",
                "PATCH",
            )
            self._reply(429, error.body(), headers={"Retry-After": str(seconds)})
            return True
        delay = limits.latency(operation)
        if delay > 0:
            time.sleep(delay)
        return False

    def _dispatch(self) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query, keep_blank_values=True)
        try:
            if url.path.rstrip("/") not in _PUBLIC and not self._authorized():
                raise unauthorized()
            if self._limited(url.path, query):
                return
            if self._fault(url.path):
                return
            self._route(self.command, url.path, query)
        except ApiError as error:
            if error.code >= 500:
                logger.warning("%s %s: %s", self.command, url.path, error.message)
            # A body the handler did not read would be taken for the next request.
            self.close_connection = self.close_connection or self.command in ("POST", "PUT")
            self._reply(error.code, error.body())

    def do_GET(self) -> None:
        """Every verb goes through one dispatcher."""
        self._dispatch()

    do_POST = do_DELETE = do_PUT = do_PATCH = do_HEAD = do_GET

    def _route(self, method: str, path: str, query: dict[str, list[str]]) -> None:
        trimmed = path.rstrip("/") or "/"
        if trimmed == "/version":
            self._reply(200, SERVER_VERSION)
            return
        if trimmed in _PUBLIC:
            self._reply(200, b"ok", "text/plain")
            return
        if trimmed == "/api":
            self._reply(
                200,
                {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [
                        {
                            "clientCIDR": "0.0.0.0/0",
                            "serverAddress": f"127.0.0.1:{self.server.server_port}",
                        }
                    ],
                },
            )
            return
        if trimmed == "/apis":
            self._reply(
                200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_SNAPSHOT_API_GROUP]}
            )
            return
        if trimmed == _SNAPSHOTS:
            self._reply(200, {"kind": "APIGroup", "apiVersion": "v1", **_SNAPSHOT_API_GROUP})
            return
        if trimmed == f"{_SNAPSHOTS}/v1":
            self._reply(200, _SNAPSHOT_RESOURCES)
            return
        snapshot_match = _SNAPSHOT_PATH.match(trimmed)
        if snapshot_match is not None:
            self._snapshot_group(method, snapshot_match, query)
            return
        if trimmed == "/api/v1":
            self._reply(200, _API_RESOURCES)
            return
        if trimmed == "/openapi/v3":
            self._reply(200, openapi.INDEX)
            return
        if trimmed in (openapi.DOCUMENT_PATH, openapi.SNAPSHOT_DOCUMENT_PATH):
            self._reply(200, openapi.document(SERVER_VERSION["gitVersion"], trimmed))
            return
        match = _PATH.match(trimmed)
        if match is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        namespace, resource, name, sub = (
            match.group("namespace"),
            match.group("resource") or match.group("top"),
            match.group("name"),
            match.group("sub"),
        )
        if resource == "pods":
            self._pods(method, namespace, name, sub, query)
        elif resource == "persistentvolumeclaims":
            volumes = self.server.store.volumes
            self._stored(
                method,
                volumes.claims,
                (namespace, name, sub),
                query,
                volumes.create_claim,
                volumes.delete_claim,
            )
        elif resource == "namespaces":
            self._namespaces(method, name, sub, query)
        else:
            self._objects(method, resource, namespace, name, sub, query)

    def _pods(
        self,
        method: str,
        namespace: str | None,
        name: str | None,
        sub: str | None,
        query: dict[str, list[str]],
    ) -> None:
        store = self.server.store
        if name is None:
            if method == "POST" and namespace is not None:
                self._reply(201, store.create(namespace, self._body() or {}))
                return
            self._require(method, "GET")
            matches = store.selector(*_selectors(query))
            self._list_or_watch("pods", "PodList", namespace, query, store.list_pods, matches)
            return
        if namespace is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        if sub is None:
            if method == "DELETE":
                self._reply(200, store.delete(namespace, name, self._grace(query)))
            elif method == "PATCH":
                self._reply(200, store.patch(namespace, name, self._body()))
            else:
                self._require(method, "GET")
                self._reply_object("pods", store.get(namespace, name), query)
        elif sub == "status":
            self._require(method, "GET")
            self._reply(200, store.get(namespace, name))
        elif sub == "log":
            self._require(method, "GET")
            self._log(namespace, name, query)
        elif sub == "exec":
            self._require(method, "GET", "POST")
            self._exec(namespace, name, query)
        elif sub == "attach":
            self._require(method, "GET", "POST")
            self._attach(namespace, name, query)
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})

    def _namespaces(
        self, method: str, name: str | None, sub: str | None, query: dict[str, list[str]]
    ) -> None:
        namespaces = self.server.store.namespaces
        table = namespaces.namespaces
        if sub is not None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        if name is None:
            if method == "POST":
                self._reply(201, namespaces.create(self._body() or {}))
                return
            self._require(method, "GET")
            matches = table.selector(*_selectors(query))
            self._list_or_watch(
                "namespaces",
                "NamespaceList",
                None,
                query,
                lambda _ns, *sel: table.list(None, *sel),
                matches,
            )
        elif method == "DELETE":
            self._body()  # DeleteOptions: nothing in them changes a namespace's termination
            self._reply(200, namespaces.delete(name))
        else:
            self._require(method, "GET")
            self._reply_object("namespaces", table.get(None, name), query)

    def _objects(
        self,
        method: str,
        resource: str,
        namespace: str | None,
        name: str | None,
        sub: str | None,
        query: dict[str, list[str]],
    ) -> None:
        """ServiceAccounts and Events: stored objects with no behaviour of their own."""
        namespaces = self.server.store.namespaces
        table = namespaces.service_accounts if resource == "serviceaccounts" else namespaces.events
        kind = "ServiceAccountList" if resource == "serviceaccounts" else "EventList"
        if sub is not None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        if name is None:
            if method == "POST" and namespace is not None:
                body = self._body() or {}
                if resource == "serviceaccounts":
                    self._reply(201, namespaces.create_service_account(namespace, body))
                else:
                    meta_name = str((body.get("metadata") or {}).get("name") or "")
                    namespaces.require_active(namespace, resource, meta_name)
                    self._reply(201, table.create(namespace, body))
                return
            self._require(method, "GET")
            matches = table.selector(*_selectors(query))
            self._list_or_watch(resource, kind, namespace, query, table.list, matches)
        elif namespace is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        elif method == "DELETE":
            self._body()
            self._reply(200, table.delete(namespace, name))
        else:
            self._require(method, "GET")
            self._reply_object(resource, table.get(namespace, name), query)

    def _snapshot_group(
        self, method: str, match: re.Match[str], query: dict[str, list[str]]
    ) -> None:
        """VolumeSnapshotClasses (cluster-scoped) and VolumeSnapshots."""
        volumes = self.server.store.volumes
        where = (match.group("namespace"), match.group("name"), match.group("sub"))
        if (match.group("resource") or match.group("top")) == "volumesnapshots":
            self._stored(
                method,
                volumes.snapshots,
                where,
                query,
                volumes.create_snapshot,
                volumes.delete_snapshot,
            )
            return
        if where[0] is not None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        self._stored(
            method,
            volumes.classes,
            where,
            query,
            lambda _namespace, body: volumes.create_class(body),
            volumes.classes.delete,
        )

    def _stored(
        self,
        method: str,
        objects: ObjectTable,
        where: tuple[str | None, str | None, str | None],
        query: dict[str, list[str]],
        create: Callable[..., dict[str, Any]],
        delete: Callable[..., dict[str, Any]],
    ) -> None:
        """Create, get, list, watch and delete of a resource kept in an :class:`ObjectTable`.

        ``create(namespace, body)`` and ``delete(namespace, name)`` do the resource's writes
        (``namespace`` is None for a cluster-scoped one).
        """
        namespace, name, sub = where
        resource = objects.resource
        if sub is not None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        if name is None:
            if method == "POST" and (namespace is not None or not objects.namespaced):
                self._reply(201, create(namespace, self._body() or {}))
                return
            self._require(method, "GET")
            matches = objects.selector(*_selectors(query))
            self._list_or_watch(
                resource,
                f"{objects.kind}List",
                namespace,
                query,
                objects.list,
                matches,
                objects.api_version,
            )
        elif namespace is None and objects.namespaced:
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        elif method == "DELETE":
            self._body()  # DeleteOptions: the emulator deletes at once, without finalizers
            self._reply(200, delete(namespace, name))
        else:
            self._require(method, "GET")
            self._reply_object(resource, objects.get(namespace, name), query)

    def _reply_object(
        self, resource: str, obj: dict[str, Any], query: dict[str, list[str]]
    ) -> None:
        """One object, or its one-row ``Table`` when the client asked for server-side printing."""
        if wants_table(self.headers.get("Accept", "")):
            include = query.get("includeObject", ["PartialObjectMetadata"])[0]
            obj = table(resource, [obj], obj["metadata"].get("resourceVersion", ""), include)
        self._reply(200, obj)

    @staticmethod
    def _require(method: str, *allowed: str) -> None:
        if method not in allowed and not (method == "HEAD" and "GET" in allowed):
            raise method_not_allowed()

    def _grace(self, query: dict[str, list[str]]) -> int | None:
        body = self._body() or {}
        value = body.get("gracePeriodSeconds") if isinstance(body, dict) else None
        if value is None and query.get("gracePeriodSeconds"):
            value = query["gracePeriodSeconds"][0]
        try:
            return None if value is None else int(value)
        except ValueError as exc:
            raise bad_request(f"invalid gracePeriodSeconds {value!r}") from exc

    def _list_or_watch(
        self,
        resource: str,
        list_kind: str,
        namespace: str | None,
        query: dict[str, list[str]],
        list_objects: Callable[..., list[dict[str, Any]]],
        matches: Callable[[dict[str, Any]], bool],
        api_version: str = "v1",
    ) -> None:
        """A list (``limit`` / ``continue``), or a watch stream when ``watch`` is true."""
        store = self.server.store
        changes = store.changes
        selectors = _selectors(query)
        include = query.get("includeObject", ["PartialObjectMetadata"])[0]
        render: Callable[[dict[str, Any]], dict[str, Any]] | None = None
        if wants_table(self.headers.get("Accept", "")):

            def render(obj: dict[str, Any]) -> dict[str, Any]:
                return table(resource, [obj], obj["metadata"].get("resourceVersion", ""), include)

        if query.get("watch", ["false"])[0].lower() in ("true", "1"):
            deadline = watch_deadline(query)
            version = query.get("resourceVersion", [""])[0]
            initial: list[dict[str, Any]] = []
            # sendInitialEvents (the watch-list of client-go >= 1.32): the current objects as
            # ADDED, then a bookmark marking their end, whatever the version.
            send_initial = query.get("sendInitialEvents", [""])[0].lower() == "true"
            with changes.lock:
                if version in ("", "0") or send_initial:
                    initial = list_objects(namespace, *selectors)
                    start = changes.version
                else:
                    try:
                        start = int(version)
                    except ValueError as exc:
                        raise bad_request(f"invalid resourceVersion {version!r}") from exc
            serve_watch(
                self,
                changes,
                resource,
                lambda obj: (
                    (namespace is None or obj["metadata"].get("namespace") == namespace)
                    and matches(obj)
                ),
                initial,
                start,
                deadline,
                store.closed,
                initial_end=list_kind.removesuffix("List") if send_initial else None,
                render=render,
            )
            return
        with changes.lock:
            items = list_objects(namespace, *selectors)
            version = str(changes.version)
        metadata: dict[str, Any] = {"resourceVersion": version}
        start = _decode_continue(query.get("continue", [""])[0])
        limit = int(query.get("limit", ["0"])[0] or 0)
        total = len(items)
        items = items[start:]
        if limit > 0 and len(items) > limit:
            items = items[:limit]
            token = json.dumps({"offset": start + limit}).encode()
            metadata["continue"] = base64.urlsafe_b64encode(token).decode()
            metadata["remainingItemCount"] = total - start - limit
        if render is not None:
            printed = table(resource, items, version, include)
            printed["metadata"] = metadata
            self._reply(200, printed)
            return
        for item in items:
            item.pop("apiVersion", None)
            item.pop("kind", None)
        self._reply(
            200,
            {"kind": list_kind, "apiVersion": api_version, "metadata": metadata, "items": items},
        )

    def _log(self, namespace: str, name: str, query: dict[str, list[str]]) -> None:
        store = self.server.store
        record = store.record(namespace, name)
        containers = [c["name"] for c in record.obj["spec"]["containers"]]
        container = query.get("container", [""])[0] or containers[0]
        if container not in containers:
            raise bad_request(f"container {container} is not valid for pod {name}")
        options = LogOptions(query)
        if options.previous:
            raise bad_request(
                f'previous terminated container "{container}" in pod "{name}" not found'
            )
        if record.container_id is None:
            raise bad_request(
                f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating'
            )
        api = store.runtime.api
        if not options.follow:
            logs = api.logs(record.container_id, **options.docker_arguments())
            self._reply(200, b"".join(options.limit([bytes(logs)])), "text/plain")
            return
        stream = api.logs(
            record.container_id, stream=True, follow=True, **options.docker_arguments()
        )
        writer = ChunkedWriter(self, "text/plain")
        try:
            for chunk in options.limit(stream):
                writer.write(chunk)
            writer.end()
        except OSError:
            self.close_connection = True
        finally:
            stream.close()

    # -- exec ----------------------------------------------------------------------------------

    def _exec(self, namespace: str, name: str, query: dict[str, list[str]]) -> None:
        argv = query.get("command", [])
        if not argv:
            raise bad_request("you must specify at least 1 command")
        container_id, key, protocol = self._upgradable(namespace, name, query)
        stdin, stdout, stderr, tty = (_flag(query, f) for f in ("stdin", "stdout", "stderr", "tty"))
        store = self.server.store
        try:
            exec_id = store.runtime.exec_create(
                container_id,
                argv,
                stdin=stdin,
                stdout=stdout,
                # With a terminal, stderr is stdout: there is no second stream to ask for.
                stderr=stderr and not tty,
                tty=tty,
            )
        except RuntimeProblem as exc:
            raise bad_request(f"unable to upgrade connection: {exc}") from exc
        self._switch_protocols(key, protocol)
        session = ExecSession(
            self.connection,
            self.rfile,
            protocol,
            store.runtime,
            exec_id,
            argv,
            stdin=stdin,
            tty=tty,
        )
        session.run()

    def _attach(self, namespace: str, name: str, query: dict[str, list[str]]) -> None:
        container_id, key, protocol = self._upgradable(namespace, name, query)
        spec = self.server.store.get(namespace, name)["spec"]["containers"][0]
        stdin = _flag(query, "stdin")
        if stdin and not spec.get("stdin"):
            raise bad_request(
                f"stdin is not enabled for this container ({spec['name']}): set stdin: true"
            )
        tty = _flag(query, "tty") and bool(spec.get("tty"))
        self._switch_protocols(key, protocol)
        AttachSession(
            self.connection,
            self.rfile,
            protocol,
            self.server.store.runtime,
            container_id,
            stdin=stdin,
            stdout=_flag(query, "stdout"),
            stderr=_flag(query, "stderr") and not tty,
            tty=tty,
        ).run()

    def _upgradable(
        self, namespace: str, name: str, query: dict[str, list[str]]
    ) -> tuple[str, str, str]:
        """Check an exec or attach upgrade: (container id, websocket key, subprotocol)."""
        store = self.server.store
        record = store.record(namespace, name)
        pod = store.get(namespace, name)
        containers = [c["name"] for c in pod["spec"]["containers"]]
        container = query.get("container", [""])[0] or containers[0]
        if container not in containers:
            raise bad_request(f"container {container} is not valid for pod {name}")
        if self.headers.get("Upgrade", "").lower() != "websocket":
            raise bad_request("Upgrade request required")
        key = self.headers.get("Sec-WebSocket-Key", "")
        try:
            if len(base64.b64decode(key, validate=True)) != 16:
                raise ValueError
        except (ValueError, binascii.Error) as exc:
            raise bad_request("invalid Sec-WebSocket-Key") from exc
        offered = [
            part.strip()
            for header in self.headers.get_all("Sec-WebSocket-Protocol") or []
            for part in header.split(",")
            if part.strip()
        ]
        protocol = choose_protocol(offered, self.server.protocols)
        if protocol is None:
            raise bad_request(
                f"requested protocol(s) are not supported: {offered}; supports "
                f"{list(self.server.protocols)}"
            )
        if not any(_flag(query, stream) for stream in ("stdin", "stdout", "stderr")):
            raise bad_request("you must specify at least 1 of stdin, stdout, stderr")
        container_id = record.container_id
        if pod["status"].get("phase") != "Running" or container_id is None:
            raise bad_request(f'unable to upgrade connection: container not found ("{container}")')
        return container_id, key, protocol

    def _switch_protocols(self, key: str, protocol: str) -> None:
        """Answer ``101``: from here on the connection is the websocket's."""
        self.send_response(101, "Switching Protocols")
        for header, value in accept_headers(key, protocol):
            self.send_header(header, value)
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True


def _verb(method: str, path: str, query: dict[str, list[str]]) -> str:
    """The Kubernetes verb of a request, as quotas and latencies name it.

    ``exec``, ``attach`` and ``log`` for those subresources; ``get`` of a collection is
    ``list`` (``watch`` with ``watch=true``); otherwise the verb the method maps to.
    """
    last = path.rstrip("/").rsplit("/", 1)[-1]
    if last in ("exec", "attach", "log"):
        return last
    if method in ("GET", "HEAD"):
        if _flag(query, "watch"):
            return "watch"
        return "list" if last in _COLLECTIONS else "get"
    return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(
        method, method.lower()
    )


def _flag(query: dict[str, list[str]], name: str) -> bool:
    """A boolean query parameter (``true`` or ``1``)."""
    return query.get(name, ["false"])[0].lower() in ("true", "1")


def _selectors(query: dict[str, list[str]]) -> tuple[str, str]:
    """(labelSelector, fieldSelector) of a list or watch query."""
    return query.get("labelSelector", [""])[0], query.get("fieldSelector", [""])[0]


def _decode_continue(token: str) -> int:
    if not token:
        return 0
    try:
        return int(json.loads(base64.urlsafe_b64decode(token.encode()))["offset"])
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise ApiError(410, "Expired", "the provided continue parameter is too old") from exc
