"""Long answers: watch streams and pod logs, written as HTTP/1.1 chunked responses.

A watch (``?watch=true``) is a response that does not end: one JSON ``WatchEvent`` per chunk
(``{"type": "ADDED"|"MODIFIED"|"DELETED"|"ERROR", "object": {...}}``), as the API server
sends it, until ``timeoutSeconds`` passes (default 30 to 60 minutes on a real server; 30 here)
or the client leaves.  Without a ``resourceVersion`` (or with ``0``) it starts with an ADDED
event per existing object; from a version it replays what changed after it, or sends an
``ERROR`` event with a ``410 Expired`` Status when that version is no longer kept.  With
``sendInitialEvents=true`` (kubectl >= 1.32 watches that way) the existing objects come first
whatever the version, then a ``BOOKMARK`` annotated ``k8s.io/initial-events-end``.

Pod logs honour ``tailLines``, ``sinceSeconds`` / ``sinceTime``, ``timestamps`` (RFC 3339
with nanoseconds, as the kubelet writes them), ``limitBytes`` and ``follow`` (the answer goes
on until the container ends).
"""

from __future__ import annotations

import calendar
import copy
import json
import select
import socket
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, BinaryIO

from ._changes import Change, ChangeLog
from ._status import ApiError, bad_request

__all__ = ["ChunkedWriter", "LogOptions", "serve_watch"]

#: How long a watch lasts when the client names no ``timeoutSeconds``.
DEFAULT_WATCH_SECONDS = 1800.0


class ChunkedWriter:
    """A ``200`` answer of unknown length (``Transfer-Encoding: chunked``)."""

    def __init__(self, handler: Any, content_type: str) -> None:
        self._out: BinaryIO = handler.wfile
        handler.send_response(200)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Transfer-Encoding", "chunked")
        handler.send_header("Cache-Control", "no-cache, private")
        handler.end_headers()
        self._out.flush()

    def write(self, data: bytes) -> None:
        """Send one chunk now (``OSError`` once the client has gone)."""
        if data:
            self._out.write(b"%x\r\n%s\r\n" % (len(data), data))
            self._out.flush()

    def end(self) -> None:
        """The last chunk: the answer is complete and the connection can carry another."""
        self._out.write(b"0\r\n\r\n")
        self._out.flush()


def _event(kind: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


def _expired(version: int) -> dict[str, Any]:
    return ApiError(
        410, "Expired", f"too old resource version: {version} (the emulator keeps fewer changes)"
    ).body()


def watch_deadline(query: dict[str, list[str]]) -> float:
    """The monotonic time a watch ends, from ``timeoutSeconds``."""
    raw = query.get("timeoutSeconds", [""])[0]
    try:
        seconds = float(raw) if raw else DEFAULT_WATCH_SECONDS
    except ValueError as exc:
        raise bad_request(f"invalid timeoutSeconds {raw!r}") from exc
    return time.monotonic() + max(0.0, seconds)


def serve_watch(
    handler: Any,
    changes: ChangeLog,
    resource: str,
    matches: Callable[[dict[str, Any]], bool],
    initial: Iterable[dict[str, Any]],
    start: int,
    deadline: float,
    closed: threading.Event,
    initial_end: str | None = None,
    render: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> None:
    """Stream changes of ``resource`` after version ``start`` that ``matches`` accepts.

    ``initial`` objects (already selected) go first as ADDED, followed, when ``initial_end``
    names the object kind, by the ``BOOKMARK`` event annotated ``k8s.io/initial-events-end``
    that a ``sendInitialEvents`` watch waits for.  Ends at ``deadline``, when the emulator
    closes, or when the client has gone (a write fails).  ``render`` turns each object into
    what is sent (a one-row ``Table`` for ``kubectl get -w``).
    """
    shown = render or (lambda obj: obj)
    writer = ChunkedWriter(handler, "application/json")
    try:
        for obj in initial:
            writer.write(_event("ADDED", shown(obj)))
        if initial_end is not None:
            bookmark = {
                "kind": initial_end,
                "apiVersion": "v1",
                "metadata": {
                    "resourceVersion": str(start),
                    "annotations": {"k8s.io/initial-events-end": "true"},
                },
            }
            writer.write(_event("BOOKMARK", bookmark))
        while not closed.is_set():
            batch = changes.since(start)
            if batch is None:
                writer.write(_event("ERROR", _expired(start)))
                break
            for change in batch:
                start = change.version
                if change.resource == resource:
                    event = _as_seen(change, matches)
                    if event is not None:
                        writer.write(_event(event[0], shown(event[1])))
            remaining = deadline - time.monotonic()
            if remaining <= 0 or _hung_up(handler.connection):
                break
            if not batch:
                changes.wait(start, min(remaining, 1.0))
        writer.end()
    except OSError:
        handler.close_connection = True


def _hung_up(sock: socket.socket) -> bool:
    """True when a watch's client has closed its side.

    A client sends nothing while it watches, so a readable socket means end of stream (or a
    TLS close); without this, a watch nobody reads would hold its thread until its timeout.
    """
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def _as_seen(
    change: Change, matches: Callable[[dict[str, Any]], bool]
) -> tuple[str, dict[str, Any]] | None:
    """The event a watch with this selector sees for ``change`` (``None``: not sent).

    As kube-apiserver's watch cache decides it: an object entering the selection is ADDED, one
    leaving it is DELETED (the object as it last matched, at the new version), and a change
    outside it is not sent.
    """
    now = change.type != "DELETED" and matches(change.obj)
    before = change.previous is not None and matches(change.previous)
    if change.type == "DELETED":
        return ("DELETED", change.obj) if before or matches(change.obj) else None
    if now:
        return ("MODIFIED" if before else "ADDED", change.obj)
    if before and change.previous is not None:
        gone = copy.deepcopy(change.previous)
        gone["metadata"]["resourceVersion"] = str(change.version)
        return "DELETED", gone
    return None


class LogOptions:
    """The query of ``pods/{name}/log``, read the way the API server reads it."""

    def __init__(self, query: dict[str, list[str]]) -> None:
        def first(name: str) -> str:
            return query.get(name, [""])[0]

        def flag(name: str) -> bool:
            return first(name).lower() in ("true", "1")

        def number(name: str) -> int | None:
            raw = first(name)
            if not raw:
                return None
            try:
                value = int(raw)
            except ValueError as exc:
                raise bad_request(f"invalid {name} {raw!r}: must be an integer") from exc
            if value < (0 if name == "tailLines" else 1):
                raise bad_request(f"invalid {name} {value}: must be greater than 0")
            return value

        self.follow = flag("follow")
        self.timestamps = flag("timestamps")
        self.previous = flag("previous")
        self.tail_lines = number("tailLines")
        self.limit_bytes = number("limitBytes")
        since_seconds = number("sinceSeconds")
        since_time = first("sinceTime")
        if since_seconds is not None and since_time:
            raise bad_request("at most one of sinceTime or sinceSeconds may be specified")
        self.since: int | None = None
        if since_seconds is not None:
            self.since = int(time.time()) - since_seconds
        elif since_time:
            try:
                parsed = time.strptime(since_time.split(".")[0].rstrip("Z"), "%Y-%m-%dT%H:%M:%S")
            except ValueError as exc:
                raise bad_request(f"invalid sinceTime {since_time!r}: RFC 3339 expected") from exc
            self.since = calendar.timegm(parsed)

    def docker_arguments(self) -> dict[str, Any]:
        """Keyword arguments of docker-py's ``APIClient.logs``."""
        arguments: dict[str, Any] = {
            "stdout": True,
            "stderr": True,
            "timestamps": self.timestamps,
            "tail": "all" if self.tail_lines is None else self.tail_lines,
        }
        if self.since is not None:
            arguments["since"] = self.since
        return arguments

    def limit(self, chunks: Iterable[bytes]) -> Iterable[bytes]:
        """``chunks`` cut at ``limitBytes``."""
        left = self.limit_bytes
        for chunk in chunks:
            if left is None:
                yield chunk
                continue
            yield chunk[:left]
            left -= min(left, len(chunk))
            if left == 0:
                return
