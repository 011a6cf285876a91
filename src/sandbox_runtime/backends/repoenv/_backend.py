"""``repoenv``: an R2E-Gym dataset entry opened as R2E-Gym's ``RepoEnv`` opens it.

Code written for R2E-Gym (and Graph Planner's ``backend: repoenv`` tasks) describes a sandbox
by a dataset entry, ``ds``: the entry names the image, the repository lives in ``/testbed``,
and ``RepoEnv`` moves ``run_tests.sh`` and the held-out ``r2e_tests`` out of the agent's
sight before anything else runs.  This backend does exactly that on top of another backend,
its *engine* (``docker`` by default, like R2E-Gym; ``local``, ``ags`` or any installed one):

* the image and the workdir come from the entry unless the config sets them;
* after the engine starts the sandbox, the R2E-Gym setup runs in it
  (:func:`~sandbox_runtime.swe.formats.r2e.r2e_setup_script`, idempotent);
* every primitive is the engine's own, so timeouts, file transfer, lifetimes and reaping are
  the engine's: ``sandbox-runtime reap`` finds a lost ``repoenv`` sandbox under its engine;
* checkpoints, rollback, fork and pause are the engine's too, where the engine declares them
  (a checkpoint is the engine's, handed out under the name ``repoenv``; a sandbox started
  from one already holds the R2E-Gym setup, so the setup is not run again).

It is a backend rather than a helper so that code choosing a backend by name from a task
file keeps working with nothing but ``backend="repoenv"`` and the entry.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from sandbox_runtime.backend_kit import (
    Availability,
    Backend,
    BackendOptions,
    Capability,
    Checkpoint,
    ExecRequest,
    ExecResult,
    FileInfo,
    SandboxConfig,
    SandboxInfo,
    load_backend,
)
from sandbox_runtime.errors import ConfigError, SandboxStartError

from ._options import RepoEnvOptions

__all__ = ["RepoEnvBackend", "RepoEnvOptions"]


class RepoEnvBackend(Backend[RepoEnvOptions]):
    """Opens an R2E-Gym entry on an engine backend and readies it as ``RepoEnv`` does."""

    name: ClassVar[str] = "repoenv"
    options_model: ClassVar[type[BackendOptions]] = RepoEnvOptions
    extra: ClassVar[str | None] = None

    def __init__(self, config: SandboxConfig, options: RepoEnvOptions) -> None:
        super().__init__(config, options)
        engine_cls = load_backend(options.engine)
        engine_config = config.model_copy(
            update={"backend": options.engine, "options": options.engine_options}
        )
        from sandbox_runtime.backend_kit import validate_options

        self._engine = engine_cls(engine_config, validate_options(engine_config, engine_cls))

    @classmethod
    def configure(cls, config: SandboxConfig, options: BackendOptions) -> SandboxConfig:
        """Take the image and the workdir from the entry where the config leaves them out."""
        opts = cls.coerce_options(options)
        task = opts.task
        update: dict[str, Any] = {}
        if task is not None and "workdir" not in config.model_fields_set:
            update["workdir"] = task.workdir
        if task is not None and config.image is None:
            from sandbox_runtime.swe.images import resolve_image

            capabilities = cls.capabilities_for(opts)
            update["image"] = resolve_image(task, capabilities, base_image=opts.base_image)
        if config.image is None and "image" not in update:
            raise ConfigError("repoenv needs an entry (options.ds or options.ds_json) or an image")
        return config.model_copy(update=update) if update else config

    @classmethod
    def capabilities_for(cls, options: BackendOptions) -> frozenset[Capability]:
        """Those of the engine it runs on, checkpoints, forks and pause included.

        Every call is passed through to the engine, so what the engine declares is true here;
        what it lacks raises ``CapabilityUnsupportedError`` naming ``repoenv``.
        """
        opts = cls.coerce_options(options)
        engine_cls = load_backend(opts.engine)
        engine_options = engine_cls.options_model.model_validate(opts.engine_options)
        return engine_cls.capabilities_for(engine_options)

    @classmethod
    def availability(cls, options: BackendOptions | None = None) -> Availability:
        opts = cls.coerce_options(options)
        engine = opts.engine
        try:
            engine_cls = load_backend(engine)
        except Exception as exc:  # any reason the engine cannot load
            return Availability(False, f"engine {engine!r}: {exc}")
        engine_options = opts.engine_options
        found = engine_cls.availability(engine_cls.options_model.model_validate(engine_options))
        return found if found else Availability(False, f"engine {engine!r}: {found.reason}")

    @property
    def sandbox_id(self) -> str:
        return self._engine.sandbox_id

    def start(self) -> None:
        self._engine.start()
        from sandbox_runtime.swe.formats.r2e import r2e_setup_script

        setup = ExecRequest(
            command=r2e_setup_script(self.config.workdir),
            cwd=self.config.workdir,
            env=dict(self.config.env),
            timeout=max(30.0, self.config.start_timeout),
        )
        try:
            result = self._engine.exec(setup)
        except BaseException:
            self._engine.stop()
            raise
        if not result.ok:
            self._engine.stop()
            raise SandboxStartError(f"R2E-Gym setup failed: {result.output.strip()[-2000:]}")

    def exec(self, request: ExecRequest) -> ExecResult:
        return self._engine.exec(request)

    def put_archive(self, data: bytes) -> None:
        self._engine.put_archive(data)

    def get_archive(self, path: str) -> bytes:
        return self._engine.get_archive(path)

    def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        self._engine.write_file(path, data, mode)

    def read_file(self, path: str) -> bytes:
        return self._engine.read_file(path)

    def exists(self, path: str) -> bool:
        return self._engine.exists(path)

    def stat(self, path: str) -> FileInfo:
        return self._engine.stat(path)

    def copy_in(self, host: Path, path: str) -> None:
        self._engine.copy_in(host, path)

    def copy_out(self, path: str, host: Path) -> None:
        self._engine.copy_out(path, host)

    def list_dir(self, path: str) -> list[FileInfo]:
        return self._engine.list_dir(path)

    def make_dir(self, path: str) -> None:
        self._engine.make_dir(path)

    def remove(self, path: str, *, recursive: bool = False) -> None:
        self._engine.remove(path, recursive=recursive)

    def attach(self, sandbox_id: str) -> None:
        self._engine.attach(sandbox_id)

    @classmethod
    def list_sandboxes(cls, options: BackendOptions | None = None) -> list[SandboxInfo]:
        """The engine's sandboxes (a repoenv sandbox is one of its engine's)."""
        opts = cls.coerce_options(options)
        engine_cls = load_backend(opts.engine)
        engine_options = engine_cls.options_model.model_validate(opts.engine_options)
        return [
            dataclasses.replace(info, backend=cls.name)
            for info in engine_cls.list_sandboxes(engine_options)
        ]

    def stop(self) -> None:
        self._engine.stop()

    def is_alive(self) -> bool:
        return self._engine.is_alive()

    # Lifetimes are the engine's too (docs/leases.md).

    def set_expiry(self, expires_at: float) -> None:
        self._engine.set_expiry(expires_at)

    def max_expiry(self, started_at: float) -> float | None:
        return self._engine.max_expiry(started_at)

    def gone_cause(self) -> str:
        return self._engine.gone_cause()

    # -- checkpoints, forks and pause: the engine's (docs/checkpoints.md) ----------------

    def checkpoint(self, labels: Mapping[str, str], lifetime: float) -> Checkpoint:
        self._engine_has(Capability.CHECKPOINT_FILESYSTEM)
        return _as_ours(self._engine.checkpoint(labels, lifetime))

    def rollback(self, checkpoint: Checkpoint) -> None:
        self._engine_has(Capability.CHECKPOINT_FILESYSTEM)
        self._engine.rollback(_as_engines(checkpoint, self.options.engine))

    def start_from_checkpoint(self, checkpoint: Checkpoint) -> None:
        """The engine's start from the checkpoint; its state already holds the R2E-Gym setup."""
        self._engine_has(Capability.FORK)
        self._engine.start_from_checkpoint(_as_engines(checkpoint, self.options.engine))

    def pause(self) -> None:
        self._engine_has(Capability.PAUSE)
        self._engine.pause()

    def resume(self) -> None:
        self._engine_has(Capability.PAUSE)
        self._engine.resume()

    @classmethod
    def list_checkpoints(cls, options: BackendOptions | None = None) -> list[Checkpoint]:
        """The engine's checkpoints (those taken through repoenv among them), named ours."""
        engine_cls, engine_options = _engine_of(cls.coerce_options(options))
        return [_as_ours(found) for found in engine_cls.list_checkpoints(engine_options)]

    @classmethod
    def delete_checkpoint(cls, checkpoint_id: str, options: BackendOptions | None = None) -> None:
        engine_cls, engine_options = _engine_of(cls.coerce_options(options))
        engine_cls.delete_checkpoint(checkpoint_id, engine_options)

    def _engine_has(self, capability: Capability) -> None:
        """The typed error naming ``repoenv`` when the engine lacks ``capability``."""
        if capability not in self._engine.capabilities_for(self._engine.options):
            raise self._unsupported(capability)


def _engine_of(options: RepoEnvOptions) -> tuple[type[Backend[Any]], BackendOptions]:
    """The engine's class and its validated options."""
    engine_cls = load_backend(options.engine)
    return engine_cls, engine_cls.options_model.model_validate(options.engine_options)


def _as_ours(checkpoint: Checkpoint) -> Checkpoint:
    """An engine's checkpoint handed out as repoenv's (the runtime matches it by backend)."""
    return dataclasses.replace(checkpoint, backend=RepoEnvBackend.name)


def _as_engines(checkpoint: Checkpoint, engine: str) -> Checkpoint:
    """Ours handed back to the engine, which checks it by its own name."""
    return dataclasses.replace(checkpoint, backend=engine)
