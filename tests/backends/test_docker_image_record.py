"""The docker backend's image record (shared by processes) and its size option."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from sandbox_runtime.backends.docker._image_record import ImageRecord
from sandbox_runtime.backends.docker._options import DockerOptions


def test_use_times_and_pins_are_shared_between_processes(tmp_path: Path) -> None:
    path = tmp_path / "images.json"
    record = ImageRecord(path)
    record.pulled("reg:5000/a:1")
    record.pulled("reg:5000/b:1")
    first = record.entries()["reg:5000/a:1"].last_used
    time.sleep(0.01)
    script = (
        "import sys; from pathlib import Path;"
        "from sandbox_runtime.backends.docker._image_record import ImageRecord as R;"
        "r = R(Path(sys.argv[1])); r.touch('reg:5000/a:1', pin_for=60);"
        "r.pin(['reg:5000/b:1', 'not/ours:1'], 30); r.touch('not/ours:1')"
    )
    subprocess.run([sys.executable, "-c", script, str(path)], check=True)
    entries = record.entries()
    assert entries["reg:5000/a:1"].last_used > first
    assert entries["reg:5000/a:1"].pinned_until > time.time() + 50
    assert entries["reg:5000/b:1"].pinned_until > time.time() + 20
    assert "not/ours:1" not in entries  # a pin or a use never makes an image ours
    record.unpin("reg:5000/a:1")
    record.forget("reg:5000/b:1")
    assert record.entries()["reg:5000/a:1"].pinned_until == 0.0
    assert set(record.entries()) == {"reg:5000/a:1"}


def test_an_unwritable_record_never_fails_the_caller(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    record = ImageRecord(blocker / "sub" / "images.json")  # its directory cannot exist
    record.pulled("a:1")
    assert record.entries() == {}


def test_the_budget_reads_sizes() -> None:
    assert DockerOptions(image_cache_budget="20GiB").image_cache_budget == 20 * 1024**3
    assert DockerOptions(image_cache_budget="1.5 GB").image_cache_budget == 1_500_000_000
    assert DockerOptions(image_cache_budget=123).image_cache_budget == 123
    with pytest.raises(ValidationError, match="not a size"):
        DockerOptions(image_cache_budget="lots")
    with pytest.raises(ValidationError):
        DockerOptions(image_cache_budget=0)
