"""The task model: one SWE task, whatever row format it came from.

Rows from R2E-Gym, SWE-bench and SWE-smith (and the JSONL task format) name the same
things differently; :mod:`sandbox_runtime.swe.rows` reads each of them into this one
:class:`Task`, and everything downstream (sandbox setup, agents, grading, reports) reads
only the task.  The original row is kept in :attr:`Task.source`, so exports such as the
rLLM parquet pair hand consumers exactly what they would have read themselves.
"""

from __future__ import annotations

import enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Task", "TaskError", "TaskFormat"]


class TaskFormat(str, enum.Enum):
    """Which benchmark's rules grade a task."""

    R2E = "r2e"
    """R2E-Gym: the parsed test results must equal ``expected_output_json``."""
    SWEBENCH = "swebench"
    """SWE-bench: every FAIL_TO_PASS and PASS_TO_PASS test must pass."""
    SWESMITH = "swesmith"
    """SWE-smith: as SWE-bench; the row's ``patch`` introduces the bug, so the fix reverts it."""
    PLAIN = "plain"
    """A JSONL task without grading data: the repository's own test command must pass."""


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
    format: TaskFormat
    """Which benchmark's grading rules apply."""
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
    test_patch: str = ""
    """SWE-bench: the diff that adds the tests the fix must make pass."""
    fail_to_pass: tuple[str, ...] = ()
    """Tests that fail before the fix and must pass after it."""
    pass_to_pass: tuple[str, ...] = ()
    """Tests that pass before the fix and must keep passing."""
    expected_output: dict[str, str] | None = None
    """R2E-Gym: the parsed test results the fixed repository produces."""
    version: str | None = None
    """SWE-bench: the repository version key of the harness's spec tables."""
    eval_script: str | None = None
    """A complete test script from the row (SWE-bench ``eval_script`` or R2E's ``run_tests``)."""
    log_parser: str | None = None
    """SWE-bench: the name of the ``swebench`` log parser the row asks for."""
    eval_type: str | None = None
    """SWE-bench: ``pass_and_fail`` (default) or ``fail_only``."""
    test_command: str | None = None
    """Plain tasks: the command whose pytest-style results grade the task."""
    max_steps: int | None = None
    """Step limit the row asks for (the CLI's ``--max-steps`` wins)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables of every command in the task's sandbox."""
    mounts: dict[str, str] = Field(default_factory=dict)
    """Bind mounts ``{host_path: sandbox_path}`` (docker backend only)."""
    source: dict[str, Any] = Field(default_factory=dict, repr=False)
    """The row as it was read, for exports that must hand consumers the original."""

    def short(self) -> str:
        """A one-line description for logs and tables."""
        return f"{self.task_id} [{self.format.value}] {self.repo}"
