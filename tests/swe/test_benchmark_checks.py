"""Benchmark grading's own checks: a missing verdict after a tampered test run is 0.

The record and the canary (a pass checked with the agent's modules loaded) run against real
sandboxes in ``tests/swe/test_redteam.py::test_benchmark_grading_flags_what_the_matrix_found``.
"""

from __future__ import annotations

from sandbox_runtime.swe.benchmark_checks import no_verdict_after_tampering, patch_paths
from sandbox_runtime.swe.grading import GradeResult
from sandbox_runtime.swe.tamper import TamperFlag

_TOOL = TamperFlag("/usr/bin/python3", "outside repository", "the test run's shell or tools")


def _review(reason: str, flags: list[TamperFlag]) -> GradeResult:
    graded = GradeResult(None, reason)
    return no_verdict_after_tampering(graded, flags)


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


def test_the_paths_a_patch_writes_as_git_reads_it_or_patch_would() -> None:
    git = "diff --git a/pkg/a.py b/pkg/a.py\n--- a/pkg/a.py\n+++ b/pkg/a.py\n@@ -1 +1 @@\n-x\n+y\n"
    assert patch_paths(git) == ["pkg/a.py"]
    # hunk counts git refuses (a fuzz-only hunk): still the file patch would write
    fuzz = "--- a/pkg/__init__.py\n+++ b/pkg/__init__.py\n@@ -1,3 +1,4 @@\n no\n+z\n"
    assert patch_paths(fuzz) == ["pkg/__init__.py"]
