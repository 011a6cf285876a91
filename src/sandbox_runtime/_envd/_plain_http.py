"""HTTP/1.1 on kept-alive connections, read and written by hand: the in-sandbox agent's hot path.

httpx passes every request and every 64 KiB of a body through h11's event machinery and its
own layers of pool, transport and models: about half a millisecond per command, and for a
1 MB file as much again as the transfer itself.  On the local link to an in-sandbox agent
(plain HTTP, no gateway, no retries) :class:`EnvdClient` sends process starts and whole-file
reads and writes through this small pool instead, and everything else through httpx.  Its
connections do not use ``http.client`` either (see :class:`_Connection`).

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
# Request bodies below this size are sent in one call with their head (see _Connection).
_JOIN_BELOW = 64 * 1024
# The most one receive asks for, and the longest head (or framing line) an answer may have.
_RECEIVE = 256 * 1024
_LONGEST_HEAD = 64 * 1024

PlainResponse = tuple[int, dict[str, str], bytes]
"""Status, headers (names lower-cased) and the whole body."""


class BadAnswer(Exception):
    """An answer that is not HTTP/1.1, or one cut short before its framing said it ends."""


_FAILURES = (BadAnswer, OSError)


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
        self._idle: list[_Connection] = []
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
            connection.send_request("POST", target, body, headers)
            self._await_answer(connection, f"POST {target}")
            status, answer_headers = connection.read_head()
        assert connection.sock is not None
        _set_timeout(connection.sock, read_timeout)
        return PlainStream(self, connection, status, answer_headers, target)

    def close(self) -> None:
        """Close the idle connections; those in use close when their request ends."""
        with self._lock:
            self._closed = True
        self.close_idle()

    def close_idle(self) -> None:
        """Close the idle connections now, and keep the pool for later requests."""
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    def _take(self) -> _Connection | None:
        """An idle connection still open, or None (then the caller opens one)."""
        while True:
            with self._lock:
                if not self._idle:
                    return None
                connection = self._idle.pop()
            if connection.idle_and_open():
                return connection
            connection.close()

    def _connect(self) -> _Connection:
        where = f"connect to {self._host}:{self._port}"
        try:
            sock = self._dial()
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"{where}: {exc}") from exc
        except OSError as exc:
            raise httpx.ConnectError(f"{where}: {exc}") from exc
        sock.settimeout(self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return _Connection(self._host, self._port, sock)

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

    def _await_answer(self, connection: _Connection, what: str) -> None:
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
        connection: _Connection,
        method: str,
        target: str,
        body: bytes | None,
        headers: Mapping[str, str],
    ) -> PlainResponse:
        with _closed_on_failure(connection, f"{method} {target}"):
            connection.send_request(method, target, body, headers)
            self._await_answer(connection, f"{method} {target}")
            status, answer_headers = connection.read_head()
            content = connection.read_body()
        if connection.will_close:
            connection.close()
        else:
            self.keep(connection)
        return status, answer_headers, content

    def keep(self, connection: _Connection) -> None:
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
        connection: _Connection,
        status: int,
        headers: dict[str, str],
        target: str,
    ) -> None:
        self._pool = pool
        self._connection: _Connection | None = connection
        self._target = target
        self.status = status
        self.headers = headers

    def pieces(self) -> Iterator[bytes]:
        """The body as it arrives (chunked encoding undone), failures as httpx's."""
        connection = self._connection
        while connection is not None:
            try:
                piece = connection.read1(1 << 16)
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
        if connection.body_done and not connection.will_close:
            assert connection.sock is not None
            _set_timeout(connection.sock, self._pool.timeout)
            self._pool.keep(connection)
        else:
            connection.close()


@contextlib.contextmanager
def _closed_on_failure(connection: _Connection, what: str) -> Iterator[None]:
    """An exchange on ``connection``: any failure closes it, a transport one as httpx's."""
    try:
        yield
    except _FAILURES as exc:
        connection.close()
        raise _mapped(exc, what) from exc
    except BaseException:
        connection.close()
        raise


class _Connection:
    """One kept-alive HTTP/1.1 connection, its requests written and its answers read by hand.

    ``http.client`` builds a request's head one header at a time and parses every answer's
    head with the ``email`` package's feed parser: about 0.3 ms of a 2.7 ms command.  This
    class reads what HTTP/1.1 lets a server answer a GET or a POST with (a status line,
    header lines, a body framed by chunked encoding, ``Content-Length`` or the connection's
    close, interim 1xx answers skipped) and no more: it speaks only to the library's agent,
    and to any HTTP/1.1 server in the tests.

    A small request leaves in one ``send`` with its head: with ``TCP_NODELAY`` each send is a
    segment, and the server would wake for the head and again for the body.  A large body
    is sent apart from its head, not copied into it.  :meth:`read1` hands over all the body
    that has arrived (up to a limit) and receives only when nothing has, so a command's
    start, output and end that arrive together cost one call.
    """

    def __init__(self, host: str, port: int, sock: socket.socket) -> None:
        self.sock: socket.socket | None = sock
        self._host = host if port == 80 else f"{host}:{port}"
        self._pending = bytearray()  # received and not yet consumed
        self._chunked = False
        self._data_end_due = False  # a chunk's data was read, the CRLF after it not yet
        self._left: int | None = 0  # of the body (or of the chunk); None: until the close
        self.body_done = True
        self.will_close = False

    # -- requests ----------------------------------------------------------------------------

    def send(self, data: bytes) -> None:
        """Put ``data`` on the wire (one call: a small request's head and body together)."""
        assert self.sock is not None
        self.sock.sendall(data)

    def send_request(
        self, method: str, target: str, body: bytes | None, headers: Mapping[str, str]
    ) -> None:
        """Send one request; its body, when given, with its ``Content-Length``."""
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self._host}", "Accept-Encoding: identity"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        if head.count(b"\n") != len(lines) + 1 or head.count(b"\r") != len(lines) + 1:
            # A value with a line break would smuggle a header or a request of its own.
            raise ValueError(f"{method} {target}: a header holds a line break")
        if body and len(body) < _JOIN_BELOW:
            self.send(head + body)
            return
        self.send(head)
        if body:
            self.send(body)

    # -- answers -----------------------------------------------------------------------------

    def read_head(self) -> tuple[int, dict[str, str]]:
        """The next answer's status and headers (names lower-cased); its body follows."""
        while True:
            version, status, headers = self._read_one_head()
            if not 100 <= status < 200:
                break  # an interim answer (100 Continue) is followed by the real one
        connection = {token.strip().lower() for token in headers.get("connection", "").split(",")}
        self.will_close = "close" in connection or (
            version == "HTTP/1.0" and "keep-alive" not in connection
        )
        self._chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        self._data_end_due = False
        if self._chunked or status in (204, 304):
            self._left = 0
        elif "content-length" in headers:
            length = headers["content-length"]
            if not (length.isascii() and length.isdigit()):  # a sign, a list: not a length
                raise BadAnswer(f"Content-Length {length[:40]!r}")
            self._left = int(length)
        else:
            self._left = None  # the body runs to the connection's close
            self.will_close = True
        self.body_done = self._left == 0 and not self._chunked
        return status, headers

    def read_body(self) -> bytes:
        """The rest of the answer's body, whole."""
        if not self._chunked and self._left:
            size, self._left = self._left, 0
            self.body_done = True
            return self._exactly(size)
        pieces = []
        while piece := self.read1(1 << 20):
            pieces.append(piece)
        return b"".join(pieces)

    def read1(self, limit: int) -> bytes:
        """Body bytes that have arrived (at most ``limit``), receiving only when none has."""
        if self.body_done:
            return b""
        if not self._chunked:
            if self._left is None:  # to the close
                if not self._pending and not self._fill(eof_ok=True):
                    self.body_done = True
                    return b""
                return self._take(limit)
            if not self._pending:
                self._fill()
            piece = self._take(min(limit, self._left))
            self._left -= len(piece)
            self.body_done = self._left == 0
            return piece
        out = bytearray()
        while len(out) < limit:
            if self._left == 0:
                if out and not self._chunk_head_arrived():
                    break  # hand over what arrived rather than wait for the next chunk
                if not self._next_chunk():
                    break  # the last chunk: the body is done
            if not self._pending:
                if out:
                    break
                self._fill()
            assert self._left is not None
            piece = self._take(min(limit - len(out), self._left))
            out += piece
            self._left -= len(piece)
            self._data_end_due = self._left == 0
        return bytes(out)

    def _chunk_head_arrived(self) -> bool:
        """Whether the next chunk's size line (and the end of the last one's data) is here."""
        return self._pending.count(b"\r\n") >= (2 if self._data_end_due else 1)

    def _next_chunk(self) -> bool:
        """Read the next chunk's size line; False (and the trailers read) at the last one."""
        if self._data_end_due:
            self._data_end_due = False
            if self._line():
                raise BadAnswer("a chunk's data longer than its size")
        line = self._line()
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError as exc:
            raise BadAnswer(f"chunk size {line[:40]!r}") from exc
        if size == 0:
            while self._line():
                pass  # trailer fields, unused
            self.body_done = True
            return False
        self._left = size
        return True

    def _read_one_head(self) -> tuple[str, int, dict[str, str]]:
        while (end := self._pending.find(b"\r\n\r\n")) < 0:
            if len(self._pending) > _LONGEST_HEAD:
                raise BadAnswer(f"an answer's head over {_LONGEST_HEAD} bytes")
            if not self._fill(eof_ok=True):
                # Before any byte of an answer: the server closed the connection (an idle
                # one it dropped as the request went out), which may be sent again.
                raise ConnectionResetError("the server closed the connection before answering")
        head = self._pending[:end].decode("latin-1")
        del self._pending[: end + 4]
        status_line, *fields = head.split("\r\n")
        version, _, rest = status_line.partition(" ")
        if not version.startswith("HTTP/1.") or not rest[:3].isdigit():
            raise BadAnswer(f"status line {status_line[:60]!r}")
        headers: dict[str, str] = {}
        for field in fields:
            name, colon, value = field.partition(":")
            if not colon:
                raise BadAnswer(f"header line {field[:60]!r}")
            name, value = name.strip().lower(), value.strip()
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        return version, int(rest[:3]), headers

    def _line(self) -> bytes:
        """One CRLF-ended line of the body's framing, without its end."""
        while (end := self._pending.find(b"\r\n")) < 0:
            if len(self._pending) > _LONGEST_HEAD:
                raise BadAnswer("a chunk's framing line too long")
            self._fill()
        line = bytes(self._pending[:end])
        del self._pending[: end + 2]
        return line

    def _take(self, limit: int) -> bytes:
        piece = bytes(self._pending[:limit])
        del self._pending[:limit]
        return piece

    def _exactly(self, size: int) -> bytes:
        """``size`` body bytes: what is buffered, then received straight into place."""
        out = bytearray(size)
        have = min(size, len(self._pending))
        out[:have] = self._pending[:have]
        del self._pending[:have]
        view = memoryview(out)
        assert self.sock is not None
        while have < size:
            got = self.sock.recv_into(view[have:])
            if not got:
                raise BadAnswer(f"the body ended after {have} of {size} bytes")
            have += got
        return bytes(out)

    def _fill(self, *, eof_ok: bool = False) -> bool:
        """Receive once into the pending bytes; False at the server's close (if ``eof_ok``)."""
        assert self.sock is not None
        data = self.sock.recv(_RECEIVE)
        if data:
            self._pending += data
            return True
        if eof_ok:
            return False
        raise BadAnswer("the server closed the connection inside an answer")

    def idle_and_open(self) -> bool:
        """Whether a kept connection can carry a request: open, nothing unasked-for in it."""
        return self.sock is not None and not self._pending and not _readable(self.sock)

    def close(self) -> None:
        sock, self.sock = self.sock, None
        if sock is not None:
            sock.close()


def _set_timeout(sock: socket.socket, timeout: float) -> None:
    """``settimeout`` unless it is already so: each call is a system call or two."""
    if sock.gettimeout() != timeout:
        sock.settimeout(timeout)


def _mapped(exc: BadAnswer | OSError, what: str) -> httpx.TransportError:
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
