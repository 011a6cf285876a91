"""``SandboxRuntime``: the one interface users hold, written once above every backend."""

from __future__ import annotations

import enum
import logging
import os
import posixpath
import shlex
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from pydantic import ValidationError
from pydantic_core import InitErrorDetails

from sandbox_runtime._core import shutdown
from sandbox_runtime._core.backend import Backend, Capability, ExecRequest, SandboxInfo
from sandbox_runtime._core.checkpoints import Checkpoint
from sandbox_runtime._core.config import BackendOptions, SandboxConfig
from sandbox_runtime._core.keepalive import KeepAlive
from sandbox_runtime._core.lifetime import LifetimeClock
from sandbox_runtime._core.limits import start_slot
from sandbox_runtime._core.registry import load_backend
from sandbox_runtime._core.results import ExecResult, FileInfo, PatchResult
from sandbox_runtime._core.streaming import (
    BACKGROUND_VAR,
    CommandHandle,
    OutputListener,
    TextListener,
    new_background_token,
    output_listener,
)
from sandbox_runtime._core.tree import TreeChanges, TreeMark
from sandbox_runtime._core.usage import SandboxUsage, UsageMeter, host_size
from sandbox_runtime.errors import (
    BackendError,
    BackendUnavailableError,
    CapabilityUnsupportedError,
    CheckpointNotFoundError,
    ConfigError,
    PathEscapeError,
    SandboxClosedError,
    SandboxError,
    SandboxGoneError,
)

__all__ = [
    "ForkResult",
    "SandboxRuntime",
    "delete_checkpoint",
    "list_checkpoints",
    "list_sandboxes",
]

logger = logging.getLogger("sandbox_runtime")

_DEFAULT: Any = object()


class _State(enum.Enum):
    NEW = "new"
    STARTED = "started"
    CLOSED = "closed"


def validate_options(config: SandboxConfig, backend_cls: type[Backend[Any]]) -> BackendOptions:
    """Validate ``config.options`` with the backend's model; errors read ``options.<field>``."""
    model = backend_cls.options_model
    raw = config.options
    if isinstance(raw, BackendOptions):
        if not isinstance(raw, model):
            raise ConfigError(
                f"options for the {backend_cls.name!r} backend must be {model.__name__}, "
                f"not {type(raw).__name__}"
            )
        return raw
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        details = [
            InitErrorDetails(
                type=error["type"],
                loc=("options", *error["loc"]),
                input=error["input"],
                ctx=error.get("ctx", {}),
            )
            for error in exc.errors()
        ]
        raise ValidationError.from_exception_data("SandboxConfig", details) from None


class SandboxRuntime:
    """One sandbox: start it, run commands, move files, patch and diff, then close it.

    Open it with a :class:`SandboxConfig` or with the config's fields as keywords::

        with SandboxRuntime(backend="docker", image="python:3.12", workdir="/testbed") as sb:
            print(sb.exec("python -V").stdout)

    Methods are safe to call from several threads at once; ``start`` and ``close`` are
    serialised, and ``close`` is idempotent.  Nothing is cleaned up in ``__del__``: use the
    context manager or call :meth:`close`, and run ``sandbox-runtime reap`` for what a killed
    client left behind.
    """

    def __init__(self, config: SandboxConfig | None = None, /, **fields: Any) -> None:
        if config is None:
            config = SandboxConfig(**fields)
        elif fields:
            # Only what was set: the rest stays unset, so a backend may still fill it in.
            given = config.model_dump(exclude_unset=True)
            config = SandboxConfig.model_validate({**given, **fields})
        backend_cls = load_backend(config.backend)
        options = validate_options(config, backend_cls)
        # The validated model replaces the raw dict: its repr masks secrets and long fields.
        config = backend_cls.configure(config, options).model_copy(update={"options": options})
        if config.mounts and Capability.HOST_MOUNTS not in backend_cls.capabilities_for(options):
            raise ConfigError(
                f"the {backend_cls.name or config.backend!r} backend cannot bind host paths "
                "(mounts); use a backend with the host_mounts capability, such as docker"
            )
        self._config = config
        self._backend: Backend[Any] = backend_cls(config, options)
        self._state = _State.NEW
        self._lifecycle = threading.Lock()
        self._base_commits: dict[str, str] = {}
        self._meter = UsageMeter()
        self._paused = False
        self._fork_checkpoints: list[str] = []
        self._clock: LifetimeClock | None = None
        self._keepers: list[KeepAlive] = []

    @classmethod
    def connect(cls, backend: str, sandbox_id: str, /, **fields: Any) -> SandboxRuntime:
        """Take over a running sandbox by id, e.g. one another process started.

        ``fields`` are :class:`SandboxConfig` fields (``options`` for the backend's
        credentials, ``exec_timeout``, ...); the workdir is the sandbox's own unless given.
        The returned runtime is started; closing it removes the sandbox, and leaving it open
        leaves the sandbox to its lifetime.  Ownership stays with the creating process, so
        ``sandbox-runtime reap`` may remove the sandbox once that process is gone.
        Raises :class:`SandboxGoneError` when no running sandbox of this library has that id.
        """
        config = SandboxConfig(backend=backend, **fields)
        backend_cls = load_backend(config.backend)
        if Capability.RECONNECT not in backend_cls.capabilities_for(
            validate_options(config, backend_cls)
        ):
            raise ConfigError(f"the {backend!r} backend cannot reconnect to a running sandbox")
        listed = {info.sandbox_id: info for info in list_sandboxes(backend, options=config.options)}
        info = listed.get(sandbox_id)
        if "workdir" not in fields and info is not None and info.workdir:
            config = config.model_copy(update={"workdir": info.workdir})
        runtime = cls.__new__(cls)
        options = validate_options(config, backend_cls)
        runtime._config = config.model_copy(update={"options": options})
        runtime._backend = backend_cls(runtime._config, options)
        runtime._lifecycle = threading.Lock()
        runtime._base_commits = {}
        runtime._meter = UsageMeter()
        runtime._paused = False
        runtime._fork_checkpoints = []
        runtime._keepers = []
        runtime._clock = _attached_clock(runtime._config, runtime._backend, info)
        runtime._meter.started(runtime._meter.starting())  # its lifetime here starts now
        runtime._backend.attach(sandbox_id)
        runtime._state = _State.STARTED
        return runtime

    # -- lifecycle -------------------------------------------------------------------

    @property
    def config(self) -> SandboxConfig:
        """The validated configuration this sandbox was opened with."""
        return self._config

    @property
    def backend(self) -> Backend[Any]:
        """The backend instance, for backend-specific calls the common interface lacks."""
        return self._backend

    @property
    def id(self) -> str:
        """The backend's identifier of this sandbox (container id, instance id, directory)."""
        return self._backend.sandbox_id

    @property
    def workdir(self) -> str:
        """The working directory of commands, and the base of relative paths."""
        return self._config.workdir

    @property
    def usage(self) -> SandboxUsage:
        """What this sandbox used so far (see ``_core/usage.py``): counted, never asked."""
        return self._meter.snapshot()

    def start(self) -> SandboxRuntime:
        """Create the sandbox; returns ``self``, so ``SandboxRuntime(...).start()`` reads well."""
        return self._start_with(self._backend.start)

    def _start_with(self, start: Callable[[], None]) -> SandboxRuntime:
        """Run the backend's ``start`` (or its start from a checkpoint) once, metered."""
        # Tracked before the lock, so that a shutdown waits for a start under way and closes
        # what it made (``_core/shutdown.py``).
        shutdown.track(self)
        if shutdown.stopping():
            shutdown.untrack(self)
            raise SandboxClosedError("this process is shutting down; no new sandboxes")
        with self._lifecycle:
            if self._state is _State.STARTED:
                return self
            if self._state is _State.CLOSED:
                raise SandboxClosedError("this sandbox was closed; open a new one")
            with start_slot(type(self._backend), self._backend.options) as waited:
                # The sandbox's lifetime and start latency begin once a start slot is had.
                began = self._meter.starting()
                self._clock = _new_clock(self._config, self._backend)
                with self._meter.call():
                    start()
                self._meter.started(began, pulls=self._backend.start_pulls)
            self._state = _State.STARTED
        logger.debug(
            "started %s sandbox %s in %.3fs (%.3fs waiting for a start slot)",
            self._config.backend,
            self.id,
            time.monotonic() - began,
            waited,
        )
        return self

    def close(self) -> None:
        """Stop and remove the sandbox; safe to call more than once."""
        with self._lifecycle:
            if self._state is _State.CLOSED:
                return
            was_started = self._state is _State.STARTED
            self._state = _State.CLOSED
            for keeper in self._keepers:
                keeper.stop()
            try:
                if was_started:
                    with self._meter.call():
                        self._backend.stop()
            finally:
                self._meter.closed()
            self._delete_fork_checkpoints()
        shutdown.untrack(self)
        logger.debug("closed %s sandbox", self._config.backend)

    def __enter__(self) -> SandboxRuntime:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def is_alive(self) -> bool:
        """True while the sandbox is started, not closed, and its backend says it exists."""
        return self._state is _State.STARTED and self._backend.is_alive()

    def _ready(self) -> Backend[Any]:
        if self._state is _State.STARTED:
            if self._paused:
                raise SandboxError("the sandbox is paused: call resume() first")
            return self._backend
        if self._state is _State.CLOSED:
            raise SandboxClosedError("this sandbox was closed")
        raise SandboxError("the sandbox is not started: call start() or use it in a with block")

    def __repr__(self) -> str:
        return (
            f"SandboxRuntime(backend={self._config.backend!r}, image={self._config.image!r}, "
            f"state={self._state.value!r})"
        )

    # -- lifetime and leases (docs/leases.md) --------------------------------------------

    @property
    def expires_at(self) -> float | None:
        """When the sandbox ends unless extended (seconds since the epoch); None before start."""
        return None if self._clock is None else self._clock.ends_at

    @property
    def cap_at(self) -> float | None:
        """The latest end any extension may reach (``max_lifetime`` or the service's cap)."""
        return None if self._clock is None else self._clock.cap_at

    def extend(self, seconds: float) -> float:
        """Move the sandbox's end ``seconds`` later; returns the new end (epoch seconds).

        Raises :class:`~sandbox_runtime.errors.LifetimeCapError` past the hard cap (nothing
        changes then) and :class:`CapabilityUnsupportedError` on a backend that cannot.
        """
        if seconds <= 0:
            raise ConfigError(f"extend() takes a positive number of seconds, got {seconds}")
        return self._move_end(lambda clock: clock.end_for(extend_by=seconds))

    def set_lifetime(self, seconds: float) -> float:
        """Make the sandbox end ``seconds`` from now (sooner or later); returns the new end."""
        if seconds <= 0:
            raise ConfigError(f"set_lifetime() takes a positive number of seconds, got {seconds}")
        return self._move_end(lambda clock: clock.end_for(lifetime=seconds))

    def _move_end(self, new_end: Callable[[LifetimeClock], float]) -> float:
        backend = self._require(Capability.EXTEND_LIFETIME, while_paused=True)
        clock = self._clock
        assert clock is not None
        with clock.moving:
            # A service with a shortest lifetime sets that much for less: record its end.
            end = max(new_end(clock), time.time() + backend.min_lifetime)
            with self._meter.call():
                try:
                    backend.set_expiry(end)
                except SandboxGoneError as exc:
                    raise self._with_cause(exc) from None
            clock.moved_to(end)
        return end

    def keep_alive(self, lease: float = 300.0, *, cap: float | None = None) -> KeepAlive:
        """Hold a lease on the sandbox while this process runs.

        It keeps the sandbox's end about ``lease`` seconds ahead, renewed once half is
        used, never more than ``cap`` seconds from now (nor past ``max_lifetime``).  It
        stops when the sandbox closes or the process dies, and the sandbox then ends within
        ``lease`` seconds (docs/leases.md).
        """
        backend = self._require(Capability.EXTEND_LIFETIME, while_paused=True)
        clock = self._clock
        assert clock is not None
        keeper = KeepAlive(
            renew=self.set_lifetime,
            remaining=clock.remaining,
            lease=lease,
            until=None if cap is None else time.time() + cap,
            name=self.id,
            floor=backend.min_lifetime,
        )
        self._keepers.append(keeper)
        return keeper

    def _keep_end_after_rollback(self, backend: Backend[Any]) -> None:
        """Put the end back where it was after a rollback.

        A rollback that replaced the sandbox (docker) gave it a fresh lifetime and lost any
        extension.
        """
        clock = self._clock
        extendable = Capability.EXTEND_LIFETIME in backend.capabilities_for(backend.options)
        if clock is not None and extendable and clock.ends_at > time.time():
            backend.set_expiry(clock.ends_at)

    def _with_cause(self, exc: SandboxGoneError) -> SandboxGoneError:
        """``exc`` with its cause filled in where it was ``unknown``."""
        if exc.cause == "unknown" and self._clock is not None:
            try:
                told = self._backend.gone_cause()
            except SandboxError:
                told = "unknown"
            exc.cause = self._clock.cause_of_gone(told)
        return exc

    # -- checkpoints, forks and pause (docs/checkpoints.md) ----------------------------

    def _require(self, capability: Capability, *, while_paused: bool = False) -> Backend[Any]:
        """The started backend, if it declares ``capability``; else the typed error.

        ``while_paused``: the call is allowed on a paused sandbox (a checkpoint of a paused
        sandbox is the consistent one: nothing writes while it is taken).
        """
        backend = self._backend if while_paused and self._state is _State.STARTED else self._ready()
        if capability not in backend.capabilities_for(backend.options):
            raise CapabilityUnsupportedError(capability.value, self._config.backend)
        return backend

    def checkpoint(
        self, *, labels: Mapping[str, str] | None = None, lifetime: float | None = None
    ) -> Checkpoint:
        """Save this sandbox's state; the checkpoint outlives the sandbox.

        It is owned by this process and expires after ``lifetime`` seconds (default: the
        sandbox's ``lifetime``), so ``sandbox-runtime reap`` removes it as it removes
        sandboxes; :func:`delete_checkpoint` removes it sooner.
        """
        backend = self._require(Capability.CHECKPOINT_FILESYSTEM, while_paused=True)
        if lifetime is not None and lifetime <= 0:
            raise ConfigError(f"lifetime must be positive, got {lifetime}")
        with self._meter.call():
            return backend.checkpoint(dict(labels or {}), lifetime or self._config.lifetime)

    def rollback(self, checkpoint: Checkpoint) -> None:
        """Bring this sandbox back to ``checkpoint``; the same object goes on being used.

        What each backend keeps is in ``docs/checkpoints.md``: running commands are killed
        on ``local``, and on ``docker`` the container is replaced, so :attr:`id` changes.
        """
        backend = self._require(Capability.CHECKPOINT_FILESYSTEM)
        if checkpoint.backend != self._config.backend:
            raise ConfigError(
                f"checkpoint {checkpoint.id!r} is of the {checkpoint.backend!r} backend, "
                f"this sandbox is {self._config.backend!r}"
            )
        with self._lifecycle, self._meter.call():
            backend.rollback(checkpoint)
            self._keep_end_after_rollback(backend)

    def fork(self, n: int = 1, **overrides: Any) -> list[ForkResult]:
        """``n`` independent, started copies of this sandbox as it is now.

        One checkpoint is taken and ``n`` sandboxes start from it at once; each result holds
        its sandbox or its own error (:class:`ForkResult`).  ``overrides`` are
        :class:`SandboxConfig` fields for the copies (``labels``, ``lifetime``, ...); the
        rest are this sandbox's.  The checkpoint is deleted once the copies started where the
        backend allows it, else left to expire with this sandbox's lifetime (docker: the
        copies' containers use its image).
        """
        self._require(Capability.FORK, while_paused=True)
        checkpoint = self.checkpoint(labels={"sandbox-runtime-fork-of": self.id})
        self._fork_checkpoints.append(checkpoint.id)
        given = self._config.model_dump(exclude_unset=True, exclude={"options"})
        fields = {**given, "options": self._config.options, **overrides}
        try:
            return type(self).from_checkpoint(checkpoint, n=n, **fields)
        finally:
            self._delete_fork_checkpoints()

    def _delete_fork_checkpoints(self) -> None:
        """Delete the checkpoints :meth:`fork` made, where the backend allows it now.

        Tried after the fork and again at close; one still in use (docker: by a running
        copy) is left to expire, or to ``reap`` once this process is gone.
        """
        backend_cls = type(self._backend)
        for checkpoint_id in list(self._fork_checkpoints):
            try:
                backend_cls.delete_checkpoint(checkpoint_id, self._backend.options)
            except CheckpointNotFoundError:
                pass
            except SandboxError as exc:
                logger.debug("fork checkpoint %s kept for now: %s", checkpoint_id, exc)
                continue
            self._fork_checkpoints.remove(checkpoint_id)

    @classmethod
    def from_checkpoint(
        cls, checkpoint: Checkpoint, *, n: int = 1, **fields: Any
    ) -> list[ForkResult]:
        """``n`` started sandboxes of ``checkpoint``'s backend, each at its state.

        ``fields`` are :class:`SandboxConfig` fields (``options`` for the backend's, as the
        source had them); the workdir defaults to the source's.  Copies start concurrently,
        within the backend's start bound; each result holds a sandbox or its own error.
        """
        if n < 1:
            raise ConfigError(f"n must be at least 1, got {n}")
        fields = {"backend": checkpoint.backend, **fields}
        if "workdir" not in fields and checkpoint.workdir:
            fields["workdir"] = checkpoint.workdir
        if fields["backend"] != checkpoint.backend:
            raise ConfigError(
                f"checkpoint {checkpoint.id!r} is of the {checkpoint.backend!r} backend"
            )
        return _start_copies(cls, checkpoint, n, fields)

    def pause(self) -> None:
        """Stop running the sandbox, keeping its processes and files, until :meth:`resume`.

        While paused, calls other than ``resume``, ``close``, ``checkpoint`` and ``fork`` raise
        :class:`SandboxError`.
        """
        backend = self._require(Capability.PAUSE)
        with self._lifecycle, self._meter.call():
            backend.pause()
            self._paused = True

    def resume(self) -> None:
        """Run a paused sandbox on; harmless when it is not paused."""
        if self._state is _State.STARTED and not self._paused:
            return
        backend = self._backend
        if self._state is not _State.STARTED:
            self._ready()
        with self._lifecycle, self._meter.call():
            backend.resume()
            self._paused = False

    @property
    def paused(self) -> bool:
        """True between :meth:`pause` and :meth:`resume`."""
        return self._paused

    # -- commands ----------------------------------------------------------------------

    def resolve(self, path: str | os.PathLike[str]) -> str:
        """The absolute sandbox path for ``path``; relative paths start at the workdir.

        A path whose ``..`` components would climb above ``/`` is refused on every backend:
        POSIX would quietly clamp it, but it is always a mistake or an escape attempt.
        """
        text = os.fspath(path)
        if not text or "\0" in text:
            raise ConfigError(f"invalid sandbox path {text!r}")
        joined = posixpath.join(self._config.workdir, text)
        depth = 0
        for part in joined.split("/"):
            if part == "..":
                depth -= 1
                if depth < 0:
                    raise PathEscapeError(f"path climbs above the sandbox root: {text!r}")
            elif part not in ("", "."):
                depth += 1
        return posixpath.normpath(joined)

    def exec(
        self,
        command: str | Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = _DEFAULT,
        stdin: bytes | str | None = None,
        check: bool = False,
        max_output_bytes: int | None = None,
        on_stdout: TextListener | None = None,
        on_stderr: TextListener | None = None,
    ) -> ExecResult:
        """Run a command and return its result; a non-zero exit is data unless ``check=True``.

        ``command`` is shell text (run by bash where the image has it, else sh) or an
        argument vector run without a shell.  ``timeout`` defaults to the config's
        ``exec_timeout`` (``None`` for no limit); when it fires, the command's whole process
        group is killed and the output so far is returned with ``timed_out=True``.
        ``on_stdout`` / ``on_stderr`` get the output as text while it arrives (from the
        thread reading it; :mod:`sandbox_runtime._core.streaming`); the result still holds it all.
        """
        listener = output_listener(on_stdout, on_stderr)
        try:
            return self._exec(command, cwd, env, timeout, stdin, check, max_output_bytes, listener)
        finally:
            if listener is not None:
                listener.close()

    def exec_background(
        self,
        command: str | Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        stdin: bytes | str | None = None,
        max_output_bytes: int | None = None,
        on_stdout: TextListener | None = None,
        on_stderr: TextListener | None = None,
    ) -> CommandHandle:
        """Start a command and return at once: a handle with ``wait()``, ``kill()`` and ``done``.

        The command runs as :meth:`exec` runs it (no time limit unless ``timeout``), on a
        thread of its own; the callbacks stream its output. ``kill()`` ends it and everything
        it started.
        """
        self._ready()
        token = new_background_token()
        merged = {**(env or {}), BACKGROUND_VAR: token}
        display = command if isinstance(command, str) else shlex.join(command)
        handle = CommandHandle(self, token, display)

        def run() -> ExecResult:
            return self.exec(
                command,
                cwd=cwd,
                env=merged,
                timeout=timeout,
                stdin=stdin,
                max_output_bytes=max_output_bytes,
                on_stdout=on_stdout,
                on_stderr=on_stderr,
            )

        return handle.start(run)

    def _exec(
        self,
        command: str | Sequence[str],
        cwd: str | None,
        env: Mapping[str, str] | None,
        timeout: float | None,
        stdin: bytes | str | None,
        check: bool,
        max_output_bytes: int | None,
        listener: OutputListener | None,
    ) -> ExecResult:
        backend = self._ready()
        if isinstance(command, str):
            if not command.strip():
                raise ConfigError("empty command")
            normalized: str | tuple[str, ...] = command
        else:
            normalized = tuple(command)
            if not normalized:
                raise ConfigError("empty argument vector")
        # No process can receive a NUL byte in an argument: refuse it the same way on every
        # backend instead of letting each fail its own way (or run a truncated command).
        if any(
            "\0" in part for part in ([normalized] if isinstance(normalized, str) else normalized)
        ):
            raise ConfigError("a command cannot contain a NUL byte")
        merged_env = dict(self._config.env)
        if env:
            for key, value in env.items():
                if not key or "=" in key or "\0" in key:
                    raise ConfigError(f"invalid environment variable name {key!r}")
                if "\0" in value:
                    raise ConfigError(f"environment variable {key} contains a NUL byte")
            merged_env.update(env)
        if timeout is _DEFAULT:
            timeout = self._config.exec_timeout
        if timeout is not None and timeout <= 0:
            raise ConfigError(f"timeout must be positive, got {timeout}")
        request = ExecRequest(
            command=normalized,
            cwd=self.resolve(cwd) if cwd is not None else self._config.workdir,
            env=merged_env,
            timeout=timeout,
            stdin=stdin.encode() if isinstance(stdin, str) else stdin,
            max_output_bytes=max_output_bytes or self._config.max_output_bytes,
            on_output=listener,
        )
        with self._meter.call():
            result = self._exec_or_gone(backend, request)
        self._meter.command(result, request.stdin)
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "exec %r -> %s in %.3fs%s",
                request.display[:200],
                result.exit_code,
                result.duration,
                " (timed out)" if result.timed_out else "",
            )
        return result.check() if check else result

    def _exec_or_gone(self, backend: Backend[Any], request: ExecRequest) -> ExecResult:
        """Run ``request``; a command that ends because its sandbox died is SandboxGoneError.

        When a container, pod or instance is killed, the command in flight usually ends with
        a signal's exit code (137) or a broken stream, which would read as the command's own
        failure (and, in grading, as a reward of 0).  Whenever an exec ends that way, the
        backend is asked whether the sandbox still exists; only then, so a normal command
        costs nothing extra.  A signal's code is 128 + its number, so above 128: 128 itself
        is an exit status (git's for every ``fatal:``, which grading meets on most tasks),
        and asking then cost each such command the half-second settle of :func:`_dying`.
        """
        try:
            result = backend.exec(request)
        except SandboxGoneError as exc:
            raise self._with_cause(exc) from exc.__cause__
        except (BackendError, BackendUnavailableError) as exc:
            if not backend.is_alive():
                raise self._with_cause(
                    SandboxGoneError(
                        f"the sandbox died during the command ({exc}): {request.display[:200]}"
                    )
                ) from exc
            raise
        if result.exit_code > 128 and not result.timed_out and _dying(backend):
            raise self._with_cause(
                SandboxGoneError(
                    f"the sandbox died during the command (exit code {result.exit_code}): "
                    f"{request.display[:200]}"
                )
            )
        return result

    def run_tests(
        self,
        command: str | Sequence[str],
        *,
        timeout: float | None = _DEFAULT,
        cwd: str | None = None,
    ) -> ExecResult:
        """Run a test command; the result is data for a log parser (see ``sandbox_runtime.swe``)."""
        return self.exec(command, timeout=timeout, cwd=cwd)

    # -- files -------------------------------------------------------------------------

    def read_bytes(self, path: str | os.PathLike[str]) -> bytes:
        """The content of a file in the sandbox."""
        with self._meter.call():
            data = self._ready().read_file(self.resolve(path))
        self._meter.moved(down=len(data))
        return data

    def read_text(
        self, path: str | os.PathLike[str], *, encoding: str = "utf-8", errors: str = "strict"
    ) -> str:
        """A file in the sandbox as text."""
        return self.read_bytes(path).decode(encoding, errors)

    def write_bytes(self, path: str | os.PathLike[str], data: bytes, *, mode: int = 0o644) -> None:
        """Create or replace a file, creating missing parent directories."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise ConfigError(f"write_bytes needs bytes, got {type(data).__name__}")
        with self._meter.call():
            self._ready().write_file(self.resolve(path), bytes(data), mode)
        self._meter.moved(up=len(data))

    def write_text(
        self,
        path: str | os.PathLike[str],
        text: str,
        *,
        encoding: str = "utf-8",
        mode: int = 0o644,
    ) -> None:
        """Create or replace a text file, creating missing parent directories."""
        if not isinstance(text, str):
            raise ConfigError(f"write_text needs str, got {type(text).__name__}")
        self.write_bytes(path, text.encode(encoding), mode=mode)

    def exists(self, path: str | os.PathLike[str]) -> bool:
        """True if the path exists in the sandbox (a broken symlink counts)."""
        with self._meter.call():
            return self._ready().exists(self.resolve(path))

    def stat(self, path: str | os.PathLike[str]) -> FileInfo:
        """What ``path`` is (``lstat``: a symlink is described, not followed)."""
        with self._meter.call():
            return self._ready().stat(self.resolve(path))

    def list_dir(self, path: str | os.PathLike[str] = ".") -> list[FileInfo]:
        """The entries of a directory (default: the workdir), sorted by name."""
        with self._meter.call():
            return self._ready().list_dir(self.resolve(path))

    def make_dir(self, path: str | os.PathLike[str]) -> None:
        """Create a directory and its missing parents; an existing directory is fine."""
        with self._meter.call():
            self._ready().make_dir(self.resolve(path))

    def remove(self, path: str | os.PathLike[str], *, recursive: bool = False) -> None:
        """Remove a file or symlink, or a whole directory with ``recursive=True``.

        A path that does not exist is not an error (as ``rm -f`` and envd's remove).
        """
        resolved = self.resolve(path)
        if resolved == "/":
            raise ConfigError("refusing to remove the sandbox's /")
        with self._meter.call():
            self._ready().remove(resolved, recursive=recursive)

    def mark_tree(self, path: str | None = None, *, watch: Sequence[str] = ()) -> TreeMark:
        """Record the tree at ``path`` (default: the workdir) to compare with later.

        Read by the backend's engine, host or file plane, never by a program in the sandbox,
        so what an agent does later cannot change the record (``docs/reliability.md``).
        ``watch``: absolute paths outside the tree whose change :meth:`tree_changes` reports.
        """
        root = self.resolve(path) if path is not None else self._config.workdir
        with self._meter.call():
            return self._ready().mark_tree(root, [_keep_slash(self.resolve(p), p) for p in watch])

    def tree_changes(self, mark: TreeMark) -> TreeChanges:
        """The files and symlinks that differ from ``mark``, compared in this process."""
        with self._meter.call():
            found = self._ready().tree_changes(mark)
        self._meter.moved(down=sum(len(change.data) for change in found.changes))
        return found

    def put_archive(self, data: bytes) -> None:
        """Extract a tar archive whose member names are relative to the sandbox's ``/``.

        The backend's own extraction (the engine's, or the host's safe extractor); used to
        write a change set's files and symlinks in one call.
        """
        with self._meter.call():
            self._ready().put_archive(data)
        self._meter.moved(up=len(data))

    def upload(self, local_path: str | os.PathLike[str], sandbox_path: str) -> None:
        """Copy a host file or directory into the sandbox at ``sandbox_path`` (replacing files).

        Large files and trees travel in pieces, so the client's memory does not grow with
        their size.
        """
        with self._meter.call():
            self._ready().copy_in(Path(local_path), self.resolve(sandbox_path))
        self._meter.moved(up=host_size(Path(local_path)))

    def download(self, sandbox_path: str, local_path: str | os.PathLike[str]) -> None:
        """Copy a sandbox file or directory to ``local_path`` on the host (in pieces)."""
        with self._meter.call():
            self._ready().copy_out(self.resolve(sandbox_path), Path(local_path))
        self._meter.moved(down=host_size(Path(local_path)))

    # -- repositories ------------------------------------------------------------------

    def _git(self, args: str, cwd: str | None, timeout: float | None = _DEFAULT) -> ExecResult:
        # safe.directory: the repository is often owned by another uid than the exec user.
        return self.exec(f"git -c safe.directory='*' {args}", cwd=cwd, timeout=timeout)

    def base_commit(self, *, cwd: str | None = None, refresh: bool = False) -> str:
        """The commit the repository at ``cwd`` had when first asked; diffs and resets use it.

        Call it right after start (the SWE layer does) if an agent may commit later, and with
        ``refresh=True`` after a setup step that commits (it re-reads ``HEAD``).
        """
        directory = self.resolve(cwd) if cwd is not None else self._config.workdir
        cached = None if refresh else self._base_commits.get(directory)
        if cached is None:
            result = self._git("rev-parse HEAD", directory)
            if result.exit_code != 0:
                raise SandboxError(f"no git commit at {directory}: {result.output.strip()}")
            cached = result.stdout.strip()
            self._base_commits[directory] = cached
        return cached

    def apply_patch(self, patch: str, *, cwd: str | None = None) -> PatchResult:
        """Apply a unified diff in ``cwd`` (default: the workdir) and say whether it applied.

        ``git apply`` is tried first, then ``patch --fuzz`` (as the SWE-bench harness does);
        a patch that applies neither way changes nothing and its ``message`` says why.
        """
        if not patch.strip():
            return PatchResult(applied=False, message="empty patch")
        directory = self.resolve(cwd) if cwd is not None else self._config.workdir
        data = (patch if patch.endswith("\n") else patch + "\n").encode()
        files = _patched_files(patch)
        # The patch travels on stdin, so no temporary file has to be shared between the file
        # API and the command (on local without namespaces those see different paths).
        attempts = [
            ("git -c safe.directory='*' apply --whitespace=nowarn -", "git apply"),
            (
                "git -c safe.directory='*' apply --whitespace=nowarn --recount -",
                "git apply --recount",
            ),
            ("patch --batch --fuzz=5 -p1 --forward --dry-run", "patch --fuzz=5"),
        ]
        messages = []
        for attempt, method in attempts:
            result = self.exec(attempt, cwd=directory, stdin=data)
            if result.exit_code == 0 and attempt.startswith("patch"):
                result = self.exec(
                    "patch --batch --fuzz=5 -p1 --forward", cwd=directory, stdin=data
                )
            if result.exit_code == 0:
                output = result.output.strip()
                return PatchResult(applied=True, message=output, files=files, method=method)
            messages.append(result.output.strip())
        return PatchResult(applied=False, message=messages[0] or messages[-1], files=files)

    def diff(self, *, base: str | None = None, cwd: str | None = None) -> str:
        """The changes in the working tree against ``base`` (default: :meth:`base_commit`).

        New untracked files are included and binary changes are kept, so the diff can be
        applied to a fresh checkout.  The repository's index is left untouched.
        """
        directory = self.resolve(cwd) if cwd is not None else self._config.workdir
        base = base or self.base_commit(cwd=directory)
        index = f"/tmp/sandbox-runtime-{uuid.uuid4().hex}.index"
        quoted_index = shlex.quote(index)
        script = (
            f"set -e; trap 'rm -f {quoted_index}' EXIT; "
            "g() { git -c safe.directory='*' \"$@\"; }; "
            # cp -p keeps the index's mtime: git's racy-clean check compares it with file
            # mtimes, and a fresh mtime would hide same-size edits made in the same second.
            "real=$(g rev-parse --git-path index); "
            f'[ -f "$real" ] && cp -p "$real" {quoted_index}; '
            f"export GIT_INDEX_FILE={quoted_index}; "
            f"g add -A . >/dev/null; g diff --cached --binary {shlex.quote(base)} -- ."
        )
        result = self.exec(script, cwd=directory)
        if result.exit_code != 0:
            raise SandboxError(f"git diff failed in {directory}: {result.output.strip()}")
        return result.stdout

    def reset(self, *, base: str | None = None, cwd: str | None = None) -> None:
        """Return the repository to ``base`` (default: :meth:`base_commit`), removing new files.

        Ignored files (build outputs, installed package metadata) are kept, so the
        environment the image prepared keeps working.
        """
        directory = self.resolve(cwd) if cwd is not None else self._config.workdir
        base = base or self.base_commit(cwd=directory)
        command = f"reset -q --hard {shlex.quote(base)} && git -c safe.directory='*' clean -qfd"
        result = self._git(command, directory)
        if result.exit_code != 0:
            raise SandboxError(f"git reset failed in {directory}: {result.output.strip()}")


def _keep_slash(resolved: str, given: str) -> str:
    """``resolved`` with the trailing ``/`` that marks a watched directory kept."""
    return resolved.rstrip("/") + "/" if given.endswith("/") and resolved != "/" else resolved


def _new_clock(config: SandboxConfig, backend: Backend[Any]) -> LifetimeClock:
    """The lifetime clock of a sandbox whose start is requested now."""
    now = time.time()
    return LifetimeClock.starting_now(config.lifetime, config.max_lifetime, backend.max_expiry(now))


def _attached_clock(
    config: SandboxConfig, backend: Backend[Any], info: SandboxInfo | None
) -> LifetimeClock:
    """The clock of a sandbox taken over by id: its labels' start and end where listed."""
    clock = _new_clock(config, backend)
    if info is not None and info.created_at is not None:
        clock.started_at = info.created_at
        service = backend.max_expiry(info.created_at)
        mine = None if config.max_lifetime is None else info.created_at + config.max_lifetime
        known = [cap for cap in (service, mine) if cap is not None]
        clock.cap_at = min(known) if known else None
    if info is not None and info.expires_at is not None:
        clock.ends_at = info.expires_at
    return clock


def _dying(backend: Backend[Any], settle: float = 0.5) -> bool:
    """True when the sandbox is gone, or goes within ``settle`` seconds.

    An engine can still report a container as running for a moment after the process that
    held the command's exec was killed by its removal; a command that merely died of a
    signal in a living sandbox costs this short wait, and only then.
    """
    deadline = time.monotonic() + settle
    delay = 0.05
    while True:
        if not backend.is_alive():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


def list_sandboxes(
    backend: str,
    *,
    labels: Mapping[str, str] | None = None,
    options: Mapping[str, Any] | BackendOptions | None = None,
) -> list[SandboxInfo]:
    """The running sandboxes this library made on ``backend`` (any client's), newest first.

    ``labels`` keeps those carrying every given user label; ``options`` are the backend's
    (credentials, kubeconfig, base directory), as in :class:`SandboxConfig`.
    """
    backend_cls = load_backend(backend)
    config = SandboxConfig(backend=backend, options=options if options is not None else {})
    found = backend_cls.list_sandboxes(validate_options(config, backend_cls))
    wanted = dict(labels or {})
    chosen = [info for info in found if info.matches(wanted)]
    return sorted(chosen, key=lambda info: info.created_at or 0.0, reverse=True)


@dataclass(frozen=True, slots=True)
class ForkResult:
    """One copy of a fork: a started sandbox, or the error that kept it from starting.

    A fork never fails as a whole because one copy did: each result says for itself.  The
    caller owns every started sandbox (close it, or use it in a ``with`` block).
    """

    index: int
    sandbox: SandboxRuntime | None = None
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        """True when this copy started."""
        return self.sandbox is not None

    def unwrap(self) -> SandboxRuntime:
        """The started sandbox, or this copy's error raised."""
        if self.sandbox is None:
            assert self.error is not None
            raise self.error
        return self.sandbox


def _start_copies(
    cls: type[SandboxRuntime], checkpoint: Checkpoint, n: int, fields: dict[str, Any]
) -> list[ForkResult]:
    """Start ``n`` sandboxes from ``checkpoint`` concurrently; one result per copy."""

    def start_one(index: int) -> ForkResult:
        try:
            runtime = cls(**fields)
        except SandboxError as exc:
            return ForkResult(index, error=exc)
        backend = runtime._backend
        if Capability.FORK not in backend.capabilities_for(backend.options):
            error = CapabilityUnsupportedError(Capability.FORK.value, checkpoint.backend)
            return ForkResult(index, error=error)
        runtime._meter.forked()
        try:
            runtime._start_with(lambda: backend.start_from_checkpoint(checkpoint))
        except Exception as exc:  # each copy reports its own failure, whatever it was
            runtime.close()
            return ForkResult(index, error=exc)
        return ForkResult(index, sandbox=runtime)

    with ThreadPoolExecutor(max_workers=min(n, 32), thread_name_prefix="fork") as pool:
        return list(pool.map(start_one, range(n)))


def list_checkpoints(
    backend: str,
    *,
    labels: Mapping[str, str] | None = None,
    options: Mapping[str, Any] | BackendOptions | None = None,
) -> list[Checkpoint]:
    """The checkpoints this library made on ``backend`` (any client's), newest first.

    Raises :class:`CapabilityUnsupportedError` for a backend without checkpoints.
    """
    backend_cls = load_backend(backend)
    config = SandboxConfig(backend=backend, options=options if options is not None else {})
    found = backend_cls.list_checkpoints(validate_options(config, backend_cls))
    wanted = dict(labels or {})
    chosen = [item for item in found if item.matches(wanted)]
    return sorted(chosen, key=lambda item: item.created, reverse=True)


def delete_checkpoint(
    checkpoint: Checkpoint | str,
    *,
    backend: str | None = None,
    options: Mapping[str, Any] | BackendOptions | None = None,
) -> None:
    """Remove a checkpoint (a handle, or an id with ``backend``).

    Raises :class:`~sandbox_runtime.errors.CheckpointNotFoundError` when it is gone already.
    """
    if isinstance(checkpoint, Checkpoint):
        backend, checkpoint_id = checkpoint.backend, checkpoint.id
    elif backend is None:
        raise ConfigError("delete_checkpoint by id needs the backend")
    else:
        checkpoint_id = checkpoint
    backend_cls = load_backend(backend)
    config = SandboxConfig(backend=backend, options=options if options is not None else {})
    backend_cls.delete_checkpoint(checkpoint_id, validate_options(config, backend_cls))


def _patched_files(patch: str) -> tuple[str, ...]:
    """The paths a unified diff touches, from its ``+++``/``---`` headers, in order."""
    files: list[str] = []
    for line in patch.splitlines():
        if line.startswith(("+++ ", "--- ")):
            name = line[4:].split("\t", 1)[0].strip()
            if name == "/dev/null":
                continue
            if name.startswith(("a/", "b/")):
                name = name[2:]
            if name not in files:
                files.append(name)
    return tuple(files)
