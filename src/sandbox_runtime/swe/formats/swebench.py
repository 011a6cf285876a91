"""SWE-bench rows (and -Lite, -Verified, R2E-Gym's copies), graded as the harness grades.

Rows carry ``instance_id``, ``repo``, ``base_commit``, ``patch``, ``test_patch``,
``problem_statement``, ``hints_text``, ``created_at``, ``version``, ``FAIL_TO_PASS`` /
``PASS_TO_PASS`` (JSON text or lists), ``environment_setup_commit``; optionally the newer
harness fields ``image_name``, ``eval_script``, ``log_parser``, ``eval_type`` and R2E-Gym's
``docker_image`` and ``run_tests``.

Grading (``swebench.harness.grading``): run the evaluation script, take the log between the
harness's start and end markers, parse it, and give 1 only for ``RESOLVED_FULL``: every
FAIL_TO_PASS and PASS_TO_PASS test passes.  The script and the parser, in order:

* the row's own ``eval_script`` (or R2E-Gym's ``run_tests``), read with the harness's parser
  for the repository (or the one the row names);
* the harness's own recipe where the installed swebench (3.x, 4.x) has one for the row's
  repository and version: its test command, directives, ``eval_commands`` and reinstall
  (:mod:`~sandbox_runtime.swe._harness_spec`), read with the harness's parser;
* otherwise the library's fallback (a repository the tables do not list, swebench 5, no
  swebench): the same rules written here (:mod:`._swebench_eval`), read in the row's own id
  form (:mod:`._swebench_ids`), and no verdict (an error, never 0) when the log cannot be
  matched to the row's tests.

Both built scripts activate a conda ``testbed`` environment only when the image has one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, field_validator

from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.swe import _swebench
from sandbox_runtime.swe._format_kit import GradeResult, listing, run_test_script, timed_out_result
from sandbox_runtime.swe._harness_spec import harness_spec
from sandbox_runtime.swe.formats._swebench_eval import (
    fallback_eval_script as _fallback_script,
)
from sandbox_runtime.swe.formats._swebench_eval import harness_eval_script, patch_files
from sandbox_runtime.swe.formats._swebench_ids import row_status_map, unmatched
from sandbox_runtime.swe.formats.base import ParseContext, RowFormat, json_list
from sandbox_runtime.swe.parsers import strip_ansi
from sandbox_runtime.swe.task import GradingBlock, Task, TaskFormat

__all__ = [
    "SWEBenchFormat",
    "SWEBenchGrading",
    "fallback_eval_script",
    "grade_test_lists",
    "test_list_paths",
]


class SWEBenchGrading(GradingBlock):
    """The test lists and scripts the harness grades with (SWE-smith uses it too)."""

    kind: str = "swebench"
    fail_to_pass: tuple[str, ...] = ()
    """Tests that fail before the fix and must pass after it."""
    pass_to_pass: tuple[str, ...] = ()
    """Tests that pass before the fix and must keep passing."""
    test_patch: str = ""
    """The diff that adds the tests the fix must make pass."""
    version: str | None = None
    """The repository version key of the harness's spec tables."""
    eval_script: str | None = None
    """A complete test script from the row (``eval_script`` or R2E-Gym's ``run_tests``)."""
    log_parser: str | None = None
    """The name of the ``swebench`` log parser the row asks for."""
    eval_type: str | None = None
    """``pass_and_fail`` (default) or ``fail_only``."""
    test_cmd: str | None = None
    """The row's own test command (``test_cmd``, or SWE-rebench's ``install_config``), used
    by the fallback script with the row's test files."""


class _SWEBenchRow(BaseModel):
    model_config = ConfigDict(extra="allow")
    instance_id: str
    repo: str
    base_commit: str
    patch: str
    test_patch: str
    problem_statement: str
    version: str | float | None = None
    FAIL_TO_PASS: list[str]
    PASS_TO_PASS: list[str]
    hints_text: str | None = None
    created_at: str | None = None
    environment_setup_commit: str | None = None

    _lists = field_validator("FAIL_TO_PASS", "PASS_TO_PASS", mode="before")(json_list)


def _row_test_cmd(row: Mapping[str, Any]) -> str | None:
    config = row.get("install_config")
    command = row.get("test_cmd") or (config.get("test_cmd") if isinstance(config, dict) else None)
    if isinstance(command, list):
        command = " && ".join(str(part) for part in command)
    return str(command) if command else None


def _swebench_image(instance_id: str) -> str:
    """The harness's published image name for an instance (docker hub ``swebench/``)."""
    return f"swebench/sweb.eval.x86_64.{instance_id.replace('__', '_1776_')}:latest".lower()


class SWEBenchFormat(RowFormat):
    """SWE-bench's rows and the harness's grading."""

    name: ClassVar[str] = TaskFormat.SWEBENCH.value
    description: ClassVar[str] = "SWE-bench, -Lite, -Verified rows (test_patch, FAIL_TO_PASS)"
    priority: ClassVar[int] = 20

    @classmethod
    def detect(cls, row: Mapping[str, Any]) -> bool:
        """Rows with a ``test_patch``."""
        return "test_patch" in row

    @classmethod
    def parse(cls, row: dict[str, Any], context: ParseContext) -> Task:
        """The instance, its image (the row's, else the harness's published one), its tests."""
        parsed = _SWEBenchRow.model_validate(row)
        image = (
            row.get("docker_image") or row.get("image_name") or _swebench_image(parsed.instance_id)
        )
        script = row.get("eval_script") or row.get("run_tests") or None
        return Task(
            task_id=parsed.instance_id,
            format=cls.name,
            row_format=cls.name,
            repo=parsed.repo,
            image=str(image),
            workdir="/testbed",
            problem_statement=parsed.problem_statement,
            base_commit=parsed.base_commit,
            gold_patch=parsed.patch,
            grading=SWEBenchGrading(
                fail_to_pass=tuple(parsed.FAIL_TO_PASS),
                pass_to_pass=tuple(parsed.PASS_TO_PASS),
                test_patch=parsed.test_patch,
                version=None if parsed.version is None else str(parsed.version),
                eval_script=str(script) if script else None,
                log_parser=row.get("log_parser") or None,
                eval_type=row.get("eval_type") or None,
                test_cmd=_row_test_cmd(row),
            ),
            source=row,
        )

    @classmethod
    def test_paths(cls, task: Task) -> tuple[str, ...]:
        """The files ``test_patch`` touches and those the test ids name."""
        return test_list_paths(task.grading_as(SWEBenchGrading))

    @classmethod
    def grade(cls, task: Task, sandbox: SandboxRuntime, timeout: float) -> GradeResult:
        """The evaluation script, the repository's log parser, ``RESOLVED_FULL``."""
        return grade_test_lists(task, sandbox, timeout)


def test_list_paths(grading: SWEBenchGrading) -> tuple[str, ...]:
    """The test files a :class:`SWEBenchGrading` reads: its test patch's and its ids'."""
    ids = grading.fail_to_pass + grading.pass_to_pass
    return tuple(dict.fromkeys(patch_files(grading.test_patch) + _id_files(ids)))


def _id_files(test_ids: Iterable[str]) -> list[str]:
    files: list[str] = []
    for test_id in test_ids:
        path = test_id.split("::", 1)[0]
        if "::" in test_id and path.endswith(".py") and path not in files:
            files.append(path)
    return files


def fallback_eval_script(grading: SWEBenchGrading, base: str, repo: str = "") -> str:
    """Our evaluation script for a row no installed specification covers."""
    ids = [*grading.fail_to_pass, *grading.pass_to_pass]
    return _fallback_script(
        repo, grading.test_patch, ids, _id_files(ids), base, test_cmd=grading.test_cmd
    )


@dataclass(frozen=True, slots=True)
class _Plan:
    """Which script grades a row and how its log is read."""

    script: str
    fallback: bool
    """The library's own rules: row-form ids, and no verdict for a log it cannot match."""
    source: str


def _plan(task: Task, grading: SWEBenchGrading, base: str) -> _Plan:
    if grading.eval_script:
        return _Plan(grading.eval_script, fallback=False, source="row")
    spec = harness_spec(task.repo, grading.version, grading.test_patch)
    if spec is not None:
        script = harness_eval_script(spec, grading.test_patch, base)
        return _Plan(script, fallback=False, source=spec.source)
    return _Plan(fallback_eval_script(grading, base, task.repo), fallback=True, source="")


def _slice(log: str) -> str:
    start, end = _swebench.START_TEST_OUTPUT, _swebench.END_TEST_OUTPUT
    if start in log and end in log:
        return log.split(start, 1)[1].split(end, 1)[0]
    return log


def _status_map(
    task: Task, grading: SWEBenchGrading, plan: _Plan, output: str
) -> tuple[dict[str, str], str]:
    if plan.fallback:
        ids = [*grading.fail_to_pass, *grading.pass_to_pass]
        return row_status_map(_slice(output), ids), "sandbox_runtime:row-ids"
    parse, parser = _swebench.parser_for(
        task.repo, name=grading.log_parser, version=grading.version, instance_id=task.task_id
    )
    return parse(_slice(output)) or parse(output), parser


def grade_test_lists(task: Task, sandbox: SandboxRuntime, timeout: float) -> GradeResult:
    """SWE-bench's rule over the task's :class:`SWEBenchGrading` (shared with SWE-smith)."""
    grading = task.grading_as(SWEBenchGrading)
    plan = _plan(task, grading, sandbox.base_commit())
    result = run_test_script(sandbox, plan.script, timeout)
    if result.timed_out:
        return timed_out_result(result, timeout)
    output = strip_ansi(result.output)
    graded = GradeResult(0.0, "", test_output=output, test_exit_code=result.exit_code)
    if _swebench.APPLY_PATCH_FAIL in output:
        graded.reason = "test patch did not apply"
        return graded
    bad = [marker for marker in _swebench.BAD_MARKERS if marker in output]
    if bad:
        graded.reward = None
        graded.reason = f"test error: the evaluation script reported {bad[0]!r}"
        return graded
    graded.status_map, graded.parser = _status_map(task, grading, plan, output)
    if plan.source and not plan.fallback:
        graded.parser = f"{graded.parser} (script: {plan.source})"
    if not graded.status_map:
        graded.reward = None
        graded.reason = f"test error: no test results in the output (exit code {result.exit_code})"
        return graded
    return _judge(task, grading, plan, graded)


def _judge(task: Task, grading: SWEBenchGrading, plan: _Plan, graded: GradeResult) -> GradeResult:
    status_map = graded.status_map
    silent = unmatched(status_map, grading.fail_to_pass, grading.pass_to_pass)
    if plan.fallback and silent:
        graded.reward = None
        graded.reason = (
            "test error: the log does not name the row's tests, so it gives no verdict "
            f"({len(silent)} not found: {listing(silent)})"
        )
        return graded
    evaluation = _swebench.evaluate(
        status_map,
        grading.fail_to_pass,
        grading.pass_to_pass,
        eval_type=_eval_type(task.repo, grading),
    )
    graded.graded_by = evaluation.graded_by
    if evaluation.resolved:
        graded.reward, graded.reason = 1.0, "resolved"
    else:
        graded.reason = f"tests failed: {listing(evaluation.f2p_failed + evaluation.p2p_failed)}"
    return graded


def _eval_type(repo: str, grading: SWEBenchGrading) -> str | None:
    if grading.eval_type:
        return grading.eval_type
    constants = _swebench._module("swebench.harness.constants")
    fail_only = getattr(constants, "FAIL_ONLY_REPOS", ())
    return "fail_only" if repo in fail_only else None
