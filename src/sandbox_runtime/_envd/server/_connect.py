"""The Connect protocol with the JSON codec, as envd speaks it to the e2b SDK.

Unary calls carry one JSON message each way (``application/json``); server streams carry
length-prefixed envelopes (``application/connect+json``): one flag byte, a 4-byte big-endian
length, then the JSON.  The last envelope of a stream has flag ``0x02`` and holds either
``{}`` or ``{"error": {...}}``.  Errors of unary calls are an HTTP status plus
``{"code", "message"}``; streams always answer 200 and put the error in the last envelope.
"""

from __future__ import annotations

import base64
import json
import struct
from typing import Any

__all__ = [
    "HTTP_STATUS",
    "ConnectError",
    "b64",
    "end_of_stream",
    "envelope",
    "parse_envelopes",
    "unb64",
]

FLAG_END_STREAM = 0x02

#: Connect error code -> HTTP status of a unary error response.
HTTP_STATUS = {
    "canceled": 499,
    "unknown": 500,
    "invalid_argument": 400,
    "deadline_exceeded": 504,
    "not_found": 404,
    "already_exists": 409,
    "permission_denied": 403,
    "resource_exhausted": 429,
    "failed_precondition": 400,
    "aborted": 409,
    "out_of_range": 400,
    "unimplemented": 501,
    "internal": 500,
    "unavailable": 503,
    "data_loss": 500,
    "unauthenticated": 401,
}


class ConnectError(Exception):
    """An error answered to the client with a Connect code (``not_found``, ...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def status(self) -> int:
        """The HTTP status of this error on a unary call."""
        return HTTP_STATUS.get(self.code, 500)

    def body(self) -> dict[str, Any]:
        """The JSON error object."""
        return {"code": self.code, "message": self.message}


def envelope(message: dict[str, Any], flags: int = 0) -> bytes:
    """One stream envelope holding ``message`` as compact JSON."""
    data = json.dumps(message, separators=(",", ":")).encode()
    return struct.pack(">BI", flags, len(data)) + data


def end_of_stream(error: ConnectError | None = None) -> bytes:
    """The closing envelope of a server stream."""
    return envelope({"error": error.body()} if error else {}, FLAG_END_STREAM)


def parse_envelopes(data: bytes) -> list[tuple[int, dict[str, Any]]]:
    """Split a request body of envelopes into ``(flags, message)`` pairs."""
    messages = []
    offset = 0
    while offset + 5 <= len(data):
        flags, length = struct.unpack(">BI", data[offset : offset + 5])
        offset += 5
        chunk = data[offset : offset + length]
        offset += length
        messages.append((flags, json.loads(chunk) if chunk else {}))
    if offset != len(data):
        raise ConnectError("invalid_argument", "truncated envelope")
    return messages


def b64(data: bytes) -> str:
    """Proto3 JSON form of ``bytes``."""
    return base64.b64encode(data).decode("ascii")


def unb64(text: str) -> bytes:
    """Decode proto3 JSON ``bytes`` (standard or URL-safe alphabet, padding optional)."""
    padded = text + "=" * (-len(text) % 4)
    return base64.b64decode(padded.replace("-", "+").replace("_", "/"))
