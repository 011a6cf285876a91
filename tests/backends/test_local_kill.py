"""``kill_marked`` ends a command's whole tree, including what escapes one scan of ``/proc``."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid

from sandbox_runtime.backends.local._process import kill_marked


def _marked(marker: bytes) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/environ", "rb") as handle:
                    if marker in handle.read().split(b"\0"):
                        found.append(int(name))
            except OSError:
                continue
    return found


def test_processes_started_in_new_sessions_while_the_scan_runs_are_killed() -> None:
    """A parent that keeps starting ``setsid`` children: those forked (or mid-``execve``)
    after a scan passed them are caught by the next one."""
    marker = f"SANDBOX_RUNTIME_TEST_KILL={uuid.uuid4().hex}"
    spawner = subprocess.Popen(
        ["sh", "-c", "while :; do setsid sleep 100 & done"],
        env={**os.environ, "SANDBOX_RUNTIME_TEST_KILL": marker.split("=", 1)[1]},
        start_new_session=True,
    )
    try:
        time.sleep(0.3)
        assert kill_marked(marker) > 1
        spawner.wait(timeout=10)
        time.sleep(0.1)  # a survivor would be running its sleep by now
        assert _marked(marker.encode()) == []
    finally:
        kill_marked(marker)
        if spawner.poll() is None:
            os.killpg(spawner.pid, signal.SIGKILL)
