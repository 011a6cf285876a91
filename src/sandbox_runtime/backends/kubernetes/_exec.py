"""One ``pods/exec`` call over the client's websocket, read by deadline.

``kubernetes.stream.stream(..., _preload_content=False, binary=True)`` opens the websocket
(URL, credentials, TLS, proxy and subprotocol are the client's business); we then read its
frames ourselves rather than through ``WSClient.update``/``read_all``, because those keep
every byte in memory without bound and cannot stop at a deadline between frames.  Output is
split by channel into head-and-tail buffers; the error channel's ``Status`` gives the exit
code.

Stdin is written from a second thread, so a command that answers while it reads (``cat`` of
2 MiB) cannot deadlock against us.  End of input is the ``v5.channel.k8s.io`` close signal;
a server that only speaks ``v4`` has none, so there the backend makes the command read a
known number of bytes instead (see ``bounded_stdin``).
"""

from __future__ import annotations

import contextlib
import json
import select
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any

from kubernetes.stream import stream
from websocket import ABNF, WebSocketException

from sandbox_runtime.backend_kit import (
    HeadTailBuffer,
)

__all__ = ["V5_PROTOCOL", "ExecOutcome", "bounded_stdin", "negotiated_protocol", "run_exec"]

V5_PROTOCOL = "v5.channel.k8s.io"
_STDIN, _STDOUT, _STDERR, _ERROR, _CLOSE = 0, 1, 2, 3, 255
_CHUNK = 64 * 1024


@dataclass
class ExecOutcome:
    """What came back: whether the command ended, its ``Status`` and its output."""

    finished: bool
    status: dict[str, Any] | None
    stdout: HeadTailBuffer
    stderr: HeadTailBuffer
    protocol: str | None


def bounded_stdin(text: str, size: int) -> str:
    """Shell text that feeds ``text`` exactly ``size`` bytes of input, then end of file.

    For servers without the v5 close signal: ``head -c`` stops after ``size`` bytes, so the
    command sees EOF although the websocket's stdin stays open.
    """
    return f"head -c {int(size)} | {{ {text}\n}}"


def open_exec(
    api: Any, pod: str, namespace: str, container: str, argv: list[str], stdin: bool
) -> Any:
    """The client's ``WSClient`` for one exec (raises the client's ``ApiException``)."""
    return stream(
        api.connect_get_namespaced_pod_exec,
        pod,
        namespace,
        command=argv,
        container=container,
        stdin=stdin,
        stdout=True,
        stderr=True,
        tty=False,
        _preload_content=False,
        binary=True,
    )


def negotiated_protocol(client: Any) -> str | None:
    """The subprotocol the server chose.

    ``WSClient.subprotocol`` exists from client 36 on; before, it is read from the handshake's
    response headers (the client sets the protocol header by hand, so websocket-client itself
    does not record it).
    """
    chosen = getattr(client, "subprotocol", None)
    if chosen:
        return str(chosen)
    headers = client.sock.getheaders() or {}
    for name, value in headers.items():
        if name.lower() == "sec-websocket-protocol":
            return str(value).strip()
    return None


def _write_stdin(ws: Any, data: bytes, close_signal: bool) -> None:
    """Send stdin in chunks, then the close signal (v5); stop quietly if the exec ended."""
    with contextlib.suppress(WebSocketException, OSError):
        view = memoryview(data)
        for start in range(0, len(view), _CHUNK):
            ws.send(bytes([_STDIN]) + bytes(view[start : start + _CHUNK]), ABNF.OPCODE_BINARY)
        if close_signal:
            ws.send(bytes([_CLOSE, _STDIN]), ABNF.OPCODE_BINARY)


def _readable(ws: Any, timeout: float | None) -> bool:
    raw = ws.sock
    if raw is None:
        return True  # closed: the next read says so
    if isinstance(raw, ssl.SSLSocket) and raw.pending():
        return True
    ready, _, _ = select.select([raw], [], [], timeout)
    return bool(ready)


def run_exec(
    client: Any,
    stdin: bytes | None,
    deadline: float | None,
    buffers: tuple[HeadTailBuffer, HeadTailBuffer],
) -> ExecOutcome:
    """Pump one opened exec to its end or the deadline; closes the websocket either way.

    ``buffers`` capture stdout and stderr (:meth:`ExecRequest.output_buffers`).
    """
    ws = client.sock
    protocol = negotiated_protocol(client)
    stdout, stderr = buffers
    error = bytearray()
    writer = None
    if stdin is not None:
        writer = threading.Thread(
            target=_write_stdin, args=(ws, stdin, protocol == V5_PROTOCOL), daemon=True
        )
        writer.start()
    finished = False
    try:
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                break
            if not _readable(ws, None if remaining is None else min(remaining, 1.0)):
                continue
            try:
                opcode, frame = ws.recv_data_frame(True)
            except (WebSocketException, OSError):
                finished = True  # the connection ended; the status says how, if it came
                break
            if opcode == ABNF.OPCODE_CLOSE:
                finished = True
                break
            if opcode not in (ABNF.OPCODE_BINARY, ABNF.OPCODE_TEXT) or not frame.data:
                continue
            data = frame.data if isinstance(frame.data, bytes) else frame.data.encode()
            channel, payload = data[0], data[1:]
            if channel == _STDOUT:
                stdout.write(payload)
            elif channel == _STDERR:
                stderr.write(payload)
            elif channel == _ERROR:
                error += payload
    finally:
        with contextlib.suppress(Exception):
            ws.shutdown()
        if writer is not None:
            writer.join(timeout=5)
    status = None
    if error:
        with contextlib.suppress(ValueError):
            status = json.loads(bytes(error))
    return ExecOutcome(finished, status, stdout, stderr, protocol)
