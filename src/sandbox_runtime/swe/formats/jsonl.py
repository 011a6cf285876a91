"""JSONL tasks (Graph Planner's shape): a task id, an issue, and how to open the sandbox.

``{task_id, max_steps, issue, test_command, sandbox: {backend, docker_image, workdir, mounts,
env, r2e_ds_json}}``.  With ``r2e_ds_json`` the task *is* that R2E-Gym entry (read from the
named file, relative paths against the task file's directory) with the JSONL row's settings on
top, and R2E-Gym's rules prepare and grade it; without it, the repository's own test command
(``test_command``, default pytest) must report at least one test and no failure.

The row kept for exports carries the entry itself (``sandbox.r2e_ds``, which is read before
the file) and the file's absolute path, so a parquet written here opens on a Ray worker that
has neither the task file's directory nor the entry file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.swe._format_kit import GradeResult, listing, run_test_script, timed_out_result
from sandbox_runtime.swe.formats.base import ParseContext, RowFormat
from sandbox_runtime.swe.parsers import PASSED_STATUSES, parse_any, strip_ansi
from sandbox_runtime.swe.task import GradingBlock, Task, TaskError, TaskFormat

__all__ = ["CommandGrading", "JsonlTaskFormat"]

_DEFAULT_TESTS = (
    'PY="$(command -v python || command -v python3)"; "$PY" -m pytest -rA -p no:cacheprovider'
)


class CommandGrading(GradingBlock):
    """A test command whose pytest- or unittest-style results must all pass."""

    kind: str = "command"
    test_command: str | None = None
    """Shell text run in the workdir; default: pytest on the whole repository."""


class _Sandbox(BaseModel):
    model_config = ConfigDict(extra="forbid")
    backend: str | None = None
    docker_image: str | None = None
    workdir: str | None = None
    mounts: dict[str, str] = {}
    env: dict[str, str] = {}
    r2e_ds_json: str | None = None
    r2e_ds: dict[str, Any] | None = None


class _JsonlRow(BaseModel):
    model_config = ConfigDict(extra="allow")
    task_id: str
    max_steps: int | None = None
    issue: str | dict[str, Any] = ""
    sandbox: _Sandbox
    test_command: str | None = None


def _issue_text(issue: str | dict[str, Any]) -> str:
    if isinstance(issue, str):
        return issue
    title = str(issue.get("title") or "").strip()
    body = str(issue.get("body") or "").strip()
    return f"{title}\n\n{body}".strip() if title else body


def read_ds_json(value: str, base_dir: Path) -> tuple[Path, dict[str, Any]]:
    """The R2E-Gym entry a ``sandbox.r2e_ds_json`` names: its absolute path and content."""
    path = Path(value).expanduser()
    if not path.is_absolute():
        path = base_dir / path
    field = "sandbox.r2e_ds_json"
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TaskError("", field, f"cannot read {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise TaskError("", field, f"{path}: not JSON: {exc.msg}") from None
    if not isinstance(entry, dict):
        raise TaskError("", field, f"{path}: must hold one JSON object")
    return path.resolve(), entry


class JsonlTaskFormat(RowFormat):
    """Graph Planner-style JSONL tasks."""

    name: ClassVar[str] = TaskFormat.JSONL.value
    description: ClassVar[str] = "JSONL tasks {task_id, issue, sandbox: {...}} (Graph Planner)"
    priority: ClassVar[int] = 40
    #: Graph Planner grades its JSONL tasks in the container the agent used.
    grade_in: ClassVar[str] = "same"

    @classmethod
    def detect(cls, row: Mapping[str, Any]) -> bool:
        """Rows with a ``sandbox`` object."""
        return isinstance(row.get("sandbox"), Mapping)

    @classmethod
    def parse(cls, row: dict[str, Any], context: ParseContext) -> Task:
        """The task; an ``r2e_ds_json`` entry is read with the R2E-Gym format underneath."""
        parsed = _JsonlRow.model_validate(row)
        box = parsed.sandbox
        issue = _issue_text(parsed.issue)
        overrides: dict[str, Any] = {
            "task_id": parsed.task_id,
            "max_steps": parsed.max_steps,
            "env": dict(box.env),
            "mounts": dict(box.mounts),
            "row_format": cls.name,
            "source": row,
        }
        if box.docker_image:
            overrides["image"] = box.docker_image
        if box.workdir:
            overrides["workdir"] = box.workdir
        if issue:
            overrides["problem_statement"] = issue
        if box.r2e_ds is not None or box.r2e_ds_json:
            if box.r2e_ds is not None:
                entry, where, field = box.r2e_ds, "sandbox.r2e_ds", "sandbox.r2e_ds"
            else:
                path, entry = read_ds_json(str(box.r2e_ds_json), context.base_dir)
                where, field = str(path), "sandbox.r2e_ds_json"
                embedded = {**row["sandbox"], "r2e_ds_json": where, "r2e_ds": entry}
                overrides["source"] = {**row, "sandbox": embedded}
            if context.parse_row is None:
                raise TaskError("", field, "this reader reads no embedded rows (no parse_row)")
            try:
                inner = context.parse_row(entry, where)
            except TaskError as exc:
                raise TaskError("", f"{field} ({exc.field})", exc.reason) from None
            return inner.model_copy(update=overrides)
        if not box.docker_image:
            raise TaskError("", "sandbox.docker_image", "required when r2e_ds_json is not given")
        return Task(
            format=cls.name,
            repo=parsed.task_id,
            grading=CommandGrading(test_command=parsed.test_command),
            **overrides,
        )

    @classmethod
    def grade(cls, task: Task, sandbox: SandboxRuntime, timeout: float) -> GradeResult:
        """The test command; 1 when it reports tests and none of them fails."""
        grading = task.grading
        command = (grading.test_command if isinstance(grading, CommandGrading) else None) or (
            _DEFAULT_TESTS
        )
        result = run_test_script(sandbox, command, timeout)
        if result.timed_out:
            return timed_out_result(result, timeout)
        output = strip_ansi(result.output)
        status_map = parse_any(output)
        graded = GradeResult(
            0.0,
            "",
            status_map=status_map,
            test_output=output,
            test_exit_code=result.exit_code,
            graded_by="all tests pass",
            parser="sandbox_runtime:pytest/unittest",
        )
        failing = [k for k, v in status_map.items() if v not in PASSED_STATUSES | {"SKIPPED"}]
        if not status_map:
            graded.reward = None
            code = result.exit_code
            graded.reason = f"test error: no test results in the output (exit code {code})"
        elif failing:
            graded.reason = f"tests failed: {listing(failing)}"
        else:
            graded.reward, graded.reason = 1.0, "resolved"
        return graded
