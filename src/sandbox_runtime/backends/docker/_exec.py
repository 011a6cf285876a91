"""One exec's hijacked connection: stdin written and output demultiplexed under a deadline.

docker-py's ``exec_run`` can neither time out nor kill what it started, so the backend reads
the exec's socket itself.  :func:`hijack_exec` is shared with the Kubernetes emulator, whose
pods' exec streams are Docker execs too.
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
import struct
import time
from dataclasses import dataclass
from typing import Any

from sandbox_runtime.backend_kit import (
    HeadTailBuffer,
)

__all__ = ["STDERR", "STDOUT", "ExecOutcome", "ExecStream", "hijack_exec"]

STDOUT, STDERR = 1, 2
_READ_SIZE = 65536
# ExecStream._wait's answer: which ways the socket is ready (bits, so no tuple per wait).
_READABLE, _WRITABLE = 1, 2


@dataclass(frozen=True, slots=True)
class ExecOutcome:
    finished: bool
    exit_code: int
    stdout: HeadTailBuffer
    stderr: HeadTailBuffer
    interpreter_missing: bool = False


def hijack_exec(api: Any, exec_id: str, *, tty: bool = False) -> tuple[socket.socket, bytes, Any]:
    """Start an exec and take its hijacked connection: ``(socket, bytes already read, response)``.

    docker-py's ``exec_start(socket=True)`` loses the bytes that the HTTP layer buffered while
    parsing the upgrade answer, so a fast command's output could vanish; those bytes are
    taken here first, without blocking.  The socket is left non-blocking.  Shared with the
    Kubernetes emulator, whose pods' exec streams are Docker execs too.
    """
    response = api._post_json(
        api._url("/exec/{0}/start", exec_id),
        headers={"Connection": "Upgrade", "Upgrade": "tcp"},
        data={"Tty": tty, "Detach": False},
        stream=True,
    )
    api._raise_for_status(response)
    buffered_reader = response.raw._fp.fp
    raw = buffered_reader.raw
    sock: socket.socket = getattr(raw, "_sock", raw)
    sock.setblocking(False)
    try:
        pending = bytes(buffered_reader.read1(_READ_SIZE) or b"")
    except (BlockingIOError, OSError):
        pending = b""
    return sock, pending, response


class ExecStream:
    """The hijacked connection of one exec: write stdin, read demultiplexed output by deadline.

    I/O goes through the raw, non-blocking socket with ``select`` so that a deadline can
    interrupt it and stdin can be written while output is read (``cat`` of a large input
    would otherwise deadlock on full buffers).
    The connection comes from :func:`hijack_exec`, so nothing a fast command printed is lost.
    """

    def __init__(self, api: Any, exec_id: str) -> None:
        self._sock, pending, self._response = hijack_exec(api, exec_id)
        self._pending = bytearray(pending)
        # One pump's state, shared by its steps: stdin not yet sent, and the frame being
        # read (its stream and the payload bytes still to come).
        self._unsent: memoryview | None = None
        self._stream_id = 0
        self._remaining = 0

    def pump(
        self, sinks: dict[int, HeadTailBuffer], deadline: float | None, stdin: bytes | None = None
    ) -> bool:
        """Feed ``stdin`` and demultiplex output into ``sinks``, interleaved so neither blocks.

        Returns True at end of stream, False when the deadline passed first.  Stdin is
        half-closed once written, so the command sees end of input.
        """
        self._stream_id = 0
        self._remaining = 0
        self._unsent = memoryview(stdin) if stdin is not None else None
        self._sock.setblocking(False)
        if self._unsent is not None and not self._unsent:
            self._close_stdin()
            self._unsent = None
        while True:
            self._demultiplex(sinks)
            timeout = None if deadline is None else deadline - time.monotonic()
            if timeout is not None and timeout <= 0:
                return False
            ready = self._wait(timeout)
            if not ready:
                return False
            if ready & _WRITABLE and self._unsent is not None:
                self._send()
            if ready & _READABLE and self._receive():
                return True

    def _demultiplex(self, sinks: dict[int, HeadTailBuffer]) -> None:
        """Consume whole frame headers and as much payload as is buffered, into ``sinks``."""
        buffer = self._pending
        stream_id, remaining = self._stream_id, self._remaining
        while buffer:
            if remaining == 0:
                if len(buffer) < 8:
                    break
                stream_id, remaining = struct.unpack(">BxxxL", bytes(buffer[:8]))
                del buffer[:8]
                continue
            take = min(remaining, len(buffer))
            sink = sinks.get(stream_id)
            if sink is not None:
                sink.write(bytes(buffer[:take]))
            del buffer[:take]
            remaining -= take
        self._stream_id, self._remaining = stream_id, remaining

    def _wait(self, timeout: float | None) -> int:
        """Wait until the socket is ready: ``_READABLE | _WRITABLE`` bits, 0 on timeout.

        Bytes TLS has already decrypted are readable though the socket itself is not.
        """
        pending_tls = getattr(self._sock, "pending", None)
        if pending_tls and pending_tls():
            return _READABLE
        readable, writable, _ = select.select(
            [self._sock], [self._sock] if self._unsent is not None else [], [], timeout
        )
        return (_READABLE if readable else 0) | (_WRITABLE if writable else 0)

    def _send(self) -> None:
        """Send the next piece of stdin; half-close the connection once it is all sent."""
        unsent = self._unsent
        assert unsent is not None
        try:
            sent = self._sock.send(unsent[:_READ_SIZE])
        except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
            sent = 0
        except (BrokenPipeError, ConnectionResetError):
            sent = len(unsent)  # the command stopped reading its input
        unsent = unsent[sent:]
        if unsent:
            self._unsent = unsent
            return
        self._close_stdin()
        self._unsent = None

    def _receive(self) -> bool:
        """Read what the socket holds into the buffer; True at end of stream."""
        try:
            chunk = self._sock.recv(_READ_SIZE)
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return False
        except (ConnectionResetError, BrokenPipeError):
            return True
        if not chunk:
            return True
        self._pending += chunk
        return False

    def _close_stdin(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        """Close the connection (the engine keeps a timed-out command until we kill it)."""
        with contextlib.suppress(OSError):
            self._sock.close()
        with contextlib.suppress(Exception):
            self._response.close()
