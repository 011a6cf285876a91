"""Time the emulator's pause, resume, snapshot and fork through the unmodified e2b SDK.

``PYTHONPATH=src:emulators/src python emulators/scripts/bench_checkpoints.py --backend docker
--image sandbox-runtime-test/base:bookworm --files 2000 --runs 3`` prints one line per
operation with the median and range of the runs (seconds).  The sandbox holds ``--files``
small files under ``/home/user/repo`` before each run, so that what is kept is not empty.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from e2b import Sandbox

from sandbox_runtime_emulators.ags.server import AgsEmulator


def _timed(action: Callable[[], Any]) -> tuple[float, Any]:
    began = time.perf_counter()
    result = action()
    return time.perf_counter() - began, result


def _one_run(opts: dict[str, str], files: int, forks: int) -> dict[str, float]:
    sandbox = Sandbox.create(template="default", timeout=300, **opts)
    made: list[Sandbox] = []
    times: dict[str, float] = {}
    try:
        sandbox.commands.run(
            f"mkdir -p repo && cd repo && for i in $(seq {files}); do echo $i > f$i.txt; done"
        )
        times["create"], fresh = _timed(lambda: Sandbox.create(template="default", **opts))
        made.append(fresh)
        times["create_snapshot"], snapshot = _timed(sandbox.create_snapshot)
        times["create from snapshot"], copy = _timed(
            lambda: Sandbox.create(snapshot.snapshot_id, **opts)
        )
        made.append(copy)
        times[f"fork count={forks}"], result = _timed(lambda: sandbox.fork(count=forks))
        made += [f for f in result if isinstance(f, Sandbox)]
        assert len(made) == 2 + forks, result
        times["pause"], _ = _timed(sandbox.pause)
        times["resume (connect)"], _ = _timed(sandbox.connect)
        count = sandbox.commands.run("ls repo | wc -l").stdout.strip()
        assert count == str(files), count
        Sandbox.delete_snapshot(snapshot.snapshot_id, **opts)
    finally:
        for other in made:
            other.kill()
        sandbox.kill()
    return times


def main() -> None:
    """Run the operations ``--runs`` times and print medians and ranges."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--backend", default="local")
    parser.add_argument("--image", default=None)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--forks", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with AgsEmulator(backend=args.backend, default_image=args.image) as emulator:
        opts = {"api_key": emulator.api_key, "api_url": emulator.url, "sandbox_url": emulator.url}
        runs = [_one_run(opts, args.files, args.forks) for _ in range(args.runs)]
    print(f"backend={args.backend} files={args.files} runs={args.runs}")
    for name in runs[0]:
        values = [run[name] for run in runs]
        print(
            f"{name:22s} median {statistics.median(values):6.2f} s "
            f"(range {min(values):.2f}-{max(values):.2f})"
        )


if __name__ == "__main__":
    main()
