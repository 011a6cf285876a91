"""The operations bench_peers.py times, written once against a minimal sandbox interface.

Both the benchmark's own process (raw docker-py, the floor, this library) and the peer workers
(mini-swe-agent, SWE-ReX, each in its own interpreter) import this module, so every system runs
exactly the same workload through the same timing code; only the five methods of ``Box`` differ.
Standard library only, Python 3.10+: it runs in the peers' virtualenvs too.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

OUTPUT_BYTES = 1_000_000
FILE_BYTES = 1_000_000
FILE_PATH = "/tmp/bench-roundtrip.bin"
# Printable output, so that peers which decode output as text see exactly the bytes produced.
OUTPUT_COMMAND = f"head -c {OUTPUT_BYTES} /dev/zero | tr '\\0' x"
REPO = "/tmp/bench-repo"


class Unsupported(Exception):
    """The system has no API for this operation (reported as n/a, not as an error)."""


class Box(Protocol):
    """One started sandbox, as each system under test exposes it."""

    def run(self, command: str, cwd: str | None = None) -> tuple[int, bytes]:
        """Run shell text with bash; return the exit code and stdout (stderr may be mixed in)."""

    def write(self, path: str, data: bytes) -> None:
        """Write a file in the sandbox (``Unsupported`` if the system has no file API)."""

    def read(self, path: str) -> bytes:
        """Read a file from the sandbox (``Unsupported`` if the system has no file API)."""

    def close(self) -> None:
        """Stop and remove the sandbox, as the system's own close does."""


Starter = Callable[[], Box]


def _timed(action: Callable[[], object]) -> float:
    began = time.perf_counter()
    action()
    return time.perf_counter() - began


def time_start(start: Starter) -> float:
    """Seconds from nothing until a sandbox that accepts commands (its close is not timed)."""
    boxes: list[Box] = []
    seconds = _timed(lambda: boxes.append(start()))
    boxes[0].close()
    return seconds


def time_exec(box: Box) -> float:
    """One ``echo hi``, checked."""
    result: list[tuple[int, bytes]] = []
    seconds = _timed(lambda: result.append(box.run("echo hi")))
    if result[0] != (0, b"hi\n"):
        raise AssertionError(f"echo hi returned {result[0]!r}")
    return seconds


def time_output(box: Box) -> float:
    """A command that writes 1 MB to stdout, checked for length."""
    result: list[tuple[int, bytes]] = []
    seconds = _timed(lambda: result.append(box.run(OUTPUT_COMMAND)))
    code, stdout = result[0]
    if code != 0 or len(stdout) != OUTPUT_BYTES:
        raise AssertionError(f"1 MB output returned exit {code} and {len(stdout)} bytes")
    return seconds


def roundtrip_data() -> bytes:
    """1 MB of printable ASCII (SWE-ReX's file API is text) that is not one repeated byte."""
    line = bytes(range(33, 127)) + b"\n"
    return (line * (FILE_BYTES // len(line) + 1))[:FILE_BYTES]


def time_roundtrip(box: Box) -> float:
    """Write a 1 MB file, then read it back, checked byte for byte."""
    data = roundtrip_data()
    back: list[bytes] = []

    def roundtrip() -> None:
        box.write(FILE_PATH, data)
        back.append(box.read(FILE_PATH))

    seconds = _timed(roundtrip)
    if back[0] != data:
        raise AssertionError(f"read back {len(back[0])} bytes that differ from those written")
    return seconds


# A small project with a bug for the rollout: a module, its tests and a config file.  In a
# subshell, so that `set -e` does not stay on in a peer's persistent shell session.
ROLLOUT_SETUP = f"""(set -e
rm -rf {REPO} && mkdir -p {REPO}/pkg && cd {REPO}
cat > pkg/__init__.py <<'PY'
PY
cat > pkg/calc.py <<'PY'
def add(a, b):
    return a - b  # the bug the rollout fixes


def mul(a, b):
    return a * b


def mean(values):
    return sum(values) / len(values)
PY
cat > test_calc.py <<'PY'
from pkg.calc import add, mean, mul


def test_add():
    assert add(2, 3) == 5


def test_mul():
    assert mul(2, 3) == 6


def test_mean():
    assert mean([1, 2, 3]) == 2
PY
printf 'VALUE_%d = 0\\n' 0 1 2 3 4 5 > config.py
printf '# bench repo\\n\\nA project for the rollout benchmark.\\n' > README.md
git init -q && git add -A
git -c user.name=bench -c user.email=bench@example.invalid commit -qm initial
)"""


def rollout_commands() -> list[str]:
    """Sixty commands shaped like an agent's turns: look, search, edit, diff, test.

    Six turns of ten; the third turn's edit fixes the bug, so the tests fail, then pass.
    """
    commands: list[str] = []
    for turn in range(6):
        edit = (
            "sed -i 's/return a - b  # the bug the rollout fixes/return a + b/' pkg/calc.py"
            if turn == 2
            else f"sed -i 's/^VALUE_{turn} = 0/VALUE_{turn} = 1/' config.py"
        )
        commands += [
            "ls -la",
            "cat pkg/calc.py",
            'grep -rn "def " --include=*.py .',
            "sed -n '1,12p' test_calc.py",
            edit,
            "git diff",
            "python3 -m pytest -q -p no:cacheprovider test_calc.py",
            "git status --short",
            "grep -c '= 1' config.py",
            "wc -l pkg/calc.py test_calc.py config.py",
        ]
    return commands


def time_rollout(box: Box) -> tuple[float, list[int]]:
    """Create the repository (not timed), then run the sixty commands in it; exit codes back."""
    code, output = box.run(ROLLOUT_SETUP)
    if code != 0:
        raise AssertionError(f"rollout setup failed ({code}): {output[-500:]!r}")
    codes: list[int] = []

    def rollout() -> None:
        for command in rollout_commands():
            codes.append(box.run(command, REPO)[0])

    return _timed(rollout), codes


def fan_out(start: Starter, sandboxes: int, execs: int) -> tuple[float, int]:
    """Start ``sandboxes`` at once from as many threads, ``execs`` echoes each, close them.

    Returns the wall time and the number of sandboxes whose start, commands or close failed.
    """

    def one() -> None:
        box = start()
        try:
            for _ in range(execs):
                if box.run("echo hi") != (0, b"hi\n"):
                    raise AssertionError("echo hi failed")
        finally:
            box.close()

    began = time.perf_counter()
    with ThreadPoolExecutor(max_workers=sandboxes) as pool:
        futures = [pool.submit(one) for _ in range(sandboxes)]
        errors = sum(1 for future in futures if future.exception() is not None)
    return time.perf_counter() - began, errors


def handle(op: str, start: Starter, box: Box, sandboxes: int, execs: int) -> dict[str, object]:
    """Run one operation and describe its outcome as JSON-ready data.

    ``{"seconds": s}`` plus ``codes`` (rollout) or ``errors`` (fan-out); ``{"unsupported":
    why}`` when the system lacks the API; ``{"error": what}`` when it failed.
    """
    try:
        if op == "start":
            return {"seconds": time_start(start)}
        if op == "exec":
            return {"seconds": time_exec(box)}
        if op == "output":
            return {"seconds": time_output(box)}
        if op == "file":
            return {"seconds": time_roundtrip(box)}
        if op == "rollout":
            seconds, codes = time_rollout(box)
            return {"seconds": seconds, "codes": codes}
        if op == "fanout":
            seconds, errors = fan_out(start, sandboxes, execs)
            return {"seconds": seconds, "errors": errors}
        raise ValueError(f"unknown operation {op!r}")
    except Unsupported as exc:
        return {"unsupported": str(exc)}
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
