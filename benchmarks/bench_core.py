"""Start and exec latency of the docker and local backends against raw baselines, in one run.

Baselines are measured in the same process, interleaved round by round with the library so
that drift in the machine's load hits both sides alike:

- docker start: docker-py's low-level ``create_container`` + ``start`` with the same image,
  command, init, auto-remove and labels; and the high-level ``containers.run(detach=True)``.
- docker exec: docker-py's ``exec_create`` + ``exec_start`` + ``exec_inspect`` (what
  ``Container.exec_run`` does, plus the exit code) of ``echo hi``.
- local exec: ``subprocess.run(["bash", "-c", "echo hi"])``.

Usage: ``python benchmarks/bench_core.py [--rounds 30] [--image IMAGE] [--skip-docker]``.
Prints medians, 90th percentiles and library/baseline ratios (lower is better, 1.00 = parity).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sandbox_runtime import SandboxConfig, SandboxRuntime

DEFAULT_IMAGE = "sandbox-runtime-test/base:bookworm"


def timed(action: Callable[[], Any]) -> tuple[float, Any]:
    began = time.perf_counter()
    value = action()
    return time.perf_counter() - began, value


def summarize(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return statistics.median(ordered), p90


def report(title: str, rows: dict[str, list[float]], baseline: str) -> None:
    base_median, _ = summarize(rows[baseline])
    print(f"\n{title}")
    print(f"  {'':<34}{'median ms':>10}{'p90 ms':>10}{'ratio':>8}")
    for name, samples in rows.items():
        median, p90 = summarize(samples)
        print(f"  {name:<34}{median * 1e3:>10.2f}{p90 * 1e3:>10.2f}{median / base_median:>8.2f}")


def bench_docker(image: str, rounds: int) -> None:
    import docker

    api = docker.APIClient(version="auto")
    high = docker.from_env()
    config = SandboxConfig(backend="docker", image=image, lifetime=600)
    # Warm both paths (image layers in page cache, client pools, version handshake).
    with SandboxRuntime(config) as sandbox:
        sandbox.exec("true")

    start: dict[str, list[float]] = {
        "raw docker-py create+start": [],
        "raw docker-py containers.run": [],
        "sandbox-runtime start": [],
    }
    host_config = api.create_host_config(init=True, auto_remove=True)
    for _ in range(rounds):
        seconds, container = timed(
            lambda: api.start(
                api.create_container(
                    image,
                    entrypoint=["sleep"],
                    command=["600"],
                    labels={"bench": "raw"},
                    host_config=host_config,
                )["Id"]
            )
        )
        start["raw docker-py create+start"].append(seconds)
        api.remove_container(api.containers(filters={"label": "bench=raw"})[0]["Id"], force=True)

        seconds, container = timed(
            lambda: high.containers.run(
                image,
                entrypoint=["sleep"],
                command=["600"],
                detach=True,
                init=True,
                auto_remove=True,
                labels={"bench": "high"},
            )
        )
        start["raw docker-py containers.run"].append(seconds)
        container.remove(force=True)

        sandbox = SandboxRuntime(config)
        seconds, _ = timed(sandbox.start)
        start["sandbox-runtime start"].append(seconds)
        sandbox.close()
    report("docker: start latency", start, "raw docker-py create+start")

    exec_rows: dict[str, list[float]] = {
        "raw docker-py exec (create+start+inspect)": [],
        "sandbox-runtime exec": [],
    }
    with SandboxRuntime(config) as sandbox:
        container_id = sandbox.id

        def raw_exec() -> int:
            exec_id = api.exec_create(container_id, ["echo", "hi"])["Id"]
            api.exec_start(exec_id)
            return int(api.exec_inspect(exec_id)["ExitCode"])

        for _ in range(rounds * 3):
            exec_rows["raw docker-py exec (create+start+inspect)"].append(timed(raw_exec)[0])
            exec_rows["sandbox-runtime exec"].append(timed(lambda: sandbox.exec("echo hi"))[0])
    report("docker: exec latency (echo hi)", exec_rows, "raw docker-py exec (create+start+inspect)")


def bench_local(rounds: int) -> None:
    rows: dict[str, list[float]] = {
        "subprocess.run bash -c": [],
        "sandbox-runtime local exec": [],
        "sandbox-runtime local start+close": [],
    }
    with tempfile.TemporaryDirectory() as base:
        config = SandboxConfig(backend="local", options={"base_dir": Path(base)})
        with SandboxRuntime(config) as sandbox:
            for _ in range(rounds * 3):
                rows["subprocess.run bash -c"].append(
                    timed(
                        lambda: subprocess.run(
                            ["bash", "-c", "echo hi"], capture_output=True, check=False
                        )
                    )[0]
                )
                rows["sandbox-runtime local exec"].append(timed(lambda: sandbox.exec("echo hi"))[0])
        for _ in range(rounds):
            rows["sandbox-runtime local start+close"].append(
                timed(lambda: SandboxRuntime(config).start().close())[0]
            )
    report("local: exec latency (echo hi)", rows, "subprocess.run bash -c")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--image", default=DEFAULT_IMAGE)
    parser.add_argument("--skip-docker", action="store_true")
    args = parser.parse_args()
    bench_local(args.rounds)
    if not args.skip_docker:
        bench_docker(args.image, args.rounds)


if __name__ == "__main__":
    main()
