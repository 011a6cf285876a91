"""Who owns a sandbox, and when may it be removed.

Every sandbox a backend creates carries labels that name its owner process (host, boot,
pid and the pid's start time, so a reused pid is not mistaken for the owner), its run and
its expiry.  A reaper removes a sandbox only when those labels say it is expired or that its
owner is dead; sandboxes without the ``managed`` label are never touched, which is how we
avoid removing other people's containers.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

__all__ = [
    "LABEL_PREFIX",
    "OwnerLabels",
    "current_owner",
    "default_run_id",
    "make_labels",
    "timestamp",
    "user_labels",
    "why_reapable",
    "with_expiry",
]

#: Prefix of every label this library sets (Docker style; Kubernetes backends map it to a
#: DNS-prefixed key).
LABEL_PREFIX = "sandbox-runtime"

MANAGED = f"{LABEL_PREFIX}.managed"
OWNER_HOST = f"{LABEL_PREFIX}.owner-host"
OWNER_PID = f"{LABEL_PREFIX}.owner-pid"
OWNER_START = f"{LABEL_PREFIX}.owner-start"
RUN_ID = f"{LABEL_PREFIX}.run-id"
CREATED_AT = f"{LABEL_PREFIX}.created-at"
EXPIRES_AT = f"{LABEL_PREFIX}.expires-at"
#: The sandbox's working directory, so that a client reconnecting by id gets it back.
WORKDIR = f"{LABEL_PREFIX}.workdir"
#: The :class:`~sandbox_runtime.SandboxPool` that started the sandbox (a pool's id), so its
#: sandboxes can be listed; reaping needs only the owner labels every sandbox has.
POOL = f"{LABEL_PREFIX}.pool"
#: Marks a checkpoint (an image, a directory) rather than a sandbox; its value is ``"true"``.
CHECKPOINT = f"{LABEL_PREFIX}.checkpoint"
#: The sandbox a checkpoint was taken of.
SOURCE = f"{LABEL_PREFIX}.source"
#: ``filesystem`` or ``memory``: what a checkpoint holds.
CHECKPOINT_KIND = f"{LABEL_PREFIX}.checkpoint-kind"
#: A checkpoint's user labels as base64 of JSON: an image inherits its container's labels, so the
#: checkpoint's own cannot be told from them by key alone.
CHECKPOINT_LABELS = f"{LABEL_PREFIX}.checkpoint-labels"


@dataclass(frozen=True, slots=True)
class OwnerLabels:
    """The identity of a client process, as stored on its sandboxes."""

    host: str
    pid: int
    start: str


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            return handle.read().strip()
    except OSError:
        return "unknown-boot"


def _process_start(pid: int) -> str | None:
    """The kernel's start time of ``pid`` in clock ticks since boot, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            stat = handle.read()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses; fields after it are
    # space separated, and the start time is field 22.
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None


def _start_token(pid: int) -> str | None:
    ticks = _process_start(pid)
    return None if ticks is None else f"{_boot_id()}.{ticks}"


@cache
def default_run_id() -> str:
    """One id per client process, grouping the sandboxes it opens unless told otherwise."""
    return uuid.uuid4().hex[:12]


def current_owner() -> OwnerLabels:
    """The owner identity of the calling process (recomputed, so forked children differ)."""
    pid = os.getpid()
    return OwnerLabels(host=socket.gethostname(), pid=pid, start=_start_token(pid) or "unknown")


def make_labels(
    *,
    lifetime: float,
    run_id: str | None,
    extra: Mapping[str, str],
    workdir: str | None = None,
) -> dict[str, str]:
    """The labels a backend puts on a new sandbox; ``extra`` (the user's) cannot override ours."""
    owner = current_owner()
    now = int(time.time())
    labels = dict(extra)
    labels.update(
        {
            MANAGED: "true",
            OWNER_HOST: owner.host,
            OWNER_PID: str(owner.pid),
            OWNER_START: owner.start,
            RUN_ID: run_id or default_run_id(),
            CREATED_AT: str(now),
            EXPIRES_AT: str(now + int(lifetime + 0.999)),
        }
    )
    if workdir is not None:
        labels[WORKDIR] = workdir
    return labels


def user_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """``labels`` without this library's own (what the user put on the sandbox)."""
    return {k: v for k, v in labels.items() if not k.startswith(LABEL_PREFIX + ".")}


def timestamp(labels: Mapping[str, str], key: str) -> float | None:
    """A time label as seconds since the epoch, or ``None`` when absent or unreadable."""
    try:
        return float(labels[key])
    except (KeyError, ValueError):
        return None


def with_expiry(labels: Mapping[str, str], expires_at: float) -> dict[str, str]:
    """``labels`` with their expiry moved to ``expires_at`` (an extended or shortened lifetime)."""
    return {**labels, EXPIRES_AT: str(int(expires_at + 0.999))}


def why_reapable(
    labels: Mapping[str, str], *, now: float | None = None, expires_at: float | None = None
) -> str | None:
    """The reason a sandbox with these labels may be removed, or None if it must stay.

    Expired sandboxes may always go.  An owner is judged dead only on its own host: a
    sandbox owned by a process on another machine stays until it expires.  ``expires_at``,
    when given, replaces the expiry label: a backend whose labels cannot change after
    create (docker) passes the end its lease moved to.
    """
    if labels.get(MANAGED) != "true":
        return None
    now = time.time() if now is None else now
    if expires_at is None:
        expires_at = timestamp(labels, EXPIRES_AT)
    if expires_at is None:
        expires_at = float("inf")
    if expires_at <= now:
        return "expired"
    if labels.get(OWNER_HOST) != socket.gethostname():
        return None
    try:
        pid = int(labels.get(OWNER_PID, ""))
    except ValueError:
        return None
    recorded = labels.get(OWNER_START, "unknown")
    actual = _start_token(pid)
    if actual is None:
        return f"owner process {pid} is gone"
    if recorded != "unknown" and actual != recorded:
        return f"owner process {pid} is gone (pid reused)"
    return None
