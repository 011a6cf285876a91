"""The ownership record (``meta.json``) of a directory that holds a sandbox or a checkpoint.

One reader and one writer for every such directory (a ``local`` sandbox's, a ``local``
checkpoint's, an archive checkpoint's of ``archive_checkpoints.py``), so that ``reap``,
listing and ``attach`` judge them alike.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

__all__ = ["META", "RECORD_GRACE_S", "abandoned_without_record", "read_meta", "write_meta"]

META = "meta.json"
#: Seconds a directory may lack its record before reap takes it for an interrupted creation.
RECORD_GRACE_S = 30.0


def read_meta(home: Path) -> dict[str, Any] | None:
    """A directory's ownership record, or ``None`` when it has none (yet)."""
    try:
        meta = json.loads((home / META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or not isinstance(meta.get("labels"), dict):
        return None
    return meta


def write_meta(home: Path, meta: dict[str, Any]) -> None:
    """Write the record whole or not at all (a kill mid-write leaves no half record)."""
    partial = home / f".{META}.partial"
    partial.write_text(json.dumps(meta), encoding="utf-8")
    os.replace(partial, home / META)


def abandoned_without_record(home: Path, grace_s: float = RECORD_GRACE_S) -> bool:
    """True for a directory whose creator was killed between its ``mkdir`` and its record.

    A live creator writes the record microseconds after making the directory, so a directory
    still without one after ``grace_s`` has no owner left to finish it.
    """
    try:
        age = time.time() - home.stat().st_mtime
    except OSError:
        return False
    return age > grace_s
