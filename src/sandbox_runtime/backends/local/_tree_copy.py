"""Copying a sandbox tree while noting what proves each path unchanged later (its stamp).

A local checkpoint is a copy of the sandbox's root; a rollback restores only the paths that
changed since (``_rollback``).  What proves a path unchanged is its *stamp*: inode, link
count, ``ctime`` (which only the kernel sets: ``touch -d`` and ``utime`` set the mtime and
move the ctime to now), and type, mode, owner, size, mtime.  Any write, ``chmod``, link or
unlink of a path changes its ctime (and a rename too, on Linux's ext4, xfs, btrfs and
tmpfs), and adding or removing a directory's entries changes the directory's.

One catch is the timestamp clock's granularity: a change made in the same clock tick as the
stamp was read could keep the ctime equal (racy, as git calls it).  So a stamp is kept only
when its ctime is older than ``since_ns - RACY_MARGIN_NS`` where ``since_ns`` was read
before the path was; a path stamped too recently is simply not trusted (always restored).
On a filesystem with whole-second times (ctime a multiple of a second) the margin is two
seconds.

The copier here replaces ``cp -a`` for checkpoints on filesystems without reflinks, where
``cp -a`` costs more CPU (it also writes an ACL per file; docs/performance.md): one walk
copies and stamps (no second scan), file data is copied in the kernel (``copy_file_range``,
or cloned with ``FICLONE`` where the filesystem can) by a few threads; modes, owners, times,
extended attributes, hard links, symlinks, holes and nodes are kept.  Anything it cannot
make the same (a device node without the right to make one) raises
:class:`CopyUnsupported` and the caller falls back to ``cp -a``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from concurrent.futures import ThreadPoolExecutor

__all__ = [
    "RACY_MARGIN_NS",
    "CopyUnsupported",
    "Stamp",
    "TreeCopier",
    "filesystem_type",
    "scan_tree",
    "set_owner_mode_times",
    "stamp_of",
    "trusted",
]

#: A stamp whose ctime is this close to the time the walk began is not trusted.
RACY_MARGIN_NS = 12_000_000
_COARSE_MARGIN_NS = 2_000_000_000
_FICLONE = 0x40049409
# Threads copying file data, and from how many files they are worth starting.
_MAX_WORKERS = 4
_PARALLEL_FROM = 256
# Errors meaning "this filesystem cannot clone (these two files)": copy the data instead.
_NO_CLONE = {errno.EOPNOTSUPP, errno.ENOTTY, errno.EXDEV, errno.EINVAL, errno.ENOSYS}

Stamp = tuple[int, int, int, int, int, int, int, int]


class CopyUnsupported(OSError):
    """The tree holds something this copier cannot reproduce; use ``cp -a`` instead."""


def stamp_of(info: os.stat_result) -> Stamp:
    """What must be equal for a path to count as untouched (see the module docstring)."""
    return (
        info.st_mode,
        info.st_uid,
        info.st_gid,
        info.st_size,
        info.st_ino,
        info.st_nlink,
        info.st_mtime_ns,
        info.st_ctime_ns,
    )


def trusted(info: os.stat_result, since_ns: int) -> bool:
    """Whether a stamp read after ``since_ns`` can prove the path unchanged later."""
    ctime = info.st_ctime_ns
    margin = _COARSE_MARGIN_NS if ctime % 1_000_000_000 == 0 else RACY_MARGIN_NS
    return ctime < since_ns - margin


def _entries(path: str) -> list[tuple[str, os.stat_result]]:
    with os.scandir(path) as found:
        return [(entry.name, entry.stat(follow_symlinks=False)) for entry in found]


def scan_tree(root: str, since_ns: int, rel: str = "") -> dict[str, Stamp]:
    """The trusted stamps of ``root`` and everything under it, keyed by relative path."""
    stamps: dict[str, Stamp] = {}
    pending = [(rel, os.lstat(root if not rel else os.path.join(root, rel)))]
    while pending:
        path, info = pending.pop()
        if trusted(info, since_ns):
            stamps[path] = stamp_of(info)
        if stat.S_ISDIR(info.st_mode):
            host = os.path.join(root, path) if path else root
            pending.extend(
                (f"{path}/{name}" if path else name, child) for name, child in _entries(host)
            )
    return stamps


def filesystem_type(path: str) -> str:
    """The type of the filesystem ``path`` is on (``/proc/self/mountinfo``), or ``""``."""
    real, found, depth = os.path.realpath(path), "", -1
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as mounts:
            for line in mounts:
                fields = line.split()
                point = fields[4].replace("\\040", " ")
                inside = real == point or real.startswith(point.rstrip("/") + "/")
                if inside and len(point) > depth:
                    found, depth = fields[fields.index("-") + 1], len(point)
    except (OSError, ValueError, IndexError):
        return ""
    return found


def _finish_dir(source: str, target: str, info: os.stat_result) -> None:
    """A copied directory's extended attributes, owner, mode and times."""
    with contextlib.suppress(OSError):
        fd = os.open(source, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            target_fd = os.open(target, os.O_RDONLY | os.O_DIRECTORY)
            try:
                _copy_xattrs(fd, target_fd)
            finally:
                os.close(target_fd)
        finally:
            os.close(fd)
    set_owner_mode_times(target, info)


def _copy_xattrs(source: int, target: int) -> None:
    """Extended attributes (ACLs, capabilities) as ``cp -a`` keeps them, where permitted."""
    try:
        names = os.listxattr(source)
    except OSError:
        return
    for name in names:
        with contextlib.suppress(OSError):
            os.setxattr(target, name, os.getxattr(source, name))


def set_owner_mode_times(
    target: int | str, info: os.stat_result, mode_is_set: bool = False
) -> None:
    """Owner (where allowed, as ``cp -a`` does), mode, then times: chmod/chown move no mtime."""
    if (info.st_uid, info.st_gid) != (os.geteuid(), os.getegid()):
        with contextlib.suppress(PermissionError):
            os.chown(target, info.st_uid, info.st_gid)
    if not mode_is_set:
        os.chmod(target, stat.S_IMODE(info.st_mode))
    os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))


def _process_umask() -> int:
    """The process's umask, read without changing it (``os.umask`` would, for all threads)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o777  # unknown: every mode is set explicitly


def _creation_mode(info: os.stat_result, umask: int) -> int | None:
    """The mode to create a copy with when that alone gives ``info``'s mode, else ``None``.

    Saves a ``chmod`` per file; never for set-id or sticky bits, nor a file whose owner
    changes afterwards (a ``chown`` clears set-id bits, so those are set after it).
    """
    mode = stat.S_IMODE(info.st_mode)
    if mode & ~0o777 or mode & umask or (info.st_uid, info.st_gid) != (os.geteuid(), os.getegid()):
        return None
    return mode


class TreeCopier:
    """Copies entries (recursively), linking hard links again, and stamps what it copied.

    ``stamps`` gets the stamp of each source path read after ``since_ns`` (``None``: no
    stamps); hard links are grouped by source inode across every call on one copier.
    """

    def __init__(self, since_ns: int | None, workers: int | None = None) -> None:
        self.since_ns = since_ns
        self.stamps: dict[str, Stamp] = {}
        self.workers = workers or min(_MAX_WORKERS, os.cpu_count() or 1)
        self._linked: dict[tuple[int, int], str] = {}
        self._clone = True
        self._umask = _process_umask()
        self._files: list[tuple[str, str, os.stat_result]] = []
        self._dirs: list[tuple[str, str, os.stat_result]] = []

    def copy(self, source: str, target: str, rel: str, info: os.stat_result) -> None:
        """Copy the entry ``source`` (whose lstat is ``info``) to the new path ``target``.

        The walk makes directories, links and nodes; file data is then copied by
        ``workers`` threads (creating inodes is most of the cost, and the kernel does it in
        parallel in different directories); directories get their modes and times last,
        deepest first, since filling them moved their times.
        """
        self._visit(source, target, rel, info)
        files, self._files = self._files, []
        if len(files) >= _PARALLEL_FROM and self.workers > 1:
            with ThreadPoolExecutor(self.workers, thread_name_prefix="tree-copy") as pool:
                shares = [files[start :: self.workers] for start in range(self.workers)]
                for done in [pool.submit(self._copy_files, share) for share in shares]:
                    done.result()
        else:
            self._copy_files(files)
        dirs, self._dirs = self._dirs, []
        for dir_source, dir_target, dir_info in dirs:
            _finish_dir(dir_source, dir_target, dir_info)

    def _copy_files(self, files: list[tuple[str, str, os.stat_result]]) -> None:
        for source, target, info in files:
            self._copy_file(source, target, info)

    def _visit(self, source: str, target: str, rel: str, info: os.stat_result) -> None:
        mode = info.st_mode
        if stat.S_ISDIR(mode):
            os.mkdir(target, 0o700)
            # f-strings, not os.path.join: this runs for every path of the tree.
            for name, child in _entries(source):
                child_rel = f"{rel}/{name}" if rel else name
                self._visit(f"{source}/{name}", f"{target}/{name}", child_rel, child)
            self._dirs.append((source, target, info))  # after its children: deepest first
        elif stat.S_ISLNK(mode):
            os.symlink(os.readlink(source), target)
            if (info.st_uid, info.st_gid) != (os.geteuid(), os.getegid()):
                with contextlib.suppress(PermissionError):
                    os.lchown(target, info.st_uid, info.st_gid)
            os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns), follow_symlinks=False)
        elif stat.S_ISREG(mode) and info.st_nlink < 2:
            self._files.append((source, target, info))
        elif not self._link_again(target, info):  # the first of its links: copied now
            if stat.S_ISREG(mode):
                self._copy_file(source, target, info)
            else:
                self._make_node(target, info)
        if self.since_ns is not None and trusted(info, self.since_ns):
            self.stamps[rel] = stamp_of(info)

    def _link_again(self, target: str, info: os.stat_result) -> bool:
        """Hard-link ``target`` to the copy of an earlier path of the same inode, if any."""
        if info.st_nlink < 2:
            return False
        key = (info.st_dev, info.st_ino)
        first = self._linked.get(key)
        if first is None:
            self._linked[key] = target
            return False
        os.link(first, target, follow_symlinks=False)
        return True

    def _copy_file(self, source: str, target: str, info: os.stat_result) -> None:
        reader = os.open(source, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            mode = _creation_mode(info, self._umask)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
            writer = os.open(target, flags, 0o600 if mode is None else mode)
            try:
                self._copy_data(reader, writer, info)
                _copy_xattrs(reader, writer)
                set_owner_mode_times(writer, info, mode_is_set=mode is not None)
            finally:
                os.close(writer)
        finally:
            os.close(reader)

    def _copy_data(self, reader: int, writer: int, info: os.stat_result) -> None:
        if info.st_size == 0:
            return
        if self._clone:
            try:
                fcntl.ioctl(writer, _FICLONE, reader)
                return
            except OSError as exc:
                if exc.errno not in _NO_CLONE:
                    raise
                self._clone = False
        if info.st_blocks * 512 < info.st_size:
            _copy_sparse(reader, writer, info.st_size)
            return
        _copy_range(reader, writer, 0, info.st_size)

    @staticmethod
    def _make_node(target: str, info: os.stat_result) -> None:
        """FIFOs, sockets and device nodes, as ``cp -a`` makes them."""
        try:
            os.mknod(target, stat.S_IFMT(info.st_mode) | 0o600, info.st_rdev)
        except PermissionError as exc:
            raise CopyUnsupported(exc.errno, f"cannot make node {target}: {exc}") from exc
        set_owner_mode_times(target, info)


def _copy_range(reader: int, writer: int, offset: int, length: int) -> None:
    end = offset + length
    while offset < end:
        done = os.copy_file_range(reader, writer, end - offset, offset, offset)
        if done == 0:  # the file shrank meanwhile: a later ctime says so
            return
        offset += done


def _copy_sparse(reader: int, writer: int, size: int) -> None:
    """Copy only the data regions, so holes stay holes (as ``cp -a`` keeps them)."""
    offset = 0
    while offset < size:
        try:
            data = os.lseek(reader, offset, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # only a hole is left
                break
            raise
        hole = os.lseek(reader, data, os.SEEK_HOLE)
        _copy_range(reader, writer, data, hole - data)
        offset = hole
    os.ftruncate(writer, size)
