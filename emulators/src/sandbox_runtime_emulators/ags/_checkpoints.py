"""Pause, resume and snapshots of emulated instances (both control planes call these).

An emulated instance is a sandbox of another backend, so what the emulator can keep is its
files: a pause takes the instance's working tree (``/home/user``) and removes the sandbox; a
resume boots a fresh sandbox of the same image with that tree laid in and the same data-plane
token.  Processes and memory are not kept, whatever ``Memory`` asks: the real service keeps
them with ``Memory`` true (its default).  Snapshots are the same tree, kept by the service
until deleted, and instances can start from one or from a running source instance.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from sandbox_runtime.errors import SandboxError

from ._seed import Seed, discard
from ._service import AgsService
from ._state import Instance, ServiceError, Snapshot, new_id

__all__ = ["Checkpoints"]


def _not_now(instance: Instance) -> ServiceError:
    return ServiceError(
        "UnsupportedOperation.SandboxInstance",
        f"sandbox instance {instance.instance_id} is {instance.status}",
    )


class Checkpoints:
    """The pause / resume / snapshot operations of one service."""

    def __init__(self, service: AgsService) -> None:
        self.service = service
        self.store = service.store

    async def tree_of(self, instance: Instance) -> Seed:
        """The instance's working tree now (RUNNING), or as it was paused (PAUSED)."""
        with self.store.lock:
            if instance.status == "PAUSED" and instance.paused_tree is not None:
                return instance.paused_tree
            runner = instance.runner
            if instance.status != "RUNNING" or runner is None:
                raise _not_now(instance)
        try:
            return await asyncio.to_thread(runner.capture)
        except SandboxError as exc:
            raise ServiceError(
                "FailedOperation", f"cannot read the instance's files: {exc}"
            ) from exc

    async def pause(self, instance: Instance) -> str:
        """``PauseSandboxInstance``: PAUSING, keep the tree, remove the sandbox, PAUSED."""
        with self.store.lock:
            if instance.status != "RUNNING":
                raise _not_now(instance)
            instance.status = "PAUSING"
            instance.updated = time.time()
            runner = instance.runner
        try:
            assert runner is not None
            tree = await asyncio.to_thread(runner.capture)
        except (SandboxError, AssertionError) as exc:
            with self.store.lock:
                instance.status = "PAUSE_FAILED"
                instance.status_reason = f"cannot keep the instance's files: {exc}"
                instance.updated = time.time()
            return instance.status
        await asyncio.to_thread(runner.stop)
        with self.store.lock:
            instance.paused_tree = tree
            instance.runner = None
            instance.status = "PAUSED"
            instance.updated = time.time()
        return instance.status

    async def settle(self, instance: Instance, wait: float) -> None:
        """Wait (up to ``wait`` seconds) for a pause in progress to end, as E2B's connect does."""
        deadline = time.monotonic() + wait
        while instance.status == "PAUSING" and time.monotonic() < deadline:
            await asyncio.sleep(0.05)

    async def resume(self, instance: Instance, timeout: int | None) -> None:
        """``ResumeSandboxInstance``: RESUMING, a fresh sandbox with the kept tree, RUNNING."""
        with self.store.lock:
            if instance.status != "PAUSED":
                raise _not_now(instance)
            instance.status = "RESUMING"
            instance.seed = instance.paused_tree
            instance.boot_done.clear()
            now = time.time()
            instance.timeout = timeout if timeout is not None else instance.timeout
            instance.expires = now + instance.timeout
            instance.updated = now
        boot = self.service.boot_task(instance)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(boot), self.service.limits.start_wait)
        with self.store.lock:
            if instance.status == "FAILED":
                instance.status = "RESUME_FAILED"
                raise ServiceError(
                    "InternalError", f"instance failed to resume: {instance.status_reason}"
                )
            instance.paused_tree = None

    async def create_snapshot(self, params: dict[str, Any], instance: Instance) -> Snapshot:
        """``CreateSandboxSnapshot``: the instance's tree, kept until deleted."""
        token = params.get("ClientToken") or None
        with self.store.lock:
            for existing in self.store.snapshots.values():
                if token and existing.client_token == token:
                    return existing
        tree = await self.tree_of(instance)
        snapshot_id = new_id("snap", 12)
        snapshot = Snapshot(
            snapshot_id=snapshot_id,
            name=str(params.get("SnapshotName") or snapshot_id),
            source=instance.instance_id,
            tool=instance.tool,
            tree=tree,
            memory_requested=bool(params.get("Memory")),
            tags=list(params.get("Tags") or []),
            client_token=token,
        )
        with self.store.lock:
            self.store.snapshots[snapshot_id] = snapshot
        return snapshot

    async def delete_snapshot(self, snapshot_id: str) -> None:
        """``DeleteSandboxSnapshot`` (by id only); its image goes unless an instance uses it."""
        with self.store.lock:
            snapshot = self.store.snapshots.pop(snapshot_id, None)
        if snapshot is None:
            raise ServiceError(
                "ResourceNotFound.SandboxSnapshot", f"snapshot {snapshot_id!r} not found"
            )
        in_use = any(
            i.seed is snapshot.tree and i.status not in ("STOPPED", "FAILED")
            for i in list(self.store.instances.values())
        )
        if not in_use:
            await asyncio.to_thread(discard, snapshot.tree)

    def list_snapshots(self) -> list[Snapshot]:
        """Every snapshot, oldest first."""
        with self.store.lock:
            return sorted(self.store.snapshots.values(), key=lambda s: s.created)
