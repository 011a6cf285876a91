"""How long a task's sandbox must live: sized from the episode's budget, kept by a lease.

A sandbox whose lifetime is the agent's timeout dies under grading (rLLM #677: "Sandbox
already shut down"), and the rollout is lost however correct it was.  Here a task's sandbox
starts with a lifetime sized from its episode's budget (:func:`episode_lifetime`: start and
preparation, ``steps x step_timeout`` for commands and as much again for model requests, or
the ``time_limit`` when that is shorter, then the test timeout and a grading headroom); the
runner and ``SWEEnv`` hold a lease on it while they use it (renewed ahead of its end, so
model time between steps that no budget bounds cannot outlast it), and before grading they
make sure the grading fits (:func:`ensure_remaining`).  Where a backend's hard cap is shorter
than an episode may need, :func:`cap_warning` says so once, up front: such an episode ends
in an error (no reward), never a 0.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from sandbox_runtime._core.backend import Capability
from sandbox_runtime._core.config import SandboxConfig
from sandbox_runtime._core.keepalive import KeepAlive
from sandbox_runtime._core.registry import load_backend
from sandbox_runtime._core.runtime import SandboxRuntime, validate_options
from sandbox_runtime.errors import SandboxError

__all__ = [
    "GRADING_HEADROOM_S",
    "SETUP_ALLOWANCE_S",
    "agent_seconds",
    "cap_warning",
    "ensure_remaining",
    "episode_lifetime",
    "grading_seconds",
    "hold_lease",
]

logger = logging.getLogger("sandbox_runtime.swe")

#: Seconds past the test timeout that grading may take: the diff, the audit, applying the
#: patch, and starting a fresh sandbox where grading runs in one.
GRADING_HEADROOM_S = 300.0
#: Seconds for a sandbox's start and the task's preparation before the agent begins.
SETUP_ALLOWANCE_S = 600.0


def agent_seconds(steps: int, step_timeout: float, time_limit: float | None) -> float:
    """The longest an agent may run.

    Each step is a command and a model request, each at most ``step_timeout``; the
    ``time_limit`` bounds the whole when it is shorter.
    """
    bound = 2 * steps * step_timeout
    return bound if time_limit is None else min(bound, time_limit)


def grading_seconds(test_timeout: float) -> float:
    """The time grading needs once the agent is done."""
    return test_timeout + GRADING_HEADROOM_S


def episode_lifetime(
    steps: int, step_timeout: float, time_limit: float | None, test_timeout: float
) -> float:
    """A task sandbox's lifetime: setup, the agent's budget, then grading."""
    agent = agent_seconds(steps, step_timeout, time_limit)
    return SETUP_ALLOWANCE_S + agent + grading_seconds(test_timeout)


def cap_warning(config: SandboxConfig, needed: float) -> str | None:
    """One line when the backend's or the caller's hard cap is shorter than ``needed``."""
    backend_cls = load_backend(config.backend)
    try:
        backend: Any = backend_cls(config, validate_options(config, backend_cls))
        service = backend.max_expiry(0.0)
    except SandboxError:
        service = None
    caps = [cap for cap in (service, config.max_lifetime) if cap is not None]
    if not caps or min(caps) >= needed:
        return None
    return (
        f"an episode may need {needed:.0f} s of sandbox time, but a {config.backend} sandbox "
        f"ends after {min(caps):.0f} s at most (its hard cap); longer episodes end in an "
        "error, with no reward"
    )


def hold_lease(sandbox: SandboxRuntime, grading: float) -> KeepAlive | None:
    """A lease on a started task sandbox, where its backend can extend lifetimes.

    It keeps at least ``grading`` seconds ahead (renewing to twice that once half is left),
    so that a sandbox never nears its end while its owner still uses it; it stops when the
    sandbox closes, and with the owning process.
    """
    if Capability.EXTEND_LIFETIME not in sandbox.backend.capabilities_for(sandbox.backend.options):
        return None
    return sandbox.keep_alive(lease=2 * grading)


def ensure_remaining(sandbox: SandboxRuntime, seconds: float) -> None:
    """Make sure the sandbox lives ``seconds`` more (before grading an ungraded patch).

    Raises :class:`~sandbox_runtime.errors.LifetimeCapError` when a hard cap forbids it, so
    the episode ends in an error before grading starts instead of a sandbox dying under it.
    A backend that cannot extend is left as it is, with a warning.
    """
    expires_at = sandbox.expires_at
    if expires_at is None or expires_at - time.time() >= seconds:
        return
    if Capability.EXTEND_LIFETIME not in sandbox.backend.capabilities_for(sandbox.backend.options):
        logger.warning(
            "sandbox %s ends in %.0f s and its backend cannot extend it; grading needs %.0f s",
            sandbox.id,
            expires_at - time.time(),
            seconds,
        )
        return
    sandbox.set_lifetime(seconds)
