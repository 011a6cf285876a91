"""Whole-body HTTP/1.1 requests on kept-alive standard-library connections: the agent's files.

httpx reads a body 64 KiB at a time and passes each piece through h11 as an event; for a
1 MB file on a local link that is half a millisecond more than ``http.client``'s one read of
the declared length, as much as the transfer itself.  So :class:`EnvdClient` sends whole-file
reads and writes to an in-sandbox agent (plain HTTP, no gateway, no retries) through this
small pool, and everything else through httpx.

Failures are raised as the httpx exceptions that mean the same thing (a refused connection as
``httpx.ConnectError``, a timeout as ``httpx.TimeoutException``, a broken exchange as
``httpx.RemoteProtocolError``), so the callers' rules on what provably sent nothing hold for
both transports.  A kept-alive connection the server has closed meanwhile is retried once on
a new one; only idempotent requests come here.
"""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Mapping

import httpx

__all__ = ["PlainHttp", "PlainResponse"]

_IDLE_KEPT = 16

PlainResponse = tuple[int, dict[str, str], bytes]
"""Status, headers (names lower-cased) and the whole body."""


class PlainHttp:
    """A pool of keep-alive connections to one plain-HTTP server; thread-safe."""

    def __init__(self, host: str, port: int, *, timeout: float) -> None:
        self._host = host
        self._port = port
        self._timeout = timeout
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._closed = False

    def request(
        self, method: str, target: str, *, body: bytes | None, headers: Mapping[str, str]
    ) -> PlainResponse:
        """Send one idempotent request and read its whole answer."""
        with self._lock:
            kept = self._idle.pop() if self._idle else None
        if kept is not None:
            try:
                return self._exchange(kept, method, target, body, headers)
            except (httpx.RemoteProtocolError, httpx.ReadError):
                pass  # closed by the server while idle: once more, on a new connection
        return self._exchange(self._connect(), method, target, body, headers)

    def close(self) -> None:
        """Close the idle connections; those in use close when their request ends."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    def _connect(self) -> http.client.HTTPConnection:
        connection = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
        try:
            connection.connect()
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"connect to {self._host}:{self._port}: {exc}") from exc
        except OSError as exc:
            raise httpx.ConnectError(f"connect to {self._host}:{self._port}: {exc}") from exc
        assert connection.sock is not None
        connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return connection

    def _exchange(
        self,
        connection: http.client.HTTPConnection,
        method: str,
        target: str,
        body: bytes | None,
        headers: Mapping[str, str],
    ) -> PlainResponse:
        try:
            connection.request(method, target, body=body, headers=dict(headers))
            response = connection.getresponse()
            content = response.read()
        except TimeoutError as exc:
            connection.close()
            raise httpx.ReadTimeout(f"{method} {target}: {exc}") from exc
        except ConnectionResetError as exc:
            connection.close()
            raise httpx.ReadError(f"{method} {target}: {exc}") from exc
        except (http.client.HTTPException, OSError) as exc:
            connection.close()
            raise httpx.RemoteProtocolError(f"{method} {target}: {exc!r}") from exc
        if response.will_close:
            connection.close()
        else:
            self._keep(connection)
        return response.status, {k.lower(): v for k, v in response.getheaders()}, content

    def _keep(self, connection: http.client.HTTPConnection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < _IDLE_KEPT:
                self._idle.append(connection)
                return
        connection.close()
