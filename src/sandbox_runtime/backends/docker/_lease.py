"""Lifetimes that move on docker: the container's timer, its lease file, and what reap reads.

A container's labels cannot change after create, so its end lives in two places: the
``expires-at`` label (the end at create) and a lease file inside the container that the
container's main process, the timer of ``_core/lifetime``, reads before it gives up.
``set_expiry`` writes the file; the timer then ends the container at the new end, with no
client needed, and clamps any end past the hard cap given at create.  ``reap`` reads the
file of a container whose label says it expired but which still runs (an extended one), so
an extended sandbox is never taken as expired; its owner's death still makes it reapable.
"""

from __future__ import annotations

import contextlib
import io
import tarfile
import time
from collections.abc import Mapping
from typing import Any

from sandbox_runtime.backend_kit import LABEL_PREFIX, lease_file, timer_argv
from sandbox_runtime.backend_kit.agent import launch_command

from ._client import docker, requests

__all__ = ["LEASE_KEY_LABEL", "container_command", "gone_cause", "leased_end"]

#: The label naming a container's lease key (its lease file's name).
LEASE_KEY_LABEL = f"{LABEL_PREFIX}.lease-key"


def container_command(
    *, lifetime: float, max_lifetime: float | None, key: str, agent_dir: str | None
) -> tuple[list[str], list[str]]:
    """``(entrypoint, command)`` of a new container: the timer, with the agent's starter."""
    cap_at = None if max_lifetime is None else time.time() + max_lifetime
    timer = timer_argv(lifetime, key, cap_at)
    if agent_dir is None:
        return timer[:3], timer[3:]
    launch = launch_command(int(lifetime + 0.999), agent_dir, timer=timer)
    return launch[:3], launch[3:]


def leased_end(api: Any, container: str, labels: Mapping[str, str]) -> float | None:
    """The end a container's lease file names, or ``None`` when it has none.

    Read through the engine's archive API, which answers for a paused container too (an
    exec into one is refused): a paused sandbox keeps the lease it had, and ``reap`` must
    judge it by the same rule as a running one.
    """
    key = labels.get(LEASE_KEY_LABEL)
    if not key:
        return None
    try:
        stream, _stat = api.get_archive(container, lease_file(key))
        data = b"".join(stream)
    except (docker.errors.DockerException, requests.exceptions.RequestException):
        return None
    with (
        contextlib.suppress(tarfile.TarError, ValueError),
        tarfile.open(fileobj=io.BytesIO(data)) as archive,
    ):
        member = archive.next()
        handle = archive.extractfile(member) if member is not None else None
        if handle is not None:
            return float(handle.read(64).decode("ascii", "replace").strip())
    return None


def gone_cause(api: Any, container: str | None) -> str:
    """Why a container is gone, as far as the engine still knows.

    ``evicted`` (out of memory), ``expired`` (its timer ended with 0), ``killed`` (removed,
    or ended by a signal).
    """
    if container is None:
        return "unknown"
    try:
        state = api.inspect_container(container).get("State") or {}
    except docker.errors.NotFound:
        return "killed"  # removed; an expired one is told apart by the runtime's clock
    except (docker.errors.DockerException, requests.exceptions.RequestException):
        return "unknown"
    if state.get("OOMKilled"):
        return "evicted"
    if state.get("Running"):
        return "unknown"
    return "expired" if state.get("ExitCode") == 0 else "killed"
