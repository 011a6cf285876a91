"""The real check of the ``sandbox-runtime-swe`` plugins against rLLM main: ``rllm eval`` itself.

Run it in a virtualenv holding rLLM main and this project (see docs/rllm-main.md)::

    python examples/rllm_main/check.py --backends docker,local,kubernetes,ags

For each backend it writes the bundled tasks as a local rLLM benchmark (the backend in each
row's ``sandbox_runtime`` settings; credentials of the emulators through the environment),
then runs rLLM's own CLI, ``rllm eval DIR --agent sandbox-runtime-swe --evaluator
sandbox-runtime-swe``, against two scripted OpenAI-compatible servers (``scripted_server.py``):
one that plays each task's reference fix (every reward must be 1) and one that does nothing
(every reward must be 0), with no error in either.  Then the kill check: a watcher stops the
sandbox of one task while the evaluator grades in it; rLLM must count that task as an error,
never as a reward.  Kubernetes and AGS run on this project's emulators.

Prints one line per run and exits 1 if any expectation fails.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from sandbox_runtime import SandboxRuntime, list_sandboxes
from sandbox_runtime.integrations.rllm_flow import write_benchmark
from sandbox_runtime.swe import read_rows
from sandbox_runtime.swe.dataset import load_rows

HERE = Path(__file__).resolve().parent
RLLM = str(Path(sys.executable).with_name("rllm"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def scripted_server(mode: str) -> Iterator[str]:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, str(HERE / "scripted_server.py"), "--mode", mode, "--port", str(port)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        server.stdout.readline()  # the "serving" line: it is listening
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.terminate()
        server.wait(10)


@contextlib.contextmanager
def backend_setup(name: str, workdir: Path) -> Iterator[tuple[str, dict[str, Any], dict[str, str]]]:
    """(backend, options written into the rows, environment of the rllm process)."""
    if name == "local":
        yield "local", {"isolation": "namespace"}, {}
    elif name == "docker":
        yield "docker", {}, {}
    elif name == "kubernetes":
        from sandbox_runtime_emulators.kubernetes import KubernetesEmulator

        with KubernetesEmulator(offline_images=True) as emulator:
            kubeconfig = emulator.write_kubeconfig(workdir / "kubeconfig")
            yield "kubernetes", {}, {"KUBECONFIG": str(kubeconfig)}
    elif name == "ags":
        from sandbox_runtime_emulators.ags import AgsEmulator

        with AgsEmulator(backend="docker") as emulator:
            yield "ags", {}, emulator.environment()
    else:
        raise SystemExit(f"unknown backend {name!r}")


def rllm_eval(
    bench: Path,
    url: str,
    env: dict[str, str],
    out: Path,
    indices: str | None,
    watch: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    command = [
        RLLM, "eval", str(bench),
        "--agent", "sandbox-runtime-swe", "--evaluator", "sandbox-runtime-swe",
        "--base-url", url, "--model", "scripted",
        "--concurrency", "2", "--no-ui", "--output", str(out),
        "--episodes-dir", str(out.with_suffix(".episodes")),
    ]  # fmt: skip
    if indices:
        command += ["--task-indices", indices]
    log = out.with_suffix(".log")
    with log.open("w") as sink:
        process = subprocess.Popen(
            command, env={**os.environ, **env}, stdout=sink, stderr=subprocess.STDOUT
        )
        if watch is not None:
            threading.Thread(target=watch, args=(process.pid,), daemon=True).start()
        process.wait()
    if not out.exists():
        raise SystemExit(f"rllm eval wrote no result; see {log}")
    result: dict[str, Any] = json.loads(out.read_text())
    result["command"] = " ".join(command)
    return result


def kill_grading_sandbox(
    backend: str, options: dict[str, Any], env: dict[str, str], pid: int, killed: list[str]
) -> None:
    """Stop the second sandbox the ``rllm eval`` process ``pid`` starts (the grading one).

    The kill run evaluates one task: its flow's sandbox is closed before the evaluator opens
    the grading one.  Only sandboxes owned by that process are looked at (others on the same
    engine, such as other test runs, are never touched).
    """
    os.environ.update(env)
    seen: list[str] = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(seen) < 2:
        for info in list_sandboxes(backend, options=options):
            owner_pid = (info.owner or "").rpartition(":")[2]
            if owner_pid == str(pid) and info.sandbox_id not in seen:
                seen.append(info.sandbox_id)
        time.sleep(0.1)
    if len(seen) >= 2 and kill_when_tests_run(backend, seen[1], options):
        killed.append(seen[1])


def kill_when_tests_run(backend: str, sandbox_id: str, options: dict[str, Any]) -> bool:
    """Stop the grading sandbox at once, while the evaluator readies it for the tests.

    (The bundled tasks' tests run in well under a second, too short to aim a kill at; the
    fault is the same one: the sandbox the evaluator grades in disappears under it.)
    """
    try:
        sandbox = SandboxRuntime.connect(backend, sandbox_id, options=options)
    except Exception:  # already gone: the grader finished first
        return False
    sandbox.backend.stop()
    return True


def check_backend(name: str, tasks: list[Any], workdir: Path, indices: str | None) -> list[str]:
    failures: list[str] = []
    with backend_setup(name, workdir) as (backend, options, env):
        bench = workdir / name
        write_benchmark(bench, tasks, settings={"backend": backend, "backend_options": options})
        for mode, expected in (("gold", 1.0), ("null", 0.0)):
            with scripted_server(mode) as url:
                result = rllm_eval(bench, url, env, workdir / f"{name}-{mode}.json", indices)
            rewards = [item["reward"] for item in result["items"]]
            ok = result["errors"] == 0 and rewards and all(r == expected for r in rewards)
            verdict = "ok" if ok else "FAIL"
            print(f"{name:10s} {mode}: rewards={rewards} errors={result['errors']} -> {verdict}")
            print(f"  {result['command']}")
            if not ok:
                failures.append(f"{name} {mode}")
        # Kill the grading sandbox of one task while the evaluator uses it.
        killed: list[str] = []
        with scripted_server("null") as url:
            result = rllm_eval(
                bench, url, env, workdir / f"{name}-kill.json", "0",
                watch=lambda pid: kill_grading_sandbox(backend, options, env, pid, killed),
            )  # fmt: skip
        item = result["items"][0]
        ok = bool(killed) and item["error"] is not None and result["errors"] == 1
        verdict = "ok" if ok else "FAIL"
        print(
            f"{name:10s} kill during grading: killed={killed} error={item['error']!r} -> {verdict}"
        )
        if not ok:
            failures.append(f"{name} kill")
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="docker,local,kubernetes,ags")
    parser.add_argument(
        "--task-indices", default=None, help="rllm eval --task-indices (default: all)"
    )
    parser.add_argument("--workdir", default=None, help="keep benchmarks, results and logs here")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    tasks = read_rows(load_rows("bundled")).tasks
    commit = os.environ.get("RLLM_COMMIT", "unknown")
    print(f"rLLM {commit}; {len(tasks)} bundled tasks; python {sys.version.split()[0]}", flush=True)
    failures: list[str] = []
    with contextlib.ExitStack() as stack:
        tmp = args.workdir or stack.enter_context(tempfile.TemporaryDirectory(prefix="rllm-main-"))
        Path(tmp).mkdir(parents=True, exist_ok=True)
        for name in args.backends.split(","):
            failures += check_backend(name, tasks, Path(tmp), args.task_indices)
    print("FAILED: " + ", ".join(failures) if failures else "all checks passed", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
