"""Images at SWE scale on docker: pre-pull from the schedule and the image budget, measured.

A real registry (Debian's ``docker-registry``, tests/backends/local_registry.py) holds N task
images, each the test base image (pushed once with ``docker push``, so the engine already has
its layer) plus one layer of incompressible bytes of its own; the engine pulls them through a
TCP proxy capped at ``--link`` bytes/s, so every pull moves real bytes and takes seconds.

Each task is real work in a real sandbox: ``Sandbox.start()`` from its image, a check that
the image is the task's own (its payload file is there and hashes as pushed: reward 1, else
0), an "episode" (``sleep``), close.  Workers take tasks in schedule order.  Two runs, each
from an engine without any task image and with the budget on:

- ``on-demand``: the start pulls the image (the library's behaviour before prefetch);
- ``prefetch``: before taking task i, a worker passes the next ``--ahead`` images of the
  schedule to ``DockerBackend.prefetch_images`` (what the schedule-driven prefetcher calls);
- ``present``: every image pulled before the clock starts (no budget): the start alone, so
  that the pull's share of the other two runs' wait is their wait less this one's.

Reported per run: wait for the sandbox on the critical path (the start, pull included), bytes
moved over the link, disk our images took (sampled every 0.25 s; ``/system/df`` own bytes)
against the budget, and outcomes (rewards 1 / 0 / errors: a pull fault must be an error,
never a 0).

Usage: ``python benchmarks/bench_images.py [--images 32] [--payload-mb 6] [--link-mb 4]
[--budget-images 10] [--workers 2] [--ahead 4] [--episode 1.0]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import docker
from tests.backends.local_registry import (
    LocalRegistry,
    ThrottledProxy,
    base_layers,
    push_random_image,
)

from sandbox_runtime import SandboxConfig, SandboxError, SandboxRuntime
from sandbox_runtime.backends.docker import DockerBackend, DockerOptions
from sandbox_runtime.backends.docker._image_cache import _disk_usage

BASE = "sandbox-runtime-test/base:bookworm"
REPO = "swe/task"


@dataclass
class Run:
    """What one mode measured."""

    mode: str
    waits: list[float] = field(default_factory=list)
    rewards: dict[str, int] = field(default_factory=lambda: {"1": 0, "0": 0, "error": 0})
    errors: list[str] = field(default_factory=list)
    high_water: int = 0
    wall: float = 0.0
    link_bytes: int = 0
    evictions: int = 0


def push_tasks(registry: LocalRegistry, count: int, payload: int) -> None:
    """Push the base once (``docker push``), then ``count`` task images on it."""
    api = docker.APIClient(version="auto")
    pushed = f"127.0.0.1:{registry.port}/{REPO}:base"
    api.tag(BASE, pushed.rsplit(":", 1)[0], "base")
    for line in api.push(pushed.rsplit(":", 1)[0], tag="base", stream=True, decode=True):
        if line.get("error"):
            raise RuntimeError(line["error"])
    api.remove_image(pushed)
    base = base_layers(registry.url, REPO, "base")
    for index in range(count):
        push_random_image(registry.url, REPO, f"t{index:02d}", payload, base)


def _on_disk(api: Any, prefix: str) -> int:
    used = 0
    for item in _disk_usage(api).get("Images") or ():
        if any(tag.startswith(prefix) for tag in item.get("RepoTags") or ()):
            shared = item.get("SharedSize")
            size = int(item.get("Size") or 0)
            used += size - int(shared) if shared is not None and int(shared) >= 0 else size
    return used


def _sampler(api: Any, prefix: str, run: Run, stop: threading.Event) -> None:
    while not stop.is_set():
        run.high_water = max(run.high_water, _on_disk(api, prefix))
        stop.wait(0.25)


def _clear(api: Any, prefix: str) -> None:
    for item in api.images():
        for tag in item.get("RepoTags") or ():
            if tag.startswith(prefix):
                api.remove_image(tag, force=True)


CHECK = (
    "set -e; f=$(ls /payload/*.bin); n=$(basename $f .bin); "
    'test "$n" = "swe_task-$TASK"; sha256sum $f >/dev/null; sleep $EPISODE'
)


def _task(ref: str, tag: str, options: dict[str, Any], episode: float, run: Run) -> None:
    config = SandboxConfig(
        backend="docker",
        image=ref,
        options=options,
        lifetime=600,
        env={"TASK": tag, "EPISODE": str(episode)},
    )
    began = time.monotonic()
    try:
        with SandboxRuntime(config) as sandbox:
            run.waits.append(time.monotonic() - began)
            result = sandbox.exec(["sh", "-c", CHECK], timeout=120)
            run.rewards["1" if result.exit_code == 0 else "0"] += 1
    except SandboxError as exc:
        run.rewards["error"] += 1
        run.errors.append(f"{tag}: {type(exc).__name__}: {exc}")


def run_mode(mode: str, args: argparse.Namespace, proxy: ThrottledProxy, tags: list[str]) -> Run:
    api = docker.APIClient(version="auto")
    prefix = f"127.0.0.1:{proxy.port}/{REPO}:"
    _clear(api, prefix)
    record = Path(tempfile.mkdtemp()) / "images.json"
    payload = int(args.payload_mb * 1e6)
    options: dict[str, Any] = {
        "image_cache_budget": int(args.budget_images * payload * 1.05),
        "image_record": str(record),
        "prefetch_concurrency": args.ahead,
    }
    refs = [prefix + tag for tag in tags]
    if mode == "present":
        del options["image_cache_budget"]
        for ref in refs:
            DockerBackend._images(DockerOptions(**options)).ensure(ref)
    typed = DockerOptions(**options)
    run = Run(mode)
    stop = threading.Event()
    sampler = threading.Thread(target=_sampler, args=(api, prefix, run, stop), daemon=True)
    sampler.start()
    bytes_before = proxy.bytes_down
    position = iter(range(len(refs)))
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                index = next(position, None)
            if index is None:
                return
            if mode == "prefetch":
                DockerBackend.prefetch_images(refs[index + 1 : index + 1 + args.ahead], typed)
            _task(refs[index], tags[index], options, args.episode, run)

    began = time.monotonic()
    with ThreadPoolExecutor(args.workers) as pool:
        for done in [pool.submit(worker) for _ in range(args.workers)]:
            done.result()
    run.wall = time.monotonic() - began
    cache = DockerBackend._images(typed)
    cache.wait_pulls(timeout=120)
    stop.set()
    sampler.join()
    run.link_bytes = proxy.bytes_down - bytes_before
    run.evictions = cache.evictions
    _clear(api, prefix)
    return run


def _report(runs: list[Run], args: argparse.Namespace, load: tuple[float, ...]) -> str:
    budget = int(args.budget_images * args.payload_mb * 1e6 * 1.05)
    lines = [
        f"bench_images: {args.images} images of base + {args.payload_mb} MB own layer, link "
        f"{args.link_mb} MB/s, budget {budget / 1e6:.1f} MB, {args.workers} workers, "
        f"ahead {args.ahead}, episode {args.episode}s; load average before {load}",
        "",
        "| mode | wall s | start wait total s | median s | p90 s | link MB | disk high-water MB "
        "| over budget | evictions | rewards 1/0/error |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        waits = sorted(run.waits) or [0.0]
        p90 = waits[min(len(waits) - 1, int(0.9 * len(waits)))]
        lines.append(
            f"| {run.mode} | {run.wall:.1f} | {sum(waits):.1f} | {statistics.median(waits):.2f} "
            f"| {p90:.2f} | {run.link_bytes / 1e6:.1f} | {run.high_water / 1e6:.1f} "
            f"| {'n/a' if run.mode == 'present' else 'yes' if run.high_water > budget else 'no'} "
            f"| {run.evictions} "
            f"| {run.rewards['1']}/{run.rewards['0']}/{run.rewards['error']} |"
        )
    for run in runs:
        lines += [f"{run.mode} error: {error}" for error in run.errors[:5]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=32)
    parser.add_argument("--payload-mb", type=float, default=6.0)
    parser.add_argument("--link-mb", type=float, default=4.0)
    parser.add_argument("--budget-images", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--ahead", type=int, default=4)
    parser.add_argument("--episode", type=float, default=1.0)
    parser.add_argument("--modes", default="on-demand,prefetch,present")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    load = tuple(round(x, 2) for x in os.getloadavg())
    with tempfile.TemporaryDirectory() as root:
        registry = LocalRegistry(Path(root))
        try:
            push_tasks(registry, args.images, int(args.payload_mb * 1e6))
            tags = [f"t{index:02d}" for index in range(args.images)]
            proxy = ThrottledProxy(registry.port, args.link_mb * 1e6)
            runs = [run_mode(mode, args, proxy, tags) for mode in args.modes.split(",")]
            proxy.close()
        finally:
            registry.close()
    print(_report(runs, args, load))
    print(f"load average after: {tuple(round(x, 2) for x in os.getloadavg())}")
    if args.json:
        args.json.write_text(json.dumps([run.__dict__ for run in runs], indent=1))


if __name__ == "__main__":
    main()
