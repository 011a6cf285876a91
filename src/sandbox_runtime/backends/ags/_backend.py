"""The ``ags`` backend: one Tencent Cloud Agent Sandbox instance per sandbox.

Control plane, either of:

``cloud``
    ``StartSandboxInstance`` (with a ``ClientToken``, so a retried start never makes a second
    instance), polling ``DescribeSandboxInstanceList`` until ``RUNNING``,
    ``AcquireSandboxInstanceToken`` for the data plane, ``StopSandboxInstance``.
    ``SandboxConfig.image`` becomes the instance's ``CustomConfiguration.Image``, so one tool
    serves many images.
``e2b``
    The E2B-compatible REST API with an ``ark_`` key (``POST /sandboxes`` with the tool as
    template), through :mod:`sandbox_runtime._envd.e2b_control`.

Which tool: ``tool_name``/``tool_id``, or, with ``tool_mapping`` (a file written by
``sandbox-runtime ags sync``), the tool that serves ``SandboxConfig.image``, looked up in that
file without any control-plane call (see :mod:`sandbox_runtime.backends.ags._mapping`).

Data plane: envd, through our own client (:mod:`sandbox_runtime._envd.client`), so the backend
needs no e2b SDK and works beside any e2b release.  Commands and files go through
:class:`~sandbox_runtime._envd.commands.EnvdCommands`, shared with the container backends' fast
path: commands run under the in-sandbox wrapper (:mod:`sandbox_runtime._core.shell`); a timeout
kills every process the command started, ``setsid`` children included, and returns the output
so far with exit code 124, and a non-zero exit is returned as data with its output.
Idempotent envd calls are retried; a command is sent again only when its start marker proves
it never started.

Client errors are translated here, at the boundary, into :mod:`sandbox_runtime.errors`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import httpx

from sandbox_runtime.backend_kit import (
    MANAGED,
    Availability,
    Backend,
    BackendOptions,
    Capability,
    Checkpoint,
    ReapedSandbox,
    SandboxConfig,
    SandboxInfo,
    ServiceQuota,
    checkpoint_labels,
    make_labels,
)
from sandbox_runtime.backend_kit.agent import (
    ENVD_PORT,
    E2bApi,
    E2bApiError,
    EnvdClient,
    EnvdCommands,
    EnvdDataPlane,
    EnvdError,
    EnvdUnauthorized,
    SandboxGrant,
)
from sandbox_runtime.errors import (
    BackendError,
    BackendUnavailableError,
    CapabilityUnsupportedError,
    CheckpointNotFoundError,
    ConfigError,
    QuotaExceededError,
    SandboxError,
    SandboxFileNotFoundError,
    SandboxGoneError,
    SandboxIsADirectoryError,
    SandboxStartError,
    SandboxTimeoutError,
)

from . import _checkpoints, _e2b_plane, _lease, _precache
from ._cloud import AgsApiError, AgsCloudClient, redact
from ._mapping import load_mapping
from ._options import AgsOptions, cloud_client, e2b_api
from ._quota import read_quota
from ._reaper import live_instances, reap_instances

__all__ = ["AgsBackend"]

logger = logging.getLogger("sandbox_runtime.ags")

T = TypeVar("T")
_MIN_LIFETIME, _MAX_LIFETIME = 30, 24 * 3600
#: Metadata key naming one create request (see ``_start_e2b``).
_CREATE_TOKEN = "sandbox-runtime.create-token"
_NETWORK_ERRORS = (httpx.HTTPError, OSError)


class AgsBackend(EnvdDataPlane, Backend[AgsOptions]):
    """A sandbox as an AGS instance; see the module docstring."""

    name = "ags"
    options_model = AgsOptions
    extra = "ags"
    capabilities = frozenset(
        {Capability.RECONNECT, Capability.STREAMING, Capability.EXTEND_LIFETIME}
    )
    min_lifetime = float(_lease.MIN_TIMEOUT_S)
    #: What the cloud control plane adds (snapshots; docs/checkpoints.md).
    _CLOUD_CHECKPOINTS = frozenset({Capability.CHECKPOINT_FILESYSTEM, Capability.FORK})
    #: What ``memory_snapshots`` adds on the cloud control plane.
    _MEMORY = frozenset({Capability.CHECKPOINT_MEMORY, Capability.PAUSE})

    def __init__(self, config: SandboxConfig, options: AgsOptions) -> None:
        super().__init__(config, options)
        self._plane = options.resolved_control_plane
        self._instance_id: str | None = None
        self._session: EnvdClient | None = None
        self._cloud: AgsCloudClient | None = None
        self._e2b: E2bApi | None = None
        self._stopped = False
        #: When the instance's ``Timeout`` runs out (a resume asks for what is left).
        self._deadline = 0.0
        #: The snapshot the next cloud start begins from (``start_from_checkpoint``).
        self._from_snapshot: str | None = None
        self._session_lock = threading.Lock()
        self._commands = EnvdCommands(
            self._require_session,
            translated=self._translated,
            is_alive=self.is_alive,
            name=f"AGS instance {self.sandbox_id}",
        )

    def __repr__(self) -> str:
        return f"AgsBackend(control_plane={self._plane!r}, instance={self._instance_id!r})"

    # -- availability ------------------------------------------------------------------------

    @classmethod
    def availability(cls, options: BackendOptions | None = None) -> Availability:
        """Needs credentials for the chosen plane and a tool to start instances from."""
        try:
            opts = cls.coerce_options(options)
        except (SandboxError, ValueError) as exc:
            return Availability(False, str(exc))
        if opts.resolved_control_plane == "cloud" and not opts.has_cloud_credentials:
            return Availability(False, "set TENCENTCLOUD_SECRET_ID and TENCENTCLOUD_SECRET_KEY")
        if opts.resolved_control_plane == "e2b" and opts.api_key is None:
            return Availability(
                False, "set TENCENTCLOUD_SECRET_ID/TENCENTCLOUD_SECRET_KEY or E2B_API_KEY (ark_...)"
            )
        if not (opts.tool_name or opts.tool_id or opts.tool_mapping):
            return Availability(
                False, "set AGS_TOOL_NAME or AGS_TOOL_MAPPING (or the tool_name option)"
            )
        return Availability(True)

    @classmethod
    def capabilities_for(cls, options: BackendOptions) -> frozenset[Capability]:
        """Checkpoints and forks on the cloud control plane; pause with ``memory_snapshots``.

        The e2b control plane declares what the service's e2b routes serve (``_e2b_plane``).
        """
        opts = cls.coerce_options(options)
        if opts.resolved_control_plane != "cloud":
            return cls.capabilities | _e2b_plane.capabilities(opts)
        extra = cls._MEMORY if opts.memory_snapshots else frozenset()
        return cls.capabilities | cls._CLOUD_CHECKPOINTS | extra

    @classmethod
    def reap(
        cls, options: BackendOptions | None = None, *, dry_run: bool = False
    ) -> list[ReapedSandbox]:
        """Stop instances (running or paused) and delete snapshots whose lifetime or owner is gone.

        Credentials and endpoints come from ``options`` or the environment, as for sandboxes;
        see :mod:`sandbox_runtime.backends.ags._reaper` and ``_checkpoints``.
        """
        opts = cls.coerce_options(options)
        reaped = [
            ReapedSandbox(cls.name, instance_id, reason)
            for instance_id, reason in reap_instances(opts, dry_run=dry_run)
        ]
        if opts.resolved_control_plane == "cloud":
            reaped += _checkpoints.reap(cloud_client(opts), dry_run=dry_run)
        elif Capability.CHECKPOINT_FILESYSTEM in _e2b_plane.capabilities(opts):
            reaped += _e2b_plane.book(e2b_api(opts)).reap(dry_run=dry_run)
        return reaped

    @classmethod
    def service_quota(cls, options: BackendOptions | None = None) -> ServiceQuota | None:
        """Instances the account may still start (``DescribeQuotaOverview``, cloud plane)."""
        return read_quota(cls.coerce_options(options))

    @property
    def sandbox_id(self) -> str:
        """The AGS instance id (empty before start)."""
        return self._instance_id or ""

    # -- helpers -----------------------------------------------------------------------------

    def _secrets(self) -> list[str]:
        values = [
            s.get_secret_value()
            for s in (
                self.options.secret_id,
                self.options.secret_key,
                self.options.session_token,
                self.options.api_key,
            )
            if s is not None
        ]
        session = self._session
        if session is not None and session.token:
            values.append(session.token)
        return values

    def _clean(self, exc: BaseException) -> str:
        return redact(f"{type(exc).__name__}: {exc}", self._secrets())

    def _cloud_client(self) -> AgsCloudClient:
        if self._cloud is None:
            self._cloud = cloud_client(self.options)
        return self._cloud

    def _e2b_api(self) -> E2bApi:
        if self._e2b is None:
            self._e2b = e2b_api(self.options)
        return self._e2b

    def _envd_url(self, instance_id: str, domain: str | None = None) -> str:
        _api_url, sandbox_url = self.options.e2b_urls()
        if sandbox_url:
            return sandbox_url
        return f"https://{ENVD_PORT}-{instance_id}.{domain or self.options.resolved_domain}"

    def _open_session(
        self, instance_id: str, token: str | None, envd_version: str, domain: str | None = None
    ) -> None:
        session = EnvdClient(
            self._envd_url(instance_id, domain),
            sandbox_id=instance_id,
            token=token,
            request_timeout=self.options.request_timeout,
            envd_version=envd_version,
            alive=self._listed_running,
        )
        with self._session_lock:
            previous, self._session = self._session, session
        if previous is not None:
            previous.close()

    def _tool(self) -> tuple[str | None, str | None, str | None]:
        """``(tool_id, tool_name, image override)`` of this sandbox.

        With a mapping, an image found there starts its own tool (by name, which survives a
        tool being recreated; by id if the entry has no name) and needs no override.
        """
        opts, image = self.options, self.config.image
        if opts.tool_mapping is not None and image:
            mapped = load_mapping(opts.tool_mapping).resolve(image)
            if mapped is not None:
                if mapped.tool_name:
                    return None, mapped.tool_name, None
                return mapped.tool_id, None, None
            if not (opts.tool_name or opts.tool_id):
                raise ConfigError(
                    f"image {image} is not in the tool mapping {opts.tool_mapping}: add it with "
                    "`sandbox-runtime ags sync`, or set tool_name to run it as an override"
                )
        if not (opts.tool_name or opts.tool_id):
            raise ConfigError(
                "the ags backend needs a sandbox tool: tool_name (AGS_TOOL_NAME), or "
                "tool_mapping (AGS_TOOL_MAPPING) and an image"
            )
        return opts.tool_id, None if opts.tool_id else opts.tool_name, image

    def _lifetime(self) -> int:
        return int(min(max(self.config.lifetime, _MIN_LIFETIME), _MAX_LIFETIME))

    def _require_session(self) -> EnvdClient:
        if self._stopped:
            raise SandboxGoneError(f"AGS instance {self.sandbox_id} was stopped")
        if self._session is None:
            raise SandboxGoneError("the AGS instance was never started")
        return self._session

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Start an instance, wait until it runs, connect to its envd, create the workdir."""
        began = time.monotonic()
        try:
            tool_id, tool_name, image = self._tool()
            if self._plane == "cloud":
                self._start_cloud(began, tool_id, tool_name, image)
            else:
                snapshot = self._from_snapshot
                self._start_e2b(snapshot or tool_name or tool_id, None if snapshot else image)
            session = self._require_session()
            self._translated(lambda: session.make_dir(self.config.workdir), "create the workdir")
        except BaseException as exc:
            self._stop_quietly()
            if isinstance(
                exc, (SandboxStartError, SandboxTimeoutError, ConfigError, CheckpointNotFoundError)
            ):
                raise
            if isinstance(exc, BackendUnavailableError):
                raise
            if isinstance(exc, SandboxError):
                raise SandboxStartError(f"cannot start an AGS instance: {exc}") from exc
            if isinstance(exc, Exception):
                raise SandboxStartError(
                    f"cannot start an AGS instance: {self._clean(exc)}"
                ) from exc
            raise

    def _start_cloud(
        self, began: float, tool_id: str | None, tool_name: str | None, image: str | None
    ) -> None:
        client = self._cloud_client()
        opts = self.options
        custom: dict[str, Any] = {}
        if image:
            custom["Image"] = image
            custom["ImageRegistryType"] = opts.image_registry_type
        resources: dict[str, str] = {}
        if self.config.resources.cpus:
            resources["CPU"] = f"{int(self.config.resources.cpus * 1000)}m"
        if self.config.resources.memory:
            resources["Memory"] = f"{max(self.config.resources.memory // (1024 * 1024), 1)}Mi"
        if resources:
            custom["Resources"] = resources
        labels = self._labels()
        snapshot = self._from_snapshot
        try:
            info = client.start_instance(
                tool_id=tool_id,
                tool_name=tool_name,
                timeout=f"{self._lifetime()}s",
                client_token=uuid.uuid4().hex,
                custom_configuration=custom,
                metadata=labels,
                auth_mode=opts.auth_mode,
                snapshot_id=snapshot,
            )
        except AgsApiError as exc:
            if isinstance(exc, BackendUnavailableError):
                raise
            if snapshot and exc.code == "ResourceNotFound.SandboxSnapshot":
                raise CheckpointNotFoundError(f"no AGS checkpoint {snapshot!r}: {exc}") from exc
            if exc.code == "RequestLimitExceeded" or exc.code.startswith("LimitExceeded"):
                raise QuotaExceededError(f"StartSandboxInstance refused: {exc}") from exc
            raise SandboxStartError(f"StartSandboxInstance failed: {exc}") from exc
        self._instance_id = info.instance_id
        self._deadline = time.time() + self._lifetime()
        while info.status != "RUNNING":
            if info.status in ("FAILED", "STARTING_FAILED", "STOPPED", "STOPPING"):
                raise SandboxStartError(
                    f"AGS instance {info.instance_id} is {info.status} "
                    f"({info.stop_reason or 'no reason given'})"
                )
            if time.monotonic() - began > self.config.start_timeout:
                raise SandboxTimeoutError(
                    f"AGS instance {info.instance_id} was still {info.status} after "
                    f"start_timeout {self.config.start_timeout:.0f}s"
                )
            time.sleep(0.5)
            found = client.describe_instance(info.instance_id)
            if found is None:
                raise SandboxStartError(
                    f"AGS instance {info.instance_id} disappeared while starting"
                )
            info = found
        self._connect_cloud()

    def _connect_cloud(self) -> None:
        assert self._instance_id is not None
        token = self._cloud_client().acquire_token(self._instance_id)
        self._open_session(
            self._instance_id, token.token.get_secret_value() or None, self.options.envd_version
        )

    def _start_e2b(self, template: str | None, image: str | None) -> None:
        if self.options.api_key is None:
            raise ConfigError("the ags backend's e2b control plane needs E2B_API_KEY (ark_...)")
        if image:
            raise ConfigError(
                "a per-sandbox image needs the cloud control plane (CustomConfiguration.Image); "
                "with an ark_ key, make a tool per image (sandbox-runtime ags sync) and set "
                "tool_mapping"
            )
        if not template:
            raise ConfigError("the ags backend needs a tool name or id")
        api = self._e2b_api()
        # The REST create has no idempotency token of its own: a label of ours plays its part,
        # so a create whose answer was lost is found again instead of leaked or duplicated.
        create_token = uuid.uuid4().hex
        labels = {**self._labels(), _CREATE_TOKEN: create_token}
        try:
            grant = api.create(template, timeout=self._lifetime(), metadata=labels)
        except E2bApiError as exc:
            if exc.status == 429:
                raise QuotaExceededError(f"cannot create an AGS sandbox: {exc}") from exc
            if exc.status is not None:
                raise SandboxStartError(f"cannot create an AGS sandbox: {exc}") from exc
            made = api.list_running({_CREATE_TOKEN: create_token})
            found = api.get(made[0][0]) if made else None
            if found is None:
                raise SandboxStartError(
                    f"cannot create an AGS sandbox: {exc}; none was made"
                ) from exc
            logger.warning("create answer lost; adopted the sandbox it made: %s", found.sandbox_id)
            grant = found
        self._instance_id = grant.sandbox_id
        self._open_grant(grant)

    def _open_grant(self, grant: SandboxGrant) -> None:
        self._open_session(grant.sandbox_id, grant.envd_token, grant.envd_version, grant.domain)

    def _labels(self) -> dict[str, str]:
        config = self.config
        return make_labels(
            lifetime=config.lifetime,
            run_id=config.run_id,
            extra=config.labels,
            workdir=config.workdir,
        )

    @classmethod
    def prefetch_images(cls, images: Sequence[str], options: BackendOptions | None = None) -> None:
        """Have the service pre-cache ``images`` (``CreatePreCacheImageTask``); see ``_precache``.

        Cloud control plane only: without a SecretId/SecretKey (the e2b-compatible plane)
        there is no pre-cache API, and nothing is done.
        """
        opts = cls.coerce_options(options)
        if opts.secret_id is None or opts.secret_key is None:
            return
        _precache.prefetch(
            cloud_client(opts),
            images,
            registry_type=opts.image_registry_type,
            budget=opts.precache_budget,
        )

    @classmethod
    def list_sandboxes(cls, options: BackendOptions | None = None) -> list[SandboxInfo]:
        """Running instances carrying this library's metadata."""
        return [
            SandboxInfo.from_labels(cls.name, instance_id, metadata)
            for instance_id, status, metadata in live_instances(cls.coerce_options(options))
            if status == "RUNNING"
        ]

    def attach(self, sandbox_id: str) -> None:
        """Take over a running instance of this library and connect to its envd."""
        if self._plane == "cloud":
            info = self._cloud_client().describe_instance(sandbox_id)
            if info is None:
                raise SandboxGoneError(f"no AGS instance {sandbox_id!r}")
            if info.metadata.get(MANAGED) != "true":
                raise SandboxGoneError(
                    f"AGS instance {sandbox_id!r} is not a sandbox of this library"
                )
            if info.status != "RUNNING":
                raise SandboxGoneError(f"AGS instance {sandbox_id!r} is {info.status}")
            self._instance_id = sandbox_id
            self._connect_cloud()
            return
        listed = {instance_id: meta for instance_id, _s, meta in live_instances(self.options)}
        if sandbox_id not in listed:
            raise SandboxGoneError(f"no running AGS sandbox {sandbox_id!r} of this library")
        grant = self._e2b_api().get(sandbox_id)
        if grant is None:
            raise SandboxGoneError(f"AGS sandbox {sandbox_id!r} is gone")
        self._instance_id = sandbox_id
        self._open_grant(grant)

    def _stop_quietly(self) -> None:
        with contextlib.suppress(Exception):
            self.stop()

    def stop(self) -> None:
        """Stop the instance; a second call, or an instance already gone, is fine."""
        if self._stopped:
            return
        self._stopped = True
        instance_id = self._instance_id
        if instance_id is None:
            return
        try:
            if self._plane == "cloud":
                self._cloud_client().stop_instance(instance_id)
            else:
                self._e2b_api().kill(instance_id)
        except AgsApiError as exc:
            if exc.is_not_found or exc.code.startswith("UnsupportedOperation"):
                return  # already stopped or expired
            raise BackendError(f"cannot stop AGS instance {instance_id}: {exc}") from exc
        except (SandboxError, *_NETWORK_ERRORS) as exc:
            raise BackendError(
                f"cannot stop AGS instance {instance_id}: {self._clean(exc)}"
            ) from exc
        finally:
            if self._session is not None:
                self._session.close()

    def is_alive(self) -> bool:
        """True while the service says the instance runs and its envd answers."""
        if self._stopped or self._instance_id is None:
            return False
        try:
            if self._plane == "cloud":
                info = self._cloud_client().describe_instance(self._instance_id)
                if info is None or info.status != "RUNNING":
                    return False
            # The control plane's status can lag a crash: envd itself must answer too.
            session = self._session
            return session is not None and session.healthy()
        except (SandboxError, *_NETWORK_ERRORS):
            return False

    # -- lifetime (docs/leases.md; the calls are in _lease) ----------------------------------

    def set_expiry(self, expires_at: float) -> None:
        """Move the instance's ``Timeout`` so that it ends at ``expires_at`` (at least 30 s)."""
        instance_id = self._instance_id
        if self._stopped or instance_id is None:
            raise SandboxGoneError("the AGS instance is not running")
        seconds = expires_at - time.time()
        try:
            if self._plane == "cloud":
                _lease.set_cloud_timeout(self._cloud_client(), instance_id, expires_at)
            else:
                _lease.set_e2b_timeout(self._e2b_api(), instance_id, seconds)
        except (AgsApiError, E2bApiError) as exc:
            if _lease.is_gone_error(exc) or getattr(exc, "status", None) == 404:
                raise SandboxGoneError(f"AGS instance {instance_id} is gone: {exc}") from exc
            raise

    def max_expiry(self, started_at: float) -> float | None:
        """AGS ends every instance 24 h after its start at the latest."""
        return started_at + _lease.MAX_LIFETIME_S

    def gone_cause(self) -> str:
        """The instance's ``StopReason`` (Cloud API); the E2B API forgets stopped ones."""
        if self._instance_id is None or self._plane != "cloud":
            return "unknown"
        info = self._cloud_client().describe_instance(self._instance_id)
        return "unknown" if info is None else _lease.cause_of_stop(info.status, info.stop_reason)

    def _listed_running(self) -> bool:
        """Whether the control plane still lists the instance as running.

        The envd client asks when the gateway answers "not found": an instance that is no
        longer running is gone, not retried.
        """
        instance_id = self._instance_id
        if self._stopped or instance_id is None:
            return False
        if self._plane == "cloud":
            info = self._cloud_client().describe_instance(instance_id)
            return info is not None and info.status == "RUNNING"
        return self._e2b_api().get(instance_id) is not None

    # -- checkpoints, forks, pause: the Cloud API's snapshots (docs/checkpoints.md) ----------

    def _require_cloud(self, capability: Capability) -> AgsCloudClient:
        """The Cloud API client, if this sandbox's options declare ``capability``."""
        if capability not in self.capabilities_for(self.options):
            detail = (
                "set memory_snapshots (the service's beta) for pause and memory checkpoints"
                if self._plane == "cloud"
                else "the e2b control plane does not use the service's snapshots yet; "
                "use control_plane='cloud' (SecretId/SecretKey)"
            )
            raise CapabilityUnsupportedError(capability.value, self.name, detail)
        return self._cloud_client()

    def _live_id(self) -> str:
        if self._stopped or self._instance_id is None:
            raise SandboxGoneError(f"AGS instance {self.sandbox_id or '(none)'} is not running")
        return self._instance_id

    def _status(self, instance_id: str) -> str | None:
        info = self._cloud_client().describe_instance(instance_id)
        return None if info is None else info.status

    def checkpoint(self, labels: Mapping[str, str], lifetime: float) -> Checkpoint:
        """``CreateSandboxSnapshot`` of the instance, its labels carried as snapshot tags."""
        if self._plane == "e2b":
            return _e2b_plane.book(self._e2b_api()).take(
                self._live_id(),
                labels=labels,
                lifetime=lifetime,
                run_id=self.config.run_id,
                workdir=self.config.workdir,
            )
        client = self._require_cloud(Capability.CHECKPOINT_FILESYSTEM)
        instance_id = self._live_id()
        memory = self.options.memory_snapshots
        stored = checkpoint_labels(
            source_id=instance_id,
            kind="memory" if memory else "filesystem",
            lifetime=lifetime,
            run_id=self.config.run_id,
            labels=labels,
            workdir=self.config.workdir,
        )
        return _checkpoints.take(
            client, instance_id, stored, memory=memory, wait=self.config.start_timeout
        )

    def start_from_checkpoint(self, checkpoint: Checkpoint) -> None:
        """``StartSandboxInstance`` with the checkpoint's ``SnapshotId``, then as any start."""
        if self._plane == "cloud":
            self._require_cloud(Capability.FORK)
        self._from_snapshot = checkpoint.id
        try:
            self.start()
        finally:
            self._from_snapshot = None

    def rollback(self, checkpoint: Checkpoint) -> None:
        """Start an instance from the snapshot, then stop the current one.

        The sandbox's id changes to the new instance's, its lifetime starts again, and its
        processes end with the old instance.  If the new one cannot start, the old one stays.
        """
        if self._plane == "cloud":
            self._require_cloud(Capability.CHECKPOINT_FILESYSTEM)
        elif not _e2b_plane.book(self._e2b_api()).knows(checkpoint.id):
            raise CheckpointNotFoundError(f"no AGS checkpoint {checkpoint.id!r} of this library")
        old_id, old_deadline = self._live_id(), self._deadline
        self._instance_id = None
        try:
            self.start_from_checkpoint(checkpoint)
        except BaseException:
            self._instance_id, self._deadline, self._stopped = old_id, old_deadline, False
            self._reconnect()
            raise
        try:
            self._stop_instance(old_id)
        except (SandboxError, *_NETWORK_ERRORS) as exc:
            # Not fatal: the old instance ends at its Timeout, or in the next reap.
            logger.warning("rolled back; the replaced instance %s: %s", old_id, self._clean(exc))

    def _reconnect(self) -> None:
        if self._plane == "cloud":
            self._connect_cloud()
        elif (grant := self._e2b_api().get(self._live_id())) is not None:
            self._open_grant(grant)

    def _stop_instance(self, instance_id: str) -> None:
        if self._plane == "cloud":
            self._cloud_client().stop_instance(instance_id)
        else:
            self._e2b_api().kill(instance_id)

    def pause(self) -> None:
        """``PauseSandboxInstance`` with ``Memory`` true; waits for ``PAUSED``."""
        if self._plane == "e2b":  # the service's e2b pause route (what it keeps is its own)
            self._e2b_api().pause(self._live_id())
            return
        client = self._require_cloud(Capability.PAUSE)
        instance_id = self._live_id()
        what = f"pause AGS instance {instance_id}"
        try:
            status = client.pause_instance(instance_id, memory=self.options.memory_snapshots)
        except AgsApiError as exc:
            raise BackendError(f"cannot {what}: {exc}") from exc
        if status != "PAUSED":
            _checkpoints.wait_for_status(
                lambda: self._status(instance_id),
                wanted="PAUSED",
                passing=("RUNNING", "PAUSING"),
                wait=self.config.start_timeout,
                what=what,
            )

    def resume(self) -> None:
        """``ResumeSandboxInstance`` with the rest of the lifetime; waits for ``RUNNING``."""
        if self._plane == "e2b":  # e2b's connect resumes a paused sandbox
            self._open_grant(self._e2b_api().connect(self._live_id(), timeout=self._lifetime()))
            return
        client = self._require_cloud(Capability.PAUSE)
        instance_id = self._live_id()
        what = f"resume AGS instance {instance_id}"
        left = min(max(self._deadline - time.time(), _MIN_LIFETIME), _MAX_LIFETIME)
        try:
            client.resume_instance(instance_id, timeout=f"{int(left)}s")
        except AgsApiError as exc:
            raise BackendError(f"cannot {what}: {exc}") from exc
        _checkpoints.wait_for_status(
            lambda: self._status(instance_id),
            wanted="RUNNING",
            passing=("PAUSED", "RESUMING"),
            wait=self.config.start_timeout,
            what=what,
        )
        self._deadline = time.time() + left
        self._connect_cloud()  # a fresh data-plane token for the resumed instance

    @classmethod
    def _checkpoint_client(cls, options: BackendOptions | None) -> AgsCloudClient:
        opts = cls.coerce_options(options)
        if Capability.CHECKPOINT_FILESYSTEM not in cls.capabilities_for(opts):
            raise CapabilityUnsupportedError(
                Capability.CHECKPOINT_FILESYSTEM.value,
                cls.name,
                "checkpoints need the cloud control plane (SecretId/SecretKey)",
            )
        return cloud_client(opts)

    @classmethod
    def list_checkpoints(cls, options: BackendOptions | None = None) -> list[Checkpoint]:
        """The snapshots this library made on the account (any client's), by their tags."""
        opts = cls.coerce_options(options)
        if opts.resolved_control_plane == "e2b" and _e2b_plane.capabilities(opts):
            return _e2b_plane.book(e2b_api(opts)).listed()
        return _checkpoints.listing(cls._checkpoint_client(options))

    @classmethod
    def delete_checkpoint(cls, checkpoint_id: str, options: BackendOptions | None = None) -> None:
        """``DeleteSandboxSnapshot`` of one of this library's snapshots."""
        opts = cls.coerce_options(options)
        if opts.resolved_control_plane == "e2b" and _e2b_plane.capabilities(opts):
            _e2b_plane.book(e2b_api(opts)).delete(checkpoint_id)
            return
        _checkpoints.delete(cls._checkpoint_client(options), checkpoint_id)

    # -- error translation -------------------------------------------------------------------

    def _translate(self, exc: BaseException, what: str) -> SandboxError:
        """A client error as one of ours; checks whether the instance is gone when unsure."""
        message = self._clean(exc)
        if isinstance(exc, SandboxError) and not isinstance(exc, EnvdError):
            return exc
        if isinstance(exc, EnvdUnauthorized):
            return BackendError(f"{what}: the data-plane token was refused ({message})")
        if isinstance(exc, (EnvdError, *_NETWORK_ERRORS)):
            if not self.is_alive():
                return SandboxGoneError(f"AGS instance {self.sandbox_id} is gone ({message})")
            if isinstance(exc, _NETWORK_ERRORS):
                return BackendUnavailableError(f"{what}: cannot reach AGS ({message})")
        return BackendError(f"{what} failed: {message}")

    def _refresh_token(self) -> None:
        """Acquire a new data-plane token (they expire before long-lived instances do)."""
        if self._plane == "cloud":
            self._connect_cloud()

    def _translated(self, operation: Callable[[], T], what: str) -> T:
        """Run a data-plane call; on a refused token, refresh it once and try again."""
        for attempt in (1, 2):
            try:
                return operation()
            except (SandboxFileNotFoundError, SandboxIsADirectoryError):
                raise
            except Exception as exc:
                refused = isinstance(exc, EnvdUnauthorized)
                if refused and attempt == 1 and self._plane == "cloud":
                    self._refresh_token()
                    continue
                raise self._translate(exc, what) from exc
        raise AssertionError("unreachable")
