"""Benchmark grading in the agent's own sandbox: what the library adds to the benchmark's verdict.

``grade_in=same`` grades the way R2E-Gym does: the task's tests run where the agent worked,
so the reward is the benchmark's.  The library never raises that reward, but an agent that
forged the test machinery must not pass unnoticed, and one that broke the test run must not
hide behind "no verdict":

- **A pass is checked by the canary.** When the tests passed, the canary
  (:mod:`sandbox_runtime.swe.canary`) runs with the agent's changed modules imported first;
  a module that neuters the assertions makes it pass, and the result is flagged
  (``canary: tripped``).  The reward stays the benchmark's: this mode measures what the
  benchmark would pay, and strict grading is the mode that refuses it.
- **No verdict after a tampered test run is a 0.** Tests that give no verdict are normally an
  error (no reward), since a sandbox fault must never read as a failed fix.  When the tamper
  check (read from outside the sandbox) saw the agent change what the test run reads or runs
  (its tools, startup files, runner configuration, the tests), the missing verdict is the
  agent's doing: the reward is 0, and the reason names the changes.  An infrastructure error
  stays an error.
"""

from __future__ import annotations

from collections.abc import Sequence

from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.swe.canary import modules_of, run_canary
from sandbox_runtime.swe.capture import ChangeSet
from sandbox_runtime.swe.grading import GradeResult
from sandbox_runtime.swe.tamper import TamperFlag

__all__ = ["review_same_sandbox"]

#: Flags that say the agent changed what a test run in its sandbox reads or runs.
_TEST_RUN_KINDS = frozenset({"test file", "test config", "outside repository"})
_CANARY_TIMEOUT = 120.0


def review_same_sandbox(
    graded: GradeResult,
    sandbox: SandboxRuntime,
    changes: ChangeSet | None,
    flags: Sequence[TamperFlag],
    *,
    timeout: float,
) -> GradeResult:
    """``graded`` (the benchmark's verdict in the agent's sandbox) after the two checks above."""
    if graded.resolved and changes is not None:
        written = [c.path for c in changes.changes if c.kind == "file"]
        canary = run_canary(sandbox, modules_of(written), timeout=min(timeout, _CANARY_TIMEOUT))
        graded.canary = canary.state
        if canary.tripped:
            graded.reason = f"{graded.reason}; canary tripped ({canary.detail})"
        return graded
    tampered = [f for f in flags if f.kind in _TEST_RUN_KINDS]
    if graded.is_error and graded.reason.startswith("test error") and tampered:
        paths = ", ".join(f.path for f in tampered[:5])
        graded.reward = 0.0
        graded.reason = (
            f"the tests gave no verdict after the agent changed what they run with ({paths}): "
            f"{graded.reason}"
        )
    return graded
