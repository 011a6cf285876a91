"""The ``e2b`` backend's checkpoint, rollback and fork through the AGS emulator's e2b door,
with the service's snapshot routes and without them (the archive fallback): one interleaved
run.

    python benchmarks/bench_fork_e2b.py [--rounds 3] [--files 2000] [--forks 4]

Each round starts a sandbox on each side (local instances, namespace isolation), writes
``--files`` generated Python modules under the workdir (``bench_fork.py``'s generator), then
times ``checkpoint``, a change and ``rollback``, and ``fork(--forks)``.  Rounds alternate
the sides' order, so a load change on the shared machine hits both.  These are the
emulator's costs (a tar of the sandbox root in its memory for a snapshot; a tar through
envd to this client's disk for an archive), not a real service's.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from bench_fork import _GENERATE, _row
from pydantic import SecretStr

from sandbox_runtime import SandboxConfig, SandboxRuntime, delete_checkpoint
from sandbox_runtime_emulators.ags.server import AgsEmulator


def _config(emulator: AgsEmulator, records: Path) -> SandboxConfig:
    options = {
        "api_key": SecretStr(emulator.api_key),
        "api_url": emulator.url,
        "sandbox_url": emulator.url,
        "template": emulator.default_tool.name,
        "checkpoint_dir": records,
    }
    return SandboxConfig(backend="e2b", workdir="/testbed", lifetime=900, options=options)


def one_round(
    side: str, config: SandboxConfig, files: int, forks: int, timings: dict[str, list[float]]
) -> None:
    """Checkpoint, rollback and fork once on one side, timing each."""
    with SandboxRuntime(config) as sandbox:
        sandbox.write_text("gen.py", _GENERATE)
        sandbox.exec(f"python3 gen.py tree {files}", check=True, timeout=600)
        began = time.monotonic()
        checkpoint = sandbox.checkpoint()
        timings[f"{side}: checkpoint"].append(time.monotonic() - began)
        sandbox.exec("rm -rf tree/pkg0 && echo changed > tree/new.txt", check=True)
        began = time.monotonic()
        sandbox.rollback(checkpoint)
        timings[f"{side}: rollback"].append(time.monotonic() - began)
        assert not sandbox.exists("tree/new.txt")
        began = time.monotonic()
        copies = [result.unwrap() for result in sandbox.fork(forks)]
        timings[f"{side}: fork({forks}) (checkpoint + starts)"].append(time.monotonic() - began)
        for copy in copies:
            copy.close()
        delete_checkpoint(checkpoint, options=config.options)


def main() -> None:
    """Run the rounds and print one row per measured step."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--forks", type=int, default=4)
    args = parser.parse_args()
    timings: dict[str, list[float]] = defaultdict(list)
    records = Path(tempfile.mkdtemp(prefix="bench-fork-e2b-"))
    with (
        AgsEmulator(backend="local", local_isolation="namespace") as routes,
        AgsEmulator(
            backend="local", local_isolation="namespace", e2b_checkpoint_routes=False
        ) as fallback,
    ):
        sides = [("snapshot routes", routes), ("archive fallback", fallback)]
        for number in range(args.rounds):
            for side, emulator in sides if number % 2 == 0 else sides[::-1]:
                one_round(side, _config(emulator, records), args.files, args.forks, timings)
    print(f"e2b backend through the AGS emulator, {args.files} files, {args.rounds} rounds")
    for name, values in timings.items():
        print(_row(name, values))


if __name__ == "__main__":
    main()
