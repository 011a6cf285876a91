"""``close_on_signal`` / ``close_everything``: a stopped process closes what it started.

On the local backend (real processes, real directories): a library user's main installs
``close_on_signal``, opens sandboxes busy in worker threads, and is
sent the signal; nothing of it is left, and the signal still does what it did before.
(Checkpoints held by ``PreparedStates`` are covered on docker by
tests/integrations/test_rllm_flow_signals.py and tests/swe/test_cli_run.py.)
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sandbox_runtime import SandboxClosedError, SandboxRuntime, close_on_signal
from sandbox_runtime._core import shutdown

MAIN = textwrap.dedent(
    """
    import sys, threading, time
    from sandbox_runtime import SandboxRuntime, close_on_signal
    close_on_signal()
    base = sys.argv[1]
    boxes = [SandboxRuntime(backend="local", options={"base_dir": base}).start() for _ in range(2)]
    for box in boxes:
        threading.Thread(target=box.exec, args=("sleep 120",), daemon=True).start()
    print("ready", flush=True)
    time.sleep(120)
    """
)


def _as_a_foreground_job() -> None:
    """Give the child SIGINT's default action, as a terminal's foreground job has.

    A shell starts background jobs (``cmd &``, CI runners) with SIGINT ignored, and the
    child inherits that: Python then installs no ``KeyboardInterrupt`` handler, and a host
    that ignores SIGINT is one ``close_on_signal`` rightly leaves alone.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize(
    ("signum", "status"),
    [(signal.SIGTERM, -signal.SIGTERM), (signal.SIGINT, -signal.SIGINT)],
    ids=["SIGTERM", "SIGINT"],
)
def test_a_signal_closes_every_sandbox_and_checkpoint(
    tmp_path: Path, signum: int, status: int
) -> None:
    base = tmp_path / "base"
    base.mkdir()
    script = tmp_path / "main.py"
    script.write_text(MAIN)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(base)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_as_a_foreground_job,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready", proc.stderr
        before = sorted(p.name for p in base.iterdir())
        assert len(before) >= 2, before
        time.sleep(0.5)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    # Then each signal does what it did before: SIGTERM ends the process; SIGINT raises
    # KeyboardInterrupt, which Python ends with SIGINT when nothing catches it.
    assert proc.returncode == status, err
    assert "closing this process's sandboxes and checkpoints" in err
    assert not [p for p in base.rglob("*") if p.is_file()], sorted(base.rglob("*"))


def test_no_sandbox_starts_once_closing_began(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # This process's own registry, so that only this test's sandbox is closed (not a
    # session fixture's of another test in this worker), and the flag does not stay set.
    monkeypatch.setattr(shutdown, "_stopping", type(shutdown._stopping)())
    monkeypatch.setattr(shutdown, "_live", [type(tier)() for tier in shutdown._live])
    box = SandboxRuntime(backend="local", options={"base_dir": str(tmp_path)}).start()
    assert shutdown.close_everything() >= 1
    assert not box.is_alive()
    with pytest.raises(SandboxClosedError, match="shutting down"):
        SandboxRuntime(backend="local", options={"base_dir": str(tmp_path)}).start()


def test_a_host_handler_is_left_alone_when_asked() -> None:
    def host(signum: int, frame: object) -> None:
        """The host program's own handler."""

    previous = signal.signal(signal.SIGTERM, host)
    try:
        assert close_on_signal([signal.SIGTERM], only_if_default=True) == []
        assert signal.getsignal(signal.SIGTERM) is host
    finally:
        signal.signal(signal.SIGTERM, previous)
