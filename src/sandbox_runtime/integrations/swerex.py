"""A SWE-ReX deployment whose runtime runs on a sandbox of this library.

SWE-ReX (``pip install swe-rex``) is the execution layer of SWE-agent: a *deployment* starts
somewhere commands can run and hands out a *runtime* (``create_session``,
``run_in_session``, ``execute``, ``read_file``, ``write_file``, ``upload``, ``close``).
:class:`SandboxRuntimeDeployment` is one more deployment, over a
:class:`~sandbox_runtime.SandboxRuntime`, so SWE-ReX's calls reach local, docker,
kubernetes, AGS, e2b or any installed backend::

    deployment = SandboxRuntimeDeployment(backend="docker", image="python:3.12")
    await deployment.start()
    await deployment.runtime.create_session(CreateBashSessionRequest())
    obs = await deployment.runtime.run_in_session(BashAction(command="cd /tmp && pwd"))

SWE-ReX's own deployments start its server (``swerex-remote``) in the container and speak
HTTP to it; this one needs no server: each call is one command or file operation of the
library.  A *session* is therefore not a live shell but a saved one: every ``run_in_session``
runs in a fresh ``bash`` that first restores the session's state (working directory,
exported variables, functions, aliases, ``set``/``shopt`` options) from a file in the sandbox
and saves it again after the command.  Non-exported shell variables and background jobs do
not outlive a command; interactive programs (``is_interactive_command``,
``BashInterruptAction``) are refused with :class:`NotImplementedError`.

SWE-agent and ``sweagent run --env.deployment.type`` pick a deployment from SWE-ReX's
``DeploymentConfig``, a closed union of its own config classes, so this one cannot be named
there; SWE-agent's ``SWEEnv(deployment=...)`` takes the deployment object from Python
(docs/harnesses.md).
"""

from __future__ import annotations

import logging
import shlex
import uuid
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from swerex.deployment.abstract import AbstractDeployment
from swerex.deployment.hooks.abstract import CombinedDeploymentHook, DeploymentHook
from swerex.exceptions import (
    BashIncorrectSyntaxError,
    CommandTimeoutError,
    DeploymentNotStartedError,
    NonZeroExitCodeError,
    SessionDoesNotExistError,
    SessionExistsError,
)
from swerex.runtime.abstract import (
    AbstractRuntime,
    Action,
    BashAction,
    CloseBashSessionResponse,
    CloseResponse,
    CloseSessionRequest,
    CloseSessionResponse,
    Command,
    CommandResponse,
    CreateBashSessionResponse,
    CreateSessionRequest,
    CreateSessionResponse,
    IsAliveResponse,
    Observation,
    ReadFileRequest,
    ReadFileResponse,
    UploadRequest,
    UploadResponse,
    WriteFileRequest,
    WriteFileResponse,
)
from swerex.runtime.abstract import BashObservation as _BashObservation

from sandbox_runtime._core.aio import AsyncSandboxRuntime
from sandbox_runtime._core.config import SandboxConfig
from sandbox_runtime._core.results import ExecResult
from sandbox_runtime.integrations._harness_tasks import new_run_id
from sandbox_runtime.integrations._sandbox_config import HarnessSandboxFieldsWithEnv

__all__ = [
    "HARNESS_NAME",
    "SandboxRuntimeDeployment",
    "SandboxRuntimeDeploymentConfig",
    "SandboxRuntimeRuntime",
]

#: The value of the ``harness`` label on this deployment's sandboxes.
HARNESS_NAME = "swe-rex"
#: Where sessions keep their saved shell state inside the sandbox.
STATE_DIR = "/tmp/.sandbox-runtime-swerex"
_SYNTAX_EXIT = 253
_STARTUP_FLOOR = 30.0
_logger = logging.getLogger(__name__)

# Restore the session's state, check the command's syntax, run it with stderr merged into
# stdout (as a terminal shows it), then save the state again.  $1: the state file, $2: the
# command.  The state is bash's own re-readable dumps, written to a new file then renamed so
# a command killed half-way leaves the previous state intact.
_SESSION_SCRIPT = r"""
__sr_state=$1; __sr_cmd=$2; set --
exec 2>&1
if ! bash -n -c "$__sr_cmd" 2>/tmp/.sandbox-runtime-swerex-syntax.$$; then
  cat /tmp/.sandbox-runtime-swerex-syntax.$$; rm -f /tmp/.sandbox-runtime-swerex-syntax.$$
  exit 253
fi
rm -f /tmp/.sandbox-runtime-swerex-syntax.$$
shopt -s expand_aliases
. "$__sr_state"
eval "$__sr_cmd"
__sr_rc=$?
set +e
{ export -p; declare -f; alias -p; set +o; shopt -p; printf 'cd -- %q\n' "$PWD"; } \
  >"$__sr_state.new" 2>/dev/null && mv -f "$__sr_state.new" "$__sr_state"
exit $__sr_rc
"""


class SandboxRuntimeDeploymentConfig(HarnessSandboxFieldsWithEnv):
    """The deployment's settings (the keyword arguments of :class:`SandboxRuntimeDeployment`).

    The sandbox keys are every harness adapter's (:mod:`._sandbox_config`): ``image`` is the
    backend's default when unset, ``workdir`` is where new sessions start, ``env`` reaches
    every session and command.
    """

    type: Literal["sandbox-runtime"] = "sandbox-runtime"
    """Discriminator, as SWE-ReX's own deployment configs carry one."""

    def get_deployment(self) -> SandboxRuntimeDeployment:
        """The deployment, as SWE-ReX's configs' ``get_deployment`` returns theirs."""
        return SandboxRuntimeDeployment.from_config(self)


class SandboxRuntimeRuntime(AbstractRuntime):  # type: ignore[misc,unused-ignore]
    """SWE-ReX's runtime calls as commands and file operations of one sandbox."""

    def __init__(
        self,
        sandbox: AsyncSandboxRuntime,
        *,
        env: Mapping[str, str] | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        """Serve ``sandbox`` (already started; this runtime does not own it)."""
        self.logger = logger or _logger
        self.sandbox = sandbox
        self._env = dict(env or {})
        self._sessions: dict[str, str] = {}
        self._prefix = uuid.uuid4().hex[:12]

    async def is_alive(self, *, timeout: float | None = None) -> IsAliveResponse:
        """Whether the sandbox still runs."""
        alive = await self.sandbox.is_alive()
        return IsAliveResponse(is_alive=alive, message="" if alive else "the sandbox is gone")

    async def create_session(self, request: CreateSessionRequest) -> CreateSessionResponse:
        """A new saved shell in the sandbox's workdir, with ``startup_source`` files sourced."""
        if request.session in self._sessions:
            raise SessionExistsError(f"session {request.session!r} already exists")
        state = f"{STATE_DIR}/{self._prefix}-{uuid.uuid4().hex[:8]}.sh"
        initial = f"cd -- {shlex.quote(self.sandbox.workdir)}\n"
        await self.sandbox.write_text(state, initial)
        self._sessions[request.session] = state
        output = ""
        if request.startup_source:
            sources = " && ".join(f". {shlex.quote(path)}" for path in request.startup_source)
            # startup_timeout (default 1 s) is SWE-ReX's wait on a shell already running; here
            # the time includes a round trip to the sandbox, so it gets a floor.
            limit = max(request.startup_timeout, _STARTUP_FLOOR)
            result = await self._run_saved(state, sources, limit)
            output = result.stdout
        return CreateBashSessionResponse(output=output)

    async def run_in_session(self, action: Action) -> Observation:
        """Run ``action.command`` in the session's saved shell.

        Raises SWE-ReX's ``CommandTimeoutError`` past ``action.timeout``,
        ``BashIncorrectSyntaxError`` for a command bash cannot parse, and (with
        ``check="raise"``) ``NonZeroExitCodeError``, as SWE-ReX's own runtime does.
        """
        if not isinstance(action, BashAction):
            raise NotImplementedError(
                "sandbox-runtime sessions are not live terminals: interrupts are not supported"
            )
        if action.is_interactive_command or action.is_interactive_quit:
            raise NotImplementedError(
                "sandbox-runtime sessions are not live terminals: interactive commands "
                "are not supported"
            )
        state = self._sessions.get(action.session)
        if state is None:
            raise SessionDoesNotExistError(f"session {action.session!r} does not exist")
        result = await self._run_saved(state, action.command, action.timeout)
        if result.exit_code == _SYNTAX_EXIT and "syntax error" in result.stdout:
            raise BashIncorrectSyntaxError(
                f"bash cannot parse {action.command!r}: {result.stdout.strip()}",
                extra_info={"bash_stdout": result.stdout, "bash_stderr": ""},
            )
        if action.check == "raise" and result.exit_code != 0:
            message = (
                f"Command {action.command!r} failed with exit code {result.exit_code}. "
                f"Here is the output:\n{result.stdout!r}"
            )
            if action.error_msg:
                message = f"{action.error_msg}: {message}"
            raise NonZeroExitCodeError(message)
        exit_code = None if action.check == "ignore" else result.exit_code
        return _BashObservation(output=result.stdout, exit_code=exit_code)

    async def _run_saved(self, state: str, command: str, timeout: float | None) -> ExecResult:
        argv = ["bash", "-c", _SESSION_SCRIPT, "bash", state, command]
        result = await self.sandbox.exec(argv, env=self._env, timeout=timeout)
        if result.timed_out:
            raise CommandTimeoutError(
                f"timeout after {timeout} seconds while running command {command!r}"
            )
        return result

    async def close_session(self, request: CloseSessionRequest) -> CloseSessionResponse:
        """Forget the session and remove its saved state."""
        state = self._sessions.pop(request.session, None)
        if state is None:
            raise SessionDoesNotExistError(f"session {request.session!r} does not exist")
        await self.sandbox.remove(state)
        return CloseBashSessionResponse()

    async def execute(self, command: Command) -> CommandResponse:
        """Run one command outside any session, as ``subprocess.run`` would.

        ``env`` is added to the sandbox's environment (SWE-ReX's local runtime replaces the
        whole environment with it; a sandbox's ``PATH`` and ``HOME`` are worth keeping).
        """
        argv = _command_argv(command.command, shell=command.shell)
        if command.merge_output_streams:
            argv = ["sh", "-c", 'exec 2>&1; exec "$@"', "sh", *argv]
        env = {**self._env, **(command.env or {})}
        result = await self.sandbox.exec(argv, cwd=command.cwd, env=env, timeout=command.timeout)
        if result.timed_out:
            raise CommandTimeoutError(
                f"Timeout ({command.timeout}s) exceeded while running command"
            )
        response = CommandResponse(
            stdout=result.stdout_bytes.decode(errors="backslashreplace"),
            stderr=result.stderr_bytes.decode(errors="backslashreplace"),
            exit_code=result.exit_code,
        )
        if command.check and result.exit_code != 0:
            message = (
                f"Command {command.command!r} failed with exit code {result.exit_code}. "
                f"Stdout:\n{response.stdout!r}\nStderr:\n{response.stderr!r}"
            )
            if command.error_msg:
                message = f"{command.error_msg}: {message}"
            raise NonZeroExitCodeError(message)
        return response

    async def read_file(self, request: ReadFileRequest) -> ReadFileResponse:
        """A file's text (``encoding`` and ``errors`` as ``Path.read_text`` takes them)."""
        data = await self.sandbox.read_bytes(request.path)
        content = data.decode(request.encoding or "utf-8", request.errors or "strict")
        return ReadFileResponse(content=content)

    async def write_file(self, request: WriteFileRequest) -> WriteFileResponse:
        """Create or replace a text file, creating missing parent directories."""
        await self.sandbox.write_bytes(request.path, request.content.encode("utf-8"))
        return WriteFileResponse()

    async def upload(self, request: UploadRequest) -> UploadResponse:
        """Copy a host file or directory into the sandbox."""
        await self.sandbox.upload(Path(request.source_path), request.target_path)
        return UploadResponse()

    async def close(self) -> CloseResponse:
        """Close every session (the sandbox itself belongs to the deployment)."""
        for name in list(self._sessions):
            state = self._sessions.pop(name)
            if await self.sandbox.is_alive():
                await self.sandbox.remove(state)
        return CloseResponse()


def _command_argv(command: str | Sequence[str], *, shell: bool) -> list[str]:
    """``subprocess.run``'s reading of ``command`` and ``shell`` as an argument vector."""
    if isinstance(command, str):
        return ["sh", "-c", command] if shell else [command]
    argv = list(command)
    if shell:
        return ["sh", "-c", argv[0], *argv[1:]] if argv else ["true"]
    return argv


class SandboxRuntimeDeployment(AbstractDeployment):  # type: ignore[misc,unused-ignore]
    """SWE-ReX's deployment protocol over one sandbox of this library."""

    def __init__(self, *, logger: logging.Logger | None = None, **kwargs: Any) -> None:
        """Describe the deployment (``kwargs``: :class:`SandboxRuntimeDeploymentConfig`)."""
        self.logger = logger or _logger
        self.config = SandboxRuntimeDeploymentConfig(**kwargs)
        self.run_id = new_run_id()
        self._hooks = CombinedDeploymentHook()
        self._sandbox: AsyncSandboxRuntime | None = None
        self._runtime: SandboxRuntimeRuntime | None = None
        self._closer: weakref.finalize[Any, Any] | None = None

    @classmethod
    def from_config(cls, config: SandboxRuntimeDeploymentConfig) -> SandboxRuntimeDeployment:
        """The deployment a config describes."""
        return cls(**config.model_dump())

    def add_hook(self, hook: DeploymentHook) -> None:
        """Report start-up steps to ``hook`` (SWE-agent shows them)."""
        self._hooks.add_hook(hook)

    def _sandbox_config(self) -> SandboxConfig:
        cfg = self.config
        return cfg.sandbox_config(cfg.run_labels(HARNESS_NAME, self.run_id), env=cfg.env)

    async def start(self) -> None:
        """Start the sandbox (idempotent)."""
        if self._sandbox is not None:
            return
        self._hooks.on_custom_step(f"Starting a {self.config.backend} sandbox")
        sandbox = AsyncSandboxRuntime(self._sandbox_config())
        await sandbox.start()
        self._sandbox = sandbox
        # Removed at interpreter exit if nobody stops it (SWE-agent's CLI stops; a script may not).
        self._closer = weakref.finalize(self, sandbox.sync.close)
        self._runtime = SandboxRuntimeRuntime(sandbox, env=self.config.env, logger=self.logger)

    async def stop(self) -> None:
        """Close the runtime's sessions and remove the sandbox (idempotent)."""
        sandbox, runtime = self._sandbox, self._runtime
        self._sandbox = self._runtime = None
        if sandbox is None or runtime is None:
            return
        try:
            if await sandbox.is_alive():
                await runtime.close()
        finally:
            await sandbox.close()
            if self._closer is not None:
                self._closer.detach()

    async def is_alive(self, *, timeout: float | None = None) -> IsAliveResponse:
        """Whether the sandbox still runs; ``DeploymentNotStartedError`` before ``start``."""
        return await self.runtime.is_alive(timeout=timeout)

    @property
    def runtime(self) -> SandboxRuntimeRuntime:
        """The runtime; ``DeploymentNotStartedError`` before ``start``."""
        if self._runtime is None:
            raise DeploymentNotStartedError("the deployment was not started")  # type: ignore[no-untyped-call,unused-ignore]
        return self._runtime

    @property
    def sandbox(self) -> AsyncSandboxRuntime:
        """The sandbox under the runtime; ``DeploymentNotStartedError`` before ``start``."""
        if self._sandbox is None:
            raise DeploymentNotStartedError("the deployment was not started")  # type: ignore[no-untyped-call,unused-ignore]
        return self._sandbox

    def __del__(self) -> None:
        """Remove a sandbox nobody stopped, synchronously.

        SWE-ReX's own ``__del__`` schedules ``stop()`` on the event loop, which never runs
        when the loop is already closing; the sandbox's own close needs no loop.
        """
        closer = getattr(self, "_closer", None)
        if closer is not None:
            closer()
