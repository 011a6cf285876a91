"""The agent's whole-file transport: kept-alive stdlib connections, failures as httpx's."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from sandbox_runtime._envd._plain_http import _JOIN_BELOW, PlainHttp, _Connection


class _Files(BaseHTTPRequestHandler):
    """One file in memory; ``close_after`` answers then drops the connection unannounced."""

    protocol_version = "HTTP/1.1"
    stored = b""
    connections: set[int] = set()
    posts = 0

    def do_GET(self) -> None:
        self.connections.add(self.client_address[1])
        if self.path.startswith("/missing"):
            self._answer(404, b'{"code": "not_found", "message": "no such file"}')
        else:
            self._answer(200, _Files.stored)

    def do_POST(self) -> None:
        self.connections.add(self.client_address[1])
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path == "/stream":
            _Files.posts += 1
            self._stream([b"one ", b"two ", body])
            return
        _Files.stored = body
        self._answer(200, b"[]")

    def _stream(self, pieces: list[bytes]) -> None:
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for piece in pieces:
            self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            self.wfile.flush()
            time.sleep(0.02)  # each piece arrives on its own
        self.wfile.write(b"0\r\n\r\n")
        self._closing()

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self._closing()

    def _closing(self) -> None:
        if self.server.close_after:  # type: ignore[attr-defined]
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Files)
    httpd.close_after = False  # type: ignore[attr-defined]
    _Files.connections = set()
    _Files.posts = 0
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _client(server: ThreadingHTTPServer) -> PlainHttp:
    return PlainHttp("127.0.0.1", server.server_address[1], timeout=10)


def test_a_round_trip_keeps_one_connection(server: ThreadingHTTPServer) -> None:
    client = _client(server)
    data = bytes(range(256)) * 4096  # 1 MiB, every byte value
    assert client.request("POST", "/files", body=data, headers={})[0] == 200
    status, headers, content = client.request("GET", "/files", body=None, headers={})
    assert (status, content, headers["content-length"]) == (200, data, str(len(data)))
    assert len(_Files.connections) == 1
    client.close()


@pytest.mark.parametrize("size", [1, _JOIN_BELOW - 1, _JOIN_BELOW, 3 * _JOIN_BELOW + 7])
def test_bodies_either_side_of_the_join_arrive_whole(
    server: ThreadingHTTPServer, size: int
) -> None:
    """Small bodies leave in one send with their head, large ones apart: both arrive exact."""
    client = _client(server)
    data = bytes(range(256)) * (size // 256 + 1)
    data = data[:size]
    assert client.request("POST", "/files", body=data, headers={})[0] == 200
    assert client.request("GET", "/files", body=None, headers={})[2] == data
    client.close()


def test_a_small_request_is_one_send_and_a_large_one_is_not_copied(
    server: ThreadingHTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process start (small body) costs one ``send``; a large body is sent as it is."""
    sent: list[bytes] = []
    original = _Connection.send

    def counted(self: _Connection, data: bytes) -> None:
        sent.append(data)
        original(self, data)

    monkeypatch.setattr(_Connection, "send", counted)
    client = _client(server)
    small = b"x" * 300
    assert client.request("POST", "/files", body=small, headers={})[0] == 200
    assert len(sent) == 1
    assert sent[0].endswith(b"\r\n\r\n" + small)
    large = bytes(range(256)) * 1024
    sent.clear()
    assert client.request("POST", "/files", body=large, headers={})[0] == 200
    assert len(sent) == 2
    assert sent[1] is large
    client.close()


def test_closing_the_idle_connections_keeps_the_pool(server: ThreadingHTTPServer) -> None:
    """A sandbox about to be removed closes its idle connections while its agent can still
    answer; a request after that (none is expected) opens a new one."""
    client = _client(server)
    assert client.request("POST", "/files", body=b"x", headers={})[0] == 200
    client.close_idle()
    assert client.request("GET", "/files", body=None, headers={})[2] == b"x"
    assert len(_Files.connections) == 2
    client.close()


def test_an_error_answer_is_returned_whole(server: ThreadingHTTPServer) -> None:
    status, _headers, content = _client(server).request("GET", "/missing", body=None, headers={})
    assert (status, content) == (404, b'{"code": "not_found", "message": "no such file"}')


def test_a_connection_the_server_closed_while_idle_is_replaced(
    server: ThreadingHTTPServer,
) -> None:
    server.close_after = True  # type: ignore[attr-defined]
    client = _client(server)
    for _ in range(3):
        assert client.request("POST", "/files", body=b"x", headers={})[0] == 200
    assert len(_Files.connections) == 3


def test_a_refused_connection_is_httpx_connect_error() -> None:
    # The agent's callers fall back to the native path only on a refusal: nothing was sent.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, never listening: connections are refused
        with pytest.raises(httpx.ConnectError):
            PlainHttp("127.0.0.1", port, timeout=5).request("GET", "/", body=None, headers={})


def test_a_server_that_stops_answering_is_a_read_timeout() -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()  # accepts (the kernel does), never answers
        client = PlainHttp("127.0.0.1", silent.getsockname()[1], timeout=0.3)
        with pytest.raises(httpx.ReadTimeout):
            client.request("GET", "/", body=None, headers={})


def _streamed(client: PlainHttp, body: bytes, *, read: bool = True) -> bytes:
    answer = client.open_stream("/stream", body=body, headers={}, read_timeout=5)
    try:
        assert answer.status == 200
        pieces = answer.pieces()
        return b"".join(pieces) if read else next(pieces)
    finally:
        answer.close()


def test_a_stream_read_to_its_end_gives_its_connection_back(
    server: ThreadingHTTPServer,
) -> None:
    client = _client(server)
    assert _streamed(client, b"three") == b"one two three"
    assert _streamed(client, b"again") == b"one two again"
    assert len(_Files.connections) == 1


def test_a_stream_left_early_closes_its_connection(server: ThreadingHTTPServer) -> None:
    client = _client(server)
    assert _streamed(client, b"three", read=False) == b"one "
    assert _streamed(client, b"three") == b"one two three"
    assert len(_Files.connections) == 2


def test_a_stream_is_never_sent_on_a_connection_the_server_closed(
    server: ThreadingHTTPServer,
) -> None:
    server.close_after = True  # type: ignore[attr-defined]
    client = _client(server)
    for _ in range(3):
        assert _streamed(client, b"x") == b"one two x"
        time.sleep(0.05)  # idle a moment: the server's close reaches this side
    # Each start reached the server once, each on a new connection: the closed idle one was
    # seen as closed before anything was sent on it.
    assert (_Files.posts, len(_Files.connections)) == (3, 3)


# -- the hand-written HTTP/1.1: answers as a server may frame them, however they arrive ------


def _canned(answer: bytes, *, step: int, close: bool = True) -> tuple[int, threading.Thread]:
    """A one-request server that sends ``answer`` ``step`` bytes at a time; its port."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        with listener:
            peer, _ = listener.accept()
            with peer:
                peer.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                request = b""
                while b"\r\n\r\n" not in request:
                    request += peer.recv(65536)
                for at in range(0, len(answer), step):
                    peer.sendall(answer[at : at + step])
                    time.sleep(0.001 if step < len(answer) else 0)
                if close:
                    peer.shutdown(socket.SHUT_WR)
                    peer.recv(1)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener.getsockname()[1], thread


_CHUNKED = (
    b"HTTP/1.1 100 Continue\r\n\r\n"
    b"HTTP/1.1 200 OK\r\nContent-Type: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"4;ext=1\r\nhi, \r\n10\r\n" + b"a" * 16 + b"\r\n0\r\nTrailer: t\r\n\r\n"
)


@pytest.mark.parametrize("step", [1, 3, 7, len(_CHUNKED)])
def test_a_chunked_answer_reads_whole_however_it_is_cut(step: int) -> None:
    port, thread = _canned(_CHUNKED, step=step)
    client = PlainHttp("127.0.0.1", port, timeout=5)
    answer = client.open_stream("/", body=b"{}", headers={}, read_timeout=5)
    assert (answer.status, answer.headers["content-type"]) == (200, "x")
    assert b"".join(answer.pieces()) == b"hi, " + b"a" * 16
    answer.close()
    client.close()
    thread.join(5)


@pytest.mark.parametrize(
    ("answer", "body"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", b"hello"),
        (b"HTTP/1.0 200 OK\r\n\r\nto the close", b"to the close"),
        (b"HTTP/1.1 204 No Content\r\n\r\n", b""),
    ],
)
@pytest.mark.parametrize("step", [1, 1000])
def test_length_close_and_empty_bodies(answer: bytes, body: bytes, step: int) -> None:
    port, thread = _canned(answer, step=step)
    client = PlainHttp("127.0.0.1", port, timeout=5)
    assert client.request("GET", "/", body=None, headers={})[2] == body
    client.close()
    thread.join(5)


@pytest.mark.parametrize(
    "answer",
    [
        b"SSH-2.0-OpenSSH\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
        b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    ],
)
def test_what_is_not_http_or_is_cut_short_is_a_protocol_error(answer: bytes) -> None:
    port, thread = _canned(answer, step=len(answer))
    client = PlainHttp("127.0.0.1", port, timeout=5)
    with pytest.raises(httpx.RemoteProtocolError):
        client.request("GET", "/", body=None, headers={})
    client.close()
    thread.join(5)


def test_a_header_with_a_line_break_is_refused_before_anything_is_sent(
    server: ThreadingHTTPServer,
) -> None:
    client = _client(server)
    with pytest.raises(ValueError, match="line break"):
        client.request("GET", "/files", body=None, headers={"X-Token": "a\r\nX-Admin: 1"})
    assert _Files.connections == set()
