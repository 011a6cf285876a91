"""What a pause or snapshot keeps of an instance, and how a new sandbox starts from it.

- ``docker`` instances: ``docker commit`` of the container, the whole filesystem (the
  working tree, ``/testbed``, installed packages, deletions), as an image a new container
  starts from.  The images are named ``sandbox-runtime-ags-emulator/snapshot:<key>`` and
  removed when the snapshot is deleted, the paused instance resumed or stopped, or the
  emulator closes.
- ``local`` instances: a tar of the sandbox's own root directory (every file the instance
  wrote anywhere; the host's read-only directories are not part of it, nor is an empty
  directory directly under ``/``), laid into a fresh sandbox before envd starts.

Never kept: processes and memory (an instance started from a seed boots anew).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import secrets
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox_runtime.errors import SandboxError

__all__ = ["SNAPSHOT_REPOSITORY", "Seed", "capture", "discard"]

logger = logging.getLogger("sandbox_runtime_emulators.ags")

SNAPSHOT_REPOSITORY = "sandbox-runtime-ags-emulator/snapshot"


@dataclass(frozen=True)
class Seed:
    """A kept filesystem: an archive to lay in (local) or an image to start from (docker)."""

    archive: bytes | None = None
    image: str | None = None

    @property
    def size(self) -> int:
        """Bytes kept in the emulator's memory (an image's size lives in the engine)."""
        return len(self.archive or b"")


def _holds_files(directory: Path, skip: str) -> bool:
    """True if anything but directories lies under ``directory`` (``skip`` aside)."""
    for here, _dirs, files in os.walk(directory):
        if files and not here.endswith("/" + skip) and ("/" + skip + "/") not in here + "/":
            return True
    return False


def _tar_root(root: Path, skip: str) -> bytes:
    """The local sandbox's root as a tar whose names are relative to ``/``, minus ``skip``."""
    buffer = io.BytesIO()

    def keep(member: tarfile.TarInfo) -> tarfile.TarInfo | None:
        name = member.name
        return None if name == skip or name.startswith(skip + "/") else member

    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for child in sorted(root.iterdir()):
            # Top-level symlinks and directories without files are the isolation layer's
            # stand-ins for the host's directories (bound read-only), not the instance's.
            # A top-level directory's own entry is left out too: under namespace isolation
            # the sandbox owns only some entries inside it (``/var/tmp``), not ``/var``.
            if child.is_dir() and not child.is_symlink() and not _holds_files(child, skip):
                continue
            if child.is_symlink() or not child.is_dir():
                if not child.is_symlink():
                    archive.add(str(child), arcname=child.name, filter=keep)
                continue
            for entry in sorted(child.iterdir()):
                archive.add(str(entry), arcname=f"{child.name}/{entry.name}", filter=keep)
    return buffer.getvalue()


def _commit(container_id: str) -> str:
    import docker

    client = docker.from_env(timeout=120)
    try:
        tag = secrets.token_hex(8)
        client.containers.get(container_id).commit(repository=SNAPSHOT_REPOSITORY, tag=tag)
        return f"{SNAPSHOT_REPOSITORY}:{tag}"
    except docker.errors.DockerException as exc:
        raise SandboxError(f"docker commit of {container_id[:12]} failed: {exc}") from exc
    finally:
        client.close()


def capture(backend_name: str, backend: Any, envd_home: str) -> Seed:
    """Keep the instance's filesystem now (blocking: call from a worker thread)."""
    if backend_name == "docker":
        return Seed(image=_commit(str(backend.sandbox_id)))
    root = getattr(backend, "root", None)
    if not isinstance(root, Path):
        raise SandboxError(f"cannot keep the files of a {backend_name!r} instance")
    return Seed(archive=_tar_root(root, envd_home.strip("/")))


def discard(seed: Seed | None) -> None:
    """Remove a seed's committed image, if any (an image still in use stays; logged)."""
    if seed is None or seed.image is None:
        return
    import docker

    client = docker.from_env(timeout=60)
    try:
        with contextlib.suppress(docker.errors.ImageNotFound):
            client.images.remove(seed.image)
    except docker.errors.DockerException as exc:
        logger.info("snapshot image %s kept: %s", seed.image, exc)
    finally:
        client.close()
