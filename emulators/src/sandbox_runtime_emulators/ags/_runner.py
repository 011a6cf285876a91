"""One emulated instance: a real sandbox of another backend with our envd running inside it.

The instance is a :class:`~sandbox_runtime.SandboxRuntime` of the ``local`` or ``docker``
backend.  The envd emulation (standard library only) is copied into it and started as one
long-running command, so every process and file operation envd performs happens inside that
sandbox, with the sandbox's view of paths, whatever the backend.  envd listens on a free port
of 127.0.0.1 (``docker`` instances use the host network for that) and writes the port to a file
that the runner reads back through the sandbox's file API.

The instance's image maps to the backend as follows: ``docker`` runs it as a Docker image
name, as is (it must contain ``python3``); ``local`` uses it as a template directory if such a
directory exists on this machine and otherwise ignores it.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import secrets
import shlex
import shutil
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

import sandbox_runtime._envd.server as server_package
from sandbox_runtime import SandboxRuntime
from sandbox_runtime.errors import SandboxError, SandboxStartError

from ._seed import Seed, capture

__all__ = ["InstanceRunner", "RunnerSettings"]

logger = logging.getLogger("sandbox_runtime_emulators.ags")

ENVD_PACKAGE = "srt_envd"
# envd's package and state sit under /tmp, which every backend gives the sandbox as its own
# (a local sandbox with namespace isolation shows the host's /opt and /run read-only).
ENVD_HOME = "/tmp/.sandbox-runtime-envd"
ENVD_STATE = "/tmp/.sandbox-runtime-envd/state"
WORKDIR = "/home/user"
DEFAULT_USER = "user"
# Variables the local backend sets for its processes; envd must hand them on, or the
# backend could not find (and kill) the commands envd starts.
_KEEP_ENV = ("SANDBOX_RUNTIME_ID", "SANDBOX_RUNTIME_ROOT", "TMPDIR")


def _local_interpreter() -> str:
    """A Python that commands in a ``local`` sandbox can reach, to run envd (stdlib only).

    A virtualenv's interpreter may live under ``/tmp`` (a CI checkout, say), which namespace
    isolation hides behind the sandbox's own ``/tmp``; the real interpreter behind the
    virtualenv's symlink serves envd just as well, since envd needs no site-packages.
    """
    hidden = ("/tmp/", os.path.realpath(tempfile.gettempdir()) + os.sep)
    for candidate in (os.path.realpath(sys.executable), sys.executable, shutil.which("python3")):
        if candidate and not candidate.startswith(hidden):
            return candidate
    return sys.executable


class RunnerSettings:
    """How instances run: which backend, and its options."""

    def __init__(
        self,
        backend: str = "local",
        *,
        local_isolation: str | None = None,
        base_dir: str | None = None,
        boot_timeout: float = 60.0,
    ) -> None:
        self.backend = backend
        self.local_isolation = local_isolation
        self.base_dir = base_dir
        self.boot_timeout = boot_timeout

    def image_problem(self, image: str) -> str | None:
        """Why instances of ``image`` could not run here, or None (blocking: a worker thread).

        ``docker`` instances need the image in the local engine (the emulator never pulls);
        ``local`` instances run whatever the image, which they use only as a template
        directory when one exists, so nothing is refused there.
        """
        if self.backend != "docker":
            return None
        try:
            import docker
        except ImportError:
            return "docker-py is not installed, so Docker instances cannot run"
        client = docker.from_env(timeout=30)
        try:
            client.images.get(image)
        except docker.errors.ImageNotFound:
            return (
                f"image {image!r} was not found in the local Docker engine "
                "(the emulator never pulls images)"
            )
        except docker.errors.DockerException as exc:
            return f"cannot inspect image {image!r}: {exc}"
        finally:
            client.close()
        return None


def _envd_archive() -> bytes:
    """The envd package at ``ENVD_HOME/srt_envd`` and an empty ``ENVD_STATE`` directory."""
    source = Path(server_package.__file__).parent
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        state = tarfile.TarInfo(ENVD_STATE[1:])
        state.type = tarfile.DIRTYPE
        state.mode = 0o755
        archive.addfile(state)
        for path in sorted(source.glob("*.py")):
            info = archive.gettarinfo(
                str(path), arcname=f"{ENVD_HOME[1:]}/{ENVD_PACKAGE}/{path.name}"
            )
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with open(path, "rb") as handle:
                archive.addfile(info, handle)
    return buffer.getvalue()


class InstanceRunner:
    """Start, reach and stop one instance; every method blocks (call from a worker thread)."""

    def __init__(
        self,
        settings: RunnerSettings,
        *,
        image: str | None,
        env: dict[str, str],
        lifetime: float,
        seed: Seed | None = None,
    ) -> None:
        self.settings = settings
        #: The kept filesystem (from :meth:`capture`) the sandbox starts from, if any.
        self.seed = seed
        self.image = image
        self.env = env
        self.lifetime = lifetime
        #: The token the gateway presents to this instance's envd (never given to clients).
        self.internal_token = secrets.token_urlsafe(24)
        self.url: str | None = None
        self._runtime: SandboxRuntime | None = None
        self._envd_thread: threading.Thread | None = None
        self._envd_exit: str | None = None
        self._stopped = threading.Event()
        # ``docker commit`` pauses the container meanwhile, which is not a death.
        self._capturing = 0
        self._captures = 0

    def _config(self) -> dict[str, Any]:
        backend = self.settings.backend
        options: dict[str, Any] = {}
        image = self.seed.image if self.seed and self.seed.image else self.image
        if backend == "local":
            if self.settings.local_isolation:
                options["isolation"] = self.settings.local_isolation
            if self.settings.base_dir:
                options["base_dir"] = self.settings.base_dir
            if image and not os.path.isdir(image):
                logger.info("local instances ignore image %r (not a directory here)", image)
                image = None
        elif backend == "docker":
            # envd runs as root whatever the image's USER, as the real one does: it must be
            # able to act as any user a request names.
            options = {"network": "host", "pull": "never", "user": "root"}
        return {
            "backend": backend,
            "image": image,
            "workdir": WORKDIR,
            "lifetime": self.lifetime,
            "exec_timeout": None,
            "options": options,
        }

    def start(self) -> None:
        """Create the sandbox, start envd in it and wait until it answers ``/health``."""
        began = time.monotonic()
        try:
            runtime = SandboxRuntime(**self._config())
            runtime.start()
        except SandboxError as exc:
            raise SandboxStartError(str(exc)) from exc
        self._runtime = runtime
        try:
            if self.seed is not None and self.seed.image is not None:
                # The committed filesystem holds the source's envd state (its port file).
                runtime.exec(f"rm -rf {ENVD_HOME}", cwd="/", check=True)
            if self.seed is not None and self.seed.archive is not None:
                runtime.backend.put_archive(self.seed.archive)
            runtime.backend.put_archive(_envd_archive())
            self._envd_thread = threading.Thread(
                target=self._run_envd, name="ags-emulator-envd", daemon=True
            )
            self._envd_thread.start()
            port = self._wait_for_port(began)
            self.url = f"http://127.0.0.1:{port}"
            self._init_envd(began)
        except BaseException:
            self.stop()
            raise

    def _envd_command(self) -> str:
        """Shell text that starts envd in the sandbox and runs as long as envd does.

        ``-E -s`` keep the user's ``PYTHON*`` variables and site-packages out of envd; the
        package is found because its directory is the working directory.  Paths go through
        ``$SANDBOX_RUNTIME_ROOT``, which only the ``local`` backend without namespaces sets,
        because there commands see the host's ``/``.
        """
        root = '"${SANDBOX_RUNTIME_ROOT:-}"'
        python = _local_interpreter() if self.settings.backend == "local" else "python3"
        keep = " ".join(f"--keep-env {name}" for name in _KEEP_ENV)
        return (
            f"cd {root}{ENVD_HOME} && exec {shlex.quote(python)} -E -s -m {ENVD_PACKAGE} "
            f'--port 0 --port-file {root}{ENVD_STATE}/port --root "${{SANDBOX_RUNTIME_ROOT:-/}}" '
            f"--workdir {WORKDIR} {keep} > {root}{ENVD_STATE}/log 2>&1"
        )

    def _run_envd(self) -> None:
        runtime = self._runtime
        assert runtime is not None
        try:
            # A local sandbox's bubblewrap retries its own setup races (backends/local).
            result = runtime.exec(self._envd_command(), timeout=None, cwd="/")
            said = (result.stderr or "").strip()[-500:]
            self._envd_exit = f"envd exited with code {result.exit_code}" + (
                f" ({said})" if said else ""
            )
        except SandboxError as exc:
            self._envd_exit = f"envd ended: {exc}"
        if not self._stopped.is_set():
            logger.warning("instance envd stopped unexpectedly: %s", self._envd_exit)

    def _wait_for_port(self, began: float) -> int:
        runtime = self._runtime
        assert runtime is not None
        deadline = began + self.settings.boot_timeout
        while time.monotonic() < deadline:
            if self._envd_exit is not None:
                raise SandboxStartError(f"{self._envd_exit}: {self._envd_log()}")
            with contextlib.suppress(SandboxError, ValueError):
                return int(runtime.read_text(f"{ENVD_STATE}/port").strip())
            time.sleep(0.01)
        raise SandboxStartError(f"envd did not start within {self.settings.boot_timeout:.0f}s")

    def _envd_log(self) -> str:
        with contextlib.suppress(Exception):
            if self._runtime is not None:
                return self._runtime.read_text(f"{ENVD_STATE}/log")[-2000:]
        return ""

    def _init_envd(self, began: float) -> None:
        assert self.url is not None
        body = {
            "envVars": self.env,
            "accessToken": self.internal_token,
            "defaultWorkdir": WORKDIR,
            # E2B's templates run everything as ``user``; envd keeps root where the image
            # has no such account.
            "defaultUser": DEFAULT_USER,
        }
        deadline = began + self.settings.boot_timeout
        last: Exception | None = None
        # Plain HTTP to this machine's envd: no TLS, so no CA bundle to parse (httpx's
        # default costs ~20-40 ms of CPU per client, a third of an instance start's CPU here).
        with httpx.Client(base_url=self.url, timeout=5.0, verify=False) as client:
            while time.monotonic() < deadline:
                try:
                    client.post("/init", json=body).raise_for_status()
                    return
                except httpx.HTTPError as exc:
                    last = exc
                    time.sleep(0.02)
        raise SandboxStartError(f"envd did not answer /init: {last}")

    def capture(self) -> Seed:
        """Keep the instance's whole filesystem now (see :mod:`._seed`); not its processes."""
        runtime = self._runtime
        if runtime is None:
            raise SandboxError("the instance has no sandbox")
        self._capturing += 1
        self._captures += 1
        try:
            return capture(self.settings.backend, runtime.backend, ENVD_HOME)
        finally:
            self._capturing -= 1

    def alive(self) -> bool:
        """True while envd runs and the sandbox exists (or is being captured)."""
        captures = self._captures
        if self._capturing and not self._stopped.is_set():
            return True
        running = (
            self._runtime is not None
            and self._envd_exit is None
            and not self._stopped.is_set()
            and self._runtime.is_alive()
        )
        # A capture that began while the engine was asked saw the container paused.
        return running or (captures != self._captures and not self._stopped.is_set())

    def crash(self) -> None:
        """Kill the sandbox as a crashed host would: the service is not told (fault injection)."""
        runtime = self._runtime
        if runtime is not None:
            with contextlib.suppress(SandboxError):
                runtime.backend.stop()

    def stop(self) -> None:
        """Remove the sandbox (which ends envd and everything it started); idempotent."""
        self._stopped.set()
        runtime, self._runtime = self._runtime, None
        if runtime is not None:
            try:
                runtime.close()
            except SandboxError as exc:
                logger.warning("could not remove an emulated instance: %s", exc)
        if self._envd_thread is not None:
            self._envd_thread.join(timeout=10)
