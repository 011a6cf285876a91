"""The ownership record (``meta.json``) of a local sandbox's or checkpoint's directory.

One reader and one writer for both kinds of directory, so that ``reap``, listing and
``attach`` judge them alike.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["META", "read_meta", "write_meta"]

META = "meta.json"


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
