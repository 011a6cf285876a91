"""Checkpoints of local sandboxes: copies of the sandbox tree under ``base_dir``.

A checkpoint is ``<base_dir>/ckpt-<hex>/root``, a copy of the sandbox's root made with
``cp -a --reflink=auto``: on a filesystem with reflinks (btrfs, xfs formatted with
``reflink=1``, bcachefs) file data is shared copy-on-write and only metadata is written; on
others (ext4, tmpfs, overlayfs) it is a plain copy.  Next to it, ``meta.json`` holds the
ownership labels, written before the copy so that a client killed mid-copy leaves something
reap can judge, and ``host-entries.json`` (namespace isolation) the host directories the
root's stand-ins show, which a sandbox started from the checkpoint binds the same way.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Callable
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

__all__ = [
    "CHECKPOINT_PREFIX",
    "HOST_ENTRIES",
    "checkpoint_home",
    "copy_tree",
    "delete",
    "listing",
    "reap",
    "save",
]

CHECKPOINT_PREFIX = "local-ckpt-"
HOST_ENTRIES = "host-entries.json"


def checkpoint_home(base: Path, checkpoint_id: str) -> Path:
    """The directory of checkpoint ``checkpoint_id`` under ``base`` (it may not exist)."""
    if not checkpoint_id.startswith(CHECKPOINT_PREFIX) or "/" in checkpoint_id:
        raise CheckpointNotFoundError(f"not a local checkpoint id: {checkpoint_id!r}")
    return base / f"ckpt-{checkpoint_id.removeprefix(CHECKPOINT_PREFIX)}"


def copy_tree(source: Path, target: Path) -> None:
    """Copy ``source`` to the new path ``target``: modes, times, links and holes kept.

    ``cp -a --reflink=auto`` shares file data where the filesystem can (see the module
    docstring) and copies it where it cannot; without GNU cp, a Python copy of the tree.
    """
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


def save(
    base: Path,
    root: Path,
    labels: dict[str, str],
    host_entries: Path | None,
    remove_tree: Callable[[Path], None],
) -> Checkpoint:
    """Copy ``root`` into a new checkpoint under ``base`` carrying ``labels``."""
    checkpoint_id = CHECKPOINT_PREFIX + uuid.uuid4().hex[:16]
    home = checkpoint_home(base, checkpoint_id)
    home.mkdir(mode=0o700, parents=True)
    try:
        write_meta(home, {"id": checkpoint_id, "labels": labels})
        if host_entries is not None and host_entries.is_file():
            shutil.copyfile(host_entries, home / HOST_ENTRIES)
        copy_tree(root, home / "root")
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
