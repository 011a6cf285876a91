"""SWE-smith task instances: the row's ``patch`` introduces the bug; the fix reverts it.

Rows carry ``instance_id``, ``repo``, ``patch`` (the bug), ``FAIL_TO_PASS``,
``PASS_TO_PASS``, ``image_name``, ``problem_statement``, optionally ``base_commit``.  A task
starts on the bug: the row's ``base_commit`` (or the branch named after the instance) when the
image has it, else the bug patch applied and committed here.  Grading is SWE-bench's rule on
the same test lists, after resetting the test files to the base (R2E-Gym's
``reset_swesmith_tests``), which the fallback evaluation script does.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, field_validator

from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.swe._format_kit import GradeResult, SetupError
from sandbox_runtime.swe.formats.base import ParseContext, RowFormat, json_list
from sandbox_runtime.swe.formats.swebench import SWEBenchGrading, grade_test_lists, test_list_paths
from sandbox_runtime.swe.task import Task, TaskFormat

__all__ = ["SWESmithFormat"]

_GIT = "git -c safe.directory='*'"
_IDENTITY = "-c user.name=sandbox-runtime -c user.email=sandbox-runtime@localhost"


class _SWESmithRow(BaseModel):
    model_config = ConfigDict(extra="allow")
    instance_id: str
    repo: str
    patch: str
    FAIL_TO_PASS: list[str]
    PASS_TO_PASS: list[str]
    problem_statement: str = ""
    image_name: str | None = None
    base_commit: str | None = None

    _lists = field_validator("FAIL_TO_PASS", "PASS_TO_PASS", mode="before")(json_list)


def _swesmith_image(image_name: str) -> str:
    """SWE-smith publishes images as ``jyangballin/<image_name with __ -> _1776_>``."""
    if "/" in image_name:
        return image_name
    return f"jyangballin/{image_name.replace('__', '_1776_')}:latest"


class SWESmithFormat(RowFormat):
    """SWE-smith's rows, bug setup and grading."""

    name: ClassVar[str] = TaskFormat.SWESMITH.value
    description: ClassVar[str] = "SWE-smith task instances (the row's patch is the bug)"
    priority: ClassVar[int] = 10

    @classmethod
    def detect(cls, row: Mapping[str, Any]) -> bool:
        """SWE-smith images or repositories, or a bug ``patch`` with test lists."""
        image = str(row.get("image_name") or row.get("docker_image") or "")
        if "swesmith" in image or str(row.get("repo", "")).startswith("swesmith/"):
            return True
        return "instance_id" in row and "patch" in row and "FAIL_TO_PASS" in row

    @classmethod
    def parse(cls, row: dict[str, Any], context: ParseContext) -> Task:
        """The instance; its gold patch is the bug patch, applied in reverse."""
        parsed = _SWESmithRow.model_validate(row)
        image = row.get("docker_image") or (
            _swesmith_image(parsed.image_name) if parsed.image_name else None
        )
        return Task(
            task_id=parsed.instance_id,
            format=cls.name,
            row_format=cls.name,
            repo=parsed.repo,
            image=image,
            workdir="/testbed",
            problem_statement=parsed.problem_statement,
            base_commit=parsed.base_commit,
            gold_patch=parsed.patch,
            gold_patch_reversed=True,
            grading=SWEBenchGrading(
                fail_to_pass=tuple(parsed.FAIL_TO_PASS), pass_to_pass=tuple(parsed.PASS_TO_PASS)
            ),
            source=row,
        )

    @classmethod
    def prepare(cls, task: Task, sandbox: SandboxRuntime) -> None:
        """Check out the bug commit, or apply and commit the bug patch."""
        for ref in (task.base_commit, task.task_id):
            if not ref:
                continue
            quoted = shlex.quote(ref)
            check = sandbox.exec(f"{_GIT} rev-parse -q --verify {quoted}^{{commit}}", timeout=60)
            if check.ok:
                result = sandbox.exec(f"{_GIT} checkout -q {quoted}", timeout=120)
                if not result.ok:
                    raise SetupError(f"git checkout {ref} failed: {result.output.strip()}")
                return
        applied = sandbox.apply_patch(task.gold_patch)
        if not applied:
            raise SetupError(f"the SWE-smith bug patch did not apply: {applied.message}")
        message = shlex.quote("bug: " + task.task_id)
        commit = sandbox.exec(
            f"{_GIT} add -A && {_GIT} {_IDENTITY} commit -q -m {message}", timeout=120
        )
        if not commit.ok:
            raise SetupError(f"committing the SWE-smith bug failed: {commit.output.strip()}")

    @classmethod
    def test_paths(cls, task: Task) -> tuple[str, ...]:
        """The files the test ids name."""
        return test_list_paths(task.grading_as(SWEBenchGrading))

    @classmethod
    def grade(cls, task: Task, sandbox: SandboxRuntime, timeout: float) -> GradeResult:
        """SWE-bench's rule on the instance's test lists."""
        return grade_test_lists(task, sandbox, timeout)
