"""The ``docker`` backend's options: the engine, the image pull, the container and the agent."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from sandbox_runtime.backend_kit import (
    BackendOptions,
)
from sandbox_runtime.backend_kit.agent import (
    AgentMode,
)

__all__ = ["DockerOptions"]


class DockerOptions(BackendOptions):
    """Options of the ``docker`` backend."""

    docker_host: str | None = None
    """Engine address (``unix:///run/podman/podman.sock``, ``tcp://...``); else ``DOCKER_HOST``."""
    pull: Literal["missing", "always", "never"] = "missing"
    """When to pull the image: only if absent, before every start, or never."""
    network: str | None = None
    """Network mode (``none``, ``bridge``, ``host`` or a network name); default: the engine's."""
    user: str | None = None
    """User that commands run as (``uid[:gid]`` or a name); default: the image's."""
    volumes: list[str] = Field(default_factory=list)
    """Bind mounts as ``host_path:container_path[:ro]``."""
    privileged: bool = False
    """Run the container privileged (needed only for docker-in-docker and the like)."""
    runtime: str | None = None
    """OCI runtime, e.g. ``runsc`` for gVisor."""
    init: bool = True
    """Run Docker's init as PID 1, so that orphaned processes are reaped."""
    api_version: str = "auto"
    """Engine API version; ``auto`` asks the engine once per process, a fixed one saves that."""
    api_timeout: float = Field(default=120.0, gt=0)
    """Seconds before one Engine API call is abandoned."""
    max_pool_size: int = Field(default=64, gt=0)
    """HTTP connections kept to the engine; raise it for many parallel sandboxes."""
    agent: AgentMode = "auto"
    """The in-sandbox agent (fast exec and files): ``auto`` uses it once it answers, on an
    engine on this host's unix socket, in a network other than ``host``/``none`` (until then
    calls take ``docker exec``, or, for an image whose agent answered before, wait a few
    seconds for it); ``on`` requires it (the start waits for it and fails without it);
    ``off`` never starts it."""
    agent_wait: float = Field(default=30.0, gt=0)
    """Seconds after start that calls keep looking for the agent (``on``: wait) before
    settling on the native path (``on``: failing)."""
