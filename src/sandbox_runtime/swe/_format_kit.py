"""What the task formats share with the modules that ask them, kept below both.

A format's ``grade`` returns a :class:`GradeResult` and its ``prepare`` raises
:class:`SetupError`; :mod:`~sandbox_runtime.swe.grading` and :mod:`~sandbox_runtime.swe.prepare`
look a task's format up and ask it, and are where callers and third-party formats import
these names from.  Defined here, under both, they let the built-in formats import them (and
the helpers they share) without importing the modules that import the formats.
"""

from __future__ import annotations

import enum
import posixpath
import shlex
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from sandbox_runtime._core.results import ExecResult
from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.errors import SandboxError
from sandbox_runtime.swe.outcome_record import SUSPECT_STATES, wrap_test_script
from sandbox_runtime.swe.parsers import strip_ansi

__all__ = [
    "DEFAULT_TEST_TIMEOUT",
    "GradeResult",
    "GradingError",
    "Outcome",
    "SetupError",
    "listing",
    "rel",
    "run_test_script",
    "timed_out_result",
]

# -- grading ---------------------------------------------------------------------------

#: Seconds the test run may take, R2E-Gym's default for ``_calculate_reward``.
DEFAULT_TEST_TIMEOUT = 300.0
_TEST_ENV = {"PYTHONDONTWRITEBYTECODE": "1"}
_MAX_LISTED = 10


class Outcome(str, enum.Enum):
    """What grading concluded; see :mod:`sandbox_runtime.swe.grading`."""

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
    grading: str = "benchmark"
    """``benchmark`` or ``strict`` (:mod:`sandbox_runtime.swe.strict`)."""
    dropped: list[dict[str, str]] = field(default_factory=list)
    """Under strict grading, the files whose change was kept from the tests: ``{path, why}``."""
    refused: str = ""
    """Under strict grading, why the patch text was refused whole (not git's unified diff,
    a rename onto a test...; :mod:`sandbox_runtime.swe.patch_text`): the reward is then 0."""
    canary: str = ""
    """Under strict grading, the canary's state after the tests (``clean``, ``tripped``,
    ``inconclusive``; :mod:`sandbox_runtime.swe.canary`); empty when it did not run."""
    outcome_record: str = ""
    """Under strict grading, what pytest's out-of-band record said of the log (``vouched``,
    ``contradicted``, ``absent``...; :mod:`sandbox_runtime.swe.outcome_record`)."""
    applied_by: str = ""
    """In a fresh sandbox, the tool that applied the patch: ``git apply`` (strict grading's
    only one), ``git apply --recount`` or ``patch --fuzz=5`` (benchmark grading's fallbacks)."""

    @property
    def integrity_flagged(self) -> bool:
        """True when grading itself caught a forging attempt.

        A refused patch, a tripped canary, or a log the out-of-band record contradicts.
        """
        return (
            bool(self.refused) or self.canary == "tripped" or self.outcome_record in SUSPECT_STATES
        )

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


def run_test_script(sandbox: SandboxRuntime, script: str, timeout: float) -> ExecResult:
    """Run a task's test script as every format does (no ``.pyc`` files left behind).

    Under strict grading the script also records pytest's verdicts out of band
    (:mod:`sandbox_runtime.swe.outcome_record`).
    """
    wrapped, recorder = wrap_test_script(script)
    result = sandbox.exec(wrapped, timeout=timeout, env=_TEST_ENV)
    if recorder is not None:
        recorder.saw(result.output)
    return result


def timed_out_result(result: ExecResult, timeout: float) -> GradeResult:
    """The error outcome of a test run that outlived its timeout."""
    return GradeResult(
        None,
        f"tests timed out after {timeout:g}s",
        test_output=strip_ansi(result.output),
        test_exit_code=result.exit_code,
    )


# -- preparing -------------------------------------------------------------------------


class SetupError(SandboxError):
    """The task's environment could not be prepared in the sandbox."""


def rel(sandbox: SandboxRuntime, path: str) -> str:
    """``path`` relative to the sandbox's workdir, quoted for a shell."""
    return shlex.quote(posixpath.relpath(path, sandbox.workdir))
