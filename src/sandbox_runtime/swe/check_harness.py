"""The SWE-bench harness's own verdicts on a row, next to the library's (``tasks check --harness``).

Where the installed ``swebench`` carries the per-repository specifications (3.x and 4.x:
``make_test_spec``), the harness's evaluation is rebuilt exactly: its ``eval_script`` for the
row runs as ``/bin/bash /eval.sh`` in a fresh sandbox of the row's image, after the gold patch
(or none) is applied, and its own ``get_eval_report`` reads the log, with its parser and its
resolution rule.  Each FAIL_TO_PASS / PASS_TO_PASS id is then compared with the library's
status for the same run.  swebench 5 dropped the specifications: there is nothing to run, and
the comparison says so instead of pretending to agree.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import tempfile
import threading
from pathlib import Path
from typing import Any

from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.errors import SandboxError
from sandbox_runtime.swe.check import GOLD, NULL, RowCheck
from sandbox_runtime.swe.formats.swebench import SWEBenchGrading
from sandbox_runtime.swe.grading import GradeResult
from sandbox_runtime.swe.isolation import apply_diff
from sandbox_runtime.swe.parsers import PASSED_STATUSES
from sandbox_runtime.swe.runner import RunOptions, task_sandbox_config
from sandbox_runtime.swe.task import Task

__all__ = ["compare_run", "compare_with_harness", "harness_problem"]

_LISTS = ("FAIL_TO_PASS", "PASS_TO_PASS")
#: Guards the swap in :func:`_eval_test_spec` (``tasks check -j N`` checks rows in threads).
_SPEC_LOCK = threading.Lock()


def _harness() -> tuple[Any, Any]:
    """The harness's ``make_test_spec`` and its grading module (ImportError without them)."""
    module = importlib.import_module("swebench.harness.test_spec.test_spec")
    grading = importlib.import_module("swebench.harness.grading")
    return functools.partial(_eval_test_spec, module), grading


def _eval_test_spec(module: Any, instance: dict[str, Any]) -> Any:
    """``make_test_spec`` without its environment script, which is never run here.

    The environment script is how the harness builds its image; for repositories whose spec
    says ``packages: requirements.txt`` or ``environment.yml`` (flask, requests, ...) it
    downloads that file from GitHub, which fails offline although the eval script, the only
    part used here, needs nothing from the network.  The module attribute is swapped under a
    lock, so rows checked in parallel threads never see it half restored.
    """
    with _SPEC_LOCK:
        builder = module.make_env_script_list
        module.make_env_script_list = _no_environment_script
        try:
            return module.make_test_spec(instance)
        finally:
            module.make_env_script_list = builder


def _no_environment_script(*_args: Any, **_kwargs: Any) -> list[str]:
    return []


def harness_problem() -> str | None:
    """Why the harness's evaluation cannot be rebuilt here, or None when it can."""
    try:
        _harness()
    except ImportError:
        try:
            version = importlib.import_module("swebench").__version__
        except ImportError:
            return "the swebench package is not installed (pip install 'swebench>=3,<5')"
        return (
            f"swebench {version} has no make_test_spec (its specifications left in 5.x); "
            "install swebench 3.x or 4.x for --harness"
        )
    return None


def _library_passes(result: GradeResult, listed_in: str, test_id: str) -> bool | None:
    """Whether the library counted ``test_id`` as passing; None when it gave no verdict."""
    if result.is_error:
        return None
    status = result.status_map.get(test_id)
    return status in PASSED_STATUSES or (listed_in == "PASS_TO_PASS" and status == "SKIPPED")


def _harness_run(task: Task, sandbox: SandboxRuntime, spec: Any, which: str, timeout: float) -> str:
    """The log of the harness's eval script after the gold patch (or none); raises on faults."""
    sandbox.start()
    if which == GOLD:
        problem = apply_diff(sandbox, task.gold_patch, reverse=task.gold_patch_reversed)
        if problem is not None:
            raise SandboxError(f"the gold patch did not apply: {problem}")
    sandbox.write_text("/eval.sh", spec.eval_script)
    result = sandbox.exec("/bin/bash /eval.sh 2>&1", timeout=timeout)
    if result.timed_out:
        raise SandboxError(f"the harness's eval script timed out after {timeout:g}s")
    return result.output


def _harness_report(task: Task, spec: Any, grading: Any, log: str, which: str) -> dict[str, Any]:
    """The harness's own report on ``log`` (resolved, and each id's success or failure)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "test_output.txt"
        path.write_text(log, encoding="utf-8")
        prediction = {
            "instance_id": task.task_id,
            "model_name_or_path": "sandbox-runtime-check",
            "model_patch": task.gold_patch if which == GOLD else "",
        }
        report: dict[str, Any] = grading.get_eval_report(spec, prediction, str(path), True)
    return dict(report[task.task_id])


def compare_run(
    task: Task, library: GradeResult, harness: dict[str, Any], which: str
) -> tuple[list[str], int]:
    """The differences of one run (lines) and how many ids were compared."""
    grading = task.grading_as(SWEBenchGrading)
    differences: list[str] = []
    library_resolved = None if library.is_error else library.resolved
    harness_resolved = bool(harness.get("resolved")) if harness.get("found") else None
    if library_resolved != harness_resolved:
        differences.append(
            f"{which}: verdict: library {_word(library_resolved)}, "
            f"harness {_word(harness_resolved)}"
        )
    statuses = harness.get("tests_status") or {}
    compared = 0
    for listed_in, ids in zip(_LISTS, (grading.fail_to_pass, grading.pass_to_pass), strict=True):
        passing = set(statuses.get(listed_in, {}).get("success", []))
        for test_id in ids:
            ours = _library_passes(library, listed_in, test_id)
            theirs = (test_id in passing) if statuses else None
            compared += 1
            if ours != theirs:
                differences.append(
                    f"{which}: {listed_in} {test_id}: library {_word(ours, 'passed', 'failed')}, "
                    f"harness {_word(theirs, 'passed', 'failed')}"
                )
    return differences, compared


def _word(value: bool | None, yes: str = "resolved", no: str = "unresolved") -> str:
    return "no verdict" if value is None else (yes if value else no)


def compare_with_harness(task: Task, options: RunOptions, checked: RowCheck) -> dict[str, Any]:
    """The harness's verdicts on gold and null, and every id where they differ from ours."""
    if not isinstance(task.grading, SWEBenchGrading) or task.grading.eval_script:
        return {"agrees": None, "summary": "not compared: not a SWE-bench row without eval_script"}
    if (problem := harness_problem()) is not None:
        return {"agrees": None, "summary": f"not compared: {problem}"}
    make_test_spec, grading = _harness()
    try:
        spec = make_test_spec(dict(task.source))
    except (KeyError, ValueError) as exc:
        return {"agrees": None, "summary": f"not compared: the harness has no spec ({exc})"}
    runs: dict[str, Any] = {}
    differences: list[str] = []
    compared = 0
    for which, library in ((GOLD, checked.gold), (NULL, checked.null)):
        report = _one_harness_run(task, options, spec, grading, which)
        runs[which] = report
        if library is not None:
            lines, count = compare_run(task, library, report, which)
            differences += lines
            compared += count
    agrees = not differences
    summary = (
        f"agrees on {compared} id verdict(s) over gold and null"
        if agrees
        else f"{len(differences)} difference(s); {compared} id verdict(s) compared"
    )
    return {"agrees": agrees, "summary": summary, "differences": differences, "runs": runs}


def _one_harness_run(
    task: Task, options: RunOptions, spec: Any, grading: Any, which: str
) -> dict[str, Any]:
    """One harness run's report, with ``found`` (a log the harness could read) and ``error``."""
    try:
        sandbox = SandboxRuntime(task_sandbox_config(task, options))
        try:
            log = _harness_run(task, sandbox, spec, which, options.test_timeout)
        finally:
            with contextlib.suppress(SandboxError):
                sandbox.close()
    except SandboxError as exc:
        return {"found": False, "resolved": None, "error": f"{type(exc).__name__}: {exc}"}
    report = _harness_report(task, spec, grading, log, which)
    report["found"] = bool(report.get("patch_successfully_applied"))
    return report
