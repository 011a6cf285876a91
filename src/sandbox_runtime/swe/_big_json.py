"""Parse one huge JSON line from a file without holding its text beside its value.

``json.loads`` needs a line's whole text and builds each string beside it, so a row with a
300 MiB string costs 600 MiB while it is read.  Here the line is read in 1 MiB chunks: a
string longer than :data:`BIG_STRING` bytes is decoded piece by piece straight into its final
``str`` (CPython grows a string that nothing else references in place), and everything else,
the row's small skeleton, is parsed by ``json`` with a placeholder where each big string was.
The value equals ``json.loads`` of the line.

A piece is cut only where no escape sequence, surrogate pair or UTF-8 character can straddle
the cut; where this reader finds no such place, or the line is not valid JSON or UTF-8, it
raises :class:`NotStreamable` and the caller parses the line the ordinary way (which also
words the error as for any other line).
"""

from __future__ import annotations

import json
import secrets
from typing import IO, Any

__all__ = ["BIG_STRING", "NotStreamable", "load_big_line"]

#: Strings longer than this (raw bytes) are decoded piece by piece.
BIG_STRING = 1 << 20
_CHUNK = 1 << 20
#: An escape is at most 6 bytes (``\\uXXXX``), a surrogate pair 12: a cut with no backslash
#: in the 12 bytes before it ends on whole escapes and never splits a pair.
_ESCAPE_SPAN = 12
#: How far back from a piece's end a safe cut is looked for before giving up.
_CUT_SEARCH = 64 * 1024
_BACKSLASH = ord("\\")


class NotStreamable(Exception):
    """The line cannot be read this way; parse it whole."""


def _decode(raw: bytes | bytearray) -> str:
    """The text of raw JSON string content (escapes resolved); NotStreamable if invalid."""
    try:
        value = json.loads('"' + bytes(raw).decode("utf-8") + '"')
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError alike
        raise NotStreamable(str(exc)) from None
    if not isinstance(value, str):  # pragma: no cover - a quoted token is always a string
        raise NotStreamable("not a string")
    return value


def _may_pair(raw: bytearray, at: int) -> bool:
    """True when the escape at ``at`` may be the second half of a surrogate pair (or unknown)."""
    if raw[at + 1 : at + 2] != b"u":
        return at + 1 >= len(raw)  # a backslash at the very end: its escape is not known yet
    head = bytes(raw[at + 2 : at + 4]).lower()
    return len(head) < 2 or (head[:1] == b"d" and head[1:2] in b"cdef")


def _safe_cut(raw: bytearray) -> int:
    """The longest prefix of ``raw`` that ends on a whole escape and a whole character.

    Either a character's first byte with no escape in the 12 bytes before it, or the start
    of an escape that cannot complete a surrogate pair; looked for in the last
    :data:`_CUT_SEARCH` bytes, 0 when there is none.
    """
    floor = max(0, len(raw) - _CUT_SEARCH)
    cut = len(raw) - 1  # the byte after the cut is known: a character's first byte or not
    while cut > floor and raw[cut] & 0xC0 == 0x80:  # inside a UTF-8 character
        cut -= 1
    if cut > floor and raw.rfind(b"\\", max(0, cut - _ESCAPE_SPAN), cut) == -1:
        return cut
    end = len(raw)
    while (at := raw.rfind(b"\\", floor, end)) > 0:
        before = bytes(raw[max(0, at - _ESCAPE_SPAN) : at])
        run = _trailing_backslashes(before)  # backslashes just before this one
        if run < len(before) or at <= _ESCAPE_SPAN:  # the run's start is seen: parity known
            if run % 2:  # this one is escaped: ``\\`` starts just before it
                return at - 1 if at > 1 else 0
            if not _may_pair(raw, at):  # an escape starts here, not a pair's second half
                return at
        end = at - run if run else at
    return 0


def _trailing_backslashes(segment: bytes) -> int:
    count = 0
    while count < len(segment) and segment[len(segment) - 1 - count] == _BACKSLASH:
        count += 1
    return count


class _Chunks:
    """The line's bytes, one chunk at a time."""

    def __init__(self, handle: IO[bytes], size: int) -> None:
        self.handle = handle
        self.left = size

    def next(self) -> bytes:
        """The next chunk; empty at the end of the line."""
        if self.left <= 0:
            return b""
        chunk = self.handle.read(min(_CHUNK, self.left))
        if not chunk:
            raise NotStreamable("the file ended early")
        self.left -= len(chunk)
        return chunk


def _read_string(chunks: _Chunks, data: bytes, pos: int) -> tuple[bytes | str, bytes, int]:
    """One string from just after its opening quote: its raw bytes while small, else its text.

    Returns the string, the chunk being read and the position after the closing quote.  A big
    string's text grows in the local ``text``, which CPython extends in place.
    """
    raw = bytearray()
    text: str | None = None
    trailing = 0  # backslashes at the end of the content so far: odd escapes the next quote
    while True:
        if pos >= len(data):
            data, pos = chunks.next(), 0
            if not data:
                raise NotStreamable("a string is not closed")
        quote = data.find(b'"', pos)
        segment = data[pos : len(data) if quote == -1 else quote]
        raw += segment
        counted = _trailing_backslashes(segment)
        trailing = trailing + counted if counted == len(segment) else counted
        if text is None and len(raw) > BIG_STRING:
            text = ""
        if text is not None and len(raw) >= _CHUNK:
            cut = _safe_cut(raw)
            if cut:
                text += _decode(raw[:cut])
                del raw[:cut]
            elif len(raw) > 8 * _CHUNK:  # escapes with no gap to cut at: parse it whole
                raise NotStreamable("no place to cut a string safely")
        if quote == -1:
            pos = len(data)
            continue
        pos = quote + 1
        if trailing % 2:  # an escaped quote belongs to the string
            raw += b'"'
            trailing = 0
            continue
        if text is None:
            return bytes(raw), data, pos
        text += _decode(raw)
        return text, data, pos


def _put_back(value: Any, places: dict[str, str]) -> Any:
    if isinstance(value, str):
        return places.get(value, value)
    if isinstance(value, dict):
        return {_put_back(k, places): _put_back(v, places) for k, v in value.items()}
    if isinstance(value, list):
        return [_put_back(item, places) for item in value]
    return value


def load_big_line(handle: IO[bytes], start: int, size: int) -> Any:
    """The JSON value of the ``size`` bytes at ``start`` in ``handle`` (one line).

    Raises :class:`NotStreamable` where the line must be parsed whole instead.
    """
    handle.seek(start)
    chunks = _Chunks(handle, size)
    token = secrets.token_hex(8)
    skeleton = bytearray()
    bigs: list[str] = []
    data, pos = chunks.next(), 0
    while data:
        quote = data.find(b'"', pos)
        if quote == -1:
            skeleton += data[pos:]
            data, pos = chunks.next(), 0
            continue
        skeleton += data[pos:quote]
        value, data, pos = _read_string(chunks, data, quote + 1)
        if isinstance(value, bytes):
            skeleton += b'"' + value + b'"'
        else:
            skeleton += f'"\\u0000{token}:{len(bigs)}"'.encode()
            bigs.append(value)
            del value
    try:
        parsed = json.loads(skeleton.decode("utf-8"))
    except ValueError as exc:
        raise NotStreamable(str(exc)) from None
    return _put_back(parsed, {f"\x00{token}:{index}": big for index, big in enumerate(bigs)})
