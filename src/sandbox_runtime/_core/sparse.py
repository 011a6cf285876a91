"""Sparse files through a tar: holes stay holes, on the wire and on the host's disk.

A sandbox can make a 20 GB file in no time (``truncate -s 20G big``) that takes no disk.
Copied naively it becomes 20 GB of zeros read, sent and written on the host.  So a
download keeps it sparse, as ``cp --sparse`` and ``rsync -S`` do: the packer stores only
the data regions (GNU tar's ``--sparse`` in a sandbox; :class:`SparseWriter` where the
library packs a host tree itself), and the extractor (:func:`write_with_holes`) seeks over
every block of zeros instead of writing it, whatever the packer did.  The host file has the
sandbox file's size and content and takes the disk its data takes.
"""

from __future__ import annotations

import errno
import io
import os
import tarfile
from typing import TYPE_CHECKING, BinaryIO, Protocol

if TYPE_CHECKING:
    from _typeshed import SupportsRead

from sandbox_runtime.errors import SandboxError

__all__ = ["BLOCK", "SparseWriter", "data_segments", "write_with_holes"]

#: Bytes read, compared with zeros and written (or skipped) at a time: bounded memory.
BLOCK = 1 << 20
_ZEROS = bytes(BLOCK)
_USTAR_SIZE_LIMIT = 0o77777777777


class Readable(Protocol):
    """What :func:`write_with_holes` reads from: a tar's file object or an open file."""

    def read(self, size: int, /) -> bytes: ...


def write_with_holes(source: Readable, target: BinaryIO, size: int, what: str) -> None:
    """Copy ``size`` bytes from ``source`` to ``target``'s position, seeking over zero blocks.

    The caller truncates ``target`` to its final size, so trailing holes count too.
    """
    left = size
    while left > 0:
        piece = source.read(min(BLOCK, left))
        if not piece:
            raise tarfile.ReadError(f"unexpected end of data in {what!r}")
        if piece == _ZEROS[: len(piece)]:
            target.seek(len(piece), os.SEEK_CUR)
        else:
            target.write(piece)
        left -= len(piece)


def data_segments(descriptor: int, size: int) -> list[tuple[int, int]] | None:
    """The (offset, length) data regions of a file with holes; ``None`` if it has none.

    Found with ``SEEK_DATA``/``SEEK_HOLE``; where the filesystem cannot tell, the file is
    treated as all data (the extractor still writes its zero blocks as holes).
    """
    segments: list[tuple[int, int]] = []
    offset = 0
    try:
        while offset < size:
            try:
                start = os.lseek(descriptor, offset, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # only a hole up to the end
                    break
                raise
            end = min(os.lseek(descriptor, start, os.SEEK_HOLE), size)
            segments.append((start, end - start))
            offset = end
    except (OSError, AttributeError):  # no SEEK_DATA here: all data
        return None
    finally:
        os.lseek(descriptor, 0, os.SEEK_SET)  # a file read whole reads from its start
    if sum(length for _start, length in segments) >= size:
        return None
    return segments


class _SegmentReader(io.RawIOBase):
    """A file object reading a sparse map block, then the data regions of a file, in order."""

    def __init__(self, head: bytes, descriptor: int, segments: list[tuple[int, int]]) -> None:
        super().__init__()
        self._head = head
        self._descriptor = descriptor
        self._segments = list(segments)

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        pieces: list[bytes] = []
        wanted = size if size >= 0 else BLOCK
        while wanted > 0 and (self._head or self._segments):
            if self._head:
                piece, self._head = self._head[:wanted], self._head[wanted:]
            else:
                start, length = self._segments[0]
                if length == 0:  # the marker segment of a file that is all hole
                    self._segments.pop(0)
                    continue
                piece = os.pread(self._descriptor, min(wanted, length), start)
                if not piece:
                    raise SandboxError("a sparse file shrank while it was packed")
                rest = length - len(piece)
                self._segments[0] = (start + len(piece), rest)
                if rest == 0:
                    self._segments.pop(0)
            pieces.append(piece)
            wanted -= len(piece)
        return b"".join(pieces)


def _sparse_map(segments: list[tuple[int, int]]) -> bytes:
    """GNU's sparse map (format 1.0): the count and each offset and length, in 512-byte blocks."""
    lines = [str(len(segments))] + [str(n) for segment in segments for n in segment]
    text = ("\n".join(lines) + "\n").encode("ascii")
    return text + bytes(-len(text) % tarfile.BLOCKSIZE)


class SparseWriter(tarfile.TarFile):
    """A tar writer that stores files with holes as GNU sparse members (PAX format 1.0).

    Only the data regions are read and written; :mod:`tarfile` and GNU tar read such
    members back with their holes.
    """

    def addfile(self, tarinfo: tarfile.TarInfo, fileobj: SupportsRead[bytes] | None = None) -> None:
        fileno = getattr(fileobj, "fileno", None)
        if fileobj is None or fileno is None or not tarinfo.isreg():
            super().addfile(tarinfo, fileobj)
            return
        descriptor: int = fileno()
        segments = data_segments(descriptor, tarinfo.size)
        if segments is None:
            super().addfile(tarinfo, fileobj)
            return
        if not segments:
            # All hole: as GNU tar does, one empty segment at the end.  With no segment at
            # all, readers take the member for a plain one and look for data never stored.
            segments = [(tarinfo.size, 0)]
        head = _sparse_map(segments)
        stored = len(head) + sum(length for _start, length in segments)
        if stored > _USTAR_SIZE_LIMIT:  # a PAX "size" would override the real size on reading
            super().addfile(tarinfo, fileobj)
            return
        sparse = tarinfo.replace(deep=False)
        sparse.size = stored
        sparse.pax_headers = {
            **tarinfo.pax_headers,
            "GNU.sparse.major": "1",
            "GNU.sparse.minor": "0",
            "GNU.sparse.name": tarinfo.name,
            "GNU.sparse.realsize": str(tarinfo.size),
        }
        super().addfile(sparse, _SegmentReader(head, descriptor, segments))
