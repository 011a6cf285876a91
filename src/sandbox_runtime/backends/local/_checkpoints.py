"""Checkpoints of local sandboxes: copies of the sandbox tree under ``base_dir``.

A checkpoint is ``<base_dir>/ckpt-<hex>/root``, a copy of the sandbox's root made by
``_tree_copy.TreeCopier``: on a filesystem with reflinks (btrfs, xfs formatted with
``reflink=1``, bcachefs) file data is cloned copy-on-write and only metadata is written; on
others (ext4, tmpfs, overlayfs) the data is copied in the kernel.  ``cp -a`` is the fallback
for what that copier cannot make (device nodes without the right to make them).  Next to
the copy, ``meta.json`` holds the ownership labels, written before the copy so that a client
killed mid-copy leaves something reap can judge; ``host-entries.json`` (namespace
isolation) the host directories the root's stand-ins show, which a sandbox started from the
checkpoint binds the same way; and ``stamps.json`` the stamps of the root of the sandbox
that last took or rolled back to it (``_rollback``), so that a rollback restores only what
changed.
"""

from __future__ import annotations

import array
import os
import shutil
import struct
import subprocess
import time
import uuid
from collections.abc import Callable
from itertools import chain
from pathlib import Path

from sandbox_runtime.backend_kit import (
    Checkpoint,
    ReapedSandbox,
    abandoned_without_record,
    read_meta,
    why_reapable,
    write_meta,
)
from sandbox_runtime.errors import BackendError, CheckpointNotFoundError

from ._tree_copy import CopyUnsupported, Stamp, TreeCopier, filesystem_type, scan_tree

__all__ = [
    "CHECKPOINT_PREFIX",
    "HOST_ENTRIES",
    "checkpoint_home",
    "copy_tree",
    "delete",
    "listing",
    "read_stamps",
    "reap",
    "save",
    "write_stamps",
]

CHECKPOINT_PREFIX = "local-ckpt-"
HOST_ENTRIES = "host-entries.json"
STAMPS = "stamps.json"
#: Filesystems with reflinks, where ``cp -a --reflink=auto`` is the cheaper copy.
CP_FILESYSTEMS = frozenset({"xfs", "btrfs", "bcachefs"})


def checkpoint_home(base: Path, checkpoint_id: str) -> Path:
    """The directory of checkpoint ``checkpoint_id`` under ``base`` (it may not exist)."""
    if not checkpoint_id.startswith(CHECKPOINT_PREFIX) or "/" in checkpoint_id:
        raise CheckpointNotFoundError(f"not a local checkpoint id: {checkpoint_id!r}")
    return base / f"ckpt-{checkpoint_id.removeprefix(CHECKPOINT_PREFIX)}"


def copy_tree(source: Path, target: Path) -> dict[str, Stamp]:
    """Copy ``source`` to the new path ``target`` (modes, owners, times, links, holes kept).

    Returns the stamps of ``source``'s paths read during the copy (``_tree_copy``): what
    proves later that a path still holds what the copy holds.  On the filesystems in
    ``CP_FILESYSTEMS`` ``cp -a`` reflinks each file for less than the Python copier costs
    (measured, docs/performance.md), so it copies there, after a scan for the stamps.
    """
    since = time.time_ns()
    if filesystem_type(str(source.parent)) not in CP_FILESYSTEMS:
        copier = TreeCopier(since)
        try:
            copier.copy(str(source), str(target), "", os.lstat(source))
            return copier.stamps
        except CopyUnsupported:
            shutil.rmtree(target, ignore_errors=True)
    # Stamps read before ``cp -a`` are as good: a path changed after them stamps anew.
    stamps = scan_tree(str(source), since)
    copy_with_cp(source, target)
    return stamps


def copy_with_cp(source: Path, target: Path) -> None:
    """``cp -a --reflink=auto``; without GNU cp, a Python copy of the tree."""
    cp = shutil.which("cp")
    if cp is not None:
        done = subprocess.run(
            [cp, "-a", "--reflink=auto", "--", str(source), str(target)],
            capture_output=True,
            check=False,
        )
        if done.returncode == 0:
            return
        if b"reflink" not in done.stderr and b"unrecognized option" not in done.stderr:
            raise BackendError(f"copying {source} failed: {done.stderr.decode(errors='replace')}")
        shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target, symlinks=True)


def _root_identity(root: Path) -> tuple[int, int]:
    info = os.lstat(root)
    return info.st_dev, info.st_ino


# stamps.json is binary despite its old name: JSON cost ~0.1 s a way for 10,000 paths.
_MAGIC = b"sandbox-runtime stamps 1\n"
_HEADER = struct.Struct("<QQQQ")  # root st_dev, root st_ino, id length, names length


def write_stamps(home: Path, sandbox_id: str, root: Path, stamps: dict[str, Stamp]) -> None:
    """Note, in checkpoint ``home``, the stamps of ``root`` of sandbox ``sandbox_id``.

    Written whole or not at all; the last sandbox to take or roll back to the checkpoint
    owns the file (another sandbox's rollback then finds a record not its own).  Layout:
    the magic, the header, the id, the paths joined by NUL, then the stamps' first six
    fields (unsigned) and last two (the times, signed) as two arrays.
    """
    ident = sandbox_id.encode()
    names = "\0".join(stamps).encode("utf-8", "surrogateescape")
    unsigned = array.array("Q", chain.from_iterable(stamp[:6] for stamp in stamps.values()))
    signed = array.array("q", chain.from_iterable(stamp[6:] for stamp in stamps.values()))
    header = _HEADER.pack(*_root_identity(root), len(ident), len(names))
    partial = home / f".{STAMPS}.{uuid.uuid4().hex[:8]}"
    partial.write_bytes(
        b"".join([_MAGIC, header, ident, names, unsigned.tobytes(), signed.tobytes()])
    )
    os.replace(partial, home / STAMPS)


def read_stamps(home: Path, sandbox_id: str, root: Path) -> dict[str, Stamp] | None:
    """The stamps noted for this very root (same sandbox, same directory), else ``None``."""
    try:
        data = (home / STAMPS).read_bytes()
        if not data.startswith(_MAGIC):
            return None
        at = len(_MAGIC)
        dev, ino, ident_len, names_len = _HEADER.unpack_from(data, at)
        at += _HEADER.size
        if (dev, ino) != _root_identity(root) or data[at : at + ident_len] != sandbox_id.encode():
            return None
        at += ident_len
        text = data[at : at + names_len].decode("utf-8", "surrogateescape")
        names = text.split("\0") if names_len else []
        unsigned, signed = array.array("Q"), array.array("q")
        unsigned.frombytes(data[at + names_len : at + names_len + 48 * len(names)])
        signed.frombytes(data[at + names_len + 48 * len(names) :])
    except (OSError, ValueError, struct.error):
        return None
    if len(unsigned) != 6 * len(names) or len(signed) != 2 * len(names):
        return None
    first, last = iter(unsigned), iter(signed)
    return {
        name: (*head, *tail)
        for name, head, tail in zip(
            names, zip(*[first] * 6, strict=True), zip(*[last] * 2, strict=True), strict=True
        )
    }


def save(
    base: Path,
    source: tuple[str, Path, set[int]],
    labels: dict[str, str],
    host_entries: Path | None,
    remove_tree: Callable[[Path], None],
) -> Checkpoint:
    """Copy the root of ``source`` into a new checkpoint under ``base``.

    ``source`` is the sandbox's id, its root, and the inodes its processes map shared and
    writable, whose stamps are not to be trusted (a write through such a mapping can leave
    the ctime as it was).
    """
    sandbox_id, root, mapped = source
    checkpoint_id = CHECKPOINT_PREFIX + uuid.uuid4().hex[:16]
    home = checkpoint_home(base, checkpoint_id)
    home.mkdir(mode=0o700, parents=True)
    try:
        write_meta(home, {"id": checkpoint_id, "labels": labels})
        if host_entries is not None and host_entries.is_file():
            shutil.copyfile(host_entries, home / HOST_ENTRIES)
        stamps = copy_tree(root, home / "root")
        if mapped:
            stamps = {rel: stamp for rel, stamp in stamps.items() if stamp[4] not in mapped}
        write_stamps(home, sandbox_id, root, stamps)
    except BaseException:
        remove_tree(home)
        raise
    return Checkpoint.from_labels("local", checkpoint_id, labels)


def listing(base: Path) -> list[Checkpoint]:
    """The complete checkpoints under ``base`` (their copy finished)."""
    found = []
    for home in sorted(base.glob("ckpt-*")) if base.is_dir() else []:
        meta = read_meta(home)
        if meta is not None and (home / "root").is_dir():
            found.append(Checkpoint.from_labels("local", str(meta["id"]), meta["labels"]))
    return found


def delete(base: Path, checkpoint_id: str, remove_tree: Callable[[Path], None]) -> None:
    """Remove one checkpoint; a missing one is :class:`CheckpointNotFoundError`."""
    home = checkpoint_home(base, checkpoint_id)
    if read_meta(home) is None:
        raise CheckpointNotFoundError(f"no local checkpoint {checkpoint_id!r} in {base}")
    remove_tree(home)


def reap(base: Path, dry_run: bool, remove_tree: Callable[[Path], None]) -> list[ReapedSandbox]:
    """Remove checkpoints that expired or whose owner died (reasons start ``checkpoint:``)."""
    reaped: list[ReapedSandbox] = []
    for home in sorted(base.glob("ckpt-*")) if base.is_dir() else []:
        meta = read_meta(home)
        checkpoint_id = CHECKPOINT_PREFIX + home.name.removeprefix("ckpt-")
        reason: str | None
        if meta is None:
            reason = "record missing" if abandoned_without_record(home) else None
        else:
            reason = why_reapable(meta["labels"])
        if reason is None:
            continue
        reaped.append(ReapedSandbox("local", checkpoint_id, f"checkpoint: {reason}"))
        if not dry_run:
            remove_tree(home)
    return reaped
