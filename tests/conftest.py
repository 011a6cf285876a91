"""Shared fixtures: the test image, and the rule that CI never skips an engine-backed test.

Tests that need Docker or bubblewrap skip on a developer machine without them, but with
``SANDBOX_RUNTIME_CI=1`` (set by ``.ci/run``) a missing engine fails the run instead, since a
skipped test is not a passed test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

DOCKER_IMAGE = os.environ.get("SANDBOX_RUNTIME_TEST_IMAGE", "sandbox-runtime-test/base:bookworm")
NOBODY_IMAGE = "sandbox-runtime-test/nobody:latest"
IN_CI = os.environ.get("SANDBOX_RUNTIME_CI") == "1"


def require(reason: str | None) -> None:
    """Fail in CI, skip elsewhere, when an engine a test needs is missing."""
    if reason is None:
        return
    if IN_CI:
        pytest.fail(f"required in CI: {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


@cache
def docker_problem() -> str | None:
    """Why Docker tests cannot run here, or None when they can."""
    try:
        import docker
    except ImportError:
        return "docker-py is not installed (pip install -e '.[docker]')"
    try:
        client = docker.from_env(timeout=10)
        client.ping()
        client.images.get(DOCKER_IMAGE)
    except docker.errors.ImageNotFound:
        return f"test image {DOCKER_IMAGE} is missing: run tests/images/build-base-image.sh"
    except Exception as exc:
        return f"no Docker engine: {exc}"
    return None


@cache
def bwrap_problem() -> str | None:
    """Why namespace isolation cannot run here, or None (the backend's own probe, which
    retries a start that lost a race with the host's mounts)."""
    from sandbox_runtime.backends.local import LocalBackend, LocalOptions

    availability = LocalBackend.availability(LocalOptions(isolation="namespace"))
    return None if availability.ok else availability.reason


@pytest.fixture(scope="session")
def docker_image() -> str:
    """The locally built test image; fails in CI and skips elsewhere without Docker."""
    require(docker_problem())
    return DOCKER_IMAGE


@pytest.fixture(scope="session")
def nobody_image(docker_image: str) -> Iterator[str]:
    """The test image whose user is ``nobody`` (committed, so no registry is needed)."""
    import docker

    client = docker.from_env(timeout=60)
    try:
        container = client.containers.run(docker_image, ["true"], detach=True)
        container.wait(timeout=60)
        container.commit(*NOBODY_IMAGE.split(":"), changes=["USER nobody"])
        container.remove(force=True)
        yield NOBODY_IMAGE
    finally:
        client.close()


@cache
def kubernetes_problem() -> str | None:
    """Why the kubernetes backend cannot be tested against its emulator here, or None."""
    try:
        import kubernetes  # noqa: F401
        import wsproto  # noqa: F401
    except ImportError:
        return "needs pip install -e '.[kubernetes]' -e ./emulators"
    return docker_problem()


@pytest.fixture(scope="module")
def k8s_emulator() -> Iterator[Any]:
    """A Kubernetes API emulator with Docker behind its pods, one per test module."""
    require(kubernetes_problem())
    from sandbox_runtime_emulators.kubernetes import KubernetesEmulator

    with KubernetesEmulator() as running:
        yield running


#: An untagged reference to the test image, as a plain ``busybox`` manifest names its image:
#: the API server defaults its pull policy to ``Always``, so only ``--offline-images`` runs it
#: where no registry can be reached.
BUSYBOX_LIKE = "sandbox-runtime-test/busybox"


@pytest.fixture(scope="session")
def busybox_like_image(docker_image: str) -> str:
    """The test image under an untagged name (``...:latest`` in the engine)."""
    import docker

    client = docker.from_env(timeout=30)
    try:
        client.images.get(docker_image).tag(BUSYBOX_LIKE, "latest")
    finally:
        client.close()
    return BUSYBOX_LIKE


@pytest.fixture(scope="module")
def offline_k8s_emulator() -> Iterator[Any]:
    """A Kubernetes API emulator in ``--offline-images`` mode, one per test module."""
    require(kubernetes_problem())
    from sandbox_runtime_emulators.kubernetes import KubernetesEmulator

    with KubernetesEmulator(offline_images=True) as running:
        yield running


@cache
def podman_problem() -> str | None:
    """Why Podman tests cannot run here, or None."""
    if shutil.which("podman") is None:
        return "podman is not installed (apt-get install podman catatonit)"
    if not Path("/usr/libexec/podman/catatonit").exists() and shutil.which("catatonit") is None:
        return "catatonit (Podman's init) is not installed"
    return docker_problem()  # the image is copied from the Docker engine


@pytest.fixture(scope="session")
def podman_socket(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A ``podman system service`` speaking the Docker API, with the test image loaded."""
    require(podman_problem())
    copied = subprocess.run(
        ["podman", "pull", "-q", f"docker-daemon:{DOCKER_IMAGE}"], capture_output=True, check=False
    )
    if copied.returncode != 0:
        pytest.fail(f"cannot copy {DOCKER_IMAGE} into podman: {copied.stderr.decode()}")
    socket_path = tmp_path_factory.mktemp("podman") / "podman.sock"
    conf = Path(__file__).parent / "images" / "podman-containers.conf"
    service = subprocess.Popen(
        ["podman", "system", "service", "--time=0", f"unix://{socket_path}"],
        env={**os.environ, "CONTAINERS_CONF": str(conf)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not socket_path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    try:
        if not socket_path.exists():
            pytest.fail("podman system service did not create its socket")
        yield f"unix://{socket_path}"
    finally:
        service.terminate()
        service.wait(timeout=30)
