"""The task model: one SWE task, whatever row format it came from.

Rows from R2E-Gym, SWE-bench and SWE-smith (and the JSONL task format) name the same
things differently; each task format (:mod:`sandbox_runtime.swe.formats`) reads its rows
into this one :class:`Task`, and everything downstream (sandbox setup, agents, reports)
reads only the task.  What only grading needs is the format's own typed
:class:`GradingBlock`, read back by the same format when it grades.  The original row is kept
in :attr:`Task.source`, so exports such as the rLLM parquet pair hand consumers exactly what
they would have read themselves.
"""

from __future__ import annotations

import enum
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, field_validator

__all__ = ["GradingBlock", "Task", "TaskError", "TaskFormat"]


class TaskFormat(str, enum.Enum):
    """The names of the built-in task formats (third-party formats bring their own names)."""

    R2E = "r2e"
    """R2E-Gym: the parsed test results must equal ``expected_output_json``."""
    SWEBENCH = "swebench"
    """SWE-bench: every FAIL_TO_PASS and PASS_TO_PASS test must pass."""
    SWESMITH = "swesmith"
    """SWE-smith: as SWE-bench; the row's ``patch`` introduces the bug, so the fix reverts it."""
    JSONL = "jsonl"
    """A JSONL task without grading data: the repository's own test command must pass."""


class GradingBlock(BaseModel):
    """What a task's format needs in order to grade it; each format subclasses this.

    ``kind`` names the block's shape, so a serialised task says what it carries.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str


G = TypeVar("G", bound=GradingBlock)


class TaskError(ValueError):
    """A row that cannot be read as a task; the message names the row and the field."""

    def __init__(self, row: str, field: str, message: str) -> None:
        self.row = row
        self.field = field
        self.reason = message
        where = f"{row}, field {field!r}" if field else row
        super().__init__(f"{where}: {message}")


class Task(BaseModel):
    """One task: where its repository is, what the agent is told, and how it is graded."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task_id: str
    """Unique name of the task (``instance_id`` for SWE-bench and SWE-smith rows)."""
    format: str
    """The task format that prepares and grades it (``r2e``, ``swebench``, or a third party's)."""
    row_format: str = ""
    """The format that read the row (``jsonl`` for a JSONL task wrapping an R2E-Gym entry)."""
    repo: str
    """Repository name as the row gives it (``owner/name`` or R2E's short ``repo_name``)."""
    image: str | None = None
    """Container image; bundled samples use ``sandbox-runtime-samples/<name>:latest``."""
    workdir: str = "/testbed"
    """Where the repository is inside the sandbox."""
    problem_statement: str = ""
    """The issue text the agent is given."""
    base_commit: str | None = None
    """The commit the task starts from, where the row names one."""
    gold_patch: str = ""
    """The reference fix as a unified diff (for SWE-smith: the bug patch, applied reversed)."""
    gold_patch_reversed: bool = False
    """True when the fix is ``gold_patch`` applied in reverse (SWE-smith)."""
    grading: SerializeAsAny[GradingBlock] = Field(default_factory=lambda: GradingBlock(kind="none"))
    """The format's own grading data (test lists, expected results, scripts)."""
    max_steps: int | None = None
    """Step limit the row asks for (the CLI's ``--max-steps`` wins)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables of every command in the task's sandbox."""
    mounts: dict[str, str] = Field(default_factory=dict)
    """Bind mounts ``{host_path: sandbox_path}`` (backends with the ``host_mounts`` capability)."""
    source: dict[str, Any] = Field(default_factory=dict, repr=False)
    """The row as it was read, for exports that must hand consumers the original."""
    origin: str = ""
    """Where the row was read (``FILE:LINE`` of a JSONL file, ``SOURCE#INDEX``), if known:
    a trajectory whose copy of the row was cut names it, so the whole row can be read again."""

    @field_validator("format", "row_format", mode="before")
    @classmethod
    def _plain_name(cls, value: Any) -> Any:
        # TaskFormat.R2E and "r2e" are the same format; keep the plain string.
        return value.value if isinstance(value, enum.Enum) else value

    def grading_as(self, block: type[G]) -> G:
        """:attr:`grading` as the format's own block type (``TypeError`` if it is another)."""
        if not isinstance(self.grading, block):
            raise TypeError(
                f"task {self.task_id} carries {type(self.grading).__name__}, not {block.__name__}"
            )
        return self.grading
