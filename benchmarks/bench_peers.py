"""The docker backend against peer libraries and two baselines, in one interleaved run.

Systems (``--only`` takes these names and the operations' names, comma-separated):

- ``raw``: docker-py's high-level API (``containers.run`` / ``exec_run`` / ``put_archive`` /
  ``get_archive``), the baseline every ratio is first taken against.
- ``floor``: a "persistent in-container agent" at its physical minimum
  (``benchmarks/peers/floor_server.py``, started with ``docker exec -d``, reached over the
  container's IP with TCP_NODELAY): one TCP round trip and one bash per command.
- ``native``: this library's docker backend with one ``docker exec`` per command
  (``options={"agent": "off"}``).
- ``agent``: this library's in-sandbox agent path (``options={"agent": "auto"}``); runs only when
  ``DockerOptions`` has the ``agent`` option, else it is reported as n/a.
- ``agent-on``: the same with ``agent: "on"``: the start waits until the agent answers, and no
  command takes the native path meanwhile (what a fan-out that runs commands at once wants).
- ``mini``: mini-swe-agent's ``DockerEnvironment`` (the ``docker`` CLI per command).
- ``swerex``: SWE-ReX's ``DockerDeployment`` and its runtime's ``execute`` / files API.
- ``swerex-session``: the same, commands run in one bash session (``run_in_session``, with
  ``PAGER=cat``), as SWE-agent uses SWE-ReX.

The peers run in their own virtualenvs as workers (``benchmarks/peers/peer_worker.py``) that
time themselves; every system runs the same code from ``benchmarks/peers/peer_ops.py``.
Operations: ``start`` (until the sandbox accepts commands), ``exec`` (``echo hi``), ``output``
(1 MB of stdout), ``file`` (write then read a 1 MB file), ``rollout`` (60 agent commands in a
small git repository: ls, cat, grep, sed -i, git diff, pytest), ``fanout`` (64 sandboxes at
once, 20 execs each, then closed: wall time and failed sandboxes), and two failure rows of the
agent systems, each on a fresh sandbox: ``stopped`` (the agent stopped with SIGSTOP, then a
command: the time until its typed error) and ``fulltmp`` (the sandbox's /tmp state directory
full, then a command with stdin: the time until ``SandboxNoSpaceError``).  Each round runs each
operation for every system, in an order shuffled round by round, so load drifts and a
neighbour's after-effects hit all alike.

Setup and usage::

    benchmarks/peers/setup.sh    # peer venvs in ~/.cache/sandbox-runtime/peers, SWE-ReX's image
    python benchmarks/bench_peers.py --rounds 5 --json peers.json --chart peers.png

(``--peers-dir DIR`` or ``--mini-python`` / ``--swerex-python`` point elsewhere.)

``--chart`` needs matplotlib (``pip install 'sandbox-runtime-swe[bench]'``).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import random
import signal
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

import docker

from sandbox_runtime import BackendError, SandboxConfig, SandboxNoSpaceError, SandboxRuntime
from sandbox_runtime.backends.docker import DockerOptions

PEERS_DIR = Path(__file__).resolve().parent / "peers"
sys.path.insert(0, str(PEERS_DIR))
from peer_ops import Starter, handle  # noqa: E402

DEFAULT_IMAGE = "sandbox-runtime-test/base:bookworm"
DEFAULT_SWEREX_IMAGE = "sandbox-runtime-bench/swerex:1.4.0"
LABEL_KEY = "sandbox-runtime-bench"
LABEL = {LABEL_KEY: "peers"}
FLOOR_PORT = 7071  # floor_server.PORT

OPS = {
    "start": "start until usable",
    "exec": "exec `echo hi`",
    "output": "exec with 1 MB stdout",
    "file": "write + read a 1 MB file",
    "rollout": "60 agent commands (ls, cat, grep, sed -i, git diff, pytest)",
    "fanout": "{sandboxes} sandboxes x {execs} execs",
    "stopped": "a call after SIGSTOP of the agent: time to the typed error",
    "fulltmp": "a call with stdin after /tmp filled up: time to the typed error",
}
# The failure rows: what a call costs when the agent path meets a fault (agent systems only).
FAULT_OPS = ("stopped", "fulltmp")
# Samples per system per round: the cheap operations get a few, so medians settle sooner.
REPEATS = {
    "start": 1,
    "exec": 5,
    "output": 3,
    "file": 3,
    "rollout": 1,
    "fanout": 1,
    "stopped": 1,
    "fulltmp": 1,
}
SYSTEMS = ["raw", "floor", "native", "agent", "agent-on", "mini", "swerex", "swerex-session"]
LABELS = {
    "raw": "raw docker-py",
    "floor": "persistent in-container agent (floor)",
    "native": "sandbox-runtime native",
    "agent": "sandbox-runtime agent path",
    "agent-on": "sandbox-runtime agent path, agent=on",
    "mini": "mini-swe-agent",
    "swerex": "SWE-ReX execute",
    "swerex-session": "SWE-ReX session",
}
# Chart colours: baselines grey, this library blue, peers orange.
COLORS = {"raw": "#888888", "floor": "#888888", "mini": "#d9822b", "swerex": "#d9822b"}
COLORS["swerex-session"] = COLORS["swerex"]
SHORT = {
    "floor": "floor (in-container server)",
    "agent": "sandbox-runtime agent",
    "agent-on": "sandbox-runtime agent (on)",
}


# --- the systems that run in this process ------------------------------------------------


def _run_container(client: Any, image: str) -> Any:
    return client.containers.run(image, ["sleep", "3600"], detach=True, init=True, labels=LABEL)


class RawBox:
    """docker-py's high-level API, as a script would use it."""

    def __init__(self, client: Any, image: str) -> None:
        self._container = _run_container(client, image)

    def run(self, command: str, cwd: str | None = None) -> tuple[int, bytes]:
        result = self._container.exec_run(["bash", "-c", command], workdir=cwd)
        return int(result.exit_code), bytes(result.output)

    def write(self, path: str, data: bytes) -> None:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            member = tarfile.TarInfo(Path(path).name)
            member.size = len(data)
            archive.addfile(member, io.BytesIO(data))
        self._container.put_archive(str(Path(path).parent), buffer.getvalue())

    def read(self, path: str) -> bytes:
        chunks, _ = self._container.get_archive(path)
        with tarfile.open(fileobj=io.BytesIO(b"".join(chunks))) as archive:
            member = archive.extractfile(Path(path).name)
            assert member is not None
            return member.read()

    def close(self) -> None:
        self._container.remove(force=True)


class FloorBox:
    """A container plus floor_server.py, spoken to over one TCP connection."""

    def __init__(self, client: Any, image: str, source: str, port: int) -> None:
        self._container = _run_container(client, image)
        self._container.exec_run(["python3", "-c", source], detach=True)
        self._container.reload()
        address = next(iter(self._container.attrs["NetworkSettings"]["Networks"].values()))
        deadline = time.monotonic() + 30
        while True:  # usable once the server listens
            try:
                self._socket = socket.create_connection((address["IPAddress"], port), timeout=60)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.005)
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._reader = self._socket.makefile("rb")

    def _call(self, command: str, cwd: str | None, stdin: bytes = b"") -> tuple[int, bytes]:
        header = {"command": command, "cwd": cwd, "stdin": len(stdin)}
        self._socket.sendall(json.dumps(header).encode() + b"\n" + stdin)
        answer = json.loads(self._reader.readline())
        stdout = self._reader.read(answer["stdout"])
        self._reader.read(answer["stderr"])
        return int(answer["exit"]), stdout

    def run(self, command: str, cwd: str | None = None) -> tuple[int, bytes]:
        return self._call(command, cwd)

    def write(self, path: str, data: bytes) -> None:
        code, _ = self._call(f"cat > '{path}'", None, data)
        assert code == 0

    def read(self, path: str) -> bytes:
        code, data = self._call(f"cat '{path}'", None)
        assert code == 0
        return data

    def close(self) -> None:
        self._reader.close()
        self._socket.close()
        self._container.remove(force=True)


class LibraryBox:
    """A sandbox of this library."""

    def __init__(self, config: SandboxConfig) -> None:
        self._sandbox = SandboxRuntime(config).start()

    @property
    def sandbox(self) -> SandboxRuntime:
        return self._sandbox

    def run(self, command: str, cwd: str | None = None) -> tuple[int, bytes]:
        result = self._sandbox.exec(command, cwd=cwd)
        return result.exit_code, result.stdout_bytes

    def write(self, path: str, data: bytes) -> None:
        self._sandbox.write_bytes(path, data)

    def read(self, path: str) -> bytes:
        return self._sandbox.read_bytes(path)

    def close(self) -> None:
        self._sandbox.close()


def agent_options() -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Backend options for the native and the agent path; ``None``: no agent path here."""
    if "agent" in DockerOptions.model_fields:
        return {"agent": "off"}, {"agent": "auto"}
    return {}, None


# --- the failure rows ---------------------------------------------------------------------

# The process that started a command: the agent, or nothing the container sees (docker exec).
_PARENT = "cat /proc/$PPID/comm 2>/dev/null || echo outside"
# /dev/shm is a 64 MiB tmpfs: the agent's state directory (where stdin waits) moved there and
# filled, as tests/reliability/test_agent_faults.py does.
_FILL_STATE_DIR = (
    "mkdir -p /tmp/.sandbox-runtime && mv /tmp/.sandbox-runtime /dev/shm/state"
    " && ln -s /dev/shm/state /tmp/.sandbox-runtime;"
    " dd if=/dev/zero of=/dev/shm/fill bs=1M count=100 2>/dev/null; true"
)


def _await_agent(sandbox: SandboxRuntime) -> None:
    deadline = time.monotonic() + 60
    while sandbox.exec(_PARENT).stdout.strip() != "sandbox-agent":
        if time.monotonic() > deadline:
            raise RuntimeError("the agent never answered")
        time.sleep(0.05)


def time_fault(op: str, start: Callable[[], LibraryBox], client: Any) -> dict[str, Any]:
    """On a fresh sandbox whose agent answers: cause the fault, then time one call to its error.

    ``stopped``: the agent gets SIGSTOP (by an exec of the engine's own); the call must fail
    with a :class:`BackendError` that says the agent stopped answering.  ``fulltmp``: the
    state directory is full; a command with stdin must fail with ``SandboxNoSpaceError``.
    """
    box = start()
    try:
        sandbox = box.sandbox
        _await_agent(sandbox)
        if op == "stopped":
            argv = ["pkill", "-STOP", "-f", "sandbox-agent"]
            client.api.exec_start(client.api.exec_create(sandbox.id, argv))
        else:
            sandbox.exec(_FILL_STATE_DIR, check=True)
        began = time.perf_counter()
        try:
            if op == "stopped":
                sandbox.exec("touch /tmp/ran", timeout=5)
            else:
                sandbox.exec("cat", stdin=b"abc")
        except SandboxNoSpaceError:
            if op == "fulltmp":
                return {"seconds": time.perf_counter() - began}
            raise
        except BackendError as exc:
            if op == "stopped" and "stopped answering" in str(exc):
                return {"seconds": time.perf_counter() - began}
            raise
        return {"error": f"{op}: the call succeeded"}
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        box.close()


# --- the systems under test, in or out of this process -----------------------------------


class InProcess:
    """A system driven from this process: one sandbox kept for the per-command operations.

    ``faults``, for the agent systems, runs a failure row (:data:`FAULT_OPS`); without it those
    rows are n/a.
    """

    def __init__(
        self,
        label: str,
        start: Starter,
        faults: Callable[[str], dict[str, Any]] | None = None,
    ) -> None:
        self.label = label
        self._start = start
        self._faults = faults
        self._box = start()

    def run(self, op: str, sandboxes: int, execs: int) -> dict[str, Any]:
        if op in FAULT_OPS:
            if self._faults is None:
                return {"unsupported": "no in-sandbox agent"}
            return self._faults(op)
        return handle(op, self._start, self._box, sandboxes, execs)

    def close(self) -> None:
        self._box.close()


class Worker:
    """A peer library in its own interpreter (benchmarks/peers/peer_worker.py)."""

    def __init__(self, label: str, python: str, kind: str, image: str, log: TextIO) -> None:
        self._process = subprocess.Popen(
            [python, str(PEERS_DIR / "peer_worker.py"), kind, image],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        version = self._answer().get("version")
        if version is None:
            raise RuntimeError(f"the {kind} worker did not start; see {log.name}")
        self.label = f"{label} {version}"

    def _answer(self) -> dict[str, Any]:
        assert self._process.stdout is not None
        while True:  # a peer may print banners of its own on stdout
            line = self._process.stdout.readline()
            if not line:
                return {"error": "the worker exited"}
            if line.startswith("BENCH "):
                answer: dict[str, Any] = json.loads(line[len("BENCH ") :])
                return answer

    def run(self, op: str, sandboxes: int, execs: int) -> dict[str, Any]:
        if op in FAULT_OPS:
            return {"unsupported": "no in-sandbox agent of this library"}
        assert self._process.stdin is not None
        request = {"op": op, "sandboxes": sandboxes, "execs": execs}
        self._process.stdin.write(json.dumps(request) + "\n")
        self._process.stdin.flush()
        return self._answer()

    def close(self) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()
        try:  # it exits after the operation under way, closing its sandboxes
            self._process.wait(timeout=300)
        except subprocess.TimeoutExpired:
            self._process.kill()


System = InProcess | Worker


# --- statistics and reporting ------------------------------------------------------------


def summarize(samples: list[float]) -> tuple[float, float]:
    """Median and 90th percentile (nearest rank)."""
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[round(0.9 * (len(ordered) - 1))]


def shuffled(names: list[str], seed: int) -> list[str]:
    """The systems' order for one pass: a new order each pass, the same in every run.

    Not a rotation: that keeps neighbours, and a system measured right after one whose
    ``docker exec`` calls leave the engine busy for a moment (exec clean-up) paid for it
    in every round.
    """
    order = list(names)
    random.Random(seed).shuffle(order)
    return order


def fmt(seconds: float) -> str:
    if seconds >= 10:
        return f"{seconds:.1f} s"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    return f"{seconds * 1e3:.1f} ms"


@dataclass
class Row:
    """One system's figures for one operation; ratios are of medians (None: no baseline)."""

    median: float
    p90: float
    vs_raw: float | None
    vs_floor: float | None


def summary(results: dict[str, Any]) -> dict[str, dict[str, Row]]:
    """Per operation and system that has samples: median, p90, ratios to raw and to floor."""
    table: dict[str, dict[str, Row]] = {}
    for op, by_system in results["samples"].items():
        medians = {name: summarize(s)[0] for name, s in by_system.items() if s}
        raw, floor = medians.get("raw"), medians.get("floor")
        table[op] = {}
        for name, samples in by_system.items():
            if samples:
                median, p90 = summarize(samples)
                table[op][name] = Row(
                    median, p90, median / raw if raw else None, median / floor if floor else None
                )
    return table


def cell(results: dict[str, Any], table: dict[str, dict[str, Row]], op: str, name: str) -> str:
    """A table cell: median (p90), the ratios to the baselines, fan-out failures."""
    note = results["notes"].get(op, {}).get(name)
    row = table[op].get(name)
    if row is None:
        return f"n/a ({note})" if note else "n/a"
    text = f"{fmt(row.median)} (p90 {fmt(row.p90)})"
    ratios = [
        f"{ratio:.2f}x {baseline}"
        for ratio, baseline in ((row.vs_raw, "raw"), (row.vs_floor, "floor"))
        if ratio is not None and name != baseline
    ]
    if ratios:
        text += "<br>" + ", ".join(ratios)
    if op == "fanout":
        text += f"<br>{sum(results['fanout_errors'].get(name, []))} failed"
    return text


def markdown(results: dict[str, Any]) -> str:
    """The results as a Markdown table: one row per operation, one column per system."""
    table = summary(results)
    names = list(results["systems"])
    lines = [
        "| operation | " + " | ".join(results["systems"][n] for n in names) + " |",
        "| --- |" + " --- |" * len(names),
    ]
    for op in results["samples"]:
        cells = [cell(results, table, op, name) for name in names]
        lines.append(f"| {results['ops'][op]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def chart(results: dict[str, Any], path: str) -> None:
    """One panel per operation, each system's median as a bar (p90s are in the table)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = summary(results)
    names = list(results["systems"])
    ops = list(results["samples"])
    columns = 2
    rows = (len(ops) + columns - 1) // columns
    figure, axes = plt.subplots(
        rows, columns, figsize=(14, 3.4 * rows), squeeze=False, layout="constrained"
    )
    for index, op in enumerate(ops):
        axis = axes[index // columns][index % columns]
        scale, unit = (1.0, "s") if op in ("rollout", "fanout", "stopped") else (1e3, "ms")
        rows_here = [table[op].get(name) for name in names]
        medians = [row.median * scale if row else 0.0 for row in rows_here]
        axis.barh(
            [SHORT.get(name, results["systems"][name]) for name in names],
            medians,
            color=[COLORS.get(name, "#3b75af") for name in names],
        )
        axis.invert_yaxis()
        axis.set_title(results["ops"][op], fontsize=10)
        axis.set_xlabel(f"median, {unit}", fontsize=8)
        axis.tick_params(labelsize=8)
        for position, row in enumerate(rows_here):
            text = " n/a"
            if row is not None:
                text = f" {fmt(row.median)}"
                if row.vs_raw is not None and names[position] != "raw":
                    text += f"  {row.vs_raw:.2f}x raw"
            axis.text(medians[position], position, text, va="center", fontsize=7)
        axis.set_xlim(0, max([*medians, 1e-9]) * 1.5)
    for index in range(len(ops), rows * columns):
        axes[index // columns][index % columns].axis("off")
    figure.suptitle(f"{results['title']}: medians, lower is better", fontsize=11)
    figure.savefig(path, dpi=110)
    plt.close(figure)


# --- the run -----------------------------------------------------------------------------


def settle(client: Any, baseline: int, limit: float = 60.0) -> None:
    """Wait until containers left stopping by a fan-out are gone, so they load no later sample."""
    deadline = time.monotonic() + limit
    while len(client.api.containers()) > baseline and time.monotonic() < deadline:
        time.sleep(0.5)


def open_system(name: str, args: argparse.Namespace, client: Any, log: TextIO) -> System | str:
    """Start one system, or say why it cannot run here."""
    native, fast = agent_options()
    base = SandboxConfig(
        backend="docker", image=args.image, lifetime=3600, workdir="/", labels=LABEL
    )
    if name == "raw":
        return InProcess(LABELS["raw"], lambda: RawBox(client, args.image))
    if name == "floor":
        source = (PEERS_DIR / "floor_server.py").read_text()
        return InProcess(
            LABELS["floor"],
            lambda: FloorBox(client, args.image, source, FLOOR_PORT),
        )
    if name == "native":
        config = base.model_copy(update={"options": native})
        return InProcess(LABELS["native"], lambda: LibraryBox(config))
    if name in ("agent", "agent-on"):
        if fast is None:
            return "this checkout has no agent path"
        options = fast if name == "agent" else {**fast, "agent": "on"}
        config = base.model_copy(update={"options": options})
        return InProcess(
            LABELS[name],
            lambda: LibraryBox(config),
            lambda op: time_fault(op, lambda: LibraryBox(config), client),
        )
    if name == "mini":
        python = args.mini_python or peer_python(args.peers_dir, "mini")
        if python is None:
            return "no --mini-python and none in --peers-dir"
        return Worker(LABELS["mini"], python, "mini", args.image, log)
    python = args.swerex_python or peer_python(args.peers_dir, "swerex")
    if python is None:
        return "no --swerex-python and none in --peers-dir"
    return Worker(LABELS[name], python, name, args.swerex_image, log)


def peer_python(peers_dir: str, venv: str) -> str | None:
    """The interpreter benchmarks/peers/setup.sh made for a peer, if it is there."""
    python = Path(peers_dir).expanduser() / venv / "bin" / "python"
    return str(python) if python.exists() else None


def parse_only(only: str | None) -> tuple[list[str], list[str]]:
    """``--only exec,start,raw,native`` -> (operations, systems); nothing named: all."""
    items = [item for item in (only or "").split(",") if item]
    unknown = [item for item in items if item not in OPS and item not in SYSTEMS]
    if unknown:
        raise SystemExit(f"--only: unknown names {unknown}; use {list(OPS)} and {SYSTEMS}")
    ops = [op for op in OPS if op in items] or list(OPS)
    systems = [name for name in SYSTEMS if name in items] or list(SYSTEMS)
    return ops, systems


def record(results: dict[str, Any], op: str, name: str, answer: dict[str, Any]) -> None:
    """File one answer: a sample, an n/a note, or an error (failed or not the same work)."""
    if "unsupported" in answer:
        results["notes"].setdefault(op, {})[name] = answer["unsupported"]
    elif "error" in answer:
        results["errors"].setdefault(op, {}).setdefault(name, []).append(answer["error"])
        print(f"  {op} on {name} failed: {answer['error']}", flush=True)
    elif "codes" in answer and answer["codes"] != results.setdefault("codes", answer["codes"]):
        # Every system must see the same exit codes, or it did not run the same rollout.
        results["errors"].setdefault(op, {}).setdefault(name, []).append(
            f"rollout exit codes {answer['codes']} differ from {results['codes']}"
        )
    else:
        results["samples"][op][name].append(answer["seconds"])
        if "errors" in answer:
            results["fanout_errors"].setdefault(name, []).append(answer["errors"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", help="comma-separated operations and/or systems")
    parser.add_argument("--image", default=DEFAULT_IMAGE)
    parser.add_argument("--swerex-image", default=DEFAULT_SWEREX_IMAGE)
    parser.add_argument(
        "--peers-dir",
        default=os.environ.get("SANDBOX_RUNTIME_PEERS", "~/.cache/sandbox-runtime/peers"),
        help="where benchmarks/peers/setup.sh made the peers' venvs (mini/, swerex/)",
    )
    parser.add_argument("--mini-python", help="interpreter with mini-swe-agent (else --peers-dir)")
    parser.add_argument("--swerex-python", help="interpreter with swe-rex (else --peers-dir)")
    parser.add_argument("--sandboxes", type=int, default=64, help="fan-out width")
    parser.add_argument("--execs", type=int, default=20, help="execs per fan-out sandbox")
    parser.add_argument(
        "--fanout-rounds", type=int, help="run the fan-out in only the last N rounds (slowest)"
    )
    parser.add_argument("--json", help="write samples and summary here")
    parser.add_argument("--chart", help="write a PNG chart here (needs matplotlib)")
    args = parser.parse_args()
    ops, wanted = parse_only(args.only)
    # SIGTERM stops a run as Ctrl-C does: what was measured is still reported.
    signal.signal(signal.SIGTERM, signal.default_int_handler)

    client = docker.from_env(max_pool_size=max(64, args.sandboxes))
    log_path = Path(tempfile.gettempdir()) / f"bench-peers-{os.getpid()}.log"
    print(f"peer workers log to {log_path}", flush=True)
    with log_path.open("w") as log:
        results = run(args, ops, wanted, client, log)
    print()
    print(markdown(results))
    for op, by_system in results["errors"].items():
        for name, messages in by_system.items():
            print(f"errors in {op} on {name}: {len(messages)}, first: {messages[0]}")
    if args.json:
        results["summary"] = {
            op: {name: asdict(row) for name, row in rows.items()}
            for op, rows in summary(results).items()
        }
        Path(args.json).write_text(json.dumps(results, indent=1))
    if args.chart:
        chart(results, args.chart)
        print(f"chart written to {args.chart}")


def run(
    args: argparse.Namespace, ops: list[str], wanted: list[str], client: Any, log: TextIO
) -> dict[str, Any]:
    """Open the systems, run the interleaved rounds, close everything; the raw results."""
    systems: dict[str, System] = {}
    missing: dict[str, str] = {}
    for name in wanted:
        opened = open_system(name, args, client, log)
        if isinstance(opened, str):
            missing[name] = opened
            print(f"  {name}: n/a ({opened})", flush=True)
        else:
            systems[name] = opened
            print(f"  {name}: {opened.label} ready", flush=True)
    labels = {name: system.label for name, system in systems.items()}
    results: dict[str, Any] = {
        "title": f"bench_peers.py, {args.rounds} rounds, {os.cpu_count()} cores",
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "rounds": args.rounds,
        "systems": {name: labels.get(name, LABELS[name]) for name in wanted},
        "ops": {op: OPS[op].format(sandboxes=args.sandboxes, execs=args.execs) for op in ops},
        "samples": {op: {name: [] for name in systems} for op in ops},
        "notes": {op: dict(missing) for op in ops},
        "errors": {},
        "fanout_errors": {},
    }
    try:
        # The fan-out, the slowest operation, in the last rounds: a run stopped early has the rest.
        fanout_rounds = args.rounds if args.fanout_rounds is None else args.fanout_rounds
        for round_index in range(args.rounds):
            began = time.monotonic()
            for op in ops:
                if op == "fanout" and round_index < args.rounds - fanout_rounds:
                    continue
                for repeat in range(REPEATS[op]):
                    for name in shuffled(list(systems), 1000 * round_index + repeat):
                        before = len(client.api.containers()) if op == "fanout" else 0
                        answer = systems[name].run(op, args.sandboxes, args.execs)
                        record(results, op, name, answer)
                        if op == "fanout":
                            settle(client, before)
            print(f"round {round_index + 1}/{args.rounds}: {time.monotonic() - began:.0f} s")
    except KeyboardInterrupt:
        print("interrupted: reporting the samples taken so far", flush=True)
    finally:
        for system in systems.values():
            system.close()
        ours = client.containers.list(all=True, filters={"label": LABEL_KEY})
        for leftover in ours:
            leftover.remove(force=True)
    return results


if __name__ == "__main__":
    main()
