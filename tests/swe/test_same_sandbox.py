"""Benchmark grading in the agent's sandbox: a missing verdict after a tampered test run is 0.

The canary half (a pass checked with the agent's modules loaded) runs against real sandboxes
in ``tests/swe/test_redteam.py::test_benchmark_grading_flags_what_the_matrix_found``.
"""

from __future__ import annotations

from typing import cast

from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.swe.grading import GradeResult
from sandbox_runtime.swe.same_sandbox import review_same_sandbox
from sandbox_runtime.swe.tamper import TamperFlag

#: Never touched: only a pass runs the canary in the sandbox.
_NO_SANDBOX = cast(SandboxRuntime, object())
_TOOL = TamperFlag("/usr/bin/python3", "outside repository", "the test run's shell or tools")


def _review(reason: str, flags: list[TamperFlag]) -> GradeResult:
    graded = GradeResult(None, reason)
    return review_same_sandbox(graded, _NO_SANDBOX, None, flags, timeout=30)


def test_no_verdict_after_the_agent_changed_the_test_run_is_a_zero() -> None:
    graded = _review("test error: no test results in the output (exit code 0)", [_TOOL])
    assert graded.reward == 0.0
    assert "/usr/bin/python3" in graded.reason
    assert "no test results" in graded.reason


def test_no_verdict_stays_an_error_without_such_a_change_or_from_the_infrastructure() -> None:
    unflagged = _review("test error: no test results in the output (exit code 0)", [])
    assert unflagged.reward is None
    unchecked = _review("test error: no test results", [TamperFlag("", "unchecked")])
    assert unchecked.reward is None
    gone = _review("infrastructure error: SandboxGoneError: the sandbox is gone", [_TOOL])
    assert gone.reward is None
