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

_COUNTER = "i=0; while :; do i=$((i+1)); echo $i > .c && mv .c counter.txt; sleep 0.1; done"


def check_pause_keeps_the_files_not_the_processes(sandbox: SandboxRuntime) -> None:
    """Pause and resume a sandbox running a counter: its file stays, the counter does not."""
    counter = sandbox.exec_background(_COUNTER)
    deadline = time.monotonic() + 20
    while not sandbox.exists("counter.txt"):
        assert time.monotonic() < deadline, "the counter never wrote its file"
        time.sleep(0.1)
    at_pause = int(sandbox.read_text("counter.txt"))
    sandbox.pause()
    assert sandbox.paused
    sandbox.resume()
    at_resume = int(sandbox.read_text("counter.txt"))  # the filesystem was kept...
    assert at_resume >= at_pause
    time.sleep(1.0)  # ... and a counter still running would gain ~10 in this second
    assert int(sandbox.read_text("counter.txt")) == at_resume, "a process outlived the pause"
    del counter  # its process went with the paused instance; there is nothing to kill
