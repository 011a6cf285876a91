"""One run spread over ags (emulator) + kubernetes (emulator) + docker, against each member alone.

    python benchmarks/bench_spread.py [--tasks 36] [--episode 4] [--json OUT]

Each task starts a sandbox, runs an "episode" (a sleep of ``--episode`` seconds, standing for
an agent's turns, then a deterministic computation whose answer is the task's reward: 1 when
the sandbox printed the expected number, 0 otherwise) and closes it.  The same tasks run
four ways, one after another:

* ``ags`` alone: the AGS emulator with ``StartSandboxInstance`` limited to ``--ags-qps``
  (5/s, the issue's quota), an instance quota of ``--ags-instances`` (what
  ``DescribeQuotaOverview`` reports) and ``--ags-start-latency`` seconds per start (no
  figure of the real service is published; 1 s is an assumption, say so when quoting);
  ``--ags-instances`` tasks at once;
* ``kubernetes`` alone: the Kubernetes emulator (Docker behind its pods) with its
  ``realistic`` API budget (5 requests/s, burst 10, per client), ``--k8s-cap`` at once;
* ``docker`` alone: the local engine, ``--docker-cap`` at once;
* ``spread``: members ags (quota 5/s, cap from the service), kubernetes, docker in that
  order, as many tasks at once as the caps add up to.

Reported: wall time of each run, the ratio of spread to the best single member, the rewards
(which must be the same everywhere: a reward never depends on where a sandbox ran), errors,
and spread's accounting per member.  The load average is printed with each run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sandbox_runtime import SandboxConfig, SandboxRuntime
from sandbox_runtime.backends.spread import SpreadBackend, SpreadOptions
from sandbox_runtime_emulators._ratelimit import Quota
from sandbox_runtime_emulators.ags._service import ServiceLimits
from sandbox_runtime_emulators.ags.server import AgsEmulator
from sandbox_runtime_emulators.kubernetes.server import REALISTIC_QUOTAS, KubernetesEmulator

IMAGE = "sandbox-runtime-test/base:bookworm"


def task_command(index: int, episode: float) -> tuple[str, str]:
    """The episode of task ``index`` and the output that earns its reward."""
    n = 1000 + index * 37
    return f"sleep {episode}; python3 -c 'print(sum(range({n})))'", f"{sum(range(n))}\n"


def run_tasks(
    make: Callable[[int], SandboxConfig], tasks: int, workers: int, episode: float
) -> dict[str, Any]:
    """Run every task on ``workers`` threads; wall time, rewards by task, errors."""

    def one(index: int) -> tuple[int, int | str, str]:
        command, expected = task_command(index, episode)
        try:
            with SandboxRuntime(make(index)) as sandbox:
                result = sandbox.exec(command, timeout=episode + 60)
                return index, int(result.stdout == expected), sandbox.id.split(":")[0]
        except Exception as exc:  # an infrastructure error: counted, never a 0
            return index, f"{type(exc).__name__}: {exc}", ""

    began = time.monotonic()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        outcomes = list(pool.map(one, range(tasks)))
    wall = time.monotonic() - began
    rewards = {i: r for i, r, _ in outcomes if isinstance(r, int)}
    errors = [r for _, r, _ in outcomes if isinstance(r, str)]
    return {
        "wall_s": round(wall, 2),
        "workers": workers,
        "reward_sum": sum(rewards.values()),
        "rewards": rewards,
        "errors": errors,
        "load_after": os.getloadavg(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=36)
    parser.add_argument("--episode", type=float, default=4.0)
    parser.add_argument("--ags-qps", type=float, default=5.0)
    parser.add_argument("--ags-instances", type=int, default=8)
    parser.add_argument("--ags-start-latency", type=float, default=1.0)
    parser.add_argument("--k8s-cap", type=int, default=4)
    parser.add_argument("--docker-cap", type=int, default=4)
    parser.add_argument("--only", nargs="*", default=["ags", "kubernetes", "docker", "spread"])
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()

    # Namespace isolation: the instances' commands and files see one tree (docs/ags-emulator.md).
    ags_emu = AgsEmulator(
        backend="local",
        local_isolation="namespace",
        limits=ServiceLimits(max_instances=args.ags_instances),
        rate_limits={"StartSandboxInstance": Quota(args.ags_qps)},
        latencies={"StartSandboxInstance": args.ags_start_latency},
    )
    k8s_emu = KubernetesEmulator(rate_limits=REALISTIC_QUOTAS)
    with ags_emu, k8s_emu:
        ags_options = ags_emu.backend_options()
        k8s_options = k8s_emu.backend_options()
        members = [
            {
                "backend": "ags",
                "options": ags_options,
                "image": "",
                "starts_per_second": args.ags_qps,
                "burst": int(args.ags_qps),
            },
            {"backend": "kubernetes", "options": k8s_options, "max_live": args.k8s_cap},
            {"backend": "docker", "max_live": args.docker_cap},
        ]
        spread_options = {"members": members}
        configs: dict[str, tuple[Callable[[int], SandboxConfig], int]] = {
            "ags": (
                lambda i: SandboxConfig(backend="ags", options=ags_options, lifetime=600),
                args.ags_instances,
            ),
            "kubernetes": (
                lambda i: SandboxConfig(
                    backend="kubernetes", image=IMAGE, options=k8s_options, lifetime=600
                ),
                args.k8s_cap,
            ),
            "docker": (
                lambda i: SandboxConfig(backend="docker", image=IMAGE, lifetime=600),
                args.docker_cap,
            ),
            "spread": (
                lambda i: SandboxConfig(
                    backend="spread", image=IMAGE, lifetime=600, options=spread_options
                ),
                args.ags_instances + args.k8s_cap + args.docker_cap,
            ),
        }
        # Warm each engine once (image, connections), outside the timings.
        for name in ("ags", "kubernetes", "docker"):
            with SandboxRuntime(configs[name][0](0)):
                pass
        results: dict[str, Any] = {}
        for name in args.only:
            make, workers = configs[name]
            print(
                f"# {name}: {args.tasks} tasks, {workers} at once, "
                f"load before {os.getloadavg()[0]:.2f}",
                flush=True,
            )
            results[name] = run_tasks(make, args.tasks, workers, args.episode)
            print(
                f"  wall {results[name]['wall_s']:.2f}s, rewards {results[name]['reward_sum']}"
                f"/{args.tasks}, errors {len(results[name]['errors'])}, "
                f"load after {results[name]['load_after'][0]:.2f}",
                flush=True,
            )
        if "spread" in results:
            counts = SpreadBackend.accounting(SpreadOptions.model_validate(spread_options))
            results["spread"]["accounting"] = [dataclasses.asdict(c) for c in counts]
            for c in counts:
                print(
                    f"  spread member {c.member}: started {c.started}, refused {c.refused}, "
                    f"failed {c.failed}, passed over {c.full}"
                    + (f", last refusal: {c.last_refusal}" if c.last_refusal else "")
                )
    singles = [results[n]["wall_s"] for n in ("ags", "kubernetes", "docker") if n in results]
    if "spread" in results and singles:
        best = min(singles)
        print(
            f"spread {results['spread']['wall_s']:.2f}s vs best single member {best:.2f}s: "
            f"{results['spread']['wall_s'] / best:.2f}x"
        )
        same = all(results[n]["rewards"] == results["spread"]["rewards"] for n in results)
        print(f"same rewards everywhere: {same}")
        results["summary"] = {
            "best_single_s": best,
            "ratio": results["spread"]["wall_s"] / best,
            "same_rewards": same,
        }
    results["args"] = vars(args)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(results, out, indent=1, default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
