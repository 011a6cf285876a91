"""The local backend's checkpoint copy and its rollback of what changed (issue 22).

Each test compares the whole sandbox root with the checkpoint's copy, entry by entry (type,
mode, owner, size, mtime, content, symlink target, hard-link groups), so a rollback that
skipped a change fails here even where the workdir canary would not look.
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox_runtime import SandboxRuntime, delete_checkpoint
from sandbox_runtime.backends.local import _checkpoints, _tree_copy
from sandbox_runtime.backends.local._tree_copy import TreeCopier

Tree = dict[str, tuple[object, ...]]


def _tree(root: Path) -> Tree:
    """Every entry under ``root`` with what a rollback must make equal."""
    found: Tree = {}
    groups: dict[int, list[str]] = {}
    for directory, names, files in os.walk(root):
        for name in names + files:
            path = os.path.join(directory, name)
            rel = os.path.relpath(path, root)
            info = os.lstat(path)
            kind = stat.S_IFMT(info.st_mode)
            if stat.S_ISREG(info.st_mode):
                body: object = hashlib.sha256(Path(path).read_bytes()).hexdigest()
                groups.setdefault(info.st_ino, []).append(rel)
            elif stat.S_ISLNK(info.st_mode):
                body = os.readlink(path)
            else:
                body = None
            mtime = None if stat.S_ISLNK(info.st_mode) else info.st_mtime_ns
            found[rel] = (kind, stat.S_IMODE(info.st_mode), info.st_uid, info.st_size, mtime, body)
    for members in groups.values():
        for rel in members:
            found[rel] += (tuple(sorted(members)),)
    return found


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[SandboxRuntime]:
    with SandboxRuntime(backend="local", options={"base_dir": tmp_path}) as sandbox:
        yield sandbox


def _root(sandbox: SandboxRuntime) -> Path:
    return sandbox.backend.root  # type: ignore[attr-defined,no-any-return]


def _saved(sandbox: SandboxRuntime, checkpoint_id: str) -> Path:
    base = sandbox.backend.options.base_dir
    return _checkpoints.checkpoint_home(base, checkpoint_id) / "root"


_SETUP = """
mkdir -p repo/pkg repo/ro repo/deep/a/b && cd repo
for i in 1 2 3 4 5 6 7 8; do echo "module $i" > pkg/m$i.py; done
echo same > same.txt && echo linked > one && ln one two && ln -s pkg/m1.py link
echo keep > ro/inside && chmod 555 ro && echo deep > deep/a/b/c && chmod 741 pkg/m2.py
truncate -s 1M sparse && echo tail >> sparse && mkfifo pipe
"""

_CHANGES = """
cd repo
cp -p same.txt /tmp/ref && printf 'emas\\n' > same.txt && touch -r /tmp/ref same.txt
echo changed >> one
rm pkg/m3.py && echo new > pkg/new.py && chmod 600 pkg/m4.py && touch -d 2001-01-01 pkg/m5.py
rm -rf deep && echo file > deep && rm pkg/m6.py && mkdir pkg/m6.py && echo x > pkg/m6.py/x
ln -sfn pkg/m7.py link && chmod 755 ro && echo added > ro/added && chmod 555 ro
mkdir -p brand/new && echo n > brand/new/n && rm pipe && echo notpipe > pipe
"""


def test_rollback_restores_every_kind_of_change_and_only_those(sandbox: SandboxRuntime) -> None:
    sandbox.exec(_SETUP, check=True)
    checkpoint = sandbox.checkpoint()
    saved = _saved(sandbox, checkpoint.id)
    assert _tree(_root(sandbox)) == _tree(saved)  # the copy is exact, holes and links kept
    assert os.stat(saved / "workspace/repo/sparse").st_blocks * 512 < 1 << 20
    untouched = os.lstat(_root(sandbox) / "workspace/repo/pkg/m8.py").st_ino
    root_inode = os.lstat(_root(sandbox)).st_ino
    for _ in range(3):  # a rollback does not consume the checkpoint, nor its stamps
        sandbox.exec(_CHANGES, check=True)
        assert _tree(_root(sandbox)) != _tree(saved)
        sandbox.rollback(checkpoint)
        assert _tree(_root(sandbox)) == _tree(saved)
    # Restored in place: the root and the unchanged files are the same inodes as before.
    assert os.lstat(_root(sandbox)).st_ino == root_inode
    assert os.lstat(_root(sandbox) / "workspace/repo/pkg/m8.py").st_ino == untouched
    delete_checkpoint(checkpoint, options=sandbox.config.options)


def test_rollback_without_this_roots_stamps_copies_the_whole_tree(
    sandbox: SandboxRuntime,
) -> None:
    sandbox.exec(_SETUP, check=True)
    checkpoint = sandbox.checkpoint()
    home = _checkpoints.checkpoint_home(sandbox.backend.options.base_dir, checkpoint.id)
    (home / _checkpoints.STAMPS).unlink()  # a record lost
    sandbox.exec(_CHANGES, check=True)
    sandbox.rollback(checkpoint)
    assert _tree(_root(sandbox)) == _tree(_saved(sandbox, checkpoint.id))
    # ...and the stamps are noted again, so the next rollback restores only the changes.
    assert _checkpoints.read_stamps(home, sandbox.id, _root(sandbox))
    (copy,) = [result.unwrap() for result in sandbox.fork(1)]
    with copy:  # another sandbox's rollback to this checkpoint: not its stamps, a whole copy
        copy.exec(_CHANGES, check=True)
        copy.rollback(checkpoint)
        assert _tree(_root(copy)) == _tree(_saved(sandbox, checkpoint.id))
    sandbox.exec(_CHANGES, check=True)
    sandbox.rollback(checkpoint)
    assert _tree(_root(sandbox)) == _tree(_saved(sandbox, checkpoint.id))


def test_a_process_killed_by_the_rollback_writes_nothing_after_it(
    sandbox: SandboxRuntime,
) -> None:
    sandbox.exec(_SETUP, check=True)
    checkpoint = sandbox.checkpoint()
    sandbox.exec_background("while :; do echo x >> repo/pkg/m1.py; touch repo/new-$$; done")
    deadline = time.monotonic() + 20
    while "x" not in sandbox.read_text("repo/pkg/m1.py"):  # it runs: the rollback must end it
        assert time.monotonic() < deadline
        time.sleep(0.02)
    sandbox.rollback(checkpoint)
    saved = _saved(sandbox, checkpoint.id)
    assert _tree(_root(sandbox)) == _tree(saved)
    sandbox.exec("sleep 0.2", check=True)
    assert _tree(_root(sandbox)) == _tree(saved)


def test_a_change_right_after_the_checkpoint_is_rolled_back(sandbox: SandboxRuntime) -> None:
    """Same second, same size, same mtime: the stamp's ctime still tells (no racy trust)."""
    sandbox.exec(_SETUP, check=True)
    for _ in range(5):
        checkpoint = sandbox.checkpoint()
        sandbox.exec(
            "cd repo && cp -p pkg/m1.py /tmp/r && printf 'eludom 1\\n' > pkg/m1.py && "
            "touch -r /tmp/r pkg/m1.py",
            check=True,
        )
        sandbox.rollback(checkpoint)
        assert sandbox.read_text("repo/pkg/m1.py") == "module 1\n"
        delete_checkpoint(checkpoint, options=sandbox.config.options)


def test_copier_stamps_only_what_is_old_enough(tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.mkdir()
    (source / "a").write_text("a")
    info = os.lstat(source / "a")
    copier = TreeCopier(since_ns=info.st_ctime_ns)  # stamped "during" the change: racy
    copier.copy(str(source), str(tmp_path / "copy"), "", os.lstat(source))
    assert "a" not in copier.stamps
    late = TreeCopier(since_ns=info.st_ctime_ns + 10**9)
    late.copy(str(source), str(tmp_path / "copy2"), "", os.lstat(source))
    assert "a" in late.stamps
    assert (tmp_path / "copy2/a").read_text() == "a"


def test_many_files_are_copied_in_parallel_exactly(sandbox: SandboxRuntime) -> None:
    sandbox.exec(
        "mkdir -p big && cd big && for d in 0 1 2 3 4 5; do mkdir d$d; "
        "for i in $(seq 100); do echo $d-$i > d$d/f$i; done; done && "
        "ln d0/f1 d5/link && chmod 600 d1/f1 && chmod 4755 d2/f2 && touch -d 2001-01-01 d3",
        check=True,
    )
    checkpoint = sandbox.checkpoint()
    assert _tree(_root(sandbox)) == _tree(_saved(sandbox, checkpoint.id))
    sandbox.exec("cd big && rm -r d4 && echo x > d0/f1 && chmod 644 d2/f2", check=True)
    sandbox.rollback(checkpoint)
    assert _tree(_root(sandbox)) == _tree(_saved(sandbox, checkpoint.id))


def test_the_cp_route_stamps_as_well(
    sandbox: SandboxRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where ``cp -a`` copies (reflink filesystems), stamps come from a scan before it."""
    monkeypatch.setattr(
        _checkpoints, "CP_FILESYSTEMS", frozenset({_tree_copy.filesystem_type("/tmp"), ""})
    )
    sandbox.exec(_SETUP, check=True)
    checkpoint = sandbox.checkpoint()
    root_inode = os.lstat(_root(sandbox)).st_ino
    sandbox.exec(_CHANGES, check=True)
    sandbox.rollback(checkpoint)
    assert _tree(_root(sandbox)) == _tree(_saved(sandbox, checkpoint.id))
    assert os.lstat(_root(sandbox)).st_ino == root_inode  # restored in place


_MAPPED_WRITER = """
import mmap, os, time
with open("repo/mapped", "r+b") as handle:
    mapped = mmap.mmap(handle.fileno(), 0)
    mapped[0:1] = b"A"  # the page is dirty and writable from here on
    open("repo/ready", "w").close()
    while not os.path.exists("repo/go"):
        time.sleep(0.01)
    mapped[1:2] = b"B"  # a write to that page: no fault, so no new ctime
    open("repo/done", "w").close()
    time.sleep(120)
"""


def _wait_for_file(sandbox: SandboxRuntime, path: str) -> None:
    deadline = time.monotonic() + 20
    while not sandbox.exists(path):
        assert time.monotonic() < deadline, path
        time.sleep(0.02)


def test_a_file_mapped_shared_and_writable_is_never_trusted(sandbox: SandboxRuntime) -> None:
    """Writes through a mapping to an already-dirty page move no ctime: restore regardless."""
    sandbox.exec("mkdir repo && printf xxxx > repo/mapped", check=True)
    sandbox.write_text("writer.py", _MAPPED_WRITER)
    sandbox.exec_background("python3 writer.py")
    _wait_for_file(sandbox, "repo/ready")
    time.sleep(0.1)  # older than the racy margin: only the mapping can make it untrusted
    checkpoint = sandbox.checkpoint()
    assert sandbox.read_text("repo/mapped") == "Axxx"
    sandbox.write_text("repo/go", "")
    _wait_for_file(sandbox, "repo/done")
    assert sandbox.read_text("repo/mapped") == "ABxx"
    sandbox.rollback(checkpoint)
    assert sandbox.read_text("repo/mapped") == "Axxx"
    assert _tree(_root(sandbox)) == _tree(_saved(sandbox, checkpoint.id))
