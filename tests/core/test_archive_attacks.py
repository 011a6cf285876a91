"""The transfer attack corpus against the one extractor and the one builder, with hand-built tars.

A sandbox's own ``tar`` cannot easily make ``..`` or absolute names, a link followed by a
file through it, or the same name twice; a hostile or broken packer can, so they are built
here.  Every case must leave nothing outside the destination and fail with a sandbox error
that names the member, or land inside it.
"""

from __future__ import annotations

import io
import os
import shutil
import socket
import stat
import subprocess
import tarfile
from pathlib import Path

import pytest

from sandbox_runtime import (
    PathEscapeError,
    SandboxError,
    SandboxIsADirectoryError,
    SandboxNotADirectoryError,
)
from sandbox_runtime._core import archive as _archive

_GiB = 1 << 30


def _gnu_tar() -> bool:
    if shutil.which("tar") is None:
        return False
    version = subprocess.run(["tar", "--version"], capture_output=True, text=True, check=False)
    return "GNU" in version.stdout


def _tar(*members: tuple[str, str, str | bytes | None]) -> bytes:
    """Members as (name, kind, content or link target); kinds: file, dir, sym, hard."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, kind, extra in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                data = extra if isinstance(extra, bytes) else b""
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
                continue
            info.type = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE}[
                kind
            ]
            info.linkname = str(extra or "")
            archive.addfile(info)
    return buffer.getvalue()


def _everything_under(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*")}


@pytest.fixture
def arena(tmp_path: Path) -> Path:
    """``arena/dest`` is the destination; anything new beside it is an escape."""
    (tmp_path / "dest").mkdir()
    return tmp_path


@pytest.mark.parametrize(
    "members",
    [
        [("../escape", "file", b"x")],
        [("/abs/escape", "file", b"x")],
        [("a/../../escape", "file", b"x")],
        [("ok/../../../escape", "file", b"x")],
        [("x", "sym", "/etc"), ("x/passwd", "file", b"root::0:0::/:/bin/sh\n")],
        [("y", "sym", "../../.."), ("y/escape", "file", b"x")],
        [("z", "sym", ".."), ("z/escape", "file", b"x")],
        [("d", "dir", None), ("d/up", "sym", "../.."), ("d/up/escape", "file", b"x")],
        [("h", "hard", "/etc/passwd")],
        [("h", "hard", "../escape")],
        [("h", "hard", "a/../../../etc/passwd")],
    ],
    ids=[
        "dotdot",
        "absolute",
        "dotdot-inside",
        "deep-dotdot",
        "symlink-to-etc-then-file-through-it",
        "symlink-up-then-file-through-it",
        "symlink-to-parent-then-file",
        "nested-symlink-up-then-file",
        "hard-link-absolute",
        "hard-link-up",
        "hard-link-dotdot-inside",
    ],
)
def test_escapes_are_refused_and_write_nothing_outside(
    arena: Path, members: list[tuple[str, str, str | bytes | None]]
) -> None:
    before = _everything_under(arena)
    passwd = Path("/etc/passwd").read_bytes()
    with pytest.raises(PathEscapeError):
        _archive.extract(_tar(*members), arena / "dest")
    outside = _everything_under(arena) - before
    assert all(name.startswith("dest") for name in outside), outside
    assert Path("/etc/passwd").read_bytes() == passwd


def test_symlinks_out_arrive_as_links_never_followed(arena: Path) -> None:
    members = [("x", "sym", "/etc"), ("y", "sym", "../../.."), ("ok", "sym", "x/passwd")]
    _archive.extract(_tar(*members), arena / "dest")
    assert os.readlink(arena / "dest" / "x") == "/etc"
    assert os.readlink(arena / "dest" / "y") == "../../.."
    assert os.readlink(arena / "dest" / "ok") == "x/passwd"
    assert _everything_under(arena) == {"dest", "dest/x", "dest/y", "dest/ok"}


def test_an_existing_host_link_out_is_replaced_not_written_through(arena: Path) -> None:
    victim = arena / "victim"
    victim.mkdir()
    os.symlink(victim, arena / "dest" / "x")
    with pytest.raises(PathEscapeError):
        _archive.extract(_tar(("x/planted", "file", b"x")), arena / "dest")
    _archive.extract(_tar(("x", "file", b"now a file")), arena / "dest")
    assert list(victim.iterdir()) == []
    assert (arena / "dest" / "x").read_bytes() == b"now a file"


@pytest.mark.parametrize(
    ("members", "error"),
    [
        ([("d", "dir", None), ("d", "file", b"x")], SandboxIsADirectoryError),
        ([("d", "file", b"x"), ("d", "dir", None)], SandboxNotADirectoryError),
        ([("d", "file", b"x"), ("d/child", "file", b"y")], SandboxNotADirectoryError),
        ([("d", "file", b"x"), ("d/a/b", "file", b"y")], SandboxNotADirectoryError),
        ([("d", "dir", None), ("d", "sym", "/etc")], SandboxIsADirectoryError),
    ],
    ids=["dir-then-file", "file-then-dir", "file-then-child", "file-then-grandchild", "dir-link"],
)
def test_a_directory_and_file_collision_is_a_sandbox_error_naming_it(
    arena: Path, members: list[tuple[str, str, str | bytes | None]], error: type[SandboxError]
) -> None:
    with pytest.raises(error, match="'d"):
        _archive.extract(_tar(*members), arena / "dest")
    assert _everything_under(arena) <= {"dest", "dest/d"}


def test_the_same_name_twice_keeps_the_last(arena: Path) -> None:
    members: list[tuple[str, str, str | bytes | None]] = [
        ("f", "file", b"first"),
        ("f", "file", b"second"),
        ("l", "sym", "/etc"),
    ]
    _archive.extract(_tar(*members, ("l", "file", b"replaced the link")), arena / "dest")
    assert (arena / "dest" / "f").read_bytes() == b"second"
    assert not (arena / "dest" / "l").is_symlink()
    assert (arena / "dest" / "l").read_bytes() == b"replaced the link"


def test_a_hard_link_to_a_dropped_or_missing_member_is_dropped(arena: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        fifo = tarfile.TarInfo("fifo")
        fifo.type = tarfile.FIFOTYPE
        archive.addfile(fifo)
        for name, target in (("to-fifo", "fifo"), ("to-nothing", "never-packed")):
            link = tarfile.TarInfo(name)
            link.type, link.linkname = tarfile.LNKTYPE, target
            archive.addfile(link)
    _archive.extract(buffer.getvalue(), arena / "dest")
    assert _everything_under(arena) == {"dest"}


# -- huge sparse files ----------------------------------------------------------------------


def _allocated(path: Path) -> int:
    return path.stat().st_blocks * 512


def _sparse_file(path: Path, size: int) -> None:
    with path.open("wb") as handle:
        handle.write(b"head")
        handle.seek(size - 4)
        handle.write(b"tail")


@pytest.mark.skipif(not _gnu_tar(), reason="needs GNU tar (its --sparse)")
def test_a_gnu_sparse_20g_file_lands_sparse(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    _sparse_file(tree / "big", 20 * _GiB)
    packed = subprocess.run(
        ["tar", "--sparse", "-cf", "-", "-C", str(tmp_path), "tree"],
        check=True,
        capture_output=True,
    ).stdout
    assert len(packed) < 1 << 20  # only the data travels
    _archive.extract(packed, tmp_path / "out")
    big = tmp_path / "out" / "tree" / "big"
    assert big.stat().st_size == 20 * _GiB
    assert _allocated(big) < 1 << 20
    with big.open("rb") as handle:
        assert handle.read(4) == b"head"
        handle.seek(20 * _GiB - 4)
        assert handle.read(4) == b"tail"


def test_zeros_sent_in_full_still_land_as_holes(tmp_path: Path) -> None:
    # A packer without sparse support (busybox tar) sends the zeros; the host skips them.
    data = b"a" * 10 + bytes(64 << 20) + b"z"
    _archive.extract(_tar(("zeros", "file", data)), tmp_path / "out")
    landed = tmp_path / "out" / "zeros"
    assert landed.read_bytes() == data
    assert _allocated(landed) < 8 << 20


def test_the_sparse_writer_packs_only_data_and_round_trips(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    _sparse_file(source / "big", 20 * _GiB)
    (source / "plain").write_bytes(b"plain")
    spool = tmp_path / "spool.tar"
    with spool.open("wb") as sink:
        _archive.write_tree(sink, str(source), "src")
    assert spool.stat().st_size < 1 << 20
    with spool.open("rb") as packed:
        _archive.extract(packed, tmp_path / "out", strip_top="src")
    big = tmp_path / "out" / "big"
    assert big.stat().st_size == 20 * _GiB
    assert _allocated(big) < 1 << 20
    with big.open("rb") as handle:
        assert handle.read(4) == b"head"
        handle.seek(20 * _GiB - 4)
        assert handle.read(4) == b"tail"
    assert (tmp_path / "out" / "plain").read_bytes() == b"plain"
    if _gnu_tar():  # GNU tar reads the same members
        listing = subprocess.run(
            ["tar", "-tvf", str(spool)], check=True, capture_output=True, text=True
        ).stdout
        assert "src/big" in listing
        assert str(20 * _GiB) in listing


def test_a_single_sparse_file_download_lands_sparse(tmp_path: Path) -> None:
    _sparse_file(tmp_path / "big", 4 * _GiB)
    spool = tmp_path / "spool.tar"
    with spool.open("wb") as sink:
        _archive.write_tree(sink, str(tmp_path / "big"), "big")
    with spool.open("rb") as packed:
        _archive.extract_file(packed, tmp_path / "copy")
    assert (tmp_path / "copy").stat().st_size == 4 * _GiB
    assert _allocated(tmp_path / "copy") < 1 << 20


def test_a_file_that_is_all_hole_round_trips(tmp_path: Path) -> None:
    """``truncate -s 1M`` and nothing written: once a raw ``tarfile.ReadError`` on local."""
    source = tmp_path / "src"
    source.mkdir()
    with (source / "hole").open("wb") as handle:
        handle.truncate(1 << 20)
    spool = tmp_path / "spool.tar"
    with spool.open("wb") as sink:
        _archive.write_tree(sink, str(source), "src")
    with spool.open("rb") as packed:
        _archive.extract(packed, tmp_path / "out", strip_top="src")
    landed = tmp_path / "out" / "hole"
    assert landed.read_bytes() == bytes(1 << 20)
    assert _allocated(landed) < 1 << 20
    if _gnu_tar():  # GNU tar reads the member back with its size
        listing = subprocess.run(
            ["tar", "-tvf", str(spool)], check=True, capture_output=True, text=True
        ).stdout
        assert str(1 << 20) in listing


# -- the upload builder ----------------------------------------------------------------------


def test_the_upload_builder_carries_nothing_that_gains_privileges(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "suid").write_text("#!/bin/sh\n")
    (tree / "suid").chmod(0o4755)
    (tree / "shared").mkdir()
    (tree / "shared").chmod(0o3777)
    (tree / "sgid").write_text("g")
    (tree / "sgid").chmod(0o2644)
    os.mkfifo(tree / "fifo")
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(tree / "sock"))
        os.symlink("/etc", tree / "out")
        os.symlink("../../..", tree / "up")
        outside = tmp_path / "outside"
        outside.write_text("outside")
        os.link(outside, tree / "hard-out")
        os.link(tree / "sgid", tree / "hard-in")
        spool = io.BytesIO()
        _archive.write_directory(spool, tree, "/work/tree")
    finally:
        server.close()
    with tarfile.open(fileobj=io.BytesIO(spool.getvalue())) as archive:
        members = {m.name: m for m in archive.getmembers()}
    names = set(members)
    assert "work/tree/fifo" not in names
    assert "work/tree/sock" not in names
    assert all(not name.startswith("/") and ".." not in name.split("/") for name in names)
    for member in members.values():
        assert member.mode & 0o7000 == 0, member.name
        assert (member.uid, member.gid, member.uname, member.gname) == (0, 0, "", ""), member.name
        assert member.isreg() or member.isdir() or member.issym() or member.islnk()
    assert members["work/tree/suid"].mode == 0o755
    assert members["work/tree/shared"].mode == 0o777
    assert members["work/tree/out"].linkname == "/etc"  # a link, the sandbox's own /etc
    assert members["work/tree/hard-out"].isreg()  # its other name is outside: a copy
    # Whichever name tarfile met second is the link, and it names the first, in the tree.
    linked = next(members[n] for n in ("work/tree/hard-in", "work/tree/sgid") if members[n].islnk())
    assert linked.linkname.startswith("work/tree/")


def test_an_upload_extracted_as_root_keeps_no_setuid_and_no_host_owner(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "suid").write_text("x")
    if os.geteuid() == 0:  # a host owner that must not follow the file
        os.chown(tree / "suid", 4321, 4321)
    (tree / "suid").chmod(0o4755)  # after the chown, which would clear it
    spool = io.BytesIO()
    _archive.write_directory(spool, tree, "/up")
    _archive.extract(spool.getvalue(), tmp_path / "sandbox")
    landed = tmp_path / "sandbox" / "up" / "suid"
    assert stat.S_IMODE(landed.stat().st_mode) == 0o755
    assert landed.stat().st_uid == os.getuid()
