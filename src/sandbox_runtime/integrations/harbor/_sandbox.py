"""The engine side of the Harbor environment: one sandbox of this library, asynchronously.

Kept apart from :mod:`sandbox_runtime.integrations.harbor` (the subclass of Harbor's
``BaseEnvironment``) so that it imports without Harbor: every Harbor release declares Python
3.12 and uses 3.12 syntax, while this library supports 3.11 (docs/harnesses.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sandbox_runtime._core.aio import AsyncSandboxRuntime
from sandbox_runtime.errors import ConfigError
from sandbox_runtime.integrations._harness_tasks import new_run_id
from sandbox_runtime.integrations._sandbox_config import HarnessSandboxFields

__all__ = ["HARNESS_NAME", "HarborSandbox", "HarborSandboxOptions"]

#: The value of the ``harness`` label on this environment's sandboxes.
HARNESS_NAME = "harbor"


class HarborSandboxOptions(HarnessSandboxFields):
    """The environment's ``kwargs`` in a Harbor job config (``environment.kwargs``).

    The sandbox keys are every harness adapter's (:mod:`.._sandbox_config`): ``image``
    defaults to the task's ``[environment] docker_image``; the variables come from Harbor.
    """

    workdir: str = "/"
    """The sandbox's working directory, where commands without ``cwd`` run."""


class HarborSandbox:
    """Start, exec, file transfer and stop, as Harbor's environment methods need them."""

    def __init__(self, options: HarborSandboxOptions, *, session_id: str) -> None:
        """Describe the sandbox; nothing starts before :meth:`start`."""
        self.options = options
        self.session_id = session_id
        self.run_id = new_run_id()
        self._sandbox: AsyncSandboxRuntime | None = None

    @property
    def sandbox(self) -> AsyncSandboxRuntime:
        """The running sandbox; :class:`ConfigError` before :meth:`start`."""
        if self._sandbox is None:
            raise ConfigError("the Harbor environment was not started")
        return self._sandbox

    async def start(
        self, *, image: str | None, env: dict[str, str], resources: dict[str, Any]
    ) -> None:
        """Start the sandbox (idempotent); ``image`` when the options name none."""
        if self._sandbox is not None:
            return
        opts = self.options
        labels = opts.run_labels(
            HARNESS_NAME, self.run_id, **{"harbor-session": _label_value(self.session_id)}
        )
        config = opts.sandbox_config(
            labels,
            image=opts.image or image,
            env=env,
            resources={**resources, **opts.resources},
        )
        sandbox = AsyncSandboxRuntime(config)
        await sandbox.start()
        self._sandbox = sandbox

    async def stop(self) -> None:
        """Remove the sandbox (idempotent)."""
        sandbox, self._sandbox = self._sandbox, None
        if sandbox is not None:
            await sandbox.close()

    async def exec(
        self,
        command: str,
        *,
        cwd: str | None,
        env: dict[str, str] | None,
        timeout_sec: float | None,
        user: str | int | None,
    ) -> tuple[str, str, int]:
        """Run shell text with bash; ``(stdout, stderr, exit code)``.

        Raises :class:`TimeoutError` past ``timeout_sec`` (the command's process group is
        killed first), as Harbor's own environments fail a command that outlives its limit.
        """
        argv = ["bash", "-c", command]
        if user is not None and str(user) not in ("root", "0"):
            argv = _as_user(user, argv)
        result = await self.sandbox.exec(argv, cwd=cwd, env=env, timeout=timeout_sec)
        if result.timed_out:
            raise TimeoutError(f"command timed out after {timeout_sec} seconds: {command[:200]!r}")
        return result.stdout, result.stderr, result.exit_code

    async def upload(self, source: Path | str, target: str) -> None:
        """Copy a host file or directory into the sandbox (parents created)."""
        await self.sandbox.upload(Path(source), target)

    async def download(self, source: str, target: Path | str) -> None:
        """Copy a sandbox file or directory to the host (parents created)."""
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        await self.sandbox.download(source, Path(target))


def _as_user(user: str | int, argv: list[str]) -> list[str]:
    """``argv`` run as another user of a sandbox that runs as root (util-linux's tools)."""
    if isinstance(user, int) or str(user).isdigit():
        uid = int(user)
        return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv]
    return ["runuser", "-u", str(user), "--", *argv]


def _label_value(text: str) -> str:
    """A label value every backend accepts (Kubernetes: 63 characters of [-_.A-Za-z0-9])."""
    cleaned = "".join(c if c.isalnum() or c in "-_." else "-" for c in text)
    return cleaned.strip("-_.")[:63] or "session"
