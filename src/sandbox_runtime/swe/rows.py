"""Read rows into :class:`~sandbox_runtime.swe.task.Task`, whatever task format they are in.

The formats themselves (R2E-Gym, SWE-bench, SWE-smith, JSONL tasks, and any a distribution
adds) live in :mod:`sandbox_runtime.swe.formats`; this module finds each row's format and
reports problems per row.  :func:`read_rows` never lets one bad row lose the others: each
failure becomes a :class:`~sandbox_runtime.swe.task.TaskError` naming the row and the field.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sandbox_runtime.errors import SandboxError
from sandbox_runtime.swe import formats
from sandbox_runtime.swe.formats import ParseContext
from sandbox_runtime.swe.parquet import ROW_MARKER, decode_row
from sandbox_runtime.swe.task import Task, TaskError

__all__ = ["RowsResult", "detect_format", "parse_row", "read_rows"]


def detect_format(row: Mapping[str, Any]) -> str:
    """The name of the row's format (``r2e``, ``swebench``, ``swesmith``, ``jsonl``, ...)."""
    return formats.detect(row).name


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

    ``format`` forces a format instead of detecting it; ``base_dir`` resolves relative paths
    a row names (a JSONL task's ``sandbox.r2e_ds_json``; default: the current directory).
    """
    if not isinstance(row, Mapping):
        raise TaskError(
            f"row {index}", "", f"a row must be a JSON object, got {type(row).__name__}"
        )
    if ROW_MARKER in row:  # stored by write_rllm_parquet: the row it was, and its format
        try:
            row, stored_format = decode_row(row)
        except ValueError as exc:
            raise TaskError(f"row {index}", ROW_MARKER, str(exc)) from None
        format = format or stored_format
    label = _label(row, index)
    try:
        fmt = formats.load_format(format) if format else formats.detect(row)
    except (ValueError, SandboxError) as exc:
        raise TaskError(label, "format" if format else "", str(exc)) from None
    try:
        context = ParseContext(label, base_dir or Path.cwd(), parse_row=_parse_embedded)
        return fmt.parse(dict(row), context)
    except TaskError as exc:
        raise TaskError(label, exc.field, exc.reason) from None
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(part) for part in first["loc"])
        message = first["msg"].removeprefix("Value error, ")
        raise TaskError(label, loc, message) from None
    except json.JSONDecodeError as exc:
        raise TaskError(label, "", f"not valid JSON: {exc.msg}") from None


def _parse_embedded(row: Mapping[str, Any], label: str) -> Task:
    """A row that another embeds (a JSONL task's R2E-Gym entry), read as any row is."""
    return parse_row(row, index=label)


@dataclass
class RowsResult:
    """The tasks read from many rows, and the rows that failed (each with its reason)."""

    tasks: list[Task] = field(default_factory=list)
    errors: list[TaskError] = field(default_factory=list)


def read_rows(
    rows: Iterable[Mapping[str, Any]],
    *,
    format: str | None = None,
    base_dir: Path | None = None,
    labels: Sequence[str] | None = None,
) -> RowsResult:
    """Read every row; bad rows are collected in ``errors`` and never stop the others.

    ``labels`` name the rows in messages (``tasks.jsonl:7``; default: their index) and
    become each task's :attr:`~sandbox_runtime.swe.task.Task.origin`.
    Duplicate task ids are errors too (the later row loses), since reports and
    trajectories are keyed by task id.
    """
    result = RowsResult()
    seen: set[str] = set()
    for index, row in enumerate(rows):
        where = labels[index] if labels is not None else index
        try:
            task = parse_row(row, index=where, format=format, base_dir=base_dir)
        except TaskError as exc:
            result.errors.append(exc)
            continue
        if task.task_id in seen:
            result.errors.append(
                TaskError(f"row {where}", "task_id", f"duplicate task id {task.task_id!r}")
            )
            continue
        seen.add(task.task_id)
        if labels is not None:  # a shallow copy: the row's values are shared, not copied
            task = task.model_copy(update={"origin": str(where)})
        result.tasks.append(task)
    return result
