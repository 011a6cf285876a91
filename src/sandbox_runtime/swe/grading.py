"""Grade a task: its format runs the tests and applies its benchmark's rule; here, the outcome.

Grading lives here and in the task formats (:mod:`sandbox_runtime.swe.formats`), above the
sandbox API, never in a backend: it runs commands through
:class:`~sandbox_runtime.SandboxRuntime` and reads their results.  Each format follows its
source benchmark's own rule (R2E-Gym's exact match of parsed results, SWE-bench's
``RESOLVED_FULL``, a JSONL task's "all tests pass"); :func:`grade` asks the task's format.
What the formats share (:class:`GradeResult`, the helpers that run tests and explain a
verdict) is defined in ``_format_kit``, below the formats, and named here, where callers and
third-party formats import it from.

Every result has one of three outcomes (:class:`Outcome`), because a reward must never lie:

* ``resolved``: reward 1, the task's tests say the fix is right;
* ``unresolved``: reward 0, the task's tests ran and say it is not (``tests failed: <ids>``,
  ``patch did not apply: ...``, ``test patch did not apply``);
* ``error``: **no reward** (``None``).  The tests could not give a verdict: the sandbox is
  gone or the backend failed (``infrastructure error: ...``), the test run outlived its
  timeout (``tests timed out after Ns``), the harness itself failed or printed no results
  (``test error: ...``).  A 0 there would teach a policy that a correct fix was wrong, so
  callers count it as an error, retry it, or drop the sample; they never train on it.
"""

from __future__ import annotations

import time

from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.errors import SandboxError
from sandbox_runtime.swe._format_kit import (
    DEFAULT_TEST_TIMEOUT,
    GradeResult,
    GradingError,
    Outcome,
    listing,
    run_test_script,
    timed_out_result,
)
from sandbox_runtime.swe.formats import load_format
from sandbox_runtime.swe.task import Task

__all__ = [
    "DEFAULT_TEST_TIMEOUT",
    "GradeResult",
    "GradingError",
    "Outcome",
    "grade",
    "listing",
    "run_test_script",
    "timed_out_result",
]


def grade(
    task: Task,
    sandbox: SandboxRuntime,
    *,
    timeout: float = DEFAULT_TEST_TIMEOUT,
    patch_error: str | None = None,
) -> GradeResult:
    """Run the task's tests in ``sandbox`` (after the agent) and compute the reward.

    ``patch_error`` is what the patch tool said when the agent's patch did not apply; the
    reward is then 0 without running the tests.  Sandbox failures are returned as an
    ``error`` outcome (no reward), not raised, so one broken task never stops a run and is
    never mistaken for a wrong fix.
    """
    began = time.monotonic()
    if patch_error is not None:
        return GradeResult(0.0, f"patch did not apply: {patch_error.strip()[:500]}")
    try:
        result = load_format(task.format).grade(task, sandbox, timeout)
    except SandboxError as exc:
        result = GradeResult(None, f"infrastructure error: {type(exc).__name__}: {exc}")
    result.duration = time.monotonic() - began
    return result
