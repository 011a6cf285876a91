"""Read the row formats people actually have into :class:`~sandbox_runtime.swe.task.Task`.

Supported, field for field as published:

* **R2E-Gym** (``R2E-Gym/R2E-Gym-Lite``, ``-Subset``, ``-V1``): ``docker_image``,
  ``repo_name``, ``parsed_commit_content`` (a JSON document, see :mod:`.commit`),
  ``expected_output_json`` (JSON text), ``problem_statement``, plus informational fields.
* **SWE-bench** and SWE-bench-Lite/Verified: ``instance_id``, ``repo``, ``base_commit``,
  ``patch``, ``test_patch``, ``problem_statement``, ``hints_text``, ``created_at``,
  ``version``, ``FAIL_TO_PASS``/``PASS_TO_PASS`` (JSON text or lists),
  ``environment_setup_commit``; optionally the newer harness fields ``image_name``,
  ``eval_script``, ``log_parser``, ``eval_type`` and R2E-Gym's copies' ``docker_image`` and
  ``run_tests``.
* **SWE-smith**: ``instance_id``, ``repo``, ``patch`` (the bug), ``FAIL_TO_PASS``,
  ``PASS_TO_PASS``, ``image_name``, ``problem_statement``, optionally ``base_commit``.
* **JSONL tasks**: ``{task_id, max_steps, issue, sandbox: {backend, docker_image, workdir,
  mounts, env, r2e_ds_json}}``, where ``r2e_ds_json`` names a file with one R2E row.

:func:`read_rows` reads many rows and never lets one bad row lose the others: each failure
becomes a :class:`~sandbox_runtime.swe.task.TaskError` naming the row and the field.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from sandbox_runtime.swe.commit import ParsedCommit
from sandbox_runtime.swe.task import Task, TaskError, TaskFormat

__all__ = ["RowsResult", "detect_format", "parse_row", "read_rows"]

_ALLOW = ConfigDict(extra="allow")


def _json_list(value: Any) -> Any:
    """SWE-bench stores test lists as JSON text; newer dumps store real lists."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not valid JSON: {exc.msg}") from None
    if hasattr(value, "tolist"):  # numpy arrays from parquet
        value = value.tolist()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError("must be a list of test ids (or JSON text of one)")
    return value


class _R2ERow(BaseModel):
    model_config = _ALLOW
    docker_image: str
    repo_name: str
    parsed_commit_content: str | dict[str, Any]
    expected_output_json: str | dict[str, Any]
    problem_statement: str

    @field_validator("expected_output_json")
    @classmethod
    def _expected(cls, value: str | dict[str, Any]) -> str | dict[str, Any]:
        data = json.loads(value) if isinstance(value, str) else value
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            raise ValueError("must be a JSON object mapping test names to statuses")
        return data

    @field_validator("parsed_commit_content")
    @classmethod
    def _commit(cls, value: str | dict[str, Any]) -> str | dict[str, Any]:
        data = json.loads(value) if isinstance(value, str) else value
        try:
            ParsedCommit.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise ValueError(f"not an R2E-Gym ParsedCommit: {where}: {first['msg']}") from None
        return data


class _SWEBenchRow(BaseModel):
    model_config = _ALLOW
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

    _lists = field_validator("FAIL_TO_PASS", "PASS_TO_PASS", mode="before")(_json_list)


class _SWESmithRow(BaseModel):
    model_config = _ALLOW
    instance_id: str
    repo: str
    patch: str
    FAIL_TO_PASS: list[str]
    PASS_TO_PASS: list[str]
    problem_statement: str = ""
    image_name: str | None = None
    base_commit: str | None = None

    _lists = field_validator("FAIL_TO_PASS", "PASS_TO_PASS", mode="before")(_json_list)


class _Sandbox(BaseModel):
    model_config = ConfigDict(extra="forbid")
    backend: str | None = None
    docker_image: str | None = None
    workdir: str | None = None
    mounts: dict[str, str] = {}
    env: dict[str, str] = {}
    r2e_ds_json: str | None = None


class _JsonlRow(BaseModel):
    model_config = ConfigDict(extra="allow")
    task_id: str
    max_steps: int | None = None
    issue: str | dict[str, Any] = ""
    sandbox: _Sandbox
    test_command: str | None = None


def detect_format(row: Mapping[str, Any]) -> str:
    """The name of the row's format: ``r2e``, ``swebench``, ``swesmith`` or ``jsonl``."""
    if isinstance(row.get("sandbox"), Mapping):
        return "jsonl"
    if "parsed_commit_content" in row or "expected_output_json" in row:
        return "r2e"
    if "test_patch" in row:
        return "swebench"
    image = str(row.get("image_name") or row.get("docker_image") or "")
    if "swesmith" in image or str(row.get("repo", "")).startswith("swesmith/"):
        return "swesmith"
    if "instance_id" in row and "patch" in row and "FAIL_TO_PASS" in row:
        return "swesmith"
    raise ValueError(
        "unknown row format: expected R2E-Gym (parsed_commit_content), SWE-bench (test_patch), "
        f"SWE-smith (image_name) or a JSONL task (sandbox); got keys {sorted(row)[:12]}"
    )


def _label(row: Mapping[str, Any], index: int | str) -> str:
    for key in ("task_id", "instance_id", "docker_image"):
        value = row.get(key)
        if isinstance(value, str) and value:
            return f"row {index} ({key}={value})"
    return f"row {index}"


def parse_row(
    row: Mapping[str, Any],
    *,
    index: int | str = 0,
    format: str | None = None,
    base_dir: Path | None = None,
) -> Task:
    """Read one row; raises :class:`TaskError` naming the row and the offending field.

    ``format`` forces a format instead of detecting it; ``base_dir`` resolves relative
    ``sandbox.r2e_ds_json`` paths of JSONL tasks (default: the current directory).
    """
    if not isinstance(row, Mapping):
        raise TaskError(
            f"row {index}", "", f"a row must be a JSON object, got {type(row).__name__}"
        )
    label = _label(row, index)
    try:
        kind = format or detect_format(row)
    except ValueError as exc:
        raise TaskError(label, "", str(exc)) from None
    try:
        if kind == "r2e":
            return _from_r2e(dict(row))
        if kind == "swebench":
            return _from_swebench(dict(row))
        if kind == "swesmith":
            return _from_swesmith(dict(row))
        if kind == "jsonl":
            return _from_jsonl(dict(row), base_dir or Path.cwd(), label)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(part) for part in first["loc"])
        message = first["msg"].removeprefix("Value error, ")
        raise TaskError(label, loc, message) from None
    except json.JSONDecodeError as exc:
        raise TaskError(label, "", f"not valid JSON: {exc.msg}") from None
    raise TaskError(label, "format", f"unknown format {kind!r}")


def _from_r2e(row: dict[str, Any]) -> Task:
    parsed = _R2ERow.model_validate(row)
    commit = ParsedCommit.model_validate(parsed.parsed_commit_content)
    expected = parsed.expected_output_json
    assert isinstance(expected, dict)
    task_id = row.get("task_id") or row.get("instance_id")
    if not task_id:
        task_id = f"{parsed.repo_name}__{commit.new_commit_hash[:12]}"
    return Task(
        task_id=str(task_id),
        format=TaskFormat.R2E,
        repo=parsed.repo_name,
        image=parsed.docker_image,
        workdir="/testbed",
        problem_statement=parsed.problem_statement,
        base_commit=commit.old_commit_hash or None,
        gold_patch=commit.patch(tests=False, code=True),
        test_patch=commit.patch(tests=True, code=False),
        expected_output={str(k): str(v) for k, v in expected.items()},
        source=row,
    )


def _swebench_image(instance_id: str) -> str:
    """The harness's published image name for an instance (docker hub ``swebench/``)."""
    return f"swebench/sweb.eval.x86_64.{instance_id.replace('__', '_1776_')}:latest".lower()


def _from_swebench(row: dict[str, Any]) -> Task:
    parsed = _SWEBenchRow.model_validate(row)
    image = row.get("docker_image") or row.get("image_name") or _swebench_image(parsed.instance_id)
    script = row.get("eval_script") or row.get("run_tests") or None
    version = None if parsed.version is None else str(parsed.version)
    return Task(
        task_id=parsed.instance_id,
        format=TaskFormat.SWEBENCH,
        repo=parsed.repo,
        image=str(image),
        workdir="/testbed",
        problem_statement=parsed.problem_statement,
        base_commit=parsed.base_commit,
        gold_patch=parsed.patch,
        test_patch=parsed.test_patch,
        fail_to_pass=tuple(parsed.FAIL_TO_PASS),
        pass_to_pass=tuple(parsed.PASS_TO_PASS),
        version=version,
        eval_script=str(script) if script else None,
        log_parser=row.get("log_parser") or None,
        eval_type=row.get("eval_type") or None,
        source=row,
    )


def _swesmith_image(image_name: str) -> str:
    """SWE-smith publishes images as ``jyangballin/<image_name with __ -> _1776_>``."""
    if "/" in image_name:
        return image_name
    return f"jyangballin/{image_name.replace('__', '_1776_')}:latest"


def _from_swesmith(row: dict[str, Any]) -> Task:
    parsed = _SWESmithRow.model_validate(row)
    image = row.get("docker_image") or (
        _swesmith_image(parsed.image_name) if parsed.image_name else None
    )
    return Task(
        task_id=parsed.instance_id,
        format=TaskFormat.SWESMITH,
        repo=parsed.repo,
        image=image,
        workdir="/testbed",
        problem_statement=parsed.problem_statement,
        base_commit=parsed.base_commit,
        gold_patch=parsed.patch,
        gold_patch_reversed=True,
        fail_to_pass=tuple(parsed.FAIL_TO_PASS),
        pass_to_pass=tuple(parsed.PASS_TO_PASS),
        source=row,
    )


def _issue_text(issue: str | dict[str, Any]) -> str:
    if isinstance(issue, str):
        return issue
    title = str(issue.get("title") or "").strip()
    body = str(issue.get("body") or "").strip()
    return f"{title}\n\n{body}".strip() if title else body


def _from_jsonl(row: dict[str, Any], base_dir: Path, label: str) -> Task:
    parsed = _JsonlRow.model_validate(row)
    box = parsed.sandbox
    issue = _issue_text(parsed.issue)
    overrides: dict[str, Any] = {
        "task_id": parsed.task_id,
        "max_steps": parsed.max_steps,
        "env": dict(box.env),
        "mounts": dict(box.mounts),
        "source": row,
    }
    if box.docker_image:
        overrides["image"] = box.docker_image
    if box.workdir:
        overrides["workdir"] = box.workdir
    if issue:
        overrides["problem_statement"] = issue
    if box.r2e_ds_json:
        path = Path(box.r2e_ds_json).expanduser()
        if not path.is_absolute():
            path = base_dir / path
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise TaskError(label, "sandbox.r2e_ds_json", f"cannot read {path}: {exc}") from None
        except json.JSONDecodeError as exc:
            raise TaskError(label, "sandbox.r2e_ds_json", f"{path}: not JSON: {exc.msg}") from None
        if not isinstance(entry, dict):
            raise TaskError(label, "sandbox.r2e_ds_json", f"{path}: must hold one JSON object")
        try:
            inner = parse_row(entry, index=str(path))
        except TaskError as exc:
            raise TaskError(label, f"sandbox.r2e_ds_json ({exc.field})", exc.reason) from None
        return inner.model_copy(update=overrides)
    if not box.docker_image:
        raise TaskError(label, "sandbox.docker_image", "required when r2e_ds_json is not given")
    return Task(
        format=TaskFormat.PLAIN,
        repo=parsed.task_id,
        test_command=parsed.test_command,
        **overrides,
    )


@dataclass
class RowsResult:
    """The tasks read from many rows, and the rows that failed (each with its reason)."""

    tasks: list[Task] = field(default_factory=list)
    errors: list[TaskError] = field(default_factory=list)

    def raise_if_empty(self) -> None:
        """Raise the first error when no row at all could be read."""
        if not self.tasks and self.errors:
            raise self.errors[0]


def read_rows(
    rows: Iterable[Mapping[str, Any]],
    *,
    format: str | None = None,
    base_dir: Path | None = None,
) -> RowsResult:
    """Read every row; bad rows are collected in ``errors`` and never stop the others.

    Duplicate task ids are errors too (the later row loses), since reports and
    trajectories are keyed by task id.
    """
    result = RowsResult()
    seen: set[str] = set()
    for index, row in enumerate(rows):
        try:
            task = parse_row(row, index=index, format=format, base_dir=base_dir)
        except TaskError as exc:
            result.errors.append(exc)
            continue
        if task.task_id in seen:
            result.errors.append(
                TaskError(f"row {index}", "task_id", f"duplicate task id {task.task_id!r}")
            )
            continue
        seen.add(task.task_id)
        result.tasks.append(task)
    return result
