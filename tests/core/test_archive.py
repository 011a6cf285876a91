from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from sandbox_runtime import PathEscapeError
from sandbox_runtime._core import archive as _archive


def _tar(*members: tuple[str, bytes | None, str | None]) -> bytes:
    """Members as (name, file content or None, symlink target or None)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, content, link in members:
            info = tarfile.TarInfo(name)
            if link is not None:
                info.type = tarfile.SYMTYPE
                info.linkname = link
                archive.addfile(info)
            else:
                data = content or b""
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_single_file_has_no_parent_entries() -> None:
    data = _archive.single_file("/a/b/c.txt", b"x", 0o600)
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        members = archive.getmembers()
    assert [m.name for m in members] == ["a/b/c.txt"]
    assert members[0].mode == 0o600


def test_extract_creates_parents(tmp_path: Path) -> None:
    _archive.extract(_archive.single_file("/x/y/z.txt", b"hi"), tmp_path)
    assert (tmp_path / "x" / "y" / "z.txt").read_bytes() == b"hi"


@pytest.mark.parametrize("name", ["../evil.txt", "a/../../evil.txt"])
def test_extract_refuses_dotdot(tmp_path: Path, name: str) -> None:
    target = tmp_path / "dest"
    with pytest.raises(PathEscapeError):
        _archive.extract(_tar((name, b"x", None)), target)
    assert not (tmp_path / "evil.txt").exists()


def test_extract_refuses_writing_through_a_symlink(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "dest"
    archive = _tar(("link", None, str(outside)), ("link/planted.txt", b"x", None))
    with pytest.raises(PathEscapeError):
        _archive.extract(archive, dest)
    assert not (outside / "planted.txt").exists()


def test_extract_replaces_an_existing_symlink_instead_of_following_it(tmp_path: Path) -> None:
    outside = tmp_path / "victim.txt"
    outside.write_text("keep")
    dest = tmp_path / "dest"
    dest.mkdir()
    os.symlink(outside, dest / "f.txt")
    _archive.extract(_tar(("f.txt", b"new", None)), dest)
    assert outside.read_text() == "keep"
    assert not (dest / "f.txt").is_symlink()
    assert (dest / "f.txt").read_text() == "new"


def test_absolute_symlink_targets_are_kept_as_data(tmp_path: Path) -> None:
    _archive.extract(_tar(("venv/python", None, "/usr/bin/python3")), tmp_path)
    assert os.readlink(tmp_path / "venv" / "python") == "/usr/bin/python3"


def test_directory_round_trip_and_strip_top(tmp_path: Path) -> None:
    source = tmp_path / "src"
    (source / "sub").mkdir(parents=True)
    (source / "sub" / "f.txt").write_text("f")
    data = _archive.directory(source, "/work/proj")
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        names = sorted(archive.getnames())
    assert names == ["work/proj", "work/proj/sub", "work/proj/sub/f.txt"]
    out = tmp_path / "out"
    _archive.extract(data, out, strip_top="work")
    assert (out / "proj" / "sub" / "f.txt").read_text() == "f"


def test_first_file() -> None:
    assert _archive.first_file(_archive.single_file("/a.txt", b"content")) == b"content"


def _special_tar() -> bytes:
    """What a hostile sandbox packs: a setuid root shell, a block device, a FIFO, a file
    owned by another user, and hard links to the shell and to the device."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        top = tarfile.TarInfo("evil")
        top.type, top.mode = tarfile.DIRTYPE, 0o1777
        archive.addfile(top)
        shell = tarfile.TarInfo("evil/sh")
        shell.mode, shell.uid, shell.gid, shell.uname = 0o4755, 0, 0, "root"
        shell.size = 4
        archive.addfile(shell, io.BytesIO(b"#!sh"))
        for name, kind in (("evil/loop", tarfile.BLKTYPE), ("evil/fifo", tarfile.FIFOTYPE)):
            special = tarfile.TarInfo(name)
            special.type, special.mode, special.devmajor = kind, 0o666, 7
            archive.addfile(special)
        owned = tarfile.TarInfo("evil/owned")
        owned.mode, owned.uid, owned.gid, owned.uname, owned.gname = 0o2644, 4321, 4321, "x", "x"
        archive.addfile(owned, io.BytesIO(b""))
        for name, target in (("evil/sh2", "evil/sh"), ("evil/loop2", "evil/loop")):
            link = tarfile.TarInfo(name)
            link.type, link.linkname = tarfile.LNKTYPE, target
            archive.addfile(link)
    return buffer.getvalue()


@pytest.mark.parametrize("strip_top", [None, "evil"])
def test_extract_keeps_nothing_that_gains_privileges(tmp_path: Path, strip_top: str | None) -> None:
    _archive.extract(_special_tar(), tmp_path, strip_top=strip_top)
    tree = tmp_path if strip_top else tmp_path / "evil"
    assert sorted(p.name for p in tree.iterdir()) == ["owned", "sh", "sh2"]
    assert (tree / "sh").stat().st_mode & 0o7777 == 0o755
    assert (tree / "sh2").stat().st_ino == (tree / "sh").stat().st_ino
    assert (tree / "owned").stat().st_mode & 0o7777 == 0o644
    assert (tree / "owned").stat().st_uid == os.getuid()
    if strip_top is None:
        assert tree.stat().st_mode & 0o7777 == 0o777
