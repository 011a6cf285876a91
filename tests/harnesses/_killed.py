"""A harness process killed with SIGKILL while its sandbox is open, then ``reap``.

No harness hook runs after SIGKILL, so the adapters rely on what every sandbox carries (the
labels ``harness`` and ``harness-run``, and its owner's pid): ``reap`` removes a sandbox whose
owner is gone.  The tests' sandboxes are ``local`` ones under a directory of their own, so
``reap`` sees only the test's sandbox (never another run's on this machine).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from sandbox_runtime import list_sandboxes, load_backend

__all__ = ["hold_in_child", "kill_when_open_then_reap"]

#: The repository root: ``python -m tests.harnesses._hold_sandbox`` runs from there.
ROOT = Path(__file__).resolve().parents[2]


def hold_in_child(harness: str, label: str, base_dir: Path) -> subprocess.Popen[bytes]:
    """A child process that opens ``harness``'s sandbox and waits (``_hold_sandbox``)."""
    command = [sys.executable, "-m", "tests.harnesses._hold_sandbox", harness, label]
    return subprocess.Popen(
        [*command, str(base_dir)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def kill_when_open_then_reap(
    process: subprocess.Popen[Any], label: str, base_dir: Path, harness: str, within: float = 180
) -> str:
    """SIGKILL ``process`` once its sandbox (labelled ``test-run=label``) is open, then reap.

    Asserts that the killed process left exactly that sandbox, labelled with ``harness``, that
    ``reap`` removes it and nothing else; returns its id.
    """
    options = {"base_dir": str(base_dir)}
    labels = {"test-run": label}
    try:
        deadline = time.monotonic() + within
        while not list_sandboxes("local", labels=labels, options=options):
            assert time.monotonic() < deadline, f"{harness} never opened its sandbox"
            assert process.poll() is None, f"{harness} ended early ({process.returncode})"
            time.sleep(0.5)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    (found,) = list_sandboxes("local", labels=labels, options=options)
    assert found.labels["harness"] == harness
    backend = load_backend("local")
    reaped = backend.reap(backend.options_model.model_validate(options))
    assert [r.sandbox_id for r in reaped] == [found.sandbox_id]
    assert list_sandboxes("local", labels=labels, options=options) == []
    return found.sandbox_id
