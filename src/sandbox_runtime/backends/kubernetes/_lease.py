"""Lifetimes that move on Kubernetes: the pod's timer, its deadline, and the labels reap reads.

A pod's ``spec.activeDeadlineSeconds`` can only be lowered once the pod exists, never raised,
so it cannot carry a lifetime that may grow.  It carries the hard cap instead
(``SandboxConfig.max_lifetime``, or the lifetime when there is none): the kubelet ends the
pod there whatever happens inside it.  The lifetime itself is the container's main process,
the timer of ``_core/lifetime``, which ends the pod (``Succeeded``) at the end its lease
file names; ``set_expiry`` writes that file through an exec and patches the pod's
``expires-at`` label and annotation, which ``reap`` reads, so an extended pod is never
reaped as expired.  Without ``max_lifetime`` a pod cannot outlive its first lifetime, and an
extension past it is ``LifetimeCapError`` before anything changes.
"""

from __future__ import annotations

import math
import time
from typing import Any

from sandbox_runtime.backend_kit import LABEL_PREFIX, SandboxConfig, timer_argv
from sandbox_runtime.backend_kit.agent import launch_command

from ._labels import key_for
from ._names import label_value_problem

__all__ = [
    "LEASE_KEY",
    "container_command",
    "deadline_seconds",
    "expiry_patch",
    "gone_cause",
]

#: The pod label holding the sandbox's lease key (its lease file's name).
LEASE_KEY = key_for(f"{LABEL_PREFIX}.lease-key")
_EXPIRES_AT = key_for(f"{LABEL_PREFIX}.expires-at")


def deadline_seconds(config: SandboxConfig) -> int:
    """The pod's ``activeDeadlineSeconds``: the hard cap, which Kubernetes never lets grow."""
    return max(1, math.ceil(config.max_lifetime or config.lifetime))


def container_command(
    config: SandboxConfig, key: str, agent_dir: str | None, fallback: str | None
) -> list[str]:
    """The container's command: the timer (capped at the deadline), with the agent's starter."""
    cap_at = time.time() + deadline_seconds(config)
    timer = timer_argv(config.lifetime, key, cap_at)
    if agent_dir is None:
        return timer
    return launch_command(math.ceil(config.lifetime), agent_dir, fallback, timer=timer)


def expiry_patch(end_at: float) -> dict[str, Any]:
    """The merge patch that moves the pod's ``expires-at`` label and annotation."""
    value = str(math.ceil(end_at))
    labels = {_EXPIRES_AT: value} if label_value_problem(value) is None else {}
    return {"metadata": {"labels": labels, "annotations": {_EXPIRES_AT: value}}}


def gone_cause(pod: dict[str, Any] | None) -> str:
    """Why a pod ended, from its status.

    ``expired`` (its timer or its deadline), ``evicted``, ``killed`` (deleted, or its
    container killed).
    """
    if pod is None:
        return "killed"  # deleted; an expired one is told apart by the runtime's clock
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return "killed"
    status = pod.get("status") or {}
    reason = status.get("reason")
    if reason == "DeadlineExceeded" or status.get("phase") == "Succeeded":
        return "expired"
    if reason == "Evicted":
        return "evicted"
    return "killed" if status.get("phase") == "Failed" else "unknown"
