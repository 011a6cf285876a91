"""rLLM's ``Sandbox`` protocol over any backend, and the hook that lets rLLM create ours.

rLLM's newer agent flows (``rllm/sandbox/protocol.py``) drive a sandbox through five
methods: ``exec(command, timeout, user) -> stdout``, ``upload_file``, ``upload_dir``,
``close`` and ``is_alive`` (which must not raise).  :class:`RLLMSandbox` implements them on a
:class:`~sandbox_runtime.SandboxRuntime`, so a flow runs on ``ags``, ``kubernetes`` or any
backend rLLM itself does not have.

rLLM makes its sandboxes in one closed function, ``rllm.sandbox.sandboxed_flow.
create_sandbox(backend, name, image, **kwargs)`` (docker, local, modal, daytona), which its
callers import when they call it.  :func:`install` wraps that function: a backend named
``sandbox-runtime:<name>`` (``sandbox-runtime:ags``) is ours, every other name goes to rLLM as
before.  Call it once in every process that makes sandboxes: in the training script, and in
Ray workers through ``runtime_env={"worker_process_setup_hook":
"sandbox_runtime.integrations.rllm.install"}``; then select it as any rLLM backend
(``sandbox_backend="sandbox-runtime:ags"`` on the flow, ``--sandbox-backend`` on rLLM's CLI).

Semantics, where rLLM's own backends differ from each other, follow its docker backend: a
command that exits non-zero raises :class:`CommandFailedError` (a ``RuntimeError`` carrying
the exit code, stdout and stderr, which rLLM's ``_safe_exec`` turns into text), a command
that runs out of time raises ``subprocess.TimeoutExpired``; a sandbox that is gone or a
backend that fails raises :class:`~sandbox_runtime.SandboxError`, which is *not* a
``RuntimeError``, so rLLM's helpers do not mistake an infrastructure fault for a command's
output.  ``user`` is ignored (commands run as the image's user), as in rLLM's local backend.
"""

from __future__ import annotations

import functools
import logging
import re
import subprocess
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sandbox_runtime._core.backend import Capability
from sandbox_runtime._core.config import SandboxConfig
from sandbox_runtime._core.registry import load_backend
from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.errors import ConfigError
from sandbox_runtime.swe.agents.tool_check import require_commands_see_sandbox_paths

__all__ = ["BACKEND_PREFIX", "CommandFailedError", "RLLMSandbox", "install"]

logger = logging.getLogger("sandbox_runtime.rllm")

#: rLLM backend names that :func:`install` routes here: ``sandbox-runtime:<our backend>``.
BACKEND_PREFIX = "sandbox-runtime:"

_STDERR_TAIL = 600


class CommandFailedError(RuntimeError):
    """A command ran and exited non-zero (what rLLM's docker backend raises)."""

    def __init__(self, command: str, exit_code: int, stdout: str, stderr: str, name: str) -> None:
        self.command = command
        self.exit_code = exit_code
        self.stdout = stdout
        self.stderr = stderr
        tail = stderr[-_STDERR_TAIL:]
        super().__init__(
            f"Command failed (exit {exit_code}) in sandbox {name}: {command}\n"
            f"stderr (tail):\n{tail}"
        )


class RLLMSandbox:
    """One sandbox of any backend, with rLLM's ``Sandbox`` methods.

    ``name`` and ``image`` are what rLLM passes to its backends; ``backend`` and
    ``backend_options`` choose ours; ``workdir`` is where commands run (rLLM's tasks use
    absolute paths such as ``/app``; on ``local`` they need namespace isolation, the default
    where bubblewrap works: with ``isolation: none`` the start raises
    :class:`~sandbox_runtime.ToolUnavailableError` with the remedy).  A
    backend whose images are host directories (``local``) ignores a container image name, as
    rLLM's local backend does.  Other keyword arguments (rLLM's resource hints such as
    ``cpu`` or ``memory``) are accepted and ignored.  ``lifetime`` is the first lifetime; a
    lease of ``lease`` seconds (``None``: none) keeps the sandbox while this process holds
    it, up to ``max_lifetime`` (docs/leases.md).
    """

    def __init__(
        self,
        name: str,
        image: str | None = None,
        *,
        backend: str = "docker",
        backend_options: Mapping[str, Any] | None = None,
        workdir: str = "/",
        lifetime: float = 4 * 3600.0,
        lease: float | None = 900.0,
        max_lifetime: float | None = None,
        **ignored: Any,
    ) -> None:
        if ignored:
            logger.debug("RLLMSandbox %s ignores %s", name, ", ".join(sorted(ignored)))
        self.name = name
        self.image = image
        if image and not Path(image).is_dir() and _takes_directories_only(backend):
            # rLLM names container images; a backend whose images are directories (local)
            # starts empty instead, as rLLM's own local backend does.
            logger.debug("RLLMSandbox %s: %s runs no container image %r", name, backend, image)
            image = None
        config = SandboxConfig(
            backend=backend,
            image=image,
            workdir=workdir,
            lifetime=lifetime,
            max_lifetime=max_lifetime,
            labels={"rllm-name": re.sub(r"[^A-Za-z0-9_.-]", "-", name)[:63]},
            options=dict(backend_options or {}),
        )
        self.runtime = SandboxRuntime(config).start()
        try:
            # rLLM's flows upload files to absolute paths and name them in commands: refuse a
            # sandbox whose commands see the host's paths there (local, isolation=none).
            require_commands_see_sandbox_paths(self.runtime, "rLLM's sandbox")
        except BaseException:
            self.runtime.close()
            raise
        if (
            lease is not None
            and Capability.EXTEND_LIFETIME
            in self.runtime.backend.capabilities_for(self.runtime.backend.options)
        ):
            # rLLM holds the sandbox for as long as its episode and grading take, which no
            # budget here knows: a lease keeps it while this process holds it (docs/leases.md).
            self.runtime.keep_alive(lease=lease)

    def exec(self, command: str, timeout: float | None = None, user: str | None = None) -> str:
        """Run shell text; its stdout, or :class:`CommandFailedError` on a non-zero exit."""
        del user  # commands run as the image's user (see the module docstring)
        result = self.runtime.exec(command, timeout=timeout)
        if result.timed_out:
            raise subprocess.TimeoutExpired(
                command, timeout or 0.0, output=result.stdout, stderr=result.stderr
            )
        if result.exit_code != 0:
            raise CommandFailedError(
                command, result.exit_code, result.stdout, result.stderr, self.name
            )
        return result.stdout

    def upload_file(self, local_path: str, remote_path: str) -> None:
        """Copy one host file into the sandbox (parent directories are made)."""
        if not Path(local_path).is_file():
            raise FileNotFoundError(f"no such file on the host: {local_path}")
        self.runtime.upload(local_path, remote_path)

    def upload_dir(self, local_path: str, remote_path: str) -> None:
        """Copy a host directory tree into the sandbox at ``remote_path``."""
        if not Path(local_path).is_dir():
            raise NotADirectoryError(f"no such directory on the host: {local_path}")
        self.runtime.upload(local_path, remote_path)

    def close(self) -> None:
        """Remove the sandbox; harmless to call twice."""
        self.runtime.close()

    def is_alive(self) -> bool:
        """Whether the sandbox still answers; never raises (any failure means ``False``)."""
        try:
            return self.runtime.is_alive()
        except Exception:
            return False

    def __repr__(self) -> str:
        return f"RLLMSandbox({self.name!r}, backend={self.runtime.config.backend!r})"


def _takes_directories_only(backend: str) -> bool:
    capabilities = load_backend(backend).capabilities
    return Capability.DIRECTORY_IMAGES in capabilities and (
        Capability.ENGINE_IMAGES not in capabilities
    )


_install_lock = threading.Lock()


def install(
    backend_options: Mapping[str, Mapping[str, Any]] | None = None,
    **defaults: Any,
) -> None:
    """Make rLLM's ``create_sandbox`` accept ``sandbox-runtime:<backend>`` names.

    ``backend_options`` maps our backend names to their options (``{"ags": {"tool_name":
    ...}}``); ``defaults`` are further :class:`RLLMSandbox` arguments (``workdir``,
    ``lifetime``).  Idempotent; raises :class:`~sandbox_runtime.ConfigError` when rLLM (with
    its ``rllm.sandbox`` package) is not importable here.
    """
    try:
        from rllm.sandbox import sandboxed_flow
    except ImportError as exc:
        raise ConfigError(
            "sandbox_runtime.integrations.rllm.install needs rLLM with its rllm.sandbox "
            f"package (rLLM after 0.2): {exc}"
        ) from exc
    options = {name: dict(values) for name, values in (backend_options or {}).items()}
    with _install_lock:
        current = sandboxed_flow.create_sandbox
        original = getattr(current, "__wrapped_by_sandbox_runtime__", current)
        sandboxed_flow.create_sandbox = _wrap(original, options, defaults)


def _wrap(
    original: Callable[..., Any], options: dict[str, dict[str, Any]], defaults: dict[str, Any]
) -> Callable[..., Any]:
    @functools.wraps(original)
    def create_sandbox(backend: str, name: str, image: str, **kwargs: Any) -> Any:
        if not backend.startswith(BACKEND_PREFIX):
            return original(backend, name, image, **kwargs)
        ours = backend.removeprefix(BACKEND_PREFIX)
        arguments = {**defaults, **kwargs}
        arguments.setdefault("backend_options", options.get(ours, {}))
        return RLLMSandbox(name, image, backend=ours, **arguments)

    create_sandbox.__wrapped_by_sandbox_runtime__ = original  # type: ignore[attr-defined]
    return create_sandbox
