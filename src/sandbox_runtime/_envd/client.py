"""Our own client of envd, the daemon in every AGS (and e2b) sandbox: processes and files.

envd speaks plain HTTP for files (``GET``/``POST /files``, ``GET /health``) and the Connect
protocol with the JSON codec for its ``process.Process`` and ``filesystem.Filesystem``
services (unary calls, and server streams of length-prefixed envelopes for ``Start``).  We
speak it with httpx rather than through the e2b SDK because the SDK's public command API
starts a login shell, decodes output as UTF-8 and raises on a non-zero exit, and its raw
client is private and changed shape between releases; owning the client makes the ``ags``
backend independent of whatever e2b release a user has installed beside it.

Retries (:mod:`sandbox_runtime._core.retry`) happen here, where the answers are seen:

* Idempotent calls (health, stat, list, make a directory, remove, read, whole-file write,
  signal) are retried on connection errors, timeouts, 429 and 502/503/504, honouring
  ``Retry-After``, within the call's own time bound.
* A process start is retried only when it provably never started: the request was refused
  (429, 5xx before any stream), could not connect, or its connection broke and neither is the
  command among envd's running processes nor has its wrapper left its start marker (checked
  in that order, so a command that ran and ended in between is seen too).  A command that
  started is never run twice.

Errors say what happened: ``envd answered 503 (service unavailable)``, not a guess.

A sandbox that ended is not a passing fault: when the gateway answers 502 "not found", or a
connect to a local agent hangs, the client asks the sandbox's owner (``alive``: the control
plane, the engine) whether it still runs, and a sandbox that does not is not retried.
"""

from __future__ import annotations

import base64
import functools
import json
import ssl
import struct
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO, NoReturn
from urllib.parse import quote

import httpx

from sandbox_runtime._core.retry import RetryPolicy, call_with_retries, retry_after_seconds
from sandbox_runtime.errors import (
    BackendError,
    SandboxError,
    SandboxFileNotFoundError,
    SandboxIsADirectoryError,
    SandboxNoSpaceError,
)

from ._plain_http import PlainHttp
from .server import _frames

__all__ = [
    "ENVD_PORT",
    "EnvdClient",
    "EnvdError",
    "EnvdUnauthorized",
    "ProcessEvent",
    "StartRefused",
    "shared_tls_context",
]

ENVD_PORT = 49983
_FLAG_END_STREAM = 0x02
_RETRY_STATUS = frozenset({429, 502, 503, 504})
_REASONS = {
    429: "rate limited",
    502: "bad gateway",
    503: "service unavailable",
    504: "gateway timeout",
}
#: How often a silent command's stream carries a keepalive, and how long silence may last.
_KEEPALIVE_SECONDS = 15
_STREAM_READ_TIMEOUT = 4 * _KEEPALIVE_SECONDS
_UPLOAD_PIECE = 1 << 20

ProcessEvent = tuple[str, Any]
"""``("start", pid)``, ``("stdout" | "stderr", bytes)`` or ``("end", (exit_code, status))``."""


class EnvdError(BackendError):
    """envd (or the gateway in front of it) refused or failed a call."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        retry_after: float | None = None,
        transient: bool = False,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.retry_after = retry_after
        self.transient = transient


class EnvdUnauthorized(EnvdError):
    """The access token was refused (401): it expired or belongs to another instance."""


class StartRefused(EnvdError):
    """A process start that provably did not start anything: safe to send again."""


@functools.cache
def shared_tls_context() -> ssl.SSLContext:
    """One verifying TLS context for every client of this process.

    httpx builds a fresh context per client unless given one, parsing the CA bundle each
    time: ~17 ms of CPU, which each of 1,000 AGS sandboxes, or each of 64 container sandboxes
    starting at once (their agent clients and readiness probes), would otherwise pay.  A
    context is safe to share between connections and threads.
    """
    return httpx.create_ssl_context()


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, EnvdError):
        return exc.transient
    return isinstance(exc, httpx.TransportError)


def _retry_after(exc: BaseException) -> float | None:
    return exc.retry_after if isinstance(exc, EnvdError) else None


def _error_for(response: httpx.Response, what: str) -> EnvdError:
    """The error an unsuccessful answer means (the body read, the secrets not in it)."""
    status = response.status_code
    code = None
    detail = ""
    try:
        body = json.loads(response.content or b"{}")
        if isinstance(body, dict):
            code = body.get("code") if isinstance(body.get("code"), str) else None
            detail = str(body.get("message") or "")
    except ValueError:
        detail = response.text[:200]
    reason = _REASONS.get(status, response.reason_phrase or "error")
    message = f"{what}: envd answered {status} ({reason})" + (f": {detail}" if detail else "")
    kind: type[EnvdError] = EnvdUnauthorized if status == 401 else EnvdError
    return kind(
        message,
        status=status,
        code=code,
        retry_after=retry_after_seconds(response.headers.get("retry-after")),
        transient=status in _RETRY_STATUS,
    )


def _says_not_found(error: EnvdError) -> bool:
    """A gateway's 502 naming the sandbox not found: it ended, or its route is not there yet."""
    return error.status == 502 and "not found" in str(error).lower()


def _mapped(error: EnvdError, path: str) -> SandboxError | None:
    """File-level errors as the library's own types; None when ``error`` has none.

    None rather than ``error`` itself: ``raise error from error`` would make the error its
    own cause, and a walk down the chain of causes would never end.
    """
    if error.status == 404 or error.code == "not_found":
        return SandboxFileNotFoundError(f"no such file or directory in the sandbox: {path}")
    text = str(error).lower()
    if error.status == 400 and "directory" in text:
        return SandboxIsADirectoryError(f"is a directory: {path}")
    if error.status == 507:
        return SandboxNoSpaceError(f"no space left in the sandbox writing {path}: {error}")
    return None


def _raise_mapped(error: EnvdError, path: str) -> NoReturn:
    """Raise ``error`` as :func:`_mapped` types it, chained to it, or ``error`` unchanged."""
    mapped = _mapped(error, path)
    if mapped is None:
        raise error
    raise mapped from error


def _envelope(message: dict[str, Any]) -> bytes:
    data = json.dumps(message).encode()
    return struct.pack(">BI", 0, len(data)) + data


class EnvdClient:
    """One instance's envd.  Thread-safe: httpx's client pools connections across threads.

    ``base_url`` is the instance's envd URL (``https://49983-<id>.<domain>``) or one URL for
    every instance that routes by header (an emulator, ``sandbox_url``); ``token`` is the
    data-plane access token, replaceable with :meth:`set_token` when it expires.
    """

    def __init__(
        self,
        base_url: str,
        *,
        sandbox_id: str,
        token: str | None,
        request_timeout: float,
        envd_version: str = "0.5.7",
        policy: RetryPolicy | None = None,
        compress: bool = True,
        plain_hot_path: bool = False,
        alive: Callable[[], bool] | None = None,
        responsive: Callable[[], bool] | None = None,
    ) -> None:
        self.sandbox_id = sandbox_id
        self._alive = alive
        self.request_timeout = request_timeout
        self._octet_upload = tuple(int(p) for p in envd_version.split(".")[:3]) >= (0, 5, 7)
        self._policy = policy or RetryPolicy(attempts=6, max_delay=min(120.0, 4 * request_timeout))
        headers = {"E2b-Sandbox-Id": sandbox_id, "E2b-Sandbox-Port": str(ENVD_PORT)}
        if not compress:
            # On a local link gzip costs far more time than the bytes it saves: envd answers
            # a download gzip-encoded whenever the client accepts it (httpx does by default).
            headers["Accept-Encoding"] = "identity"
        self._client = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers=headers,
            timeout=httpx.Timeout(request_timeout),
            verify=shared_tls_context(),
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
        )
        self._token = token
        # On a plain local link, process starts and whole-file calls skip httpx (_plain_http).
        self._plain: PlainHttp | None = None
        target = httpx.URL(base_url)
        if plain_hot_path and target.scheme == "http" and target.port:
            self._plain = PlainHttp(
                target.host,
                target.port,
                timeout=request_timeout,
                alive=alive,
                responsive=responsive,
            )

    @property
    def token(self) -> str | None:
        """The access token in use (for scrubbing messages; never logged)."""
        return self._token

    def set_token(self, token: str | None) -> None:
        """Use another access token from now on (a refreshed one)."""
        self._token = token

    def close(self) -> None:
        """Close the connection pools."""
        self._client.close()
        if self._plain is not None:
            self._plain.close()

    def close_idle(self) -> None:
        """Close the plain pool's idle connections (the hot path's), keeping the pools."""
        if self._plain is not None:
            self._plain.close_idle()

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = dict(extra or {})
        if self._token:
            headers["X-Access-Token"] = self._token
        return headers

    def _error_for(self, response: httpx.Response, what: str) -> EnvdError:
        """:func:`_error_for`, and a 502 "not found" not transient once the owner confirms it.

        The gateway says "not found" both for a sandbox that ended and for one whose route
        is still being set up; only the owner (``alive``) tells them apart, and only the
        first is final.
        """
        error = _error_for(response, what)
        if _says_not_found(error) and self._alive is not None:
            try:
                ended = not self._alive()
            except Exception:
                ended = False  # the owner cannot tell: the usual retries decide
            if ended:
                error.transient = False
                error.code = "sandbox_gone"
        return error

    def _retried(self, call: Any, description: str) -> Any:
        return call_with_retries(
            call, _transient, description=description, policy=self._policy, retry_after=_retry_after
        )

    # -- unary calls ---------------------------------------------------------------------------

    def _rpc(self, service: str, method: str, message: dict[str, Any], what: str) -> Any:
        target = f"/{service}/{method}"
        body = json.dumps(message).encode()

        def call() -> Any:
            headers = self._headers(
                {"Content-Type": "application/json", "Connect-Protocol-Version": "1"}
            )
            if self._plain is not None:  # unary calls are idempotent: the plain pool may resend
                content = self._plain_call("POST", target, body, headers, what)
                return json.loads(content) if content else {}
            response = self._client.post(target, content=body, headers=headers)
            if response.status_code != 200:
                raise self._error_for(response, what)
            return response.json() if response.content else {}

        return self._retried(call, what)

    def healthy(self) -> bool:
        """True when envd answers ``/health`` (a refused or broken connection is False)."""
        try:
            response = self._retried(lambda: self._checked_health(), f"health of {self.sandbox_id}")
        except (EnvdError, httpx.HTTPError):
            return False
        return bool(response)

    def _checked_health(self) -> bool:
        response = self._client.get("/health", headers=self._headers())
        if response.status_code in _RETRY_STATUS and response.status_code != 502:
            raise self._error_for(response, "health")
        return response.status_code in (200, 204)

    def stat(self, path: str) -> dict[str, Any] | None:
        """Envd's ``EntryInfo`` of ``path`` (not following a final symlink), or ``None``."""
        try:
            answer = self._rpc("filesystem.Filesystem", "Stat", {"path": path}, f"stat {path}")
        except EnvdError as exc:
            if exc.status == 404 or exc.code == "not_found":
                return None
            raise
        entry = answer.get("entry")
        return entry if isinstance(entry, dict) else None

    def list_dir(self, path: str) -> list[dict[str, Any]]:
        """The entries of a directory (depth 1)."""
        try:
            answer = self._rpc(
                "filesystem.Filesystem", "ListDir", {"path": path, "depth": 1}, f"list {path}"
            )
        except EnvdError as exc:
            _raise_mapped(exc, path)
        entries = answer.get("entries") or []
        return [entry for entry in entries if isinstance(entry, dict)]

    def make_dir(self, path: str) -> None:
        """Create a directory and its parents; one that exists is fine."""
        try:
            self._rpc("filesystem.Filesystem", "MakeDir", {"path": path}, f"make directory {path}")
        except EnvdError as exc:
            if exc.status == 409 or exc.code == "already_exists":
                return
            raise

    def remove(self, path: str) -> None:
        """Remove a file or a directory tree; a missing path is fine (as envd's remove)."""
        try:
            self._rpc("filesystem.Filesystem", "Remove", {"path": path}, f"remove {path}")
        except EnvdError as exc:
            if exc.status == 404 or exc.code == "not_found":
                return
            raise

    def processes(self) -> list[list[str]]:
        """The command line (``cmd`` then ``args``) of every process envd started and runs."""
        answer = self._rpc("process.Process", "List", {}, "list processes")
        found = []
        for process in answer.get("processes") or []:
            config = process.get("config") or {}
            found.append([str(config.get("cmd", "")), *map(str, config.get("args") or [])])
        return found

    def signal_kill(self, pid: int) -> bool:
        """SIGKILL one process envd started (False when envd no longer knows it)."""
        try:
            self._rpc(
                "process.Process",
                "SendSignal",
                {"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"},
                f"kill {pid}",
            )
        except EnvdError as exc:
            if exc.status == 404 or exc.code == "not_found":
                return False
            raise
        return True

    # -- files -------------------------------------------------------------------------------

    def read(self, path: str) -> bytes:
        """A whole file's bytes."""

        def call() -> bytes:
            target = f"/files?path={quote(path)}"
            if self._plain is not None:
                return self._plain_call("GET", target, None, self._headers(), f"read {path}")
            response = self._client.get(target, headers=self._headers())
            if response.status_code != 200:
                raise self._error_for(response, f"read {path}")
            return response.content

        try:
            data: bytes = self._retried(call, f"read {path}")
        except EnvdError as exc:
            _raise_mapped(exc, path)
        return data

    def read_into(self, path: str, sink: BinaryIO) -> None:
        """A whole file's bytes written to ``sink`` as they arrive (never all in memory).

        Retried only while nothing was written: a transfer that broke halfway is an error.
        """
        written = 0

        def call() -> None:
            nonlocal written
            with self._client.stream(
                "GET", f"/files?path={quote(path)}", headers=self._headers()
            ) as response:
                if response.status_code != 200:
                    response.read()
                    raise self._error_for(response, f"read {path}")
                for piece in response.iter_bytes(_UPLOAD_PIECE):
                    sink.write(piece)
                    written += len(piece)

        def transient(exc: BaseException) -> bool:
            return written == 0 and _transient(exc)

        try:
            call_with_retries(
                call,
                transient,
                description=f"read {path}",
                policy=self._policy,
                retry_after=_retry_after,
            )
        except EnvdError as exc:
            _raise_mapped(exc, path)

    def write(self, path: str, data: bytes) -> None:
        """Create or replace a file (parents created); repeating it gives the same file."""

        def pieces() -> Iterator[bytes]:
            # Sent a megabyte at a time with a declared length: the HTTP layer never joins
            # the whole body into another copy.
            view = memoryview(data)
            for start in range(0, len(view), _UPLOAD_PIECE):
                yield bytes(view[start : start + _UPLOAD_PIECE])

        def call() -> None:
            if self._plain is not None and self._octet_upload:
                headers = self._headers({"Content-Type": "application/octet-stream"})
                self._plain_call("POST", f"/files?path={quote(path)}", data, headers, what)
                return
            if self._octet_upload:
                response = self._client.post(
                    f"/files?path={quote(path)}",
                    content=pieces(),
                    headers=self._headers(
                        {
                            "Content-Type": "application/octet-stream",
                            "Content-Length": str(len(data)),
                        }
                    ),
                )
            else:
                response = self._client.post(
                    f"/files?path={quote(path)}",
                    files={"file": (path, data, "application/octet-stream")},
                    headers=self._headers(),
                )
            if response.status_code != 200:
                raise self._error_for(response, what)

        what = f"write {path}"
        try:
            self._retried(call, what)
        except EnvdError as exc:
            _raise_mapped(exc, path)

    def _plain_call(
        self, method: str, target: str, body: bytes | None, headers: dict[str, str], what: str
    ) -> bytes:
        assert self._plain is not None
        status, answer_headers, content = self._plain.request(
            method, target, body=body, headers=headers
        )
        if status != 200:
            raise self._error_for(
                httpx.Response(status, headers=answer_headers, content=content), what
            )
        return content

    # -- processes ---------------------------------------------------------------------------

    def start(
        self,
        argv: list[str],
        *,
        envs: dict[str, str],
        server_timeout: float | None,
    ) -> Iterator[ProcessEvent]:
        """Start ``argv`` at ``/`` and yield its events as they arrive.

        Raises :class:`StartRefused` when envd (or its gateway) refused the start, so the
        caller may send it again; any other failure may have happened after the start.
        """
        body = _envelope(
            {
                "process": {"cmd": argv[0], "args": argv[1:], "envs": envs, "cwd": "/"},
                "stdin": False,
            }
        )
        headers = self._headers(
            {
                "Content-Type": "application/connect+json",
                "Connect-Protocol-Version": "1",
                "Keepalive-Ping-Interval": str(_KEEPALIVE_SECONDS),
            }
        )
        if server_timeout is not None:
            headers["Connect-Timeout-Ms"] = str(int(server_timeout * 1000))
        if self._plain is not None:
            # Our own agent on the local link: ask for its lean frames (envd ignores this).
            headers[_frames.HEADER] = _frames.VERSION
            yield from self._plain_start(body, headers)
            return
        request = self._client.build_request(
            "POST",
            "/process.Process/Start",
            content=body,
            headers=headers,
            timeout=httpx.Timeout(self.request_timeout, read=_STREAM_READ_TIMEOUT),
        )
        try:
            response = self._client.send(request, stream=True)
        except httpx.ConnectError as exc:
            raise StartRefused(f"start: cannot connect to envd: {exc}", transient=True) from exc
        try:
            if response.status_code != 200:
                response.read()
                raise _start_refused(self._error_for(response, "start"))
            yield from _events(response.iter_raw())
        finally:
            response.close()

    def _plain_start(self, body: bytes, headers: dict[str, str]) -> Iterator[ProcessEvent]:
        """:meth:`start` on the plain pool: the same answers and errors."""
        assert self._plain is not None
        try:
            answer = self._plain.open_stream(
                "/process.Process/Start",
                body=body,
                headers=headers,
                read_timeout=_STREAM_READ_TIMEOUT,
            )
        except httpx.ConnectError as exc:
            raise StartRefused(f"start: cannot connect to envd: {exc}", transient=True) from exc
        try:
            if answer.status != 200:
                content = b"".join(answer.pieces())
                failed = httpx.Response(answer.status, headers=answer.headers, content=content)
                raise _start_refused(self._error_for(failed, "start"))
            if answer.headers.get("content-type", "").startswith(_frames.CONTENT_TYPE):
                yield from _frame_events(answer.pieces())
            else:
                yield from _events(answer.pieces())
        finally:
            answer.close()


def _start_refused(error: EnvdError) -> EnvdError:
    """A start's refusal: safe to send again, unless the token was refused."""
    if isinstance(error, EnvdUnauthorized):
        return error
    return StartRefused(
        str(error),
        status=error.status,
        code=error.code,
        retry_after=error.retry_after,
        transient=error.transient,
    )


def _events(chunks: Iterator[bytes]) -> Iterator[ProcessEvent]:
    """Decode a ``Start`` stream's envelopes into process events."""
    buffer = bytearray()
    for chunk in chunks:
        buffer += chunk
        while len(buffer) >= 5:
            flags, length = struct.unpack(">BI", bytes(buffer[:5]))
            if len(buffer) < 5 + length:
                break
            message = json.loads(bytes(buffer[5 : 5 + length]) or b"{}")
            del buffer[: 5 + length]
            if flags & _FLAG_END_STREAM:
                # Read the body's own end too: a response read to its end hands its
                # connection back to the pool; one closed early costs a new connection.
                for _ in chunks:
                    pass
                _raise_stream_error(message)
                return
            event = message.get("event") or {}
            if "start" in event:
                yield "start", int(event["start"].get("pid", 0))
            elif "data" in event:
                data = event["data"]
                for stream in ("stdout", "stderr"):
                    if data.get(stream):
                        yield stream, base64.b64decode(data[stream])
            elif "end" in event:
                end = event["end"]
                yield "end", (int(end.get("exitCode", 0)), str(end.get("status", "")))
            # keepalive events carry nothing


_FRAME_HEAD = struct.Struct(">BI")
_FRAME_OUTPUT = {_frames.STDOUT: "stdout", _frames.STDERR: "stderr"}


def _frame_events(chunks: Iterator[bytes]) -> Iterator[ProcessEvent]:
    """Decode a ``Start`` stream of the agent's frames (:mod:`.server._frames`) into events.

    The same events and errors as :func:`_events` gives for the Connect stream; output comes
    out as the agent read it, sliced from what arrived without decoding.
    """
    pending = b""
    for chunk in chunks:
        data = pending + chunk if pending else chunk
        offset, size = 0, len(data)
        while size - offset >= 5:
            kind, length = _FRAME_HEAD.unpack_from(data, offset)
            if size - offset - 5 < length:
                break
            payload = data[offset + 5 : offset + 5 + length]
            offset += 5 + length
            if kind in _FRAME_OUTPUT:
                if payload:
                    yield _FRAME_OUTPUT[kind], payload
            elif kind == _frames.START:
                yield "start", int(payload or b"0")
            elif kind == _frames.END:
                end = json.loads(payload or b"{}")
                yield "end", (int(end.get("exitCode", 0)), str(end.get("status", "")))
            elif kind == _frames.CLOSE:
                for _ in chunks:  # to the body's end: the connection goes back to the pool
                    pass
                _raise_stream_error(json.loads(payload or b"{}"))
                return
            # keepalive (and a kind this client does not know) carries nothing for it
        pending = data[offset:]


def _raise_stream_error(closing: Any) -> None:
    """Raise the error a command stream's closing message carries, if it carries one."""
    error = closing.get("error") if isinstance(closing, dict) else None
    if error:
        raise EnvdError(
            f"the command's stream ended with {error.get('code')}: {error.get('message', '')}",
            code=str(error.get("code")),
        )
