"""What a task format is: detect, parse, prepare, grade and write one kind of row.

A format is a class with class methods (no state): the registry in
:mod:`sandbox_runtime.swe.formats` finds it by name, and everything else asks it, so adding
SWE-bench Pro or Multi-SWE-bench is one module and one entry point.  A format raises
pydantic's ``ValidationError`` or :class:`~sandbox_runtime.swe.task.TaskError` for a bad row;
the caller adds which row it was.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from sandbox_runtime._core.runtime import SandboxRuntime
    from sandbox_runtime.swe._format_kit import GradeResult
    from sandbox_runtime.swe.task import Task

__all__ = ["ParseContext", "RowFormat", "json_list"]


@dataclass(frozen=True, slots=True)
class ParseContext:
    """Where a row came from: its label for messages, and the directory of its file.

    ``parse_row`` reads a row that this one embeds (a JSONL task's R2E-Gym entry) the way
    every row is read, its format detected, given the row and its label.  The reader hands it
    in (:func:`sandbox_runtime.swe.rows.parse_row`), so that the formats, which that module
    asks, import nothing of it.
    """

    label: str
    base_dir: Path
    parse_row: Callable[[Mapping[str, Any], str], Task] | None = None


class RowFormat(abc.ABC):
    """One task format.  Subclass it, name it, and register it as an entry point::

    [project.entry-points."sandbox_runtime.task_formats"]
    my-format = "my_package.formats:MyFormat"
    """

    #: The name tasks carry in ``Task.format`` and users give to ``--format``.
    name: ClassVar[str] = ""
    #: One line for ``sandbox-runtime formats``.
    description: ClassVar[str] = ""
    #: Detection order: higher is asked first.  Built-ins use 10-40; a third-party format
    #: whose rows carry distinctive keys should use more, so it is asked before them.
    priority: ClassVar[int] = 100
    #: Where the benchmark's own harness grades: ``fresh`` (a new sandbox from the image with
    #: only the agent's diff applied, as the SWE-bench harness does) or ``same`` (the sandbox
    #: the agent used, as R2E-Gym does).  ``run --grade-in`` overrides it.
    grade_in: ClassVar[str] = "fresh"

    @classmethod
    @abc.abstractmethod
    def detect(cls, row: Mapping[str, Any]) -> bool:
        """True when ``row`` looks like this format's (cheap: keys, not validation)."""

    @classmethod
    @abc.abstractmethod
    def parse(cls, row: dict[str, Any], context: ParseContext) -> Task:
        """The task a row describes; ``Task.grading`` carries what :meth:`grade` needs."""

    @classmethod
    def prepare(cls, task: Task, sandbox: SandboxRuntime) -> None:
        """Ready a freshly started sandbox the way the benchmark's own environment does.

        Raises :class:`~sandbox_runtime.swe.prepare.SetupError`.  The default does nothing
        (an image that is ready as it is, as SWE-bench's are).
        """
        return

    @classmethod
    def prepared_paths(cls, task: Task) -> tuple[str, ...]:
        """Sandbox paths outside the workdir that :meth:`prepare` leaves and grading needs.

        A saved prepared state (a fork, a shared setup) must carry them: a backend whose
        checkpoints are archives keeps only the workdir and ``SandboxConfig.checkpoint_paths``
        (kubernetes, e2b), and a copy without them has no tests to run.  The default is
        :meth:`test_paths`' absolute entries.
        """
        return tuple(path for path in cls.test_paths(task) if path.startswith("/"))

    @classmethod
    @abc.abstractmethod
    def grade(cls, task: Task, sandbox: SandboxRuntime, timeout: float) -> GradeResult:
        """Run the task's tests after the agent and apply the benchmark's rule.

        Return ``GradeResult(None, reason)`` when the tests gave no verdict (an error, never
        a 0); sandbox errors may simply propagate, the caller turns them into errors.
        """

    @classmethod
    def test_paths(cls, task: Task) -> tuple[str, ...]:
        """The test files and directories :meth:`grade` runs or reads.

        Relative paths are inside the repository, absolute ones are sandbox paths outside it
        (R2E-Gym's held-out tests).  Tamper flags name an agent's change to any of them; the
        default (none known) still flags ``conftest.py``, pytest settings and installed
        packages.
        """
        return ()

    @classmethod
    def write(cls, task: Task) -> dict[str, Any]:
        """The row to export for ``task``: by default the row as it was read."""
        return dict(task.source)


def json_list(value: Any) -> Any:
    """A list of test ids from JSON text (SWE-bench's storage) or a list (newer dumps)."""
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
