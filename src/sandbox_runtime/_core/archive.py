"""Tar archives: the one format every backend can move files in.

Docker's Engine API, ``kubectl cp`` and a ``tar`` process in any container all speak it,
so files cross the sandbox boundary as tar streams and directory upload and download are
written once.  Extraction on the host refuses any member that would land outside its
destination, through ``..``, an absolute name, or a symlink already on disk.

What a sandbox packs is the sandbox's to choose, so extraction also keeps only what cannot
gain privileges on the host: regular files, directories, symlinks (as links, never followed)
and hard links inside the tree.  Device nodes and FIFOs are dropped; setuid, setgid and
sticky bits are cleared; owners are never set from the archive (files belong to the client).
A root client downloading a ``chmod 4755`` shell or a ``mknod b 7 0`` gets neither.
Files with holes stay sparse (see ``sparse``): a ``truncate -s 20G`` file takes no host disk.

Uploads follow the same rule from the other side: the one builder of a host tree's tar
(:func:`write_directory`) stores regular files, directories, symlinks and hard links within
the tree, without setuid, setgid or sticky bits and without the host's owners, so what the
sandbox extracts belongs to whoever extracts it there (the sandbox's user).
"""

from __future__ import annotations

import io
import os
import posixpath
import tarfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from sandbox_runtime._core.sparse import SparseWriter, write_with_holes
from sandbox_runtime.errors import (
    PathEscapeError,
    SandboxError,
    SandboxIsADirectoryError,
    SandboxNotADirectoryError,
)

if TYPE_CHECKING:
    from _typeshed import StrOrBytesPath

__all__ = [
    "directory",
    "extract",
    "extract_file",
    "first_file",
    "single_file",
    "write_directory",
    "write_tree",
]


def _member_name(sandbox_path: str) -> str:
    name = posixpath.normpath(sandbox_path).lstrip("/")
    if not name or name == ".":
        raise ValueError(f"not a file path: {sandbox_path!r}")
    return name


def single_file(sandbox_path: str, data: bytes, mode: int = 0o644) -> bytes:
    """A tar holding one regular file named by its absolute sandbox path, without parent entries.

    Leaving out the parent directory entries makes extractors create missing parents and
    leave existing ones (``/tmp`` with its sticky bit) untouched.
    """
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        info = tarfile.TarInfo(_member_name(sandbox_path))
        info.size = len(data)
        info.mode = mode & 0o7777
        info.mtime = int(time.time())
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def directory(host_dir: Path, sandbox_dir: str) -> bytes:
    """A tar of a host directory's contents, rooted at ``sandbox_dir`` (relative to ``/``).

    Symlinks are stored as links, not followed, so a repository with a virtualenv inside
    arrives as it left.
    """
    buffer = io.BytesIO()
    write_directory(buffer, host_dir, sandbox_dir)
    return buffer.getvalue()


def write_directory(sink: BinaryIO, host_dir: Path, sandbox_dir: str) -> None:
    """:func:`directory`, written to a file object as it is read (no whole tar in memory).

    Every upload of a host tree goes through here, so every backend and path gets the same
    rule (see :func:`_upload_safe`).
    """
    prefix = _member_name(sandbox_dir)
    with tarfile.open(fileobj=sink, mode="w", format=tarfile.PAX_FORMAT) as archive:
        archive.add(str(host_dir), arcname=prefix, recursive=True, filter=_upload_safe)


def _upload_safe(member: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """A host tree's member as a sandbox may receive it, or ``None`` to leave it out.

    Device nodes and FIFOs are left out (tarfile already skips sockets); modes lose their
    setuid, setgid and sticky bits; owners become root with no names, which a ``tar -x``
    as root keeps and any other extracting user replaces with itself.
    """
    if not _kept(member):
        return None
    return member.replace(mode=member.mode & 0o777, uid=0, gid=0, uname="", gname="", deep=False)


def write_tree(sink: BinaryIO, path: str, arcname: str) -> None:
    """A tar of ``path`` named ``arcname``, files with holes stored sparse, links as links.

    For a backend that packs a sandbox tree on the host (local): no FIFO is opened, sockets
    are skipped, and a ``truncate -s 20G`` file costs only its data.
    """
    with SparseWriter.open(fileobj=sink, mode="w", format=tarfile.PAX_FORMAT) as archive:
        archive.add(path, arcname=arcname, recursive=True)


def first_file(data: bytes) -> bytes | None:
    """The content of the first member of a tar, or ``None`` if that member is a directory."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as archive:
        for member in archive:
            if member.isdir():
                return None
            if member.issym() or member.islnk():
                continue
            extracted = archive.extractfile(member)
            return extracted.read() if extracted is not None else b""
    return None


def _inside(root: str, path: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def extract(data: bytes | BinaryIO, destination: Path, *, strip_top: str | None = None) -> None:
    """Extract a tar (bytes or a file object) under ``destination``, refusing escapes.

    ``strip_top`` renames the archive's top-level entry (what ``get_archive`` names after the
    source's basename) to ``destination`` itself, for ``download(src, dst)`` semantics.
    """
    destination.mkdir(parents=True, exist_ok=True)
    root = os.path.realpath(destination)
    source = io.BytesIO(data) if isinstance(data, bytes) else data
    placed: dict[str, str] = {}  # an archive name of a regular file -> where it landed
    with _HostTarFile.open(fileobj=source, mode="r:*") as archive:
        for member in archive:
            original = posixpath.normpath(member.name)
            name = _renamed(original, strip_top)
            if name.startswith("/") or name == ".." or name.startswith("../"):
                raise PathEscapeError(f"archive member escapes the destination: {member.name!r}")
            # Resolve the parent only: an existing symlink at the name itself is replaced,
            # never written through.
            parent = os.path.realpath(os.path.join(root, posixpath.dirname(name)))
            if not _inside(root, parent):
                raise PathEscapeError(f"archive member escapes the destination: {member.name!r}")
            if member.islnk():
                link_target = os.path.realpath(os.path.join(root, member.linkname))
                if not _inside(root, link_target):
                    raise PathEscapeError(f"hard link escapes the destination: {member.name!r}")
            if (name == "." and member.isdir()) or not _kept(member):
                continue
            member.name = os.path.relpath(os.path.join(parent, posixpath.basename(name)), root)
            if member.islnk():
                _link(placed.get(posixpath.normpath(member.linkname)), root, member.name)
                continue
            _extract_member(archive, member, root)
            if member.isreg():
                placed[original] = os.path.join(root, member.name)


def extract_file(source: BinaryIO, host: Path) -> None:
    """Write the first member of a tar, a regular file, to ``host`` (holes kept, no setuid)."""
    with _HostTarFile.open(fileobj=source, mode="r:") as archive:
        member = archive.next()
        if member is None or not member.isreg():
            raise SandboxError("the archive does not start with a regular file")
        host.parent.mkdir(parents=True, exist_ok=True)
        archive.makefile(member, str(host))
    os.chmod(host, member.mode & 0o777)


class _HostTarFile(tarfile.TarFile):
    """A tar reader whose files land with holes wherever the content is zeros (see ``sparse``)."""

    def makefile(self, tarinfo: tarfile.TarInfo, targetpath: StrOrBytesPath) -> None:
        source = self.fileobj
        if source is None:  # pragma: no cover - an open archive always has one
            raise tarfile.ReadError("the archive is closed")
        source.seek(tarinfo.offset_data)
        with open(targetpath, "wb") as target:
            regions: list[tuple[int, int]] = getattr(tarinfo, "sparse", None) or [(0, tarinfo.size)]
            for offset, size in regions:
                target.seek(offset)
                write_with_holes(source, target, size, tarinfo.name)
            target.truncate(tarinfo.size)


def _renamed(name: str, strip_top: str | None) -> str:
    """``name`` with the archive's top entry ``strip_top`` renamed to ``.``."""
    if strip_top is None:
        return name
    if name == strip_top:
        return "."
    if name.startswith(strip_top + "/"):
        return name[len(strip_top) + 1 :]
    return name


def _link(source: str | None, root: str, name: str) -> None:
    """A hard link to a regular file this extraction placed; dropped when there is none.

    tarfile, when it cannot link, extracts the link's target member again with that
    member's own attributes (a device node, a setuid bit); linking only to what was placed
    here, under the rules above, leaves no such way round them.
    """
    if source is None:
        return
    target = os.path.join(root, name)
    _clear(target, name, is_dir=False)
    os.link(source, target)


def _kept(member: tarfile.TarInfo) -> bool:
    """Whether a member may exist on the host: no device nodes, FIFOs or other specials."""
    return member.isreg() or member.isdir() or member.issym() or member.islnk()


def _host_safe(member: tarfile.TarInfo, _destination: str) -> tarfile.TarInfo:
    """The member without setuid, setgid and sticky bits, and without an owner to set.

    An owner of -1 with no names makes a root client's ``chown`` a no-op, so the file stays
    the client's instead of becoming the sandbox user's (or a host user of the same name).
    """
    return member.replace(mode=member.mode & 0o777, uid=-1, gid=-1, uname="", gname="", deep=False)


def _clear(target: str, name: str, *, is_dir: bool) -> None:
    """Make way at ``target``: files and links are replaced, never written through.

    A name the archive (or the host) already holds as a directory is never replaced by a
    file, nor a file by a directory: such a collision is refused, naming the member.
    """
    if os.path.isdir(target) and not os.path.islink(target):
        if not is_dir:
            raise SandboxIsADirectoryError(f"a directory is in the way of {name!r}")
    elif os.path.lexists(target):
        if is_dir and not os.path.islink(target):
            raise SandboxNotADirectoryError(f"a file is in the way of the directory {name!r}")
        os.unlink(target)
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise SandboxNotADirectoryError(f"a file is in the way of {name!r}") from None


def _extract_member(archive: tarfile.TarFile, member: tarfile.TarInfo, root: str) -> None:
    target = os.path.join(root, member.name)
    _clear(target, member.name, is_dir=member.isdir())
    if hasattr(tarfile, "fully_trusted_filter"):
        # Names were checked above; absolute symlink targets stay as they are (data, never
        # followed), and no tarfile filter keeps those while clearing modes and owners.
        archive.extract(member, root, set_attrs=True, filter=_host_safe)
    else:  # Python < 3.10.12: no filters, the same rule by hand
        member.mode &= 0o777
        member.uid = member.gid = -1
        member.uname = member.gname = ""
        archive.extract(member, root, set_attrs=True)
