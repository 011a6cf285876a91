"""SWE-bench rows (and -Lite, -Verified, R2E-Gym's copies), graded as the harness grades.

Rows carry ``instance_id``, ``repo``, ``base_commit``, ``patch``, ``test_patch``,
``problem_statement``, ``hints_text``, ``created_at``, ``version``, ``FAIL_TO_PASS`` /
``PASS_TO_PASS`` (JSON text or lists), ``environment_setup_commit``; optionally the newer
harness fields ``image_name``, ``eval_script``, ``log_parser``, ``eval_type`` and R2E-Gym's
``docker_image`` and ``run_tests``.

Grading (``swebench.harness.grading``): run the evaluation script (the row's own, or our
fallback below), take the log between the harness's start and end markers, parse it with the
repository's parser, and give 1 only for ``RESOLVED_FULL``: every FAIL_TO_PASS and
PASS_TO_PASS test passes.

Fallback evaluation script, for rows that carry no ``eval_script`` (the bundled samples,
repositories outside the harness's tables): reset the test files the ``test_patch`` touches to
the base commit, apply ``test_patch``, run ``pytest -rA`` on those files and the files named in
FAIL_TO_PASS/PASS_TO_PASS between the harness's markers, then reset the test files again.
Without pytest it runs ``python -m unittest -v`` on the same modules and maps the results to
pytest ids.  A conda ``testbed`` environment is activated when the image has one, as in the
harness's images.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, field_validator

from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.swe import _swebench
from sandbox_runtime.swe._format_kit import GradeResult, listing, run_test_script, timed_out_result
from sandbox_runtime.swe.formats.base import ParseContext, RowFormat, json_list
from sandbox_runtime.swe.parsers import parse_any, strip_ansi
from sandbox_runtime.swe.task import GradingBlock, Task, TaskFormat

__all__ = [
    "SWEBenchFormat",
    "SWEBenchGrading",
    "fallback_eval_script",
    "grade_test_lists",
    "test_list_paths",
]

_GIT = "git -c safe.directory='*'"
_PATCH_EOF = "EOF_SANDBOX_RUNTIME_TEST_PATCH"


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
    """The test files a :class:`SWEBenchGrading` runs: its test patch's and its ids'."""
    ids = grading.fail_to_pass + grading.pass_to_pass
    return tuple(dict.fromkeys(_patch_files(grading.test_patch) + _id_files(ids)))


def _patch_files(patch: str) -> list[str]:
    files: list[str] = []
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            name = line.split(" b/", 1)[-1].strip().strip('"')
            if name not in files:
                files.append(name)
    return files


def _id_files(test_ids: Iterable[str]) -> list[str]:
    files: list[str] = []
    for test_id in test_ids:
        path = test_id.split("::", 1)[0]
        if "::" in test_id and path.endswith(".py") and path not in files:
            files.append(path)
    return files


def fallback_eval_script(grading: SWEBenchGrading, base: str) -> str:
    """Our evaluation script for rows without one (see the module docstring)."""
    files = list(test_list_paths(grading))
    reset = [
        f"{_GIT} checkout -q {shlex.quote(base)} -- {shlex.quote(path)} 2>/dev/null || true"
        for path in files
    ]
    modules = " ".join(shlex.quote(p[:-3].replace("/", ".")) for p in files if p.endswith(".py"))
    targets = " ".join(shlex.quote(path) for path in files)
    lines = [
        "set -uo pipefail",
        "if [ -f /opt/miniconda3/bin/activate ]; then",
        "  . /opt/miniconda3/bin/activate && conda activate testbed",
        "fi",
        'PY="$(command -v python || command -v python3)"',
        *reset,
    ]
    if grading.test_patch.strip():
        patch = grading.test_patch
        body = patch if patch.endswith("\n") else patch + "\n"
        lines += [
            f"if ! {_GIT} apply --whitespace=nowarn - <<'{_PATCH_EOF}'",
            body + _PATCH_EOF,
            "then",
            f"  echo '{_swebench.APPLY_PATCH_FAIL} (test patch)'",
            "  exit 1",
            "fi",
        ]
    lines += [
        f"echo '{_swebench.START_TEST_OUTPUT}'",
        'if "$PY" -c "import pytest" 2>/dev/null; then',
        f'  "$PY" -m pytest -rA -p no:cacheprovider {targets}',
        "else",
        f'  "$PY" -m unittest -v {modules} 2>&1',
        "fi",
        "status=$?",
        f"echo '{_swebench.END_TEST_OUTPUT}'",
        *reset,
        'exit "$status"',
    ]
    return "\n".join(lines) + "\n"


def _slice(log: str) -> str:
    start, end = _swebench.START_TEST_OUTPUT, _swebench.END_TEST_OUTPUT
    if start in log and end in log:
        return log.split(start, 1)[1].split(end, 1)[0]
    return log


def grade_test_lists(task: Task, sandbox: SandboxRuntime, timeout: float) -> GradeResult:
    """SWE-bench's rule over the task's :class:`SWEBenchGrading` (shared with SWE-smith)."""
    grading = task.grading_as(SWEBenchGrading)
    base = sandbox.base_commit()
    own_script = grading.eval_script is None
    script = grading.eval_script or fallback_eval_script(grading, base)
    result = run_test_script(sandbox, script, timeout)
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
    parse, graded.parser = _swebench.parser_for(
        task.repo, name=grading.log_parser, version=grading.version, instance_id=task.task_id
    )
    status_map = parse(_slice(output)) or parse(output)
    if not status_map and own_script:
        # Our script ran unittest (no pytest in the sandbox): read its verbose output.
        status_map = parse_any(_slice(output))
        graded.parser = "sandbox_runtime:unittest"
    graded.status_map = status_map
    if not status_map:
        graded.reward = None
        graded.reason = f"test error: no test results in the output (exit code {result.exit_code})"
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
