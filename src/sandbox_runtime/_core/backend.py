"""The contract between :class:`~sandbox_runtime.SandboxRuntime` and a backend.

A backend implements a handful of primitives for one sandbox: start, exec, put/get a tar
archive, stop, liveness.  Everything users call beyond that (text and bytes I/O, directory
upload and download, patches, diffs, resets) is written once in ``runtime.py`` on top of
these primitives, so a new backend gets all of it, and the shared conformance suite in
:mod:`sandbox_runtime.backend_kit.testing` says whether it got it right.

A backend is found through the ``sandbox_runtime.backends`` entry-point group; a third-party
package adds one by declaring an entry point, nothing else.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, ClassVar, Generic, TypeVar, cast

from sandbox_runtime._core import archive as _archive
from sandbox_runtime._core import files as _files
from sandbox_runtime._core import ownership
from sandbox_runtime._core import transfer as _transfer
from sandbox_runtime._core import tree as _tree
from sandbox_runtime._core.checkpoints import Checkpoint
from sandbox_runtime._core.config import BackendOptions, SandboxConfig
from sandbox_runtime._core.request import ExecRequest
from sandbox_runtime._core.results import ExecResult, FileInfo
from sandbox_runtime._core.tree import TreeChanges, TreeMark
from sandbox_runtime.errors import (
    CapabilityUnsupportedError,
    ConfigError,
    SandboxIsADirectoryError,
)

__all__ = [
    "Availability",
    "Backend",
    "Capability",
    "ExecRequest",
    "OptionsT",
    "ReapedSandbox",
    "SandboxInfo",
    "ServiceQuota",
]

#: The options model of one backend (``Backend[DockerOptions]``).
OptionsT = TypeVar("OptionsT", bound=BackendOptions)


class Capability(str, enum.Enum):
    """Something a backend can do beyond the primitives, which callers ask for by name.

    Layers above the core (the SWE runner, image resolution) ask a backend what it can do
    instead of branching on backend names, so a third-party backend that declares the same
    capabilities gets the same treatment as a built-in one.
    """

    HOST_MOUNTS = "host_mounts"
    """``SandboxConfig.mounts`` (host paths bound into the sandbox) are honoured."""
    ENGINE_IMAGES = "engine_images"
    """Sandboxes run images of this machine's container engine, so an image built or loaded
    locally (the bundled samples) is usable without a registry."""
    DIRECTORY_IMAGES = "directory_images"
    """``image`` is a host directory whose tree becomes the sandbox's ``/`` (no containers)."""
    SHARED_HOST_FILESYSTEM = "shared_host_filesystem"
    """Commands can see the host's filesystem (no container boundary)."""
    STREAMING = "streaming"
    """Output reaches ``exec``'s ``on_stdout`` / ``on_stderr`` while the command runs (the
    backend writes chunks into :meth:`ExecRequest.output_buffers` as it reads them); without
    it the callbacks still get everything, when the command ends."""
    RECONNECT = "reconnect"
    """A sandbox can be found again by id from another client (``connect``, listing)."""
    CHECKPOINT_FILESYSTEM = "checkpoint_filesystem"
    """``checkpoint()`` saves the sandbox's filesystem, ``rollback()`` restores it, and
    checkpoints are listed, deleted and reaped (``docs/checkpoints.md``)."""
    CHECKPOINT_MEMORY = "checkpoint_memory"
    """Checkpoints keep running processes (memory) as well as files."""
    FORK = "fork"
    """``fork(n)`` and ``SandboxRuntime.from_checkpoint`` start copies of a saved state."""
    PAUSE = "pause"
    """``pause()`` keeps the sandbox without running it; ``resume()`` runs it on."""
    EXTEND_LIFETIME = "extend_lifetime"
    """``extend()`` / ``set_lifetime()`` move a running sandbox's end, and ``reap`` follows
    (``docs/leases.md``)."""


@dataclass(frozen=True, slots=True)
class Availability:
    """Whether a backend can run on this machine, and if not, why."""

    ok: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.ok


@dataclass(frozen=True, slots=True)
class SandboxInfo:
    """A running sandbox this library made, as a listing shows it."""

    backend: str
    sandbox_id: str
    """What :meth:`SandboxRuntime.connect` takes."""
    labels: dict[str, str]
    """The user's labels (``SandboxConfig.labels``), without this library's own."""
    run_id: str | None
    workdir: str | None
    created_at: float | None
    expires_at: float | None
    owner: str | None
    """``host:pid`` of the process that created it."""
    pool: str | None = None
    """The id of the :class:`~sandbox_runtime.SandboxPool` that started it, if one did."""

    @classmethod
    def from_labels(cls, backend: str, sandbox_id: str, labels: Mapping[str, str]) -> SandboxInfo:
        """Read one from a sandbox's full label set (ownership labels included)."""
        host, pid = labels.get(ownership.OWNER_HOST), labels.get(ownership.OWNER_PID)
        return cls(
            backend=backend,
            sandbox_id=sandbox_id,
            labels=ownership.user_labels(labels),
            run_id=labels.get(ownership.RUN_ID),
            workdir=labels.get(ownership.WORKDIR),
            created_at=ownership.timestamp(labels, ownership.CREATED_AT),
            expires_at=ownership.timestamp(labels, ownership.EXPIRES_AT),
            owner=f"{host}:{pid}" if host and pid else None,
            pool=labels.get(ownership.POOL),
        )

    def matches(self, wanted: Mapping[str, str]) -> bool:
        """True when every label in ``wanted`` is on this sandbox with that value."""
        return all(self.labels.get(key) == value for key, value in wanted.items())


@dataclass(frozen=True, slots=True)
class ServiceQuota:
    """A service's own limits on new sandboxes, as it reports them."""

    max_live: int | None = None
    """Sandboxes this account may still have running beside those it has now."""
    starts_per_second: float | None = None
    """Starts per second the service admits (``None``: it does not say)."""
    burst: int = 1
    """Starts admitted at once after a quiet spell."""


@dataclass(frozen=True, slots=True)
class ReapedSandbox:
    """One sandbox removed (or, in a dry run, that would be removed) by a reaper."""

    backend: str
    sandbox_id: str
    reason: str


class Backend(abc.ABC, Generic[OptionsT]):
    """One sandbox of one backend: the primitives the runtime builds on.

    Generic over its options model, so ``self.options`` has the backend's own type; set
    :attr:`options_model` to the same class (the runtime validates ``SandboxConfig.options``
    with it before the backend is made).

    Implementations must make :meth:`exec`, :meth:`put_archive`, :meth:`get_archive`,
    :meth:`write_file` and :meth:`read_file` safe to call from several threads at once;
    the runtime serialises :meth:`start` and :meth:`stop` itself.
    """

    #: Name under which the backend is registered; used in messages and labels.
    name: ClassVar[str] = ""
    #: The pydantic model validating ``SandboxConfig.options`` for this backend.
    options_model: ClassVar[type[BackendOptions]] = BackendOptions
    #: The ``sandbox-runtime-swe[...]`` extra that installs this backend's dependencies.
    extra: ClassVar[str | None] = None
    #: What this backend can do beyond the primitives (see :class:`Capability`).
    capabilities: ClassVar[frozenset[Capability]] = frozenset()
    #: How many sandboxes may start at once on one engine in this process (``None``: no
    #: bound); the rest wait their turn (``sandbox_runtime._core.limits``).
    max_concurrent_starts: ClassVar[int | None] = None
    #: The shortest lifetime :meth:`set_expiry` can set, in seconds: a service that refuses
    #: less (AGS: 30 s) sets this much for a shorter request.  The runtime records the end
    #: the service really sets, and a lease plans its renewals so that none lands past its
    #: cap (``sandbox_runtime._core.keepalive``).
    min_lifetime: ClassVar[float] = 0.0
    #: Price of one sandbox-second of a default-sized sandbox in US dollars, from the
    #: service's published rates (docs/performance.md names the source); ``None`` where
    #: there is no bill per sandbox (docker, local) or no published rate.  ``--price``
    #: overrides it.
    published_price: ClassVar[float | None] = None
    #: Image pulls this sandbox's start waited for: a backend that pulls adds to it on the
    #: instance; the runtime's usage reports it as ``pulls``.
    start_pulls: int = 0

    def __init__(self, config: SandboxConfig, options: OptionsT) -> None:
        self.config = config
        self.options = options

    @classmethod
    def coerce_options(cls, options: BackendOptions | None) -> OptionsT:
        """``options`` as this backend's model, or its defaults when ``None``.

        For the class-level calls (:meth:`availability`, :meth:`reap`, listing) that take
        options from callers who may not have any.
        """
        if options is None:
            return cast(OptionsT, cls.options_model())
        if not isinstance(options, cls.options_model):
            raise ConfigError(
                f"the {cls.name!r} backend takes {cls.options_model.__name__}, "
                f"not {type(options).__name__}"
            )
        return cast(OptionsT, options)

    @classmethod
    def configure(cls, config: SandboxConfig, options: BackendOptions) -> SandboxConfig:
        """Fill the fields of ``config`` that this backend's options determine.

        Called once, before the backend is made.  The default changes nothing; ``repoenv``
        takes the image and workdir from its dataset entry where the user set neither
        (``config.model_fields_set`` tells which fields were given).
        """
        return config

    @classmethod
    def capabilities_for(cls, options: BackendOptions) -> frozenset[Capability]:
        """The capabilities of sandboxes opened with ``options``.

        The default is the class's :attr:`capabilities`; a backend whose abilities depend on
        its options (``repoenv`` runs on an engine of the user's choice) overrides this.
        """
        return cls.capabilities

    @classmethod
    def engine_key(cls, options: BackendOptions) -> str:
        """Which engine or control plane sandboxes opened with ``options`` use.

        Start bounds and rate limits are shared by the sandboxes with the same key; the
        default, one engine per backend, suits backends that have only one.
        """
        return ""

    @classmethod
    def availability(cls, options: BackendOptions | None = None) -> Availability:
        """Say whether this backend can run here (daemon reachable, credentials present)."""
        return Availability(True)

    @classmethod
    def has_image(cls, image: str, options: BackendOptions | None = None) -> bool | None:
        """Whether sandboxes of ``image`` start here without fetching it first, if cheap to tell.

        ``None`` (the default) when the backend cannot tell without real work; ``docker``
        asks its engine.  The ``spread`` backend prefers a member that has the image.
        """
        del image, options
        return None

    @classmethod
    def cannot_run(cls, image: str | None, options: BackendOptions | None = None) -> str | None:
        """Why sandboxes of ``image`` cannot start here at all, or ``None`` when they may.

        Only what the backend knows without work: ``local`` runs host directories, not
        container images.  ``None`` is no promise (a pull may still fail); the ``spread``
        backend places a sandbox only on members that do not rule its image out.
        """
        del image, options
        return None

    @classmethod
    def service_quota(cls, options: BackendOptions | None = None) -> ServiceQuota | None:
        """What the service says this account may still start, where it says (one API call).

        ``None`` (the default) when the service does not tell; AGS reads
        ``DescribeQuotaOverview``.  The ``spread`` backend keeps to it on a member whose
        options set no cap or start quota of their own.
        """
        del options
        return None

    @property
    @abc.abstractmethod
    def sandbox_id(self) -> str:
        """A stable identifier of this sandbox in its backend (container id, instance id)."""

    @abc.abstractmethod
    def start(self) -> None:
        """Create the sandbox, with ``config.workdir`` existing, within ``config.start_timeout``.

        Raises :class:`~sandbox_runtime.errors.SandboxStartError` on failure, after cleaning
        up whatever it created.
        """

    @abc.abstractmethod
    def exec(self, request: ExecRequest) -> ExecResult:
        """Run one command and return its result.

        On timeout, kill the command's whole process group in the sandbox and return the
        output captured so far with ``timed_out=True`` and exit code 124.  Output beyond
        ``request.max_output_bytes`` per stream keeps its head and tail (see ``_output``).
        Raises :class:`~sandbox_runtime.errors.SandboxGoneError` if the sandbox is gone.
        """

    @abc.abstractmethod
    def put_archive(self, data: bytes) -> None:
        """Extract a tar archive whose member names are paths relative to the sandbox's ``/``.

        Missing parent directories are created; existing directories keep their modes.
        """

    @abc.abstractmethod
    def get_archive(self, path: str) -> bytes:
        """Return a tar archive of ``path`` (file or directory) whose top member is its basename.

        Raises :class:`~sandbox_runtime.errors.SandboxFileNotFoundError` if it does not exist.
        """

    def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Write one file at an absolute sandbox path (override for a faster way)."""
        self.put_archive(_archive.single_file(path, data, mode))

    def read_file(self, path: str) -> bytes:
        """Read one file at an absolute sandbox path (override for a faster way)."""
        content = _archive.first_file(self.get_archive(path))
        if content is None:
            raise SandboxIsADirectoryError(f"is a directory: {path}")
        return content

    def read_file_to(self, path: str, sink: BinaryIO) -> None:
        """Write one file's bytes to ``sink`` (override to stream instead of holding them)."""
        sink.write(self.read_file(path))

    def exists(self, path: str) -> bool:
        """True if an absolute sandbox path exists (a broken symlink counts)."""
        script = 'test -e "$1" || test -L "$1"'
        request = ExecRequest(command=("/bin/sh", "-c", script, "sh", path), cwd="/", timeout=60)
        return self.exec(request).exit_code == 0

    # File operations beyond read and write.  The defaults run one command each (see
    # ``_files``); a backend with a direct filesystem API overrides them.

    def stat(self, path: str) -> FileInfo:
        """``lstat`` of an absolute sandbox path."""
        return _files.describe(self._run_helper, path)

    def list_dir(self, path: str) -> list[FileInfo]:
        """The entries of a directory, sorted by name."""
        return _files.list_directory(self._run_helper, path)

    def make_dir(self, path: str) -> None:
        """Create a directory and its parents; an existing directory is fine."""
        _files.make_directory(self._run_helper, path)

    def remove(self, path: str, *, recursive: bool = False) -> None:
        """Remove a file or symlink, or a directory tree with ``recursive``; missing is fine."""
        _files.remove_path(self._run_helper, path, recursive=recursive)

    def copy_in(self, host: Path, path: str) -> None:
        """Copy a host file or directory to an absolute sandbox path, with bounded memory.

        The default moves pieces of at most a few megabytes through the primitives
        (``_transfer``); a backend whose files are host files overrides it with direct copies.
        """
        _transfer.copy_in(self, host, path)

    def copy_out(self, path: str, host: Path) -> None:
        """Copy a sandbox file or directory to a host path, with bounded memory."""
        _transfer.copy_out(self, path, host)

    # The agent's change, measured from outside the sandbox (``_core/tree.py``).  The
    # defaults read the tree through ``get_archive`` alone, on the caller's side, so they are
    # as trustworthy as the backend's archive path; a backend that can name changed paths
    # itself (docker's engine, local's host directory) overrides both.

    def mark_tree(self, root: str, watch: Sequence[str] = ()) -> TreeMark:
        """Record ``root`` (and the single paths ``watch`` outside it) before an agent runs.

        Never runs a command in the sandbox.  The default keeps a digest of every path of
        ``root`` from one archive of it.
        """
        return _tree.generic_mark(self.get_archive, root, watch)

    def tree_changes(self, mark: TreeMark) -> TreeChanges:
        """What differs in the sandbox from ``mark``, compared on the caller's side.

        Never runs a command in the sandbox.  The default reads ``mark.root`` again through
        ``get_archive``.
        """
        return _tree.generic_changes(self.get_archive, mark)

    def _run_helper(self, argv: tuple[str, ...]) -> ExecResult:
        """A short helper command of this library's own, at ``/``, with a generous cap."""
        request = ExecRequest(command=argv, cwd="/", timeout=300, max_output_bytes=1 << 30)
        return self.exec(request)

    def attach(self, sandbox_id: str) -> None:
        """Take over a running sandbox of this library by id, instead of :meth:`start`.

        Backends with :attr:`Capability.RECONNECT` implement it: find the sandbox, check it
        carries this library's ``managed`` label (another tool's sandbox is never taken),
        and raise :class:`~sandbox_runtime.errors.SandboxGoneError` when it is not running.
        """
        raise ConfigError(f"the {self.name!r} backend cannot reconnect to a running sandbox")

    @classmethod
    def list_sandboxes(cls, options: BackendOptions | None = None) -> list[SandboxInfo]:
        """The running sandboxes of this backend that this library made (any client's)."""
        raise ConfigError(f"the {cls.name!r} backend cannot list its sandboxes")

    @abc.abstractmethod
    def stop(self) -> None:
        """Remove the sandbox and everything it holds; calling it twice is harmless."""

    @abc.abstractmethod
    def is_alive(self) -> bool:
        """True while the sandbox exists and can run commands."""

    def kill_marked(self, marker: str) -> bool:
        """SIGKILL, from outside, the sandbox's processes whose environment holds ``marker``.

        ``marker`` is ``NAME=value``.  Returns ``False`` when this backend cannot, and the
        runtime then kills from inside the sandbox (a ``/proc`` scan); ``local`` can and must,
        since under namespace isolation each command has a PID namespace of its own.
        """
        return False

    @classmethod
    def reap(
        cls, options: BackendOptions | None = None, *, dry_run: bool = False
    ) -> list[ReapedSandbox]:
        """Remove this library's sandboxes that expired or whose owner process died.

        Backends whose sandboxes cannot outlive their client keep this default, which
        finds nothing.  A reaper never touches anything this library did not create.
        Backends with checkpoints reap those here too (reason prefixed ``checkpoint:``).
        """
        return []

    # Checkpoints, forks and pause (``docs/checkpoints.md``).  The defaults raise
    # CapabilityUnsupportedError, so a backend without them keeps working unchanged; one
    # that implements them declares the matching capabilities.

    def _unsupported(self, capability: Capability) -> CapabilityUnsupportedError:
        return CapabilityUnsupportedError(capability.value, self.name)

    def checkpoint(self, labels: Mapping[str, str], lifetime: float) -> Checkpoint:
        """Save the sandbox's state; the checkpoint is owned and expires like a sandbox."""
        raise self._unsupported(Capability.CHECKPOINT_FILESYSTEM)

    def rollback(self, checkpoint: Checkpoint) -> None:
        """Bring this same sandbox back to ``checkpoint`` (its processes may be killed)."""
        raise self._unsupported(Capability.CHECKPOINT_FILESYSTEM)

    def start_from_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Like :meth:`start`, with ``checkpoint``'s state instead of the image's."""
        raise self._unsupported(Capability.FORK)

    def set_expiry(self, expires_at: float) -> None:
        """Make the running sandbox end at ``expires_at`` (seconds since the epoch).

        Backends with :attr:`Capability.EXTEND_LIFETIME` move whatever enforces the lifetime
        (a watchdog, the container's own timer, the service's timeout) and the expiry that
        ``reap`` reads, so that an extended sandbox is never reaped as expired.  The runtime
        checks the caller's hard cap before calling this.
        """
        raise self._unsupported(Capability.EXTEND_LIFETIME)

    def max_expiry(self, started_at: float) -> float | None:
        """The service's own hard cap on the end of a sandbox started at ``started_at``.

        Seconds since the epoch, or ``None`` when the service has none.
        """
        return None

    def gone_cause(self) -> str:
        """Why the sandbox is gone, where the backend can tell (see ``SandboxGoneError.cause``).

        Asked only once the sandbox is known to be gone; the default cannot tell.
        """
        return "unknown"

    def pause(self) -> None:
        """Stop running the sandbox's processes, keeping them and its files."""
        raise self._unsupported(Capability.PAUSE)

    def resume(self) -> None:
        """Run a paused sandbox's processes on."""
        raise self._unsupported(Capability.PAUSE)

    @classmethod
    def list_checkpoints(cls, options: BackendOptions | None = None) -> list[Checkpoint]:
        """The checkpoints of this backend that this library made (any client's)."""
        raise CapabilityUnsupportedError(Capability.CHECKPOINT_FILESYSTEM.value, cls.name)

    @classmethod
    def delete_checkpoint(cls, checkpoint_id: str, options: BackendOptions | None = None) -> None:
        """Remove one checkpoint; raises ``CheckpointNotFoundError`` when there is none."""
        raise CapabilityUnsupportedError(Capability.CHECKPOINT_FILESYSTEM.value, cls.name)

    @classmethod
    def prefetch_images(cls, images: Sequence[str], options: BackendOptions | None = None) -> None:
        """Make ``images`` quick to start from ahead of need (pre-pull, a service's pre-cache).

        Called by the schedule-driven prefetcher with the images of upcoming tasks, nearest
        first.  Best effort and non-blocking for the caller's correctness: an image that
        cannot be fetched here fails the start that needs it, with a typed error naming the
        registry.  The default does nothing: backends whose images are host directories or
        that have no image cache to warm.
        """
        del images, options
