"""Bounded capture of a command's output stream.

Agents run commands that print without end (``yes``, a test suite in a loop); holding all of
it would exhaust memory and flood a model's context.  The first and last halves of the cap
are what people read (the command's start and its final error or summary), so those are kept.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["HeadTailBuffer"]


class HeadTailBuffer:
    """Keeps the first ``limit // 2`` and the last ``limit - limit // 2`` bytes written to it."""

    __slots__ = ("_head", "_head_limit", "_on_write", "_tail", "_tail_limit", "_total")

    def __init__(self, limit: int, on_write: Callable[[bytes], None] | None = None) -> None:
        if limit <= 0:
            raise ValueError("limit must be positive")
        self._head_limit = limit // 2
        self._tail_limit = limit - self._head_limit
        self._head = bytearray()
        self._tail = bytearray()
        self._total = 0
        self._on_write = on_write

    def write(self, data: bytes) -> None:
        """Append a chunk; cost is proportional to the chunk, never to the total.

        ``on_write`` (streaming) sees every chunk as it arrives, kept or not.
        """
        if self._on_write is not None and data:
            self._on_write(bytes(data))
        self._total += len(data)
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data:
            self._tail += data
            excess = len(self._tail) - self._tail_limit
            if excess > 0:
                del self._tail[:excess]

    @property
    def total(self) -> int:
        """Bytes written in all, kept or not."""
        return self._total

    @property
    def truncated(self) -> bool:
        """True when some bytes were dropped."""
        return self._total > len(self._head) + len(self._tail)

    def getvalue(self) -> bytes:
        """The kept bytes, with a marker line where bytes were dropped."""
        if not self.truncated:
            return bytes(self._head + self._tail)
        omitted = self._total - len(self._head) - len(self._tail)
        marker = f"\n[... sandbox-runtime: {omitted} bytes omitted ...]\n".encode()
        return bytes(self._head) + marker + bytes(self._tail)
