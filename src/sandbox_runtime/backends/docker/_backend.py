"""The ``docker`` backend: one container per sandbox, through docker-py's Engine API client.

Lifetime without a babysitter: the container's own command is ``sleep <lifetime>`` under
Docker's init, with auto-remove on, so an abandoned sandbox ends and disappears at its
lifetime even when the client was ``kill -9``ed.  Labels name the owner process, the run and
the expiry, and :meth:`DockerBackend.reap` removes only containers carrying them.

Commands run through the exec API, or, once it answers, through the in-sandbox agent
(:mod:`sandbox_runtime._envd.agent`: our envd started next to the ``sleep`` by the container's
own command, reached at the container's address with a per-sandbox token), which starts a
command in ~1 ms instead of runc's ~40.  The native path below stays for images without
``python3``, engines on another host, and the first calls before the agent is up.
docker-py's ``exec_run`` cannot time out or kill what it started, so we read the exec's
hijacked socket ourselves with a deadline and kill the command's process group through the
wrapper in ``_shell`` when it passes.  Any engine that speaks the Docker API on a unix socket
or TCP (with or without TLS) works: set ``DOCKER_HOST`` or ``docker_host``; Podman's
``podman.sock`` is one.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import secrets
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from sandbox_runtime.backend_kit import (
    MANAGED,
    TIMEOUT_EXIT_CODE,
    TOKEN_VAR,
    Availability,
    Backend,
    BackendOptions,
    Capability,
    Checkpoint,
    ExecRequest,
    ExecResult,
    ReapedSandbox,
    SandboxConfig,
    SandboxInfo,
    TreeChanges,
    TreeMark,
    call_with_retries,
    check_cwd,
    checkpoint_labels,
    kill_group_script,
    make_labels,
    new_lease_key,
    new_token,
    why_reapable,
    wrapped_argv,
    write_end_script,
)
from sandbox_runtime.backend_kit.agent import (
    AgentLink,
    AgentRouting,
    agent_archive,
    agent_can_run,
    agent_directory,
    agent_state_command,
    restart_command,
)
from sandbox_runtime.errors import (
    BackendError,
    BackendUnavailableError,
    CapabilityUnsupportedError,
    SandboxFileNotFoundError,
    SandboxGoneError,
    SandboxStartError,
    SandboxTimeoutError,
)

from . import _checkpoints, _lease, _tree
from ._client import (
    docker,
    engine_client,
    explain,
    is_gone,
    requests,
    retryable,
    start_retryable,
    status_code,
)
from ._exec import STDERR, STDOUT, ExecOutcome, ExecStream
from ._image_cache import ImageCache, image_cache
from ._options import DockerOptions
from ._pull import pull

__all__ = ["DockerBackend"]

logger = logging.getLogger("sandbox_runtime.docker")

_BACKEND_LABEL = "sandbox-runtime.backend"
_NAME_PREFIX = "sandbox-runtime-"
_EXITED_GRACE = 60.0


class DockerBackend(AgentRouting, Backend[DockerOptions]):
    """A sandbox as a Docker container; see the module docstring."""

    name = "docker"
    options_model = DockerOptions
    extra = "docker"
    capabilities = frozenset(
        {
            Capability.HOST_MOUNTS,
            Capability.ENGINE_IMAGES,
            Capability.RECONNECT,
            Capability.STREAMING,
            Capability.CHECKPOINT_FILESYSTEM,
            Capability.FORK,
            Capability.PAUSE,
            Capability.EXTEND_LIFETIME,
        }
    )
    # A burst of hundreds of creates makes dockerd time out; 64 at once on a 2-core host
    # neither failed nor got faster with a bound of 8, 16 or 32 (docs/performance.md), so the
    # bound only caps bursts well beyond that (see ``sandbox_runtime._core.limits``).
    max_concurrent_starts = 32

    def __init__(self, config: SandboxConfig, options: DockerOptions) -> None:
        super().__init__(config, options)
        self._container: str | None = None
        self._name = _NAME_PREFIX + uuid.uuid4().hex[:16]
        # Most images have bash; one without it costs a single failed exec, then sh is used.
        self._shell = "bash"
        self._agent: AgentLink | None = None
        self._agent_dir = agent_directory()
        self._lease_key: str | None = None

    @classmethod
    def engine_key(cls, options: BackendOptions) -> str:
        """The engine's address: each Docker host bounds its own starts."""
        opts = cls.coerce_options(options)
        return opts.docker_host or os.environ.get("DOCKER_HOST", "") or "default"

    @classmethod
    def availability(cls, options: BackendOptions | None = None) -> Availability:
        """Ping the engine."""
        opts = cls.coerce_options(options)
        try:
            engine_client(opts).ping()
        except (BackendUnavailableError, docker.errors.DockerException) as exc:
            return Availability(False, str(exc))
        except requests.exceptions.RequestException as exc:
            return Availability(False, f"cannot reach the Docker engine: {exc}")
        return Availability(True)

    @property
    def sandbox_id(self) -> str:
        """The container id (the planned name before start)."""
        return self._container or self._name

    @property
    def _api(self) -> Any:
        return engine_client(self.options)

    def _call(self, description: str, operation: Any) -> Any:
        return call_with_retries(operation, retryable, description=description)

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        """Create and start the container; clean up and raise ``SandboxStartError`` on failure."""
        if not self.config.image:
            raise SandboxStartError("the docker backend needs an image (SandboxConfig.image)")
        began = time.monotonic()
        api = self._api
        try:
            agent = self._agent_wanted(api)
            container = self._create_pulling(api, agent)
            self._container = container
            call_with_retries(
                lambda: api.start(container), start_retryable, description="start container"
            )
            if agent:
                link = self._start_agent(container)
                if self.options.agent == "on":
                    link.wait()  # "on": usable only through the agent
        except Exception as exc:
            self._remove_quietly()
            if isinstance(exc, (requests.exceptions.ConnectionError,)):
                raise BackendUnavailableError(f"cannot reach the Docker engine: {exc}") from exc
            if isinstance(
                exc, (docker.errors.DockerException, requests.exceptions.RequestException)
            ):
                raise SandboxStartError(
                    f"cannot start a container from {self.config.image!r}: {explain(exc)}"
                ) from exc
            raise
        elapsed = time.monotonic() - began
        if elapsed > self.config.start_timeout:
            self._remove_quietly()
            raise SandboxTimeoutError(
                f"starting the container took {elapsed:.1f}s, over start_timeout "
                f"{self.config.start_timeout:.1f}s"
            )

    @classmethod
    def _images(cls, options: DockerOptions) -> ImageCache:
        return image_cache(options, cls.engine_key(options), lambda: engine_client(options))

    @classmethod
    def prefetch_images(cls, images: Sequence[str], options: BackendOptions | None = None) -> None:
        """Pre-pull the missing ones among ``images`` on a few threads; pin them all.

        See :mod:`._image_cache`: at most ``prefetch_concurrency`` pulls at once, none twice,
        none beyond ``image_cache_budget``; failures are logged and left for the start.
        """
        opts = cls.coerce_options(options)
        if opts.pull != "never":
            cls._images(opts).prefetch([image for image in images if image])

    def _create_pulling(self, api: Any, agent: bool) -> str:
        """Create the container, pulling the image first as ``options.pull`` says."""
        image = self.config.image
        assert image is not None
        cache = self._images(self.options)
        if self.options.image_cache_budget is not None or self.options.delete_image:
            cache.starting(image)  # pinned through the create, against other processes
        if self.options.pull == "always":
            pull(api, image)
            self.start_pulls += 1
        try:
            return self._create(api, agent)
        except docker.errors.ImageNotFound:
            if self.options.pull == "never":
                raise
        cache.ensure(image)  # waits for a pre-pull of it in flight, else pulls now
        self.start_pulls += 1
        return self._create(api, agent)

    def _create(self, api: Any, agent: bool) -> str:
        config = self.config
        resources = config.resources
        host_config = api.create_host_config(
            init=self.options.init,
            auto_remove=True,
            mem_limit=resources.memory,
            nano_cpus=int(resources.cpus * 1e9) if resources.cpus else None,
            pids_limit=resources.pids,
            network_mode=self.options.network,
            privileged=self.options.privileged,
            binds=[*self.options.volumes, *(f"{h}:{i}" for h, i in self.config.mounts.items())]
            or None,
            runtime=self.options.runtime,
        )
        labels = make_labels(
            lifetime=config.lifetime,
            run_id=config.run_id,
            extra=config.labels,
            workdir=config.workdir,
        )
        labels[_BACKEND_LABEL] = self.name
        self._lease_key = new_lease_key()
        labels[_lease.LEASE_KEY_LABEL] = self._lease_key
        entrypoint, command = _lease.container_command(
            lifetime=config.lifetime,
            max_lifetime=config.max_lifetime,
            key=self._lease_key,
            agent_dir=self._agent_dir if agent else None,
        )

        def create() -> str:
            try:
                created = api.create_container(
                    image=config.image,
                    entrypoint=entrypoint,
                    command=command,
                    name=self._name,
                    working_dir=config.workdir,
                    environment=config.env or None,
                    labels=labels,
                    host_config=host_config,
                    stdin_open=False,
                    tty=False,
                )
                return str(created["Id"])
            except docker.errors.APIError as exc:
                # A retried create whose first attempt went through: the name is ours.
                if status_code(exc) == 409 and self._name in explain(exc):
                    return str(api.inspect_container(self._name)["Id"])
                raise

        return str(self._call("create container", create))

    def _agent_wanted(self, api: Any) -> bool:
        """Whether this sandbox starts the agent: see :attr:`DockerOptions.agent`."""
        mode = self.options.agent
        network = self.options.network or ""
        if mode == "off" or network in ("host", "none") or network.startswith("container:"):
            if mode == "on":
                raise SandboxStartError(f"agent='on' cannot work with network {network!r}")
            return False
        if self.options.user:
            return False  # the agent would run as the image's user, not the one asked for
        # docker-py names a unix-socket engine http+docker://; a TCP one may be elsewhere.
        return mode == "on" or str(getattr(api, "base_url", "")).startswith("http+docker:")

    def _start_agent(self, container: str) -> AgentLink:
        """Upload the agent's files off the start path; the container's loop starts it.

        The upload (one engine call) overlaps the caller's first commands, which take the
        native path until the agent answers, so the start itself costs nothing more.
        """
        token = secrets.token_urlsafe(24)
        self._agent = link = AgentLink(
            mode=self.options.agent,
            token=token,
            address=self._address,
            is_alive=self.is_alive,
            name=f"container {container[:12]}",
            wait=self.options.agent_wait,
            image=f"{self.name}|{self.engine_key(self.options)}|{self.config.image}",
            kill_command=lambda token: self._kill_carriers(container, token),
            restart=lambda: self._restart_agent(container, token),
            agent_running=lambda: self._agent_running(container),
        )
        link.start(lambda: self._put_owned(container, agent_archive(token, self._agent_dir)))
        return link

    def _restart_agent(self, container: str, token: str) -> None:
        """Put the agent's files back and start it by a detached exec (see AgentLink)."""
        self._put_owned(container, agent_archive(token, self._agent_dir))
        exec_id = self._api.exec_create(container, restart_command(self._agent_dir), user="")["Id"]
        self._api.exec_start(exec_id, detach=True)

    def _agent_running(self, container: str) -> bool:
        """Whether the agent's process can run, read by the engine's own exec (see AgentLink).

        False only when the process is provably stopped or dead; an answer that cannot be
        read (no pid file yet, an engine error) says True, leaving the wait to its timeout.
        """
        try:
            command = agent_state_command(self._agent_dir)
            exec_id = self._api.exec_create(container, command, user="root")["Id"]
            output = self._api.exec_start(exec_id)
        except (docker.errors.DockerException, requests.exceptions.RequestException):
            return True
        text = output.decode(errors="replace") if isinstance(output, bytes) else ""
        return agent_can_run(text.strip())

    def _put_owned(self, container: str, data: bytes) -> None:
        """Extract ``data`` at ``/``, every file owned by the container's user.

        The agent runs as the image's user, which must own its directory (mode 0700) to read
        and remove its token: the engine's ``copyUIDGID`` (``docker cp -a``), which docker-py's
        ``put_archive`` does not offer.
        """
        api = self._api
        answer = api._put(
            api._url("/containers/{0}/archive", container),
            params={"path": "/", "copyUIDGID": "1"},
            data=data,
        )
        api._raise_for_status(answer)

    def _address(self) -> str | None:
        """The container's IP address on its first network (None without one)."""
        try:
            settings = self._api.inspect_container(self._container_id())["NetworkSettings"]
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise self._translate(exc, "inspect") from exc
        if settings.get("IPAddress"):
            return str(settings["IPAddress"])
        for network in (settings.get("Networks") or {}).values():
            if network.get("IPAddress"):
                return str(network["IPAddress"])
        return None

    def _remove_quietly(self) -> None:
        target = self._container or self._name
        with contextlib.suppress(Exception):
            self._api.remove_container(target, force=True, v=True)

    def stop(self) -> None:
        """Remove the container and its anonymous volumes; a second call finds nothing to do."""
        target = self._container
        if target is None:
            return
        api = self._api

        def remove() -> None:
            try:
                api.remove_container(target, force=True, v=True)
            except docker.errors.APIError as exc:
                # Already gone, or auto-remove is already removing it.
                if status_code(exc) in (404, 409):
                    return
                raise

        if self._agent is not None:
            self._agent.close_idle()  # while the agent can still answer their close
        try:
            self._call("remove container", remove)
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise BackendError(f"cannot remove container {target[:12]}: {explain(exc)}") from exc
        finally:
            # After the removal, so that a command running meanwhile sees its sandbox gone.
            if self._agent is not None:
                self._agent.close()
        self._image_closed()

    def _image_closed(self) -> None:
        """Tell the image cache this sandbox's image is free (budget, ``delete_image``)."""
        image = self.config.image
        if image is None or (
            self.options.image_cache_budget is None and not self.options.delete_image
        ):
            return
        try:
            self._images(self.options).closed(image, delete=self.options.delete_image)
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            logger.warning("image bookkeeping after closing %s failed: %s", self.sandbox_id, exc)

    def attach(self, sandbox_id: str) -> None:
        """Take over a running container of this library (by id or name)."""
        try:
            info = self._api.inspect_container(sandbox_id)
        except docker.errors.NotFound as exc:
            raise SandboxGoneError(f"no container {sandbox_id!r}") from exc
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise BackendError(f"cannot inspect {sandbox_id!r}: {explain(exc)}") from exc
        labels = info.get("Config", {}).get("Labels") or {}
        if labels.get(MANAGED) != "true" or labels.get(_BACKEND_LABEL) != self.name:
            raise SandboxGoneError(f"container {sandbox_id!r} is not a sandbox of this library")
        if not info.get("State", {}).get("Running"):
            raise SandboxGoneError(f"container {sandbox_id!r} is not running")
        # The agent's token lives only in the process that started the sandbox: a sandbox
        # taken over uses the native path.
        self._container = str(info["Id"])

    @classmethod
    def has_image(cls, image: str, options: BackendOptions | None = None) -> bool | None:
        """Whether the engine holds ``image`` already (one inspect call; ``None`` on error)."""
        api = engine_client(cls.coerce_options(options))
        try:
            api.inspect_image(image)
        except docker.errors.ImageNotFound:
            return False
        except (docker.errors.DockerException, requests.exceptions.RequestException):
            return None
        return True

    @classmethod
    def list_sandboxes(cls, options: BackendOptions | None = None) -> list[SandboxInfo]:
        """Running containers carrying this library's labels."""
        api = engine_client(cls.coerce_options(options))
        selector = {"label": [f"{MANAGED}=true", f"{_BACKEND_LABEL}={cls.name}"]}
        try:
            found = api.containers(filters={**selector, "status": "running"})
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise BackendError(f"cannot list containers: {explain(exc)}") from exc
        return [
            SandboxInfo.from_labels(cls.name, str(item["Id"]), item.get("Labels") or {})
            for item in found
        ]

    def is_alive(self) -> bool:
        """True while the container exists and runs."""
        if self._container is None:
            return False
        try:
            state = self._api.inspect_container(self._container)["State"]
        except docker.errors.NotFound:
            return False
        return bool(state.get("Running")) and not state.get("Paused")

    # -- lifetime (docs/leases.md) ---------------------------------------------------------

    def set_expiry(self, expires_at: float) -> None:
        """Write the container's lease file; its timer ends it there (see ``_lease``)."""
        container = self._container_id()
        if self._lease_key is None:
            labels = self._call("inspect", lambda: self._api.inspect_container(container))
            self._lease_key = (labels.get("Config", {}).get("Labels") or {}).get(
                _lease.LEASE_KEY_LABEL
            )
        if not self._lease_key:
            raise CapabilityUnsupportedError(
                Capability.EXTEND_LIFETIME.value, self.name, "the container has no lease file"
            )
        request = ExecRequest(
            command=write_end_script(expires_at, self._lease_key), cwd="/", timeout=60
        )
        result = self.exec(request)
        if result.exit_code != 0:
            if not self.is_alive():
                raise SandboxGoneError(f"container {container[:12]} is gone")
            raise BackendError(f"cannot move the container's end: {result.output.strip()}")

    def gone_cause(self) -> str:
        """What the engine still knows of the container's end (``_lease.gone_cause``)."""
        return _lease.gone_cause(self._api, self._container)

    # -- checkpoints, forks, pause (docs/checkpoints.md) ----------------------------------

    def checkpoint(self, labels: Mapping[str, str], lifetime: float) -> Checkpoint:
        """``docker commit`` of the container (paused while it runs): files, not memory."""
        stored = checkpoint_labels(
            source_id=self._container_id(),
            kind="filesystem",
            lifetime=lifetime,
            run_id=self.config.run_id,
            labels=labels,
            workdir=self.config.workdir,
        )
        stored[_BACKEND_LABEL] = self.name
        return _checkpoints.commit(self._api, self._container_id(), stored)

    def start_from_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Start a container of the checkpoint's image (the agent too, as for any start).

        The image is looked up first: a checkpoint is never pulled, so a deleted one is
        :class:`CheckpointNotFoundError` at once, not a registry pull of ``sha256:...``
        retried into an ``ImagePullError``.
        """
        _checkpoints.require(self._api, checkpoint.id)
        self.config = self.config.model_copy(update={"image": checkpoint.id})
        self.start()

    def rollback(self, checkpoint: Checkpoint) -> None:
        """Start a container of the checkpoint's image, then remove the current one.

        The sandbox's id changes to the new container's; its processes end with the old
        container.  If the new container cannot start, the old one stays in place.
        """
        old = (self._container, self._agent, self._name, self.config, self._agent_dir)
        self._container, self._agent = None, None
        self._name = _NAME_PREFIX + uuid.uuid4().hex[:16]
        # A fresh agent directory: the image holds the old one, whose starter would run at
        # once, before the new token is there, and give up.
        self._agent_dir = agent_directory()
        try:
            self.start_from_checkpoint(checkpoint)
        except BaseException:
            self._container, self._agent, self._name, self.config, self._agent_dir = old
            raise
        replaced, replaced_agent = old[0], old[1]
        with contextlib.suppress(docker.errors.DockerException, requests.RequestException):
            self._api.remove_container(replaced, force=True, v=True)
        if replaced_agent is not None:
            replaced_agent.close()

    def pause(self) -> None:
        """The engine's pause (the cgroup freezer): processes keep their memory."""
        try:
            self._api.pause(self._container_id())
        except (docker.errors.DockerException, requests.RequestException) as exc:
            raise self._translate(exc, "pause") from exc

    def resume(self) -> None:
        """The engine's unpause."""
        try:
            self._api.unpause(self._container_id())
        except (docker.errors.DockerException, requests.RequestException) as exc:
            raise self._translate(exc, "unpause") from exc

    @classmethod
    def list_checkpoints(cls, options: BackendOptions | None = None) -> list[Checkpoint]:
        """Checkpoint images of this library on the engine."""
        api = engine_client(cls.coerce_options(options))
        return _checkpoints.listing(api, _BACKEND_LABEL, cls.name)

    @classmethod
    def delete_checkpoint(cls, checkpoint_id: str, options: BackendOptions | None = None) -> None:
        """Remove a checkpoint image (refused while a running sandbox uses it)."""
        _checkpoints.delete(engine_client(cls.coerce_options(options)), checkpoint_id)

    # -- commands ------------------------------------------------------------------------

    # -- the agent's change, from the engine (``_tree``) ------------------------------

    def _overlay_list(self) -> dict[str, int]:
        """``docker diff``: every path of the writable layer, from the engine."""
        container = self._container_id()
        try:
            listed = self._call("diff", lambda: self._api.diff(container)) or []
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise self._translate(exc, "list changes") from exc
        return {str(item["Path"]): int(item["Kind"]) for item in listed}

    def _overlay_sees(self, root: str) -> bool:
        container = self._container_id()
        try:
            info = self._call("inspect", lambda: self._api.inspect_container(container))
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise self._translate(exc, "inspect") from exc
        return _tree.overlay_sees(info.get("Mounts") or [], root)

    def mark_tree(self, root: str, watch: Sequence[str] = ()) -> TreeMark:
        """The engine's overlay list, and what setup changed under ``root`` (no command runs).

        Read through the engine's archive endpoint, never the in-sandbox agent.
        """
        if not self._overlay_sees(root):
            return _tree.archive_mark(self._native_get_archive, root, watch)
        return _tree.engine_mark(self._overlay_list(), self._native_get_archive, root, watch)

    def tree_changes(self, mark: TreeMark) -> TreeChanges:
        """The paths the overlay lists since the mark, each read through the engine."""
        if not isinstance(mark.state, _tree.EngineTree):
            return _tree.archive_changes(self._native_get_archive, mark)
        return _tree.engine_changes(self._overlay_list(), self._native_get_archive, mark)

    def _container_id(self) -> str:
        if self._container is None:
            raise SandboxGoneError("the container was never started")
        return self._container

    def _native_exec(self, request: ExecRequest) -> ExecResult:
        """Run a command through the exec API with a real, group-killing timeout."""
        container = self._container_id()
        began = time.monotonic()
        token = new_token()
        shell = self._shell
        outcome = self._run(container, request, token, shell, began)
        if outcome.interpreter_missing and shell != "/bin/sh":
            # The image has no bash: remember, and run the command with sh instead.
            self._shell = "/bin/sh"
            outcome = self._run(container, request, token, self._shell, began)
        timed_out = not outcome.finished
        if timed_out:
            self._kill_group(container, token)
        else:
            check_cwd(outcome.exit_code, outcome.stderr.getvalue(), request.cwd)
        return ExecResult.from_buffers(
            request.display,
            outcome.exit_code,
            outcome.stdout,
            outcome.stderr,
            began=began,
            timed_out=timed_out,
        )

    def _run(
        self, container: str, request: ExecRequest, token: str, shell: str, began: float
    ) -> ExecOutcome:
        """One exec, up to its end or the deadline."""
        api = self._api
        environment = {**request.env, TOKEN_VAR: token}
        try:
            exec_id = self._call(
                "create exec",
                lambda: api.exec_create(
                    container,
                    wrapped_argv(request.command, request.cwd, token, shell),
                    stdin=request.stdin is not None,
                    environment=environment,
                    user=self.options.user or "",
                    workdir="/",
                )["Id"],
            )
            stream = ExecStream(api, exec_id)
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise self._translate(exc, "exec") from exc
        deadline = None if request.timeout is None else began + request.timeout
        stdout, stderr = request.output_buffers()
        try:
            finished = stream.pump({STDOUT: stdout, STDERR: stderr}, deadline, request.stdin)
        finally:
            stream.close()
        if not finished:
            return ExecOutcome(False, TIMEOUT_EXIT_CODE, stdout, stderr)
        exit_code, pid = self._exit_status(api, exec_id)
        # Exit 126 with no process ever started: the engine could not exec the interpreter.
        return ExecOutcome(True, exit_code, stdout, stderr, exit_code == 126 and pid == 0)

    def _exit_status(self, api: Any, exec_id: str) -> tuple[int, int]:
        """The exec's (exit code, pid); the stream can close just before the engine records it."""
        for delay in (0.0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5):
            if delay:
                time.sleep(delay)
            try:
                info = api.exec_inspect(exec_id)
            except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
                # The engine forgets an exec with its container (Podman answers 404 or 500).
                if not self.is_alive():
                    raise SandboxGoneError(
                        f"container {self._container_id()[:12]} died during the command"
                    ) from exc
                raise self._translate(exc, "inspect exec") from exc
            if not info.get("Running") and info.get("ExitCode") is not None:
                return int(info["ExitCode"]), int(info.get("Pid") or 0)
        if not self.is_alive():
            raise SandboxGoneError(f"container {self._container_id()[:12]} died during the command")
        raise BackendError(f"the engine never reported an exit code for exec {exec_id[:12]}")

    def _kill_group(self, container: str, token: str) -> None:
        try:
            self._kill_carriers(container, token)
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            logger.warning("could not kill a timed-out command in %s: %s", container[:12], exc)

    def _kill_carriers(self, container: str, token: str) -> None:
        """SIGKILL, by an exec of its own, every process carrying a command's ``token``."""
        exec_id = self._api.exec_create(container, kill_group_script(token), user="root")["Id"]
        self._api.exec_start(exec_id)

    def _translate(self, exc: BaseException, what: str) -> Exception:
        if is_gone(exc):
            return SandboxGoneError(f"container {self.sandbox_id[:12]} is gone: {explain(exc)}")
        if isinstance(exc, requests.exceptions.ConnectionError):
            return BackendUnavailableError(f"lost the Docker engine during {what}: {exc}")
        return BackendError(f"{what} failed: {explain(exc)}")

    # -- files ---------------------------------------------------------------------------

    def _native_put_archive(self, data: bytes) -> None:
        """Extract at ``/``; the engine creates missing parents and keeps existing directories."""
        container = self._container_id()
        try:
            ok = self._call("put archive", lambda: self._api.put_archive(container, "/", data))
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise self._translate(exc, "upload") from exc
        if not ok:
            raise BackendError("the engine refused the archive")

    def _native_get_archive(self, path: str) -> bytes:
        """Fetch a tar of ``path`` from the engine."""
        container = self._container_id()

        def fetch() -> bytes:
            chunks, _stat = self._api.get_archive(container, path)
            buffer = io.BytesIO()
            for chunk in chunks:
                buffer.write(chunk)
            return buffer.getvalue()

        try:
            return bytes(self._call("get archive", fetch))
        except docker.errors.NotFound as exc:
            # A container that was just killed loses its engine-mounted files (/etc/hostname)
            # before the engine removes it: a missing file there is the sandbox's end.
            if "no such container" in explain(exc).lower() or not self.is_alive():
                raise SandboxGoneError(f"container {container[:12]} is gone") from exc
            raise SandboxFileNotFoundError(
                f"no such file or directory in the sandbox: {path}"
            ) from exc
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise self._translate(exc, "download") from exc

    # -- reaping -------------------------------------------------------------------------

    @classmethod
    def reap(
        cls, options: BackendOptions | None = None, *, dry_run: bool = False
    ) -> list[ReapedSandbox]:
        """Remove this library's containers that expired, stopped, or lost their owner."""
        opts = cls.coerce_options(options)
        api = engine_client(opts)
        reaped: list[ReapedSandbox] = []
        for summary in api.containers(all=True, filters={"label": f"{MANAGED}=true"}):
            labels = summary.get("Labels") or {}
            state = summary.get("State")
            reason = why_reapable(labels)
            if reason == "expired" and state in ("running", "paused"):
                # Past its label's end yet running (or paused): extended, unless its lease
                # says so too.
                reason = why_reapable(
                    labels, expires_at=_lease.leased_end(api, str(summary["Id"]), labels)
                )
            age = time.time() - float(summary.get("Created") or time.time())
            # An exited container should have been auto-removed; one that lingers is debris.
            # "created" is never debris by itself: its owner may be about to start it.
            if reason is None and state in ("exited", "dead") and age > _EXITED_GRACE:
                reason = f"not running ({state})"
            if reason is None:
                continue
            container_id = str(summary["Id"])
            reaped.append(ReapedSandbox(cls.name, container_id, reason))
            if dry_run:
                continue
            try:
                api.remove_container(container_id, force=True, v=True)
                logger.info("reaped container %s (%s)", container_id[:12], reason)
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as exc:
                if status_code(exc) != 409:  # 409: already being removed
                    raise BackendError(
                        f"cannot remove {container_id[:12]}: {explain(exc)}"
                    ) from exc
        reaped += _checkpoints.reap(api, _BACKEND_LABEL, cls.name, dry_run)
        return reaped
