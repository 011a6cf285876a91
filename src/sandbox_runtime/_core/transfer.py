"""Moving host files and directories in and out of a sandbox with bounded client memory.

A backend's primitives move whole files (``write_file``/``read_file``) or whole tars; a
200 MB repository or dataset would sit in the client's memory two or three times over.  So
anything larger than :data:`CHUNK` travels in pieces: an upload writes the pieces as part
files in the sandbox and joins them there with ``cat`` (directories travel as a tar spooled
to a host temporary file, then extracted in the sandbox); a download packs the source in the
sandbox, splits it there, and reads the pieces one after the other into a host temporary file
that is then extracted.  Client memory stays around a few chunks, whatever the size; the cost
is some commands and a temporary copy on the sandbox's disk, both removed afterwards.

Written once over the primitives, for every backend; one whose files are host files (local)
overrides the whole move with direct copies.
"""

from __future__ import annotations

import os
import posixpath
import shlex
import tarfile
import tempfile
import uuid
from pathlib import Path
from typing import BinaryIO, Protocol

from sandbox_runtime._core import archive as _archive
from sandbox_runtime._core.request import ExecRequest
from sandbox_runtime._core.results import ExecResult
from sandbox_runtime.errors import BackendError, SandboxError, SandboxFileNotFoundError

__all__ = ["CHUNK", "Primitives", "copy_in", "copy_out", "unpack"]

#: Bytes moved per primitive call.  Small enough that a backend's own copies of a piece
#: (a tar around it, a request body) stay well under the 64 MB a transfer may add.
CHUNK = 8 * 1024 * 1024
_STAGING = "/tmp/.sandbox-runtime/transfers"
_MISSING = 44
#: GNU tar stores only the data of a file with holes (a ``truncate -s 20G`` file packs to a
#: few bytes, in the sandbox's staging copy and on the wire); other tars send the zeros,
#: which the host's extractor still writes as holes.
_SPARSE_IF_GNU = "sparse=; if tar --version 2>/dev/null | grep -q GNU; then sparse=--sparse; fi; "


class Primitives(Protocol):
    """The backend primitives a transfer moves files with (a ``Backend`` has them all).

    A Protocol rather than the class so that this module, which ``backend.py`` imports for
    its default ``copy_in`` and ``copy_out``, imports nothing of it.
    """

    def exec(self, request: ExecRequest) -> ExecResult: ...

    def put_archive(self, data: bytes) -> None: ...

    def write_file(self, path: str, data: bytes, mode: int = ...) -> None: ...

    def read_file(self, path: str) -> bytes: ...

    def read_file_to(self, path: str, sink: BinaryIO) -> None: ...


def _run(backend: Primitives, script: str, *args: str, what: str) -> bytes:
    request = ExecRequest(
        command=("/bin/sh", "-c", script, "sh", *args),
        cwd="/",
        timeout=3600,
        max_output_bytes=1 << 20,
    )
    result = backend.exec(request)
    if result.exit_code == _MISSING:
        raise SandboxFileNotFoundError(f"no such file or directory in the sandbox: {args[0]}")
    if not result.ok:
        raise BackendError(f"{what} failed: {result.output.strip()[-500:]}")
    return result.stdout_bytes


def _send_file(backend: Primitives, source: BinaryIO, size: int, target: str) -> None:
    """Write ``size`` bytes from ``source`` to the sandbox file ``target``, a chunk at a time."""
    if size <= CHUNK:
        backend.write_file(target, source.read())
        return
    staging = f"{_STAGING}/{uuid.uuid4().hex}"
    parts = []
    index = 0
    while True:
        piece = source.read(CHUNK)
        if not piece:
            break
        part = f"{staging}.{index:06d}"
        backend.write_file(part, piece)
        parts.append(part)
        index += 1
    joined = " ".join(shlex.quote(p) for p in parts)
    _run(
        backend,
        f'mkdir -p -- "$(dirname -- "$1")" && cat {joined} > "$1"; rc=$?; rm -f {joined}; exit $rc',
        target,
        what=f"joining the upload of {target}",
    )


def copy_in(backend: Primitives, host: Path, target: str) -> None:
    """Copy a host file or directory to the absolute sandbox path ``target``."""
    if host.is_dir():
        with tempfile.TemporaryFile() as spool:
            _archive.write_directory(spool, host, target)
            size = spool.tell()
            spool.seek(0)
            if size <= CHUNK:
                backend.put_archive(spool.read())
                return
            staged = f"{_STAGING}/{uuid.uuid4().hex}.tar"
            _send_file(backend, spool, size, staged)
        _run(
            backend,
            'if tar --version 2>/dev/null | grep -q GNU; then tar --no-overwrite-dir -xf "$1" -C /;'
            ' else tar -xf "$1" -C /; fi; rc=$?; rm -f "$1"; exit $rc',
            staged,
            what=f"extracting the upload of {target}",
        )
        return
    if not host.exists():
        raise FileNotFoundError(f"no such file or directory on the host: {host}")
    if not host.is_file():  # a FIFO, socket or device: never opened, never sent
        raise SandboxError(f"only regular files and directories are uploaded: {host}")
    mode = host.stat().st_mode & 0o777  # never a host setuid, setgid or sticky bit
    with host.open("rb") as source:
        size = os.fstat(source.fileno()).st_size
        if size <= CHUNK:
            backend.write_file(target, source.read(), mode)
            return
        _send_file(backend, source, size, target)
    _run(backend, f'chmod {mode:o} "$1"', target, what=f"chmod {target}")


def copy_out(backend: Primitives, source: str, host: Path) -> None:
    """Copy the sandbox file or directory ``source`` to the host path ``host``."""
    staged = f"{_STAGING}/{uuid.uuid4().hex}.tar"
    # Pack in the sandbox, then say how big the pack is (the second line).
    size_text = _run(
        backend,
        f'[ -e "$1" ] || [ -L "$1" ] || exit {_MISSING}; mkdir -p -- "$(dirname -- "$2")" && '
        f"{_SPARSE_IF_GNU}"
        'tar $sparse -cf "$2" -C "$(dirname -- "$1")" -- "$(basename -- "$1")" && wc -c < "$2"',
        source,
        staged,
        what=f"packing {source}",
    )
    size = int(size_text.split()[-1])
    try:
        with tempfile.TemporaryFile() as spool:
            _receive(backend, staged, size, spool)
            spool.seek(0)
            unpack(spool, source, host)
    finally:
        _run(backend, 'rm -f -- "$1" "$1".part*', staged, what="cleaning up")


def _receive(backend: Primitives, staged: str, size: int, sink: BinaryIO) -> None:
    if size <= CHUNK:
        sink.write(backend.read_file(staged))
        return
    _run(
        backend,
        f'cd -- "$(dirname -- "$1")" && '
        f'split -b {CHUNK} -d -a 6 -- "$1" "$(basename -- "$1")".part',
        staged,
        what="splitting a download",
    )
    for index in range((size + CHUNK - 1) // CHUNK):
        backend.read_file_to(f"{staged}.part{index:06d}", sink)


def unpack(spool: BinaryIO, source: str, host: Path) -> None:
    """Write what a tar of ``source`` (a file object at its start) holds to ``host``."""
    top = posixpath.basename(source.rstrip("/")) or "."
    with tarfile.open(fileobj=spool, mode="r:") as archive:
        first = archive.next()
    if first is None:
        raise SandboxFileNotFoundError(f"nothing to download at {source}")
    spool.seek(0)
    if first.isdir():
        _archive.extract(spool, host, strip_top=top)
        return
    if first.issym():
        # Following it here would read whatever the link names on the host's side of the
        # copy; the sandbox's own target is what the caller can download instead.
        raise SandboxError(
            f"{source} is a symbolic link (to {first.linkname}): download what it points to"
        )
    if not first.isreg():
        raise SandboxError(f"{source} is not a regular file or a directory")
    _archive.extract_file(spool, host)
