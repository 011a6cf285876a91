"""What benchmark grading adds to the benchmark's verdict: flags, never a higher reward.

``grading=benchmark`` pays what the benchmark's own harness would pay (R2E-Gym grades in the
agent's sandbox, SWE-bench applies a model patch with ``patch --fuzz``), so the reward stays
the benchmark's.  But an agent that forged the test machinery must not pass unnoticed, and
one that broke the test run must not hide behind "no verdict".  Three checks, each measured
by the library rather than believed from the log:

- **The out-of-band record.** The tests run with pytest's verdicts recorded out of band, as
  under strict grading (:mod:`sandbox_runtime.swe.outcome_record`); a log the record
  contradicts (``PASSED`` lines printed by the code under test) is flagged
  (``outcome_record: contradicted``).  Reading the record never turns a verdict into an
  error here: benchmark grading does not depend on it.
- **The canary after a pass.** When the tests passed, the canary
  (:mod:`sandbox_runtime.swe.canary`) runs with the changed modules imported first; a module
  that neuters the assertions, or turns ``TestCase.run`` into a no-op, makes it pass, and
  the result is flagged (``canary: tripped``).
- **No verdict after a tampered test run is a 0** (grading in the agent's sandbox).  Tests
  that give no verdict are normally an error (no reward), since a sandbox fault must never
  read as a failed fix.  When the tamper check, read from outside the sandbox, saw the agent
  change what the test run reads or runs (its tools, startup files, runner configuration,
  the tests), the missing verdict is the agent's doing: the reward is 0, and the reason
  names the changes.  An infrastructure error stays an error.

Strict grading is the mode that refuses a forged pass; this one measures what the benchmark
would have paid, and says when that was forged.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence

from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.errors import SandboxError
from sandbox_runtime.swe.canary import modules_of, run_canary
from sandbox_runtime.swe.grading import GradeResult, grade
from sandbox_runtime.swe.outcome_record import read_record, recorded, verdict_of
from sandbox_runtime.swe.patch_text import PatchRefused, read_patch
from sandbox_runtime.swe.tamper import TamperFlag
from sandbox_runtime.swe.task import Task

__all__ = ["grade_benchmark", "no_verdict_after_tampering", "patch_paths"]

logger = logging.getLogger("sandbox_runtime.swe")

#: Flags that say the agent changed what a test run in its sandbox reads or runs.
_TEST_RUN_KINDS = frozenset({"test file", "test config", "outside repository"})
_CANARY_TIMEOUT = 120.0
#: A file a patch writes, as ``patch`` reads it: its ``+++`` line (``b/`` stripped).
_NEW_FILE = re.compile(r"^\+\+\+ (?:b/)?(\S+)", re.M)


def patch_paths(patch: str) -> list[str]:
    """The repository paths ``patch`` writes: git's reading, or ``+++`` lines when git refuses."""
    try:
        return [s.new_path for s in read_patch(patch) if s.new_path is not None]
    except PatchRefused:
        return [path for path in _NEW_FILE.findall(patch) if path != "/dev/null"]


def grade_benchmark(
    task: Task,
    sandbox: SandboxRuntime,
    changed: Iterable[str],
    *,
    timeout: float,
    patch_error: str | None = None,
) -> GradeResult:
    """The benchmark's verdict in ``sandbox``, with the record and the canary as flags.

    ``changed``: the repository-relative paths the agent's change wrote (the canary imports
    their modules).  ``patch_error``: the patch did not apply (a 0, no test run).
    """
    if patch_error is not None:
        return grade(task, sandbox, timeout=timeout, patch_error=patch_error)
    try:
        with recorded(sandbox) as recorder:
            graded = grade(task, sandbox, timeout=timeout)
    except SandboxError as exc:  # installing the record failed (grade() never raises)
        logger.info("no outcome record for %s: %s", task.task_id, exc)
        return _canary_after_pass(grade(task, sandbox, timeout=timeout), sandbox, changed, timeout)
    try:
        if graded.reward is not None:
            state, why = verdict_of(recorder, read_record(sandbox, recorder), graded)
            graded.outcome_record = state
            if graded.integrity_flagged:
                graded.reason = f"{graded.reason}; outcome record {state} ({why})"
    except SandboxError as exc:
        logger.info("the outcome record of %s could not be read: %s", task.task_id, exc)
    finally:
        recorder.remove(sandbox)
    return _canary_after_pass(graded, sandbox, changed, timeout)


def _canary_after_pass(
    graded: GradeResult, sandbox: SandboxRuntime, changed: Iterable[str], timeout: float
) -> GradeResult:
    if not graded.resolved:
        return graded
    canary = run_canary(sandbox, modules_of(changed), timeout=min(timeout, _CANARY_TIMEOUT))
    graded.canary = canary.state
    if canary.tripped:
        graded.reason = f"{graded.reason}; canary tripped ({canary.detail})"
    return graded


def no_verdict_after_tampering(graded: GradeResult, flags: Sequence[TamperFlag]) -> GradeResult:
    """``graded`` with a test run's missing verdict made 0 when the agent tampered with it."""
    tampered = [f for f in flags if f.kind in _TEST_RUN_KINDS]
    if graded.is_error and graded.reason.startswith("test error") and tampered:
        paths = ", ".join(f.path for f in tampered[:5])
        graded.reward = 0.0
        graded.reason = (
            f"the tests gave no verdict after the agent changed what they run with ({paths}): "
            f"{graded.reason}"
        )
    return graded
