"""The emulated AGS service: the operations both control planes translate into.

The Tencent Cloud API and the E2B-compatible REST API are two doors into the same service
(AGS's E2B API is itself a translation onto the Cloud API), so both call these methods and
only differ in how they spell requests, answers and errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

from sandbox_runtime.errors import SandboxError

from ._faults import FaultBook
from ._runner import InstanceRunner, RunnerSettings
from ._seed import Seed, discard
from ._state import (
    MAX_TIMEOUT,
    ApiKey,
    Instance,
    ServiceError,
    Store,
    Tool,
    new_id,
    parse_timeout,
)
from ._validation import validate_tool_params

__all__ = ["AgsService", "ServiceLimits"]

logger = logging.getLogger("sandbox_runtime_emulators.ags")


class ServiceLimits:
    """Quotas and timings of the emulated service."""

    def __init__(
        self,
        *,
        max_instances: int = 64,
        tool_activation_delay: float = 0.2,
        token_lifetime: float = 3600.0,
        start_wait: float = 60.0,
    ) -> None:
        self.max_instances = max_instances
        self.tool_activation_delay = tool_activation_delay
        self.token_lifetime = token_lifetime
        self.start_wait = start_wait


class AgsService:
    """Tools, instances and keys; instances boot on worker threads of the running loop."""

    def __init__(
        self, runner: RunnerSettings, limits: ServiceLimits, faults: FaultBook, store: Store
    ) -> None:
        self.runner_settings = runner
        self.limits = limits
        self.faults = faults
        self.store = store
        # Boot tasks still waiting out a slow-start delay can be cancelled at shutdown;
        # those already creating a sandbox are awaited, so that nothing is left behind.
        self._sleeping_boots: set[asyncio.Task[None]] = set()
        self._boots: set[asyncio.Task[None]] = set()
        #: What pauses an instance whose lifetime ends with ``autoPause`` (set by the server
        #: to the checkpoint operations, which sit above this module).
        self.pauser: Callable[[Instance], Awaitable[str]] | None = None

    # -- tools -----------------------------------------------------------------------------

    async def create_tool(self, params: dict[str, Any]) -> Tool:
        """``CreateSandboxTool``: validate, then CREATING until the image is checked.

        The tool turns ACTIVE after the activation delay, or FAILED (with the reason) when its
        image cannot run here.  A repeated ``ClientToken`` returns the tool the first request
        made (the idempotency the real service documents), whatever else the request says.
        """
        spec = validate_tool_params(params)
        default_timeout = parse_timeout(params.get("DefaultTimeout"))
        with self.store.lock:
            for tool in self.store.tools.values():
                if spec.client_token and tool.client_token == spec.client_token:
                    return tool
                if tool.name == spec.name:
                    raise ServiceError(
                        "ResourceInUse.SandboxTool", f"a sandbox tool named {spec.name!r} exists"
                    )
            tool = Tool(
                tool_id=new_id("sdt"),
                name=spec.name,
                tool_type=spec.tool_type,
                description=str(params.get("Description") or ""),
                default_timeout=default_timeout,
                network=spec.network,
                custom=spec.custom,
                tags=spec.tags,
                role_arn=str(params.get("RoleArn") or ""),
                client_token=spec.client_token,
                active_at=time.time() + self.limits.tool_activation_delay,
                storage_mounts=spec.storage_mounts,
                checking=bool(spec.custom.get("Image")),
            )
            self.store.tools[tool.tool_id] = tool
        if tool.checking:
            check = asyncio.get_running_loop().create_task(self._check_tool_image(tool))
            self._boots.add(check)
            check.add_done_callback(self._boots.discard)
        return tool

    async def _check_tool_image(self, tool: Tool) -> None:
        """What the real service does while a tool is CREATING: make sure its image can run."""
        image = str(tool.custom.get("Image"))
        try:
            problem = await asyncio.to_thread(self.runner_settings.image_problem, image)
        except Exception as exc:  # the check itself broke: report it as the reason
            problem = f"cannot check image {image!r}: {exc}"
        with self.store.lock:
            tool.failure = problem or ""
            tool.checking = False

    def add_ready_tool(self, name: str, image: str | None = None) -> Tool:
        """A tool that is ACTIVE at once (the emulator's default tool)."""
        custom = {"Image": image, "ImageRegistryType": "custom"} if image else {}
        tool = Tool(
            tool_id=new_id("sdt"),
            name=name,
            tool_type="custom",
            description="created by the emulator",
            default_timeout=300,
            network={"NetworkMode": "PUBLIC"},
            custom=custom,
            tags=[],
            role_arn="",
            client_token=None,
            status="ACTIVE",
        )
        with self.store.lock:
            self.store.tools[tool.tool_id] = tool
        return tool

    def delete_tool(self, tool_id: str) -> None:
        """``DeleteSandboxTool``; refused while instances of it run."""
        tool = self.store.tool(tool_id=tool_id)
        with self.store.lock:
            busy = [
                i
                for i in self.store.instances.values()
                if i.tool is tool and i.status in ("STARTING", "RUNNING")
            ]
            if busy:
                raise ServiceError(
                    "ResourceInUse.SandboxTool", f"{len(busy)} instance(s) of the tool are running"
                )
            del self.store.tools[tool.tool_id]

    def update_tool(self, params: dict[str, Any]) -> None:
        """``UpdateSandboxTool``: description, network, tags, custom configuration."""
        tool = self.store.tool(tool_id=str(params.get("ToolId") or ""))
        with self.store.lock:
            if "Description" in params:
                tool.description = str(params["Description"])
            if params.get("NetworkConfiguration"):
                tool.network = dict(params["NetworkConfiguration"])
            if "Tags" in params:
                tool.tags = list(params["Tags"] or [])
            if params.get("CustomConfiguration"):
                tool.custom.update(params["CustomConfiguration"])
            tool.updated = time.time()

    # -- instances -------------------------------------------------------------------------

    async def start_instance(
        self,
        *,
        tool: Tool,
        timeout: int,
        custom: dict[str, Any],
        metadata: dict[str, str],
        env: dict[str, str],
        auth_mode: str,
        client_token: str | None,
        slow_start: float = 0.0,
        seed: Seed | None = None,
    ) -> Instance:
        """Create an instance and boot it; answers when it runs (or at once if slow)."""
        tool.refresh()
        if tool.status != "ACTIVE":
            raise ServiceError(
                "ResourceUnavailable.SandboxTool", f"sandbox tool {tool.name!r} is {tool.status}"
            )
        with self.store.lock:
            if client_token:
                for existing in self.store.instances.values():
                    if existing.client_token == client_token and existing.tool is tool:
                        return existing
            running = sum(
                1
                for i in self.store.instances.values()
                if i.status in ("STARTING", "RUNNING", "RESUMING")
            )
            if running >= self.limits.max_instances:
                raise ServiceError(
                    "LimitExceeded.SandboxInstance",
                    f"instance quota of {self.limits.max_instances} reached",
                )
            instance = Instance(
                instance_id=new_id("sbi", 12),
                tool=tool,
                timeout=timeout,
                custom=custom,
                metadata=metadata,
                env=env,
                auth_mode=auth_mode,
                client_token=client_token,
                seed=seed,
            )
            self.store.instances[instance.instance_id] = instance
        boot = self.boot_task(instance, slow_start)
        if slow_start > 0:
            return instance
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(boot), self.limits.start_wait)
        if instance.status == "FAILED":
            code = (
                "ResourceNotFound.Image"
                if "image" in instance.status_reason.lower()
                else "InternalError"
            )
            raise ServiceError(code, f"instance failed to start: {instance.status_reason}")
        return instance

    def boot_task(self, instance: Instance, delay: float = 0.0) -> asyncio.Task[None]:
        """Boot ``instance`` (STARTING or RESUMING) on a task the shutdown waits for."""
        boot = asyncio.get_running_loop().create_task(self._boot(instance, delay))
        self._boots.add(boot)
        boot.add_done_callback(self._boots.discard)
        return boot

    async def _boot(self, instance: Instance, delay: float) -> None:
        if delay:
            task = asyncio.current_task()
            assert task is not None
            self._sleeping_boots.add(task)
            try:
                await asyncio.sleep(delay)
            finally:
                self._sleeping_boots.discard(task)
        custom_env = {
            str(item.get("Name")): str(item.get("Value", ""))
            for item in [*instance.tool.custom.get("Env", []), *instance.custom.get("Env", [])]
            if item.get("Name")
        }
        runner = InstanceRunner(
            self.runner_settings,
            image=instance.image,
            env={**custom_env, **instance.env},
            lifetime=MAX_TIMEOUT + 60,
            seed=instance.seed,
        )
        instance.runner = runner
        try:
            await asyncio.to_thread(runner.start)
        except (SandboxError, OSError) as exc:
            with self.store.lock:
                instance.status = "FAILED"
                instance.stop_reason = "error"
                instance.status_reason = str(exc)
                instance.updated = time.time()
            logger.warning("instance %s failed to start: %s", instance.instance_id, exc)
        else:
            with self.store.lock:
                if instance.status in ("STARTING", "RESUMING"):
                    instance.status = "RUNNING"
                    instance.updated = time.time()
                    stop_now = False
                else:
                    stop_now = True  # stopped while it booted
            if stop_now:
                await asyncio.to_thread(runner.stop)
        instance.boot_done.set()

    async def stop_instance(self, instance: Instance, reason: str = "manual") -> None:
        """``StopSandboxInstance``: STOPPING, remove the sandbox, STOPPED."""
        with self.store.lock:
            if instance.status not in ("STARTING", "RUNNING", "PAUSED", "PAUSE_FAILED"):
                raise ServiceError(
                    "UnsupportedOperation.SandboxInstance",
                    f"sandbox instance {instance.instance_id} is {instance.status}",
                )
            booting = instance.status in ("STARTING", "PAUSED")
            instance.status = "STOPPING"
            instance.stop_reason = reason
            instance.updated = time.time()
        runner = instance.runner
        if runner is not None and not booting:
            await asyncio.to_thread(runner.stop)
        with self.store.lock:
            instance.status = "STOPPED"
            instance.updated = time.time()

    def acquire_token(self, instance: Instance) -> tuple[str, float]:
        """``AcquireSandboxInstanceToken``: a new data-plane token and its expiry."""
        with self.store.lock:
            if instance.status != "RUNNING":
                raise ServiceError(
                    "UnsupportedOperation.SandboxInstance",
                    f"sandbox instance {instance.instance_id} is {instance.status}",
                )
            token = new_id("tk", 32)
            expires = min(time.time() + self.limits.token_lifetime, instance.expires)
            instance.tokens[token] = expires
        return token, expires

    def set_timeout(self, instance: Instance, timeout: int, *, allow_shorter: bool = True) -> None:
        """Make the instance end ``timeout`` seconds from now (0: at once).

        As E2B's ``KeepAliveFor``: the end never passes the instance's maximum length (24 h
        from its start; beyond it the call fails), and without ``allow_shorter`` (connect,
        refresh) an end earlier than the current one is left as it is.
        """
        with self.store.lock:
            if instance.status not in ("STARTING", "RUNNING"):
                raise ServiceError(
                    "UnsupportedOperation.SandboxInstance",
                    f"sandbox instance {instance.instance_id} is {instance.status}",
                )
            now = time.time()
            left = instance.created + MAX_TIMEOUT - now
            if left <= 0:
                raise ServiceError("InvalidParameterValue.Timeout", "Max instance length exceeded")
            expires = now + min(max(timeout, 0), left)
            if not allow_shorter and expires < instance.expires:
                return
            instance.timeout = max(int(expires - now), 0)
            instance.expires = expires
            instance.updated = now

    async def expire_loop(self, interval: float = 0.25, liveness_every: float = 1.0) -> None:
        """Stop instances whose lifetime ended (``StopReason`` ``timeout``); fail dead ones.

        About once a second every RUNNING instance's sandbox is checked too: one whose
        container or envd died becomes ``FAILED`` with ``StopReason`` ``error``, as the real
        service reports an instance that crashed, instead of staying RUNNING forever.
        """
        last_sweep = 0.0
        while True:
            await asyncio.sleep(interval)
            now = time.time()
            with self.store.lock:
                due = [
                    i
                    for i in self.store.instances.values()
                    if i.status in ("STARTING", "RUNNING") and i.expires <= now
                ]
            for instance in due:
                with contextlib.suppress(ServiceError):
                    # e2b's autoPause: paused, not stopped (stopped if the pause fails).
                    pauser = self.pauser if instance.auto_pause else None
                    if pauser is not None and await pauser(instance) == "PAUSED":
                        continue
                    await self.stop_instance(instance, reason="timeout")
            if now - last_sweep >= liveness_every:
                last_sweep = now
                await self._fail_dead_instances()

    async def _fail_dead_instances(self) -> None:
        with self.store.lock:
            running = [
                i
                for i in self.store.instances.values()
                if i.status == "RUNNING" and i.runner is not None
            ]
        for instance in running:
            await self.check_alive(instance)

    async def check_alive(self, instance: Instance) -> None:
        """Turn a RUNNING instance whose sandbox or envd died ``FAILED`` now.

        The sweep does this about once a second; a status call for one instance does it at
        once, so that it never reports a dead instance as running.
        """
        runner = instance.runner
        if instance.status != "RUNNING" or runner is None:
            return
        if await asyncio.to_thread(runner.alive):
            return
        with self.store.lock:
            if instance.status != "RUNNING":
                return  # stopped meanwhile, which also ends the runner
            instance.status = "FAILED"
            instance.stop_reason = "error"
            instance.status_reason = "the instance's container exited"
            instance.updated = time.time()
        logger.info("instance %s died; now FAILED", instance.instance_id)
        # Its remains go in the background: the status call that noticed answers at once.
        cleanup = asyncio.get_running_loop().create_task(asyncio.to_thread(runner.stop))
        self._boots.add(cleanup)
        cleanup.add_done_callback(self._boots.discard)

    async def shutdown(self) -> None:
        """Stop every instance (the emulator is closing)."""
        for task in list(self._sleeping_boots):
            task.cancel()
        if self._boots:
            await asyncio.gather(*self._boots, return_exceptions=True)
        with self.store.lock:
            live = [i for i in self.store.instances.values() if i.status in ("STARTING", "RUNNING")]
        await asyncio.gather(
            *(self.stop_instance(i, reason="system") for i in live), return_exceptions=True
        )
        for instance in live:
            if instance.runner is not None:
                await asyncio.to_thread(instance.runner.stop)
        await asyncio.to_thread(self._discard_seeds)

    def _discard_seeds(self) -> None:
        """Remove every image a snapshot or pause committed (their containers are gone)."""
        with self.store.lock:
            seeds: list[Seed | None] = [s.tree for s in self.store.snapshots.values()]
            for instance in self.store.instances.values():
                seeds += [instance.seed, instance.paused_tree]
        images = {seed.image: seed for seed in seeds if seed is not None and seed.image}
        for seed in images.values():
            discard(seed)

    # -- API keys --------------------------------------------------------------------------

    def create_api_key(self, name: str, secret: str | None = None) -> ApiKey:
        """``CreateAPIKey``: an ``ark_`` key, shown in full only in this answer."""
        key = ApiKey(
            key_id=new_id("ak"),
            name=name,
            secret=secret or "ark_" + secrets.token_hex(20),
        )
        with self.store.lock:
            self.store.api_keys[key.key_id] = key
        return key
