"""The ``e2b`` backend: a sandbox on any service that speaks e2b's protocol.

e2b itself, a self-hosted e2b, Alibaba ROCK, OpenKruise agents, AGS's E2B-compatible door:
the control plane is e2b's REST API (:class:`~sandbox_runtime.backend_kit.agent.E2bApi`, the
same client the ``ags`` backend uses) and the data plane is envd, through this library's own
client and command rules (:class:`~sandbox_runtime.backend_kit.agent.EnvdCommands`), so no
e2b SDK is needed and any release may be installed beside.

Labels travel as the sandbox's metadata, which is how sandboxes are listed, attached and
reaped.  Checkpoints, forks and pause use the service's own routes where it has them, which
the backend finds out by asking the service (``discover``), never from its name; a service
without snapshot routes gets filesystem checkpoints through the core's archive store (the
workdir and ``checkpoint_paths``), and one without a pause route no ``pause``
(``docs/e2b.md``).
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import TypeVar

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
    make_labels,
    why_reapable,
)
from sandbox_runtime.backend_kit.agent import (
    E2bApi,
    E2bApiError,
    EnvdClient,
    EnvdCommands,
    EnvdDataPlane,
    EnvdError,
    EnvdUnauthorized,
    SandboxGrant,
    ServiceFeatures,
    SnapshotBook,
    discover,
)
from sandbox_runtime.errors import (
    BackendError,
    BackendUnavailableError,
    CheckpointNotFoundError,
    ConfigError,
    QuotaExceededError,
    SandboxError,
    SandboxFileNotFoundError,
    SandboxGoneError,
    SandboxIsADirectoryError,
    SandboxStartError,
)

from . import _checkpoints
from ._options import E2bOptions, control_plane, load_template_mapping

__all__ = ["E2bBackend"]

logger = logging.getLogger("sandbox_runtime.e2b")

T = TypeVar("T")
_MIN_LIFETIME, _MAX_LIFETIME = 30, 24 * 3600
#: Metadata key naming one create request: a create whose answer was lost is found by it.
_CREATE_TOKEN = "sandbox-runtime.create-token"
_NETWORK_ERRORS = (httpx.HTTPError, OSError)
_BASE_CAPABILITIES = frozenset(
    {Capability.RECONNECT, Capability.STREAMING, Capability.EXTEND_LIFETIME}
)


def features(opts: E2bOptions) -> ServiceFeatures:
    """The checkpoint routes of the service ``opts`` point at (asked once per process)."""
    return discover(opts.resolved_api_url, lambda: control_plane(opts))


class E2bBackend(EnvdDataPlane, Backend[E2bOptions]):
    """A sandbox on an e2b-protocol service; see the module docstring."""

    name = "e2b"
    options_model = E2bOptions
    extra = "e2b"
    capabilities = _BASE_CAPABILITIES
    #: e2b's published usage rates (https://e2b.dev/docs/faq/calculate-sandbox-price):
    #: $0.000014 per vCPU-second and $0.0000045 per GiB-second, for its default sandbox of
    #: 2 vCPU and 512 MiB.
    published_price = 2 * 0.000014 + 0.5 * 0.0000045

    def __init__(self, config: SandboxConfig, options: E2bOptions) -> None:
        super().__init__(config, options)
        self._sandbox_id: str | None = None
        self._session: EnvdClient | None = None
        self._api: E2bApi | None = None
        self._stopped = False
        self._lock = threading.Lock()
        self._commands = EnvdCommands(
            self._require_session,
            translated=self._translated,
            is_alive=self.is_alive,
            name=f"e2b sandbox {self.sandbox_id}",
        )

    def __repr__(self) -> str:
        return f"E2bBackend(api_url={self.options.resolved_api_url!r}, id={self._sandbox_id!r})"

    # -- class level -------------------------------------------------------------------------

    @classmethod
    def capabilities_for(cls, options: BackendOptions) -> frozenset[Capability]:
        """The base capabilities, and those of the checkpoint routes the service has."""
        opts = cls.coerce_options(options)
        if opts.api_key is None:
            return _BASE_CAPABILITIES
        # Snapshots, or the archive fallback: checkpoints and forks either way.
        extra = {Capability.CHECKPOINT_FILESYSTEM, Capability.FORK}
        if features(opts).pause:
            extra.add(Capability.PAUSE)
        return _BASE_CAPABILITIES | extra

    @classmethod
    def engine_key(cls, options: BackendOptions) -> str:
        """One control plane per API URL."""
        return cls.coerce_options(options).resolved_api_url

    @classmethod
    def availability(cls, options: BackendOptions | None = None) -> Availability:
        """Needs an API key."""
        try:
            opts = cls.coerce_options(options)
        except (SandboxError, ValueError) as exc:
            return Availability(False, str(exc))
        if opts.api_key is None:
            return Availability(False, "set E2B_API_KEY (and E2B_DOMAIN or E2B_API_URL)")
        return Availability(True)

    @classmethod
    def _class_api(cls, options: BackendOptions | None) -> tuple[E2bOptions, E2bApi]:
        opts = cls.coerce_options(options)
        return opts, control_plane(opts)

    @classmethod
    def list_sandboxes(cls, options: BackendOptions | None = None) -> list[SandboxInfo]:
        """Running and paused sandboxes carrying this library's metadata."""
        _opts, api = cls._class_api(options)
        try:
            running = api.list_running({MANAGED: "true"}, paused=True)
        finally:
            api.close()
        return [SandboxInfo.from_labels(cls.name, sid, meta) for sid, meta in running]

    @classmethod
    def reap(
        cls, options: BackendOptions | None = None, *, dry_run: bool = False
    ) -> list[ReapedSandbox]:
        """Kill the sandboxes and delete the checkpoints whose lifetime or owner is gone."""
        opts, api = cls._class_api(options)
        try:
            reaped = _checkpoints.store_for(opts).reap(cls.name, dry_run=dry_run)
            ends: dict[str, float] = {}
            # Paused ones too, by the same rules: a paused sandbox of a dead owner is kept
            # (and billed) by the service for weeks otherwise.
            listed = api.list_running({MANAGED: "true"}, ends, paused=True)
            for sandbox_id, metadata in listed:
                # The service's end follows an extension; the metadata keeps the first one.
                reason = why_reapable(metadata, expires_at=ends.get(sandbox_id))
                if reason is not None:
                    if not dry_run:
                        api.kill(sandbox_id)
                    reaped.append(ReapedSandbox(cls.name, sandbox_id, reason))
            if features(opts).snapshots:
                reaped += _checkpoints.book(cls.name, opts, api).reap(dry_run=dry_run)
            return reaped
        finally:
            api.close()

    @classmethod
    def list_checkpoints(cls, options: BackendOptions | None = None) -> list[Checkpoint]:
        """The checkpoints this host recorded on the service (``docs/e2b.md``)."""
        opts, api = cls._class_api(options)
        try:
            found = _checkpoints.store_for(opts).list(cls.name)
            if features(opts).snapshots:
                found += _checkpoints.book(cls.name, opts, api).listed()
            return sorted(found, key=lambda item: item.created, reverse=True)
        finally:
            api.close()

    @classmethod
    def delete_checkpoint(cls, checkpoint_id: str, options: BackendOptions | None = None) -> None:
        """Delete one checkpoint's snapshot and record."""
        opts, api = cls._class_api(options)
        try:
            if _checkpoints.is_archive(cls.name, opts, checkpoint_id):
                _checkpoints.store_for(opts).delete(checkpoint_id, cls.name)
            else:
                _checkpoints.book(cls.name, opts, api).delete(checkpoint_id)
        finally:
            api.close()

    # -- helpers -----------------------------------------------------------------------------

    @property
    def sandbox_id(self) -> str:
        """The service's sandbox id (empty before start)."""
        return self._sandbox_id or ""

    def _control(self) -> E2bApi:
        if self._api is None:
            self._api = control_plane(self.options)
        return self._api

    def _template(self) -> str:
        image, mapping = self.config.image, self.options.template_mapping
        if mapping is not None and image:
            templates = load_template_mapping(mapping)
            if image not in templates:
                raise ConfigError(
                    f"{mapping}: image {image!r} has no template: add it to the mapping"
                )
            return templates[image]
        return self.options.template

    def _lifetime(self) -> int:
        return int(min(max(self.config.lifetime, _MIN_LIFETIME), _MAX_LIFETIME))

    def _labels(self) -> dict[str, str]:
        config = self.config
        return make_labels(
            lifetime=config.lifetime,
            run_id=config.run_id,
            extra=config.labels,
            workdir=config.workdir,
        )

    def _open(self, grant: SandboxGrant) -> None:
        session = EnvdClient(
            self.options.envd_url(grant.sandbox_id, grant.domain),
            sandbox_id=grant.sandbox_id,
            token=grant.envd_token,
            request_timeout=self.options.request_timeout,
            envd_version=grant.envd_version,
            alive=self._listed_running,
        )
        with self._lock:
            previous, self._session = self._session, session
            self._sandbox_id = grant.sandbox_id
        if previous is not None:
            previous.close()

    def _require_session(self) -> EnvdClient:
        if self._stopped:
            raise SandboxGoneError(f"e2b sandbox {self.sandbox_id} was stopped")
        if self._session is None:
            raise SandboxGoneError("the e2b sandbox was never started")
        return self._session

    # -- lifecycle ---------------------------------------------------------------------------

    def _create(self, template: str) -> SandboxGrant:
        """Create a sandbox; a create whose answer was lost is found by its token, not repeated."""
        api = self._control()
        token = uuid.uuid4().hex
        labels = {**self._labels(), _CREATE_TOKEN: token}
        try:
            return api.create(template, timeout=self._lifetime(), metadata=labels)
        except E2bApiError as exc:
            if exc.status == 429:
                raise QuotaExceededError(f"cannot create an e2b sandbox: {exc}") from exc
            if exc.status is not None:
                raise SandboxStartError(f"cannot create an e2b sandbox: {exc}") from exc
            made = api.list_running({_CREATE_TOKEN: token})
            found = api.get(made[0][0]) if made else None
            if found is None:
                raise SandboxStartError(
                    f"cannot create an e2b sandbox: {exc}; none was made"
                ) from exc
            logger.warning("create answer lost; adopted the sandbox it made: %s", found.sandbox_id)
            return found

    def _start_with(self, template: str) -> None:
        try:
            self._open(self._create(template))
            session = self._require_session()
            self._translated(lambda: session.make_dir(self.config.workdir), "create the workdir")
        except BaseException as exc:
            with contextlib.suppress(Exception):
                self.stop()
            if isinstance(exc, (SandboxStartError, ConfigError, BackendUnavailableError)):
                raise
            if isinstance(exc, Exception):
                raise SandboxStartError(f"cannot start an e2b sandbox: {exc}") from exc
            raise

    def start(self) -> None:
        """Create a sandbox from the template, connect to its envd, create the workdir."""
        self._start_with(self._template())

    def start_from_checkpoint(self, checkpoint: Checkpoint) -> None:
        """A sandbox from the checkpoint's snapshot, or from the template plus the archive."""
        if not self._is_archive(checkpoint.id):
            self._start_with(checkpoint.id)
            return
        store = _checkpoints.store_for(self.options)
        record = store.record(checkpoint, self.name)
        if not self.config.image and record.image:
            self.config = self.config.model_copy(update={"image": record.image})
        self.start()
        try:
            store.restore(self, checkpoint)
        except BaseException:
            with contextlib.suppress(Exception):
                self.stop()
            raise

    def _is_archive(self, checkpoint_id: str) -> bool:
        return _checkpoints.is_archive(self.name, self.options, checkpoint_id)

    def attach(self, sandbox_id: str) -> None:
        """Take over a running sandbox of this library and connect to its envd."""
        listed = dict(self._control().list_running({MANAGED: "true"}))
        if sandbox_id not in listed:
            raise SandboxGoneError(f"no running e2b sandbox {sandbox_id!r} of this library")
        grant = self._control().get(sandbox_id)
        if grant is None:
            raise SandboxGoneError(f"e2b sandbox {sandbox_id!r} is gone")
        self._open(grant)

    def stop(self) -> None:
        """Kill the sandbox; a second call, or a sandbox already gone, is fine."""
        if self._stopped:
            return
        self._stopped = True
        try:
            if self._sandbox_id is not None:
                self._control().kill(self._sandbox_id)
        except (SandboxError, *_NETWORK_ERRORS) as exc:
            raise BackendError(f"cannot kill e2b sandbox {self._sandbox_id}: {exc}") from exc
        finally:
            if self._session is not None:
                self._session.close()
            if self._api is not None:
                self._api.close()

    def is_alive(self) -> bool:
        """True while the sandbox's envd answers."""
        session = self._session
        if self._stopped or session is None:
            return False
        try:
            return session.healthy()
        except (SandboxError, *_NETWORK_ERRORS):
            return False

    # -- lifetime (docs/leases.md) ---------------------------------------------------------

    def set_expiry(self, expires_at: float) -> None:
        """Move the sandbox's end through the service's timeout route (``/timeout``)."""
        seconds = max(1, math.ceil(expires_at - time.time()))
        try:
            self._control().set_timeout(self.sandbox_id, seconds)
        except E2bApiError as exc:
            if exc.status == 404:
                raise SandboxGoneError(f"e2b sandbox {self.sandbox_id} is gone: {exc}") from exc
            raise

    def max_expiry(self, started_at: float) -> float | None:
        """The 24 h every e2b-protocol service caps a sandbox at (e2b Pro; AGS)."""
        return started_at + _MAX_LIFETIME

    def _listed_running(self) -> bool:
        """Whether the control plane still knows the sandbox (asked when envd says "not found")."""
        if self._stopped or self._sandbox_id is None:
            return False
        return self._control().get(self._sandbox_id) is not None

    # -- checkpoints and pause (the service's routes) ------------------------------------------

    def checkpoint(self, labels: Mapping[str, str], lifetime: float) -> Checkpoint:
        """A snapshot of the sandbox, or without snapshot routes an archive (docs/e2b.md)."""
        if not features(self.options).snapshots:
            return _checkpoints.store_for(self.options).capture(
                self,
                [self.config.workdir, *self.config.checkpoint_paths],
                backend_name=self.name,
                source_id=self.sandbox_id,
                image=self.config.image,
                labels=labels,
                lifetime=lifetime,
                run_id=self.config.run_id,
                workdir=self.config.workdir,
            )
        return self._book().take(
            self.sandbox_id,
            labels=labels,
            lifetime=lifetime,
            run_id=self.config.run_id,
            workdir=self.config.workdir,
        )

    def _book(self) -> SnapshotBook:
        return _checkpoints.book(self.name, self.options, self._control())

    def rollback(self, checkpoint: Checkpoint) -> None:
        """Snapshot: a new sandbox takes this one's place (its id changes); archive: in place."""
        opts = self.options
        if self._is_archive(checkpoint.id):
            _checkpoints.store_for(opts).restore(self, checkpoint)
            return
        if not self._book().knows(checkpoint.id):
            raise CheckpointNotFoundError(f"no e2b checkpoint {checkpoint.id!r} of this library")
        old = self.sandbox_id
        grant = self._create(checkpoint.id)
        self._open(grant)
        with contextlib.suppress(SandboxError, *_NETWORK_ERRORS):
            self._control().kill(old)

    def pause(self) -> None:
        """The service's pause (e2b keeps memory; the AGS emulator files only)."""
        self._control().pause(self.sandbox_id)

    def resume(self) -> None:
        """``connect``, which resumes a paused sandbox; envd is reached anew."""
        self._open(self._control().connect(self.sandbox_id, timeout=self._lifetime()))

    # -- error translation ---------------------------------------------------------------------

    def _translate(self, exc: BaseException, what: str) -> SandboxError:
        if isinstance(exc, SandboxError) and not isinstance(exc, EnvdError):
            return exc
        if isinstance(exc, EnvdUnauthorized):
            return BackendError(f"{what}: the envd access token was refused ({exc})")
        if isinstance(exc, (EnvdError, *_NETWORK_ERRORS)):
            if not self.is_alive():
                return SandboxGoneError(f"e2b sandbox {self.sandbox_id} is gone ({exc})")
            if isinstance(exc, _NETWORK_ERRORS):
                return BackendUnavailableError(f"{what}: cannot reach the sandbox ({exc})")
        return BackendError(f"{what} failed: {exc}")

    def _translated(self, operation: Callable[[], T], what: str) -> T:
        try:
            return operation()
        except (SandboxFileNotFoundError, SandboxIsADirectoryError):
            raise
        except Exception as exc:
            raise self._translate(exc, what) from exc
