"""A unix-socket proxy in front of the real Docker engine that misbehaves on purpose.

Each accepted connection is either passed through byte for byte (exec upgrades included) or,
for the connections listed in ``faults``, answered the way a failing daemon or network does:

- ``drop``: read the request, then close without answering (a connection reset).
- ``503``: answer ``503 Service Unavailable`` with a Docker-style JSON error, then close.
- ``forward-then-drop``: pass the request to the engine, read its answer, and close without
  delivering it, so the operation happened but the client never heard.

Only the first request of a faulted connection is looked at, which is enough because the
client opens a fresh connection after any of these failures.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path

ENGINE = "/var/run/docker.sock"


def _read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


class FaultProxy:
    """Serve ``path``; ``faults[k]`` says what to do with the k-th connection (0-based)."""

    def __init__(self, path: Path, faults: dict[int, str] | None = None) -> None:
        self.path = path
        self.faults = dict(faults or {})
        self.connections = 0
        self.requests: list[bytes] = []
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(path))
        self._server.listen(64)
        self._stopped = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"unix://{self.path}"

    def close(self) -> None:
        self._stopped = True
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()

    def _accept(self) -> None:
        while not self._stopped:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            index = self.connections
            self.connections += 1
            fault = self.faults.get(index)
            threading.Thread(target=self._handle, args=(client, fault), daemon=True).start()

    def _handle(self, client: socket.socket, fault: str | None) -> None:
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        upstream.connect(ENGINE)
        try:
            if fault is None:
                self._pipe(client, upstream)
                return
            request = _read_request(client)
            self.requests.append(request.split(b"\r\n", 1)[0])
            if fault == "503":
                body = b'{"message":"injected: engine overloaded"}'
                client.sendall(
                    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                    b"Content-Length: "
                    + str(len(body)).encode()
                    + b"\r\nConnection: close\r\n\r\n"
                    + body
                )
            elif fault == "forward-then-drop":
                upstream.sendall(request)
                upstream.settimeout(30)
                with contextlib.suppress(OSError):
                    upstream.recv(65536)
            # "drop" and the others: close without a word.
        finally:
            for sock in (client, upstream):
                with contextlib.suppress(OSError):
                    sock.close()

    @staticmethod
    def _pipe(client: socket.socket, upstream: socket.socket) -> None:
        def copy(source: socket.socket, sink: socket.socket) -> None:
            try:
                while chunk := source.recv(65536):
                    sink.sendall(chunk)
            except OSError:
                pass
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)

        other = threading.Thread(target=copy, args=(upstream, client), daemon=True)
        other.start()
        copy(client, upstream)
        other.join()
        for sock in (client, upstream):
            with contextlib.suppress(OSError):
                sock.close()
