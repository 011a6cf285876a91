"""A Harbor environment on every backend of this library.

Harbor (``pip install harbor``, laude-institute/harbor) runs an agent and a verifier in an
*environment*, a subclass of ``harbor.environments.base.BaseEnvironment``.  Its built-in
environments are a closed enum (``EnvironmentType``), but a job config names any other one by
import path, which Harbor loads and checks to be a ``BaseEnvironment``::

    environment:
      import_path: sandbox_runtime.integrations.harbor:SandboxRuntimeEnvironment
      kwargs: {backend: kubernetes, backend_options: {namespace: evals}}

(or ``harbor run --environment-import-path sandbox_runtime.integrations.harbor:...``).
The ``kwargs`` are :class:`HarborSandboxOptions`; the image is the task's
``[environment] docker_image`` unless ``image`` is given (a task that only has a Dockerfile
needs an image built beforehand: this library's backends run images, they do not build).

Every Harbor release requires Python 3.12 and uses its syntax; importing this module needs
Harbor, so it needs 3.12 too.  The engine side lives in :mod:`._sandbox`, which does not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harbor.environments.base import BaseEnvironment, ExecResult

from sandbox_runtime.errors import ConfigError
from sandbox_runtime.integrations.harbor._sandbox import (
    HARNESS_NAME,
    HarborSandbox,
    HarborSandboxOptions,
)

__all__ = ["HARNESS_NAME", "HarborSandboxOptions", "SandboxRuntimeEnvironment"]

#: The ``type()`` of this environment (Harbor lets third-party environments return any string).
ENVIRONMENT_TYPE = "sandbox-runtime"
_OPTION_NAMES = frozenset(HarborSandboxOptions.model_fields)


class SandboxRuntimeEnvironment(BaseEnvironment):  # type: ignore[misc,unused-ignore]
    """Harbor's environment methods over one sandbox of this library."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Take this environment's options out of ``kwargs``; Harbor's own go to the base."""
        ours = {key: kwargs.pop(key) for key in list(kwargs) if key in _OPTION_NAMES}
        self.sandbox_options = HarborSandboxOptions.model_validate(ours)
        super().__init__(*args, **kwargs)
        self._box = HarborSandbox(self.sandbox_options, session_id=str(self.session_id))

    @staticmethod
    def type() -> str:
        """The environment's name in Harbor's results (a string, as third parties may)."""
        return ENVIRONMENT_TYPE

    def _image(self) -> str | None:
        if self.sandbox_options.image is not None:
            return self.sandbox_options.image
        if self.sandbox_options.backend == "local":
            return None  # a local sandbox's image is a host directory or none, not the task's
        return getattr(self.task_env_config, "docker_image", None)

    def _validate_definition(self) -> None:
        """An image must be known (ours, or the task's ``docker_image``) except on ``local``."""
        if self._image() is None and self.sandbox_options.backend != "local":
            raise ConfigError(
                f"{self.environment_dir}: task.toml [environment] has no docker_image and "
                "environment.kwargs has no image (sandbox-runtime runs images, it does not "
                "build Dockerfiles)"
            )

    def _resources(self) -> dict[str, Any]:
        config = self.task_env_config
        resources: dict[str, Any] = {}
        cpus = getattr(config, "cpus", None)
        memory_mb = getattr(config, "memory_mb", None)
        if cpus:
            resources["cpus"] = cpus
        if memory_mb:
            resources["memory"] = f"{int(memory_mb)}m"
        return resources

    async def start(self, force_build: bool) -> None:
        """Start the sandbox; ``force_build`` has nothing to build (images only)."""
        # The task's and the trial's variables (the base's helper; absent: none).
        startup_env = getattr(self, "_startup_env", None)
        env = dict(startup_env()) if startup_env is not None else {}
        await self._box.start(image=self._image(), env=env, resources=self._resources())
        # Harbor's base class creates the output directories it mounts on local providers
        # and uploads the task's environment directory; both are the base's own helpers.
        ensure_dirs = getattr(self, "ensure_dirs", None)
        mount_targets = getattr(self, "_mount_targets", None)
        if ensure_dirs is not None and mount_targets is not None:
            await ensure_dirs(mount_targets(writable_only=True))
        upload_environment = getattr(self, "_upload_environment_dir_after_start", None)
        if upload_environment is not None:
            await upload_environment()

    async def stop(self, delete: bool) -> None:
        """Remove the sandbox (a sandbox is never kept: ``delete=False`` changes nothing)."""
        await self._box.stop()

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        """Copy a host file into the sandbox."""
        await self._box.upload(source_path, target_path)

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        """Copy a host directory into the sandbox."""
        await self._box.upload(source_dir, target_dir)

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        """Copy a sandbox file to the host."""
        await self._box.download(source_path, target_path)

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        """Copy a sandbox directory to the host."""
        await self._box.download(source_dir, target_dir)

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        """Run shell text with bash; a non-zero exit is data, a timeout raises."""
        # The base's precedence rules for the user and the variables, where it has them.
        resolve_user = getattr(self, "_resolve_user", None)
        if resolve_user is not None:
            user = resolve_user(user)
        merge_env = getattr(self, "_merge_env", None)
        if merge_env is not None:
            env = merge_env(env)
        stdout, stderr, code = await self._box.exec(
            command, cwd=cwd, env=env, timeout_sec=timeout_sec, user=user
        )
        return ExecResult(stdout=stdout, stderr=stderr, return_code=code)
