"""Filesystem checkpoints kept as tar archives on the client's disk, for any backend.

A backend whose platform has no snapshot of its own (``kubernetes``; an e2b-protocol
service without snapshot routes) can still offer ``checkpoint_filesystem`` and ``fork``:
the sandbox's workdir and declared paths (``SandboxConfig.checkpoint_paths``) are read
through the backend's own ``get_archive`` (``tar`` in the sandbox, or its agent), rewritten
on the host to paths relative to ``/`` (nothing is ever extracted on the host), and kept as
``<root>/<id>/data.tar`` next to an atomically written ``meta.json`` that carries the same
ownership labels as a sandbox, so listing, deletion and ``reap`` judge them as they judge
sandboxes (``_core/records.py``, ``ownership.why_reapable``).

A restore makes each captured path equal to the capture: it empties the path (a directory
keeps itself, its contents go; a file or symlink goes), extracts the archive through
``put_archive`` and sets the directory's mode back; a declared path that did not exist at
capture is removed.  Deletions, additions, modes and symlinks follow; git state follows from
the ``.git`` directory in the workdir.  Anything outside the captured paths is the image's:
a sandbox started from a checkpoint starts from the same image, so packages installed
outside them are not there.

The store's directory: the ``root`` given, else ``$SANDBOX_RUNTIME_CHECKPOINT_DIR``, else
``$XDG_STATE_HOME/sandbox-runtime/checkpoints`` (``~/.local/state/sandbox-runtime/checkpoints``).
"""

from __future__ import annotations

import builtins
import io
import os
import posixpath
import re
import shutil
import tarfile
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from sandbox_runtime._core import archive_delta
from sandbox_runtime._core.backend import ExecRequest, ReapedSandbox
from sandbox_runtime._core.checkpoints import Checkpoint, checkpoint_labels
from sandbox_runtime._core.ownership import why_reapable
from sandbox_runtime._core.records import abandoned_without_record, read_meta, write_meta
from sandbox_runtime._core.results import ExecResult
from sandbox_runtime.errors import (
    BackendError,
    CheckpointNotFoundError,
    ConfigError,
    SandboxFileNotFoundError,
)

__all__ = [
    "CHECKPOINT_DIR_VAR",
    "ArchiveCheckpointStore",
    "ArchiveEntry",
    "ArchiveRecord",
    "ArchiveSandbox",
    "default_checkpoint_root",
]

#: The environment variable naming the store's directory.
CHECKPOINT_DIR_VAR = "SANDBOX_RUNTIME_CHECKPOINT_DIR"
DATA = "data.tar"
_ID = re.compile(r"ckpt-[0-9a-f]{16}")
_HELPER_TIMEOUT = 3600.0
#: Past this much state output (millions of entries) a delta restore is not attempted.
_STATE_LIMIT = 1 << 30

#: What a captured path was: a directory (emptied, then refilled), anything else (removed,
#: then extracted), or nothing (removed at restore).
EntryKind = Literal["dir", "other", "absent"]

# Empty each path before the archive is extracted: a directory keeps itself (its mode is
# set back afterwards), anything else is removed.  Arguments: kind path kind path ...
_EMPTY_SCRIPT = """
set -e
while [ "$#" -gt 1 ]; do
  kind=$1; p=$2; shift 2
  if [ "$kind" = dir ] && [ -d "$p" ] && [ ! -L "$p" ]; then
    find "$p" -mindepth 1 -maxdepth 1 -exec rm -rf -- {} +
  else
    rm -rf -- "$p"
    if [ "$kind" = dir ]; then mkdir -p -- "$p"; fi
  fi
done
"""


class ArchiveSandbox(Protocol):
    """What the store needs of a backend: its archive primitives and a command."""

    def get_archive(self, path: str) -> bytes: ...

    def put_archive(self, data: bytes) -> None: ...

    def exec(self, request: ExecRequest) -> ExecResult: ...


@dataclass(frozen=True, slots=True)
class ArchiveEntry:
    """One captured path, what it was, and (a directory) its mode."""

    path: str
    kind: EntryKind
    mode: int | None = None


@dataclass(frozen=True, slots=True)
class ArchiveRecord:
    """A stored checkpoint: its handle, the image it was taken on, and its paths."""

    checkpoint: Checkpoint
    image: str | None
    entries: tuple[ArchiveEntry, ...]
    home: Path


def default_checkpoint_root(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The store's directory: ``explicit``, else the environment's (module docstring)."""
    if explicit is not None and str(explicit):
        return Path(explicit).expanduser()
    from_env = os.environ.get(CHECKPOINT_DIR_VAR)
    if from_env:
        return Path(from_env).expanduser()
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "sandbox-runtime" / "checkpoints"


def _covering_paths(paths: Sequence[str]) -> list[str]:
    """Normalised absolute paths, each once, without those inside another."""
    chosen: list[str] = []
    for raw in sorted({posixpath.normpath(path) for path in paths}):
        if not raw.startswith("/"):
            raise ConfigError(f"checkpoint path {raw!r}: must be absolute")
        if raw == "/":
            raise ConfigError("checkpoint path '/': the whole root cannot be restored in place")
        if not any(raw.startswith(parent + "/") for parent in chosen):
            chosen.append(raw)
    return chosen


def _rebase(name: str, path: str) -> str:
    """A member name of ``get_archive(path)`` as a name relative to ``/``; escapes refused."""
    base = posixpath.basename(path)
    normal = posixpath.normpath(name)
    if normal != base and not normal.startswith(base + "/"):
        raise BackendError(f"the archive of {path} holds {name!r}, outside {path}")
    return posixpath.join(posixpath.dirname(path), normal).lstrip("/")


def _append(out: tarfile.TarFile, data: bytes, path: str) -> ArchiveEntry:
    """Copy ``get_archive(path)``'s members into ``out`` under their full names."""
    entry: ArchiveEntry | None = None
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as source:
        for member in source:
            original = member.name
            member.name = _rebase(original, path)
            if member.islnk():
                member.linkname = _rebase(member.linkname, path)
            if entry is None:
                if posixpath.normpath(original) != posixpath.basename(path):
                    raise BackendError(f"the archive of {path} does not start with it")
                is_dir = member.isdir()
                entry = ArchiveEntry(path, "dir" if is_dir else "other", member.mode)
            out.addfile(member, source.extractfile(member) if member.isreg() else None)
    if entry is None:
        raise BackendError(f"the archive of {path} is empty")
    return entry


def _run(sandbox: ArchiveSandbox, argv: tuple[str, ...], what: str) -> None:
    request = ExecRequest(command=argv, cwd="/", timeout=_HELPER_TIMEOUT, max_output_bytes=1 << 20)
    result = sandbox.exec(request)
    if result.exit_code != 0:
        raise BackendError(f"{what} failed ({result.exit_code}): {result.stderr.strip()}")


def _set_modes(sandbox: ArchiveSandbox, modes: Sequence[tuple[int, str]]) -> None:
    if modes:
        script = 'while [ "$#" -gt 1 ]; do chmod "$1" -- "$2" || exit 1; shift 2; done'
        flat = [item for mode, path in modes for item in (f"{mode & 0o7777:o}", path)]
        _run(sandbox, ("/bin/sh", "-c", script, "sh", *flat), "setting the modes back")


def _restore_whole(sandbox: ArchiveSandbox, entries: Sequence[ArchiveEntry], data: bytes) -> None:
    """Empty every captured path, extract the whole archive, set the directories' modes."""
    arguments: list[str] = []
    for entry in entries:
        arguments += ["dir" if entry.kind == "dir" else "remove", entry.path]
    _run(sandbox, ("/bin/sh", "-c", _EMPTY_SCRIPT, "sh", *arguments), "emptying the paths")
    if data.strip(b"\0"):
        sandbox.put_archive(data)
    _set_modes(
        sandbox,
        [(e.mode, e.path) for e in entries if e.kind == "dir" and e.mode is not None],
    )


def _restore_changes(sandbox: ArchiveSandbox, entries: Sequence[ArchiveEntry], data: bytes) -> bool:
    """Rewrite only what differs from the archive; ``False`` where it cannot compare."""
    if any(entry.kind == "other" for entry in entries):
        return False
    roots = [entry.path for entry in entries if entry.kind == "dir"]
    wanted = archive_delta.archive_state(data, roots)
    if wanted is None:
        return False
    request = ExecRequest(
        command=("/bin/sh", "-c", archive_delta.STATE_SCRIPT, "sh", *roots),
        cwd="/",
        timeout=_HELPER_TIMEOUT,
        max_output_bytes=_STATE_LIMIT,
    )
    result = sandbox.exec(request)
    if result.exit_code == archive_delta.NO_TOOLS_EXIT or len(result.stdout_bytes) >= _STATE_LIMIT:
        return False
    if result.exit_code != 0:
        raise BackendError(f"reading the sandbox's state failed: {result.stderr.strip()}")
    steps = archive_delta.plan(wanted, archive_delta.sandbox_state(result.stdout_bytes))
    gone = steps.remove + [entry.path for entry in entries if entry.kind == "absent"]
    if gone:
        removal = ExecRequest(
            command=("/bin/sh", "-c", "xargs -0 rm -rf --"),
            cwd="/",
            stdin="\0".join(gone).encode("utf-8", "surrogateescape") + b"\0",
            timeout=_HELPER_TIMEOUT,
        )
        done = sandbox.exec(removal)
        if done.exit_code != 0:
            raise BackendError(f"removing changed paths failed: {done.stderr.strip()}")
    if steps.extract:
        sandbox.put_archive(_subset(data, steps.extract))
    _set_modes(sandbox, steps.modes)
    return True


def _subset(data: bytes, names: set[str]) -> bytes:
    """The members of the archive ``data`` named in ``names``, as a new archive."""
    buffer = io.BytesIO()
    with (
        tarfile.open(fileobj=io.BytesIO(data), mode="r:") as source,
        tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as out,
    ):
        for member in source:
            if member.name in names:
                out.addfile(member, source.extractfile(member) if member.isreg() else None)
    return buffer.getvalue()


class ArchiveCheckpointStore:
    """Checkpoints as tar archives under one directory (see the module docstring)."""

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.root = default_checkpoint_root(root)

    def __repr__(self) -> str:
        return f"ArchiveCheckpointStore({str(self.root)!r})"

    def _home(self, checkpoint_id: str) -> Path:
        if not _ID.fullmatch(checkpoint_id):
            raise CheckpointNotFoundError(f"not an archive checkpoint id: {checkpoint_id!r}")
        return self.root / checkpoint_id

    # -- capture and restore -------------------------------------------------------------

    def capture(
        self,
        sandbox: ArchiveSandbox,
        paths: Sequence[str],
        *,
        backend_name: str,
        source_id: str,
        image: str | None,
        labels: Mapping[str, str],
        lifetime: float,
        run_id: str | None = None,
        workdir: str | None = None,
    ) -> Checkpoint:
        """Archive ``paths`` of ``sandbox`` into a new checkpoint (ownership labels included).

        The record is written before the archive, so a client killed mid-capture leaves a
        directory ``reap`` can judge; listing shows only finished captures.
        """
        chosen = _covering_paths(paths)
        stored = checkpoint_labels(
            source_id=source_id,
            kind="filesystem",
            lifetime=lifetime,
            run_id=run_id,
            labels=labels,
            workdir=workdir,
        )
        checkpoint_id = f"ckpt-{uuid.uuid4().hex[:16]}"
        home = self._home(checkpoint_id)
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        home.mkdir(mode=0o700)
        meta: dict[str, Any] = {
            "id": checkpoint_id,
            "backend": backend_name,
            "image": image,
            "labels": stored,
        }
        try:
            write_meta(home, meta)
            entries = self._write_archive(sandbox, chosen, home)
            size = (home / DATA).stat().st_size
            meta["entries"] = [[e.path, e.kind, e.mode] for e in entries]
            meta["size_bytes"] = size
            write_meta(home, meta)
        except BaseException:
            shutil.rmtree(home, ignore_errors=True)
            raise
        return Checkpoint.from_labels(backend_name, checkpoint_id, stored, size_bytes=size)

    @staticmethod
    def _write_archive(sandbox: ArchiveSandbox, paths: list[str], home: Path) -> list[ArchiveEntry]:
        partial = home / f".{DATA}.partial"
        entries: list[ArchiveEntry] = []
        with tarfile.open(partial, mode="w", format=tarfile.GNU_FORMAT) as out:
            for path in paths:
                try:
                    data = sandbox.get_archive(path)
                except SandboxFileNotFoundError:
                    entries.append(ArchiveEntry(path, "absent"))
                    continue
                entries.append(_append(out, data, path))
        os.replace(partial, home / DATA)
        return entries

    def restore(self, sandbox: ArchiveSandbox, checkpoint: Checkpoint | str) -> None:
        """Make every captured path of ``sandbox`` equal to the capture, deletions included.

        Only what changed is rewritten where the sandbox has the tools to compare
        (``archive_delta.py``); else the captured paths are emptied and the whole archive
        extracted.  Commands still running in the sandbox are not stopped: one that writes
        meanwhile changes the result, as it would after any restore.
        """
        record = self.record(checkpoint)
        data = (record.home / DATA).read_bytes()
        if not _restore_changes(sandbox, record.entries, data):
            _restore_whole(sandbox, record.entries, data)

    # -- records -------------------------------------------------------------------------

    def record(
        self, checkpoint: Checkpoint | str, backend_name: str | None = None
    ) -> ArchiveRecord:
        """A finished checkpoint's record; ``CheckpointNotFoundError`` when there is none."""
        if isinstance(checkpoint, Checkpoint):
            checkpoint_id, backend_name = checkpoint.id, checkpoint.backend
        else:
            checkpoint_id = checkpoint
        home = self._home(checkpoint_id)
        record = self._read(home)
        if record is None or (backend_name and record.checkpoint.backend != backend_name):
            raise CheckpointNotFoundError(f"no checkpoint {checkpoint_id!r} in {self.root}")
        return record

    @staticmethod
    def _read(home: Path) -> ArchiveRecord | None:
        """The record of a finished capture in ``home``, or ``None``."""
        meta = read_meta(home)
        if meta is None or "entries" not in meta or not (home / DATA).is_file():
            return None
        try:
            entries = tuple(ArchiveEntry(str(p), k, m) for p, k, m in meta["entries"])
            size = int(meta.get("size_bytes") or 0)
            checkpoint = Checkpoint.from_labels(
                str(meta["backend"]), str(meta["id"]), meta["labels"], size_bytes=size
            )
        except (KeyError, TypeError, ValueError):
            return None
        image = meta.get("image")
        return ArchiveRecord(checkpoint, str(image) if image else None, entries, home)

    def _homes(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return sorted(home for home in self.root.iterdir() if _ID.fullmatch(home.name))

    def list(self, backend_name: str, labels: Mapping[str, str] | None = None) -> list[Checkpoint]:
        """The finished checkpoints of ``backend_name`` carrying every label in ``labels``."""
        wanted = dict(labels or {})
        found = []
        for home in self._homes():
            record = self._read(home)
            if record is None or record.checkpoint.backend != backend_name:
                continue
            if record.checkpoint.matches(wanted):
                found.append(record.checkpoint)
        return found

    def delete(self, checkpoint: Checkpoint | str, backend_name: str | None = None) -> None:
        """Remove one checkpoint; ``CheckpointNotFoundError`` when it is not there."""
        record = self.record(checkpoint, backend_name)
        shutil.rmtree(record.home)

    def reap(self, backend_name: str, *, dry_run: bool = False) -> builtins.list[ReapedSandbox]:
        """Remove ``backend_name``'s checkpoints that expired or whose owner died.

        A directory whose record never got written (its creator was killed right after the
        ``mkdir``) goes too, whichever backend asks.  Reasons start with ``checkpoint:``.
        """
        reaped: list[ReapedSandbox] = []
        for home in self._homes():
            meta = read_meta(home)
            reason: str | None
            if meta is None:
                reason = "record missing" if abandoned_without_record(home) else None
            elif meta.get("backend") != backend_name:
                continue
            else:
                reason = why_reapable(meta["labels"])
            if reason is None:
                continue
            reaped.append(ReapedSandbox(backend_name, home.name, f"checkpoint: {reason}"))
            if not dry_run:
                shutil.rmtree(home, ignore_errors=True)
        return reaped
