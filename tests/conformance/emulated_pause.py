"""What the AGS emulator's pause keeps, checked where the shared suite's pause test is xfailed.

The emulator keeps an instance's filesystem across a pause, never its processes
(docs/ags-emulator.md, "What is kept"); the real service and e2b keep both.  The shared
suite's ``test_pause_keeps_a_running_process`` therefore fails there, and it used to be
marked as an expected failure, which waited out its 20 s deadline on every run.  This checks
the emulator's own documented behaviour instead, in a few seconds: the counter's file is
kept, and nothing runs the counter after the resume.
"""

from __future__ import annotations

import time

from sandbox_runtime import SandboxRuntime
from sandbox_runtime.backend_kit.testing.checkpoints import COUNTER_COMMAND, wait_for


def check_pause_keeps_the_files_not_the_processes(sandbox: SandboxRuntime) -> None:
    """Pause and resume a sandbox running a counter: its file stays, the counter does not."""
    # Not killed after: its process goes with the paused instance (the check below).
    sandbox.exec_background(COUNTER_COMMAND)
    wait_for(lambda: sandbox.exists("counter.txt"))
    at_pause = int(sandbox.read_text("counter.txt"))
    sandbox.pause()
    assert sandbox.paused
    sandbox.resume()
    at_resume = int(sandbox.read_text("counter.txt"))  # the filesystem was kept...
    assert at_resume >= at_pause
    time.sleep(1.0)  # ... and a counter still running would gain ~10 in this second
    assert int(sandbox.read_text("counter.txt")) == at_resume, "a process outlived the pause"
