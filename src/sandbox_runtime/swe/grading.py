"""Grade a task: its format runs the tests and applies its benchmark's rule; here, the outcome.

Grading lives here and in the task formats (:mod:`sandbox_runtime.swe.formats`), above the
sandbox API, never in a backend: it runs commands through
:class:`~sandbox_runtime.SandboxRuntime` and reads their results.  Each format follows its
source benchmark's own rule (R2E-Gym's exact match of parsed results, SWE-bench's
``RESOLVED_FULL``, a JSONL task's "all tests pass"); this module holds what they share.

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

import enum
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from sandbox_runtime._core.results import ExecResult
from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.errors import SandboxError
from sandbox_runtime.swe.formats import load_format
from sandbox_runtime.swe.parsers import strip_ansi
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

#: Seconds the test run may take, R2E-Gym's default for ``_calculate_reward``.
DEFAULT_TEST_TIMEOUT = 300.0
_TEST_ENV = {"PYTHONDONTWRITEBYTECODE": "1"}
_MAX_LISTED = 10


class Outcome(str, enum.Enum):
    """What grading concluded; see the module docstring."""

    RESOLVED = "resolved"
    UNRESOLVED = "unresolved"
    ERROR = "error"


class GradingError(SandboxError):
    """A task could not be graded (an ``error`` outcome) where a number is required.

    Raised by reward functions that must return a float (an environment's final reward,
    verl's ``compute_score``) instead of returning a reward of 0 that would be a lie.
    """

    def __init__(self, grade: GradeResult) -> None:
        super().__init__(f"no reward: {grade.reason}")
        self.grade = grade


@dataclass
class GradeResult:
    """The reward for one task and everything needed to explain it.

    ``reward`` is ``None`` exactly when the outcome is ``error``: nothing was learned about
    the fix, so there is no number to report.
    """

    reward: float | None
    reason: str
    status_map: dict[str, str] = field(default_factory=dict)
    test_output: str = ""
    test_exit_code: int | None = None
    duration: float = 0.0
    graded_by: str = ""
    parser: str = ""
    grade_in: str = ""
    """``same`` or ``fresh``: where the tests ran (:mod:`sandbox_runtime.swe.isolation`)."""

    @property
    def outcome(self) -> Outcome:
        """Resolved, unresolved, or error (no reward)."""
        if self.reward is None:
            return Outcome.ERROR
        return Outcome.RESOLVED if self.reward >= 1.0 else Outcome.UNRESOLVED

    @property
    def resolved(self) -> bool:
        """True for a reward of 1."""
        return self.outcome is Outcome.RESOLVED

    @property
    def is_error(self) -> bool:
        """True when the tests gave no verdict (no reward)."""
        return self.reward is None

    def reward_or_raise(self) -> float:
        """The reward, or :class:`GradingError` for an ``error`` outcome."""
        if self.reward is None:
            raise GradingError(self)
        return self.reward

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (for reports and trajectories)."""
        return {**asdict(self), "outcome": self.outcome.value}


def listing(ids: Iterable[str]) -> str:
    """At most ten test ids for a reason line, then how many more."""
    items = list(ids)
    shown = ", ".join(items[:_MAX_LISTED])
    return shown + (f" (+{len(items) - _MAX_LISTED} more)" if len(items) > _MAX_LISTED else "")


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


def run_test_script(sandbox: SandboxRuntime, script: str, timeout: float) -> ExecResult:
    """Run a task's test script as every format does (no ``.pyc`` files left behind)."""
    return sandbox.exec(script, timeout=timeout, env=_TEST_ENV)


def timed_out_result(result: ExecResult, timeout: float) -> GradeResult:
    """The error outcome of a test run that outlived its timeout."""
    return GradeResult(
        None,
        f"tests timed out after {timeout:g}s",
        test_output=strip_ansi(result.output),
        test_exit_code=result.exit_code,
    )
