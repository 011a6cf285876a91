"""Get a fresh sandbox ready for a task, the way each benchmark's own environment does.

What "ready" means is the task format's business (:meth:`RowFormat.prepare
<sandbox_runtime.swe.formats.base.RowFormat.prepare>`: R2E-Gym hides its held-out tests,
SWE-smith checks out the bug, SWE-bench images are ready as they are); this module checks
what every task needs and asks the format.

Everything goes through :class:`~sandbox_runtime.SandboxRuntime`, with paths relative to
the workdir: on the ``local`` backend an absolute path in a command means a host path, while
``../root`` from ``/testbed`` means the sandbox's ``/root`` everywhere (:func:`rel`).
:class:`SetupError` and :func:`rel`, which the formats use too, are defined in ``_format_kit``,
below the formats, and named here, where callers and third-party formats import them from.
"""

from __future__ import annotations

from sandbox_runtime._core.runtime import SandboxRuntime
from sandbox_runtime.swe._format_kit import SetupError, rel
from sandbox_runtime.swe.formats import load_format
from sandbox_runtime.swe.task import Task

__all__ = ["SetupError", "prepare", "rel"]


def prepare(task: Task, sandbox: SandboxRuntime) -> None:
    """Run the task's environment setup in a started sandbox; raises :class:`SetupError`."""
    if not sandbox.exists(sandbox.workdir):
        raise SetupError(f"the task's workdir {sandbox.workdir} does not exist in the sandbox")
    load_format(task.format).prepare(task, sandbox)
