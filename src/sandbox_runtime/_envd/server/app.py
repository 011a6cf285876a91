"""The envd HTTP and Connect API as a plain ASGI application (standard library only).

Routes: ``GET /health``, ``POST /init``, ``GET /envs``, ``GET|POST /files`` and the
``process.Process`` and ``filesystem.Filesystem`` services over Connect+JSON.  Access follows
envd's rules: with an access token set, every route but ``/health`` and ``/files`` needs
``X-Access-Token`` (``/init`` too, once a token is set); ``/files`` accepts the header or a
valid signature.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hmac
import json
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

from . import _frames
from ._connect import ConnectError, b64, end_of_stream, envelope, parse_envelopes, unb64
from ._files import Files, parse_multipart
from ._http import Message, Scope, request_body
from ._process import ProcessManager
from ._users import UnknownUser, User, requested_name
from ._users import current as current_user
from ._users import lookup as lookup_user
from ._watch import WatcherRegistry, open_watch

__all__ = ["ENVD_VERSION", "EnvdApp"]

#: The envd version this emulator answers like (stdin flag, CloseStdin, octet-stream upload).
ENVD_VERSION = "0.5.7"

Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
# How long a process stream holds its first frames (the start) for what follows, then any
# later ones, and how much it holds at most; see EnvdApp._process_stream.
_FIRST_HOLD = 0.005
_HOLD = 0.001
_FLUSH_BYTES = 256 * 1024
_UNAUTHORIZED = "unauthorized access, please provide a valid access token or method signing"


class _Request:
    def __init__(self, scope: Scope, body: bytes) -> None:
        self.method: str = scope["method"]
        self.path: str = scope["path"]
        self.query = {k: v[-1] for k, v in parse_qs(scope["query_string"].decode()).items()}
        self.headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        self.body = body


def _wants_gzip(accept_encoding: str) -> bool:
    """Whether envd answers a download gzip-encoded, as its ``parseAcceptEncoding`` decides.

    By falling quality: ``identity`` wins as soon as it comes, ``gzip`` (the one encoding
    envd has) is chosen when it comes first, and ``*`` means identity unless identity was
    refused (``identity;q=0``, or ``*;q=0`` without identity accepted).
    """
    offers: list[tuple[float, str]] = []
    for item in accept_encoding.split(","):
        name, _, params = item.strip().partition(";")
        quality = 1.0
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key.lower() == "q":
                with contextlib.suppress(ValueError):
                    quality = float(value)
        if name.strip():
            offers.append((quality, name.strip().lower()))
    identity_refused = any(n == "identity" and q == 0 for q, n in offers) or (
        any(n == "*" and q == 0 for q, n in offers)
        and not any(n == "identity" and q > 0 for q, n in offers)
    )
    for quality, name in sorted(offers, key=lambda offer: -offer[0]):
        if quality == 0:
            continue
        if name == "identity":
            return False
        if name == "*":
            return identity_refused
        if name == "gzip":
            return True
    return False


async def _respond(
    send: Send,
    status: int,
    body: bytes = b"",
    content_type: str = "application/json",
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    headers = [(b"content-length", str(len(body)).encode()), *(extra or [])]
    if body or status != 204:
        headers.append((b"content-type", content_type.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _json(send: Send, status: int, payload: Any) -> None:
    await _respond(send, status, json.dumps(payload).encode())


def _connect_event(event: dict[str, Any]) -> bytes:
    """One process event as a Connect envelope (output as proto3 JSON bytes: base64)."""
    if "data" in event:
        event = {"data": {name: b64(chunk) for name, chunk in event["data"].items()}}
    return envelope({"event": event})


def _frames_close(error: ConnectError | None = None) -> bytes:
    return _frames.close(error.body() if error else None)


def _signature(path: str, operation: str, user: str, token: str, expiration: int | None) -> str:
    raw = f"{path}:{operation}:{user}:{token}"
    if expiration is not None:
        raw += f":{expiration}"
    import hashlib  # here, as gzip below: not needed to start, and the agent's start counts

    digest = hashlib.sha256(raw.encode()).digest()
    return "v1_" + base64.b64encode(digest).decode().rstrip("=")


class EnvdApp:
    """One envd: a process manager and a file service behind the envd routes."""

    def __init__(
        self,
        *,
        root: str = "/",
        workdir: str = "/",
        keep_env: tuple[str, ...] = (),
        exec_like: bool = False,
    ) -> None:
        self.access_token: str | None = None
        # exec_like (the container backends' in-sandbox agent): processes run as under
        # ``docker exec``, with envd's own environment (the container's) and their own
        # session; else as under the real envd, with its small login environment plus the
        # variables named in keep_env.
        self._exec_like = exec_like
        self.env_vars: dict[str, str] = {
            name: os.environ[name] for name in keep_env if name in os.environ
        }
        # The agent's own environment never changes once it serves, and reading os.environ
        # decodes every name and value: read once, not per command.
        self._own_environ = dict(os.environ) if exec_like else {}
        self.files = Files(root=root, workdir=workdir)
        self.processes = ProcessManager(self.files.host, self._process_env, exec_like=exec_like)
        self.watchers = WatcherRegistry()
        #: Who requests act as unless they name a user (``/init``'s ``defaultUser``).
        self.default_user: User = current_user()

    def _process_env(self) -> dict[str, str]:
        if self._exec_like:
            return {**self._own_environ, **self.env_vars}
        env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", "/root"),
            "USER": os.environ.get("USER", "root"),
            "LOGNAME": os.environ.get("LOGNAME", os.environ.get("USER", "root")),
        }
        env.update(self.env_vars)
        return env

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                pass
            return
        body = await request_body(receive)
        request = _Request(scope, body)
        try:
            await self._route(request, receive, send)
        except ConnectError as exc:
            await _json(send, exc.status, exc.body())

    def _authorized(self, request: _Request) -> bool:
        if self.access_token is None:
            return True
        given = request.headers.get("x-access-token", "")
        return hmac.compare_digest(given.encode(), self.access_token.encode())

    def _file_access(self, request: _Request, operation: str) -> bool:
        if self._authorized(request):
            return True
        assert self.access_token is not None
        signature = request.query.get("signature")
        if not signature:
            return False
        expiration_text = request.query.get("signature_expiration")
        expiration = int(expiration_text) if expiration_text else None
        if expiration is not None and expiration < time.time():
            return False
        expected = _signature(
            request.query.get("path", ""),
            operation,
            request.query.get("username", ""),
            self.access_token,
            expiration,
        )
        return hmac.compare_digest(signature.encode(), expected.encode())

    async def _route(self, request: _Request, receive: Receive, send: Send) -> None:
        path, method = request.path, request.method
        if path == "/health" and method == "GET":
            await _respond(send, 204)
            return
        if path == "/init" and method == "POST":
            # Open until a token is set (the orchestrator's first call sets it); after that
            # only its holder may change it, or anyone who reaches the port could take over.
            if self.access_token and not self._authorized(request):
                await _json(send, 401, {"code": 401, "message": _UNAUTHORIZED})
                return
            self._init(json.loads(request.body or b"{}"))
            await _respond(send, 204)
            return
        if path == "/files":
            operation = "read" if method == "GET" else "write"
            if not self._file_access(request, operation):
                await _json(send, 401, {"code": 401, "message": _UNAUTHORIZED})
                return
            if method == "GET":
                await self._get_file(request, send)
            elif method == "POST":
                await self._post_files(request, send)
            else:
                await _json(send, 405, {"code": 405, "message": "method not allowed"})
            return
        if not self._authorized(request):
            await _json(send, 401, {"code": 401, "message": _UNAUTHORIZED})
            return
        if path == "/envs" and method == "GET":
            await _json(send, 200, self.env_vars)
            return
        service, _, rpc = path.lstrip("/").partition("/")
        if method == "POST" and service == "process.Process":
            await self._process_rpc(rpc, request, send)
            return
        if method == "POST" and service == "filesystem.Filesystem":
            await self._filesystem_rpc(rpc, request, send)
            return
        await _json(send, 404, {"code": 404, "message": f"no route for {method} {path}"})

    def _init(self, body: dict[str, Any]) -> None:
        """``POST /init``: what the orchestrator sets when a sandbox starts."""
        self.env_vars.update({str(k): str(v) for k, v in (body.get("envVars") or {}).items()})
        token = body.get("accessToken")
        if token:
            self.access_token = str(token)
        if body.get("defaultWorkdir"):
            self.files.workdir = str(body["defaultWorkdir"])
        if body.get("defaultUser"):
            # The emulator asks for E2B's ``user``; an image without that account keeps the
            # user envd runs as (root), as envd's built-in default is.
            with contextlib.suppress(UnknownUser):
                self.default_user = lookup_user(str(body["defaultUser"]))

    def _user(self, request: _Request) -> User:
        """The user a request acts as; an unknown name is ``unauthenticated`` (401)."""
        name = requested_name(request.headers, request.query)
        if name is None:
            return self.default_user
        try:
            return lookup_user(name)
        except UnknownUser as exc:
            raise ConnectError("unauthenticated", str(exc)) from exc

    # -- /files ----------------------------------------------------------------------------

    async def _get_file(self, request: _Request, send: Send) -> None:
        path = request.query.get("path")
        if not path:
            raise ConnectError("invalid_argument", "path is required")
        try:
            data = self.files.read(path, self._user(request))
        except ConnectError as exc:
            await _json(send, exc.status, {"code": exc.status, "message": exc.message})
            return
        headers = [(b"vary", b"Accept-Encoding")]
        if _wants_gzip(request.headers.get("accept-encoding", "")):
            # envd >= 0.5.7 answers gzip when the client accepts it (the SDK's gzip=True).
            import gzip

            data = gzip.compress(data, compresslevel=6)  # Go's default level
            headers.append((b"content-encoding", b"gzip"))
        await _respond(send, 200, data, "application/octet-stream", headers)

    async def _post_files(self, request: _Request, send: Send) -> None:
        content_type = request.headers.get("content-type", "")
        body = request.body
        if request.headers.get("content-encoding", "").lower() == "gzip":
            import gzip

            body = gzip.decompress(body)
        path = request.query.get("path")
        if content_type.startswith("multipart/form-data"):
            parts = parse_multipart(body, content_type)
            uploads = [(path if path and len(parts) == 1 else name, data) for name, data in parts]
        elif content_type.startswith("application/octet-stream"):
            uploads = [(path, body)]
        else:
            await _json(send, 400, {"code": 400, "message": f"unsupported type {content_type}"})
            return
        try:
            user = self._user(request)
        except ConnectError as exc:
            await _json(send, exc.status, {"code": exc.status, "message": exc.message})
            return
        written = []
        seen: set[str] = set()
        for target, data in uploads:
            if not target:
                await _json(send, 400, {"code": 400, "message": "path is required"})
                return
            if target in seen:
                await _json(send, 400, {"code": 400, "message": f"duplicate path '{target}'"})
                return
            seen.add(target)
            try:
                written.append(self.files.write(target, data, user))
            except ConnectError as exc:
                await _json(send, exc.status, {"code": exc.status, "message": exc.message})
                return
            except OSError as exc:
                status = 507 if exc.errno == 28 else 500
                await _json(send, status, {"code": status, "message": str(exc)})
                return
        await _json(send, 200, written)

    # -- process.Process -------------------------------------------------------------------

    async def _process_rpc(self, rpc: str, request: _Request, send: Send) -> None:
        if rpc in ("Start", "Connect"):
            await self._process_stream(rpc, request, send)
            return
        if rpc == "StreamInput":
            await self._stream_input(request, send)
            return
        body = json.loads(request.body or b"{}")
        result: dict[str, Any] = {}
        if rpc == "List":
            result = {"processes": self.processes.list()}
        elif rpc == "SendInput":
            given = body.get("input") or {}
            pty = "pty" in given
            data = given.get("pty" if pty else "stdin") or ""
            await self.processes.send_input(body.get("process") or {}, unb64(data), pty=pty)
        elif rpc == "CloseStdin":
            await self.processes.close_stdin(body.get("process") or {})
        elif rpc == "SendSignal":
            await self.processes.send_signal(body.get("process") or {}, body.get("signal"))
        elif rpc == "Update":
            if body.get("pty"):
                self.processes.resize(body.get("process") or {}, body["pty"])
        else:
            raise ConnectError("unimplemented", f"process.Process/{rpc} is not implemented")
        await _json(send, 200, result)

    async def _process_stream(self, rpc: str, request: _Request, send: Send) -> None:
        """``Start`` / ``Connect``: the process's events as Connect envelopes, or as frames.

        Frames (:mod:`._frames`) when the client asked for them, else Connect.  Events that
        are already queued when the stream wakes go out in one write, and a frames stream
        waits a moment for more (see ``_FIRST_HOLD``): an ``echo`` whose start, output, end
        and end of stream then leave together costs the link one segment, not four.
        """
        frames = request.headers.get(_frames.HEADER) == _frames.VERSION
        encode = _frames.encode_event if frames else _connect_event
        closing = _frames_close if frames else end_of_stream
        content_type = _frames.CONTENT_TYPE if frames else "application/connect+json"
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", content_type.encode())],
            }
        )

        async def emit(data: bytes, more: bool = True) -> None:
            await send({"type": "http.response.body", "body": data, "more_body": more})

        try:
            messages = parse_envelopes(request.body)
            message = messages[0][1] if messages else {}
            timeout_ms = request.headers.get("connect-timeout-ms")
            timeout = int(timeout_ms) / 1000 if timeout_ms else None
            if rpc == "Start":
                user = self._user(request)
                proc, queue = await self.processes.start(message, timeout=timeout, user=user)
            else:
                proc = self.processes.find(message.get("process") or {})
                queue = proc.subscribe()
        except ConnectError as exc:
            await emit(closing(exc), more=False)
            return
        interval_text = request.headers.get("keepalive-ping-interval")
        interval = float(interval_text) if interval_text else None
        # Frames are held back briefly (at most hold seconds, up to _FLUSH_BYTES) so that what
        # comes close together leaves in one write: each write is a segment on the link and a
        # wakeup of the client, and a short command's start, output and end fit in one.
        hold = (_FIRST_HOLD, _HOLD) if frames else (0.0, 0.0)
        error: ConnectError | None = None
        loop = asyncio.get_running_loop()
        pending = [encode({"start": {"pid": proc.pid}})]
        size, due = len(pending[0]), loop.time() + hold[0]
        try:
            while True:
                if queue.empty():
                    if pending and (size >= _FLUSH_BYTES or loop.time() >= due):
                        await emit(b"".join(pending))
                        pending, size = [], 0
                    wait = max(0.0, due - loop.time()) if pending else interval
                    if not await queue.wait(wait):
                        if not pending:  # idle for a whole interval
                            await emit(encode({"keepalive": {}}))
                        continue
                event = queue.take()
                if event is None or "error" in event:
                    error = None if event is None else event["error"]
                    pending.append(closing(error))
                    break
                if not pending:
                    due = loop.time() + hold[1]
                piece = encode(event)
                pending.append(piece)
                size += len(piece)
            await emit(b"".join(pending), more=False)
        except (ConnectionError, OSError):
            pass  # the client went away; the process keeps running, as in envd
        finally:
            proc.unsubscribe(queue)

    async def _stream_input(self, request: _Request, send: Send) -> None:
        selector: dict[str, Any] = {}
        error: ConnectError | None = None
        try:
            for _flags, message in parse_envelopes(request.body):
                event = message.get("event", message)
                if "start" in event:
                    selector = event["start"].get("process") or {}
                elif "data" in event:
                    given = event["data"].get("input") or {}
                    for kind in ("stdin", "pty"):
                        if kind in given:
                            await self.processes.send_input(
                                selector, unb64(given[kind]), pty=kind == "pty"
                            )
        except ConnectError as exc:
            error = exc
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/connect+json")],
            }
        )
        payload = b"" if error else envelope({})
        await send({"type": "http.response.body", "body": payload + end_of_stream(error)})

    # -- filesystem.Filesystem -------------------------------------------------------------

    async def _filesystem_rpc(self, rpc: str, request: _Request, send: Send) -> None:
        if rpc == "WatchDir":
            await self._watch_stream(request, send)
            return
        body = json.loads(request.body or b"{}")
        files = self.files
        user = self._user(request)
        try:
            if rpc == "Stat":
                result: dict[str, Any] = {"entry": files.entry(body.get("path", ""), user)}
            elif rpc == "MakeDir":
                result = {"entry": files.make_dir(body.get("path", ""), user)}
            elif rpc == "Move":
                result = {"entry": files.move(body.get("source", ""), body["destination"], user)}
            elif rpc == "ListDir":
                depth = int(body.get("depth") or 1)
                result = {"entries": files.list_dir(body.get("path", ""), depth, user)}
            elif rpc == "Remove":
                files.remove(body.get("path", ""), user)
                result = {}
            elif rpc == "CreateWatcher":
                path = body.get("path", "")
                watcher_id = self.watchers.create(
                    files.host(path, user),
                    files.sandbox_path(path, user),
                    bool(body.get("recursive")),
                )
                result = {"watcherId": watcher_id}
            elif rpc == "GetWatcherEvents":
                result = {"events": self.watchers.take(str(body.get("watcherId", "")))}
            elif rpc == "RemoveWatcher":
                self.watchers.remove(str(body.get("watcherId", "")))
                result = {}
            else:
                raise ConnectError(
                    "unimplemented", f"filesystem.Filesystem/{rpc} is not implemented"
                )
        except PermissionError as exc:
            raise ConnectError("permission_denied", str(exc)) from exc
        await _json(send, 200, result)

    async def _watch_stream(self, request: _Request, send: Send) -> None:
        """``WatchDir``: a start event, then one event per change, keepalives in between."""
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/connect+json")],
            }
        )

        async def emit(data: bytes, more: bool = True) -> None:
            await send({"type": "http.response.body", "body": data, "more_body": more})

        queue: asyncio.Queue[dict[str, str]] = asyncio.Queue()
        try:
            messages = parse_envelopes(request.body)
            message = messages[0][1] if messages else {}
            user = self._user(request)
            path = str(message.get("path", ""))
            watch = open_watch(
                self.files.host(path, user),
                self.files.sandbox_path(path, user),
                bool(message.get("recursive")),
                queue.put_nowait,
            )
        except ConnectError as exc:
            await emit(end_of_stream(exc), more=False)
            return
        interval_text = request.headers.get("keepalive-ping-interval")
        interval = float(interval_text) if interval_text else None
        try:
            await emit(envelope({"start": {}}))
            while True:
                try:
                    event = await asyncio.wait_for(queue.get(), interval)
                except asyncio.TimeoutError:
                    await emit(envelope({"keepalive": {}}))
                    continue
                await emit(envelope({"filesystem": event}))
        except (ConnectionError, OSError):
            pass  # the client stopped watching
        finally:
            watch.close()

    def shutdown(self) -> None:
        """Kill every process this envd started and stop its watchers."""
        with contextlib.suppress(Exception):
            self.processes.kill_all()
        with contextlib.suppress(Exception):
            self.watchers.close_all()
