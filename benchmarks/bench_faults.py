"""How fast the failure modes of issue 20 (item 3) are, in one run.

1. Calls after the in-sandbox agent died (``pkill -9 -f sandbox-agent`` from inside), with
   ``agent: on`` and ``auto`` (the agent restarts in the background meanwhile) and ``on``
   with restarts turned off, against a native-only sandbox (``agent: off``): ``exec("true")``
   interleaved round by round from 0.2 s after the kill, so the restart's window is in the
   samples and drift in the machine's load hits every side alike.
2. Restarting the agent instead (a detached docker exec of its start command with a fresh
   token, until ``/health`` answers): the one-off cost a restart would add, against the
   per-call saving of the agent path over the native one.
3. The first call after ``docker kill``, for ``agent: auto``, ``on`` and ``off``.
4. AGS (emulator): the first call after the control plane stopped the instance, both planes.

Three runs on the shared 2-core machine: ``benchmarks/results/faults-2026-11-26-run*.txt``
(run 1 without the AGS part).

Usage: ``python benchmarks/bench_faults.py [--rounds 50] [--repeats 3] [--image IMAGE]
[--skip-ags]``.  Prints medians and 95th percentiles in ms.
"""

from __future__ import annotations

import argparse
import contextlib
import secrets
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import httpx

from sandbox_runtime import SandboxConfig, SandboxGoneError, SandboxRuntime

DEFAULT_IMAGE = "sandbox-runtime-test/base:bookworm"
PARENT = "cat /proc/$PPID/comm 2>/dev/null || echo outside"
AGENT = "/tmp/.sandbox-runtime"


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered), p95


def timed(action: Callable[[], Any]) -> float:
    began = time.perf_counter()
    action()
    return time.perf_counter() - began


def sandbox(image: str, agent: str) -> SandboxRuntime:
    config = SandboxConfig(backend="docker", image=image, lifetime=900, options={"agent": agent})
    return SandboxRuntime(config).start()


def await_agent(box: SandboxRuntime) -> None:
    deadline = time.monotonic() + 60
    while box.exec(PARENT).stdout.strip() != "sandbox-agent":
        if time.monotonic() > deadline:
            raise RuntimeError("the agent never answered")
        time.sleep(0.05)


def inside(api: Any, box: SandboxRuntime, argv: list[str], *, detach: bool = False) -> None:
    api.exec_start(api.exec_create(box.id, argv), detach=detach)


def bench_after_death(api: Any, image: str, rounds: int) -> dict[str, list[float]]:
    """``exec("true")`` on native-only, after the agent's death (on, auto), with the agent."""
    boxes = {
        "native only (agent off)": sandbox(image, "off"),
        "agent on, after its death": sandbox(image, "on"),
        "agent auto, after its death": sandbox(image, "auto"),
        "agent on, after its death, no restart": sandbox(image, "on"),
        "agent on, alive (reference)": sandbox(image, "on"),
    }
    try:
        for name, box in boxes.items():
            if name != "native only (agent off)":
                await_agent(box)
            if "no restart" in name:
                box.backend._agent._restarts_left = 0  # type: ignore[attr-defined]
            if "death" in name:
                inside(api, box, ["pkill", "-9", "-f", "sandbox-agent"])
        time.sleep(0.2)
        first = {name: timed(partial(box.exec, "true")) for name, box in boxes.items()}
        samples: dict[str, list[float]] = {name: [] for name in boxes}
        for _ in range(rounds):
            for name, box in boxes.items():
                samples[name].append(timed(partial(box.exec, "true")))
        for name, value in first.items():
            samples[f"{name}: first call"] = [value]
        return samples
    finally:
        for box in boxes.values():
            box.close()


def bench_restart(api: Any, image: str) -> float:
    """Seconds from a restart's docker exec until a new agent answers ``/health``."""
    box = sandbox(image, "on")
    try:
        await_agent(box)
        inside(api, box, ["pkill", "-9", "-f", "sandbox-agent"])
        time.sleep(0.2)
        address = api.inspect_container(box.id)["NetworkSettings"]["IPAddress"]
        start = (
            f"ENVD_ACCESS_TOKEN={secrets.token_urlsafe(24)} exec {AGENT}/sandbox-agent -E -s "
            f"{AGENT}/agent.zip --host 0.0.0.0 --port 49983 --exec-like </dev/null >/dev/null 2>&1"
        )
        began = time.perf_counter()
        inside(api, box, ["/bin/sh", "-c", start], detach=True)
        with httpx.Client(timeout=2) as client:
            while True:
                try:
                    if client.get(f"http://{address}:49983/health").status_code in (200, 204):
                        return time.perf_counter() - began
                except httpx.HTTPError:
                    time.sleep(0.005)
    finally:
        box.close()


def bench_container_kill(api: Any, image: str, repeats: int) -> dict[str, list[float]]:
    """The first call after ``docker kill``: SandboxGoneError, and how long it took."""
    samples: dict[str, list[float]] = {}
    for agent in ("auto", "on", "off"):
        for _ in range(repeats):
            box = sandbox(image, agent)
            try:
                if agent != "off":
                    await_agent(box)
                api.kill(box.id)
                began = time.perf_counter()
                try:
                    box.exec("true")
                    raise RuntimeError("a killed container ran a command")
                except SandboxGoneError:
                    pass
                samples.setdefault(f"agent {agent}", []).append(time.perf_counter() - began)
            finally:
                box.close()
    return samples


def bench_ags(repeats: int) -> dict[str, list[float]]:
    """The first call after the control plane stopped the instance (AGS emulator)."""
    from sandbox_runtime.backends.ags._options import AgsOptions, cloud_client, e2b_api
    from sandbox_runtime_emulators.ags.server import AgsEmulator

    samples: dict[str, list[float]] = {}
    with AgsEmulator(backend="local", local_isolation="none") as emulator:
        for plane in ("cloud", "e2b"):
            extra = {"control_plane": "e2b", "api_key": emulator.api_key} if plane == "e2b" else {}
            options = emulator.backend_options(**extra)
            for _ in range(repeats):
                with SandboxRuntime(backend="ags", workdir="/tmp", options=options) as box:
                    box.exec("true")
                    coerced = AgsOptions(**options)
                    if plane == "cloud":
                        cloud_client(coerced).stop_instance(box.id)
                    else:
                        e2b_api(coerced).kill(box.id)
                    began = time.perf_counter()
                    with contextlib.suppress(SandboxGoneError):
                        box.exec("true")
                    samples.setdefault(f"ags {plane}", []).append(time.perf_counter() - began)
    return samples


def table(title: str, rows: dict[str, list[float]]) -> None:
    print(f"\n{title}")
    print(f"  {'':<40}{'n':>4}{'median ms':>11}{'p95 ms':>10}")
    for name, values in rows.items():
        median, p95 = percentiles(values)
        print(f"  {name:<40}{len(values):>4}{median * 1e3:>11.1f}{p95 * 1e3:>10.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--image", default=DEFAULT_IMAGE)
    parser.add_argument("--skip-ags", action="store_true")
    args = parser.parse_args()
    import docker

    api = docker.APIClient(version="auto")
    after = bench_after_death(api, args.image, args.rounds)
    table(f"exec('true') after the agent's death, {args.rounds} interleaved rounds", after)
    native, _ = percentiles(after["native only (agent off)"])
    for name in after:
        if "death" not in name or "first" in name:
            continue
        print(f"  ratio to native, {name}: {percentiles(after[name])[0] / native:.2f}")
    restarts = [bench_restart(api, args.image) for _ in range(args.repeats)]
    table("restarting the agent instead (exec until /health answers)", {"restart": restarts})
    alive, _ = percentiles(after["agent on, alive (reference)"])
    saving = native - alive
    print(f"  per-call saving of the agent over native: {saving * 1e3:.1f} ms; a restart pays")
    print(f"  off after {statistics.median(restarts) / saving:.0f} calls")
    table(
        "first call after docker kill (SandboxGoneError)",
        bench_container_kill(api, args.image, args.repeats),
    )
    if not args.skip_ags:
        table("AGS emulator: first call after the instance was stopped", bench_ags(args.repeats))


if __name__ == "__main__":
    main()
