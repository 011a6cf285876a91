"""Inspect's ``sandbox-runtime`` sandbox environment: every backend of this library under Inspect.

Inspect finds it through the ``inspect_ai`` entry point of this distribution, so after
``pip install 'sandbox-runtime-swe[inspect]'`` a task or ``inspect eval --sandbox
sandbox-runtime`` names it like its own ``docker`` and ``local``.  Each sample gets one sandbox
(opened in ``sample_init``, removed in ``sample_cleanup``); every sandbox of a task carries the
run's label, and ``task_cleanup`` removes whatever still carries it (a sample whose cleanup
never ran), so an eval leaves nothing behind.  A process killed outright leaves sandboxes that
``sandbox-runtime reap`` removes (their owner is gone), and ``inspect sandbox cleanup
sandbox-runtime [ID]`` removes this library's sandboxes of Inspect runs on the default backend.

How Inspect's contract maps onto :class:`~sandbox_runtime.AsyncSandboxRuntime`:

* ``exec``: the argument vector runs without a shell, in ``cwd`` (relative to the sample's
  workdir), with ``env`` and ``input``; a timeout kills the command's process group and raises
  ``TimeoutError`` (``timeout_retry`` does not run it again: a command with side effects must
  not run twice); output past Inspect's limit raises ``OutputLimitExceededError`` with the
  output kept; a sandbox that is gone raises ``SandboxUnavailableError``.
* ``user``: the sandbox's own user runs commands; another user is switched to with
  ``runuser`` (launched through a fixed system ``PATH``) where the sandbox runs as root and does
  not share the host's filesystem; elsewhere (``local``) ``SandboxUserUnsupportedError``.
* files: text and bytes through the library's file API (parents created), with
  ``FileNotFoundError``, ``IsADirectoryError`` and ``PermissionError`` as Inspect expects, and
  the read limit checked before a byte is read.
"""

from __future__ import annotations

import logging
import posixpath
import shlex
from typing import Any, Literal, overload

from inspect_ai.util import (
    ExecResult,
    OutputLimitExceededError,
    SandboxConnection,
    SandboxEnvironment,
    SandboxEnvironmentConfigType,
    SandboxEnvironmentLimits,
    sandboxenv,
)
from inspect_ai.util._sandbox.environment import (
    SandboxUnavailableError,
    SandboxUserUnsupportedError,
)

from sandbox_runtime._core.aio import AsyncSandboxRuntime
from sandbox_runtime._core.backend import Capability
from sandbox_runtime._core.config import SandboxConfig
from sandbox_runtime._core.registry import load_backend
from sandbox_runtime._core.runtime import SandboxRuntime, list_sandboxes
from sandbox_runtime.errors import (
    SandboxError,
    SandboxGoneError,
    SandboxIsADirectoryError,
    SandboxTimeoutError,
)
from sandbox_runtime.integrations._harness_tasks import (
    HARNESS_LABEL,
    RUN_LABEL,
    load_task,
    new_run_id,
    open_prepared,
    task_config,
)
from sandbox_runtime.integrations.inspect._config import SandboxRuntimeConfig, resolve_config
from sandbox_runtime.swe.task import Task

__all__ = [
    "HARNESS_NAME",
    "SANDBOX_NAME",
    "TASK_ID_KEY",
    "SandboxRuntimeSandboxEnvironment",
    "in_thread",
]

logger = logging.getLogger("sandbox_runtime.integrations")

#: The name tasks and ``inspect eval --sandbox`` use.
SANDBOX_NAME = "sandbox-runtime"
#: The value of the ``harness`` label on the sandboxes of Inspect runs.
HARNESS_NAME = "inspect"
#: The sample metadata key naming a task of the config's ``tasks`` source.
TASK_ID_KEY = "task_id"
_SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# runuser from a pinned PATH; the command itself is then found through the sandbox's PATH.
_AS_USER = (
    'p="${PATH:-' + _SYSTEM_PATH + '}"; PATH=' + _SYSTEM_PATH + "; export PATH; "
    'u="$1"; shift; exec runuser -u "$u" -- env PATH="$p" "$@"'
)
# One run id per task name in this process; task_cleanup removes what carries it.
_RUNS: dict[str, str] = {}


def _run_id(task_name: str) -> str:
    return _RUNS.setdefault(task_name, new_run_id())


@sandboxenv(name=SANDBOX_NAME)
class SandboxRuntimeSandboxEnvironment(SandboxEnvironment):  # type: ignore[misc,unused-ignore]
    """One sample's sandbox of this library, as Inspect's tools and scorers see it."""

    def __init__(self, runtime: AsyncSandboxRuntime, task: Task | None = None) -> None:
        super().__init__()
        self.runtime = runtime
        """The sandbox (:meth:`AsyncSandboxRuntime.sync` is the blocking one) for scorers."""
        self.task = task
        """The task of this library the sample's sandbox was prepared for, if any."""
        self._own_user: tuple[str, str] | None = None

    # ---- lifecycle -------------------------------------------------------------------------

    @classmethod
    def config_deserialize(cls, config: dict[str, Any]) -> SandboxRuntimeConfig:
        """The config model from its dict (Inspect's logs and ``--sandbox`` specs)."""
        return resolve_config(config)

    @classmethod
    async def task_init(cls, task_name: str, config: SandboxEnvironmentConfigType | None) -> None:
        """Check the config and the backend before any sample starts."""
        settings = resolve_config(config)
        load_backend(settings.backend)
        _run_id(task_name)

    @classmethod
    async def sample_init(
        cls,
        task_name: str,
        config: SandboxEnvironmentConfigType | None,
        metadata: dict[str, str],
    ) -> dict[str, SandboxEnvironment]:
        """Open the sample's sandbox (its task's, prepared, when the metadata names one)."""
        settings = resolve_config(config)
        labels = settings.run_labels(HARNESS_NAME, _run_id(task_name))
        task_id = metadata.get(TASK_ID_KEY) if settings.tasks else None
        if settings.tasks and task_id:
            task = load_task(settings.tasks, str(task_id))
            prepared = task_config(
                task,
                backend=settings.backend,
                backend_options=settings.backend_options,
                base_image=settings.base_image,
                labels=labels,
            )
            update = {
                "env": {**prepared.env, **settings.env},
                "lifetime": SandboxConfig(lifetime=settings.lifetime).lifetime,
            }
            sync = await in_thread(open_prepared, task, prepared.model_copy(update=update))
            return {"default": cls(AsyncSandboxRuntime.wrap(sync), task)}
        runtime = AsyncSandboxRuntime(settings.sandbox_config(labels, env=settings.env))
        await runtime.start()
        return {"default": cls(runtime)}

    @classmethod
    async def sample_cleanup(
        cls,
        task_name: str,
        config: SandboxEnvironmentConfigType | None,
        environments: dict[str, SandboxEnvironment],
        interrupted: bool,
    ) -> None:
        """Remove the sample's sandboxes."""
        for environment in environments.values():
            if isinstance(environment, cls):
                try:
                    await environment.runtime.close()
                except SandboxError as exc:
                    logger.warning("closing sandbox %s failed: %s", environment.runtime.id, exc)

    @classmethod
    async def task_cleanup(
        cls, task_name: str, config: SandboxEnvironmentConfigType | None, cleanup: bool
    ) -> None:
        """Remove every sandbox still carrying this task's run label (unless told not to)."""
        settings = resolve_config(config)
        run_id = _RUNS.pop(task_name, None)
        if run_id is None:
            return
        if not cleanup:
            logger.warning(
                "sandboxes of this run kept: sandbox-runtime reap, or inspect sandbox "
                "cleanup sandbox-runtime, removes them (label %s=%s)",
                RUN_LABEL,
                run_id,
            )
            return
        await in_thread(_remove_labelled, settings, {RUN_LABEL: run_id})

    @classmethod
    async def cli_cleanup(cls, id: str | None) -> None:
        """``inspect sandbox cleanup sandbox-runtime [ID]``: Inspect runs' sandboxes on docker."""
        settings = SandboxRuntimeConfig()
        if id is None:
            await in_thread(_remove_labelled, settings, {HARNESS_LABEL: HARNESS_NAME})
        else:
            await in_thread(_remove_ids, settings, [id])

    @classmethod
    def default_concurrency(cls) -> int | None:
        """No cap of Inspect's own: the backend's start limits apply."""
        return None

    # ---- commands and files ----------------------------------------------------------------

    async def exec(
        self,
        cmd: list[str],
        input: str | bytes | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | None = None,
        timeout: int | None = None,
        timeout_retry: bool = True,
        concurrency: bool = True,
    ) -> ExecResult[str]:
        """Run ``cmd`` (an argument vector) as Inspect's contract says (module docstring)."""
        argv = list(cmd)
        if user is not None:
            argv = await self._as_user(user, argv)
        limit = SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE
        try:
            result = await self.runtime.exec(
                argv,
                cwd=self._path(cwd) if cwd else None,
                env=env,
                stdin=input,
                timeout=timeout,
                max_output_bytes=limit,
            )
        except SandboxGoneError as exc:
            raise SandboxUnavailableError(str(exc)) from exc
        except SandboxTimeoutError as exc:
            raise TimeoutError(str(exc)) from exc
        if result.timed_out:
            raise TimeoutError(f"command timed out after {timeout}s: {shlex.join(cmd)[:200]}")
        if result.stdout_truncated or result.stderr_truncated:
            raise OutputLimitExceededError(
                SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE_STR, result.stdout
            )
        if result.exit_code == 126 and "ermission denied" in result.stderr:
            raise PermissionError(result.stderr.strip() or f"cannot execute {cmd[0]}")
        return ExecResult(result.exit_code == 0, result.exit_code, result.stdout, result.stderr)

    async def write_file(self, file: str, contents: str | bytes) -> None:
        """Write ``contents`` (text as UTF-8), creating parent directories."""
        data = contents.encode("utf-8") if isinstance(contents, str) else contents
        path = self._path(file)
        try:
            await self.runtime.write_bytes(path, data)
        except SandboxIsADirectoryError as exc:
            raise IsADirectoryError(f"{file} is a directory") from exc
        except PermissionError as exc:
            raise PermissionError(f"permission denied writing {file}: {exc}") from exc

    @overload
    async def read_file(self, file: str, text: Literal[True] = True) -> str: ...

    @overload
    async def read_file(self, file: str, text: Literal[False]) -> bytes: ...

    async def read_file(self, file: str, text: bool = True) -> str | bytes:
        """Read a file; past Inspect's size limit, nothing is read."""
        path = self._path(file)
        try:
            info = await self.runtime.stat(path)
        except FileNotFoundError as exc:
            raise FileNotFoundError(f"no such file in the sandbox: {file}") from exc
        if info.type == "dir":
            raise IsADirectoryError(f"{file} is a directory")
        if info.size > SandboxEnvironmentLimits.MAX_READ_FILE_SIZE:
            raise OutputLimitExceededError(SandboxEnvironmentLimits.MAX_READ_FILE_SIZE_STR, None)
        try:
            data = await self.runtime.read_bytes(path)
        except SandboxIsADirectoryError as exc:
            raise IsADirectoryError(f"{file} is a directory") from exc
        except FileNotFoundError as exc:
            raise FileNotFoundError(f"no such file in the sandbox: {file}") from exc
        except PermissionError as exc:
            raise PermissionError(f"permission denied reading {file}: {exc}") from exc
        return data.decode("utf-8") if text else data

    async def connection(self, *, user: str | None = None) -> SandboxConnection:
        """How a person gets a shell in this sandbox (Inspect View shows it): docker only."""
        if self.runtime.config.backend != "docker":
            raise NotImplementedError(
                f"no shell command for a {self.runtime.config.backend} sandbox; use "
                f"sandbox_runtime.SandboxRuntime.connect({self.runtime.config.backend!r}, "
                f"{self.runtime.id!r})"
            )
        who = f" -u {shlex.quote(user)}" if user else ""
        command = f"docker exec -it{who} {self.runtime.id} bash -l"
        return SandboxConnection(type=SANDBOX_NAME, command=command, container=self.runtime.id)

    # ---- helpers -----------------------------------------------------------------------------

    def _path(self, path: str) -> str:
        return posixpath.join(self.runtime.workdir, path)

    async def _as_user(self, user: str, argv: list[str]) -> list[str]:
        if self._own_user is None:
            found = await self.runtime.exec(["sh", "-c", "id -un; id -u"], timeout=30)
            lines = found.stdout.split()
            self._own_user = (lines[0], lines[1]) if len(lines) == 2 else ("", "")
        if user in self._own_user:
            return argv
        capabilities = load_backend(self.runtime.config.backend).capabilities_for(
            self.runtime.sync.backend.options
        )
        if self._own_user[1] != "0" or Capability.SHARED_HOST_FILESYSTEM in capabilities:
            raise SandboxUserUnsupportedError(
                f"this {self.runtime.config.backend} sandbox runs commands as "
                f"{self._own_user[0] or 'its own user'} and cannot switch to {user!r}"
            )
        return ["/bin/sh", "-c", _AS_USER, "sh", user, *argv]


async def in_thread(function: Any, *args: Any) -> Any:
    """Run a blocking call of this library off the event loop."""
    import anyio.to_thread

    return await anyio.to_thread.run_sync(function, *args)


def _remove_labelled(settings: SandboxRuntimeConfig, labels: dict[str, str]) -> None:
    found = list_sandboxes(settings.backend, labels=labels, options=settings.backend_options)
    _remove_ids(settings, [info.sandbox_id for info in found])


def _remove_ids(settings: SandboxRuntimeConfig, ids: list[str]) -> None:
    for sandbox_id in ids:
        try:
            SandboxRuntime.connect(
                settings.backend, sandbox_id, options=settings.backend_options
            ).close()
        except SandboxGoneError:
            continue
        except SandboxError as exc:
            logger.warning("removing sandbox %s failed: %s", sandbox_id, exc)
