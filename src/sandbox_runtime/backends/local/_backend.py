"""The ``local`` backend: a directory per sandbox and real processes, no daemon needed.

Each sandbox is a fresh directory (``<base_dir>/sbx-<id>/root``) that stands for the
sandbox's ``/``: the file API maps ``/workspace/a.py`` to ``<root>/workspace/a.py`` and refuses
any path that would leave the root, through ``..`` or through a symlink.

Two isolation levels, stated plainly (unset, ``isolation`` is ``namespace`` where bubblewrap
works here and ``none`` with a one-line warning where it does not; see :func:`resolve_isolation`):

``isolation="none"``
    Commands run as ordinary host processes, with the sandbox directory as working
    directory, the host's environment and the host's filesystem.  Relative paths agree
    between files and commands; absolute paths in commands mean host paths.  This protects
    against nothing: it is for trusted code and for speed.

``isolation="namespace"``
    Commands run under bubblewrap (``bwrap``) in new PID, IPC and UTS namespaces (and a new
    network namespace with ``network=False``).  The sandbox directory is the command's
    ``/``, one mount, so ``/testbed``, ``/root`` and ``/tmp`` are the sandbox's and a ``mv``
    between them is a rename, as in a container; the host's top-level directories that the
    sandbox does not have itself (``/usr``, ``/bin``, ...) are bound read-only over empty
    stand-ins made at start.  Absolute paths then agree everywhere.  It is not a container:
    the host's files stay readable and resource limits are not enforced.

A sandbox ends at ``lifetime`` even if its client is killed: a detached watchdog process
removes it then, and ``sandbox-runtime reap`` removes the sandboxes of dead owners sooner.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import posixpath
import shutil
import signal
import stat
import subprocess
import tarfile
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from sandbox_runtime.backend_kit import (
    LABEL_PREFIX,
    TOKEN_VAR,
    Availability,
    Backend,
    BackendOptions,
    Capability,
    Checkpoint,
    ExecRequest,
    ExecResult,
    FileInfo,
    FileType,
    ReapedSandbox,
    SandboxConfig,
    SandboxInfo,
    TreeChanges,
    TreeMark,
    abandoned_without_record,
    checkpoint_labels,
    extract_archive,
    make_labels,
    new_token,
    read_meta,
    unpack_download,
    why_reapable,
    with_expiry,
    write_directory_archive,
    write_meta,
    write_tree_archive,
)
from sandbox_runtime.errors import (
    BackendUnavailableError,
    CheckpointNotFoundError,
    ConfigError,
    PathEscapeError,
    SandboxError,
    SandboxFileNotFoundError,
    SandboxGoneError,
    SandboxIsADirectoryError,
    SandboxNotADirectoryError,
    SandboxReadOnlyError,
    SandboxStartError,
)

from . import _checkpoints, _tree
from ._bubblewrap import WRITABLE_INSIDE_HOST_ENTRIES, Bubblewrap
from ._options import LocalOptions
from ._process import (
    continue_marked,
    end_marked,
    kill_marked,
    run_process,
    shared_writable_inodes,
    stop_marked,
)
from ._python_env import VENV, HostPython, command_env, host_python, make_venv
from ._rollback import restore_changes
from ._tree_copy import RACY_MARGIN_NS, scan_tree

__all__ = ["LocalBackend", "LocalOptions", "resolve_isolation"]

logger = logging.getLogger("sandbox_runtime.local")

_MARKER_VAR = "SANDBOX_RUNTIME_ID"
# Namespace isolation: the host's top-level entries bound into the sandbox's root, decided
# once at start (the stand-ins made for them then sit in the root like the sandbox's own).
_HOST_ENTRIES = "host-entries.json"
# The sandbox's end (epoch seconds) that its watchdog reads; moved by ``set_expiry``.
_LEASE = "expires-at"
# Runs detached; at the end it kills every process carrying the sandbox's marker and
# removes the sandbox directory.  $1 seconds, $2 marker, $3 directory, $4 the lease file
# (the end in epoch seconds, written by ``set_expiry``; re-read before giving up, so an
# extension is always seen), $5 the hard cap in epoch seconds (0: none).
_WATCHDOG = (
    "e=$(( $(date +%s) + $1 + 1 )); while :; do "
    'if [ -s "$4" ]; then read -r x < "$4"; case "$x" in ""|*[!0-9]*) ;; *) e=$x;; esac; fi; '
    'if [ "$5" -gt 0 ] && [ "$e" -gt "$5" ]; then e=$5; fi; '
    'r=$(( e - $(date +%s) )); [ "$r" -le 0 ] && break; [ "$r" -gt 5 ] && r=5; '
    'sleep "$r"; done; for e in /proc/[0-9]*/environ; do '
    'grep -qszxF "$2" "$e" && p=${e#/proc/} && kill -9 "${p%/environ}" 2>/dev/null; done; '
    'rm -rf -- "$3"'
)


def _cap_at(config: SandboxConfig) -> int:
    """The hard cap for the watchdog (epoch seconds; 0: none)."""
    if config.max_lifetime is None:
        return 0
    return int(time.time() + config.max_lifetime)


_fallback_warned: set[str] = set()
_fallback_lock = threading.Lock()


def resolve_isolation(options: LocalOptions) -> Literal["none", "namespace"]:
    """The isolation a sandbox gets: the one asked for, or the best this host has.

    Unset, it is ``namespace`` where bubblewrap can create namespaces (one probe per process
    and binary, cached by :class:`Bubblewrap`), else ``none``, said once in one line.  Asked
    for, ``namespace`` never falls back: the start fails with bubblewrap's reason.
    """
    if options.isolation is not None:
        return options.isolation
    problem = Bubblewrap.problem(options.bwrap_path)
    if not problem:
        return "namespace"
    with _fallback_lock:
        if options.bwrap_path not in _fallback_warned:
            _fallback_warned.add(options.bwrap_path)
            logger.warning(
                "local backend: isolation=none (commands see the host's paths), because %s",
                problem,
            )
    return "none"


def _default_base_dir() -> Path:
    return Path(tempfile.gettempdir()) / f"sandbox-runtime-{os.getuid()}"


def _inside(root: str, path: str) -> bool:
    return path == root or path.startswith(root + os.sep)


def _file_info(name: str, path: str, host: str, info: os.stat_result) -> FileInfo:
    kind: FileType = "other"
    target = None
    if stat.S_ISLNK(info.st_mode):
        kind, target = "symlink", os.readlink(host)
    elif stat.S_ISDIR(info.st_mode):
        kind = "dir"
    elif stat.S_ISREG(info.st_mode):
        kind = "file"
    return FileInfo(
        name=name,
        path=path,
        type=kind,
        size=info.st_size,
        mode=stat.S_IMODE(info.st_mode),
        mtime=info.st_mtime,
        symlink_target=target,
    )


def _kill_watchdog(marker: str) -> None:
    """SIGKILL the watchdog of the sandbox with ``marker`` (and its ``sleep``), if it still runs.

    Its own client kills it on close; this is for a sandbox reaped after its client died.
    The watchdog is found by its argument vector, which names the marker.
    """
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                argv = handle.read().split(b"\0")
        except OSError:
            continue
        if len(argv) > 5 and argv[3] == b"watchdog" and argv[5] == marker.encode():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(int(entry), signal.SIGKILL)


def _remove_tree(path: Path) -> None:
    def make_writable_and_retry(function: object, failed: str, _excinfo: object) -> None:
        parent = os.path.dirname(failed)
        with contextlib.suppress(OSError):
            os.chmod(parent, 0o700)
            os.chmod(failed, 0o700)
        with contextlib.suppress(OSError):
            if os.path.isdir(failed) and not os.path.islink(failed):
                shutil.rmtree(failed, ignore_errors=True)
            else:
                os.unlink(failed)

    if path.exists():
        shutil.rmtree(path, onerror=make_writable_and_retry)


class LocalBackend(Backend[LocalOptions]):
    """Sandboxes as host directories and processes; see the module docstring."""

    name = "local"
    options_model = LocalOptions
    capabilities = frozenset(
        {
            Capability.DIRECTORY_IMAGES,
            Capability.SHARED_HOST_FILESYSTEM,
            Capability.RECONNECT,
            Capability.STREAMING,
            Capability.CHECKPOINT_FILESYSTEM,
            Capability.FORK,
            Capability.EXTEND_LIFETIME,
            Capability.PAUSE,
        }
    )

    def __init__(self, config: SandboxConfig, options: LocalOptions) -> None:
        # The isolation is decided once, here; ``attach`` decides it from the sandbox's record
        # when it was left unset.
        self._asked_isolation = options.isolation
        options = options.model_copy(update={"isolation": resolve_isolation(options)})
        super().__init__(config, options)
        self._id = f"local-{uuid.uuid4().hex[:16]}"
        self._base = options.base_dir or _default_base_dir()
        self._home = self._base / f"sbx-{self._id.removeprefix('local-')}"
        self._root = self._home / "root"
        self._real_root = ""
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._stopped = False
        self._shell = shutil.which("bash") or "/bin/sh"
        self._host_entries: list[tuple[str, str | None]] | None = None
        self._host_python: HostPython | None = None
        self._hidden_dirs: list[str] | None = None
        # Markers killed by kill_marked: a command whose bubblewrap setup failed is not
        # started again once its marker was killed (see Bubblewrap.run).
        self._killed_markers: set[str] = set()
        # start_from_checkpoint: the checkpoint directory standing in for the template.
        self._from_checkpoint: Path | None = None
        self._paused_pids: set[int] = set()
        self._cleanups: list[threading.Thread] = []

    @classmethod
    def availability(cls, options: BackendOptions | None = None) -> Availability:
        """Always usable; ``namespace`` isolation, when asked for, needs working bubblewrap."""
        opts = cls.coerce_options(options)
        if opts.isolation == "namespace":
            problem = Bubblewrap.problem(opts.bwrap_path)
            if problem:
                return Availability(False, problem)
        return Availability(True)

    @property
    def sandbox_id(self) -> str:
        """``local-`` followed by 16 hex digits."""
        return self._id

    @property
    def root(self) -> Path:
        """The host directory standing for the sandbox's ``/``."""
        return self._root

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        """Create the sandbox directory, copy the template, and arm the lifetime watchdog."""
        if not self.options.network and self.options.isolation != "namespace":
            raise ConfigError("local backend: network=False needs isolation='namespace'")
        if self.options.isolation == "namespace":
            problem = Bubblewrap.problem(self.options.bwrap_path)
            if problem:
                raise BackendUnavailableError(f"local backend, namespace isolation: {problem}")
        resources = self.config.resources
        # Only the limits the config asked for: the default process limit is no request.
        limits = resources.model_dump(include=resources.model_fields_set, exclude_none=True)
        if limits:
            # Said, not silently dropped: a run sized for docker should know it got no limits.
            logger.warning(
                "local backend: resources %s are not enforced (use docker or kubernetes)",
                ", ".join(f"{key}={value}" for key, value in sorted(limits.items())),
            )
        template = self._template()
        try:
            self._base.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._home.mkdir(mode=0o700)
            # The ownership record comes first: a client killed during the copy below leaves
            # a directory that reap can still judge (owner gone) and remove.
            labels = make_labels(
                lifetime=self.config.lifetime,
                run_id=self.config.run_id,
                extra=self.config.labels,
                workdir=self.config.workdir,
            )
            write_meta(self._home, {"id": self._id, "labels": labels})
            if self._from_checkpoint is not None:
                _checkpoints.copy_tree(self._from_checkpoint / "root", self._root)
            elif template is not None:
                shutil.copytree(template, self._root, symlinks=True)
            else:
                self._root.mkdir()
            self._real_root = os.path.realpath(self._root)
            tmp = self._root / "tmp"
            tmp.mkdir(exist_ok=True)
            tmp.chmod(0o1777)
            workdir = Path(self._host_path(self.config.workdir))
            workdir.mkdir(parents=True, exist_ok=True)
            self._make_python_env()
            if self.options.isolation == "namespace":
                for mount_point in ("dev", "proc"):
                    (self._root / mount_point).mkdir(exist_ok=True)
                self._host_entries = self._checkpoint_entries() or Bubblewrap.host_entries(
                    self._root
                )
                (self._home / _HOST_ENTRIES).write_text(
                    json.dumps(self._host_entries), encoding="utf-8"
                )
            self._watchdog = subprocess.Popen(
                [
                    "/bin/sh",
                    "-c",
                    _WATCHDOG,
                    "watchdog",
                    str(int(self.config.lifetime + 0.999)),
                    self._marker,
                    str(self._home),
                    str(self._home / _LEASE),
                    str(_cap_at(self.config)),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
            )
        except (OSError, shutil.Error, SandboxError) as exc:
            _remove_tree(self._home)
            raise SandboxStartError(f"cannot create local sandbox in {self._home}: {exc}") from exc

    def _make_python_env(self) -> None:
        """The sandbox's own Python environment (:mod:`._python_env`), unless it has one."""
        if not self.options.own_python or (self._root / VENV.lstrip("/")).is_dir():
            return
        path = os.environ.get("PATH", os.defpath) if self.options.inherit_env else os.defpath
        host = host_python(self.config.env.get("PATH", path))
        if host is not None:
            make_venv(self._root, host)
            self._host_python = host

    def _hidden_host_python_dirs(self) -> list[str]:
        """The host Python's directories a namespace would hide.

        Those under ``/tmp`` or an entry the sandbox has its own of (``/root/.pyenv``).
        """
        host = self._host_python
        if host is None:
            return []
        if self._hidden_dirs is None:  # once: every command binds them (realpath, isdir)
            shown = {name for name, target in self._namespace_entries() if target is None}
            self._hidden_dirs = [
                path
                for path in host.directories()
                if path.split("/")[1] == "tmp" or path.split("/")[1] not in shown
            ]
        return self._hidden_dirs

    def _checkpoint_entries(self) -> list[tuple[str, str | None]] | None:
        """The host entries bound by the sandbox a checkpoint was taken of, if any.

        Its stand-ins are in the copied root, so computing them afresh would take them for
        the sandbox's own directories.
        """
        if self._from_checkpoint is None:
            return None
        try:
            saved = json.loads(
                (self._from_checkpoint / _checkpoints.HOST_ENTRIES).read_text(encoding="utf-8")
            )
        except (OSError, ValueError):
            return None
        return [(str(name), target) for name, target in saved]

    @classmethod
    def cannot_run(cls, image: str | None, options: BackendOptions | None = None) -> str | None:
        """A local sandbox's image is a host directory (its tree becomes the root) or none."""
        del options
        if image is None or Path(image).is_dir():
            return None
        return (
            f"local backend: image must be a host directory to copy as the sandbox's "
            f"root, got {image!r} (container images need the docker backend)"
        )

    def _template(self) -> Path | None:
        if self._from_checkpoint is not None:
            return None
        if self.config.image is None:
            return None
        why = self.cannot_run(self.config.image)
        if why is not None:
            raise SandboxStartError(why)
        template = Path(self.config.image)
        return template

    @property
    def _marker(self) -> str:
        return f"{_MARKER_VAR}={self._id}"

    def stop(self) -> None:
        """Kill the sandbox's processes and remove its directory; idempotent."""
        if self._stopped:
            return
        self._stopped = True
        if self._watchdog is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._watchdog.pid, signal.SIGKILL)
            self._watchdog.wait()
        else:  # attached: the watchdog belongs to the process that started the sandbox
            _kill_watchdog(self._marker)
        kill_marked(self._marker)
        for cleanup in self._cleanups:
            cleanup.join()
        _remove_tree(self._home)

    def attach(self, sandbox_id: str) -> None:
        """Take over a sandbox directory of this library (same ``base_dir``) by id."""
        home = self._base / f"sbx-{sandbox_id.removeprefix('local-')}"
        meta = read_meta(home)
        if meta is None or meta.get("id") != sandbox_id:
            raise SandboxGoneError(f"no local sandbox {sandbox_id!r} in {self._base}")
        if not (home / "root").is_dir():
            raise SandboxGoneError(f"local sandbox {sandbox_id!r} is not ready or is gone")
        self._id, self._home, self._root = sandbox_id, home, home / "root"
        self._real_root = os.path.realpath(self._root)
        if self._asked_isolation is None:  # as the sandbox was started, not as this host is
            started = "namespace" if (home / _HOST_ENTRIES).is_file() else "none"
            self.options = self.options.model_copy(update={"isolation": started})

    @classmethod
    def list_sandboxes(cls, options: BackendOptions | None = None) -> list[SandboxInfo]:
        """Sandbox directories under ``base_dir`` that are ready (their root exists)."""
        base = cls.coerce_options(options).base_dir or _default_base_dir()
        found = []
        for home in sorted(base.glob("sbx-*")) if base.is_dir() else []:
            meta = read_meta(home)
            if meta is not None and (home / "root").is_dir():
                found.append(SandboxInfo.from_labels(cls.name, str(meta["id"]), meta["labels"]))
        return found

    def set_expiry(self, expires_at: float) -> None:
        """Move the end: the watchdog's lease file first, then the record ``reap`` reads."""
        self._alive_or_raise()
        meta = read_meta(self._home)
        if meta is None:
            raise SandboxGoneError(f"local sandbox {self._id} is gone")
        end = int(expires_at + 0.999)
        partial = self._home / f".{_LEASE}.partial"
        try:
            partial.write_text(f"{end}\n", encoding="ascii")
            os.replace(partial, self._home / _LEASE)
            write_meta(self._home, {**meta, "labels": with_expiry(meta["labels"], end)})
        except OSError as exc:
            if not self._root.is_dir():
                raise SandboxGoneError(f"local sandbox {self._id} is gone") from exc
            raise SandboxError(f"cannot move the end of local sandbox {self._id}: {exc}") from exc

    def gone_cause(self) -> str:
        """``expired`` when the record's end has passed, else ``killed`` (reaped or removed)."""
        meta = read_meta(self._home)
        labels = meta.get("labels", {}) if meta else {}
        ends = labels.get(f"{LABEL_PREFIX}.expires-at")
        try:
            return "expired" if ends is not None and float(ends) <= time.time() + 1 else "killed"
        except ValueError:
            return "unknown"

    def is_alive(self) -> bool:
        """True until stopped, reaped, or expired (the directory is gone)."""
        return not self._stopped and self._root.is_dir()

    def _alive_or_raise(self) -> None:
        if not self.is_alive():
            raise SandboxGoneError(f"local sandbox {self._id} is gone")

    # -- checkpoints, forks, pause (docs/checkpoints.md) ----------------------------------

    def checkpoint(self, labels: Mapping[str, str], lifetime: float) -> Checkpoint:
        """Copy the sandbox's root (reflinked where the filesystem can) under ``base_dir``.

        Commands running meanwhile may change files during the copy: pause first for a
        consistent copy of a sandbox that has background commands.
        """
        self._alive_or_raise()
        stored = checkpoint_labels(
            source_id=self._id,
            kind="filesystem",
            lifetime=lifetime,
            run_id=self.config.run_id,
            labels=labels,
            workdir=self.config.workdir,
        )
        entries = self._home / _HOST_ENTRIES
        try:
            return _checkpoints.save(
                self._base,
                (self._id, self._root, shared_writable_inodes(self._marker)),
                stored,
                entries,
                _remove_tree,
            )
        except OSError as exc:
            raise SandboxError(f"cannot checkpoint local sandbox {self._id}: {exc}") from exc

    def rollback(self, checkpoint: Checkpoint) -> None:
        """Kill the sandbox's processes, then make its root the checkpoint's copy again.

        Where the checkpoint holds this root's stamps (it was taken of, or last rolled back
        to, by this sandbox), only the paths that changed are restored (``_rollback``);
        otherwise the root is swapped for a whole copy.  Either way the root keeps its path
        (``bwrap`` binds it by path), so the sandbox is the same.
        """
        self._alive_or_raise()
        home = _checkpoints.checkpoint_home(self._base, checkpoint.id)
        source = home / "root"
        if not source.is_dir():
            raise CheckpointNotFoundError(f"no local checkpoint {checkpoint.id!r} in {self._base}")
        if self._paused_pids:
            self.resume()
        end_marked(self._marker)
        stamps = _checkpoints.read_stamps(home, self._id, self._root)
        if stamps is not None:
            try:
                fresh, _ = restore_changes(self._root, source, stamps, _remove_tree)
            except OSError as exc:
                logger.warning("local rollback of %s: %s; copying the whole tree", self._id, exc)
            else:
                if fresh is not None:
                    _checkpoints.write_stamps(home, self._id, self._root, fresh)
                return
        self._replace_root(source)
        # Nothing runs in the sandbox now: once the clock has moved on, every stamp holds.
        time.sleep(2 * RACY_MARGIN_NS / 1e9)
        stamps = scan_tree(str(self._root), time.time_ns())
        _checkpoints.write_stamps(home, self._id, self._root, stamps)

    def _replace_root(self, source: Path) -> None:
        """Swap the root for a whole new copy of ``source`` (the path stays the same)."""
        staged = self._home / f"root.rollback-{uuid.uuid4().hex[:8]}"
        _checkpoints.copy_tree(source, staged)
        retired = self._home / f"root.retired-{uuid.uuid4().hex[:8]}"
        os.rename(self._root, retired)
        os.rename(staged, self._root)
        self._real_root = os.path.realpath(self._root)
        # Off the caller's path: removing 10,000 files can cost more than copying them.
        # ``stop`` waits for it; a killed client leaves it inside the home reap removes.
        remover = threading.Thread(
            target=_remove_tree, args=(retired,), name="local-rollback-cleanup", daemon=True
        )
        remover.start()
        self._cleanups.append(remover)

    def start_from_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Start with the checkpoint's copy as the root instead of the template's."""
        home = _checkpoints.checkpoint_home(self._base, checkpoint.id)
        if not (home / "root").is_dir():
            raise CheckpointNotFoundError(f"no local checkpoint {checkpoint.id!r} in {self._base}")
        self._from_checkpoint = home
        self.start()

    def pause(self) -> None:
        """SIGSTOP every process of the sandbox (those carrying its marker)."""
        self._alive_or_raise()
        self._paused_pids = stop_marked(self._marker)

    def resume(self) -> None:
        """SIGCONT the processes :meth:`pause` stopped, and any other of the sandbox's."""
        continue_marked(self._marker, self._paused_pids)
        self._paused_pids = set()

    @classmethod
    def list_checkpoints(cls, options: BackendOptions | None = None) -> list[Checkpoint]:
        """Complete checkpoint directories under ``base_dir``."""
        return _checkpoints.listing(cls.coerce_options(options).base_dir or _default_base_dir())

    @classmethod
    def delete_checkpoint(cls, checkpoint_id: str, options: BackendOptions | None = None) -> None:
        """Remove one checkpoint directory."""
        base = cls.coerce_options(options).base_dir or _default_base_dir()
        _checkpoints.delete(base, checkpoint_id, _remove_tree)

    # -- the agent's change, from the host (``_tree``) --------------------------------

    def _tree_host(self, sandbox_path: str) -> str | None:
        """The host path of a sandbox path the sandbox owns (``None``: absent or the host's)."""
        try:
            host = self._host_path(sandbox_path)
        except PathEscapeError:
            return None
        return None if self._bound_entry(host) is not None else host

    def mark_tree(self, root: str, watch: Sequence[str] = ()) -> TreeMark:
        """``lstat`` the sandbox's directory from the host (no command runs)."""
        self._alive_or_raise()
        host = self._tree_host(root)
        if host is None or not os.path.isdir(host) or os.path.islink(host):
            return super().mark_tree(root, watch)
        return _tree.host_mark(host, root, watch, self._tree_host)

    def tree_changes(self, mark: TreeMark) -> TreeChanges:
        """The paths whose ``lstat`` stamps moved since the mark, read from the host."""
        self._alive_or_raise()
        if not isinstance(mark.state, _tree.HostTree):
            return super().tree_changes(mark)
        host = self._tree_host(mark.root)
        if host is None:
            raise SandboxFileNotFoundError(f"no such directory: {mark.root}")
        return _tree.host_changes(host, mark, self._tree_host)

    # -- paths ---------------------------------------------------------------------------

    def _host_path(self, sandbox_path: str) -> str:
        """Map an absolute sandbox path into the root; refuse anything that leaves it.

        The parent is resolved through symlinks (a link to ``/etc`` inside the sandbox must
        not let a write reach the host's ``/etc``); the last component is left as is, so
        callers decide whether to follow it.
        """
        parts = [part for part in sandbox_path.split("/") if part not in ("", ".")]
        if ".." in parts:
            raise PathEscapeError(f"path leaves the sandbox: {sandbox_path!r}")
        root = self._real_root or os.path.realpath(self._root)
        if not parts:
            return root
        parent = os.path.realpath(os.path.join(root, *parts[:-1]))
        if not _inside(root, parent):
            raise PathEscapeError(f"path leaves the sandbox through a symlink: {sandbox_path!r}")
        return os.path.join(parent, parts[-1])

    def _resolved(self, sandbox_path: str) -> str:
        """Like :meth:`_seen_path`, following a final symlink too (for reads)."""
        host = self._host_path(sandbox_path)
        if self._bound_entry(host) is not None:
            return os.path.realpath(self._host_view(host))
        real = os.path.realpath(host)
        if not _inside(self._real_root, real):
            raise PathEscapeError(f"path leaves the sandbox through a symlink: {sandbox_path!r}")
        return real

    def _bound_entry(self, host: str) -> str | None:
        """The host's top-level directory that ``host`` (a path under the root) shows, if any.

        Under namespace isolation the host's directories the sandbox lacks are bound
        read-only over stand-ins in the root, so what commands see there is the host's.
        """
        if self.options.isolation != "namespace" or not _inside(self._real_root, host):
            return None
        inside = os.path.relpath(host, self._real_root)
        for own in WRITABLE_INSIDE_HOST_ENTRIES:  # the sandbox's own, bound over the host's
            if (inside == own or inside.startswith(own + os.sep)) and os.path.isdir(
                os.path.join(self._real_root, own)
            ):
                return None
        top = inside.split(os.sep, 1)[0]
        bound = {name for name, target in self._namespace_entries() if target is None}
        return top if top in bound else None

    def _seen_path(self, sandbox_path: str) -> str:
        """Where the file commands see at ``sandbox_path`` lives on the host (for reads)."""
        host = self._host_path(sandbox_path)
        return host if self._bound_entry(host) is None else self._host_view(host)

    def _host_view(self, host: str) -> str:
        """The host's own path for ``host``, a path under a stand-in in the root."""
        return os.path.join("/", os.path.relpath(host, self._real_root))

    def _writable_path(self, sandbox_path: str) -> str:
        """:meth:`_host_path`, refusing paths commands would see as the host's, read-only.

        Written into the stand-in, such a file would exist for the file API and not for
        commands; refusing says so instead.
        """
        host = self._host_path(sandbox_path)
        top = self._bound_entry(host)
        if top is not None:
            raise SandboxReadOnlyError(
                f"{sandbox_path}: /{top} is the host's, bound read-only into this local sandbox "
                f"(namespace isolation); write under a directory the sandbox owns (such as "
                f"{self.config.workdir} or /tmp), or start from a template directory that "
                f"has /{top}"
            )
        return host

    def _check_archive_writable(self, data: bytes) -> None:
        """Refuse an archive with a member under a read-only host directory (namespace)."""
        if self.options.isolation != "namespace":
            return
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as archive:
            tops = {posixpath.normpath(name).split("/", 1)[0] for name in archive.getnames()}
        for top in sorted(tops - {".", ""}):
            self._writable_path(f"/{top}/.")

    # -- commands ------------------------------------------------------------------------

    def exec(self, request: ExecRequest) -> ExecResult:
        """Run a command as a host process group (under bubblewrap when isolated)."""
        self._alive_or_raise()
        cwd_host = self._resolved(request.cwd)
        if not os.path.isdir(cwd_host):
            raise SandboxFileNotFoundError(f"working directory does not exist: {request.cwd}")
        command = (
            [self._shell, "-c", request.command]
            if isinstance(request.command, str)
            else list(request.command)
        )
        env = dict(os.environ) if self.options.inherit_env else {"PATH": os.defpath}
        if self.options.isolation == "namespace":
            argv = Bubblewrap.argv(
                # Found on the host's PATH, not the command's (a task may give one without it).
                shutil.which(self.options.bwrap_path) or self.options.bwrap_path,
                self._root,
                self._namespace_entries(),
                request.cwd,
                self.options.network,
            )
            # The host interpreter and the packages the sandbox's environment sees after its
            # own, where they live in a directory the sandbox has its own of (/root, /tmp).
            argv[-1:-1] = [
                arg for path in self._hidden_host_python_dirs() for arg in ("--ro-bind", path, path)
            ]
            if not isinstance(request.command, str):
                # bwrap reports a missing program as its own exit 1; sh reports 127 like a shell.
                command = ["/bin/sh", "-c", 'exec "$@"', "sh", *command]
            argv += command
            env["TMPDIR"] = "/tmp"
            cwd_for_popen = "/"
        else:
            argv = command
            env["TMPDIR"] = os.path.join(self._real_root, "tmp")
            env["SANDBOX_RUNTIME_ROOT"] = self._real_root
            cwd_for_popen = cwd_host
        env.update(request.env)
        if self.options.own_python and os.path.isdir(os.path.join(self._real_root, VENV[1:])):
            seen_root = "/" if self.options.isolation == "namespace" else self._real_root
            command_env(env, seen_root, given=request.env)
        env[_MARKER_VAR] = self._id
        token = new_token()
        env[TOKEN_VAR] = token

        def start(argv: list[str], pass_fds: tuple[int, ...]) -> ExecResult:
            return run_process(
                argv,
                cwd=cwd_for_popen,
                env=env,
                timeout=request.timeout,
                stdin=request.stdin,
                max_output_bytes=request.max_output_bytes,
                display=request.display,
                kill_marker=f"{TOKEN_VAR}={token}",
                buffers=request.output_buffers(),
                pass_fds=pass_fds,
            )

        try:
            if self.options.isolation == "namespace":

                def killed() -> bool:
                    return any(f"{k}={v}" in self._killed_markers for k, v in request.env.items())

                return Bubblewrap.run(argv, start, cancelled=killed)
            return start(argv, ())
        except FileNotFoundError as exc:
            # An argument vector naming a missing program: report it as a shell would.
            message = f"{exc.filename or argv[0]}: command not found\n".encode()
            return ExecResult(command=request.display, exit_code=127, stderr_bytes=message)

    def kill_marked(self, marker: str) -> bool:
        """Host-side: every process of this user whose environment holds ``marker``."""
        self._killed_markers.add(marker)
        kill_marked(marker)
        return True

    def _namespace_entries(self) -> list[tuple[str, str | None]]:
        """The host entries bound into this sandbox (read back when attached)."""
        if self._host_entries is None:
            try:
                saved = json.loads((self._home / _HOST_ENTRIES).read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise SandboxGoneError(
                    f"local sandbox {self._id} was not started with namespace isolation ({exc})"
                ) from None
            self._host_entries = [(str(name), target) for name, target in saved]
        return self._host_entries

    # -- files ---------------------------------------------------------------------------

    def put_archive(self, data: bytes) -> None:
        """Extract into the root; members escaping it are refused (see ``extract_archive``)."""
        self._alive_or_raise()
        self._check_archive_writable(data)
        extract_archive(data, Path(self._real_root))

    def get_archive(self, path: str) -> bytes:
        """A tar of ``path`` whose top member is its basename; symlinks inside stay links."""
        self._alive_or_raise()
        host = self._resolved(path)
        if not os.path.lexists(host):
            raise SandboxFileNotFoundError(f"no such file or directory in the sandbox: {path}")
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
            archive.add(host, arcname=os.path.basename(host.rstrip("/")) or "root")
        return buffer.getvalue()

    def copy_in(self, host: Path, path: str) -> None:
        """Copy from the host directly, streaming.

        A directory goes through a spooled tar, so that the escape checks of
        ``extract_archive`` apply to every member.
        """
        self._alive_or_raise()
        self._writable_path(path)
        if host.is_dir():
            with tempfile.TemporaryFile() as spool:
                write_directory_archive(spool, host, path)
                spool.seek(0)
                extract_archive(spool, Path(self._real_root))
            return
        if not host.exists():
            raise FileNotFoundError(f"no such file or directory on the host: {host}")
        if not host.is_file():  # a FIFO, socket or device: never opened, never sent
            raise SandboxError(f"only regular files and directories are uploaded: {host}")
        target = self._writable_path(path)
        if os.path.isdir(target) and not os.path.islink(target):
            raise SandboxIsADirectoryError(f"is a directory: {path}")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if os.path.islink(target):
            os.unlink(target)
        mode = host.stat().st_mode & 0o777  # never a host setuid, setgid or sticky bit
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
        with host.open("rb") as source, os.fdopen(os.open(target, flags, mode), "wb") as sink:
            shutil.copyfileobj(source, sink, 1 << 20)
        os.chmod(target, mode)

    def copy_out(self, path: str, host: Path) -> None:
        """Copy to the host through a spooled tar (bounded memory, symlinks kept as links).

        Files with holes travel sparse (``write_tree``), so the spool holds only their data.
        """
        self._alive_or_raise()
        source = self._resolved(path)
        if not os.path.lexists(source):
            raise SandboxFileNotFoundError(f"no such file or directory in the sandbox: {path}")
        with tempfile.TemporaryFile() as spool:
            write_tree_archive(spool, source, os.path.basename(source.rstrip("/")) or "root")
            spool.seek(0)
            unpack_download(spool, path, host)

    def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Write directly on the host (no tar round trip), replacing a symlink at the path."""
        self._alive_or_raise()
        host = self._writable_path(path)
        if os.path.isdir(host) and not os.path.islink(host):
            raise SandboxIsADirectoryError(f"is a directory: {path}")
        os.makedirs(os.path.dirname(host), exist_ok=True)
        if os.path.islink(host):
            os.unlink(host)
        descriptor = os.open(host, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
        os.chmod(host, mode & 0o7777)

    def read_file(self, path: str) -> bytes:
        """Read directly on the host, following symlinks only while they stay in the root."""
        self._alive_or_raise()
        host = self._resolved(path)
        try:
            with open(host, "rb") as handle:
                return handle.read()
        except FileNotFoundError as exc:
            raise SandboxFileNotFoundError(f"no such file in the sandbox: {path}") from exc
        except IsADirectoryError as exc:
            raise SandboxIsADirectoryError(f"is a directory: {path}") from exc

    def exists(self, path: str) -> bool:
        """Checked on the host, without a process."""
        self._alive_or_raise()
        return os.path.lexists(self._seen_path(path))

    def stat(self, path: str) -> FileInfo:
        """``lstat`` on the host, without a process."""
        self._alive_or_raise()
        host = self._seen_path(path)
        try:
            info = os.lstat(host)
        except FileNotFoundError as exc:
            raise SandboxFileNotFoundError(f"no such file or directory: {path}") from exc
        return _file_info(posixpath.basename(path) or "/", path, host, info)

    def list_dir(self, path: str) -> list[FileInfo]:
        """``os.scandir`` of the directory (a symlink to one is not followed)."""
        self._alive_or_raise()
        host = self._seen_path(path)
        if not os.path.lexists(host):
            raise SandboxFileNotFoundError(f"no such file or directory: {path}")
        if os.path.islink(host) or not os.path.isdir(host):
            raise SandboxNotADirectoryError(f"not a directory: {path}")
        with os.scandir(host) as entries:
            found = [
                _file_info(
                    e.name, posixpath.join(path, e.name), e.path, e.stat(follow_symlinks=False)
                )
                for e in entries
            ]
        return sorted(found, key=lambda entry: entry.name)

    def make_dir(self, path: str) -> None:
        """``os.makedirs`` inside the root."""
        self._alive_or_raise()
        host = self._writable_path(path)
        if os.path.lexists(host) and (os.path.islink(host) or not os.path.isdir(host)):
            raise SandboxNotADirectoryError(f"not a directory: {path}")
        os.makedirs(host, exist_ok=True)

    def remove(self, path: str, *, recursive: bool = False) -> None:
        """Unlink, or remove the tree with ``recursive``; never follows a symlink."""
        self._alive_or_raise()
        host = self._writable_path(path)
        if not os.path.lexists(host):
            return
        if os.path.isdir(host) and not os.path.islink(host):
            if not recursive:
                raise SandboxIsADirectoryError(f"is a directory (use recursive=True): {path}")
            shutil.rmtree(host)
        else:
            os.unlink(host)

    # -- reaping -------------------------------------------------------------------------

    @classmethod
    def reap(
        cls, options: BackendOptions | None = None, *, dry_run: bool = False
    ) -> list[ReapedSandbox]:
        """Remove sandbox directories (and their processes) that expired or lost their owner."""
        base = cls.coerce_options(options).base_dir or _default_base_dir()
        reaped: list[ReapedSandbox] = []
        if not base.is_dir():
            return reaped
        for home in sorted(base.glob("sbx-*")):
            meta = read_meta(home)
            if meta is None:
                if not abandoned_without_record(home):
                    continue  # a start in progress: its record is about to appear
                reason: str | None = "start interrupted before its ownership record was written"
                meta = {"id": "local-" + home.name.removeprefix("sbx-")}
            else:
                reason = why_reapable(meta.get("labels", {}))
            if reason is None:
                continue
            sandbox_id = str(meta.get("id", home.name))
            reaped.append(ReapedSandbox(cls.name, sandbox_id, reason))
            if not dry_run:
                marker = f"{_MARKER_VAR}={sandbox_id}"
                _kill_watchdog(marker)
                kill_marked(marker)
                _remove_tree(home)
                logger.info("reaped local sandbox %s (%s)", sandbox_id, reason)
        reaped += _checkpoints.reap(base, dry_run, _remove_tree)
        return reaped
