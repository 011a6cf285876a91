"""A 200 MB upload and download grow the client's memory by at most 64 MB, on every backend.

The client runs in a child process that reports its peak resident size (``ru_maxrss``) after
a warm-up transfer and again after the round trip; the emulators run in this process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DOCKER_IMAGE, bwrap_problem, require

pytestmark = [pytest.mark.slow]

SIZE = 200 * 1024 * 1024
LIMIT = 64 * 1024 * 1024

_CHILD = """
import json, resource, sys
from pathlib import Path
from sandbox_runtime import SandboxRuntime
config, big, out = json.loads(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
def peak(): return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
with SandboxRuntime(**config) as sandbox:
    warm = big.with_name("warm.bin")
    warm.write_bytes(b"w" * (9 * 1024 * 1024))  # every code path once, above one piece
    sandbox.upload(warm, "warm.bin")
    sandbox.download("warm.bin", out.with_name("warm.back"))
    before = peak()
    sandbox.upload(big, "big.bin")
    sandbox.download("big.bin", out)
    print(json.dumps({"before": before, "after": peak()}))
"""


def _round_trip(config: dict[str, Any], tmp_path: Path) -> int:
    big = tmp_path / "big.bin"
    with big.open("wb") as handle:
        for _ in range(SIZE // (1 << 20)):
            handle.write(os.urandom(1 << 20))
    out = tmp_path / "big.back"
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(config), str(big), str(out)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert out.stat().st_size == SIZE
    with big.open("rb") as a, out.open("rb") as b:
        while True:
            x, y = a.read(1 << 22), b.read(1 << 22)
            assert x == y
            if not x:
                break
    peaks = json.loads(done.stdout.strip().splitlines()[-1])
    grew = int(peaks["after"] - peaks["before"])
    print(f"{config['backend']}: 200 MiB round trip grew the client by {grew / 2**20:.1f} MiB")
    return grew


def test_local(tmp_path: Path) -> None:
    grew = _round_trip({"backend": "local", "options": {"base_dir": str(tmp_path / "b")}}, tmp_path)
    assert grew <= LIMIT, f"grew {grew / 2**20:.0f} MiB"


def test_docker(docker_image: str, tmp_path: Path) -> None:
    grew = _round_trip({"backend": "docker", "image": docker_image}, tmp_path)
    assert grew <= LIMIT, f"grew {grew / 2**20:.0f} MiB"


@pytest.fixture
def k8s_options(docker_image: str, tmp_path: Path) -> Iterator[dict[str, Any]]:
    from tests.conftest import kubernetes_problem

    require(kubernetes_problem())
    from sandbox_runtime_emulators.kubernetes import KubernetesEmulator

    with KubernetesEmulator() as emulator:
        yield {"kubeconfig": str(emulator.write_kubeconfig(tmp_path / "kubeconfig"))}


def test_kubernetes(k8s_options: dict[str, Any], tmp_path: Path) -> None:
    config = {"backend": "kubernetes", "image": DOCKER_IMAGE, "options": k8s_options}
    grew = _round_trip(config, tmp_path)
    assert grew <= LIMIT, f"grew {grew / 2**20:.0f} MiB"


def test_ags(tmp_path: Path) -> None:
    require(bwrap_problem())
    from sandbox_runtime_emulators.ags.server import AgsEmulator

    with AgsEmulator(backend="local", local_isolation="namespace") as emulator:
        options = {
            k: v.get_secret_value() if hasattr(v, "get_secret_value") else v
            for k, v in emulator.backend_options().items()
        }
        config = {"backend": "ags", "workdir": "/testbed", "options": options}
        grew = _round_trip(config, tmp_path)
    assert grew <= LIMIT, f"grew {grew / 2**20:.0f} MiB"
