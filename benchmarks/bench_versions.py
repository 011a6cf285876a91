"""The same workload on two checkouts of this library, interleaved: did a change cost time?

A refactor that should change nothing (moving modules, splitting a hot loop into named
steps) is checked here rather than by a timed unit test.  Each round starts one child
process per checkout, alternating which goes first, with that checkout's ``src`` first on
``PYTHONPATH``; the child runs the workload and prints its medians.  Medians of the rounds
and the ratio new/old are printed (1.00 = the same; lower is faster).

The workload is the data plane a rollout uses: ``echo hi`` on ``local``, on ``docker``
through the in-sandbox agent (``agent: on``) and through ``docker exec`` (``agent: off``),
and a 1 MiB ``write_bytes`` + ``read_bytes`` through the agent.

Usage::

    git worktree add /tmp/before <rev>       # or any other checkout
    python benchmarks/bench_versions.py /tmp/before . --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

DEFAULT_IMAGE = "sandbox-runtime-test/base:bookworm"
OPERATIONS = ("local exec", "docker agent exec", "docker native exec", "docker agent 1 MiB")


def _median_ms(action: Callable[[], Any], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        began = time.perf_counter()
        action()
        samples.append(time.perf_counter() - began)
    return statistics.median(samples) * 1000


def child(image: str, repeat: int) -> dict[str, float]:
    """Run the workload in this process (the checkout under test is on ``sys.path``)."""
    from sandbox_runtime import SandboxRuntime

    medians: dict[str, float] = {}
    with SandboxRuntime(backend="local") as sandbox:
        sandbox.exec("true")
        medians["local exec"] = _median_ms(lambda: sandbox.exec("echo hi"), repeat)
    with SandboxRuntime(backend="docker", image=image, options={"agent": "on"}) as sandbox:
        sandbox.exec("true")
        medians["docker agent exec"] = _median_ms(lambda: sandbox.exec("echo hi"), repeat)
        payload = os.urandom(1 << 20)

        def round_trip() -> None:
            sandbox.write_bytes("/tmp/payload", payload)
            assert sandbox.read_bytes("/tmp/payload") == payload

        medians["docker agent 1 MiB"] = _median_ms(round_trip, max(5, repeat // 4))
    with SandboxRuntime(backend="docker", image=image, options={"agent": "off"}) as sandbox:
        sandbox.exec("true")
        medians["docker native exec"] = _median_ms(
            lambda: sandbox.exec("echo hi"), max(5, repeat // 2)
        )
    return medians


def _run_child(checkout: Path, image: str, repeat: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(checkout.resolve() / "src")}
    ran = subprocess.run(
        [sys.executable, __file__, "--child", "--image", image, "--repeat", str(repeat)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    result: dict[str, float] = json.loads(ran.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", type=Path, nargs="?", help="the checkout to compare against")
    parser.add_argument("new", type=Path, nargs="?", help="the checkout under test")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=60, help="commands per operation")
    parser.add_argument("--image", default=DEFAULT_IMAGE)
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.image, args.repeat)))
        return
    if args.old is None or args.new is None:
        parser.error("name two checkouts: OLD NEW")
    rounds: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    for number in range(args.rounds):
        order = ["old", "new"] if number % 2 == 0 else ["new", "old"]
        for side in order:
            checkout = args.old if side == "old" else args.new
            rounds[side].append(_run_child(checkout, args.image, args.repeat))
    print(f"{'operation':22} {'old ms':>8} {'new ms':>8} {'new/old':>8}")
    summary: dict[str, dict[str, float]] = {}
    for operation in OPERATIONS:
        old = statistics.median(r[operation] for r in rounds["old"])
        new = statistics.median(r[operation] for r in rounds["new"])
        summary[operation] = {"old_ms": old, "new_ms": new, "ratio": new / old}
        print(f"{operation:22} {old:8.2f} {new:8.2f} {new / old:8.2f}")
    if args.json is not None:
        args.json.write_text(json.dumps({"rounds": rounds, "summary": summary}, indent=2) + "\n")


if __name__ == "__main__":
    main()
