"""Check a task set before training on it: gold must resolve, no patch must not.

A broken image (its tests fail before any patch), a bad row (a FAIL_TO_PASS test that
already passes) or a grading difference (the library reads the log another way than the
harness) all look the same from a training run: rewards that lie.  :func:`check_task` runs
each task twice, each time in a fresh sandbox of its image: once with the gold patch and
once with no patch, and grades both exactly as a run would (:func:`~sandbox_runtime.swe
.grading.grade`).  For rows with FAIL_TO_PASS / PASS_TO_PASS lists it then names every test
id whose status disagrees with what the lists promise, and why (it failed, it is missing
from the log, it errored, it was skipped), and sums the finding up in one line.

``harness`` (:func:`~sandbox_runtime.swe.check_harness.compare_with_harness`) also runs the
SWE-bench harness's own evaluation script in fresh sandboxes of the same image and compares
its verdicts with the library's, id by id.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.errors import SandboxError
from sandbox_runtime.swe.formats.swebench import SWEBenchGrading
from sandbox_runtime.swe.grading import GradeResult
from sandbox_runtime.swe.isolation import grade_fresh
from sandbox_runtime.swe.parsers import PASSED_STATUSES
from sandbox_runtime.swe.runner import RunOptions, task_sandbox_config
from sandbox_runtime.swe.task import Task

__all__ = [
    "Disagreement",
    "RowCheck",
    "check_task",
    "check_tasks",
    "graded_run",
    "table",
    "why_not_passed",
]

logger = logging.getLogger("sandbox_runtime.swe")

GOLD = "gold"
NULL = "null"
MISSING = "missing from the log"


@dataclass(frozen=True)
class Disagreement:
    """One test id whose status in one run is not what the row's lists promise."""

    run: str
    """``gold`` or ``null``."""
    test_id: str
    listed_in: str
    """``FAIL_TO_PASS`` or ``PASS_TO_PASS``."""
    expected: str
    """``pass`` or ``fail``."""
    why: str
    """``failed``, ``error``, ``skipped``, ``missing from the log`` or ``passed``."""

    def line(self) -> str:
        """``null: PASS_TO_PASS tests/x.py::y failed (expected to pass)``."""
        return (
            f"{self.run}: {self.listed_in} {self.test_id} {self.why} (expected to {self.expected})"
        )


@dataclass
class RowCheck:
    """What checking one task found."""

    task_id: str
    image: str
    gold: GradeResult | None = None
    null: GradeResult | None = None
    disagreements: list[Disagreement] = field(default_factory=list)
    diagnosis: str = ""
    ok: bool = False
    harness: dict[str, Any] | None = None
    """The harness comparison (:mod:`sandbox_runtime.swe.check_harness`), when asked for."""
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the ``--json`` output's rows)."""
        return {
            "task_id": self.task_id,
            "image": self.image,
            "ok": self.ok,
            "diagnosis": self.diagnosis,
            "gold": _run_dict(self.gold),
            "null": _run_dict(self.null),
            "disagreements": [vars(item) for item in self.disagreements],
            "harness": self.harness,
            "seconds": round(self.seconds, 2),
        }


def _run_dict(result: GradeResult | None) -> dict[str, Any] | None:
    if result is None:
        return None
    return {
        "outcome": result.outcome.value,
        "reward": result.reward,
        "reason": result.reason,
        "parser": result.parser,
        "status_map": result.status_map,
    }


def why_not_passed(status: str | None) -> str:
    """Why a test that should pass did not: its status in words."""
    if status is None:
        return MISSING
    return {"FAILED": "failed", "ERROR": "error", "SKIPPED": "skipped"}.get(status, status.lower())


def graded_run(task: Task, options: RunOptions, which: str) -> GradeResult:
    """Grade ``task`` in a new sandbox of its image with the gold patch (``gold``) or none.

    Exactly what ``run`` does when it grades a diff in a fresh sandbox
    (:func:`~sandbox_runtime.swe.isolation.grade_fresh`), the diff being the gold patch.
    """
    if which == GOLD and not task.gold_patch.strip():
        return GradeResult(0.0, "patch did not apply: the row has no gold patch")
    try:
        sandbox = SandboxRuntime(task_sandbox_config(task, options))
    except SandboxError as exc:
        return GradeResult(None, f"infrastructure error: {type(exc).__name__}: {exc}")
    patch = task.gold_patch if which == GOLD else ""
    reverse = which == GOLD and task.gold_patch_reversed
    return grade_fresh(task, sandbox, patch, timeout=options.test_timeout, reverse=reverse)


def disagreements(task: Task, gold: GradeResult, null: GradeResult) -> list[Disagreement]:
    """The test ids whose status in a graded run is not what the row's lists say.

    Only rows with FAIL_TO_PASS / PASS_TO_PASS lists (SWE-bench, SWE-smith) have ids to
    compare; a run that gave no verdict has no statuses and adds nothing here.
    """
    if not isinstance(task.grading, SWEBenchGrading):
        return []
    found: list[Disagreement] = []
    f2p, p2p = task.grading.fail_to_pass, task.grading.pass_to_pass
    if not gold.is_error:
        for listed_in, ids in (("FAIL_TO_PASS", f2p), ("PASS_TO_PASS", p2p)):
            for test_id in ids:
                status = gold.status_map.get(test_id)
                if status not in PASSED_STATUSES and not (
                    listed_in == "PASS_TO_PASS" and status == "SKIPPED"
                ):
                    found.append(
                        Disagreement(GOLD, test_id, listed_in, "pass", why_not_passed(status))
                    )
    if not null.is_error:
        for test_id in f2p:
            if null.status_map.get(test_id) in PASSED_STATUSES:
                found.append(Disagreement(NULL, test_id, "FAIL_TO_PASS", "fail", "passed"))
        for test_id in p2p:
            status = null.status_map.get(test_id)
            if status not in PASSED_STATUSES and status != "SKIPPED":
                found.append(
                    Disagreement(NULL, test_id, "PASS_TO_PASS", "pass", why_not_passed(status))
                )
    return found


def _did_not_apply(result: GradeResult) -> bool:
    """Whether a run's patch (the row's gold patch, or its test patch) failed to apply."""
    return not result.is_error and "patch did not apply" in result.reason


def _first_line(reason: str, limit: int = 200) -> str:
    line = reason.strip().splitlines()[0] if reason.strip() else reason
    return line if len(line) <= limit else line[: limit - 3] + "..."


def diagnose(gold: GradeResult, null: GradeResult, found: Sequence[Disagreement]) -> str:
    """One line that says what is wrong with a row, or ``OK``.

    The no-patch run speaks first: a test patch that did not apply, then tests that already
    pass (FAIL_TO_PASS) or already fail (PASS_TO_PASS) before any patch are the image's or the
    row's fault, whatever gold did.  A gold patch that did not apply comes next: its run has
    no test output, so every id would otherwise read as missing from the log.
    Ids the log does not name at all are told apart: there the row's ids and the test
    runner's disagree (a grading difference), which says nothing about the image.
    """
    null_f2p = [d for d in found if d.run == NULL and d.listed_in == "FAIL_TO_PASS"]
    null_p2p = [d for d in found if d.run == NULL and d.listed_in == "PASS_TO_PASS"]
    # The reasons are read before the ids: a patch that did not apply leaves no test output,
    # so every id is "missing", and that must not be blamed on the ids.
    if _did_not_apply(null):
        return f"null: {_first_line(null.reason)}"
    failing = [d for d in null_p2p if d.why != MISSING]
    if failing:
        return f"broken image: PASS_TO_PASS tests fail before any patch ({len(failing)})"
    if _did_not_apply(gold):
        return f"gold: {_first_line(gold.reason)}"
    missing = [d for d in found if d.why == MISSING]
    if missing:
        return (
            f"ids not in the log: {len(missing)} of the row's test ids are missing from the "
            "test output (the row's ids and the runner's differ, or those tests did not run)"
        )
    if null_f2p:
        return (
            "broken image or row: FAIL_TO_PASS tests already pass before any patch "
            f"({len(null_f2p)})"
        )
    if gold.is_error:
        return f"no verdict with the gold patch: {gold.reason}"
    if not gold.resolved:
        return f"gold does not resolve: {gold.reason}"
    if null.is_error:
        return f"no verdict without a patch: {null.reason}"
    if null.resolved:
        return "no patch resolves the task: its tests check nothing the fix changes"
    return "OK"


def check_task(
    task: Task,
    options: RunOptions,
    *,
    harness: Callable[[Task, RunOptions, RowCheck], dict[str, Any]] | None = None,
) -> RowCheck:
    """Gold and null in fresh sandboxes, the ids that disagree, a diagnosis; see the module."""
    began = time.monotonic()
    checked = RowCheck(task_id=task.task_id, image=task.image or "")
    checked.gold = graded_run(task, options, GOLD)
    checked.null = graded_run(task, options, NULL)
    checked.disagreements = disagreements(task, checked.gold, checked.null)
    checked.diagnosis = diagnose(checked.gold, checked.null, checked.disagreements)
    checked.ok = checked.diagnosis == "OK"
    if harness is not None:
        checked.harness = harness(task, options, checked)
        if checked.harness.get("agrees") is False:
            checked.ok = False
            checked.diagnosis += "; the harness disagrees: " + checked.harness["summary"]
    checked.seconds = time.monotonic() - began
    return checked


def check_tasks(
    tasks: Sequence[Task],
    options: RunOptions,
    *,
    harness: Callable[[Task, RunOptions, RowCheck], dict[str, Any]] | None = None,
    on_done: Callable[[RowCheck], None] | None = None,
) -> list[RowCheck]:
    """:func:`check_task` for every task, ``options.jobs`` at a time, in task order."""

    def one(task: Task) -> RowCheck:
        try:
            checked = check_task(task, options, harness=harness)
        except Exception as exc:  # one row's fault never stops the others (as in ``run``)
            logger.debug("checking %s failed:\n%s", task.task_id, traceback.format_exc())
            checked = RowCheck(task_id=task.task_id, image=task.image or "")
            checked.diagnosis = f"check failed: {type(exc).__name__}: {exc}"
        if on_done is not None:
            on_done(checked)
        return checked

    with ThreadPoolExecutor(max_workers=max(1, options.jobs)) as pool:
        return list(pool.map(one, tasks))


def table(checks: Sequence[RowCheck]) -> str:
    """The human summary: one line per row, then the ids that disagree, indented."""
    lines = [f"{'task':<40} {'gold':<11} {'null':<11} diagnosis"]
    for checked in checks:
        gold = checked.gold.outcome.value if checked.gold else "-"
        null = checked.null.outcome.value if checked.null else "-"
        lines.append(f"{checked.task_id:<40} {gold:<11} {null:<11} {checked.diagnosis}")
        lines += [f"    {item.line()}" for item in checked.disagreements]
        if checked.harness is not None:
            lines.append(f"    harness: {checked.harness['summary']}")
            lines += [f"    harness: {line}" for line in checked.harness.get("differences", [])]
    bad = sum(not checked.ok for checked in checks)
    lines.append(f"{len(checks)} row(s) checked, {len(checks) - bad} OK, {bad} not OK")
    return "\n".join(lines)
