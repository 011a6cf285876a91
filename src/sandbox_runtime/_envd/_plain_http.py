"""HTTP/1.1 on kept-alive standard-library connections: the in-sandbox agent's hot path.

httpx passes every request and every 64 KiB of a body through h11's event machinery and its
own layers of pool, transport and models: about half a millisecond per command, and for a
1 MB file as much again as the transfer itself.  On the local link to an in-sandbox agent
(plain HTTP, no gateway, no retries) :class:`EnvdClient` sends process starts and whole-file
reads and writes through this small pool instead, and everything else through httpx.

Failures are raised as the httpx exceptions that mean the same thing (a refused connection as
``httpx.ConnectError``, a timeout as ``httpx.TimeoutException``, a broken exchange as
``httpx.RemoteProtocolError``), so the callers' rules on what provably sent nothing hold for
both transports.  An idle connection the server has closed is dropped before it is used (as
httpcore does); one that breaks as an idempotent request is sent is retried once on a new
connection, and never a request that is not.
"""

from __future__ import annotations

import contextlib
import http.client
import select
import socket
import threading
from collections.abc import Iterator, Mapping

import httpx

__all__ = ["PlainHttp", "PlainResponse", "PlainStream"]

_IDLE_KEPT = 16
_FAILURES = (http.client.HTTPException, OSError)

PlainResponse = tuple[int, dict[str, str], bytes]
"""Status, headers (names lower-cased) and the whole body."""


class PlainHttp:
    """A pool of keep-alive connections to one plain-HTTP server; thread-safe."""

    def __init__(self, host: str, port: int, *, timeout: float) -> None:
        self._host = host
        self._port = port
        self.timeout = timeout
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._closed = False

    def request(
        self, method: str, target: str, *, body: bytes | None, headers: Mapping[str, str]
    ) -> PlainResponse:
        """Send one idempotent request and read its whole answer."""
        kept = self._take()
        if kept is not None:
            try:
                return self._exchange(kept, method, target, body, headers)
            except (httpx.RemoteProtocolError, httpx.ReadError):
                pass  # closed by the server as it was sent: once more, on a new connection
        return self._exchange(self._connect(), method, target, body, headers)

    def open_stream(
        self, target: str, *, body: bytes, headers: Mapping[str, str], read_timeout: float
    ) -> PlainStream:
        """POST ``body`` (sent once, never again) and read the answer's head; close it after."""
        connection = self._take() or self._connect()
        with _closed_on_failure(connection, f"POST {target}"):
            connection.request("POST", target, body=body, headers=dict(headers))
            response = connection.getresponse()
        assert connection.sock is not None
        connection.sock.settimeout(read_timeout)
        return PlainStream(self, connection, response, target)

    def close(self) -> None:
        """Close the idle connections; those in use close when their request ends."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    def _take(self) -> http.client.HTTPConnection | None:
        """An idle connection still open, or None (then the caller opens one)."""
        while True:
            with self._lock:
                if not self._idle:
                    return None
                connection = self._idle.pop()
            if connection.sock is not None and not _readable(connection.sock):
                return connection
            connection.close()

    def _connect(self) -> http.client.HTTPConnection:
        connection = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)
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
        with _closed_on_failure(connection, f"{method} {target}"):
            connection.request(method, target, body=body, headers=dict(headers))
            response = connection.getresponse()
            content = response.read()
        if response.will_close:
            connection.close()
        else:
            self.keep(connection)
        return response.status, _lowered(response), content

    def keep(self, connection: http.client.HTTPConnection) -> None:
        """Keep an idle connection for the next request (up to a few)."""
        with self._lock:
            if not self._closed and len(self._idle) < _IDLE_KEPT:
                self._idle.append(connection)
                return
        connection.close()


class PlainStream:
    """An answer whose body is read as it arrives; :meth:`close` it in any case."""

    def __init__(
        self,
        pool: PlainHttp,
        connection: http.client.HTTPConnection,
        response: http.client.HTTPResponse,
        target: str,
    ) -> None:
        self._pool = pool
        self._connection: http.client.HTTPConnection | None = connection
        self._response = response
        self._target = target
        self.status = response.status
        self.headers = _lowered(response)

    def pieces(self) -> Iterator[bytes]:
        """The body as it arrives (chunked encoding undone), failures as httpx's."""
        while True:
            try:
                piece = self._response.read1(1 << 16)
            except _FAILURES as exc:
                raise _mapped(exc, f"POST {self._target}") from exc
            if not piece:
                return
            yield piece

    def close(self) -> None:
        """Back to the pool when the body was read to its end, else the connection closes."""
        connection, self._connection = self._connection, None
        if connection is None:
            return
        if self._response.isclosed() and not self._response.will_close:
            assert connection.sock is not None
            connection.sock.settimeout(self._pool.timeout)
            self._pool.keep(connection)
        else:
            connection.close()


@contextlib.contextmanager
def _closed_on_failure(connection: http.client.HTTPConnection, what: str) -> Iterator[None]:
    """An exchange on ``connection``: any failure closes it, a transport one as httpx's."""
    try:
        yield
    except _FAILURES as exc:
        connection.close()
        raise _mapped(exc, what) from exc
    except BaseException:
        connection.close()
        raise


def _lowered(response: http.client.HTTPResponse) -> dict[str, str]:
    return {name.lower(): value for name, value in response.getheaders()}


def _mapped(exc: http.client.HTTPException | OSError, what: str) -> httpx.TransportError:
    """The httpx exception that means what a failure of an exchange under way means."""
    if isinstance(exc, TimeoutError):
        return httpx.ReadTimeout(f"{what}: {exc}")
    if isinstance(exc, ConnectionResetError):
        return httpx.ReadError(f"{what}: {exc}")
    return httpx.RemoteProtocolError(f"{what}: {exc!r}")


def _readable(sock: socket.socket) -> bool:
    """Whether an idle connection has something to read: the server closed it.

    (Or sent what no request asked for.)  ``poll``, since ``select`` fails on descriptors past
    1023.
    """
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))
