"""The ``docker`` backend's options: the engine, the image pull, the container and the agent."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from sandbox_runtime.backend_kit import (
    BackendOptions,
)
from sandbox_runtime.backend_kit.agent import (
    AgentMode,
)

__all__ = ["DockerOptions", "parse_bytes"]

_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 1000**2, "mb": 1000**2}
_UNITS |= {"mib": 1024**2, "g": 1000**3, "gb": 1000**3, "gib": 1024**3}
_UNITS |= {"t": 1000**4, "tb": 1000**4, "tib": 1024**4}


def parse_bytes(value: object) -> int | None:
    """A size as bytes: an int, or text such as ``"20GiB"``, ``"500 MB"``, ``"1.5g"``."""
    if value is None or isinstance(value, int):
        return value
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*", str(value))
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS:
        raise ValueError(f"not a size: {value!r} (write bytes, or e.g. '20GiB', '500MB')")
    return int(float(match.group(1)) * _UNITS[unit])


class DockerOptions(BackendOptions):
    """Options of the ``docker`` backend."""

    docker_host: str | None = None
    """Engine address (``unix:///run/podman/podman.sock``, ``tcp://...``); else ``DOCKER_HOST``."""
    pull: Literal["missing", "always", "never"] = "missing"
    """When to pull the image: only if absent, before every start, or never."""
    image_cache_budget: int | None = Field(default=None, gt=0)
    """Disk the images this library pulled may take on the engine (bytes, or ``"20GiB"``);
    beyond it the least recently used ones no container uses and no schedule pinned are
    removed (docs/images.md).  ``None``: images are kept."""
    prefetch_concurrency: int = Field(default=4, gt=0)
    """Pulls that :meth:`DockerBackend.prefetch_images` runs at once."""
    image_pin: float = Field(default=900.0, ge=0)
    """Seconds an image named to ``prefetch_images`` (or starting a sandbox) is kept from
    eviction."""
    delete_image: bool = False
    """Remove a sandbox's image when it closes (rLLM/R2E-Gym's ``delete_image``), if this
    library pulled it and no other container uses it."""
    image_record: str | None = None
    """The file recording the images this library pulled and their last use, shared by the
    processes of a run; default ``$XDG_STATE_HOME/sandbox-runtime/images-<engine>.json``."""
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

    @field_validator("image_cache_budget", mode="before")
    @classmethod
    def _size(cls, value: object) -> int | None:
        return parse_bytes(value)
