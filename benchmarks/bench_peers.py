"""Start and exec latency against a peer library from PyPI: mini-swe-agent's DockerEnvironment.

mini-swe-agent drives the ``docker`` command line (``docker run -d``, ``docker exec``), a design
many agent frameworks share.  Its dependencies are heavy and unrelated to ours, so it runs in
its own interpreter (``--peer-python``, a virtualenv with ``pip install mini-swe-agent``) as a
worker that times each operation itself and reports the seconds; this process interleaves one
of ours with one of the peer's, so machine load hits both alike.

Usage::

    python3 -m venv /tmp/peer && /tmp/peer/bin/pip install mini-swe-agent
    python benchmarks/bench_peers.py --peer-python /tmp/peer/bin/python [--rounds 30]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from typing import Any

from sandbox_runtime import SandboxConfig, SandboxRuntime

DEFAULT_IMAGE = "sandbox-runtime-test/base:bookworm"

# Runs in the peer's interpreter: one JSON request per line in, one "BENCH {json}" line out.
WORKER = r"""
import json, sys, time, logging
logging.disable(logging.CRITICAL)
from minisweagent.environments.docker import DockerEnvironment
image = sys.argv[1]
env = None
for line in sys.stdin:
    request = json.loads(line)
    began = time.perf_counter()
    if request["op"] == "start":
        if env is not None:
            env.cleanup()
        env = DockerEnvironment(image=image, cwd="/", interpreter=["bash", "-c"])
    else:
        result = env.execute({"command": "echo hi"})
        assert result["output"] == "hi\n", result
    print("BENCH " + json.dumps({"seconds": time.perf_counter() - began}), flush=True)
env.cleanup()
"""


class Peer:
    """The peer worker process."""

    def __init__(self, python: str, image: str) -> None:
        self._process = subprocess.Popen(
            [python, "-c", WORKER, image],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )

    def time(self, op: str) -> float:
        assert self._process.stdin is not None
        assert self._process.stdout is not None
        self._process.stdin.write(json.dumps({"op": op}) + "\n")
        self._process.stdin.flush()
        while True:  # the peer prints a banner of its own on stdout
            line = self._process.stdout.readline()
            if not line:
                raise RuntimeError("the peer worker exited")
            if line.startswith("BENCH "):
                answer: dict[str, Any] = json.loads(line[len("BENCH ") :])
                return float(answer["seconds"])

    def close(self) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()
        self._process.wait(timeout=60)


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--peer-python", required=True, help="interpreter with mini-swe-agent")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--image", default=DEFAULT_IMAGE)
    args = parser.parse_args()

    config = SandboxConfig(backend="docker", image=args.image, lifetime=600, workdir="/")
    peer = Peer(args.peer_python, args.image)
    ours_start: list[float] = []
    peer_start: list[float] = []
    ours_exec: list[float] = []
    peer_exec: list[float] = []
    try:
        with SandboxRuntime(config) as warm:  # warm the image cache and client pools
            warm.exec("true")
        peer.time("start")
        peer.time("exec")
        for _ in range(args.rounds):
            sandbox = SandboxRuntime(config)
            began = time.perf_counter()
            sandbox.start()
            ours_start.append(time.perf_counter() - began)
            peer_start.append(peer.time("start"))
            for _ in range(3):
                began = time.perf_counter()
                result = sandbox.exec("echo hi")
                ours_exec.append(time.perf_counter() - began)
                assert result.stdout == "hi\n"
                peer_exec.append(peer.time("exec"))
            sandbox.close()
    finally:
        peer.close()

    print(f"\n{'':<38}{'median ms':>10}{'ratio':>8}")
    for label, ours, theirs in (
        ("start", ours_start, peer_start),
        ("exec (echo hi)", ours_exec, peer_exec),
    ):
        print(f"  {'mini-swe-agent ' + label:<36}{median_ms(theirs):>10.2f}{1.0:>8.2f}")
        ratio = median_ms(ours) / median_ms(theirs)
        print(f"  {'sandbox-runtime ' + label:<36}{median_ms(ours):>10.2f}{ratio:>8.2f}")


if __name__ == "__main__":
    main()
