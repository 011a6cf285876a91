"""Rows as a local rLLM benchmark directory: ``dataset.toml`` and ``data/<split>.jsonl``.

``rllm eval DIR`` and ``rllm train DIR`` load such a directory as a "simple" dataset: each
JSONL line becomes one ``Task`` whose ``metadata`` is the line, which is where
:class:`~sandbox_runtime.integrations.rllm_flow.flow.SWEFlow` reads the task from.  Each line
is the task's row as read (R2E-Gym, SWE-bench, SWE-smith, JSONL), plus ``id`` and
``instruction`` for rLLM's display, plus the run's settings under ``sandbox_runtime``
(the backend and its options), so the data says where it runs, in every process that loads it.

``python -m sandbox_runtime.integrations.rllm_flow.benchmark OUT --rows bundled --backend
docker`` writes one (``--rows`` takes any source ``sandbox-runtime tasks`` reads).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sandbox_runtime.errors import ConfigError, SandboxError
from sandbox_runtime.integrations.rllm_flow.flow import FLOW_NAME
from sandbox_runtime.integrations.rllm_flow.settings import ROW_KEY, FlowSettings
from sandbox_runtime.swe import read_rows
from sandbox_runtime.swe.dataset import load_rows
from sandbox_runtime.swe.parquet import issue_text
from sandbox_runtime.swe.task import Task

__all__ = ["benchmark_row", "write_benchmark"]


def benchmark_row(task: Task, settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The JSONL line of one task: its row, its id and issue, the run's settings."""
    row = dict(task.source)
    row["id"] = task.task_id
    row["instruction"] = issue_text(task).strip()
    if settings:
        row[ROW_KEY] = FlowSettings.model_validate(dict(settings)).model_dump(exclude_unset=True)
    return row


def write_benchmark(
    directory: str | Path,
    tasks: Sequence[Task],
    *,
    settings: Mapping[str, Any] | None = None,
    name: str = "sandbox-runtime-swe",
    split: str = "test",
) -> Path:
    """Write ``tasks`` as a local rLLM benchmark in ``directory``; returns the JSONL file."""
    root = Path(directory)
    (root / "data").mkdir(parents=True, exist_ok=True)
    (root / "dataset.toml").write_text(
        "[dataset]\n"
        f"name = {json.dumps(name)}\n"
        'type = "simple"\n'
        f"split = {json.dumps(split)}\n"
        f"default_agent = {json.dumps(FLOW_NAME)}\n"
        f'description = "SWE tasks graded by their own tests ({len(tasks)} rows)"\n',
        encoding="utf-8",
    )
    data = root / "data" / f"{split}.jsonl"
    with data.open("w", encoding="utf-8") as out:
        for task in tasks:
            out.write(json.dumps(benchmark_row(task, settings)) + "\n")
    return data


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m sandbox_runtime.integrations.rllm_flow.benchmark OUT --rows SOURCE``."""
    parser = argparse.ArgumentParser(prog="python -m " + __spec__.name if __spec__ else None)
    parser.add_argument("directory", help="where to write dataset.toml and data/")
    parser.add_argument("--rows", default="bundled", help="a row source (default: bundled)")
    parser.add_argument("--split", default="test")
    parser.add_argument("--backend", help="the backend every row names")
    parser.add_argument("--backend-options", default=None, help="JSON object of its options")
    parser.add_argument("--ids", default=None, help="comma-separated task ids to keep")
    args = parser.parse_args(argv)
    read = read_rows(load_rows(args.rows))
    if read.errors:
        raise ConfigError(f"{args.rows}: {read.errors[0]}")
    tasks = read.tasks
    if args.ids:
        wanted = args.ids.split(",")
        tasks = [task for task in tasks if task.task_id in wanted]
    settings: dict[str, Any] = {}
    if args.backend:
        settings["backend"] = args.backend
    if args.backend_options:
        settings["backend_options"] = json.loads(args.backend_options)
    path = write_benchmark(args.directory, tasks, settings=settings or None, split=args.split)
    print(f"{len(tasks)} tasks -> {path}")
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except (SandboxError, OSError) as exc:  # bad rows or paths: one line, not a traceback
        raise SystemExit(f"{__spec__.name if __spec__ else 'benchmark'}: {exc}") from None
