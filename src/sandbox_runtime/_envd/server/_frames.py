"""The lean frames of a process stream on the local link: output as read, no base64 or JSON.

The Connect stream of ``process.Process/Start`` puts every 32 KiB of output in a JSON
envelope as base64: the agent encodes it, the client decodes it, and a megabyte of output
costs both ends a third more bytes and two passes each.  A client that runs next to our own
agent (the container backends' agent path) asks for these frames instead with the request
header :data:`HEADER` set to :data:`VERSION`; an agent that knows them answers with content
type :data:`CONTENT_TYPE`, any other server (the real envd of the e2b and ags backends)
ignores the header and answers Connect, and the client reads whichever came.

A frame is one kind byte, a 4-byte big-endian length, then the payload:

* :data:`STDOUT`, :data:`STDERR`, :data:`PTY`: output bytes exactly as read;
* :data:`START`: the pid in ASCII decimal;
* :data:`END`: the process's ``end`` event as JSON (``exitCode``, ``status``, ...);
* :data:`KEEPALIVE`: empty;
* :data:`CLOSE`: the last frame, the JSON of Connect's end of stream (``{}`` or
  ``{"error": {"code", "message"}}``).

Standard library only: it ships in the agent's zip.
"""

from __future__ import annotations

import json
import struct
from typing import Any

__all__ = [
    "CLOSE",
    "CONTENT_TYPE",
    "END",
    "HEADER",
    "KEEPALIVE",
    "OUTPUT_KINDS",
    "PTY",
    "START",
    "STDERR",
    "STDOUT",
    "VERSION",
    "close",
    "encode_event",
    "frame",
]

#: The request header a client sends to ask for frames, and the value that names this format.
HEADER = "x-sandbox-runtime-frames"
VERSION = "1"
#: The content type of an answer in frames (any other answer is Connect).
CONTENT_TYPE = "application/x-sandbox-runtime-frames"

STDOUT = 1
STDERR = 2
PTY = 3
START = 16
END = 17
KEEPALIVE = 18
CLOSE = 127
#: Output stream name -> frame kind.
OUTPUT_KINDS = {"stdout": STDOUT, "stderr": STDERR, "pty": PTY}

_HEAD = struct.Struct(">BI")


def frame(kind: int, payload: bytes = b"") -> bytes:
    """One frame."""
    return _HEAD.pack(kind, len(payload)) + payload


def encode_event(event: dict[str, Any]) -> bytes:
    """The frames of one process event (``data``, ``end`` or ``keepalive``)."""
    if "data" in event:
        return b"".join(
            frame(OUTPUT_KINDS[name], bytes(chunk)) for name, chunk in event["data"].items()
        )
    if "end" in event:
        return frame(END, json.dumps(event["end"], separators=(",", ":")).encode())
    if "start" in event:
        return frame(START, str(int(event["start"]["pid"])).encode("ascii"))
    return frame(KEEPALIVE)


def close(error: dict[str, Any] | None = None) -> bytes:
    """The last frame: Connect's end-of-stream message, with the error if there was one."""
    return frame(CLOSE, json.dumps({"error": error} if error else {}).encode())
