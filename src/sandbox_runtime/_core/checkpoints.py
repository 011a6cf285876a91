"""Checkpoints: a sandbox's state saved under an id, that outlives the sandbox.

A :class:`Checkpoint` is a plain handle: what a backend saved (a directory copy on
``local``, an image on ``docker``), whose it was, and when it goes.  It carries the same
ownership labels as a sandbox (``_core/ownership.py``), so ``sandbox-runtime reap`` removes
the checkpoints of dead owners and expired ones the way it removes sandboxes, and a listing
finds them by user label.  The operations on it live in ``runtime.py`` (``checkpoint``,
``rollback``, ``fork``, ``from_checkpoint``, with ``ForkResult``) and in each backend.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Literal

from sandbox_runtime._core import ownership

__all__ = ["Checkpoint", "CheckpointKind", "checkpoint_labels"]

#: What a checkpoint holds: the filesystem only, or the memory (running processes) too.
CheckpointKind = Literal["filesystem", "memory"]


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A saved sandbox state: pass it to ``rollback`` or ``SandboxRuntime.from_checkpoint``."""

    id: str
    """The backend's id of the saved state (a directory name, an image id)."""
    backend: str
    source_id: str
    """The sandbox it was taken of (which may be gone by now)."""
    kind: CheckpointKind
    created: datetime
    """When it was taken, in UTC."""
    size_bytes: int | None = None
    """Its size where the backend knows it cheaply (``None`` otherwise; see each backend)."""
    labels: dict[str, str] = field(default_factory=dict)
    """The user's labels given to ``checkpoint(labels=...)``."""
    workdir: str | None = None
    """The source sandbox's workdir, which sandboxes started from it get by default."""
    expires_at: float | None = None
    owner: str | None = None
    """``host:pid`` of the process that took it."""

    @classmethod
    def from_labels(
        cls,
        backend: str,
        checkpoint_id: str,
        labels: Mapping[str, str],
        *,
        size_bytes: int | None = None,
    ) -> Checkpoint:
        """Read one back from the full label set a backend stored with it."""
        host, pid = labels.get(ownership.OWNER_HOST), labels.get(ownership.OWNER_PID)
        created = ownership.timestamp(labels, ownership.CREATED_AT) or 0.0
        try:
            encoded = labels.get(ownership.CHECKPOINT_LABELS, "")
            user = json.loads(base64.urlsafe_b64decode(encoded)) if encoded else {}
        except (ValueError, binascii.Error):
            user = {}
        kind: CheckpointKind = (
            "memory" if labels.get(ownership.CHECKPOINT_KIND) == "memory" else "filesystem"
        )
        return cls(
            id=checkpoint_id,
            backend=backend,
            source_id=labels.get(ownership.SOURCE, ""),
            kind=kind,
            created=datetime.fromtimestamp(created, tz=timezone.utc),
            size_bytes=size_bytes,
            labels={str(k): str(v) for k, v in user.items()} if isinstance(user, dict) else {},
            workdir=labels.get(ownership.WORKDIR),
            expires_at=ownership.timestamp(labels, ownership.EXPIRES_AT),
            owner=f"{host}:{pid}" if host and pid else None,
        )

    def matches(self, wanted: Mapping[str, str]) -> bool:
        """True when every label in ``wanted`` is on this checkpoint with that value."""
        return all(self.labels.get(key) == value for key, value in wanted.items())


def checkpoint_labels(
    *,
    source_id: str,
    kind: CheckpointKind,
    lifetime: float,
    run_id: str | None,
    labels: Mapping[str, str],
    workdir: str | None,
) -> dict[str, str]:
    """The full label set a backend stores with a new checkpoint (ownership included)."""
    stored = ownership.make_labels(lifetime=lifetime, run_id=run_id, extra={}, workdir=workdir)
    stored.update(
        {
            ownership.CHECKPOINT: "true",
            ownership.SOURCE: source_id,
            ownership.CHECKPOINT_KIND: kind,
            # Base64: no quotes or spaces, which image-label syntaxes escape differently.
            ownership.CHECKPOINT_LABELS: base64.urlsafe_b64encode(
                json.dumps(dict(labels), sort_keys=True).encode()
            ).decode(),
        }
    )
    return stored
