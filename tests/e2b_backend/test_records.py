"""The host records of snapshot checkpoints (e2b snapshots carry no metadata of their own)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox_runtime._envd import e2b_snapshots as _records

URL = "https://api.e2b.example"


def test_records_are_kept_per_service_and_forgotten(tmp_path: Path) -> None:
    _records.write(tmp_path, URL, "snap-1", {"sandbox-runtime.managed": "true", "a": "1"})
    _records.write(tmp_path, URL, "snap-2", {"b": "2"})
    _records.write(tmp_path, "http://other:1", "snap-1", {"c": "3"})
    assert _records.read_all(tmp_path, URL) == {
        "snap-1": {"sandbox-runtime.managed": "true", "a": "1"},
        "snap-2": {"b": "2"},
    }
    assert _records.read_one(tmp_path, "http://other:1", "snap-1") == {"c": "3"}
    assert _records.forget(tmp_path, URL, "snap-1")
    assert not _records.forget(tmp_path, URL, "snap-1")
    assert _records.read_one(tmp_path, URL, "snap-1") is None
    assert not list(tmp_path.rglob(".record-*"))  # no temporary file left


def test_a_damaged_record_is_skipped_not_fatal(tmp_path: Path) -> None:
    _records.write(tmp_path, URL, "snap-1", {"a": "1"})
    (path,) = tmp_path.rglob("*.json")
    path.write_text("{not json")
    assert _records.read_all(tmp_path, URL) == {}


@pytest.mark.parametrize("odd", ["..", "a/b", "tpl:build.1", "é x"])
def test_any_snapshot_id_is_kept_under_a_safe_name(tmp_path: Path, odd: str) -> None:
    _records.write(tmp_path, URL, odd, {"a": "1"})
    assert _records.read_all(tmp_path, URL) == {odd: {"a": "1"}}
    (path,) = tmp_path.rglob("*.json")
    assert path.parent.parent == tmp_path


def test_an_empty_id_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a snapshot id"):
        _records.write(tmp_path, URL, "", {})
