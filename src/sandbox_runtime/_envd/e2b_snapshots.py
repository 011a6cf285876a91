"""Checkpoints as an e2b-protocol service's snapshots, with this host's record of each.

Shared by every backend on e2b's control plane (``e2b``; ``ags`` through its E2B door).  An
e2b snapshot carries no metadata (its API keeps an id and names), yet a checkpoint must carry
labels, an owner and an expiry to be listed by label and reaped.  So each checkpoint has a
small JSON record on this host, one directory per service URL, written atomically and named
by a hash of the snapshot id; a listing joins the records with the service's own list of
snapshots, so a snapshot deleted elsewhere is not listed.  The records are this host's:
another machine lists its own checkpoints.  A snapshot without a record of ours is never
touched.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import tempfile
from collections.abc import Mapping
from pathlib import Path

from sandbox_runtime._core.backend import ReapedSandbox
from sandbox_runtime._core.checkpoints import Checkpoint, checkpoint_labels
from sandbox_runtime._core.ownership import why_reapable
from sandbox_runtime.errors import CheckpointNotFoundError

from .e2b_control import E2bApi

__all__ = ["SnapshotBook", "forget", "read_all", "read_one", "write"]


def _directory(root: Path, api_url: str) -> Path:
    return root / hashlib.sha256(api_url.encode()).hexdigest()[:16]


def _path(root: Path, api_url: str, checkpoint_id: str) -> Path:
    # Named by a hash: a snapshot id may hold characters a file name cannot (the SDK
    # percent-encodes it in the delete route); the id itself is inside the record.
    if not checkpoint_id:
        raise ValueError("not a snapshot id: ''")
    return _directory(root, api_url) / f"{hashlib.sha256(checkpoint_id.encode()).hexdigest()}.json"


def write(root: Path, api_url: str, checkpoint_id: str, labels: dict[str, str]) -> None:
    """Record one checkpoint's full label set (atomically: a reader sees all or nothing)."""
    path = _path(root, api_url, checkpoint_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"api_url": api_url, "id": checkpoint_id, "labels": labels}
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".record-")
    try:
        with os.fdopen(fd, "w") as stream:
            json.dump(record, stream, sort_keys=True)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _read(path: Path) -> tuple[str, dict[str, str]] | None:
    try:
        data = json.loads(path.read_text())
        return str(data["id"]), {str(k): str(v) for k, v in data["labels"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def read_one(root: Path, api_url: str, checkpoint_id: str) -> dict[str, str] | None:
    """One checkpoint's labels, or ``None`` without a (readable) record."""
    found = _read(_path(root, api_url, checkpoint_id))
    return found[1] if found is not None and found[0] == checkpoint_id else None


def read_all(root: Path, api_url: str) -> dict[str, dict[str, str]]:
    """Every recorded checkpoint of one service: id -> labels."""
    directory = _directory(root, api_url)
    found: dict[str, dict[str, str]] = {}
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        record = _read(path)
        if record is not None:
            found[record[0]] = record[1]
    return found


def forget(root: Path, api_url: str, checkpoint_id: str) -> bool:
    """Remove one record; ``False`` when there was none."""
    try:
        _path(root, api_url, checkpoint_id).unlink()
    except FileNotFoundError:
        return False
    return True


class SnapshotBook:
    """One backend's snapshot checkpoints on one service, with their records under ``root``."""

    def __init__(self, api: E2bApi, root: Path, backend_name: str) -> None:
        self.api = api
        self.root = root
        self.backend_name = backend_name

    def take(
        self,
        source_id: str,
        *,
        labels: Mapping[str, str],
        lifetime: float,
        run_id: str | None,
        workdir: str | None,
    ) -> Checkpoint:
        """Snapshot ``source_id`` (running or paused) and record it with its labels."""
        stored = checkpoint_labels(
            source_id=source_id,
            kind="filesystem",
            lifetime=lifetime,
            run_id=run_id,
            labels=labels,
            workdir=workdir,
        )
        name = f"sandbox-runtime-{secrets.token_hex(6)}"
        snapshot_id = self.api.create_snapshot(source_id, name=name)
        write(self.root, self.api.api_url, snapshot_id, stored)
        return Checkpoint.from_labels(self.backend_name, snapshot_id, stored)

    def knows(self, checkpoint_id: str) -> bool:
        """Whether ``checkpoint_id`` is a snapshot this host recorded."""
        return read_one(self.root, self.api.api_url, checkpoint_id) is not None

    def listed(self) -> list[Checkpoint]:
        """The recorded checkpoints whose snapshots the service still has, newest first."""
        records = read_all(self.root, self.api.api_url)
        if not records:
            return []
        present = {snapshot_id for snapshot_id, _names in self.api.list_snapshots()}
        found = []
        for checkpoint_id, labels in records.items():
            if checkpoint_id in present:
                found.append(Checkpoint.from_labels(self.backend_name, checkpoint_id, labels))
            else:
                forget(self.root, self.api.api_url, checkpoint_id)  # deleted elsewhere
        return sorted(found, key=lambda item: item.created, reverse=True)

    def delete(self, checkpoint_id: str) -> None:
        """Delete the snapshot and its record; ``CheckpointNotFoundError`` when neither was."""
        deleted = self.knows(checkpoint_id) and self.api.delete_snapshot(checkpoint_id)
        forgotten = forget(self.root, self.api.api_url, checkpoint_id)
        if not (deleted or forgotten):
            raise CheckpointNotFoundError(
                f"no {self.backend_name} checkpoint {checkpoint_id!r} of this library"
            )

    def reap(self, *, dry_run: bool) -> list[ReapedSandbox]:
        """Delete the checkpoints that expired or whose owner is gone."""
        reaped = []
        for checkpoint_id, labels in read_all(self.root, self.api.api_url).items():
            reason = why_reapable(labels)
            if reason is None:
                continue
            if not dry_run:
                self.api.delete_snapshot(checkpoint_id)
                forget(self.root, self.api.api_url, checkpoint_id)
            reaped.append(ReapedSandbox(self.backend_name, checkpoint_id, f"checkpoint: {reason}"))
        return reaped
