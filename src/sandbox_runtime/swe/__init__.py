"""SWE tasks on sandboxes: read task rows, let an agent act, grade by the task's tests.

The layer sits above the sandbox API and below the CLI (``cli -> swe -> SandboxRuntime``):
grading and agents touch sandboxes only through :class:`~sandbox_runtime.SandboxRuntime`.
Optional dependencies (``openai``, ``pyarrow``, ``datasets``, ``swebench``) are imported only
by the functions that need them, so importing this package needs the core alone.
"""

from sandbox_runtime.swe.grading import GradeResult, grade
from sandbox_runtime.swe.rows import RowsResult, detect_format, parse_row, read_rows
from sandbox_runtime.swe.task import Task, TaskError, TaskFormat

__all__ = [
    "GradeResult",
    "RowsResult",
    "Task",
    "TaskError",
    "TaskFormat",
    "detect_format",
    "grade",
    "parse_row",
    "read_rows",
]
