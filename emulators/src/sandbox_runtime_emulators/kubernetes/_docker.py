"""The emulator's container runtime: one Docker container per pod, through docker-py.

This is the part a kubelet and its CRI runtime play on a real node: pull (or not) by the
pull policy (offline: never), create and start the container with the pod's command,
environment, working directory and limits, wait for it to exit, kill and remove it, and run
``docker exec`` sessions whose raw stream the exec endpoint bridges to a websocket.

Containers carry this library's ownership labels (owner: the emulator's process), so that
``sandbox-runtime reap --backend docker`` removes them if the emulator dies without cleaning
up; their own lifetime is the pod's ``activeDeadlineSeconds`` when it has one.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sandbox_runtime.backend_kit import make_labels
from sandbox_runtime.backends.kubernetes._names import cpu_cores, memory_bytes

try:
    import docker
    import docker.errors
    import requests.exceptions
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ImportError(
        "the Kubernetes emulator runs pods in Docker: "
        "pip install ./emulators (sandbox-runtime-emulators, from a checkout of this repository)"
    ) from exc

from sandbox_runtime.backends.docker._exec import hijack_exec

__all__ = ["DockerRuntime", "ImageProblem", "ImageReady", "RuntimeProblem"]

#: Label naming the pod (``namespace/name``) a container belongs to.
POD_LABEL = "sandbox-runtime.k8s-emulator.pod"
#: Label naming the volume a PersistentVolumeClaim or VolumeSnapshot keeps its files in.
VOLUME_LABEL = "sandbox-runtime.k8s-emulator.volume"
#: Where a copy's containers mount the volumes they read and write.
_COPY_MOUNT = "/emulator-volume"
_NO_DEADLINE = 7 * 86400.0


class ImageProblem(Exception):
    """The image cannot be had: ``reason`` is the container's waiting reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class ImageReady:
    """An image the container can start from, and the kubelet's ``Pulled`` event message."""

    image_id: str
    message: str


class RuntimeProblem(Exception):
    """Docker refused to create or start the container, or an exec."""


def _explain(exc: BaseException) -> str:
    if isinstance(exc, docker.errors.APIError):
        return str(exc.explanation or exc)
    return str(exc)


class DockerRuntime:
    """Docker operations for pods and exec sessions; safe to share between threads."""

    def __init__(self, docker_host: str | None = None, *, offline: bool = False) -> None:
        kwargs: dict[str, Any] = docker.utils.kwargs_from_env()
        if docker_host:
            kwargs["base_url"] = docker_host
        self.api = docker.APIClient(version="auto", timeout=120, max_pool_size=128, **kwargs)
        # No proxy lookup per request: it iterates os.environ, which is not thread-safe while
        # another thread changes the environment (this server's threads run beside callers).
        self.api.trust_env = False
        #: Offline images: start from what the engine has whatever the policy; never pull.
        self.offline = offline

    def ping(self) -> None:
        """Raise if the engine is unreachable."""
        self.api.ping()

    # -- images ------------------------------------------------------------------------------

    def _present(self, image: str) -> str | None:
        try:
            return str(self.api.inspect_image(image)["Id"])
        except docker.errors.ImageNotFound:
            return None

    def ensure_image(
        self, image: str, policy: str, on_pull: Callable[[], None] = lambda: None
    ) -> ImageReady:
        """The image, pulling by ``policy``; ``ImageProblem`` carries the waiting reason.

        ``on_pull`` is called just before a pull starts (the kubelet's ``Pulling`` event).
        """
        if self.offline:
            return self._offline_image(image, policy)
        present = None if policy == "Always" else self._present(image)
        if present is not None:
            return ImageReady(present, f'Container image "{image}" already present on machine')
        if policy == "Never":
            raise ImageProblem(
                "ErrImageNeverPull",
                f'Container image "{image}" is not present with pull policy of Never',
            )
        on_pull()
        began = time.monotonic()
        try:
            self.api.pull(image)
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise ImageProblem(
                "ErrImagePull", f'Failed to pull image "{image}": {_explain(exc)}'
            ) from exc
        found = self._present(image)
        if found is None:
            raise ImageProblem("ErrImagePull", f'Failed to pull image "{image}": not found')
        took = time.monotonic() - began
        return ImageReady(found, f'Successfully pulled image "{image}" in {took:.3f}s')

    def _offline_image(self, image: str, policy: str) -> ImageReady:
        """The local image whatever ``policy`` says, or ``ErrImageNeverPull`` without one."""
        present = self._present(image)
        if present is None:
            raise ImageProblem(
                "ErrImageNeverPull",
                f'Container image "{image}" is not present on the machine and the emulator '
                "runs with --offline-images, which never pulls",
            )
        return ImageReady(
            present,
            f'Container image "{image}" already present on machine: not pulled, because the '
            f"emulator runs with --offline-images (imagePullPolicy: {policy})",
        )

    # -- containers --------------------------------------------------------------------------

    def create(
        self,
        pod: dict[str, Any],
        docker_name: str,
        volumes: list[tuple[str, str, bool]] | None = None,
        container: dict[str, Any] | None = None,
    ) -> str:
        """Create (not start) the pod's container; ``RuntimeProblem`` if Docker refuses.

        ``volumes``: (mount path, docker volume, read-only) of the PersistentVolumeClaims the
        container mounts; ``container``: the spec to run (default: the pod's one container; an
        init container runs to completion first).
        """
        volumes = volumes or []
        meta, spec = pod["metadata"], pod["spec"]
        container = container or spec["containers"][0]
        limits = (container.get("resources") or {}).get("limits") or {}
        deadline = spec.get("activeDeadlineSeconds")
        labels = make_labels(
            lifetime=float(deadline) + 60 if deadline else _NO_DEADLINE,
            run_id="k8s-emulator",
            extra={POD_LABEL: f"{meta['namespace']}/{meta['name']}"},
        )
        try:
            mounts = [
                # no_copy: Kubernetes mounts a volume as it is, without the image's files there.
                docker.types.Mount(target, volume, type="volume", read_only=ro, no_copy=True)
                for target, volume, ro in volumes
            ]
            host_config = self.api.create_host_config(
                mounts=mounts or None,
                mem_limit=memory_bytes(limits["memory"]) if "memory" in limits else None,
                nano_cpus=int(cpu_cores(limits["cpu"]) * 1e9) if "cpu" in limits else None,
            )
            environment = [f"{v['name']}={v.get('value', '')}" for v in container.get("env") or []]
            created = self.api.create_container(
                image=container["image"],
                # Kubernetes "command" replaces the entrypoint and "args" the image's CMD;
                # Docker drops the image's CMD when the entrypoint is given, as Kubernetes does.
                entrypoint=container.get("command") or None,
                command=container.get("args") or None,
                name=docker_name,
                hostname=meta["name"][:63],
                working_dir=container.get("workingDir") or None,
                environment=environment or None,
                labels=labels,
                host_config=host_config,
                # docker-py sets StdinOnce with it: the first attach that closes stdin closes
                # the container's (kubectl run -i asks for stdinOnce: true).
                stdin_open=bool(container.get("stdin")),
                tty=bool(container.get("tty")),
            )
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise RuntimeProblem(_explain(exc)) from exc
        return str(created["Id"])

    def start(self, container_id: str) -> str:
        """Start the container; returns its IP address (empty without a network)."""
        try:
            self.api.start(container_id)
            info = self.api.inspect_container(container_id)
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise RuntimeProblem(_explain(exc)) from exc
        return str((info.get("NetworkSettings") or {}).get("IPAddress") or "")

    def wait(self, container_id: str) -> int:
        """Block until the container exits; its exit code (137 if it vanished)."""
        try:
            result = self.api.wait(container_id, timeout=None)
        except (docker.errors.DockerException, requests.exceptions.RequestException):
            return 137
        return int(result.get("StatusCode", 137))

    def running(self, container_id: str) -> bool:
        """True while the container exists and runs."""
        try:
            state = self.api.inspect_container(container_id)["State"]
        except (docker.errors.DockerException, requests.exceptions.RequestException):
            return False
        return bool(state.get("Running"))

    def stop(self, container_id: str, grace: int) -> None:
        """SIGTERM, then SIGKILL after ``grace`` seconds (a graceful pod deletion)."""
        with contextlib.suppress(
            docker.errors.DockerException, requests.exceptions.RequestException
        ):
            self.api.stop(container_id, timeout=grace)

    def kill(self, container_id: str) -> None:
        """SIGKILL the container (deadline exceeded); it stays, stopped, for its status."""
        with contextlib.suppress(
            docker.errors.DockerException, requests.exceptions.RequestException
        ):
            self.api.kill(container_id)

    def remove(self, container_id: str) -> None:
        """Remove the container, running or not; a missing one is fine."""
        with contextlib.suppress(
            docker.errors.DockerException, requests.exceptions.RequestException
        ):
            self.api.remove_container(container_id, force=True, v=True)

    # -- volumes (PersistentVolumeClaims and VolumeSnapshots) ----------------------------------

    def create_volume(self, name: str) -> None:
        """Create a named local volume carrying the emulator's ownership labels."""
        labels = make_labels(
            lifetime=_NO_DEADLINE, run_id="k8s-emulator", extra={VOLUME_LABEL: name}
        )
        try:
            self.api.create_volume(name=name, driver="local", labels=labels)
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise RuntimeProblem(_explain(exc)) from exc

    def remove_volume(self, name: str) -> bool:
        """Remove a volume; True once it is gone, False while a container still uses it."""
        try:
            self.api.remove_volume(name, force=False)
        except docker.errors.NotFound:
            return True
        except (docker.errors.DockerException, requests.exceptions.RequestException):
            return False
        return True

    def copy_volume(self, source: str, target: str, image: str | None) -> None:
        """Copy every file of volume ``source`` into volume ``target``, owners and modes kept.

        Through the engine's archive API on two containers that are created, never started
        (``image`` only gives them a root filesystem; None: any image the engine has): the
        engine mounts their volumes for the copy, so no shell or tool of the image runs.
        """
        made: list[str] = []
        try:
            if image is None:
                images = self.api.images(quiet=True)
                if not images:
                    raise RuntimeProblem("the engine has no image to make the copy's containers of")
                image = str(images[0])
            for volume in (source, target):
                config = self.api.create_host_config(
                    mounts=[docker.types.Mount(_COPY_MOUNT, volume, type="volume", no_copy=True)]
                )
                created = self.api.create_container(
                    image=image,
                    command=["true"],
                    host_config=config,
                    labels=make_labels(
                        lifetime=3600, run_id="k8s-emulator", extra={VOLUME_LABEL: volume}
                    ),
                )
                made.append(str(created["Id"]))
            stream, _stat = self.api.get_archive(made[0], _COPY_MOUNT)
            data = b"".join(stream)
            self.api.put_archive(made[1], "/", data)
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise RuntimeProblem(_explain(exc)) from exc
        finally:
            for container_id in made:
                self.remove(container_id)

    # -- exec ---------------------------------------------------------------------------------

    def exec_create(
        self,
        container_id: str,
        argv: list[str],
        *,
        stdin: bool,
        stdout: bool = True,
        stderr: bool = True,
        tty: bool = False,
    ) -> str:
        """Create an exec attached to the streams asked for (``RuntimeProblem``: no container)."""
        try:
            created = self.api.exec_create(
                container_id, argv, stdin=stdin, stdout=stdout, stderr=stderr, tty=tty
            )
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise RuntimeProblem(_explain(exc)) from exc
        return str(created["Id"])

    def exec_attach(self, exec_id: str, tty: bool) -> tuple[socket.socket, bytes, Any]:
        """Start an exec and take its hijacked connection: (socket, bytes already read, response).

        The docker backend's :func:`~sandbox_runtime.backends.docker.hijack_exec`, with the
        socket made blocking again for the emulator's relay threads.
        """
        try:
            sock, pending, response = hijack_exec(self.api, exec_id, tty=tty)
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise RuntimeProblem(_explain(exc)) from exc
        sock.setblocking(True)
        return sock, pending, response

    def attach(
        self, container_id: str, *, stdin: bool, stdout: bool, stderr: bool
    ) -> tuple[socket.socket, bytes, Any]:
        """Attach to the container's own stdio, hijacked as :meth:`exec_attach` does.

        No earlier output is replayed (``logs=0``), as a kubelet's attach does not either.
        """
        try:
            response = self.api._post(
                self.api._url("/containers/{0}/attach", container_id),
                headers={"Connection": "Upgrade", "Upgrade": "tcp"},
                params={
                    "stream": 1,
                    "logs": 0,
                    "stdin": int(stdin),
                    "stdout": int(stdout),
                    "stderr": int(stderr),
                },
                stream=True,
            )
            self.api._raise_for_status(response)
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise RuntimeProblem(_explain(exc)) from exc
        buffered = response.raw._fp.fp
        raw = buffered.raw
        sock: socket.socket = getattr(raw, "_sock", raw)
        sock.setblocking(False)
        try:
            pending = bytes(buffered.read1(65536) or b"")
        except (BlockingIOError, OSError):
            pending = b""
        sock.setblocking(True)
        return sock, pending, response

    def exec_result(self, exec_id: str) -> tuple[int, int]:
        """(exit code, pid) of a finished exec; the engine records it just after the stream ends."""
        info: dict[str, Any] = {}
        for delay in (0.0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0):
            if delay:
                time.sleep(delay)
            try:
                info = self.api.exec_inspect(exec_id)
            except (docker.errors.DockerException, requests.exceptions.RequestException):
                return 137, 0
            if not info.get("Running") and info.get("ExitCode") is not None:
                return int(info["ExitCode"]), int(info.get("Pid") or 0)
        return 137, int(info.get("Pid") or 0)
