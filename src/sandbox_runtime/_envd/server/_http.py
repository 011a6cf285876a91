"""A small HTTP/1.1 server for ASGI applications, written on the standard library only.

The envd emulator has to run inside containers that have ``python3`` and nothing else (no
uvicorn, no pip), so it carries its own server.  It implements what the e2b SDK and our
gateway send: keep-alive connections, ``Content-Length`` and chunked request bodies, and
streamed responses (chunked when the application gives no length), one request at a time per
connection.  It is not a general-purpose web server and does not try to be one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import unquote

__all__ = ["ASGIApp", "request_body", "serve"]

logger = logging.getLogger("sandbox_runtime.envd.http")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[
    [Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]],
    Awaitable[None],
]

_MAX_HEADER_BYTES = 64 * 1024
# The reader's buffer, and so how much of a request body one wakeup can take in: a small one
# turns a 1 MB upload into dozens of pause-and-resume cycles of the transport.
_STREAM_LIMIT = 4 * 1024 * 1024
# Bodies smaller than this go out joined with their head (and chunk framing) in one write,
# one segment; larger ones are written apart, so they are never copied.
_JOIN_BELOW = 64 * 1024
#: Connections the kernel queues before the accept loop takes them (clamped to
#: net.core.somaxconn).  asyncio's default of 100 reset 66 of 500 background commands
#: started at once by one client, each on a connection of its own.
_BACKLOG = 4096
_REASONS = {
    200: "OK",
    201: "Created",
    204: "No Content",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    413: "Payload Too Large",
    415: "Unsupported Media Type",
    429: "Too Many Requests",
    500: "Internal Server Error",
    501: "Not Implemented",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
    507: "Insufficient Storage",
}


class _BadRequest(Exception):
    pass


async def _read_head(reader: asyncio.StreamReader) -> bytes | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial.strip():
            raise _BadRequest("truncated request head") from exc
        return None
    except asyncio.LimitOverrunError as exc:
        raise _BadRequest("request head too large") from exc
    if len(head) > _MAX_HEADER_BYTES:
        raise _BadRequest("request head too large")
    return head


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if headers.get("transfer-encoding", "").lower() == "chunked":
        parts: list[bytes] = []
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                # Trailers (rare) end with an empty line.
                while (await reader.readuntil(b"\r\n")) != b"\r\n":
                    pass
                return b"".join(parts)
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
    length = int(headers.get("content-length", "0") or "0")
    return await reader.readexactly(length) if length else b""


class _Connection:
    """One client connection: parse requests, run the app, frame its responses."""

    def __init__(
        self, app: ASGIApp, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.app = app
        self.reader = reader
        self.writer = writer

    async def run(self) -> None:
        try:
            while await self._one_request():
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except _BadRequest as exc:
            with contextlib.suppress(ConnectionError):
                self.writer.write(
                    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                )
                logger.debug("bad request: %s", exc)
        finally:
            with contextlib.suppress(Exception):
                self.writer.close()

    async def _one_request(self) -> bool:
        """Serve the next request; whether the connection stays open for another."""
        head = await _read_head(self.reader)
        if head is None:
            return False
        method, target, version, raw_headers, headers = _parse_head(head)
        body = await _read_body(self.reader, headers)
        path, _, query = target.partition("?")
        scope: Scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": version.removeprefix("HTTP/"),
            "method": method.upper(),
            "scheme": "http",
            "path": unquote(path),
            "raw_path": path.encode("latin-1"),
            "query_string": query.encode("latin-1"),
            "headers": raw_headers,
            "client": self.writer.get_extra_info("peername"),
            "server": self.writer.get_extra_info("sockname"),
        }
        keep_alive = headers.get("connection", "").lower() != "close" and version == "HTTP/1.1"
        exchange = _Exchange(self.writer, body, keep_alive)
        try:
            await self.app(scope, exchange.receive, exchange.send)
        except ConnectionError:
            return False
        except Exception:
            logger.exception("application error on %s %s", method, path)
            return await self._answer_failure(exchange)
        finally:
            exchange.disconnected.set()
        if not exchange.done:
            return False
        return keep_alive and not exchange.broken

    async def _answer_failure(self, exchange: _Exchange) -> bool:
        """After an application error: a 500 if no response began; whether to keep going."""
        if exchange.started:
            return False  # half a response is out: only closing the connection ends it
        self.writer.write(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n")
        await self.writer.drain()
        return exchange.keep_alive


def _parse_head(
    head: bytes,
) -> tuple[str, str, str, list[tuple[bytes, bytes]], dict[str, str]]:
    """Method, target, version, the ASGI header list and a lowercase name -> value map."""
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, target, version = lines[0].split(" ", 2)
    except ValueError as exc:
        raise _BadRequest(f"bad request line {lines[0]!r}") from exc
    raw_headers: list[tuple[bytes, bytes]] = []
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, _, value = line.partition(":")
        raw_headers.append((name.strip().lower().encode("latin-1"), value.strip().encode()))
        headers[name.strip().lower()] = value.strip()
    return method, target, version, raw_headers, headers


class _Exchange:
    """One request's ASGI channel: ``receive`` gives its body, ``send`` frames the response.

    Its flags tell the connection how the response went: ``started`` (a head is out),
    ``done`` (the last body message was sent), ``broken`` (a write failed).
    """

    __slots__ = (
        "body",
        "body_sent",
        "broken",
        "chunked",
        "disconnected",
        "done",
        "head",
        "keep_alive",
        "started",
        "writer",
    )

    def __init__(self, writer: asyncio.StreamWriter, body: bytes, keep_alive: bool) -> None:
        self.writer = writer
        self.body = body
        self.keep_alive = keep_alive
        self.disconnected = asyncio.Event()
        self.body_sent = False
        self.head = b""
        self.started = False
        self.chunked = False
        self.done = False
        self.broken = False

    async def receive(self) -> Message:
        """The body (whole, in one message), then a disconnect once the exchange is over."""
        if not self.body_sent:
            self.body_sent = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        # Reading the socket here could swallow the next request on a kept-alive
        # connection, so a disconnect is only noticed when a write fails.
        await self.disconnected.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        """Write a response head or body message (body chunks inline: the hot path)."""
        kind = message["type"]
        if kind == "http.response.start":
            self._write_head(message)
            return
        if kind != "http.response.body":
            return
        data = bytes(message.get("body", b""))
        more = bool(message.get("more_body", False))
        # One write per message, the head held back until the first body: each write is a
        # segment on the wire and a wakeup of the reader at the other end.
        out = [self.head] if self.head else []
        self.head = b""
        if self.chunked:
            if data:
                out += (f"{len(data):x}\r\n".encode(), data, b"\r\n")
            if not more:
                out.append(b"0\r\n\r\n")
        elif data:
            out.append(data)
        if len(out) == 1 or (out and len(data) >= _JOIN_BELOW):
            # A large body is written as it is, after the head: joining them would copy it
            # (a 1 MB file read paid more for that copy than a segment of its own costs).
            for part in out:
                self.writer.write(part)
        elif out:
            self.writer.write(b"".join(out))
        if not more:
            self.done = True
        try:
            await self.writer.drain()
        except ConnectionError:
            self.broken = True
            self.disconnected.set()
            raise

    def _write_head(self, message: Message) -> None:
        """The status line and headers; chunked framing when the app gave no length."""
        status = int(message["status"])
        out_headers = [
            (bytes(k).decode("latin-1"), bytes(v).decode("latin-1"))
            for k, v in message.get("headers", [])
        ]
        names = {k.lower() for k, _ in out_headers}
        if "content-length" not in names and status not in (204, 304):
            out_headers.append(("Transfer-Encoding", "chunked"))
            self.chunked = True
        if not self.keep_alive:
            out_headers.append(("Connection", "close"))
        head_lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
        head_lines += [f"{k}: {v}" for k, v in out_headers]
        self.head = ("\r\n".join(head_lines) + "\r\n\r\n").encode("latin-1")
        self.started = True


async def request_body(receive: Callable[[], Awaitable[Message]]) -> bytes:
    """An ASGI request's whole body, from however many messages it arrives in."""
    parts = []
    while True:
        message = await receive()
        parts.append(bytes(message.get("body", b"")))
        if not message.get("more_body"):
            return b"".join(parts)


async def serve(
    app: ASGIApp,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    sock: socket.socket | None = None,
    on_ready: Callable[[int], None] | None = None,
) -> None:
    """Serve ``app`` on ``host:port`` (or the listening ``sock``) until cancelled.

    ``on_ready`` gets the bound port.
    """
    connections: set[asyncio.Task[None]] = set()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        connections.add(task)
        try:
            await _Connection(app, reader, writer).run()
        except asyncio.CancelledError:
            pass  # server shutdown; asyncio would log a cancelled connection task as an error
        finally:
            connections.discard(task)

    if sock is not None:
        server = await asyncio.start_server(
            handle, sock=sock, limit=_STREAM_LIMIT, backlog=_BACKLOG
        )
    else:
        server = await asyncio.start_server(
            handle, host, port, limit=_STREAM_LIMIT, backlog=_BACKLOG
        )
    bound = server.sockets[0].getsockname()[1]
    if on_ready is not None:
        on_ready(int(bound))
    try:
        async with server:
            await server.serve_forever()
    finally:
        # Open keep-alive connections would otherwise outlive the server as pending tasks.
        for task in list(connections):
            task.cancel()
        if connections:
            await asyncio.wait(list(connections), timeout=5)
