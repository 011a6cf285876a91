"""Fixtures for the AGS tests: one emulator per module, helpers to reach it, and for the
registry tests a real local registry and small images to push to it."""

from __future__ import annotations

import contextlib
import io
import shutil
import socket
import subprocess
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from tests.conftest import bwrap_problem, require

try:
    import e2b  # noqa: F401
except ImportError:  # pragma: no cover - fails in CI, skips elsewhere
    require("needs the ags extra and the emulators: pip install -e '.[ags]' -e ./emulators")

from sandbox_runtime_emulators.ags.server import AgsEmulator


def isolation() -> str:
    """Namespace isolation where bubblewrap works (absolute paths agree), else none."""
    return "namespace" if bwrap_problem() is None else "none"


@pytest.fixture(scope="module")
def emulator() -> Iterator[AgsEmulator]:
    """A running emulator whose instances are local sandboxes."""
    with AgsEmulator(backend="local", local_isolation=isolation()) as running:
        yield running


@pytest.fixture(autouse=True)
def _clean_faults(emulator: AgsEmulator) -> Iterator[None]:
    emulator.faults.clear()
    yield
    emulator.faults.clear()


# -- a real registry for the push tests ------------------------------------------------------

#: Login of the test registry; the htpasswd line below is its bcrypt hash (htpasswd -Bbn).
REGISTRY_USER = "srt-push"
REGISTRY_PASSWORD = "srt-test-registry-password"
_HTPASSWD = "srt-push:$2y$05$opK6S2oJvyFQh48yajDA7umJ67r.4Zu2aFpj6OM4jV5ekHCXj6WyS\n"
TINY_IMAGES = ("srt-push-test/tiny-a:1", "srt-push-test/tiny-b:2")


@dataclass(frozen=True)
class LocalRegistry:
    """The Debian ``docker-registry`` (CNCF distribution) on 127.0.0.1, with basic auth."""

    domain: str
    username: str
    password: str


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def local_registry(
    tmp_path_factory: pytest.TempPathFactory, docker_image: str
) -> Iterator[LocalRegistry]:
    """A registry the local Docker engine can push to (127.0.0.0/8 is insecure-allowed)."""
    binary = shutil.which("docker-registry")
    require(None if binary else "docker-registry is not installed: apt-get install docker-registry")
    assert binary is not None
    root = tmp_path_factory.mktemp("registry")
    (root / "htpasswd").write_text(_HTPASSWD)
    port = _free_port()
    (root / "config.yml").write_text(
        "version: 0.1\n"
        "log:\n  level: warn\n"
        f"storage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n  secret: srt-test-only\n"
        f"auth:\n  htpasswd:\n    realm: srt-test\n    path: {root / 'htpasswd'}\n"
    )
    log = (root / "log").open("w")
    server = subprocess.Popen([binary, "serve", str(root / "config.yml")], stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/v2/", timeout=2).status_code == 401:
                    break
            except httpx.HTTPError:
                pass
            assert server.poll() is None, (root / "log").read_text()
            assert time.monotonic() < deadline, "the registry did not start"
            time.sleep(0.1)
        yield LocalRegistry(f"127.0.0.1:{port}", REGISTRY_USER, REGISTRY_PASSWORD)
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


@pytest.fixture(scope="session")
def tiny_images(docker_image: str) -> Iterator[tuple[str, ...]]:
    """Two images of one small file each, built FROM scratch (no registry needed)."""
    import docker

    client = docker.from_env()
    built: set[str] = set()
    for tag in TINY_IMAGES:
        payload = f"image {tag}\n".encode()
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as context:
            for name, data in (
                ("Dockerfile", b"FROM scratch\nCOPY hello /hello\n"),
                ("hello", payload),
            ):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                context.addfile(info, io.BytesIO(data))
        buffer.seek(0)
        image, _logs = client.images.build(
            fileobj=buffer, custom_context=True, tag=tag, rm=True, pull=False
        )
        built.add(image.id)
    try:
        yield TINY_IMAGES
    finally:
        # By id, so that the copies tagged for the test registries go too.
        for image_id in built:
            with contextlib.suppress(docker.errors.APIError):
                client.images.remove(image_id, force=True)
        client.close()
