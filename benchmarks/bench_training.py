"""A simulated training loop with and without schedule-driven prefetch (issue 23, item 5).

Each step takes ``tasks x group`` sandboxes at once (every task its own configuration; a
task's group copies share one), runs episodes of random length (some longer than the
sandbox's lifetime, which the lease of docs/leases.md must carry), "grades" each in a fresh
sandbox of the task's configuration (``--grading fresh``, the default: strict grading's way;
``same``: in the rollout's own sandbox), closes them, then pauses for a fixed "model update"
while no sandbox is needed.
Both modes begin with the same ``--startup`` pause (loading the model).  With prefetch, the
trainer feeds step 0's batch before that pause and the next step's batch when a step begins,
so those sandboxes start during the pause, this step's episodes and the update; the step's
grading sandboxes are scheduled after all of its rollout sandboxes (the library's
``run --prefetch`` orders them the same way), so they start while the episodes run.

Measured per engine and mode: the sandbox wait on each step's critical path (the longest of
its rollouts' waits for their sandboxes, the grading one included; summed over steps),
control-plane requests refused by the service's rate limit (every action; the backend
retries them; the AGS log names each action), rollouts lost to expiry, sandboxes started
for nobody, and what is left after ``reap``, also after the owner of a prefetcher is killed
with SIGKILL mid-run.

    python benchmarks/bench_training.py [--engines ags kubernetes] [--steps 3] [--tasks 8]
        [--group 2] [--lifetime 6] [--update 3] [--json benchmarks/results/training.json]

Engines: the AGS emulator (local instances) with ``--rate-limit realistic`` and a start
latency (``--start-latency``, default 2 s), the Kubernetes emulator (pods are docker
containers of the test image), and docker itself.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import SecretStr

from sandbox_runtime import SandboxConfig, SandboxRuntime, list_sandboxes, load_backend
from sandbox_runtime._core.prefetch import Prefetcher, PrefetchSlot
from sandbox_runtime._core.runtime import validate_options
from sandbox_runtime.errors import SandboxError, SandboxGoneError

TEST_IMAGE = "sandbox-runtime-test/base:bookworm"


@dataclass
class ModeResult:
    engine: str
    mode: str
    step_waits: list[float] = field(default_factory=list)
    critical_wait: float = 0.0
    critical_wait_after_first: float = 0.0
    mean_wait: float = 0.0
    rollouts: int = 0
    graded: int = 0
    lost_to_expiry: int = 0
    errors: list[str] = field(default_factory=list)
    requests_refused: int = 0
    started_for_nobody: int = 0
    prefetch: dict[str, Any] = field(default_factory=dict)
    left_running: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class Engine:
    name: str
    backend: str
    options: dict[str, Any]
    image: str | None
    refused: Callable[[], int]


@contextmanager
def ags_engine(start_latency: float) -> Iterator[Engine]:
    from sandbox_runtime_emulators.ags._limits import REALISTIC_QUOTAS
    from sandbox_runtime_emulators.ags._service import ServiceLimits
    from sandbox_runtime_emulators.ags.server import AgsEmulator

    with AgsEmulator(
        backend="local",
        # Prefetch holds up to a batch more instances than the batch in use: the account's
        # instance quota must allow both (the emulator's default is 64).
        limits=ServiceLimits(max_instances=160),
        rate_limits=REALISTIC_QUOTAS,
        latencies={"StartSandboxInstance": start_latency},
    ) as emulator:
        limits = emulator.api_limits
        yield Engine("ags", "ags", emulator.backend_options(), None, lambda: limits.refused)


@contextmanager
def kubernetes_engine() -> Iterator[Engine]:
    from sandbox_runtime_emulators.kubernetes import KubernetesEmulator

    with KubernetesEmulator() as emulator:
        limits = emulator.api_limits
        yield Engine(
            "kubernetes",
            "kubernetes",
            emulator.backend_options(),
            TEST_IMAGE,
            lambda: limits.refused,
        )


@contextmanager
def docker_engine() -> Iterator[Engine]:
    yield Engine("docker", "docker", {}, TEST_IMAGE, lambda: 0)


def task_config(engine: Engine, run_id: str, task: int, lifetime: float) -> SandboxConfig:
    """Task ``task``'s own configuration (its env differs from every other task's)."""
    return SandboxConfig(
        backend=engine.backend,
        image=engine.image,
        options=engine.options,
        env={"TASK": f"t{task}"},
        workdir="/tmp",
        lifetime=lifetime,
        # The hard cap leases stay under (a Kubernetes pod needs one to be extendable at all).
        max_lifetime=lifetime * 10,
        run_id=run_id,
    )


def step_slots(
    engine: Engine, args: argparse.Namespace, run_id: str, step: int, *, grading: bool = False
) -> list[PrefetchSlot]:
    """The step's rollouts' slots; ``grading``: then their grading sandboxes' (needed later).

    The grading sandboxes come after every rollout sandbox of the step, as ``run --prefetch``
    orders them (``swe/prefetch.py``): a rollout needs its sandbox when the step begins, its
    grading sandbox only after its episode.
    """
    configs = [
        (f"t{step}-{task}", task_config(engine, run_id, step * 1000 + task, args.lifetime))
        for task in range(args.tasks)
    ]
    rounds = 2 if grading else 1
    return [
        PrefetchSlot(key, config)
        for _ in range(rounds)
        for key, config in configs
        for _ in range(args.group)
    ]


def rollout(
    acquire: Callable[[], SandboxRuntime],
    episode: float,
    lifetime: float,
    grading: Callable[[], SandboxRuntime] | None = None,
) -> tuple[float, str]:
    """Wait for a sandbox, run an episode of ``episode`` seconds, grade; (wait, outcome).

    ``grading``: where the grading sandbox comes from (the agent's is closed first, as
    fresh grading does); its wait is part of the rollout's.  Without it, the rollout's own
    sandbox is checked.
    """
    began = time.monotonic()
    try:
        sandbox = acquire()
    except SandboxError as exc:  # a start that failed: an error, never a lost rollout
        return time.monotonic() - began, f"error: start: {exc}"
    waited = time.monotonic() - began
    try:
        sandbox.keep_alive(lease=lifetime)
        deadline = time.monotonic() + episode
        while (left := deadline - time.monotonic()) > 0:
            sandbox.exec(f"sleep {min(left, 2.0):.2f}")
        if grading is not None:
            sandbox.close()
            began = time.monotonic()
            try:
                sandbox = grading()
            finally:
                waited += time.monotonic() - began
        graded = sandbox.exec('test -n "$TASK" && echo graded').stdout.strip()
        return waited, "graded" if graded == "graded" else f"error: grading said {graded!r}"
    except SandboxGoneError as exc:
        return waited, f"lost: {exc}"
    except SandboxError as exc:
        return waited, f"error: {exc}"
    finally:
        with contextlib.suppress(SandboxError):
            sandbox.close()


def run_mode(engine: Engine, args: argparse.Namespace, prefetch: bool) -> ModeResult:
    result = ModeResult(engine.name, "prefetch" if prefetch else "no prefetch")
    run_id = f"bench-training-{uuid.uuid4().hex[:8]}"
    rng = random.Random(args.seed)
    refused_before = engine.refused()
    fresh = args.grading == "fresh"
    batch = args.tasks * args.group * (2 if fresh else 1)
    prefetcher = (
        Prefetcher(ahead=batch, max_in_flight=args.in_flight, jitter=0.2) if prefetch else None
    )
    began = time.monotonic()
    waits: list[float] = []
    try:
        if prefetcher is not None:  # the trainer knows its first batch before loading the model
            prefetcher.extend(step_slots(engine, args, run_id, 0, grading=fresh))
        time.sleep(args.startup)  # loading the model: the same pause in both modes
        for step in range(args.steps):
            slots = step_slots(engine, args, run_id, step)
            if prefetcher is not None and step + 1 < args.steps:
                prefetcher.extend(step_slots(engine, args, run_id, step + 1, grading=fresh))
            episodes = [
                rng.uniform(args.episode_min, args.episode_max * args.lifetime) for _ in slots
            ]

            def acquire_for(slot: PrefetchSlot) -> Callable[[], SandboxRuntime]:
                if prefetcher is not None:
                    return lambda: prefetcher.take(slot.key)
                return lambda: SandboxRuntime(slot.config).start()

            def one(pair: tuple[PrefetchSlot, float]) -> tuple[float, str]:
                slot, episode = pair
                grading = acquire_for(slot) if fresh else None
                return rollout(acquire_for(slot), episode, args.lifetime, grading)

            with ThreadPoolExecutor(len(slots)) as pool:
                outcomes = list(pool.map(one, zip(slots, episodes, strict=True)))
            step_wait = max(wait for wait, _ in outcomes)
            result.step_waits.append(round(step_wait, 3))
            waits += [wait for wait, _ in outcomes]
            for _, outcome in outcomes:
                result.rollouts += 1
                if outcome == "graded":
                    result.graded += 1
                elif outcome.startswith("lost"):
                    result.lost_to_expiry += 1
                    result.errors.append(outcome)
                else:
                    result.errors.append(outcome)
            extra = f" {prefetcher.stats()}" if prefetcher is not None else ""
            print(
                f"  {engine.name} {result.mode}: step {step} wait {step_wait:.2f}s{extra}",
                flush=True,
            )
            if step + 1 < args.steps:
                time.sleep(args.update)
    finally:
        if prefetcher is not None:
            result.started_for_nobody = prefetcher.close()
            result.prefetch = asdict(prefetcher.stats())
    result.seconds = round(time.monotonic() - began, 2)
    result.critical_wait = round(sum(result.step_waits), 3)
    result.critical_wait_after_first = round(sum(result.step_waits[1:]), 3)
    result.mean_wait = round(sum(waits) / max(1, len(waits)), 3)
    result.requests_refused = engine.refused() - refused_before
    result.left_running = len(_running(engine, run_id))
    return result


def _running(engine: Engine, run_id: str) -> list[str]:
    return [
        info.sandbox_id
        for info in list_sandboxes(engine.backend, options=engine.options)
        if info.run_id == run_id
    ]


_OWNER = textwrap.dedent(
    """
    import json, sys, time
    from sandbox_runtime import SandboxConfig
    from sandbox_runtime._core.prefetch import Prefetcher, PrefetchSlot
    spec = json.loads(sys.argv[1])
    slots = [PrefetchSlot(f"k{i}", SandboxConfig(**spec["config"], env={"TASK": str(i)}))
             for i in range(spec["slots"])]
    prefetcher = Prefetcher(slots, ahead=spec["ahead"], max_in_flight=4)
    held = [prefetcher.take(f"k{i}") for i in range(2)]
    for sandbox in held:
        sandbox.keep_alive(lease=spec["config"]["lifetime"])
    while prefetcher.stats().ready < spec["ahead"]:
        time.sleep(0.1)
    print("holding", flush=True)
    time.sleep(600)
    """
)


def killed_owner(engine: Engine, lifetime: float) -> dict[str, int]:
    """A prefetching owner killed with SIGKILL: what it left, and what ``reap`` leaves."""
    run_id = f"bench-training-kill-{uuid.uuid4().hex[:8]}"
    options = {
        key: value.get_secret_value() if isinstance(value, SecretStr) else value
        for key, value in engine.options.items()
    }
    config = {
        "workdir": "/tmp",
        "backend": engine.backend,
        "image": engine.image,
        "options": options,
        "lifetime": lifetime * 20,  # long: only the dead owner makes them reapable
        "run_id": run_id,
    }
    spec = json.dumps({"config": config, "slots": 8, "ahead": 4})
    child = subprocess.Popen(
        [sys.executable, "-c", _OWNER, spec], stdout=subprocess.PIPE, text=True, env=os.environ
    )
    assert child.stdout is not None
    line = child.stdout.readline().strip()
    assert line == "holding", f"owner said {line!r}"
    before = len(_running(engine, run_id))
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    backend_cls = load_backend(engine.backend)
    config_for_reap = SandboxConfig(backend=engine.backend, options=engine.options)
    reaped = backend_cls.reap(validate_options(config_for_reap, backend_cls))
    after = len(_running(engine, run_id))
    return {"left_by_killed_owner": before, "reaped": len(reaped), "left_after_reap": after}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", nargs="+", default=["ags", "kubernetes"])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--group", type=int, default=2)
    parser.add_argument(
        "--lifetime", type=float, default=6.0, help="the scaled-down default lifetime"
    )
    parser.add_argument("--episode-min", type=float, default=1.0)
    parser.add_argument("--episode-max", type=float, default=2.0, help="x lifetime")
    parser.add_argument("--update", type=float, default=3.0, help="model update pause, s")
    parser.add_argument("--startup", type=float, default=3.0, help="model load pause, s")
    parser.add_argument("--start-latency", type=float, default=2.0, help="AGS start, s")
    parser.add_argument("--in-flight", type=int, default=8)
    parser.add_argument("--seed", type=int, default=23)
    parser.add_argument(
        "--grading",
        choices=["fresh", "same"],
        default="fresh",
        help="grade in a fresh sandbox (default) or in the rollout's own",
    )
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    engines = {
        "ags": lambda: ags_engine(args.start_latency),
        "kubernetes": kubernetes_engine,
        "docker": docker_engine,
    }
    report: dict[str, Any] = {"args": vars(args), "load_before": os.getloadavg(), "engines": {}}
    for name in args.engines:
        with engines[name]() as engine:
            rows = [run_mode(engine, args, prefetch) for prefetch in (False, True)]
            kill = killed_owner(engine, args.lifetime)
        report["engines"][name] = {"modes": [asdict(row) for row in rows], "killed_owner": kill}
        without, with_ = rows
        ratio = with_.critical_wait / without.critical_wait if without.critical_wait else 0.0
        print(
            f"{name}: critical-path wait {without.critical_wait:.2f}s without, "
            f"{with_.critical_wait:.2f}s with prefetch ({ratio:.1%}); requests refused "
            f"{without.requests_refused}/{with_.requests_refused}; lost {without.lost_to_expiry}/"
            f"{with_.lost_to_expiry}; for nobody {with_.started_for_nobody}; graded "
            f"{without.graded}/{without.rollouts}, {with_.graded}/{with_.rollouts}; "
            f"killed owner {kill}"
        )
    report["load_after"] = os.getloadavg()
    print(f"load average before {report['load_before']}, after {report['load_after']}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(report, out, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
