"""Running the emulator: in this process on a background thread, or in the foreground.

:class:`AgsEmulator` is what tests and users start::

    with AgsEmulator(backend="local") as emulator:
        options = emulator.backend_options()        # for SandboxConfig(backend="ags", ...)
        emulator.faults.inject("rate_limit", plane="cloud", operation="StartSandboxInstance")
        emulator.api_limits.set_quota("StartSandboxInstance", Quota(20))   # refuse over 20/s

It binds 127.0.0.1 only (plain HTTP; nothing here is meant to be reachable from elsewhere),
knows one SecretId/SecretKey pair and one ``ark_`` API key (random unless given), and creates
a ready tool named ``default`` so that instances can be started at once, and one TCR registry
instance (``emulator.tcr.registry``) whose domain is ``tcr_domain``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import secrets
import threading
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

from pydantic import SecretStr

from sandbox_runtime._envd.server._http import serve
from sandbox_runtime_emulators._ratelimit import Quota, ServerLimits

from ._checkpoints import Checkpoints
from ._cloudapi import CloudApi
from ._e2b import E2bApi
from ._faults import FaultBook, RandomFaults
from ._gateway import Gateway
from ._runner import RunnerSettings
from ._service import AgsService, ServiceLimits
from ._state import Store
from ._tcr import TcrApi
from .app import EmulatorApp

__all__ = ["DEFAULT_TOOL", "AgsEmulator"]

logger = logging.getLogger("sandbox_runtime_emulators.ags")

DEFAULT_TOOL = "default"
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


class AgsEmulator:
    """The AGS emulator on ``host:port`` (port 0 picks a free one); see the module docstring."""

    def __init__(
        self,
        *,
        backend: str = "local",
        host: str = "127.0.0.1",
        port: int = 0,
        secret_id: str | None = None,
        secret_key: str | None = None,
        api_key: str | None = None,
        default_image: str | None = None,
        local_isolation: str | None = None,
        base_dir: str | None = None,
        limits: ServiceLimits | None = None,
        tcr_domain: str | None = None,
        tcr_login: tuple[str, str] | None = None,
        faults: Sequence[RandomFaults] = (),
        fault_seed: int | None = None,
        rate_limits: Mapping[str, Quota] | Iterable[tuple[str, Quota]] = (),
        latencies: Mapping[str, float] | Iterable[tuple[str, float]] = (),
        e2b_checkpoint_routes: bool = True,
    ) -> None:
        if host not in _LOOPBACK:
            raise ValueError(f"the emulator only listens on loopback addresses, not {host!r}")
        self.host = host
        self.port = port
        self.secret_id = secret_id or "AKID" + secrets.token_hex(16)
        self.secret_key = secret_key or secrets.token_hex(16)
        self.faults = FaultBook(seed=fault_seed)
        for spec in faults:
            self.faults.inject_random(spec)
        #: Quotas per action (and SecretId) and latencies per action: off unless given;
        #: ``_limits.REALISTIC_QUOTAS`` holds AGS's documented figures.
        #: Whether e2b's pause / resume / snapshot / fork routes are served (see ``_e2b``).
        self.e2b_checkpoint_routes = e2b_checkpoint_routes
        self.api_limits = ServerLimits(rate_limits, latencies, window=True)
        self.store = Store()
        runner = RunnerSettings(backend, local_isolation=local_isolation, base_dir=base_dir)
        self.service = AgsService(runner, limits or ServiceLimits(), self.faults, self.store)
        self.api_key = self.service.create_api_key("emulator", api_key).secret
        self.default_tool = self.service.add_ready_tool(DEFAULT_TOOL, default_image)
        self.service.pauser = Checkpoints(self.service).pause
        #: The TCR emulation; its one registry instance pushes to ``tcr_domain`` (a real
        #: registry such as a local ``docker-registry``), see ``_tcr``.
        self.tcr = TcrApi(
            (self.secret_id, self.secret_key), registry_domain=tcr_domain, login=tcr_login
        )
        self._gateway: Gateway | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._main: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"AgsEmulator(url={self.url!r}, backend={self.service.runner_settings.backend!r})"

    @property
    def ready(self) -> bool:
        """True once the port is bound and requests are served."""
        return self._ready.is_set()

    @property
    def url(self) -> str:
        """Base URL of every protocol the emulator serves."""
        return f"http://{self.host}:{self.port}"

    def backend_options(self, **overrides: Any) -> dict[str, Any]:
        """Options of the ``ags`` backend that point it at this emulator.

        Secrets are ``SecretStr`` so that the options dict, kept in ``SandboxConfig``, never
        prints them; plain strings in ``overrides`` are wrapped the same way.
        """
        options: dict[str, Any] = {
            "endpoint": self.url,
            "secret_id": SecretStr(self.secret_id),
            "secret_key": SecretStr(self.secret_key),
            "tool_name": self.default_tool.name,
        }
        for name, value in overrides.items():
            secret = name in ("secret_id", "secret_key", "api_key", "session_token")
            options[name] = SecretStr(value) if secret and isinstance(value, str) else value
        return options

    def environment(self) -> dict[str, str]:
        """Environment variables that point the ``ags`` backend and the SDKs at the emulator."""
        return {
            "AGS_ENDPOINT": self.url,
            "AGS_TOOL_NAME": self.default_tool.name,
            "TENCENTCLOUD_SECRET_ID": self.secret_id,
            "TENCENTCLOUD_SECRET_KEY": self.secret_key,
            "E2B_API_KEY": self.api_key,
            "E2B_API_URL": self.url,
            "E2B_SANDBOX_URL": self.url,
        }

    # -- lifecycle ---------------------------------------------------------------------------

    def build_app(self) -> EmulatorApp:
        """The ASGI application (call from the loop that will serve it)."""
        self._gateway = Gateway(self.store)
        cloud = CloudApi(self.service, (self.secret_id, self.secret_key))
        return EmulatorApp(
            self.service,
            cloud,
            E2bApi(self.service, checkpoint_routes=self.e2b_checkpoint_routes),
            self._gateway,
            self.tcr,
            self.api_limits,
        )

    async def serve(self) -> None:
        """Serve until cancelled, then stop every instance."""
        loop = asyncio.get_running_loop()
        loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(64, "ags-emulator"))
        app = self.build_app()
        expire = loop.create_task(self.service.expire_loop())

        def ready(port: int) -> None:
            self.port = port
            self._ready.set()

        try:
            await serve(app, host=self.host, port=self.port, on_ready=ready)
        finally:
            expire.cancel()
            await self.service.shutdown()
            if self._gateway is not None:
                await self._gateway.aclose()

    def start(self) -> AgsEmulator:
        """Serve on a background thread; returns once the port is bound."""
        if self._thread is not None:
            return self
        self._thread = threading.Thread(target=self._run, name="ags-emulator", daemon=True)
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise RuntimeError(f"the AGS emulator failed to start: {self._error}")
        if not self._ready.is_set():
            raise RuntimeError("the AGS emulator did not start within 30s")
        return self

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            self._main = loop.create_task(self.serve())
            loop.run_until_complete(self._main)
        except asyncio.CancelledError:
            pass
        except BaseException as exc:
            self._error = exc
            self._ready.set()
        finally:
            loop.close()

    def close(self) -> None:
        """Stop serving and remove every instance; idempotent."""
        loop, main, thread = self._loop, self._main, self._thread
        if loop is None or main is None or thread is None:
            return
        if not loop.is_closed():
            loop.call_soon_threadsafe(main.cancel)
        thread.join(timeout=60)
        self._thread = None

    def __enter__(self) -> AgsEmulator:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
