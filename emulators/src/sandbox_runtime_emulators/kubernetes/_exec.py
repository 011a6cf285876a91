"""``pods/exec`` over a websocket: the channel protocol bridged to a ``docker exec`` stream.

The client offers subprotocols (``v5.channel.k8s.io``, ``v4.channel.k8s.io``); we pick the
first of its list that we serve.  Every websocket message starts with a channel byte: 0 stdin
(client to server), 1 stdout, 2 stderr, 3 the error channel (one JSON ``Status`` when the
command ends: ``Success``, or ``Failure``/``NonZeroExitCode`` with the code in
``details.causes``), 4 terminal resize.  ``v5`` adds the close signal ``[255, channel]`` with
which a client half-closes stdin.  Output goes out in binary messages, as the real server
sends them, so bytes that are not UTF-8 survive.

The websocket framing (masking, fragmentation, ping/pong, the close handshake) is wsproto's;
the opening handshake is answered here because the HTTP server has already parsed the request.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import socket
import struct
import threading
from collections.abc import Callable
from typing import Any

from wsproto.connection import Connection, ConnectionType
from wsproto.events import BytesMessage, CloseConnection, Message, Ping, TextMessage
from wsproto.utilities import LocalProtocolError, generate_accept_token

from ._docker import DockerRuntime
from ._status import exec_failure, exec_success

__all__ = [
    "CHANNEL_PROTOCOLS",
    "AttachSession",
    "ExecSession",
    "accept_headers",
    "choose_protocol",
]

logger = logging.getLogger("sandbox_runtime_emulators.kubernetes.exec")

V4, V5 = "v4.channel.k8s.io", "v5.channel.k8s.io"
#: The subprotocols served, in the order of preference when a client offers several.
CHANNEL_PROTOCOLS = (V5, V4)
STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
_READ_SIZE = 65536


def choose_protocol(offered: list[str], served: tuple[str, ...]) -> str | None:
    """The first protocol in the client's list that we serve, as the real server chooses."""
    for protocol in offered:
        if protocol in served:
            return protocol
    return None


def accept_headers(key: str, protocol: str) -> list[tuple[str, str]]:
    """Headers of the ``101 Switching Protocols`` answer."""
    return [
        ("Upgrade", "websocket"),
        ("Connection", "Upgrade"),
        ("Sec-WebSocket-Accept", generate_accept_token(key.encode("ascii")).decode("ascii")),
        ("Sec-WebSocket-Protocol", protocol),
    ]


class ExecSession:
    """One exec after the upgrade: client messages to the exec's stdin, its output to the client.

    The request thread reads client messages; a second thread reads the Docker stream, and when
    it ends, sends the exit ``Status`` and closes the websocket.  A client that goes away
    early leaves the command running, as on a real node: killing it is the client's business.
    """

    def __init__(
        self,
        client: socket.socket,
        client_reader: io.BufferedIOBase,
        protocol: str,
        runtime: DockerRuntime,
        exec_id: str,
        argv: list[str],
        *,
        stdin: bool,
        tty: bool,
    ) -> None:
        self._client = client
        self._reader = client_reader
        self._protocol = protocol
        self._runtime = runtime
        self._exec_id = exec_id
        self._argv = argv
        self._stdin = stdin
        self._tty = tty
        self._ws = Connection(ConnectionType.SERVER)
        self._send_lock = threading.Lock()
        self._closing = threading.Event()
        self._fragments = bytearray()
        self._hang_up_timer: threading.Timer | None = None

    def _send(self, event: Any) -> None:
        with self._send_lock:
            try:
                data = self._ws.send(event)
            except LocalProtocolError:
                return  # the websocket is already closed: nobody to tell
            with contextlib.suppress(OSError):
                self._client.sendall(data)

    def _send_channel(self, channel: int, payload: bytes) -> None:
        for start in range(0, len(payload), _READ_SIZE):
            self._send(BytesMessage(data=bytes([channel]) + payload[start : start + _READ_SIZE]))

    def run(self) -> None:
        """Serve the session until the command ends or the client leaves."""
        sock, pending, response = self._open()
        output = threading.Thread(
            target=self._pump_output, args=(sock, pending), name="k8s-exec-output", daemon=True
        )
        output.start()
        try:
            self._pump_input(sock)
        finally:
            # The client left (or the close handshake finished): stop bridging.
            if self._hang_up_timer is not None:
                self._hang_up_timer.cancel()
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            output.join(timeout=5)
            with contextlib.suppress(OSError):
                sock.close()
            with contextlib.suppress(Exception):
                response.close()

    def _open(self) -> tuple[socket.socket, bytes, Any]:
        """The Docker stream to bridge: the exec's hijacked connection."""
        return self._runtime.exec_attach(self._exec_id, self._tty)

    def _final_status(self) -> dict[str, Any]:
        """The ``Status`` sent on the error channel once the stream has ended."""
        exit_code, _pid = self._runtime.exec_result(self._exec_id)
        return exec_success() if exit_code == 0 else exec_failure(self._argv, exit_code)

    # -- client to exec --------------------------------------------------------------------

    def _pump_input(self, sock: socket.socket) -> None:
        while True:
            try:
                data = self._reader.read1(_READ_SIZE)
            except OSError:
                data = b""
            with self._send_lock:
                self._ws.receive_data(data or None)
                events = list(self._ws.events())
            for event in events:
                if isinstance(event, Message):
                    self._message(event, sock)
                elif isinstance(event, Ping):
                    self._send(event.response())
                elif isinstance(event, CloseConnection):
                    if not self._closing.is_set():
                        self._closing.set()
                        with contextlib.suppress(Exception):
                            self._send(event.response())
                    return
            if not data:
                return

    def _message(self, event: Message[Any], sock: socket.socket) -> None:
        chunk = event.data.encode("utf-8") if isinstance(event, TextMessage) else event.data
        self._fragments += chunk
        if not event.message_finished:
            return
        message, self._fragments = bytes(self._fragments), bytearray()
        if not message:
            return
        channel, payload = message[0], message[1:]
        if channel == STDIN and self._stdin and payload:
            with contextlib.suppress(OSError):  # the command may have stopped reading
                sock.sendall(payload)
        elif channel == CLOSE and self._protocol == V5 and payload[:1] == bytes([STDIN]):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_WR)
        # RESIZE and anything else: nothing to do without a terminal.

    # -- exec to client ----------------------------------------------------------------------

    def _pump_output(self, sock: socket.socket, pending: bytes) -> None:
        try:
            self._copy_output(sock, pending)
            if self._closing.is_set():
                return
            self._send_channel(ERROR, json.dumps(self._final_status()).encode())
            self._closing.set()
            self._send(CloseConnection(code=1000))
        except Exception:  # pragma: no cover - report, then drop the connection
            logger.exception("exec session failed")
        finally:
            # Give the client a moment to answer the close, then end the request thread's read.
            self._hang_up_timer = threading.Timer(2.0, self._hang_up)
            self._hang_up_timer.daemon = True
            self._hang_up_timer.start()

    def _hang_up(self) -> None:
        with contextlib.suppress(OSError):
            self._client.shutdown(socket.SHUT_RDWR)

    def _copy_output(self, sock: socket.socket, pending: bytes) -> None:
        """Copy the Docker stream (multiplexed unless tty) into stdout/stderr messages."""
        demux = _Demux(self._send_channel)
        if pending:
            demux.feed(pending, self._tty)
        while True:
            try:
                chunk = sock.recv(_READ_SIZE)
            except OSError:
                return
            if not chunk:
                return
            demux.feed(chunk, self._tty)


class AttachSession(ExecSession):
    """``pods/attach``: the same bridge, to the container's own stdio (``kubectl run -i``).

    The stream ends when the container's process does (or its stdin was closed and it exits);
    the error channel then says ``Success``, and the client reads the exit code from the pod's
    status, as it does against a kubelet.
    """

    def __init__(
        self,
        client: socket.socket,
        client_reader: io.BufferedIOBase,
        protocol: str,
        runtime: DockerRuntime,
        container_id: str,
        *,
        stdin: bool,
        stdout: bool,
        stderr: bool,
        tty: bool,
    ) -> None:
        super().__init__(client, client_reader, protocol, runtime, "", [], stdin=stdin, tty=tty)
        self._container_id = container_id
        self._streams = (stdin, stdout, stderr)

    def _open(self) -> tuple[socket.socket, bytes, Any]:
        stdin, stdout, stderr = self._streams
        return self._runtime.attach(self._container_id, stdin=stdin, stdout=stdout, stderr=stderr)

    def _final_status(self) -> dict[str, Any]:
        return exec_success()


class _Demux:
    """Docker's stream framing: 8-byte headers (stream id, 3 zero bytes, big-endian size)."""

    def __init__(self, emit: Callable[[int, bytes], None]) -> None:
        self._emit = emit
        self._buffer = bytearray()
        self._stream = STDOUT
        self._remaining = 0

    def feed(self, chunk: bytes, tty: bool) -> None:
        if tty:
            self._emit(STDOUT, chunk)
            return
        self._buffer += chunk
        while self._buffer:
            if self._remaining == 0:
                if len(self._buffer) < 8:
                    return
                self._stream, self._remaining = struct.unpack(">BxxxL", bytes(self._buffer[:8]))
                del self._buffer[:8]
                continue
            take = min(self._remaining, len(self._buffer))
            if self._stream in (STDOUT, STDERR):
                self._emit(self._stream, bytes(self._buffer[:take]))
            del self._buffer[:take]
            self._remaining -= take
