"""E2B's pause, resume, snapshot and fork routes, as the e2b SDK (2.63) calls them.

- ``POST /sandboxes/{id}/pause`` ``{memory}``: 204; 409 if already paused.
- ``POST /sandboxes/{id}/resume`` ``{timeout}``: 201 with the ``Sandbox``; 409 if running.
- ``POST /sandboxes/{id}/snapshots`` ``{name, memory}``: 201 ``{snapshotID, names}``.
- ``GET /snapshots?sandboxID=&name=&limit=&nextToken=``: a page of ``SnapshotInfo``.
- ``DELETE /templates/{id}``: deletes a snapshot (e2b snapshots are templates): 204 or 404.
- ``POST /sandboxes/{id}/fork`` ``{timeout, count}``: 201 with one ``{sandbox}`` or
  ``{error: {code, message}}`` per copy (1 to 100 copies, all from one snapshot of the source).

Connect to a paused sandbox resumes it (``/connect`` answers 201 then).  Memory is never kept
by the emulator (see :mod:`._checkpoints`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from ._checkpoints import Checkpoints
from ._seed import Seed
from ._service import AgsService
from ._state import Instance, ServiceError, Snapshot

__all__ = ["MAX_FORKS", "E2bCheckpoints"]

E2bAnswer = tuple[int, Any, dict[str, str]]
#: The most copies one fork call makes (e2b's documented limit).
MAX_FORKS = 100
_SNAPSHOT_PAGE = 100


def _error(status: int, message: str) -> E2bAnswer:
    return status, {"code": status, "message": message}, {}


def _info(snapshot: Snapshot) -> dict[str, Any]:
    names = [snapshot.name] if snapshot.name != snapshot.snapshot_id else []
    return {"snapshotID": snapshot.snapshot_id, "names": names}


class E2bCheckpoints:
    """The routes above, onto the service's :class:`Checkpoints`."""

    def __init__(self, service: AgsService, render: Callable[[Instance], dict[str, Any]]) -> None:
        self.service = service
        self.checkpoints = Checkpoints(service)
        self.render = render

    async def pause(self, instance: Instance) -> E2bAnswer:
        """Pause a running sandbox (``memory`` is accepted; files only are kept)."""
        if instance.status in ("PAUSING", "PAUSED"):
            return _error(409, f"Sandbox {instance.instance_id} is already paused")
        if instance.status != "RUNNING":
            return _error(404, f"Sandbox {instance.instance_id} not found")
        status = await self.checkpoints.pause(instance)
        if status != "PAUSED":
            return _error(500, f"pausing failed: {instance.status_reason}")
        return 204, None, {}

    async def resume(self, instance: Instance, timeout: Any) -> E2bAnswer:
        """Resume a paused sandbox: 201 and the ``Sandbox`` with the same access token."""
        if instance.status in ("STARTING", "RUNNING"):
            return _error(409, f"Sandbox {instance.instance_id} is already running")
        if instance.status != "PAUSED":
            return _error(404, f"Paused sandbox {instance.instance_id} not found")
        seconds = int(timeout) if timeout else None
        await self.checkpoints.resume(instance, seconds)
        return 201, self.render(instance), {}

    async def create_snapshot(self, instance: Instance, payload: dict[str, Any]) -> E2bAnswer:
        """Snapshot a running or paused sandbox's files."""
        if instance.status not in ("RUNNING", "PAUSED"):
            return _error(404, f"Sandbox {instance.instance_id} not found")
        params = {"SnapshotName": payload.get("name"), "Memory": payload.get("memory")}
        snapshot = await self.checkpoints.create_snapshot(params, instance)
        return 201, _info(snapshot), {}

    def list_snapshots(self, query: dict[str, list[str]]) -> E2bAnswer:
        """A page of snapshots, newest first, filtered by source sandbox and name."""
        source = (query.get("sandboxID") or [""])[-1]
        name = (query.get("name") or [""])[-1]
        try:
            limit = int((query.get("limit") or [str(_SNAPSHOT_PAGE)])[-1])
            offset = int((query.get("nextToken") or ["0"])[-1])
        except ValueError:
            return _error(400, "limit and nextToken must be integers")
        found = [
            s
            for s in reversed(self.checkpoints.list_snapshots())
            if (not source or s.source == source) and (not name or s.name == name)
        ]
        page = found[offset : offset + max(limit, 1)]
        headers: dict[str, str] = {}
        if offset + len(page) < len(found):
            headers["x-next-token"] = str(offset + len(page))
        return 200, [_info(s) for s in page], headers

    async def delete_snapshot(self, snapshot_id: str) -> E2bAnswer:
        """Delete a snapshot by id (the SDK's ``delete_snapshot`` uses the template route)."""
        try:
            await self.checkpoints.delete_snapshot(snapshot_id)
        except ServiceError:
            return _error(404, f"Snapshot {snapshot_id} not found")
        return 204, None, {}

    async def fork(self, instance: Instance, payload: dict[str, Any]) -> E2bAnswer:
        """``count`` copies of the sandbox's files, each its own sandbox or error."""
        count = int(payload.get("count") or 1)
        if not 1 <= count <= MAX_FORKS:
            return _error(400, f"count must be between 1 and {MAX_FORKS}")
        if instance.status not in ("RUNNING", "PAUSED"):
            return _error(404, f"Sandbox {instance.instance_id} not found")
        tree = await self.checkpoints.tree_of(instance)
        timeout = int(payload.get("timeout") or instance.timeout)
        copies = await asyncio.gather(
            *(self._start_copy(instance, tree, timeout) for _ in range(count))
        )
        return 201, copies, {}

    async def _start_copy(self, source: Instance, tree: Seed, timeout: int) -> dict[str, Any]:
        try:
            copy = await self.service.start_instance(
                tool=source.tool,
                timeout=timeout,
                custom=dict(source.custom),
                metadata=dict(source.metadata),
                env=dict(source.env),
                auth_mode=source.auth_mode,
                client_token=None,
                seed=tree,
            )
        except ServiceError as exc:
            status = 429 if exc.code.startswith("LimitExceeded") else 500
            return {"error": {"code": status, "message": exc.message}}
        return {"sandbox": self.render(copy)}
