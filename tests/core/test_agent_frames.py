"""The agent's lean frames (``_envd/server/_frames.py``): negotiated by the local client only,
and every guarantee of a command kept through them: output exact (binary, not UTF-8, large,
capped), stdin, timeouts that kill the whole tree, deadlines, streams given up early.

The agent runs from its zip as in a sandbox, on this machine: no container needed."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import secrets
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from sandbox_runtime._core.backend import ExecRequest
from sandbox_runtime._envd.agent import _agent_zip
from sandbox_runtime._envd.client import EnvdClient, EnvdError, _frame_events
from sandbox_runtime._envd.commands import EnvdCommands
from sandbox_runtime._envd.server import _frames

T = TypeVar("T")


def _connect_envelope(message: dict[str, object]) -> bytes:
    data = json.dumps(message).encode()
    return struct.pack(">BI", 0, len(data)) + data


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """The agent as its start script runs it; its URL and token."""
    home = tmp_path_factory.mktemp("agent")
    (home / "agent.zip").write_bytes(_agent_zip())
    token = secrets.token_urlsafe(24)
    (home / "agent.token").write_text(token)
    port_file = home / "port"
    argv = [sys.executable, "-E", "-s", str(home / "agent.zip"), "--token-file"]
    argv += [str(home / "agent.token"), "--port", "0", "--port-file", str(port_file)]
    process = subprocess.Popen([*argv, "--exec-like"], stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not port_file.exists():
            assert process.poll() is None, "the agent exited"
            assert time.monotonic() < deadline, "the agent never listened"
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port_file.read_text().strip()}", token
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture
def plain(agent: tuple[str, str]) -> Iterator[EnvdClient]:
    """A client as the agent link makes it: process starts on the plain pool, in frames."""
    client = EnvdClient(
        agent[0], sandbox_id="agent", token=agent[1], request_timeout=60, plain_hot_path=True
    )
    yield client
    client.close()


@pytest.fixture
def connect(agent: tuple[str, str]) -> Iterator[EnvdClient]:
    """A client that speaks Connect through httpx, as to the real envd (no frames asked)."""
    client = EnvdClient(agent[0], sandbox_id="agent", token=agent[1], request_timeout=60)
    yield client
    client.close()


def _identity(operation: Callable[[], T], what: str) -> T:
    return operation()


def _commands(client: EnvdClient) -> EnvdCommands:
    return EnvdCommands(
        lambda: client,
        translated=_identity,
        is_alive=lambda: True,
        name="agent",
        start_attempts=1,
        shell="bash",
    )


def _raw_start(url: str, token: str, frames: bool) -> tuple[str, bytes]:
    """One ``Start`` over a bare connection: the answer's content type and body."""
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    headers = {
        "Content-Type": "application/connect+json",
        "Connect-Protocol-Version": "1",
        "X-Access-Token": token,
    }
    if frames:
        headers[_frames.HEADER] = _frames.VERSION
    body = _connect_envelope({"process": {"cmd": "/bin/echo", "args": ["hi"]}, "stdin": False})
    connection.request("POST", "/process.Process/Start", body=body, headers=headers)
    response = connection.getresponse()
    content = response.read()
    connection.close()
    return response.getheader("content-type", ""), content


def test_frames_only_when_asked_for(agent: tuple[str, str]) -> None:
    connect_type, connect_body = _raw_start(*agent, frames=False)
    assert connect_type == "application/connect+json"
    assert b'"stdout":"aGkK"' in connect_body  # base64 of "hi\n", as envd sends it
    frames_type, frames_body = _raw_start(*agent, frames=True)
    assert frames_type == _frames.CONTENT_TYPE
    events = list(_frame_events(iter([frames_body])))
    assert events[0][0] == "start"
    assert events[1:] == [("stdout", b"hi\n"), ("end", (0, "exit status 0"))]


SCRIPT = r"printf '\377\000\376 not utf-8\n'; printf '\200err\n' >&2; exit 3"


def test_frames_and_connect_give_the_same_events(plain: EnvdClient, connect: EnvdClient) -> None:
    def events(client: EnvdClient) -> list[tuple[str, object]]:
        answer = client.start(["/bin/sh", "-c", SCRIPT], envs={}, server_timeout=60)
        return [event for event in answer if event[0] != "start"]

    through_frames = events(plain)
    assert sorted(through_frames, key=repr) == sorted(events(connect), key=repr)
    assert ("stdout", b"\xff\x00\xfe not utf-8\n") in through_frames
    assert ("stderr", b"\x80err\n") in through_frames
    assert through_frames[-1] == ("end", (3, "exit status 3"))


def test_large_binary_output_arrives_exactly(plain: EnvdClient, tmp_path: Path) -> None:
    source = tmp_path / "random.bin"
    source.write_bytes(os.urandom(3_000_000))
    result = _commands(plain).exec(ExecRequest(command=f"cat {source}", cwd="/", timeout=60))
    assert result.exit_code == 0
    assert (
        hashlib.sha256(result.stdout_bytes).digest() == hashlib.sha256(source.read_bytes()).digest()
    )


@pytest.mark.parametrize("size", [0, 10, 70_000, 1_000_000])
def test_files_of_every_size_round_trip_exactly(
    plain: EnvdClient, tmp_path: Path, size: int
) -> None:
    """``/files`` answers: a small body leaves joined with its head, a large one apart."""
    data = os.urandom(size)
    target = str(tmp_path / f"file-{size}.bin")
    plain.write(target, data)
    assert Path(target).read_bytes() == data
    assert plain.read(target) == data


def test_output_caps_hold(plain: EnvdClient) -> None:
    request = ExecRequest(
        command="head -c 2000000 /dev/zero", cwd="/", timeout=60, max_output_bytes=10_000
    )
    result = _commands(plain).exec(request)
    assert result.exit_code == 0
    assert result.stdout_truncated
    assert len(result.stdout_bytes) <= 10_000 + 200  # the cap, plus its truncation note


def test_stdin_env_and_cwd(plain: EnvdClient, tmp_path: Path) -> None:
    data = b"\x00\xffbinary stdin\n"
    request = ExecRequest(
        command='cat; printf "%s %s" "$PWD" "$GREETING" >&2',
        cwd=str(tmp_path),
        env={"GREETING": "hello"},
        timeout=60,
        stdin=data,
    )
    result = _commands(plain).exec(request)
    assert result.exit_code == 0
    assert result.stdout_bytes == data
    assert result.stderr_bytes == f"{tmp_path} hello".encode()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def test_a_timeout_kills_the_whole_tree(plain: EnvdClient, tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    request = ExecRequest(
        command=f"echo before; setsid sleep 300 & echo $! > {pid_file}; wait",
        cwd="/",
        timeout=1,
    )
    began = time.monotonic()
    result = _commands(plain).exec(request)
    assert result.timed_out
    assert result.exit_code == 124
    assert result.stdout_bytes == b"before\n"  # the output so far
    assert time.monotonic() - began < 30
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def test_the_server_deadline_ends_the_stream_with_a_typed_error(plain: EnvdClient) -> None:
    with pytest.raises(EnvdError) as caught:
        list(plain.start(["sleep", "30"], envs={}, server_timeout=0.3))
    assert caught.value.code == "deadline_exceeded"


def test_a_stream_given_up_early_leaves_the_pool_usable(plain: EnvdClient) -> None:
    events = plain.start(["/bin/sh", "-c", "sleep 0.5; echo late"], envs={}, server_timeout=60)
    assert isinstance(events, Generator)
    kind, _pid = next(events)
    assert kind == "start"
    events.close()  # the caller stops reading: the connection is closed, not reused
    result = _commands(plain).exec(ExecRequest(command="echo next", cwd="/", timeout=60))
    assert (result.exit_code, result.stdout_bytes) == (0, b"next\n")


def test_the_decoder_takes_frames_split_anywhere() -> None:
    stream = b"".join(
        [
            _frames.frame(_frames.START, b"42"),
            _frames.frame(_frames.STDOUT, b"\xff" * 70_000),
            _frames.frame(_frames.KEEPALIVE),
            _frames.frame(_frames.STDERR, b"e"),
            _frames.frame(_frames.END, b'{"exitCode":2,"status":"exit status 2"}'),
            _frames.close(),
        ]
    )
    expected = [
        ("start", 42),
        ("stdout", b"\xff" * 70_000),
        ("stderr", b"e"),
        ("end", (2, "exit status 2")),
    ]
    for size in (1, 7, 4096, len(stream)):
        pieces = (stream[i : i + size] for i in range(0, len(stream), size))
        assert list(_frame_events(pieces)) == expected


def test_the_decoder_raises_the_closing_error() -> None:
    stream = _frames.frame(_frames.START, b"7") + _frames.close(
        {"code": "deadline_exceeded", "message": "context deadline exceeded"}
    )
    events = _frame_events(iter([stream]))
    assert next(events) == ("start", 7)
    with pytest.raises(EnvdError) as caught:
        next(events)
    assert caught.value.code == "deadline_exceeded"
