"""Where a task's sandbox comes from on each backend, and building the samples' images.

Rows name Docker images.  A backend whose images are host directories
(``Capability.DIRECTORY_IMAGES``, such as ``local``) gets the bundled samples' template trees
instead, and a row whose image already is a directory works as is.  A backend that runs this
machine's engine images (``Capability.ENGINE_IMAGES``: docker, kubernetes on the emulator or a
one-node cluster) gets the samples' images built locally (no registry is needed) ``FROM`` a
base image that has python3, git and bash, by copying the same template tree to ``/``: the
images and the templates are the same environment.  Backends are asked what they can do,
never named.
"""

from __future__ import annotations

import io
import logging
import os
import tarfile
import threading
from collections.abc import Collection
from pathlib import Path
from typing import Any

from sandbox_runtime._core.backend import Capability
from sandbox_runtime.errors import ConfigError
from sandbox_runtime.swe.samples import is_sample_image, load_sample, template_dir
from sandbox_runtime.swe.task import Task

__all__ = ["DEFAULT_BASE_IMAGE", "build_sample_image", "resolve_image"]

logger = logging.getLogger("sandbox_runtime.swe")

#: The base the samples' images are built on (override: ``$SANDBOX_RUNTIME_SAMPLES_BASE``);
#: ``tests/images/build-base-image.sh`` builds it without a registry.
DEFAULT_BASE_IMAGE = "sandbox-runtime-test/base:bookworm"
_DIGEST_LABEL = "sandbox-runtime.sample-digest"
_build_lock = threading.Lock()


def resolve_image(
    task: Task, capabilities: Collection[Capability], *, base_image: str | None = None
) -> str | None:
    """The ``image`` to open ``task``'s sandbox with on a backend that can do ``capabilities``.

    Samples: their template directory where images are directories, their image built by the
    local Docker engine where engine images run (now, if missing or stale; a real cluster's
    nodes must then be able to pull it).  Other tasks keep the row's image, which must be a
    directory where images are directories.
    """
    image = task.image
    if Capability.DIRECTORY_IMAGES in capabilities:
        if is_sample_image(image):
            assert image is not None
            return str(template_dir(image.split("/", 1)[1].split(":", 1)[0]))
        if image and not Path(image).is_dir():
            raise ConfigError(
                f"task {task.task_id}: this backend's images are host directories, and "
                f"{image!r} is a container image; use a container backend such as docker"
            )
        return image
    if Capability.ENGINE_IMAGES in capabilities and is_sample_image(image):
        assert image is not None
        return build_sample_image(image.split("/", 1)[1].split(":", 1)[0], base=base_image)
    return image


def _context(tree: Path, base: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        dockerfile = f"FROM {base}\nCOPY root/ /\nWORKDIR /testbed\n".encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        archive.addfile(info, io.BytesIO(dockerfile))
        archive.add(tree, arcname="root")
    return buffer.getvalue()


def build_sample_image(name: str, *, base: str | None = None, force: bool = False) -> str:
    """Build (or reuse) the Docker image of sample ``name``; returns its tag.

    An image whose digest label matches the sample's sources is reused, so repeated runs
    and test sessions build each image once.
    """
    try:
        import docker
    except ImportError as exc:
        raise ConfigError(
            "building sample images needs docker-py: pip install 'sandbox-runtime-swe[docker]'"
        ) from exc
    sample = load_sample(name)
    tag = sample.image
    digest = sample.digest()
    base = base or os.environ.get("SANDBOX_RUNTIME_SAMPLES_BASE") or DEFAULT_BASE_IMAGE
    with _build_lock:
        client: Any = docker.from_env(timeout=300)
        try:
            if not force:
                try:
                    labels = client.images.get(tag).labels or {}
                    if labels.get(_DIGEST_LABEL) == digest:
                        return tag
                except docker.errors.ImageNotFound:
                    pass
            try:
                client.images.get(base)
            except docker.errors.ImageNotFound as exc:
                raise ConfigError(
                    f"the base image {base} for the sample images is missing: build it with "
                    "tests/images/build-base-image.sh, or set SANDBOX_RUNTIME_SAMPLES_BASE to "
                    "an image with python3, git and bash"
                ) from exc
            logger.info("building %s from %s", tag, base)
            output = client.api.build(
                fileobj=io.BytesIO(_context(template_dir(name), base)),
                custom_context=True,
                tag=tag,
                labels={_DIGEST_LABEL: digest},
                rm=True,
                forcerm=True,
                pull=False,
                decode=True,
            )
            for chunk in output:
                if "error" in chunk:
                    raise ConfigError(f"building {tag} failed: {chunk['error'].strip()}")
        finally:
            client.close()
    return tag
