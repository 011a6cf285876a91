"""Moving host files and directories in and out of a sandbox with bounded client memory.

A backend's primitives move whole files (``write_file``/``read_file``) or whole tars; a
200 MB repository or dataset would sit in the client's memory two or three times over.  So
anything larger than :data:`CHUNK` travels in pieces: an upload writes the pieces as part
files in the sandbox and joins them there with ``cat`` (directories travel as a tar spooled
to a host temporary file, then extracted in the sandbox); a download streams ``tar``'s output
into a host temporary file that is then extracted, staging nothing in the sandbox (a full
``/tmp`` there, which the sandbox's own processes can cause, blocks no download).  Client
memory stays around a few chunks, whatever the size.

Written once over the primitives, for every backend; one whose files are host files (local)
overrides the whole move with direct copies.
"""

from __future__ import annotations

import logging
import os
import posixpath
import re
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

logger = logging.getLogger("sandbox_runtime")

#: Bytes moved per primitive call.  Small enough that a backend's own copies of a piece
#: (a tar around it, a request body) stay well under the 64 MB a transfer may add.
CHUNK = 8 * 1024 * 1024
_STAGING = "/tmp/.sandbox-runtime/transfers"
_MISSING = 44
#: What a download keeps of the packing command's output besides the stream: its stderr.
_DIAGNOSTIC_BYTES = 64 * 1024
#: GNU tar's warnings that leave the archive whole (its exit code is then 1, not 2).
_TAR_CHANGED = re.compile(r"file changed as we read it|file removed before we read it")
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
    """Copy the sandbox file or directory ``source`` to the host path ``host``.

    The sandbox's ``tar`` writes to the command's output, which streams into a host
    temporary file: nothing is staged on the sandbox's disk, so a full ``/tmp`` in the
    sandbox blocks no download, and the client holds a few capped buffers, whatever the size.
    """
    decode, argument = _path_argument(source)
    script = (
        f'{decode}[ -e "$1" ] || [ -L "$1" ] || exit {_MISSING}; {_SPARSE_IF_GNU}'
        'exec tar $sparse -cf - -C "$(dirname -- "$1")" -- "$(basename -- "$1")"'
    )
    with tempfile.TemporaryFile() as spool:

        def receive(stream: str, data: bytes) -> None:
            if stream == "stdout":
                spool.write(data)

        request = ExecRequest(
            command=("/bin/sh", "-c", script, "sh", argument),
            cwd="/",
            timeout=3600,
            max_output_bytes=_DIAGNOSTIC_BYTES,
            on_output=receive,
        )
        result = backend.exec(request)
        if result.exit_code == _MISSING:
            raise SandboxFileNotFoundError(f"no such file or directory in the sandbox: {source}")
        if result.timed_out or not (result.ok or _changed_while_read(result)):
            raise BackendError(f"packing {source} failed: {result.stderr.strip()[-500:]}")
        if result.exit_code != 0:
            logger.warning(
                "%s changed while it was downloaded; the files are as tar read them: %s",
                source,
                result.stderr.strip()[-300:],
            )
        spool.seek(0)
        unpack(spool, source, host)


def _path_argument(path: str) -> tuple[str, str]:
    """How a script gets ``path`` as its ``$1``: a shell prefix and the argument to pass.

    A name that is not UTF-8 (held as surrogate escapes) cannot cross an engine's JSON API
    intact, so it travels as octal escapes that the sandbox's ``printf`` turns back into the
    exact bytes (an ``x`` kept at the end so that a trailing newline survives ``$(...)``).
    """
    try:
        path.encode()
    except UnicodeEncodeError:
        octal = "".join(f"\\{byte:03o}" for byte in os.fsencode(path))
        return 'set -- "$(printf "$1"x)"; set -- "${1%x}"; ', octal
    return "", path


def _changed_while_read(result: ExecResult) -> bool:
    """GNU tar's exit 1 for files that changed or vanished while it read them, and only that.

    The archive is whole then: every file as tar read it (a file written meanwhile may hold
    part of the write).  Any other complaint, or another exit code, is a failed download.
    """
    if result.exit_code != 1:
        return False
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    return bool(lines) and all(_TAR_CHANGED.search(line) for line in lines)


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
