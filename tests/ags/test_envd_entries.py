"""The envd emulation's entry info where the SDK tests cannot reach: Go's mode strings for
every file type and flag, and links resolved inside a sandbox rooted below the host's ``/``
(the ``local`` backend without namespaces)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from sandbox_runtime._envd.server._connect import ConnectError
from sandbox_runtime._envd.server._files import Files, go_mode_string


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        (stat.S_IFREG | 0o644, "-rw-r--r--"),
        (stat.S_IFDIR | 0o755, "drwxr-xr-x"),
        (stat.S_IFDIR | stat.S_ISVTX | 0o777, "dtrwxrwxrwx"),
        (stat.S_IFLNK | 0o777, "Lrwxrwxrwx"),
        (stat.S_IFCHR | 0o666, "Dcrw-rw-rw-"),
        (stat.S_IFBLK | 0o660, "Drw-rw----"),
        (stat.S_IFIFO | 0o600, "prw-------"),
        (stat.S_IFSOCK | 0o755, "Srwxr-xr-x"),
        (stat.S_IFREG | stat.S_ISUID | 0o755, "urwxr-xr-x"),
        (stat.S_IFREG | stat.S_ISGID | 0o755, "grwxr-xr-x"),
        (stat.S_IFREG, "----------"),
    ],
)
def test_mode_strings_are_gos(mode: int, expected: str) -> None:
    assert go_mode_string(mode) == expected


def test_links_resolve_inside_a_rooted_sandbox(tmp_path: Path) -> None:
    (tmp_path / ".hidden" / "x").mkdir(parents=True)
    (tmp_path / "file").write_text("data")
    os.symlink(".hidden/x", tmp_path / "dir-link")
    os.symlink("dir-link", tmp_path / "chain")
    os.symlink("missing", tmp_path / "broken")
    os.symlink("loop", tmp_path / "loop")
    files = Files(root=str(tmp_path), workdir="/")
    chain = files.entry("/chain")
    assert chain["symlinkTarget"] == "/.hidden/x"
    assert chain["type"] == "FILE_TYPE_DIRECTORY"
    assert chain["permissions"] == "Lrwxrwxrwx"
    for name in ("broken", "loop"):
        entry = files.entry(f"/{name}")
        assert entry["symlinkTarget"] == f"/{name}"
        assert "type" not in entry  # FILE_TYPE_UNSPECIFIED, omitted as proto3 JSON does
        assert "mode" not in entry  # 0
    assert files.entry("/file")["size"] == "4"
    with pytest.raises(ConnectError) as missing:
        files.entry("/nothing")
    assert missing.value.code == "not_found"
