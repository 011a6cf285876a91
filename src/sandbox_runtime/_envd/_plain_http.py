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

A connection to a sandbox that died hangs: its address stops answering, and the kernel gives
up with ``EHOSTUNREACH`` only seconds later.  So a connect that has not completed within
:data:`CONNECT_PATIENCE` asks the sandbox's owner (``alive``: the engine, for a container)
whether the sandbox still runs, while the handshake goes on; when it does not, the connect
fails at once with :class:`PeerGone`.  A connect that completes in time asks nothing.
"""

from __future__ import annotations

import contextlib
import errno
import http.client
import os
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping

import httpx

__all__ = ["CONNECT_PATIENCE", "PeerGone", "PlainHttp", "PlainResponse", "PlainStream"]

_IDLE_KEPT = 16
#: How long a connect may take before the sandbox's owner is asked whether it still runs: a
#: live sandbox on a local link completes the handshake in well under a millisecond.
CONNECT_PATIENCE = 0.15
# While a connect stays pending after that, how often the owner is asked again.
_ASK_AGAIN = 1.0
#: How long a sent request may wait for the first byte of its answer before ``responsive``
#: is asked.  A running agent answers in about a millisecond, a loaded one in well under a
#: second; the question costs a native exec, so it is asked only of a silent server.
ANSWER_PATIENCE = 1.5
_FAILURES = (http.client.HTTPException, OSError)
# Request bodies below this size are sent in one call with their head (see _Connection).
_JOIN_BELOW = 64 * 1024

PlainResponse = tuple[int, dict[str, str], bytes]
"""Status, headers (names lower-cased) and the whole body."""


class PeerGone(httpx.ConnectError):
    """A connect abandoned because the sandbox's owner said the sandbox no longer runs."""


class PeerStalled(httpx.ReadTimeout):
    """A request abandoned because the server's process cannot answer: stopped or dead.

    A stopped process (``SIGSTOP``, a debugger) keeps its socket: the kernel accepts the
    connection and the request, and nothing answers until the process runs again, maybe
    never.  The request may have reached it; whether it acted on it is unknown.
    """


class PlainHttp:
    """A pool of keep-alive connections to one plain-HTTP server; thread-safe.

    ``alive``, when given, answers whether the server's sandbox still runs (see the module
    docstring); it is asked only about a connect that is slow to complete.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        timeout: float,
        alive: Callable[[], bool] | None = None,
        responsive: Callable[[], bool] | None = None,
    ) -> None:
        self._host = host
        self._responsive = responsive
        self._port = port
        self.timeout = timeout
        self._alive = alive
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
            _send(connection, "POST", target, body, headers)
            self._await_answer(connection, f"POST {target}")
            response = connection.getresponse()
        assert connection.sock is not None
        _set_timeout(connection.sock, read_timeout)
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
        connection = _Connection(self._host, self._port, timeout=self.timeout)
        where = f"connect to {self._host}:{self._port}"
        try:
            sock = self._dial()
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"{where}: {exc}") from exc
        except OSError as exc:
            raise httpx.ConnectError(f"{where}: {exc}") from exc
        sock.settimeout(self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connection.sock = sock
        return connection

    def _dial(self) -> socket.socket:
        """A connected socket; asks ``alive`` about a connect still pending after a while."""
        family, kind, proto, _name, address = socket.getaddrinfo(
            self._host, self._port, type=socket.SOCK_STREAM
        )[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            code = sock.connect_ex(address)
            if code not in (0, errno.EINPROGRESS):
                raise OSError(code, os.strerror(code))
            if code == errno.EINPROGRESS:
                self._await_handshake(sock)
            code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code:
                raise OSError(code, os.strerror(code))
        except BaseException:
            sock.close()
            raise
        return sock

    def _await_handshake(self, sock: socket.socket) -> None:
        """Wait for a pending connect to complete (or fail), within the timeout."""
        now = time.monotonic()
        deadline = now + self.timeout
        ask_at = now + CONNECT_PATIENCE if self._alive is not None else deadline
        while not _writable(sock, max(0.0, min(deadline, ask_at) - time.monotonic())):
            now = time.monotonic()
            if now >= deadline:
                raise TimeoutError(f"no answer within {self.timeout:.0f}s")
            if now >= ask_at:
                if not self._still_running():
                    where = f"connect to {self._host}:{self._port}"
                    raise PeerGone(f"{where}: the sandbox no longer runs")
                ask_at = time.monotonic() + _ASK_AGAIN

    def _await_answer(self, connection: http.client.HTTPConnection, what: str) -> None:
        """Wait for the answer's first bytes, asking ``responsive`` about a silent server.

        Without the question, a stopped server would hold the caller for the whole request
        timeout (minutes).  A server that still runs is waited for, up to that timeout.
        """
        sock = connection.sock
        if self._responsive is None or sock is None:
            return
        deadline = time.monotonic() + self.timeout
        ask_at = time.monotonic() + ANSWER_PATIENCE
        while not _readable(sock, max(0.0, min(deadline, ask_at) - time.monotonic())):
            now = time.monotonic()
            if now >= deadline:
                return  # the read's own timeout decides
            if now >= ask_at:
                if not self._still_responsive():
                    raise PeerStalled(f"{what}: the server's process is stopped or dead")
                ask_at = time.monotonic() + _ASK_AGAIN

    def _still_responsive(self) -> bool:
        """``responsive``'s answer; one that cannot tell leaves the wait to its timeout."""
        assert self._responsive is not None
        try:
            return self._responsive()
        except Exception:
            return True

    def _still_running(self) -> bool:
        """The owner's answer; an owner that cannot tell leaves the connect to its timeout."""
        assert self._alive is not None
        try:
            return self._alive()
        except Exception:
            return True

    def _exchange(
        self,
        connection: http.client.HTTPConnection,
        method: str,
        target: str,
        body: bytes | None,
        headers: Mapping[str, str],
    ) -> PlainResponse:
        with _closed_on_failure(connection, f"{method} {target}"):
            _send(connection, method, target, body, headers)
            self._await_answer(connection, f"{method} {target}")
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
            _set_timeout(connection.sock, self._pool.timeout)
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


def _send(
    connection: http.client.HTTPConnection,
    method: str,
    target: str,
    body: bytes | None,
    headers: Mapping[str, str],
) -> None:
    """Send one request (a small one in one segment: see :class:`_Connection`)."""
    connection.request(method, target, body=body, headers=dict(headers))


class _Connection(http.client.HTTPConnection):
    """``http.client``'s connection, sending a small request's head and body in one call.

    ``http.client`` sends the head and the body in two calls, and with ``TCP_NODELAY`` each
    is a segment of its own: the server wakes for the head, then again for the body.  Joined
    here, a process start is one ``send``: no second send, and no ``TCP_CORK`` set and
    cleared around them (four system calls where one does, each ~0.1 ms on a loaded host).
    A large body is sent apart from its head, as ``http.client`` does: joining would copy it.
    """

    def _send_output(self, message_body: object = None, encode_chunked: bool = False) -> None:
        if (
            isinstance(message_body, bytes)
            and 0 < len(message_body) < _JOIN_BELOW
            and not encode_chunked
        ):
            self._buffer.extend((b"", message_body))  # type: ignore[attr-defined]
            message = b"\r\n".join(self._buffer)  # type: ignore[attr-defined]
            del self._buffer[:]  # type: ignore[attr-defined]
            self.send(message)
            return
        super()._send_output(message_body, encode_chunked)  # type: ignore[misc]


def _set_timeout(sock: socket.socket, timeout: float) -> None:
    """``settimeout`` unless it is already so: each call is a system call or two."""
    if sock.gettimeout() != timeout:
        sock.settimeout(timeout)


def _lowered(response: http.client.HTTPResponse) -> dict[str, str]:
    return {name.lower(): value for name, value in response.getheaders()}


def _mapped(exc: http.client.HTTPException | OSError, what: str) -> httpx.TransportError:
    """The httpx exception that means what a failure of an exchange under way means."""
    if isinstance(exc, TimeoutError):
        return httpx.ReadTimeout(f"{what}: {exc}")
    if isinstance(exc, ConnectionResetError):
        return httpx.ReadError(f"{what}: {exc}")
    return httpx.RemoteProtocolError(f"{what}: {exc!r}")


def _writable(sock: socket.socket, timeout: float) -> bool:
    """Whether a connecting socket completed its handshake (or failed) within ``timeout``."""
    poller = select.poll()
    poller.register(sock, select.POLLOUT)
    return bool(poller.poll(timeout * 1000))


def _readable(sock: socket.socket, timeout: float = 0.0) -> bool:
    """Whether a connection has something to read within ``timeout`` seconds.

    On an idle connection: the server closed it (or sent what no request asked for).
    ``poll``, since ``select`` fails on descriptors past 1023.
    """
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(timeout * 1000))
