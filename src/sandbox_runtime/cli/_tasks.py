"""Task sources to tasks, for every command that reads them (``run``, ``tasks``, ``ags sync``).

Reads each source, turns its rows into tasks with their format (detected per row, or the one
``--format`` names, checked before anything is read), and reports every bad line or row as
one line naming where it is, while the good rows go on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sandbox_runtime.swe.dataset import read_source
from sandbox_runtime.swe.formats import load_format
from sandbox_runtime.swe.rows import read_rows
from sandbox_runtime.swe.task import Task

__all__ = ["SOURCES_HELP", "LoadedTasks", "load_tasks"]

#: The forms a task source takes, for help texts.
SOURCES_HELP = (
    "bundled | bundled:r2e | bundled:swebench | FILE.json/.jsonl/.parquet | hf:NAME[:SPLIT]"
)


@dataclass
class LoadedTasks:
    """The tasks of some sources, and one message per line or row that could not be read."""

    tasks: list[Task] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def load_tasks(sources: list[str], fmt: str | None, split: str) -> LoadedTasks:
    """Every task of ``sources``; ``fmt`` forces a format (unknown names fail at once)."""
    if fmt:
        load_format(fmt)
    loaded = LoadedTasks()
    for source in sources:
        found = read_source(source, split=split)
        base = Path(source).expanduser().parent if Path(source).expanduser().exists() else None
        result = read_rows(found.rows, format=fmt, base_dir=base, labels=found.labels)
        loaded.tasks += result.tasks
        loaded.problems += found.errors + [str(error) for error in result.errors]
    return loaded
