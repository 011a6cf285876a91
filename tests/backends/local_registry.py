"""A real image registry for tests and benchmarks: Debian's ``docker-registry``, a slow link.

- :class:`LocalRegistry` runs ``/usr/bin/docker-registry`` on a free localhost port with its
  storage in a temporary directory (the engine allows plain HTTP to 127.0.0.0/8 registries).
- :class:`ThrottledProxy` is a TCP proxy in front of it whose downstream bytes share one
  bandwidth cap (a link, not a per-connection limit), and which can answer its first
  connections with ``503`` (a registry behind a failing load balancer) to exercise retries.
- :func:`push_random_image` uploads an image through the registry's HTTP API (no engine
  involved): one layer of incompressible bytes, on top of optional existing base layers, so
  each image really takes its size on disk once pulled.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import os
import socket
import subprocess
import tarfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REGISTRY_BINARY = "/usr/bin/docker-registry"
MANIFEST_V2 = "application/vnd.docker.distribution.manifest.v2+json"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def registry_problem() -> str | None:
    """Why a local registry cannot run here, or ``None``."""
    if not Path(REGISTRY_BINARY).exists():
        return f"{REGISTRY_BINARY} is missing (apt-get install docker-registry)"
    return None


class LocalRegistry:
    """``docker-registry serve`` on ``127.0.0.1:<port>`` with storage under ``root``."""

    def __init__(self, root: Path) -> None:
        self.port = free_port()
        storage = root / "storage"
        storage.mkdir(parents=True, exist_ok=True)
        config = root / "config.yml"
        config.write_text(
            "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\n"
            f"storage:\n  filesystem:\n    rootdirectory: {storage}\n  delete:\n    enabled: true\n"
            f"http:\n  addr: 127.0.0.1:{self.port}\n"
        )
        self._log = open(root / "registry.log", "wb")  # noqa: SIM115 - closed in close()
        self._process = subprocess.Popen(
            [REGISTRY_BINARY, "serve", str(config)], stdout=self._log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                urllib.request.urlopen(f"{self.url}/v2/", timeout=1).close()
                return
            time.sleep(0.1)
        self.close()
        raise RuntimeError(f"docker-registry did not answer on {self.url}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self._process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=10)
        if self._process.poll() is None:
            self._process.kill()
        self._log.close()


@dataclass
class _Bucket:
    """One shared bandwidth cap: each chunk waits for its share of the link."""

    rate: float
    lock: threading.Lock = field(default_factory=threading.Lock)
    next_free: float = 0.0

    def take(self, size: int) -> None:
        with self.lock:
            now = time.monotonic()
            start = max(now, self.next_free)
            self.next_free = start + size / self.rate
        delay = self.next_free - now
        if delay > 0:
            time.sleep(delay)


class ThrottledProxy:
    """A TCP proxy to ``127.0.0.1:target`` capped at ``bytes_per_second`` downstream."""

    def __init__(self, target: int, bytes_per_second: float, *, fail_first: int = 0) -> None:
        self.target = target
        self.fail_first = fail_first
        self.connections = 0
        self.bytes_down = 0
        self._bucket = _Bucket(bytes_per_second)
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._server.getsockname()[1])
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._server.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            self.connections += 1
            fail = self.connections <= self.fail_first
            threading.Thread(target=self._handle, args=(client, fail), daemon=True).start()

    def _handle(self, client: socket.socket, fail: bool) -> None:
        if fail:
            with contextlib.suppress(OSError), client:
                client.recv(65536)
                client.sendall(
                    b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                    b"Connection: close\r\n\r\n"
                )
            return
        try:
            upstream = socket.create_connection(("127.0.0.1", self.target))
        except OSError:
            client.close()
            return
        threading.Thread(target=self._copy, args=(client, upstream, False), daemon=True).start()
        self._copy(upstream, client, True)

    def _copy(self, source: socket.socket, sink: socket.socket, throttle: bool) -> None:
        with contextlib.suppress(OSError):
            while chunk := source.recv(16384):
                if throttle:
                    self._bucket.take(len(chunk))
                    self.bytes_down += len(chunk)
                sink.sendall(chunk)
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _request(method: str, url: str, data: bytes | None = None, ctype: str = "") -> tuple[int, str]:
    request = urllib.request.Request(url, data=data, method=method)
    if ctype:
        request.add_header("Content-Type", ctype)
    with urllib.request.urlopen(request, timeout=60) as answer:
        return answer.status, answer.headers.get("Location", "")


def _upload_blob(base: str, repo: str, data: bytes) -> str:
    digest = _digest(data)
    with contextlib.suppress(urllib.error.HTTPError):
        _request("HEAD", f"{base}/v2/{repo}/blobs/{digest}")
        return digest
    _, location = _request("POST", f"{base}/v2/{repo}/blobs/uploads/")
    if location.startswith("/"):
        location = base + location
    joiner = "&" if "?" in location else "?"
    _request("PUT", f"{location}{joiner}digest={digest}", data, "application/octet-stream")
    return digest


@dataclass(frozen=True)
class BaseLayers:
    """Layers already in the registry (``docker push``ed once) that images build on."""

    repo: str
    layers: tuple[dict[str, object], ...]
    diff_ids: tuple[str, ...]
    config: dict[str, object]


def _layer(payload: int, seed: str) -> tuple[bytes, str]:
    """A gzipped tar holding ``payload`` incompressible bytes; returns it and its diff id."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as archive:
        content = os.urandom(payload)
        info = tarfile.TarInfo(f"payload/{seed}.bin")
        info.size = len(content)
        info.mtime = 0
        archive.addfile(info, io.BytesIO(content))
    tar = raw.getvalue()
    return gzip.compress(tar, compresslevel=1, mtime=0), _digest(tar)


def push_random_image(
    registry: str, repo: str, tag: str, payload: int, base: BaseLayers | None = None
) -> str:
    """Push ``repo:tag`` holding one unique layer of ``payload`` bytes; returns its reference.

    ``base``'s layers must be in the same repository (push the base there under another tag).
    """
    blob, diff_id = _layer(payload, f"{repo.replace('/', '_')}-{tag}")
    layer_digest = _upload_blob(registry, repo, blob)
    layers = [*(base.layers if base else ())]
    config: dict[str, object] = dict(base.config) if base else {"Cmd": ["/bin/sh"]}
    image_config = {
        "architecture": "amd64",
        "os": "linux",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [*(base.diff_ids if base else ()), diff_id]},
    }
    config_bytes = json.dumps(image_config).encode()
    config_digest = _upload_blob(registry, repo, config_bytes)
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_V2,
        "config": {
            "mediaType": "application/vnd.docker.container.image.v1+json",
            "size": len(config_bytes),
            "digest": config_digest,
        },
        "layers": [
            *layers,
            {
                "mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
                "size": len(blob),
                "digest": layer_digest,
            },
        ],
    }
    _request(
        "PUT", f"{registry}/v2/{repo}/manifests/{tag}", json.dumps(manifest).encode(), MANIFEST_V2
    )
    return f"{registry.removeprefix('http://')}/{repo}:{tag}"


def base_layers(registry: str, repo: str, tag: str) -> BaseLayers:
    """The layers and config of ``repo:tag`` already in the registry (to build on)."""
    request = urllib.request.Request(f"{registry}/v2/{repo}/manifests/{tag}")
    request.add_header("Accept", MANIFEST_V2)
    with urllib.request.urlopen(request, timeout=60) as answer:
        manifest = json.load(answer)
    with urllib.request.urlopen(
        f"{registry}/v2/{repo}/blobs/{manifest['config']['digest']}", timeout=60
    ) as answer:
        config = json.load(answer)
    return BaseLayers(
        repo=repo,
        layers=tuple(manifest["layers"]),
        diff_ids=tuple(config["rootfs"]["diff_ids"]),
        config=config.get("config") or {},
    )
