"""The records of this library's checkpoints on an e2b-protocol service, on this host.

An e2b snapshot carries no metadata (its API keeps an id and names), yet a checkpoint must
carry labels, an owner and an expiry to be listed by label and reaped.  So each checkpoint
has a small JSON record here, one directory per service URL, written atomically; a listing
joins the records with the service's own list of snapshots, so a snapshot deleted elsewhere
is not listed.  The records are this host's: another machine lists its own checkpoints.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

__all__ = ["forget", "read_all", "read_one", "write"]


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
